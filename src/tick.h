/*
 * tick.h
 *		The tick of one queue and the visit that decides it (tick.c,
 *		ADR 0123): one implementation for the ticker worker and for SQL
 *		(pgque.ticker(), _tick_if_due, _tick_many, the pg_cron fallback).
 */
#ifndef PGQUE_TICK_H
#define PGQUE_TICK_H

#include "textdomain.h"

/* what a visit did */
typedef enum PgqueTickVisit
{
	PGQUE_VISIT_NONE,			/* no tick: not due, not served, being dropped */
	PGQUE_VISIT_BUSY,			/* its row (or its unlogged reset) not waited for */
	PGQUE_VISIT_TICKED			/* a tick was written */
} PgqueTickVisit;

extern PgqueTickVisit pgque_tick_visit(int32 queue_id, bool wait, int64 *tick_id);

#endif							/* PGQUE_TICK_H */
