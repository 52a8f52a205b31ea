/*
 * ticker.c
 *		The ticker worker: visits only the queues that changed (ADR 0031).
 *
 * A producer's commit marks its queue in the database's dirty bits and sets
 * the ticker's latch (wake.c).  A pass takes the bits (exchanging them with
 * 0, before any snapshot of the pass) and asks pgque.ticker(queue) of the
 * queues marked, one transaction per queue, first of all (round 1, ADR
 * 0108); a queue so woken is visited in a round 1 until a visit of it
 * completes (ADR 0136), never in round 2 among the idle ticks.  An idle
 * queue is visited only when its idle tick is due (once per
 * ticker_idle_period).  The queue list
 * is cached here and read again only when pgque.queue changed (its trigger
 * sends a relcache invalidation, which a callback notes).
 *
 * What the commit hook cannot see is covered by probes, one statement each
 * for all the queues concerned: the first pass after the ticker starts
 * (shared memory lost in a restart or crash, a promoted standby) and COMMIT
 * PREPARED ask _ticks_due of every queue; every ticker_probe_interval a
 * pass reads every queue's event sequence for rows written into the event
 * tables directly (probe_sequences: by OID, against the position the
 * queue's ticks are known to cover, and publishes what it found covered
 * for the watchdog, ADR 0103).  The passes are rate-limited: one per
 * pgque_bgw.tick_interval on average, in bursts of a few
 * (ticker_next_pass); a commit the limit lets through is served at once,
 * others wait for its next opening.
 *
 * A visit never waits for one queue (ADR 0040): a queue whose DDL lock is
 * taken (drop_queue) is skipped, one whose row another transaction holds
 * locked is left marked and visited again at the poll.
 *
 * A visit that fails (an error: a table its owner broke, a missing
 * relation) backs its queue off (ADR 0100): visited again after the poll,
 * then twice that, up to TICK_BACKOFF_MAX_MS, one by one (never in a chunk
 * of the others), so that one broken queue neither floods the server log
 * nor delays the ticks of the others.  From its TICK_FAIL_RECORD_AFTER-th
 * failure in a row it is recorded as the failed step "tick" of the queue
 * (pgque.maint_failure: the watchdog's maint_failed alert, subject
 * tick/queue), marked recovered at its next successful visit.
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "guc.h"
#include "kept_plan.h"
#include "state.h"
#include "tick.h"
#include "worker.h"

/* more queues than this to visit in a pass: TICK_CHUNK per transaction */
#define VISIT_ONE_BY_ONE 8
#define TICK_CHUNK 64

/* a failing queue's backoff (ADR 0100) */
#define TICK_BACKOFF_MAX_MS 30000
#define TICK_FAIL_RECORD_AFTER 3
/* the step name its failures are recorded under (maint_failed: tick/queue) */
#define TICK_FAIL_STEP "tick"

typedef struct TickQueue
{
	int32		id;
	char	   *name;
	int64		max_lag_ms;
	int64		idle_ms;
	TimestampTz idle_due;		/* its idle tick is due (0: visit at once) */
	bool		visit;			/* visit in this pass */
	bool		woken;			/* a commit marked it: round 1 only (ADR 0108, 0136) */
	bool		busy;			/* its row was locked in this pass: at the poll */
	int32		failures;		/* visits failed in a row (ADR 0100) */
	TimestampTz retry_at;		/* after a failure: not visited before */
	bool		recorded;		/* a failure of it is recorded, not recovered */
	Oid			seq;			/* its event sequence (InvalidOid: unknown) */
	int64		seq_seen;		/* a position its latest tick covers (-1: none known) */
	int64		probed;			/* the position this pass's probe read (-1: none) */
	bool		covered;		/* this pass's probe found it covered, or ticked it */
} TickQueue;

typedef struct TickerState
{
	MemoryContext list_cxt;		/* the cached queue list */
	TickQueue  *queues;			/* ordered by id */
	int			nqueues;
	bool		stale;			/* pgque.queue changed: read the list again */
	bool		probe_all;		/* ask _ticks_due of every queue */
	bool		retry;			/* a row was busy, a list failed: at the poll */
	TimestampTz next_retry;		/* the earliest retry_at of a failing queue */
	long		poll_ms;		/* shortest ticker_max_lag: the retry poll */
	TimestampTz next_probe;		/* next sequence probe */
	TimestampTz next_idle;		/* the earliest idle_due */
	TimestampTz last_pass;		/* start of the last pass */
	TimestampTz last_end;		/* end of the last pass */
	TimestampTz pass_tat;		/* the rate limit's "theoretical arrival time" */
	TimestampTz idle_tat;		/* the same, of the passes for idle commits */
	uint32		taken[PGQUE_DIRTY_WORDS];	/* the bits this pass took */
	/* the list's queues the ticker does not serve (paused, external), by bit */
	uint32		unserved[PGQUE_DIRTY_WORDS];
	int32		max_id;			/* the largest queue id the list read saw */
	bool		probed;			/* this pass's probe ran to its end */
	/* the unit at hand */
	TickQueue  *queue;
	bool		ticked;
	List	   *due;			/* queue ids a statement returned */
	const char *ids_sql;
	ArrayType  *ids;
	MemoryContext pass_cxt;
} TickerState;

