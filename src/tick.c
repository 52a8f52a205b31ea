/*
 * tick.c
 *		The tick of one queue, and the visit that decides whether to write
 *		it (ADR 0123).
 *
 * One implementation for every caller: the ticker worker calls
 * pgque_tick_visit directly; SQL reaches the same code through
 * pgque._tick_visit (pgque.ticker(), _tick_if_due, _tick_many, the
 * pg_cron and manual fallback) and pgque._tick (a caller holding the
 * queue row), so their ticks cannot differ.  The rules stay where they
 * were written once: whether a tick is due is pgque._tick_due_after and
 * whether the worker serves the queue pgque._ticked_by_worker (SQL, which
 * the statements below inline); the snapshot rule (tick_snapshot) and the
 * serialization check moved here from PL/pgSQL, and SQL calls them here.
 *
 * A visit, in as few statements as its order allows (PL/pgSQL ran some
 * fifteen through the executor a tick):
 *   the queue's DDL lock, tried shared (ADR 0020, 0040): a queue being
 *   dropped is skipped;
 *   the look and the row lock in one statement: a logged queue the worker
 *   serves and that is due is locked FOR NO KEY UPDATE (SKIP LOCKED unless
 *   the caller waits); a row whose quals fail is never locked, so a queue
 *   with nothing to do still costs no write;
 *   when that locked nothing, the look alone tells why: not due, not
 *   served or gone (no tick), an unlogged queue (its gate first, ADR 0068,
 *   then the lock of its own statement), or a row locked elsewhere;
 *   the tick: the look again under the lock in a statement of its own
 *   (its snapshot sees every tick committed before the lock), the
 *   snapshot and the serialization check, the insert, the cooperative
 *   groups' windows (pgque._coop_sync, ADR 0017), the notification and
 *   the wake-up of receive_wait at commit (ADR 0102).
 * Every statement is fully qualified and kept for the process on a
 * generic plan (ADR 0118: a custom plan per visit was a third of a tick),
 * every one of them prepared and planned at the process's first visit
 * (pgque_tick_warm, ADR 0136), not at its first use.
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "tcop/utility.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/lsyscache.h"
#include "utils/plancache.h"
#include "utils/resowner.h"

#include "compat.h"
#include "kept_plan.h"
#include "locks.h"
#include "tick.h"
#include "wake.h"


static PgqueKeptPlan *look_lock_skip_plan = NULL;
static PgqueKeptPlan *look_lock_wait_plan = NULL;
static PgqueKeptPlan *look_plan = NULL;
static PgqueKeptPlan *gate_plan = NULL;
static PgqueKeptPlan *lock_skip_plan = NULL;
static PgqueKeptPlan *lock_wait_plan = NULL;
static PgqueKeptPlan *tick_read_plan = NULL;
static PgqueKeptPlan *insert_plan = NULL;
static PgqueKeptPlan *coop_plan = NULL;

/* the latest tick of queue q, as a pgque.tick (NULL before the first) */
#define LAST_TICK_JOIN \
	"  left join lateral (select t from pgque.tick t" \
	"                      where t.tick_queue operator(pg_catalog.=) q.queue_id" \
	"                      order by t.tick_id desc limit 1) l on true"

/* the queue q is one this ticker ticks and a tick of it is due after l.t
 * (the rules are SQL's: _ticked_by_worker, _tick_due_after) */
#define DUE_FOR_WORKER \
	"(pgque._ticked_by_worker(q) and pgque._tick_due_after(q, l.t))"

/* the queue's cooperative groups (ADR 0017), of the queue id qid */
#define COOP_GROUPS(qid) \
	" from pgque.subscription s where s.sub_queue operator(pg_catalog.=) " qid \
	"   and s.sub_role operator(pg_catalog.=) 'coop_main'"

/*
 * The visit's statements, each kept in its slot above.  The locking ones
 * end in their FOR ... clause: kept twice, waiting and SKIP LOCKED.
 */
#define LOOK_AND_LOCK_SQL \
	"select from pgque.queue q" LAST_TICK_JOIN \
	" where q.queue_id operator(pg_catalog.=) $1 and not q.queue_unlogged" \
	"   and " DUE_FOR_WORKER \
	"   for no key update of q"
#define LOOK_SQL \
	"select q.queue_unlogged," \
	"       case when q.queue_unlogged and not $2 then null" \
	"            else " DUE_FOR_WORKER " end" \
	"  from pgque.queue q" LAST_TICK_JOIN \
	" where q.queue_id operator(pg_catalog.=) $1"
