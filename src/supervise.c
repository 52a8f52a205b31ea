/*
 * supervise.c
 *		The worker_down alert (ADR 0028): a worker of this database that is
 *		wanted and has not been running for pgque_bgw.worker_down_after.
 *
 * What is down is in the shared-memory state table (down_since per worker entry,
 * kept by the launcher and the workers themselves); the alert rows are
 * written by pgque._worker_down_pass() (sql/43_worker_alerts.sql), which
 * follows ADR 0012: open once, clear once.  The watchdog runs the pass every
 * watchdog_interval; while the watchdog itself is down the ticker runs it
 * (so the watchdog's own outage is alerted); when neither runs, the
 * launcher logs the alert and status() shows it, and the outage is written
 * as an opened-and-cleared row by the first pass after a worker is back
 * (each entry keeps its last outage longer than the threshold).
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "guc.h"
#include "state.h"
#include "worker.h"

typedef struct DownPass
{
	int			n;
	Datum		kinds[2 * PGQUE_NKINDS];
	Datum		from[2 * PGQUE_NKINDS];
	Datum		to[2 * PGQUE_NKINDS];
	bool		to_null[2 * PGQUE_NKINDS];
	uint32		seen[PGQUE_NKINDS]; /* outages counted when read */
} DownPass;

static bool
down_past(const PgqueWorkerEntry *entry, TimestampTz now)
{
	return entry->down_since != 0 &&
		TimestampDifferenceExceeds(entry->down_since, now, pgque_worker_down_after * 1000);
}

/*
 * Is a pass due?  The watchdog's every pass (it also clears); the ticker's
 * only while the watchdog is down past the threshold or its outage is not
 * yet written.
 */
bool
pgque_worker_alerts_due(bool for_watchdog)
{
	PgqueWorkerEntry *w;
	bool		due;

	if (for_watchdog)
		return true;
	LWLockAcquire(pgque_shared->lock, LW_SHARED);
	w = &pgque_worker_db->workers[PGQUE_WATCHDOG];
	due = down_past(w, GetCurrentTimestamp());
	LWLockRelease(pgque_shared->lock);
	return due;
}

static void
down_unit(void *arg)
{
	DownPass   *p = arg;
	Oid			argtypes[4] = {TEXTARRAYOID, TIMESTAMPTZARRAYOID, TIMESTAMPTZARRAYOID, FLOAT8OID};
	Datum		args[4];
	int			dims[1];
	int			lbs[1] = {1};
	bool		nonull[2 * PGQUE_NKINDS] = {false};
	int			ret;
	int			ndims;

	dims[0] = p->n;
	ndims = p->n > 0 ? 1 : 0;	/* an empty array has no dimension */
	args[0] = PointerGetDatum(construct_md_array(p->kinds, nonull, ndims, dims, lbs, TEXTOID, -1, false, TYPALIGN_INT));
	args[1] = PointerGetDatum(construct_md_array(p->from, nonull, ndims, dims, lbs, TIMESTAMPTZOID, 8,
												 FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	args[2] = PointerGetDatum(construct_md_array(p->to, p->to_null, ndims, dims, lbs, TIMESTAMPTZOID, 8,
												 FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	args[3] = Float8GetDatum((double) pgque_worker_down_after);
	ret = SPI_execute_with_args("select pgque._worker_down_pass($1, $2, $3, pg_catalog.make_interval(secs => $4))",
								4, argtypes, args, NULL, false, 1);
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "evaluating worker alerts failed: %s", SPI_result_code_string(ret));
}

/*
 * Hand pgque._worker_down_pass() the ended outages not yet written and the
 * workers down now; once it committed, the ended ones count as written.
 * Nothing down and nothing to write after a pass that had nothing either:
 * no transaction (the first pass always runs, to clear what a previous
 * server left open).
 */
void
pgque_worker_alerts_pass(void)
{
	static bool last_had = true;

	DownPass	p;
	TimestampTz now = GetCurrentTimestamp();
	int			k;

	memset(&p, 0, sizeof(p));
	LWLockAcquire(pgque_shared->lock, LW_SHARED);
	for (k = 0; k < PGQUE_NKINDS; k++)
	{
		PgqueWorkerEntry *entry = &pgque_worker_db->workers[k];

		p.seen[k] = entry->outages;
		if (entry->outages != entry->outages_reported)
		{
			p.kinds[p.n] = CStringGetTextDatum(pgque_kind_name(k));
			p.from[p.n] = TimestampTzGetDatum(entry->outage_from);
			p.to[p.n] = TimestampTzGetDatum(entry->outage_to);
			p.n++;
		}
		if (down_past(entry, now))
		{
			p.kinds[p.n] = CStringGetTextDatum(pgque_kind_name(k));
			p.from[p.n] = TimestampTzGetDatum(entry->down_since);
			p.to_null[p.n] = true;
			p.n++;
		}
	}
	LWLockRelease(pgque_shared->lock);

	if (p.n == 0 && !last_had)
		return;
	/* 0.2.0's function: an older SQL not yet updated has none (ADR 0019) */
	if (!PGQUE_SQL_HAS(PGQUE_SQL_0_2_0))
		return;
	if (!pgque_run_unit("evaluating worker alerts", down_unit, &p))
		return;
	last_had = p.n > 0;
	LWLockAcquire(pgque_shared->lock, LW_EXCLUSIVE);
	for (k = 0; k < PGQUE_NKINDS; k++)
		pgque_worker_db->workers[k].outages_reported = p.seen[k];
	LWLockRelease(pgque_shared->lock);
}
