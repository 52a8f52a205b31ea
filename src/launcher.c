/*
 * launcher.c
 *		The launcher: one static background worker, connected to shared
 *		catalogs only.  It keeps the state table in step with pg_database
 *		(every pgque_bgw.launcher_naptime, or at once when CREATE EXTENSION
 *		or a paused database asks) and keeps, per database with the
 *		extension, a ticker, a maintenance worker and a watchdog running.
 *
 * Per database (see the state enum in pgque_bgw.h): an UNKNOWN database gets
 * its ticker first, which probes for the extension and moves the database
 * to RUNNING (the launcher then starts the other two) or NO_EXTENSION (it
 * exits and nothing is restarted until CREATE EXTENSION commits there).
 * A worker that dies is restarted after a back-off that doubles with each
 * short-lived run (0.5 s ... pgque_bgw.worker_restart_max, ADR 0028); one
 * the launcher stopped on purpose (a paused database, a fair-share
 * rebalance, a change of mode, workers switched off) does not count.  The
 * launcher also keeps each loop's down_since for the worker_down alert, and
 * logs that alert itself when no worker of the database can write it.
 *
 * The budget (budget.c, ADR 0036) is the smaller of pgque_bgw.max_workers
 * and the background worker slots the server really has for the workers:
 * max_worker_processes less the launcher and the slots other workers hold
 * (PostgreSQL's logical replication launcher, pg_cron, ...), counted before
 * every pass, so a worker is registered only into room the plan reserved.
 * A registration the server refuses all the same (parallel query took the
 * slot a moment ago) is retried within a second, logged, not warned; a
 * server with too few slots for every database, even combined, gets one
 * WARNING naming max_worker_processes.
 *
 * Split or combined (ADR 0026): three processes per database while the
 * budget allows three for every database with the extension, otherwise one
 * process per database running the three loops (the combined worker sits
 * in the ticker's entry and handle).  While databases are still probing and
 * three each might not fit, the others keep to their ticker, so the mode is
 * chosen once the probes know which databases have the extension.  Workers
 * are dynamic and BGW_NEVER_RESTART: the launcher, not the postmaster,
 * decides, and it stops them through their BackgroundWorkerHandles (a user
 * backend asks it to, by pausing the database in the state table).  A
 * database the launcher paused itself, because pgque_bgw.databases no
 * longer listed it, is probed anew when it is listed again.
 *
 * Fair share of the budget: each database that wants workers may hold
 * share = budget / (databases wanting workers), at least one.
 * Workers start kind by kind across databases (every ticker before any
 * maintenance worker), first up to the share, then spare budget to
 * whoever still wants one; when a database is below its share and the
 * budget is spent, a database above its share gives up its last worker
 * kind.  So no database takes the budget from the others, and each gets
 * its ticker as long as the budget >= the number of databases.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/relation.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_database.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "compat.h"
#include "pgque_bgw.h"
#include "guc.h"
#include "state.h"
#include "wake.h"
#include "worker.h"
#include "coop.h"
#include "slots.h"

#define BACKOFF_MIN_MS 500
#define SHORT_RUN_MS 10000

/* launcher-local: the handle of each worker it started, by db index, kind */
static BackgroundWorkerHandle **handles = NULL;
static bool budget_warned = false;
static bool slots_logged = false;
static bool table_warned = false;

/*
 * auto's choice between split and combined, kept from pass to pass (see
 * combined_wanted), and, only when the server's slots cannot be counted
 * (budget.c), how many workers RegisterDynamicBackgroundWorker last let run
 * (until a reload).
 */
static bool combined_mode = false;
static int	learned_budget = INT_MAX;

void
pgque_register_launcher(void)
{
	BackgroundWorker worker;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	/* never on a hot standby: workers write, and start after promotion */
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = 5;
	strlcpy(worker.bgw_library_name, "pgque_bgw", BGW_MAXLEN);
	strlcpy(worker.bgw_function_name, "pgque_launcher_main", BGW_MAXLEN);
	strlcpy(worker.bgw_name, "pgque_bgw launcher", BGW_MAXLEN);
	strlcpy(worker.bgw_type, "pgque_bgw launcher", BGW_MAXLEN);
	RegisterBackgroundWorker(&worker);
}

