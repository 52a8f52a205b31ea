/*
 * maint.c
 *		The maintenance worker: every pgque_bgw.maint_interval, rotation
 *		step 1 per queue whose rotation is due (each in its own transaction,
 *		LOCK ... NOWAIT inside so a busy table is skipped, not waited for;
 *		the queues due are listed in one statement, ADR 0031), then rotation step 2 in a
 *		later transaction, then retry and delayed re-injection until drained,
 *		tick history cleanup and expired idempotency keys in bounded batches.
 *
 * Moving retries makes events the ticker should see: it is woken then.
 *
 * Every step that fails is recorded in pgque.maint_failure (the watchdog's
 * maint_failed alert) and marked recovered when it next succeeds (ADR 0024).
 * Rotation step 1 on a full tablespace empties the queue's space reserve
 * and runs again at once; the reserve is refilled each pass (ADR 0025).
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "guc.h"
#include "state.h"
#include "wake.h"
#include "worker.h"

typedef struct MaintPass
{
	MemoryContext cxt;
	List	   *queues;
	char	   *queue;
	int64		result;
	const char *sql;			/* for simple units */
	const char *step;			/* the step being run, and its queue or NULL */
	const char *step_queue;
	pgque_unit_fn step_fn;
	TimestampTz started;		/* start of the last pass */
	bool		reserve_freed;	/* step 1 emptied the queue's space reserve */
} MaintPass;

/*
 * The queues with a per-queue step to run: _maint_queue_steps says which
 * (one statement, ADR 0031); an older SQL not yet updated has no such
 * function (ADR 0019): every queue, both steps.
 */
typedef struct MaintQueue
{
	char	   *name;
	bool		rotate;			/* rotation step 1 */
	bool		reserve;		/* the space reserve */
} MaintQueue;

static void
list_queues(void *arg)
{
	MaintPass  *pass = arg;
	uint64		i;
	MemoryContext old;

	if (SPI_execute(PGQUE_SQL_HAS(PGQUE_SQL_0_2_0)
					? "select queue_name, rotate, reserve from pgque._maint_queue_steps()"
					: "select queue_name, true, true from pgque.queue order by queue_id",
					true, 0) != SPI_OK_SELECT)
		elog(ERROR, "listing queues failed");
	old = MemoryContextSwitchTo(pass->cxt);
	for (i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		MaintQueue *mq = palloc(sizeof(MaintQueue));
		bool		null;

		mq->name = pstrdup(SPI_getvalue(tup, SPI_tuptable->tupdesc, 1));
		mq->rotate = DatumGetBool(SPI_getbinval(tup, SPI_tuptable->tupdesc, 2, &null));
		mq->reserve = DatumGetBool(SPI_getbinval(tup, SPI_tuptable->tupdesc, 3, &null));
		pass->queues = lappend(pass->queues, mq);
	}
	MemoryContextSwitchTo(old);
}

/* a statement on the step's name and queue (NULL for database-wide steps) */
static void
step_sql(MaintPass *pass, const char *sql, int nextra, Datum *extra)
{
	Oid			argtypes[4] = {TEXTOID, TEXTOID, TEXTOID, TEXTOID};
	Datum		args[4];
	bool		nulls[4] = {false, pass->step_queue == NULL, false, false};
	int			i;

	args[0] = CStringGetTextDatum(pass->step);
	args[1] = pass->step_queue ? CStringGetTextDatum(pass->step_queue) : (Datum) 0;
	for (i = 0; i < nextra; i++)
		args[2 + i] = extra[i];
	pgque_spi_int8(sql, 2 + nextra, argtypes, args, nulls);
}

/* the step, then in the same transaction: a failure of it recovered */
static void
step_unit(void *arg)
{
	MaintPass  *pass = arg;

	pass->step_fn(pass);
	/* 0.2.0's table: an older SQL not yet updated has none (ADR 0019) */
	if (PGQUE_SQL_HAS(PGQUE_SQL_0_2_0) && pass->result >= 0)
		step_sql(pass, "select pgque._maint_ok($1, $2)", 0, NULL);
}

