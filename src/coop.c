/*
 * coop.c
 *		The shared-memory member table of cooperative consumers: when each
 *		member of a group was last heard of (receive_coop, touch_subconsumer,
 *		ack, nack) and which batch it holds.
 *
 * A heartbeat is a store under one LWLock: no row, no WAL, no dead tuple
 * (ADR 0017).  The durable facts (who is a member, which window a member
 * holds, since when) live in pgque.coop_member and pgque.coop_window; this
 * table only says who is alive.  It is lost on restart: a member without an
 * entry is judged by the claim time of its window.  Fixed size
 * (PGQUE_COOP_MEMBERS_MAX); when it is full a heartbeat is not recorded and
 * the member is judged by its claim time, as after a restart.  Groups are
 * capped in SQL (members per group), so one group cannot fill it alone.
 */
#include "postgres.h"

#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "compat.h"
#include "pgque_bgw.h"
#include "coop.h"
#include "rules.h"

/* subconsumer names: the SQL checks the same limit (rules.h) */
#define COOP_NAME_MAX PGQUE_COOP_NAME_MAX

typedef struct CoopKey
{
	Oid			dboid;
	int32		sub_id;			/* the group's main subscription */
	char		member[COOP_NAME_MAX + 1];	/* zero-padded */
} CoopKey;

typedef struct CoopMember
{
	CoopKey		key;
	TimestampTz last_seen;
	int64		batch;			/* last batch handed to it; 0 = none */
	int64		polls;
} CoopMember;

static HTAB *coop_table = NULL;
static LWLock *coop_lock = NULL;

void
pgque_coop_request(void)
{
	RequestAddinShmemSpace(hash_estimate_size(PGQUE_COOP_MEMBERS_MAX, sizeof(CoopMember)));
	RequestNamedLWLockTranche("pgque_bgw coop", 1);
}

void
pgque_coop_startup(void)
{
	HASHCTL		info;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	memset(&info, 0, sizeof(info));
	info.keysize = sizeof(CoopKey);
	info.entrysize = sizeof(CoopMember);
	coop_table = ShmemInitHash("pgque_bgw coop members", PGQUE_COOP_MEMBERS_MAX,
							   PGQUE_COOP_MEMBERS_MAX, &info,
							   HASH_ELEM | HASH_BLOBS | HASH_FIXED_SIZE);
	coop_lock = &(GetNamedLWLockTranche("pgque_bgw coop"))->lock;
	LWLockRelease(AddinShmemInitLock);
}

static void
make_key(CoopKey *key, int32 sub_id, text *member)
{
	char	   *m = text_to_cstring(member);

	memset(key, 0, sizeof(CoopKey));
	key->dboid = MyDatabaseId;
	key->sub_id = sub_id;
	strlcpy(key->member, m, sizeof(key->member));
}

PG_FUNCTION_INFO_V1(pgque_coop_touch);
PG_FUNCTION_INFO_V1(pgque_coop_seen);
PG_FUNCTION_INFO_V1(pgque_coop_forget);
PG_FUNCTION_INFO_V1(pgque_coop_members);

/*
 * pgque._coop_touch(sub_id, member, batch) -> void: the member is alive now
 * (and holds batch, when not NULL).  Without preload, or with the table
 * full, nothing is recorded.
 */
Datum
pgque_coop_touch(PG_FUNCTION_ARGS)
{
	CoopKey		key;
	CoopMember *e;
	bool		found;

	if (coop_table == NULL || PG_ARGISNULL(0) || PG_ARGISNULL(1))
		PG_RETURN_VOID();
	make_key(&key, PG_GETARG_INT32(0), PG_GETARG_TEXT_PP(1));
	LWLockAcquire(coop_lock, LW_EXCLUSIVE);
	e = (CoopMember *) hash_search(coop_table, &key, HASH_ENTER_NULL, &found);
	if (e != NULL)
	{
		if (!found)
		{
			e->batch = 0;
			e->polls = 0;
		}
		e->last_seen = GetCurrentTimestamp();
		if (!PG_ARGISNULL(2))
			e->batch = PG_GETARG_INT64(2);
		e->polls++;
	}
	LWLockRelease(coop_lock);
	PG_RETURN_VOID();
}

