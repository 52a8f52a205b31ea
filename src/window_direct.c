/*
 * window_direct.c
 *		A window read without the executor (ADR 0110).
 *
 * A bucketed queue's window is 33 relations (the 32 buckets and the child
 * table's own heap until its buckets' step 2): through the kept plan that
 * is the executor start of an Append of 33 bitmap heap scans, their
 * recheck and filter expressions, every window (about 115,000 instructions
 * a relation, ADR 0093).  The plain receive's read of a whole window in no
 * order (src/receive.c, the part cache's fill) reads them here instead: per
 * relation an index scan of the ev_txid index (the range [lo's xmax, hi's
 * xmax), then one equality scan per in-progress xid that can add rows),
 * the window's predicate tested in C, each row handed to the caller's
 * receiver as the executor would hand it (a buffer heap tuple slot).
 *
 * The relations are those of the source _event_source() wrote, read back
 * from its text: a source of another form (a slot's filter, a name out of
 * the schema) is read by the kept plan, as is a relation the executor would
 * read differently (not a plain heap table, inheritance children, row
 * security, another column layout, no plain ev_txid btree index, no SELECT
 * right).  Every relation is checked before a row is handed out, so a read
 * either goes here whole or by the plan whole.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/xact.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/tupmacs.h"
#include "access/relscan.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "catalog/namespace.h"
#include "catalog/pg_am.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_class.h"
#include "catalog/pg_index.h"
#include "catalog/pg_type.h"
#include "commands/defrem.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "pgstat.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/rls.h"
#include "utils/snapmgr.h"
#include "utils/xid8.h"

#include "compat.h"
#include "window.h"

/* at most this many relations in one source (256 buckets, two tables, their heaps) */
#define DIRECT_MAX_RELS 600

typedef struct DirectRel
{
	char		name[NAMEDATALEN];
	bool		only;			/* "from only": the table's own heap */
	Relation	rel;
	Relation	irel;
} DirectRel;

/*
 * One relation name of the source: an identifier as quote_ident (format's
 * %I) writes it, at *p; false when it is not one.
 */
