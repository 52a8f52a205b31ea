/*
 * status.c
 *		pgque._worker_status(): what the state table says about this
 *		database's workers, as (component, status, detail) rows for
 *		pgque.status(); pgque.launcher_workers(): every database the
 *		launcher knows; the warning at CREATE EXTENSION when the workers
 *		will not serve the database; pgque._worker_memory(): each
 *		process's memory as it published it after its last pass (ADR 0035).
 *		Reading them writes nothing.
 */
#include "postgres.h"

#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "commands/dbcommands.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "compat.h"
#include "pgque_bgw.h"
#include "guc.h"
#include "state.h"
#include "wake.h"

PG_FUNCTION_INFO_V1(pgque_worker_status);

static void
put_row(Tuplestorestate *ts, TupleDesc desc, const char *component, const char *status, const char *detail)
{
	Datum		values[3];
	bool		nulls[3] = {false, false, false};

	values[0] = CStringGetTextDatum(component);
	values[1] = CStringGetTextDatum(status);
	if (detail != NULL)
		values[2] = CStringGetTextDatum(detail);
	else
		nulls[2] = true;
	tuplestore_putvalues(ts, desc, values, nulls);
}

/*
 * A copy: timestamptz_to_str returns a static buffer, and one format takes
 * two timestamps.
 */
static const char *
ts_text(TimestampTz t)
{
	return pstrdup(timestamptz_to_str(t));
}

/*
 * "<what> <time>", or the sentence to say when it has not happened yet
 * (status() details read as short sentences: never "last tick never").
 */
static const char *
when_text(const char *what, TimestampTz t, const char *none)
{
	return t == 0 ? none : psprintf("%s %s", what, ts_text(t));
}

/*
 * Why the launcher has no entry for this database (status(), the warning
 * at CREATE EXTENSION).
 */
static const char *
pgque_unserved_reason(pid_t launcher_pid, int unlisted)
{
	if (!pgque_database_allowed(get_database_name(MyDatabaseId)))
		return "pgque_bgw.databases does not list this database";
	if (unlisted > 0)
		return psprintf("the launcher's state table is full: %d databases (pgque_bgw.max_databases) are listed "
						"and %d more are not served; raise pgque_bgw.max_databases (restart) or limit pgque_bgw.databases",
						pgque_max_databases, unlisted);
	return psprintf("launcher pid %d has not taken this database on yet (its next scan, every pgque_bgw.launcher_naptime)",
					(int) launcher_pid);
}

