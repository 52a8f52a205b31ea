/*
 * pgque_bgw.h
 *		The module's entry points (pgque_bgw.c: _PG_init; the launcher and
 *		worker mains; the hooks) and the small helpers every SQL-callable
 *		file uses.  Each module declares its own API in a header of its own:
 *		  guc.h       the settings              state.h   the state table, budget
 *		  wake.h      commit-time wake-ups      worker.h  the skeleton and the loops
 *		  caller.h    who called, run-as role   slots.h   partition slot leases
 *		  window.h    the batch-window read     coop.h    cooperative members
 *		  producer.h  the producer              cdc.h     the CDC encoders
 *		  kept_plan.h kept SPI plans            rules.h   what C and SQL share
 *		  compat.h    every PG_VERSION_NUM branch
 *		  textdomain.h the message domain (errcodes.c tells pgque's errors by it)
 *
 * Layering (arrows point down; no file calls one above it):
 *   pgque_bgw.c (_PG_init, the workers' entry point)
 *     -> launcher.c, ticker.c, maint.c, watchdog.c, utility.c, supervise.c
 *       -> worker.c (what every worker shares), wake.c, state.c (shared memory),
 *          budget.c (how many workers the server has room for)
 *         -> guc.c, produce.c (with queue_cache.c, insert_plan.c: producer.h;
 *            cdc.c, the CDC triggers, sits beside the SQL entry points and
 *            calls produce.c's pgque_insert_fields)
 *           -> caller.c, rules.c (rules.h: limits and the slot hash SQL shares),
 *              srf.c (set-returning helpers), compat.h
 */
#ifndef PGQUE_BGW_H
#define PGQUE_BGW_H

#include "postgres.h"
#include "textdomain.h"

#include "access/tupdesc.h"

/* ---- pgque_bgw.c ---- */
extern bool pgque_is_preloaded(void);

/* ---- launcher.c, and the workers' entry point (pgque_bgw.c) ---- */
extern void pgque_register_launcher(void);
extern PGDLLEXPORT void pgque_launcher_main(Datum arg);
extern PGDLLEXPORT void pgque_worker_main(Datum arg);

/* ---- utility.c: keep DROP DATABASE and friends unblocked ---- */
extern void pgque_install_utility_hook(void);
extern void pgque_install_object_access_hook(void);

/* ---- errcodes.c: pgque_bgw.error_codes (ADR 0059) ---- */
extern void pgque_install_errcode_hooks(void);

/* ---- reclaim.c: shared-memory entries that protect nothing (ADR 0041) ---- */
extern int	pgque_reclaim_pass(void);

/* ---- srf.c: helpers for SQL-callable C functions ---- */
struct FunctionCallInfoBaseData;
struct Tuplestorestate;
extern MemoryContext pgque_materialize(struct FunctionCallInfoBaseData *fcinfo,
									   struct Tuplestorestate **ts, TupleDesc *desc);

/*
 * C that takes the values of a statement's columns as given types (an
 * event row, a pgque.queue row through SPI) checks them first: an owner
 * may ALTER a column's type, and a value read as another type crashes the
 * backend or worker (ADR 0098, 0105).  -1: desc has these types; the
 * first column that is not (natts: their number differs).
 */
extern int	pgque_columns_mismatch(TupleDesc desc, const Oid *types, int natts);

/* ... or an ERROR (42804) naming the table's column and saying what to do */
extern void pgque_check_columns(TupleDesc desc, const Oid *types, int natts,
								const char *table, const char *hint);

#endif							/* PGQUE_BGW_H */
