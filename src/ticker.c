/*
 * ticker.c
 *		The ticker worker: sleeps until a producer's commit wakes it (or the
 *		shortest ticker_max_lag of the database's queues passes), then asks
 *		every queue whether a tick is due, one transaction per queue.
 *
 * Like autoprewarm, it sleeps until a deadline computed from its last pass,
 * not for a fixed nap: passes start at least pgque_bgw.tick_interval apart,
 * a commit after that is served at once, and one that arrives sooner waits
 * for that deadline.  Whether a
 * queue ticks is decided by pgque.ticker(queue) (sql/40_ticker.sql): at once
 * when it has new committed events, otherwise once per ticker_idle_period,
 * so an idle queue costs one tick per idle period.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "pgque_bgw.h"

typedef struct TickerPass
{
	MemoryContext cxt;			/* the pass's, reset by the skeleton */
	List	   *queues;			/* queue names (char *) */
	long		poll_ms;		/* shortest ticker_max_lag */
	char	   *queue;			/* the queue of the current unit */
	bool		ticked;
	TimestampTz last_pass;		/* start of the last pass */
	long		next_poll_ms;	/* poll interval chosen by the last pass */
} TickerPass;

static void
list_queues(void *arg)
{
	TickerPass *pass = arg;
	int			ret;
	uint64		i;
	MemoryContext old;

	ret = SPI_execute("select queue_name,"
					  "       (pg_catalog.extract('epoch', queue_ticker_max_lag)"
					  "        operator(pg_catalog.*) 1000)::pg_catalog.int8"
					  "  from pgque.queue"
					  " where not queue_ticker_paused and not queue_external_ticker"
					  " order by queue_id", true, 0);
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "listing queues failed: %s", SPI_result_code_string(ret));

	old = MemoryContextSwitchTo(pass->cxt);
	for (i = 0; i < SPI_processed; i++)
	{
		bool		null;
		char	   *name = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1);
		int64		lag = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2, &null));

		pass->queues = lappend(pass->queues, pstrdup(name));
		if (!null && lag < pass->poll_ms)
			pass->poll_ms = lag;
	}
	MemoryContextSwitchTo(old);
}

static void
tick_queue(void *arg)
{
	TickerPass *pass = arg;
	Oid			argtypes[1] = {TEXTOID};
	Datum		args[1];
	int			ret;

	args[0] = CStringGetTextDatum(pass->queue);
	ret = SPI_execute_with_args("select pgque.ticker($1)", 1, argtypes, args, NULL, false, 1);
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "ticker failed: %s", SPI_result_code_string(ret));
	if (SPI_processed == 1)
	{
		bool		null;

		(void) SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &null);
		pass->ticked = !null;
	}
}

static void *
ticker_init(void)
{
	TickerPass *pass = MemoryContextAllocZero(TopMemoryContext, sizeof(TickerPass));

	pass->next_poll_ms = 1000;
	return pass;
}

static void
ticker_pass(void *state, MemoryContext cxt)
{
	TickerPass *pass = state;
	ListCell   *lc;
	int			nticks = 0;
	char		what[NAMEDATALEN + 32];

	/* commits from here on wake the next pass */
	pg_atomic_write_u32(&pgque_worker_db->wake, 0);
	pass->last_pass = GetCurrentTimestamp();

	pass->cxt = cxt;
	pass->queues = NIL;
	pass->poll_ms = 60000;
	if (pgque_state_held(cxt))
		return;
	if (pgque_run_unit("listing queues", list_queues, pass))
		pass->next_poll_ms = Max(pass->poll_ms, pgque_tick_interval);

	foreach(lc, pass->queues)
	{
		pass->queue = (char *) lfirst(lc);
		pass->ticked = false;
		snprintf(what, sizeof(what), "ticking queue \"%s\"", pass->queue);
		if (pgque_run_unit(what, tick_queue, pass) && pass->ticked)
			nticks++;
	}
	if (nticks > 0)
	{
		LWLockAcquire(pgque_shared->lock, LW_EXCLUSIVE);
		pgque_worker_db->last_tick = GetCurrentTimestamp();
		LWLockRelease(pgque_shared->lock);
	}
	/* the watchdog is down: its own worker_down alert is the ticker's to write */
	if (pgque_worker_alerts_due(false))
		pgque_worker_alerts_pass();
	pgque_worker_report("tick_interval=%dms poll=%ldms queues=%d last pass ticked %d",
						pgque_tick_interval, pass->next_poll_ms, list_length(pass->queues), nticks);
}

/*
 * The next pass: tick_interval after the start of the last one once a
 * commit woke us (a rate limit that costs an isolated commit nothing),
 * otherwise when the shortest ticker_max_lag polls.
 */
static TimestampTz
ticker_next_pass(void *state)
{
	TickerPass *pass = state;

	if (pg_atomic_read_u32(&pgque_worker_db->wake) != 0)
		return TimestampTzPlusMilliseconds(pass->last_pass, pgque_tick_interval);
	return TimestampTzPlusMilliseconds(pass->last_pass, pass->next_poll_ms);
}

/* is the extension still there? at most once a second */
const PgqueLoop pgque_ticker_loop = {
	.kind = PGQUE_TICKER,
	.init = ticker_init,
	.pass = ticker_pass,
	.next_pass = ticker_next_pass,
	.exit_check_ms = 1000,
};
