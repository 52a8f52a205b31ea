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

/*
 * The relations of a source as _event_source() writes it for a reader of
 * every row: "(select * from [only ]pgque.<name>[ union all ...])".  -1:
 * another form (a slot's filter, say), read by the plan.
 */
static int
parse_source(const char *source, DirectRel *rels, int max)
{
	const char *p = source;
	int			n = 0;

	if (*p++ != '(')
		return -1;
	for (;;)
	{
		if (n >= max)
			return -1;
		if (strncmp(p, "select * from ", 14) != 0)
			return -1;
		p += 14;
		rels[n].only = strncmp(p, "only ", 5) == 0;
		if (rels[n].only)
			p += 5;
		if (strncmp(p, "pgque.", 6) != 0)
			return -1;
		p += 6;
		if (!parse_ident(&p, rels[n].name))
			return -1;
		rels[n].rel = NULL;
		rels[n].irel = NULL;
		n++;
		if (strncmp(p, " union all ", 11) == 0)
		{
			p += 11;
			continue;
		}
		if (p[0] == ')' && p[1] == '\0')
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
 * The rows of one index scan of d (the keys: the range, or one xid) that
 * pass the rest of the window's predicate, to dest; false when dest asked
 * to stop.
 */
static bool
scan_direct(DirectRel *d, Snapshot snapshot, ScanKey keys, int nkeys, Datum *args, char *nulls,
			TupleTableSlot *slot, DestReceiver *dest, uint64 *nrows)
{
	IndexScanDesc scan;
	bool		go_on = true;
	bool		has_owner = nulls[WA_OWNER] != 'n';
	bool		has_after = nulls[WA_AFTER] != 'n';
	int32		owner = has_owner ? DatumGetInt32(args[WA_OWNER]) : 0;
	int64		after = has_after ? DatumGetInt64(args[WA_AFTER]) : 0;

	scan = pgque_index_beginscan(d->rel, d->irel, snapshot, nkeys);
	index_rescan(scan, keys, nkeys, NULL, 0);
	while (index_getnext_slot(scan, ForwardScanDirection, slot))
	{
		CHECK_FOR_INTERRUPTS();
		slot_getsomeattrs(slot, EV_OWNER + 1);
		/* never (open_direct: the columns are not null) */
		if (slot->tts_isnull[EV_ID] || slot->tts_isnull[EV_TXID])
			continue;
		if (!pgque_window_row_visible(slot->tts_values[EV_TXID], args[WA_SNAP]))
			continue;
		if (has_owner && !slot->tts_isnull[EV_OWNER] && DatumGetInt32(slot->tts_values[EV_OWNER]) != owner)
			continue;
		if (has_after && DatumGetInt64(slot->tts_values[EV_ID]) <= after)
			continue;
		(*nrows)++;
		if (!dest->receiveSlot(slot, dest))
		{
			go_on = false;
			break;
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
		/* ev_txid >= lo's xmax and < hi's xmax */
		ScanKeyInit(&keys[0], 1, BTGreaterEqualStrategyNumber, F_XID8GE, args[WA_LO]);
		ScanKeyInit(&keys[1], 1, BTLessStrategyNumber, F_XID8LT, args[WA_HI]);
		if (!scan_direct(&rels[i], snapshot, keys, 2, args, nulls, slot, dest, nrows))
			break;
		/* or in progress at lo (below its xmax: no row of the range again) */
		for (k = 0; k < nxids; k++)
		{
			ScanKeyInit(&keys[0], 1, BTEqualStrategyNumber, F_XID8EQ, xids[k]);
			if (!scan_direct(&rels[i], snapshot, keys, 1, args, nulls, slot, dest, nrows))
				break;
		}
		if (k < nxids)
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
