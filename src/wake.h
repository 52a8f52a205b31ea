/*
 * wake.h
 *		Commit-time wake-ups (wake.c): producers mark their queues dirty and
 *		set the ticker's latch when their transaction commits (ADR 0010,
 *		0031).
 */
#ifndef PGQUE_WAKE_H
#define PGQUE_WAKE_H

#include "textdomain.h"

struct PgqueDb;

extern void pgque_note_event_inserted(int32 queue_id);
extern void pgque_forget_leases_at_commit(void);
extern void pgque_wake_ticker(Oid dboid);
extern void pgque_mark_all_dirty(struct PgqueDb *db);
extern void pgque_prepared_committed(void);
extern void pgque_register_xact_callback(void);

#endif							/* PGQUE_WAKE_H */
