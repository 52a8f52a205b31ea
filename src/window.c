/*
 * window.c
 *		The read of a batch window, with its plan kept per backend.
 *
 * pgque._window_rows(source, ...) returns the events of one tick window
 * from the relations pgque._event_source() chose (the child tables, or the
 * partition buckets of one slot: ADR 0013).  Planning a read of 32 bucket
 * tables costs more than running it (3-4 ms against 2 ms for 1,000
 * events), and PL/pgSQL's EXECUTE plans every call; so the plan is
 * prepared once per source and kept, as a generic plan, like the
 * producers' insert plans (src/insert_plan.c).  The plan cache revalidates a
 * kept plan when a relation it reads changes (TRUNCATE by rotation, DROP).
 *
 * Event tables have no statistics (never analyzed: they are truncated, not
 * vacuumed), and a generic plan knows neither the window's bounds nor the
 * in-progress list; left alone the planner picks sequential scans of small
 * buckets, which grow with the table.  A window is always a small slice
 * reached through the ev_txid index, so plans are made with
 * enable_seqscan off (for this read only), and with enable_indexscan off:
 * a bitmap scan returns the rows in the order they lie.
 *
 * The plain receive's read of a whole window into its part cache goes
 * without a plan when the relations allow it (window_direct.c, ADR 0110):
 * the executor's start of an Append of 33 scans cost a 32-bucket window
 * more than its rows.
 *
 * A plan dropped from the cache (a full cache, a hash collision) while a
 * read up the stack is still executing it, say from a row-level security
 * policy on an event table that reads another window, is freed only when
 * that read ends (src/kept_plan.c, ADR 0037).
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/nbtree.h"
#include "access/relation.h"
#include "access/relscan.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_am.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "executor/spi.h"
#include "executor/tuptable.h"
#include "nodes/params.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "storage/proc.h"
#include "fmgr.h"
#include "funcapi.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/fmgrprotos.h"
#include "utils/guc.h"
#include "utils/fmgroids.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"
#include "utils/xid8.h"

#include "compat.h"
#include "kept_plan.h"
#include "pgque_bgw.h"
#include "state.h"
#include "window.h"

/*
 * How many plans a backend keeps, and how long one unused is kept.  A
 * source names tables: rotation retires a queue's sources (they come back
 * only after the tables went round) and a dropped queue's never come back,
 * so without a bound on idleness the cache only ever grew, about 120 kB a
 * plan (ADR 0035).  Each new plan first drops those unused for
 * WINDOW_PLAN_IDLE_MS, then, at WINDOW_MAX_PLANS, the least recently used.
 */
#define WINDOW_MAX_PLANS 256
#define WINDOW_PLAN_IDLE_MS (10 * 60 * 1000)

typedef struct WindowPlan
{
	uint64		key;			/* hash of the source text, the order and the shape */
	char	   *source;			/* in TopMemoryContext */
	bool		ordered;
	int			shape;			/* which optional filters the plan applies */
	PgqueKeptPlan *plan;
	TimestampTz used;			/* start of the last transaction that used it */
} WindowPlan;

static HTAB *window_plans = NULL;

const Oid	pgque_event_types[EV_NATTS] = {INT8OID, TIMESTAMPTZOID, XID8OID, INT4OID, INT4OID,
	TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID};

/*
 * The readers took the rows as event_template's and checked only their
 * number: an owner's ALTER COLUMN ev_data TYPE bigint on an event table
 * made receive() form a message whose text column held a bigint, read as a
 * pointer (SIGSEGV; TAP 110).  A read of another shape is refused before a
 * row is formed (the check: srf.c, as for pgque.queue's rows, ADR 0105).
 */
void
pgque_window_check_desc(TupleDesc desc)
{
	pgque_check_columns(desc, pgque_event_types, EV_NATTS, "event table",
						"An event table must keep the columns of pgque.event_template.");
}

PG_FUNCTION_INFO_V1(pgque_window_rows);

static void
window_plan_drop(WindowPlan *entry)
{
	uint64		key = entry->key;

	pgque_kept_plan_drop(entry->plan);
	pfree(entry->source);
	hash_search(window_plans, &key, HASH_REMOVE, NULL);
}

/*
 * Make room for one more plan: drop the plans unused for
 * WINDOW_PLAN_IDLE_MS; if the cache is still full, the least recently used.
 */
static void
window_plans_trim(TimestampTz now)
{
	HASH_SEQ_STATUS seq;
	WindowPlan *entry;
	WindowPlan *oldest = NULL;

	/* removing the entry just returned is allowed during a scan (dynahash) */
	hash_seq_init(&seq, window_plans);
	while ((entry = hash_seq_search(&seq)) != NULL)
	{
		if (TimestampDifferenceExceeds(entry->used, now, WINDOW_PLAN_IDLE_MS))
			window_plan_drop(entry);
		else if (oldest == NULL || entry->used < oldest->used)
			oldest = entry;
	}
	if (oldest != NULL && hash_get_num_entries(window_plans) >= WINDOW_MAX_PLANS)
		window_plan_drop(oldest);
}

/*
 * The window predicate: the events of a batch window (lo, hi] are those
 * whose txid is at or past lo's xmax and below hi's, or in progress at lo
 * (its xip), and that hi sees committed.  Written once, here, for the C
 * reader below and for SQL (pgque._window_where: _slot_pending_all), with
 * the parameter numbers of the caller's statement.  The read without the
 * executor (window_direct.c, ADR 0110) applies the same three tests as its
 * index scans' keys (the range, each xid) and pgque_window_row_visible
 * below: a change here is a change there (regress 88 compares the two).
 */
void
pgque_window_where(StringInfo buf, int lo_xmax, int hi_xmax, int lo_xip, int hi)
{
	/* lo_xip 0: the caller knows the old tick had none in progress */
	if (lo_xip == 0)
		appendStringInfo(buf,
						 "ev.ev_txid operator(pg_catalog.>=) $%d and ev.ev_txid operator(pg_catalog.<) $%d"
						 " and pg_catalog.pg_visible_in_snapshot(ev.ev_txid, $%d)",
						 lo_xmax, hi_xmax, hi);
	else
		appendStringInfo(buf,
						 "((ev.ev_txid operator(pg_catalog.>=) $%d and ev.ev_txid operator(pg_catalog.<) $%d)"
						 "  or ev.ev_txid operator(pg_catalog.=) any($%d))"
						 " and pg_catalog.pg_visible_in_snapshot(ev.ev_txid, $%d)",
						 lo_xmax, hi_xmax, lo_xip, hi);
}

/*
 * The predicate's last test as the direct read (window_direct.c) applies it
 * to a row; the range and the in-progress list are its index scans' keys.
 */
bool
pgque_window_row_visible(Datum txid, Datum hi)
{
	return DatumGetBool(DirectFunctionCall2(pg_visible_in_snapshot, txid, hi));
}

PG_FUNCTION_INFO_V1(pgque_window_where_sql);
Datum
pgque_window_where_sql(PG_FUNCTION_ARGS)
{
	StringInfoData buf;
	int			i;

	for (i = 0; i < 4; i++)
	{
		if (PG_GETARG_INT32(i) < 1 || PG_GETARG_INT32(i) > 100)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("parameter number %d is out of range", PG_GETARG_INT32(i)),
					 errdetail("Each must be between 1 and 100.")));
	}
	initStringInfo(&buf);
	pgque_window_where(&buf, PG_GETARG_INT32(0), PG_GETARG_INT32(1), PG_GETARG_INT32(2), PG_GETARG_INT32(3));
	PG_RETURN_TEXT_P(cstring_to_text(buf.data));
}


