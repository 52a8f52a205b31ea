/*
 * errcodes.c
 *		pgque_bgw.error_codes (ADR 0059): with 'pgque', an error that
 *		pgque raises leaves its functions with SQLSTATE P0001
 *		(raise_exception), as PgQue raises every error, so that PL/pgSQL
 *		written for PgQue (`exception when raise_exception`) catches it; its
 *		own SQLSTATE is named at the end of the DETAIL.  With 'native' (the
 *		default) nothing changes.
 *
 * One place for the PL/pgSQL and the C errors: the function manager's hooks.
 * Every SECURITY DEFINER function or one with SET runs through
 * fmgr_security_definer, which calls fmgr_hook on entry, exit and error;
 * pgque's API functions all do, except the C entry points without either
 * (send, insert_event, the CDC triggers), which needs_fmgr_hook routes
 * there too.  The hook counts the pgque functions on the stack and maps an
 * error only when it leaves the outermost one: inside pgque, handlers that
 * catch a condition (`when undefined_object`) still see it.
 *
 * What is mapped: an ERROR raised by pgque itself, a RAISE in PL/pgSQL or
 * an ereport of this library (its message domain, set by the Makefile), and
 * not PostgreSQL's own errors passing through; and not 42501 (PgQue's
 * privilege errors are PostgreSQL's, 42501 too), nor the classes a caller
 * retries or an operator reads (40, 53, 57, 58, XX).  pgque's own workers
 * always see the native codes (their alerts record them).
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_language.h"
#include "catalog/pg_proc.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "postmaster/bgworker.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/syscache.h"

#include "compat.h"
#include "guc.h"
#include "pgque_bgw.h"

static needs_fmgr_hook_type prev_needs_fmgr_hook = NULL;
static fmgr_hook_type prev_fmgr_hook = NULL;

/* pgque functions on this backend's stack (entered through the hook) */
static int	pgque_fn_depth = 0;

/*
 * Which functions are pgque's, by oid: a backend-local table, emptied on
 * any change to pg_proc.  The hook's private Datum is not used: another
 * module's hook (sepgsql) keeps its own state there.
 */
typedef struct FnKind
{
	Oid			fn_oid;			/* hash key */
	bool		ours;			/* a function of schema pgque */
	bool		needs_hook;		/* a public C function without SECURITY DEFINER or SET */
} FnKind;

static HTAB *fn_kinds = NULL;

static void
fn_kinds_reset(Datum arg, int cacheid, uint32 hashvalue)
{
	if (fn_kinds != NULL)
	{
		hash_destroy(fn_kinds);
		fn_kinds = NULL;
	}
}

