/*
 * slots.c
 *		The shared-memory slot lease table: who owns partition slot k of a
 *		partitioned consumer, until when, under which epoch.
 *
 * Fixed capacity (pgque_bgw.max_slots), a shared hash table split into
 * SLOT_PARTITIONS partitions, each under its own LWLock, so claims and
 * renewals of different slots rarely meet.  Nothing here writes a table row
 * or WAL: a renewal is a few stores under a partition lock.  Shared memory
 * is lost on restart; epochs therefore come from a WAL-logged sequence (see
 * slot_sql.c), so they only grow across restarts and failovers.
 *
 * Bounds (ADR 0011, 0041).  The hash is HASH_FIXED_SIZE (dynahash would
 * otherwise grow into the shared-memory slack that the lock table needs),
 * and a quota table, under its own lock, counts the entries of the whole
 * table, of each database, of each consumer and of each role (the login
 * role of the session that created the entry, all databases): a new entry
 * is refused (53400, naming the cap) at pgque_bgw.max_slots,
 * max_slots_per_database, max_slots_per_consumer or max_slots_per_role.
 * The last 1/PGQUE_SHMEM_RESERVE_SHARE of the table is kept for superusers;
 * they and the installing role are not held to the per-role cap.
 * Renewals never touch the quota lock; only the creation and removal of
 * entries do (lock order: partition locks, then the quota lock).
 *
 * Reclaim.  A claim that a cap refuses first reclaims, and tries once more:
 * released entries (they protect no lease: a fenced worker that loses its
 * entry is refused with PQ001 instead of PQ002) and the entries of dropped
 * databases.  The watchdog also removes released entries after a while and
 * those whose partitioned consumer is gone (reclaim.c).  An entry that
 * holds a lease, live or expired, is never reclaimed.
 *
 * Transactions.  A lease is not a row, but a claim made in a transaction
 * (or subtransaction) that aborts does not survive it: each backend keeps
 * an undo list of the entries it created or took over, tagged with the
 * subtransaction, and the abort removes what it created and gives back what
 * it took over (the entry as it was, epoch included: the aborted epoch was
 * never committed).  A commit, or PREPARE, keeps the claims; renewals are
 * not undone.
 *
 * A release takes effect at commit (ADR 0071).  Made at once, it let
 * another worker claim the slot while the releasing transaction (the ack
 * before it, typically) could still roll back, or its backend die: the new
 * owner read the old cursor and delivered the batch again (TAP 059 counted
 * 28 duplicates in 4,000).  Now release_slot records the release in a
 * second per-backend list, tagged with the subtransaction, and the commit
 * applies it if the entry is still this worker's lease of the same epoch;
 * an abort (of the subtransaction) drops it, a crash never applies it (the
 * lease then expires with its ttl).  Within the transaction the slot counts
 * as released for this worker (its receive and ack get PQ001, as after a
 * release), but for every other session it is still held.  A claim by the
 * same worker in the same transaction takes the release back (and its
 * abort, in a subtransaction, puts the release back in force).  PREPARE
 * TRANSACTION is refused after a release: the commit that would apply it
 * happens in another session.
 *
 * A forget takes effect at commit too (ADR 0089): unsubscribe_slot,
 * drop_queue and a resize's switch to the new layout forget a consumer's
 * (a queue's) leases.  Made at once, a rolled-back unsubscribe lost the
 * leases of a consumer that still existed.  The forget is recorded in a
 * third list, tagged with the subtransaction and a sequence number shared
 * with the undo records; the commit removes the entries it covers, except
 * those this transaction claimed after it (a resize's switch claims the new
 * layout's slots, of the same keys, in the same transaction).  Within the
 * transaction the covered entries do not exist for this backend (a claim
 * makes them anew with a fresh epoch, receive/ack get PQ001, the lease list
 * leaves them out); for every other session they are there until the
 * commit.  PREPARE applies the forget at once (as before: a ROLLBACK
 * PREPARED then costs the workers a claim, never a lease held twice).
 */
#include "postgres.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "utils/syscache.h"
#include "port/atomics.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "caller.h"
#include "guc.h"
#include "rules.h"
#include "slots.h"

#define SLOT_PARTITIONS 16
#define QUOTA_LOCK SLOT_PARTITIONS	/* the tranche's last lock */

/*
 * A quota entry counts the lease entries of one consumer (queue_id >= 0), of
 * one whole database (queue_id = QUOTA_DATABASE, consumer "") or of one role
 * (dboid = the role, queue_id = QUOTA_ROLE).  Each exists only while its
 * count is positive, so the quota table never needs more than three times
 * the lease table's capacity.
 */
#define QUOTA_DATABASE (-1)
#define QUOTA_ROLE (-2)
#define QUOTA_KINDS 3
typedef struct QuotaKey
{
	Oid			dboid;
	int32		queue_id;
	char		consumer[PGQUE_CONSUMER_MAX + 1];
} QuotaKey;

typedef struct QuotaEntry
{
	QuotaKey	key;
	int			count;
} QuotaEntry;

typedef struct SlotShared
{
	int			total;			/* entries in slot_table; under QUOTA_LOCK */
	pg_atomic_uint64 releases;	/* releases so far: has anything new become reclaimable? */
	/* the last reclaim of a refused claim that found nothing; under QUOTA_LOCK */
	TimestampTz empty_at;
	uint64		empty_releases;
} SlotShared;

/* a refused claim scans for what to reclaim at most this often in vain */
#define RECLAIM_RETRY_MS 1000

/* One entry this backend created or took over, for undo at abort. */
typedef struct SlotUndo
{
	SubTransactionId subid;
	SlotKey		key;
	bool		created;		/* remove it; else give prev back */
	int64		epoch;			/* ours: undo only if it is still this */
	uint64		seq;			/* claim_seq when made: later than a forget, it survives it */
	SlotLease	prev;			/* the entry before the takeover */
} SlotUndo;

static HTAB *slot_table = NULL;
static HTAB *quota_table = NULL;
static SlotShared *slot_shared = NULL;
static LWLockPadded *slot_locks = NULL;

static SlotUndo *undo = NULL;
static int	undo_len = 0;
static int	undo_cap = 0;
static bool callbacks_registered = false;

/* A release this backend made, applied at commit (the file header). */
typedef struct SlotPendingRelease
{
	SubTransactionId subid;
	SubTransactionId taken_back;	/* a claim's subtransaction took it back;
									 * InvalidSubTransactionId: in force */
	SlotKey		key;
	char		worker[PGQUE_WORKER_MAX + 1];
	int64		epoch;			/* applied only if the lease is still this one */
} SlotPendingRelease;

static SlotPendingRelease *pending = NULL;
static int	pending_len = 0;
static int	pending_cap = 0;

/*
 * A forget this backend made (unsubscribe, drop_queue, a resize's switch),
 * applied at commit (the file header).
 */
typedef struct SlotPendingForget
{
	SubTransactionId subid;
	Oid			dboid;
	int32		queue_id;		/* < 0: every queue of the database */
	bool		any_consumer;	/* else only consumer */
	char		consumer[PGQUE_CONSUMER_MAX + 1];
	uint64		seq;			/* claim_seq when made: later claims survive it */
} SlotPendingForget;

