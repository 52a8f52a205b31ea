/*
 * reclaim.c
 *		The watchdog's reclaim of shared-memory entries that protect nothing
 *		(ADR 0041): slot lease entries released a while ago, entries of
 *		dropped databases, and entries whose row is gone (a slot entry whose
 *		partitioned consumer is no longer in pgque.partition_consumer, a
 *		heartbeat whose member is no longer in pgque.coop_member).
 *
 * The order is what makes it safe.  The entries are listed first, only
 * committed ones (an entry whose creating transaction is still open may
 * belong to a row that is not visible yet); the rows are read after, with a
 * snapshot taken then (READ COMMITTED: a new one per query), so a row that
 * committed together with a listed entry is seen.  An entry is removed only
 * if it is unchanged since it was listed (the same epoch or generation), so
 * one created again in between stays.
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "pgque_bgw.h"
#include "coop.h"
#include "rules.h"
#include "slots.h"

/* released slot entries stay this long for partition_slot_status to show */
#define RELEASED_KEEP_MS (10 * 60 * 1000)

#define ROW_NAME_MAX Max(PGQUE_CONSUMER_MAX, PGQUE_COOP_NAME_MAX)

typedef struct RowKey
{
	int32		id;
	char		name[ROW_NAME_MAX + 1];
} RowKey;

/*
 * The rows of sql (int4, text: the columns of table) in a local hash, read
 * with a fresh snapshot.
 */
static const Oid row_types[2] = {INT4OID, TEXTOID};

static HTAB *
read_rows(const char *sql, const char *table)
{
	HASHCTL		info;
	HTAB	   *rows;
	uint64		i;

	memset(&info, 0, sizeof(info));
	info.keysize = sizeof(RowKey);
	info.entrysize = sizeof(RowKey);
	info.hcxt = CurrentMemoryContext;
	rows = hash_create("pgque_bgw reclaim rows", 256, &info, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	if (SPI_execute(sql, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "reading rows for the reclaim failed");
	/* an owner's retyped column: refused, never read as these (ADR 0105) */
	pgque_check_columns(SPI_tuptable->tupdesc, row_types, 2, table,
						"The table must keep the column types the extension made; ALTER them back.");
	for (i = 0; i < SPI_processed; i++)
	{
		RowKey		k;
		bool		null;
		Datum		d;

		memset(&k, 0, sizeof(k));
		k.id = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &null));
		d = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2, &null);
		if (null)
			continue;
		strlcpy(k.name, TextDatumGetCString(d), sizeof(k.name));
		hash_search(rows, &k, HASH_ENTER, NULL);
	}
	return rows;
}

static bool
has_row(HTAB *rows, int32 id, const char *name)
{
	RowKey		k;

	memset(&k, 0, sizeof(k));
	k.id = id;
	strlcpy(k.name, name, sizeof(k.name));
	return hash_search(rows, &k, HASH_FIND, NULL) != NULL;
}

/*
 * One reclaim pass in this database (a watchdog unit: a transaction, SPI
 * connected).  Returns how many entries went.
 */
int
pgque_reclaim_pass(void)
{
	int			n = 0;
	SlotLease  *slots;
	int			nslots = 0;
	int32	   *subs;
	char	  **members;
	uint64	   *gens;
	int			nmembers = 0;
	HTAB	   *rows;
	int			i;

	/* the list is read before the rows: see the file header */
	if (IsolationUsesXactSnapshot())
		elog(ERROR, "the reclaim needs READ COMMITTED");
	if (pgque_slots_available())
	{
		n += pgque_slot_reclaim(TimestampTzPlusMilliseconds(GetCurrentTimestamp(), -RELEASED_KEEP_MS));
		slots = pgque_slot_list(MyDatabaseId, &nslots);
		rows = read_rows("select queue_id, co_name from pgque.partition_consumer", "pgque.partition_consumer");
		for (i = 0; i < nslots; i++)
		{
			if (slots[i].pending_pid != 0 || has_row(rows, slots[i].key.queue_id, slots[i].key.consumer))
				continue;
			n += pgque_slot_drop_if(&slots[i].key, slots[i].epoch);
		}
	}
	n += pgque_coop_reclaim();
	pgque_coop_list(MyDatabaseId, &subs, &members, &gens, &nmembers);
	rows = read_rows("select cm_sub, cm_name from pgque.coop_member", "pgque.coop_member");
	for (i = 0; i < nmembers; i++)
	{
		if (!has_row(rows, subs[i], members[i]))
			n += pgque_coop_drop_if(subs[i], members[i], gens[i]);
	}
	return n;
}