static TickerState *ticker_state = NULL;
static Oid	queue_relid = InvalidOid;

/* relcache callback: pgque.queue changed (or every relation: a cache reset) */
static void
queue_list_invalidated(Datum arg, Oid relid)
{
	if (ticker_state != NULL && (relid == InvalidOid || relid == queue_relid))
		ticker_state->stale = true;
}

static int
cmp_queue_id(const void *a, const void *b)
{
	int32		x = *(const int32 *) a;
	int32		y = ((const TickQueue *) b)->id;

	return (x > y) - (x < y);
}

static TickQueue *
find_queue(TickerState *st, int32 id)
{
	if (st->nqueues == 0)
		return NULL;
	return bsearch(&id, st->queues, st->nqueues, sizeof(TickQueue), cmp_queue_id);
}

/*
 * The listed queues' event sequences and the positions their latest ticks
 * cover, for the probe (probe_sequences).  A queue known before keeps the
 * larger position (both are covered: a tick's position never falls).
 */
static void
list_sequences(TickerState *st)
{
	uint64		i;
	int			j;

	for (j = 0; j < st->nqueues; j++)
	{
		st->queues[j].seq = InvalidOid;
		st->queues[j].probed = -1;
	}
	if (SPI_execute("select q.queue_id, pg_catalog.to_regclass(q.queue_event_seq)::pg_catalog.oid,"
					"       (select t.tick_event_seq from pgque.tick t"
					"         where t.tick_queue operator(pg_catalog.=) q.queue_id"
					"         order by t.tick_id desc limit 1)"
					"  from pgque.queue q", true, 0) != SPI_OK_SELECT)
		elog(ERROR, "listing event sequences failed");
	memset(st->unserved, 0, sizeof(st->unserved));
	st->max_id = 0;
	for (i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		null;
		int32		id = DatumGetInt32(SPI_getbinval(tup, desc, 1, &null));
		TickQueue  *q = find_queue(st, id);
		Datum		d;

		st->max_id = Max(st->max_id, id);
		if (q == NULL)
		{
			/* not served here: its bit is never said covered */
			uint32		bit = (uint32) id % PGQUE_DIRTY_BITS;

			st->unserved[bit / 32] |= (uint32) 1 << (bit % 32);
			continue;
		}
		d = SPI_getbinval(tup, desc, 2, &null);
		q->seq = null ? InvalidOid : DatumGetObjectId(d);
		d = SPI_getbinval(tup, desc, 3, &null);
		if (!null)
			q->seq_seen = Max(q->seq_seen, DatumGetInt64(d));
	}
}

/*
 * Read the queue list (unit).  A queue already known keeps its idle
 * deadline and a visit it is owed; a new one is visited in this pass.
 */
