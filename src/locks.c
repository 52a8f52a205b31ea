/*
 * locks.c
 *		The extension's own serialisation locks (ADR 0040): heavyweight,
 *		transaction-level locks in a key space that no SQL function of
 *		PostgreSQL reaches, so that only a role that may execute
 *		pgque._lock (the extension owner; the API and the workers run as it)
 *		can take, hold or wait on them.
 *
 * The 0.2.0 locks were advisory locks on (1885827445, queue id) and on
 * hashes of names: any role that can connect may call pg_advisory_lock
 * with the same keys, and held the queue's DDL lock (no tick, no watchdog
 * pass), a cooperative member's lock (no receive) or create_queue's.  Here
 * the lock tag is PostgreSQL's "object" tag (database, class, object,
 * sub-object) with the class set to the OID of one of pgque's own tables:
 * PostgreSQL takes object locks only with its catalogs as class, and SQL
 * can take neither them nor any other tag directly.  The key is 48 bits:
 * 32 in the object field, 16 in the sub-object field.
 *
 * Modes: shared is AccessShareLock, exclusive AccessExclusiveLock (the
 * pair conflicts; an AccessShareLock on an object may be taken on a hot
 * standby, a stronger mode may not).  Like every transaction-level lock
 * they are released at commit, at abort, and at the rollback of the
 * subtransaction that took them; PREPARE TRANSACTION hands them to the
 * prepared transaction.  There is no session-level variant: nothing of the
 * extension holds a lock across transactions.
 */
#include "postgres.h"
#include "textdomain.h"

#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "storage/lock.h"
#include "utils/lsyscache.h"

#include "compat.h"
#include "locks.h"

/* the key fills the object (32 bits) and sub-object (16 bits) fields */
#define PGQUE_LOCK_KEY_MAX ((INT64CONST(1) << 48) - 1)

PG_FUNCTION_INFO_V1(pgque_lock);
PG_FUNCTION_INFO_V1(pgque_queue_lock_sql);

/*
 * pgque._lock(i_class regclass, i_key int8, i_exclusive boolean,
 *             i_wait boolean) -> whether the lock is held.  Without i_wait
 * it is only tried; with it, it waits (lock_timeout and the deadlock
 * detector apply).
 */
Datum
pgque_lock(PG_FUNCTION_ARGS)
{
	Oid			cls = PG_GETARG_OID(0);
	int64		key = PG_GETARG_INT64(1);
	bool		exclusive = PG_GETARG_BOOL(2);
	bool		wait = PG_GETARG_BOOL(3);
	Oid			nsp = get_namespace_oid("pgque", true);
	LOCKTAG		tag;

	/* pgque's tables only: a catalog's OID would meet PostgreSQL's own locks */
	if (!OidIsValid(nsp) || get_rel_namespace(cls) != nsp ||
		get_rel_relkind(cls) != RELKIND_RELATION)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("lock class must be a table of schema pgque"),
				 errdetail("The class given has OID %u.", cls)));
	if (key < 0 || key > PGQUE_LOCK_KEY_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("lock key %lld is out of range", (long long) key),
				 errdetail("Keys are 0 to 2^48 - 1.")));

	SET_LOCKTAG_OBJECT(tag, MyDatabaseId, cls, (uint32) key, (uint16) (key >> 32));
	PG_RETURN_BOOL(LockAcquire(&tag, exclusive ? AccessExclusiveLock : AccessShareLock,
							   false, !wait) != LOCKACQUIRE_NOT_AVAIL);
}

/*
 * The queue's DDL lock (ADR 0020, 0040): the lock of class pgque.queue and
 * key queue_id, as pgque._lock takes it.  One rule for the ticker
 * (src/tick.c) and SQL (pgque._queue_lock, which _queue_ddl_lock,
 * _queue_try_share, _queue_try_exclusive and _queue_share_wait call).
 * False when schema pgque has no queue table.
 */
bool
pgque_queue_lock(int32 queue_id, bool exclusive, bool wait)
{
	Oid			nsp = get_namespace_oid("pgque", true);
	Oid			relid = OidIsValid(nsp) ? get_relname_relid("queue", nsp) : InvalidOid;

	if (!OidIsValid(relid))
		return false;
	return DatumGetBool(DirectFunctionCall4(pgque_lock, ObjectIdGetDatum(relid),
											Int64GetDatum(queue_id), BoolGetDatum(exclusive),
											BoolGetDatum(wait)));
}

/* pgque._queue_lock(i_queue_id int4, i_exclusive boolean, i_wait boolean)
 * -> whether the lock is held */
Datum
pgque_queue_lock_sql(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(pgque_queue_lock(PG_GETARG_INT32(0), PG_GETARG_BOOL(1), PG_GETARG_BOOL(2)));
}
