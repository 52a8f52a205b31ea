/*
 * insert.c
 *		The producer hot path: send() and insert_event() in C.
 *
 * Each call finds the queue by name and appends one row to the queue's
 * current child table.  The queue's id, current table and insert flag are
 * cached per backend, keyed by name; a statement trigger on pgque.queue
 * sends a relcache invalidation for that table on every change (rotation,
 * config, drop), which flushes the cache here, transactionally, the way
 * PostgreSQL's own caches learn of catalog changes.  The lookup and the
 * insert are SPI plans prepared once and kept: the insert one per queue,
 * rebuilt when rotation moves the queue to another child table.
 * Relations are named with their schema, so the plans do not depend on
 * search_path; the plan cache revalidates them if a table is dropped and
 * recreated (DROP/CREATE EXTENSION reuses queue ids).
 *
 * The checks and error messages are those of the SQL helpers in
 * sql/10_util.sql and sql/30_produce.sql, with the same SQLSTATEs.
 */
#include "postgres.h"

#include "catalog/pg_collation.h"
#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/lsyscache.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "catalog/namespace.h"
#include "storage/sinval.h"
#include "miscadmin.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "compat.h"
#include "pgque_bgw.h"

#define PGQUE_QUEUE_NAME_MAX 57
#define PGQUE_EXTRA_COLS 4

/*
 * Parameters of the single-row insert plan: $1 ev_type, $2 ev_data,
 * $3..$6 ev_extra1..4, $7 ev_id (NULL: next of the queue's sequence),
 * $8 ev_time (NULL: now()), $9 ev_owner, $10 ev_retry.
 */
#define INS_TYPE 0
#define INS_DATA 1
#define INS_EXTRA1 2
#define INS_EV_ID 6
#define INS_EV_TIME 7
#define INS_OWNER 8
#define INS_RETRY 9
#define INS_NPARAMS 10

/* the kinds of insert plan kept per target table */
typedef enum InsertKind
{
	INSERT_ONE,					/* one event */
	INSERT_BATCH,				/* an array of events, ids drawn in input order */
	INSERT_BATCH_IDS,			/* an array of events with their ids given */
	INSERT_NKINDS
} InsertKind;

/*
 * The insert plans of a queue's current child table: one set for the
 * table itself, or one per partition bucket table (ADR 0013).
 */
typedef struct InsertPlan
{
	int32		queue_id;		/* hash key */
	int32		cur_table;		/* child table the plans insert into */
	int32		nbuckets;		/* 0: the child table itself */
	SPIPlanPtr *plans;			/* [bucket * INSERT_NKINDS + kind] */
	SPIPlanPtr	ids_plan;		/* draws n ids in order */
} InsertPlan;

/* what a producer needs to know of a queue */
typedef struct QueueInfo
{
	int32		queue_id;
	int32		cur_table;
	int32		nbuckets;		/* partition buckets, 0 for none */
	bool		disabled;
} QueueInfo;

/* ... cached by name */
typedef struct QueueEntry
{
	char		name[PGQUE_QUEUE_NAME_MAX + 1]; /* hash key */
	QueueInfo	info;
} QueueEntry;

static SPIPlanPtr queue_lookup_plan = NULL;
static HTAB *insert_plans = NULL;
static HTAB *queue_cache = NULL;
static Oid	queue_table_oid = InvalidOid;
static bool queue_cache_callback_set = false;

PG_FUNCTION_INFO_V1(pgque_queue_changed);

PG_FUNCTION_INFO_V1(pgque_send);
PG_FUNCTION_INFO_V1(pgque_send_batch);
PG_FUNCTION_INFO_V1(pgque_insert_event);
PG_FUNCTION_INFO_V1(pgque_insert_event_full);

/* Validate a queue name as pgque._check_name('queue', ...) does. */
void
pgque_check_queue_name(text *name)
{
	int			len;

	if (name == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("queue name must not be null")));
	len = VARSIZE_ANY_EXHDR(name);
	if (len == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("queue name must not be empty")));
	if (len > PGQUE_QUEUE_NAME_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_NAME_TOO_LONG),
				 errmsg("queue name is too long (%d bytes)", len),
				 errdetail("The limit is %d bytes.", PGQUE_QUEUE_NAME_MAX)));
}

