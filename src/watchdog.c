/*
 * watchdog.c
 *		The watchdog worker: every pgque_bgw.watchdog_interval it reads the
 *		catalogs (cursors, ticks) and the slot lease table, publishes what it
 *		sees for status(), and opens and clears the alerts of every kind of
 *		the registry pgque._alert_kinds() (sql/42_alerts.sql) with
 *		pgque._watchdog_pass(), which reads its thresholds from the
 *		pgque_bgw.*_after settings, and worker_down
 *		(supervise.c, sql/43_worker_alerts.sql); and it reclaims the
 *		shared-memory entries that protect nothing (reclaim.c).
 *
 * It only reads, so it keeps working when the ticker is stopped or crashing.
 * It never waits for one queue: a queue whose DDL lock is taken is left out
 * of the pass, and this process remembers since when, so that one left out
 * for longer than ticker_stalled_after opens ticker_stalled (ADR 0040,
 * pgque._watch_uninspected below).
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/tuplestore.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "pgque_bgw.h"
#include "guc.h"
#include "state.h"
#include "worker.h"

typedef struct WatchPass
{
	int64		opened;
	int64		cleared;
	int64		queues;
	int64		consumers;
	int64		max_lag_s;		/* oldest cursor, seconds behind its queue's latest tick */
	int64		max_ticker_lag_s;	/* oldest latest tick, seconds */
	int64		reclaimed;		/* shared-memory entries reclaimed (reclaim.c) */
} WatchPass;

static void
observe(void *arg)
{
	WatchPass  *w = arg;
	int			ret;
	bool		null;

	ret = SPI_execute("select (select pg_catalog.count(*) from pgque.queue),"
					  "       (select pg_catalog.count(*) from pgque.subscription),"
					  "       coalesce((select pg_catalog.max(pg_catalog.extract('epoch',"
					  "                          pg_catalog.now() operator(pg_catalog.-) t.tick_time))::pg_catalog.int8"
					  "                   from pgque.subscription s"
					  "                   join pgque.tick t on t.tick_queue operator(pg_catalog.=) s.sub_queue"
					  "                                    and t.tick_id operator(pg_catalog.=) s.sub_last_tick), 0),"
					  "       coalesce((select pg_catalog.max(pg_catalog.extract('epoch',"
					  "                          pg_catalog.now() operator(pg_catalog.-) lt))::pg_catalog.int8 from"
					  "                  (select pg_catalog.max(tick_time) lt from pgque.tick group by tick_queue) x), 0)",
					  true, 1);
	if (ret != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "reading queue state failed");
	w->queues = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &null));
	w->consumers = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &null));
	w->max_lag_s = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3, &null));
	w->max_ticker_lag_s = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 4, &null));
}

/*
 * The SQL of 0.3.0 reads the thresholds itself, from the settings
 * (pgque._watchdog_pass()'s defaults: _ticker_stalled_lead, _rotation_grace
 * in sql/42_alerts.sql).  An older SQL not yet updated (ADR 0019) takes
 * them as arguments, computed here as its own worker did.
 */
static void
evaluate_alerts(void *arg)
{
	WatchPass  *w = arg;
	int			ret;
	bool		null;

	if (PGQUE_SQL_HAS(PGQUE_SQL_0_3_0))
		ret = SPI_execute("select opened, cleared from pgque._watchdog_pass()", false, 1);
	else
	{
		Oid			argtypes[5] = {FLOAT8OID, FLOAT8OID, FLOAT8OID, FLOAT8OID, FLOAT8OID};
		Datum		args[5];

		args[0] = Float8GetDatum((double) pgque_slot_unpolled_after);
		args[1] = Float8GetDatum((double) pgque_slot_stale_after);
		args[2] = Float8GetDatum((double) pgque_lag_alert_after);
		args[3] = Float8GetDatum(Max((double) pgque_ticker_stalled_after - pgque_watchdog_interval,
									 pgque_ticker_stalled_after / 2.0));
		args[4] = Float8GetDatum(2.0 * pgque_maint_interval + pgque_watchdog_interval);
		ret = SPI_execute_with_args("select opened, cleared from pgque._watchdog_pass("
									"pg_catalog.make_interval(secs => $1), pg_catalog.make_interval(secs => $2), "
									"pg_catalog.make_interval(secs => $3), pg_catalog.make_interval(secs => $4), "
									"pg_catalog.make_interval(secs => $5))",
									5, argtypes, args, NULL, false, 1);
	}
	if (ret != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "evaluating alerts failed");
	w->opened = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &null));
	w->cleared = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &null));
}

static void
reclaim(void *arg)
{
	((WatchPass *) arg)->reclaimed = pgque_reclaim_pass();
}

