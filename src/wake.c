/*
 * wake.c
 *		Commit-time wake-ups: a transaction that appended events wakes its
 *		database's ticker when it commits; one that created the extension
 *		wakes the launcher.
 *
 * The commit path takes no lock: the database's entry is found by an
 * unlocked read of its oid (an entry is only reused after its database is
 * gone, and a wrong guess costs one spurious wake-up), and the wake flag is
 * an atomic exchange, so only the first commit after the ticker cleared it
 * pays for a SetLatch: the wake-up is rate-limited to once per ticker pass.
 *
 * Before the wake-up the commit marks the queues it appended to in the
 * database's dirty bits (an atomic OR per queue), so that the ticker visits
 * those queues and no other (ADR 0031).  The callback runs after the commit
 * is visible to new snapshots, and the ticker exchanges the bits with 0
 * before it takes its snapshot: an event is never marked only before its
 * commit.
 *
 * A transaction that wrote a tick (pgque._tick, the external ticker)
 * notes its queue here too; when it commits, the tick generation of the
 * queue's wait bucket is bumped and the bucket's condition variable
 * broadcast, which wakes the receive_wait() calls waiting for that queue
 * (ADR 0102).  Whoever commits the tick wakes them: the ticker worker, a
 * manual or pg_cron pgque.ticker(), an external ticker.  The callback runs
 * after the commit is visible, and a waiter reads the generation before it
 * takes the snapshot that finds no batch: a tick is never published only
 * before that snapshot could see it.  The buckets are a fixed array of
 * PGQUE_TICK_WAITS, chosen by (database, queue), so the waiters of one
 * queue are not woken by every other queue's ticks.
 */
#include "postgres.h"

#include "access/xact.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "common/hashfn.h"
#include "pgstat.h"
#include "storage/condition_variable.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "state.h"
#include "wake.h"
#include "coop.h"
#include "slots.h"

/*
 * What the transaction did, each flag as the subtransaction that first set
 * it (InvalidSubTransactionId: not set).  The flags follow subtransactions:
 * a savepoint rolled back unsets what it set (a DROP EXTENSION rolled back
 * to a savepoint must not wipe the database's leases at commit), one
 * released hands its flags to its parent.
 */
static SubTransactionId xact_inserted = InvalidSubTransactionId;
static SubTransactionId xact_created_extension = InvalidSubTransactionId;
static SubTransactionId xact_dropped_extension = InvalidSubTransactionId;
static int	cached_db_index = -1;
/* the table's generation when this database had no entry, if it had none */
static uint32 cached_db_none_gen = 0;
static bool cached_db_none = false;

/*
 * The queues this transaction appended to: bit queue_id % PGQUE_DIRTY_BITS,
 * in words dirty_lo .. dirty_hi (none when dirty_lo > dirty_hi), so that a
 * commit publishes and clears the words it set, not the whole map.
 */
static uint32 xact_dirty[PGQUE_DIRTY_WORDS];
static int	xact_dirty_lo = PGQUE_DIRTY_WORDS;
static int	xact_dirty_hi = -1;

/*
 * The wait buckets of receive_wait() (ADR 0102): a generation bumped by
 * every commit that wrote a tick of a queue of the bucket, and the
 * condition variable its waiters sleep on.  Fixed size: 64 buckets of a
 * cache line each, whatever the number of databases, queues or waiters.
 */
#define PGQUE_TICK_WAITS 64

typedef struct PgqueTickWait
{
	pg_atomic_uint64 generation;
	ConditionVariable cv;
} PgqueTickWait;

typedef union PgqueTickWaitPadded
{
	PgqueTickWait w;
	char		pad[PG_CACHE_LINE_SIZE];
} PgqueTickWaitPadded;

static PgqueTickWaitPadded *tick_waits = NULL;

/*
 * After the buckets, one more line: how many transactions that wrote a
 * tick were prepared since the server started.  While none was, a COMMIT
 * PREPARED wakes nobody (ADR 0107): any LOGIN role's two-phase commit woke
 * every waiter of every database for a look.  Counted before the prepare
 * (a prepare that then fails only counts one too many), never counted
 * down: once one was, every COMMIT PREPARED wakes every bucket, as before.
 */
#define PREPARED_TICKS (&tick_waits[PGQUE_TICK_WAITS].w.generation)

/* the buckets of the ticks this transaction wrote, one bit each */
static uint64 xact_ticked = 0;

PG_FUNCTION_INFO_V1(pgque_wake_launcher_at_commit);
PG_FUNCTION_INFO_V1(pgque_tick_wakes_at_commit);

static void publish_ticks(uint64 buckets);

