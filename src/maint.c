/*
 * maint.c
 *		The maintenance worker: every pgque_bgw.maint_interval it walks the
 *		maintenance steps of pgque._maint_steps() (sql/70_maint.sql), the
 *		list pgque.maint() walks too, so that the two cannot run the steps
 *		in different orders (ADR 0065): each step in its own transaction;
 *		the per-queue ones (rotation step 1, the space reserve) only for the
 *		queues _maint_queue_steps lists as due (one statement, ADR 0031),
 *		LOCK ... NOWAIT inside so a busy table is skipped, not waited for.
 *
 * A step that moved events wakes the ticker.  Every step that fails is
 * recorded in pgque.maint_failure (the watchdog's maint_failed alert) and
 * marked recovered when it next succeeds (ADR 0024).  Rotation step 1 on a
 * full tablespace empties the queue's space reserve (result -1) and runs
 * again at once, in a new transaction (ADR 0025).
 *
 * An older SQL not yet updated (ADR 0019) has no step list: its steps are
 * the ones its own worker ran, below (legacy_steps).
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "guc.h"
#include "state.h"
#include "wake.h"
#include "worker.h"

/* one maintenance step, as pgque._maint_steps() lists it */
typedef struct MaintStep
{
	char	   *step;			/* the name a failure is recorded under */
	char	   *call;			/* select <call>; $1 the queue's name */
	bool		per_queue;
	char	   *due;			/* per-queue: the column of _maint_queue_steps */
	int64		again_at;		/* again while the result reaches it; 0: once */
	bool		wakes_ticker;
	char	   *report;			/* its label in the status() line, or NULL */
	int64		total;			/* this pass's results */
} MaintStep;

typedef struct MaintPass
{
	MemoryContext cxt;
	List	   *steps;			/* MaintStep, in order */
	List	   *queues;			/* MaintQueue, listed at the first per-queue step */
	bool		listed;
	const MaintStep *cur;		/* the step being run, and its queue or NULL */
	const char *step_queue;
	int64		result;
	TimestampTz started;		/* start of the last pass */
} MaintPass;

/* a queue with a per-queue step due: the step list's "due" names it */
typedef struct MaintQueue
{
	char	   *name;
	List	   *due;			/* column names of _maint_queue_steps that were true */
} MaintQueue;

/*
 * The steps of SQL older than 0.3.0, in the order its worker ran them
 * (0.1.0 lacks the space reserve, cooperative groups and hooks; its
 * rotation step 1 was the public function).
 */
static void
legacy_steps(MaintPass *pass)
{
	static const MaintStep v020[] = {
		{"rotation step 1", "pgque._maint_rotate_step1($1)", true, "rotate", 0, false, "switched"},
		{"space reserve", "pgque._space_reserve_keep($1)", true, "reserve", 0, false, NULL},
		{"rotation step 2", "pgque.maint_rotate_tables_step2()", false, NULL, 0, false, NULL},
		{"moving retries and delayed events", "pgque.maint_retry_events()", false, NULL, 0, true, "moved"},
		{"cooperative groups", "pgque._coop_maint()", false, NULL, 0, false, NULL},
		{"tick history cleanup", "pgque.maint_tick_cleanup()", false, NULL, 0, false, NULL},
		{"extra maintenance hooks", "pgque._maint_extra()", false, NULL, 0, false, NULL},
		{"reaping expired idempotency keys", "pgque._maint_idem_batch(10000)", false, NULL, 10000, false, "idem_reaped"},
		{"alert retention", NULL, false, NULL, 0, false, NULL},
	};
	bool		v010 = !PGQUE_SQL_HAS(PGQUE_SQL_0_2_0);
	int			i;

	for (i = 0; i < lengthof(v020); i++)
	{
		MaintStep  *st = palloc(sizeof(MaintStep));

		*st = v020[i];
		if (v010 && (strcmp(st->step, "space reserve") == 0 ||
					 strcmp(st->step, "cooperative groups") == 0 ||
					 strcmp(st->step, "extra maintenance hooks") == 0))
			continue;
		if (v010 && st->per_queue)
			st->call = "pgque.maint_rotate_tables_step1($1)";
		if (st->call == NULL)	/* 0.2.0's alert retention took the setting as an argument */
			st->call = psprintf("pgque.maint_alerts(pg_catalog.make_interval(secs => %d))",
								pgque_alert_retention);
		pass->steps = lappend(pass->steps, st);
	}
}

