/*
 * guc.c
 *		The pgque_bgw.* settings, grouped in one place.
 *
 * Sizes of shared memory and the worker budget need a restart
 * (PGC_POSTMASTER); cadences take effect on reload (PGC_SIGHUP).  Per-queue
 * knobs live in the queue row (pgque.set_queue_config), not here.
 * docs/gucs.md describes each one; keep the two in step.
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/varlena.h"

#include <limits.h>

#include "compat.h"
#include "guc.h"

bool		pgque_enabled = true;
static char *pgque_databases = NULL;
int			pgque_launcher_naptime = 10;
int			pgque_tick_interval = 10;
int			pgque_maint_interval = 10;
int			pgque_watchdog_interval = 10;
int			pgque_max_workers = 100;
int			pgque_max_slots = 4096;
int			pgque_max_slots_per_database = 1024;
int			pgque_max_slots_per_consumer = 1024;
int			pgque_max_slots_per_role = 512;
int			pgque_max_coop_members_per_database = 1024;
int			pgque_max_coop_members_per_role = 512;
int			pgque_slot_unpolled_after = 60;
int			pgque_slot_stale_after = 30;
int			pgque_lag_alert_after = 300;
int			pgque_ticker_stalled_after = 20;
int			pgque_ticker_probe_interval = 10;
static int	pgque_long_transaction_after = 300;
static int	pgque_key_blocked_after = 300;
static int	pgque_worker_memory_limit = 64 * 1024;	/* kB */
static int	pgque_retention_size_limit = 0; /* kB */
static int	pgque_unlogged_reset_alert_for = 3600;
int			pgque_alert_retention = 7 * 24 * 3600;
static int	pgque_resize_stalled_after = 600;
int			pgque_restart_max = 5000;
int			pgque_worker_down_after = 15;
int			pgque_max_databases = 1024;
int			pgque_worker_mode = PGQUE_MODE_AUTO;
int			pgque_error_codes = PGQUE_ERRCODES_NATIVE;

static const struct config_enum_entry worker_mode_options[] = {
	{"auto", PGQUE_MODE_AUTO, false},
	{"split", PGQUE_MODE_SPLIT, false},
	{"combined", PGQUE_MODE_COMBINED, false},
	{NULL, 0, false}
};

static const struct config_enum_entry error_codes_options[] = {
	{"native", PGQUE_ERRCODES_NATIVE, false},
	{"pgque", PGQUE_ERRCODES_PGQUE, false},
	{NULL, 0, false}
};

static bool
check_databases(char **newval, void **extra, GucSource source)
{
	char	   *copy;
	List	   *names;
	bool		ok;

	if (*newval == NULL || (*newval)[0] == '\0')
		return true;
	copy = pstrdup(*newval);
	ok = SplitIdentifierString(copy, ',', &names);
	list_free(names);
	pfree(copy);
	if (!ok)
		GUC_check_errdetail("List syntax is invalid: a comma-separated list of database names is expected.");
	return ok;
}