static void
launcher_detach(int code, Datum arg)
{
	LWLockAcquire(pgque_shared->lock, LW_EXCLUSIVE);
	if (pgque_shared->launcher_pid == MyProcPid)
	{
		pgque_shared->launcher_pid = 0;
		pgque_shared->launcher_pgprocno = -1;
	}
	LWLockRelease(pgque_shared->lock);
}

typedef struct DbSeen
{
	Oid			oid;
	char		name[NAMEDATALEN];
} DbSeen;

/*
 * The databases the workers may serve: connectable, not templates, allowed.
 * *exist gets the oid of every database there is.
 */
static List *
list_databases(List **exist)
{
	List	   *result = NIL;
	Relation	rel;
	TableScanDesc scan;
	HeapTuple	tup;
	MemoryContext caller = CurrentMemoryContext;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	rel = table_open(DatabaseRelationId, AccessShareLock);
	scan = table_beginscan_catalog(rel, 0, NULL);
	while ((tup = heap_getnext(scan, ForwardScanDirection)) != NULL)
	{
		Form_pg_database d = (Form_pg_database) GETSTRUCT(tup);
		DbSeen	   *seen;
		MemoryContext old;

		old = MemoryContextSwitchTo(caller);
		*exist = lappend_oid(*exist, d->oid);
		MemoryContextSwitchTo(old);
		if (!d->datallowconn || d->datistemplate || d->datconnlimit < -1)
			continue;			/* -2: a database left invalid by a failed DROP */
		if (!pgque_database_allowed(NameStr(d->datname)))
			continue;
		old = MemoryContextSwitchTo(caller);
		seen = palloc0(sizeof(DbSeen));
		seen->oid = d->oid;
		strlcpy(seen->name, NameStr(d->datname), NAMEDATALEN);
		result = lappend(result, seen);
		MemoryContextSwitchTo(old);
	}
	table_endscan(scan);
	table_close(rel, AccessShareLock);
	PopActiveSnapshot();
	CommitTransactionCommand();
	/* the commit leaves TopMemoryContext current: back to the round's */
	MemoryContextSwitchTo(caller);
	return result;
}

/* (Re)initialise a state-table entry; the caller holds the lock. */
static void
reset_db_entry(PgqueDb *db, Oid dboid, const char *name, PgqueDbState state)
{
	int			k;

	db->dboid = dboid;
	db->state = state;
	strlcpy(db->dbname, name, NAMEDATALEN);
	pg_atomic_write_u32(&db->wake, 0);
	pg_atomic_write_u64(&db->wake_at, 0);
	pgque_mark_all_dirty(db);	/* whatever the entry's last ticker left */
	db->last_tick = 0;
	db->last_maint = 0;
	db->probe_at = 0;
	db->schema_warned = false;
	db->combined = false;
	db->unlisted_pause = false;
	db->unserved[0] = '\0';
	memset(db->workers, 0, sizeof(db->workers));
	for (k = 0; k < PGQUE_NKINDS; k++)
		db->workers[k].pgprocno = -1;
	/* after the oid and state: a backend that saw no entry looks again */
	pg_atomic_fetch_add_u32(&pgque_shared->db_generation, 1);
}

/*
 * Ask a worker to stop, through its handle; the caller holds the lock.  Its
 * end does not count towards the back-off.  false: nothing runs.
 */
static bool
stop_worker(int dbidx, PgqueWorkerKind kind)
{
	PgqueWorkerEntry *entry = &pgque_shared->dbs[dbidx].workers[kind];
	BackgroundWorkerHandle *h = handles[dbidx * PGQUE_NKINDS + kind];

	if (h != NULL)
	{
		if (!entry->stop_requested)
			TerminateBackgroundWorker(h);
		entry->stop_requested = true;
		return true;
	}
	if (entry->pid > 0)
	{
		/*
		 * Started by an earlier launcher (this one restarted): no handle
		 * here, only the pid it recorded.
		 */
		if (!entry->stop_requested)
			kill(entry->pid, SIGTERM);
		entry->stop_requested = true;
		return true;
	}
	return false;
}