/*
 * pgque._window_xmin(lo, hi) -> xid8: the smallest xid whose rows can
 * belong to the window between the snapshots lo and hi (ADR 0106): lo's
 * xmax, or one of lo's in-progress xids that hi sees finished (a row of one
 * hi does not fails the window's predicate, as window_xip_trim leaves it
 * out).  _event_tables and _event_source choose the relations by it.  hi
 * NULL: lo's xmin.
 */
PG_FUNCTION_INFO_V1(pgque_window_xmin_sql);
Datum
pgque_window_xmin_sql(PG_FUNCTION_ARGS)
{
	PgqueSnapshot *lo;
	FullTransactionId min;
	uint32		i;

	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	lo = (PgqueSnapshot *) PG_GETARG_VARLENA_P(0);
	if (PG_ARGISNULL(1))
		PG_RETURN_FULLTRANSACTIONID(lo->xmin);
	min = lo->xmax;
	for (i = 0; i < lo->nxip; i++)
		if (FullTransactionIdPrecedes(lo->xip[i], min) &&
			DatumGetBool(DirectFunctionCall2(pg_visible_in_snapshot,
											 FullTransactionIdGetDatum(lo->xip[i]),
											 PG_GETARG_DATUM(1))))
			min = lo->xip[i];
	PG_RETURN_FULLTRANSACTIONID(min);
}

/*
 * pgque._window_bounds(lo, hi) -> (lo_xmax, hi_xmax, lo_xip, hi): a
 * window's bounds as the window read takes them (WA_LO, WA_HI, WA_XIP,
 * WA_SNAP): the xmax of both tick snapshots, the earlier one's in-progress
 * xids (in the snapshot's order) and the later snapshot.  One row, of NULLs
 * for a NULL snapshot (lo's xip then empty), as the SQL it replaces (ADR
 * 0121: that SQL function's statement, an array built by a sub-select of
 * pg_snapshot_xip, was a third of a plain consumer's open).  A set, so that
 * a FROM item reads it.
 */
PG_FUNCTION_INFO_V1(pgque_window_bounds_sql);
Datum
pgque_window_bounds_sql(PG_FUNCTION_ARGS)
{
	Tuplestorestate *ts;
	TupleDesc	desc;
	MemoryContext old;
	Datum		values[4];
	bool		nulls[4] = {false, false, false, false};
	PgqueSnapshot *lo = NULL;
	Datum	   *xips;
	uint32		i;

	old = pgque_materialize(fcinfo, &ts, &desc);
	if (!PG_ARGISNULL(0))
		lo = (PgqueSnapshot *) PG_GETARG_VARLENA_P(0);
	if (lo != NULL)
		values[0] = FullTransactionIdGetDatum(lo->xmax);
	else
		nulls[0] = true;
	if (!PG_ARGISNULL(1))
	{
		PgqueSnapshot *hi = (PgqueSnapshot *) PG_GETARG_VARLENA_P(1);

		values[1] = FullTransactionIdGetDatum(hi->xmax);
		values[3] = PointerGetDatum(hi);
	}
	else
		nulls[1] = nulls[3] = true;
	xips = palloc(sizeof(Datum) * Max(lo != NULL ? lo->nxip : 0, 1));
	for (i = 0; lo != NULL && i < lo->nxip; i++)
		xips[i] = FullTransactionIdGetDatum(lo->xip[i]);
	values[2] = PointerGetDatum(construct_array(xips, lo != NULL ? (int) lo->nxip : 0, XID8OID,
												sizeof(FullTransactionId), FLOAT8PASSBYVAL,
												TYPALIGN_DOUBLE));
	tuplestore_putvalues(ts, desc, values, nulls);
	MemoryContextSwitchTo(old);
	return (Datum) 0;
}

/*
 * The optional filters of a window read, one bit each: a read applies
 * those whose parameters are not NULL.  A plan per shape, rather than one
 * plan testing "$n is null or ..." on every row (ADR 0086): a plain
 * consumer's read names its owner and at most a position, and its rows
 * were paying for the tests of the event and slot filters it never uses
 * (and their generic plan deformed each row up to ev_extra1 for the slot
 * filter).
 */
#define SHAPE_OWNER 0x01
#define SHAPE_AFTER 0x02
#define SHAPE_EV_ID 0x04
#define SHAPE_SLOT 0x08
#define SHAPE_XIP 0x10			/* the old tick had transactions in progress */

/*
 * Whether the old tick's in-progress list has any xid.  Without one the
 * read is a range of ev_txid alone: one index scan per relation instead of
 * a BitmapOr of two, which a bucketed window pays 33 times (ADR 0086).
 */
static bool
window_has_xip(Datum xip, char null)
{
	ArrayType  *a;
	bool		any;

	if (null == 'n')
		return false;
	a = DatumGetArrayTypeP(xip);
	any = ArrayGetNItems(ARR_NDIM(a), ARR_DIMS(a)) > 0;
	if ((Pointer) a != DatumGetPointer(xip))
		pfree(a);
	return any;
}

/*
 * A read for no reader (owner NULL: the ticker's and the watchdog's probe,
 * _has_unticked_events, one row at most) names the in-progress filter
 * whenever it has the list, empty or not: the range-only shape saves a probe
 * nothing, and it would give the ticker a second plan per queue, made for
 * every queue at once whenever a probe finds ticks with transactions in
 * progress (TAP 050 saw that as 1.3 MB of growth).
 */
static int
window_shape(Datum *args, const char *nulls)
{
	bool		probe_xip = nulls[WA_OWNER] == 'n' && nulls[WA_XIP] != 'n';

	return (probe_xip || window_has_xip(args[WA_XIP], nulls[WA_XIP]) ? SHAPE_XIP : 0) |
		(nulls[WA_OWNER] != 'n' ? SHAPE_OWNER : 0) |
		(nulls[WA_AFTER] != 'n' ? SHAPE_AFTER : 0) |
		(nulls[WA_EV_ID] != 'n' ? SHAPE_EV_ID : 0) |
		(nulls[WA_N] != 'n' ? SHAPE_SLOT : 0);
}

/*
 * The kept plan of a window read from source: ordered by ev_id and
 * limited ($8), or unordered and whole (the plain receive sorts what it
 * keeps itself, ADR 0033), with the filters of shape.
 */
