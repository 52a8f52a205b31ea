/*
 * coop.c
 *		The shared-memory member table of cooperative consumers: when each
 *		member of a group was last heard of (receive_coop, touch_subconsumer,
 *		ack, nack) and which batch it holds.
 *
 * A heartbeat is a store under one LWLock: no row, no WAL, no dead tuple
 * (ADR 0017).  The durable facts (who is a member, which window a member
 * holds, since when) live in pgque.coop_member and pgque.coop_window; this
 * table only says who is alive.  It is lost on restart: a member without an
 * entry is judged by the claim time of its window.
 *
 * Bounds (ADR 0041).  Fixed size (PGQUE_COOP_MEMBERS_MAX entries), counted
 * per database and per role (the login role of the session that created
 * it): a new entry is refused with 53400 naming the bound at
 * pgque_bgw.max_coop_members_per_database or max_coop_members_per_role, and
 * the last 1/PGQUE_SHMEM_RESERVE_SHARE of the table is kept for superusers
 * (who, with the installing role, are not held to the per-role cap).  A
 * refused heartbeat is an error, never a silent omission: a member nobody
 * hears is taken over, and its window processed twice.
 *
 * Transactions.  An entry created in a (sub)transaction that aborts is
 * removed at the abort (undo list, as in slots.c), unless another backend
 * touched it meanwhile (two processes sharing a member name): a heartbeat
 * somebody else relies on is never dropped.
 *
 * Reclaim.  When a bound refuses a new entry, the entries of dropped
 * databases go first and the touch is retried once; the watchdog removes
 * those whose member row is gone (reclaim.c).  Groups are capped in SQL
 * (members per group).
 */
#include "postgres.h"

#include "access/xact.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "compat.h"
#include "pgque_bgw.h"
#include "caller.h"
#include "guc.h"
#include "coop.h"
#include "rules.h"

/* subconsumer names: the SQL checks the same limit (rules.h) */
#define COOP_NAME_MAX PGQUE_COOP_NAME_MAX

typedef struct CoopKey
{
	Oid			dboid;
	int32		sub_id;			/* the group's main subscription */
	char		member[COOP_NAME_MAX + 1];	/* zero-padded */
} CoopKey;

typedef struct CoopMember
{
	CoopKey		key;
	TimestampTz last_seen;
	int64		batch;			/* last batch handed to it; 0 = none */
	int64		polls;
	Oid			role;			/* login role of the creating session: its quota */
	int			pending_pid;	/* creating transaction still open (its pid); 0 = committed */
	uint64		gen;			/* which creation of this key: the sweep's identity check */
} CoopMember;

/* Entries per database (kind COOP_QUOTA_DATABASE) or per role (_ROLE). */
#define COOP_QUOTA_DATABASE 0
#define COOP_QUOTA_ROLE 1

typedef struct CoopQuotaKey
{
	int32		kind;
	Oid			oid;
} CoopQuotaKey;

typedef struct CoopQuota
{
	CoopQuotaKey key;
	int			count;
} CoopQuota;

typedef struct CoopShared
{
	int			total;
	uint64		next_gen;
} CoopShared;

/* An entry this backend created, for undo at abort. */
typedef struct CoopUndo
{
	SubTransactionId subid;
	CoopKey		key;
	uint64		gen;
} CoopUndo;

static HTAB *coop_table = NULL;
static HTAB *coop_quota = NULL;
static CoopShared *coop_shared = NULL;
static LWLock *coop_lock = NULL;

static CoopUndo *undo = NULL;
static int	undo_len = 0;
static int	undo_cap = 0;
static bool callbacks_registered = false;

void
pgque_coop_request(void)
{
	RequestAddinShmemSpace(hash_estimate_size(PGQUE_COOP_MEMBERS_MAX, sizeof(CoopMember)));
	RequestAddinShmemSpace(hash_estimate_size(2 * PGQUE_COOP_MEMBERS_MAX, sizeof(CoopQuota)));
	RequestAddinShmemSpace(MAXALIGN(sizeof(CoopShared)));
	RequestNamedLWLockTranche("pgque_bgw coop", 1);
}

