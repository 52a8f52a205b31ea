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
 * Bounds.  The hash is HASH_FIXED_SIZE (dynahash would otherwise grow into
 * the shared-memory slack that the lock table needs), and a quota table,
 * under its own lock, counts the entries of the whole table, of each
 * database and of each consumer: a new entry is refused (53400, naming the
 * cap) at pgque_bgw.max_slots, max_slots_per_database or
 * max_slots_per_consumer.  Renewals never touch the quota lock; only the
 * creation and removal of entries do (lock order: partition locks, then
 * the quota lock).
 *
 * Transactions.  A lease is not a row, but a claim made in a transaction
 * (or subtransaction) that aborts does not survive it: each backend keeps
 * an undo list of the entries it created or took over, tagged with the
 * subtransaction, and the abort removes what it created and gives back what
 * it took over (the entry as it was, epoch included: the aborted epoch was
 * never committed).  A commit, or PREPARE, keeps the claims; renewals and
 * releases are not undone.
 */
#include "postgres.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "pgque_bgw.h"
#include "slots.h"

#define SLOT_PARTITIONS 16
#define QUOTA_LOCK SLOT_PARTITIONS	/* the tranche's last lock */

/*
 * A quota entry counts the lease entries of one consumer (queue_id >= 0) or
 * of one whole database (queue_id = -1, consumer "").  Each exists only
 * while its count is positive, so the quota table never needs more than
 * twice the lease table's capacity.
 */
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
} SlotShared;

/* One entry this backend created or took over, for undo at abort. */
typedef struct SlotUndo
{
	SubTransactionId subid;
	SlotKey		key;
	bool		created;		/* remove it; else give prev back */
	int64		epoch;			/* ours: undo only if it is still this */
	SlotLease	prev;			/* the entry before the takeover */
} SlotUndo;

int			pgque_max_slots_per_database = 1024;
int			pgque_max_slots_per_consumer = 1024;

static HTAB *slot_table = NULL;
static HTAB *quota_table = NULL;
static SlotShared *slot_shared = NULL;
static LWLockPadded *slot_locks = NULL;

static SlotUndo *undo = NULL;
static int	undo_len = 0;
static int	undo_cap = 0;
static bool callbacks_registered = false;

void
pgque_slots_request(void)
{
	RequestAddinShmemSpace(hash_estimate_size(pgque_max_slots, sizeof(SlotLease)));
	RequestAddinShmemSpace(hash_estimate_size(2 * (long) pgque_max_slots, sizeof(QuotaEntry)));
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
	quota_table = ShmemInitHash("pgque_bgw slot quotas", 2 * (long) pgque_max_slots,
								2 * (long) pgque_max_slots,
								&info, HASH_ELEM | HASH_BLOBS | HASH_FIXED_SIZE);
	slot_shared = ShmemInitStruct("pgque_bgw slot counts", sizeof(SlotShared), &found);
	if (!found)
		slot_shared->total = 0;
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

/* ---- the quota: counts per table, database, consumer ---- */

typedef enum QuotaVerdict
{
	QUOTA_OK,
	QUOTA_TABLE_FULL,
	QUOTA_DATABASE_FULL,
	QUOTA_CONSUMER_FULL
} QuotaVerdict;

static void
quota_keys(const SlotKey *key, QuotaKey *db, QuotaKey *co)
{
	memset(db, 0, sizeof(QuotaKey));
	db->dboid = key->dboid;
	db->queue_id = -1;
	memset(co, 0, sizeof(QuotaKey));
	co->dboid = key->dboid;
	co->queue_id = key->queue_id;
	strlcpy(co->consumer, key->consumer, sizeof(co->consumer));
}

/*
 * Count one more entry for key, or say which cap refuses it.  The caller
 * holds the entry's partition lock.  The caps are read from this backend's
 * settings (SUSET: a session cannot raise its own).
 */
static QuotaVerdict
quota_reserve(const SlotKey *key)
{
	QuotaKey	dbk,
				cok;
	QuotaEntry *db,
			   *co;
	bool		found;
	QuotaVerdict v = QUOTA_OK;

	quota_keys(key, &dbk, &cok);
	LWLockAcquire(&slot_locks[QUOTA_LOCK].lock, LW_EXCLUSIVE);
	db = hash_search(quota_table, &dbk, HASH_FIND, NULL);
	co = hash_search(quota_table, &cok, HASH_FIND, NULL);
	if (slot_shared->total >= pgque_max_slots)
		v = QUOTA_TABLE_FULL;
	else if (db != NULL && db->count >= pgque_max_slots_per_database)
		v = QUOTA_DATABASE_FULL;
	else if (co != NULL && co->count >= pgque_max_slots_per_consumer)
		v = QUOTA_CONSUMER_FULL;
	else
	{
		/* at most 2 * max_slots quota entries exist: these cannot fail */
		if (db == NULL)
		{
			db = hash_search(quota_table, &dbk, HASH_ENTER_NULL, &found);
			if (db == NULL)
				v = QUOTA_TABLE_FULL;
			else
				db->count = 0;
		}
		if (v == QUOTA_OK && co == NULL)
		{
			co = hash_search(quota_table, &cok, HASH_ENTER_NULL, &found);
			if (co == NULL)
			{
				if (db->count == 0)
					hash_search(quota_table, &dbk, HASH_REMOVE, NULL);
				v = QUOTA_TABLE_FULL;
			}
			else
				co->count = 0;
		}
		if (v == QUOTA_OK)
		{
			db->count++;
			co->count++;
			slot_shared->total++;
		}
	}
	LWLockRelease(&slot_locks[QUOTA_LOCK].lock);
	return v;
}

/* Count one entry less; the caller holds the entry's partition lock. */
static void
quota_release(const SlotKey *key)
{
	QuotaKey	keys[2];
	int			i;

	quota_keys(key, &keys[0], &keys[1]);
	LWLockAcquire(&slot_locks[QUOTA_LOCK].lock, LW_EXCLUSIVE);
	for (i = 0; i < 2; i++)
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
					 errdetail("Every database's partition slots share this table."),
					 errhint("Raise pgque_bgw.max_slots (restart needed), or unsubscribe unused slot consumers.")));
			break;
		case QUOTA_DATABASE_FULL:
			ereport(ERROR,
					(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
					 errmsg("this database holds its maximum of slot leases (pgque_bgw.max_slots_per_database = %d)",
							pgque_max_slots_per_database),
					 errdetail("A lease entry stays until its consumer's last slot is unsubscribed; releasing a slot keeps it."),
					 errhint("Unsubscribe unused slot consumers, or have a superuser raise pgque_bgw.max_slots_per_database.")));
			break;
		case QUOTA_CONSUMER_FULL:
			ereport(ERROR,
					(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
					 errmsg("consumer \"%s\" holds its maximum of slot leases (pgque_bgw.max_slots_per_consumer = %d)",
							key->consumer, pgque_max_slots_per_consumer),
					 errdetail("A lease entry stays until the consumer's last slot is unsubscribed; releasing a slot keeps it."),
					 errhint("Use fewer slots (a smaller n), or have a superuser raise pgque_bgw.max_slots_per_consumer.")));
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
	memcpy(&u->key, key, sizeof(SlotKey));
	u->created = created;
	if (prev != NULL)
		memcpy(&u->prev, prev, sizeof(SlotLease));
	return u;
}