static void
record_failure(void *arg)
{
	MaintPass  *pass = arg;
	Datum		extra[2];

	extra[0] = CStringGetTextDatum(pgque_unit_errmsg);
	extra[1] = CStringGetTextDatum(unpack_sql_state(pgque_unit_sqlerrcode));
	step_sql(pass, "select pgque._maint_failed($1, $2, $3, $4)", 2, extra);
}

/*
 * Run one maintenance step in one unit; a failure is recorded (its own unit:
 * the step's transaction is gone) for the maint_failed alert.
 */
static bool
run_step(MaintPass *pass, const char *step, const char *queue, pgque_unit_fn fn)
{
	char		what[NAMEDATALEN + 64];

	if (queue)
		snprintf(what, sizeof(what), "%s of queue \"%s\"", step, queue);
	else
		snprintf(what, sizeof(what), "%s", step);
	pass->step = step;
	pass->step_queue = queue;
	pass->step_fn = fn;
	pass->result = 0;
	if (pgque_run_unit(what, step_unit, pass))
		return true;
	/* an abandoned unit did not fail: its SQL was updated or dropped */
	if (PGQUE_SQL_HAS(PGQUE_SQL_0_2_0) && !pgque_unit_abandoned)
		pgque_run_unit("recording a maintenance failure", record_failure, pass);
	return false;
}

static void
queue_unit(void *arg)
{
	MaintPass  *pass = arg;
	Oid			argtypes[1] = {TEXTOID};
	Datum		args[1];

	args[0] = CStringGetTextDatum(pass->queue);
	pass->result = pgque_spi_int8(pass->sql, 1, argtypes, args, NULL);
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
	if (!run_step(pass, what, NULL, simple_unit))
		return -1;
	return pass->result;
}

/*
 * Rotation step 1 of pass->queue.  -1 from _maint_rotate_step1: the table
 * could not be truncated for lack of space and the queue's space reserve
 * was emptied in that transaction; now that it committed, again.
 */
static int64
rotate_step1(MaintPass *pass)
{
	pass->sql = PGQUE_SQL_HAS(PGQUE_SQL_0_2_0)
		? "select pgque._maint_rotate_step1($1)::pg_catalog.int8"
		: "select pgque.maint_rotate_tables_step1($1)::pg_catalog.int8";
	if (!run_step(pass, "rotation step 1", pass->queue, queue_unit))
		return 0;
	if (pass->result < 0)
	{
		pass->reserve_freed = true;
		if (!run_step(pass, "rotation step 1", pass->queue, queue_unit))
			return 0;
	}
	return Max(pass->result, 0);
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
	char	   *sql;

	pass->started = GetCurrentTimestamp();
	pass->cxt = cxt;
	pass->queues = NIL;
	if (pgque_state_held(cxt))
		return;
	run_step(pass, "listing queues", NULL, list_queues);

	/* rotation step 1, one queue per transaction, and its space reserve */
	foreach(lc, pass->queues)
	{
		MaintQueue *mq = (MaintQueue *) lfirst(lc);
		int			n = 0;

		pass->queue = mq->name;
		pass->reserve_freed = false;
		if (mq->rotate)
			n = (int) rotate_step1(pass);
		switched += n;
		/*
		 * a switch changes the next table to truncate and the pages its
		 * reserve needs; step 1 on a full disk may have emptied it
		 */
		if (PGQUE_SQL_HAS(PGQUE_SQL_0_2_0) && (mq->reserve || n > 0 || pass->reserve_freed))
		{
			pass->sql = "select pgque._space_reserve_keep($1)";
			run_step(pass, "space reserve", pass->queue, queue_unit);
		}
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
	if (PGQUE_SQL_HAS(PGQUE_SQL_0_2_0))
		run_simple(pass, "cooperative groups", "select pgque._coop_maint()::pg_catalog.int8");
	run_simple(pass, "tick history cleanup", "select pgque.maint_tick_cleanup()::pg_catalog.int8");
	if (PGQUE_SQL_HAS(PGQUE_SQL_0_2_0))
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
	pgque_worker_report("maint_interval=%ds queues with a step due=%d switched=%d moved=%lld idem_reaped=%lld",
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