static void
list_queues(void *arg)
{
	TickerState *st = arg;
	MemoryContext cxt;
	MemoryContext old;
	TickQueue  *queues;
	int			ret;
	uint64		i;
	TimestampTz now = GetCurrentTimestamp();

	/* from here on a change of pgque.queue makes the list stale again */
	st->stale = false;
	queue_relid = get_relname_relid("queue", get_namespace_oid("pgque", false));
	if (PGQUE_SQL_HAS(PGQUE_SQL_0_2_0))
		ret = SPI_execute("select queue_id, queue_name, max_lag_ms, idle_ms, last_tick"
						  "  from pgque._ticker_queues()", true, 0);
	else
	{
		/*
		 * An older SQL not yet updated (ADR 0019) has no _ticker_queues:
		 * its columns, read directly.
		 */
		ret = SPI_execute("select q.queue_id, q.queue_name,"
						  "       (pg_catalog.extract('epoch', q.queue_ticker_max_lag)"
						  "        operator(pg_catalog.*) 1000)::pg_catalog.int8,"
						  "       (pg_catalog.extract('epoch', q.queue_ticker_idle_period)"
						  "        operator(pg_catalog.*) 1000)::pg_catalog.int8,"
						  "       null::pg_catalog.timestamptz"
						  "  from pgque.queue q"
						  " where not q.queue_ticker_paused and not q.queue_external_ticker"
						  " order by q.queue_id", true, 0);
	}
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "listing queues failed: %s", SPI_result_code_string(ret));

	cxt = AllocSetContextCreate(TopMemoryContext, "pgque_bgw ticker queues",
								ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(cxt);
	queues = palloc0(sizeof(TickQueue) * Max(SPI_processed, 1));
	st->poll_ms = 60000;
	for (i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		TickQueue  *q = &queues[i];
		TickQueue  *known;
		bool		null;
		Datum		last;

		q->id = DatumGetInt32(SPI_getbinval(tup, desc, 1, &null));
		q->name = SPI_getvalue(tup, desc, 2);
		q->max_lag_ms = DatumGetInt64(SPI_getbinval(tup, desc, 3, &null));
		q->idle_ms = DatumGetInt64(SPI_getbinval(tup, desc, 4, &null));
		last = SPI_getbinval(tup, desc, 5, &null);
		known = find_queue(st, q->id);
		if (known == NULL || null)
			q->idle_due = 0;	/* new to the list: visit it now */
		else
			q->idle_due = Min(known->idle_due,
							  TimestampTzPlusMilliseconds(DatumGetTimestampTz(last), q->idle_ms));
		/* a visit still owed (a failed one, a busy row) is kept, a commit's in round 1 */
		q->visit = (q->idle_due <= now) || (known != NULL && known->visit);
		q->woken = known != NULL && known->woken;
		/* and a failing queue's backoff, and what its ticks cover */
		q->seq_seen = -1;
		if (known != NULL)
		{
			q->failures = known->failures;
			q->retry_at = known->retry_at;
			q->seq_seen = known->seq_seen;
		}
		st->poll_ms = Min(st->poll_ms, (long) q->max_lag_ms);
	}
	MemoryContextSwitchTo(old);

	if (st->list_cxt != NULL)
		MemoryContextDelete(st->list_cxt);
	st->list_cxt = cxt;
	st->queues = queues;
	st->nqueues = (int) SPI_processed;
	st->poll_ms = Max(st->poll_ms, pgque_tick_interval);
	list_sequences(st);

	/*
	 * The ticker's failures recorded and not recovered (also by a ticker
	 * before a restart): a queue no longer listed (dropped, paused, ticked
	 * by an external ticker) is no longer failing to be ticked here; the
	 * others are marked recovered at their next successful visit.  0.2.0's
	 * table: an older SQL not yet updated has none (ADR 0019).
	 */
	if (PGQUE_SQL_HAS(PGQUE_SQL_0_2_0))
	{
		ret = SPI_execute("update pgque.maint_failure f set mf_recovered_at = pg_catalog.now()"
						  " where f.mf_step operator(pg_catalog.=) '" TICK_FAIL_STEP "'"
						  "   and f.mf_recovered_at is null"
						  "   and not exists (select from pgque._ticker_queues() t"
						  "                    where t.queue_name operator(pg_catalog.=) f.mf_queue)",
						  false, 0);
		if (ret != SPI_OK_UPDATE)
			elog(ERROR, "settling ticker failures failed: %s", SPI_result_code_string(ret));
		ret = SPI_execute("select f.mf_queue from pgque.maint_failure f"
						  " where f.mf_step operator(pg_catalog.=) '" TICK_FAIL_STEP "'"
						  "   and f.mf_recovered_at is null", true, 0);
		if (ret != SPI_OK_SELECT)
			elog(ERROR, "listing ticker failures failed: %s", SPI_result_code_string(ret));
		for (i = 0; i < SPI_processed; i++)
		{
			char	   *name = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1);
			int			j;

			for (j = 0; name != NULL && j < st->nqueues; j++)
				if (strcmp(st->queues[j].name, name) == 0)
					st->queues[j].recorded = true;
		}
	}
}

/* A statement returning queue ids (unit); the ids go to st->due. */
static void
run_ids(void *arg)
{
	TickerState *st = arg;
	Oid			argtypes[1] = {INT4ARRAYOID};
	Datum		args[1];
	int			ret;
	uint64		i;
	MemoryContext old;

	args[0] = PointerGetDatum(st->ids);
	ret = SPI_execute_with_args(st->ids_sql, st->ids ? 1 : 0, argtypes, args, NULL, false, 0);
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "%s failed: %s", st->ids_sql, SPI_result_code_string(ret));
	old = MemoryContextSwitchTo(st->pass_cxt);
	for (i = 0; i < SPI_processed; i++)
	{
		bool		null;

		st->due = lappend_int(st->due,
							  DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[i],
														  SPI_tuptable->tupdesc, 1, &null)));
	}
	MemoryContextSwitchTo(old);
}

/* Run it: NIL on failure (logged and recorded by the skeleton) */
static bool
ids_unit(TickerState *st, const char *what, const char *sql, ArrayType *ids)
{
	st->ids_sql = sql;
	st->ids = ids;
	st->due = NIL;
	return pgque_run_unit(what, run_ids, st);
}

/*
 * Visit one queue (unit): the visit of tick.c, which does not wait for its
 * row (st->ticked, or st->queue->busy); an older SQL not yet updated
 * (ADR 0019) has pgque.ticker(queue) only.
 */
