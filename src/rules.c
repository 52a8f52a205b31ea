/*
 * rules.c
 *		The C side of the rules in rules.h: the queue name check and the
 *		partition slot of a key, each also what SQL calls; the per-queue
 *		rights rule (ADR 0047); and the anchor rule (ADR 0079): a role named
 *		in a regrole list counts only while it holds its own grant on
 *		pgque.grantee_anchor; the names of a queue's event relations
 *		(ADR 0133), which SQL builds through pgque._event_table() and
 *		pgque._event_seq().
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

#include "compat.h"
#include "caller.h"
#include "rules.h"

PG_FUNCTION_INFO_V1(pgque_slot_of_sql);
PG_FUNCTION_INFO_V1(pgque_event_table_sql);
PG_FUNCTION_INFO_V1(pgque_event_seq_sql);

/*
 * Validate a queue name: not NULL, not empty, at most PGQUE_QUEUE_NAME_MAX
 * bytes.  The same messages and SQLSTATEs as pgque._check_name('queue', ...)
 * in sql/10_util.sql, which gets its limit from rules.h.
 */
void
pgque_check_queue_name(struct varlena *name)
{
	int			len;

	if (name == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("queue name must not be null")));
	len = VARSIZE_ANY_EXHDR(name);
	if (len == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("queue name must not be empty")));
	if (len > PGQUE_QUEUE_NAME_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_NAME_TOO_LONG),
				 errmsg("queue name too long: %d bytes (max %d)", len, PGQUE_QUEUE_NAME_MAX),
				 errdetail("The NOTIFY channel pgque_<queue name> must fit in 63 bytes.")));
}

/*
 * The partition slot of a key for n slots (SPEC §3): hashtextextended(key,
 * 0) mod n, made non-negative; a NULL key is slot 0.  The producer routes a
 * key to bucket slot_of(key, B); with N dividing B, bucket mod N is the
 * key's slot.  As the SQL expression it replaces, n = 0 is a division by
 * zero and a negative n gives (-|n|, 0].
 */
int32
pgque_slot_of(Datum key, bool isnull, int32 n)
{
	int64		h;

	if (isnull)
		return 0;
	if (n == 0)
		ereport(ERROR,
				(errcode(ERRCODE_DIVISION_BY_ZERO),
				 errmsg("division by zero")));
	if (n == -1)
		return 0;				/* INT64_MIN % -1 traps in C */
	h = DatumGetInt64(DirectFunctionCall2Coll(hashtextextended, DEFAULT_COLLATION_OID,
											  key, Int64GetDatum(0)));
	return (int32) ((h % n + n) % n);
}

/* pgque._slot_of(key text, n int4) -> int4 */
Datum
pgque_slot_of_sql(PG_FUNCTION_ARGS)
{
	if (PG_ARGISNULL(0))
		PG_RETURN_INT32(0);
	if (PG_ARGISNULL(1))
		PG_RETURN_NULL();
	PG_RETURN_INT32(pgque_slot_of(PG_GETARG_DATUM(0), false, PG_GETARG_INT32(1)));
}

/*
 * The name, in schema pgque, of a queue's event relation (ADR 0133): the
 * parent "event_<queue>" (table < 0), a child table "event_<queue>_<table>"
 * (bucket < 0) or a partition bucket of one, "event_<queue>_<table>_b<bucket>".
 * The one spelling: the producer (append.c, insert_plan.c) calls it, SQL
 * through pgque._event_table(); buf holds NAMEDATALEN bytes (the longest
 * name, three int4s, is 39).
 */
void
pgque_event_table(char *buf, int32 queue_id, int32 table, int32 bucket)
{
	if (table < 0)
		snprintf(buf, NAMEDATALEN, "event_%d", queue_id);
	else if (bucket < 0)
		snprintf(buf, NAMEDATALEN, "event_%d_%d", queue_id, table);
	else
		snprintf(buf, NAMEDATALEN, "event_%d_%d_b%d", queue_id, table, bucket);
}

