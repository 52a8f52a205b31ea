/*
 * evpost.c
 *		A send_batch chunk's ev_txid index entries written as posting
 *		tuples straight into the index's rightmost leaf (ADR 0137).
 *
 * Every row of one transaction carries the same ev_txid, and a batch's
 * rows are inserted by one heap_multi_insert (append.c).  index_insert
 * makes one leaf entry per row: a descent (or the cached rightmost-leaf
 * block), a binary search, a lock, a WAL record of its own; 7k of the
 * 11.5k instructions between a batched event and a multi-row INSERT
 * (ADR 0073).  The entries of such rows are what btree deduplication folds
 * into one posting tuple (key, sorted heap TIDs) when the leaf fills: this
 * writes that tuple at once, one per up to ~220 rows, with core's own
 * pieces: _bt_form_posting, PageAddItem, and the WAL record of an ordinary
 * leaf insert (XLOG_BTREE_INSERT_LEAF, whose redo adds the tuple it carries
 * at its offset, whatever it holds), so a standby, recovery and amcheck see
 * an index core could have made.
 *
 * Only where the result is exactly an index core could have made:
 *   - the index is a btree on ev_txid alone, ascending, under xid8's own
 *     comparison, of version 4 (heap TID a key column) with deduplication
 *     safe and allowed (allequalimage, deduplicate_items): pgque_evpost_fits;
 *   - the tuple goes into the rightmost leaf (no high key bounds it from
 *     above), at the offset where (key, first TID) sorts: after every item
 *     of a smaller key, or of the same key whose last TID is smaller, and
 *     before the first of a greater key; not before the page's first item
 *     unless the page is also the leftmost (its lower bound is its left
 *     sibling's high key, which this does not read);
 *   - a posting tuple at most half a page's item limit, as deduplication
 *     makes them (nbtdedup.c's maxpostingsize), and only the TIDs the page
 *     has room for: when the leaf has room for none, one row goes through
 *     index_insert, which splits it, and posting goes on in the new
 *     rightmost leaf (so too in an empty index: the first row makes its leaf).
 * Anything else (a key older than the leaf's first, the
 * same key with greater TIDs already there, a leaf being split) sends the
 * rest of the chunk through index_insert: the ordinary path, never
 * retried row by row here.
 *
 * Locks: the leaf's buffer lock in exclusive mode, as index_insert takes it,
 * and no other buffer lock held meanwhile (the heap pages are released by
 * heap_multi_insert).  The serializable check is core's
 * (CheckForSerializableConflictIn on the leaf, as _bt_doinsert).
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/nbtree.h"
#include "access/nbtxlog.h"
#include "access/xloginsert.h"
#include "catalog/pg_am.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "storage/predicate.h"
#include "utils/fmgroids.h"
#include "utils/rel.h"
#include "utils/xid8.h"

#include "compat.h"
#include "evpost.h"

/* a run's outcome, when it posted nothing */
typedef enum PostRefusal
{
	POST_FULL,					/* no room, or no leaf yet: one index_insert makes one */
	POST_ELSEWHERE				/* the entries do not go there: index_insert them */
} PostRefusal;

/* leaves split on the way before the rest goes through index_insert (a bound, not a tuning) */
#define SPLITS_MAX 8

bool
pgque_evpost_fits(Relation irel, AttrNumber heap_attno)
{
	bool		heapkeyspace;
	bool		allequalimage;

	if (irel->rd_rel->relam != BTREE_AM_OID ||
		IndexRelationGetNumberOfAttributes(irel) != 1 ||
		IndexRelationGetNumberOfKeyAttributes(irel) != 1 ||
		irel->rd_index->indkey.values[0] != heap_attno ||
		irel->rd_indoption[0] != 0 ||
		irel->rd_opcintype[0] != XID8OID ||
		index_getprocid(irel, 1, BTORDER_PROC) != F_XID8CMP ||
		!BTGetDeduplicateItems(irel))
		return false;
	_bt_metaversion(irel, &heapkeyspace, &allequalimage);
	return heapkeyspace && allequalimage;
}

