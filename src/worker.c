/*
 * worker.c
 *		The skeleton every per-database worker runs: connecting and attaching
 *		to its entry in the state table, the loop (interrupts and reload at
 *		the top of every pass, exit checks, statistics flush, sleep until the
 *		loop's next deadline or a latch), and one unit of work in one
 *		transaction with errors caught, logged and recorded.
 *
 * The ticker, maintenance and watchdog loops (ticker.c, maint.c, watchdog.c)
 * each hand this file a PgqueLoop: a pass function and a deadline.  They call
 * down into it (pgque_run_unit, pgque_worker_report), never the reverse.
 *
 * Run-as rule (ADR 0014, docs/security.md): a unit never runs with the
 * bootstrap superuser's rights the worker connected with.  It runs as the
 * owner of the extension's objects (pgque_owner, ADR 0042; until 0.2.0 the
 * installing role), as a security-restricted operation, with
 * search_path pinned to pg_catalog, pg_temp; PostgreSQL's own maintenance
 * commands (VACUUM, REFRESH MATERIALIZED VIEW) and pg_cron do the same.
 * pgque_owner can already do everything a unit does and nothing else; a
 * unit gives nobody more.
 *
 * The unit skeleton is worker_spi's: statement timestamp, transaction, SPI,
 * snapshot, activity report; on error the transaction is aborted and the
 * loop goes on, so one queue's failure never stops the others.
 */
#include "postgres.h"

#include <limits.h>

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/indexing.h"
#include "catalog/pg_extension.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lmgr.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "compat.h"
#include "guc.h"
#include "state.h"
#include "wake.h"
#include "worker.h"
#include "caller.h"

PgqueDb    *pgque_worker_db = NULL;
PgqueWorkerKind pgque_worker_kind;

/*
 * The entries this process runs: its own kind's, or all three for the combined
 * worker (which records its pid in the ticker's entry only: the launcher
 * counts one process).
 */
static bool pgque_worker_combined = false;

/* before_shmem_exit: the entries no longer name this process; they are down */
static void
worker_detach(int code, Datum arg)
{
	TimestampTz now = GetCurrentTimestamp();
	int			k;

	if (pgque_shared == NULL || pgque_worker_db == NULL)
		return;
	LWLockAcquire(pgque_shared->lock, LW_EXCLUSIVE);
	for (k = 0; k < PGQUE_NKINDS; k++)
	{
		PgqueWorkerEntry *entry = &pgque_worker_db->workers[k];

		if (!pgque_worker_combined && k != (int) pgque_worker_kind)
			continue;
		if (entry->pid == MyProcPid)
		{
			entry->pid = 0;
			entry->pgprocno = -1;
		}
		/* the launcher clears it again if the worker is not wanted */
		if (entry->down_since == 0)
			entry->down_since = now;
	}
	LWLockRelease(pgque_shared->lock);
	pgque_wake_launcher();
}

static emit_log_hook_type prev_emit_log_hook = NULL;

/*
 * The server log of a worker: the alerts and notes our own SQL raises
 * (WARNING "pgque_bgw alert ... opened", LOG "... cleared") are meant for
 * the DBA, and the CONTEXT PostgreSQL adds to them (the PL/pgSQL line, the
 * "SQL statement" the worker sent) is internal noise there.  Errors keep
 * theirs: they are what a bug report needs.  Workers only: a session that
 * runs the same SQL gets everything, as it asked for it.
 */
/*
 * A text with its control characters escaped (\n, \r, \t, \xNN; the C1
 * controls U+0080..U+009F as \uNNNN), or the text itself when it has none.
 * The names the workers quote (queues, consumers, members, workers) may
 * carry a newline stored by 0.2.0 (ADR 0071: new names refuse them); in a
 * worker's message it would start a line of the server log that looks like
 * the server's own.  CONTEXT is escaped whole: its own line breaks between
 * frames cannot be told from a name's, so a worker's CONTEXT is one line
 * with "\n" between its frames.
 */