static SPIPlanPtr
prepare_kept(const char *sql, int nargs, Oid *argtypes)
{
	SPIPlanPtr	plan = SPI_prepare(sql, nargs, argtypes);

	if (plan == NULL)
		elog(ERROR, "pgque_bgw: SPI_prepare failed for \"%s\": %s",
			 sql, SPI_result_code_string(SPI_result));
	if (SPI_keepplan(plan) != 0)
		elog(ERROR, "pgque_bgw: SPI_keepplan failed");
	return plan;
}

/*
 * The kept plans of a queue, from the cache; the per-table ones are
 * dropped when the queue's current table or bucket count changed.
 */
static InsertPlan *
plan_entry(const QueueInfo *q)
{
	InsertPlan *entry;
	bool		found;

	if (insert_plans == NULL)
	{
		HASHCTL		ctl;

		memset(&ctl, 0, sizeof(ctl));
		ctl.keysize = sizeof(int32);
		ctl.entrysize = sizeof(InsertPlan);
		insert_plans = hash_create("pgque_bgw insert plans", 16, &ctl,
								   HASH_ELEM | HASH_BLOBS);
	}

	entry = hash_search(insert_plans, &q->queue_id, HASH_ENTER, &found);
	if (!found)
	{
		entry->plans = NULL;
		entry->ids_plan = NULL;
	}
	if (entry->plans != NULL &&
		(entry->cur_table != q->cur_table || entry->nbuckets != q->nbuckets))
	{
		int			i;

		for (i = 0; i < Max(entry->nbuckets, 1) * INSERT_NKINDS; i++)
			if (entry->plans[i] != NULL)
				SPI_freeplan(entry->plans[i]);
		pfree(entry->plans);
		entry->plans = NULL;
	}
	if (entry->plans == NULL)
	{
		entry->cur_table = q->cur_table;
		entry->nbuckets = q->nbuckets;
		entry->plans = MemoryContextAllocZero(TopMemoryContext,
											  sizeof(SPIPlanPtr) * Max(q->nbuckets, 1) * INSERT_NKINDS);
	}
	return entry;
}

/*
 * An insert plan for a queue's current child table (bucket: the partition
 * bucket table, when the queue has buckets), from the cache.
 */
static SPIPlanPtr
insert_plan_for(const QueueInfo *q, int bucket, InsertKind kind)
{
	InsertPlan *entry = plan_entry(q);
	char		table[96];
	char		sql[768];
	SPIPlanPtr *slot;

	slot = &entry->plans[bucket * INSERT_NKINDS + kind];
	if (*slot != NULL)
		return *slot;

	if (q->nbuckets > 0)
		snprintf(table, sizeof(table), "pgque.event_%d_%d_b%d", q->queue_id, q->cur_table, bucket);
	else
		snprintf(table, sizeof(table), "pgque.event_%d_%d", q->queue_id, q->cur_table);

	if (kind == INSERT_ONE)
	{
		Oid			argtypes[INS_NPARAMS] = {TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID,
		INT8OID, TIMESTAMPTZOID, INT4OID, INT4OID};

		snprintf(sql, sizeof(sql),
				 "insert into %s"
				 " (ev_id, ev_time, ev_owner, ev_retry, ev_type, ev_data,"
				 "  ev_extra1, ev_extra2, ev_extra3, ev_extra4)"
				 " values (coalesce($7, pg_catalog.nextval('pgque.event_%d_id_seq'::pg_catalog.regclass)),"
				 " coalesce($8, pg_catalog.now()), $9, $10, $1, $2, $3, $4, $5, $6) returning ev_id",
				 table, q->queue_id);
		*slot = prepare_kept(sql, INS_NPARAMS, argtypes);
	}
	else if (kind == INSERT_BATCH)
	{
		Oid			argtypes[3] = {TEXTOID, TEXTARRAYOID, TEXTARRAYOID};

		/*
		 * nextval is volatile, so it is evaluated above the sort: ids are
		 * drawn in input order.
		 */
		snprintf(sql, sizeof(sql),
				 "insert into %s (ev_id, ev_type, ev_data, ev_extra1)"
				 " select pg_catalog.nextval('pgque.event_%d_id_seq'::pg_catalog.regclass), $1, u.p, u.k"
				 "   from rows from (pg_catalog.unnest($2), pg_catalog.unnest($3)) with ordinality as u(p, k, o)"
				 "  order by u.o returning ev_id",
				 table, q->queue_id);
		*slot = prepare_kept(sql, 3, argtypes);
	}
	else
	{
		Oid			argtypes[4] = {TEXTOID, INT8ARRAYOID, TEXTARRAYOID, TEXTARRAYOID};

		snprintf(sql, sizeof(sql),
				 "insert into %s (ev_id, ev_type, ev_data, ev_extra1)"
				 " select u.i, $1, u.p, u.k"
				 " from rows from (pg_catalog.unnest($2), pg_catalog.unnest($3), pg_catalog.unnest($4)) as u(i, p, k)",
				 table);
		*slot = prepare_kept(sql, 4, argtypes);
	}
	return *slot;
}