Datum
pgque_worker_status(PG_FUNCTION_ARGS)
{
	TupleDesc	desc;
	Tuplestorestate *ts;
	MemoryContext old;
	PgqueDb		copy;
	bool		have_db = false;
	pid_t		launcher_pid = 0;
	int			unlisted;
	int			k;

	old = pgque_materialize(fcinfo, &ts, &desc);

	if (pgque_shared == NULL)
	{
		put_row(ts, desc, "workers", "not preloaded",
				"add pgque_bgw to shared_preload_libraries and restart for the background workers");
		MemoryContextSwitchTo(old);
		return (Datum) 0;
	}

	LWLockAcquire(pgque_shared->lock, LW_SHARED);
	launcher_pid = pgque_shared->launcher_pid;
	unlisted = pgque_shared->dbs_unlisted;
	{
		PgqueDb    *db = pgque_find_db(MyDatabaseId);

		if (db != NULL)
		{
			memcpy(&copy, db, sizeof(PgqueDb));
			have_db = true;
		}
	}
	LWLockRelease(pgque_shared->lock);

	if (!pgque_enabled)
		put_row(ts, desc, "workers", "off", "pgque_bgw.enabled = off: call pgque.ticker() and pgque.maint(), or pgque.start()");
	else if (launcher_pid == 0)
		put_row(ts, desc, "workers", "no launcher",
				"the launcher is not running (standby, starting up, or restarting after a crash)");
	else if (!have_db)
		put_row(ts, desc, "workers", "not served", pgque_unserved_reason(launcher_pid, unlisted));
	else
	{
		put_row(ts, desc, "workers", pgque_db_state_name(copy.state),
				psprintf("launcher pid %d; %s; %s; %s%s%s",
						 (int) launcher_pid,
						 copy.combined ? "one process runs the three loops (combined)" : "a process per loop (split)",
						 when_text("last tick", copy.last_tick, "no tick yet"),
						 when_text("last maintenance", copy.last_maint, "no maintenance pass yet"),
						 copy.unserved[0] != '\0' ? "; not fully served: " : "", copy.unserved));
		for (k = 0; k < PGQUE_NKINDS; k++)
		{
			PgqueWorkerEntry *w = &copy.workers[k];
			pid_t		pid = copy.combined ? copy.workers[PGQUE_TICKER].pid : w->pid;
			StringInfoData buf;

			initStringInfo(&buf);
			if (pid > 0)
				appendStringInfo(&buf, "pid %d, started %s, %s",
								 (int) pid, ts_text(w->started_at),
								 when_text("last pass", w->last_run, "no pass yet"));
			else
			{
				PgqueWorkerEntry *r = copy.combined ? &copy.workers[PGQUE_TICKER] : w;

				if (r->restart_at == 0 || r->restart_at <= GetCurrentTimestamp())
					appendStringInfo(&buf, "not running; the launcher starts it at its next pass (%d short runs in a row)",
									 r->failures);
				else
					appendStringInfo(&buf, "not running; the launcher restarts it at %s (%d short runs in a row)",
									 ts_text(r->restart_at), r->failures);
			}
			if (pid > 0 && w->memory_at != 0)
				appendStringInfo(&buf, "; memory %llu kB", (unsigned long long) (w->memory / 1024));
			if (w->down_since != 0)
				appendStringInfo(&buf, "; down since %s", ts_text(w->down_since));
			if (w->detail[0] != '\0')
				appendStringInfo(&buf, "; %s", w->detail);
			if (w->last_error_at != 0)
				appendStringInfo(&buf, "; last error at %s: %s", ts_text(w->last_error_at), w->last_error);
			put_row(ts, desc, pgque_kind_name(k), pid > 0 ? "running" : "stopped", buf.data);
		}
	}
	MemoryContextSwitchTo(old);
	return (Datum) 0;
}

PG_FUNCTION_INFO_V1(pgque_launcher_workers);

/*
 * pgque.launcher_workers(): every database the launcher knows (served or
 * not), one row per worker loop: the database's state and mode, the
 * process, since when it is down, its restart back-off, the outages past
 * worker_down_after so far, and why it is not started.  A last row counts
 * the databases the state table had no room for.  Reads shared memory only.
 */
