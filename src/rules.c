/*
 * rules.c
 *		The C side of the rules in rules.h: the queue name check and the
 *		partition slot of a key, each also what SQL calls.
 */
#include "postgres.h"

#include "catalog/pg_collation.h"
#include "fmgr.h"
#include "utils/builtins.h"

#include "compat.h"
#include "rules.h"

PG_FUNCTION_INFO_V1(pgque_slot_of_sql);

/*
 * Validate a queue name: not NULL, not empty, at most PGQUE_QUEUE_NAME_MAX
 * bytes.  The same messages and SQLSTATEs as pgque._check_name('queue', ...)
 * in sql/10_util.sql, which gets its limit from rules.h.
 */
void
pgque_check_queue_name(struct varlena *name)
{
	int			len;

	if (name == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("queue name must not be null")));
	len = VARSIZE_ANY_EXHDR(name);
	if (len == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("queue name must not be empty")));
	if (len > PGQUE_QUEUE_NAME_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_NAME_TOO_LONG),
				 errmsg("queue name is too long (%d bytes)", len),
				 errdetail("The limit is %d bytes.", PGQUE_QUEUE_NAME_MAX)));
}

/*
 * The partition slot of a key for n slots (SPEC §3): hashtextextended(key,
 * 0) mod n, made non-negative; a NULL key is slot 0.  The producer routes a
 * key to bucket slot_of(key, B); with N dividing B, bucket mod N is the
 * key's slot.  As the SQL expression it replaces, n = 0 is a division by
 * zero and a negative n gives (-|n|, 0].
 */
int32
pgque_slot_of(Datum key, bool isnull, int32 n)
{
	int64		h;

	if (isnull)
		return 0;
	if (n == 0)
		ereport(ERROR,
				(errcode(ERRCODE_DIVISION_BY_ZERO),
				 errmsg("division by zero")));
	if (n == -1)
		return 0;				/* INT64_MIN % -1 traps in C */
	h = DatumGetInt64(DirectFunctionCall2Coll(hashtextextended, DEFAULT_COLLATION_OID,
											  key, Int64GetDatum(0)));
	return (int32) ((h % n + n) % n);
}

/* pgque._slot_of(key text, n int4) -> int4 */
Datum
pgque_slot_of_sql(PG_FUNCTION_ARGS)
{
	if (PG_ARGISNULL(0))
		PG_RETURN_INT32(0);
	if (PG_ARGISNULL(1))
		PG_RETURN_NULL();
	PG_RETURN_INT32(pgque_slot_of(PG_GETARG_DATUM(0), false, PG_GETARG_INT32(1)));
}
