/*
 * state.c
 *		The shared-memory state table: one entry per database the launcher
 *		serves, with its three workers' pids, back-off and last results, and
 *		the wake flag producers set at commit.
 *
 * One named LWLock protects the table; critical sections only copy a few
 * fields.  The wake flags are atomics so that the commit path never waits
 * for the lock.  Sizing uses shmem_request_hook on 15+ and _PG_init on 14
 * (see pgque_bgw.c).
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/shmem.h"

#include "compat.h"
#include "guc.h"
#include "state.h"

PgqueShared *pgque_shared = NULL;

static int
max_dbs(void)
{
	/* served or not: a database the launcher cannot serve is listed too */
	return pgque_max_databases;
}

static Size
state_size(void)
{
	return add_size(offsetof(PgqueShared, dbs), mul_size(sizeof(PgqueDb), max_dbs()));
}

void
pgque_state_request(void)
{
	RequestAddinShmemSpace(state_size());
	RequestNamedLWLockTranche("pgque_bgw", 1);
}

void
pgque_state_startup(void)
{
	bool		found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	pgque_shared = ShmemInitStruct("pgque_bgw state", state_size(), &found);
	if (!found)
	{
		int			i;

		memset(pgque_shared, 0, state_size());
		pgque_shared->lock = &(GetNamedLWLockTranche("pgque_bgw"))->lock;
		pgque_shared->launcher_pgprocno = -1;
		pgque_shared->max_dbs = max_dbs();
		pg_atomic_init_u32(&pgque_shared->db_generation, 0);
		pg_atomic_init_u64(&pgque_shared->window_epoch, 0);
		for (i = 0; i < pgque_shared->max_dbs; i++)
		{
			int			w;

			pg_atomic_init_u32(&pgque_shared->dbs[i].wake, 0);
			pg_atomic_init_u64(&pgque_shared->dbs[i].wake_at, 0);
			for (w = 0; w < PGQUE_DIRTY_WORDS; w++)
				pg_atomic_init_u32(&pgque_shared->dbs[i].dirty[w], 0);
		}
	}
	LWLockRelease(AddinShmemInitLock);
}

/* The entry of a database, or NULL.  The caller holds pgque_shared->lock. */
PgqueDb *
pgque_find_db(Oid dboid)
{
	int			i;

	for (i = 0; i < pgque_shared->max_dbs; i++)
	{
		PgqueDb    *db = &pgque_shared->dbs[i];

		if (db->state != PGQUE_DB_UNUSED && db->dboid == dboid)
			return db;
	}
	return NULL;
}

const char *
pgque_kind_name(PgqueWorkerKind kind)
{
	switch (kind)
	{
		case PGQUE_TICKER:
			return "ticker";
		case PGQUE_MAINT:
			return "maintenance";
		case PGQUE_WATCHDOG:
			return "watchdog";
		default:
			return "?";
	}
}

const char *
pgque_db_state_name(PgqueDbState state)
{
	switch (state)
	{
		case PGQUE_DB_UNUSED:
			return "unused";
		case PGQUE_DB_UNKNOWN:
			return "starting";
		case PGQUE_DB_RUNNING:
			return "running";
		case PGQUE_DB_NO_EXTENSION:
			return "no extension";
		case PGQUE_DB_PAUSED:
			return "paused";
	}
	return "?";
}

/* Set the launcher's latch, if it runs. */
void
pgque_wake_launcher(void)
{
	int			procno;

	if (pgque_shared == NULL)
		return;
	procno = pgque_shared->launcher_pgprocno;
	if (procno >= 0)
		SetLatch(&ProcGlobal->allProcs[procno].procLatch);
}

/*
 * A worker is up again: the outage it ends is recorded when it lasted past
 * pgque_bgw.worker_down_after, for the worker_down alert (ADR 0028).  The
 * caller holds the lock.
 */
void
pgque_entry_mark_up(PgqueWorkerEntry *entry, TimestampTz now)
{
	if (entry->down_since != 0 &&
		TimestampDifferenceExceeds(entry->down_since, now, pgque_worker_down_after * 1000))
	{
		entry->outage_from = entry->down_since;
		entry->outage_to = now;
		entry->outages++;
	}
	entry->down_since = 0;
	entry->down_logged = false;
}
