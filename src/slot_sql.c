/*
 * slot_sql.c
 *		SQL-callable face of the slot lease table: claim, release, the lease
 *		check of the partitioned API, forget, and the listing behind
 *		pgque.partition_slot_status.  The SQL wrappers (sql/45_partition.sql)
 *		validate names, N and slot numbers first; these check the lease.
 *
 * SQLSTATEs of the lease check, so that workers can tell them apart:
 *   PQ001  the caller holds no lease on the slot (never claimed, released,
 *          or lost in a server restart): claim it again
 *   PQ002  another worker holds (or took over) the lease: this worker is
 *          fenced and must drop the batch
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "commands/sequence.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "compat.h"
#include "pgque_bgw.h"
#include "slots.h"

#define ERRCODE_PGQUE_LEASE_NOT_HELD MAKE_SQLSTATE('P','Q','0','0','1')
#define ERRCODE_PGQUE_LEASE_FENCED MAKE_SQLSTATE('P','Q','0','0','2')

PG_FUNCTION_INFO_V1(pgque_slot_claim_sql);
PG_FUNCTION_INFO_V1(pgque_slot_release_sql);
PG_FUNCTION_INFO_V1(pgque_slot_check_sql);
PG_FUNCTION_INFO_V1(pgque_slot_forget_sql);
PG_FUNCTION_INFO_V1(pgque_slot_leases_sql);

static void
require_slots(void)
{
	if (!pgque_slots_available())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("partition slot leases need pgque_bgw in shared_preload_libraries"),
				 errdetail("Slot ownership lives in shared memory, which only a preloaded library has."),
				 errhint("Add pgque_bgw to shared_preload_libraries and restart; the plain queue API works without it.")));
}

/* The next epoch: a WAL-logged sequence, so epochs grow across restarts. */
static int64
next_epoch(void)
{
	Oid			seq = get_relname_relid("slot_epoch_seq", get_namespace_oid("pgque", false));

	if (!OidIsValid(seq))
		elog(ERROR, "sequence pgque.slot_epoch_seq is missing");
	return nextval_internal(seq, false);
}

static void
make_key(FunctionCallInfo fcinfo, SlotKey *key)
{
	pgque_slot_key(key, PG_GETARG_INT32(0), text_to_cstring(PG_GETARG_TEXT_PP(1)), PG_GETARG_INT32(2));
}

/*
 * The lease ttl a claim may ask for: between 1 second and 1 day
 * (docs/partition-keys.md), checked once, here, for claim_slot and for any
 * direct caller, so that lease_until cannot overflow.  -> milliseconds.
 * An interval's month counts 30 days, as interval comparison does.
 */
static int64
lease_ttl_ms(Interval *ttl)
{
	double		usecs = (double) ttl->time + (double) ttl->day * USECS_PER_DAY +
		(double) ttl->month * DAYS_PER_MONTH * USECS_PER_DAY;

	if (usecs < PGQUE_LEASE_TTL_MIN_MS * 1000.0 || usecs > PGQUE_LEASE_TTL_MAX_MS * 1000.0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("ttl must be between 1 second and 1 day, got %s",
						DatumGetCString(DirectFunctionCall1(interval_out, IntervalPGetDatum(ttl)))),
				 errhint("A worker renews its lease with every receive and ack; a short ttl hands a dead worker's slots over sooner.")));
	return (int64) (usecs / 1000.0);
}

/*
 * pgque._lease_ttl_check(ttl): the same check for SQL that must refuse a bad
 * ttl before it knows which slot it claims (claim_any_slot, which may claim
 * none).
 */
PG_FUNCTION_INFO_V1(pgque_lease_ttl_check_sql);
Datum
pgque_lease_ttl_check_sql(PG_FUNCTION_ARGS)
{
	(void) lease_ttl_ms(PG_GETARG_INTERVAL_P(0));
	PG_RETURN_VOID();
}

/*
 * pgque._slot_claim(queue_id, consumer, slot, worker, ttl interval) -> epoch
 * or NULL.  0.2.0's SQL (a database not yet updated, ADR 0019) declares it
 * with the ttl in milliseconds, int8, under the symbol pgque_slot_claim_sql:
 * that one stays, so that an old declaration never reads its int8 as an
 * interval; its bounds are the same constants.
 */
static Datum slot_claim(FunctionCallInfo fcinfo, int64 ttl_ms);