#define GATE_SQL \
	"select pgque._unlogged_gate(q, $2) from pgque.queue q" \
	" where q.queue_id operator(pg_catalog.=) $1"
/* the plain lock: the row alone, once the look said the queue is due */
#define LOCK_SQL \
	"select from pgque.queue q where q.queue_id operator(pg_catalog.=) $1" \
	"   for no key update"
#define TICK_READ_SQL \
	"select not $2 or " DUE_FOR_WORKER "," \
	"       q.queue_name, q.queue_tick_seq," \
	"       greatest(pgque._event_seq_pos(q), coalesce((l.t).tick_event_seq, 0))," \
	"       (l.t).tick_snapshot," \
	"       exists (select" COOP_GROUPS("q.queue_id") ")," \
	"       pgque._tick_snapshot()" \
	"  from pgque.queue q" LAST_TICK_JOIN \
	" where q.queue_id operator(pg_catalog.=) $1"
#define INSERT_SQL \
	"insert into pgque.tick (tick_queue, tick_id, tick_time, tick_snapshot, tick_event_seq)" \
	" values ($1, pg_catalog.nextval($2::pg_catalog.regclass), pg_catalog.now(), $3, $4)" \
	" returning tick_id"
#define COOP_SQL "select pgque._coop_sync(s.sub_id)" COOP_GROUPS("$1")

/* their argument types: (queue id), (queue id, flag), the insert's */
static Oid	id_types[1] = {INT4OID};
static Oid	id_flag_types[2] = {INT4OID, BOOLOID};
static Oid	insert_types[4] = {INT4OID, TEXTOID, PG_SNAPSHOTOID, INT8OID};

static PgqueKeptPlan *
keep(PgqueKeptPlan **slot, const char *sql, int nargs, Oid *argtypes)
{
	if (*slot == NULL)
		*slot = pgque_kept_plan_prepare(sql, nargs, argtypes, CURSOR_OPT_GENERIC_PLAN);
	return *slot;
}

/* the kept plan of a locking statement sql (of the queue id), waiting or SKIP LOCKED */
static PgqueKeptPlan *
keep_lock(PgqueKeptPlan **wait_slot, PgqueKeptPlan **skip_slot, const char *sql, bool wait)
{
	if (wait)
		return keep(wait_slot, sql, 1, id_types);
	if (*skip_slot == NULL)
		keep(skip_slot, psprintf("%s skip locked", sql), 1, id_types);
	return *skip_slot;
}

/*
 * Each statement of the visit, kept in its slot: the one place that pairs
 * a slot with its text and argument types, for the visit and for
 * pgque_tick_warm alike.
 */
static PgqueKeptPlan *
look_and_lock_stmt(bool wait)
{
	return keep_lock(&look_lock_wait_plan, &look_lock_skip_plan, LOOK_AND_LOCK_SQL, wait);
}

static PgqueKeptPlan *
look_stmt(void)
{
	return keep(&look_plan, LOOK_SQL, 2, id_flag_types);
}

static PgqueKeptPlan *
gate_stmt(void)
{
	return keep(&gate_plan, GATE_SQL, 2, id_flag_types);
}

static PgqueKeptPlan *
lock_stmt(bool wait)
{
	return keep_lock(&lock_wait_plan, &lock_skip_plan, LOCK_SQL, wait);
}

static PgqueKeptPlan *
tick_read_stmt(void)
{
	return keep(&tick_read_plan, TICK_READ_SQL, 2, id_flag_types);
}

static PgqueKeptPlan *
insert_stmt(void)
{
	return keep(&insert_plan, INSERT_SQL, 4, insert_types);
}

static PgqueKeptPlan *
coop_stmt(void)
{
	return keep(&coop_plan, COOP_SQL, 1, id_types);
}

/*
 * A locking statement (look_and_lock_stmt, lock_stmt: one text kept twice,
 * waiting for a row locked elsewhere or skipping it) run for args.
 * -> whether it locked a row.
 */
static bool
lock_row(PgqueKeptPlan *kp, Datum *args)
{
	int			ret;

	ret = pgque_kept_plan_execute(kp, args, NULL, false, 1);
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "pgque_bgw: locking a queue row failed: %s", SPI_result_code_string(ret));
	return SPI_processed == 1;
}