static void
list_steps(void *arg)
{
	MaintPass  *pass = arg;
	MemoryContext old;
	uint64		i;

	if (!PGQUE_SQL_HAS(PGQUE_SQL_0_3_0))
	{
		old = MemoryContextSwitchTo(pass->cxt);
		legacy_steps(pass);
		MemoryContextSwitchTo(old);
		return;
	}
	if (SPI_execute("select step, call, per_queue, due, again_at, wakes_ticker, report"
					"  from pgque._maint_steps() order by step_no", true, 0) != SPI_OK_SELECT)
		elog(ERROR, "listing the maintenance steps failed");
	old = MemoryContextSwitchTo(pass->cxt);
	for (i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		MaintStep  *st = palloc0(sizeof(MaintStep));
		bool		null;
		Datum		d;

		st->step = SPI_getvalue(tup, desc, 1);
		st->call = SPI_getvalue(tup, desc, 2);
		st->per_queue = DatumGetBool(SPI_getbinval(tup, desc, 3, &null));
		st->due = SPI_getvalue(tup, desc, 4);
		d = SPI_getbinval(tup, desc, 5, &null);
		st->again_at = null ? 0 : DatumGetInt32(d);
		st->wakes_ticker = DatumGetBool(SPI_getbinval(tup, desc, 6, &null));
		st->report = SPI_getvalue(tup, desc, 7);
		if (st->step == NULL || st->call == NULL)
			elog(ERROR, "pgque._maint_steps() lists a step without a name or a call");
		pass->steps = lappend(pass->steps, st);
	}
	MemoryContextSwitchTo(old);
}

/* the queues with a per-queue step due, and which (ADR 0031) */
static void
list_queues(void *arg)
{
	MaintPass  *pass = arg;
	uint64		i;
	int			col;
	MemoryContext old;

	if (SPI_execute(PGQUE_SQL_HAS(PGQUE_SQL_0_2_0)
					? "select * from pgque._maint_queue_steps()"
					: "select queue_name, true as rotate from pgque.queue order by queue_id",
					true, 0) != SPI_OK_SELECT)
		elog(ERROR, "listing queues failed");
	old = MemoryContextSwitchTo(pass->cxt);
	for (i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		MaintQueue *mq = palloc0(sizeof(MaintQueue));
		bool		null;

		mq->name = SPI_getvalue(tup, desc, 1);
		for (col = 2; col <= desc->natts; col++)
		{
			Datum		d = SPI_getbinval(tup, desc, col, &null);

			if (!null && DatumGetBool(d))
				mq->due = lappend(mq->due, pstrdup(NameStr(TupleDescAttr(desc, col - 1)->attname)));
		}
		pass->queues = lappend(pass->queues, mq);
	}
	MemoryContextSwitchTo(old);
}

/* the step, then in the same transaction: a failure of it recovered */
static void
step_unit(void *arg)
{
	MaintPass  *pass = arg;
	char	   *sql = psprintf("select (%s)::pg_catalog.int8", pass->cur->call);

	if (pass->step_queue)
	{
		Oid			argtypes[1] = {TEXTOID};
		Datum		args[1];

		args[0] = CStringGetTextDatum(pass->step_queue);
		pass->result = pgque_spi_int8(sql, 1, argtypes, args, NULL);
	}
	else
		pass->result = pgque_spi_int8(sql, 0, NULL, NULL, NULL);
	/* 0.2.0's table: an older SQL not yet updated has none (ADR 0019) */
	if (PGQUE_SQL_HAS(PGQUE_SQL_0_2_0) && pass->result >= 0)
		pgque_record_step(pass->cur->step, pass->step_queue, false);
}

static void
record_failure(void *arg)
{
	MaintPass  *pass = arg;

	pgque_record_step(pass->cur->step, pass->step_queue, true);
}

/*
 * Run one maintenance step in one unit; a failure is recorded (its own unit:
 * the step's transaction is gone) for the maint_failed alert.  -> whether it
 * ran; its result in pass->result.
 */
static bool
run_step(MaintPass *pass, const MaintStep *st, const char *queue)
{
	char		what[NAMEDATALEN + 128];

	if (queue)
		snprintf(what, sizeof(what), "%s of queue \"%s\"", st->step, queue);
	else
		snprintf(what, sizeof(what), "%s", st->step);
	pass->cur = st;
	pass->step_queue = queue;
	pass->result = 0;
	if (pgque_run_unit(what, step_unit, pass))
		return true;
	/* an abandoned unit did not fail: its SQL was updated or dropped */
	if (PGQUE_SQL_HAS(PGQUE_SQL_0_2_0) && !pgque_unit_abandoned)
		pgque_run_unit("recording a maintenance failure", record_failure, pass);
	return false;
}