static void
tick_queue(void *arg)
{
	TickerState *st = arg;
	Oid			argtypes[1];
	Datum		args[1];
	int			ret;

	if (pgque_schema_current)
	{
		int64		tid;

		/*
		 * In C, the code of SQL's _tick_visit: PL/pgSQL's _tick_many ->
		 * _tick_visit -> _tick ran some fifteen statements a tick through
		 * the executor (ADR 0123).
		 */
		switch (pgque_tick_visit(st->queue->id, false, &tid))
		{
			case PGQUE_VISIT_TICKED:
				st->ticked = true;
				break;
			case PGQUE_VISIT_BUSY:
				st->queue->busy = true;
				break;
			case PGQUE_VISIT_NONE:
				break;
		}
		return;
	}
	argtypes[0] = TEXTOID;
	args[0] = CStringGetTextDatum(st->queue->name);
	ret = SPI_execute_with_args("select pgque.ticker($1)", 1, argtypes, args, NULL, false, 1);
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "ticker failed: %s", SPI_result_code_string(ret));
	if (SPI_processed == 1)
	{
		bool		null;

		(void) SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &null);
		st->ticked = !null;
	}
}

/*
 * The sequence probe (unit; ADR 0031, 0103): each listed queue's event
 * sequence read by its OID, against the position its latest tick is known
 * to cover; a queue whose sequence moved past it is visited, and its visit
 * (whose _tick_due asks the tick table) makes the position read covered.
 * A false "moved" costs one visit that finds nothing due; "not moved" is
 * only said of a position a tick covers, as _ticks_seq_moved said it.  A
 * sequence whose lock is taken (a drop_queue at work: ADR 0040) is not
 * waited for: the next probe reads it.  The lock is the one reading a
 * sequence takes, held to the end of the unit.
 */
static void
probe_sequences(void *arg)
{
	TickerState *st = arg;
	int			i;

	for (i = 0; i < st->nqueues; i++)
	{
		TickQueue  *q = &st->queues[i];
		LOCAL_FCINFO(fcinfo, 1);
		Datum		pos;

		q->probed = -1;
		q->covered = false;
		if (!OidIsValid(q->seq))
		{
			/* no sequence of that name: its visit says what is wrong */
			q->visit = true;
			continue;
		}
		if (!ConditionalLockRelationOid(q->seq, RowExclusiveLock))
			continue;
		if (!SearchSysCacheExists1(RELOID, ObjectIdGetDatum(q->seq)))
			continue;			/* dropped since the list was read */
		InitFunctionCallInfoData(*fcinfo, NULL, 1, InvalidOid, NULL, NULL);
		fcinfo->args[0].value = ObjectIdGetDatum(q->seq);
		fcinfo->args[0].isnull = false;
		pos = pg_sequence_last_value(fcinfo);
		q->probed = fcinfo->isnull ? 0 : DatumGetInt64(pos);
		if (q->probed > q->seq_seen)
			q->visit = true;
		else
			q->covered = true;
	}
	st->probed = true;
}

/*
 * After a pass whose probe ran: publish which queues it found covered, for
 * the watchdog (ADR 0103, pgque._ticker_covered): a queue's bit when every
 * listed queue of that bit was covered (its sequence read and not moved,
 * or moved and visited since) and no queue the list saw unserved has it.
 */
static void
publish_probe(TickerState *st, TimestampTz at)
{
	uint32		covered[PGQUE_DIRTY_WORDS];
	uint32		not_covered[PGQUE_DIRTY_WORDS];
	int			i;
	int			w;

	memset(covered, 0, sizeof(covered));
	memset(not_covered, 0, sizeof(not_covered));
	for (i = 0; i < st->nqueues; i++)
	{
		uint32		bit = (uint32) st->queues[i].id % PGQUE_DIRTY_BITS;

		if (st->queues[i].covered)
			covered[bit / 32] |= (uint32) 1 << (bit % 32);
		else
			not_covered[bit / 32] |= (uint32) 1 << (bit % 32);
	}
	for (w = 0; w < PGQUE_DIRTY_WORDS; w++)
		covered[w] &= ~(not_covered[w] | st->unserved[w]);
	LWLockAcquire(pgque_shared->lock, LW_EXCLUSIVE);
	pgque_worker_db->probe_at = at;
	pgque_worker_db->probe_max_id = st->max_id;
	memcpy(pgque_worker_db->probe_covered, covered, sizeof(covered));
	LWLockRelease(pgque_shared->lock);
}

/* A queue was visited: ticked or not, when is its idle tick due? */
static void
visited(TickQueue *q, bool ticked, TimestampTz now)
{
	q->visit = false;
	q->failures = 0;
	q->retry_at = 0;
	/* the position this pass's probe read is covered by its latest tick now */
	if (q->probed >= 0)
	{
		q->seq_seen = Max(q->seq_seen, q->probed);
		q->covered = true;
	}
	q->probed = -1;
	/*
	 * Ticked now, or found not due at its idle deadline (another ticker
	 * call ticked it since): one idle period from now.  Otherwise a commit
	 * marked it and nothing was new: the deadline stands.
	 */
	if (ticked || q->idle_due <= now)
		q->idle_due = TimestampTzPlusMilliseconds(now, q->idle_ms);
}