static int
tid_cmp(const void *a, const void *b)
{
	return ItemPointerCompare((ItemPointer) a, (ItemPointer) b);
}

/* the xid8 key of a leaf's non-pivot tuple; false: a NULL (no event row has one) */
static bool
item_key(Relation irel, Page page, OffsetNumber off, uint64 *key)
{
	IndexTuple	itup = (IndexTuple) PageGetItem(page, PageGetItemId(page, off));
	bool		isnull;
	Datum		d = index_getattr(itup, 1, RelationGetDescr(irel), &isnull);

	if (isnull)
		return false;
	*key = U64FromFullTransactionId(DatumGetFullTransactionId(d));
	return true;
}

/*
 * The rightmost leaf, locked exclusively: the block core or this file
 * cached, else one descent.  InvalidBuffer: no leaf yet (an empty index),
 * or the leaf moved on under each of three tries (splits under way).
 */
static Buffer
lock_rightmost(Relation irel, bool *empty)
{
	BlockNumber blk = RelationGetTargetBlock(irel);
	int			tries;

	*empty = false;
	for (tries = 0; tries < 3; tries++)
	{
		Buffer		buf;
		BTPageOpaque opaque;

		if (blk == InvalidBlockNumber)
		{
			buf = pgque_bt_rightmost_leaf(irel);
			if (!BufferIsValid(buf))
			{
				*empty = true;
				return InvalidBuffer;
			}
			blk = BufferGetBlockNumber(buf);
			_bt_unlockbuf(irel, buf);
		}
		else
			buf = ReadBuffer(irel, blk);
		_bt_lockbuf(irel, buf, BT_WRITE);
		_bt_checkpage(irel, buf);
		opaque = BTPageGetOpaque(BufferGetPage(buf));
		if (P_ISLEAF(opaque) && P_RIGHTMOST(opaque) && !P_IGNORE(opaque) &&
			!P_INCOMPLETE_SPLIT(opaque))
			return buf;
		_bt_relbuf(irel, buf);
		RelationSetTargetBlock(irel, InvalidBlockNumber);
		blk = InvalidBlockNumber;
	}
	return InvalidBuffer;
}

/*
 * Where (key, tids[0]) goes on the locked rightmost leaf; InvalidOffsetNumber:
 * not on this page, or not without a posting list split.
 */
static OffsetNumber
post_offset(Relation irel, Page page, uint64 key, ItemPointer first_tid)
{
	BTPageOpaque opaque = BTPageGetOpaque(page);
	OffsetNumber low = P_FIRSTDATAKEY(opaque);
	OffsetNumber high = PageGetMaxOffsetNumber(page) + 1;
	uint64		k;

	/* the first item whose key is greater than key (items are sorted by key, then TID) */
	while (low < high)
	{
		OffsetNumber mid = low + (high - low) / 2;

		if (!item_key(irel, page, mid, &k))
			return InvalidOffsetNumber;
		if (k > key)
			high = mid;
		else
			low = mid + 1;
	}
	if (low == P_FIRSTDATAKEY(opaque))
		return P_LEFTMOST(opaque) ? low : InvalidOffsetNumber;

	/* the item before: a smaller key, or this key with smaller TIDs only */
	if (!item_key(irel, page, OffsetNumberPrev(low), &k))
		return InvalidOffsetNumber;
	if (k == key)
	{
		IndexTuple	prev = (IndexTuple) PageGetItem(page, PageGetItemId(page, OffsetNumberPrev(low)));

		if (ItemPointerCompare(BTreeTupleGetMaxHeapTID(prev), first_tid) >= 0)
			return InvalidOffsetNumber;
	}
	return low;
}

/* the size of a tuple of base's key with n heap TIDs (_bt_form_posting's) */
static Size
posting_size(IndexTuple base, int n)
{
	if (n == 1)
		return MAXALIGN(IndexTupleSize(base));
	return MAXALIGN(MAXALIGN(IndexTupleSize(base)) + sizeof(ItemPointerData) * n);
}