void
pgque_coop_startup(void)
{
	HASHCTL		info;

	bool		found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	memset(&info, 0, sizeof(info));
	info.keysize = sizeof(CoopKey);
	info.entrysize = sizeof(CoopMember);
	coop_table = ShmemInitHash("pgque_bgw coop members", PGQUE_COOP_MEMBERS_MAX,
							   PGQUE_COOP_MEMBERS_MAX, &info,
							   HASH_ELEM | HASH_BLOBS | HASH_FIXED_SIZE);
	memset(&info, 0, sizeof(info));
	info.keysize = sizeof(CoopQuotaKey);
	info.entrysize = sizeof(CoopQuota);
	coop_quota = ShmemInitHash("pgque_bgw coop quotas", 2 * PGQUE_COOP_MEMBERS_MAX,
							   2 * PGQUE_COOP_MEMBERS_MAX, &info,
							   HASH_ELEM | HASH_BLOBS | HASH_FIXED_SIZE);
	coop_shared = ShmemInitStruct("pgque_bgw coop counts", sizeof(CoopShared), &found);
	if (!found)
	{
		coop_shared->total = 0;
		coop_shared->next_gen = 1;
	}
	coop_lock = &(GetNamedLWLockTranche("pgque_bgw coop"))->lock;
	LWLockRelease(AddinShmemInitLock);
}

/* ---- the quota: entries per table, database, role; under coop_lock ---- */

typedef enum CoopVerdict
{
	COOP_OK,
	COOP_TABLE_FULL,
	COOP_RESERVE,
	COOP_DATABASE_FULL,
	COOP_ROLE_FULL
} CoopVerdict;

static CoopQuota *
quota_find(int32 kind, Oid oid, bool enter)
{
	CoopQuotaKey k;
	CoopQuota  *q;
	bool		found;

	memset(&k, 0, sizeof(k));
	k.kind = kind;
	k.oid = oid;
	q = hash_search(coop_quota, &k, enter ? HASH_ENTER_NULL : HASH_FIND, &found);
	if (enter && q == NULL)
		elog(PANIC, "pgque_bgw coop quota table overflow");
	if (enter && !found)
		q->count = 0;
	return q;
}

static CoopVerdict
quota_check(Oid dboid, Oid role, int privileged)
{
	CoopQuota  *db = quota_find(COOP_QUOTA_DATABASE, dboid, false);
	CoopQuota  *ro = quota_find(COOP_QUOTA_ROLE, role, false);

	if (coop_shared->total >= PGQUE_COOP_MEMBERS_MAX)
		return COOP_TABLE_FULL;
	if (privileged < PGQUE_PRIV_RESERVE && coop_shared->total >= PGQUE_COOP_MEMBERS_MAX - pgque_shmem_reserve(PGQUE_COOP_MEMBERS_MAX))
		return COOP_RESERVE;
	if (db != NULL && db->count >= pgque_max_coop_members_per_database)
		return COOP_DATABASE_FULL;
	if (privileged < PGQUE_PRIV_NO_ROLE_CAP && ro != NULL && ro->count >= pgque_max_coop_members_per_role)
		return COOP_ROLE_FULL;
	return COOP_OK;
}

/* The caller holds coop_lock exclusively and quota_check() said yes. */
static void
quota_add(Oid dboid, Oid role)
{
	quota_find(COOP_QUOTA_DATABASE, dboid, true)->count++;
	quota_find(COOP_QUOTA_ROLE, role, true)->count++;
	coop_shared->total++;
}

/* Remove an entry and its counts; the caller holds coop_lock exclusively. */
static void
entry_remove(CoopMember *e)
{
	CoopQuota  *q[2];
	CoopKey		key = e->key;
	int			i;

	q[0] = quota_find(COOP_QUOTA_DATABASE, e->key.dboid, false);
	q[1] = quota_find(COOP_QUOTA_ROLE, e->role, false);
	for (i = 0; i < 2; i++)
		if (q[i] != NULL && --q[i]->count <= 0)
			hash_search(coop_quota, &q[i]->key, HASH_REMOVE, NULL);
	coop_shared->total--;
	hash_search(coop_table, &key, HASH_REMOVE, NULL);
}