PG_FUNCTION_INFO_V1(pgque_slot_claim_ttl_sql);
Datum
pgque_slot_claim_ttl_sql(PG_FUNCTION_ARGS)
{
	return slot_claim(fcinfo, lease_ttl_ms(PG_GETARG_INTERVAL_P(4)));
}

/* 0.2.0's declaration: the ttl in milliseconds */
Datum
pgque_slot_claim_sql(PG_FUNCTION_ARGS)
{
	int64		ttl_ms = PG_GETARG_INT64(4);

	if (ttl_ms < PGQUE_LEASE_TTL_MIN_MS || ttl_ms > PGQUE_LEASE_TTL_MAX_MS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("lease ttl must be between 1 second and 1 day, got " INT64_FORMAT " ms", ttl_ms)));
	return slot_claim(fcinfo, ttl_ms);
}

static Datum
slot_claim(FunctionCallInfo fcinfo, int64 ttl_ms)
{
	SlotKey		key;
	int64		epoch;

	require_slots();
	make_key(fcinfo, &key);
	epoch = pgque_slot_claim(&key, text_to_cstring(PG_GETARG_TEXT_PP(3)), ttl_ms, next_epoch);
	if (epoch < 0)
		PG_RETURN_NULL();
	PG_RETURN_INT64(epoch);
}

/* pgque._slot_release(queue_id, consumer, slot, worker) -> released? */
Datum
pgque_slot_release_sql(PG_FUNCTION_ARGS)
{
	SlotKey		key;

	require_slots();
	make_key(fcinfo, &key);
	PG_RETURN_BOOL(pgque_slot_release(&key, text_to_cstring(PG_GETARG_TEXT_PP(3))));
}

/* Raise PQ001 / PQ002 for a verdict other than SLOT_OK (the file header). */
static void
raise_verdict(SlotVerdict v, const SlotKey *key, const char *worker, const char *queue_name,
			  const SlotLease *snap)
{
	switch (v)
	{
		case SLOT_OK:
			break;
		case SLOT_NOT_HELD:
			ereport(ERROR,
					(errcode(ERRCODE_PGQUE_LEASE_NOT_HELD),
					 errmsg("worker \"%s\" holds no lease on slot %d of consumer \"%s\" on queue \"%s\"",
							worker, key->slot, key->consumer, queue_name),
					 errdetail("The slot was never claimed, was released, or its lease was lost in a server restart."),
					 errhint("Claim it with pgque.claim_slot() and receive again.")));
			break;
		case SLOT_FENCED:
			if (snap->owner[0] == '\0')
				ereport(ERROR,
						(errcode(ERRCODE_PGQUE_LEASE_FENCED),
						 errmsg("slot %d of consumer \"%s\" on queue \"%s\" was taken over from worker \"%s\" (now epoch " INT64_FORMAT ")",
								key->slot, key->consumer, queue_name, worker, snap->epoch),
						 errdetail("Its lease expired and another worker took the slot and its open batch over (and has released it since)."),
						 errhint("Drop the work in hand and claim the slot again.")));
			ereport(ERROR,
					(errcode(ERRCODE_PGQUE_LEASE_FENCED),
					 errmsg("slot %d of consumer \"%s\" on queue \"%s\" is held by worker \"%s\" (epoch " INT64_FORMAT "), not by \"%s\"",
							key->slot, key->consumer, queue_name, snap->owner, snap->epoch, worker),
					 errdetail("Leases are exclusive: a worker whose lease expired and was taken over is fenced, and its open batch goes to the new owner."),
					 errhint("Drop the work in hand and claim another slot.")));
			break;
	}
}

/*
 * pgque._slot_check(queue_id, consumer, slot, worker, is_ack, queue_name)
 * -> epoch; raises PQ001 / PQ002 (see the file header).
 */
Datum
pgque_slot_check_sql(PG_FUNCTION_ARGS)
{
	SlotKey		key;
	SlotLease	snap;
	char	   *worker = text_to_cstring(PG_GETARG_TEXT_PP(3));

	require_slots();
	make_key(fcinfo, &key);
	raise_verdict(pgque_slot_check(&key, worker, PG_GETARG_BOOL(4), &snap),
				  &key, worker, text_to_cstring(PG_GETARG_TEXT_PP(5)), &snap);
	PG_RETURN_INT64(snap.epoch);
}

PG_FUNCTION_INFO_V1(pgque_slot_recheck_sql);

