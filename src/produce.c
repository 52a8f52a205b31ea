/*
 * produce.c
 *		The producer's SQL-callable entry points, in C: send (text and jsonb
 *		payloads, with and without a partition key), send_batch,
 *		insert_event and the internal _insert_event; and
 *		pgque_insert_fields(), the same append for the CDC triggers.
 *
 * Each call finds the queue by name in the per-backend cache
 * (queue_cache.c) and appends to the queue's current child table
 * (append.c: heap_insert and index_insert when the table is as the
 * extension made it, a kept plan otherwise; ADR 0085).
 *
 * Rights (ADR 0032).  These functions are SECURITY INVOKER.  Who may call
 * them is PostgreSQL's EXECUTE check, on every call, against the caller:
 * the grants of sql/90_grants.sql (pgque_writer, the owner) and the same
 * 42501 as ever for anyone else.  The lookup and the append then run as the
 * extension owner, switched to here: SetUserIdAndSecContext(owner, ... |
 * SECURITY_LOCAL_USERID_CHANGE), restored on the way out, by PG_FINALLY on
 * an error.  That is what SECURITY DEFINER did, without its per-call GUC
 * save/restore of the pinned search_path: nothing between the switches
 * resolves a name through search_path (every relation, function and
 * operator in the plans is qualified) and nothing of the caller's runs
 * there.
 *
 * The checks and error messages are those of the SQL helpers in
 * sql/10_util.sql and sql/30_produce.sql, with the same SQLSTATEs.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "commands/sequence.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "storage/sinval.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"

#include "compat.h"
#include "wake.h"
#include "producer.h"
#include "rules.h"

#define PGQUE_EXTRA_COLS 4

PG_FUNCTION_INFO_V1(pgque_send);
PG_FUNCTION_INFO_V1(pgque_send_jsonb);
PG_FUNCTION_INFO_V1(pgque_send_batch);
PG_FUNCTION_INFO_V1(pgque_insert_event);
PG_FUNCTION_INFO_V1(pgque_insert_event_full);

/*
 * What every append does before it looks at a queue.  Take the
 * transaction's xid first: a transaction whose xid comes after a rotation
 * switch (or a change to partition buckets) has committed then sees the new
 * layout, which is what the readers' choice of tables relies on
 * (pgque._event_source()).  Then pick up committed changes of other
 * backends before trusting the caches.
 */
static void
producer_prologue(void)
{
	PreventCommandIfReadOnly("pgque send");
	/* as the executor's INSERT refuses (ADR 0085: the append bypasses it) */
	PreventCommandIfParallelMode("pgque send");
	(void) GetTopTransactionId();
	AcceptInvalidationMessages();
}

/*
 * Run fn(arg) as the extension owner (see the file header).  The security
 * context keeps the caller's restrictions (a security-restricted operation
 * stays one) and forbids SET ROLE inside, as a SECURITY DEFINER frame does.
 */
static void
run_as_owner(void (*fn) (void *), void *arg)
{
	Oid			save_user;
	int			save_sec;

	GetUserIdAndSecContext(&save_user, &save_sec);
	SetUserIdAndSecContext(pgque_producer_owner(), save_sec | SECURITY_LOCAL_USERID_CHANGE);
	PG_TRY();
	{
		fn(arg);
	}
	PG_FINALLY();
	{
		SetUserIdAndSecContext(save_user, save_sec);
	}
	PG_END_TRY();
}

/*
 * Producers are refused a queue whose inserts are disabled; replicas
 * (session_replication_role = replica) may always insert.
 */
static void
refuse_disabled(text *queue_name, bool disabled)
{
	if (disabled && SessionReplicationRole != SESSION_REPLICATION_ROLE_REPLICA)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("Insert into queue disallowed"),
				 errdetail("Queue %s has disable_insert set.", text_to_cstring(queue_name)),
				 errhint("pgque.set_queue_config(queue, 'disable_insert', 'false') re-enables it.")));
}