static PgqueKeptPlan *
window_plan_for(const char *source, bool ordered, int shape)
{
	uint64		key = hash_bytes_extended((const unsigned char *) source, strlen(source),
										  (uint64) shape << 1 | (ordered ? 1 : 0));
	TimestampTz now = GetCurrentTransactionStartTimestamp();
	WindowPlan *entry;
	bool		found;
	StringInfoData sql;
	PgqueKeptPlan *plan;
	Oid			argtypes[WINDOW_NPARAMS] = {XID8OID, XID8OID, XID8ARRAYOID, PG_SNAPSHOTOID,
	INT4OID, INT8OID, INT8OID, INT4OID, INT4OID, INT4OID};

	if (window_plans == NULL)
	{
		HASHCTL		ctl;

		memset(&ctl, 0, sizeof(ctl));
		ctl.keysize = sizeof(uint64);
		ctl.entrysize = sizeof(WindowPlan);
		window_plans = hash_create("pgque_bgw window plans", 64, &ctl, HASH_ELEM | HASH_BLOBS);
	}

	entry = hash_search(window_plans, &key, HASH_FIND, NULL);
	if (entry != NULL && entry->ordered == ordered && entry->shape == shape &&
		strcmp(entry->source, source) == 0)
	{
		entry->used = now;
		return entry->plan;
	}
	if (entry != NULL)
	{
		/* a hash collision: the newer source takes the place */
		window_plan_drop(entry);
	}
	window_plans_trim(now);

	/*
	 * txids at or past the old xmax, plus those in progress at the old
	 * tick, that the new snapshot sees as committed; retried and replayed
	 * events only for their owner (no owner: every event, for the ticker's
	 * probe); past the part already handed out; one event; one slot's
	 * share.  A parameter whose filter the shape leaves out is not named
	 * (its value is NULL: the filter would pass every row).
	 */
	initStringInfo(&sql);
	appendStringInfo(&sql, "select * from %s ev where ", source);
	pgque_window_where(&sql, 1, 2, (shape & SHAPE_XIP) ? 3 : 0, 4);
	if (shape & SHAPE_OWNER)
		appendStringInfoString(&sql, " and (ev.ev_owner is null or ev.ev_owner operator(pg_catalog.=) $5)");
	if (shape & SHAPE_AFTER)
		appendStringInfoString(&sql, " and ev.ev_id operator(pg_catalog.>) $6");
	if (shape & SHAPE_EV_ID)
		appendStringInfoString(&sql, " and ev.ev_id operator(pg_catalog.=) $7");
	if (shape & SHAPE_SLOT)
		appendStringInfoString(&sql, " and pgque._slot_of(ev.ev_extra1, $9) operator(pg_catalog.=) $10");
	/*
	 * A reader's part never ends between two events of one ev_id (it
	 * resumes after an ev_id, ADR 0105): the rows of the limit's last id
	 * come whole.  WITH TIES refuses a NULL count, which means "no limit",
	 * and gives the sort no bound (a full sort, not a top-N heap): a read
	 * for no reader (the ticker's and watchdog's probes, one row) resumes
	 * nowhere and keeps LIMIT.
	 */
	if (ordered && (shape & SHAPE_OWNER))
		appendStringInfoString(&sql, " order by ev.ev_id fetch first (coalesce($8, 2147483647)) rows with ties");
	else if (ordered)
		appendStringInfoString(&sql, " order by ev.ev_id limit $8");
	/* a generic plan: planned once, whatever the window's bounds */
	plan = pgque_kept_plan_prepare(sql.data, WINDOW_NPARAMS, argtypes, CURSOR_OPT_GENERIC_PLAN);
	pfree(sql.data);
	entry = hash_search(window_plans, &key, HASH_ENTER, &found);
	entry->plan = plan;
	entry->ordered = ordered;
	entry->shape = shape;
	entry->source = MemoryContextStrdup(TopMemoryContext, source);
	entry->used = now;
	return entry->plan;
}

/*
 * The old tick's in-progress list (args[WA_XIP]) reduced to the xids that
 * can add rows to the window (ADR 0106): a row of an xid the new tick
 * (args[WA_SNAP]) does not see finished fails the predicate's
 * pg_visible_in_snapshot, so leaving those out reads the same rows.  Only
 * the two snapshots decide, not the commit log: a restored database's
 * ticks hold the xids of the cluster they were dumped from (ADR 0022), for
 * which this cluster's log says nothing true.  NULL when every xid is kept
 * (the list as it is).
 */
static ArrayType *
window_xip_trim(Datum *args)
{
	ArrayType  *xip = DatumGetArrayTypeP(args[WA_XIP]);
	Datum	   *xids;
	bool	   *xnulls;
	int			n;
	int			i;
	int			k = 0;

	deconstruct_array(xip, XID8OID, sizeof(FullTransactionId), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE,
					  &xids, &xnulls, &n);
	for (i = 0; i < n; i++)
	{
		if (xnulls[i])
			return NULL;		/* not a list a tick writes: read it as it is */
		if (DatumGetBool(DirectFunctionCall2(pg_visible_in_snapshot, xids[i], args[WA_SNAP])))
			xids[k++] = xids[i];
	}
	if (k == n)
		return NULL;
	return construct_array(xids, k, XID8OID, sizeof(FullTransactionId), FLOAT8PASSBYVAL,
						   TYPALIGN_DOUBLE);
}

/*
 * The part caches.  receive(max_return) hands a window larger than
 * max_return out in parts (ADR 0003); each part used to re-read and re-sort
 * the whole window.  The first read of a part now reads up to
 * WINDOW_CACHE_ROWS rows past it (bounded by WINDOW_CACHE_BYTES) and keeps
 * them, so the next parts of the same window in this backend come from
 * memory.  A window's rows never change (they are fixed by its two
 * snapshots, and rotation cannot reclaim them while a cursor is behind),
 * so the cache needs no invalidation: the key is the window itself.  A
 * caller from another backend (a transaction pooler) reads the table as
 * before.  Lookups of one event (ev_id) and the ticker's probe (no owner)
 * bypass it.  _window_rows() keeps event rows (wcache, below); the plain
 * receive keeps its rows already formed as messages (src/receive.c).
 */
static WindowCache wcache;

/*
 * The one exception to "a window's rows never change" (ADR 0099): a seek
 * deletes the copies a consumer acked in windows it had passed (ADR 0091,
 * pgque._seek_drop_copies), and a part cache that read such a window
 * before would hand the copy out again.  Every deletion of that kind bumps
 * an epoch in shared memory (every backend's caches, the consumer's own
 * and a pooler's other backends), when it is made and again when its
 * transaction commits; a cache is used only under the epoch it was filled
 * in, read before the rows were (the receive's read takes its snapshot
 * after it).  A transaction that dropped copies cannot be prepared: COMMIT
 * PREPARED would make the deletion visible with no bump.  Without
 * shared memory (not preloaded) the epoch is this backend's own.
 */
static uint64 local_window_epoch = 0;
static bool epoch_bump_at_commit = false;
static bool epoch_callback_registered = false;

uint64
pgque_window_epoch(void)
{
	/* a full barrier: not read before the caller's earlier reads */
	if (pgque_shared != NULL)
		return pg_atomic_fetch_add_u64(&pgque_shared->window_epoch, 0) + local_window_epoch;
	return local_window_epoch;
}

static void
window_epoch_bump(void)
{
	local_window_epoch++;
	if (pgque_shared != NULL)
		(void) pg_atomic_fetch_add_u64(&pgque_shared->window_epoch, 1);
}

static void
window_epoch_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_PRE_PREPARE:
			if (epoch_bump_at_commit)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("cannot PREPARE a transaction that moved a consumer back past its retried copies"),
						 errdetail("The seek deleted copies the consumer had acked; COMMIT PREPARED would not tell the part caches of other sessions."),
						 errhint("Seek in a transaction that is not prepared.")));
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
			if (epoch_bump_at_commit)
				window_epoch_bump();
			epoch_bump_at_commit = false;
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			epoch_bump_at_commit = false;
			break;
		default:
			break;
	}
}