/* Set a flag, unless an enclosing (sub)transaction set it already. */
static inline void
set_flag(SubTransactionId *flag)
{
	if (*flag == InvalidSubTransactionId)
		*flag = GetCurrentSubTransactionId();
}

/* DROP EXTENSION pgque_bgw: forget this database's leases when it commits */
void
pgque_forget_leases_at_commit(void)
{
	set_flag(&xact_dropped_extension);
}

/*
 * An event was appended to queue_id.  A savepoint rolled back keeps the
 * queue's bit (a spurious bit costs the ticker one probe), not the wake-up.
 */
void
pgque_note_event_inserted(int32 queue_id)
{
	uint32		bit = (uint32) queue_id % PGQUE_DIRTY_BITS;

	int			w = (int) (bit / 32);

	set_flag(&xact_inserted);
	xact_dirty[w] |= (uint32) 1 << (bit % 32);
	xact_dirty_lo = Min(xact_dirty_lo, w);
	xact_dirty_hi = Max(xact_dirty_hi, w);
}

/* Every queue of the database is to be probed (no commit hook saw them). */
void
pgque_mark_all_dirty(PgqueDb *db)
{
	int			w;

	for (w = 0; w < PGQUE_DIRTY_WORDS; w++)
		pg_atomic_write_u32(&db->dirty[w], ~(uint32) 0);
}

/*
 * This database's entry, found without the lock (see the file header).  A
 * database with no entry (workers off, not served, single-user mode) is
 * looked for again only when the table's generation moved: the scan of
 * pgque_bgw.max_databases entries was most of a commit's wake-up (6.2k
 * instructions per send, ADR 0087).  An entry assigned while a commit looks
 * costs that commit its wake-up at most; the new entry's ticker starts with
 * a probe of every queue.
 */
static PgqueDb *
db_entry(Oid dboid)
{
	int			i;
	uint32		gen;

	if (pgque_shared == NULL || !OidIsValid(dboid))
		return NULL;
	if (cached_db_index >= 0 && pgque_shared->dbs[cached_db_index].dboid == dboid)
		return &pgque_shared->dbs[cached_db_index];
	gen = pg_atomic_read_u32(&pgque_shared->db_generation);
	if (cached_db_none && gen == cached_db_none_gen)
		return NULL;
	pg_read_barrier();
	for (i = 0; i < pgque_shared->max_dbs; i++)
	{
		if (pgque_shared->dbs[i].dboid == dboid &&
			pgque_shared->dbs[i].state != PGQUE_DB_UNUSED)
		{
			cached_db_index = i;
			cached_db_none = false;
			return &pgque_shared->dbs[i];
		}
	}
	cached_db_index = -1;
	cached_db_none = true;
	cached_db_none_gen = gen;
	return NULL;
}

/* Mark this transaction's queues in the database's dirty bits. */
static void
publish_dirty(Oid dboid)
{
	PgqueDb    *db = db_entry(dboid);
	int			w;

	if (db == NULL)
		return;
	for (w = xact_dirty_lo; w <= xact_dirty_hi; w++)
	{
		if (xact_dirty[w] != 0)
			pg_atomic_fetch_or_u32(&db->dirty[w], xact_dirty[w]);
	}
}

/*
 * COMMIT PREPARED (utility.c): the session that prepared the transaction
 * knew its queues, this one does not; every queue is probed.
 */
void
pgque_prepared_committed(void)
{
	PgqueDb    *db = db_entry(MyDatabaseId);

	/*
	 * a tick in the prepared transaction: its queues are not known either.
	 * Only when a transaction that ticked was prepared since the start: one
	 * prepared before a crash restart and committed after it wakes nobody,
	 * and its waiters see its tick at their timeout or the queue's next tick.
	 */
	if (tick_waits != NULL && pg_atomic_read_u64(PREPARED_TICKS) != 0)
		publish_ticks(~(uint64) 0);
	if (db == NULL)
		return;
	pgque_mark_all_dirty(db);
	pgque_wake_ticker(MyDatabaseId);
}

/*
 * Wake the ticker of a database, if one runs and it is not already woken;
 * "at" is when what it is woken for became visible.  The commit that sets
 * the flag writes the time after it: the ticker serves a commit that came
 * after it was idle for a while at once (ADR 0087), and a ticker that reads
 * the flag before the time sees an older time, which only makes it wait
 * for its rate limit.
 */
static void
wake_ticker_at(Oid dboid, TimestampTz at)
{
	PgqueDb    *db;
	int			procno;

	db = db_entry(dboid);
	if (db == NULL)
		return;

	if (pg_atomic_exchange_u32(&db->wake, 1) != 0)
		return;					/* already pending: the ticker will see it */
	pg_atomic_write_u64(&db->wake_at, (uint64) at);
	procno = db->workers[PGQUE_TICKER].pgprocno;
	if (procno >= 0 && procno < (int) ProcGlobal->allProcCount)
		SetLatch(&ProcGlobal->allProcs[procno].procLatch);
}