static bool
parse_ident(const char **p, char *out)
{
	const char *s = *p;
	int			n = 0;

	if (*s == '"')
	{
		s++;
		for (;;)
		{
			if (*s == '\0')
				return false;
			if (*s == '"')
			{
				if (s[1] != '"')
					break;
				s++;
			}
			if (n >= NAMEDATALEN - 1)
				return false;
			out[n++] = *s++;
		}
		s++;
	}
	else
	{
		while ((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_')
		{
			if (n >= NAMEDATALEN - 1)
				return false;
			out[n++] = *s++;
		}
	}
	if (n == 0)
		return false;
	out[n] = '\0';
	*p = s;
	return true;
}

/* past word at *p: true; else *p stays */
static bool
skip_word(const char **p, const char *word)
{
	size_t		len = strlen(word);

	if (strncmp(*p, word, len) != 0)
		return false;
	*p += len;
	return true;
}

/*
 * The relations of a source as _event_source() writes it (source.h's form)
 * for a reader of every row: "(select * from [only ]pgque.<name>[ union all
 * ...])".  -1: another form (a slot's filter, say), read by the plan.
 */
static int
parse_source(const char *source, DirectRel *rels, int max)
{
	const char *p = source;
	int			n = 0;

	if (!skip_word(&p, PGQUE_SOURCE_OPEN))
		return -1;
	for (;;)
	{
		if (n >= max)
			return -1;
		if (!skip_word(&p, PGQUE_SOURCE_SELECT))
			return -1;
		rels[n].only = skip_word(&p, PGQUE_SOURCE_ONLY);
		if (!skip_word(&p, PGQUE_SOURCE_SCHEMA))
			return -1;
		if (!parse_ident(&p, rels[n].name))
			return -1;
		rels[n].rel = NULL;
		rels[n].irel = NULL;
		n++;
		if (skip_word(&p, PGQUE_SOURCE_UNION))
			continue;
		if (skip_word(&p, PGQUE_SOURCE_CLOSE) && *p == '\0')
			return n;
		return -1;
	}
}

/* the btree family of xid8's operators, which the plan's range and = any use */
static Oid
xid8_btree_family(void)
{
	static Oid	family = InvalidOid;

	if (!OidIsValid(family))
	{
		Oid			opclass = GetDefaultOpClass(XID8OID, BTREE_AM_OID);

		if (OidIsValid(opclass))
			family = get_opclass_family(opclass);
	}
	return family;
}

/*
 * The index an event table's window is read through (this reader, and
 * window.c's stopped-ticker probe): a btree on ev_txid (att) alone in
 * xid8's default operator family, valid, ready and live, without a
 * predicate, and usable by this transaction's snapshots (one built over
 * broken HOT chains is not until its creator is older than every one of
 * them: the planner's test).  Opened under AccessShareLock; NULL when rel
 * has none (then the caller reads otherwise).  The locks of the indexes
 * passed over are kept to the transaction's end as the planner keeps them
 * (keep_locks), or released.
 */
Relation
pgque_event_txid_index(Relation rel, AttrNumber att, bool keep_locks)
{
	List	   *indexes = RelationGetIndexList(rel);
	ListCell   *lc;
	Relation	found = NULL;

	foreach(lc, indexes)
	{
		Relation	irel = index_open(lfirst_oid(lc), AccessShareLock);
		Form_pg_index ix = irel->rd_index;

		if (irel->rd_rel->relam == BTREE_AM_OID && ix->indisvalid && ix->indisready && ix->indislive &&
			ix->indnatts == 1 && ix->indkey.values[0] == att &&
			irel->rd_opfamily[0] == xid8_btree_family() &&
			heap_attisnull(irel->rd_indextuple, Anum_pg_index_indpred, NULL) &&
			(!ix->indcheckxmin ||
			 TransactionIdPrecedes(HeapTupleHeaderGetXmin(irel->rd_indextuple->t_data), TransactionXmin)))
		{
			found = irel;
			break;
		}
		index_close(irel, keep_locks ? NoLock : AccessShareLock);
	}
	list_free(indexes);
	return found;
}

/*
 * The relation opened and locked as the executor locks a scanned one, with
 * its ev_txid index; false (the plan reads the source) when the executor
 * would read it otherwise than this reader does.
 */
static bool
open_direct(DirectRel *d, Oid nsp)
{
	Oid			relid = get_relname_relid(d->name, nsp);
	Relation	rel;
	TupleDesc	desc;
	int			i;

	if (!OidIsValid(relid))
		return false;
	rel = try_table_open(relid, AccessShareLock);
	if (rel == NULL)
		return false;
	d->rel = rel;
	/* dropped and made again under the name between the lookup and the lock: the plan */
	if (RelationGetNamespace(rel) != nsp || strcmp(RelationGetRelationName(rel), d->name) != 0)
		return false;
	desc = RelationGetDescr(rel);
	if (rel->rd_rel->relkind != RELKIND_RELATION || rel->rd_rel->relam != HEAP_TABLE_AM_OID ||
		rel->rd_rel->relrowsecurity || rel->rd_rules != NULL || desc->natts != EV_NATTS)
		return false;

	/*
	 * a table that inherits it is read with it (not "only"); the flag stays
	 * set after the last one is gone, until a VACUUM, which event tables
	 * rarely see: asked of pg_inherits then, the children locked as the
	 * executor locks them
	 */
	if (!d->only && rel->rd_rel->relhassubclass &&
		find_inheritance_children(relid, AccessShareLock) != NIL)
		return false;
	for (i = 0; i < EV_NATTS; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		/* ev_id and ev_txid not null, as event_template has them */
		if (att->attisdropped || att->atttypid != pgque_event_types[i] ||
			((i == EV_ID || i == EV_TXID) && !att->attnotnull))
			return false;
	}
	if (pg_class_aclcheck(relid, GetUserId(), ACL_SELECT) != ACLCHECK_OK)
		return false;			/* the plan raises the error */

	d->irel = pgque_event_txid_index(rel, EV_TXID + 1, true);
	return d->irel != NULL;
}

/*
 * What one read hands out and how (ADR 0127): the TIDs its index scans
 * found, kept until the heap is read in block order.
 */
typedef struct DirectRead
{
	Snapshot	snapshot;
	Datum		hi;				/* the new tick's pg_snapshot, detoasted once */
	bool		has_owner;
	bool		has_after;
	int32		owner;
	int64		after;
	TupleTableSlot *slot;
	DestReceiver *dest;
	uint64	   *nrows;
	uint64	   *tids;			/* block << 16 | offset, as the index found them */
	int			ntids;
} DirectRead;

/*
 * At most this many TIDs are collected before the heap is read: a window's
 * rows go out in runs of this many (48 kB of TIDs), whatever its size.
 */
#define DIRECT_TID_CHUNK 8192

static int
tid_cmp(const void *a, const void *b)
{
	uint64		x = *(const uint64 *) a;
	uint64		y = *(const uint64 *) b;

	return (x > y) - (x < y);
}

/*
 * ev_id, ev_txid and ev_owner (NULL: owner_null) of an event row, read
 * from its bytes as slot_deform_heap_tuple would (event_template's first
 * four columns: three of 8 bytes, one of 4; open_direct checked their
 * types): false for a row stored with fewer columns, or a null ev_id or
 * ev_txid (never: open_direct checked they are not null), which the
 * caller skips.
 */
static inline bool
row_keys(HeapTupleHeader t, int64 *ev_id, Datum *txid, bool *owner_null, int32 *owner)
{
	char	   *tp = (char *) t + t->t_hoff;
	bool		hasnull = (t->t_infomask & HEAP_HASNULL) != 0;
	uint32		off = 0;
	int			i;

	if (HeapTupleHeaderGetNatts(t) <= EV_OWNER)
		return false;
	*owner_null = true;
	for (i = 0; i <= EV_OWNER; i++)
	{
		if (hasnull && att_isnull(i, t->t_bits))
		{
			if (i == EV_ID || i == EV_TXID)
				return false;
			continue;
		}
		if (i < EV_OWNER)
		{
			off = att_align_nominal(off, TYPALIGN_DOUBLE);
			if (i == EV_ID)
				memcpy(ev_id, tp + off, sizeof(int64));
			else if (i == EV_TXID)
			{
				FullTransactionId x;

				memcpy(&x, tp + off, sizeof(x));
				*txid = FullTransactionIdGetDatum(x);
			}
			off += sizeof(int64);
		}
		else
		{
			off = att_align_nominal(off, TYPALIGN_INT);
			memcpy(owner, tp + off, sizeof(int32));
			*owner_null = false;
		}
	}
	return true;
}

/*
 * The rows of the TIDs collected from d's index, heap page by heap page in
 * block order: each page pinned and share-locked once, the visible member
 * of each TID's HOT chain found under the lock (heap_hot_search_buffer, as
 * an index scan's heap fetch finds it), then, the lock released and the
 * pin kept, each row that passes the rest of the window's predicate handed
 * to dest.  An index scan fetched each row by its own call (a buffer
 * lookup, a content lock, a HOT search, a slot deform) in ev_txid order,
 * which visits a page again wherever two transactions' rows interleave.
 * false when dest asked to stop.
 */
static bool
read_tids(DirectRel *d, DirectRead *rd)
{
	uint64	   *t = rd->tids;
	int			n = rd->ntids;
	int			i;
	bool		go_on = true;
	Oid			relid = RelationGetRelid(d->rel);

	rd->ntids = 0;
	for (i = 1; i < n; i++)
		if (t[i - 1] > t[i])
			break;
	/* a window's rows were written in about the order their xids ended: rarely unsorted */
	if (i < n)
		qsort(t, n, sizeof(uint64), tid_cmp);
	i = 0;
	while (go_on && i < n)
	{
		BlockNumber blk = (BlockNumber) (t[i] >> 16);
		OffsetNumber vis[MaxHeapTuplesPerPage];
		int			nvis = 0;
		int			k;
		Buffer		buf;
		Page		page;

		CHECK_FOR_INTERRUPTS();
		buf = ReadBuffer(d->rel, blk);
		heap_page_prune_opt(d->rel, buf);
		LockBuffer(buf, BUFFER_LOCK_SHARE);
		for (; i < n && (BlockNumber) (t[i] >> 16) == blk; i++)
		{
			ItemPointerData tid;
			HeapTupleData ht;
			bool		all_dead;

			/* a TID found twice (never: one key each) goes out once */
			if (i > 0 && t[i] == t[i - 1])
				continue;
			ItemPointerSet(&tid, blk, (OffsetNumber) (t[i] & 0xffff));
			if (heap_hot_search_buffer(&tid, d->rel, buf, rd->snapshot, &ht, &all_dead, true))
			{
				/* distinct offsets of one page: never more (an index pointing past the page) */
				if (nvis >= MaxHeapTuplesPerPage)
					ereport(ERROR,
							(errcode(ERRCODE_INDEX_CORRUPTED),
							 errmsg("index \"%s\" points to more rows of block %u of \"%s\" than a page holds",
									RelationGetRelationName(d->irel), blk, RelationGetRelationName(d->rel))));
				vis[nvis++] = ItemPointerGetOffsetNumber(&tid);
				/* as an index scan's heap fetch counts it (the index's idx_tup_fetch) */
				pgstat_count_heap_fetch(d->irel);
			}
		}
		LockBuffer(buf, BUFFER_LOCK_UNLOCK);

		/*
		 * The rows stay where they are while the page is pinned (pruning
		 * moves them only under a cleanup lock): handed out from the page
		 */
		page = BufferGetPage(buf);
		for (k = 0; k < nvis; k++)
		{
			ItemId		lp = PageGetItemId(page, vis[k]);
			HeapTupleData ht;
			int64		ev_id = 0;
			Datum		txid = (Datum) 0;
			bool		owner_null = true;
			int32		owner = 0;

			ht.t_data = (HeapTupleHeader) PageGetItem(page, lp);
			ht.t_len = ItemIdGetLength(lp);
			ht.t_tableOid = relid;
			ItemPointerSet(&ht.t_self, blk, vis[k]);
			if (!row_keys(ht.t_data, &ev_id, &txid, &owner_null, &owner))
			{
				/* a row of another layout: as the slot reads it */
				ExecStoreBufferHeapTuple(&ht, rd->slot, buf);
				slot_getsomeattrs(rd->slot, EV_OWNER + 1);
				if (rd->slot->tts_isnull[EV_ID] || rd->slot->tts_isnull[EV_TXID])
					continue;
				ev_id = DatumGetInt64(rd->slot->tts_values[EV_ID]);
				txid = rd->slot->tts_values[EV_TXID];
				owner_null = rd->slot->tts_isnull[EV_OWNER];
				owner = owner_null ? 0 : DatumGetInt32(rd->slot->tts_values[EV_OWNER]);
			}
			if (!pgque_window_row_visible(txid, rd->hi))
				continue;
			if (rd->has_owner && !owner_null && owner != rd->owner)
				continue;
			if (rd->has_after && ev_id <= rd->after)
				continue;
			ExecStoreBufferHeapTuple(&ht, rd->slot, buf);
			(*rd->nrows)++;
			if (!rd->dest->receiveSlot(rd->slot, rd->dest))
			{
				go_on = false;
				break;
			}
		}
		/* the slot keeps its own pin of the page its last row is on */
		ReleaseBuffer(buf);
	}
	return go_on;
}

/*
 * The TIDs of one index scan of d (the keys: the range, or one xid) into
 * rd, the heap read each time they fill a chunk; false when dest asked to
 * stop.
 */
static bool
scan_direct(DirectRel *d, DirectRead *rd, ScanKey keys, int nkeys)
{
	IndexScanDesc scan;
	ItemPointer tid;
	bool		go_on = true;

	scan = pgque_index_beginscan(d->rel, d->irel, rd->snapshot, nkeys);
	index_rescan(scan, keys, nkeys, NULL, 0);
	while ((tid = index_getnext_tid(scan, ForwardScanDirection)) != NULL)
	{
		rd->tids[rd->ntids++] =
			((uint64) ItemPointerGetBlockNumber(tid) << 16) | ItemPointerGetOffsetNumber(tid);
		if (rd->ntids == DIRECT_TID_CHUNK)
		{
			CHECK_FOR_INTERRUPTS();
			if (!read_tids(d, rd))
			{
				go_on = false;
				break;
			}
		}
	}
	index_endscan(scan);
	return go_on;
}

/*
 * Read the window of args (the in-progress list already trimmed, or NULL)
 * from source's relations to dest, in no order: true, or false without a
 * row handed out when the source or one of its relations is not for this
 * reader (then the caller runs the plan).  Only for a read of every row of
 * one reader: the caller checks the event and slot filters are unused.
 */
bool
pgque_window_read_direct(const char *source, Datum *args, char *nulls, DestReceiver *dest,
						 uint64 *nrows)
{
	DirectRel  *rels;
	int			nrels;
	int			i;
	Oid			nsp;
	MemoryContext cxt;
	MemoryContext old;
	Snapshot	snapshot;
	TupleTableSlot *slot = NULL;
	Datum	   *xids = NULL;
	int			nxids = 0;
	bool		ok = true;
	DirectRead	rd;

	if (nulls[WA_LO] == 'n' || nulls[WA_HI] == 'n' || nulls[WA_SNAP] == 'n')
		return false;
	cxt = AllocSetContextCreate(CurrentMemoryContext, "pgque_bgw direct window read",
								ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(cxt);
	rels = palloc(sizeof(DirectRel) * DIRECT_MAX_RELS);
	nrels = parse_source(source, rels, DIRECT_MAX_RELS);
	nsp = nrels > 0 ? get_namespace_oid("pgque", true) : InvalidOid;
	if (!OidIsValid(nsp))
		ok = false;
	for (i = 0; ok && i < nrels; i++)
		ok = open_direct(&rels[i], nsp);
	if (ok && nulls[WA_XIP] != 'n')
	{
		ArrayType  *xip = DatumGetArrayTypeP(args[WA_XIP]);
		bool	   *xnulls;
		int			k;
		int			m = 0;

		deconstruct_array(xip, XID8OID, sizeof(FullTransactionId), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE,
						  &xids, &xnulls, &nxids);
		/*
		 * each xid once, and only those below lo's xmax (a snapshot's are):
		 * = any() reads a row once, and the range holds the others
		 */
		for (k = 0; k < nxids; k++)
		{
			int			j;

			if (xnulls[k])
				ok = false;		/* not a list a tick writes: the plan */
			if (!FullTransactionIdPrecedes(DatumGetFullTransactionId(xids[k]),
										   DatumGetFullTransactionId(args[WA_LO])))
				continue;
			for (j = 0; j < m; j++)
				if (FullTransactionIdEquals(DatumGetFullTransactionId(xids[j]),
										   DatumGetFullTransactionId(xids[k])))
					break;
			if (j == m)
				xids[m++] = xids[k];
		}
		nxids = m;
	}
	if (!ok)
	{
		/* the locks stay, as the plan's own would */
		for (i = 0; i < nrels; i++)
		{
			if (rels[i].irel != NULL)
				index_close(rels[i].irel, NoLock);
			if (rels[i].rel != NULL)
				table_close(rels[i].rel, NoLock);
		}
		MemoryContextSwitchTo(old);
		MemoryContextDelete(cxt);
		return false;
	}

	/*
	 * The snapshot SPI gives a statement that is not read-only (the plan's
	 * read, receive.c): a fresh one, after the command counter is advanced
	 */
	PushActiveSnapshot(GetTransactionSnapshot());
	CommandCounterIncrement();
	UpdateActiveSnapshotCommandId();
	snapshot = RegisterSnapshot(GetActiveSnapshot());
	*nrows = 0;
	memset(&rd, 0, sizeof(rd));
	rd.snapshot = snapshot;
	/* detoasted once, not by every row's test (a short header is copied each time) */
	rd.hi = PointerGetDatum(PG_DETOAST_DATUM(args[WA_SNAP]));
	rd.has_owner = nulls[WA_OWNER] != 'n';
	rd.has_after = nulls[WA_AFTER] != 'n';
	rd.owner = rd.has_owner ? DatumGetInt32(args[WA_OWNER]) : 0;
	rd.after = rd.has_after ? DatumGetInt64(args[WA_AFTER]) : 0;
	rd.dest = dest;
	rd.nrows = nrows;
	rd.tids = palloc(sizeof(uint64) * DIRECT_TID_CHUNK);
	dest->rStartup(dest, CMD_SELECT, RelationGetDescr(rels[0].rel));
	for (i = 0; i < nrels; i++)
	{
		ScanKeyData keys[2];
		int			k;

		if (slot == NULL || slot->tts_tupleDescriptor != RelationGetDescr(rels[i].rel))
		{
			if (slot != NULL)
				ExecDropSingleTupleTableSlot(slot);
			slot = table_slot_create(rels[i].rel, NULL);
		}
		rd.slot = slot;
		/* ev_txid >= lo's xmax and < hi's xmax */
		ScanKeyInit(&keys[0], 1, BTGreaterEqualStrategyNumber, F_XID8GE, args[WA_LO]);
		ScanKeyInit(&keys[1], 1, BTLessStrategyNumber, F_XID8LT, args[WA_HI]);
		if (!scan_direct(&rels[i], &rd, keys, 2))
			break;
		/* or in progress at lo (below its xmax: no row of the range again) */
		for (k = 0; k < nxids; k++)
		{
			ScanKeyInit(&keys[0], 1, BTEqualStrategyNumber, F_XID8EQ, xids[k]);
			if (!scan_direct(&rels[i], &rd, keys, 1))
				break;
		}
		if (k < nxids)
			break;
		/* the relation's last TIDs, with those of its in-progress xids: one pass over its pages */
		if (rd.ntids > 0 && !read_tids(&rels[i], &rd))
			break;
	}
	if (slot != NULL)
		ExecDropSingleTupleTableSlot(slot);
	dest->rShutdown(dest);
	PopActiveSnapshot();
	UnregisterSnapshot(snapshot);
	for (i = 0; i < nrels; i++)
	{
		index_close(rels[i].irel, NoLock);
		table_close(rels[i].rel, NoLock);
	}
	MemoryContextSwitchTo(old);
	MemoryContextDelete(cxt);
	return true;
}
