/*
 * append.c
 *		The producer's append: event rows formed here and inserted into a
 *		queue's current child table (or partition bucket table) with
 *		heap_insert (a batch: heap_multi_insert) and index_insert, without
 *		the executor (ADR 0085); the kept SPI plans of insert_plan.c for a
 *		table this path does not cover.
 *
 * The executor's INSERT of one row into a table with one btree costs about
 * three times the insert itself: ExecutorStart/End, the plan's check and
 * locks, the result relation and its indexes opened and closed, the
 * expression states, per call.  What it does for an event table comes down
 * to: the row's defaults (ev_time now(), ev_txid the top-level xid), NOT
 * NULL, the INSERT privilege of the role it runs as, RowExclusiveLock on
 * the table and its indexes, heap_insert (toasting included: an external
 * or oversized value is toasted there) and one index_insert per ready
 * index.  That is what this file does, the way core writes catalog rows
 * (CatalogTupleInsert: heap_insert, then FormIndexDatum/index_insert on
 * the opened indexes), and a batch the way COPY does (heap_multi_insert,
 * then the rows' index entries; the ev_txid index's as posting tuples:
 * evpost.c).
 *
 * Only when the table is as the extension made it: a plain heap table with
 * event_template's eleven columns, no default but ev_id's, ev_time's now()
 * and ev_txid's pg_current_xact_id(), NOT NULL on those three only, no
 * CHECK, generated or identity column, no trigger (hence no foreign key),
 * rule or row-level security, and btree indexes on plain columns only (no
 * expression, predicate, unique or exclusion index, no other access
 * method), not a partition (its partition constraint), and the role holding INSERT on it.  Anything else, whatever an owner or a superuser adds, goes
 * through the kept plan, which the executor runs with every rule of an
 * INSERT.  The verdict is a function of the table's relcache entry and the
 * role: kept per table and dropped by the relcache invalidation of that
 * table (any ALTER, CREATE/DROP INDEX or TRIGGER, GRANT, RENAME, DROP sends
 * one) or of everything, and by any change to roles or memberships.
 *
 * Invalidation callbacks only mark; an entry's memory is freed only by a
 * call that is not nested in another append of this file (ADR 0037).  An
 * index's own functions (a user opclass) may run user code that sends
 * again: such a nested call takes the kept plan.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "access/nbtree.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/catalog.h"
#include "catalog/index.h"
#include "catalog/namespace.h"
#include "catalog/pg_am.h"
#include "catalog/pg_type.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "nodes/execnodes.h"
#include "nodes/primnodes.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/fmgroids.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"
#include "utils/xid8.h"

#include "compat.h"
#include "evpost.h"
#include "producer.h"
#include "rules.h"
#include "window.h"

/* event_template's columns, in order (sql/02_tables.sql; EV_NATTS and their types: window.h) */
#define AT_ID 0
#define AT_TIME 1
#define AT_TXID 2
#define AT_OWNER 3
#define AT_RETRY 4
#define AT_TYPE 5
#define AT_DATA 6
#define AT_EXTRA1 7

/* where an INS_* argument goes */
static const int ins_att[INS_NPARAMS] = {
	[INS_TYPE] = AT_TYPE, [INS_DATA] = AT_DATA,
	[INS_EXTRA1] = AT_EXTRA1, [INS_EXTRA1 + 1] = AT_EXTRA1 + 1,
	[INS_EXTRA1 + 2] = AT_EXTRA1 + 2, [INS_EXTRA1 + 3] = AT_EXTRA1 + 3,
	[INS_EV_ID] = AT_ID, [INS_EV_TIME] = AT_TIME, [INS_OWNER] = AT_OWNER, [INS_RETRY] = AT_RETRY
};

/* a queue's child (or bucket) table: key */
typedef struct TargetKey
{
	int32		queue_id;
	int32		table_no;
	int32		bucket;			/* -1: the child table itself */
} TargetKey;

typedef enum TargetState
{
	TARGET_UNRESOLVED,			/* the table's oid is to be looked up by name */
	TARGET_UNCHECKED,			/* oid known; the verdict is to be made */
	TARGET_DIRECT,				/* appended here */
	TARGET_PLAN					/* appended by the kept plan */
} TargetState;

