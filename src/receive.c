/*
 * receive.c
 *		pgque.receive(), receive_partitioned() and receive_coop(): a
 *		consumer's read, with its per-event work in C (ADR 0033).
 *
 * A receive opens (or re-opens) the consumer's batch and hands out up to
 * max_return of its events; a window with more is handed out in parts,
 * the part's end recorded for the ack (ADR 0003): in sub_batch_last for a
 * plain consumer, in the lease epoch's slot_batch row for a partition slot
 * (ADR 0023), in the coop_window row for a cooperative member.  The three
 * differ only in their per-call statements (ReceiveKind: the argument
 * checks, the right to the consumer and the batch in pgque._*_receive_open;
 * the mark; the finish of an empty window); the per-event work is shared
 * and here: the kept window plan (src/window.c), with the slot's filter for
 * a slot, runs with a DestReceiver that forms each event row into a
 * pgque.message tuple once.  The window is read from the part's start,
 * unordered, into the part cache of window.c and put in order there (a
 * bucketed window's per-bucket runs merged, ADR 0082); each part is
 * copied from it into the result the caller reads.  A window larger than
 * the cache keeps the smallest ids that fit, and the part past them reads
 * the rest the same way.  A part as large as the cache itself is read in
 * ev_id order with a limit, straight into the result.  Before, each event
 * was copied by the SPI read, _window_rows' tuplestore, the CTE that
 * marked the part's end and two RETURN QUERY layers.
 *
 * A slot whose consumer pauses on failure (ADR 0029) reads through
 * pgque._receive_paused, which withholds the events of blocked keys; it
 * finds the epoch's slot_batch row by the key the open returned (ADR
 * 0139), 0.2.0's SQL by the batch id.
 *
 * The functions are SECURITY DEFINER with a pinned search_path, as the
 * PL/pgSQL ones they replace (ADR 0002, 0014): their SQL runs as the
 * extension owner, and the open statements check the caller's right to
 * the consumer.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/tupmacs.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "executor/tuptable.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/value.h"
#include "parser/parse_func.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "kept_plan.h"
#include "pgque_bgw.h"
#include "rules.h"
#include "state.h"
#include "wake.h"
#include "window.h"

/* the columns of pgque.message */
#define MSG_ID 0
#define MSG_BATCH 1
#define MSG_TYPE 2
#define MSG_PAYLOAD 3
#define MSG_RETRY 4
#define MSG_CREATED 5
#define MSG_EXTRA1 6
#define MSG_NATTS 10

/* where batch_id lies in a formed message: after msg_id, both int8, never null */
#define MSG_BATCH_OFFSET 8

/* receive() said once in this session that nothing ticks (not preloaded) */
static bool said_nothing_ticks = false;

/* the tries of empty windows before receive() returns nothing (as _receive) */
#define RECEIVE_TRIES 10

PG_FUNCTION_INFO_V1(pgque_receive);
PG_FUNCTION_INFO_V1(pgque_receive_plain);
PG_FUNCTION_INFO_V1(pgque_receive_partitioned);
PG_FUNCTION_INFO_V1(pgque_receive_slot);
PG_FUNCTION_INFO_V1(pgque_receive_coop);
PG_FUNCTION_INFO_V1(pgque_receive_wait);

static SPIPlanPtr source_plan;

/*
 * a slot's share of a window: slot of n; by_source: the relations the
 * window read names hold only the slot's rows (0.3.0's _event_source
 * filters those that hold other slots' rows too), so the read tests no
 * row's key (ADR 0088)
 */
typedef struct SlotShare
{
	int32		slot;
	int32		n;
	bool		by_source;
} SlotShare;

/* rows past the last part handed out, formed as messages */
static WindowCache mcache;

/* the last part handed out from mcache left rows of its window there */
static bool mcache_rest = false;

/* the DestReceiver of one part's window read */
typedef struct PartReceiver
{
	DestReceiver pub;
	Tuplestorestate *ts;		/* the caller's result */
	TupleDesc	desc;			/* pgque.message */
	int64		batch_id;
	int64		max_return;
	int64		nrows;			/* rows seen */
	int64		nput;			/* rows put in the part (ordered read) */
	int64		last;			/* ev_id of row max_return */
	bool		collect;		/* rows go to mcache (unordered read) */
	bool		msg_direct;		/* desc is pgque.message as message_direct forms it */
	TupleDesc	ev_desc;		/* the last event tuple descriptor checked ... */
	bool		ev_direct;		/* ... and whether message_direct reads its tuples */
	bool		stream;			/* the part goes straight to ts (ADR 0127) ... */
	int64		smax;			/* ... its greatest ev_id so far */
	bool		rest;			/* rows past the streamed part went to mcache */
	MemoryContext cxt;			/* the read's caller's, which holds buf */
	char	   *buf;			/* message_direct's buffer for a streamed row */
	Size		bufsize;
} PartReceiver;

/*
 * Its statements run on generic plans (pgque_kept_generic_once): a custom
 * plan per call (the plan cache's choice for the joins of _batch_source)
 * cost more than the rest of the call.
 */

/* an event row (pgque.event_template) as a pgque.message */
static inline void
event_to_message(Datum *ev, bool *evnull, int64 batch_id, Datum *msg, bool *msgnull)
{
	int			i;

	msg[MSG_ID] = ev[EV_ID];
	msgnull[MSG_ID] = evnull[EV_ID];
	msg[MSG_BATCH] = Int64GetDatum(batch_id);
	msgnull[MSG_BATCH] = false;
	msg[MSG_TYPE] = ev[EV_TYPE];
	msgnull[MSG_TYPE] = evnull[EV_TYPE];
	msg[MSG_PAYLOAD] = ev[EV_DATA];
	msgnull[MSG_PAYLOAD] = evnull[EV_DATA];
	msg[MSG_RETRY] = ev[EV_RETRY];
	msgnull[MSG_RETRY] = evnull[EV_RETRY];
	msg[MSG_CREATED] = ev[EV_TIME];
	msgnull[MSG_CREATED] = evnull[EV_TIME];
	for (i = 0; i < 4; i++)
	{
		msg[MSG_EXTRA1 + i] = ev[EV_EXTRA1 + i];
		msgnull[MSG_EXTRA1 + i] = evnull[EV_EXTRA1 + i];
	}
}

/*
 * A message formed straight from the event row's bytes (ADR 0086).  Forming
 * it from the slot's values cost ~2,000 instructions an event (deforming
 * all eleven columns, then heap_form_tuple's generic size and fill passes
 * over ten), most of the window read.  The layouts are fixed: an event
 * table's row is pgque.event_template's, a message pgque.message's, and
 * every value but the batch id is copied as it lies, as heap_fill_tuple
 * would copy it (stored values are never expanded objects).  Used only
 * where both descriptors are checked to have these columns (layout_is:
 * the message's once a call, an event table's once a descriptor in a
 * read); anything else (a slot that is not a heap tuple, a row stored with
 * fewer columns, a dropped column) takes heap_form_tuple.
 */
static const Oid msg_types[MSG_NATTS] = {INT8OID, INT8OID, TEXTOID, TEXTOID, INT4OID,
	TIMESTAMPTZOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID};

/* the event column of each message column (-1: the batch id), as event_to_message */
static const int msg_from[MSG_NATTS] = {EV_ID, -1, EV_TYPE, EV_DATA, EV_RETRY, EV_TIME,
	EV_EXTRA1, EV_EXTRA1 + 1, EV_EXTRA1 + 2, EV_EXTRA1 + 3};

