/*
 * restore.c
 *		Whether the workers may act on their database: only while its queue
 *		state is whole (ADR 0022).  A restore without -1 commits CREATE
 *		EXTENSION and then loads the tables one by one while the workers
 *		already run; pgque._state_held() (sql/86_restore.sql) says why they
 *		must wait, or NULL.
 *
 * The maintenance and watchdog loops ask at the top of their pass, in a
 * transaction of its own, and skip the pass while held.  The ticker asks in
 * the first unit of its pass, before that unit's work and in its
 * transaction (the gate, ADR 0118): a pass that ticks one queue is one
 * transaction, not two, and a held state still stops the whole pass before
 * anything of it (the list read, a visit, the probe) is done.  The answer
 * "whole" is kept for the extension's OID: a state once whole stays whole,
 * and a DROP and CREATE EXTENSION (pg_restore --clean) makes a new OID, so
 * it is asked again.  Until then every pass asks (index probes).
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

/* what a failed check holds for: acting on a state not checked is what this guards against */
#define CHECK_FAILED "the check failed (see the server log)"

/* the check, inside a unit (SPI connected, a snapshot pushed) */
static void
check_held(void *arg)
{
	HeldCheck  *check = arg;
	Oid			ext;
	bool		null;
	Datum		d;

	/* an older SQL, not updated yet, has no check (ADR 0019) */
	if (!PGQUE_SQL_HAS(PGQUE_SQL_0_2_0))
		return;
	ext = get_extension_oid("pgque_bgw", false);
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

/* the gate of the pass under way (NULL: none) */
PgqueStateGate *pgque_state_gate = NULL;

/*
 * The gate's check, run by pgque_run_unit inside the unit that consumes it,
 * before the unit's work.  An error here is the unit's (it aborts); the
 * caller then holds the pass as a failed check does.
 */
void
pgque_state_gate_check(PgqueStateGate *gate)
{
	HeldCheck	check = {gate->cxt, NULL};

	gate->armed = false;
	/* until the check says "whole", a failure of it holds */
	gate->held = true;
	gate->why = CHECK_FAILED;
	check_held(&check);
	gate->held = check.why != NULL;
	gate->why = check.why;
}

/* the worker's status says why its pass did nothing */
static void
report_holding(const char *why)
{
	pgque_worker_report("holding: %s", why ? why : CHECK_FAILED);
}

void
pgque_state_gate_report(PgqueStateGate *gate)
{
	report_holding(gate->why);
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
		check.why = CHECK_FAILED;
	if (check.why == NULL)
		return false;
	report_holding(check.why);
	return true;
}