static SlotPendingForget *forgets = NULL;
static int	forgets_len = 0;
static int	forgets_cap = 0;

/* orders this backend's claims (undo records) and forgets */
static uint64 claim_seq = 0;

static void claimed_reserve(void);
static void claimed_note(const SlotKey *key, uint64 seq);
static void claimed_rebuild(void);

void
pgque_slots_request(void)
{
	RequestAddinShmemSpace(hash_estimate_size(pgque_max_slots, sizeof(SlotLease)));
	RequestAddinShmemSpace(hash_estimate_size(QUOTA_KINDS * (long) pgque_max_slots, sizeof(QuotaEntry)));
	RequestAddinShmemSpace(MAXALIGN(sizeof(SlotShared)));
	RequestNamedLWLockTranche("pgque_bgw slots", SLOT_PARTITIONS + 1);
}

void
pgque_slots_startup(void)
{
	HASHCTL		info;
	bool		found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	memset(&info, 0, sizeof(info));
	info.keysize = sizeof(SlotKey);
	info.entrysize = sizeof(SlotLease);
	info.num_partitions = SLOT_PARTITIONS;
	/* HASH_FIXED_SIZE: all entries allocated now, never one more */
	slot_table = ShmemInitHash("pgque_bgw slot leases", pgque_max_slots, pgque_max_slots,
							   &info, HASH_ELEM | HASH_BLOBS | HASH_PARTITION | HASH_FIXED_SIZE);
	memset(&info, 0, sizeof(info));
	info.keysize = sizeof(QuotaKey);
	info.entrysize = sizeof(QuotaEntry);
	quota_table = ShmemInitHash("pgque_bgw slot quotas", QUOTA_KINDS * (long) pgque_max_slots,
								QUOTA_KINDS * (long) pgque_max_slots,
								&info, HASH_ELEM | HASH_BLOBS | HASH_FIXED_SIZE);
	slot_shared = ShmemInitStruct("pgque_bgw slot counts", sizeof(SlotShared), &found);
	if (!found)
	{
		slot_shared->total = 0;
		pg_atomic_init_u64(&slot_shared->releases, 0);
		slot_shared->empty_at = 0;
		slot_shared->empty_releases = 0;
	}
	slot_locks = GetNamedLWLockTranche("pgque_bgw slots");
	LWLockRelease(AddinShmemInitLock);
}

bool
pgque_slots_available(void)
{
	return slot_table != NULL;
}

void
pgque_slot_key(SlotKey *key, int32 queue_id, const char *consumer, int32 slot)
{
	memset(key, 0, sizeof(SlotKey));
	key->dboid = MyDatabaseId;
	key->queue_id = queue_id;
	key->slot = slot;
	strlcpy(key->consumer, consumer, sizeof(key->consumer));
}

static LWLock *
partition_lock(uint32 hash)
{
	return &slot_locks[hash % SLOT_PARTITIONS].lock;
}

/*
 * The entry of key (NULL: none), under its partition lock taken in mode;
 * the caller releases *lock.  *hash (if not NULL) gets the key's hash, for
 * a removal under the same lock.
 */
static SlotLease *
lease_lookup_locked(const SlotKey *key, LWLockMode mode, LWLock **lock, uint32 *hash)
{
	uint32		h = get_hash_value(slot_table, key);

	*lock = partition_lock(h);
	if (hash != NULL)
		*hash = h;
	LWLockAcquire(*lock, mode);
	return hash_search_with_hash_value(slot_table, key, h, HASH_FIND, NULL);
}

/* ---- the quota: counts per table, database, consumer, role ---- */

typedef enum QuotaVerdict
{
	QUOTA_OK,
	QUOTA_TABLE_FULL,
	QUOTA_RESERVE,				/* only the reserve is left */
	QUOTA_DATABASE_FULL,
	QUOTA_CONSUMER_FULL,
	QUOTA_ROLE_FULL
} QuotaVerdict;

static void
quota_keys(const SlotKey *key, Oid role, QuotaKey *keys)
{
	memset(keys, 0, sizeof(QuotaKey) * QUOTA_KINDS);
	keys[0].dboid = key->dboid;
	keys[0].queue_id = QUOTA_DATABASE;
	keys[1].dboid = key->dboid;
	keys[1].queue_id = key->queue_id;
	strlcpy(keys[1].consumer, key->consumer, sizeof(keys[1].consumer));
	keys[2].dboid = role;
	keys[2].queue_id = QUOTA_ROLE;
}

static int
quota_count(QuotaEntry *q)
{
	return q == NULL ? 0 : q->count;
}

/*
 * Count one more entry for key, created by role, or say which cap refuses
 * it.  The caller holds the entry's partition lock.  The caps are read from
 * this backend's settings (SUSET: a session cannot raise its own);
 * superusers may use the reserve; they and the installing role (ADR 0042)
 * are not held to the per-role cap.
 */
static QuotaVerdict
quota_reserve(const SlotKey *key, Oid role, int privileged)
{
	QuotaKey	keys[QUOTA_KINDS];
	QuotaEntry *q[QUOTA_KINDS];
	bool		found;
	int			i;
	QuotaVerdict v = QUOTA_OK;

	quota_keys(key, role, keys);
	LWLockAcquire(&slot_locks[QUOTA_LOCK].lock, LW_EXCLUSIVE);
	for (i = 0; i < QUOTA_KINDS; i++)
		q[i] = hash_search(quota_table, &keys[i], HASH_FIND, NULL);
	if (slot_shared->total >= pgque_max_slots)
		v = QUOTA_TABLE_FULL;
	else if (privileged < PGQUE_PRIV_RESERVE && slot_shared->total >= pgque_max_slots - pgque_shmem_reserve(pgque_max_slots))
		v = QUOTA_RESERVE;
	else if (quota_count(q[0]) >= pgque_max_slots_per_database)
		v = QUOTA_DATABASE_FULL;
	else if (quota_count(q[1]) >= pgque_max_slots_per_consumer)
		v = QUOTA_CONSUMER_FULL;
	else if (privileged < PGQUE_PRIV_NO_ROLE_CAP && quota_count(q[2]) >= pgque_max_slots_per_role)
		v = QUOTA_ROLE_FULL;
	else
	{
		/* at most QUOTA_KINDS * max_slots quota entries exist: cannot fail */
		for (i = 0; i < QUOTA_KINDS; i++)
		{
			if (q[i] == NULL)
			{
				q[i] = hash_search(quota_table, &keys[i], HASH_ENTER_NULL, &found);
				if (q[i] == NULL)
					elog(PANIC, "pgque_bgw slot quota table overflow");
				q[i]->count = 0;
			}
		}
		for (i = 0; i < QUOTA_KINDS; i++)
			q[i]->count++;
		slot_shared->total++;
	}
	LWLockRelease(&slot_locks[QUOTA_LOCK].lock);
	return v;
}