/* desc has these columns, as message_direct lays them out */
static bool
layout_is(TupleDesc desc, const Oid *types, int natts)
{
	int			i;

	if (desc->natts != natts)
		return false;
	for (i = 0; i < natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);
		bool		text = types[i] == TEXTOID;
		int			len = text ? -1 : types[i] == INT4OID ? 4 : 8;

		if (att->attisdropped || att->atttypid != types[i] || att->attlen != len ||
			att->attbyval != (text ? false : len == 4 ? true : FLOAT8PASSBYVAL) ||
			att->attalign != (len == 8 ? TYPALIGN_DOUBLE : TYPALIGN_INT) ||
			(text && att->attstorage == TYPSTORAGE_PLAIN))
			return false;
	}
	return true;
}

static pg_attribute_always_inline HeapTuple
message_direct(HeapTupleHeader ev, TupleDesc mdesc, int64 batch_id, MemoryContext bufcxt, char **buf,
			   Size *bufsize)
{
	/* the columns that are not null, one bit each (an event row has 11: two bytes of bitmap) */
	uint32		notnull = (ev->t_infomask & HEAP_HASNULL) ?
		((uint32) ev->t_bits[0] | ((uint32) ev->t_bits[1] << 8)) & ((1u << EV_NATTS) - 1) :
		(1u << EV_NATTS) - 1;
	char	   *src[EV_NATTS];
	char	   *tp = (char *) ev + ev->t_hoff;
	uint32		off = 0;
	bool		hasnull;
	Size		hoff;
	Size		bound;
	HeapTuple	tuple;
	HeapTupleHeader td;
	char	   *data;
	char	   *start;
	uint16		infomask = 0;
	int			i;

	StaticAssertStmt(EV_NATTS <= 16, "an event row's null bitmap is read as two bytes");

	/* where each column's value lies (NULL: null), as slot_deform_heap_tuple walks */
	for (i = 0; i < EV_NATTS; i++)
	{
		if (!(notnull & (1u << i)))
		{
			src[i] = NULL;
			continue;
		}
		/* event_template's columns: three of 8 bytes, two of 4, then text */
		if (i < EV_TYPE)
		{
			off = i < EV_OWNER ? TYPEALIGN(sizeof(int64), off) : TYPEALIGN(sizeof(int32), off);
			src[i] = tp + off;
			off += i < EV_OWNER ? sizeof(int64) : sizeof(int32);
		}
		else
		{
			off = att_align_pointer(off, TYPALIGN_INT, -1, tp + off);
			src[i] = tp + off;
			off += VARSIZE_ANY(tp + off);
		}
	}
	/* a message column is null where its event column is: all but ev_txid and ev_owner are used */
	hasnull = (notnull | (1u << EV_TXID) | (1u << EV_OWNER)) != (1u << EV_NATTS) - 1;

	/*
	 * At most the event's data, the batch id and an alignment per column:
	 * the message leaves out ev_txid and ev_owner and copies every other
	 * value as it is, or shorter.
	 */
	hoff = MAXALIGN(offsetof(HeapTupleHeaderData, t_bits) + (hasnull ? BITMAPLEN(MSG_NATTS) : 0));
	bound = hoff + off + sizeof(int64) + MSG_NATTS * MAXIMUM_ALIGNOF;
	if (buf == NULL)
		tuple = (HeapTuple) palloc(HEAPTUPLESIZE + bound);
	else
	{
		/* the caller's buffer, reused row after row (a message handed straight out) */
		if (*bufsize < HEAPTUPLESIZE + bound)
		{
			Size		want = Max(HEAPTUPLESIZE + bound, (Size) 1024);

			if (*buf != NULL)
				pfree(*buf);
			*buf = MemoryContextAlloc(bufcxt, want);
			*bufsize = want;
		}
		tuple = (HeapTuple) *buf;
	}
	tuple->t_data = td = (HeapTupleHeader) ((char *) tuple + HEAPTUPLESIZE);
	memset(td, 0, hoff);
	ItemPointerSetInvalid(&(tuple->t_self));
	tuple->t_tableOid = InvalidOid;
	HeapTupleHeaderSetTypeId(td, mdesc->tdtypeid);
	HeapTupleHeaderSetTypMod(td, mdesc->tdtypmod);
	ItemPointerSetInvalid(&(td->t_ctid));
	HeapTupleHeaderSetNatts(td, MSG_NATTS);
	td->t_hoff = hoff;

	/*
	 * heap_fill_tuple's rules for these types; the padding before an
	 * aligned value is zeroed, as in heap_form_tuple's palloc0'd tuple.
	 */
	start = data = (char *) td + hoff;
#define ALIGN_ZEROED(a) \
	do { \
		char	   *to_ = (char *) TYPEALIGN((a), data); \
		while (data < to_) \
			*data++ = 0; \
	} while (0)
	for (i = 0; i < MSG_NATTS; i++)
	{
		char	   *val = msg_from[i] >= 0 ? src[msg_from[i]] : NULL;
		Size		len;

		if (msg_from[i] >= 0 && val == NULL)
			continue;			/* null: its bit stays 0 */
		if (hasnull)
			td->t_bits[i >> 3] |= 1 << (i & 7);
		if (msg_from[i] < 0)
		{
			ALIGN_ZEROED(sizeof(int64));
			memcpy(data, &batch_id, sizeof(int64));
			data += sizeof(int64);
			continue;
		}
		if (msg_types[i] != TEXTOID)
		{
			len = msg_types[i] == INT4OID ? sizeof(int32) : sizeof(int64);
			ALIGN_ZEROED(len);
			memcpy(data, val, len);
			data += len;
			continue;
		}
		infomask |= HEAP_HASVARWIDTH;
		if (VARATT_IS_EXTERNAL(val))
		{
			/* a TOAST pointer, kept as it is (no alignment: short by definition) */
			infomask |= HEAP_HASEXTERNAL;
			len = VARSIZE_EXTERNAL(val);
			memcpy(data, val, len);
		}
		else if (VARATT_IS_SHORT(val))
		{
			len = VARSIZE_SHORT(val);
			memcpy(data, val, len);
		}
		else if (VARATT_CAN_MAKE_SHORT(val))
		{
			len = VARATT_CONVERTED_SHORT_SIZE(val);
			SET_VARSIZE_SHORT(data, len);
			memcpy(data + 1, VARDATA(val), len - 1);
		}
		else
		{
			ALIGN_ZEROED(sizeof(int32));
			len = VARSIZE(val);
			memcpy(data, val, len);
		}
		data += len;
	}
#undef ALIGN_ZEROED
	if (hasnull)
		infomask |= HEAP_HASNULL;
	td->t_infomask = infomask;
	tuple->t_len = hoff + (data - start);
	Assert(tuple->t_len <= bound);
	HeapTupleHeaderSetDatumLength(td, tuple->t_len);
	return tuple;
}

/* the event row under a slot as message_direct reads it, or NULL */
static inline HeapTupleHeader
event_direct(PartReceiver *r, TupleTableSlot *slot)
{
	HeapTuple	tup;
	bool		should_free;

	if (!r->msg_direct || !(TTS_IS_BUFFERTUPLE(slot) || TTS_IS_HEAPTUPLE(slot)))
		return NULL;
	if (slot->tts_tupleDescriptor != r->ev_desc)
	{
		/* checked once per descriptor: a read's slots live as long as it */
		r->ev_desc = slot->tts_tupleDescriptor;
		r->ev_direct = layout_is(r->ev_desc, pgque_event_types, EV_NATTS);
	}
	if (!r->ev_direct)
		return NULL;
	/* a heap tuple slot hands out its own tuple, never a copy */
	tup = ExecFetchSlotHeapTuple(slot, false, &should_free);
	if (should_free)
	{
		heap_freetuple(tup);
		return NULL;
	}
	/* a row stored before a column was added, or (never) a null ev_id */
	if (HeapTupleHeaderGetNatts(tup->t_data) != EV_NATTS ||
		((tup->t_data->t_infomask & HEAP_HASNULL) && att_isnull(EV_ID, tup->t_data->t_bits)))
		return NULL;
	return tup->t_data;
}