static void *
watchdog_init(void)
{
	/*
	 * a ticker's probe published before this watchdog started may be of an
	 * install dropped since (queue ids start again): the next probe says
	 * (ADR 0103)
	 */
	LWLockAcquire(pgque_shared->lock, LW_EXCLUSIVE);
	pgque_worker_db->probe_at = 0;
	LWLockRelease(pgque_shared->lock);
	return MemoryContextAllocZero(TopMemoryContext, sizeof(TimestampTz));
}

static void
watchdog_pass(void *state, MemoryContext cxt)
{
	WatchPass	w;

	*(TimestampTz *) state = GetCurrentTimestamp();
	memset(&w, 0, sizeof(w));
	/* a restore in progress: its alerts are neither cleared nor reopened */
	if (pgque_state_held(cxt))
		return;
	pgque_run_unit("evaluating alerts", evaluate_alerts, &w);
	pgque_worker_alerts_pass();
	/* the partition and cooperative tables came with 0.2.0 (ADR 0019) */
	if (PGQUE_SQL_HAS(PGQUE_SQL_0_2_0))
		pgque_run_unit("reclaiming shared-memory entries", reclaim, &w);
	if (pgque_run_unit("observing queues", observe, &w))
		pgque_worker_report("watchdog_interval=%ds queues=%lld subscriptions=%lld "
							"oldest cursor %llds behind, oldest last tick %llds ago; "
							"alerts opened %lld, cleared %lld, shared-memory entries reclaimed %lld in the last pass",
							pgque_watchdog_interval, (long long) w.queues, (long long) w.consumers,
							(long long) w.max_lag_s, (long long) w.max_ticker_lag_s,
							(long long) w.opened, (long long) w.cleared, (long long) w.reclaimed);
}

/* state: the start of the last pass */
static TimestampTz
watchdog_next_pass(void *state)
{
	return TimestampTzPlusMilliseconds(*(TimestampTz *) state, pgque_watchdog_interval * 1000L);
}

/*
 * The queues a pass could not inspect, and since when: kept in this
 * process's memory from one pass to the next.  A restart forgets them,
 * which delays such an alert by at most one ticker_stalled_after.
 */
static int32 *uninspected_ids = NULL;
static TimestampTz *uninspected_since = NULL;
static int	uninspected_n = 0;

PG_FUNCTION_INFO_V1(pgque_watch_uninspected);

/*
 * pgque._watch_uninspected(i_queue_ids int4[]) -> (queue_id, since): the
 * queues of this pass that could not be inspected, each with the start of
 * the run of passes that could not (now for a new one).  Queues not given
 * are forgotten.
 */
Datum
pgque_watch_uninspected(PG_FUNCTION_ARGS)
{
	ArrayType  *arr = PG_GETARG_ARRAYTYPE_P(0);
	Datum	   *elems;
	bool	   *nulls;
	int			n;
	int			i;
	int			j;
	int			kept = 0;
	int32	   *ids;
	TimestampTz *since;
	TimestampTz now = GetCurrentTimestamp();
	Tuplestorestate *ts;
	TupleDesc	desc;
	MemoryContext old;

	if (ARR_ELEMTYPE(arr) != INT4OID)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("queue ids must be an int4 array")));
	deconstruct_array(arr, INT4OID, sizeof(int32), true, TYPALIGN_INT, &elems, &nulls, &n);
	ids = MemoryContextAlloc(TopMemoryContext, sizeof(int32) * Max(n, 1));
	since = MemoryContextAlloc(TopMemoryContext, sizeof(TimestampTz) * Max(n, 1));
	for (i = 0; i < n; i++)
	{
		int32		id;

		if (nulls[i])
			continue;
		id = DatumGetInt32(elems[i]);
		for (j = 0; j < kept; j++)
			if (ids[j] == id)
				break;
		if (j < kept)
			continue;			/* given twice */
		ids[kept] = id;
		since[kept] = now;
		for (j = 0; j < uninspected_n; j++)
			if (uninspected_ids[j] == id)
				since[kept] = uninspected_since[j];
		kept++;
	}
	if (uninspected_ids != NULL)
	{
		pfree(uninspected_ids);
		pfree(uninspected_since);
	}
	uninspected_ids = ids;
	uninspected_since = since;
	uninspected_n = kept;

	old = pgque_materialize(fcinfo, &ts, &desc);
	for (i = 0; i < kept; i++)
	{
		Datum		values[2];
		bool		isnull[2] = {false, false};

		values[0] = Int32GetDatum(ids[i]);
		values[1] = TimestampTzGetDatum(since[i]);
		tuplestore_putvalues(ts, desc, values, isnull);
	}
	MemoryContextSwitchTo(old);
	return (Datum) 0;
}

const PgqueLoop pgque_watchdog_loop = {
	.kind = PGQUE_WATCHDOG,
	.init = watchdog_init,
	.pass = watchdog_pass,
	.next_pass = watchdog_next_pass,
	.exit_check_ms = 0,
};