/* Count one entry less; the caller holds the entry's partition lock. */
static void
quota_release(const SlotKey *key, Oid role)
{
	QuotaKey	keys[QUOTA_KINDS];
	int			i;

	quota_keys(key, role, keys);
	LWLockAcquire(&slot_locks[QUOTA_LOCK].lock, LW_EXCLUSIVE);
	for (i = 0; i < QUOTA_KINDS; i++)
	{
		QuotaEntry *q = hash_search(quota_table, &keys[i], HASH_FIND, NULL);

		if (q != NULL && --q->count <= 0)
			hash_search(quota_table, &keys[i], HASH_REMOVE, NULL);
	}
	slot_shared->total--;
	LWLockRelease(&slot_locks[QUOTA_LOCK].lock);
}

static void
quota_error(QuotaVerdict v, const SlotKey *key)
{
	switch (v)
	{
		case QUOTA_OK:
			break;
		case QUOTA_TABLE_FULL:
			ereport(ERROR,
					(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
					 errmsg("the slot lease table is full (pgque_bgw.max_slots = %d)", pgque_max_slots),
					 errdetail("Every database's partition slots share this table; released entries and those of dropped databases were reclaimed first."),
					 errhint("Raise pgque_bgw.max_slots (restart needed), or unsubscribe unused slot consumers.")));
			break;
		case QUOTA_RESERVE:
			ereport(ERROR,
					(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
					 errmsg("the slot lease table is full but for its reserve (%d of pgque_bgw.max_slots = %d)",
							pgque_shmem_reserve(pgque_max_slots), pgque_max_slots),
					 errdetail("The reserve is kept for superusers; released entries and those of dropped databases were reclaimed first."),
					 errhint("Unsubscribe unused slot consumers, or have the administrator lower pgque_bgw.max_slots_per_role or raise pgque_bgw.max_slots.")));
			break;
		case QUOTA_DATABASE_FULL:
			ereport(ERROR,
					(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
					 errmsg("this database holds its maximum of slot leases (pgque_bgw.max_slots_per_database = %d)",
							pgque_max_slots_per_database),
					 errdetail("A lease entry stays until its consumer is unsubscribed or its slot is released and reclaimed."),
					 errhint("Unsubscribe unused slot consumers, or have a superuser raise pgque_bgw.max_slots_per_database.")));
			break;
		case QUOTA_CONSUMER_FULL:
			ereport(ERROR,
					(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
					 errmsg("consumer \"%s\" holds its maximum of slot leases (pgque_bgw.max_slots_per_consumer = %d)",
							key->consumer, pgque_max_slots_per_consumer),
					 errdetail("A lease entry stays until the consumer is unsubscribed or its slot is released and reclaimed."),
					 errhint("Use fewer slots (a smaller n), or have a superuser raise pgque_bgw.max_slots_per_consumer.")));
			break;
		case QUOTA_ROLE_FULL:
			ereport(ERROR,
					(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
					 errmsg("role \"%s\" holds its maximum of slot leases (pgque_bgw.max_slots_per_role = %d)",
							GetUserNameFromId(pgque_quota_role(), true) ? GetUserNameFromId(pgque_quota_role(), true) : "?",
							pgque_max_slots_per_role),
					 errdetail("The entries a role created count in every database; released ones are reclaimed first."),
					 errhint("Release or unsubscribe slots this role no longer uses, or have a superuser raise pgque_bgw.max_slots_per_role for it (ALTER ROLE ... SET).")));
			break;
	}
}

/* ---- undo of the claims of an aborted (sub)transaction ---- */

/* Room for one more record: called before any lock is taken. */
static void
undo_reserve(void)
{
	if (undo_len == undo_cap)
	{
		int			cap = undo_cap == 0 ? 16 : undo_cap * 2;

		undo = undo == NULL ? MemoryContextAlloc(TopMemoryContext, sizeof(SlotUndo) * cap)
			: repalloc(undo, sizeof(SlotUndo) * cap);
		undo_cap = cap;
	}
	claimed_reserve();
}

/* Record an entry created or taken over; undo_reserve() made room. */
static SlotUndo *
undo_push(const SlotKey *key, bool created, const SlotLease *prev)
{
	SlotUndo   *u;

	Assert(undo_len < undo_cap);
	u = &undo[undo_len++];
	memset(u, 0, sizeof(SlotUndo));
	u->subid = GetCurrentSubTransactionId();
	u->seq = ++claim_seq;
	memcpy(&u->key, key, sizeof(SlotKey));
	u->created = created;
	claimed_note(key, u->seq);
	if (prev != NULL)
		memcpy(&u->prev, prev, sizeof(SlotLease));
	return u;
}

/* Undo one record, if the entry is still as this backend left it. */
static void
undo_one(SlotUndo *u)
{
	uint32		hash;
	LWLock	   *lock;
	SlotLease  *e = lease_lookup_locked(&u->key, LW_EXCLUSIVE, &lock, &hash);

	if (e != NULL && e->epoch == u->epoch)
	{
		if (u->created)
		{
			Oid			role = e->role;

			hash_search_with_hash_value(slot_table, &u->key, hash, HASH_REMOVE, NULL);
			quota_release(&u->key, role);
		}
		else
		{
			/*
			 * the entry as it was before the claim: the previous owner's
			 * (expired, or forgotten by this transaction) lease or none, its
			 * epoch (so that an earlier record of this transaction still
			 * matches) and its figures; the quota's role and the creating
			 * transaction are the entry's, not the claim's
			 */
			Oid			role = e->role;
			int			pending_pid = e->pending_pid;

			memcpy(e, &u->prev, sizeof(SlotLease));
			e->role = role;
			e->pending_pid = pending_pid;
		}
	}
	else if (e != NULL && u->created && e->pending_pid == MyProcPid)
		e->pending_pid = 0;		/* taken over since: no longer ours to undo */
	LWLockRelease(lock);
}

/* At commit: the entries this transaction created are committed now. */
static void
undo_commit(void)
{
	int			i;

	for (i = 0; i < undo_len; i++)
	{
		LWLock	   *lock;
		SlotLease  *e;

		if (!undo[i].created)
			continue;
		e = lease_lookup_locked(&undo[i].key, LW_EXCLUSIVE, &lock, NULL);
		if (e != NULL && e->pending_pid == MyProcPid)
			e->pending_pid = 0;
		LWLockRelease(lock);
	}
	undo_len = 0;
}

/* Undo the records of subtransaction subid (all: InvalidSubTransactionId). */
static void
undo_abort(SubTransactionId subid)
{
	int			i;
	int			keep = 0;

	for (i = undo_len - 1; i >= 0; i--)
	{
		if (subid == InvalidSubTransactionId || undo[i].subid == subid)
			undo_one(&undo[i]);
	}
	if (subid == InvalidSubTransactionId)
	{
		undo_len = 0;
		return;
	}
	for (i = 0; i < undo_len; i++)
		if (undo[i].subid != subid)
			undo[keep++] = undo[i];
	undo_len = keep;
	claimed_rebuild();
}

/* ---- releases applied at commit ---- */

