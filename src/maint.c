/*
 * maint.c
 *		The maintenance worker: every pgque_bgw.maint_interval, rotation
 *		step 1 per queue (each in its own transaction, LOCK ... NOWAIT inside
 *		so a busy table is skipped, not waited for), then rotation step 2 in a
 *		later transaction, then retry and delayed re-injection until drained,
 *		tick history cleanup and expired idempotency keys in bounded batches.
 *
 * Moving retries makes events the ticker should see: it is woken then.
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

typedef struct MaintPass
{
	MemoryContext cxt;
	List	   *queues;
	char	   *queue;
	int64		result;
	const char *sql;			/* for simple units */
	TimestampTz started;		/* start of the last pass */
} MaintPass;

static void
list_queues(void *arg)
{
	MaintPass  *pass = arg;
	uint64		i;
	MemoryContext old;

	if (SPI_execute("select queue_name from pgque.queue order by queue_id", true, 0) != SPI_OK_SELECT)
		elog(ERROR, "listing queues failed");
	old = MemoryContextSwitchTo(pass->cxt);
	for (i = 0; i < SPI_processed; i++)
		pass->queues = lappend(pass->queues,
							   pstrdup(SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1)));
	MemoryContextSwitchTo(old);
}

static void
rotate_step1(void *arg)
{
	MaintPass  *pass = arg;
	Oid			argtypes[1] = {TEXTOID};
	Datum		args[1];

	args[0] = CStringGetTextDatum(pass->queue);
	pass->result = pgque_spi_int8("select pgque.maint_rotate_tables_step1($1)::pg_catalog.int8",
								  1, argtypes, args, NULL);
}

static void
simple_unit(void *arg)
{
	MaintPass  *pass = arg;

	pass->result = pgque_spi_int8(pass->sql, 0, NULL, NULL, NULL);
}

static int64
run_simple(MaintPass *pass, const char *what, const char *sql)
{
	pass->sql = sql;
	pass->result = 0;
	if (!pgque_run_unit(what, simple_unit, pass))
		return -1;
	return pass->result;
}

static void *
maint_init(void)
{
	return MemoryContextAllocZero(TopMemoryContext, sizeof(MaintPass));
}

static void
maint_pass(void *state, MemoryContext cxt)
{
	MaintPass  *pass = state;
	ListCell   *lc;
	int			switched = 0;
	int64		moved;
	int64		reaped = 0;
	int64		n;
	char		what[NAMEDATALEN + 48];
	char	   *sql;

	pass->started = GetCurrentTimestamp();
	pass->cxt = cxt;
	pass->queues = NIL;
	if (pgque_state_held(cxt))
		return;
	pgque_run_unit("listing queues", list_queues, pass);

	/* rotation step 1, one queue per transaction */
	foreach(lc, pass->queues)
	{
		pass->queue = (char *) lfirst(lc);
		snprintf(what, sizeof(what), "rotation step 1 of queue \"%s\"", pass->queue);
		if (pgque_run_unit(what, rotate_step1, pass))
			switched += (int) pass->result;
	}
	/* step 2 must see step 1 committed: a separate, later transaction */
	run_simple(pass, "rotation step 2", "select pgque.maint_rotate_tables_step2()::pg_catalog.int8");

	moved = run_simple(pass, "moving retries and delayed events",
					   "select pgque.maint_retry_events()::pg_catalog.int8");
	if (moved > 0)
		pgque_wake_ticker(MyDatabaseId);

	/*
	 * cooperative groups: cursors over finished windows (an ack that found
	 * the group's row busy left it behind), windows of skipped ticks, old
	 * fences; before the tick cleanup, which reads the cursors
	 */
	/* 0.2.0's steps: an older SQL not yet updated has neither (ADR 0019) */
	if (pgque_schema_current)
		run_simple(pass, "cooperative groups", "select pgque._coop_maint()::pg_catalog.int8");
	run_simple(pass, "tick history cleanup", "select pgque.maint_tick_cleanup()::pg_catalog.int8");
	if (pgque_schema_current)
		run_simple(pass, "extra maintenance hooks", "select pgque._maint_extra()::pg_catalog.int8");

	/* expired idempotency keys: bounded batches, each its own transaction */
	do
	{
		n = run_simple(pass, "reaping expired idempotency keys",
					   "select pgque._maint_idem_batch(10000)::pg_catalog.int8");
		if (n > 0)
			reaped += n;
		CHECK_FOR_INTERRUPTS();
	} while (n >= 10000);

	sql = psprintf("select pgque.maint_alerts(pg_catalog.make_interval(secs => %d))::pg_catalog.int8",
				   pgque_alert_retention);
	run_simple(pass, "alert retention", sql);

	LWLockAcquire(pgque_shared->lock, LW_EXCLUSIVE);
	pgque_worker_db->last_maint = GetCurrentTimestamp();
	LWLockRelease(pgque_shared->lock);
	pgque_worker_report("maint_interval=%ds queues=%d switched=%d moved=%lld idem_reaped=%lld",
						pgque_maint_interval, list_length(pass->queues), switched,
						(long long) Max(moved, 0), (long long) reaped);
}

/* the rest of the interval after the start of the last pass */
static TimestampTz
maint_next_pass(void *state)
{
	return TimestampTzPlusMilliseconds(((MaintPass *) state)->started, pgque_maint_interval * 1000L);
}

const PgqueLoop pgque_maint_loop = {
	.kind = PGQUE_MAINT,
	.init = maint_init,
	.pass = maint_pass,
	.next_pass = maint_next_pass,
	.exit_check_ms = 0,
};
