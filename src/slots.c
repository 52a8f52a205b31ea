/*
 * slots.c
 *		The shared-memory slot lease table: who owns partition slot k of a
 *		partitioned consumer, until when, under which epoch.
 *
 * Fixed capacity (pgque_bgw.max_slots), a shared hash table split into
 * SLOT_PARTITIONS partitions, each under its own LWLock, so claims and
 * renewals of different slots rarely meet.  Nothing here writes a table row
 * or WAL: a renewal is a few stores under a partition lock.  Lease state is
 * not transactional (like advisory locks): a claim stays claimed when the
 * calling transaction rolls back.  Shared memory is lost on restart; epochs
 * therefore come from a WAL-logged sequence (see slot_sql.c), so they only
 * grow across restarts and failovers.
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/hsearch.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "pgque_bgw.h"
#include "slots.h"

#define SLOT_PARTITIONS 16

static HTAB *slot_table = NULL;
static LWLockPadded *slot_locks = NULL;

void
pgque_slots_request(void)
{
	RequestAddinShmemSpace(hash_estimate_size(pgque_max_slots, sizeof(SlotLease)));
	RequestNamedLWLockTranche("pgque_bgw slots", SLOT_PARTITIONS);
}

void
pgque_slots_startup(void)
{
	HASHCTL		info;

	memset(&info, 0, sizeof(info));
	info.keysize = sizeof(SlotKey);
	info.entrysize = sizeof(SlotLease);
	info.num_partitions = SLOT_PARTITIONS;
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	slot_table = ShmemInitHash("pgque_bgw slot leases", pgque_max_slots, pgque_max_slots,
							   &info, HASH_ELEM | HASH_BLOBS | HASH_PARTITION);
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
 * Claim or renew.  Returns the (same or new) epoch, or -1 when another
 * worker holds a live lease.  new_epoch is called, outside any lock, only
 * when the slot is taken over.
 */
int64
pgque_slot_claim(const SlotKey *key, const char *worker, int64 ttl_ms, int64 (*new_epoch) (void))
{
	uint32		hash = get_hash_value(slot_table, key);
	LWLock	   *lock = partition_lock(hash);
	int64		epoch = -1;
	int64		fresh = 0;
	int			attempt;

	for (attempt = 0; attempt < 2; attempt++)
	{
		SlotLease  *e;
		bool		found;
		TimestampTz now = GetCurrentTimestamp();

		LWLockAcquire(lock, LW_EXCLUSIVE);
		e = hash_search_with_hash_value(slot_table, key, hash, HASH_ENTER_NULL, &found);
		if (e == NULL)
		{
			LWLockRelease(lock);
			ereport(ERROR,
					(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
					 errmsg("the slot lease table is full (%d slots)", pgque_max_slots),
					 errhint("Raise pgque_bgw.max_slots (restart needed), or unsubscribe unused slot consumers.")));
		}
		if (!found)
		{
			memset(((char *) e) + sizeof(SlotKey), 0, sizeof(SlotLease) - sizeof(SlotKey));
		}
		if (e->owner[0] != '\0' && strcmp(e->owner, worker) == 0)
		{
			/* own lease, live or expired with nobody else: renew, same epoch */
			e->lease_until = TimestampTzPlusMilliseconds(now, ttl_ms);
			e->ttl_ms = ttl_ms;
			epoch = e->epoch;
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
			strlcpy(e->owner, worker, sizeof(e->owner));
			e->epoch = fresh;
			e->lease_until = TimestampTzPlusMilliseconds(now, ttl_ms);
			e->ttl_ms = ttl_ms;
			e->claimed_at = now;
			e->claims++;
			LWLockRelease(lock);
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
		v = SLOT_NOT_HELD;
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