/*
 * The index of this transaction's pending release of (key, worker) in
 * force (not taken back), or -1.
 */
static int
pending_find(const SlotKey *key, const char *worker)
{
	int			i;

	for (i = 0; i < pending_len; i++)
		if (pending[i].taken_back == InvalidSubTransactionId &&
			memcmp(&pending[i].key, key, sizeof(SlotKey)) == 0 &&
			strcmp(pending[i].worker, worker) == 0)
			return i;
	return -1;
}

/*
 * Take a pending release back (a claim of the same slot by the same
 * worker).  Made in the release's own subtransaction, the release goes: an
 * abort would drop both.  Made in a subtransaction below it, the release is
 * only marked, so that the claim's abort puts it back in force (a release
 * committed after a claim rolled back to a savepoint was lost, and the slot
 * stayed leased until its ttl); the mark moves up at each subcommit, and
 * once it reaches the release's subtransaction the release goes.  So the
 * list holds at most one entry in force per slot and worker, and one taken
 * back per subtransaction level.
 */
static void
pending_cancel(const SlotKey *key, const char *worker)
{
	int			i = pending_find(key, worker);
	SubTransactionId cur = GetCurrentSubTransactionId();

	if (i < 0)
		return;
	if (pending[i].subid == cur)
		pending[i] = pending[--pending_len];
	else
		pending[i].taken_back = cur;
}

/* Whether a release is in force (one taken back is not applied at commit). */
static bool
pending_in_force(void)
{
	int			i;

	for (i = 0; i < pending_len; i++)
		if (pending[i].taken_back == InvalidSubTransactionId)
			return true;
	return false;
}

/* At commit: release what this transaction released, if still ours. */
static void
pending_commit(void)
{
	int			i;

	for (i = 0; i < pending_len; i++)
	{
		SlotPendingRelease *p = &pending[i];
		LWLock	   *lock;
		SlotLease  *e;

		if (p->taken_back != InvalidSubTransactionId)
			continue;
		e = lease_lookup_locked(&p->key, LW_EXCLUSIVE, &lock, NULL);
		if (e != NULL && e->epoch == p->epoch && strcmp(e->owner, p->worker) == 0)
		{
			e->owner[0] = '\0';	/* the epoch stays: it only grows */
			e->lease_until = 0;
			e->released_at = GetCurrentTimestamp();
			pg_atomic_fetch_add_u64(&slot_shared->releases, 1);
		}
		LWLockRelease(lock);
	}
	pending_len = 0;
}

/* Drop the pending releases of subtransaction subid (all: InvalidSubTransactionId). */
static void
pending_abort(SubTransactionId subid)
{
	int			i;
	int			keep = 0;

	if (subid == InvalidSubTransactionId)
	{
		pending_len = 0;
		return;
	}
	for (i = 0; i < pending_len; i++)
	{
		if (pending[i].subid == subid)
			continue;
		/* the claim that took it back is undone: the release holds again */
		if (pending[i].taken_back == subid)
			pending[i].taken_back = InvalidSubTransactionId;
		pending[keep++] = pending[i];
	}
	pending_len = keep;
}

/* ---- forgets applied at commit ---- */

/*
 * One source for "is key's entry forgotten by this transaction" (ADR 0091):
 * forget_covers() below, which the claim, the checks, the listing and the
 * commit all call.  It needs no pass over the lists: the forgets are kept
 * sorted by target (database, queue or every queue, consumer or every
 * consumer) as they come in, and the keys this transaction claimed since a
 * forget in a second sorted array (the latest claim of each).  Both are
 * grown before any lock is taken (an allocation may fail there, never in
 * the commit), so the commit, which holds every partition lock for one
 * pass over the table, costs a few binary searches per entry whatever the
 * number of forgets and claims (a role that may unsubscribe can put
 * thousands of them in one transaction).
 */
typedef struct ClaimedKey
{
	SlotKey		key;
	uint64		seq;			/* the latest claim of key by this transaction */
} ClaimedKey;

static ClaimedKey *claimed = NULL;
static int	claimed_len = 0;
static int	claimed_cap = 0;

/* Order of the forgets: by target; the subtransactions of one target in any order. */
static int
forget_target_cmp(Oid dboid, int32 queue_id, bool any_consumer, const char *consumer,
				  const SlotPendingForget *f)
{
	if (dboid != f->dboid)
		return dboid < f->dboid ? -1 : 1;
	if (queue_id != f->queue_id)
		return queue_id < f->queue_id ? -1 : 1;
	if (any_consumer != f->any_consumer)
		return any_consumer ? -1 : 1;
	return any_consumer ? 0 : strcmp(consumer, f->consumer);
}