static void
part_startup(DestReceiver *self, int operation, TupleDesc typeinfo)
{
	pgque_window_check_desc(typeinfo);
}

/*
 * A streamed part meets a row out of ev_id order (or one message_direct
 * does not read): the rows already in the result move to mcache, which
 * puts every row of the read in order as before, and the result is
 * emptied (it held only these: streaming starts on an empty one).
 */
static void
stream_stop(PartReceiver *r)
{
	TupleTableSlot *s;
	MemoryContext old;

	r->stream = false;
	if (r->nput == 0)
		return;
	s = MakeSingleTupleTableSlot(r->desc, &TTSOpsMinimalTuple);
	while (tuplestore_gettupleslot(r->ts, true, false, s))
	{
		bool		isnull;
		int64		ev_id = DatumGetInt64(slot_getattr(s, MSG_ID + 1, &isnull));
		HeapTuple	tup;

		old = MemoryContextSwitchTo(mcache.cxt);
		tup = ExecCopySlotHeapTuple(s);
		MemoryContextSwitchTo(old);
		pgque_window_cache_keep_smallest(&mcache, tup, ev_id, (int) r->max_return + 1);
	}
	ExecDropSingleTupleTableSlot(s);
	tuplestore_clear(r->ts);
	r->nput = 0;
}

static bool
part_receive(TupleTableSlot *slot, DestReceiver *self)
{
	PartReceiver *r = (PartReceiver *) self;
	Datum		msg[MSG_NATTS];
	bool		msgnull[MSG_NATTS];
	MemoryContext old;
	HeapTuple	tup;
	int64		ev_id;

	r->nrows++;
	if (r->collect)
	{
		HeapTupleHeader ev = event_direct(r, slot);

		if (ev == NULL && r->stream)
			stream_stop(r);
		if (ev != NULL)
		{
			/* ev_id: the first column, never null */
			memcpy(&ev_id, (char *) ev + ev->t_hoff, sizeof(int64));
			if (r->stream && r->nput > 0 && ev_id < r->smax)
				stream_stop(r);	/* a row out of ev_id order: the cache sorts them */
			if (r->stream && (r->nput < r->max_return || ev_id == r->smax))
			{
				/*
				 * In ev_id order so far, and within the part (or of its last
				 * id): straight into the result, formed once in a reused
				 * buffer, the tuplestore's copy the only one kept
				 */
				tup = message_direct(ev, r->desc, r->batch_id, r->cxt, &r->buf, &r->bufsize);
				tuplestore_puttuple(r->ts, tup);
				r->nput++;
				r->smax = ev_id;
				return true;
			}
			if (r->stream)
				r->rest = true;	/* past the part: kept for the next ones */
			if (!pgque_window_cache_wants(&mcache, ev_id))
				return true;
			old = MemoryContextSwitchTo(mcache.cxt);
			tup = message_direct(ev, r->desc, r->batch_id, NULL, NULL, NULL);
			MemoryContextSwitchTo(old);
			pgque_window_cache_keep_smallest(&mcache, tup, ev_id, (int) r->max_return + 1);
			return true;
		}
		slot_getallattrs(slot);
		/* a row the bounded cache would drop is not formed */
		ev_id = DatumGetInt64(slot->tts_values[EV_ID]);
		if (!pgque_window_cache_wants(&mcache, ev_id))
			return true;

		/*
		 * Values stored out of line stay pointers, as in _window_rows'
		 * cache: the window's rows (and their TOAST) stay until every
		 * cursor is past it, and the key is the window.
		 */
		event_to_message(slot->tts_values, slot->tts_isnull, r->batch_id, msg, msgnull);
		old = MemoryContextSwitchTo(mcache.cxt);
		tup = heap_form_tuple(r->desc, msg, msgnull);
		MemoryContextSwitchTo(old);
		pgque_window_cache_keep_smallest(&mcache, tup, ev_id, (int) r->max_return + 1);
		return true;
	}
	/*
	 * The ordered read: the part, then one row that says there are more.
	 * The part takes the other rows of its last id too (the read comes
	 * WITH TIES): the next part resumes after that id (ADR 0105).
	 */
	slot_getallattrs(slot);
	if (r->nrows > r->max_return &&
		DatumGetInt64(slot->tts_values[EV_ID]) != r->last)
		return false;
	event_to_message(slot->tts_values, slot->tts_isnull, r->batch_id, msg, msgnull);
	tuplestore_putvalues(r->ts, r->desc, msg, msgnull);
	r->nput++;
	if (r->nrows == r->max_return)
		r->last = DatumGetInt64(msg[MSG_ID]);
	return true;
}

static void
part_shutdown(DestReceiver *self)
{
}

static void
part_destroy(DestReceiver *self)
{
}

/*
 * Hand out the part from mcache: its rows (*n), and whether more follow
 * (then *last is where the part ends).  false: the cache cannot answer.
 */
static bool
part_from_cache(const char *source, Datum *args, char *nulls, int64 batch_id, int64 max_return,
				Tuplestorestate *ts, int64 *n, bool *more, int64 *last)
{
	int			i;
	int64		avail;
	int64		k;

	if (!pgque_window_cache_matches(&mcache, source, args, nulls))
		return false;
	i = pgque_window_cache_start(&mcache, args, nulls);
	if (i < 0)
		return false;
	avail = mcache.ntuples - i;
	if (avail <= max_return && !mcache.complete)
		return false;
	/*
	 * with the other rows of the part's last id: the next part resumes
	 * after it (ADR 0105); the cache holds every row of the ids it kept
	 * (seal drops the cut id whole)
	 */
	*n = pgque_window_part_end(mcache.ev_ids, i, max_return, mcache.ntuples) - i;
	for (k = i; k < i + *n; k++)
	{
		HeapTuple	tup = mcache.tuples[k];

		/* the kept message, under this part's batch id */
		memcpy((char *) tup->t_data + tup->t_data->t_hoff + MSG_BATCH_OFFSET, &batch_id, sizeof(int64));
		tuplestore_puttuple(ts, tup);
	}
	*more = avail > *n || !mcache.complete;
	mcache_rest = *more;
	*last = *more ? mcache.ev_ids[i + *n - 1] : 0;
	return true;
}

static void
part_receiver_init(PartReceiver *r, Tuplestorestate *ts, TupleDesc desc, int64 batch_id, int64 max_return)
{
	memset(r, 0, sizeof(*r));
	r->pub.receiveSlot = part_receive;
	r->pub.rStartup = part_startup;
	r->pub.rShutdown = part_shutdown;
	r->pub.rDestroy = part_destroy;
	r->pub.mydest = DestTuplestore;	/* a tag only: not DestNone, which SPI reports as a utility */
	r->ts = ts;
	r->desc = desc;
	r->batch_id = batch_id;
	r->max_return = max_return;
	r->msg_direct = layout_is(desc, msg_types, MSG_NATTS);
	r->cxt = CurrentMemoryContext;
}

/*
 * How a kind of batch's window is read without its source: the kind's
 * pgque._*_batch_window() alone (ADR 0082), a kept plan each.  sql NULL:
 * none (0.2.0's SQL), _batch_source every time.
 */
typedef struct WindowOfKind
{
	const char *fn;				/* pgque.<fn>(bigint) */
	const char *sql;			/* $1 batch: lo_xmax, hi_xmax, lo_xip, hi, sub_id, pos */
	SPIPlanPtr	plan;
	bool		exists;			/* fn was found in this backend */
} WindowOfKind;