/* Undo one record, if the entry is still as this backend left it. */
static void
undo_one(SlotUndo *u)
{
	uint32		hash = get_hash_value(slot_table, &u->key);
	LWLock	   *lock = partition_lock(hash);
	SlotLease  *e;

	LWLockAcquire(lock, LW_EXCLUSIVE);
	e = hash_search_with_hash_value(slot_table, &u->key, hash, HASH_FIND, NULL);
	if (e != NULL && e->epoch == u->epoch)
	{
		if (u->created)
		{
			hash_search_with_hash_value(slot_table, &u->key, hash, HASH_REMOVE, NULL);
			quota_release(&u->key);
		}
		else
		{
			/*
			 * the entry as it was before the claim: the previous owner's
			 * (expired) lease or none, and its epoch, so that an earlier
			 * record of this transaction still matches
			 */
			strlcpy(e->owner, u->prev.owner, sizeof(e->owner));
			strlcpy(e->fenced, u->prev.fenced, sizeof(e->fenced));
			e->lease_until = u->prev.lease_until;
			e->ttl_ms = u->prev.ttl_ms;
			e->epoch = u->prev.epoch;
			e->claimed_at = u->prev.claimed_at;
			e->claims = u->prev.claims;
		}
	}
	LWLockRelease(lock);
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
}

static void
slots_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			undo_abort(InvalidSubTransactionId);
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_PREPARE:
			/* kept: a prepared transaction's claims stay, like a commit's */
			undo_len = 0;
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
 * PGQUE_LEASE_TTL_MAX_MS), so lease_until cannot overflow.
 */