/* The first forget of target at or after it in the sorted list (its insertion point). */
static int
forget_lower_bound(Oid dboid, int32 queue_id, bool any_consumer, const char *consumer)
{
	int			lo = 0;
	int			hi = forgets_len;

	while (lo < hi)
	{
		int			mid = lo + (hi - lo) / 2;

		if (forget_target_cmp(dboid, queue_id, any_consumer, consumer, &forgets[mid]) > 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/*
 * The targets whose forget covers key's entry: its consumer, every consumer
 * of its queue, every queue of its database (k = 0, 1, 2).  The one list of
 * the count of forget_at_commit and of forget_covers().
 */
#define KEY_TARGETS 3
static void
key_target(const SlotKey *key, int k, int32 *queue_id, bool *any_consumer, const char **consumer)
{
	*queue_id = k == 2 ? -1 : key->queue_id;
	*any_consumer = k > 0;
	*consumer = k > 0 ? "" : key->consumer;
}

/* Does forget f cover key's entry? */
static bool
forget_matches(const SlotPendingForget *f, const SlotKey *key)
{
	int			k;

	for (k = 0; k < KEY_TARGETS; k++)
	{
		int32		qid;
		bool		any;
		const char *cons;

		key_target(key, k, &qid, &any, &cons);
		if (forget_target_cmp(key->dboid, qid, any, cons, f) == 0)
			return true;
	}
	return false;
}

/* The latest forget of a target (one record per subtransaction holding it), or 0. */
static uint64
forget_target_seq(Oid dboid, int32 queue_id, bool any_consumer, const char *consumer)
{
	int			i = forget_lower_bound(dboid, queue_id, any_consumer, consumer);
	uint64		latest = 0;

	for (; i < forgets_len &&
		 forget_target_cmp(dboid, queue_id, any_consumer, consumer, &forgets[i]) == 0; i++)
		latest = Max(latest, forgets[i].seq);
	return latest;
}

/* The index of key in claimed, or where it goes (*found says which). */
static int
claimed_find(const SlotKey *key, bool *found)
{
	int			lo = 0;
	int			hi = claimed_len;

	while (lo < hi)
	{
		int			mid = lo + (hi - lo) / 2;
		int			c = memcmp(key, &claimed[mid].key, sizeof(SlotKey));

		if (c == 0)
		{
			*found = true;
			return mid;
		}
		if (c > 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	*found = false;
	return lo;
}

/*
 * Room for a claimed key per undo record (undo_reserve(), before any
 * lock): at most one key per record, so neither a claim nor the rebuild
 * after an abort ever lacks room.
 */
static void
claimed_reserve(void)
{
	if (claimed_cap < undo_cap)
	{
		claimed = claimed == NULL ? MemoryContextAlloc(TopMemoryContext, sizeof(ClaimedKey) * undo_cap)
			: repalloc(claimed, sizeof(ClaimedKey) * undo_cap);
		claimed_cap = undo_cap;
	}
}

/*
 * A claim (an undo record) of key with sequence number seq.  Only while a
 * forget is pending: a claim made before every pending forget never
 * survives one, so it need not be known.  claimed_reserve() made room.
 */
static void
claimed_note(const SlotKey *key, uint64 seq)
{
	bool		found;
	int			i;

	if (forgets_len == 0)
		return;
	i = claimed_find(key, &found);
	if (found)
	{
		claimed[i].seq = Max(claimed[i].seq, seq);
		return;
	}
	Assert(claimed_len < claimed_cap);
	memmove(&claimed[i + 1], &claimed[i], sizeof(ClaimedKey) * (claimed_len - i));
	memcpy(&claimed[i].key, key, sizeof(SlotKey));
	claimed[i].seq = seq;
	claimed_len++;
}

/*
 * The claims again from the undo records left after a subtransaction's
 * abort (an aborted claim no longer survives a forget).  Runs where an
 * error must not be raised (the abort): claimed_reserve() keeps room for
 * one key per undo record.
 */
static void
claimed_rebuild(void)
{
	int			i;

	claimed_len = 0;
	for (i = 0; i < undo_len; i++)
		claimed_note(&undo[i].key, undo[i].seq);
}

/*
 * Is key's entry forgotten by this transaction: covered by one of its
 * pending forgets (of its consumer, of its queue, or of its database), and
 * not claimed by it since (a claim after the forget, as a resize's switch
 * makes at once, made an entry of the new consumer)?  The one predicate
 * (see above); no allocation, callable under the partition locks.
 */
static bool
forget_covers(const SlotKey *key)
{
	uint64		latest = 0;
	bool		found;
	int			i;
	int			k;

	if (forgets_len == 0)
		return false;
	for (k = 0; k < KEY_TARGETS; k++)
	{
		int32		qid;
		bool		any;
		const char *cons;

		key_target(key, k, &qid, &any, &cons);
		latest = Max(latest, forget_target_seq(key->dboid, qid, any, cons));
	}
	if (latest == 0)
		return false;
	i = claimed_find(key, &found);
	return !found || claimed[i].seq < latest;
}

/* At commit (or PREPARE): remove what this transaction forgot. */
static void
forget_commit(void)
{
	HASH_SEQ_STATUS status;
	SlotLease  *e;
	int			i;

	if (forgets_len == 0)
	{
		claimed_len = 0;
		return;
	}
	for (i = 0; i < SLOT_PARTITIONS; i++)
		LWLockAcquire(&slot_locks[i].lock, LW_EXCLUSIVE);
	hash_seq_init(&status, slot_table);
	while ((e = hash_seq_search(&status)) != NULL)
	{
		if (!forget_covers(&e->key))
			continue;
		quota_release(&e->key, e->role);
		hash_search(slot_table, &e->key, HASH_REMOVE, NULL);
	}
	for (i = SLOT_PARTITIONS - 1; i >= 0; i--)
		LWLockRelease(&slot_locks[i].lock);
	forgets_len = 0;
	claimed_len = 0;
}

/* Drop the pending forgets of subtransaction subid (all: InvalidSubTransactionId). */
static void
forget_abort(SubTransactionId subid)
{
	int			i;
	int			keep = 0;

	if (subid == InvalidSubTransactionId)
	{
		forgets_len = 0;
		claimed_len = 0;
		return;
	}
	/* the order is kept: the list stays sorted */
	for (i = 0; i < forgets_len; i++)
		if (forgets[i].subid != subid)
			forgets[keep++] = forgets[i];
	forgets_len = keep;
	if (forgets_len == 0)
		claimed_len = 0;
}

/*
 * A subtransaction's commit: its forgets become the parent's; two of one
 * target in the parent now are one (the latest), so the list stays as
 * long as the distinct forgets of the open levels, however many
 * savepoints a loop releases.
 */
static void
forget_subcommit(SubTransactionId mySubid, SubTransactionId parentSubid)
{
	int			i;
	int			keep = 0;

	for (i = 0; i < forgets_len; i++)
	{
		SlotPendingForget *f = &forgets[i];
		int			j;
		bool		merged = false;

		if (f->subid == mySubid)
			f->subid = parentSubid;
		/* an earlier record of the same target and level: fold into it */
		for (j = keep - 1; j >= 0 &&
			 forget_target_cmp(f->dboid, f->queue_id, f->any_consumer, f->consumer, &forgets[j]) == 0; j--)
			if (forgets[j].subid == f->subid)
			{
				forgets[j].seq = Max(forgets[j].seq, f->seq);
				merged = true;
				break;
			}
		if (!merged)
			forgets[keep++] = *f;
	}
	forgets_len = keep;
}

static void
slots_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			undo_abort(InvalidSubTransactionId);
			pending_abort(InvalidSubTransactionId);
			forget_abort(InvalidSubTransactionId);
			break;
		case XACT_EVENT_PRE_PREPARE:
			if (pending_in_force())
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("cannot PREPARE a transaction that released a partition slot"),
						 errdetail("A release takes effect when its transaction commits, and COMMIT PREPARED runs in another session."),
						 errhint("Release the slot in a transaction of its own after COMMIT PREPARED, or let its lease expire.")));
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
			pending_commit();
			forget_commit();	/* reads the undo list: before undo_commit */
			undo_commit();
			break;
		case XACT_EVENT_PREPARE:
			/*
			 * kept: a prepared transaction's claims stay, like a commit's;
			 * its forgets are applied now (ROLLBACK PREPARED then costs the
			 * workers a claim, as a forget at once did before 0.3.0)
			 */
			forget_commit();
			undo_commit();
			pending_len = 0;	/* only releases taken back are left */
			break;
		default:
			break;
	}
}

static void
slots_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
					   SubTransactionId parentSubid, void *arg)
{
	int			i;

	switch (event)
	{
		case SUBXACT_EVENT_ABORT_SUB:
			undo_abort(mySubid);
			pending_abort(mySubid);
			forget_abort(mySubid);
			break;
		case SUBXACT_EVENT_COMMIT_SUB:
			for (i = 0; i < undo_len; i++)
				if (undo[i].subid == mySubid)
					undo[i].subid = parentSubid;
			forget_subcommit(mySubid, parentSubid);
			for (i = 0; i < pending_len; i++)
			{
				if (pending[i].subid == mySubid)
					pending[i].subid = parentSubid;
				if (pending[i].taken_back == mySubid)
					pending[i].taken_back = parentSubid;
			}
			/* taken back in the release's own subtransaction now: it goes */
			for (i = 0; i < pending_len;)
				if (pending[i].taken_back != InvalidSubTransactionId &&
					pending[i].taken_back == pending[i].subid)
					pending[i] = pending[--pending_len];
				else
					i++;
			break;
		default:
			break;
	}
}