/* a failing queue: recorded (unit) as the failed step "tick" of the queue */
static void
record_tick_failure(void *arg)
{
	TickerState *st = arg;

	pgque_record_step(TICK_FAIL_STEP, st->queue->name, true);
}

/* ... and recovered (unit) */
static void
record_tick_ok(void *arg)
{
	TickerState *st = arg;

	pgque_record_step(TICK_FAIL_STEP, st->queue->name, false);
}

/* is q backing off after a failure, not to be visited yet? */
static bool
backing_off(const TickQueue *q, TimestampTz now)
{
	return q->failures > 0 && now < q->retry_at;
}

/*
 * A visit of st->queue failed: it backs off, the poll doubled per failure
 * in a row up to TICK_BACKOFF_MAX_MS (q->visit stays: again then); from
 * its TICK_FAIL_RECORD_AFTER-th failure in a row it is recorded.
 */
static void
visit_failed(TickerState *st)
{
	TickQueue  *q = st->queue;
	int64		delay = Max(st->poll_ms, 1);
	int			k;

	if (pgque_unit_abandoned)
	{
		/* not a failure of the queue: its SQL was updated or dropped */
		st->retry = true;
		return;
	}
	if (q->failures < PG_INT32_MAX)
		q->failures++;
	for (k = 1; k < q->failures && delay < TICK_BACKOFF_MAX_MS; k++)
		delay *= 2;
	delay = Min(delay, TICK_BACKOFF_MAX_MS);
	q->retry_at = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), delay);
	if (q->failures >= TICK_FAIL_RECORD_AFTER && PGQUE_SQL_HAS(PGQUE_SQL_0_2_0) &&
		pgque_run_unit("recording a ticker failure", record_tick_failure, st))
		q->recorded = true;
}

/*
 * Is q to be visited in this round of the pass (visit_queues)?  Round 1
 * takes the queues a commit woke, round 2 the others: a woken queue is
 * never visited in round 2, where it rode in a chunk of idle ticks, behind
 * them and in their transaction (ADR 0136).
 */
static inline bool
wanted(const TickQueue *q, bool woken_round)
{
	return q->visit && q->woken == woken_round;
}

/*
 * Does q go into this round's _tick_many chunk?  Not a failing queue (one
 * by one, below the chunks), not a busy row (locked elsewhere in this
 * pass: at the poll).  Asked when the chunk is made and again after it
 * ran, for the queues it did not tick.
 */
static inline bool
chunked(const TickQueue *q, bool woken_round)
{
	return wanted(q, woken_round) && q->failures == 0 && !q->busy;
}

/*
 * The commit that woke the ticker is served: a round of the pass over
 * other queues (idle ticks, the probe's) stops between two of its units
 * when a commit set the wake flag since the pass began; what it leaves
 * marked the next pass visits, after that commit's queues (ADR 0108).
 * Each round runs at least one unit first, so that a storm of commits
 * delays the other queues' visits, never starves them.
 */
static bool
commit_waits(void)
{
	return pg_atomic_read_u32(&pgque_worker_db->wake) != 0;
}

/*
 * Visit the marked queues of a round: those a commit woke (woken_round),
 * or the others: one at a time when few, else in chunks of TICK_CHUNK per
 * transaction (_tick_many), a chunk that fails one at a time.  A round of
 * the other queues stops early for a commit that waits (commit_waits).
 * -> the number ticked; *nvisits the number visited.
 */
static int
visit_queues(TickerState *st, bool woken_round, int *nvisits)
{
	int			nticks = 0;
	int			marked = 0;
	int			units = 0;		/* units this round ran */
	int			i;
	char		what[NAMEDATALEN + 32];

	for (i = 0; i < st->nqueues; i++)
		if (wanted(&st->queues[i], woken_round))
			marked++;
	*nvisits = marked;

	/* an older SQL not yet updated has no _tick_many (ADR 0019) */
	if (marked > VISIT_ONE_BY_ONE && PGQUE_SQL_HAS(PGQUE_SQL_0_2_0))
	{
		Datum	   *ids = palloc(sizeof(Datum) * TICK_CHUNK);
		int			from = 0;

		while (from < st->nqueues)
		{
			int			n = 0;
			int			to;
			TimestampTz now;
			ListCell   *lc;

			if (!woken_round && units > 0 && commit_waits())
				return nticks;
			for (to = from; to < st->nqueues && n < TICK_CHUNK; to++)
				if (chunked(&st->queues[to], woken_round))
					ids[n++] = Int32GetDatum(st->queues[to].id);
			if (n > 0)
				units++;
			if (n > 0 &&
				ids_unit(st, "ticking queues", "select pgque._tick_many($1)",
						 construct_array(ids, n, INT4OID, sizeof(int32), true, TYPALIGN_INT)))
			{
				now = GetCurrentTimestamp();
				foreach(lc, st->due)
				{
					int32		id = lfirst_int(lc);
					TickQueue  *q = find_queue(st, id < 0 ? -id : id);

					if (q == NULL)
						continue;
					if (id < 0)
					{
						/* its row is locked: stays marked, at the poll */
						q->busy = true;
						st->retry = true;
						continue;
					}
					visited(q, true, now);
					nticks++;
				}
				for (i = from; i < to; i++)
					if (chunked(&st->queues[i], woken_round))
						visited(&st->queues[i], false, now);
			}
			/* a failed chunk stays marked: one by one below */
			from = to;
		}
	}

	for (i = 0; i < st->nqueues; i++)
	{
		TickQueue  *q = &st->queues[i];

		if (!wanted(q, woken_round) || q->busy)
			continue;
		st->queue = q;
		if (backing_off(q, GetCurrentTimestamp()))
			continue;			/* q->visit stays: at its retry_at */
		/* at least one unit per round: a commit storm delays, never starves */
		if (!woken_round && units > 0 && commit_waits())
			break;
		units++;
		st->ticked = false;
		snprintf(what, sizeof(what), "ticking queue \"%s\"", q->name);
		if (!pgque_run_unit(what, tick_queue, st))
		{
			visit_failed(st);
			continue;
		}
		/* its failure recorded: recovered */
		if (q->recorded && !q->busy &&
			pgque_run_unit("recording a ticker recovery", record_tick_ok, st))
			q->recorded = false;
		if (q->busy)
		{
			st->retry = true;	/* its row is locked: again at the poll */
			continue;
		}
		visited(q, st->ticked, GetCurrentTimestamp());
		if (st->ticked)
			nticks++;
	}
	return nticks;
}

