/*
 * source.h
 *		The form of a window's source (ADR 0133): the relations a window
 *		reads, written by pgque._event_source() (sql/20_queue.sql) through
 *		the C writers of src/source.c and read back by window_direct.c's
 *		parse and receive.c's choice to stream a part.  Every piece of the
 *		text is spelled here once:
 *
 *			(select * from [only ]pgque.<relation>[<filter>][ union all ...])
 */
#ifndef PGQUE_SOURCE_H
#define PGQUE_SOURCE_H

#define PGQUE_SOURCE_OPEN "("
#define PGQUE_SOURCE_SELECT "select * from "
#define PGQUE_SOURCE_ONLY "only "
#define PGQUE_SOURCE_SCHEMA "pgque."
#define PGQUE_SOURCE_UNION " union all "
#define PGQUE_SOURCE_CLOSE ")"

/* does a source read one relation (one part, whatever its filter)? */
extern bool pgque_source_single(const char *source);

#endif							/* PGQUE_SOURCE_H */