static void
check_ret(int ret, int expected, const char *what)
{
	if (ret != expected)
		elog(ERROR, "pgque_bgw: %s failed: %s", what, SPI_result_code_string(ret));
}

/*
 * The snapshot of a tick taken now (the rule of SPEC §2).  A transaction
 * does not list its own xid as in progress in its snapshot, so events it
 * inserted would count as committed "before" a tick taken in the same
 * transaction; it is added, so that such events fall into the next tick.
 */
static Datum
tick_snapshot(void)
{
	LOCAL_FCINFO(fcinfo, 0);
	Datum		d;
	PgqueSnapshot *s;
	PgqueSnapshot *r;
	FullTransactionId me = GetTopFullTransactionIdIfAny();
	uint32		i;
	uint32		n = 0;
	bool		added = false;

	InitFunctionCallInfoData(*fcinfo, NULL, 0, InvalidOid, NULL, NULL);
	d = pg_current_snapshot(fcinfo);
	if (!FullTransactionIdIsValid(me))
		return d;
	s = (PgqueSnapshot *) DatumGetPointer(d);
	if (VARSIZE(s) != PGQUE_SNAPSHOT_SIZE(s->nxip))
		elog(ERROR, "pgque_bgw: unexpected pg_snapshot layout");
	if (!FullTransactionIdPrecedes(me, s->xmax))
		return d;

	r = palloc(PGQUE_SNAPSHOT_SIZE(s->nxip + 1));
	r->xmin = FullTransactionIdPrecedes(me, s->xmin) ? me : s->xmin;
	r->xmax = s->xmax;
	/* the xids in order, without duplicates (pg_snapshot_in's form) */
	for (i = 0; i < s->nxip; i++)
	{
		if (!added && !FullTransactionIdFollows(me, s->xip[i]))
		{
			if (!FullTransactionIdEquals(me, s->xip[i]))
				r->xip[n++] = me;
			added = true;
		}
		r->xip[n++] = s->xip[i];
	}
	if (!added)
		r->xip[n++] = me;
	r->nxip = n;
	SET_VARSIZE(r, PGQUE_SNAPSHOT_SIZE(n));
	return PointerGetDatum(r);
}

static FullTransactionId
snapshot_xmax(Datum d)
{
	PgqueSnapshot *s = (PgqueSnapshot *) PG_DETOAST_DATUM(d);

	if (VARSIZE(s) != PGQUE_SNAPSHOT_SIZE(s->nxip))
		elog(ERROR, "pgque_bgw: unexpected pg_snapshot layout");
	return s->xmax;
}

/*
 * The tick of queue queue_id, whose row the caller holds locked (inside
 * SPI).  check: only when still served by the ticker and due, read again
 * under the lock.  -> the tick id; 0 when check found nothing due.
 */
static int64
tick_locked(int32 queue_id, bool check)
{
	Datum		args[4];
	HeapTuple	tup;
	TupleDesc	desc;
	bool		null;
	bool		last_null;
	bool		coop;
	Datum		last_snap;
	Datum		snap;
	Datum		channel;
	char	   *seq;
	char	   *name;
	int64		event_seq;
	int64		tid;
	int			ret;

	args[0] = Int32GetDatum(queue_id);
	args[1] = BoolGetDatum(check);
	ret = pgque_kept_plan_execute(tick_read_stmt(), args, NULL, false, 1);
	check_ret(ret, SPI_OK_SELECT, "reading the queue to tick");
	if (SPI_processed != 1)
	{
		if (check)
			return 0;
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("queue with id %d does not exist", queue_id)));
	}
	tup = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;
	if (!DatumGetBool(SPI_getbinval(tup, desc, 1, &null)) || null)
		return 0;
	name = SPI_getvalue(tup, desc, 2);
	seq = SPI_getvalue(tup, desc, 3);
	event_seq = DatumGetInt64(SPI_getbinval(tup, desc, 4, &null));
	last_snap = SPI_getbinval(tup, desc, 5, &last_null);
	coop = DatumGetBool(SPI_getbinval(tup, desc, 6, &null));

	/*
	 * The tick's snapshot is the statement's above, taken after the row
	 * lock (as PL/pgSQL's _tick took it in a statement of its own): the
	 * unit's or the calling statement's snapshot may be older than the
	 * lock, and than a tick committed while it was waited for.  Under the
	 * lock no other tick of the queue commits after it, so the last tick
	 * read is the latest.
	 */
	snap = SPI_getbinval(tup, desc, 7, &null);
	if (!last_null &&
		FullTransactionIdPrecedes(snapshot_xmax(snap), snapshot_xmax(last_snap)))
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("cannot tick queue \"%s\": this transaction's snapshot is older than the last tick",
						name),
				 errhint("Call the ticker in a READ COMMITTED transaction.")));

	args[1] = CStringGetTextDatum(seq);
	args[2] = snap;
	args[3] = Int64GetDatum(event_seq);
	ret = pgque_kept_plan_execute(insert_stmt(), args, NULL, false, 1);
	check_ret(ret, SPI_OK_INSERT_RETURNING, "inserting a tick");
	tid = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &null));

	/*
	 * The queue's cooperative groups get the new window (ADR 0017); a
	 * queue without one (read under the lock above) runs no statement.  A
	 * group registered since is synced at the next tick (its windows are
	 * cut from its high-water mark on, as many as there are ticks).
	 */
	if (coop)
	{
		ret = pgque_kept_plan_execute(coop_stmt(), args, NULL, false, 0);
		check_ret(ret, SPI_OK_SELECT, "syncing cooperative groups");
	}

	/* pg_notify itself: its checks (recovery, the channel's length) */
	channel = CStringGetTextDatum(psprintf("pgque_%s", name));
	(void) DirectFunctionCall2(pg_notify, channel,
							   CStringGetTextDatum(psprintf(INT64_FORMAT, tid)));
	pgque_tick_wakes(queue_id);
	return tid;
}

