/*
 * cdc_encode.c
 *		The row encoders of the change-data-capture triggers (src/cdc.c):
 *		a row as url-encoded key=value pairs (logutriga), as a JSON object
 *		(jsontriga) and as SQL fragments (sqltriga), in PgQ's formats.
 *
 * Every encoder takes the table's tuple descriptor, a row and a "left
 * out" flag per attribute (dropped, ignore=d and _pgq_ev_* columns), and
 * appends to a StringInfo in the caller's memory context.  Nothing here
 * touches the catalogs except through the type output functions.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/json.h"

#include "cdc.h"

/*
 * Url-encoding as PgQ's consumers decode it: letters, digits and "_.-"
 * stay, a space becomes "+", every other byte "%xx" (lower-case hex).
 */
void
pgque_cdc_urlencode(StringInfo buf, const char *s)
{
	static const char hex[] = "0123456789abcdef";

	for (; *s; s++)
	{
		unsigned char c = (unsigned char) *s;

		if (c == ' ')
			appendStringInfoCharMacro(buf, '+');
		else if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
				 (c >= 'A' && c <= 'Z') || c == '_' || c == '.' || c == '-')
			appendStringInfoCharMacro(buf, (char) c);
		else
		{
			appendStringInfoCharMacro(buf, '%');
			appendStringInfoCharMacro(buf, hex[c >> 4]);
			appendStringInfoCharMacro(buf, hex[c & 15]);
		}
	}
}

/* the text form of attribute i (0-based) of a row, NULL for SQL NULL */
static char *
attr_text(HeapTuple row, TupleDesc desc, int i)
{
	return SPI_getvalue(row, desc, i + 1);
}

/* name1=value1&name2&... (a NULL value: the name without "=") */
void
pgque_cdc_urlenc_row(StringInfo buf, TupleDesc desc, HeapTuple row, const bool *left_out)
{
	bool		first = true;
	int			i;

	for (i = 0; i < desc->natts; i++)
	{
		char	   *val;

		if (left_out[i])
			continue;
		if (!first)
			appendStringInfoChar(buf, '&');
		first = false;
		pgque_cdc_urlencode(buf, NameStr(TupleDescAttr(desc, i)->attname));
		val = attr_text(row, desc, i);
		if (val != NULL)
		{
			appendStringInfoChar(buf, '=');
			pgque_cdc_urlencode(buf, val);
			pfree(val);
		}
	}
}

/*
 * {"name":value,...}: booleans and integers as JSON literals, dates and
 * timestamps as to_json() writes them, every other type as the JSON string
 * of its text form (so numeric and json columns arrive as strings, as in
 * PgQ), NULL as null.
 */
void
pgque_cdc_json_row(StringInfo buf, TupleDesc desc, HeapTuple row, const bool *left_out)
{
	bool		first = true;
	int			i;

	appendStringInfoChar(buf, '{');
	for (i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);
		bool		isnull;
		Datum		val;
		char	   *s;

		if (left_out[i])
			continue;
		if (!first)
			appendStringInfoChar(buf, ',');
		first = false;
		escape_json(buf, NameStr(att->attname));
		appendStringInfoChar(buf, ':');

		val = heap_getattr(row, i + 1, desc, &isnull);
		if (isnull)
		{
			appendStringInfoString(buf, "null");
			continue;
		}
		switch (att->atttypid)
		{
			case BOOLOID:
				appendStringInfoString(buf, DatumGetBool(val) ? "true" : "false");
				break;
			case INT2OID:
				appendStringInfo(buf, "%d", (int) DatumGetInt16(val));
				break;
			case INT4OID:
				appendStringInfo(buf, "%d", DatumGetInt32(val));
				break;
			case INT8OID:
				appendStringInfo(buf, INT64_FORMAT, DatumGetInt64(val));
				break;
			case DATEOID:
			case TIMESTAMPOID:
			case TIMESTAMPTZOID:
				s = JsonEncodeDateTime(NULL, val, att->atttypid, NULL);
				escape_json(buf, s);
				pfree(s);
				break;
			default:
				s = attr_text(row, desc, i);
				escape_json(buf, s);
				pfree(s);
				break;
		}
	}
	appendStringInfoChar(buf, '}');
}