/* Bring the state table in step with pg_database. */
static void
sync_databases(void)
{
	List	   *exist = NIL;
	List	   *seen = list_databases(&exist);
	ListCell   *lc;
	int			i;
	int			unlisted = 0;

	LWLockAcquire(pgque_shared->lock, LW_EXCLUSIVE);
	pgque_shared->launcher_wake_scan = false;

	/* gone or no longer allowed: stop its workers, forget it when they left */
	for (i = 0; i < pgque_shared->max_dbs; i++)
	{
		PgqueDb    *db = &pgque_shared->dbs[i];
		bool		present = false;
		int			k;
		bool		any = false;

		if (db->state == PGQUE_DB_UNUSED)
			continue;
		foreach(lc, seen)
		{
			if (((DbSeen *) lfirst(lc))->oid == db->dboid)
				present = true;
		}
		if (present)
			continue;
		for (k = 0; k < PGQUE_NKINDS; k++)
		{
			if (stop_worker(i, (PgqueWorkerKind) k))
				any = true;
		}
		if (any)
		{
			/* a utility command's pause stays that command's to lift */
			if (db->state != PGQUE_DB_PAUSED)
				db->unlisted_pause = true;
			db->state = PGQUE_DB_PAUSED;
		}
		else
		{
			/*
			 * Its shared-memory entries go with a dropped database only: a
			 * database merely left out of pgque_bgw.databases keeps its
			 * consumers, whose live leases and heartbeats must stay.
			 */
			if (!list_member_oid(exist, db->dboid))
			{
				if (pgque_slots_available())
					pgque_slot_forget(db->dboid, -1, NULL);
				pgque_coop_forget_db(db->dboid);
			}
			reset_db_entry(db, InvalidOid, "", PGQUE_DB_UNUSED);
		}
	}

	/* new ones: probe them */
	foreach(lc, seen)
	{
		DbSeen	   *s = (DbSeen *) lfirst(lc);
		PgqueDb    *db = pgque_find_db(s->oid);

		if (db != NULL)
		{
			strlcpy(db->dbname, s->name, NAMEDATALEN);

			/*
			 * Listed again before the workers it was paused for had left
			 * (and the entry was forgotten): probe it anew.  Its stopping
			 * workers are reaped first; the probe starts when they left.
			 */
			if (db->state == PGQUE_DB_PAUSED && db->unlisted_pause)
			{
				db->state = PGQUE_DB_UNKNOWN;
				db->unlisted_pause = false;
				db->unserved[0] = '\0';
			}
			continue;
		}
		for (i = 0; i < pgque_shared->max_dbs; i++)
		{
			if (pgque_shared->dbs[i].state == PGQUE_DB_UNUSED)
			{
				db = &pgque_shared->dbs[i];
				break;
			}
		}
		if (db == NULL)
		{
			if (!table_warned)
				ereport(WARNING,
						(errmsg("pgque_bgw: more databases than the state table holds (%d); database \"%s\" is not served",
								pgque_shared->max_dbs, s->name),
						 errhint("Raise pgque_bgw.max_databases and restart, or list the databases to serve in pgque_bgw.databases.")));
			table_warned = true;
			unlisted++;
			continue;
		}
		reset_db_entry(db, s->oid, s->name, PGQUE_DB_UNKNOWN);
	}
	pgque_shared->dbs_unlisted = unlisted;
	if (unlisted == 0)
		table_warned = false;
	LWLockRelease(pgque_shared->lock);
	list_free_deep(seen);
	list_free(exist);
}