static void
quota_error(CoopVerdict v)
{
	switch (v)
	{
		case COOP_OK:
			break;
		case COOP_TABLE_FULL:
			ereport(ERROR,
					(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
					 errmsg("the cooperative member table is full (%d entries)", PGQUE_COOP_MEMBERS_MAX),
					 errdetail("Every database's cooperative members share this table; a member that is not heard could be taken over, so its call fails instead."),
					 errhint("Unregister members that are gone with pgque.unregister_subconsumer().")));
			break;
		case COOP_RESERVE:
			ereport(ERROR,
					(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
					 errmsg("the cooperative member table is full but for its reserve (%d of %d entries)",
							pgque_shmem_reserve(PGQUE_COOP_MEMBERS_MAX), PGQUE_COOP_MEMBERS_MAX),
					 errdetail("The reserve is kept for superusers."),
					 errhint("Unregister members that are gone with pgque.unregister_subconsumer(), or have the administrator lower pgque_bgw.max_coop_members_per_role.")));
			break;
		case COOP_DATABASE_FULL:
			ereport(ERROR,
					(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
					 errmsg("this database holds its maximum of cooperative members (pgque_bgw.max_coop_members_per_database = %d)",
							pgque_max_coop_members_per_database),
					 errdetail("A member's entry stays until it is unregistered."),
					 errhint("Unregister members that are gone with pgque.unregister_subconsumer(), or have a superuser raise pgque_bgw.max_coop_members_per_database.")));
			break;
		case COOP_ROLE_FULL:
			{
				const char *name = GetUserNameFromId(pgque_quota_role(), true);

				ereport(ERROR,
						(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
						 errmsg("role \"%s\" holds its maximum of cooperative members (pgque_bgw.max_coop_members_per_role = %d)",
								name ? name : "?", pgque_max_coop_members_per_role),
						 errdetail("The member entries a role created count in every database."),
						 errhint("Unregister members that are gone with pgque.unregister_subconsumer(), or have a superuser raise pgque_bgw.max_coop_members_per_role for the role (ALTER ROLE ... SET).")));
			}
			break;
	}
}

/*
 * Remove the entries of dropped databases.  The databases are looked up
 * outside the lock.  Returns how many went.
 */
int
pgque_coop_reclaim(void)
{
	HASH_SEQ_STATUS seq;
	CoopQuota  *q;
	CoopMember *e;
	Oid		   *dbs;
	int			ndb = 0;
	int			i;
	int			n = 0;

	if (coop_table == NULL)
		return 0;
	dbs = palloc(sizeof(Oid) * 2 * PGQUE_COOP_MEMBERS_MAX);
	LWLockAcquire(coop_lock, LW_SHARED);
	hash_seq_init(&seq, coop_quota);
	while ((q = hash_seq_search(&seq)) != NULL)
		if (q->key.kind == COOP_QUOTA_DATABASE)
			dbs[ndb++] = q->key.oid;
	LWLockRelease(coop_lock);
	for (i = 0; i < ndb; i++)
	{
		if (SearchSysCacheExists1(DATABASEOID, ObjectIdGetDatum(dbs[i])))
			continue;
		LWLockAcquire(coop_lock, LW_EXCLUSIVE);
		hash_seq_init(&seq, coop_table);
		while ((e = hash_seq_search(&seq)) != NULL)
		{
			if (e->key.dboid != dbs[i])
				continue;
			entry_remove(e);
			n++;
		}
		LWLockRelease(coop_lock);
	}
	pfree(dbs);
	return n;
}

/* ---- undo of the entries of an aborted (sub)transaction ---- */

static void
undo_reserve(void)
{
	if (undo_len == undo_cap)
	{
		int			cap = undo_cap == 0 ? 16 : undo_cap * 2;

		undo = undo == NULL ? MemoryContextAlloc(TopMemoryContext, sizeof(CoopUndo) * cap)
			: repalloc(undo, sizeof(CoopUndo) * cap);
		undo_cap = cap;
	}
}

