/*
 * pgque_bgw.c
 *		Module entry point: _PG_init and the facts every other file asks the
 *		module about (was it preloaded?).
 *
 * Background workers, GUCs and shared memory are registered here as they
 * land; the SQL engine works without any of them, which is what the
 * pg_cron/manual fallback relies on.
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"

#include "compat.h"
#include "pgque_bgw.h"

PGQUE_MODULE_MAGIC();

/* true when loaded through shared_preload_libraries */
static bool pgque_preloaded = false;

void		_PG_init(void);

void
_PG_init(void)
{
	/*
	 * pg_upgrade runs the old cluster's libraries in binary-upgrade mode;
	 * registering workers there would only get in its way.
	 */
	if (IsBinaryUpgrade)
		return;

	pgque_preloaded = process_shared_preload_libraries_in_progress;
}

bool
pgque_is_preloaded(void)
{
	return pgque_preloaded;
}

PG_FUNCTION_INFO_V1(pgque_preloaded_sql);

/*
 * pgque._preloaded() -> bool: status() uses it to tell "workers off" from
 * "library not in shared_preload_libraries".
 */
Datum
pgque_preloaded_sql(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(pgque_preloaded);
}