/*
 * The name, in schema pgque, of a queue's event id sequence (tick false,
 * "event_<queue>_id_seq") or tick sequence ("event_<queue>_tick_seq"):
 * create_queue makes them by it, the producer's cache finds the first by it.
 */
void
pgque_event_seq(char *buf, int32 queue_id, bool tick)
{
	char		parent[NAMEDATALEN];

	pgque_event_table(parent, queue_id, -1, -1);
	snprintf(buf, NAMEDATALEN, "%s_%s_seq", parent, tick ? "tick" : "id");
}

/* an argument of the name functions: not NULL (where required), not negative */
static int32
event_name_arg(FunctionCallInfo fcinfo, int arg, const char *what, bool required)
{
	int32		v;

	if (PG_ARGISNULL(arg))
	{
		if (required)
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("%s must not be null", what)));
		return -1;
	}
	v = PG_GETARG_INT32(arg);
	if (v < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must not be negative, got %d", what, v)));
	return v;
}

/*
 * pgque._event_table(queue_id int4, table_no int4, bucket int4) -> text: the
 * parent (table_no NULL), a child table (bucket NULL) or a bucket, by
 * pgque_event_table; a bucket needs its table.
 */
Datum
pgque_event_table_sql(PG_FUNCTION_ARGS)
{
	char		buf[NAMEDATALEN];
	int32		queue_id = event_name_arg(fcinfo, 0, "queue_id", true);
	int32		table = event_name_arg(fcinfo, 1, "table_no", false);
	int32		bucket = event_name_arg(fcinfo, 2, "bucket", false);

	if (table < 0 && bucket >= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("bucket %d needs its table_no", bucket),
				 errhint("A partition bucket is a table of one child table: pass the child's number.")));
	pgque_event_table(buf, queue_id, table, bucket);
	PG_RETURN_TEXT_P(cstring_to_text(buf));
}

/* pgque._event_seq(queue_id int4, kind text) -> text: kind 'id' or 'tick' */
Datum
pgque_event_seq_sql(PG_FUNCTION_ARGS)
{
	char		buf[NAMEDATALEN];
	int32		queue_id = event_name_arg(fcinfo, 0, "queue_id", true);
	char	   *kind;

	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("kind must not be null")));
	kind = text_to_cstring(PG_GETARG_TEXT_PP(1));
	if (strcmp(kind, "id") != 0 && strcmp(kind, "tick") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown event sequence kind: \"%.32s\"", kind),
				 errhint("The kinds are 'id' and 'tick'.")));
	pgque_event_seq(buf, queue_id, strcmp(kind, "tick") == 0);
	PG_RETURN_TEXT_P(cstring_to_text(buf));
}

/*
 * Per-queue rights (ADR 0047): may the caller (the session's current role,
 * as pgque._caller()) use right ("send" or "subscribe") on the queue whose
 * grantees are given?  It may when it is a member of a grantee that holds
 * its anchor grant (pgque_role_anchored, ADR 0079), of
 * pgque_admin or of the role that installed the extension (superusers are
 * members of every role), or of pgque_owner (the workers' role, ADR 0042);
 * else 42501 naming the queue and the right.  The
 * one place the rule lives: the producer (produce.c, grantees cached with
 * the queue) and SQL (pgque._check_queue_right) both call it.
 */
void
pgque_check_queue_right(const char *queue_name, const char *right,
						const Oid *grantees, int ngrantees)
{
	pgque_check_queue_right_of(GetOuterUserId(), queue_name, right, grantees, ngrantees);
}

/*
 * The same for a given role: the owner of a table whose CDC trigger
 * appends to the queue produces on the table owner's behalf (cdc.c).
 */
static void check_queue_right_beyond_grantees(Oid caller, const char *queue_name, const char *right);

void
pgque_check_queue_right_of(Oid caller, const char *queue_name, const char *right,
						   const Oid *grantees, int ngrantees)
{
	int			i;

	for (i = 0; i < ngrantees; i++)
		if (has_privs_of_role(caller, grantees[i]) && pgque_role_anchored(grantees[i]))
			return;
	check_queue_right_beyond_grantees(caller, queue_name, right);
}

