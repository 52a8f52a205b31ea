/*
 * producer.h
 *		The producer side, in five files:
 *		  produce.c      the SQL-callable entry points (send, send_batch,
 *		                 insert_event, _insert_event) and the C one the CDC
 *		                 triggers use; runs the append as the extension owner
 *		  queue_cache.c  what a producer needs of a queue (id, current table,
 *		                 buckets, insert flag, senders) and whom it appends as, cached
 *		                 per backend and flushed by invalidations
 *		  append.c       the append: rows formed and inserted without the
 *		                 executor into a table as the extension made it
 *		  evpost.c       a batch's ev_txid entries as posting tuples on the
 *		                 index's rightmost leaf (evpost.h, ADR 0137)
 *		  insert_plan.c  the kept SPI insert plans, per queue and table, for
 *		                 any other table
 *		Decisions: ADR 0001 (hot path in C), 0004 (queue cache), 0032 (the
 *		append runs as the owner without SECURITY DEFINER), 0085 (the
 *		append without the executor), 0137 (posting tuples).
 */
#ifndef PGQUE_PRODUCER_H
#define PGQUE_PRODUCER_H

#include "postgres.h"
#include "textdomain.h"

#include "executor/spi.h"

#include "rules.h"

/* what a producer needs to know of a queue */
typedef struct QueueInfo
{
	int32		queue_id;
	int32		cur_table;
	int32		nbuckets;		/* partition buckets, 0 for none */
	bool		disabled;
	Oid			event_seq;		/* pgque.event_<id>_id_seq */
	/* the roles granted "send" on it (ADR 0047); -1: no rights (0.2.0's SQL) */
	int			nsenders;
	Oid			senders[PGQUE_QUEUE_GRANTEES_MAX];
	bool		anchored[PGQUE_QUEUE_GRANTEES_MAX];	/* pgque_role_anchored(senders[i]) (ADR 0079) */
} QueueInfo;

/* ---- queue_cache.c ---- */
/* produce.c: the append the CDC triggers use (cdc.c), as the given producer */
extern int64 pgque_insert_fields(struct varlena *queue_name, const Datum *fields,
								 const bool *nulls, Oid producer);
extern void pgque_lookup_queue(text *queue_name, QueueInfo *info);
extern Oid	pgque_producer_owner(void);

/* ---- append.c ---- */
extern void pgque_append_one(const QueueInfo *q, int bucket, Datum *args, bool *isnull);
extern void pgque_append_rows(const QueueInfo *q, int bucket, Datum type_name, const int64 *ids,
							  const Datum *payloads, const bool *pnull, const Datum *keys,
							  const bool *knull, int m);

/* ---- insert_plan.c ---- */

/*
 * Parameters of the single-row insert plan: $1 ev_type, $2 ev_data,
 * $3..$6 ev_extra1..4, $7 ev_id (the caller draws it from the queue's
 * sequence when it has none), $8 ev_time (NULL: now()), $9 ev_owner,
 * $10 ev_retry.
 */
#define INS_TYPE 0
#define INS_DATA 1
#define INS_EXTRA1 2
#define INS_EV_ID 6
#define INS_EV_TIME 7
#define INS_OWNER 8
#define INS_RETRY 9
#define INS_NPARAMS 10

/* the kinds of insert plan kept per target table */
typedef enum InsertKind
{
	INSERT_ONE,					/* one event: the INS_* parameters */
	INSERT_BATCH,				/* $1 type, $2 ids[], $3 payloads[], $4 keys[] (NULL: none) */
	INSERT_NKINDS
} InsertKind;

extern int	pgque_insert_execute(const QueueInfo *q, int bucket, InsertKind kind, Datum *args,
								 const char *nulls, long tcount);

#endif							/* PGQUE_PRODUCER_H */