/*
 * One posting tuple of the first TIDs of tids[0 .. m - 1] on the rightmost
 * leaf; the number posted, or 0 and why.
 */
static int
post_run(Relation irel, IndexTuple base, uint64 key, ItemPointerData *tids, int m,
		 PostRefusal *why)
{
	bool		empty;
	Buffer		buf = lock_rightmost(irel, &empty);
	Page		page;
	OffsetNumber off;
	Size		room;
	Size		limit;
	int			n;
	IndexTuple	itup;
	Size		itemsz;

	*why = empty ? POST_FULL : POST_ELSEWHERE;
	if (!BufferIsValid(buf))
		return 0;
	page = BufferGetPage(buf);
	off = post_offset(irel, page, key, &tids[0]);
	if (off == InvalidOffsetNumber)
	{
		_bt_relbuf(irel, buf);
		return 0;
	}

	/* as many TIDs as fit the page and deduplication's limit on a posting tuple */
	room = PageGetFreeSpace(page);
	limit = Min(pgque_bt_max_item_size(page) / 2, INDEX_SIZE_MASK);
	n = 0;
	while (n < m && posting_size(base, n + 1) <= room && (n == 0 || posting_size(base, n + 1) <= limit))
		n++;
	if (n == 0)
	{
		_bt_relbuf(irel, buf);
		*why = POST_FULL;
		return 0;
	}
	itup = _bt_form_posting(base, tids, n);
	itemsz = IndexTupleSize(itup);
	Assert(itemsz == MAXALIGN(itemsz) && itemsz == posting_size(base, n));

	/* a serializable reader of this leaf sees the write, as core's insert tells it */
	CheckForSerializableConflictIn(irel, NULL, BufferGetBlockNumber(buf));

	START_CRIT_SECTION();
	if (PageAddItem(page, (Item) itup, itemsz, off, false, false) == InvalidOffsetNumber)
		elog(PANIC, "pgque_bgw: failed to add a posting tuple to index \"%s\"",
			 RelationGetRelationName(irel));
	MarkBufferDirty(buf);
	if (RelationNeedsWAL(irel))
	{
		xl_btree_insert xlrec;
		XLogRecPtr	recptr;

		xlrec.offnum = off;
		XLogBeginInsert();
		XLogRegisterData((char *) &xlrec, SizeOfBtreeInsert);
		XLogRegisterBuffer(0, buf, REGBUF_STANDARD);
		XLogRegisterBufData(0, (char *) itup, itemsz);
		recptr = XLogInsert(RM_BTREE_ID, XLOG_BTREE_INSERT_LEAF);
		PageSetLSN(page, recptr);
	}
	END_CRIT_SECTION();

	RelationSetTargetBlock(irel, BufferGetBlockNumber(buf));
	_bt_relbuf(irel, buf);
	pfree(itup);
	return n;
}

void
pgque_evpost_insert(Relation irel, Relation heaprel, IndexInfo *ii, Datum key,
					ItemPointerData *tids, int n)
{
	bool		isnull = false;
	IndexTuple	base = index_form_tuple(RelationGetDescr(irel), &key, &isnull);
	uint64		k = U64FromFullTransactionId(DatumGetFullTransactionId(key));
	int			done = 0;
	int			splits = 0;

	qsort(tids, n, sizeof(ItemPointerData), tid_cmp);
	while (done < n)
	{
		PostRefusal why;
		int			posted = post_run(irel, base, k, tids + done, n - done, &why);

		if (posted > 0)
		{
			done += posted;
			continue;
		}
		if (why != POST_FULL || splits >= SPLITS_MAX)
			break;
		/* the leaf is full, or there is none: core's insert of one row splits or makes it */
		index_insert(irel, &key, &isnull, &tids[done], heaprel, UNIQUE_CHECK_NO, false, ii);
		done++;
		splits++;
	}
	for (; done < n; done++)
		index_insert(irel, &key, &isnull, &tids[done], heaprel, UNIQUE_CHECK_NO, false, ii);
	pfree(base);
}
