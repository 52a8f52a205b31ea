/*
 * wake.h
 *		Commit-time wake-ups (wake.c): producers mark their queues dirty and
 *		set the ticker's latch when their transaction commits (ADR 0010,
 *		0031); a transaction that wrote a tick wakes the receives waiting
 *		for its queue when it commits (ADR 0102).
 */
#ifndef PGQUE_WAKE_H
#define PGQUE_WAKE_H

#include "textdomain.h"

#include "datatype/timestamp.h"

struct PgqueDb;

extern void pgque_note_event_inserted(int32 queue_id);
extern void pgque_forget_leases_at_commit(void);
extern void pgque_wake_ticker(Oid dboid);
extern void pgque_mark_all_dirty(struct PgqueDb *db);
extern void pgque_prepared_committed(void);
extern void pgque_register_xact_callback(void);

/* receives waiting for a tick (ADR 0102) */
extern void pgque_tick_waits_request(void);
extern void pgque_tick_waits_startup(void);
extern bool pgque_tick_waits_available(void);
extern uint64 pgque_tick_generation(int32 queue_id);
extern bool pgque_tick_wait(int32 queue_id, uint64 generation, TimestampTz deadline);
extern void pgque_tick_wakes(int32 queue_id);

#endif							/* PGQUE_WAKE_H */