/* Wake the ticker of a database, if one runs and it is not already woken. */
void
pgque_wake_ticker(Oid dboid)
{
	wake_ticker_at(dboid, GetCurrentTimestamp());
}

/*
 * The ticks this transaction wrote are visible (the commit callback runs
 * after the commit is in the proc array): bump their buckets' generations,
 * then wake their waiters.  A bucket with nobody waiting costs a spinlock.
 */
static void
publish_ticks(uint64 buckets)
{
	int			b;

	if (tick_waits == NULL)
		return;
	for (b = 0; b < PGQUE_TICK_WAITS; b++)
	{
		if ((buckets & ((uint64) 1 << b)) == 0)
			continue;
		pg_atomic_fetch_add_u64(&tick_waits[b].w.generation, 1);
		ConditionVariableBroadcast(&tick_waits[b].w.cv);
	}
}

static void
clear_flags(void)
{
	xact_ticked = 0;
	xact_inserted = InvalidSubTransactionId;
	xact_created_extension = InvalidSubTransactionId;
	xact_dropped_extension = InvalidSubTransactionId;
	if (xact_dirty_lo <= xact_dirty_hi)
	{
		memset(&xact_dirty[xact_dirty_lo], 0,
			   sizeof(uint32) * (xact_dirty_hi - xact_dirty_lo + 1));
		xact_dirty_lo = PGQUE_DIRTY_WORDS;
		xact_dirty_hi = -1;
	}
}

static void
xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
			if (xact_inserted != InvalidSubTransactionId)
			{
				publish_dirty(MyDatabaseId);
				/* the commit record's time: no clock read on this path */
				wake_ticker_at(MyDatabaseId, GetCurrentTransactionStopTimestamp());
			}
			if (xact_ticked != 0)
				publish_ticks(xact_ticked);
			if (xact_created_extension != InvalidSubTransactionId && pgque_shared != NULL)
			{
				PgqueDb    *db;

				LWLockAcquire(pgque_shared->lock, LW_EXCLUSIVE);
				db = pgque_find_db(MyDatabaseId);
				if (db != NULL && db->state == PGQUE_DB_NO_EXTENSION)
					db->state = PGQUE_DB_UNKNOWN;
				pgque_shared->launcher_wake_scan = true;
				LWLockRelease(pgque_shared->lock);
				pgque_wake_launcher();
			}
			if (xact_dropped_extension != InvalidSubTransactionId)
			{
				if (pgque_slots_available())
					pgque_slot_forget(MyDatabaseId, -1, NULL);
				/* the member rows went with the extension: so do the heartbeats */
				pgque_coop_forget_db(MyDatabaseId);
			}
			clear_flags();
			break;
		case XACT_EVENT_PRE_PREPARE:
			/*
			 * COMMIT PREPARED may run in another session, which would not
			 * know to forget the leases: refuse, while an error is allowed.
			 */
			if (xact_dropped_extension != InvalidSubTransactionId)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("cannot PREPARE a transaction that dropped extension pgque_bgw"),
						 errdetail("The slot leases of the database are forgotten when the DROP commits, in the session that ran it."),
						 errhint("Commit the DROP EXTENSION directly.")));
			/* its COMMIT PREPARED will wake every bucket (PREPARED_TICKS) */
			if (xact_ticked != 0 && tick_waits != NULL)
				pg_atomic_fetch_add_u64(PREPARED_TICKS, 1);
			break;
		case XACT_EVENT_PREPARE:
			/*
			 * Nothing to wake: the events are not visible until COMMIT
			 * PREPARED, whose ticker finds them at its next pass, and a new
			 * extension is found by the launcher's next scan.
			 */
			clear_flags();
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			clear_flags();
			break;
		default:
			break;
	}
}

static void
subxact_callback(SubXactEvent event, SubTransactionId mySubid,
				 SubTransactionId parentSubid, void *arg)
{
	SubTransactionId *flags[] = {&xact_inserted, &xact_created_extension, &xact_dropped_extension};
	int			i;

	for (i = 0; i < lengthof(flags); i++)
	{
		if (*flags[i] != mySubid)
			continue;
		if (event == SUBXACT_EVENT_ABORT_SUB)
			*flags[i] = InvalidSubTransactionId;
		else if (event == SUBXACT_EVENT_COMMIT_SUB)
			*flags[i] = parentSubid;
	}
}