/* The plan that draws n event ids of a queue, in order. */
static SPIPlanPtr
ids_plan_for(const QueueInfo *q)
{
	InsertPlan *entry = plan_entry(q);

	if (entry->ids_plan == NULL)
	{
		Oid			argtypes[1] = {INT4OID};
		char		sql[256];

		snprintf(sql, sizeof(sql),
				 "select pg_catalog.nextval('pgque.event_%d_id_seq'::pg_catalog.regclass)"
				 "  from pg_catalog.generate_series(1, $1)", q->queue_id);
		entry->ids_plan = prepare_kept(sql, 1, argtypes);
	}
	return entry->ids_plan;
}

/*
 * The partition bucket of a key: hash(key) mod B, as pgque._slot_of() in
 * SQL computes slots, so bucket mod N is the slot when N divides B.  A NULL
 * key, and every key of a queue without buckets, goes to bucket 0.
 */
static int
bucket_of(Datum key, bool isnull, int32 nbuckets)
{
	int64		h;
	int64		b;

	if (nbuckets <= 0 || isnull)
		return 0;
	h = DatumGetInt64(DirectFunctionCall2Coll(hashtextextended, DEFAULT_COLLATION_OID,
											  key, Int64GetDatum(0)));
	b = h % nbuckets;
	return (int) (b < 0 ? b + nbuckets : b);
}

/* Relcache callback: a change of pgque.queue (or of everything) flushes. */
static void
queue_cache_inval(Datum arg, Oid relid)
{
	if (queue_cache != NULL && (relid == InvalidOid || relid == queue_table_oid))
	{
		hash_destroy(queue_cache);
		queue_cache = NULL;
	}
}

/*
 * What a producer needs of a queue: from the cache, or from pgque.queue
 * (inside SPI) and then cached.  Unknown queues raise.
 */