/*
 * A listing unit (the steps, the queues due) that fails is recorded as a
 * failed step of that name, as any step (maint_failed).
 */
static bool
run_listing(MaintPass *pass, const char *name, pgque_unit_fn fn)
{
	MaintStep	listing = {.step = (char *) name};
	bool		ok;

	pass->cur = &listing;
	pass->step_queue = NULL;
	ok = pgque_run_unit(name, fn, pass);
	if (!ok && PGQUE_SQL_HAS(PGQUE_SQL_0_2_0) && !pgque_unit_abandoned)
		pgque_run_unit("recording a maintenance failure", record_failure, pass);
	pass->cur = NULL;
	return ok;
}

/* a database-wide step: again, each time in a new transaction, while its result reaches again_at */
static void
run_db_step(MaintPass *pass, MaintStep *st)
{
	for (;;)
	{
		if (!run_step(pass, st, NULL))
			return;
		st->total += Max(pass->result, 0);
		if (st->wakes_ticker && pass->result > 0)
			pgque_wake_ticker(MyDatabaseId);
		if (st->again_at <= 0 || pass->result < st->again_at)
			return;
		CHECK_FOR_INTERRUPTS();
	}
}

static bool
queue_due(const MaintQueue *mq, const MaintStep *st)
{
	ListCell   *lc;

	if (st->due == NULL)
		return true;
	foreach(lc, mq->due)
	{
		if (strcmp((char *) lfirst(lc), st->due) == 0)
			return true;
	}
	return false;
}

/*
 * The per-queue steps first..last-1, queue by queue: a step runs when the
 * queue is due for it or an earlier step of this queue acted (a switch
 * changes the table the space reserve is for); a negative result freed
 * space and runs the step again at once, in a new transaction (ADR 0025).
 */
static void
run_queue_steps(MaintPass *pass, int first, int last)
{
	ListCell   *lc;

	if (!pass->listed)
	{
		pass->listed = true;
		if (!run_listing(pass, "listing queues", list_queues))
			return;
	}
	foreach(lc, pass->queues)
	{
		MaintQueue *mq = (MaintQueue *) lfirst(lc);
		bool		acted = false;
		int			k;

		for (k = first; k < last; k++)
		{
			MaintStep  *st = list_nth(pass->steps, k);

			if (!acted && !queue_due(mq, st))
				continue;
			if (!run_step(pass, st, mq->name))
				continue;
			if (pass->result < 0)
			{
				acted = true;
				if (!run_step(pass, st, mq->name))
					continue;
			}
			if (pass->result != 0)
				acted = true;
			st->total += Max(pass->result, 0);
			if (st->wakes_ticker && pass->result > 0)
				pgque_wake_ticker(MyDatabaseId);
		}
	}
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
	StringInfoData report;
	ListCell   *lc;
	int			i;
	int			n;

	pass->started = GetCurrentTimestamp();
	pass->cxt = cxt;
	pass->steps = NIL;
	pass->queues = NIL;
	pass->listed = false;
	if (pgque_state_held(cxt))
		return;
	if (!run_listing(pass, "listing maintenance steps", list_steps))
		return;

	n = list_length(pass->steps);
	for (i = 0; i < n;)
	{
		MaintStep  *st = list_nth(pass->steps, i);
		int			j = i + 1;

		if (!st->per_queue)
		{
			run_db_step(pass, st);
			i = j;
			continue;
		}
		/* consecutive per-queue steps run queue by queue */
		while (j < n && ((MaintStep *) list_nth(pass->steps, j))->per_queue)
			j++;
		run_queue_steps(pass, i, j);
		i = j;
	}

	LWLockAcquire(pgque_shared->lock, LW_EXCLUSIVE);
	pgque_worker_db->last_maint = GetCurrentTimestamp();
	LWLockRelease(pgque_shared->lock);
	initStringInfo(&report);
	appendStringInfo(&report, "maint_interval=%ds queues with a step due=%d",
					 pgque_maint_interval, list_length(pass->queues));
	foreach(lc, pass->steps)
	{
		MaintStep  *st = (MaintStep *) lfirst(lc);

		if (st->report != NULL)
			appendStringInfo(&report, " %s=%lld", st->report, (long long) st->total);
	}
	pgque_worker_report("%s", report.data);
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
