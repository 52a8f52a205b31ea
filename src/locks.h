/*
 * locks.h
 *		The extension's own serialisation locks (src/locks.c, ADR 0040).
 */
#ifndef PGQUE_LOCKS_H
#define PGQUE_LOCKS_H

#include "postgres.h"
#include "textdomain.h"

#include "fmgr.h"

/* pgque._lock(i_class regclass, i_key int8, i_exclusive, i_wait) */
extern Datum pgque_lock(PG_FUNCTION_ARGS);
/* the queue's DDL lock (pgque._queue_lock) */
extern bool pgque_queue_lock(int32 queue_id, bool exclusive, bool wait);

#endif							/* PGQUE_LOCKS_H */
