/*
 * worker.c
 *		What every per-database worker shares: the entry point, attaching to
 *		its slot in the state table, the latch wait, and one unit of work in
 *		one transaction with errors caught, logged and recorded.
 *
 * The unit skeleton is worker_spi's: statement timestamp, transaction, SPI,
 * snapshot, activity report; on error the transaction is aborted and the
 * loop goes on, so one queue's failure never stops the others.
 */
#include "postgres.h"

#include "access/xact.h"
#include "commands/extension.h"
#include "executor/spi.h"
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

PgqueDb    *pgque_worker_db = NULL;
PgqueWorkerKind pgque_worker_kind;

/* before_shmem_exit: the slot no longer names this process */
static void
worker_detach(int code, Datum arg)
{
	PgqueWorkerSlot *slot;

	if (pgque_shared == NULL || pgque_worker_db == NULL)
		return;
	LWLockAcquire(pgque_shared->lock, LW_EXCLUSIVE);
	slot = &pgque_worker_db->workers[pgque_worker_kind];
	if (slot->pid == MyProcPid)
	{
		slot->pid = 0;
		slot->pgprocno = -1;
	}
	LWLockRelease(pgque_shared->lock);
	pgque_wake_launcher();
}

/*
 * Entry point of every per-database worker: bgw_main_arg is the kind,
 * bgw_extra the database oid.
 */
void
pgque_worker_main(Datum arg)
{
	PgqueWorkerKind kind = (PgqueWorkerKind) DatumGetInt32(arg);
	Oid			dboid;

	memcpy(&dboid, MyBgworkerEntry->bgw_extra, sizeof(Oid));

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	/* pick the entry before connecting: nothing to do if it went away */
	LWLockAcquire(pgque_shared->lock, LW_SHARED);
	pgque_worker_db = pgque_find_db(dboid);
	LWLockRelease(pgque_shared->lock);
	if (pgque_worker_db == NULL)
		proc_exit(0);

	BackgroundWorkerInitializeConnectionByOid(dboid, InvalidOid, 0);
	pgque_worker_attach(kind);

	switch (kind)
	{
		case PGQUE_TICKER:
			pgque_ticker_loop();
			break;
		case PGQUE_MAINT:
			pgque_maint_loop();
			break;
		case PGQUE_WATCHDOG:
			pgque_watchdog_loop();
			break;
		default:
			elog(ERROR, "pgque_bgw: unknown worker kind %d", (int) kind);
	}
	proc_exit(0);
}

/* Record this process in its slot, and make sure it is removed at exit. */
void
pgque_worker_attach(PgqueWorkerKind kind)
{
	PgqueWorkerSlot *slot;

	pgque_worker_kind = kind;
	before_shmem_exit(worker_detach, (Datum) 0);

	LWLockAcquire(pgque_shared->lock, LW_EXCLUSIVE);
	slot = &pgque_worker_db->workers[kind];
	slot->pid = MyProcPid;
	slot->pgprocno = MyProc->pgprocno;
	slot->started_at = GetCurrentTimestamp();
	LWLockRelease(pgque_shared->lock);

	pgstat_report_appname(psprintf("pgque_bgw %s", pgque_kind_name(kind)));
}

/* Is the extension installed (and committed) in this database? */
bool
pgque_extension_present(void)
{
	bool		present;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	present = OidIsValid(get_extension_oid("pgque_bgw", true));
	CommitTransactionCommand();
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

/* Publish a short description of what this worker is doing (status()). */
void
pgque_worker_report(const char *fmt,...)
{
	va_list		ap;
	char		buf[PGQUE_ERRMSG_LEN];

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);

	LWLockAcquire(pgque_shared->lock, LW_EXCLUSIVE);
	strlcpy(pgque_worker_db->workers[pgque_worker_kind].detail, buf, PGQUE_ERRMSG_LEN);
	pgque_worker_db->workers[pgque_worker_kind].last_run = GetCurrentTimestamp();
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
	if (ConfigReloadPending)
	{
		ConfigReloadPending = false;
		ProcessConfigFile(PGC_SIGHUP);
	}
	return rc;
}

/*
 * One unit of work in one transaction.  Errors are caught: logged with
 * what was being done, recorded in the slot, the transaction aborted; the
 * caller's loop goes on.  Returns true when the unit committed.
 */
bool
pgque_run_unit(const char *what, pgque_unit_fn fn, void *arg)
{
	MemoryContext oldcxt = CurrentMemoryContext;
	volatile bool ok = true;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PG_TRY();
	{
		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "SPI_connect failed");
		PushActiveSnapshot(GetTransactionSnapshot());
		pgstat_report_activity(STATE_RUNNING, what);

		fn(arg);

		SPI_finish();
		PopActiveSnapshot();
		CommitTransactionCommand();
	}
	PG_CATCH();
	{
		ErrorData  *edata;
		PgqueWorkerSlot *slot;

		MemoryContextSwitchTo(oldcxt);
		edata = CopyErrorData();
		FlushErrorState();
		AbortCurrentTransaction();

		ereport(WARNING,
				(errmsg("pgque_bgw %s: %s failed: %s",
						pgque_kind_name(pgque_worker_kind), what, edata->message),
				 edata->detail ? errdetail_internal("%s", edata->detail) : 0));

		LWLockAcquire(pgque_shared->lock, LW_EXCLUSIVE);
		slot = &pgque_worker_db->workers[pgque_worker_kind];
		snprintf(slot->last_error, PGQUE_ERRMSG_LEN, "%s: %s", what, edata->message);
		slot->last_error_at = GetCurrentTimestamp();
		LWLockRelease(pgque_shared->lock);

		FreeErrorData(edata);
		ok = false;
	}
	PG_END_TRY();
	pgstat_report_activity(STATE_IDLE, NULL);
	MemoryContextSwitchTo(oldcxt);
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
