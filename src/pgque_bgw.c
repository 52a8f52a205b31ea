/*
 * pgque_bgw.c
 *		Module entry point: _PG_init registers the settings, the shared
 *		memory, the utility and object-access hooks, the commit callback and
 *		the launcher.
 *
 * Everything but the commit callback and the object-access hook needs
 * shared_preload_libraries; the
 * SQL engine works without it (manual or pg_cron ticking), and status()
 * says which mode is in effect.
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "utils/builtins.h"

#include "compat.h"
#include "pgque_bgw.h"
#include "guc.h"
#include "state.h"
#include "wake.h"
#include "worker.h"
#include "slots.h"
#include "coop.h"

PGQUE_MODULE_MAGIC("pgque_bgw");

/* true when loaded through shared_preload_libraries */
static bool pgque_preloaded = false;

#ifdef PGQUE_HAVE_SHMEM_REQUEST_HOOK
static shmem_request_hook_type prev_shmem_request_hook = NULL;
#endif
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

void		_PG_init(void);

#ifdef PGQUE_HAVE_SHMEM_REQUEST_HOOK
static void
pgque_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	pgque_state_request();
	pgque_slots_request();
	pgque_coop_request();
	pgque_tick_waits_request();
}
#endif

static void
pgque_shmem_startup(void)
{
	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	pgque_state_startup();
	pgque_slots_startup();
	pgque_coop_startup();
	pgque_tick_waits_startup();
}

void
_PG_init(void)
{
	/*
	 * pg_upgrade runs the old cluster's libraries in binary-upgrade mode;
	 * registering workers there would only get in its way.
	 */
	if (IsBinaryUpgrade)
		return;

	pgque_define_gucs();
	pgque_register_xact_callback();
	/* who may attach a CDC trigger with expressions: in every backend that loaded us */
	pgque_install_object_access_hook();
	/* pgque_bgw.error_codes: in every backend that loaded us (ADR 0059) */
	pgque_install_errcode_hooks();

	if (!process_shared_preload_libraries_in_progress)
		return;
	pgque_preloaded = true;

#ifdef PGQUE_HAVE_SHMEM_REQUEST_HOOK
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = pgque_shmem_request;
#else
	pgque_state_request();
	pgque_slots_request();
	pgque_coop_request();
	pgque_tick_waits_request();
#endif
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = pgque_shmem_startup;

	pgque_install_utility_hook();
	pgque_register_launcher();
}

/*
 * Entry point of every per-database worker (bgw_main_arg is the kind, or
 * PGQUE_COMBINED for one process running the three loops, ADR 0026): the
 * skeleton in worker.c runs the loops.  Dispatching here, at the top, keeps
 * worker.c from calling up into the loops.
 */
void
pgque_worker_main(Datum arg)
{
	int			kind = DatumGetInt32(arg);
	static const PgqueLoop *const all[PGQUE_NKINDS] = {
		&pgque_ticker_loop, &pgque_maint_loop, &pgque_watchdog_loop
	};

	if (kind < 0 || kind > PGQUE_COMBINED)
		elog(ERROR, "pgque_bgw: unknown worker kind %d", kind);
	pgque_worker_start((PgqueWorkerKind) kind);
	if (kind == PGQUE_COMBINED)
		pgque_worker_run(all, PGQUE_NKINDS);
	else
		pgque_worker_run(&all[kind], 1);
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
