/*
 * guc.h
 *		The pgque_bgw.* settings (guc.c; docs/gucs.md describes each one).
 *		The thresholds only SQL reads (long_transaction_after,
 *		resize_stalled_after, key_blocked_after, worker_memory_limit) are
 *		not exported: SQL reads every setting through pgque._setting_secs(),
 *		so the defaults are written once, in guc.c.
 */
#ifndef PGQUE_GUC_H
#define PGQUE_GUC_H

#include "textdomain.h"

extern bool pgque_enabled;
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
extern int	pgque_alert_retention;	/* s */
extern int	pgque_restart_max;	/* ms: cap of the restart back-off */
extern int	pgque_worker_down_after;	/* s */
extern int	pgque_max_databases;
/* the shared-memory tables' sizes and caps (slots.c, coop.c; ADR 0041) */
extern int	pgque_max_slots;
extern int	pgque_max_slots_per_database;
extern int	pgque_max_slots_per_consumer;
extern int	pgque_max_slots_per_role;
extern int	pgque_max_coop_members_per_database;
extern int	pgque_max_coop_members_per_role;
extern int	pgque_worker_mode;	/* PgqueWorkerMode */
typedef enum PgqueWorkerMode
{
	PGQUE_MODE_AUTO,
	PGQUE_MODE_SPLIT,
	PGQUE_MODE_COMBINED
} PgqueWorkerMode;
/* pgque_bgw.error_codes (errcodes.c, ADR 0059) */
typedef enum PgqueErrcodes
{
	PGQUE_ERRCODES_NATIVE,
	PGQUE_ERRCODES_PGQUE
} PgqueErrcodes;
extern int	pgque_error_codes;	/* PgqueErrcodes */
extern void pgque_define_gucs(void);
extern void pgque_warn_inconsistent_settings(void);
extern bool pgque_database_allowed(const char *dbname);

#endif							/* PGQUE_GUC_H */