/*
 * pgque._window_rows_deleted() -> void: rows of windows already read were
 * deleted in this transaction (_seek_drop_copies): every part cache filled
 * before is stale now and again at the commit.
 */
PG_FUNCTION_INFO_V1(pgque_window_rows_deleted);
Datum
pgque_window_rows_deleted(PG_FUNCTION_ARGS)
{
	if (!epoch_callback_registered)
	{
		RegisterXactCallback(window_epoch_xact_callback, NULL);
		epoch_callback_registered = true;
	}
	window_epoch_bump();
	epoch_bump_at_commit = true;
	PG_RETURN_VOID();
}

/*
 * the key's types, for datumIsEqual/datumCopy: xid8 and int8 are passed by
 * value only where a Datum holds 8 bytes (FLOAT8PASSBYVAL)
 */
static const bool key_byval[WINDOW_NPARAMS] = {FLOAT8PASSBYVAL, FLOAT8PASSBYVAL, false, false, true,
	FLOAT8PASSBYVAL, FLOAT8PASSBYVAL, true, true, true};
static const int key_len[WINDOW_NPARAMS] = {8, 8, -1, -1, 4, 8, 8, 4, 4, 4};

static bool
key_part(int i)
{
	return i != WA_AFTER && i != WA_EV_ID && i != WA_LIMIT;
}

/*
 * Whether c holds rows of this window.  source NULL: the relations are not
 * known yet; a window of one reader (owner: a subscription, so one queue)
 * has the same rows whichever relations are named for it (they are fixed by
 * its two snapshots, ADR 0082), so the parameters say it.
 */
bool
pgque_window_cache_matches(WindowCache *c, const char *source, Datum *args, char *nulls)
{
	int			i;

	if (!c->valid || c->epoch != pgque_window_epoch())
		return false;
	if (c->lxid != InvalidLocalTransactionId && c->lxid != pgque_my_lxid())
		return false;
	if (source == NULL ? nulls[WA_OWNER] == 'n' : strcmp(c->source, source) != 0)
		return false;
	for (i = 0; i < WINDOW_NPARAMS; i++)
	{
		if (!key_part(i))
			continue;
		if (c->keynull[i] != (nulls[i] == 'n'))
			return false;
		if (!c->keynull[i] &&
			!datumIsEqual(c->key[i], args[i], key_byval[i], key_len[i]))
			return false;
	}
	return true;
}

/*
 * Empty the cache and key it to this window, with its rows starting after
 * args[WA_AFTER]; invalid until the caller has added the rows and set
 * valid (and complete, if the rows run to the window's end).
 */
void
pgque_window_cache_reset(WindowCache *c, const char *source, Datum *args, char *nulls)
{
	MemoryContext old;
	int			i;

	/*
	 * The rows' memory is kept from one window to the next: a reset frees
	 * every block of an AllocSet but its first, and glibc hands freed
	 * blocks of a window's size (megabytes) back to the kernel, so each
	 * window's rows faulted their pages in again (about 500 minor faults a
	 * window of 10,000 rows; kernel time no instruction count shows, ADR
	 * 0131).  The rows' context is made again, with a first block of what
	 * the largest window's rows used, when a window's rows did not fit in
	 * it; the arrays (larger chunks than a block holds) live apart.
	 */
	if (c->cxt != NULL && c->keep < WINDOW_CACHE_KEEP_MAX)
	{
		Size		used = MemoryContextMemAllocated(c->cxt, false);

		if (used > c->keep + ALLOCSET_DEFAULT_INITSIZE)
		{
			MemoryContextDelete(c->cxt);
			c->cxt = NULL;
			c->keep = MAXALIGN(Min(used, WINDOW_CACHE_KEEP_MAX));
		}
	}
	if (c->cxt == NULL)
		c->cxt = AllocSetContextCreate(TopMemoryContext, "pgque_bgw window cache",
									   Max(c->keep, ALLOCSET_DEFAULT_MINSIZE),
									   ALLOCSET_DEFAULT_INITSIZE, ALLOCSET_DEFAULT_MAXSIZE);
	if (c->arrcxt == NULL)
		c->arrcxt = AllocSetContextCreate(TopMemoryContext, "pgque_bgw window cache arrays",
										  ALLOCSET_DEFAULT_SIZES);
	MemoryContextReset(c->cxt);
	MemoryContextReset(c->arrcxt);
	c->valid = false;
	c->epoch = pgque_window_epoch();

	/*
	 * Rows read under a transaction snapshot older than a seek's commit may
	 * hold a copy the seek deleted, though the epoch read now is the
	 * commit's: such a cache serves its own transaction only (ADR 0105; a
	 * cooperative member's open locks no row the seek changed, so its
	 * REPEATABLE READ read got that far and its next transaction was served
	 * the copy again).
	 */
	c->lxid = IsolationUsesXactSnapshot() ? pgque_my_lxid() : InvalidLocalTransactionId;
	c->complete = false;

	old = MemoryContextSwitchTo(c->cxt);
	c->source = pstrdup(source);
	for (i = 0; i < WINDOW_NPARAMS; i++)
	{
		c->keynull[i] = nulls[i] == 'n';
		c->key[i] = (c->keynull[i] || !key_part(i)) ? (Datum) 0 :
			datumCopy(args[i], key_byval[i], key_len[i]);
	}
	c->has_from = nulls[WA_AFTER] != 'n';
	c->from = c->has_from ? DatumGetInt64(args[WA_AFTER]) : 0;
	/* as long as the last window's: grown once, not again (copied) in every window */
	c->maxtuples = Max(c->maxtuples, 1024);
	c->tuples = MemoryContextAlloc(c->arrcxt, sizeof(HeapTuple) * c->maxtuples);
	c->ev_ids = MemoryContextAlloc(c->arrcxt, sizeof(int64) * c->maxtuples);
	c->ntuples = 0;
	c->bytes = 0;
	c->heaped = false;
	c->has_cut = false;
	c->cut = 0;
	MemoryContextSwitchTo(old);
}

/* the arrays grown for one more row */
static void
cache_grow(WindowCache *c)
{
	if (c->ntuples < c->maxtuples)
		return;
	c->maxtuples *= 2;
	c->tuples = repalloc(c->tuples, sizeof(HeapTuple) * c->maxtuples);
	c->ev_ids = repalloc(c->ev_ids, sizeof(int64) * c->maxtuples);
}

/*
 * Keep tup (the next row in ev_id order): a copy, or tup itself when the
 * caller formed it in c->cxt.  false when the cache is full (then it does
 * not run to the window's end; tup is not kept).
 */
static bool
cache_add(WindowCache *c, HeapTuple tup, int64 ev_id, bool copy)
{
	MemoryContext old;

	if (c->ntuples >= WINDOW_CACHE_ROWS || c->bytes + tup->t_len > WINDOW_CACHE_BYTES)
		return false;
	old = MemoryContextSwitchTo(c->cxt);
	cache_grow(c);
	c->tuples[c->ntuples] = copy ? heap_copytuple(tup) : tup;
	c->ev_ids[c->ntuples] = ev_id;
	c->ntuples++;
	c->bytes += tup->t_len;
	MemoryContextSwitchTo(old);
	return true;
}

