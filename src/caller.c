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
 *
 * Also the other side: pgque_run_as_role(), the role every unit of the
 * workers, the producer's append and the CDC append run as (ADR 0042): the
 * owner of schema pgque, which the install script gives to pgque_owner
 * with every object in it.  One lookup for the three, so they cannot
 * disagree; the owner of schema pgque rather than pg_extension.extowner,
 * which is the installing role and owns nothing (it was the owner of every
 * object until 0.2.0, which left the schema to it too, so a database still
 * on 0.2.0's SQL runs as that role, as it did).
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/indexing.h"
#include "catalog/pg_extension.h"
#include "catalog/namespace.h"
#include "catalog/pg_namespace.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "caller.h"

PG_FUNCTION_INFO_V1(pgque_caller);

Datum
pgque_caller(PG_FUNCTION_ARGS)
{
	PG_RETURN_OID(GetOuterUserId());
}

/*
 * The role the extension's own work runs as: the owner of schema pgque
 * (see the file header).  The caller is in a transaction; raises when the
 * schema is missing.
 */
Oid
pgque_run_as_role(void)
{
	Oid			nsp = get_namespace_oid("pgque", false);
	HeapTuple	tup = SearchSysCache1(NAMESPACEOID, ObjectIdGetDatum(nsp));
	Oid			owner;

	if (!HeapTupleIsValid(tup))
		elog(ERROR, "pgque_bgw: cache lookup failed for namespace %u", nsp);
	owner = ((Form_pg_namespace) GETSTRUCT(tup))->nspowner;
	ReleaseSysCache(tup);
	return owner;
}

/*
 * Extension pgque_bgw's row of pg_extension (one index probe), in the
 * caller's transaction: its owner, the installing role (InvalidOid when it
 * is not installed); its oid when extoid is not NULL; its version when
 * version is not NULL (palloc'd in the current context; NULL when it is
 * not installed).  The one reader of that row (the workers read the
 * version and wait on the oid's lock, ADR 0046).
 */
Oid
pgque_extension_row(char **version, Oid *extoid)
{
	Relation	rel;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;
	Oid			owner = InvalidOid;

	if (version != NULL)
		*version = NULL;
	if (extoid != NULL)
		*extoid = InvalidOid;
	rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyInit(&key, Anum_pg_extension_extname, BTEqualStrategyNumber, F_NAMEEQ,
				CStringGetDatum("pgque_bgw"));
	scan = systable_beginscan(rel, ExtensionNameIndexId, true, NULL, 1, &key);
	tup = systable_getnext(scan);
	if (HeapTupleIsValid(tup))
	{
		owner = ((Form_pg_extension) GETSTRUCT(tup))->extowner;
		if (extoid != NULL)
			*extoid = ((Form_pg_extension) GETSTRUCT(tup))->oid;
		if (version != NULL)
		{
			bool		isnull;
			Datum		d = heap_getattr(tup, Anum_pg_extension_extversion,
										 RelationGetDescr(rel), &isnull);

			if (!isnull)
				*version = TextDatumGetCString(d);
		}
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return owner;
}

/*
 * The role that installed the extension (pg_extension.extowner), which owns
 * no object of it since ADR 0042 but holds the three roles' rights by name
 * (sql/90_grants.sql); InvalidOid when the extension is not installed.
 */
Oid
pgque_extension_owner(void)
{
	return pgque_extension_row(NULL, NULL);
}

/* pgque._owner(): pgque_run_as_role() for SQL (the hooks' owner check) */
PG_FUNCTION_INFO_V1(pgque_owner_sql);
Datum
pgque_owner_sql(PG_FUNCTION_ARGS)
{
	PG_RETURN_OID(pgque_run_as_role());
}

/* The role a new shared-memory entry is charged to: the login role. */
Oid
pgque_quota_role(void)
{
	return GetSessionUserId();
}

/*
 * How far the caller may go in the shared-memory tables (ADR 0041):
 * PGQUE_PRIV_RESERVE for a superuser caller or login role (or a member of
 * the owner of schema pgque, which only a superuser can be): the reserve
 * and no per-role cap; PGQUE_PRIV_NO_ROLE_CAP for (a member of) the role
 * that installed the extension in this database: no per-role cap, but not
 * the reserve (a trusted install's owner is any role with CREATE on a
 * database, and one with four databases filled the whole table with their
 * caps); PGQUE_PRIV_NONE otherwise.  Reads the catalogs: call it outside
 * any LWLock.
 */
int
pgque_caller_privileged(void)
{
	Oid			caller = GetOuterUserId();

	if (superuser_arg(caller) || superuser_arg(GetSessionUserId()))
		return PGQUE_PRIV_RESERVE;
	if (!OidIsValid(get_namespace_oid("pgque", true)))
		return PGQUE_PRIV_NONE;
	if (has_privs_of_role(caller, pgque_run_as_role()))
		return PGQUE_PRIV_RESERVE;
	/* the installing role (ADR 0042: it owns nothing, but runs the extension) */
	if (OidIsValid(pgque_extension_owner()) && has_privs_of_role(caller, pgque_extension_owner()))
		return PGQUE_PRIV_NO_ROLE_CAP;
	return PGQUE_PRIV_NONE;
}