/* the look: -1 no row, else *unlogged and the due rule (NULL: not asked) */
static int
look(int32 queue_id, bool gated, bool *unlogged)
{
	Datum		args[2] = {Int32GetDatum(queue_id), BoolGetDatum(gated)};
	bool		null;
	bool		due;
	int			ret;

	ret = pgque_kept_plan_execute(look_stmt(), args, NULL, false, 1);
	check_ret(ret, SPI_OK_SELECT, "looking at a queue");
	if (SPI_processed != 1)
		return -1;
	*unlogged = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &null));
	due = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &null));
	if (null)
		return 2;
	return due ? 1 : 0;
}

/*
 * The look and the lock in one statement: the row of a logged queue that
 * the worker serves and that is due is locked; a row that is not is never
 * locked (its quals fail below the lock), so a queue with nothing to do
 * costs no write, as a look before the lock.  -> whether it is locked.
 */
static bool
look_and_lock(int32 queue_id, bool wait)
{
	Datum		args[1] = {Int32GetDatum(queue_id)};

	return lock_row(look_and_lock_stmt(wait), args);
}

static PgqueTickVisit
visit(int32 queue_id, bool wait, int64 *tick_id)
{
	Datum		args[2] = {Int32GetDatum(queue_id), BoolGetDatum(wait)};
	bool		unlogged = false;
	bool		null;
	int			due;
	int			ret;

	/*
	 * The common case in one statement (a woken logged queue, due); the
	 * others (not due, not served, gone, unlogged, its row locked) are
	 * told apart below, look first.
	 */
	if (look_and_lock(queue_id, wait))
	{
		*tick_id = tick_locked(queue_id, true);
		return *tick_id != 0 ? PGQUE_VISIT_TICKED : PGQUE_VISIT_NONE;
	}
	due = look(queue_id, false, &unlogged);
	if (due < 0)
		return PGQUE_VISIT_NONE;
	if (due == 2)
	{
		/* an unlogged queue: its reset first, when it lost its events (ADR 0068) */
		ret = pgque_kept_plan_execute(gate_stmt(), args, NULL, false, 1);
		check_ret(ret, SPI_OK_SELECT, "the unlogged queue's gate");
		if (SPI_processed != 1)
			return PGQUE_VISIT_NONE;
		if (!DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &null)) ||
			null)
			return PGQUE_VISIT_BUSY;
		due = look(queue_id, true, &unlogged);
	}
	if (due != 1)
		return PGQUE_VISIT_NONE;

	if (!lock_row(lock_stmt(wait), args))
		return wait ? PGQUE_VISIT_NONE : PGQUE_VISIT_BUSY;

	*tick_id = tick_locked(queue_id, true);
	return *tick_id != 0 ? PGQUE_VISIT_TICKED : PGQUE_VISIT_NONE;
}