static char *
log_escaped(char *text)
{
	StringInfoData buf;
	const unsigned char *p;
	bool		any = false;

	if (text == NULL)
		return NULL;
	for (p = (const unsigned char *) text; *p; p++)
		if (*p < 0x20 || *p == 0x7f || (*p == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f))
			any = true;
	if (!any)
		return text;
	initStringInfo(&buf);
	for (p = (const unsigned char *) text; *p; p++)
	{
		if (*p == '\n')
			appendStringInfoString(&buf, "\\n");
		else if (*p == '\r')
			appendStringInfoString(&buf, "\\r");
		else if (*p == '\t')
			appendStringInfoString(&buf, "\\t");
		else if (*p < 0x20 || *p == 0x7f)
			appendStringInfo(&buf, "\\x%02x", *p);
		else if (*p == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f)
		{
			appendStringInfo(&buf, "\\u%04x", p[1]);
			p++;
		}
		else
			appendStringInfoChar(&buf, (char) *p);
	}
	return buf.data;
}

static void
worker_emit_log(ErrorData *edata)
{
	if (edata->elevel < ERROR && edata->message != NULL &&
		strncmp(edata->message, "pgque_bgw", 9) == 0)
		edata->hide_ctx = true;
	/* one line per field: nothing a name carries starts a new one */
	edata->message = log_escaped(edata->message);
	edata->detail = log_escaped(edata->detail);
	edata->detail_log = log_escaped(edata->detail_log);
	edata->hint = log_escaped(edata->hint);
	/* its lines too: a statement quoted there quotes the names it passes */
	edata->context = log_escaped(edata->context);
	if (prev_emit_log_hook)
		prev_emit_log_hook(edata);
}

/*
 * Connect a per-database worker: bgw_extra holds the database oid; kind is
 * PGQUE_COMBINED for the worker that runs the three loops.  Exits quietly
 * when the database's entry went away before it started.
 */
void
pgque_worker_start(PgqueWorkerKind kind)
{
	Oid			dboid;

	memcpy(&dboid, MyBgworkerEntry->bgw_extra, sizeof(Oid));

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	prev_emit_log_hook = emit_log_hook;
	emit_log_hook = worker_emit_log;

	/* pick the entry before connecting: nothing to do if it went away */
	LWLockAcquire(pgque_shared->lock, LW_SHARED);
	pgque_worker_db = pgque_find_db(dboid);
	LWLockRelease(pgque_shared->lock);
	if (pgque_worker_db == NULL)
		proc_exit(0);

	/*
	 * Connected as the bootstrap superuser, but no unit runs with those
	 * rights: see pgque_run_unit.
	 */
	BackgroundWorkerInitializeConnectionByOid(dboid, InvalidOid, 0);
	pgque_worker_attach(kind);
}

static void
reload_if_pending(void)
{
	if (ConfigReloadPending)
	{
		ConfigReloadPending = false;
		ProcessConfigFile(PGC_SIGHUP);
	}
}

/*
 * The loops this process runs (one, or the three of the combined worker),
 * each with its own state, pass context and deadline.
 */
typedef struct RunLoop
{
	const PgqueLoop *loop;
	void	   *state;
	MemoryContext cxt;
	TimestampTz last_check;
} RunLoop;

static RunLoop *run_loops = NULL;
static int	run_nloops = 0;
static bool in_pass = false;	/* a pass is running: no nested ticker pass */

/*
 * Run one pass of a loop with its pass context current, and empty that
 * context afterwards: whatever the pass allocates outside a unit's
 * transaction (lists, arrays, formatted statements) lives for the pass
 * only.  A unit returns to it (pgque_run_unit), so nothing a pass does
 * lands in TopMemoryContext by default: what must outlive the pass goes to
 * a named context on purpose (the ticker's queue list, the loops' states).
 */
static void
pass_in_context(RunLoop *rl)
{
	PgqueWorkerKind saved = pgque_worker_kind;
	MemoryContext old;

	pgque_worker_kind = rl->loop->kind;
	MemoryContextReset(rl->cxt);
	old = MemoryContextSwitchTo(rl->cxt);
	rl->loop->pass(rl->state, rl->cxt);
	MemoryContextSwitchTo(old);
	MemoryContextReset(rl->cxt);
	pgque_publish_memory();
	pgque_worker_kind = saved;
}