typedef struct Target
{
	TargetKey	key;
	TargetState state;
	Oid			relid;
	Oid			checked_as;		/* the role the verdict holds for */
	MemoryContext cxt;			/* the index infos; NULL: none */
	int			nindexes;
	Oid		   *index_oids;
	IndexInfo **index_infos;
	int		   *hint_wait;		/* per index: appends before the next rightmost-leaf hint */
} Target;

/* beyond this many tables, the cache is emptied (a session creating queues forever) */
#define TARGETS_MAX 1024

static HTAB *targets = NULL;
static bool targets_reset = false;	/* a full invalidation: empty at the next chance */
static int	append_depth = 0;	/* direct appends in progress in this backend */
static bool callbacks_set = false;

/* Relcache callback: the verdicts on that table (InvalidOid: on every table) go. */
static void
target_rel_inval(Datum arg, Oid relid)
{
	HASH_SEQ_STATUS seq;
	Target	   *t;

	if (targets == NULL)
		return;
	if (!OidIsValid(relid))
		targets_reset = true;	/* freed at the next lookup, outside any append */
	/* every entry on a reset: no verdict outlives it, even within this call */
	hash_seq_init(&seq, targets);
	while ((t = hash_seq_search(&seq)) != NULL)
		if (!OidIsValid(relid) || t->relid == relid)
			t->state = TARGET_UNRESOLVED;
}

/* Syscache callback on roles and memberships: every privilege verdict goes. */
static void
target_role_inval(Datum arg, int cacheid, uint32 hashvalue)
{
	HASH_SEQ_STATUS seq;
	Target	   *t;

	if (targets == NULL)
		return;
	hash_seq_init(&seq, targets);
	while ((t = hash_seq_search(&seq)) != NULL)
		if (t->state == TARGET_DIRECT || t->state == TARGET_PLAN)
			t->state = TARGET_UNCHECKED;
}

static void
free_targets(void)
{
	HASH_SEQ_STATUS seq;
	Target	   *t;

	hash_seq_init(&seq, targets);
	while ((t = hash_seq_search(&seq)) != NULL)
		if (t->cxt != NULL)
			MemoryContextDelete(t->cxt);
	hash_destroy(targets);
	targets = NULL;
}

/* The cache entry of a queue's table; only outside any direct append (it may free). */
static Target *
target_of(const QueueInfo *q, int bucket)
{
	TargetKey	key;
	Target	   *t;
	bool		found;

	Assert(append_depth == 0);
	if (!callbacks_set)
	{
		CacheRegisterRelcacheCallback(target_rel_inval, (Datum) 0);
		CacheRegisterSyscacheCallback(AUTHOID, target_role_inval, (Datum) 0);
		CacheRegisterSyscacheCallback(AUTHMEMROLEMEM, target_role_inval, (Datum) 0);
		callbacks_set = true;
	}
	if (targets != NULL && (targets_reset || hash_get_num_entries(targets) >= TARGETS_MAX))
		free_targets();
	targets_reset = false;
	if (targets == NULL)
	{
		HASHCTL		ctl;

		memset(&ctl, 0, sizeof(ctl));
		ctl.keysize = sizeof(TargetKey);
		ctl.entrysize = sizeof(Target);
		targets = hash_create("pgque_bgw append targets", 16, &ctl, HASH_ELEM | HASH_BLOBS);
	}

	memset(&key, 0, sizeof(key));
	key.queue_id = q->queue_id;
	key.table_no = q->cur_table;
	key.bucket = q->nbuckets > 0 ? bucket : -1;
	t = hash_search(targets, &key, HASH_ENTER, &found);
	if (!found)
	{
		t->state = TARGET_UNRESOLVED;
		t->relid = InvalidOid;
		t->cxt = NULL;
		t->nindexes = 0;
	}
	return t;
}

/* Is this column default the call of fn (now(), pg_current_xact_id())? */
static bool
default_is_call(TupleConstr *constr, AttrNumber attnum, Oid fn)
{
	int			i;

	for (i = 0; i < constr->num_defval; i++)
	{
		Node	   *expr;

		if (constr->defval[i].adnum != attnum)
			continue;
		expr = stringToNode(constr->defval[i].adbin);
		return IsA(expr, FuncExpr) && ((FuncExpr *) expr)->funcid == fn &&
			((FuncExpr *) expr)->args == NIL;
	}
	return false;
}

/*
 * Is rel an event table as the extension made it (the file header)?  Also
 * fills t's index infos, in a context of their own.
 */
