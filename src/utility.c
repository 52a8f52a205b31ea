/*
 * utility.c
 *		The utility and object-access hooks.
 *
 * The object-access hook vets every new trigger: a pgque CDC trigger with
 * expressions may be attached only by a role with the table owner's
 * rights (pgque_cdc_check_attach() in cdc.c, ADR 0045).  It is installed
 * whenever the library is loaded, preloaded or not.
 *
 * The utility hook keeps DROP DATABASE, CREATE DATABASE ... TEMPLATE and ALTER DATABASE
 *		... RENAME working: they refuse while other sessions are connected to
 *		the database, and our workers are such sessions.  The utility hook
 *		pauses the database's workers (the launcher stops them through their
 *		handles and does not restart them), runs the command, and resumes.
 *
 * The hook runs before PostgreSQL's own permission checks, so it makes
 * them itself first: only a command PostgreSQL would let this role run
 * pauses anything.  Otherwise any role could stop another database's
 * workers with a DROP DATABASE that is then refused.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/objectaccess.h"
#include "catalog/pg_database.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_trigger.h"
#include "commands/dbcommands.h"
#include "commands/defrem.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "storage/lmgr.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/syscache.h"

#include "caller.h"
#include "compat.h"
#include "pgque_bgw.h"
#include "state.h"
#include "wake.h"
#include "worker.h"
#include "cdc.h"

static ProcessUtility_hook_type prev_utility_hook = NULL;
static object_access_hook_type prev_object_access_hook = NULL;

/*
 * Pause the database: the launcher stops its workers through their handles
 * (a user backend holds none) and starts none while it is paused.  Wait
 * (up to 5 s) until they have left.
 */
static void
pause_database(Oid dboid)
{
	int			waited;

	LWLockAcquire(pgque_shared->lock, LW_EXCLUSIVE);
	{
		PgqueDb    *db = pgque_find_db(dboid);

		if (db != NULL)
		{
			db->state = PGQUE_DB_PAUSED;
			/* the command's pause: a rescan must not lift it, only resume */
			db->unlisted_pause = false;
		}
	}
	LWLockRelease(pgque_shared->lock);
	pgque_wake_launcher();

	for (waited = 0; waited < 500; waited++)
	{
		PgqueDb    *db;
		bool		any = false;
		bool		launcher;
		int			k;

		LWLockAcquire(pgque_shared->lock, LW_SHARED);
		launcher = pgque_shared->launcher_pid != 0;
		db = pgque_find_db(dboid);
		if (db != NULL)
		{
			for (k = 0; k < PGQUE_NKINDS; k++)
			{
				if (db->workers[k].pid > 0 || db->workers[k].registered)
				{
					/* no launcher to stop them (it is restarting): signal */
					if (!launcher && db->workers[k].pid > 0 && waited % 50 == 0)
						kill(db->workers[k].pid, SIGTERM);
					any = true;
				}
			}
		}
		LWLockRelease(pgque_shared->lock);
		if (!any)
			return;
		pg_usleep(10000L);
		CHECK_FOR_INTERRUPTS();
	}
}

static void
resume_database(Oid dboid)
{
	PgqueDb    *db;

	LWLockAcquire(pgque_shared->lock, LW_EXCLUSIVE);
	db = pgque_find_db(dboid);
	if (db != NULL && db->state == PGQUE_DB_PAUSED)
		db->state = PGQUE_DB_UNKNOWN;
	/* a dropped database is forgotten by this scan before anything restarts */
	pgque_shared->launcher_wake_scan = true;
	LWLockRelease(pgque_shared->lock);
	pgque_wake_launcher();
}

static bool
database_is_template(Oid dboid)
{
	HeapTuple	tup = SearchSysCache1(DATABASEOID, ObjectIdGetDatum(dboid));
	bool		result = false;

	if (HeapTupleIsValid(tup))
	{
		result = ((Form_pg_database) GETSTRUCT(tup))->datistemplate;
		ReleaseSysCache(tup);
	}
	return result;
}