/*
 * The same with the grantees' anchors known: anchored[i] is
 * pgque_role_anchored(grantees[i]), kept current by the caller (the
 * producer's queue cache, flushed when pgque.grantee_anchor's ACL changes).
 */
void
pgque_check_queue_right_anchored(Oid caller, const char *queue_name, const char *right,
								 const Oid *grantees, const bool *anchored, int ngrantees)
{
	int			i;

	for (i = 0; i < ngrantees; i++)
		if (anchored[i] && has_privs_of_role(caller, grantees[i]))
			return;
	check_queue_right_beyond_grantees(caller, queue_name, right);
}

/* the rest of the rule: admins, the installer and pgque_owner; else 42501 */
static void
check_queue_right_beyond_grantees(Oid caller, const char *queue_name, const char *right)
{
	Oid			admin;
	Oid			extowner;

	/* the rare path: admins hold every right */
	admin = get_role_oid("pgque_admin", true);
	if (OidIsValid(admin) && has_privs_of_role(caller, admin))
		return;
	extowner = pgque_extension_owner();
	if (OidIsValid(extowner) && has_privs_of_role(caller, extowner))
		return;
	/* pgque_owner, which owns every queue and is what the workers run as */
	if (has_privs_of_role(caller, pgque_run_as_role()))
		return;
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("permission denied to %s queue \"%s\"",
					strcmp(right, "send") == 0 ? "send to" : "subscribe to", queue_name),
			 errdetail("Role \"%s\" holds no %s right on queue \"%s\": it is a member of no role granted it, nor of pgque_admin.",
					   GetUserNameFromId(caller, true) ? GetUserNameFromId(caller, true) : "?",
					   right, queue_name),
			 errhint("A pgque_admin grants it with pgque.grant_queue('%s', role, '%s').",
					 queue_name, right)));
}

/*
 * Is role anchored (ADR 0079)?  A role named in a consumer's users or a
 * queue's rights counts only while pgque.grantee_anchor's ACL holds an
 * entry of its own (SELECT, granted by grant_consumer/grant_queue; not one
 * it inherits): that grant is what makes DROP ROLE refuse the role, and it
 * is dumped by name.  An OID left by a dropped role (after DROP OWNED) has
 * no entry, nor has the role that holds that OID after a dump is restored
 * into another cluster: either grants nothing.  No anchor table (a schema
 * older than the library): nobody is anchored, the admins still pass.
 */
bool
pgque_role_anchored(Oid role)
{
	Oid			nsp;
	Oid			rel;
	HeapTuple	tup;
	Datum		d;
	bool		isnull;
	bool		found = false;

	nsp = get_namespace_oid("pgque", true);
	if (!OidIsValid(nsp))
		return false;
	rel = get_relname_relid("grantee_anchor", nsp);
	if (!OidIsValid(rel))
		return false;
	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(rel));
	if (!HeapTupleIsValid(tup))
		return false;
	d = SysCacheGetAttr(RELOID, tup, Anum_pg_class_relacl, &isnull);
	if (isnull)
		/* the default ACL: its owner's rights only */
		found = ((Form_pg_class) GETSTRUCT(tup))->relowner == role;
	else
	{
		Acl		   *acl = DatumGetAclP(d);
		AclItem    *items = ACL_DAT(acl);
		int			i;

		for (i = 0; i < ACL_NUM(acl) && !found; i++)
			found = items[i].ai_grantee == role && (items[i].ai_privs & ACL_SELECT) != 0;
		if ((Pointer) acl != DatumGetPointer(d))
			pfree(acl);
	}
	ReleaseSysCache(tup);
	return found;
}

/*
 * May role caller use a consumer of owner, granted to users (ADR 0058,
 * 0079)?  It may when it is the owner or a member of it, the owner holding
 * its anchor; a member of one of the users that holds its anchor; or an
 * admin: a member of pgque_admin or of the role that installed the
 * extension.  Membership is pg_has_role's MEMBER (is_member_of_role:
 * superusers are members of every role).  The one place the rule lives:
 * pgque._may_use calls it (_authorize and the readers of the consumers a
 * caller may see).
 */