/*
 * Whether the kind's window function exists: a database still on 0.2.0's
 * SQL with this library (ADR 0019: between the library's install and
 * ALTER EXTENSION UPDATE) has none, and reads _batch_source as 0.2.0 did.
 * Once found, not looked up again (an update never drops it).
 */
static bool
window_of_kind_exists(WindowOfKind *wk)
{
	Oid			argtypes[1] = {INT8OID};

	if (wk->sql == NULL)
		return false;
	if (!wk->exists)
		wk->exists = OidIsValid(LookupFuncName(list_make2(makeString("pgque"), makeString((char *) wk->fn)),
											   1, argtypes, true));
	return wk->exists;
}

/*
 * Where an open batch's events are, from row 0 of the last SPI result, as
 * the window read's first parameters (lo, hi, xip, snapshot, owner, after)
 * and the slot's share: the window's bounds, owner and position in the six
 * columns from column first (lo's xmax, hi's xmax, lo's xip, hi, sub_id,
 * pos: the columns of pgque._*_batch_window and _batch_source), and the
 * relations in column source_col (0: not read; NULL, when the statement
 * did not say them, is returned as NULL unless need_source).  Copied out
 * of the SPI result, which the window read replaces.
 */
static char *
bounds_from_result(int source_col, bool need_source, int first, int64 batch_id,
				   const SlotShare *share, Datum *args, char *nulls)
{
	char	   *source = NULL;
	bool		isnull;
	int			i;

	if (source_col > 0)
	{
		Datum		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, source_col, &isnull);

		if (!isnull)
			source = TextDatumGetCString(d);
		else if (need_source)
			elog(ERROR, "pgque_bgw: batch %lld has no event source", (long long) batch_id);
	}
	for (i = 0; i < WINDOW_NPARAMS; i++)
		nulls[i] = 'n';
	for (i = 0; i < 6; i++)
	{
		Form_pg_attribute att = TupleDescAttr(SPI_tuptable->tupdesc, first + i - 1);
		Datum		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, first + i, &isnull);

		nulls[i] = isnull ? 'n' : ' ';
		args[i] = isnull ? (Datum) 0 : SPI_datumTransfer(d, att->attbyval, att->attlen);
	}
	args[WA_EV_ID] = (Datum) 0;
	args[WA_N] = (Datum) 0;
	args[WA_SLOT] = (Datum) 0;
	if (share != NULL && !share->by_source)
	{
		/* one slot's share of the window */
		args[WA_N] = Int32GetDatum(share->n);
		args[WA_SLOT] = Int32GetDatum(share->slot);
		nulls[WA_N] = nulls[WA_SLOT] = ' ';
	}
	return source;
}

/*
 * The bounds of open batch batch_id's window into args/nulls, with its
 * source (the relations to read) when want_source: a part served from the
 * cache needs neither the source nor the other kinds' tables.  false: the
 * batch is not open.
 */
static bool
batch_bounds(int64 batch_id, const SlotShare *share, WindowOfKind *wk, bool want_source,
			 Datum *args, char *nulls, char **source)
{
	Oid			argtypes[3] = {INT8OID, INT4OID, INT4OID};
	Datum		sargs[3];
	char		snulls[3] = {' ', 'n', 'n'};
	int			ret;

	sargs[0] = Int64GetDatum(batch_id);
	if (share != NULL)
	{
		sargs[1] = Int32GetDatum(share->n);
		sargs[2] = Int32GetDatum(share->slot);
		snulls[1] = snulls[2] = ' ';
	}
	if (want_source)
		ret = SPI_execute_plan(pgque_kept_generic_once(&source_plan,
										 "select source, lo_xmax, hi_xmax, lo_xip, hi, sub_id, pos"
										 "  from pgque._batch_source($1, $2, $3)",
										 3, argtypes),
							   sargs, snulls, false, 1);
	else
		ret = SPI_execute_plan(pgque_kept_generic_once(&wk->plan, wk->sql, 1, argtypes), sargs, snulls, false, 1);
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "pgque_bgw: batch source read failed: %s", SPI_result_code_string(ret));
	if (SPI_processed == 0)
		return false;
	if (want_source)
		*source = bounds_from_result(1, true, 2, batch_id, share, args, nulls);
	else
		(void) bounds_from_result(0, false, 1, batch_id, share, args, nulls);
	return true;
}

/*
 * Whether the part cache is likely to hold the next part: it holds the
 * rest of the window a part came from last.  Then the receive reads the
 * window's bounds alone first, and the source only when the cache turns
 * out not to serve; otherwise (a new window, most likely) it reads both
 * at once.
 */
static inline bool
cache_may_serve(void)
{
	return mcache.valid && !mcache.filling && mcache_rest;
}

/*
 * One part of open batch batch_id into ts: the number of rows, and *more
 * (the window goes on; *last is the part's last ev_id).  have_bounds: the
 * open statement returned the window's bounds into args/nulls, and its
 * source when it was asked for one (source non-NULL); otherwise the kind's
 * window function reads them.
 */
static int64
read_part(int64 batch_id, int64 max_return, const SlotShare *share, WindowOfKind *wk,
		  Tuplestorestate *ts, TupleDesc desc, bool *more, int64 *last,
		  bool have_bounds, char *source, Datum *args, char *nulls)
{
	int64		n;
	PartReceiver r;

	*more = false;
	*last = 0;

	/*
	 * A part of a window this backend holds comes from memory, with only
	 * the window's bounds read; otherwise the bounds again, with the source.
	 */
	if (source == NULL && cache_may_serve())
	{
		if (!have_bounds &&
			!batch_bounds(batch_id, share, wk, !window_of_kind_exists(wk), args, nulls, &source))
			return 0;
		if (part_from_cache(source, args, nulls, batch_id, max_return, ts, &n, more, last))
			return n;
	}
	else if (mcache.valid && !mcache.filling)
	{
		/* read with its source: the cache may still hold it (a part read again) */
		if (source == NULL && !batch_bounds(batch_id, share, wk, true, args, nulls, &source))
			return 0;
		if (part_from_cache(source, args, nulls, batch_id, max_return, ts, &n, more, last))
			return n;
	}
	if (source == NULL && !batch_bounds(batch_id, share, wk, true, args, nulls, &source))
		return 0;

	/*
	 * The window from the part's start, in no order, formed as messages
	 * into mcache and sorted there: no sort node copying every row once
	 * more.  A window larger than mcache keeps the rows with the smallest
	 * ids that fit, and the next part past them reads the rest the same
	 * way (rows already past the cut are not formed).  A receive nested in
	 * that read (from a policy on an event table) finds the cache being
	 * filled and reads its part in order below, leaving the cache to the
	 * outer read (ADR 0037).
	 */
	if (max_return < WINDOW_CACHE_ROWS && !mcache.filling)
	{
		part_receiver_init(&r, ts, desc, batch_id, max_return);
		r.collect = true;
		/*
		 * The part straight out while the rows come in ev_id order (ADR
		 * 0127): a source of one relation, whose heap holds them about in
		 * that order (a bucketed one's come in a run per bucket: sorted in
		 * mcache as before)
		 */
		r.stream = r.msg_direct && tuplestore_tuple_count(ts) == 0 && pgque_source_single(source);
		pgque_window_cache_reset(&mcache, source, args, nulls);
		/* a fresh snapshot: the window's tick may be newer than the caller's */
		mcache.filling = true;
		PG_TRY();
		{
			pgque_window_read(source, args, nulls, false, false, &r.pub);
		}
		PG_CATCH();
		{
			mcache.filling = false;
			PG_RE_THROW();
		}
		PG_END_TRY();
		mcache.filling = false;
		if (r.buf != NULL)
			pfree(r.buf);
		if (r.stream)
		{
			/*
			 * Every row came in ev_id order: the part is in the result,
			 * with every row of its last id.  The rows past it are kept,
			 * starting after that id; the part itself is not (read again,
			 * it is read from the tables).
			 */
			pgque_window_cache_seal(&mcache);
			mcache.has_from = true;
			mcache.from = r.smax;
			if (!r.rest)
				mcache.valid = false;
			mcache_rest = r.rest;
			*more = r.rest;
			*last = r.rest ? r.smax : 0;
			return r.nput;
		}
		pgque_window_cache_seal(&mcache);
		if (part_from_cache(source, args, nulls, batch_id, max_return, ts, &n, more, last))
			return n;
		/* only when ids repeat across the cut: the ordered read below */
	}

	/* a part as large as the cache: in ev_id order, one row past it says whether more follow */
	nulls[WA_LIMIT] = ' ';
	args[WA_LIMIT] = Int32GetDatum((int32) Min(max_return + 1, (int64) PG_INT32_MAX));
	part_receiver_init(&r, ts, desc, batch_id, max_return);
	pgque_window_read(source, args, nulls, false, true, &r.pub);
	mcache_rest = false;

	/*
	 * rows past max_return: more follow, or (all of them the last id's)
	 * perhaps none; then the next part finds the window's end
	 */
	*more = r.nrows > max_return;
	*last = r.last;
	return r.nput;
}

