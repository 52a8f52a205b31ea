/*
 * insert_plan.c
 *		The producer's kept SPI plans: per queue, the insert plans (one
 *		event, an array of events) of its current child table, or of each
 *		partition bucket table (ADR 0013).  append.c appends without them
 *		to a table as the extension made it; these serve every other one
 *		(a trigger, check, policy, default or index an owner added) and an
 *		append nested in another (ADR 0085).
 *
 * A queue's per-table plans are dropped and prepared again when rotation
 * moves it to another child table or its bucket count changes (the queue
 * cache, queue_cache.c, says which table is current).  The change can be
 * made inside an append, by a trigger on the event table that sends
 * again: a dropped plan is freed only once no append is executing it
 * (src/kept_plan.c, ADR 0037).  Every name in the SQL
 * is schema-qualified, so a plan means the same under any search_path; the
 * plan cache revalidates it if a table is dropped and created again
 * (DROP/CREATE EXTENSION reuses queue ids).
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"

#include "kept_plan.h"
#include "producer.h"
#include "rules.h"

typedef struct InsertPlan
{
	int32		queue_id;		/* hash key */
	int32		cur_table;		/* child table the plans insert into */
	int32		nbuckets;		/* 0: the child table itself */
	PgqueKeptPlan **plans;		/* [bucket * INSERT_NKINDS + kind] */
} InsertPlan;

static HTAB *insert_plans = NULL;

/*
 * The kept plans of a queue, from the cache; the per-table ones are
 * dropped when the queue's current table or bucket count changed.
 */
static InsertPlan *
plan_entry(const QueueInfo *q)
{
	InsertPlan *entry;
	bool		found;

	if (insert_plans == NULL)
	{
		HASHCTL		ctl;

		memset(&ctl, 0, sizeof(ctl));
		ctl.keysize = sizeof(int32);
		ctl.entrysize = sizeof(InsertPlan);
		insert_plans = hash_create("pgque_bgw insert plans", 16, &ctl,
								   HASH_ELEM | HASH_BLOBS);
	}

	entry = hash_search(insert_plans, &q->queue_id, HASH_ENTER, &found);
	if (!found)
		entry->plans = NULL;
	if (entry->plans != NULL &&
		(entry->cur_table != q->cur_table || entry->nbuckets != q->nbuckets))
	{
		int			i;

		/* freed now, or by the append up the stack still executing one */
		for (i = 0; i < Max(entry->nbuckets, 1) * INSERT_NKINDS; i++)
			pgque_kept_plan_drop(entry->plans[i]);
		pfree(entry->plans);
		entry->plans = NULL;
	}
	if (entry->plans == NULL)
	{
		entry->cur_table = q->cur_table;
		entry->nbuckets = q->nbuckets;
		entry->plans = MemoryContextAllocZero(TopMemoryContext,
											  sizeof(PgqueKeptPlan *) * Max(q->nbuckets, 1) * INSERT_NKINDS);
	}
	return entry;
}

/*
 * An insert plan for a queue's current child table (bucket: the partition
 * bucket table, when the queue has buckets), from the cache.
 */
static PgqueKeptPlan *
insert_plan(const QueueInfo *q, int bucket, InsertKind kind)
{
	InsertPlan *entry = plan_entry(q);
	char		table[NAMEDATALEN];
	char		sql[768];
	PgqueKeptPlan *plan;

	plan = entry->plans[bucket * INSERT_NKINDS + kind];
	if (plan != NULL)
		return plan;

	pgque_event_table(table, q->queue_id, q->cur_table, q->nbuckets > 0 ? bucket : -1);

	if (kind == INSERT_ONE)
	{
		Oid			argtypes[INS_NPARAMS] = {TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID,
		INT8OID, TIMESTAMPTZOID, INT4OID, INT4OID};

		/*
		 * No RETURNING: the caller passes the id (produce.c draws it with
		 * nextval_internal), which spares the SPI tuple table per call.
		 */
		snprintf(sql, sizeof(sql),
				 "insert into pgque.%s"
				 " (ev_id, ev_time, ev_owner, ev_retry, ev_type, ev_data,"
				 "  ev_extra1, ev_extra2, ev_extra3, ev_extra4)"
				 " values ($7, coalesce($8, pg_catalog.now()), $9, $10, $1, $2, $3, $4, $5, $6)",
				 table);
		plan = pgque_kept_plan_prepare(sql, INS_NPARAMS, argtypes, 0);
	}
	else
	{
		Oid			argtypes[4] = {TEXTOID, INT8ARRAYOID, TEXTARRAYOID, TEXTARRAYOID};

		/*
		 * The ids come drawn (produce.c, in input order); no RETURNING, no
		 * sort.  A NULL keys array pads with NULL keys.
		 */
		snprintf(sql, sizeof(sql),
				 "insert into pgque.%s (ev_id, ev_type, ev_data, ev_extra1)"
				 " select u.i, $1, u.p, u.k"
				 " from rows from (pg_catalog.unnest($2), pg_catalog.unnest($3), pg_catalog.unnest($4)) as u(i, p, k)",
				 table);
		plan = pgque_kept_plan_prepare(sql, 4, argtypes, 0);
	}
	/* the entry again: nothing above runs an append, but never trust a stale pointer */
	entry = plan_entry(q);
	Assert(entry->plans[bucket * INSERT_NKINDS + kind] == NULL);
	entry->plans[bucket * INSERT_NKINDS + kind] = plan;
	return plan;
}

/*
 * Run the insert plan of a queue's current table (or bucket table) with
 * args/nulls (SPI_execute_plan's); the plan stays valid while it runs,
 * whatever a trigger on the table does to the cache (ADR 0037).
 */
int
pgque_insert_execute(const QueueInfo *q, int bucket, InsertKind kind, Datum *args,
					 const char *nulls, long tcount)
{
	return pgque_kept_plan_execute(insert_plan(q, bucket, kind), args, nulls, false, tcount);
}