/*
 * At abort (commit = false) remove the entries still pending under this
 * backend; at commit mark them committed.  Records of other
 * subtransactions (subid set, not this one) stay.
 */
static void
undo_end(SubTransactionId subid, bool commit)
{
	int			i;
	int			keep = 0;

	LWLockAcquire(coop_lock, LW_EXCLUSIVE);
	for (i = undo_len - 1; i >= 0; i--)
	{
		CoopMember *e;

		if (subid != InvalidSubTransactionId && undo[i].subid != subid)
			continue;
		e = hash_search(coop_table, &undo[i].key, HASH_FIND, NULL);
		if (e == NULL || e->gen != undo[i].gen || e->pending_pid != MyProcPid)
			continue;
		if (commit)
			e->pending_pid = 0;
		else
			entry_remove(e);
	}
	LWLockRelease(coop_lock);
	if (subid == InvalidSubTransactionId)
	{
		undo_len = 0;
		return;
	}
	for (i = 0; i < undo_len; i++)
		if (undo[i].subid != subid)
			undo[keep++] = undo[i];
	undo_len = keep;
}

static void
coop_xact_callback(XactEvent event, void *arg)
{
	if (undo_len == 0)
		return;
	switch (event)
	{
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			undo_end(InvalidSubTransactionId, false);
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_PREPARE:
			undo_end(InvalidSubTransactionId, true);
			break;
		default:
			break;
	}
}

static void
coop_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
					  SubTransactionId parentSubid, void *arg)
{
	int			i;

	switch (event)
	{
		case SUBXACT_EVENT_ABORT_SUB:
			undo_end(mySubid, false);
			break;
		case SUBXACT_EVENT_COMMIT_SUB:
			for (i = 0; i < undo_len; i++)
				if (undo[i].subid == mySubid)
					undo[i].subid = parentSubid;
			break;
		default:
			break;
	}
}

static void
make_key(CoopKey *key, int32 sub_id, text *member)
{
	char	   *m = text_to_cstring(member);

	memset(key, 0, sizeof(CoopKey));
	key->dboid = MyDatabaseId;
	key->sub_id = sub_id;
	strlcpy(key->member, m, sizeof(key->member));
}

PG_FUNCTION_INFO_V1(pgque_coop_touch);
PG_FUNCTION_INFO_V1(pgque_coop_seen);
PG_FUNCTION_INFO_V1(pgque_coop_forget);
PG_FUNCTION_INFO_V1(pgque_coop_members);

/*
 * pgque._coop_touch(sub_id, member, batch) -> void: the member is alive now
 * (and holds batch, when not NULL).  Without preload nothing is recorded; a
 * new entry that a bound refuses is an error (53400, the file header).
 */
Datum
pgque_coop_touch(PG_FUNCTION_ARGS)
{
	CoopKey		key;
	CoopMember *e;
	bool		found;
	int			privileged = -1;
	bool		reclaimed = false;
	Oid			role = pgque_quota_role();

	if (coop_table == NULL || PG_ARGISNULL(0) || PG_ARGISNULL(1))
		PG_RETURN_VOID();
	make_key(&key, PG_GETARG_INT32(0), PG_GETARG_TEXT_PP(1));
	if (!callbacks_registered)
	{
		RegisterXactCallback(coop_xact_callback, NULL);
		RegisterSubXactCallback(coop_subxact_callback, NULL);
		callbacks_registered = true;
	}
	for (;;)
	{
		CoopVerdict v = COOP_OK;

		undo_reserve();
		LWLockAcquire(coop_lock, LW_EXCLUSIVE);
		e = (CoopMember *) hash_search(coop_table, &key, HASH_FIND, NULL);
		if (e == NULL)
		{
			v = quota_check(key.dboid, role, Max(privileged, PGQUE_PRIV_NONE));
			if (v == COOP_OK)
			{
				e = (CoopMember *) hash_search(coop_table, &key, HASH_ENTER_NULL, &found);
				if (e == NULL)
					v = COOP_TABLE_FULL;
			}
			if (v != COOP_OK)
			{
				LWLockRelease(coop_lock);
				if ((v == COOP_RESERVE || v == COOP_ROLE_FULL) && privileged < 0)
				{
					privileged = pgque_caller_privileged();
					if (privileged >= (v == COOP_RESERVE ? PGQUE_PRIV_RESERVE : PGQUE_PRIV_NO_ROLE_CAP))
						continue;
				}
				if (!reclaimed)
				{
					reclaimed = true;
					pgque_coop_reclaim();
					continue;
				}
				quota_error(v);
			}
			quota_add(key.dboid, role);
			e->batch = 0;
			e->polls = 0;
			e->role = role;
			e->pending_pid = MyProcPid;
			e->gen = coop_shared->next_gen++;
			undo[undo_len].subid = GetCurrentSubTransactionId();
			undo[undo_len].key = key;
			undo[undo_len].gen = e->gen;
			undo_len++;
		}
		else if (e->pending_pid != 0 && e->pending_pid != MyProcPid)
		{
			/* another backend relies on it now: no abort may remove it */
			e->pending_pid = 0;
		}
		break;
	}
	e->last_seen = GetCurrentTimestamp();
	if (!PG_ARGISNULL(2))
		e->batch = PG_GETARG_INT64(2);
	e->polls++;
	LWLockRelease(coop_lock);
	PG_RETURN_VOID();
}