void
pgque_define_gucs(void)
{
	DefineCustomBoolVariable("pgque_bgw.enabled",
							 "Runs the pgque_bgw background workers (launcher, ticker, maintenance, watchdog).",
							 "Off: the launcher stops every worker; call pgque.ticker() and pgque.maint() "
							 "yourself or use pgque.start() to schedule them with pg_cron.",
							 &pgque_enabled, true, PGC_SIGHUP, 0, NULL, NULL, NULL);

	DefineCustomStringVariable("pgque_bgw.databases",
							   "Databases whose queues the workers serve (comma-separated; empty: every database with the extension).",
							   NULL,
							   &pgque_databases, "", PGC_SIGHUP, GUC_LIST_INPUT,
							   check_databases, NULL, NULL);

	DefineCustomIntVariable("pgque_bgw.launcher_naptime",
							"How often the launcher looks for databases and dead workers.",
							"CREATE EXTENSION wakes it at once; this bounds how long a new database "
							"created from a template waits.",
							&pgque_launcher_naptime, 10, 1, 3600, PGC_SIGHUP, GUC_UNIT_S,
							NULL, NULL, NULL);

	DefineCustomIntVariable("pgque_bgw.tick_interval",
							"The ticker's rate limit: at most one pass per interval on average while commits "
							"keep it busy, and as many again for commits that find it idle.",
							"A commit that finds the ticker idle (no pass for a fifth of this) is ticked at once; "
							"others within this interval (ADR 0087). Smaller: lower latency, more tick rows.",
							&pgque_tick_interval, 10, 1, 60000, PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("pgque_bgw.maint_interval",
							"How often the maintenance worker rotates, re-injects retries and cleans up.",
							NULL,
							&pgque_maint_interval, 10, 1, 3600, PGC_SIGHUP, GUC_UNIT_S,
							NULL, NULL, NULL);

	DefineCustomIntVariable("pgque_bgw.watchdog_interval",
							"How often the watchdog evaluates the queues.",
							NULL,
							&pgque_watchdog_interval, 10, 1, 3600, PGC_SIGHUP, GUC_UNIT_S,
							NULL, NULL, NULL);

	DefineCustomIntVariable("pgque_bgw.slot_unpolled_after",
							"Alert slot_unpolled when a partition slot has pending events and nobody polled it for this long.",
							NULL, &pgque_slot_unpolled_after, 60, 1, 86400 * 7, PGC_SIGHUP, GUC_UNIT_S,
							NULL, NULL, NULL);
	DefineCustomIntVariable("pgque_bgw.slot_stale_after",
							"Alert slot_stale when a slot lease expired this long ago and nobody took it over.",
							NULL, &pgque_slot_stale_after, 30, 1, 86400 * 7, PGC_SIGHUP, GUC_UNIT_S,
							NULL, NULL, NULL);
	DefineCustomIntVariable("pgque_bgw.lag_alert_after",
							"Alert consumer_lagging when a consumer's (or slot's) oldest unconsumed event is older than this.",
							NULL, &pgque_lag_alert_after, 300, 1, 86400 * 30, PGC_SIGHUP, GUC_UNIT_S,
							NULL, NULL, NULL);
	DefineCustomIntVariable("pgque_bgw.ticker_probe_interval",
							"How often the ticker checks every queue's event sequence for events appended without pgque's commit hook.",
							"Events sent through pgque are ticked when their transaction commits; this bounds the wait of rows written into the event tables directly (ADR 0031).",
							&pgque_ticker_probe_interval, 10, 1, 3600, PGC_SIGHUP, GUC_UNIT_S,
							NULL, NULL, NULL);
	DefineCustomIntVariable("pgque_bgw.ticker_stalled_after",
							"Alert ticker_stalled before a queue's new events wait this long for a tick.",
							"The watchdog opens it one watchdog_interval early (at least half of this).",
							&pgque_ticker_stalled_after, 20, 1, 86400 * 7, PGC_SIGHUP, GUC_UNIT_S,
							NULL, NULL, NULL);
	/* read by SQL (pgque._alert_cause_conditions), not by C */
	DefineCustomIntVariable("pgque_bgw.long_transaction_after",
							"Alert long_transaction when a transaction this old holds a queue's overdue rotation back.",
							NULL, &pgque_long_transaction_after, 300, 1, 86400 * 7, PGC_SIGHUP, GUC_UNIT_S,
							NULL, NULL, NULL);
	/* read by SQL (pgque._resize_conditions), not by C */
	DefineCustomIntVariable("pgque_bgw.resize_stalled_after",
							"Alert resize_stalled when a resize of a partitioned consumer has not completed after this long.",
							NULL, &pgque_resize_stalled_after, 600, 1, 86400 * 7, PGC_SIGHUP, GUC_UNIT_S,
							NULL, NULL, NULL);
	/* read by SQL (pgque._pause_alert_conditions), not by C */
	DefineCustomIntVariable("pgque_bgw.key_blocked_after",
							"Alert key_blocked when a key of a consumer with failure policy pause stays blocked this long.",
							NULL, &pgque_key_blocked_after, 300, 1, 86400 * 7, PGC_SIGHUP, GUC_UNIT_S,
							NULL, NULL, NULL);
	/* read by SQL (pgque._worker_memory_conditions), not by C */
	DefineCustomIntVariable("pgque_bgw.worker_memory_limit",
							"Alert worker_memory when a pgque_bgw process holds more memory than this after a pass (0: never).",
							"Each worker publishes its memory after every pass (pgque.metrics(), pgque_worker_memory_bytes); "
							"a worker that keeps growing leaks.",
							&pgque_worker_memory_limit, 64 * 1024, 0, INT_MAX, PGC_SIGHUP, GUC_UNIT_KB,
							NULL, NULL, NULL);
	/* read by SQL (pgque._retention_conditions), not by C */
	DefineCustomIntVariable("pgque_bgw.retention_size_limit",
							"Alert retention_size when the event tables of a queue with a retention hold more than this (0: never).",
							"Each queue's bytes are in pgque.metrics() (pgque_queue_bytes) and status().",
							&pgque_retention_size_limit, 0, 0, INT_MAX, PGC_SIGHUP, GUC_UNIT_KB,
							NULL, NULL, NULL);
	/* read by SQL (pgque._unlogged_conditions), not by C */
	DefineCustomIntVariable("pgque_bgw.unlogged_reset_alert_for",
							"How long the unlogged_reset alert stays open after an unlogged queue was reset.",
							"An unlogged queue loses its events in a crash; the reset that follows opens the alert.",
							&pgque_unlogged_reset_alert_for, 3600, 1, 86400 * 30, PGC_SIGHUP, GUC_UNIT_S,
							NULL, NULL, NULL);
	DefineCustomIntVariable("pgque_bgw.alert_retention",
							"How long cleared alerts stay in pgque.alert.",
							NULL, &pgque_alert_retention, 7 * 24 * 3600, 0, INT_MAX, PGC_SIGHUP, GUC_UNIT_S,
							NULL, NULL, NULL);

	DefineCustomIntVariable("pgque_bgw.worker_restart_max",
							"Longest back-off before the launcher restarts a worker that stopped or crashed.",
							"The back-off starts at 0.5 s and doubles after each run shorter than 10 s, up to this.",
							&pgque_restart_max, 5000, 500, 600000, PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomIntVariable("pgque_bgw.worker_down_after",
							"Alert worker_down when a wanted worker has not been running for this long.",
							NULL, &pgque_worker_down_after, 15, 1, 86400, PGC_SIGHUP, GUC_UNIT_S,
							NULL, NULL, NULL);
	DefineCustomEnumVariable("pgque_bgw.worker_mode",
							 "Processes per database: split (a ticker, a maintenance worker and a watchdog), "
							 "combined (one process runs the three), or auto.",
							 "auto: split while the budget allows three per database, combined otherwise.",
							 &pgque_worker_mode, PGQUE_MODE_AUTO, worker_mode_options, PGC_SIGHUP, 0,
							 NULL, NULL, NULL);
	DefineCustomEnumVariable("pgque_bgw.error_codes",
							 "SQLSTATEs of pgque's errors: native (meaningful codes) or pgque (P0001, as PgQue raises them).",
							 "pgque: an error raised by pgque leaves its functions as P0001 (raise_exception), "
							 "its own SQLSTATE named in the DETAIL (ADR 0059). Settable per role, database or session.",
							 &pgque_error_codes, PGQUE_ERRCODES_NATIVE, error_codes_options, PGC_USERSET, 0,
							 NULL, NULL, NULL);

	/* sizes shared memory: only when preloaded (it cannot exist later) */
	if (process_shared_preload_libraries_in_progress)
		DefineCustomIntVariable("pgque_bgw.max_workers",
								"How many per-database workers the launcher may run in all (three or one per database).",
								"Each also takes one of max_worker_processes; the launcher warns when either runs out.",
								&pgque_max_workers, 100, 1, 10000, PGC_POSTMASTER, 0,
								NULL, NULL, NULL);
	if (process_shared_preload_libraries_in_progress)
		DefineCustomIntVariable("pgque_bgw.max_databases",
								"How many databases the launcher's state table holds (served or not).",
								"About 2 kB of shared memory each.",
								&pgque_max_databases, 1024, 1, 100000, PGC_POSTMASTER, 0,
								NULL, NULL, NULL);
	if (process_shared_preload_libraries_in_progress)
		DefineCustomIntVariable("pgque_bgw.max_slots",
								"Capacity of the shared-memory slot lease table (partition slots of all databases).",
								"One entry per (database, queue, consumer, slot) ever claimed; about 300 bytes each.",
								&pgque_max_slots, 4096, 16, 1000000, PGC_POSTMASTER, 0,
								NULL, NULL, NULL);

	/*
	 * SUSET: a session cannot raise its own cap; a superuser may set it
	 * per database or per role (ALTER DATABASE/ROLE ... SET).
	 */
	DefineCustomIntVariable("pgque_bgw.max_slots_per_database",
							"How many slot lease entries one database may hold.",
							"Keeps one database from filling the table that every database shares.",
							&pgque_max_slots_per_database, 1024, 1, 1000000, PGC_SUSET, 0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("pgque_bgw.max_slots_per_consumer",
							"How many slot lease entries one partitioned consumer may hold.",
							NULL, &pgque_max_slots_per_consumer, 1024, 1, 1000000, PGC_SUSET, 0,
							NULL, NULL, NULL);
	/* the per-role caps do not hold superusers and the installing role */
	DefineCustomIntVariable("pgque_bgw.max_slots_per_role",
							"How many slot lease entries the consumers of one role may create, all databases together.",
							"Keeps one role from filling the table for the others; superusers and the installing role are exempt.",
							&pgque_max_slots_per_role, 512, 1, 1000000, PGC_SUSET, 0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("pgque_bgw.max_coop_members_per_database",
							"How many cooperative member entries (heartbeats) one database may hold.",
							"Keeps one database from filling the member table that every database shares.",
							&pgque_max_coop_members_per_database, 1024, 1, 1000000, PGC_SUSET, 0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("pgque_bgw.max_coop_members_per_role",
							"How many cooperative member entries (heartbeats) one role may create, all databases together.",
							"Keeps one role from filling the member table for the others; superusers and the installing role are exempt.",
							&pgque_max_coop_members_per_role, 512, 1, 1000000, PGC_SUSET, 0,
							NULL, NULL, NULL);

	MarkGUCPrefixReserved("pgque_bgw");
}

/* Is this database served, by pgque_bgw.databases? */
bool
pgque_database_allowed(const char *dbname)
{
	char	   *copy;
	List	   *names;
	ListCell   *lc;
	bool		found = false;

	if (pgque_databases == NULL || pgque_databases[0] == '\0')
		return true;
	copy = pstrdup(pgque_databases);
	if (!SplitIdentifierString(copy, ',', &names))
		return false;
	foreach(lc, names)
	{
		if (strcmp((char *) lfirst(lc), dbname) == 0)
		{
			found = true;
			break;
		}
	}
	list_free(names);
	pfree(copy);
	return found;
}

/*
 * Settings that are each valid but wrong together.  A GUC check hook sees
 * one setting while the others may still hold their old values, so the
 * launcher calls this once at its start and once after every reload
 * (launcher.c), and logs one WARNING per rule broken.  docs/gucs.md states
 * the same rules; keep the two in step.
 */
void
pgque_warn_inconsistent_settings(void)
{
	/* the watchdog opens ticker_stalled one watchdog_interval early */
	if ((int64) pgque_watchdog_interval * 2 > pgque_ticker_stalled_after)
		ereport(WARNING,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("pgque_bgw.watchdog_interval (%d s) is more than half of pgque_bgw.ticker_stalled_after (%d s)",
						pgque_watchdog_interval, pgque_ticker_stalled_after),
				 errdetail("The watchdog opens ticker_stalled one watchdog_interval before ticker_stalled_after "
						   "(at least half of it), so a healthy ticker can be reported stalled."),
				 errhint("Set pgque_bgw.watchdog_interval to at most half of pgque_bgw.ticker_stalled_after and reload.")));
	/* an ordinary restart after a crash must not open worker_down */
	if ((int64) pgque_worker_down_after * 1000 <= pgque_restart_max)
		ereport(WARNING,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("pgque_bgw.worker_down_after (%d s) is not above pgque_bgw.worker_restart_max (%d ms)",
						pgque_worker_down_after, pgque_restart_max),
				 errdetail("A worker waits up to worker_restart_max before the launcher restarts it, "
						   "so an ordinary restart can open worker_down."),
				 errhint("Set pgque_bgw.worker_down_after above pgque_bgw.worker_restart_max and reload.")));
	/* a ticker resting longer than the alert threshold alerts when idle */
	if ((int64) pgque_tick_interval >= (int64) pgque_ticker_stalled_after * 1000)
		ereport(WARNING,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("pgque_bgw.tick_interval (%d ms) is not below pgque_bgw.ticker_stalled_after (%d s)",
						pgque_tick_interval, pgque_ticker_stalled_after),
				 errdetail("The ticker may wait tick_interval between two passes, so its events can wait longer "
						   "than the watchdog allows and open ticker_stalled."),
				 errhint("Set pgque_bgw.tick_interval well below pgque_bgw.ticker_stalled_after and reload.")));
	/* rows written into an event table directly wait for the probe */
	if ((int64) pgque_ticker_probe_interval >= pgque_ticker_stalled_after)
		ereport(WARNING,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("pgque_bgw.ticker_probe_interval (%d s) is not below pgque_bgw.ticker_stalled_after (%d s)",
						pgque_ticker_probe_interval, pgque_ticker_stalled_after),
				 errdetail("Events written into an event table without pgque's commit hook wait up to "
						   "ticker_probe_interval for a tick, so they can open ticker_stalled."),
				 errhint("Set pgque_bgw.ticker_probe_interval below pgque_bgw.ticker_stalled_after and reload.")));
}

/*
 * pgque._setting(name): an integer pgque_bgw.* setting in its base unit
 * (seconds for a time, bytes for a size), for the SQL that reads the
 * thresholds (the alerts, queue_health).  Calling it loads this library,
 * which defines the settings, so an unset one reads as its default here:
 * the defaults are written once, above, never again in SQL.
 */
PG_FUNCTION_INFO_V1(pgque_setting_sql);
Datum
pgque_setting_sql(PG_FUNCTION_ARGS)
{
	char	   *name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	const char *value;
	int			flags;
	char	   *end;
	long		v;
	double		scale;

	if (strncmp(name, "pgque_bgw.", strlen("pgque_bgw.")) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("\"%s\" is not a pgque_bgw setting", name),
				 errhint("Pass the name of an integer pgque_bgw.* setting (docs/gucs.md).")));
	value = GetConfigOption(name, true, false);
	if (value == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("unrecognized setting \"%s\"", name),
				 errhint("docs/gucs.md lists the pgque_bgw.* settings.")));
	errno = 0;
	v = strtol(value, &end, 10);
	if (errno != 0 || end == value || *end != '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("setting \"%s\" is not an integer", name),
				 errdetail("Its value is \"%s\".", value)));
	flags = GetConfigOptionFlags(name, false);
	switch (flags & (GUC_UNIT_MEMORY | GUC_UNIT_TIME))
	{
		case GUC_UNIT_MS:
			scale = 0.001;
			break;
		case GUC_UNIT_MIN:
			scale = 60;
			break;
		case GUC_UNIT_KB:
			scale = 1024;
			break;
		default:				/* seconds, bytes, or no unit */
			scale = 1;
			break;
	}
	PG_RETURN_FLOAT8(v * scale);
}