int64
pgque_slot_claim(const SlotKey *key, const char *worker, int64 ttl_ms, int64 (*new_epoch) (void))
{
	uint32		hash = get_hash_value(slot_table, key);
	LWLock	   *lock = partition_lock(hash);
	int64		fresh = 0;
	int			attempt;
	SlotUndo   *created = NULL;

	Assert(ttl_ms >= 1000 && ttl_ms <= PGQUE_LEASE_TTL_MAX_MS);
	register_callbacks();
	undo_reserve();
	for (attempt = 0; attempt < 2; attempt++)
	{
		SlotLease  *e;
		bool		found;
		TimestampTz now = GetCurrentTimestamp();

		LWLockAcquire(lock, LW_EXCLUSIVE);
		e = hash_search_with_hash_value(slot_table, key, hash, HASH_FIND, NULL);
		if (e == NULL)
		{
			QuotaVerdict v = quota_reserve(key);

			if (v == QUOTA_OK)
			{
				e = hash_search_with_hash_value(slot_table, key, hash, HASH_ENTER_NULL, &found);
				if (e == NULL)
				{
					quota_release(key);
					v = QUOTA_TABLE_FULL;
				}
			}
			if (v != QUOTA_OK)
			{
				LWLockRelease(lock);
				quota_error(v, key);
			}
			memset(((char *) e) + sizeof(SlotKey), 0, sizeof(SlotLease) - sizeof(SlotKey));
			/* recorded at once: a failure before the takeover removes it too */
			created = undo_push(key, true, NULL);
		}
		if (e->owner[0] != '\0' && strcmp(e->owner, worker) == 0)
		{
			/* own lease, live or expired with nobody else: renew, same epoch */
			int64		epoch = e->epoch;

			e->lease_until = TimestampTzPlusMilliseconds(now, ttl_ms);
			e->ttl_ms = ttl_ms;
			LWLockRelease(lock);
			return epoch;
		}
		if (e->owner[0] != '\0' && e->lease_until > now)
		{
			LWLockRelease(lock);
			return -1;			/* someone else's live lease */
		}
		if (fresh != 0 && fresh > e->epoch)
		{
			/* free or expired: take it over with the epoch drawn below */
			SlotLease	prev;

			memcpy(&prev, e, sizeof(SlotLease));
			/* an expired owner stays fenced after a release (ADR 0023) */
			if (e->owner[0] != '\0')
				strlcpy(e->fenced, e->owner, sizeof(e->fenced));
			if (strcmp(e->fenced, worker) == 0)
				e->fenced[0] = '\0';
			strlcpy(e->owner, worker, sizeof(e->owner));
			e->epoch = fresh;
			e->lease_until = TimestampTzPlusMilliseconds(now, ttl_ms);
			e->ttl_ms = ttl_ms;
			e->claimed_at = now;
			e->claims++;
			LWLockRelease(lock);
			if (created != NULL)
				created->epoch = fresh;
			else
				undo_push(key, false, &prev)->epoch = fresh;
			return fresh;
		}
		LWLockRelease(lock);
		/* draw a new epoch outside the lock, then look again */
		fresh = new_epoch();
	}
	return -1;
}

bool
pgque_slot_release(const SlotKey *key, const char *worker)
{
	uint32		hash = get_hash_value(slot_table, key);
	LWLock	   *lock = partition_lock(hash);
	SlotLease  *e;
	bool		released = false;

	LWLockAcquire(lock, LW_EXCLUSIVE);
	e = hash_search_with_hash_value(slot_table, key, hash, HASH_FIND, NULL);
	if (e != NULL && e->owner[0] != '\0' && strcmp(e->owner, worker) == 0)
	{
		e->owner[0] = '\0';		/* the epoch stays: it only grows */
		e->lease_until = 0;
		released = true;
	}
	LWLockRelease(lock);
	return released;
}

/*
 * The lease check of receive/ack/nack: the caller must own the lease (live,
 * or expired with nobody having taken it over).  Renews it.  Fills *snap
 * with the entry as it was (for error messages); returns the verdict.
 */
SlotVerdict
pgque_slot_check(const SlotKey *key, const char *worker, bool is_ack, SlotLease *snap)
{
	uint32		hash = get_hash_value(slot_table, key);
	LWLock	   *lock = partition_lock(hash);
	SlotLease  *e;
	SlotVerdict v;
	TimestampTz now = GetCurrentTimestamp();

	LWLockAcquire(lock, LW_EXCLUSIVE);
	e = hash_search_with_hash_value(slot_table, key, hash, HASH_FIND, NULL);
	if (e == NULL || e->owner[0] == '\0')
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
	uint32		hash = get_hash_value(slot_table, key);
	LWLock	   *lock = partition_lock(hash);
	SlotLease  *e;
	SlotVerdict v;

	LWLockAcquire(lock, LW_SHARED);
	e = hash_search_with_hash_value(slot_table, key, hash, HASH_FIND, NULL);
	if (e != NULL)
		memcpy(snap, e, sizeof(SlotLease));
	else
		memset(snap, 0, sizeof(SlotLease));
	LWLockRelease(lock);
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
		quota_release(&e->key);
		hash_search(slot_table, &e->key, HASH_REMOVE, NULL);
		n++;
	}
	for (i = SLOT_PARTITIONS - 1; i >= 0; i--)
		LWLockRelease(&slot_locks[i].lock);
	return n;
}

/* Copy out this database's entries (palloc'd array). */
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