static void
lookup_queue(text *queue_name, QueueInfo *info)
{
	char		key[PGQUE_QUEUE_NAME_MAX + 1];
	int			len = VARSIZE_ANY_EXHDR(queue_name);
	QueueEntry *entry;
	bool		found;
	Datum		qarg[1];
	bool		null;
	int			ret;

	/*
	 * Take the transaction's xid before looking at the queue: a transaction
	 * whose xid comes after a rotation switch (or a change to partition
	 * buckets) has committed then sees the new layout, which is what the
	 * readers' choice of tables relies on (pgque._event_source()).
	 */
	PreventCommandIfReadOnly("pgque send");
	(void) GetTopTransactionId();

	/* pick up committed changes of other backends before trusting the cache */
	AcceptInvalidationMessages();

	memset(key, 0, sizeof(key));
	memcpy(key, VARDATA_ANY(queue_name), len);

	if (queue_cache != NULL)
	{
		entry = hash_search(queue_cache, key, HASH_FIND, NULL);
		if (entry != NULL)
		{
			*info = entry->info;
			return;
		}
	}

	if (queue_lookup_plan == NULL)
	{
		Oid			argtypes[1] = {TEXTOID};

		queue_lookup_plan = prepare_kept(
			"select queue_id, queue_cur_table, queue_disable_insert,"
			"       coalesce(queue_partition_buckets, 0)"
			"  from pgque.queue where queue_name operator(pg_catalog.=) $1",
			1, argtypes);
	}

	/*
	 * Read the row with the latest snapshot, not the transaction's: a
	 * REPEATABLE READ producer must still append to the table that is
	 * current now, never to one that rotation may already be reclaiming.
	 */
	qarg[0] = PointerGetDatum(queue_name);
	ret = SPI_execute_snapshot(queue_lookup_plan, qarg, NULL, GetLatestSnapshot(),
							   InvalidSnapshot, true, false, 1);
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "pgque_bgw: queue lookup failed: %s", SPI_result_code_string(ret));
	if (SPI_processed == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("queue not found: %s", text_to_cstring(queue_name))));

	info->queue_id = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &null));
	info->cur_table = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &null));
	info->disabled = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3, &null));
	info->nbuckets = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 4, &null));

	/*
	 * Cache it: any later change sends an invalidation (the trigger), and
	 * our own uncommitted changes are flushed at command end or abort.
	 */
	if (!queue_cache_callback_set)
	{
		CacheRegisterRelcacheCallback(queue_cache_inval, (Datum) 0);
		queue_cache_callback_set = true;
	}
	queue_table_oid = get_relname_relid("queue", get_namespace_oid("pgque", false));
	if (queue_cache == NULL)
	{
		HASHCTL		ctl;

		memset(&ctl, 0, sizeof(ctl));
		ctl.keysize = PGQUE_QUEUE_NAME_MAX + 1;
		ctl.entrysize = sizeof(QueueEntry);
		queue_cache = hash_create("pgque_bgw queue cache", 16, &ctl, HASH_ELEM | HASH_BLOBS);
	}
	entry = hash_search(queue_cache, key, HASH_ENTER, &found);
	entry->info = *info;
}

/*
 * pgque._queue_changed(): statement trigger on pgque.queue.  Sends a
 * relcache invalidation for the table, delivered to every backend at commit
 * (and to this one at command end), which flushes the producers' caches.
 */
Datum
pgque_queue_changed(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;

	if (!CALLED_AS_TRIGGER(fcinfo))
		elog(ERROR, "pgque_queue_changed: not called as a trigger");
	CacheInvalidateRelcache(trigdata->tg_relation);
	return PointerGetDatum(NULL);
}

/*
 * Producers are refused a queue whose inserts are disabled; replicas
 * (session_replication_role = replica) may always insert.
 */
static void
refuse_disabled(text *queue_name, bool disabled)
{
	if (disabled && SessionReplicationRole != SESSION_REPLICATION_ROLE_REPLICA)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("Insert into queue disallowed"),
				 errdetail("Queue %s has disable_insert set.", text_to_cstring(queue_name)),
				 errhint("pgque.set_queue_config(queue, 'disable_insert', 'false') re-enables it.")));
}

/*
 * Append one event; args/isnull are indexed by the INS_* positions (NULL
 * entries are SQL NULLs).  check_disabled: refuse a queue whose inserts are
 * disabled (producers do; re-injection by maintenance does not).  Returns
 * the ev_id.
 */
static int64
insert_event_internal(text *queue_name, Datum *args, bool *isnull, bool check_disabled)
{
	QueueInfo	q;
	bool		null;
	int			ret;
	int64		ev_id;
	char		nulls[INS_NPARAMS];
	int			i;
	int			bucket;

	pgque_check_queue_name(queue_name);

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "pgque_bgw: SPI_connect failed");

	lookup_queue(queue_name, &q);

	if (check_disabled)
		refuse_disabled(queue_name, q.disabled);

	for (i = 0; i < INS_NPARAMS; i++)
		nulls[i] = isnull[i] ? 'n' : ' ';

	/* the partition key rides in ev_extra1 */
	bucket = bucket_of(args[INS_EXTRA1], isnull[INS_EXTRA1], q.nbuckets);
	ret = SPI_execute_plan(insert_plan_for(&q, bucket, INSERT_ONE), args, nulls, false, 1);
	if (ret != SPI_OK_INSERT_RETURNING || SPI_processed != 1)
		elog(ERROR, "pgque_bgw: event insert failed: %s", SPI_result_code_string(ret));
	ev_id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &null));

	SPI_finish();
	pgque_note_event_inserted(q.queue_id);	/* wake the ticker when this commits */
	return ev_id;
}