static void *
ticker_init(void)
{
	TickerState *st = MemoryContextAllocZero(TopMemoryContext, sizeof(TickerState));

	st->stale = true;
	/* what committed while no ticker ran is known to nobody: probe all */
	st->probe_all = true;
	st->poll_ms = 1000;
	st->next_idle = DT_NOEND;
	st->next_retry = DT_NOEND;
	ticker_state = st;
	CacheRegisterRelcacheCallback(queue_list_invalidated, (Datum) 0);
	/* an earlier ticker's probe may have been of another install's queues */
	LWLockAcquire(pgque_shared->lock, LW_EXCLUSIVE);
	pgque_worker_db->probe_at = 0;
	LWLockRelease(pgque_shared->lock);
	return st;
}

/* Take the dirty bits; true when any was set. */
static bool
take_dirty(TickerState *st)
{
	bool		any = false;
	int			w;

	for (w = 0; w < PGQUE_DIRTY_WORDS; w++)
	{
		st->taken[w] = pg_atomic_read_u32(&pgque_worker_db->dirty[w]) == 0 ? 0 :
			pg_atomic_exchange_u32(&pgque_worker_db->dirty[w], 0);
		if (st->taken[w] != 0)
			any = true;
	}
	return any;
}

/* Mark the queues of the taken bits for a visit; false if a bit names none. */
static bool
mark_dirty_queues(TickerState *st)
{
	bool		all_known = true;
	int			w;
	int			i;
	bool		hit[PGQUE_DIRTY_BITS / 32];

	memset(hit, 0, sizeof(hit));
	for (i = 0; i < st->nqueues; i++)
	{
		uint32		bit = (uint32) st->queues[i].id % PGQUE_DIRTY_BITS;

		if (st->taken[bit / 32] & ((uint32) 1 << (bit % 32)))
		{
			st->queues[i].visit = true;
			st->queues[i].woken = true;
			hit[bit / 32] = true;
		}
	}
	for (w = 0; w < PGQUE_DIRTY_WORDS; w++)
		if (st->taken[w] != 0 && !hit[w])
			all_known = false;
	return all_known;
}

/*
 * The rate limit (ADR 0087).  Passes for the commits that came while the
 * ticker was busy or had just passed average at most one per tick_interval,
 * in bursts of up to TICK_BURST (a generic cell rate algorithm: a plain
 * "tick_interval after the last pass" made commits that come at random wait
 * for the deadline of the one before, ADR 0031).  A commit that finds the
 * ticker idle, no pass for at least the floor (tick_interval /
 * TICK_IDLE_FLOOR_DIV), is ticked at once, charged to a limit of its own of
 * the same rate: at a rate near one commit per tick_interval one limit alone
 * runs out of credit and the tail waits a whole interval (p99 10.6 ms at 100
 * commits/s, benchmark/tick_limit_sim.py), while ticking each isolated
 * commit writes no more tick rows than there are commits.  Together at most
 * two passes per tick_interval; under a dense load the commits keep coming
 * within the floor and the first limit alone holds (100 passes/s at 10,000
 * commits/s, as before).
 */
#define TICK_BURST 3
#define TICK_IDLE_FLOOR_DIV 5

/* when a limit whose theoretical arrival time is tat lets a pass start */
static TimestampTz
limit_opens_at(TimestampTz tat)
{
	return TimestampTzPlusMilliseconds(tat, -(int64) (TICK_BURST - 1) * pgque_tick_interval);
}