static bool
table_is_plain(Target *t, Relation rel)
{
	TupleDesc	desc = RelationGetDescr(rel);
	TupleConstr *constr = desc->constr;
	List	   *indexes;
	ListCell   *lc;
	int			i;

	/*
	 * A partition too: the executor checks a row inserted into a partition
	 * directly against its partition constraint (ExecPartitionCheck), which
	 * is in no TupleConstr (the second reader: an owner's ATTACH PARTITION
	 * of an event table let rows outside its bounds in, and a read through
	 * the parent's pruning missed them).
	 */
	if (rel->rd_rel->relkind != RELKIND_RELATION || rel->rd_rel->relam != HEAP_TABLE_AM_OID ||
		rel->rd_rel->relispartition ||
		rel->trigdesc != NULL || rel->rd_rules != NULL || rel->rd_rel->relrowsecurity ||
		desc->natts != EV_NATTS)
		return false;
	for (i = 0; i < EV_NATTS; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (att->attisdropped || att->atttypid != pgque_event_types[i] || att->attidentity != '\0' ||
			att->attgenerated != '\0' || att->attnotnull != (i <= AT_TXID))
			return false;
	}
	if (constr == NULL || constr->num_check != 0 || constr->has_generated_stored ||
		constr->num_defval != 3 ||
		!default_is_call(constr, AT_TIME + 1, F_NOW) ||
		!default_is_call(constr, AT_TXID + 1, F_PG_CURRENT_XACT_ID))
		return false;
	/* the third default is ev_id's: always given here */
	for (i = 0; i < constr->num_defval; i++)
		if (constr->defval[i].adnum > AT_TXID + 1)
			return false;

	indexes = RelationGetIndexList(rel);
	if (t->cxt != NULL)
		MemoryContextDelete(t->cxt);
	t->cxt = AllocSetContextCreate(CacheMemoryContext, "pgque_bgw append target",
								   ALLOCSET_SMALL_SIZES);
	t->nindexes = 0;
	t->index_oids = MemoryContextAlloc(t->cxt, sizeof(Oid) * Max(list_length(indexes), 1));
	t->index_infos = MemoryContextAlloc(t->cxt, sizeof(IndexInfo *) * Max(list_length(indexes), 1));
	t->hint_wait = MemoryContextAllocZero(t->cxt, sizeof(int) * Max(list_length(indexes), 1));
	foreach(lc, indexes)
	{
		Relation	irel = index_open(lfirst_oid(lc), RowExclusiveLock);
		MemoryContext old;
		IndexInfo  *ii;
		bool		plain;

		/*
		 * An expression or partial index is not plain, seen in its pg_index
		 * row: BuildIndexInfo folds those expressions, which runs their
		 * functions, and one that sends again would empty this cache under
		 * this call (free_targets: the attack spec
		 * attack_nested_send_verdict crashed the backend).
		 */
		if (!heap_attisnull(irel->rd_indextuple, Anum_pg_index_indexprs, NULL) ||
			!heap_attisnull(irel->rd_indextuple, Anum_pg_index_indpred, NULL))
		{
			index_close(irel, NoLock);
			return false;
		}
		old = MemoryContextSwitchTo(t->cxt);
		ii = BuildIndexInfo(irel);
		plain = ii->ii_Expressions == NIL && ii->ii_Predicate == NIL &&
			!ii->ii_Unique && ii->ii_ExclusionOps == NULL;

		/*
		 * btree only: other access methods keep per-statement state in the
		 * IndexInfo (ii_AmCache: BRIN's descriptor, GIN's and GiST's
		 * states) that must not outlive the statement, as this one does.
		 */
		plain = plain && irel->rd_rel->relam == BTREE_AM_OID;
		MemoryContextSwitchTo(old);
		index_close(irel, NoLock);
		for (i = 0; plain && i < ii->ii_NumIndexAttrs; i++)
			if (ii->ii_IndexAttrNumbers[i] < 1 || ii->ii_IndexAttrNumbers[i] > EV_NATTS)
				plain = false;
		if (!plain)
			return false;
		t->index_oids[t->nindexes] = lfirst_oid(lc);
		t->index_infos[t->nindexes] = ii;
		t->nindexes++;
	}
	list_free(indexes);
	return true;
}

/*
 * Open the target's table, locked as the executor locks a result relation,
 * with its verdict made for the current role; NULL: the kept plan appends
 * (the table is not plain, not found by its cached oid, or this append is
 * nested in another).
 */