/*
 * The caller's "send" right on the queue (ADR 0047), from the grantees
 * cached with it and whether each holds its anchor grant (ADR 0079): a
 * membership test per grantee, no catalog read.
 */
static void
check_send_right(text *queue_name, const QueueInfo *q, Oid producer)
{
	if (q->nsenders < 0)
		return;					/* the database's SQL is still 0.2.0's */
	pgque_check_queue_right_anchored(producer, text_to_cstring(queue_name), "send", q->senders,
									 q->anchored, q->nsenders);
}

/*
 * The queue's next event id.  No right check on the sequence
 * (check_permissions false), as core's identity columns draw theirs
 * (ExecEvalNextValueExpr): every append runs as the extension owner, who
 * owns the queue's sequence, after the checks that decide whether the
 * caller may produce at all (EXECUTE, the queue's "send" right, ADR 0047);
 * the sequence's own ACL decides nothing there, and its check was a
 * catalog lookup per event (ADR 0117: 0.68k of a send_batch's 11.7k
 * instructions per event).
 */
static inline int64
next_event_id(const QueueInfo *q)
{
	return nextval_internal(q->event_seq, false);
}

/* one event: args/isnull are indexed by the INS_* positions */
typedef struct AppendOne
{
	text	   *queue_name;
	Datum	   *args;
	bool	   *isnull;
	bool		check_disabled; /* producers do; re-injection by maintenance does not */
	Oid			producer;		/* whose "send" right is checked (ADR 0047): the
								 * caller, a CDC trigger's table owner; none for
								 * maintenance's re-injection */
	int64		ev_id;			/* out */
	int32		queue_id;		/* out */
} AppendOne;

static void
append_one(void *arg)
{
	AppendOne  *a = (AppendOne *) arg;
	QueueInfo	q;
	int			bucket;

	pgque_lookup_queue(a->queue_name, &q);
	a->queue_id = q.queue_id;
	if (OidIsValid(a->producer))
		check_send_right(a->queue_name, &q, a->producer);
	if (a->check_disabled)
		refuse_disabled(a->queue_name, q.disabled);

	/* the next id of the queue's sequence, unless the caller chose one */
	if (a->isnull[INS_EV_ID])
	{
		a->args[INS_EV_ID] = Int64GetDatum(next_event_id(&q));
		a->isnull[INS_EV_ID] = false;
	}
	a->ev_id = DatumGetInt64(a->args[INS_EV_ID]);

	/* the partition key rides in ev_extra1 */
	bucket = q.nbuckets > 0 ? pgque_slot_of(a->args[INS_EXTRA1], a->isnull[INS_EXTRA1], q.nbuckets) : 0;
	pgque_append_one(&q, bucket, a->args, a->isnull);
}

/*
 * Append one event; returns its ev_id.  as_owner: switch to the extension
 * owner for the append (the SQL entry points); else the caller has chosen
 * the role (the CDC triggers).
 */
static int64
insert_event_internal(text *queue_name, Datum *args, bool *isnull, bool check_disabled, bool as_owner,
					  Oid producer)
{
	AppendOne	a;

	pgque_check_queue_name((struct varlena *) queue_name);
	producer_prologue();

	a.queue_name = queue_name;
	a.args = args;
	a.isnull = isnull;
	a.check_disabled = check_disabled;
	/* maintenance's re-injection (check_disabled false) is not a send */
	a.producer = check_disabled ? producer : InvalidOid;
	a.ev_id = 0;
	if (as_owner)
		run_as_owner(append_one, &a);
	else
		append_one(&a);

	pgque_note_event_inserted(a.queue_id); /* wake the ticker when this commits */
	return a.ev_id;
}

static void
clear_args(Datum *args, bool *isnull)
{
	int			i;

	for (i = 0; i < INS_NPARAMS; i++)
	{
		args[i] = (Datum) 0;
		isnull[i] = true;
	}
}

/*
 * Append one event for a producer written in C (the change-data-capture
 * triggers, src/cdc.c): fields[0..5] are ev_type, ev_data, ev_extra1..4,
 * nulls[] their NULL flags.  The same queue cache, kept plan, bucket
 * routing and disable_insert rule as send().  The caller has chosen the
 * role it runs as.
 */
