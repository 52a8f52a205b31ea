/*
 * budget.c
 *		How many per-database workers pgque_bgw may run (ADR 0036): the
 *		smaller of pgque_bgw.max_workers and the background worker slots the
 *		server really has for them, that is max_worker_processes less the
 *		launcher and the slots other workers hold (PostgreSQL's logical
 *		replication launcher, pg_cron, other extensions).  The launcher plans
 *		with it (split or combined, fair share) and CREATE EXTENSION warns
 *		with it, so both say the same.
 *
 * PostgreSQL keeps its background worker slots in shared memory ("Background
 * Worker Data", bgworker.c) and exports no count of them.  We look that
 * array up by name and read, never write, its in_use flags under
 * BackgroundWorkerLock in shared mode, as bgworker.c asks of readers.  Its
 * layout is private to bgworker.c: compat.h mirrors it, and its size is
 * checked against BackgroundWorkerShmemSize() before the first read; when
 * they differ nothing is counted (counted = false) and the launcher learns
 * from RegisterDynamicBackgroundWorker's refusals instead.
 *
 * Parallel query workers are counted apart and not subtracted: they come and
 * go with queries and take only what is left (a query runs with fewer
 * workers when no slot is free), while ours hold theirs for the server's
 * life.  A registration that fails because parallel query holds the slots
 * for a moment is retried; it does not change the plan.
 */
#include "postgres.h"

#include "miscadmin.h"
#include "postmaster/bgworker.h"
#include "postmaster/bgworker_internals.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"

#include "compat.h"
#include "guc.h"
#include "state.h"

/* the server's array; NULL until found, and for good when it does not fit */
static PgqueBgwArray *bgw_array = NULL;
static bool bgw_array_looked = false;

static PgqueBgwArray *
find_bgw_array(void)
{
	Size		ours;
	bool		found;

	if (bgw_array_looked)
		return bgw_array;
	bgw_array_looked = true;
	ours = add_size(offsetof(PgqueBgwArray, slot),
					mul_size(max_worker_processes, sizeof(PgqueBgwSlot)));
	if (ours != BackgroundWorkerShmemSize())
	{
		ereport(LOG,
				(errmsg("pgque_bgw: the server's background worker slots have a layout this build does not know; "
						"the launcher counts only its own workers")));
		return NULL;
	}
	/* PostgreSQL created it at startup, so this finds it and allocates nothing */
	bgw_array = ShmemInitStruct("Background Worker Data", ours, &found);
	if (!found || bgw_array->total_slots != max_worker_processes)
		bgw_array = NULL;
	return bgw_array;
}

void
pgque_worker_budget(PgqueBudget *b)
{
	PgqueBgwArray *arr = find_bgw_array();
	int			i;

	memset(b, 0, sizeof(*b));
	if (arr != NULL)
	{
		b->counted = true;
		LWLockAcquire(BackgroundWorkerLock, LW_SHARED);
		for (i = 0; i < max_worker_processes; i++)
		{
			PgqueBgwSlot *slot = &arr->slot[i];

			if (!slot->in_use)
				continue;
			/* the slot's contents are written before in_use (bgworker.c) */
			pg_read_barrier();
			if ((slot->worker.bgw_flags & BGWORKER_CLASS_PARALLEL) != 0)
				b->parallel++;
			else if (strncmp(slot->worker.bgw_library_name, "pgque_bgw",
							 sizeof(slot->worker.bgw_library_name)) == 0)
				b->ours++;
			else
				b->others++;
		}
		LWLockRelease(BackgroundWorkerLock);
	}
	/* the launcher's own slot is taken before any worker's */
	b->slots = Max(0, max_worker_processes - 1 - b->others);
	b->budget = Min(pgque_max_workers, b->slots);
}