/*
 * One call of a consumer's receive: the kind's statements open the batch
 * (the argument checks on the first try), read the part, mark where it
 * ends, and finish an empty window to try the next one.
 */
typedef struct ReceiveKind
{
	const char *open_sql;		/* the call's arguments, then "first try";
								 * returns the batch id (NULL: none) and
								 * whether the slot pauses; with next_sql,
								 * it takes "want source" last and returns
								 * then where the batch's events are (the
								 * source NULL unless wanted) and the
								 * slot's sub_id, pos and epoch */
	int			nargs;			/* the call's arguments */
	Oid			argtypes[8];	/* theirs, then bool (and bool) */
	int			max_return_arg;
	int			share_arg;		/* slot, n at these two arguments; -1: none */
	bool		share_by_source;	/* its sources hold the slot's rows alone */
	const char *mark_sql;		/* $1 batch, $2 the part's last ev_id or NULL,
								 * $3 sub_id, $4 epoch (as next_sql's: NULL
								 * for a kind without next_sql) */
	const char *finish_sql;		/* $1 batch, $3 sub_id, $4 epoch */
	const char *paused_sql;		/* a pausing slot's part (ADR 0029): $1
								 * batch, $2 max_return, $3 sub_id, $4
								 * epoch (as mark_sql's), $5 n, $6 slot;
								 * NULL: the kind never pauses */
	const char *paused_finish_sql;	/* its finish of a part whose events
									 * were all withheld, with the same
									 * arguments; NULL: finish_sql */
	WindowOfKind window;		/* the batch's window, without its source */
	const char *next_sql;		/* the tries after the first, from what it
								 * returned: $1 sub_id, $2 epoch, $3 slot,
								 * $4 n, $5 max_return, $6 "want source"
								 * -> the batch id and where its events
								 * are; NULL: open_sql again, and the
								 * window's bounds per part */
	int			look_col;		/* receive_wait's look: the queue's id at
								 * this column of the open, whether it
								 * locked the row at the next; 0: none */
	int			last_col;		/* the part's end already marked, at this
								 * column of the open (and the one before
								 * the next's last); 0: not said */
	SPIPlanPtr	open_plan;
	SPIPlanPtr	mark_plan;
	SPIPlanPtr	finish_plan;
	SPIPlanPtr	next_plan;
	SPIPlanPtr	paused_plan;
	SPIPlanPtr	paused_finish_plan;
} ReceiveKind;

/*
 * the columns of a slot's open (_slot_receive_open), and of a plain
 * consumer's (_plain_receive_open): where its events are
 */
#define SLOT_OPEN_SOURCE 3
#define SLOT_OPEN_SUB_ID 8
#define SLOT_OPEN_EPOCH 10
#define PLAIN_OPEN_QUEUE_ID 11
#define PLAIN_OPEN_LAST 13
#define PLAIN_NEXT_LAST 9
/* ... and of its next tries (_slot_receive_next) */
#define SLOT_NEXT_SOURCE 2

/* the part's end, for the ack of the table the batch lives in */
#define MARK_SQL_WHERE(tbl, row, last_col) \
	"update pgque." tbl " set " last_col " = $2" \
	" where " row \
	"   and case when " last_col " is null then $2 is not null" \
	"            when $2 is null then true" \
	"            else " last_col " operator(pg_catalog.<>) $2 end"
#define MARK_SQL(tbl, batch_col, last_col) \
	MARK_SQL_WHERE(tbl, batch_col " operator(pg_catalog.=) $1", last_col)

/*
 * A slot's epoch row by its key, the subscription $3 and the epoch $4 that
 * the open returned, and the batch $1: slot_batch has no index on sb_batch,
 * so that its updates are HOT (ADR 0130).
 */
#define SLOT_ROW_SQL \
	"sb_sub operator(pg_catalog.=) $3 and sb_epoch operator(pg_catalog.=) $4" \
	" and sb_batch operator(pg_catalog.=) $1"

#define WINDOW_OF_KIND_SQL(fn) \
	fn, "select lo_xmax, hi_xmax, lo_xip, hi, sub_id, pos from pgque." fn "($1)"

/*
 * A plain consumer (ADR 0121): one statement opens the batch and says
 * where its events are, as a slot's; the tries after an empty window name
 * the subscription the first one locked and authorized.  An open the SQL
 * of before served (an unlogged queue, a cooperative main consumer)
 * returns no subscription and no bounds: every try opens again, and each
 * part reads the window's bounds.
 */
#define PLAIN_OPEN_SQL(wait) \
	"select batch_id, pause, source, lo_xmax, hi_xmax, lo_xip, hi, sub_id, pos, epoch, queue_id, locked," \
	"       part_last" \
	"  from pgque._plain_receive_open($1, $2, $3, " wait ", $4, $5, null)"
#define PLAIN_NEXT_SQL \
	"select batch_id, source, lo_xmax, hi_xmax, lo_xip, hi, sub_id, pos, part_last" \
	"  from pgque._plain_receive_open(null, null, $5, false, false, $6, $1)"

static ReceiveKind plain_kind = {
	PLAIN_OPEN_SQL("false"),
	3, {TEXTOID, TEXTOID, INT4OID, BOOLOID, BOOLOID}, 2, -1, false,
	MARK_SQL("subscription", "sub_batch", "sub_batch_last"),
	"select pgque._finish_batch($1)",
	NULL, NULL,
	{WINDOW_OF_KIND_SQL("_sub_batch_window")},
	PLAIN_NEXT_SQL,
	0, PLAIN_OPEN_LAST
};

/* 0.2.0's SQL declares receive under pgque_receive: its _receive_open */
static ReceiveKind plain_kind_020 = {
	"select pgque._receive_open($1, $2, $3, $4), false",
	3, {TEXTOID, TEXTOID, INT4OID, BOOLOID}, 2, -1, false,
	MARK_SQL("subscription", "sub_batch", "sub_batch_last"),
	"select pgque._finish_batch($1)",
	NULL, NULL,
	{NULL}						/* 0.2.0 has no _sub_batch_window */
};

/*
 * A partition slot (issue #30): one statement opens the batch and says
 * where its events are, the tries after an empty window skip the checks
 * the first one made.
 */