/* pgque._coop_seen(sub_id, member) -> last heartbeat, NULL if unknown */
Datum
pgque_coop_seen(PG_FUNCTION_ARGS)
{
	CoopKey		key;
	CoopMember *e;
	TimestampTz seen = 0;

	if (coop_table == NULL || PG_ARGISNULL(0) || PG_ARGISNULL(1))
		PG_RETURN_NULL();
	make_key(&key, PG_GETARG_INT32(0), PG_GETARG_TEXT_PP(1));
	LWLockAcquire(coop_lock, LW_SHARED);
	e = (CoopMember *) hash_search(coop_table, &key, HASH_FIND, NULL);
	if (e != NULL)
		seen = e->last_seen;
	LWLockRelease(coop_lock);
	if (seen == 0)
		PG_RETURN_NULL();
	PG_RETURN_TIMESTAMPTZ(seen);
}

/*
 * pgque._coop_forget(sub_id, member) -> entries removed; a NULL member
 * forgets the whole group, a NULL sub_id the whole database.
 */
Datum
pgque_coop_forget(PG_FUNCTION_ARGS)
{
	HASH_SEQ_STATUS seq;
	CoopMember *e;
	char	   *m = PG_ARGISNULL(1) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(1));
	int			n = 0;

	if (coop_table == NULL)
		PG_RETURN_INT32(0);
	LWLockAcquire(coop_lock, LW_EXCLUSIVE);
	hash_seq_init(&seq, coop_table);
	while ((e = (CoopMember *) hash_seq_search(&seq)) != NULL)
	{
		if (e->key.dboid != MyDatabaseId)
			continue;
		if (!PG_ARGISNULL(0) && e->key.sub_id != PG_GETARG_INT32(0))
			continue;
		if (m != NULL && strncmp(e->key.member, m, COOP_NAME_MAX) != 0)
			continue;
		hash_search(coop_table, &e->key, HASH_REMOVE, NULL);
		n++;
	}
	LWLockRelease(coop_lock);
	PG_RETURN_INT32(n);
}

/*
 * pgque._coop_members() -> this database's entries: (sub_id, member,
 * last_seen, batch, polls).  Reading writes nothing.
 */
Datum
pgque_coop_members(PG_FUNCTION_ARGS)
{
	TupleDesc	desc;
	Tuplestorestate *ts;
	MemoryContext old;
	HASH_SEQ_STATUS seq;
	CoopMember *e;
	CoopMember *copy;
	int			n = 0;
	int			i;

	old = pgque_materialize(fcinfo, &ts, &desc);
	if (coop_table == NULL)
	{
		MemoryContextSwitchTo(old);
		return (Datum) 0;
	}
	copy = palloc(sizeof(CoopMember) * PGQUE_COOP_MEMBERS_MAX);
	LWLockAcquire(coop_lock, LW_SHARED);
	hash_seq_init(&seq, coop_table);
	while ((e = (CoopMember *) hash_seq_search(&seq)) != NULL)
	{
		if (e->key.dboid == MyDatabaseId && n < PGQUE_COOP_MEMBERS_MAX)
			copy[n++] = *e;
	}
	LWLockRelease(coop_lock);
	for (i = 0; i < n; i++)
	{
		Datum		v[5];
		bool		nulls[5];

		memset(nulls, 0, sizeof(nulls));
		v[0] = Int32GetDatum(copy[i].key.sub_id);
		v[1] = CStringGetTextDatum(copy[i].key.member);
		v[2] = TimestampTzGetDatum(copy[i].last_seen);
		v[3] = Int64GetDatum(copy[i].batch);
		nulls[3] = copy[i].batch == 0;
		v[4] = Int64GetDatum(copy[i].polls);
		tuplestore_putvalues(ts, desc, v, nulls);
	}
	MemoryContextSwitchTo(old);
	return (Datum) 0;
}