/* pgque._coop_seen(sub_id, member) -> last heartbeat, NULL if unknown */
Datum
pgque_coop_seen(PG_FUNCTION_ARGS)
{
	CoopKey		key;
	CoopMember *e;
	TimestampTz seen = 0;

	if (coop_table == NULL || PG_ARGISNULL(0) || PG_ARGISNULL(1))
		PG_RETURN_NULL();
	make_key(&key, PG_GETARG_INT32(0), PG_GETARG_TEXT_PP(1));
	LWLockAcquire(coop_lock, LW_SHARED);
	e = (CoopMember *) hash_search(coop_table, &key, HASH_FIND, NULL);
	if (e != NULL)
		seen = e->last_seen;
	LWLockRelease(coop_lock);
	if (seen == 0)
		PG_RETURN_NULL();
	PG_RETURN_TIMESTAMPTZ(seen);
}

/*
 * pgque._coop_forget(sub_id, member) -> entries removed; a NULL member
 * forgets the whole group, a NULL sub_id the whole database.
 */
Datum
pgque_coop_forget(PG_FUNCTION_ARGS)
{
	HASH_SEQ_STATUS seq;
	CoopMember *e;
	char	   *m = PG_ARGISNULL(1) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(1));
	int			n = 0;

	if (coop_table == NULL)
		PG_RETURN_INT32(0);
	LWLockAcquire(coop_lock, LW_EXCLUSIVE);
	hash_seq_init(&seq, coop_table);
	while ((e = (CoopMember *) hash_seq_search(&seq)) != NULL)
	{
		if (e->key.dboid != MyDatabaseId)
			continue;
		if (!PG_ARGISNULL(0) && e->key.sub_id != PG_GETARG_INT32(0))
			continue;
		if (m != NULL && strncmp(e->key.member, m, COOP_NAME_MAX) != 0)
			continue;
		entry_remove(e);
		n++;
	}
	LWLockRelease(coop_lock);
	PG_RETURN_INT32(n);
}

/*
 * pgque._coop_members() -> this database's entries: (sub_id, member,
 * last_seen, batch, polls).  Reading writes nothing.
 */