static ReceiveKind slot_kind = {
	"select batch_id, pause, source, lo_xmax, hi_xmax, lo_xip, hi, sub_id, pos, epoch"
	"  from pgque._slot_receive_open($1, $2, $3, $4, $5, $6, $7, $8)",
	6, {TEXTOID, TEXTOID, INT4OID, INT4OID, TEXTOID, INT4OID, BOOLOID, BOOLOID}, 5, 2, true,
	MARK_SQL_WHERE("slot_batch", SLOT_ROW_SQL, "sb_last"),
	"select pgque._slot_finish($1, $3, $4)",
	/* the epoch's row by its key, as the mark (ADR 0139) */
	"select * from pgque._receive_paused($1, $3, $4, $2, $5, $6)",
	/* the keys done in it released or carried, as its ack (ADR 0141) */
	"select pgque._pause_finish($1, $3, $4, $5, $6)",
	{NULL},						/* the bounds come with the open */
	"select batch_id, source, lo_xmax, hi_xmax, lo_xip, hi, sub_id, pos"
	"  from pgque._slot_receive_next($1, $2, $3, $4, $5, $6)"
};

/*
 * 0.2.0's SQL (a database not yet updated, ADR 0019) declares
 * receive_partitioned under pgque_receive_partitioned: its open returns the
 * batch id and the pause flag only, every try opens again, and every part
 * reads _batch_source (0.2.0 has no _slot_batch_window).
 */
static ReceiveKind slot_kind_020 = {
	"select batch_id, pause from pgque._slot_receive_open($1, $2, $3, $4, $5, $6, $7)",
	6, {TEXTOID, TEXTOID, INT4OID, INT4OID, TEXTOID, INT4OID, BOOLOID}, 5, 2, false,
	MARK_SQL("slot_batch", "sb_batch", "sb_last"),
	"select pgque._slot_finish($1)",
	/* 0.2.0's finds the row by the batch id (0.2.0 has its index) */
	"select * from pgque._receive_paused($1, $2, $5, $6)",
	NULL,						/* 0.2.0 finishes it as any part */
	{NULL}
};

static ReceiveKind coop_kind = {
	"select pgque._coop_receive_open($1, $2, $3, $4, $5, $6), false",
	5, {TEXTOID, TEXTOID, TEXTOID, INT4OID, INTERVALOID, BOOLOID}, 3, -1, false,
	MARK_SQL("coop_window", "cw_batch", "cw_last"),
	"select pgque._coop_finish($1)",
	NULL, NULL,
	{WINDOW_OF_KIND_SQL("_coop_batch_window")}
};

/*
 * A pausing slot's statement (ADR 0029) with its arguments: $1 the batch,
 * $2 max_return, $3 and $4 key/keynulls (the sub_id and epoch the open
 * returned; null for a kind that returns none), $5 n, $6 slot.
 */
static int
run_paused(SPIPlanPtr *plan, const char *sql, int64 batch_id, int64 max_return,
		   const SlotShare *share, const Datum *key, const char *keynulls, long count)
{
	Oid			types[6] = {INT8OID, INT4OID, INT4OID, INT8OID, INT4OID, INT4OID};
	Datum		args[6];
	char		nulls[6] = {' ', ' ', ' ', ' ', ' ', ' '};

	args[0] = Int64GetDatum(batch_id);
	args[1] = Int32GetDatum((int32) max_return);
	args[2] = key[0];
	args[3] = key[1];
	nulls[2] = keynulls[0];
	nulls[3] = keynulls[1];
	args[4] = Int32GetDatum(share->n);
	args[5] = Int32GetDatum(share->slot);
	return SPI_execute_plan(pgque_kept_generic_once(plan, sql, 6, types), args, nulls, false, count);
}

/* A pausing slot's part: its read withholds blocked keys, in SQL */
static int64
read_paused(ReceiveKind *kind, int64 batch_id, int64 max_return, const SlotShare *share,
			const Datum *key, const char *keynulls, Tuplestorestate *ts)
{
	int			ret;
	uint64		r;

	if (kind->paused_sql == NULL)
		elog(ERROR, "pgque_bgw: batch %lld pauses, but its kind has no paused read", (long long) batch_id);
	ret = run_paused(&kind->paused_plan, kind->paused_sql, batch_id, max_return, share, key, keynulls, 0);
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "pgque_bgw: a pausing slot's read failed: %s", SPI_result_code_string(ret));
	for (r = 0; r < SPI_processed; r++)
		tuplestore_puttuple(ts, SPI_tuptable->vals[r]);
	return (int64) SPI_processed;
}

/* the result is pgque.message, as the part readers form it */
static void
check_message_desc(TupleDesc desc)
{
	if (desc->natts != MSG_NATTS ||
		TupleDescAttr(desc, MSG_ID)->atttypid != INT8OID ||
		TupleDescAttr(desc, MSG_BATCH)->atttypid != INT8OID ||
		TupleDescAttr(desc, MSG_BATCH)->attalign != TYPALIGN_DOUBLE)
		elog(ERROR, "pgque_bgw: pgque.message does not have the expected columns");
}

/*
 * receive_wait()'s look and open in one statement (ADR 0108): a plain
 * consumer, whose first open also says the queue's id and whether it
 * locked the consumer's row (WaitLook); it locks nothing when there is no
 * batch to hand out.
 */
static ReceiveKind wait_kind = {
	PLAIN_OPEN_SQL("true"),
	3, {TEXTOID, TEXTOID, INT4OID, BOOLOID, BOOLOID}, 2, -1, false,
	MARK_SQL("subscription", "sub_batch", "sub_batch_last"),
	"select pgque._finish_batch($1)",
	NULL, NULL,
	{WINDOW_OF_KIND_SQL("_sub_batch_window")},
	PLAIN_NEXT_SQL,
	PLAIN_OPEN_QUEUE_ID, PLAIN_OPEN_LAST
};

/* what wait_kind's first open said besides the batch */
typedef struct WaitLook
{
	int32		queue_id;
	bool		locked;
} WaitLook;

/*
 * One receive of the call's consumer into ts: the call's first
 * kind->nargs arguments are the kind's.  -> the events handed out;
 * *no_batch: the first try found no batch.  look (wait_kind only): what
 * the first open said of the queue and the row lock.
 */