/*
 * pgque._slot_recheck(queue_id, consumer, slot, worker, epoch, queue_name):
 * the fence after an ack's or nack's writes: raises PQ001 / PQ002 unless
 * worker still holds the lease under epoch (a takeover in between draws a
 * new epoch, also when the same worker claimed again).  Renews nothing.
 */
Datum
pgque_slot_recheck_sql(PG_FUNCTION_ARGS)
{
	SlotKey		key;
	SlotLease	snap;
	char	   *worker = text_to_cstring(PG_GETARG_TEXT_PP(3));
	SlotVerdict v;

	require_slots();
	make_key(fcinfo, &key);
	v = pgque_slot_holds(&key, worker, PG_GETARG_INT64(4), &snap);
	raise_verdict(v, &key, worker, text_to_cstring(PG_GETARG_TEXT_PP(5)), &snap);
	PG_RETURN_VOID();
}

/*
 * pgque._slot_forget(queue_id, consumer) -> the entries it will remove when
 * the transaction commits (an abort keeps them: slots.c).  NULL queue_id:
 * every lease of this database; NULL consumer: every consumer of the queue.
 * Without preload there is nothing to forget.
 */
Datum
pgque_slot_forget_sql(PG_FUNCTION_ARGS)
{
	/*
	 * One consumer of every queue is no target the commit's lookup knows
	 * (forget_covers(): a queue's consumer, a queue, all): refused, not
	 * counted and then never applied.
	 */
	if (PG_ARGISNULL(0) && !PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("a forget of one consumer's slot leases needs its queue")));
	if (!pgque_slots_available())
		PG_RETURN_INT32(0);
	PG_RETURN_INT32(pgque_slot_forget_at_commit(PG_ARGISNULL(0) ? -1 : PG_GETARG_INT32(0),
												PG_ARGISNULL(1) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(1))));
}

/*
 * pgque._slot_leases() -> this database's lease entries: (queue_id,
 * consumer, slot, owner, lease_until, ttl, epoch, claimed_at, last_receive,
 * last_ack, claims, receives, acks).  Reading writes nothing.
 */
Datum
pgque_slot_leases_sql(PG_FUNCTION_ARGS)
{
	TupleDesc	desc;
	Tuplestorestate *ts;
	MemoryContext old;
	SlotLease  *list;
	int			n = 0;
	int			i;

	old = pgque_materialize(fcinfo, &ts, &desc);

	list = pgque_slots_available() ? pgque_slot_list(MyDatabaseId, &n) : NULL;
	for (i = 0; i < n; i++)
	{
		SlotLease  *e = &list[i];
		Datum		v[13];
		bool		nulls[13];

		memset(nulls, 0, sizeof(nulls));
		v[0] = Int32GetDatum(e->key.queue_id);
		v[1] = CStringGetTextDatum(e->key.consumer);
		v[2] = Int32GetDatum(e->key.slot);
		if (e->owner[0] != '\0')
			v[3] = CStringGetTextDatum(e->owner);
		else
			nulls[3] = true;
		v[4] = TimestampTzGetDatum(e->lease_until);
		nulls[4] = e->lease_until == 0;
		v[5] = Int64GetDatum(e->ttl_ms);
		v[6] = Int64GetDatum(e->epoch);
		v[7] = TimestampTzGetDatum(e->claimed_at);
		nulls[7] = e->claimed_at == 0;
		v[8] = TimestampTzGetDatum(e->last_receive);
		nulls[8] = e->last_receive == 0;
		v[9] = TimestampTzGetDatum(e->last_ack);
		nulls[9] = e->last_ack == 0;
		v[10] = Int64GetDatum(e->claims);
		v[11] = Int64GetDatum(e->receives);
		v[12] = Int64GetDatum(e->acks);
		tuplestore_putvalues(ts, desc, v, nulls);
	}
	MemoryContextSwitchTo(old);
	return (Datum) 0;
}

PG_FUNCTION_INFO_V1(pgque_slot_count_all_sql);

/*
 * pgque._slot_lease_count_all() -> entries in the lease table, all
 * databases: lets a test (and an operator) see that DROP EXTENSION and DROP
 * DATABASE leave nothing behind.
 */
Datum
pgque_slot_count_all_sql(PG_FUNCTION_ARGS)
{
	if (!pgque_slots_available())
		PG_RETURN_INT32(0);
	PG_RETURN_INT32(pgque_slot_count_all());
}
