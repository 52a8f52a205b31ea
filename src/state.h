/*
 * state.h
 *		The launcher's shared-memory state table (state.c): one entry per
 *		database the launcher knows, with a worker entry per loop; and the
 *		worker budget (budget.c).
 */
#ifndef PGQUE_STATE_H
#define PGQUE_STATE_H

#include "textdomain.h"

#include "datatype/timestamp.h"
#include "port/atomics.h"
#include "storage/lwlock.h"

typedef enum PgqueWorkerKind
{
	PGQUE_TICKER = 0,
	PGQUE_MAINT,
	PGQUE_WATCHDOG,
	PGQUE_NKINDS
} PgqueWorkerKind;

/* bgw_main_arg of the combined worker: one process runs the three loops */
#define PGQUE_COMBINED PGQUE_NKINDS

/*
 * Per-database state, one entry per database the launcher knows.
 *   UNKNOWN      -> the launcher starts the ticker, which probes for the
 *                   extension
 *   RUNNING      -> the extension is there: all three loops are kept
 *                   running (three processes, or one combined: ADR 0026)
 *   NO_EXTENSION -> nothing runs; CREATE EXTENSION (at commit) or a new
 *                   scan puts it back to UNKNOWN
 *   PAUSED       -> DROP/CREATE ... TEMPLATE/RENAME DATABASE is running
 *                   (by a role PostgreSQL will let run it): the launcher
 *                   stops the workers through their handles and does not
 *                   restart them until it ends
 */
typedef enum PgqueDbState
{
	PGQUE_DB_UNUSED = 0,
	PGQUE_DB_UNKNOWN,
	PGQUE_DB_RUNNING,
	PGQUE_DB_NO_EXTENSION,
	PGQUE_DB_PAUSED
} PgqueDbState;

#define PGQUE_ERRMSG_LEN 256

typedef struct PgqueWorkerEntry
{
	pid_t		pid;			/* 0 when not running */
	int			pgprocno;		/* -1 when not running; for SetLatch */
	TimestampTz started_at;
	TimestampTz last_run;		/* end of the last completed pass */
	TimestampTz restart_at;		/* back-off: do not start before */
	int			failures;		/* consecutive short-lived runs */
	bool		registered;		/* the launcher holds its handle (starting or running) */
	bool		stop_requested; /* stopped on purpose: no back-off when it ends */
	TimestampTz last_error_at;
	/* supervision (worker_down alerts, ADR 0028) */
	TimestampTz down_since;		/* wanted and not attached since; 0: up or not wanted */
	TimestampTz outage_from;	/* the last outage longer than worker_down_after */
	TimestampTz outage_to;
	uint32		outages;		/* such outages ended so far */
	uint32		outages_reported;	/* of which an alert row was written */
	bool		down_logged;	/* the launcher logged this outage (no worker could) */
	/* memory (the worker_memory alert, ADR 0035); the process's entry only */
	uint64		memory;			/* bytes under TopMemoryContext after its last pass */
	TimestampTz memory_at;		/* when measured; 0: not yet */
	char		last_error[PGQUE_ERRMSG_LEN];
	char		detail[PGQUE_ERRMSG_LEN];	/* what the worker reports of itself */
} PgqueWorkerEntry;

/*
 * Which queues had events committed since the ticker last looked (ADR 0031):
 * bit (queue_id % PGQUE_DIRTY_BITS), set at commit by the producer's
 * transaction callback, taken (exchanged with 0) by the ticker at the start
 * of a pass.  Two queues may share a bit: a spurious bit costs one probe.
 */
#define PGQUE_DIRTY_BITS 4096
#define PGQUE_DIRTY_WORDS (PGQUE_DIRTY_BITS / 32)

typedef struct PgqueDb
{
	Oid			dboid;
	PgqueDbState state;
	char		dbname[NAMEDATALEN];
	pg_atomic_uint32 wake;		/* producers set it at commit, the ticker clears */
	pg_atomic_uint64 wake_at;	/* when the commit that set wake committed
								 * (written after it, by that commit only) */
	pg_atomic_uint32 dirty[PGQUE_DIRTY_WORDS];	/* see PGQUE_DIRTY_BITS */
	TimestampTz last_tick;		/* last tick written by the ticker */
	TimestampTz last_maint;		/* last completed maintenance pass */
	/*
	 * The ticker's last clean sequence probe (ADR 0103): at probe_at every
	 * queue it served with a bit in probe_covered (queue_id %
	 * PGQUE_DIRTY_BITS) and an id up to probe_max_id had its sequence read
	 * and covered by its latest tick (ticked if it had moved).  A bit is
	 * set only when every queue of the bit was (a queue the ticker did not
	 * serve clears its bit).  0: none.  The watchdog reads no sequence of
	 * such a queue (pgque._ticker_covered).
	 */
	TimestampTz probe_at;
	int32		probe_max_id;
	uint32		probe_covered[PGQUE_DIRTY_WORDS];
	bool		schema_warned;	/* said once that the SQL is older than the library */
	bool		combined;		/* one process runs the three loops (ADR 0026) */
	bool		unlisted_pause; /* PAUSED by the launcher because pgque_bgw.databases
								 * (or pg_database) no longer listed it, not by a
								 * utility command: listed again, it runs again */
	char		unserved[PGQUE_ERRMSG_LEN]; /* why a wanted worker is not running; "" */
	PgqueWorkerEntry workers[PGQUE_NKINDS];
} PgqueDb;

typedef struct PgqueShared
{
	LWLock	   *lock;			/* protects everything but the wake flags */
	pid_t		launcher_pid;
	int			launcher_pgprocno;
	bool		launcher_wake_scan; /* rescan databases now */
	uint64		launcher_memory;	/* as PgqueWorkerEntry.memory, of the launcher */
	TimestampTz launcher_memory_at;
	int			max_dbs;
	int			dbs_unlisted;	/* databases the table had no room for */
	pg_atomic_uint32 db_generation; /* bumped when an entry is (re)assigned: a
									 * backend that found no entry for its
									 * database looks again only then (wake.c) */
	pg_atomic_uint64 window_epoch;	/* bumped when rows of windows already
									 * read are deleted (a seek's copies): the
									 * part caches filled before are stale
									 * (window.c, ADR 0099) */
	PgqueDb		dbs[FLEXIBLE_ARRAY_MEMBER];
} PgqueShared;

extern PgqueShared *pgque_shared;
extern void pgque_state_request(void);
extern void pgque_state_startup(void);
extern PgqueDb *pgque_find_db(Oid dboid);	/* caller holds the lock */
extern const char *pgque_kind_name(PgqueWorkerKind kind);
extern const char *pgque_db_state_name(PgqueDbState state);
extern void pgque_wake_launcher(void);
extern void pgque_entry_mark_up(PgqueWorkerEntry *entry, TimestampTz now);

/* ---- budget.c: how many per-database workers fit (ADR 0036) ---- */
typedef struct PgqueBudget
{
	int			budget;			/* Min(pgque_bgw.max_workers, slots) */
	int			slots;			/* max_worker_processes - launcher - others */
	int			others;			/* slots other background workers hold */
	int			parallel;		/* parallel query workers now (not subtracted) */
	int			ours;			/* slots pgque_bgw holds, the launcher's included */
	bool		counted;		/* the server's slots could be read */
} PgqueBudget;
extern void pgque_worker_budget(PgqueBudget *b);

#endif							/* PGQUE_STATE_H */
