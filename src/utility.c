/*
 * utility.c
 *		Keep DROP DATABASE, CREATE DATABASE ... TEMPLATE and ALTER DATABASE
 *		... RENAME working: they refuse while other sessions are connected to
 *		the database, and our workers are such sessions.  The utility hook
 *		pauses the database's workers (they are asked to leave and the
 *		launcher does not restart them), runs the command, and resumes.
 */
#include "postgres.h"

#include "commands/dbcommands.h"
#include "commands/defrem.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "tcop/utility.h"

#include "compat.h"
#include "pgque_bgw.h"

static ProcessUtility_hook_type prev_utility_hook = NULL;

/* Ask the database's workers to leave, and wait (up to 5 s) until they have. */
static void
pause_database(Oid dboid)
{
	int			waited;

	for (waited = 0; waited < 500; waited++)
	{
		PgqueDb    *db;
		bool		any = false;
		int			k;

		LWLockAcquire(pgque_shared->lock, LW_EXCLUSIVE);
		db = pgque_find_db(dboid);
		if (db != NULL)
		{
			db->state = PGQUE_DB_PAUSED;
			for (k = 0; k < PGQUE_NKINDS; k++)
			{
				if (db->workers[k].pid > 0)
				{
					if (waited % 50 == 0)
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

/* The database a utility statement needs to itself, or InvalidOid. */
static Oid
database_needing_exclusive_use(Node *parsetree)
{
	switch (nodeTag(parsetree))
	{
		case T_DropdbStmt:
			return get_database_oid(((DropdbStmt *) parsetree)->dbname, true);
		case T_RenameStmt:
			{
				RenameStmt *stmt = (RenameStmt *) parsetree;

				if (stmt->renameType == OBJECT_DATABASE)
					return get_database_oid(stmt->subname, true);
				return InvalidOid;
			}
		case T_CreatedbStmt:
			{
				ListCell   *lc;

				foreach(lc, ((CreatedbStmt *) parsetree)->options)
				{
					DefElem    *opt = (DefElem *) lfirst(lc);

					if (strcmp(opt->defname, "template") == 0 && opt->arg != NULL)
						return get_database_oid(defGetString(opt), true);
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
}

void
pgque_install_utility_hook(void)
{
	prev_utility_hook = ProcessUtility_hook;
	ProcessUtility_hook = pgque_process_utility;
}