static void
clear_args(Datum *args, bool *isnull)
{
	int			i;

	for (i = 0; i < INS_NPARAMS; i++)
	{
		args[i] = (Datum) 0;
		isnull[i] = true;
	}
}

/*
 * Append one event for a producer written in C (the change-data-capture
 * triggers, src/cdc.c): fields[0..5] are ev_type, ev_data, ev_extra1..4,
 * nulls[] their NULL flags.  The same queue cache, kept plan, bucket
 * routing and disable_insert rule as send().  The caller has chosen the
 * role it runs as.
 */
int64
pgque_insert_fields(struct varlena *queue_name, const Datum *fields, const bool *nulls)
{
	Datum		args[INS_NPARAMS];
	bool		isnull[INS_NPARAMS];
	int			i;

	clear_args(args, isnull);
	for (i = 0; i < 2 + PGQUE_EXTRA_COLS; i++)
	{
		args[INS_TYPE + i] = nulls[i] ? (Datum) 0 : fields[i];
		isnull[INS_TYPE + i] = nulls[i];
	}
	return insert_event_internal((text *) queue_name, args, isnull, true);
}

/*
 * send(queue_name, payload)                         type 'default'
 * send(queue_name, type_name, payload)
 * send(queue_name, type_name, payload, partition_key)
 * Text payloads only; the jsonb forms cast to text in SQL and call these.
 */
Datum
pgque_send(PG_FUNCTION_ARGS)
{
	Datum		args[INS_NPARAMS];
	bool		isnull[INS_NPARAMS];
	int			nargs = PG_NARGS();
	int			i;

	clear_args(args, isnull);
	if (nargs == 2)
	{
		args[INS_TYPE] = CStringGetTextDatum("default");
		isnull[INS_TYPE] = false;
		args[INS_DATA] = PG_GETARG_DATUM(1);
		isnull[INS_DATA] = PG_ARGISNULL(1);
	}
	else
	{
		if (PG_ARGISNULL(1))
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("type_name must not be null")));
		/* type, payload [, partition key -> ev_extra1] */
		for (i = 1; i < nargs; i++)
		{
			args[i - 1] = PG_GETARG_DATUM(i);
			isnull[i - 1] = PG_ARGISNULL(i);
		}
	}

	PG_RETURN_INT64(insert_event_internal(PG_ARGISNULL(0) ? NULL : PG_GETARG_TEXT_PP(0),
										  args, isnull, true));
}

/*
 * insert_event(queue_name, ev_type, ev_data [, ev_extra1..4]): the PgQ
 * primitive; a NULL ev_type is allowed here.
 */
Datum
pgque_insert_event(PG_FUNCTION_ARGS)
{
	Datum		args[INS_NPARAMS];
	bool		isnull[INS_NPARAMS];
	int			nargs = PG_NARGS();
	int			i;

	clear_args(args, isnull);
	for (i = 1; i < nargs; i++)
	{
		isnull[i - 1] = PG_ARGISNULL(i);
		args[i - 1] = isnull[i - 1] ? (Datum) 0 : PG_GETARG_DATUM(i);
	}

	PG_RETURN_INT64(insert_event_internal(PG_ARGISNULL(0) ? NULL : PG_GETARG_TEXT_PP(0),
										  args, isnull, true));
}

/*
 * pgque._insert_event(queue_name, ev_id, ev_time, ev_owner, ev_retry,
 *                     ev_type, ev_data, ev_extra1..4, check_disabled)
 * -> ev_id: the internal full form, for send_at, send_idem and DLQ replay
 * (NULL ev_id / ev_time: next id / now()).
 */