int64
pgque_insert_fields(struct varlena *queue_name, const Datum *fields, const bool *nulls, Oid producer)
{
	Datum		args[INS_NPARAMS];
	bool		isnull[INS_NPARAMS];
	int			i;

	clear_args(args, isnull);
	for (i = 0; i < 2 + PGQUE_EXTRA_COLS; i++)
	{
		args[INS_TYPE + i] = nulls[i] ? (Datum) 0 : fields[i];
		isnull[INS_TYPE + i] = nulls[i];
	}
	return insert_event_internal((text *) queue_name, args, isnull, true, false, producer);
}

/*
 * The send family; payload: the payload as text (NULL: SQL NULL), taken
 * from the argument the form has it in.
 */
static int64
send_common(FunctionCallInfo fcinfo, Datum payload, bool payload_null)
{
	Datum		args[INS_NPARAMS];
	bool		isnull[INS_NPARAMS];
	int			nargs = PG_NARGS();

	clear_args(args, isnull);
	if (nargs == 2)
	{
		args[INS_TYPE] = CStringGetTextDatum("default");
		isnull[INS_TYPE] = false;
	}
	else
	{
		if (PG_ARGISNULL(1))
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("type_name must not be null")));
		args[INS_TYPE] = PG_GETARG_DATUM(1);
		isnull[INS_TYPE] = false;
		/* the partition key rides in ev_extra1 */
		if (nargs > 3 && !PG_ARGISNULL(3))
		{
			args[INS_EXTRA1] = PG_GETARG_DATUM(3);
			isnull[INS_EXTRA1] = false;
		}
	}
	args[INS_DATA] = payload;
	isnull[INS_DATA] = payload_null;

	return insert_event_internal(PG_ARGISNULL(0) ? NULL : PG_GETARG_TEXT_PP(0),
								 args, isnull, true, true, GetOuterUserId());
}

/* the argument that holds the payload: send(queue, payload) or send(queue, type, payload [, key]) */
#define PAYLOAD_ARG (PG_NARGS() == 2 ? 1 : 2)

/*
 * send(queue_name, payload)                         type 'default'
 * send(queue_name, type_name, payload)
 * send(queue_name, type_name, payload, partition_key)
 * with a text payload, stored byte for byte.
 */
Datum
pgque_send(PG_FUNCTION_ARGS)
{
	int			p = PAYLOAD_ARG;

	PG_RETURN_INT64(send_common(fcinfo, PG_ARGISNULL(p) ? (Datum) 0 : PG_GETARG_DATUM(p),
								PG_ARGISNULL(p)));
}

/* The same forms with a jsonb payload, stored as its canonical text (payload::text). */
Datum
pgque_send_jsonb(PG_FUNCTION_ARGS)
{
	int			p = PAYLOAD_ARG;
	Datum		payload = (Datum) 0;

	if (!PG_ARGISNULL(p))
	{
		Jsonb	   *jb = PG_GETARG_JSONB_P(p);

		payload = CStringGetTextDatum(JsonbToCString(NULL, &jb->root, VARSIZE(jb)));
	}
	PG_RETURN_INT64(send_common(fcinfo, payload, PG_ARGISNULL(p)));
}

/*
 * insert_event(queue_name, ev_type, ev_data [, ev_extra1..4]): the PgQ
 * primitive; a NULL ev_type is allowed here.
 */
Datum
pgque_insert_event(PG_FUNCTION_ARGS)
{
	Datum		args[INS_NPARAMS];
	bool		isnull[INS_NPARAMS];
	int			nargs = PG_NARGS();
	int			i;

	clear_args(args, isnull);
	for (i = 1; i < nargs; i++)
	{
		isnull[i - 1] = PG_ARGISNULL(i);
		args[i - 1] = isnull[i - 1] ? (Datum) 0 : PG_GETARG_DATUM(i);
	}

	PG_RETURN_INT64(insert_event_internal(PG_ARGISNULL(0) ? NULL : PG_GETARG_TEXT_PP(0),
										  args, isnull, true, true, GetOuterUserId()));
}

