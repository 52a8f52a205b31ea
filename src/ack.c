/*
 * ack.c
 *		pgque.ack(batch_id) of a plain consumer, and the two rules every
 *		ack of a plain consumer's batch ends in: the part's ack (the rest
 *		of the window open under a fresh batch id) and the whole window's
 *		finish (the cursor at the window's end tick) (ADR 0120).
 *
 * ack was PL/pgSQL: ack -> _check_not_null, _open_batch (the lock, the
 * member and slot lookups, _authorize), _refuse_slot_batch, _ack_batch ->
 * _finish_batch, each a function call and statements through SPI, about
 * 570,000 instructions an ack (ADR 0116).  Here a plain consumer's batch
 * takes two kept statements: its subscription row locked (as _open_batch
 * locks it: the receive lock) and, in the same statement, the caller's
 * right to the consumer and the slot refusal (the SQL rules themselves,
 * _authorize and _refuse_slot_consumer); then the ack's UPDATE.
 * Everything else goes the SQL way, pgque._ack_sql (ack's former body):
 * a NULL id (its error), a hot standby (the row read without a lock, ADR
 * 0089), a batch no plain subscription row holds (a cooperative member's
 * window, a partition slot's epoch row, a fenced member's id, an unknown
 * id -> 0), a row of another role than 'normal'.
 *
 * The part's ack and the finish are here once: pgque._ack_batch and
 * pgque._finish_batch are these functions, which _ack_sql, finish_batch()
 * and receive's finish of an empty window call.  The statements are kept
 * for the session (never freed, so never under a caller still running
 * them, ADR 0037) with generic plans (they look rows up by key, ADR 0033);
 * the plan cache re-analyses them when what they name is dropped and made
 * again (DROP and CREATE EXTENSION in the session): every name in them is
 * schema-qualified, every operator pg_catalog's.
 *
 * pgque.ack is SECURITY DEFINER with a pinned search_path, as the PL/pgSQL
 * one was (ADR 0002, 0014): its statements run as the extension's owner and
 * _authorize checks the session's role.  _ack_batch and _finish_batch are
 * the owner's only (sql/90_grants.sql revokes every function from public).
 */
#include "postgres.h"

#include "access/xlog.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"

#include "kept_plan.h"

PG_FUNCTION_INFO_V1(pgque_ack);
PG_FUNCTION_INFO_V1(pgque_ack_batch_sql);
PG_FUNCTION_INFO_V1(pgque_finish_batch_sql);

/*
 * The open batch's subscription row, locked, when a plain consumer's row
 * holds it (as _open_batch locks it: the receive lock), then the caller's
 * right to the consumer and the refusal of a partition slot's consumer
 * (plain ack refuses it, 42809): the SQL rules themselves, in the order
 * _open_batch and ack checked them, on the row as locked.  The rules are
 * in the outer query over a materialized CTE, so that they run on the
 * row the CTE's lock returned (the latest version, after a wait for a
 * concurrent ack), never on the version the statement's snapshot saw
 * first, as the select list of the locking query itself would.
 */
static SPIPlanPtr lock_plan;

#define LOCK_SQL \
	"with s as materialized (" \
	"  select s.sub_id, s.sub_owner, s.sub_users, s.sub_queue, c.co_name, s.sub_batch_last" \
	"    from pgque.subscription s join pgque.consumer c on c.co_id operator(pg_catalog.=) s.sub_consumer" \
	"   where s.sub_batch operator(pg_catalog.=) $1 and s.sub_role operator(pg_catalog.=) 'normal'" \
	"     for update of s)" \
	" select s.sub_id, s.sub_batch_last," \
	"        pgque._authorize(s.sub_owner, s.sub_users, s.sub_queue, s.co_name)," \
	"        pgque._refuse_slot_consumer(s.co_name, 'ack')" \
	"   from s"

/* the columns of LOCK_SQL */
#define LOCK_SUB_ID 1
#define LOCK_LAST 2

/* the part handed out is acked: the rest of the window open under a fresh id */
static SPIPlanPtr part_plan;

#define PART_SQL \
	"update pgque.subscription" \
	"   set sub_batch = pg_catalog.nextval('pgque.batch_id_seq')," \
	"       sub_batch_pos = sub_batch_last, sub_batch_last = null, sub_active = pg_catalog.now()" \
	" where sub_id operator(pg_catalog.=) $1"

/* the whole window: the cursor moves to the batch's end tick */
static SPIPlanPtr finish_plan;

#define FINISH_SQL \
	"update pgque.subscription" \
	"   set sub_last_tick = sub_next_tick, sub_next_tick = null, sub_batch = null," \
	"       sub_batch_pos = null, sub_batch_last = null, sub_active = pg_catalog.now()" \
	" where sub_batch operator(pg_catalog.=) $1"

/* everything the plain path does not take: ack's PL/pgSQL */
static SPIPlanPtr sql_plan;

#define ACK_SQL "select pgque._ack_sql($1)"

static void
spi_connect(void)
{
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "pgque_bgw: SPI_connect failed");
}

/* The whole window of batch_id finished (inside SPI): 1, or 0 when no row holds it. */
static int32
finish_batch(int64 batch_id)
{
	Oid			types[1] = {INT8OID};
	Datum		args[1];
	int			ret;

	args[0] = Int64GetDatum(batch_id);
	ret = SPI_execute_plan(pgque_kept_generic_once(&finish_plan, FINISH_SQL, 1, types), args, NULL, false, 0);
	if (ret != SPI_OK_UPDATE)
		elog(ERROR, "pgque_bgw: could not finish batch %lld: %s", (long long) batch_id,
			 SPI_result_code_string(ret));
	return SPI_processed > 0 ? 1 : 0;
}