static Relation
open_target(Target *t, const QueueInfo *q, int bucket)
{
	int			tries;

	if (append_depth > 0)
		return NULL;
	for (tries = 0; tries < 3; tries++)
	{
		Relation	rel;
		bool		direct;

		if (t->state == TARGET_UNRESOLVED)
		{
			char		name[NAMEDATALEN];

			pgque_event_table(name, q->queue_id, q->cur_table, q->nbuckets > 0 ? bucket : -1);
			t->relid = get_relname_relid(name, get_namespace_oid("pgque", false));
			if (!OidIsValid(t->relid))
				return NULL;	/* the plan says it is missing */
			t->state = TARGET_UNCHECKED;
		}
		if (t->state == TARGET_PLAN && t->checked_as == GetUserId())
			return NULL;

		/* the lock accepts invalidations: the entry may be marked under it */
		rel = try_table_open(t->relid, RowExclusiveLock);
		if (rel == NULL)
		{
			t->state = TARGET_UNRESOLVED;
			continue;
		}
		if (t->state == TARGET_UNRESOLVED)
		{
			table_close(rel, NoLock);
			continue;
		}
		if (t->state == TARGET_DIRECT && t->checked_as == GetUserId())
			return rel;

		/* a verdict, for this role (opening the indexes may mark the entry again) */
		t->state = TARGET_UNCHECKED;
		t->checked_as = GetUserId();
		direct = table_is_plain(t, rel) &&
			pg_class_aclcheck(t->relid, GetUserId(), ACL_INSERT) == ACLCHECK_OK;
		if (t->state != TARGET_UNCHECKED)
		{
			table_close(rel, NoLock);
			continue;
		}
		t->state = direct ? TARGET_DIRECT : TARGET_PLAN;
		if (direct)
			return rel;
		table_close(rel, NoLock);
		return NULL;
	}
	return NULL;
}

/*
 * The rightmost-leaf hint of a small btree (ADR 0092).  Core inserts a key
 * greater than every other one straight into the rightmost leaf it cached
 * in the index's target block (nbtinsert.c's _bt_search_insert, which checks
 * under the page's lock that the block is still the rightmost leaf, has
 * room and that the key goes there, and else descends from the root), but
 * caches it only in a tree of 3 levels or more (BTREE_FASTPATH_MIN_LEVEL):
 * about 150,000 events.  Below that, every append descended from the root:
 * every current table after a rotation, and every table of a queue that
 * never grows that large.  ev_txid grows with each transaction, so an
 * event's key is almost always the greatest: this caches the rightmost
 * leaf of a smaller tree (one descent, _bt_get_endpoint), and again when
 * core has dropped the hint (a split, a key that did not fit, a page
 * locked by another producer), but at most once in HINT_EVERY appends
 * of the backend to the table, so that a producer whose keys do not go
 * there (a transaction open across many others) pays one descent more per
 * HINT_EVERY appends, not one per append.
 */
#define FASTPATH_MIN_LEVEL 2	/* nbtinsert.c's BTREE_FASTPATH_MIN_LEVEL */
#define HINT_EVERY 16

static void
hint_rightmost_leaf(Target *t, int i, Relation irel)
{
	Buffer		buf;

	if (t->hint_wait[i] > 0)
		t->hint_wait[i]--;
	if (RelationGetTargetBlock(irel) != InvalidBlockNumber || t->hint_wait[i] > 0)
		return;
	t->hint_wait[i] = HINT_EVERY;
	if (irel->rd_rel->relam != BTREE_AM_OID || _bt_getrootheight(irel) >= FASTPATH_MIN_LEVEL)
		return;					/* core keeps its own hint */
	buf = pgque_bt_rightmost_leaf(irel);
	if (!BufferIsValid(buf))
		return;					/* an empty index: no leaf yet */
	RelationSetTargetBlock(irel, BufferGetBlockNumber(buf));
	_bt_relbuf(irel, buf);
}

/* index i's entry of a row: its columns' values, as FormIndexDatum gives them for plain columns */
static void
insert_index_entry(Target *t, int i, Relation rel, Relation irel, ItemPointer tid, Datum *values,
				   bool *isnull)
{
	IndexInfo  *ii = t->index_infos[i];
	Datum		ivalues[INDEX_MAX_KEYS];
	bool		inull[INDEX_MAX_KEYS];
	int			k;

	for (k = 0; k < ii->ii_NumIndexAttrs; k++)
	{
		ivalues[k] = values[ii->ii_IndexAttrNumbers[k] - 1];
		inull[k] = isnull[ii->ii_IndexAttrNumbers[k] - 1];
	}
	hint_rightmost_leaf(t, i, irel);
	index_insert(irel, ivalues, inull, tid, rel, UNIQUE_CHECK_NO, false, ii);
}

