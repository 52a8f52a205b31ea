/*
 * kept_plan.c
 *		Kept SPI plans: those a file keeps for good (pgque_prepare_kept),
 *		and those a cache may drop, which are never freed under a caller
 *		still executing them (ADR 0037).
 *
 * A per-backend cache of plans (the producer's insert plans, the window
 * reads) drops a plan when what it was made for changes: the queue's
 * current table, a full cache.  The change can come from inside the plan's
 * own execution: a trigger on an event table that rotates the queue and
 * sends again, a policy that reads another window.  SPI_freeplan() there
 * freed the SPIPlan that _SPI_execute_plan() was still walking, and the
 * backend crashed (issue #25).  PostgreSQL's plan cache counts the users
 * of a CachedPlan for the same reason; this counts the users of the SPI
 * plan around it: an execution pins it, the cache drops it, and whichever
 * comes last frees it.  The unpin is also in PG_CATCH, so an ERROR that a
 * PL/pgSQL exception block (a subtransaction) catches above the execution
 * still lets go of the pin; the plan's CachedPlan reference held by the
 * aborted resource owner is PostgreSQL's to release, and survives the
 * plan source being dropped (DropCachedPlan).
 */
#include "postgres.h"

#include "executor/spi.h"
#include "utils/memutils.h"

#include "kept_plan.h"

/* SPI_prepare_cursor + SPI_keepplan, or an error (inside SPI) */
static SPIPlanPtr
prepare_kept(const char *sql, int nargs, Oid *argtypes, int cursor_options)
{
	SPIPlanPtr	plan = SPI_prepare_cursor(sql, nargs, argtypes, cursor_options);

	if (plan == NULL)
		elog(ERROR, "pgque_bgw: SPI_prepare failed for \"%s\": %s",
			 sql, SPI_result_code_string(SPI_result));
	if (SPI_keepplan(plan) != 0)
		elog(ERROR, "pgque_bgw: SPI_keepplan failed");
	return plan;
}

/* A kept plan that is never freed (a statement a file keeps for good). */
SPIPlanPtr
pgque_prepare_kept(const char *sql, int nargs, Oid *argtypes)
{
	return prepare_kept(sql, nargs, argtypes, 0);
}

/*
 * *slot's plan: prepared and kept at its first use, then the same, with a
 * generic plan from the first call: statements that look rows up by key,
 * where the plan cache's custom plans re-planned each call (ADR 0033)
 */
SPIPlanPtr
pgque_kept_generic_once(SPIPlanPtr *slot, const char *sql, int nargs, Oid *argtypes)
{
	if (*slot == NULL)
		*slot = prepare_kept(sql, nargs, argtypes, CURSOR_OPT_GENERIC_PLAN);
	return *slot;
}

/* A kept plan that a cache may drop (pgque_kept_plan_drop). */
PgqueKeptPlan *
pgque_kept_plan_prepare(const char *sql, int nargs, Oid *argtypes, int cursor_options)
{
	SPIPlanPtr	plan = prepare_kept(sql, nargs, argtypes, cursor_options);
	PgqueKeptPlan *kp = MemoryContextAllocZero(TopMemoryContext, sizeof(PgqueKeptPlan));

	kp->plan = plan;
	return kp;
}

static void
free_if_unused(PgqueKeptPlan *kp)
{
	if (kp->users > 0 || !kp->dropped)
		return;
	SPI_freeplan(kp->plan);
	pfree(kp);
}

/* An execution ends (also by an ERROR): the last user of a dropped plan frees it. */
static void
unpin(PgqueKeptPlan *kp)
{
	kp->users--;
	free_if_unused(kp);
}

/* The cache lets go of kp: freed now, or by the last execution still running it. */
void
pgque_kept_plan_drop(PgqueKeptPlan *kp)
{
	if (kp == NULL)
		return;
	Assert(!kp->dropped);
	kp->dropped = true;
	free_if_unused(kp);
}

int
pgque_kept_plan_execute_extended(PgqueKeptPlan *kp, const SPIExecuteOptions *options)
{
	int			ret;

	kp->users++;
	PG_TRY();
	{
		ret = SPI_execute_plan_extended(kp->plan, options);
	}
	PG_CATCH();
	{
		unpin(kp);
		PG_RE_THROW();
	}
	PG_END_TRY();
	unpin(kp);
	return ret;
}

/* SPI_execute_plan() with kp pinned */
int
pgque_kept_plan_execute(PgqueKeptPlan *kp, Datum *args, const char *nulls, bool read_only,
						long tcount)
{
	int			ret;

	kp->users++;
	PG_TRY();
	{
		ret = SPI_execute_plan(kp->plan, args, nulls, read_only, tcount);
	}
	PG_CATCH();
	{
		unpin(kp);
		PG_RE_THROW();
	}
	PG_END_TRY();
	unpin(kp);
	return ret;
}