static void
register_callbacks(void)
{
	if (callbacks_registered)
		return;
	RegisterXactCallback(slots_xact_callback, NULL);
	RegisterSubXactCallback(slots_subxact_callback, NULL);
	callbacks_registered = true;
}

/*
 * Claim or renew.  Returns the (same or new) epoch, or -1 when another
 * worker holds a live lease.  new_epoch is called, outside any lock, only
 * when the slot is taken over.  ttl_ms is checked by the caller (1 s ...
 * PGQUE_LEASE_TTL_MAX_MS), so lease_until cannot overflow.  A new entry
 * that a cap refuses is retried once the caller's privilege is known and
 * once after a reclaim (the file header), then refused with 53400.
 */
int64
pgque_slot_claim(const SlotKey *key, const char *worker, int64 ttl_ms, int64 (*new_epoch) (void))
{
	uint32		hash = get_hash_value(slot_table, key);
	LWLock	   *lock = partition_lock(hash);
	int64		fresh = 0;
	int			privileged = -1;	/* unknown until a cap needs it */
	bool		reclaimed = false;
	Oid			role = pgque_quota_role();
	int			created = -1;	/* index of its undo record: the array may move */

	Assert(ttl_ms >= PGQUE_LEASE_TTL_MIN_MS && ttl_ms <= PGQUE_LEASE_TTL_MAX_MS);
	register_callbacks();
	for (;;)
	{
		SlotLease  *e;
		bool		found;
		TimestampTz now = GetCurrentTimestamp();
		/* forgotten by this transaction: free, as after its commit */
		bool		forgotten = forget_covers(key);

		undo_reserve();
		LWLockAcquire(lock, LW_EXCLUSIVE);
		e = hash_search_with_hash_value(slot_table, key, hash, HASH_FIND, NULL);
		if (e == NULL)
		{
			QuotaVerdict v = quota_reserve(key, role, Max(privileged, PGQUE_PRIV_NONE));

			if (v == QUOTA_OK)
			{
				e = hash_search_with_hash_value(slot_table, key, hash, HASH_ENTER_NULL, &found);
				if (e == NULL)
				{
					quota_release(key, role);
					v = QUOTA_TABLE_FULL;
				}
			}
			if (v != QUOTA_OK)
			{
				LWLockRelease(lock);
				if ((v == QUOTA_RESERVE || v == QUOTA_ROLE_FULL) && privileged < 0)
				{
					privileged = pgque_caller_privileged();
					if (privileged >= (v == QUOTA_RESERVE ? PGQUE_PRIV_RESERVE : PGQUE_PRIV_NO_ROLE_CAP))
						continue;
				}
				if (!reclaimed)
				{
					reclaimed = true;
					pgque_slot_reclaim(DT_NOEND);
					continue;
				}
				quota_error(v, key);
			}
			memset(((char *) e) + sizeof(SlotKey), 0, sizeof(SlotLease) - sizeof(SlotKey));
			e->role = role;
			e->pending_pid = MyProcPid;
			/* recorded at once: a failure before the takeover removes it too */
			undo_push(key, true, NULL);
			created = undo_len - 1;
		}
		if (!forgotten && e->owner[0] != '\0' && strcmp(e->owner, worker) == 0)
		{
			/*
			 * own lease, live or expired with nobody else: renew, same epoch;
			 * a release of it earlier in this transaction is taken back
			 */
			int64		epoch = e->epoch;

			e->lease_until = TimestampTzPlusMilliseconds(now, ttl_ms);
			e->ttl_ms = ttl_ms;
			LWLockRelease(lock);
			pending_cancel(key, worker);
			return epoch;
		}
		if (!forgotten && e->owner[0] != '\0' && e->lease_until > now)
		{
			LWLockRelease(lock);
			return -1;			/* someone else's live lease */
		}
		if (fresh != 0 && fresh > e->epoch)
		{
			/* free or expired: take it over with the epoch drawn below */
			SlotLease	prev;

			memcpy(&prev, e, sizeof(SlotLease));
			if (forgotten)
			{
				/* a new entry, as after the forget's commit: no fence, no figures */
				memset(((char *) e) + sizeof(SlotKey), 0, offsetof(SlotLease, role) - sizeof(SlotKey));
			}
			/* an expired owner stays fenced after a release (ADR 0023) */
			else if (e->owner[0] != '\0')
				strlcpy(e->fenced, e->owner, sizeof(e->fenced));
			if (strcmp(e->fenced, worker) == 0)
				e->fenced[0] = '\0';
			strlcpy(e->owner, worker, sizeof(e->owner));
			e->epoch = fresh;
			e->lease_until = TimestampTzPlusMilliseconds(now, ttl_ms);
			e->ttl_ms = ttl_ms;
			e->claimed_at = now;
			e->released_at = 0;
			e->claims++;
			LWLockRelease(lock);
			if (created >= 0)
				undo[created].epoch = fresh;
			else
				undo_push(key, false, &prev)->epoch = fresh;
			return fresh;
		}
		LWLockRelease(lock);
		if (fresh != 0)
			return -1;			/* drawn once already: someone else is faster */
		/* draw a new epoch outside the lock, then look again */
		fresh = new_epoch();
	}
}

/*
 * Release worker's lease: recorded now, applied when the transaction
 * commits (the file header).  False when worker holds no lease of it (or
 * released it already in this transaction).
 */
bool
pgque_slot_release(const SlotKey *key, const char *worker)
{
	LWLock	   *lock;
	SlotLease  *e;
	int64		epoch = 0;
	bool		held = false;
	bool		forgotten = forget_covers(key);

	if (pending_find(key, worker) >= 0)
		return false;
	register_callbacks();
	if (pending_len == pending_cap)
	{
		int			cap = pending_cap == 0 ? 16 : pending_cap * 2;

		pending = pending == NULL ? MemoryContextAlloc(TopMemoryContext, sizeof(SlotPendingRelease) * cap)
			: repalloc(pending, sizeof(SlotPendingRelease) * cap);
		pending_cap = cap;
	}
	e = lease_lookup_locked(key, LW_SHARED, &lock, NULL);
	if (e != NULL && !forgotten && e->owner[0] != '\0' && strcmp(e->owner, worker) == 0)
	{
		held = true;
		epoch = e->epoch;
	}
	LWLockRelease(lock);
	if (held)
	{
		SlotPendingRelease *p = &pending[pending_len++];

		memset(p, 0, sizeof(SlotPendingRelease));
		p->subid = GetCurrentSubTransactionId();
		memcpy(&p->key, key, sizeof(SlotKey));
		strlcpy(p->worker, worker, sizeof(p->worker));
		p->epoch = epoch;
	}
	return held;
}

/*
 * The lease check of receive/ack/nack: the caller must own the lease (live,
 * or expired with nobody having taken it over).  Renews it.  Fills *snap
 * with the entry as it was (for error messages); returns the verdict.
 */