/*
 * The database a utility statement needs to itself, or InvalidOid; only
 * when PostgreSQL's permission checks would pass (dbcommands.c: dropdb,
 * RenameDatabase, createdb), and the command is not refused at once for
 * another reason we can see (the current database, a name taken).
 */
static Oid
database_needing_exclusive_use(Node *parsetree)
{
	Oid			dboid;

	switch (nodeTag(parsetree))
	{
		case T_DropdbStmt:
			dboid = get_database_oid(((DropdbStmt *) parsetree)->dbname, true);
			if (!OidIsValid(dboid) || dboid == MyDatabaseId ||
				!pgque_database_ownercheck(dboid, GetUserId()))
				return InvalidOid;
			return dboid;
		case T_RenameStmt:
			{
				RenameStmt *stmt = (RenameStmt *) parsetree;

				if (stmt->renameType != OBJECT_DATABASE)
					return InvalidOid;
				dboid = get_database_oid(stmt->subname, true);
				if (!OidIsValid(dboid) || dboid == MyDatabaseId ||
					OidIsValid(get_database_oid(stmt->newname, true)) ||
					!pgque_database_ownercheck(dboid, GetUserId()) ||
					!have_createdb_privilege())
					return InvalidOid;
				return dboid;
			}
		case T_CreatedbStmt:
			{
				CreatedbStmt *stmt = (CreatedbStmt *) parsetree;
				ListCell   *lc;

				if (OidIsValid(get_database_oid(stmt->dbname, true)) || !have_createdb_privilege())
					return InvalidOid;
				foreach(lc, stmt->options)
				{
					DefElem    *opt = (DefElem *) lfirst(lc);

					if (strcmp(opt->defname, "template") == 0 && opt->arg != NULL)
					{
						dboid = get_database_oid(defGetString(opt), true);
						/* a template is open to CREATEDB roles; any other, to its owner */
						if (!OidIsValid(dboid) ||
							(!database_is_template(dboid) &&
							 !pgque_database_ownercheck(dboid, GetUserId())))
							return InvalidOid;
						return dboid;
					}
				}
				return InvalidOid;
			}
		default:
			return InvalidOid;
	}
}

/* Does this statement drop extension pgque_bgw? */
static bool
drops_our_extension(Node *parsetree)
{
	DropStmt   *stmt;
	ListCell   *lc;

	if (!IsA(parsetree, DropStmt))
		return false;
	stmt = (DropStmt *) parsetree;
	if (stmt->removeType != OBJECT_EXTENSION)
		return false;
	foreach(lc, stmt->objects)
	{
		Node	   *obj = (Node *) lfirst(lc);

		if (IsA(obj, String) && strcmp(strVal(obj), "pgque_bgw") == 0)
			return true;
	}
	return false;
}

/*
 * Whether ALTER EXTENSION pgque_bgw UPDATE [TO v] asks for the installed
 * version: PostgreSQL then only says so (a NOTICE) and runs no script, so
 * the workers have nothing to wait for.  Quiescing them for it held them
 * for the whole transaction around it: a migration tool that runs the
 * update in its own long transaction stopped every tick until it committed.
 * The target without TO is the default_version PostgreSQL itself reads
 * (pg_available_extensions: its control file, on 18 wherever
 * extension_control_path finds it), not the library's: a package upgraded
 * before the restart has a newer control file than the loaded library.  Any
 * doubt (no such row) quiesces.
 */
static bool
update_is_noop(AlterExtensionStmt *stmt, const char *installed)
{
	ListCell   *lc;
	const char *target = NULL;
	bool		noop = false;

	if (installed == NULL)
		return false;
	foreach(lc, stmt->options)
	{
		DefElem    *opt = (DefElem *) lfirst(lc);

		if (strcmp(opt->defname, "new_version") == 0)
			target = defGetString(opt);
	}
	if (target != NULL)
		return strcmp(target, installed) == 0;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute("select e.default_version from pg_catalog.pg_available_extensions e"
					" where e.name operator(pg_catalog.=) 'pgque_bgw'", true, 1) == SPI_OK_SELECT &&
		SPI_processed == 1)
	{
		char	   *v = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);

		noop = v != NULL && strcmp(v, installed) == 0;
	}
	SPI_finish();
	return noop;
}