static bool
start_worker(int dbidx, PgqueDb *db, PgqueWorkerKind kind)
{
	BackgroundWorker worker;
	BackgroundWorkerHandle *handle;
	MemoryContext old;
	bool		registered;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = BGW_NEVER_RESTART;
	strlcpy(worker.bgw_library_name, "pgque_bgw", BGW_MAXLEN);
	strlcpy(worker.bgw_function_name, "pgque_worker_main", BGW_MAXLEN);
	snprintf(worker.bgw_name, BGW_MAXLEN, "pgque_bgw %s for database %s",
			 db->combined ? "worker" : pgque_kind_name(kind), db->dbname);
	snprintf(worker.bgw_type, BGW_MAXLEN, "pgque_bgw %s",
			 db->combined ? "worker" : pgque_kind_name(kind));
	worker.bgw_main_arg = Int32GetDatum(db->combined ? PGQUE_COMBINED : (int32) kind);
	memcpy(worker.bgw_extra, &db->dboid, sizeof(Oid));
	worker.bgw_notify_pid = MyProcPid;

	/*
	 * The handle is palloc'd in the current context, the round's, which is
	 * emptied every round: it outlives the round, so TopMemoryContext
	 * (pfree'd when the worker is reaped).
	 */
	old = MemoryContextSwitchTo(TopMemoryContext);
	registered = RegisterDynamicBackgroundWorker(&worker, &handle);
	MemoryContextSwitchTo(old);
	if (!registered)
	{
		PgqueBudget b;

		/*
		 * The plan left a slot for it, so another process took it a moment
		 * ago (parallel query, most often, which gives slots back when its
		 * query ends): retried within a second, not warned.  A lasting
		 * shortage shows as the worker_down alert; a server with too few
		 * slots for the plan is warned about in manage_workers.
		 */
		pgque_worker_budget(&b);
		snprintf(db->unserved, PGQUE_ERRMSG_LEN,
				 "no free background worker slot now (max_worker_processes = %d: %d held by parallel query, "
				 "%d by other background workers, %d by pgque_bgw)",
				 max_worker_processes, b.parallel, b.others, b.ours);
		if (!slots_logged)
			ereport(LOG,
					(errmsg("pgque_bgw: could not register the %s for database \"%s\" now; retrying",
							db->combined ? "worker" : pgque_kind_name(kind), db->dbname),
					 errdetail("max_worker_processes = %d: %d slots are held by parallel query, %d by other background workers, %d by pgque_bgw.",
							   max_worker_processes, b.parallel, b.others, b.ours)));
		slots_logged = true;
		return false;
	}
	slots_logged = false;
	handles[dbidx * PGQUE_NKINDS + kind] = handle;
	db->workers[kind].started_at = GetCurrentTimestamp();
	db->workers[kind].registered = true;
	db->workers[kind].stop_requested = false;
	return true;
}

/*
 * How many workers a database wants now: the ticker (or the combined
 * worker) probes first; a combined database wants one process.  hold: split
 * databases keep to their ticker while others are still probing and three
 * each might not fit (ADR 0036).
 */
static int
wanted_kinds(PgqueDb *db, bool hold)
{
	if (!pgque_enabled)
		return 0;
	if (db->state == PGQUE_DB_UNKNOWN)
		return 1;
	if (db->state == PGQUE_DB_RUNNING)
		return db->combined || hold ? 1 : PGQUE_NKINDS;
	return 0;
}

/*
 * Split or combined (ADR 0026, ADR 0036): auto runs three processes per
 * database while the budget (budget.c: pgque_bgw.max_workers, and the
 * server's background worker slots less the launcher and other workers)
 * allows three for every database with the extension, and one process per
 * database otherwise.  It turns combined only when a database lacks a worker
 * (missing), so workers of other extensions that come and go do not flip a
 * server whose workers all run; it turns split again only at a scan.
 */
static bool
combined_wanted(int budget, int ndbs_running, bool missing, bool scanned)
{
	if (pgque_worker_mode == PGQUE_MODE_SPLIT)
		return false;
	if (pgque_worker_mode == PGQUE_MODE_COMBINED)
		return true;
	if (!combined_mode && ndbs_running * PGQUE_NKINDS > budget && missing)
		combined_mode = true;
	else if (combined_mode && ndbs_running * PGQUE_NKINDS <= budget && scanned)
		combined_mode = false;
	return combined_mode;
}

/*
 * Keep each database's down_since in step: a wanted worker that is not
 * attached is down from the first time the launcher sees it so; one that is
 * not wanted is not down.  When neither the watchdog nor the ticker of a
 * database runs, no worker there can write the worker_down alert: the
 * launcher logs it (once per outage) and status() shows it.  Returns the ms
 * until the next such check is due (or LONG_MAX).  The caller holds the lock.
 */
