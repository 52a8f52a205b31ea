/*
 * pgque_bgw.h
 *		Declarations shared between the module's C files.
 *
 * Layering (arrows point down; no file includes one above it):
 *   pgque_bgw.c (_PG_init, the workers' entry point)
 *     -> launcher.c, ticker.c, maint.c, watchdog.c, utility.c, supervise.c
 *       -> worker.c (what every worker shares), wake.c, state.c (shared memory),
 *          budget.c (how many workers the server has room for)
 *         -> guc.c, produce.c (with queue_cache.c, insert_plan.c: producer.h;
 *            cdc.c, the CDC triggers, sits beside the SQL entry points and
 *            calls produce.c's pgque_insert_fields)
 *           -> rules.c (rules.h: limits and the slot hash SQL shares),
 *              srf.c (set-returning helpers), compat.h
 */
#ifndef PGQUE_BGW_H
#define PGQUE_BGW_H

#include "postgres.h"
#include "textdomain.h"

#include "access/tupdesc.h"
#include "datatype/timestamp.h"
#include "port/atomics.h"
#include "storage/lwlock.h"

/* ---- pgque_bgw.c ---- */
extern bool pgque_is_preloaded(void);

/* ---- guc.c: the settings (see docs/gucs.md) ---- */
extern bool pgque_enabled;
extern char *pgque_databases;
extern int	pgque_launcher_naptime; /* s */
extern int	pgque_tick_interval;	/* ms */
extern int	pgque_maint_interval;	/* s */
extern int	pgque_watchdog_interval;	/* s */
extern int	pgque_max_workers;
extern int	pgque_slot_unpolled_after;	/* s */
extern int	pgque_slot_stale_after;	/* s */
extern int	pgque_lag_alert_after;	/* s */
extern int	pgque_ticker_stalled_after;	/* s */
extern int	pgque_ticker_probe_interval;	/* s */
extern int	pgque_long_transaction_after;	/* s */
extern int	pgque_resize_stalled_after;	/* s */
extern int	pgque_alert_retention;	/* s */
extern int	pgque_restart_max;	/* ms: cap of the restart back-off */
extern int	pgque_worker_down_after;	/* s */
extern int	pgque_max_databases;
extern int	pgque_worker_mode;	/* PgqueWorkerMode */

/* pgque_bgw.error_codes (errcodes.c, ADR 0059) */
typedef enum PgqueErrcodes
{
	PGQUE_ERRCODES_NATIVE,
	PGQUE_ERRCODES_PGQUE
} PgqueErrcodes;
extern int	pgque_error_codes;	/* PgqueErrcodes */
extern void pgque_install_errcode_hooks(void);
typedef enum PgqueWorkerMode
{
	PGQUE_MODE_AUTO,
	PGQUE_MODE_SPLIT,
	PGQUE_MODE_COMBINED
} PgqueWorkerMode;
extern void pgque_define_gucs(void);
extern void pgque_warn_inconsistent_settings(void);
extern bool pgque_database_allowed(const char *dbname);

/* caller.c */
extern Oid	pgque_quota_role(void);
/* pgque_caller_privileged(): what the caller may use in the shared-memory tables */
#define PGQUE_PRIV_NONE 0
#define PGQUE_PRIV_NO_ROLE_CAP 1	/* not held to the per-role cap */
#define PGQUE_PRIV_RESERVE 2		/* that, and the reserve */
extern int	pgque_caller_privileged(void);

/* reclaim.c */
extern int	pgque_reclaim_pass(void);

/* ---- state.c: the shared-memory state table ---- */

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

typedef struct PgqueWorkerSlot
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
	/* memory (the worker_memory alert, ADR 0035); the process's slot only */
	uint64		memory;			/* bytes under TopMemoryContext after its last pass */
	TimestampTz memory_at;		/* when measured; 0: not yet */
	char		last_error[PGQUE_ERRMSG_LEN];
	char		detail[PGQUE_ERRMSG_LEN];	/* what the worker reports of itself */
} PgqueWorkerSlot;

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
	pg_atomic_uint32 dirty[PGQUE_DIRTY_WORDS];	/* see PGQUE_DIRTY_BITS */
	TimestampTz last_tick;		/* last tick written by the ticker */
	TimestampTz last_maint;		/* last completed maintenance pass */
	bool		schema_warned;	/* said once that the SQL is older than the library */
	bool		combined;		/* one process runs the three loops (ADR 0026) */
	bool		unlisted_pause; /* PAUSED by the launcher because pgque_bgw.databases
								 * (or pg_database) no longer listed it, not by a
								 * utility command: listed again, it runs again */
	char		unserved[PGQUE_ERRMSG_LEN]; /* why a wanted worker is not running; "" */
	PgqueWorkerSlot workers[PGQUE_NKINDS];
} PgqueDb;

typedef struct PgqueShared
{
	LWLock	   *lock;			/* protects everything but the wake flags */
	pid_t		launcher_pid;
	int			launcher_pgprocno;
	bool		launcher_wake_scan; /* rescan databases now */
	uint64		launcher_memory;	/* as PgqueWorkerSlot.memory, of the launcher */
	TimestampTz launcher_memory_at;
	int			max_dbs;
	int			dbs_unlisted;	/* databases the table had no room for */
	PgqueDb		dbs[FLEXIBLE_ARRAY_MEMBER];
} PgqueShared;

extern PgqueShared *pgque_shared;
extern void pgque_state_request(void);
extern void pgque_state_startup(void);
extern PgqueDb *pgque_find_db(Oid dboid);	/* caller holds the lock */
extern const char *pgque_kind_name(PgqueWorkerKind kind);
extern const char *pgque_db_state_name(PgqueDbState state);
extern void pgque_wake_launcher(void);
extern void pgque_slot_mark_up(PgqueWorkerSlot *slot, TimestampTz now);

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

