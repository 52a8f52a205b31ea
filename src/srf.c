/*
 * srf.c
 *		Generic helpers for SQL-callable C functions: the setup of a
 *		materialized set-returning call, used by every C function that
 *		returns rows (status.c, slot_sql.c, coop.c, window.c).
 */
#include "postgres.h"

#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
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
