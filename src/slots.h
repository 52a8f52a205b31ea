/*
 * slots.h
 *		The shared-memory slot lease table (slots.c) and its SQL face
 *		(slot_sql.c).
 */
#ifndef PGQUE_SLOTS_H
#define PGQUE_SLOTS_H

#include "textdomain.h"

#include "datatype/timestamp.h"

#define PGQUE_CONSUMER_MAX 64
#define PGQUE_WORKER_MAX 64

typedef struct SlotKey
{
	Oid			dboid;
	int32		queue_id;
	int32		slot;
	char		consumer[PGQUE_CONSUMER_MAX + 1];	/* the base name, zero-padded */
} SlotKey;

typedef struct SlotLease
{
	SlotKey		key;
	char		owner[PGQUE_WORKER_MAX + 1];	/* "" = free */
	char		fenced[PGQUE_WORKER_MAX + 1];	/* the owner last taken over from, until it claims again */
	TimestampTz lease_until;
	int64		ttl_ms;
	int64		epoch;			/* only grows; kept across release */
	TimestampTz claimed_at;
	TimestampTz last_receive;
	TimestampTz last_ack;
	int64		claims;
	int64		receives;
	int64		acks;
	Oid			role;			/* login role of the creating session: its quota */
	int			pending_pid;	/* creating transaction still open (its pid); 0 = committed */
	TimestampTz released_at;	/* last release; 0 = held or never released */
} SlotLease;

typedef enum SlotVerdict
{
	SLOT_OK,
	SLOT_NOT_HELD,				/* no lease (never claimed, released, or lost in a restart) */
	SLOT_FENCED					/* another worker holds or took over the lease */
} SlotVerdict;

/* the lease ttl claim_slot accepts: 1 second to 1 day (slot_sql.c checks it) */
#define PGQUE_LEASE_TTL_MIN_MS ((int64) 1000)
#define PGQUE_LEASE_TTL_MAX_MS ((int64) 24 * 3600 * 1000)

extern void pgque_slots_request(void);
extern void pgque_slots_startup(void);
extern bool pgque_slots_available(void);
extern void pgque_slot_key(SlotKey *key, int32 queue_id, const char *consumer, int32 slot);
extern int64 pgque_slot_claim(const SlotKey *key, const char *worker, int64 ttl_ms, int64 (*new_epoch) (void));
extern bool pgque_slot_release(const SlotKey *key, const char *worker);
extern SlotVerdict pgque_slot_check(const SlotKey *key, const char *worker, bool is_ack, SlotLease *snap);
extern SlotVerdict pgque_slot_holds(const SlotKey *key, const char *worker, int64 epoch, SlotLease *snap);
extern int	pgque_slot_forget(Oid dboid, int32 queue_id, const char *consumer);
extern int	pgque_slot_forget_at_commit(int32 queue_id, const char *consumer);
extern SlotLease *pgque_slot_list(Oid dboid, int *count);
extern int	pgque_slot_count_all(void);
extern int	pgque_slot_reclaim(TimestampTz released_before);
extern int	pgque_slot_drop_if(const SlotKey *key, int64 epoch);

#endif							/* PGQUE_SLOTS_H */