SlotVerdict
pgque_slot_check(const SlotKey *key, const char *worker, bool is_ack, SlotLease *snap)
{
	LWLock	   *lock;
	SlotLease  *e;
	SlotVerdict v;
	TimestampTz now = GetCurrentTimestamp();
	bool		forgotten = forget_covers(key);

	e = lease_lookup_locked(key, LW_EXCLUSIVE, &lock, NULL);
	if (forgotten)
		e = NULL;				/* forgotten by this transaction: none, as after its commit */
	if (e != NULL && pending_find(key, worker) >= 0)
	{
		/* released by this transaction: not held, as after the commit */
		memcpy(snap, e, sizeof(SlotLease));
		snap->owner[0] = '\0';
		v = SLOT_NOT_HELD;
	}
	else if (e == NULL || e->owner[0] == '\0')
	{
		if (e != NULL)
			memcpy(snap, e, sizeof(SlotLease));
		else
			memset(snap, 0, sizeof(SlotLease));
		/* taken over from this worker, then released: still fenced */
		v = snap->fenced[0] != '\0' && strcmp(snap->fenced, worker) == 0 ? SLOT_FENCED : SLOT_NOT_HELD;
	}
	else if (strcmp(e->owner, worker) != 0)
	{
		memcpy(snap, e, sizeof(SlotLease));
		v = SLOT_FENCED;
	}
	else
	{
		e->lease_until = TimestampTzPlusMilliseconds(now, e->ttl_ms);
		if (is_ack)
		{
			e->last_ack = now;
			e->acks++;
		}
		else
		{
			e->last_receive = now;
			e->receives++;
		}
		memcpy(snap, e, sizeof(SlotLease));
		v = SLOT_OK;
	}
	LWLockRelease(lock);
	return v;
}

/*
 * The fence after an ack's writes (ADR 0023): does worker still hold the
 * lease under epoch?  Reads only; an expired lease nobody took over still
 * counts, as in pgque_slot_check.  Fills *snap with the entry as it is.
 */
SlotVerdict
pgque_slot_holds(const SlotKey *key, const char *worker, int64 epoch, SlotLease *snap)
{
	LWLock	   *lock;
	SlotLease  *e;
	SlotVerdict v;
	bool		forgotten = forget_covers(key);

	e = lease_lookup_locked(key, LW_SHARED, &lock, NULL);
	if (e != NULL && !forgotten)
		memcpy(snap, e, sizeof(SlotLease));
	else
		memset(snap, 0, sizeof(SlotLease));
	LWLockRelease(lock);
	if (pending_find(key, worker) >= 0)
		snap->owner[0] = '\0';	/* released by this transaction */
	if (snap->owner[0] == '\0')
		v = snap->fenced[0] != '\0' && strcmp(snap->fenced, worker) == 0 ? SLOT_FENCED : SLOT_NOT_HELD;
	else if (strcmp(snap->owner, worker) != 0 || snap->epoch != epoch)
		v = SLOT_FENCED;
	else
		v = SLOT_OK;
	return v;
}

/*
 * Forget the leases of this database: of one queue (queue_id >= 0), of one
 * consumer of it (consumer != NULL), or all (queue_id < 0).  Returns how
 * many entries went.
 */
int
pgque_slot_forget(Oid dboid, int32 queue_id, const char *consumer)
{
	HASH_SEQ_STATUS status;
	SlotLease  *e;
	int			i;
	int			n = 0;

	for (i = 0; i < SLOT_PARTITIONS; i++)
		LWLockAcquire(&slot_locks[i].lock, LW_EXCLUSIVE);
	hash_seq_init(&status, slot_table);
	while ((e = hash_seq_search(&status)) != NULL)
	{
		if (e->key.dboid != dboid)
			continue;
		if (queue_id >= 0 && e->key.queue_id != queue_id)
			continue;
		if (consumer != NULL && strcmp(e->key.consumer, consumer) != 0)
			continue;
		quota_release(&e->key, e->role);
		hash_search(slot_table, &e->key, HASH_REMOVE, NULL);
		n++;
	}
	for (i = SLOT_PARTITIONS - 1; i >= 0; i--)
		LWLockRelease(&slot_locks[i].lock);
	return n;
}

/*
 * Forget, when this transaction commits, the leases of this database of one
 * queue (queue_id >= 0), of one consumer of it (consumer != NULL), or all
 * (queue_id < 0): unsubscribe_slot, drop_queue and a resize's switch.  An
 * abort (of the subtransaction) keeps them; until the commit they are
 * forgotten for this backend only (the file header).  Returns how many
 * entries it covers now.
 */
int
pgque_slot_forget_at_commit(int32 queue_id, const char *consumer)
{
	SlotPendingForget *f;
	HASH_SEQ_STATUS status;
	SlotLease  *e;
	int			i;
	int			n = 0;

	int32		qid = queue_id < 0 ? -1 : queue_id;
	bool		any = consumer == NULL;
	char		cons[PGQUE_CONSUMER_MAX + 1];
	SubTransactionId cur = GetCurrentSubTransactionId();

	register_callbacks();
	memset(cons, 0, sizeof(cons));
	if (!any)
		strlcpy(cons, consumer, sizeof(cons));
	/*
	 * The same forget again in the same subtransaction (a loop of
	 * unsubscribes) only moves its sequence number: the list stays as long
	 * as the distinct forgets.  Else it goes in at its place in the order
	 * (forget_covers()); the array grows first.
	 */
	i = forget_lower_bound(MyDatabaseId, qid, any, cons);
	for (; i < forgets_len && forget_target_cmp(MyDatabaseId, qid, any, cons, &forgets[i]) == 0; i++)
		if (forgets[i].subid == cur)
		{
			f = &forgets[i];
			f->seq = ++claim_seq;
			goto count;
		}
	if (forgets_len == forgets_cap)
	{
		int			cap = forgets_cap == 0 ? 4 : forgets_cap * 2;

		forgets = forgets == NULL ? MemoryContextAlloc(TopMemoryContext, sizeof(SlotPendingForget) * cap)
			: repalloc(forgets, sizeof(SlotPendingForget) * cap);
		forgets_cap = cap;
	}
	memmove(&forgets[i + 1], &forgets[i], sizeof(SlotPendingForget) * (forgets_len - i));
	f = &forgets[i];
	memset(f, 0, sizeof(SlotPendingForget));
	f->subid = cur;
	f->dboid = MyDatabaseId;
	f->queue_id = qid;
	f->any_consumer = any;
	if (!any)
		strlcpy(f->consumer, cons, sizeof(f->consumer));
	f->seq = ++claim_seq;
	forgets_len++;

count:
	for (i = 0; i < SLOT_PARTITIONS; i++)
		LWLockAcquire(&slot_locks[i].lock, LW_SHARED);
	hash_seq_init(&status, slot_table);
	while ((e = hash_seq_search(&status)) != NULL)
		if (forget_matches(f, &e->key))
			n++;
	for (i = SLOT_PARTITIONS - 1; i >= 0; i--)
		LWLockRelease(&slot_locks[i].lock);
	return n;
}