/*
 * pgque._insert_event(queue_name, ev_id, ev_time, ev_owner, ev_retry,
 *                     ev_type, ev_data, ev_extra1..4, check_disabled)
 * -> ev_id: the internal full form, for send_at, send_idem and DLQ replay
 * (NULL ev_id / ev_time: next id / now()).  Executable by the owner only.
 */
Datum
pgque_insert_event_full(PG_FUNCTION_ARGS)
{
	Datum		args[INS_NPARAMS];
	bool		isnull[INS_NPARAMS];
	static const int pos[] = {INS_EV_ID, INS_EV_TIME, INS_OWNER, INS_RETRY, INS_TYPE, INS_DATA,
	INS_EXTRA1, INS_EXTRA1 + 1, INS_EXTRA1 + 2, INS_EXTRA1 + 3};
	int			i;

	clear_args(args, isnull);
	for (i = 0; i < INS_NPARAMS; i++)
	{
		isnull[pos[i]] = PG_ARGISNULL(i + 1);
		args[pos[i]] = isnull[pos[i]] ? (Datum) 0 : PG_GETARG_DATUM(i + 1);
	}

	PG_RETURN_INT64(insert_event_internal(PG_ARGISNULL(0) ? NULL : PG_GETARG_TEXT_PP(0),
										  args, isnull, PG_ARGISNULL(11) || PG_GETARG_BOOL(11), true,
										  GetOuterUserId()));
}

static void
check_text_array(ArrayType *arr, const char *what)
{
	if (ARR_NDIM(arr) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("%s must be a one-dimensional array", what)));
}

/* an array of events, checked */
typedef struct AppendBatch
{
	text	   *queue_name;
	Datum		type_name;
	ArrayType  *payloads;
	ArrayType  *keys;			/* NULL: no keys */
	int			n;
	MemoryContext caller_cxt;
	int64	   *ids;			/* out, in caller_cxt, in input order */
	int32		queue_id;		/* out */
} AppendBatch;

/*
 * Append the events to the queue's current table, those of each partition
 * bucket to its table (buckets NULL: all to bucket 0), in input order
 * within each.
 */
static void
append_by_bucket(AppendBatch *a, const QueueInfo *q, Datum *pdat, bool *pnull, Datum *kdat,
				 bool *knull, const int *buckets)
{
	int			n = a->n;
	int64	   *sub_ids;
	Datum	   *sub_p;
	bool	   *sub_pn;
	Datum	   *sub_k;
	bool	   *sub_kn;
	int			b;
	int			i;

	if (buckets == NULL)
	{
		pgque_append_rows(q, 0, a->type_name, a->ids, pdat, pnull, kdat, knull, n);
		return;
	}
	sub_ids = palloc(sizeof(int64) * n);
	sub_p = palloc(sizeof(Datum) * n);
	sub_pn = palloc(sizeof(bool) * n);
	sub_k = palloc(sizeof(Datum) * n);
	sub_kn = palloc(sizeof(bool) * n);
	for (b = 0; b < q->nbuckets; b++)
	{
		int			m = 0;

		for (i = 0; i < n; i++)
		{
			if (buckets[i] != b)
				continue;
			sub_ids[m] = a->ids[i];
			sub_p[m] = pdat[i];
			sub_pn[m] = pnull[i];
			sub_k[m] = kdat[i];
			sub_kn[m] = knull[i];
			m++;
		}
		if (m > 0)
			pgque_append_rows(q, b, a->type_name, sub_ids, sub_p, sub_pn, sub_k, sub_kn, m);
	}
}