bool
pgque_may_use(Oid caller, Oid owner, const Oid *users, int nusers)
{
	int			i;

	if (OidIsValid(owner) && (caller == owner || is_member_of_role(caller, owner)) &&
		pgque_role_anchored(owner))
		return true;
	for (i = 0; i < nusers; i++)
		if (is_member_of_role(caller, users[i]) && pgque_role_anchored(users[i]))
			return true;
	return pgque_caller_is_admin(caller);
}

/*
 * Is role caller an admin: a member of pgque_admin (raises when that role
 * is missing, as pg_has_role does) or of the role that installed the
 * extension (none when it is not installed)?
 */
bool
pgque_caller_is_admin(Oid caller)
{
	Oid			installer;

	if (is_member_of_role(caller, get_role_oid("pgque_admin", false)))
		return true;
	installer = pgque_extension_owner();
	return OidIsValid(installer) && is_member_of_role(caller, installer);
}

/*
 * pgque._may_use(owner regrole, users regrole[]) -> boolean: the same for
 * the caller (pgque._caller()), for SQL; NULL owner or users are none
 */
PG_FUNCTION_INFO_V1(pgque_may_use_sql);

/*
 * The roles of argument argno, a regrole[] (NULL: none), without its NULL
 * elements, into *n of them
 */
static Oid *
regrole_arg(FunctionCallInfo fcinfo, int argno, int *n)
{
	Datum	   *elems = NULL;
	bool	   *nulls = NULL;
	int			len = 0;
	Oid		   *oids;
	int			i;

	if (!PG_ARGISNULL(argno))
		deconstruct_array(PG_GETARG_ARRAYTYPE_P(argno), REGROLEOID, sizeof(Oid), true, TYPALIGN_INT,
						  &elems, &nulls, &len);
	oids = palloc(sizeof(Oid) * Max(len, 1));
	*n = 0;
	for (i = 0; i < len; i++)
		if (!nulls[i])
			oids[(*n)++] = DatumGetObjectId(elems[i]);
	return oids;
}

Datum
pgque_may_use_sql(PG_FUNCTION_ARGS)
{
	int			k;
	Oid		   *oids = regrole_arg(fcinfo, 1, &k);

	PG_RETURN_BOOL(pgque_may_use(GetOuterUserId(), PG_ARGISNULL(0) ? InvalidOid : PG_GETARG_OID(0),
								 oids, k));
}

/* pgque._caller_is_admin() -> boolean: pgque_caller_is_admin of the caller, for SQL */
PG_FUNCTION_INFO_V1(pgque_caller_is_admin_sql);

Datum
pgque_caller_is_admin_sql(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(pgque_caller_is_admin(GetOuterUserId()));
}

/* pgque._role_anchored(role regrole) -> boolean: the same, for SQL */
PG_FUNCTION_INFO_V1(pgque_role_anchored_sql);

Datum
pgque_role_anchored_sql(PG_FUNCTION_ARGS)
{
	if (PG_ARGISNULL(0))
		PG_RETURN_BOOL(false);
	PG_RETURN_BOOL(pgque_role_anchored(PG_GETARG_OID(0)));
}

/*
 * pgque._check_queue_right(queue_name text, right text, grantees regrole[]):
 * the same check for the SQL paths (subscribe, receive, send_at, send_idem).
 */
PG_FUNCTION_INFO_V1(pgque_check_queue_right_sql);

Datum
pgque_check_queue_right_sql(PG_FUNCTION_ARGS)
{
	int			k;
	Oid		   *oids;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		elog(ERROR, "pgque._check_queue_right: null argument");
	oids = regrole_arg(fcinfo, 2, &k);
	pgque_check_queue_right(text_to_cstring(PG_GETARG_TEXT_PP(0)),
							text_to_cstring(PG_GETARG_TEXT_PP(1)), oids, k);
	PG_RETURN_VOID();
}
