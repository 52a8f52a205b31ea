/*
 * cdc.h
 *		What the change-data-capture triggers (cdc.c) and their row
 *		encoders (cdc_encode.c) share, and the check the object-access hook
 *		(utility.c) makes when a trigger is created.
 */
#ifndef PGQUE_CDC_H
#define PGQUE_CDC_H

#include "postgres.h"
#include "textdomain.h"

#include "access/htup.h"
#include "access/tupdesc.h"
#include "lib/stringinfo.h"

extern void pgque_cdc_check_attach(Oid tgoid);
extern void pgque_cdc_urlencode(StringInfo buf, const char *s);
extern void pgque_cdc_urlenc_row(StringInfo buf, TupleDesc desc, HeapTuple row,
								 const bool *left_out);
extern void pgque_cdc_json_row(StringInfo buf, TupleDesc desc, HeapTuple row,
							   const bool *left_out);
extern void pgque_cdc_sql_insert(StringInfo buf, TupleDesc desc, HeapTuple row,
								 const bool *left_out);
extern void pgque_cdc_sql_where(StringInfo buf, TupleDesc desc, HeapTuple row,
								const bool *is_pk);
extern void pgque_cdc_sql_update(StringInfo buf, TupleDesc desc, HeapTuple newrow,
								 HeapTuple oldrow, const bool *left_out,
								 const bool *is_pk, const bool *changed);
extern bool pgque_cdc_changed(TupleDesc desc, HeapTuple oldrow, HeapTuple newrow, int i);

#endif							/* PGQUE_CDC_H */