/* "name"=<literal> for a key column; a NULL key cannot address a row */
static void
append_key_eq(StringInfo buf, TupleDesc desc, HeapTuple row, int i)
{
	char	   *val = attr_text(row, desc, i);
	const char *name = NameStr(TupleDescAttr(desc, i)->attname);

	if (val == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("key column \"%s\" is null", name),
				 errdetail("sqltriga addresses rows by their key; a null key value cannot be written as SQL."),
				 errhint("Give key columns that are never null with the trigger argument pkey=col,...")));
	appendStringInfo(buf, "%s=%s", quote_identifier(name), quote_literal_cstr(val));
	pfree(val);
}

/* (col,...) values ('v',...,null) */
void
pgque_cdc_sql_insert(StringInfo buf, TupleDesc desc, HeapTuple row, const bool *left_out)
{
	bool		first = true;
	int			i;

	appendStringInfoChar(buf, '(');
	for (i = 0; i < desc->natts; i++)
	{
		if (left_out[i])
			continue;
		if (!first)
			appendStringInfoChar(buf, ',');
		first = false;
		appendStringInfoString(buf, quote_identifier(NameStr(TupleDescAttr(desc, i)->attname)));
	}
	appendStringInfoString(buf, ") values (");
	first = true;
	for (i = 0; i < desc->natts; i++)
	{
		char	   *val;

		if (left_out[i])
			continue;
		if (!first)
			appendStringInfoChar(buf, ',');
		first = false;
		val = attr_text(row, desc, i);
		if (val == NULL)
			appendStringInfoString(buf, "null");
		else
		{
			appendStringInfoString(buf, quote_literal_cstr(val));
			pfree(val);
		}
	}
	appendStringInfoChar(buf, ')');
}

/* pk1='v1' and pk2='v2', from the given (old) row, in column order */
void
pgque_cdc_sql_where(StringInfo buf, TupleDesc desc, HeapTuple row, const bool *is_pk)
{
	bool		first = true;
	int			i;

	for (i = 0; i < desc->natts; i++)
	{
		if (!is_pk[i])
			continue;
		if (!first)
			appendStringInfoString(buf, " and ");
		first = false;
		append_key_eq(buf, desc, row, i);
	}
}

/*
 * col='v',col2=NULL where pk='k': the columns whose value changed (not the
 * left-out ones), the key from the old row.  An update that changed
 * nothing writes the first key column onto itself, so the event still
 * replays as an update.  changed[] comes from pgque_cdc_changed().
 */
void
pgque_cdc_sql_update(StringInfo buf, TupleDesc desc, HeapTuple newrow, HeapTuple oldrow,
					 const bool *left_out, const bool *is_pk, const bool *changed)
{
	bool		first = true;
	int			i;

	for (i = 0; i < desc->natts; i++)
	{
		char	   *val;

		if (left_out[i] || !changed[i])
			continue;
		if (!first)
			appendStringInfoChar(buf, ',');
		first = false;
		val = attr_text(newrow, desc, i);
		appendStringInfo(buf, "%s=%s", quote_identifier(NameStr(TupleDescAttr(desc, i)->attname)),
						 val == NULL ? "NULL" : quote_literal_cstr(val));
	}
	if (first)
	{
		for (i = 0; i < desc->natts && !is_pk[i]; i++)
			;
		append_key_eq(buf, desc, oldrow, i);
	}
	appendStringInfoString(buf, " where ");
	pgque_cdc_sql_where(buf, desc, oldrow, is_pk);
}

/*
 * Whether attribute i differs between two rows: NULL-ness, or the stored
 * image (so 'A' -> 'a' in a case-insensitive type, 1.0 -> 1.00 in numeric
 * count as changes, as a replica would store them).
 */
bool
pgque_cdc_changed(TupleDesc desc, HeapTuple oldrow, HeapTuple newrow, int i)
{
	Form_pg_attribute att = TupleDescAttr(desc, i);
	bool		onull;
	bool		nnull;
	Datum		o = heap_getattr(oldrow, i + 1, desc, &onull);
	Datum		n = heap_getattr(newrow, i + 1, desc, &nnull);

	if (onull || nnull)
		return onull != nnull;
	return !datum_image_eq(o, n, att->attbyval, att->attlen);
}