/*
 * ALTER EXTENSION pgque_bgw UPDATE and DROP EXTENSION pgque_bgw by a role
 * that may run them: quiesce the database's workers until the end of the
 * transaction (PGQUE_EXTENSION_DDL_SUBID in pgque_bgw.h).  Taken here,
 * before the command takes any lock of its own, so that it waits only for
 * the units under way and they never wait for it while holding something
 * it needs (the maintenance worker's rotation against the update was a
 * deadlock).  Only for the owner (or a superuser): the hook runs before
 * PostgreSQL's permission checks, and another role queued on this lock
 * would hold up every unit of the workers.
 */
static void
quiesce_for_extension_ddl(Node *parsetree)
{
	Oid			extoid;
	bool		ours = false;
	char	   *installed;

	if (IsA(parsetree, AlterExtensionStmt))
		ours = strcmp(((AlterExtensionStmt *) parsetree)->extname, "pgque_bgw") == 0;
	else
		ours = drops_our_extension(parsetree);
	if (!ours)
		return;
	if (!OidIsValid(pgque_extension_row(&installed, &extoid)) ||
		!pgque_extension_ownercheck(extoid, GetUserId()))
		return;
	if (IsA(parsetree, AlterExtensionStmt) &&
		update_is_noop((AlterExtensionStmt *) parsetree, installed))
		return;
	LockDatabaseObject(ExtensionRelationId, extoid, PGQUE_EXTENSION_DDL_SUBID, AccessExclusiveLock);
}

static void
pgque_process_utility(PlannedStmt *pstmt, const char *queryString, bool readOnlyTree,
					  ProcessUtilityContext context, ParamListInfo params,
					  QueryEnvironment *queryEnv, DestReceiver *dest, QueryCompletion *qc)
{
	volatile Oid paused = InvalidOid;

	if (pgque_shared != NULL)
		paused = database_needing_exclusive_use(pstmt->utilityStmt);
	if (OidIsValid(paused))
		pause_database(paused);
	if (drops_our_extension(pstmt->utilityStmt))
		pgque_forget_leases_at_commit();
	quiesce_for_extension_ddl(pstmt->utilityStmt);

	PG_TRY();
	{
		if (prev_utility_hook)
			prev_utility_hook(pstmt, queryString, readOnlyTree, context, params,
							  queryEnv, dest, qc);
		else
			standard_ProcessUtility(pstmt, queryString, readOnlyTree, context, params,
									queryEnv, dest, qc);
	}
	PG_FINALLY();
	{
		if (OidIsValid(paused))
			resume_database(paused);
	}
	PG_END_TRY();

	/*
	 * COMMIT PREPARED made a prepared transaction's events visible; the
	 * session that appended them could not mark its queues at commit
	 * (wake.c), so every queue of the database is probed (ADR 0031).
	 */
	if (pgque_shared != NULL && IsA(pstmt->utilityStmt, TransactionStmt) &&
		((TransactionStmt *) pstmt->utilityStmt)->kind == TRANS_STMT_COMMIT_PREPARED)
		pgque_prepared_committed();
}

void
pgque_install_utility_hook(void)
{
	prev_utility_hook = ProcessUtility_hook;
	ProcessUtility_hook = pgque_process_utility;
}

/*
 * Every trigger PostgreSQL creates passes here after its row is written:
 * CREATE TRIGGER, CREATE OR REPLACE TRIGGER, and the clones made on a
 * partitioned table's partitions; whatever the statement's path (a
 * function, SET ROLE, a SECURITY DEFINER frame), GetUserId() is the role
 * that creates it.
 */
static void
pgque_object_access(ObjectAccessType access, Oid classId, Oid objectId, int subId, void *arg)
{
	if (prev_object_access_hook)
		prev_object_access_hook(access, classId, objectId, subId, arg);
	if (access == OAT_POST_CREATE && classId == TriggerRelationId)
		pgque_cdc_check_attach(objectId);
}

void
pgque_install_object_access_hook(void)
{
	prev_object_access_hook = object_access_hook;
	object_access_hook = pgque_object_access;
}