Datum
pgque_coop_members(PG_FUNCTION_ARGS)
{
	TupleDesc	desc;
	Tuplestorestate *ts;
	MemoryContext old;
	HASH_SEQ_STATUS seq;
	CoopMember *e;
	CoopMember *copy;
	int			n = 0;
	int			i;

	old = pgque_materialize(fcinfo, &ts, &desc);
	if (coop_table == NULL)
	{
		MemoryContextSwitchTo(old);
		return (Datum) 0;
	}
	copy = palloc(sizeof(CoopMember) * PGQUE_COOP_MEMBERS_MAX);
	LWLockAcquire(coop_lock, LW_SHARED);
	hash_seq_init(&seq, coop_table);
	while ((e = (CoopMember *) hash_seq_search(&seq)) != NULL)
	{
		if (e->key.dboid == MyDatabaseId && n < PGQUE_COOP_MEMBERS_MAX)
			copy[n++] = *e;
	}
	LWLockRelease(coop_lock);
	for (i = 0; i < n; i++)
	{
		Datum		v[5];
		bool		nulls[5];

		memset(nulls, 0, sizeof(nulls));
		v[0] = Int32GetDatum(copy[i].key.sub_id);
		v[1] = CStringGetTextDatum(copy[i].key.member);
		v[2] = TimestampTzGetDatum(copy[i].last_seen);
		v[3] = Int64GetDatum(copy[i].batch);
		nulls[3] = copy[i].batch == 0;
		v[4] = Int64GetDatum(copy[i].polls);
		tuplestore_putvalues(ts, desc, v, nulls);
	}
	MemoryContextSwitchTo(old);
	return (Datum) 0;
}

PG_FUNCTION_INFO_V1(pgque_coop_count_all);

/*
 * pgque._coop_member_count_all() -> entries in the member table, all
 * databases: lets a test (and an operator) see what a rolled-back
 * registration, a dropped database or a bound left behind.
 */
Datum
pgque_coop_count_all(PG_FUNCTION_ARGS)
{
	int			n;

	if (coop_table == NULL)
		PG_RETURN_INT32(0);
	LWLockAcquire(coop_lock, LW_SHARED);
	n = coop_shared->total;
	LWLockRelease(coop_lock);
	PG_RETURN_INT32(n);
}

/*
 * The committed entries of database dboid (for reclaim.c): their keys and
 * generations, palloc'd; *count says how many.
 */
void
pgque_coop_list(Oid dboid, int32 **subs, char ***members, uint64 **gens, int *count)
{
	HASH_SEQ_STATUS seq;
	CoopMember *e;
	int			n = 0;

	*subs = palloc(sizeof(int32) * PGQUE_COOP_MEMBERS_MAX);
	*members = palloc(sizeof(char *) * PGQUE_COOP_MEMBERS_MAX);
	*gens = palloc(sizeof(uint64) * PGQUE_COOP_MEMBERS_MAX);
	if (coop_table != NULL)
	{
		LWLockAcquire(coop_lock, LW_SHARED);
		hash_seq_init(&seq, coop_table);
		while ((e = hash_seq_search(&seq)) != NULL)
		{
			if (e->key.dboid != dboid || e->pending_pid != 0 || n >= PGQUE_COOP_MEMBERS_MAX)
				continue;
			(*subs)[n] = e->key.sub_id;
			(*members)[n] = pstrdup(e->key.member);
			(*gens)[n] = e->gen;
			n++;
		}
		LWLockRelease(coop_lock);
	}
	*count = n;
}

/* Remove one committed entry of this database unless it changed since listed. */
int
pgque_coop_drop_if(int32 sub_id, const char *member, uint64 gen)
{
	CoopKey		key;
	CoopMember *e;
	int			n = 0;

	if (coop_table == NULL)
		return 0;
	memset(&key, 0, sizeof(key));
	key.dboid = MyDatabaseId;
	key.sub_id = sub_id;
	strlcpy(key.member, member, sizeof(key.member));
	LWLockAcquire(coop_lock, LW_EXCLUSIVE);
	e = hash_search(coop_table, &key, HASH_FIND, NULL);
	if (e != NULL && e->gen == gen && e->pending_pid == 0)
	{
		entry_remove(e);
		n = 1;
	}
	LWLockRelease(coop_lock);
	return n;
}

/* Forget every entry of a database (the launcher, when it is dropped). */
void
pgque_coop_forget_db(Oid dboid)
{
	HASH_SEQ_STATUS seq;
	CoopMember *e;

	if (coop_table == NULL)
		return;
	LWLockAcquire(coop_lock, LW_EXCLUSIVE);
	hash_seq_init(&seq, coop_table);
	while ((e = hash_seq_search(&seq)) != NULL)
		if (e->key.dboid == dboid)
			entry_remove(e);
	LWLockRelease(coop_lock);
}