static inline void
cache_swap(WindowCache *c, int a, int b)
{
	HeapTuple	t = c->tuples[a];
	int64		id = c->ev_ids[a];

	c->tuples[a] = c->tuples[b];
	c->ev_ids[a] = c->ev_ids[b];
	c->tuples[b] = t;
	c->ev_ids[b] = id;
}

/* the max-heap on ev_id restored below i */
static void
cache_sift_down(WindowCache *c, int i)
{
	for (;;)
	{
		int			l = 2 * i + 1;
		int			m = i;

		if (l < c->ntuples && c->ev_ids[l] > c->ev_ids[m])
			m = l;
		if (l + 1 < c->ntuples && c->ev_ids[l + 1] > c->ev_ids[m])
			m = l + 1;
		if (m == i)
			return;
		cache_swap(c, i, m);
		i = m;
	}
}

/* rows at or past ev_id are not all kept */
static void
cache_note_cut(WindowCache *c, int64 ev_id)
{
	if (!c->has_cut || ev_id < c->cut)
	{
		c->has_cut = true;
		c->cut = ev_id;
	}
}

/*
 * false: a row with this ev_id would not be kept (it is at or past a row
 * already left out, or past every kept row of a full cache), and is
 * counted as left out; the caller need not form it.
 */
bool
pgque_window_cache_wants(WindowCache *c, int64 ev_id)
{
	if (c->has_cut && ev_id >= c->cut)
		return false;
	if (c->heaped && c->ntuples > 0 && ev_id >= c->ev_ids[0])
	{
		cache_note_cut(c, ev_id);
		return false;
	}
	return true;
}

/*
 * Keep tup (formed by the caller in c->cxt; rows come in no order).  Past
 * the cache's rows or bytes the kept rows become a max-heap on ev_id and
 * the greatest ids are dropped (freed) until they fit again, never below
 * min_rows: what is kept is always a prefix of the window (from the
 * read's start) except for the ids at the cut, which seal drops.
 */
void
pgque_window_cache_keep_smallest(WindowCache *c, HeapTuple tup, int64 ev_id, int min_rows)
{
	MemoryContext old = MemoryContextSwitchTo(c->cxt);
	int			i;

	cache_grow(c);
	i = c->ntuples++;
	c->tuples[i] = tup;
	c->ev_ids[i] = ev_id;
	c->bytes += tup->t_len;
	if (!c->heaped && c->ntuples <= WINDOW_CACHE_ROWS && c->bytes <= WINDOW_CACHE_BYTES)
	{
		MemoryContextSwitchTo(old);
		return;
	}
	if (!c->heaped)
	{
		for (i = c->ntuples / 2 - 1; i >= 0; i--)
			cache_sift_down(c, i);
		c->heaped = true;
	}
	else
	{
		/* the new row up to its place */
		while (i > 0 && c->ev_ids[(i - 1) / 2] < c->ev_ids[i])
		{
			cache_swap(c, i, (i - 1) / 2);
			i = (i - 1) / 2;
		}
	}
	while (c->ntuples > min_rows &&
		   (c->ntuples > WINDOW_CACHE_ROWS || c->bytes > WINDOW_CACHE_BYTES))
	{
		cache_note_cut(c, c->ev_ids[0]);
		c->bytes -= c->tuples[0]->t_len;
		heap_freetuple(c->tuples[0]);
		c->ntuples--;
		if (c->ntuples > 0)
		{
			c->tuples[0] = c->tuples[c->ntuples];
			c->ev_ids[0] = c->ev_ids[c->ntuples];
			cache_sift_down(c, 0);
		}
	}
	MemoryContextSwitchTo(old);
}

typedef struct KeptRow
{
	int64		ev_id;
	HeapTuple	tup;
} KeptRow;

static int
kept_row_cmp(const void *a, const void *b)
{
	int64		x = ((const KeptRow *) a)->ev_id;
	int64		y = ((const KeptRow *) b)->ev_id;

	return (x > y) - (x < y);
}

/*
 * Merge at most this many ascending runs; more (rows that came in no
 * order: a max-heap after an overflow) are sorted.
 */
#define CACHE_MERGE_MAX_RUNS 1024

/* a run being merged: its next row and its end, in the cache's arrays */
typedef struct CacheRun
{
	int			next;
	int			end;
} CacheRun;

/* the min-heap of runs on their next row's ev_id, restored below i */
static void
run_sift_down(CacheRun *runs, int nruns, const int64 *ids, int i)
{
	for (;;)
	{
		int			l = 2 * i + 1;
		int			m = i;
		CacheRun	t;

		if (l < nruns && ids[runs[l].next] < ids[runs[m].next])
			m = l;
		if (l + 1 < nruns && ids[runs[l + 1].next] < ids[runs[m].next])
			m = l + 1;
		if (m == i)
			return;
		t = runs[i];
		runs[i] = runs[m];
		runs[m] = t;
		i = m;
	}
}

/*
 * At most this many slots per kept row for cache_place: the ids of a
 * window are a range from the queue's sequence with few gaps (rolled back
 * or cached values, other windows' in-progress transactions).
 */
#define CACHE_PLACE_SPREAD 4

/*
 * The kept rows put in ev_id order by their ids alone: each row at its
 * id's offset from the smallest (lo, hi: the smallest and greatest id) in
 * an array of the ids' range, then the array closed up in place, the ids
 * written back as lo + offset (ADR 0086).  n steps where a merge of k runs
 * takes n log k comparisons (a bucketed window: 32 runs, ~160 instructions
 * a row).  The array of the range becomes the cache's row array: no index
 * of the rows in between, no second copy (ADR 0093).  false, nothing
 * changed: the ids spread too wide or one repeats.
 */
static bool
cache_place(WindowCache *c, int64 lo, int64 hi)
{
	int			n = c->ntuples;
	HeapTuple  *tuples = c->tuples;
	int64	   *ids = c->ev_ids;
	HeapTuple  *placed;
	uint64		span;
	int			i;
	int			k;

	/* hi - lo, not the span: ids at both ends of int8 would wrap it to 0 */
	if ((uint64) hi - (uint64) lo >= (uint64) n * CACHE_PLACE_SPREAD)
		return false;
	span = (uint64) hi - (uint64) lo + 1;
	/* never below the cache's capacity: both arrays hold maxtuples rows */
	placed = MemoryContextAlloc(c->arrcxt, sizeof(HeapTuple) * Max((Size) span, (Size) c->maxtuples));
	memset(placed, 0, sizeof(HeapTuple) * span);
	for (i = 0; i < n; i++)
	{
		HeapTuple  *slot = &placed[ids[i] - lo];

		if (*slot != NULL)
		{
			pfree(placed);
			return false;
		}
		*slot = tuples[i];
	}
	if (span == (uint64) n)
	{
		/* no id missing (one transaction's rows, say): nothing to close up */
		for (i = 0; i < n; i++)
			ids[i] = lo + i;
	}
	else
	{
		/* closed up in place: k <= i, so no row is overwritten before it moves */
		k = 0;
		for (i = 0; i < (int) span; i++)
			if (placed[i] != NULL)
			{
				placed[k] = placed[i];
				ids[k] = lo + i;
				k++;
			}
		Assert(k == n);
	}
	pfree(tuples);
	c->tuples = placed;
	return true;
}