static void
insert_index_rows(Target *t, Relation rel, Relation *irels, HeapTuple tup, Datum *values,
				  bool *isnull)
{
	int			i;

	for (i = 0; i < t->nindexes; i++)
		if (irels[i]->rd_index->indisready)	/* else being built concurrently: not yet */
			insert_index_entry(t, i, rel, irels[i], &tup->t_self, values, isnull);
}

/*
 * Rows per heap_multi_insert call, as COPY buffers them (copyfrom.c's
 * MAX_BUFFERED_TUPLES), and the slots that carry them: kept for the
 * backend's life on a copy of the event row type (every plain event table
 * has it: table_is_plain), so that a batch makes none.
 */
#define MULTI_INSERT_ROWS 1000

static MemoryContext slot_cxt = NULL;
static TupleDesc slot_desc = NULL;
static TupleTableSlot *slot_pool[MULTI_INSERT_ROWS];
static int	slot_pool_n = 0;

static TupleTableSlot **
multi_slots(TupleDesc desc, int m)
{
	MemoryContext old;

	Assert(m <= MULTI_INSERT_ROWS);
	if (slot_cxt == NULL)
	{
		slot_cxt = AllocSetContextCreate(TopMemoryContext, "pgque_bgw append slots",
										 ALLOCSET_DEFAULT_SIZES);
		old = MemoryContextSwitchTo(slot_cxt);
		slot_desc = CreateTupleDescCopy(desc);
		MemoryContextSwitchTo(old);
	}
	old = MemoryContextSwitchTo(slot_cxt);
	while (slot_pool_n < m)
		slot_pool[slot_pool_n++] = MakeTupleTableSlot(slot_desc, &TTSOpsHeapTuple);
	MemoryContextSwitchTo(old);
	return slot_pool;
}

/*
 * The rows of a batch, MULTI_INSERT_ROWS at a time: heap_multi_insert
 * (one WAL record per heap page, not per row: 0.7k instructions a row
 * against heap_insert's 3.1k, ADR 0085), then the index entries: the
 * ev_txid index's as posting tuples (evpost.c, ADR 0137), any other's row
 * by row.
 * The slots own their tuples (formed in the caller's context) until
 * cleared, also on an error.
 */
static void
append_chunk(Target *t, Relation rel, Relation *irels, Datum (*values)[EV_NATTS],
			 bool (*isnull)[EV_NATTS], int k, CommandId cid)
{
	TupleDesc	desc = RelationGetDescr(rel);
	TupleTableSlot **slots = multi_slots(desc, k);
	ItemPointerData *tids = palloc(sizeof(ItemPointerData) * k);

	PG_TRY();
	{
		int			r;
		int			i;

		for (r = 0; r < k; r++)
			ExecStoreHeapTuple(heap_form_tuple(desc, values[r], isnull[r]), slots[r], true);
		heap_multi_insert(rel, slots, k, cid, 0, NULL);
		for (i = 0; i < t->nindexes; i++)
		{
			if (!irels[i]->rd_index->indisready)
				continue;		/* being built concurrently: not yet */
			if (k > 1 && pgque_evpost_fits(irels[i], AT_TXID + 1))
			{
				/* one ev_txid for every row of a batch (fill_batch): posting tuples */
				for (r = 0; r < k; r++)
				{
					Assert(values[r][AT_TXID] == values[0][AT_TXID]);
					tids[r] = slots[r]->tts_tid;
				}
				pgque_evpost_insert(irels[i], rel, t->index_infos[i], values[0][AT_TXID], tids, k);
			}
			else
				for (r = 0; r < k; r++)
					insert_index_entry(t, i, rel, irels[i], &slots[r]->tts_tid, values[r],
									   isnull[r]);
		}
	}
	PG_FINALLY();
	{
		int			c;

		for (c = 0; c < k; c++)
			ExecClearTuple(slots[c]);
	}
	PG_END_TRY();
	pfree(tids);
}

