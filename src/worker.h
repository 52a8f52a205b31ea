/*
 * worker.h
 *		The skeleton every worker runs (worker.c): attach to its worker
 *		entry, loop, one-transaction units run as pgque_owner; and the loops
 *		that plug into it (ticker.c, maint.c, watchdog.c) with what they
 *		share: restore.c (is the queue state whole) and supervise.c (the
 *		worker_down alert).
 */
#ifndef PGQUE_WORKER_H
#define PGQUE_WORKER_H

#include "textdomain.h"

#include "state.h"

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
extern void pgque_record_step(const char *step, const char *queue, bool failed);

/* ---- restore.c: act only on a whole queue state (ADR 0022) ---- */
extern bool pgque_state_held(MemoryContext cxt);

/*
 * The check folded into a pass's first unit (ADR 0118): a pass sets
 * pgque_state_gate to a gate of its own, armed; the next unit checks the
 * state in its transaction before its work, and when the state is held
 * that unit and every later one of the pass do nothing (they return false
 * with pgque_unit_abandoned set: not a failure) and the gate says why.
 */
typedef struct PgqueStateGate
{
	bool		armed;			/* the next unit checks first */
	bool		held;			/* it found the state held: the pass stops */
	const char *why;			/* ... why (in cxt) */
	MemoryContext cxt;
} PgqueStateGate;

extern PgqueStateGate *pgque_state_gate;
extern void pgque_state_gate_check(PgqueStateGate *gate);
extern void pgque_state_gate_report(PgqueStateGate *gate);

/* ---- the loops: ticker.c, maint.c, watchdog.c ---- */
extern const PgqueLoop pgque_ticker_loop;
extern const PgqueLoop pgque_maint_loop;
extern const PgqueLoop pgque_watchdog_loop;

/* ---- supervise.c: worker_down alerts (ADR 0028) ---- */
extern bool pgque_worker_alerts_due(bool for_watchdog);
extern void pgque_worker_alerts_pass(void);

#endif							/* PGQUE_WORKER_H */