static void
run_one_pass(RunLoop *rl)
{
	TimestampTz now = GetCurrentTimestamp();
	MemoryContext old = MemoryContextSwitchTo(rl->cxt);

	/* the exit check's transaction, too, leaves nothing behind */
	if (TimestampDifferenceExceeds(rl->last_check, now, rl->loop->exit_check_ms))
	{
		pgque_worker_exit_if_gone();
		rl->last_check = now;
	}
	MemoryContextSwitchTo(old);
	in_pass = true;
	pass_in_context(rl);
	in_pass = false;
}

/*
 * The combined worker, between two units of a maintenance or watchdog pass:
 * a ticker pass that is due (a commit woke it) runs now, so a long
 * maintenance pass does not delay ticks by more than one unit (ADR 0026).
 */
static void
tick_between_units(void)
{
	RunLoop    *ticker;

	if (run_nloops < 2 || pgque_worker_kind == PGQUE_TICKER)
		return;
	ticker = &run_loops[0];
	if (ticker->loop->next_pass(ticker->state) > GetCurrentTimestamp())
		return;
	/* its own pass context: the one current now is the other loop's */
	pass_in_context(ticker);
}

/*
 * The loop every worker runs.  Each pass starts with interrupts, a pending
 * reload and the exit checks (so a worker that is always busy still reloads
 * and leaves), runs the loop's pass in a memory context reset per pass,
 * flushes statistics (the workers' deletes and truncates must reach
 * autovacuum), then sleeps until the earliest deadline of its loops, asked
 * again after every wake-up because a commit may move it.  The combined
 * worker runs the ticker, maintenance and watchdog loops this way, each when
 * its own deadline comes (the ticker's first: loops[0]).
 */
void
pgque_worker_run(const PgqueLoop *const *loops, int nloops)
{
	int			i;
	MemoryContext loop_cxt;

	run_loops = MemoryContextAllocZero(TopMemoryContext, sizeof(RunLoop) * nloops);
	run_nloops = nloops;
	for (i = 0; i < nloops; i++)
	{
		run_loops[i].loop = loops[i];
		run_loops[i].cxt = AllocSetContextCreate(TopMemoryContext, "pgque_bgw pass",
												 ALLOCSET_DEFAULT_SIZES);
		/* the loop's name in pg_log_backend_memory_contexts() (a constant) */
		MemoryContextSetIdentifier(run_loops[i].cxt, pgque_kind_name(loops[i]->kind));
		run_loops[i].state = loops[i]->init();
	}

	/*
	 * Between passes (statistics, the wait, its exit checks) nothing is
	 * allocated in TopMemoryContext either: this context is current there
	 * and emptied at the top of every round (ADR 0035).
	 */
	loop_cxt = AllocSetContextCreate(TopMemoryContext, "pgque_bgw worker loop",
									 ALLOCSET_SMALL_SIZES);
	MemoryContextSwitchTo(loop_cxt);
	for (;;)
	{
		MemoryContextReset(loop_cxt);
		CHECK_FOR_INTERRUPTS();
		reload_if_pending();

		for (i = 0; i < nloops; i++)
		{
			/* the first pass of each loop runs at once */
			if (run_loops[i].last_check == 0 ||
				run_loops[i].loop->next_pass(run_loops[i].state) <= GetCurrentTimestamp())
				run_one_pass(&run_loops[i]);
		}
		pgstat_report_stat(true);

		for (;;)
		{
			TimestampTz next = run_loops[0].loop->next_pass(run_loops[0].state);
			long		timeout;

			for (i = 1; i < nloops; i++)
				next = Min(next, run_loops[i].loop->next_pass(run_loops[i].state));
			timeout = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), next);
			if (timeout <= 0)
				break;
			pgque_wait(timeout);
			if (!pgque_enabled)
				pgque_worker_exit_if_gone();
		}
	}
}