static long
supervise_db(PgqueDb *db, TimestampTz now)
{
	long		next_ms = LONG_MAX;
	bool		all = pgque_enabled && db->state == PGQUE_DB_RUNNING;
	bool		unwatched;
	int			k;

	for (k = 0; k < PGQUE_NKINDS; k++)
	{
		PgqueWorkerEntry *entry = &db->workers[k];
		bool		wanted = all || (k == PGQUE_TICKER && pgque_enabled && db->state == PGQUE_DB_UNKNOWN);
		pid_t		pid = db->combined ? db->workers[PGQUE_TICKER].pid : entry->pid;

		if (!wanted)
		{
			entry->down_since = 0;
			entry->down_logged = false;
		}
		else if (pid == 0 && entry->down_since == 0)
			entry->down_since = now;
		else if (pid != 0 && entry->down_since != 0 && db->combined && k != PGQUE_TICKER)
			pgque_entry_mark_up(entry, now);	/* the combined worker marked them at attach */
	}
	unwatched = db->workers[PGQUE_WATCHDOG].down_since != 0 &&
		db->workers[PGQUE_TICKER].down_since != 0;
	for (k = 0; k < PGQUE_NKINDS && all; k++)
	{
		PgqueWorkerEntry *entry = &db->workers[k];
		TimestampTz due;

		if (entry->down_since == 0 || entry->down_logged || !unwatched)
			continue;
		due = TimestampTzPlusMilliseconds(entry->down_since, pgque_worker_down_after * 1000L);
		if (due > now)
		{
			next_ms = Min(next_ms, TimestampDifferenceMilliseconds(now, due) + 1);
			continue;
		}
		ereport(WARNING,
				(errmsg("pgque_bgw alert worker_down: the %s of database \"%s\" has not run since %s",
						pgque_kind_name(k), db->dbname, timestamptz_to_str(entry->down_since)),
				 errdetail("No worker of the database runs to record the alert; it is written to pgque.alert when one is back."),
				 db->unserved[0] != '\0' ? errhint("Not started: %s.", db->unserved) : 0));
		entry->down_logged = true;
	}
	return next_ms;
}

static bool
worker_present(int dbidx, int kind)
{
	return handles[dbidx * PGQUE_NKINDS + kind] != NULL ||
		pgque_shared->dbs[dbidx].workers[kind].pid > 0;
}

/*
 * The budget is spent and a database still wants a worker: say why in its
 * entry; the caller warns when that is a shortage, not a wait.
 */
static void
note_unserved(PgqueDb *db, const PgqueBudget *b, int budget, int probing)
{
	if (db->state == PGQUE_DB_UNKNOWN && probing > 0)
		snprintf(db->unserved, PGQUE_ERRMSG_LEN,
				 "waiting for a worker slot to look for the extension (%d other databases being looked at)",
				 probing);
	else if (budget < pgque_max_workers)
		snprintf(db->unserved, PGQUE_ERRMSG_LEN,
				 "too few background worker slots (max_worker_processes = %d: %d held by other background workers, "
				 "1 by the launcher, %d left for the workers)",
				 max_worker_processes, b->others, budget);
	else
		snprintf(db->unserved, PGQUE_ERRMSG_LEN,
				 "worker budget of %d reached (pgque_bgw.max_workers)", pgque_max_workers);
}

static void
warn_short(PgqueDb *db, PgqueWorkerKind kind, const PgqueBudget *b, int budget,
		   int nrunning, int nunknown)
{
	if (budget < pgque_max_workers)
		ereport(WARNING,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("pgque_bgw: too few background worker slots; the %s for database \"%s\" is not started",
						db->combined ? "worker" : pgque_kind_name(kind), db->dbname),
				 errdetail("max_worker_processes = %d, of which other background workers hold %d and the launcher 1; "
						   "the %d left do not serve %d databases with the extension and %d not yet looked at.",
						   max_worker_processes, b->others, budget, nrunning, nunknown),
				 errhint("Raise max_worker_processes (restart needed) to at least %d: pgque_bgw needs 1 + 1 per database "
						 "(3 per database for split mode) besides other background workers and parallel query.",
						 1 + b->others + nrunning + nunknown)));
	else
		ereport(WARNING,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("pgque_bgw: worker budget of %d reached; the %s for database \"%s\" is not started",
						pgque_max_workers, db->combined ? "worker" : pgque_kind_name(kind), db->dbname),
				 errhint("Raise pgque_bgw.max_workers (three per database, restart needed) or limit pgque_bgw.databases.")));
}

