/*
 * caller.c
 *		pgque._caller(): the role on whose behalf an API call runs, for
 *		per-consumer authorization (sql/10_util.sql, pgque._authorize).
 *
 * Every API function is SECURITY DEFINER, so inside it current_user is the
 * extension owner and says nothing about who called.  The caller is the
 * "outer" user: the session user, or the role chosen with SET ROLE.  It is
 * not changed by SECURITY DEFINER frames (neither ours nor an application's
 * own), only by SET ROLE, which PostgreSQL allows only to members of the
 * target role and never inside a SECURITY DEFINER function.  So an
 * application's SECURITY DEFINER wrapper around pgque.receive() is
 * authorised as the session's current role, not as the wrapper's owner.
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"

PG_FUNCTION_INFO_V1(pgque_caller);

Datum
pgque_caller(PG_FUNCTION_ARGS)
{
	PG_RETURN_OID(GetOuterUserId());
}