Datum
pgque_insert_event_full(PG_FUNCTION_ARGS)
{
	Datum		args[INS_NPARAMS];
	bool		isnull[INS_NPARAMS];
	static const int pos[] = {INS_EV_ID, INS_EV_TIME, INS_OWNER, INS_RETRY, INS_TYPE, INS_DATA,
	INS_EXTRA1, INS_EXTRA1 + 1, INS_EXTRA1 + 2, INS_EXTRA1 + 3};
	int			i;

	clear_args(args, isnull);
	for (i = 0; i < INS_NPARAMS; i++)
	{
		isnull[pos[i]] = PG_ARGISNULL(i + 1);
		args[pos[i]] = isnull[pos[i]] ? (Datum) 0 : PG_GETARG_DATUM(i + 1);
	}

	PG_RETURN_INT64(insert_event_internal(PG_ARGISNULL(0) ? NULL : PG_GETARG_TEXT_PP(0),
										  args, isnull, PG_ARGISNULL(11) || PG_GETARG_BOOL(11)));
}

static int
cmp_int64(const void *a, const void *b)
{
	int64		x = *(const int64 *) a;
	int64		y = *(const int64 *) b;

	return (x > y) - (x < y);
}

static void
check_text_array(ArrayType *arr, const char *what)
{
	if (ARR_NDIM(arr) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("%s must be a one-dimensional array", what)));
}

/*
 * Append an array of events whose keys go to more than one partition
 * bucket: draw the ids in input order first, then one INSERT per bucket.
 * Returns the ids (in input order) in the caller's context.
 */