Datum
pgque_launcher_workers(PG_FUNCTION_ARGS)
{
	TupleDesc	desc;
	Tuplestorestate *ts;
	MemoryContext old;
	PgqueDb    *copy;
	int			n = 0;
	int			unlisted;
	int			i,
				k;

	old = pgque_materialize(fcinfo, &ts, &desc);
	if (pgque_shared == NULL)
	{
		MemoryContextSwitchTo(old);
		return (Datum) 0;
	}
	copy = palloc(sizeof(PgqueDb) * pgque_shared->max_dbs);
	LWLockAcquire(pgque_shared->lock, LW_SHARED);
	for (i = 0; i < pgque_shared->max_dbs; i++)
		if (pgque_shared->dbs[i].state != PGQUE_DB_UNUSED)
			memcpy(&copy[n++], &pgque_shared->dbs[i], sizeof(PgqueDb));
	unlisted = pgque_shared->dbs_unlisted;
	LWLockRelease(pgque_shared->lock);

	for (i = 0; i < n; i++)
	{
		PgqueDb    *db = &copy[i];

		for (k = 0; k < PGQUE_NKINDS; k++)
		{
			PgqueWorkerEntry *w = &db->workers[k];
			PgqueWorkerEntry *proc = db->combined ? &db->workers[PGQUE_TICKER] : w;
			Datum		values[11];
			bool		nulls[11] = {false};

			values[0] = CStringGetTextDatum(db->dbname);
			values[1] = ObjectIdGetDatum(db->dboid);
			values[2] = CStringGetTextDatum(pgque_db_state_name(db->state));
			values[3] = CStringGetTextDatum(db->combined ? "combined" : "split");
			values[4] = CStringGetTextDatum(pgque_kind_name(k));
			values[5] = Int32GetDatum((int32) proc->pid);
			nulls[5] = proc->pid == 0;
			values[6] = TimestampTzGetDatum(w->down_since);
			nulls[6] = w->down_since == 0;
			values[7] = TimestampTzGetDatum(proc->restart_at);
			nulls[7] = proc->pid != 0 || proc->restart_at == 0;
			values[8] = Int32GetDatum(proc->failures);
			values[9] = Int64GetDatum((int64) w->outages);
			values[10] = CStringGetTextDatum(db->unserved);
			nulls[10] = db->unserved[0] == '\0';
			tuplestore_putvalues(ts, desc, values, nulls);
		}
	}
	if (unlisted > 0)
	{
		Datum		values[11];
		bool		nulls[11];

		memset(nulls, true, sizeof(nulls));
		values[2] = CStringGetTextDatum("not listed");
		nulls[2] = false;
		values[10] = CStringGetTextDatum(psprintf("%d more databases: the state table is full (pgque_bgw.max_databases = %d)",
												  unlisted, pgque_max_databases));
		nulls[10] = false;
		tuplestore_putvalues(ts, desc, values, nulls);
	}
	MemoryContextSwitchTo(old);
	return (Datum) 0;
}

PG_FUNCTION_INFO_V1(pgque_warn_if_unserved);

/*
 * pgque._warn_if_unserved(): at CREATE EXTENSION, say when the workers
 * will not serve this database, and why (ADR 0026).  Silent without the
 * preloaded library or with the workers switched off: status() explains
 * those modes.
 */
Datum
pgque_warn_if_unserved(PG_FUNCTION_ARGS)
{
	int			served = 0;
	int			starting = 0;
	bool		listed;
	int			unlisted;
	PgqueBudget b;
	int			i;

	if (pgque_shared == NULL)
	{
		/*
		 * Loaded by this backend only: the SQL API works, but no worker
		 * will ever tick or maintain this database (issue #28).
		 */
		ereport(WARNING,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("pgque_bgw is not in shared_preload_libraries: nothing ticks or maintains the queues of database \"%s\"",
						get_database_name(MyDatabaseId)),
				 errdetail("Sends are stored but no consumer receives them until something calls pgque.ticker(); "
						   "rotation and retries wait for pgque.maint(); partition slot leases are unavailable."),
				 errhint("Add pgque_bgw to shared_preload_libraries in postgresql.conf and restart the server, "
						 "or call pgque.ticker() and pgque.maint() periodically (pgque.start() schedules them with pg_cron).")));
		PG_RETURN_VOID();
	}
	if (!pgque_enabled)
		PG_RETURN_VOID();
	pgque_worker_budget(&b);
	LWLockAcquire(pgque_shared->lock, LW_SHARED);
	listed = pgque_find_db(MyDatabaseId) != NULL;
	unlisted = pgque_shared->dbs_unlisted;
	for (i = 0; i < pgque_shared->max_dbs; i++)
	{
		PgqueDb    *db = &pgque_shared->dbs[i];

		if (db->dboid == MyDatabaseId)
			continue;
		if (db->state == PGQUE_DB_RUNNING)
			served++;
		/* a database whose ticker is starting holds budget already */
		else if (db->state == PGQUE_DB_UNKNOWN && db->workers[PGQUE_TICKER].registered)
			starting++;
	}
	LWLockRelease(pgque_shared->lock);

	if (!pgque_database_allowed(get_database_name(MyDatabaseId)) || (!listed && unlisted > 0))
		ereport(WARNING,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("pgque_bgw: the background workers will not serve database \"%s\"",
						get_database_name(MyDatabaseId)),
				 errdetail("%s.", pgque_unserved_reason(0, unlisted)),
				 errhint("Until then call pgque.ticker() and pgque.maint() yourself; pgque.status() says what the workers do.")));
	else if (served + starting + 1 > b.budget)
		ereport(WARNING,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("pgque_bgw: the background workers cannot serve database \"%s\" now",
						get_database_name(MyDatabaseId)),
				 errdetail("%d databases are served, %d more are starting, and the worker budget is %d (the smaller of "
						   "pgque_bgw.max_workers and max_worker_processes less the launcher and %d slots other "
						   "background workers hold).",
						   served, starting, b.budget, b.others),
				 errhint("Raise max_worker_processes and pgque_bgw.max_workers (restart needed); pgque.launcher_workers() lists every database.")));
	PG_RETURN_VOID();
}