static int64
receive_once(FunctionCallInfo fcinfo, ReceiveKind *kind, Tuplestorestate *ts, TupleDesc desc,
			 bool *no_batch_out, WaitLook *look)
{
	Oid			mark_types[4] = {INT8OID, INT8OID, INT4OID, INT8OID};
	Datum		oargs[9];
	char		onulls[9];
	SlotShare	share;
	int			tries;
	int			guc_level;
	bool		no_batch = false;
	bool		pause = false;
	Datum		nargs[6] = {0};	/* next_sql's: sub_id, epoch, slot, n, max_return, want source */
	char		keynulls[2] = {'n', 'n'};	/* sub_id and epoch in nargs yet? */
	Oid			next_types[6] = {INT4OID, INT8OID, INT4OID, INT4OID, INT4OID, BOOLOID};
	int64		handed = 0;
	bool		use_next = false;	/* the first try named its subscription */

	for (tries = 0; tries < kind->nargs; tries++)
	{
		onulls[tries] = PG_ARGISNULL(tries) ? 'n' : ' ';
		oargs[tries] = PG_ARGISNULL(tries) ? (Datum) 0 : PG_GETARG_DATUM(tries);
	}
	onulls[kind->nargs] = ' ';
	onulls[kind->nargs + 1] = ' ';

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "pgque_bgw: SPI_connect failed");

	/*
	 * The statements of the call (here and in the PL/pgSQL it calls) look
	 * rows up by key: a generic plan serves every call, where the plan
	 * cache's default re-planned some of them on each call (10-15% of the
	 * call's CPU, ADR 0033).
	 */
	guc_level = NewGUCNestLevel();
	(void) set_config_option("plan_cache_mode", "force_generic_plan", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	for (tries = 0; tries < RECEIVE_TRIES; tries++)
	{
		int64		batch_id;
		int64		max_return;
		int64		n;
		int64		last = 0;
		bool		more = false;
		bool		isnull;
		Datum		margs[4];
		char		mnulls[4] = {' ', ' ', ' ', ' '};
		int			ret;
		char	   *source = NULL;
		bool		want_source;
		bool		have_bounds;
		bool		unmarked = false;	/* the open said no part's end is marked */
		Datum		wargs[WINDOW_NPARAMS];
		char		wnulls[WINDOW_NPARAMS];

		/*
		 * An open that returns the window's bounds returns its source too
		 * only when the part cache cannot serve the part (ADR 0078, 0082):
		 * the source is most of what locating a window costs.
		 */
		want_source = !pause && !cache_may_serve();
		if (!use_next)
		{
			/* the checks once, then the batch (re-opened, or the next one) */
			oargs[kind->nargs] = BoolGetDatum(tries == 0);
			oargs[kind->nargs + 1] = BoolGetDatum(want_source);
			ret = SPI_execute_plan(pgque_kept_generic_once(&kind->open_plan, kind->open_sql,
											 kind->nargs + (kind->next_sql != NULL ? 2 : 1), kind->argtypes),
								   oargs, onulls, false, 1);
		}
		else
		{
			/* the next batch of the slot and epoch the first try checked */
			nargs[5] = BoolGetDatum(want_source);
			ret = SPI_execute_plan(pgque_kept_generic_once(&kind->next_plan, kind->next_sql, 6, next_types),
								   nargs, NULL, false, 1);
		}
		if (ret != SPI_OK_SELECT || SPI_processed != 1)
			elog(ERROR, "pgque_bgw: receive could not open a batch: %s", SPI_result_code_string(ret));
		if (look != NULL && tries == 0)
		{
			bool		null;
			Datum		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, kind->look_col, &null);

			look->queue_id = null ? 0 : DatumGetInt32(d);
			d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, kind->look_col + 1, &null);
			look->locked = null || DatumGetBool(d);
		}
		batch_id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
		if (isnull)
		{
			no_batch = tries == 0;
			break;
		}
		/* checked by the open statement */
		max_return = DatumGetInt32(oargs[kind->max_return_arg]);
		if (kind->share_arg >= 0)
		{
			share.slot = DatumGetInt32(oargs[kind->share_arg]);
			share.n = DatumGetInt32(oargs[kind->share_arg + 1]);
			share.by_source = kind->share_by_source;
		}
		if (!use_next)
			pause = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
		have_bounds = false;
		if (kind->next_sql != NULL && (tries == 0 || use_next))
		{
			if (tries == 0)
			{
				bool		null_sub;
				bool		null_epoch;

				/* what the next tries start from */
				nargs[0] = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, SLOT_OPEN_SUB_ID, &null_sub);
				nargs[1] = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, SLOT_OPEN_EPOCH, &null_epoch);
				if ((null_sub && kind->share_arg >= 0) || null_epoch)
					elog(ERROR, "pgque_bgw: a slot's open returned batch %lld without its subscription or epoch",
						 (long long) batch_id);
				keynulls[0] = null_sub ? 'n' : ' ';
				keynulls[1] = ' ';
				/* a plain open the SQL of before served: no subscription, no bounds */
				use_next = !null_sub;
				nargs[2] = Int32GetDatum(kind->share_arg >= 0 ? share.slot : 0);
				nargs[3] = Int32GetDatum(kind->share_arg >= 0 ? share.n : 0);
				nargs[4] = Int32GetDatum((int32) max_return);
			}
			/* the source NULL: not asked for, or the slot pauses */
			source = bounds_from_result(tries == 0 ? SLOT_OPEN_SOURCE : SLOT_NEXT_SOURCE, false,
										(tries == 0 ? SLOT_OPEN_SOURCE : SLOT_NEXT_SOURCE) + 1,
										batch_id, kind->share_arg >= 0 ? &share : NULL, wargs, wnulls);
			/* the bounds (hi, never NULL for an open window) came with the open */
			have_bounds = wnulls[WA_SNAP] == ' ';
			if (kind->last_col > 0 && use_next)
			{
				bool		null_last;

				(void) SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
									 tries == 0 ? kind->last_col : PLAIN_NEXT_LAST, &null_last);
				unmarked = null_last;
			}
		}

		if (pause)
			n = read_paused(kind, batch_id, max_return, &share, nargs, keynulls, ts);
		else
		{
			n = read_part(batch_id, max_return, kind->share_arg >= 0 ? &share : NULL, &kind->window,
						  ts, desc, &more, &last, have_bounds, source, wargs, wnulls);
			/*
			 * A whole window where no part's end is marked (the row is
			 * locked: the open's word holds) needs no mark: it would
			 * change nothing (a window a part, the latency path's case).
			 */
			if (n > 0 && !(unmarked && !more))
			{
				/* where the part ends, for the ack; NULL: the whole window */
				margs[0] = Int64GetDatum(batch_id);
				margs[1] = Int64GetDatum(last);
				mnulls[1] = more ? ' ' : 'n';
				margs[2] = nargs[0];
				margs[3] = nargs[1];
				mnulls[2] = keynulls[0];
				mnulls[3] = keynulls[1];
				ret = SPI_execute_plan(pgque_kept_generic_once(&kind->mark_plan, kind->mark_sql, 4, mark_types),
									   margs, mnulls, false, 0);
				if (ret != SPI_OK_UPDATE)
					elog(ERROR, "pgque_bgw: receive could not mark the part: %s", SPI_result_code_string(ret));
			}
		}
		if (n > 0)
		{
			handed = n;
			break;
		}
		/* an empty window: finished here, the next one is tried */
		if (pause && kind->paused_finish_sql != NULL)
		{
			/* a pausing slot's part, its events all withheld (ADR 0141) */
			ret = run_paused(&kind->paused_finish_plan, kind->paused_finish_sql, batch_id, max_return,
							 &share, nargs, keynulls, 1);
			if (ret != SPI_OK_SELECT)
				elog(ERROR, "pgque_bgw: receive could not finish a pausing slot's part: %s",
					 SPI_result_code_string(ret));
			continue;
		}
		margs[0] = Int64GetDatum(batch_id);
		mnulls[1] = 'n';
		margs[2] = nargs[0];
		margs[3] = nargs[1];
		mnulls[2] = keynulls[0];
		mnulls[3] = keynulls[1];
		ret = SPI_execute_plan(pgque_kept_generic_once(&kind->finish_plan, kind->finish_sql, 4, mark_types),
							   margs, mnulls, false, 1);
		if (ret != SPI_OK_SELECT)
			elog(ERROR, "pgque_bgw: receive could not finish an empty batch: %s", SPI_result_code_string(ret));
	}
	AtEOXact_GUC(true, guc_level);
	SPI_finish();
	*no_batch_out = no_batch;
	return handed;
}

static Datum
receive_parts(FunctionCallInfo fcinfo, ReceiveKind *kind)
{
	Tuplestorestate *ts;
	TupleDesc	desc;
	MemoryContext old;
	bool		no_batch;

	old = pgque_materialize(fcinfo, &ts, &desc);
	MemoryContextSwitchTo(old);
	check_message_desc(desc);
	(void) receive_once(fcinfo, kind, ts, desc, &no_batch, NULL);

	/*
	 * No batch at all, and no worker can ever make one: say why once per
	 * session, in the place a developer trying the API looks (issue #28).
	 * Only without the preload: with it, status() tells workers that are
	 * off from a pg_cron schedule, which this cannot see cheaply.
	 */
	if (no_batch && pgque_shared == NULL && !said_nothing_ticks)
	{
		said_nothing_ticks = true;
		ereport(NOTICE,
				(errcode(ERRCODE_WARNING),
				 errmsg("no new batch: pgque_bgw is not in shared_preload_libraries, so no background worker ticks this database"),
				 errdetail("Events sent are received after a tick; until something calls pgque.ticker() there is none."),
				 errhint("Call pgque.ticker() (or pgque.start() with pg_cron), or add pgque_bgw to shared_preload_libraries and restart. "
						 "This is said once per session.")));
	}
	return (Datum) 0;
}