/*
 * Copy out this database's entries (palloc'd array), less those this
 * transaction forgot.
 */
SlotLease *
pgque_slot_list(Oid dboid, int *count)
{
	HASH_SEQ_STATUS status;
	SlotLease  *e;
	SlotLease  *out;
	int			n = 0;
	int			cap = 64;
	int			i;

	out = palloc(sizeof(SlotLease) * cap);
	for (i = 0; i < SLOT_PARTITIONS; i++)
		LWLockAcquire(&slot_locks[i].lock, LW_SHARED);
	hash_seq_init(&status, slot_table);
	while ((e = hash_seq_search(&status)) != NULL)
	{
		if (e->key.dboid != dboid)
			continue;
		if (forget_covers(&e->key))
			continue;
		if (n == cap)
		{
			cap *= 2;
			out = repalloc(out, sizeof(SlotLease) * cap);
		}
		memcpy(&out[n++], e, sizeof(SlotLease));
	}
	for (i = SLOT_PARTITIONS - 1; i >= 0; i--)
		LWLockRelease(&slot_locks[i].lock);
	*count = n;
	return out;
}

/* Entries in the table, every database. */
int
pgque_slot_count_all(void)
{
	HASH_SEQ_STATUS status;
	int			i;
	int			n = 0;

	for (i = 0; i < SLOT_PARTITIONS; i++)
		LWLockAcquire(&slot_locks[i].lock, LW_SHARED);
	hash_seq_init(&status, slot_table);
	while (hash_seq_search(&status) != NULL)
		n++;
	for (i = SLOT_PARTITIONS - 1; i >= 0; i--)
		LWLockRelease(&slot_locks[i].lock);
	return n;
}

/* Remember that a refused claim's reclaim found nothing (see below). */
static void
note_empty_reclaim(uint64 releases, TimestampTz now)
{
	LWLockAcquire(&slot_locks[QUOTA_LOCK].lock, LW_EXCLUSIVE);
	slot_shared->empty_at = now;
	slot_shared->empty_releases = releases;
	LWLockRelease(&slot_locks[QUOTA_LOCK].lock);
}

/*
 * Reclaim what protects no lease: entries released before released_before
 * (DT_NOEND: every released entry, the reclaim of a refused claim) and
 * every entry of a database that was dropped.  An entry being created
 * (epoch 0, its claim not done yet) stays.  The databases come from the
 * quota table and are looked up outside its lock; the table is taken
 * exclusively only when something is to go.  A refused claim's reclaim is
 * skipped when the last one found nothing, nothing was released since and
 * it is less than RECLAIM_RETRY_MS old: a role at its cap calling claim in
 * a loop must not scan the table under every partition lock each time.
 * Returns how many entries went.
 */
int
pgque_slot_reclaim(TimestampTz released_before)
{
	HASH_SEQ_STATUS status;
	SlotLease  *e;
	QuotaEntry *q;
	Oid		   *dbs;
	bool	   *gone;
	int			ndb = 0;
	int			cap = 16;
	int			i;
	int			n = 0;
	bool		any = false;
	bool		on_claim = released_before == DT_NOEND;
	uint64		releases = pg_atomic_read_u64(&slot_shared->releases);
	TimestampTz now = GetCurrentTimestamp();

	dbs = palloc(sizeof(Oid) * cap);
	LWLockAcquire(&slot_locks[QUOTA_LOCK].lock, LW_SHARED);
	if (on_claim && slot_shared->empty_at != 0 && slot_shared->empty_releases == releases &&
		now < TimestampTzPlusMilliseconds(slot_shared->empty_at, RECLAIM_RETRY_MS))
	{
		LWLockRelease(&slot_locks[QUOTA_LOCK].lock);
		return 0;
	}
	hash_seq_init(&status, quota_table);
	while ((q = hash_seq_search(&status)) != NULL)
	{
		if (q->key.queue_id != QUOTA_DATABASE)
			continue;
		if (ndb == cap)
		{
			cap *= 2;
			dbs = repalloc(dbs, sizeof(Oid) * cap);
		}
		dbs[ndb++] = q->key.dboid;
	}
	LWLockRelease(&slot_locks[QUOTA_LOCK].lock);

	/* a backend can only have made entries in a database that existed */
	gone = palloc(sizeof(bool) * Max(ndb, 1));
	for (i = 0; i < ndb; i++)
	{
		gone[i] = !SearchSysCacheExists1(DATABASEOID, ObjectIdGetDatum(dbs[i]));
		any |= gone[i];
	}

	/* anything released to reclaim?  A shared look first */
	if (!any)
	{
		for (i = 0; i < SLOT_PARTITIONS; i++)
			LWLockAcquire(&slot_locks[i].lock, LW_SHARED);
		hash_seq_init(&status, slot_table);
		while ((e = hash_seq_search(&status)) != NULL)
		{
			if (e->owner[0] == '\0' && e->epoch != 0 &&
				(on_claim || e->released_at < released_before))
			{
				any = true;
				hash_seq_term(&status);
				break;
			}
		}
		for (i = SLOT_PARTITIONS - 1; i >= 0; i--)
			LWLockRelease(&slot_locks[i].lock);
	}

	if (any)
	{
		for (i = 0; i < SLOT_PARTITIONS; i++)
			LWLockAcquire(&slot_locks[i].lock, LW_EXCLUSIVE);
		hash_seq_init(&status, slot_table);
		while ((e = hash_seq_search(&status)) != NULL)
		{
			bool		drop = false;
			int			j;

			if (e->owner[0] == '\0' && e->epoch != 0 &&
				(on_claim || e->released_at < released_before))
				drop = true;
			for (j = 0; !drop && j < ndb; j++)
				drop = dbs[j] == e->key.dboid && gone[j];
			if (!drop)
				continue;
			quota_release(&e->key, e->role);
			hash_search(slot_table, &e->key, HASH_REMOVE, NULL);
			n++;
		}
		for (i = SLOT_PARTITIONS - 1; i >= 0; i--)
			LWLockRelease(&slot_locks[i].lock);
	}
	if (on_claim && n == 0)
		note_empty_reclaim(releases, now);
	pfree(dbs);
	pfree(gone);
	return n;
}

/*
 * Remove one committed entry whose consumer is gone (reclaim.c), unless it
 * changed since it was listed: another epoch (claimed since) or a creating
 * transaction still open.  Returns 1 when it went.
 */
int
pgque_slot_drop_if(const SlotKey *key, int64 epoch)
{
	uint32		hash = get_hash_value(slot_table, key);
	LWLock	   *lock = partition_lock(hash);
	SlotLease  *e;
	int			n = 0;

	LWLockAcquire(lock, LW_EXCLUSIVE);
	e = hash_search_with_hash_value(slot_table, key, hash, HASH_FIND, NULL);
	if (e != NULL && e->epoch == epoch && e->pending_pid == 0)
	{
		Oid			role = e->role;

		hash_search_with_hash_value(slot_table, key, hash, HASH_REMOVE, NULL);
		quota_release(key, role);
		n = 1;
	}
	LWLockRelease(lock);
	return n;
}
