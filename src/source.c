/*
 * source.c
 *		The writer of a window's source (ADR 0133): pgque._source_part()
 *		and pgque._source_join(), which _event_source() (sql/20_queue.sql)
 *		calls to put the relations it chose into the one form of source.h,
 *		and pgque_source_single(), receive.c's test of their number.  The choice of
 *		the relations (which child tables, buckets and filters a window
 *		reads) stays SQL's; how they are written down is C's, beside its
 *		readers.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "utils/array.h"
#include "utils/builtins.h"

#include "source.h"

PG_FUNCTION_INFO_V1(pgque_source_part_sql);
PG_FUNCTION_INFO_V1(pgque_source_join_sql);

/*
 * pgque._source_part(relation text, only bool, filter text) -> text: one
 * relation of schema pgque read whole ("select * from [only ]pgque.<rel>"),
 * followed by filter (SQL's " where ..." or NULL: none).
 */
Datum
pgque_source_part_sql(PG_FUNCTION_ARGS)
{
	StringInfoData buf;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("a source part needs its relation and whether it is read alone (only)")));
	initStringInfo(&buf);
	appendStringInfoString(&buf, PGQUE_SOURCE_SELECT);
	if (PG_GETARG_BOOL(1))
		appendStringInfoString(&buf, PGQUE_SOURCE_ONLY);
	appendStringInfoString(&buf, PGQUE_SOURCE_SCHEMA);
	appendStringInfoString(&buf, quote_identifier(text_to_cstring(PG_GETARG_TEXT_PP(0))));
	if (!PG_ARGISNULL(2))
		appendStringInfoString(&buf, text_to_cstring(PG_GETARG_TEXT_PP(2)));
	PG_RETURN_TEXT_P(cstring_to_text_with_len(buf.data, buf.len));
}

/*
 * pgque._source_join(parts text[]) -> text: the parts as one FROM item, in
 * their order; NULL parts are left out, as array_to_string left them out.
 * No part (an empty array): "()", as before, which no plan reads.  The SQL
 * function is STRICT: a NULL array gives NULL without a call here.
 */
Datum
pgque_source_join_sql(PG_FUNCTION_ARGS)
{
	StringInfoData buf;
	bool		first = true;

	initStringInfo(&buf);
	appendStringInfoString(&buf, PGQUE_SOURCE_OPEN);
	if (!PG_ARGISNULL(0))
	{
		ArrayType  *parts = PG_GETARG_ARRAYTYPE_P(0);
		Datum	   *elems;
		bool	   *nulls;
		int			n;
		int			i;

		if (ARR_ELEMTYPE(parts) != TEXTOID)
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("source parts must be text")));
		deconstruct_array(parts, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
		for (i = 0; i < n; i++)
		{
			if (nulls[i])
				continue;
			if (!first)
				appendStringInfoString(&buf, PGQUE_SOURCE_UNION);
			appendStringInfoString(&buf, TextDatumGetCString(elems[i]));
			first = false;
		}
	}
	appendStringInfoString(&buf, PGQUE_SOURCE_CLOSE);
	PG_RETURN_TEXT_P(cstring_to_text_with_len(buf.data, buf.len));
}

/*
 * Does a source read one relation?  It does when no joiner stands in it: a
 * filter is SQL's (" where pgque._slot_of(...) ..."), never the joiner.
 * The first joiner decides: a bucketed window's 33 parts are not counted.
 */
bool
pgque_source_single(const char *source)
{
	return strstr(source, PGQUE_SOURCE_UNION) == NULL;
}