/*
 * The kept rows in ev_id order.  A window of a bucketed queue is read one
 * bucket after the other, each bucket's rows ascending (ADR 0082): its
 * rows are as many runs as there are buckets.  Rows whose ids lie close
 * together are placed by id (cache_place); otherwise the ascending runs are
 * merged (a merge of k runs costs n log k comparisons where a sort costs
 * n log n), and rows in no order (many short runs) sorted.
 */
static void
cache_order(WindowCache *c)
{
	int			nruns = 1;
	int			i;
	int			k;
	CacheRun   *runs;
	HeapTuple  *tuples;
	int64	   *ids;
	int64		lo;
	int64		hi;
	const int64 *id = c->ev_ids;
	int			n = c->ntuples;

	if (n == 0)
		return;

	/*
	 * The runs, and the smallest and greatest id: each run ascends, so
	 * they are among the runs' first and last rows, read at the breaks
	 */
	lo = id[0];
	hi = id[n - 1];
	for (i = 1; i < n; i++)
		if (id[i - 1] > id[i])
		{
			nruns++;
			if (id[i - 1] > hi)
				hi = id[i - 1];
			if (id[i] < lo)
				lo = id[i];
		}
	if (nruns == 1)
		return;
	if (cache_place(c, lo, hi))
		return;
	if (nruns > CACHE_MERGE_MAX_RUNS || nruns > c->ntuples / 4)
	{
		KeptRow    *rows = palloc(sizeof(KeptRow) * c->ntuples);

		for (i = 0; i < c->ntuples; i++)
		{
			rows[i].ev_id = c->ev_ids[i];
			rows[i].tup = c->tuples[i];
		}
		qsort(rows, c->ntuples, sizeof(KeptRow), kept_row_cmp);
		for (i = 0; i < c->ntuples; i++)
		{
			c->ev_ids[i] = rows[i].ev_id;
			c->tuples[i] = rows[i].tup;
		}
		pfree(rows);
		return;
	}

	/* the runs, then a k-way merge into new arrays of the cache's context */
	runs = palloc(sizeof(CacheRun) * nruns);
	k = 0;
	runs[0].next = 0;
	for (i = 1; i < c->ntuples; i++)
		if (c->ev_ids[i - 1] > c->ev_ids[i])
		{
			runs[k].end = i;
			runs[++k].next = i;
		}
	runs[k].end = c->ntuples;
	for (i = nruns / 2 - 1; i >= 0; i--)
		run_sift_down(runs, nruns, c->ev_ids, i);
	tuples = MemoryContextAlloc(c->arrcxt, sizeof(HeapTuple) * c->maxtuples);
	ids = MemoryContextAlloc(c->arrcxt, sizeof(int64) * c->maxtuples);
	for (i = 0; i < c->ntuples; i++)
	{
		int			r = runs[0].next++;

		tuples[i] = c->tuples[r];
		ids[i] = c->ev_ids[r];
		if (runs[0].next == runs[0].end)
			runs[0] = runs[--nruns];
		run_sift_down(runs, nruns, c->ev_ids, 0);
	}
	pfree(runs);
	pfree(c->tuples);
	pfree(c->ev_ids);
	c->tuples = tuples;
	c->ev_ids = ids;
}

/*
 * The rows kept by keep_smallest in ev_id order, without those at or past
 * the cut; the cache is then valid, and complete when no row was left out.
 */
void
pgque_window_cache_seal(WindowCache *c)
{
	cache_order(c);
	/*
	 * equal ids on both sides of the cut (an id repeated): none is kept, so
	 * the cache holds every row of each id it holds (ADR 0105)
	 */
	while (c->has_cut && c->ntuples > 0 && c->ev_ids[c->ntuples - 1] >= c->cut)
	{
		c->ntuples--;
		c->bytes -= c->tuples[c->ntuples]->t_len;
		heap_freetuple(c->tuples[c->ntuples]);
	}
	c->heaped = false;
	c->complete = !c->has_cut;
	c->valid = true;
}

/*
 * The index of the first kept row after args[WA_AFTER] (NULL: the
 * window's start), or -1 when the cache cannot say (another window, or it
 * starts later).
 */
