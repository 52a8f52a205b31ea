/*
 * queue_cache.c
 *		What a producer needs to know, cached per backend: of each queue its
 *		id, current child table, partition buckets, insert flag (ADR 0004)
 *		and the roles granted "send" on it (ADR 0047), keyed by name; and the role the append runs as, the extension
 *		owner (ADR 0032).
 *
 * A statement trigger on pgque.queue (pgque._queue_changed(), below) sends
 * a relcache invalidation for that table on every change (rotation,
 * config, drop, a new owner); PostgreSQL delivers it to every backend at
 * commit, to the changing one at command end or abort, and the callback
 * here flushes both caches: the way PostgreSQL's own caches learn of
 * catalog changes.  The senders' anchors (ADR 0079) are cached with the
 * queue too: a grant or revoke on pgque.grantee_anchor changes its
 * pg_class row, whose relcache invalidation flushes the same way.  A change of the extension's owner (REASSIGN OWNED)
 * changes pgque.queue's owner in the same transaction, so it flushes the
 * owner too; so does any change to a role (a syscache callback on
 * pg_authid), and a full cache reset.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/indexing.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_extension.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "storage/sinval.h"
#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/fmgrprotos.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/varlena.h"

#include "kept_plan.h"
#include "caller.h"
#include "pgque_bgw.h"
#include "producer.h"
#include "rules.h"

/* a queue's entry, cached by name */
typedef struct QueueEntry
{
	char		name[PGQUE_QUEUE_NAME_MAX + 1]; /* hash key, zero-padded */
	QueueInfo	info;
} QueueEntry;

/* the types of the lookup's columns, as sql/02_tables.sql declares them */
static const Oid queue_lookup_types[5] = {INT4OID, INT4OID, BOOLOID, INT4OID, REGROLEARRAYOID};

static SPIPlanPtr queue_lookup_plan = NULL;
static SPIPlanPtr queue_lookup_plan_v2 = NULL;	/* 0.2.0's table: no queue_senders */
static HTAB *queue_cache = NULL;
static Oid	queue_table_oid = InvalidOid;
static Oid	anchor_table_oid = InvalidOid;	/* pgque.grantee_anchor: its ACL says who is anchored */
static Oid	producer_owner = InvalidOid;
static bool callbacks_set = false;

PG_FUNCTION_INFO_V1(pgque_queue_changed);
PG_FUNCTION_INFO_V1(pgque_seq_last_value);

/* Relcache callback: a change of pgque.queue (or of everything) flushes. */
static void
queue_cache_inval(Datum arg, Oid relid)
{
	if (relid != InvalidOid && relid != queue_table_oid && relid != anchor_table_oid)
		return;
	if (queue_cache != NULL)
	{
		hash_destroy(queue_cache);
		queue_cache = NULL;
	}
	producer_owner = InvalidOid;
}

/* Syscache callback on pg_authid: any role change flushes the owner. */
static void
role_inval(Datum arg, int cacheid, uint32 hashvalue)
{
	producer_owner = InvalidOid;
}

static void
register_callbacks(void)
{
	if (callbacks_set)
		return;
	CacheRegisterRelcacheCallback(queue_cache_inval, (Datum) 0);
	CacheRegisterSyscacheCallback(AUTHOID, role_inval, (Datum) 0);
	callbacks_set = true;
}

/*
 * The role a producer appends as: pgque_owner, the owner of every object of
 * the extension (sql/89_owner.sql) and as whom the SECURITY DEFINER API and
 * the workers run (ADR 0014, 0042; pgque_run_as_role()).  Looked up once
 * (with whether the extension is installed) and cached.  The caller must
 * have accepted invalidation messages.
 */
Oid
pgque_producer_owner(void)
{
	Oid			owner;

	if (OidIsValid(producer_owner))
		return producer_owner;

	register_callbacks();
	if (!OidIsValid(pgque_extension_owner()))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("extension pgque_bgw is not installed in this database")));
	/* not the extension's owner: the owner of its objects (ADR 0042) */
	owner = pgque_run_as_role();
	/* the table whose relcache invalidation flushes this */
	queue_table_oid = get_relname_relid("queue", get_namespace_oid("pgque", false));
	producer_owner = owner;
	return owner;
}

/*
 * What a producer needs of a queue: from the cache, or from pgque.queue
 * (through SPI, as a role that may read it) and then cached.  Unknown
 * queues raise.  The caller has checked the name (pgque_check_queue_name).
 */