void
pgque_register_xact_callback(void)
{
	RegisterXactCallback(xact_callback, NULL);
	RegisterSubXactCallback(subxact_callback, NULL);
}

/*
 * pgque._wake_launcher_at_commit(): called by the extension script, so that
 * CREATE EXTENSION starts the workers as soon as it commits, not at the
 * launcher's next nap.  Doing it at commit keeps the probe from running
 * before the extension is visible.
 */
Datum
pgque_wake_launcher_at_commit(PG_FUNCTION_ARGS)
{
	set_flag(&xact_created_extension);
	PG_RETURN_VOID();
}

/* ---- receives waiting for a tick (ADR 0102) ---- */

static Size
tick_waits_size(void)
{
	/* the buckets, and PREPARED_TICKS's line */
	return mul_size(sizeof(PgqueTickWaitPadded), PGQUE_TICK_WAITS + 1);
}

void
pgque_tick_waits_request(void)
{
	RequestAddinShmemSpace(tick_waits_size());
}

void
pgque_tick_waits_startup(void)
{
	bool		found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	tick_waits = ShmemInitStruct("pgque_bgw tick waits", tick_waits_size(), &found);
	if (!found)
	{
		int			b;

		memset(tick_waits, 0, tick_waits_size());
		for (b = 0; b < PGQUE_TICK_WAITS; b++)
		{
			pg_atomic_init_u64(&tick_waits[b].w.generation, 0);
			ConditionVariableInit(&tick_waits[b].w.cv);
		}
		pg_atomic_init_u64(PREPARED_TICKS, 0);
	}
	LWLockRelease(AddinShmemInitLock);
}

/* the buckets are there (the library was preloaded) */
bool
pgque_tick_waits_available(void)
{
	return tick_waits != NULL;
}

static int
tick_bucket(int32 queue_id)
{
	return (int) (hash_combine(hash_bytes_uint32((uint32) MyDatabaseId), hash_bytes_uint32((uint32) queue_id))
				  % PGQUE_TICK_WAITS);
}

/*
 * The generation of queue_id's bucket: read it before the snapshot that
 * looks for a batch, and wait for it to move (0 without the buckets).
 */
uint64
pgque_tick_generation(int32 queue_id)
{
	uint64		gen;

	if (tick_waits == NULL)
		return 0;
	gen = pg_atomic_read_u64(&tick_waits[tick_bucket(queue_id)].w.generation);
	/* the snapshot taken after this must not be read before it */
	pg_memory_barrier();
	return gen;
}

/*
 * Sleep until a tick of queue_id's bucket commits after "generation" was
 * read, or until the deadline.  -> true when woken by a tick (or, without
 * the buckets, after a poll of 10 ms), false at the deadline.  Interrupts
 * (a cancel, statement_timeout, pg_terminate_backend) are served while it
 * sleeps, and the postmaster's death ends the backend; an error leaves the
 * condition variable's list before it propagates.
 */
bool
pgque_tick_wait(int32 queue_id, uint64 generation, TimestampTz deadline)
{
	PgqueTickWait *w;
	volatile bool woken = false;

	if (tick_waits == NULL)
	{
		long		ms = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);

		if (ms <= 0)
			return false;
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 Min(ms, 10), PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		return true;
	}
	w = &tick_waits[tick_bucket(queue_id)].w;
	ConditionVariablePrepareToSleep(&w->cv);
	PG_TRY();
	{
		for (;;)
		{
			long		ms;

			if (pg_atomic_read_u64(&w->generation) != generation)
			{
				woken = true;
				break;
			}
			ms = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);
			if (ms <= 0)
				break;
			(void) ConditionVariableTimedSleep(&w->cv, ms, PG_WAIT_EXTENSION);
		}
	}
	PG_CATCH();
	{
		/* a cancel caught by a savepoint: off the list before going on */
		ConditionVariableCancelSleep();
		PG_RE_THROW();
	}
	PG_END_TRY();
	ConditionVariableCancelSleep();
	pg_memory_barrier();
	return woken;
}

/*
 * pgque._tick_wakes_at_commit(queue_id), and pgque_tick_wakes for C (the
 * tick, tick.c): the caller wrote a tick of the queue; its waiters are woken when the transaction commits.  A savepoint
 * rolled back keeps the bit: a spurious wake-up costs a waiter one look.
 */
void
pgque_tick_wakes(int32 queue_id)
{
	xact_ticked |= (uint64) 1 << tick_bucket(queue_id);
}

Datum
pgque_tick_wakes_at_commit(PG_FUNCTION_ARGS)
{
	if (!PG_ARGISNULL(0))
		pgque_tick_wakes(PG_GETARG_INT32(0));
	PG_RETURN_VOID();
}