/* the generic plan of kp made now (inside SPI), as its first execution would */
static void
plan_now(PgqueKeptPlan *kp)
{
	CachedPlan *cplan = SPI_plan_get_cached_plan(kp->plan);

	if (cplan == NULL)
		elog(ERROR, "pgque_bgw: planning a kept statement of the tick failed");
	ReleaseCachedPlan(cplan, CurrentResourceOwner);
}

/*
 * Every statement a visit may run, waiting for locked rows or not (the
 * ticker's), prepared and planned once, at the process's first such visit
 * (inside SPI).  Kept at its first use, a statement was planned at a
 * moment nobody chose: the plain lock (LOCK_SQL) only when a row was found
 * locked, or a commit made the queue due between the look-and-lock and the
 * look; the look at the first queue found not due; the gate at the first
 * unlogged queue.  Its plan, some 20 kB of the process's memory, and its
 * planning (catalog reads, the relations' locks) then fell into whatever
 * was measured at that moment: TAP 050 saw the ticker grow by 21 kB in
 * the middle of its two minutes (ADR 0136).
 */
static void
pgque_tick_warm(bool wait)
{
	static bool warmed[2] = {false, false};

	if (warmed[wait])
		return;
	plan_now(look_and_lock_stmt(wait));
	plan_now(look_stmt());
	plan_now(gate_stmt());
	plan_now(lock_stmt(wait));
	plan_now(tick_read_stmt());
	plan_now(insert_stmt());
	plan_now(coop_stmt());
	warmed[wait] = true;
}

/*
 * Visit queue queue_id: tick it if due.  Without wait, a row another
 * transaction holds locked, or an unlogged queue's reset that would wait
 * for it, is not waited for (PGQUE_VISIT_BUSY: the worker visits it again
 * at its poll, ADR 0040).
 */
PgqueTickVisit
pgque_tick_visit(int32 queue_id, bool wait, int64 *tick_id)
{
	PgqueTickVisit r;
	int			ret;

	*tick_id = 0;
	if (!pgque_queue_lock(queue_id, false, false))
		return PGQUE_VISIT_NONE;
	if ((ret = SPI_connect()) != SPI_OK_CONNECT)
		elog(ERROR, "pgque_bgw: SPI_connect failed: %s", SPI_result_code_string(ret));
	pgque_tick_warm(wait);
	r = visit(queue_id, wait, tick_id);
	SPI_finish();
	return r;
}

static int32
queue_id_of(HeapTupleHeader q)
{
	bool		null;
	Datum		d = GetAttributeByName(q, "queue_id", &null);

	if (null)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("queue_id must not be null")));
	return DatumGetInt32(d);
}

PG_FUNCTION_INFO_V1(pgque_tick_visit_sql);
PG_FUNCTION_INFO_V1(pgque_tick_sql);
PG_FUNCTION_INFO_V1(pgque_tick_snapshot_sql);

/*
 * pgque._tick_visit(q pgque.queue, i_wait boolean) -> the tick id; NULL
 * when not due (or the queue is being dropped); 0 when not waited for.
 */
Datum
pgque_tick_visit_sql(PG_FUNCTION_ARGS)
{
	int64		tid;

	switch (pgque_tick_visit(queue_id_of(PG_GETARG_HEAPTUPLEHEADER(0)), PG_GETARG_BOOL(1), &tid))
	{
		case PGQUE_VISIT_TICKED:
			PG_RETURN_INT64(tid);
		case PGQUE_VISIT_BUSY:
			PG_RETURN_INT64(0);
		case PGQUE_VISIT_NONE:
			break;
	}
	PG_RETURN_NULL();
}

/* pgque._tick(q pgque.queue) -> the tick id: a tick now (the caller holds the row) */
Datum
pgque_tick_sql(PG_FUNCTION_ARGS)
{
	int32		id = queue_id_of(PG_GETARG_HEAPTUPLEHEADER(0));
	int64		tid;
	int			ret;

	if ((ret = SPI_connect()) != SPI_OK_CONNECT)
		elog(ERROR, "pgque_bgw: SPI_connect failed: %s", SPI_result_code_string(ret));
	tid = tick_locked(id, false);
	SPI_finish();
	PG_RETURN_INT64(tid);
}

/* pgque._tick_snapshot() -> the snapshot a tick taken now records */
Datum
pgque_tick_snapshot_sql(PG_FUNCTION_ARGS)
{
	PG_RETURN_DATUM(tick_snapshot());
}