void
pgque_lookup_queue(text *queue_name, QueueInfo *info)
{
	char		key[PGQUE_QUEUE_NAME_MAX + 1];
	int			len = VARSIZE_ANY_EXHDR(queue_name);
	QueueEntry *entry;
	bool		found;
	bool		has_rights;
	Datum		qarg[1];
	bool		null;
	int			ret;

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

	/* a miss: read the row through SPI (a connection of its own) */
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "pgque_bgw: SPI_connect failed");

	/*
	 * A database whose SQL is still 0.2.0's (the library was updated, ALTER
	 * EXTENSION UPDATE not run yet) has no per-queue rights: every sender
	 * with EXECUTE may send, as in 0.2.0.  A cache miss is rare, so the
	 * column is looked for on each.
	 */
	has_rights = get_attnum(get_relname_relid("queue", get_namespace_oid("pgque", false)),
							"queue_senders") != InvalidAttrNumber;
	if (has_rights && queue_lookup_plan == NULL)
	{
		Oid			argtypes[1] = {TEXTOID};

		queue_lookup_plan = pgque_prepare_kept(
			"select queue_id, queue_cur_table, queue_disable_insert,"
			"       coalesce(queue_partition_buckets, 0), queue_senders"
			"  from pgque.queue where queue_name operator(pg_catalog.=) $1",
			1, argtypes);
	}
	if (!has_rights && queue_lookup_plan_v2 == NULL)
	{
		Oid			argtypes[1] = {TEXTOID};

		queue_lookup_plan_v2 = pgque_prepare_kept(
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
	ret = SPI_execute_snapshot(has_rights ? queue_lookup_plan : queue_lookup_plan_v2, qarg, NULL, GetLatestSnapshot(),
							   InvalidSnapshot, true, false, 1);
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "pgque_bgw: queue lookup failed: %s", SPI_result_code_string(ret));
	if (SPI_processed == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("queue not found: %s", text_to_cstring(queue_name))));

	/*
	 * The values are taken as the types pgque.queue declares: an owner's
	 * ALTER COLUMN ... TYPE (queue_senders to text: an array header read
	 * from a text, queue_cur_table to text: a pointer for a table number)
	 * is refused before any is read (ADR 0105).
	 */
	pgque_check_columns(SPI_tuptable->tupdesc, queue_lookup_types, has_rights ? 5 : 4, "pgque.queue",
						"pgque.queue must keep the column types the extension made; ALTER them back.");
	info->queue_id = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &null));
	info->cur_table = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &null));
	info->disabled = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3, &null));
	info->nbuckets = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 4, &null));
	info->nsenders = -1;
	if (has_rights)
	{
		Datum		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 5, &null);
		Datum	   *elems;
		bool	   *enulls;
		int			n;
		int			i;

		info->nsenders = 0;
		if (!null)
		{
			deconstruct_array(DatumGetArrayTypeP(d), REGROLEOID, sizeof(Oid), true, TYPALIGN_INT,
							  &elems, &enulls, &n);
			/* grant_queue keeps to the limit; a longer list is refused, never cut */
			if (n > PGQUE_QUEUE_GRANTEES_MAX)
				elog(ERROR, "pgque_bgw: queue %s has %d senders, more than %d",
					 text_to_cstring(queue_name), n, PGQUE_QUEUE_GRANTEES_MAX);
			for (i = 0; i < n; i++)
				if (!enulls[i])
				{
					info->senders[info->nsenders] = DatumGetObjectId(elems[i]);
					info->anchored[info->nsenders] = pgque_role_anchored(DatumGetObjectId(elems[i]));
					info->nsenders++;
				}
		}
	}
	{
		char		seq[NAMEDATALEN];

		pgque_event_seq(seq, info->queue_id, false);
		info->event_seq = get_relname_relid(seq, get_namespace_oid("pgque", false));
		if (!OidIsValid(info->event_seq) || get_rel_relkind(info->event_seq) != RELKIND_SEQUENCE)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_TABLE),
					 errmsg("event sequence pgque.%s of queue \"%s\" does not exist", seq,
							text_to_cstring(queue_name)),
					 errdetail("It was renamed, dropped or replaced; the queue takes no new events until it is back."),
					 errhint("Rename the queue's sequence back to pgque.%s.", seq)));
	}

	SPI_finish();

	/*
	 * Cache it: any later change sends an invalidation (the trigger), and
	 * our own uncommitted changes are flushed at command end or abort.
	 */
	register_callbacks();
	queue_table_oid = get_relname_relid("queue", get_namespace_oid("pgque", false));
	anchor_table_oid = get_relname_relid("grantee_anchor", get_namespace_oid("pgque", false));
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
 * pgque._seq_last_value(seq text) -> int8: the sequence's last value, as
 * pg_sequence_last_value() (NULL before its first value), or NULL when the
 * name names no sequence.  The queue's event sequence position
 * (pgque._event_seq_pos) is read by statements that take every queue at
 * once (the ticker's sequence probe, the watchdog's conditions, metrics):
 * a sequence its owner renamed, dropped or replaced made its name's cast
 * to regclass fail them for every queue of the database (ADR 0105).  The
 * queue's position reads as 0 instead; its events are still ticked (the
 * ticker's probe reads the event tables) and its producers are told
 * (pgque_lookup_queue, nextval).
 */
Datum
pgque_seq_last_value(PG_FUNCTION_ARGS)
{
	List	   *names = textToQualifiedNameList(PG_GETARG_TEXT_PP(0));
	Oid			relid = RangeVarGetRelid(makeRangeVarFromNameList(names), NoLock, true);
	LOCAL_FCINFO(seq_fcinfo, 1);
	Datum		value;

	if (!OidIsValid(relid) || get_rel_relkind(relid) != RELKIND_SEQUENCE)
		PG_RETURN_NULL();
	InitFunctionCallInfoData(*seq_fcinfo, NULL, 1, InvalidOid, NULL, NULL);
	seq_fcinfo->args[0].value = ObjectIdGetDatum(relid);
	seq_fcinfo->args[0].isnull = false;
	value = pg_sequence_last_value(seq_fcinfo);
	if (seq_fcinfo->isnull)
		PG_RETURN_NULL();
	PG_RETURN_DATUM(value);
}
