/*
 * status.c
 *		pgque._worker_status(): what the state table says about this
 *		database's workers, as (component, status, detail) rows for
 *		pgque.status().  Reading it writes nothing.
 */
#include "postgres.h"

#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "compat.h"
#include "pgque_bgw.h"

PG_FUNCTION_INFO_V1(pgque_worker_status);

/*
 * Set up a materialized set-returning call: the tuplestore and tuple
 * descriptor are returned, and the per-query memory context is made
 * current (the previous one is returned, to switch back to).
 */
MemoryContext
pgque_materialize(FunctionCallInfo fcinfo, Tuplestorestate **ts, TupleDesc *desc)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	MemoryContext old;

	if (rsinfo == NULL || !IsA(rsinfo, ReturnSetInfo) ||
		!(rsinfo->allowedModes & SFRM_Materialize))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("set-valued function called in context that cannot accept a set")));
	if (get_call_result_type(fcinfo, NULL, desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");

	old = MemoryContextSwitchTo(rsinfo->econtext->ecxt_per_query_memory);
	*ts = tuplestore_begin_heap(true, false, work_mem);
	rsinfo->returnMode = SFRM_Materialize;
	rsinfo->setResult = *ts;
	rsinfo->setDesc = *desc;
	return old;
}

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
	return t == 0 ? "never" : pstrdup(timestamptz_to_str(t));
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
		put_row(ts, desc, "workers", "not served",
				psprintf("launcher pid %d has not taken this database on (pgque_bgw.databases, or its next scan)",
						 (int) launcher_pid));
	else
	{
		put_row(ts, desc, "workers", pgque_db_state_name(copy.state),
				psprintf("launcher pid %d; last tick %s; last maintenance %s",
						 (int) launcher_pid, ts_text(copy.last_tick), ts_text(copy.last_maint)));
		for (k = 0; k < PGQUE_NKINDS; k++)
		{
			PgqueWorkerSlot *w = &copy.workers[k];
			StringInfoData buf;

			initStringInfo(&buf);
			if (w->pid > 0)
				appendStringInfo(&buf, "pid %d, started %s, last pass %s",
								 (int) w->pid, ts_text(w->started_at), ts_text(w->last_run));
			else
				appendStringInfo(&buf, "not running; restarts after %s (%d short runs in a row)",
								 ts_text(w->restart_at), w->failures);
			if (w->detail[0] != '\0')
				appendStringInfo(&buf, "; %s", w->detail);
			if (w->last_error_at != 0)
				appendStringInfo(&buf, "; last error at %s: %s", ts_text(w->last_error_at), w->last_error);
			put_row(ts, desc, pgque_kind_name(k), w->pid > 0 ? "running" : "stopped", buf.data);
		}
	}
	MemoryContextSwitchTo(old);
	return (Datum) 0;
}