/* Record this process in its entry (or entries), and make sure it is removed at exit. */
void
pgque_worker_attach(PgqueWorkerKind kind)
{
	TimestampTz now = GetCurrentTimestamp();
	int			k;

	pgque_worker_combined = (kind == PGQUE_COMBINED);
	pgque_worker_kind = pgque_worker_combined ? PGQUE_TICKER : kind;
	before_shmem_exit(worker_detach, (Datum) 0);

	LWLockAcquire(pgque_shared->lock, LW_EXCLUSIVE);
	for (k = 0; k < PGQUE_NKINDS; k++)
	{
		PgqueWorkerEntry *entry = &pgque_worker_db->workers[k];

		if (!pgque_worker_combined && k != (int) kind)
			continue;
		if (k == (int) pgque_worker_kind)
		{
			entry->pid = MyProcPid;
			entry->pgprocno = pgque_my_procno();
		}
		entry->started_at = now;
		entry->memory = 0;		/* the last process's; this one's after its first pass */
		entry->memory_at = 0;
		pgque_entry_mark_up(entry, now);
	}
	LWLockRelease(pgque_shared->lock);

	pgstat_report_appname(pgque_worker_combined ? "pgque_bgw worker" :
						  psprintf("pgque_bgw %s", pgque_kind_name(kind)));
}

/*
 * Record whether the installed version is the library's; the first worker
 * of the database to see an older one warns (once until it changes), and
 * the first to see it updated says so.
 */
/* "0.2.0" -> 200 (PGQUE_SQL_0_2_0); what does not parse counts as 0 */
static int
version_number(const char *version)
{
	int			major = 0,
				minor = 0,
				patch = 0;

	if (sscanf(version, "%d.%d.%d", &major, &minor, &patch) < 2)
		return 0;
	return major * 10000 + minor * 100 + patch;
}

static void
note_schema_version(const char *version)
{
	bool		current = (strcmp(version, PGQUE_VERSION) == 0);
	bool		say = false;

	pgque_schema_version = version_number(version);

	LWLockAcquire(pgque_shared->lock, LW_EXCLUSIVE);
	if (current == pgque_worker_db->schema_warned)
	{
		pgque_worker_db->schema_warned = !current;
		say = true;
	}
	LWLockRelease(pgque_shared->lock);
	pgque_schema_current = current;

	if (say && !current)
		ereport(WARNING,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("pgque_bgw: database \"%s\" has extension pgque_bgw version %s, the library is version %s",
						pgque_worker_db->dbname, version, PGQUE_VERSION),
				 errdetail("Until the extension is updated the workers run only what version %s provides; send and receive keep working.",
						   version),
				 errhint("Run ALTER EXTENSION pgque_bgw UPDATE in database \"%s\".",
						 pgque_worker_db->dbname)));
	else if (say)
		ereport(LOG,
				(errmsg("pgque_bgw: database \"%s\" now has extension pgque_bgw version %s, the library's",
						pgque_worker_db->dbname, version)));
}

/*
 * Whether the installed SQL is the library's own version (PGQUE_VERSION,
 * from the control file).  A server restarted with a newer library keeps a
 * database's older SQL until ALTER EXTENSION pgque_bgw UPDATE runs there
 * (ADR 0019): meanwhile the workers run only what that SQL has (maint.c
 * skips the steps it lacks), and say once what to run.
 */
bool		pgque_schema_current = true;
int			pgque_schema_version = INT_MAX;

/*
 * Is the extension installed (and committed) in this database?  Also notes
 * its version in pgque_schema_current.
 */
bool
pgque_extension_present(void)
{
	bool		present;
	char	   *version;
	char	   *copy = NULL;
	MemoryContext caller = CurrentMemoryContext;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	present = OidIsValid(pgque_extension_row(&version, NULL));
	if (version != NULL)
		copy = MemoryContextStrdup(caller, version);
	CommitTransactionCommand();
	/* the commit leaves TopMemoryContext current: back to the caller's */
	MemoryContextSwitchTo(caller);

	if (present && copy != NULL)
		note_schema_version(copy);
	if (copy != NULL)
		pfree(copy);
	return present;
}