/* ---- wake.c: commit-time wake-ups ---- */
extern void pgque_note_event_inserted(int32 queue_id);
extern void pgque_forget_leases_at_commit(void);
extern void pgque_wake_ticker(Oid dboid);
extern void pgque_mark_all_dirty(PgqueDb *db);
extern void pgque_prepared_committed(void);
extern void pgque_register_xact_callback(void);

/* ---- worker.c: the skeleton every worker runs ---- */
typedef void (*pgque_unit_fn) (void *arg);

/*
 * What a loop (ticker.c, maint.c, watchdog.c) plugs into the skeleton:
 * init returns its state (allocated in TopMemoryContext); pass runs one pass
 * (units through pgque_run_unit) with cxt current, which is emptied before
 * and after each pass: what must outlive a pass goes to a context of its
 * own, named, on purpose (ADR 0035); next_pass
 * says when the next pass is due (asked again after every wake-up);
 * exit_check_ms is how often to check that the extension is still there.
 */
typedef struct PgqueLoop
{
	PgqueWorkerKind kind;
	void	   *(*init) (void);
	void		(*pass) (void *state, MemoryContext cxt);
	TimestampTz (*next_pass) (void *state);
	int			exit_check_ms;
} PgqueLoop;

extern PgqueDb *pgque_worker_db;
extern PgqueWorkerKind pgque_worker_kind;
extern void pgque_worker_start(PgqueWorkerKind kind);
extern void pgque_worker_run(const PgqueLoop *const *loops, int nloops);
extern void pgque_worker_attach(PgqueWorkerKind kind);
extern bool pgque_run_unit(const char *what, pgque_unit_fn fn, void *arg);
extern bool pgque_unit_abandoned;
extern char pgque_unit_errmsg[PGQUE_ERRMSG_LEN * 4];
extern int	pgque_unit_sqlerrcode;
extern bool pgque_extension_present(void);
extern bool pgque_schema_current;
/*
 * The installed SQL's version as a number (0.2.0 -> 200), the library's
 * until a worker has read it.  A server restarted with a newer library keeps a database's
 * older SQL until ALTER EXTENSION pgque_bgw UPDATE (ADR 0019): the workers
 * call only what that version has, each call that a version added behind
 * PGQUE_SQL_HAS(PGQUE_SQL_x_y_z) of the version that added it.
 */
extern int	pgque_schema_version;
#define PGQUE_SQL_0_2_0 200
#define PGQUE_SQL_0_3_0 300
#define PGQUE_SQL_HAS(v) (pgque_schema_version >= (v))
/*
 * The lock that quiesces the workers of a database while its extension is
 * updated or dropped: the object lock of extension pgque_bgw with this
 * sub-id, which no PostgreSQL command takes (they use sub-id 0, and DROP
 * takes it before checking ownership, so any role could queue on that
 * one).  The utility hook takes it in ACCESS EXCLUSIVE mode for the owner's
 * ALTER EXTENSION ... UPDATE and DROP EXTENSION, every unit of work in
 * ACCESS SHARE mode before anything else: a unit waits for the update and
 * then runs on the new SQL, an update waits for the units under way, and
 * neither holds anything the other waits for (ADR 0046).
 */
#define PGQUE_EXTENSION_DDL_SUBID 0x7071
extern void pgque_worker_exit_if_gone(void);
extern void pgque_worker_report(const char *fmt,...) pg_attribute_printf(1, 2);
extern uint64 pgque_memory_in_use(void);
extern void pgque_publish_memory(void);
extern long pgque_wait(long timeout_ms);
extern int64 pgque_spi_int8(const char *sql, int nargs, Oid *argtypes, Datum *args, bool *isnull);

/* ---- restore.c: act only on a whole queue state (ADR 0022) ---- */
extern bool pgque_state_held(MemoryContext cxt);

/* ---- launcher.c, ticker.c, maint.c, watchdog.c ---- */
extern void pgque_register_launcher(void);
extern PGDLLEXPORT void pgque_launcher_main(Datum arg);
extern PGDLLEXPORT void pgque_worker_main(Datum arg);
extern const PgqueLoop pgque_ticker_loop;
extern const PgqueLoop pgque_maint_loop;
extern const PgqueLoop pgque_watchdog_loop;

/* ---- supervise.c: worker_down alerts (ADR 0028) ---- */
extern bool pgque_worker_alerts_due(bool for_watchdog);
extern void pgque_worker_alerts_pass(void);

/* ---- utility.c: keep DROP DATABASE and friends unblocked ---- */
extern void pgque_install_utility_hook(void);
extern void pgque_install_object_access_hook(void);

/* ---- srf.c: helpers for SQL-callable C functions ---- */
struct FunctionCallInfoBaseData;
struct Tuplestorestate;
extern MemoryContext pgque_materialize(struct FunctionCallInfoBaseData *fcinfo,
									   struct Tuplestorestate **ts, TupleDesc *desc);

/* ---- rules.c: what C and SQL share (rules.h: pgque_check_queue_name, pgque_slot_of) ---- */
#include "rules.h"

/* ---- produce.c: the producer (producer.h has the rest of it) ---- */
struct varlena;
extern int64 pgque_insert_fields(struct varlena *queue_name, const Datum *fields,
								 const bool *nulls, Oid producer);

/* caller.c: the role the workers, the producer and CDC run as (ADR 0042) */
extern Oid	pgque_run_as_role(void);
extern Oid	pgque_extension_owner(void);

#endif							/* PGQUE_BGW_H */