static TimestampTz
pass_allowed_at(TickerState *st)
{
	return limit_opens_at(st->pass_tat);
}

/*
 * The pending wake-up came to an idle ticker: the commit that set it came
 * the floor or more after the last pass ended (wake.c writes its time).
 * The commit's time, not when the ticker saw it: on a loaded machine the
 * ticker may see a commit made just after its pass late, and would take it
 * for one that found it idle.
 */
static bool
woken_idle(TickerState *st, TimestampTz *at)
{
	*at = (TimestampTz) pg_atomic_read_u64(&pgque_worker_db->wake_at);
	return *at >= st->last_end + (TimestampTz) pgque_tick_interval * 1000 / TICK_IDLE_FLOOR_DIV &&
		*at >= limit_opens_at(st->idle_tat);
}

static void
ticker_pass_body(TickerState *st, MemoryContext cxt, PgqueStateGate *gate)
{
	TimestampTz now;
	int			nticks;
	int			nvisits;
	int			i;
	bool		any_dirty;

	/* a pass for a commit that found the ticker idle has a limit of its own */
	TimestampTz woken_at;
	bool		charged = !(pg_atomic_read_u32(&pgque_worker_db->wake) != 0 &&
							woken_idle(st, &woken_at));

	/*
	 * Commits from here on wake the next pass, and mark their queues.  An
	 * exchange, not a write: a write has no barrier, and the reads of the
	 * dirty bits below could pass it (a store then a load, reordered even
	 * on x86); a commit that set its bit after those reads and then found
	 * the flag still 1 would neither be taken nor wake anyone (wake.c
	 * sets the bit, then exchanges the flag).
	 */
	(void) pg_atomic_exchange_u32(&pgque_worker_db->wake, 0);
	any_dirty = take_dirty(st);
	st->last_pass = now = GetCurrentTimestamp();
	if (charged)
		st->pass_tat = TimestampTzPlusMilliseconds(Max(st->pass_tat, now), pgque_tick_interval);
	else
		st->idle_tat = TimestampTzPlusMilliseconds(Max(st->idle_tat, now), pgque_tick_interval);
	st->pass_cxt = cxt;
	st->retry = false;

	/*
	 * The state check (ADR 0022) runs in the pass's first unit, whichever
	 * it is, before that unit's work (the gate, ADR 0118): a held state
	 * stops the pass there.  A list known stale (a unit of an earlier pass
	 * took the invalidation) is read first.
	 */
	if (st->stale && !pgque_run_unit("listing queues", list_queues, st))
	{
		if (gate->held)
			goto held;
		st->retry = true;
		st->probe_all = true;
		st->next_probe = TimestampTzPlusMilliseconds(now, st->poll_ms);
		return;
	}
	/*
	 * A queue a commit woke stays woken while its visit is owed (its row
	 * was busy, its visit failed, the probe found its sequence moved after
	 * its visit): the next round 1 visits it, not a round 2 (ADR 0136).
	 */
	for (i = 0; i < st->nqueues; i++)
		st->queues[i].woken = st->queues[i].woken && st->queues[i].visit;

	/* a bit no queue of the list has: one created since; read it again */
	if (any_dirty && !mark_dirty_queues(st) &&
		pgque_run_unit("listing queues", list_queues, st))
		(void) mark_dirty_queues(st);
	if (gate->held)
		goto held;

	for (i = 0; i < st->nqueues; i++)
		st->queues[i].busy = false;

	/*
	 * The queues the commits marked first, before the probe and the idle
	 * ticks: a pass that also ticked 100 idle queues (64 a transaction, in
	 * id order) or probed their sequences held the busy queue's tick
	 * behind them (ADR 0108).
	 */
	nticks = visit_queues(st, true, &nvisits);
	if (gate->held)
		goto held;

	/*
	 * The invalidations are taken at a unit's start: a pgque.queue changed
	 * since the last pass is seen in this pass's first unit, not before it
	 * (there is no unit of its own for the check any more).  Seen in round
	 * 1, the list is read again before the other rounds; seen later, the
	 * next pass comes at the poll and reads it first (ticker_next_pass).
	 */
	if (st->stale && !pgque_run_unit("listing queues", list_queues, st))
	{
		if (gate->held)
			goto held;
		st->retry = true;
	}

	/* round 1 visited the woken queues (or left them owed to the next one) */
	for (i = 0; i < st->nqueues; i++)
	{
		if (!st->queues[i].woken && (st->probe_all || st->queues[i].idle_due <= now))
			st->queues[i].visit = true;
	}
	st->probe_all = false;

	/* rows written into the event tables directly: every probe interval */
	if (now >= st->next_probe)
	{
		st->next_probe = TimestampTzPlusMilliseconds(now, pgque_ticker_probe_interval * 1000L);
		st->probed = false;
		if (!pgque_run_unit("probing event sequences", probe_sequences, st))
			st->probed = false;
		if (gate->held)
			goto held;
	}

	{
		int			more;

		nticks += visit_queues(st, false, &more);
		nvisits += more;
	}
	if (gate->held)
		goto held;
	if (st->probed)
	{
		publish_probe(st, now);
		st->probed = false;
	}

	st->next_idle = DT_NOEND;
	st->next_retry = DT_NOEND;
	for (i = 0; i < st->nqueues; i++)
	{
		/*
		 * a failing queue's idle deadline has passed and stays so: its
		 * retry_at is its deadline (the rate limit alone made the poll of a
		 * failing queue one per tick_interval, ADR 0100)
		 */
		if (st->queues[i].failures > 0 && st->queues[i].visit)
			st->next_retry = Min(st->next_retry, st->queues[i].retry_at);
		else
		{
			st->next_idle = Min(st->next_idle, st->queues[i].idle_due);
			/* a woken queue the probe marked again: its round 1 at the poll */
			if (st->queues[i].woken && st->queues[i].visit)
				st->retry = true;
		}
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
	if (gate->held)
		goto held;
	pgque_worker_report("tick_interval=%dms probe=%ds queues=%d last pass visited %d, ticked %d",
						pgque_tick_interval, pgque_ticker_probe_interval, st->nqueues,
						nvisits, nticks);
	return;

held:
	/* nothing done: the next pass, at the poll, probes everything */
	pgque_state_gate_report(gate);
	st->probe_all = true;
	st->next_probe = TimestampTzPlusMilliseconds(now, st->poll_ms);
}

static void
ticker_pass(void *state, MemoryContext cxt)
{
	TickerState *st = state;
	/* the pass's state check, armed for its first unit (ADR 0118; an
	 * older SQL without the check: check_held says whole) */
	PgqueStateGate gate = {true, false, NULL, cxt};
	PgqueStateGate *outer = pgque_state_gate;

	/* a pass of the combined worker may run between another loop's units */
	pgque_state_gate = &gate;
	ticker_pass_body(st, cxt, &gate);
	pgque_state_gate = outer;
	/* the idle floor counts from here */
	st->last_end = GetCurrentTimestamp();
}

/*
 * The next pass: at once when a commit woke an idle ticker, as soon as the
 * rate limit allows when a commit woke a busy one; otherwise the earliest
 * idle tick, the next sequence probe, or the poll after a failed visit or
 * while the watchdog is down.
 */
static TimestampTz
ticker_next_pass(void *state)
{
	TickerState *st = state;
	TimestampTz next;

	if (pg_atomic_read_u32(&pgque_worker_db->wake) != 0)
	{
		TimestampTz at;

		if (woken_idle(st, &at))
			return at;
		return pass_allowed_at(st);
	}
	next = Min(st->next_probe, st->next_idle);
	/* a failing queue: at its retry_at (ADR 0100) */
	next = Min(next, st->next_retry);
	/*
	 * a failed visit or list; or the watchdog is down and its worker_down
	 * alert is this loop's to write (ADR 0028): at the poll
	 */
	if (st->retry || st->stale || st->probe_all || pgque_worker_alerts_due(false))
		next = Min(next, TimestampTzPlusMilliseconds(st->last_pass, st->poll_ms));
	return Max(next, pass_allowed_at(st));
}

PG_FUNCTION_INFO_V1(pgque_ticker_covered);

/*
 * pgque._ticker_covered(i_queue_id int4, i_since timestamptz) -> boolean:
 * did this database's ticker, at or after i_since, read the queue's event
 * sequence in a probe and find it covered by the queue's latest tick (or
 * tick it)?  False when it cannot say (no shared memory, no such probe,
 * a queue id above those its list had, a bit shared with a queue it did
 * not cover or serve).  ADR 0103: the watchdog's ticker_stalled reads no
 * sequence of a covered queue.
 */
Datum
pgque_ticker_covered(PG_FUNCTION_ARGS)
{
	int32		id = PG_GETARG_INT32(0);
	TimestampTz since = PG_GETARG_TIMESTAMPTZ(1);
	bool		covered = false;
	PgqueDb    *db;

	if (pgque_shared == NULL || id < 0)
		PG_RETURN_BOOL(false);
	LWLockAcquire(pgque_shared->lock, LW_SHARED);
	db = pgque_find_db(MyDatabaseId);
	if (db != NULL && db->probe_at != 0 && db->probe_at >= since && id <= db->probe_max_id)
	{
		uint32		bit = (uint32) id % PGQUE_DIRTY_BITS;

		covered = (db->probe_covered[bit / 32] & ((uint32) 1 << (bit % 32))) != 0;
	}
	LWLockRelease(pgque_shared->lock);
	PG_RETURN_BOOL(covered);
}

/* is the extension still there? at most once a second */
const PgqueLoop pgque_ticker_loop = {
	.kind = PGQUE_TICKER,
	.init = ticker_init,
	.pass = ticker_pass,
	.next_pass = ticker_next_pass,
	.exit_check_ms = 1000,
};
