/*
 * window.c
 *		The read of a batch window, with its plan kept per backend.
 *
 * pgque._window_rows(source, ...) returns the events of one tick window
 * from the relations pgque._event_source() chose (the child tables, or the
 * partition buckets of one slot: ADR 0013).  Planning a read of 32 bucket
 * tables costs more than running it (3-4 ms against 2 ms for 1,000
 * events), and PL/pgSQL's EXECUTE plans every call; so the plan is
 * prepared once per source and kept, as a generic plan, like the
 * producers' insert plans (src/insert.c).  The plan cache revalidates a
 * kept plan when a relation it reads changes (TRUNCATE by rotation, DROP).
 *
 * Event tables have no statistics (never analyzed: they are truncated, not
 * vacuumed), and a generic plan knows neither the window's bounds nor the
 * in-progress list; left alone the planner picks sequential scans of small
 * buckets, which grow with the table.  A window is always a small slice
 * reached through the ev_txid index, so plans are made with
 * enable_seqscan off (for this read only).
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/tuplestore.h"

#include "pgque_bgw.h"

#define WINDOW_NPARAMS 10
#define WINDOW_MAX_PLANS 256

typedef struct WindowPlan
{
	uint64		key;			/* hash of the source text */
	char	   *source;			/* in TopMemoryContext */
	SPIPlanPtr	plan;
} WindowPlan;

static HTAB *window_plans = NULL;

PG_FUNCTION_INFO_V1(pgque_window_rows);

/* Forget every kept plan (the cache is full). */
static void
window_plans_reset(void)
{
	HASH_SEQ_STATUS seq;
	WindowPlan *entry;

	hash_seq_init(&seq, window_plans);
	while ((entry = hash_seq_search(&seq)) != NULL)
	{
		SPI_freeplan(entry->plan);
		pfree(entry->source);
		hash_search(window_plans, &entry->key, HASH_REMOVE, NULL);
	}
}

static SPIPlanPtr
window_plan_for(const char *source)
{
	uint64		key = hash_bytes_extended((const unsigned char *) source, strlen(source), 0);
	WindowPlan *entry;
	bool		found;
	StringInfoData sql;
	SPIPlanPtr	plan;
	Oid			argtypes[WINDOW_NPARAMS] = {XID8OID, XID8OID, XID8ARRAYOID, PG_SNAPSHOTOID,
	INT4OID, INT8OID, INT8OID, INT4OID, INT4OID, INT4OID};

	if (window_plans == NULL)
	{
		HASHCTL		ctl;

		memset(&ctl, 0, sizeof(ctl));
		ctl.keysize = sizeof(uint64);
		ctl.entrysize = sizeof(WindowPlan);
		window_plans = hash_create("pgque_bgw window plans", 64, &ctl, HASH_ELEM | HASH_BLOBS);
	}

	entry = hash_search(window_plans, &key, HASH_FIND, NULL);
	if (entry != NULL && strcmp(entry->source, source) == 0)
		return entry->plan;
	if (entry != NULL)
	{
		/* a hash collision: the newer source takes the place */
		SPI_freeplan(entry->plan);
		pfree(entry->source);
		hash_search(window_plans, &key, HASH_REMOVE, NULL);
	}
	if (hash_get_num_entries(window_plans) >= WINDOW_MAX_PLANS)
		window_plans_reset();

	/*
	 * txids at or past the old xmax, plus those in progress at the old
	 * tick, that the new snapshot sees as committed; retried and replayed
	 * events only for their owner; past the part already handed out; one
	 * event; one slot's share.
	 */
	initStringInfo(&sql);
	appendStringInfo(&sql,
					 "select * from %s ev"
					 " where ((ev.ev_txid >= $1 and ev.ev_txid < $2) or ev.ev_txid = any($3))"
					 "   and pg_catalog.pg_visible_in_snapshot(ev.ev_txid, $4)"
					 "   and (ev.ev_owner is null or ev.ev_owner = $5)"
					 "   and ($6::bigint is null or ev.ev_id > $6)"
					 "   and ($7::bigint is null or ev.ev_id = $7)"
					 "   and ($9::int4 is null or pgque._slot_of(ev.ev_extra1, $9) = $10)"
					 " order by ev.ev_id limit $8",
					 source);
	/* a generic plan: planned once, whatever the window's bounds */
	plan = SPI_prepare_cursor(sql.data, WINDOW_NPARAMS, argtypes, CURSOR_OPT_GENERIC_PLAN);
	if (plan == NULL)
		elog(ERROR, "pgque_bgw: SPI_prepare failed for a window read: %s",
			 SPI_result_code_string(SPI_result));
	if (SPI_keepplan(plan) != 0)
		elog(ERROR, "pgque_bgw: SPI_keepplan failed");
	pfree(sql.data);
	entry = hash_search(window_plans, &key, HASH_ENTER, &found);
	entry->plan = plan;
	entry->source = MemoryContextStrdup(TopMemoryContext, source);
	return entry->plan;
}

/*
 * pgque._window_rows(source, lo_xmax, hi_xmax, lo_xip, hi_snapshot, owner,
 *                    after_ev_id, ev_id, limit, n, slot)
 *   -> setof pgque.event_template, in ev_id order.
 */
Datum
pgque_window_rows(PG_FUNCTION_ARGS)
{
	Tuplestorestate *ts;
	TupleDesc	desc;
	MemoryContext old;
	Datum		args[WINDOW_NPARAMS];
	char		nulls[WINDOW_NPARAMS];
	char	   *source;
	int			ret;
	int			i;
	uint64		r;
	int			guc_level;

	if (PG_ARGISNULL(0))
		elog(ERROR, "pgque_bgw: window source must not be null");
	source = text_to_cstring(PG_GETARG_TEXT_PP(0));
	for (i = 0; i < WINDOW_NPARAMS; i++)
	{
		nulls[i] = PG_ARGISNULL(i + 1) ? 'n' : ' ';
		args[i] = PG_ARGISNULL(i + 1) ? (Datum) 0 : PG_GETARG_DATUM(i + 1);
	}

	old = pgque_materialize(fcinfo, &ts, &desc);
	MemoryContextSwitchTo(old);

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "pgque_bgw: SPI_connect failed");
	/* the plan is made (or remade) at execution: set the rule around it */
	guc_level = NewGUCNestLevel();
	(void) set_config_option("enable_seqscan", "off", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	ret = SPI_execute_plan(window_plan_for(source), args, nulls, true, 0);
	AtEOXact_GUC(true, guc_level);
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "pgque_bgw: window read failed: %s", SPI_result_code_string(ret));
	if (SPI_tuptable->tupdesc->natts != desc->natts)
		elog(ERROR, "pgque_bgw: window read returned %d columns, expected %d",
			 SPI_tuptable->tupdesc->natts, desc->natts);
	for (r = 0; r < SPI_processed; r++)
		tuplestore_puttuple(ts, SPI_tuptable->vals[r]);
	SPI_finish();
	return (Datum) 0;
}
