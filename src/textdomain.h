/*
 * textdomain.h
 *		The message domain of pgque_bgw's ereports ("pgque_bgw-<major>"):
 *		what tells an error that pgque raised from PostgreSQL's own errors
 *		passing through pgque (pgque_bgw.error_codes, src/errcodes.c,
 *		ADR 0059).  Included by every header of the module, after
 *		postgres.h (whose elog.h sets TEXTDOMAIN to NULL); locks.c, which
 *		includes none of them, directly.  No message
 *		catalog is installed: the texts stay as written.
 */
#ifndef PGQUE_TEXTDOMAIN_H
#define PGQUE_TEXTDOMAIN_H

#include "postgres.h"

#undef TEXTDOMAIN
#define TEXTDOMAIN PG_TEXTDOMAIN("pgque_bgw")

#endif							/* PGQUE_TEXTDOMAIN_H */
