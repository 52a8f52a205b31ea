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
 */
#include "postgres.h"

#include "access/xact.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "storage/latch.h"
#include "storage/proc.h"

#include "compat.h"
#include "pgque_bgw.h"
#include "slots.h"

static bool xact_inserted = false;
static bool xact_created_extension = false;
static bool xact_dropped_extension = false;
static int	cached_db_index = -1;

PG_FUNCTION_INFO_V1(pgque_wake_launcher_at_commit);

/* DROP EXTENSION pgque_bgw: forget this database's leases when it commits */
void
pgque_forget_leases_at_commit(void)
{
	xact_dropped_extension = true;
}

void
pgque_note_event_inserted(void)
{
	xact_inserted = true;
}

/* Wake the ticker of a database, if one runs and it is not already woken. */
void
pgque_wake_ticker(Oid dboid)
{
	PgqueDb    *db = NULL;
	int			procno;
	int			i;

	if (pgque_shared == NULL || !OidIsValid(dboid))
		return;

	if (cached_db_index >= 0 && pgque_shared->dbs[cached_db_index].dboid == dboid)
		db = &pgque_shared->dbs[cached_db_index];
	else
	{
		for (i = 0; i < pgque_shared->max_dbs; i++)
		{
			if (pgque_shared->dbs[i].dboid == dboid &&
				pgque_shared->dbs[i].state != PGQUE_DB_UNUSED)
			{
				cached_db_index = i;
				db = &pgque_shared->dbs[i];
				break;
			}
		}
	}
	if (db == NULL)
		return;

	if (pg_atomic_exchange_u32(&db->wake, 1) != 0)
		return;					/* already pending: the ticker will see it */
	procno = db->workers[PGQUE_TICKER].pgprocno;
	if (procno >= 0 && procno < (int) ProcGlobal->allProcCount)
		SetLatch(&ProcGlobal->allProcs[procno].procLatch);
}

static void
xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
			if (xact_inserted)
				pgque_wake_ticker(MyDatabaseId);
			if (xact_created_extension && pgque_shared != NULL)
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
			if (xact_dropped_extension && pgque_slots_available())
				pgque_slot_forget(MyDatabaseId, -1, NULL);
			xact_inserted = false;
			xact_created_extension = false;
			xact_dropped_extension = false;
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			xact_inserted = false;
			xact_created_extension = false;
			xact_dropped_extension = false;
			break;
		default:
			break;
	}
}

void
pgque_register_xact_callback(void)
{
	RegisterXactCallback(xact_callback, NULL);
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
	xact_created_extension = true;
	PG_RETURN_VOID();
}