static int64 *
insert_by_bucket(const QueueInfo *q, Datum type_name, ArrayType *payloads,
				 Datum *kdat, bool *knull, int *buckets, int n, MemoryContext caller_cxt)
{
	Datum	   *pdat;
	bool	   *pnull;
	int			np;
	int64	   *ids;
	Datum	   *sub_ids = palloc(sizeof(Datum) * n);
	Datum	   *sub_p = palloc(sizeof(Datum) * n);
	bool	   *sub_pn = palloc(sizeof(bool) * n);
	Datum	   *sub_k = palloc(sizeof(Datum) * n);
	bool	   *sub_kn = palloc(sizeof(bool) * n);
	Datum		arg;
	int			ret;
	int			b;
	int			i;
	bool		null;

	deconstruct_array(payloads, TEXTOID, -1, false, TYPALIGN_INT, &pdat, &pnull, &np);

	arg = Int32GetDatum(n);
	ret = SPI_execute_plan(ids_plan_for(q), &arg, NULL, false, 0);
	if (ret != SPI_OK_SELECT || SPI_processed != (uint64) n)
		elog(ERROR, "pgque_bgw: drawing event ids failed: %s", SPI_result_code_string(ret));
	ids = MemoryContextAlloc(caller_cxt, sizeof(int64) * n);
	for (i = 0; i < n; i++)
		ids[i] = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &null));

	for (b = 0; b < q->nbuckets; b++)
	{
		int			m = 0;
		int			dims[1];
		int			lbs[1] = {1};
		Datum		args[4];

		for (i = 0; i < n; i++)
		{
			if (buckets[i] != b)
				continue;
			sub_ids[m] = Int64GetDatum(ids[i]);
			sub_p[m] = pdat[i];
			sub_pn[m] = pnull[i];
			sub_k[m] = kdat[i];
			sub_kn[m] = knull[i];
			m++;
		}
		if (m == 0)
			continue;
		dims[0] = m;
		args[0] = type_name;
		args[1] = PointerGetDatum(construct_array(sub_ids, m, INT8OID, sizeof(int64),
												  FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
		args[2] = PointerGetDatum(construct_md_array(sub_p, sub_pn, 1, dims, lbs, TEXTOID, -1,
													 false, TYPALIGN_INT));
		args[3] = PointerGetDatum(construct_md_array(sub_k, sub_kn, 1, dims, lbs, TEXTOID, -1,
													 false, TYPALIGN_INT));
		ret = SPI_execute_plan(insert_plan_for(q, b, INSERT_BATCH_IDS), args, NULL, false, 0);
		if (ret != SPI_OK_INSERT || SPI_processed != (uint64) m)
			elog(ERROR, "pgque_bgw: batch insert failed: %s", SPI_result_code_string(ret));
	}
	return ids;
}

/*
 * send_batch(queue_name, type_name, payloads text[] [, partition_keys text[]])
 * -> bigint[]: one INSERT ... SELECT for the whole array (one per partition
 * bucket that the keys reach); the ids come back in input order.  An empty
 * array appends nothing and returns {} (after the queue has been checked).
 */
Datum
pgque_send_batch(PG_FUNCTION_ARGS)
{
	text	   *queue_name = PG_ARGISNULL(0) ? NULL : PG_GETARG_TEXT_PP(0);
	ArrayType  *payloads;
	ArrayType  *keys = NULL;
	int			n;
	QueueInfo	q;
	int64	   *ids = NULL;
	Datum	   *id_datums;
	int			i;
	int		   *buckets = NULL;
	int			bucket = 0;
	Datum	   *kdat = NULL;
	bool	   *knull = NULL;
	MemoryContext caller_cxt = CurrentMemoryContext;

	pgque_check_queue_name(queue_name);
	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("type_name must not be null")));
	if (PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("payloads must not be null")));
	payloads = PG_GETARG_ARRAYTYPE_P(2);
	check_text_array(payloads, "payloads");
	n = ArrayGetNItems(ARR_NDIM(payloads), ARR_DIMS(payloads));
	if (PG_NARGS() > 3)
	{
		int			nkeys;

		if (PG_ARGISNULL(3))
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("partition_keys must not be null")));
		keys = PG_GETARG_ARRAYTYPE_P(3);
		check_text_array(keys, "partition_keys");
		nkeys = ArrayGetNItems(ARR_NDIM(keys), ARR_DIMS(keys));
		if (nkeys != n)
			ereport(ERROR,
					(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
					 errmsg("partition_keys has %d elements but payloads has %d", nkeys, n)));
	}

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "pgque_bgw: SPI_connect failed");
	lookup_queue(queue_name, &q);
	refuse_disabled(queue_name, q.disabled);
	if (n == 0)
	{
		SPI_finish();
		PG_RETURN_ARRAYTYPE_P(construct_empty_array(INT8OID));
	}

	/* which partition buckets the keys go to: one (bucket), or several (-1) */
	if (keys != NULL && q.nbuckets > 0)
	{
		int			nk;

		deconstruct_array(keys, TEXTOID, -1, false, TYPALIGN_INT, &kdat, &knull, &nk);
		buckets = palloc(sizeof(int) * n);
		for (i = 0; i < n; i++)
			buckets[i] = bucket_of(kdat[i], knull[i], q.nbuckets);
		bucket = buckets[0];
		for (i = 1; i < n && bucket >= 0; i++)
			if (buckets[i] != bucket)
				bucket = -1;
	}

	if (bucket >= 0)
	{
		Datum		args[3];
		char		nulls[3] = {' ', ' ', ' '};
		int			ret;
		uint64		j;
		bool		null;

		args[0] = PG_GETARG_DATUM(1);
		args[1] = PointerGetDatum(payloads);
		if (keys != NULL)
			args[2] = PointerGetDatum(keys);
		else
		{
			args[2] = (Datum) 0;
			nulls[2] = 'n';
		}
		ret = SPI_execute_plan(insert_plan_for(&q, bucket, INSERT_BATCH), args, nulls, false, 0);
		if (ret != SPI_OK_INSERT_RETURNING || SPI_processed != (uint64) n)
			elog(ERROR, "pgque_bgw: batch insert failed: %s", SPI_result_code_string(ret));

		ids = MemoryContextAlloc(caller_cxt, sizeof(int64) * n);
		for (j = 0; j < SPI_processed; j++)
			ids[j] = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[j], SPI_tuptable->tupdesc, 1, &null));
		/* ids were drawn in input order, so ascending order is input order */
		qsort(ids, n, sizeof(int64), cmp_int64);
	}
	else
		ids = insert_by_bucket(&q, PG_GETARG_DATUM(1), payloads, kdat, knull, buckets, n, caller_cxt);
	SPI_finish();
	pgque_note_event_inserted(q.queue_id);

	id_datums = palloc(sizeof(Datum) * n);
	for (i = 0; i < n; i++)
		id_datums[i] = Int64GetDatum(ids[i]);
	PG_RETURN_ARRAYTYPE_P(construct_array(id_datums, n, INT8OID, sizeof(int64),
										  FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
}