/*
 * Leave quietly when the extension was dropped, the database paused (DROP
 * DATABASE and friends) or the workers were switched off.
 */
void
pgque_worker_exit_if_gone(void)
{
	PgqueDbState state;

	LWLockAcquire(pgque_shared->lock, LW_SHARED);
	state = pgque_worker_db->state;
	LWLockRelease(pgque_shared->lock);

	if (state == PGQUE_DB_PAUSED || !pgque_enabled)
		proc_exit(0);

	if (!pgque_extension_present())
	{
		LWLockAcquire(pgque_shared->lock, LW_EXCLUSIVE);
		pgque_worker_db->state = PGQUE_DB_NO_EXTENSION;
		LWLockRelease(pgque_shared->lock);
		ereport(DEBUG1,
				(errmsg("pgque_bgw %s: extension pgque_bgw is not installed in database \"%s\", exiting",
						pgque_kind_name(pgque_worker_kind), pgque_worker_db->dbname)));
		proc_exit(0);
	}

	if (state == PGQUE_DB_UNKNOWN)
	{
		LWLockAcquire(pgque_shared->lock, LW_EXCLUSIVE);
		if (pgque_worker_db->state == PGQUE_DB_UNKNOWN)
			pgque_worker_db->state = PGQUE_DB_RUNNING;
		LWLockRelease(pgque_shared->lock);
		pgque_wake_launcher();	/* it starts the other two now */
	}
}

/*
 * Copy src into a PGQUE_ERRMSG_LEN buffer of the state table, cut at a
 * character boundary: status() returns it as text, and half a multibyte
 * character would be invalid in the database encoding.
 */
static void
copy_clipped(char *dst, const char *src)
{
	int			len = pg_mbcliplen(src, strlen(src), PGQUE_ERRMSG_LEN - 1);

	memcpy(dst, src, len);
	dst[len] = '\0';
}

/* Publish a short description of what this worker is doing (status()). */
void
pgque_worker_report(const char *fmt,...)
{
	va_list		ap;
	char		buf[PGQUE_ERRMSG_LEN * 2];

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);

	LWLockAcquire(pgque_shared->lock, LW_EXCLUSIVE);
	copy_clipped(pgque_worker_db->workers[pgque_worker_kind].detail, buf);
	pgque_worker_db->workers[pgque_worker_kind].last_run = GetCurrentTimestamp();
	LWLockRelease(pgque_shared->lock);
}

/*
 * What this process holds: every memory context under TopMemoryContext
 * (caches, kept plans, PL/pgSQL functions), in bytes allocated from the
 * system; the figure pg_log_backend_memory_contexts() calls "Grand total".
 */
uint64
pgque_memory_in_use(void)
{
	return (uint64) MemoryContextMemAllocated(TopMemoryContext, true);
}

/*
 * Publish this process's memory after a pass, for pgque._worker_memory()
 * (status(), metrics() and the worker_memory alert, ADR 0035).  The
 * combined worker is one process: its figure goes to the ticker's entry,
 * the one with its pid.
 */
void
pgque_publish_memory(void)
{
	uint64		bytes = pgque_memory_in_use();
	int			k = pgque_worker_combined ? PGQUE_TICKER : (int) pgque_worker_kind;
	PgqueWorkerEntry *entry = &pgque_worker_db->workers[k];

	LWLockAcquire(pgque_shared->lock, LW_EXCLUSIVE);
	entry->memory = bytes;
	entry->memory_at = GetCurrentTimestamp();
	LWLockRelease(pgque_shared->lock);
}

/*
 * Sleep until the latch is set or timeout_ms passes; handle reloads and
 * termination.  Returns the WaitLatch result.
 */
long
pgque_wait(long timeout_ms)
{
	int			rc;

	rc = WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
				   timeout_ms < 0 ? 0 : timeout_ms, PG_WAIT_EXTENSION);
	ResetLatch(MyLatch);
	CHECK_FOR_INTERRUPTS();
	reload_if_pending();
	return rc;
}

