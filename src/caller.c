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
 *
 * The shared-memory tables (slots.c, coop.c) charge a new entry to the
 * session's login role instead (pgque_quota_role): a member of pgque_reader
 * may SET ROLE pgque_reader, and would get a second quota that way.
 * pgque_caller_privileged() says whether the caller may use their reserve
 * (ADR 0041).
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/namespace.h"
#include "catalog/pg_namespace.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

#include "pgque_bgw.h"

PG_FUNCTION_INFO_V1(pgque_caller);

Datum
pgque_caller(PG_FUNCTION_ARGS)
{
	PG_RETURN_OID(GetOuterUserId());
}

/* The role a new shared-memory entry is charged to: the login role. */
Oid
pgque_quota_role(void)
{
	return GetSessionUserId();
}

/*
 * Is the caller (or the session's login role) a superuser, or the caller
 * (a member of) the extension owner, the owner of schema pgque?  They may use the reserve of the shared-memory tables and
 * are not held to the per-role caps.  Reads the catalogs: call it outside
 * any LWLock.
 */
bool
pgque_caller_privileged(void)
{
	Oid			caller = GetOuterUserId();
	Oid			nsp;
	HeapTuple	tup;
	bool		owner = false;

	if (superuser_arg(caller) || superuser_arg(GetSessionUserId()))
		return true;
	nsp = get_namespace_oid("pgque", true);
	if (!OidIsValid(nsp))
		return false;
	tup = SearchSysCache1(NAMESPACEOID, ObjectIdGetDatum(nsp));
	if (HeapTupleIsValid(tup))
	{
		owner = has_privs_of_role(caller, ((Form_pg_namespace) GETSTRUCT(tup))->nspowner);
		ReleaseSysCache(tup);
	}
	return owner;
}