static FnKind *
fn_kind(Oid fn_oid)
{
	FnKind	   *k;
	bool		found;
	HeapTuple	tp;
	bool		ours;
	bool		needs;

	if (fn_kinds != NULL)
	{
		k = hash_search(fn_kinds, &fn_oid, HASH_FIND, NULL);
		if (k != NULL)
			return k;
	}

	/* the catalog first: reading it may empty the table (fn_kinds_reset) */
	tp = SearchSysCache1(PROCOID, ObjectIdGetDatum(fn_oid));
	if (!HeapTupleIsValid(tp))
		return NULL;			/* a function being dropped */
	{
		Form_pg_proc p = (Form_pg_proc) GETSTRUCT(tp);
		char	   *nsp = get_namespace_name(p->pronamespace);

		ours = nsp != NULL && strcmp(nsp, "pgque") == 0;
		needs = ours && p->prolang == ClanguageId && p->prokind == PROKIND_FUNCTION &&
			!p->prosecdef && NameStr(p->proname)[0] != '_' &&
			heap_attisnull(tp, Anum_pg_proc_proconfig, NULL);
		if (nsp != NULL)
			pfree(nsp);
	}
	ReleaseSysCache(tp);

	if (fn_kinds == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(Oid);
		ctl.entrysize = sizeof(FnKind);
		ctl.hcxt = TopMemoryContext;
		fn_kinds = hash_create("pgque function kinds", 64, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	k = hash_search(fn_kinds, &fn_oid, HASH_ENTER, &found);
	k->ours = ours;
	k->needs_hook = needs;
	return k;
}

static bool
pgque_needs_fmgr_hook(Oid fn_oid)
{
	FnKind	   *k;

	if (prev_needs_fmgr_hook && prev_needs_fmgr_hook(fn_oid))
		return true;
	/*
	 * PostgreSQL's own functions are never pgque's: no lookup for them.
	 * Under 'native' (the default) no function is routed through the hook:
	 * send and insert_event keep their direct call, the producer's hot path
	 * (issue #30).  The choice is made when a call is looked up (each
	 * execution of a statement, each transaction of PL/pgSQL's simple
	 * expressions), so a change of the setting takes effect from the next
	 * statement on.
	 */
	if (fn_oid < FirstNormalObjectId || pgque_error_codes != PGQUE_ERRCODES_PGQUE)
		return false;
	k = fn_kind(fn_oid);
	return k != NULL && k->needs_hook;
}

static bool
pgque_own_worker(void)
{
	return MyBgworkerEntry != NULL && strcmp(MyBgworkerEntry->bgw_library_name, "pgque_bgw") == 0;
}

/*
 * Is the SQLSTATE one that PgQue raises as P0001?  Not a privilege error
 * (PgQue's are PostgreSQL's, 42501 too), nor one a caller retries or an
 * operator reads: a cancel (57014) made P0001 would be swallowed by a
 * `when raise_exception` handler.
 */
static bool
pgque_code_mappable(int code)
{
	if (code == ERRCODE_RAISE_EXCEPTION || code == ERRCODE_INSUFFICIENT_PRIVILEGE)
		return false;
	switch (ERRCODE_TO_CATEGORY(code))
	{
		case ERRCODE_TRANSACTION_ROLLBACK:
		case ERRCODE_INSUFFICIENT_RESOURCES:
		case ERRCODE_OPERATOR_INTERVENTION:
		case ERRCODE_SYSTEM_ERROR:
		case ERRCODE_INTERNAL_ERROR:
			return false;
		default:
			return true;
	}
}

/* Did pgque raise it: a RAISE in PL/pgSQL, or an ereport of this library? */
static bool
pgque_raised(ErrorData *e)
{
	return e->elevel == ERROR &&
		((e->domain != NULL && strcmp(e->domain, PG_TEXTDOMAIN("pgque_bgw")) == 0) ||
		 (e->funcname != NULL && strcmp(e->funcname, "exec_stmt_raise") == 0));
}

/*
 * Called in fmgr_security_definer's PG_CATCH, the error still on the error
 * stack: rethrow it as P0001 when it should be.
 */
static void
pgque_map_error(void)
{
	MemoryContext old;
	ErrorData  *e;
	int			code;

	/* the error is still on the error stack: its code is read in place */
	if (pgque_error_codes != PGQUE_ERRCODES_PGQUE || pgque_own_worker() || !pgque_code_mappable(geterrcode()))
		return;
	old = MemoryContextSwitchTo(CurTransactionContext);
	e = CopyErrorData();
	if (!pgque_raised(e))
	{
		FreeErrorData(e);
		MemoryContextSwitchTo(old);
		return;
	}
	code = e->sqlerrcode;
	FlushErrorState();
	e->sqlerrcode = ERRCODE_RAISE_EXCEPTION;
	e->detail = psprintf("%s%spgque_bgw SQLSTATE %s (pgque_bgw.error_codes = pgque).",
						 e->detail != NULL ? e->detail : "", e->detail != NULL ? " " : "",
						 unpack_sql_state(code));
	MemoryContextSwitchTo(old);
	ReThrowError(e);
}

static void
pgque_fmgr_hook(FmgrHookEventType event, FmgrInfo *flinfo, Datum *private)
{
	FnKind	   *k;

	if (prev_fmgr_hook)
		prev_fmgr_hook(event, flinfo, private);
	if (flinfo->fn_oid < FirstNormalObjectId)
		return;
	/*
	 * Nothing to count under 'native' (the default: no lookup at all), nor
	 * on the way out of a function entered under it.
	 */
	if (event == FHET_START ? pgque_error_codes != PGQUE_ERRCODES_PGQUE : pgque_fn_depth == 0)
		return;
	k = fn_kind(flinfo->fn_oid);
	if (k == NULL || !k->ours)
		return;
	switch (event)
	{
		case FHET_START:
			pgque_fn_depth++;
			break;
		case FHET_END:
			if (pgque_fn_depth > 0)
				pgque_fn_depth--;
			break;
		case FHET_ABORT:
			if (pgque_fn_depth > 0)
				pgque_fn_depth--;
			if (pgque_fn_depth == 0)
				pgque_map_error();
			break;
	}
}

/* a safety net: the count restarts with every top-level transaction */
static void
errcodes_xact_callback(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT ||
		event == XACT_EVENT_PARALLEL_COMMIT || event == XACT_EVENT_PARALLEL_ABORT)
		pgque_fn_depth = 0;
}

void
pgque_install_errcode_hooks(void)
{
	prev_needs_fmgr_hook = needs_fmgr_hook;
	needs_fmgr_hook = pgque_needs_fmgr_hook;
	prev_fmgr_hook = fmgr_hook;
	fmgr_hook = pgque_fmgr_hook;
	CacheRegisterSyscacheCallback(PROCOID, fn_kinds_reset, (Datum) 0);
	CacheRegisterSyscacheCallback(NAMESPACEOID, fn_kinds_reset, (Datum) 0);
	RegisterXactCallback(errcodes_xact_callback, NULL);
}