/*
 * A unit found, once it could run, that the SQL its pass chose it for is
 * gone (DROP EXTENSION) or older (dropped and created again at an older
 * version): it is abandoned quietly (pgque_unit_abandoned) and the worker
 * looks again (exit if gone, the new version's gates otherwise).
 */
static bool unit_stale = false;
bool		pgque_unit_abandoned = false;

/*
 * The role a unit runs as: the owner of the extension's objects,
 * pgque_owner (ADR 0042, pgque_run_as_role()).  Read in every unit: the
 * extension may have been dropped and created again since the last one.
 */
static Oid
unit_role(void)
{
	Oid			extoid;
	char	   *version = NULL;
	Oid			owner = pgque_extension_row(NULL, &extoid);

	/*
	 * Wait while the owner updates or drops the extension (the utility hook
	 * holds this lock then), before this unit takes any other lock: the
	 * update never waits for a lock of ours while we wait for it.  Then read
	 * the row again: the update may have changed the version, a DROP
	 * removed it.
	 */
	if (OidIsValid(owner))
	{
		LockDatabaseObject(ExtensionRelationId, extoid, PGQUE_EXTENSION_DDL_SUBID, AccessShareLock);
		owner = pgque_extension_row(&version, NULL);
	}
	if (!OidIsValid(owner) ||
		(version != NULL && pgque_schema_version != INT_MAX &&
		 version_number(version) < pgque_schema_version))
	{
		unit_stale = true;
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("extension pgque_bgw in database \"%s\" was dropped or replaced by an older version",
						pgque_worker_db->dbname)));
	}
	return pgque_run_as_role();
}

/* the error of the last unit that failed (maint.c records it) */
char		pgque_unit_errmsg[PGQUE_ERRMSG_LEN * 4];
int			pgque_unit_sqlerrcode;

/*
 * One unit of work in one transaction, run as the extension's owner (see the
 * file header).  Errors are caught: logged with what was being done,
 * recorded in the entry, the transaction aborted (which also undoes the
 * user switch and the search_path); the caller's loop goes on.  Returns true
 * when the unit committed.
 */
bool
pgque_run_unit(const char *what, pgque_unit_fn fn, void *arg)
{
	MemoryContext oldcxt = CurrentMemoryContext;
	volatile bool ok = true;
	PgqueStateGate *gate = pgque_state_gate;
	volatile bool checking = false;

	pgque_unit_abandoned = false;
	/* the pass's gate found the state held: nothing more of it runs */
	if (gate != NULL && gate->held)
	{
		pgque_unit_abandoned = true;
		return false;
	}
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PG_TRY();
	{
		Oid			save_userid;
		int			save_sec_context;
		int			save_nestlevel;

		GetUserIdAndSecContext(&save_userid, &save_sec_context);
		SetUserIdAndSecContext(unit_role(),
							   save_sec_context | SECURITY_LOCAL_USERID_CHANGE |
							   SECURITY_RESTRICTED_OPERATION);
		save_nestlevel = NewGUCNestLevel();
		(void) set_config_option("search_path", "pg_catalog, pg_temp",
								 PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);

		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "SPI_connect failed");
		PushActiveSnapshot(GetTransactionSnapshot());
		pgstat_report_activity(STATE_RUNNING, what);

		/* the pass's state check, in its first unit (ADR 0118) */
		if (gate != NULL && gate->armed)
		{
			checking = true;
			pgque_state_gate_check(gate);
			checking = false;
		}
		if (gate == NULL || !gate->held)
			fn(arg);

		SPI_finish();
		PopActiveSnapshot();
		AtEOXact_GUC(false, save_nestlevel);
		SetUserIdAndSecContext(save_userid, save_sec_context);
		CommitTransactionCommand();
	}
	PG_CATCH();
	{
		ErrorData  *edata;
		PgqueWorkerEntry *entry;
		char	   *msg;
		const char *failed = what;

		MemoryContextSwitchTo(oldcxt);
		edata = CopyErrorData();
		FlushErrorState();
		AbortCurrentTransaction();

		/* the gate's check failed: logged as the check, and the pass holds */
		if (checking)
			failed = "checking that the queue state is whole";
		if (unit_stale)
		{
			/* not a failure: the SQL it was for is gone or older */
			ereport(DEBUG1,
					(errmsg("pgque_bgw %s: %s abandoned: %s",
							pgque_kind_name(pgque_worker_kind), failed, edata->message)));
			unit_stale = false;
			pgque_unit_abandoned = true;
		}
		else
		{
			strlcpy(pgque_unit_errmsg, edata->message, sizeof(pgque_unit_errmsg));
			pgque_unit_sqlerrcode = edata->sqlerrcode;
			ereport(WARNING,
					(errmsg("pgque_bgw %s: %s failed: %s",
							pgque_kind_name(pgque_worker_kind), failed, edata->message),
					 edata->detail ? errdetail_internal("%s", edata->detail) : 0));

			msg = psprintf("%s: %s", failed, edata->message);
			LWLockAcquire(pgque_shared->lock, LW_EXCLUSIVE);
			entry = &pgque_worker_db->workers[pgque_worker_kind];
			copy_clipped(entry->last_error, msg);
			entry->last_error_at = GetCurrentTimestamp();
			LWLockRelease(pgque_shared->lock);
			pfree(msg);
		}
		FreeErrorData(edata);
		ok = false;
	}
	PG_END_TRY();
	/* abandoned: exit when the extension is gone, else read its version */
	if (pgque_unit_abandoned)
		pgque_worker_exit_if_gone();
	/* held by the gate: the unit did nothing, which is no failure */
	if (gate != NULL && gate->held && !pgque_unit_abandoned)
	{
		pgque_unit_abandoned = true;
		ok = false;
	}
	pgstat_report_activity(STATE_IDLE, NULL);
	MemoryContextSwitchTo(oldcxt);
	if (pgque_worker_combined && in_pass)
		tick_between_units();
	return ok;
}