/* fills rows first .. first + k - 1 of a source into values/isnull[0 .. k - 1] */
typedef void (*FillRows) (const void *src, int first, int k, Datum (*values)[EV_NATTS],
						  bool (*isnull)[EV_NATTS]);

/*
 * Append the m rows of src to the opened table, then close it and its
 * indexes (keeping the locks to the end of the transaction, as the
 * executor does).  One row: heap_insert; more: MULTI_INSERT_ROWS at a time,
 * each chunk formed just before it is inserted, so that a batch holds one
 * chunk's row values, whatever its length.
 */
static void
append_direct(Target *t, Relation rel, FillRows fill, const void *src, int m)
{
	TupleDesc	desc = RelationGetDescr(rel);
	CommandId	cid = GetCurrentCommandId(true);
	Relation   *irels = palloc(sizeof(Relation) * Max(t->nindexes, 1));
	int			chunk = Min(m, MULTI_INSERT_ROWS);
	Datum		(*values)[EV_NATTS] = palloc(sizeof(*values) * chunk);
	bool		(*isnull)[EV_NATTS] = palloc(sizeof(*isnull) * chunk);
	int			i;

	append_depth++;
	PG_TRY();
	{
		for (i = 0; i < t->nindexes; i++)
			irels[i] = index_open(t->index_oids[i], RowExclusiveLock);
		if (m == 1)
		{
			HeapTuple	tup;

			fill(src, 0, 1, values, isnull);
			tup = heap_form_tuple(desc, values[0], isnull[0]);
			heap_insert(rel, tup, cid, 0, NULL);
			insert_index_rows(t, rel, irels, tup, values[0], isnull[0]);
			heap_freetuple(tup);
		}
		else
		{
			int			done;

			for (done = 0; done < m; done += chunk)
			{
				int			k = Min(m - done, chunk);

				fill(src, done, k, values, isnull);
				append_chunk(t, rel, irels, values, isnull, k, cid);
			}
		}
		for (i = 0; i < t->nindexes; i++)
			index_close(irels[i], NoLock);
		table_close(rel, NoLock);
	}
	PG_FINALLY();
	{
		append_depth--;
	}
	PG_END_TRY();
	pfree(irels);
	pfree(values);
	pfree(isnull);
}

/* the kept plan's way, inside SPI */
static void
append_one_by_plan(const QueueInfo *q, int bucket, Datum *args, const bool *isnull)
{
	char		nulls[INS_NPARAMS];
	int			ret;
	int			i;

	for (i = 0; i < INS_NPARAMS; i++)
		nulls[i] = isnull[i] ? 'n' : ' ';
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "pgque_bgw: SPI_connect failed");
	ret = pgque_insert_execute(q, bucket, INSERT_ONE, args, nulls, 1);
	if (ret != SPI_OK_INSERT || SPI_processed != 1)
		elog(ERROR, "pgque_bgw: event insert failed: %s", SPI_result_code_string(ret));
	SPI_finish();
}

/* one event given by the INS_* positions */
typedef struct OneRow
{
	const Datum *args;
	const bool *isnull;
} OneRow;

static void
fill_one(const void *src, int first, int k, Datum (*values)[EV_NATTS], bool (*isnull)[EV_NATTS])
{
	const OneRow *o = src;
	int			i;

	Assert(first == 0 && k == 1);
	for (i = 0; i < INS_NPARAMS; i++)
	{
		values[0][ins_att[i]] = o->args[i];
		isnull[0][ins_att[i]] = o->isnull[i];
	}
	if (isnull[0][AT_TIME])
	{
		values[0][AT_TIME] = TimestampTzGetDatum(GetCurrentTransactionStartTimestamp());
		isnull[0][AT_TIME] = false;
	}
	values[0][AT_TXID] = FullTransactionIdGetDatum(GetTopFullTransactionId());
	isnull[0][AT_TXID] = false;
}

/*
 * Append one event to the queue's current table (bucket: its partition
 * bucket table): args/isnull by the INS_* positions, ev_id given; a NULL
 * ev_time is now().
 */
void
pgque_append_one(const QueueInfo *q, int bucket, Datum *args, bool *isnull)
{
	Target	   *t = append_depth == 0 ? target_of(q, bucket) : NULL;
	Relation	rel = t != NULL ? open_target(t, q, bucket) : NULL;
	OneRow		o;

	Assert(!isnull[INS_EV_ID]);
	if (rel == NULL)
	{
		append_one_by_plan(q, bucket, args, isnull);
		return;
	}
	o.args = args;
	o.isnull = isnull;
	append_direct(t, rel, fill_one, &o, 1);
}