/*
 * What receive handed out of batch_id, subscription sub_id, is acked
 * (inside SPI): the part before sub_batch_last (part), keeping the rest
 * open under a fresh batch id, or the whole window.  -> 1, or 0 when the
 * window's row is gone.
 */
static int32
ack_batch(int32 sub_id, int64 batch_id, bool part)
{
	Oid			types[1] = {INT4OID};
	Datum		args[1];
	int			ret;

	if (!part)
		return finish_batch(batch_id);
	args[0] = Int32GetDatum(sub_id);
	ret = SPI_execute_plan(pgque_kept_generic_once(&part_plan, PART_SQL, 1, types), args, NULL, false, 0);
	if (ret != SPI_OK_UPDATE)
		elog(ERROR, "pgque_bgw: could not ack a part of batch %lld: %s", (long long) batch_id,
			 SPI_result_code_string(ret));
	return 1;
}

/* pgque._ack_sql(batch_id): ack's SQL path (inside SPI) */
static int32
ack_sql(Datum batch_id, bool isnull)
{
	Oid			types[1] = {INT8OID};
	Datum		args[1];
	char		nulls[1];
	bool		null;
	Datum		d;
	int			ret;

	args[0] = batch_id;
	nulls[0] = isnull ? 'n' : ' ';
	ret = SPI_execute_plan(pgque_kept_generic_once(&sql_plan, ACK_SQL, 1, types), args, nulls, false, 1);
	if (ret != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "pgque_bgw: ack's SQL path failed: %s", SPI_result_code_string(ret));
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &null);
	if (null)
		elog(ERROR, "pgque_bgw: ack's SQL path returned NULL");
	return DatumGetInt32(d);
}

/*
 * pgque.ack(batch_id) -> 1 done / 0 unknown or already acked
 */
Datum
pgque_ack(PG_FUNCTION_ARGS)
{
	Oid			lock_types[1] = {INT8OID};
	Datum		args[1];
	int64		batch_id;
	int32		sub_id;
	bool		part;
	bool		null;
	int32		result;
	int			ret;
	HeapTuple	row;
	TupleDesc	desc;

	spi_connect();

	/* a NULL id (the SQL's error) and a hot standby (no lock there) */
	if (PG_ARGISNULL(0) || RecoveryInProgress())
	{
		result = ack_sql(PG_ARGISNULL(0) ? (Datum) 0 : PG_GETARG_DATUM(0), PG_ARGISNULL(0));
		SPI_finish();
		PG_RETURN_INT32(result);
	}
	batch_id = PG_GETARG_INT64(0);

	args[0] = Int64GetDatum(batch_id);
	ret = SPI_execute_plan(pgque_kept_generic_once(&lock_plan, LOCK_SQL, 1, lock_types), args, NULL, false, 1);
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "pgque_bgw: ack could not read batch %lld: %s", (long long) batch_id,
			 SPI_result_code_string(ret));
	if (SPI_processed == 0)
	{
		/* no plain consumer's row holds it: a member's, a slot's, unknown */
		result = ack_sql(Int64GetDatum(batch_id), false);
		SPI_finish();
		PG_RETURN_INT32(result);
	}

	/* the row is locked and the caller may ack it */
	row = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;
	sub_id = DatumGetInt32(SPI_getbinval(row, desc, LOCK_SUB_ID, &null));
	if (null)
		elog(ERROR, "pgque_bgw: ack read a subscription without an id");
	(void) SPI_getbinval(row, desc, LOCK_LAST, &null);
	part = !null;
	result = ack_batch(sub_id, batch_id, part);
	SPI_finish();
	PG_RETURN_INT32(result);
}

/*
 * pgque._ack_batch(s pgque.subscription) -> 1, or what the finish returns:
 * the ack of the plain batch whose row s is (locked by the caller)
 */
Datum
pgque_ack_batch_sql(PG_FUNCTION_ARGS)
{
	HeapTupleHeader s;
	Datum		sub_id;
	Datum		batch_id;
	bool		id_null;
	bool		batch_null;
	bool		last_null;
	int32		result;

	if (PG_ARGISNULL(0))
		PG_RETURN_INT32(0);
	s = PG_GETARG_HEAPTUPLEHEADER(0);
	sub_id = GetAttributeByName(s, "sub_id", &id_null);
	batch_id = GetAttributeByName(s, "sub_batch", &batch_null);
	(void) GetAttributeByName(s, "sub_batch_last", &last_null);
	if (!last_null && id_null)
		elog(ERROR, "pgque_bgw: _ack_batch got a subscription without an id");
	/* no batch: the finish of none, as where sub_batch = NULL found none */
	if (last_null && batch_null)
		PG_RETURN_INT32(0);
	spi_connect();
	result = ack_batch(last_null ? 0 : DatumGetInt32(sub_id),
					   batch_null ? 0 : DatumGetInt64(batch_id), !last_null);
	SPI_finish();
	PG_RETURN_INT32(result);
}

/*
 * pgque._finish_batch(batch_id) -> 1 / 0 unknown: the window closed, the
 * cursor at its end tick
 */
Datum
pgque_finish_batch_sql(PG_FUNCTION_ARGS)
{
	int32		result;

	if (PG_ARGISNULL(0))
		PG_RETURN_INT32(0);
	spi_connect();
	result = finish_batch(PG_GETARG_INT64(0));
	SPI_finish();
	PG_RETURN_INT32(result);
}