/*
 * Run a statement returning one bigint (or nothing: 0) inside a unit.
 */
int64
pgque_spi_int8(const char *sql, int nargs, Oid *argtypes, Datum *args, bool *isnull)
{
	char	   *nulls = NULL;
	int			ret;
	bool		null;
	int64		result = 0;
	int			i;

	if (nargs > 0)
	{
		nulls = palloc(nargs);
		for (i = 0; i < nargs; i++)
			nulls[i] = (isnull != NULL && isnull[i]) ? 'n' : ' ';
	}
	ret = SPI_execute_with_args(sql, nargs, argtypes, args, nulls, false, 1);
	if (ret < 0)
		elog(ERROR, "SPI_execute_with_args failed: %s", SPI_result_code_string(ret));
	if (SPI_processed > 0 && SPI_tuptable != NULL)
	{
		Datum		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &null);

		if (!null)
			result = DatumGetInt64(d);
	}
	return result;
}

/*
 * Inside a unit: the failed step `step` of `queue` (NULL: a database-wide
 * step) recorded from the failed unit's error (pgque_unit_errmsg and its
 * SQLSTATE) for the maint_failed alert, or (failed false) a failure of it
 * marked recovered.  Needs 0.2.0's table (PGQUE_SQL_HAS, by the caller).
 * The maintenance worker's steps and the ticker's visits (ADR 0024, 0100).
 */
void
pgque_record_step(const char *step, const char *queue, bool failed)
{
	Oid			argtypes[4] = {TEXTOID, TEXTOID, TEXTOID, TEXTOID};
	Datum		args[4];
	bool		nulls[4] = {false, queue == NULL, false, false};

	args[0] = CStringGetTextDatum(step);
	args[1] = queue ? CStringGetTextDatum(queue) : (Datum) 0;
	if (!failed)
	{
		(void) pgque_spi_int8("select pgque._maint_ok($1, $2)", 2, argtypes, args, nulls);
		return;
	}
	args[2] = CStringGetTextDatum(pgque_unit_errmsg);
	args[3] = CStringGetTextDatum(unpack_sql_state(pgque_unit_sqlerrcode));
	(void) pgque_spi_int8("select pgque._maint_failed($1, $2, $3, $4)", 4, argtypes, args, nulls);
}