static Datum
int8_array(const int64 *v, int n)
{
	Datum	   *d = palloc(sizeof(Datum) * n);
	int			i;

	for (i = 0; i < n; i++)
		d[i] = Int64GetDatum(v[i]);
	return PointerGetDatum(construct_array(d, n, INT8OID, sizeof(int64), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
}

static Datum
text_array(const Datum *v, const bool *nulls, int n)
{
	int			dims[1] = {n};
	int			lbs[1] = {1};

	return PointerGetDatum(construct_md_array((Datum *) v, (bool *) nulls, 1, dims, lbs, TEXTOID, -1,
											  false, TYPALIGN_INT));
}

/* the kept plan's way: one INSERT ... SELECT of the arrays, inside SPI */
static void
append_rows_by_plan(const QueueInfo *q, int bucket, Datum type_name, const int64 *ids,
					const Datum *payloads, const bool *pnull, const Datum *keys, const bool *knull,
					int m)
{
	Datum		args[4];
	char		nulls[4] = {' ', ' ', ' ', keys == NULL ? 'n' : ' '};
	int			ret;

	args[0] = type_name;
	args[1] = int8_array(ids, m);
	args[2] = text_array(payloads, pnull, m);
	args[3] = keys == NULL ? (Datum) 0 : text_array(keys, knull, m);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "pgque_bgw: SPI_connect failed");
	ret = pgque_insert_execute(q, bucket, INSERT_BATCH, args, nulls, 0);
	if (ret != SPI_OK_INSERT || SPI_processed != (uint64) m)
		elog(ERROR, "pgque_bgw: batch insert failed: %s", SPI_result_code_string(ret));
	SPI_finish();
}

/* events of one type given as arrays (pgque_append_rows) */
typedef struct BatchRows
{
	Datum		type_name;
	const int64 *ids;
	const Datum *payloads;
	const bool *pnull;
	const Datum *keys;			/* NULL: none */
	const bool *knull;
	Datum		now;
	Datum		txid;
} BatchRows;

static void
fill_batch(const void *src, int first, int k, Datum (*values)[EV_NATTS], bool (*isnull)[EV_NATTS])
{
	const BatchRows *b = src;
	int			r;

	for (r = 0; r < k; r++)
	{
		int			e = first + r;

		memset(isnull[r], true, sizeof(isnull[r]));
		values[r][AT_ID] = Int64GetDatum(b->ids[e]);
		isnull[r][AT_ID] = false;
		values[r][AT_TIME] = b->now;
		isnull[r][AT_TIME] = false;
		values[r][AT_TXID] = b->txid;
		isnull[r][AT_TXID] = false;
		values[r][AT_TYPE] = b->type_name;
		isnull[r][AT_TYPE] = false;
		values[r][AT_DATA] = b->payloads[e];
		isnull[r][AT_DATA] = b->pnull[e];
		if (b->keys != NULL)
		{
			values[r][AT_EXTRA1] = b->keys[e];
			isnull[r][AT_EXTRA1] = b->knull[e];
		}
	}
}

/*
 * Append m events of one type to the queue's current table (bucket: its
 * partition bucket table), in this order: ids[r], payloads[r]/pnull[r],
 * the key keys[r]/knull[r] in ev_extra1 (keys NULL: none); ev_time now(),
 * the other fields NULL.
 */
void
pgque_append_rows(const QueueInfo *q, int bucket, Datum type_name, const int64 *ids,
				  const Datum *payloads, const bool *pnull, const Datum *keys, const bool *knull,
				  int m)
{
	Target	   *t = append_depth == 0 ? target_of(q, bucket) : NULL;
	Relation	rel = t != NULL ? open_target(t, q, bucket) : NULL;
	BatchRows	b;

	if (rel == NULL)
	{
		append_rows_by_plan(q, bucket, type_name, ids, payloads, pnull, keys, knull, m);
		return;
	}
	b.type_name = type_name;
	b.ids = ids;
	b.payloads = payloads;
	b.pnull = pnull;
	b.keys = keys;
	b.knull = knull;
	b.now = TimestampTzGetDatum(GetCurrentTransactionStartTimestamp());
	b.txid = FullTransactionIdGetDatum(GetTopFullTransactionId());
	append_direct(t, rel, fill_batch, &b, m);
}