/*
 * Start, reap, stop and restart the workers the state table asks for.
 * scanned: sync_databases ran just before.
 */
static long
manage_workers(bool scanned)
{
	TimestampTz now = GetCurrentTimestamp();
	long		next_ms = pgque_launcher_naptime * 1000L;
	int			running = 0;
	int			wanting = 0;
	int			stopping = 0;	/* stopped on purpose, not yet gone */
	int			stopping_before;
	int			nrunning = 0;	/* databases with the extension */
	int			nunknown = 0;	/* databases being probed */
	int			probing = 0;	/* of those, with their probe running */
	bool		missing = false;	/* one of them lacks a worker it wants */
	bool		room_made = false;	/* a worker is on its way out for another */
	int			short_db = -1;	/* a database the budget cannot serve ... */
	PgqueWorkerKind short_kind = PGQUE_TICKER;	/* ... and its worker */
	bool		combined;
	bool		hold;
	PgqueBudget b;
	int			budget;
	int			share;
	int			ndbs = pgque_shared->max_dbs;
	int		   *held;
	int			pass,
				i,
				k;
	bool		short_of_budget = false;

	/* the server's slots, counted once per pass, before our lock is taken */
	pgque_worker_budget(&b);
	budget = b.counted ? b.budget : Min(b.budget, learned_budget);

	held = palloc0(sizeof(int) * ndbs);
	LWLockAcquire(pgque_shared->lock, LW_EXCLUSIVE);

	/* reap: handles of workers that stopped */
	for (i = 0; i < ndbs; i++)
	{
		PgqueDb    *db = &pgque_shared->dbs[i];

		for (k = 0; k < PGQUE_NKINDS; k++)
		{
			BackgroundWorkerHandle **h = &handles[i * PGQUE_NKINDS + k];
			PgqueWorkerEntry *entry = &db->workers[k];
			pid_t		pid;

			if (*h != NULL && GetBackgroundWorkerPid(*h, &pid) == BGWH_STOPPED)
			{
				long		ran_ms = TimestampDifferenceMilliseconds(entry->started_at, now);

				pfree(*h);
				*h = NULL;
				entry->registered = false;
				if (entry->stop_requested)
				{
					/* stopped on purpose (paused, rebalanced, off): no back-off */
					entry->stop_requested = false;
					entry->restart_at = 0;
				}
				else
				{
					/*
					 * 0.5 s doubling per short run, capped; a run of
					 * SHORT_RUN_MS or more was healthy and resets it
					 */
					entry->failures = ran_ms < SHORT_RUN_MS ? Min(entry->failures + 1, 20) : 0;
					entry->restart_at = TimestampTzPlusMilliseconds(now,
																   Min((long) BACKOFF_MIN_MS << Min(entry->failures, 15),
																	   (long) pgque_restart_max));
				}
				if (entry->pid != 0 && kill(entry->pid, 0) != 0)
				{
					/* died without running its exit callback */
					entry->pid = 0;
					entry->pgprocno = -1;
				}
			}
			if (worker_present(i, k))
			{
				running++;		/* it takes budget until it is gone */
				if (entry->stop_requested)
					stopping++;
				else
					held[i]++;
			}
		}
		if (db->state != PGQUE_DB_UNUSED && wanted_kinds(db, false) > 0)
			wanting++;
		if (db->state == PGQUE_DB_UNKNOWN)
		{
			nunknown++;
			if (worker_present(i, PGQUE_TICKER))
				probing++;
		}
		if (db->state == PGQUE_DB_RUNNING)
		{
			nrunning++;
			for (k = 0; k < wanted_kinds(db, false); k++)
				if (!worker_present(i, k))
					missing = true;
		}
	}

	/* stop what should not run: paused databases, everything when off */
	for (i = 0; i < ndbs; i++)
	{
		PgqueDb    *db = &pgque_shared->dbs[i];

		if (db->state == PGQUE_DB_UNUSED)
			continue;
		if (db->state != PGQUE_DB_PAUSED && pgque_enabled)
			continue;
		for (k = 0; k < PGQUE_NKINDS; k++)
		{
			if (worker_present(i, k) && !db->workers[k].stop_requested)
			{
				(void) stop_worker(i, (PgqueWorkerKind) k);
				held[i]--;
				stopping++;
			}
		}
	}

	/*
	 * Split or combined: a database whose workers run in the other mode
	 * stops them (on purpose: no back-off) and starts anew once they left.
	 * While databases are still probing and three each might not fit,
	 * split databases keep to their ticker: the mode is chosen when the
	 * probes know which databases have the extension, so no worker is
	 * started only to be stopped for the flip, or left without a slot.
	 */
	combined = combined_wanted(budget, nrunning, missing, scanned);
	hold = !combined && nunknown > 0 && (nrunning + nunknown) * PGQUE_NKINDS > budget;
	for (i = 0; i < ndbs; i++)
	{
		PgqueDb    *db = &pgque_shared->dbs[i];
		bool		any = false;

		if (db->state == PGQUE_DB_UNUSED || db->combined == combined)
			continue;
		for (k = 0; k < PGQUE_NKINDS; k++)
		{
			if (!worker_present(i, k))
				continue;
			any = true;
			if (!db->workers[k].stop_requested)
			{
				(void) stop_worker(i, (PgqueWorkerKind) k);
				held[i]--;
				stopping++;
			}
		}
		if (!any)
			db->combined = combined;
		else
			next_ms = Min(next_ms, 100);
	}
	stopping_before = stopping;

	/*
	 * Start what is missing, kind by kind across databases: pass 0 up to
	 * each database's fair share, pass 1 the spare budget.
	 */
	share = Max(1, budget / Max(wanting, 1));
	for (pass = 0; pass < 2; pass++)
	{
		for (k = 0; k < PGQUE_NKINDS; k++)
		{
			for (i = 0; i < ndbs; i++)
			{
				PgqueDb    *db = &pgque_shared->dbs[i];
				PgqueWorkerEntry *entry = &db->workers[k];

				if (db->state == PGQUE_DB_UNUSED || k >= wanted_kinds(db, hold) || worker_present(i, k))
					continue;
				if (pass == 0 && held[i] >= share)
					continue;
				if (entry->restart_at > now)
				{
					next_ms = Min(next_ms, TimestampDifferenceMilliseconds(now, entry->restart_at) + 1);
					continue;
				}
				if (running >= budget)
				{
					note_unserved(db, &b, budget, probing);

					/*
					 * A shortage, warned about below, unless room is on its
					 * way: workers leaving (a change of mode, a rebalance),
					 * or a probe running that ends or becomes a database's
					 * (then the plan is made again).
					 */
					if (short_db < 0 && (db->state == PGQUE_DB_RUNNING || probing == 0))
					{
						short_db = i;
						short_kind = (PgqueWorkerKind) k;
					}
					if (pass == 0 && stopping > 0)
					{
						stopping--;		/* a worker on its way out makes room */
						room_made = true;
					}
					else if (pass == 0)
					{
						/*
						 * Below its share and the budget spent: the database
						 * furthest above its share gives up its last kind
						 * (it is started again when budget is spare).
						 */
						int			over = -1;
						int			j;

						for (j = 0; j < ndbs; j++)
							if (held[j] > share && (over < 0 || held[j] > held[over]))
								over = j;
						if (over >= 0)
						{
							int			kk;

							for (kk = PGQUE_NKINDS - 1; kk > PGQUE_TICKER; kk--)
							{
								if (worker_present(over, kk) &&
									!pgque_shared->dbs[over].workers[kk].stop_requested)
								{
									/* its room is this database's (next pass) */
									(void) stop_worker(over, (PgqueWorkerKind) kk);
									held[over]--;
									next_ms = Min(next_ms, 100);
									room_made = true;
									break;
								}
							}
						}
					}
					continue;
				}
				if (start_worker(i, db, (PgqueWorkerKind) k))
				{
					running++;
					held[i]++;
					db->unserved[0] = '\0';
				}
				else
				{
					/* uncounted slots: what the server let run is the budget */
					if (!b.counted)
						learned_budget = running;
					next_ms = Min(next_ms, 1000);
				}
			}
		}
	}
	if (short_db >= 0 && !room_made && stopping_before == 0)
	{
		/* once per shortage, with what it takes to serve every database */
		short_of_budget = true;
		if (!budget_warned)
			warn_short(&pgque_shared->dbs[short_db], short_kind, &b, budget, nrunning, nunknown);
		budget_warned = true;
	}
	if (!short_of_budget)
		budget_warned = false;
	for (i = 0; i < ndbs; i++)
	{
		PgqueDb    *db = &pgque_shared->dbs[i];
		long		ms;

		if (db->state == PGQUE_DB_UNUSED)
			continue;
		ms = supervise_db(db, now);
		if (ms < next_ms)
			next_ms = ms;
	}

	LWLockRelease(pgque_shared->lock);
	pfree(held);
	return next_ms;
}