/*
 * pgque.receive(queue_name, consumer_name, max_return) -> setof pgque.message
 */
Datum
pgque_receive(PG_FUNCTION_ARGS)
{
	return receive_parts(fcinfo, &plain_kind_020);
}

/*
 * pgque.receive(queue_name, consumer_name, max_return) -> setof
 *               pgque.message: 0.3.0's SQL, which opens in one statement
 *               (ADR 0121)
 */
Datum
pgque_receive_plain(PG_FUNCTION_ARGS)
{
	return receive_parts(fcinfo, &plain_kind);
}

/*
 * pgque.receive_partitioned(queue_name, consumer_name, slot, n, worker,
 *                           max_return) -> setof pgque.message
 */
Datum
pgque_receive_partitioned(PG_FUNCTION_ARGS)
{
	return receive_parts(fcinfo, &slot_kind_020);
}

/*
 * pgque.receive_partitioned(queue_name, consumer_name, slot, n, worker,
 *                           max_return) -> setof pgque.message: 0.3.0's
 *                           SQL, which opens in one statement (issue #30)
 */
Datum
pgque_receive_slot(PG_FUNCTION_ARGS)
{
	return receive_parts(fcinfo, &slot_kind);
}

/*
 * pgque.receive_coop(queue, consumer, subconsumer, max_return,
 *                    dead_interval) -> setof pgque.message
 */
Datum
pgque_receive_coop(PG_FUNCTION_ARGS)
{
	return receive_parts(fcinfo, &coop_kind);
}

/*
 * The timeout of receive_wait() in milliseconds: 0 to
 * PGQUE_RECEIVE_WAIT_MAX_S seconds, in seconds and smaller units only.
 */
static int64
wait_timeout_ms(FunctionCallInfo fcinfo, int arg)
{
	Interval   *iv;

	if (PG_ARGISNULL(arg))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("timeout must not be null")));
	iv = PG_GETARG_INTERVAL_P(arg);
	if (iv->month != 0 || iv->day != 0 || iv->time < 0 ||
		iv->time > (int64) PGQUE_RECEIVE_WAIT_MAX_S * USECS_PER_SEC)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("timeout must be between 0 and %d seconds",
						PGQUE_RECEIVE_WAIT_MAX_S),
				 errdetail("The call's transaction holds its snapshot while it waits."),
				 errhint("Call receive_wait() again to wait longer.")));
	return iv->time / 1000;
}

/*
 * The queue of this session's last receive_wait(), by name: its id lets
 * the next call read the generation before its first look, which is then
 * the only look of a call that waits (ADR 0108).  Only a hint: a look that
 * names another id (the queue dropped and created again, renamed) reads
 * the generation of that one and looks again.
 */
static char *wait_queue_name = NULL;
static int32 wait_queue_id = 0;

static bool
wait_queue_known(FunctionCallInfo fcinfo, int32 *queue_id)
{
	char	   *name;
	bool		known;

	if (PG_ARGISNULL(0) || wait_queue_name == NULL)
		return false;
	name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	known = strcmp(name, wait_queue_name) == 0;
	pfree(name);
	if (known)
		*queue_id = wait_queue_id;
	return known;
}

static void
wait_queue_remember(FunctionCallInfo fcinfo, int32 queue_id)
{
	if (PG_ARGISNULL(0))
		return;
	if (wait_queue_name != NULL)
		pfree(wait_queue_name);
	wait_queue_name = MemoryContextStrdup(TopMemoryContext,
										  text_to_cstring(PG_GETARG_TEXT_PP(0)));
	wait_queue_id = queue_id;
}

/*
 * pgque.receive_wait(queue_name, consumer_name, max_return, timeout)
 *                    -> setof pgque.message (ADR 0102)
 *
 * receive() of a plain consumer that, when there is no batch, waits on the
 * server for the tick that makes one, up to timeout; then the events, or
 * nothing, as receive() would have returned.  The wait sleeps on the
 * condition variable of the queue's wait bucket (wake.c), which the commit
 * of a tick of the queue broadcasts, whoever ticks; each look for a batch
 * takes a fresh snapshot.  Only READ COMMITTED: a transaction snapshot
 * would never see the tick.  Not on a standby: receive() writes.
 */
Datum
pgque_receive_wait(PG_FUNCTION_ARGS)
{
	Tuplestorestate *ts;
	TupleDesc	desc;
	MemoryContext old;
	int64		timeout_ms;
	TimestampTz deadline;
	int32		queue_id = 0;
	bool		have_gen = false;
	bool		locked = false;
	uint64		gen = 0;

	timeout_ms = wait_timeout_ms(fcinfo, 3);
	if (RecoveryInProgress())
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("cannot receive on a standby"),
				 errdetail("A receive opens and finishes batches, which writes."),
				 errhint("Call receive_wait() on the primary.")));
	if (IsolationUsesXactSnapshot())
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TRANSACTION_STATE),
				 errmsg("receive_wait() needs isolation level READ COMMITTED"),
				 errdetail("A transaction snapshot never sees the tick it would wait for."),
				 errhint("Call it in a READ COMMITTED transaction, or call receive().")));
	old = pgque_materialize(fcinfo, &ts, &desc);
	MemoryContextSwitchTo(old);
	check_message_desc(desc);
	deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), timeout_ms);
	have_gen = wait_queue_known(fcinfo, &queue_id);

	for (;;)
	{
		WaitLook	look = {0, false};
		bool		no_batch;
		int64		got;

		CHECK_FOR_INTERRUPTS();
		/* before the look's snapshot: a tick committed after it moves it */
		if (have_gen)
			gen = pgque_tick_generation(queue_id);
		/* the look, and the open when there is a batch: one statement */
		got = receive_once(fcinfo, &wait_kind, ts, desc, &no_batch, &look);
		/* the queue's id, for this session's next call */
		if (look.queue_id != 0 && (!have_gen || look.queue_id != queue_id))
			wait_queue_remember(fcinfo, look.queue_id);
		if (got > 0)
			break;
		if (!no_batch)
		{
			/* empty windows finished (the row locked): look again at once */
			locked = true;
			if (GetCurrentTimestamp() >= deadline)
				break;
			continue;
		}

		/*
		 * A receive that found no events still locked the consumer's row,
		 * and finishing an empty window (the row updated twice in the
		 * transaction) took a key share of the queue's row, which rotation
		 * (maint_rotate_tables_step1's FOR UPDATE) waits for: a call that
		 * slept now would hold both until its timeout at each idle tick.
		 * It returns nothing instead; the caller's next call waits holding
		 * nothing (ADR 0107).  The look locks nothing when it finds no
		 * batch; one that found a tick and then no batch (another call of
		 * the consumer took it meanwhile) locked the row.
		 */
		if (look.locked)
			locked = true;
		if (locked || GetCurrentTimestamp() >= deadline)
			break;
		if (!have_gen || look.queue_id != queue_id)
		{
			/* the queue is known now: its generation, then look again */
			queue_id = look.queue_id;
			have_gen = true;
			continue;
		}
		(void) pgque_tick_wait(queue_id, gen, deadline);
	}
	return (Datum) 0;
}