int
pgque_window_cache_start(WindowCache *c, Datum *args, char *nulls)
{
	bool		has_after = nulls[WA_AFTER] != 'n';
	int64		after = has_after ? DatumGetInt64(args[WA_AFTER]) : 0;
	int			lo = 0;
	int			hi = c->ntuples;

	/* the cache must start at or before the requested start */
	if (c->has_from && (!has_after || after < c->from))
		return -1;
	if (!has_after)
		return 0;
	/* ev_ids ascend: the first one past "after" */
	while (lo < hi)
	{
		int			mid = lo + (hi - lo) / 2;

		if (c->ev_ids[mid] <= after)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/*
 * The end of a part of rows in ev_id order (ids) that starts at row from
 * and takes want rows, of the avail rows there are: past want while the
 * ids repeat the part's last.  Every reader resumes a window after the
 * ev_id a part ended at (sub_batch_pos, sb_pos, cw_pos), so a part that
 * ended between two events of one id lost the second (ADR 0093; ids an
 * admin chooses repeat, ADR 0101): a part never does (ADR 0105).  The
 * caller's rows hold every row of their last id (a read WITH TIES, a cache
 * cut at an id).
 */
int
pgque_window_part_end(const int64 *ids, int from, int64 want, int avail)
{
	int			end;

	if (want <= 0)
		return from;
	if (want >= avail - from)
		return avail;
	end = from + (int) want;
	while (end < avail && ids[end] == ids[end - 1])
		end++;
	return end;
}

/*
 * Serve rows after "after" (NULL: from the start), up to limit (and the
 * other rows of the last one's id), from the event cache.  false: the
 * cache cannot answer (other window, other start, or not enough rows
 * kept).
 */
static bool
cache_serve(const char *source, Datum *args, char *nulls, Tuplestorestate *ts)
{
	int64		limit;
	int			i;
	int			end;

	if (nulls[WA_LIMIT] == 'n' || !pgque_window_cache_matches(&wcache, source, args, nulls))
		return false;
	limit = DatumGetInt32(args[WA_LIMIT]);
	i = pgque_window_cache_start(&wcache, args, nulls);
	if (i < 0)
		return false;
	if (wcache.ntuples - i < limit && !wcache.complete)
		return false;
	end = pgque_window_part_end(wcache.ev_ids, i, limit, wcache.ntuples);
	for (; i < end; i++)
		tuplestore_puttuple(ts, wcache.tuples[i]);
	return true;
}

/*
 * Keep the rows of an SPI result (ordered by ev_id, all after "after") as
 * the cache; a caller hands out only the first of them now, but may take
 * fewer (receive asks for one more than max_return), so every row is kept.
 */
static void
cache_fill(const char *source, Datum *args, char *nulls, bool complete, uint64 epoch)
{
	uint64		r;
	bool		null;

	pgque_window_cache_reset(&wcache, source, args, nulls);
	wcache.epoch = epoch;		/* read before the rows were */
	wcache.complete = complete;
	for (r = 0; r < SPI_processed; r++)
	{
		HeapTuple	tup = SPI_tuptable->vals[r];
		int64		ev_id = DatumGetInt64(SPI_getbinval(tup, SPI_tuptable->tupdesc, 1, &null));

		if (!cache_add(&wcache, tup, ev_id, true))
		{
			/*
			 * the rows of the id cut here go whole: a part served from the
			 * cache ends after the last row of its id (ADR 0105)
			 */
			while (wcache.ntuples > 0 && wcache.ev_ids[wcache.ntuples - 1] == ev_id)
			{
				wcache.ntuples--;
				wcache.bytes -= wcache.tuples[wcache.ntuples]->t_len;
				heap_freetuple(wcache.tuples[wcache.ntuples]);
			}
			wcache.complete = false;
			break;
		}
	}
	wcache.valid = true;
}

int
pgque_window_read(const char *source, Datum *args, char *nulls, bool read_only, bool ordered,
				  DestReceiver *dest)
{
	static const Oid argtypes[WINDOW_NPARAMS] = {XID8OID, XID8OID, XID8ARRAYOID, PG_SNAPSHOTOID,
	INT4OID, INT8OID, INT8OID, INT4OID, INT4OID, INT4OID};
	PgqueKeptPlan *plan;
	int			guc_level;
	int			ret;
	Datum		a[WINDOW_NPARAMS];
	ArrayType  *xip = NULL;

	/*
	 * A reader's window whose old tick had transactions in progress reads
	 * only those xids that can add rows to it; when none is left, the read
	 * is the range alone (ADR 0106).  The
	 * caller's arguments stay as they were (they key its part caches).  A
	 * read for no reader (the ticker's probe) keeps its one shape (ADR
	 * 0086's amendment).
	 */
	memcpy(a, args, sizeof(a));
	args = a;
	if (nulls[WA_OWNER] != 'n' && nulls[WA_SNAP] != 'n' && window_has_xip(a[WA_XIP], nulls[WA_XIP]))
	{
		xip = window_xip_trim(a);
		if (xip != NULL)
			a[WA_XIP] = PointerGetDatum(xip);
	}

	/*
	 * A reader's whole window in no order (the part cache's fill), with
	 * neither the event nor the slot filter: without the executor when the
	 * source's relations allow it (ADR 0110).
	 */
	if (dest != NULL && !ordered && nulls[WA_OWNER] != 'n' && nulls[WA_EV_ID] == 'n' &&
		nulls[WA_N] == 'n')
	{
		uint64		nrows;

		if (pgque_window_read_direct(source, a, nulls, dest, &nrows))
		{
			if (xip != NULL)
				pfree(xip);
			return SPI_OK_SELECT;
		}
	}
	plan = window_plan_for(source, ordered, window_shape(a, nulls));

	/* the plan is made (or remade) at execution: set the rule around it */
	guc_level = NewGUCNestLevel();
	(void) set_config_option("enable_seqscan", "off", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);

	/*
	 * A window without an in-progress list is a range of ev_txid: as a
	 * plain index scan its rows would come in ev_txid order, in a heap
	 * fetch each; a bitmap scan reads them page by page, in the order they
	 * were written (ev_id order, or one run per bucket: ADR 0082).
	 */
	(void) set_config_option("enable_indexscan", "off", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	if (dest == NULL)
		ret = pgque_kept_plan_execute(plan, args, nulls, read_only, 0);
	else
	{
		ParamListInfo params = makeParamList(WINDOW_NPARAMS);
		SPIExecuteOptions options;
		int			i;

		for (i = 0; i < WINDOW_NPARAMS; i++)
		{
			params->params[i].value = args[i];
			params->params[i].isnull = nulls[i] == 'n';
			params->params[i].pflags = PARAM_FLAG_CONST;
			params->params[i].ptype = argtypes[i];
		}
		memset(&options, 0, sizeof(options));
		options.params = params;
		options.read_only = read_only;
		options.dest = dest;
		ret = pgque_kept_plan_execute_extended(plan, &options);
	}
	AtEOXact_GUC(true, guc_level);
	if (xip != NULL)
		pfree(xip);
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "pgque_bgw: window read failed: %s", SPI_result_code_string(ret));
	return ret;
}

/*
 * pgque._window_rows(source, lo_xmax, hi_xmax, lo_xip, hi_snapshot, owner,
 *                    after_ev_id, ev_id, limit, n, slot)
 *   -> setof pgque.event_template, in ev_id order.
 */
Datum
pgque_window_rows(PG_FUNCTION_ARGS)
{
	Tuplestorestate *ts;
	TupleDesc	desc;
	MemoryContext old;
	Datum		args[WINDOW_NPARAMS];
	char		nulls[WINDOW_NPARAMS];
	char	   *source;
	int			i;
	uint64		r;
	uint64		give;
	bool		use_cache;
	int32		limit = 0;
	uint64		epoch;
	bool		null;

	if (PG_ARGISNULL(0))
		elog(ERROR, "pgque_bgw: window source must not be null");
	source = text_to_cstring(PG_GETARG_TEXT_PP(0));
	for (i = 0; i < WINDOW_NPARAMS; i++)
	{
		nulls[i] = PG_ARGISNULL(i + 1) ? 'n' : ' ';
		args[i] = PG_ARGISNULL(i + 1) ? (Datum) 0 : PG_GETARG_DATUM(i + 1);
	}

	old = pgque_materialize(fcinfo, &ts, &desc);
	MemoryContextSwitchTo(old);

	/* parts of a window: from the cache, or read ahead into it */
	use_cache = nulls[WA_EV_ID] == 'n' && nulls[WA_LIMIT] != 'n' && nulls[WA_OWNER] != 'n';
	if (use_cache)
	{
		if (cache_serve(source, args, nulls, ts))
			return (Datum) 0;
		limit = DatumGetInt32(args[WA_LIMIT]);
		args[WA_LIMIT] = Int32GetDatum(Max(limit, WINDOW_CACHE_ROWS));
	}

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "pgque_bgw: SPI_connect failed");
	epoch = pgque_window_epoch();
	pgque_window_read(source, args, nulls, true, true, NULL);

	/*
	 * A read for no reader (owner NULL: the ticker's and the watchdog's
	 * probe, queue_health's) asks whether events are there, and at most when
	 * the first was written: of a table of another shape it gets a row of
	 * NULLs for each, so that the ticker still ticks the queue (an error
	 * there retried the queue at every poll, a WARNING each) and its
	 * consumers are the ones refused.
	 */
	if (nulls[WA_OWNER] == 'n' && pgque_columns_mismatch(SPI_tuptable->tupdesc, pgque_event_types, EV_NATTS) >= 0)
	{
		Datum		none[EV_NATTS];
		bool		isnull[EV_NATTS];

		memset(none, 0, sizeof(none));
		memset(isnull, true, sizeof(isnull));
		for (r = 0; r < SPI_processed; r++)
			tuplestore_putvalues(ts, desc, none, isnull);
		SPI_finish();
		return (Datum) 0;
	}
	pgque_window_check_desc(SPI_tuptable->tupdesc);
	give = SPI_processed;
	if (use_cache)
	{
		give = Min(SPI_processed, (uint64) limit);
		/* and the other rows of the last one's id (ADR 0105) */
		while (give > 0 && give < SPI_processed &&
			   DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[give], SPI_tuptable->tupdesc, 1, &null)) ==
			   DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[give - 1], SPI_tuptable->tupdesc, 1, &null)))
			give++;
		/* worth keeping only when the window goes on past this part */
		if (SPI_processed > give)
			cache_fill(source, args, nulls,
					   SPI_processed < (uint64) DatumGetInt32(args[WA_LIMIT]), epoch);
	}
	for (r = 0; r < give; r++)
		tuplestore_puttuple(ts, SPI_tuptable->vals[r]);
	SPI_finish();
	return (Datum) 0;
}

