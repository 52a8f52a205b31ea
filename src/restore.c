/*
 * restore.c
 *		Whether the workers may act on their database: only while its queue
 *		state is whole (ADR 0022).  A restore without -1 commits CREATE
 *		EXTENSION and then loads the tables one by one while the workers
 *		already run; pgque._state_held() (sql/86_restore.sql) says why they
 *		must wait, or NULL.
 *
 * Each loop asks at the top of its pass and skips the pass while held.  The
 * answer "whole" is kept for the extension's OID: a state once whole stays
 * whole, and a DROP and CREATE EXTENSION (pg_restore --clean) makes a new
 * OID, so it is asked again.  Until then every pass asks (index probes).
 */
#include "postgres.h"

#include "commands/extension.h"
#include "executor/spi.h"
#include "utils/builtins.h"

#include "worker.h"

/* the extension whose state was found whole */
static Oid	whole_extension = InvalidOid;

typedef struct HeldCheck
{
	MemoryContext cxt;			/* where the reason is copied */
	char	   *why;			/* NULL: whole */
} HeldCheck;

static void
check_held(void *arg)
{
	HeldCheck  *check = arg;
	Oid			ext = get_extension_oid("pgque_bgw", false);
	bool		null;
	Datum		d;

	if (ext == whole_extension)
		return;
	if (SPI_execute("select pgque._state_held()", true, 1) != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "checking the queue state failed");
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &null);
	if (null)
		whole_extension = ext;
	else
		check->why = MemoryContextStrdup(check->cxt, TextDatumGetCString(d));
}

/*
 * True when this pass must do nothing; then the worker's status says why.
 * A failed check holds too: acting on a state that could not be checked is
 * what this guards against.
 */
bool
pgque_state_held(MemoryContext cxt)
{
	HeldCheck	check = {cxt, NULL};

	/* an older SQL, not updated yet, has no check (ADR 0019) */
	if (!PGQUE_SQL_HAS(PGQUE_SQL_0_2_0))
		return false;
	if (!pgque_run_unit("checking that the queue state is whole", check_held, &check))
		check.why = "the check failed (see the server log)";
	if (check.why == NULL)
		return false;
	pgque_worker_report("holding: %s", check.why);
	return true;
}