PG_FUNCTION_INFO_V1(pgque_worker_memory);

/*
 * pgque._worker_memory(): one row per running process of this database's
 * workers that has published its memory (ticker, maintenance, watchdog;
 * "combined" for the one process of ADR 0026), and the launcher's: the
 * bytes under its TopMemoryContext after its last pass and when they were
 * measured.  Reads shared memory only.
 */
Datum
pgque_worker_memory(PG_FUNCTION_ARGS)
{
	TupleDesc	desc;
	Tuplestorestate *ts;
	MemoryContext old;
	PgqueDb		copy;
	bool		have_db = false;
	pid_t		launcher_pid;
	uint64		launcher_memory;
	TimestampTz launcher_at;
	int			k;

	old = pgque_materialize(fcinfo, &ts, &desc);
	if (pgque_shared == NULL)
	{
		MemoryContextSwitchTo(old);
		return (Datum) 0;
	}
	LWLockAcquire(pgque_shared->lock, LW_SHARED);
	launcher_pid = pgque_shared->launcher_pid;
	launcher_memory = pgque_shared->launcher_memory;
	launcher_at = pgque_shared->launcher_memory_at;
	{
		PgqueDb    *db = pgque_find_db(MyDatabaseId);

		if (db != NULL)
		{
			memcpy(&copy, db, sizeof(PgqueDb));
			have_db = true;
		}
	}
	LWLockRelease(pgque_shared->lock);

	for (k = -1; k < PGQUE_NKINDS; k++)
	{
		Datum		values[4];
		bool		nulls[4] = {false, false, false, false};
		const char *name;
		pid_t		pid;
		uint64		bytes;
		TimestampTz at;

		if (k < 0)
		{
			name = "launcher";
			pid = launcher_pid;
			bytes = launcher_memory;
			at = launcher_at;
		}
		else
		{
			PgqueWorkerEntry *w = have_db ? &copy.workers[k] : NULL;

			/* the combined worker is one process, published in the ticker's entry */
			if (w == NULL || (copy.combined && k != PGQUE_TICKER))
				continue;
			name = copy.combined ? "combined" : pgque_kind_name(k);
			pid = w->pid;
			bytes = w->memory;
			at = w->memory_at;
		}
		if (pid == 0 || at == 0)
			continue;
		values[0] = CStringGetTextDatum(name);
		values[1] = Int32GetDatum((int32) pid);
		values[2] = Int64GetDatum((int64) Min(bytes, (uint64) PG_INT64_MAX));
		values[3] = TimestampTzGetDatum(at);
		tuplestore_putvalues(ts, desc, values, nulls);
	}
	MemoryContextSwitchTo(old);
	return (Datum) 0;
}
