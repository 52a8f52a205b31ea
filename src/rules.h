/*
 * rules.h
 *		Rules that the C code and the SQL parts share, written once.
 *
 * Limits: each "#define PGQUE_<NAME> <number>" line below is also
 * substituted for @PGQUE_<NAME>@ in sql/NN_*.sql by the Makefile when it
 * assembles the install and upgrade scripts, so the SQL checks and the C
 * buffers cannot disagree.  Keep one define per line, a plain number.
 *
 * Algorithms: the partition slot (and bucket) of a key is computed by
 * pgque_slot_of() in rules.c, which SQL calls as pgque._slot_of().
 */
#ifndef PGQUE_RULES_H
#define PGQUE_RULES_H

#include "textdomain.h"

#include "postgres.h"

/* queue names: the NOTIFY channel pgque_<name> must fit in NAMEDATALEN - 1 */
#define PGQUE_QUEUE_NAME_MAX 57

/* subconsumer (cooperative member) names: a key of coop.c's shared table */
#define PGQUE_COOP_NAME_MAX 64

/*
 * Per-queue rights (ADR 0047): at most this many roles hold each right
 * (send, subscribe) on one queue; the producer caches them with the queue.
 */
#define PGQUE_QUEUE_GRANTEES_MAX 32

/*
 * Per-consumer users (ADR 0058): at most this many roles may be granted the
 * use of one consumer besides its owner (grant_consumer).
 */
#define PGQUE_CONSUMER_USERS_MAX 32

/*
 * The shared-memory tables filled by callers (slots.c, coop.c; ADR 0041):
 * the last 1/PGQUE_SHMEM_RESERVE_SHARE of each (at least one entry) is kept
 * for superusers, so that no other role, however many databases it spreads
 * over or installed the extension in, can fill it for them.
 */
#define PGQUE_SHMEM_RESERVE_SHARE 16

/*
 * receive_wait() (ADR 0102) waits at most this many seconds in one call:
 * the call's transaction holds its snapshot (and so the database's xmin
 * horizon) while it waits.
 */
#define PGQUE_RECEIVE_WAIT_MAX_S 60

static inline int
pgque_shmem_reserve(int capacity)
{
	return Max(1, capacity / PGQUE_SHMEM_RESERVE_SHARE);
}

struct varlena;
extern void pgque_check_queue_name(struct varlena *name);
extern int32 pgque_slot_of(Datum key, bool isnull, int32 n);
extern void pgque_event_table(char *buf, int32 queue_id, int32 table, int32 bucket);
extern void pgque_event_seq(char *buf, int32 queue_id, bool tick);
extern void pgque_check_queue_right(const char *queue_name, const char *right,
									const Oid *grantees, int ngrantees);
extern bool pgque_role_anchored(Oid role);
extern bool pgque_may_use(Oid caller, Oid owner, const Oid *users, int nusers);
extern bool pgque_caller_is_admin(Oid caller);
extern void pgque_check_queue_right_of(Oid role, const char *queue_name, const char *right,
									   const Oid *grantees, int ngrantees);
extern void pgque_check_queue_right_anchored(Oid role, const char *queue_name, const char *right,
											 const Oid *grantees, const bool *anchored,
											 int ngrantees);

#endif							/* PGQUE_RULES_H */