static void
append_batch(void *arg)
{
	AppendBatch *a = (AppendBatch *) arg;
	int			n = a->n;
	QueueInfo	q;
	int		   *buckets = NULL;
	Datum	   *pdat;
	bool	   *pnull;
	Datum	   *kdat = NULL;
	bool	   *knull = NULL;
	int			np;
	int			i;

	pgque_lookup_queue(a->queue_name, &q);
	a->queue_id = q.queue_id;
	check_send_right(a->queue_name, &q, GetOuterUserId());
	refuse_disabled(a->queue_name, q.disabled);
	if (n == 0)
		return;

	/* the ids, drawn in input order before anything is inserted */
	a->ids = MemoryContextAlloc(a->caller_cxt, sizeof(int64) * n);
	for (i = 0; i < n; i++)
		a->ids[i] = next_event_id(&q);

	deconstruct_array(a->payloads, TEXTOID, -1, false, TYPALIGN_INT, &pdat, &pnull, &np);
	if (a->keys != NULL)
	{
		int			nk;

		deconstruct_array(a->keys, TEXTOID, -1, false, TYPALIGN_INT, &kdat, &knull, &nk);
	}

	/* which partition buckets the keys go to: one, or several */
	if (a->keys != NULL && q.nbuckets > 0)
	{
		bool		several = false;

		buckets = palloc(sizeof(int) * n);
		for (i = 0; i < n; i++)
		{
			buckets[i] = pgque_slot_of(kdat[i], knull[i], q.nbuckets);
			several |= buckets[i] != buckets[0];
		}
		if (!several)
		{
			pgque_append_rows(&q, buckets[0], a->type_name, a->ids, pdat, pnull, kdat, knull, n);
			return;
		}
	}
	append_by_bucket(a, &q, pdat, pnull, kdat, knull, buckets);
}

/*
 * send_batch(queue_name, type_name, payloads text[] [, partition_keys text[]])
 * send_batch(queue_name, payloads text[])            type 'default'
 * -> bigint[]: one INSERT ... SELECT for the whole array (one per partition
 * bucket that the keys reach); the ids come back in input order.  An empty
 * array appends nothing and returns {} (after the queue has been checked).
 */
Datum
pgque_send_batch(PG_FUNCTION_ARGS)
{
	int			p = PG_NARGS() == 2 ? 1 : 2;	/* the payloads argument */
	AppendBatch a;
	Datum	   *id_datums;
	int			i;

	a.queue_name = PG_ARGISNULL(0) ? NULL : PG_GETARG_TEXT_PP(0);
	a.keys = NULL;
	a.ids = NULL;
	a.caller_cxt = CurrentMemoryContext;

	pgque_check_queue_name((struct varlena *) a.queue_name);
	if (p == 1)
		a.type_name = CStringGetTextDatum("default");
	else if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("type_name must not be null")));
	else
		a.type_name = PG_GETARG_DATUM(1);
	if (PG_ARGISNULL(p))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("payloads must not be null")));
	a.payloads = PG_GETARG_ARRAYTYPE_P(p);
	check_text_array(a.payloads, "payloads");
	a.n = ArrayGetNItems(ARR_NDIM(a.payloads), ARR_DIMS(a.payloads));
	if (PG_NARGS() > 3)
	{
		int			nkeys;

		if (PG_ARGISNULL(3))
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("partition_keys must not be null")));
		a.keys = PG_GETARG_ARRAYTYPE_P(3);
		check_text_array(a.keys, "partition_keys");
		nkeys = ArrayGetNItems(ARR_NDIM(a.keys), ARR_DIMS(a.keys));
		if (nkeys != a.n)
			ereport(ERROR,
					(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
					 errmsg("partition_keys has %d elements but payloads has %d", nkeys, a.n)));
	}

	producer_prologue();
	run_as_owner(append_batch, &a);
	if (a.n == 0)
		PG_RETURN_ARRAYTYPE_P(construct_empty_array(INT8OID));
	pgque_note_event_inserted(a.queue_id);

	id_datums = palloc(sizeof(Datum) * a.n);
	for (i = 0; i < a.n; i++)
		id_datums[i] = Int64GetDatum(a.ids[i]);
	PG_RETURN_ARRAYTYPE_P(construct_array(id_datums, a.n, INT8OID, sizeof(int64),
										  FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
}
