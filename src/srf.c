/*
 * srf.c
 *		Generic helpers for SQL-callable C functions: the setup of a
 *		materialized set-returning call, used by every C function that
 *		returns rows (status.c, slot_sql.c, coop.c, window.c); the check of
 *		a result's column types before C takes its values as those types
 *		(window.c, queue_cache.c, reclaim.c).
 */
#include "postgres.h"

#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/tuplestore.h"

#include "pgque_bgw.h"

/*
 * Set up a materialized set-returning call: the tuplestore and tuple
 * descriptor are returned, and the per-query memory context is made
 * current (the previous one is returned, to switch back to).
 */
MemoryContext
pgque_materialize(FunctionCallInfo fcinfo, Tuplestorestate **ts, TupleDesc *desc)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	MemoryContext old;

	if (rsinfo == NULL || !IsA(rsinfo, ReturnSetInfo) ||
		!(rsinfo->allowedModes & SFRM_Materialize))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("set-valued function called in context that cannot accept a set")));
	if (get_call_result_type(fcinfo, NULL, desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");

	old = MemoryContextSwitchTo(rsinfo->econtext->ecxt_per_query_memory);
	*ts = tuplestore_begin_heap(true, false, work_mem);
	rsinfo->returnMode = SFRM_Materialize;
	rsinfo->setResult = *ts;
	rsinfo->setDesc = *desc;
	return old;
}

int
pgque_columns_mismatch(TupleDesc desc, const Oid *types, int natts)
{
	int			i;

	if (desc->natts != natts)
		return natts;
	for (i = 0; i < natts; i++)
		if (TupleDescAttr(desc, i)->atttypid != types[i])
			return i;
	return -1;
}

void
pgque_check_columns(TupleDesc desc, const Oid *types, int natts, const char *table, const char *hint)
{
	int			i = pgque_columns_mismatch(desc, types, natts);
	Form_pg_attribute att;

	if (i < 0)
		return;
	if (i == natts)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("read of %s returned %d columns, expected %d", table, desc->natts, natts),
				 errhint("%s", hint)));
	att = TupleDescAttr(desc, i);
	ereport(ERROR,
			(errcode(ERRCODE_DATATYPE_MISMATCH),
			 errmsg("%s column %s is %s, not %s", table, NameStr(att->attname),
					format_type_be(att->atttypid), format_type_be(types[i])),
			 errhint("%s", hint)));
}