/*
 * Is the event row in slot (its ev_txid at att) in the window between the
 * snapshots lo and hi: lo does not see its transaction finished, hi does
 * (pgque_window_where's predicate; pgque_queues_unticked_read below).
 */
static bool
window_row_unticked(TupleTableSlot *slot, AttrNumber att, Datum lo, Datum hi)
{
	bool		isnull;
	Datum		txid = slot_getattr(slot, att, &isnull);

	if (isnull)
		return false;
	return !pgque_window_row_visible(txid, lo) && pgque_window_row_visible(txid, hi);
}

/*
 * pgque._queues_unticked_read(i_queue_ids int4[], i_tables regclass[],
 * i_los pg_snapshot[], i_hi pg_snapshot) -> int4[]: of the queues given
 * (each with its parent event table, pgque.event_<id>, and its latest
 * tick's snapshot), those with a row in the window between that tick and
 * i_hi, the current snapshot: committed events the tick does not cover
 * (ADR 0113).  _has_unticked_events' question for many queues in one call,
 * for the watchdog's ticker_stalled while the ticker does not probe: each
 * queue's tables (the parent, its children, their buckets) read through
 * their ev_txid index (pgque_event_txid_index's rule, the direct window
 * read's; a table without one scanned whole) from the tick's xmin up, to
 * the first row of the window, with no plan per queue (a window read plans one per source, and
 * keeps WINDOW_MAX_PLANS of them: 1,000 queues planned on every pass).
 * The window's predicate as a row's test: in the window when lo does not
 * see its xid finished (at or past lo's xmax, or in lo's xip) and hi does
 * (pg_visible_in_snapshot below hi's xmax): pgque_window_where's
 * predicate, which says the same with the two bounds spelled out.  A
 * relation that is gone (a queue dropped since) or that is not a pgque
 * event table (the schema, an ev_txid column of type xid8) is skipped.
 * Each relation's lock is released once it is read: nothing later in the
 * transaction uses it, and a pass over 1,000 queues would otherwise hold
 * 4,000 of the server's shared lock table to its end.
 */
PG_FUNCTION_INFO_V1(pgque_queues_unticked_read);
Datum
pgque_queues_unticked_read(PG_FUNCTION_ARGS)
{
	ArrayType  *ids_a = PG_GETARG_ARRAYTYPE_P(0);
	ArrayType  *tabs_a = PG_GETARG_ARRAYTYPE_P(1);
	ArrayType  *los_a = PG_GETARG_ARRAYTYPE_P(2);
	Datum		hi = PG_GETARG_DATUM(3);
	Datum	   *ids;
	Datum	   *tabs;
	Datum	   *los;
	bool	   *ids_n;
	bool	   *tabs_n;
	bool	   *los_n;
	int			nids;
	int			ntabs;
	int			nlos;
	Datum	   *found;
	int			nfound = 0;
	Oid			nsp = get_namespace_oid("pgque", false);
	Snapshot	snap = GetActiveSnapshot();
	int			q;

	deconstruct_array(ids_a, INT4OID, 4, true, TYPALIGN_INT, &ids, &ids_n, &nids);
	deconstruct_array(tabs_a, REGCLASSOID, 4, true, TYPALIGN_INT, &tabs, &tabs_n, &ntabs);
	deconstruct_array(los_a, PG_SNAPSHOTOID, -1, false, TYPALIGN_DOUBLE, &los, &los_n, &nlos);
	if (nids != ntabs || nids != nlos)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("the queue, table and snapshot arrays differ in length")));
	found = palloc(sizeof(Datum) * Max(nids, 1));
	for (q = 0; q < nids; q++)
	{
		List	   *rels;
		ListCell   *lc;
		PgqueSnapshot *lo;
		bool		hit = false;

		if (ids_n[q] || tabs_n[q] || los_n[q])
			continue;
		lo = (PgqueSnapshot *) PG_DETOAST_DATUM(los[q]);
		/* the parent and every table under it, locked as a read would */
		LockRelationOid(DatumGetObjectId(tabs[q]), AccessShareLock);
		if (!SearchSysCacheExists1(RELOID, tabs[q]))
		{
			UnlockRelationOid(DatumGetObjectId(tabs[q]), AccessShareLock);
			continue;
		}
		rels = find_all_inheritors(DatumGetObjectId(tabs[q]), AccessShareLock, NULL);
		foreach(lc, rels)
		{
			Oid			relid = lfirst_oid(lc);
			Relation	rel;
			AttrNumber	att;
			Relation	ix;
			TupleTableSlot *slot;
			ScanKeyData key;

			/* the queue decided: its other relations only unlocked */
			if (hit)
			{
				UnlockRelationOid(relid, AccessShareLock);
				continue;
			}
			rel = try_relation_open(relid, NoLock);
			if (rel == NULL)
			{
				UnlockRelationOid(relid, AccessShareLock);
				continue;
			}
			att = get_attnum(relid, "ev_txid");
			if (rel->rd_rel->relkind != RELKIND_RELATION ||
				RelationGetNamespace(rel) != nsp ||
				att == InvalidAttrNumber ||
				TupleDescAttr(RelationGetDescr(rel), att - 1)->atttypid != XID8OID)
			{
				relation_close(rel, AccessShareLock);
				continue;
			}
			ix = pgque_event_txid_index(rel, att, false);
			slot = table_slot_create(rel, NULL);
			if (ix != NULL)
			{
				IndexScanDesc scan;

				ScanKeyInit(&key, 1, BTGreaterEqualStrategyNumber, F_XID8GE,
							FullTransactionIdGetDatum(lo->xmin));
				scan = pgque_index_beginscan(rel, ix, snap, 1);
				index_rescan(scan, &key, 1, NULL, 0);
				while (!hit && index_getnext_slot(scan, ForwardScanDirection, slot))
					hit = window_row_unticked(slot, att, PointerGetDatum(lo), hi);
				index_endscan(scan);
				index_close(ix, AccessShareLock);
			}
			else
			{
				/* no such index (a parent, empty): its rows one by one */
				TableScanDesc scan = table_beginscan(rel, snap, 0, NULL);

				while (!hit && table_scan_getnextslot(scan, ForwardScanDirection, slot))
					hit = window_row_unticked(slot, att, PointerGetDatum(lo), hi);
				table_endscan(scan);
			}
			ExecDropSingleTupleTableSlot(slot);
			/* released at once: a pass over 1,000 queues held 4,000 locks */
			relation_close(rel, AccessShareLock);
			CHECK_FOR_INTERRUPTS();
		}
		list_free(rels);
		if (hit)
			found[nfound++] = ids[q];
	}
	PG_RETURN_ARRAYTYPE_P(construct_array(found, nfound, INT4OID, 4, true, TYPALIGN_INT));
}