void
pgque_launcher_main(Datum arg)
{
	TimestampTz last_scan = 0;
	MemoryContext round_cxt;
	uint64		memory;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	/* shared catalogs only: the launcher never holds a database open */
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);

	handles = MemoryContextAllocZero(TopMemoryContext,
									 sizeof(BackgroundWorkerHandle *) * pgque_shared->max_dbs * PGQUE_NKINDS);

	LWLockAcquire(pgque_shared->lock, LW_EXCLUSIVE);
	pgque_shared->launcher_pid = MyProcPid;
	pgque_shared->launcher_pgprocno = pgque_my_procno();
	LWLockRelease(pgque_shared->lock);
	before_shmem_exit(launcher_detach, (Datum) 0);

	ereport(LOG, (errmsg("pgque_bgw launcher started")));
	/* once per start and once per reload: not in a check hook (guc.c) */
	pgque_warn_inconsistent_settings();

	/*
	 * A round's allocations (the database list, the budget arrays) live in
	 * this context, emptied at the top of every round; only the handles
	 * outlive it, in TopMemoryContext on purpose (ADR 0035).
	 */
	round_cxt = AllocSetContextCreate(TopMemoryContext, "pgque_bgw launcher round",
									  ALLOCSET_DEFAULT_SIZES);
	MemoryContextSwitchTo(round_cxt);
	for (;;)
	{
		TimestampTz now = GetCurrentTimestamp();
		bool		rescan;
		bool		scanned = false;
		long		timeout;

		MemoryContextReset(round_cxt);
		LWLockAcquire(pgque_shared->lock, LW_SHARED);
		rescan = pgque_shared->launcher_wake_scan;
		LWLockRelease(pgque_shared->lock);

		if (rescan || TimestampDifferenceExceeds(last_scan, now, pgque_launcher_naptime * 1000))
		{
			sync_databases();
			last_scan = now;
			scanned = true;
		}
		timeout = manage_workers(scanned);
		timeout = Min(timeout, TimestampDifferenceMilliseconds(GetCurrentTimestamp(),
															   TimestampTzPlusMilliseconds(last_scan, pgque_launcher_naptime * 1000L)) + 1);

		/* its memory, as each worker publishes its own (ADR 0035) */
		memory = pgque_memory_in_use();
		LWLockAcquire(pgque_shared->lock, LW_EXCLUSIVE);
		pgque_shared->launcher_memory = memory;
		pgque_shared->launcher_memory_at = GetCurrentTimestamp();
		LWLockRelease(pgque_shared->lock);

		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 Max(timeout, 1), PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
			pgque_warn_inconsistent_settings();
			last_scan = 0;		/* pgque_bgw.databases may have changed */
			learned_budget = INT_MAX;	/* and the slots with them */
		}
	}
}
