/*
 * cdc.c
 *		Change-data-capture triggers: pgque.logutriga(), pgque.jsontriga()
 *		and pgque.sqltriga(), PgQ's trigger family, appending one event per
 *		row change (or per TRUNCATE) in the changing transaction.
 *
 *   CREATE TRIGGER t AFTER INSERT OR UPDATE OR DELETE ON tbl
 *       FOR EACH ROW EXECUTE FUNCTION pgque.logutriga('queue' [, arg ...]);
 *
 * Arguments after the queue name: SKIP, backup, deny, ignore=col,...,
 * pkey=col,..., when=<expr>, ev_type= / ev_data= / ev_extra1..4=<expr>
 * (docs/sql-reference.md, "Change-data-capture triggers").  A trigger's
 * parsed arguments, the table's key and the kept plans of its expressions
 * are cached per backend by trigger oid and dropped on a relcache
 * invalidation of the table (ALTER TABLE, CREATE/DROP/ALTER TRIGGER,
 * GRANT).  A firing pins the entry it uses: an expression can change the
 * table (a GRANT) and change a row of it again, and the nested firing then
 * parses the trigger afresh instead of freeing what the outer one is still
 * executing; the outer firing's entry is freed when it ends (ADR 0037).
 *
 * Who runs what (ADR 0015, 0045, docs/security.md):
 *  - only a role with the table owner's rights may attach a trigger whose
 *    arguments hold expressions (pgque_cdc_check_attach(), called by the
 *    object-access hook of utility.c when a trigger is created): TRIGGER
 *    on a table is not the right to run SQL as its owner;
 *  - the table's owner must have the rights of pgque_writer (or of the
 *    extension owner), checked at every firing: a trigger writes to a queue
 *    on behalf of the table's owner, whoever changes the row;
 *  - when= and ev_*= expressions run as the table's owner, as a
 *    security-restricted operation under search_path = pg_catalog, pg_temp,
 *    in read-only SPI: never with the extension owner's rights, and never
 *    with the rights of the role that changes the row;
 *  - the append itself runs as the extension owner (as send() does, ADR
 *    0032), through produce.c's queue cache and kept plan, with no
 *    user text in its SQL.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_index.h"
#include "catalog/pg_language.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_trigger.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/json.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/plancache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "compat.h"
#include "caller.h"
#include "producer.h"
#include "rules.h"
#include "cdc.h"

/* the event fields, in the order pgque_insert_fields() takes them */
#define F_TYPE 0
#define F_DATA 1
#define F_EXTRA1 2
#define F_NFIELDS 6
/* ... and the when= condition, kept beside them */
#define F_WHEN 6
#define F_NEXPR 7

static const char *const field_names[F_NEXPR] = {
	"ev_type", "ev_data", "ev_extra1", "ev_extra2", "ev_extra3", "ev_extra4", "when"
};

#define MAGIC_PREFIX "_pgq_ev_"

typedef enum CdcFormat
{
	CDC_URLENC,					/* logutriga */
	CDC_JSON,					/* jsontriga */
	CDC_SQL						/* sqltriga */
} CdcFormat;

/*
 * One parse of a trigger's arguments and what they need; allocated in its
 * own context, with everything it points to.
 */
typedef struct CdcTrigger
{
	Oid			relid;
	bool		valid;			/* no invalidation of the table since it was parsed */
	bool		cached;			/* the cache still points to it */
	int			pins;			/* firings using it, in this backend */
	MemoryContext cxt;			/* holds this and everything below */
	text	   *queue;
	bool		skip;
	bool		backup;
	bool		deny;
	int			natts;
	bool	   *left_out;		/* [natts]: dropped, ignore=d or _pgq_ev_* */
	bool	   *ignored;		/* [natts]: ignore=d */
	bool	   *is_pk;			/* [natts] */
	bool		has_skipped_cols;	/* some ignore=d or magic column */
	char	   *pkey_list;		/* "a,b": key names in key order */
	char	   *pkey_json;		/* ["a","b"] */
	char	   *table_name;		/* schema.table */
	char	   *table_json;		/* ["schema","table"] */
	AttrNumber	magic[F_NFIELDS];	/* _pgq_ev_<field> column, 0 for none */
	char	   *expr[F_NEXPR];	/* expression source, NULL for none */
	SPIPlanPtr	plan[F_NEXPR];	/* prepared lazily, kept */
} CdcTrigger;

/* the cache: trigger oid -> its current parse */
typedef struct CdcCacheEntry
{
	Oid			tgoid;			/* hash key */
	CdcTrigger *trig;
} CdcCacheEntry;

static HTAB *trigger_cache = NULL;

PG_FUNCTION_INFO_V1(pgque_logutriga);
PG_FUNCTION_INFO_V1(pgque_jsontriga);
PG_FUNCTION_INFO_V1(pgque_sqltriga);

/* Relcache callback: a changed table (or everything) drops its triggers' entries. */
static void
cdc_cache_inval(Datum arg, Oid relid)
{
	HASH_SEQ_STATUS st;
	CdcCacheEntry *c;

	if (trigger_cache == NULL)
		return;
	hash_seq_init(&st, trigger_cache);
	while ((c = hash_seq_search(&st)) != NULL)
		if (c->trig != NULL && (relid == InvalidOid || c->trig->relid == relid))
			c->trig->valid = false;
}

/* Free a parse that neither the cache nor a firing uses any more. */
static void
free_if_unused(CdcTrigger *e)
{
	int			i;

	if (e->cached || e->pins > 0)
		return;
	for (i = 0; i < F_NEXPR; i++)
		if (e->plan[i] != NULL)
			SPI_freeplan(e->plan[i]);
	MemoryContextDelete(e->cxt);
}

/*
 * The field an argument sets with an expression ("ev_type=...", "when=..."),
 * or -1: the one test of whether a trigger argument is SQL.
 */
static int
expression_field(const char *a)
{
	int			f;

	for (f = 0; f < F_NEXPR; f++)
	{
		size_t		n = strlen(field_names[f]);

		if (strncmp(a, field_names[f], n) == 0 && a[n] == '=')
			return f;
	}
	return -1;
}

static void
bad_arg(Relation rel, const char *arg, const char *why)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid argument \"%s\" of a pgque trigger on table \"%s\": %s",
					arg, RelationGetRelationName(rel), why),
			 errhint("Arguments after the queue name: SKIP, backup, deny, ignore=col,..., pkey=col,..., "
					 "when=<expr>, ev_type=, ev_data=, ev_extra1= .. ev_extra4=<expr>.")));
}

/*
 * Mark the columns of a comma-separated list (ignore=, pkey=): unknown or
 * dropped columns raise.  order (may be NULL) collects the names in list
 * order.
 */
static void
mark_columns(Relation rel, const char *arg, const char *list, bool *flags, StringInfo order,
			 StringInfo order_json)
{
	char	   *copy = pstrdup(list);
	char	   *tok;
	char	   *save = NULL;
	int			n = 0;

	for (tok = strtok_r(copy, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save))
	{
		char	   *end;
		AttrNumber	att;

		while (*tok == ' ' || *tok == '\t')
			tok++;
		end = tok + strlen(tok);
		while (end > tok && (end[-1] == ' ' || end[-1] == '\t'))
			*--end = '\0';
		if (*tok == '\0')
			bad_arg(rel, arg, "empty column name");
		att = SPI_fnumber(RelationGetDescr(rel), tok);
		if (att <= 0)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_COLUMN),
					 errmsg("column \"%s\" of argument \"%s\" does not exist in table \"%s\"",
							tok, arg, RelationGetRelationName(rel))));
		flags[att - 1] = true;
		if (order != NULL)
		{
			if (n > 0)
			{
				appendStringInfoChar(order, ',');
				appendStringInfoChar(order_json, ',');
			}
			appendStringInfoString(order, tok);
			escape_json(order_json, tok);
		}
		n++;
	}
	if (n == 0)
		bad_arg(rel, arg, "no column named");
}

/* The table's primary key, in key order, from the relcache. */
static void
primary_key(Relation rel, bool *is_pk, StringInfo order, StringInfo order_json)
{
	Oid			pkoid = pgque_primary_key_index(rel);
	HeapTuple	tup;
	Form_pg_index idx;
	int			i;

	if (!OidIsValid(pkoid))
		return;
	tup = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(pkoid));
	if (!HeapTupleIsValid(tup))
		elog(ERROR, "pgque_bgw: cache lookup failed for index %u", pkoid);
	idx = (Form_pg_index) GETSTRUCT(tup);
	for (i = 0; i < idx->indnkeyatts; i++)
	{
		AttrNumber	att = idx->indkey.values[i];
		const char *name;

		if (att <= 0)
			continue;
		name = NameStr(TupleDescAttr(RelationGetDescr(rel), att - 1)->attname);
		is_pk[att - 1] = true;
		if (order->len > 0)
		{
			appendStringInfoChar(order, ',');
			appendStringInfoChar(order_json, ',');
		}
		appendStringInfoString(order, name);
		escape_json(order_json, name);
	}
	ReleaseSysCache(tup);
}

/* Parse a trigger's arguments into a fresh cache entry. */
static void
build_entry(CdcTrigger *e, Relation rel, Trigger *tg, bool truncate)
{
	TupleDesc	desc = RelationGetDescr(rel);
	MemoryContext old;
	StringInfoData pk;
	StringInfoData pkj;
	bool		have_pkey_arg = false;
	int			i;

	e->relid = RelationGetRelid(rel);
	old = MemoryContextSwitchTo(e->cxt);

	if (tg->tgnargs < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("pgque trigger \"%s\" on table \"%s\" has no queue name",
						tg->tgname, RelationGetRelationName(rel)),
				 errhint("Give the queue as the first argument: EXECUTE FUNCTION pgque.logutriga('queue_name').")));
	e->queue = cstring_to_text(tg->tgargs[0]);
	pgque_check_queue_name(e->queue);

	e->natts = desc->natts;
	e->left_out = palloc0(sizeof(bool) * Max(desc->natts, 1));
	e->ignored = palloc0(sizeof(bool) * Max(desc->natts, 1));
	e->is_pk = palloc0(sizeof(bool) * Max(desc->natts, 1));
	initStringInfo(&pk);
	initStringInfo(&pkj);

	for (i = 1; i < tg->tgnargs; i++)
	{
		const char *a = tg->tgargs[i];
		int			f;

		if (strcmp(a, "SKIP") == 0 || strcmp(a, "skip") == 0)
			e->skip = true;
		else if (strcmp(a, "backup") == 0)
			e->backup = true;
		else if (strcmp(a, "deny") == 0)
			e->deny = true;
		else if (strncmp(a, "ignore=", 7) == 0)
			mark_columns(rel, a, a + 7, e->ignored, NULL, NULL);
		else if (strncmp(a, "pkey=", 5) == 0)
		{
			if (have_pkey_arg)
				bad_arg(rel, a, "pkey= given twice");
			have_pkey_arg = true;
			mark_columns(rel, a, a + 5, e->is_pk, &pk, &pkj);
		}
		else if ((f = expression_field(a)) >= 0)
		{
			const char *src = a + strlen(field_names[f]) + 1;

			if (*src == '\0')
				bad_arg(rel, a, "empty expression");
			e->expr[f] = pstrdup(src);
		}
		else
			bad_arg(rel, a, "unknown argument");
	}

	if (truncate && (have_pkey_arg || e->backup || e->skip))
		bad_arg(rel, have_pkey_arg ? "pkey=" : e->backup ? "backup" : "SKIP",
				"not meaningful for a TRUNCATE trigger");
	for (i = 0; i < desc->natts && truncate; i++)
		if (e->ignored[i])
			bad_arg(rel, "ignore=", "not meaningful for a TRUNCATE trigger");
	for (i = 0; i < F_NEXPR && truncate; i++)
		if (e->expr[i] != NULL)
			bad_arg(rel, field_names[i], "expressions need a row: not meaningful for a TRUNCATE trigger");

	if (!have_pkey_arg)
		primary_key(rel, e->is_pk, &pk, &pkj);
	e->pkey_list = pk.data;
	e->pkey_json = psprintf("[%s]", pkj.data);

	/* dropped, ignored and _pgq_ev_* columns are left out of the row */
	for (i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);
		const char *name = NameStr(att->attname);

		if (att->attisdropped)
		{
			e->left_out[i] = true;
			e->is_pk[i] = false;
			continue;
		}
		if (strncmp(name, MAGIC_PREFIX, strlen(MAGIC_PREFIX)) == 0)
		{
			int			f;

			for (f = 0; f < F_NFIELDS; f++)
				if (strcmp(name + strlen(MAGIC_PREFIX), field_names[f] + 3) == 0)
					break;
			if (f == F_NFIELDS)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("column \"%s\" of table \"%s\" is not a known %s* column",
								name, RelationGetRelationName(rel), MAGIC_PREFIX),
						 errhint("Columns named _pgq_ev_type, _pgq_ev_data, _pgq_ev_extra1 .. _pgq_ev_extra4 set those event fields; rename any other.")));
			e->magic[f] = i + 1;
			e->left_out[i] = true;
			e->has_skipped_cols = true;
			continue;
		}
		if (e->ignored[i])
		{
			e->left_out[i] = true;
			e->has_skipped_cols = true;
		}
	}

	{
		char	   *nsp = get_namespace_name(RelationGetNamespace(rel));
		const char *rn = RelationGetRelationName(rel);
		StringInfoData tj;

		e->table_name = psprintf("%s.%s", nsp, rn);
		initStringInfo(&tj);
		appendStringInfoChar(&tj, '[');
		escape_json(&tj, nsp);
		appendStringInfoChar(&tj, ',');
		escape_json(&tj, rn);
		appendStringInfoChar(&tj, ']');
		e->table_json = tj.data;
	}
	MemoryContextSwitchTo(old);
}

/*
 * The cached parse of a trigger, parsed again after an invalidation.  The
 * parse it replaces is freed now, or by the firing up the stack that still
 * uses it.
 */
static CdcTrigger *
trigger_entry(Relation rel, Trigger *tg, bool truncate)
{
	CdcCacheEntry *c;
	CdcTrigger *e;
	MemoryContext cxt;
	bool		found;

	if (trigger_cache == NULL)
	{
		HASHCTL		ctl;

		memset(&ctl, 0, sizeof(ctl));
		ctl.keysize = sizeof(Oid);
		ctl.entrysize = sizeof(CdcCacheEntry);
		trigger_cache = hash_create("pgque_bgw cdc triggers", 16, &ctl, HASH_ELEM | HASH_BLOBS);
		CacheRegisterRelcacheCallback(cdc_cache_inval, (Datum) 0);
	}
	c = hash_search(trigger_cache, &tg->tgoid, HASH_ENTER, &found);
	if (!found)
		c->trig = NULL;			/* until built: an ERROR may come first */
	if (c->trig != NULL && c->trig->valid)
		return c->trig;
	if (c->trig != NULL)
	{
		CdcTrigger *old = c->trig;

		c->trig = NULL;
		old->cached = false;
		free_if_unused(old);
	}
	cxt = AllocSetContextCreate(CacheMemoryContext, "pgque_bgw cdc trigger", ALLOCSET_SMALL_SIZES);
	e = MemoryContextAllocZero(cxt, sizeof(CdcTrigger));
	e->cxt = cxt;
	e->cached = true;
	/* an invalidation that arrives while building clears this again */
	e->valid = true;
	c->trig = e;
	PG_TRY();
	{
		build_entry(e, rel, tg, truncate);
	}
	PG_CATCH();
	{
		hash_search(trigger_cache, &tg->tgoid, HASH_REMOVE, NULL);
		e->cached = false;
		free_if_unused(e);
		PG_RE_THROW();
	}
	PG_END_TRY();
	return e;
}

/* Is fn one of the trigger functions of this file? */
static bool
is_cdc_function(Oid fn)
{
	HeapTuple	tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(fn));
	bool		result = false;

	if (!HeapTupleIsValid(tup))
		return false;
	/* C functions are a superuser's to create: the symbol and library say which */
	if (((Form_pg_proc) GETSTRUCT(tup))->prolang == ClanguageId)
	{
		bool		isnull;
		Datum		src = SysCacheGetAttr(PROCOID, tup, Anum_pg_proc_prosrc, &isnull);
		Datum		bin = SysCacheGetAttr(PROCOID, tup, Anum_pg_proc_probin, &isnull);

		if (!isnull)
		{
			char	   *sym = TextDatumGetCString(src);
			char	   *lib = TextDatumGetCString(bin);

			result = strstr(lib, "pgque_bgw") != NULL &&
				(strcmp(sym, "pgque_logutriga") == 0 || strcmp(sym, "pgque_jsontriga") == 0 ||
				 strcmp(sym, "pgque_sqltriga") == 0);
		}
	}
	ReleaseSysCache(tup);
	return result;
}

/*
 * A trigger was just created (or replaced; also a partition's clone of its
 * parent's): if it is one of ours and an argument is an expression, the
 * creating role must have the rights of the table's owner, as whom the
 * expressions run (ADR 0045).  TRIGGER (with INSERT to fire it) on a table
 * is otherwise a way to run any SQL as its owner: read the owner's other
 * tables into an event.  Called from the object-access hook (utility.c),
 * inside CREATE TRIGGER, before its command ends: the new row is read with
 * SnapshotSelf, as sepgsql does.
 */
void
pgque_cdc_check_attach(Oid tgoid)
{
	Relation	tgrel;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;
	Form_pg_trigger tg;
	HeapTuple	reltup;
	Oid			owner;
	char	   *relname;
	const char *expr = NULL;

	tgrel = table_open(TriggerRelationId, AccessShareLock);
	ScanKeyInit(&key, Anum_pg_trigger_oid, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(tgoid));
	scan = systable_beginscan(tgrel, TriggerOidIndexId, true, SnapshotSelf, 1, &key);
	tup = systable_getnext(scan);
	if (!HeapTupleIsValid(tup))
		elog(ERROR, "pgque_bgw: could not find the new trigger %u", tgoid);
	tg = (Form_pg_trigger) GETSTRUCT(tup);
	if (tg->tgnargs > 1 && is_cdc_function(tg->tgfoid))
	{
		bool		isnull;
		bytea	   *val = DatumGetByteaPP(heap_getattr(tup, Anum_pg_trigger_tgargs,
													   RelationGetDescr(tgrel), &isnull));
		char	   *p;
		char	   *end;
		int			i;

		if (isnull)
			elog(ERROR, "pgque_bgw: trigger %u has no arguments", tgoid);
		p = VARDATA_ANY(val);
		end = p + VARSIZE_ANY_EXHDR(val);
		/* the arguments, each ended by a NUL; the queue name first */
		for (i = 0; i < tg->tgnargs && p < end; i++)
		{
			if (i > 0 && expression_field(p) >= 0)
			{
				expr = pstrdup(p);
				break;
			}
			p += strlen(p) + 1;
		}
	}
	if (expr == NULL)
	{
		systable_endscan(scan);
		table_close(tgrel, AccessShareLock);
		return;
	}
	reltup = SearchSysCache1(RELOID, ObjectIdGetDatum(tg->tgrelid));
	if (!HeapTupleIsValid(reltup))
		elog(ERROR, "pgque_bgw: cache lookup failed for relation %u", tg->tgrelid);
	owner = ((Form_pg_class) GETSTRUCT(reltup))->relowner;
	relname = pstrdup(NameStr(((Form_pg_class) GETSTRUCT(reltup))->relname));
	ReleaseSysCache(reltup);
	systable_endscan(scan);
	table_close(tgrel, AccessShareLock);

	if (has_privs_of_role(GetUserId(), owner))
		return;
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("only the owner of table \"%s\" may attach a pgque trigger with expressions", relname),
			 errdetail("Argument \"%s\" is an expression; a pgque trigger's expressions run as the table's owner, role \"%s\".",
					   expr, GetUserNameFromId(owner, false)),
			 errhint("Have the table's owner create the trigger, or attach it without when= and ev_*= arguments.")));
}

/*
 * A trigger produces on behalf of its table's owner, who must be allowed to
 * produce: a member of pgque_writer, of pgque_owner (nobody is) or of the
 * role that installed the extension (which holds pgque_writer's rights by
 * name, ADR 0042; looked up last, only for a table owner that is neither).
 */
static void
check_table_owner(Relation rel, Oid ext_owner, const char *queue)
{
	Oid			owner = rel->rd_rel->relowner;
	Oid			writer = get_role_oid("pgque_writer", true);
	Oid			installer;

	if (has_privs_of_role(owner, ext_owner) ||
		(OidIsValid(writer) && has_privs_of_role(owner, writer)))
		return;
	installer = pgque_extension_owner();
	if (OidIsValid(installer) && has_privs_of_role(owner, installer))
		return;
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("owner of table \"%s\" may not produce to queue \"%s\"",
					RelationGetRelationName(rel), queue),
			 errdetail("A pgque trigger appends events on behalf of the table's owner, role \"%s\", which is not a member of pgque_writer.",
					   GetUserNameFromId(owner, false)),
			 errhint("GRANT pgque_writer TO the table's owner, or drop the trigger.")));
}

/*
 * Evaluate the trigger's expressions with the row (new row for INSERT and
 * UPDATE, old row for DELETE) as the table's owner.  Sets fields[] (text
 * datums in the caller's context) and returns false when when= is not true.
 */
static bool
eval_expressions(CdcTrigger *e, Relation rel, HeapTuple row, Datum *fields, bool *nulls)
{
	MemoryContext caller = CurrentMemoryContext;
	Oid			save_user;
	int			save_sec;
	int			save_nest;
	Datum		arg;
	Oid			argtype = rel->rd_rel->reltype;
	bool		fire = true;
	int			f;

	GetUserIdAndSecContext(&save_user, &save_sec);
	SetUserIdAndSecContext(rel->rd_rel->relowner,
						   save_sec | SECURITY_LOCAL_USERID_CHANGE | SECURITY_RESTRICTED_OPERATION);
	save_nest = NewGUCNestLevel();
	(void) set_config_option("search_path", "pg_catalog, pg_temp", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "pgque_bgw: SPI_connect failed");
	arg = heap_copy_tuple_as_datum(row, RelationGetDescr(rel));

	/* when= first: a false condition costs no other expression */
	for (f = F_NEXPR - 1; f >= 0 && fire; f--)
	{
		int			ret;
		char	   *val;

		if (e->expr[f] == NULL)
			continue;
		if (e->plan[f] == NULL)
		{
			char	   *sql = psprintf("select (%s) from (select $1.*) as r", e->expr[f]);
			SPIPlanPtr	p = SPI_prepare(sql, 1, &argtype);

			if (p == NULL)
				elog(ERROR, "pgque_bgw: SPI_prepare of %s= failed: %s", field_names[f],
					 SPI_result_code_string(SPI_result));
			if (list_length(SPI_plan_get_plan_sources(p)) != 1)
				ereport(ERROR,
						(errcode(ERRCODE_SYNTAX_ERROR),
						 errmsg("argument %s= of a pgque trigger on table \"%s\" must be one expression",
								field_names[f], RelationGetRelationName(rel))));
			SPI_keepplan(p);
			e->plan[f] = p;
		}
		ret = SPI_execute_plan(e->plan[f], &arg, NULL, true, 2);
		if (ret != SPI_OK_SELECT || SPI_processed != 1 || SPI_tuptable->tupdesc->natts != 1)
			ereport(ERROR,
					(errcode(ERRCODE_SYNTAX_ERROR),
					 errmsg("argument %s= of a pgque trigger on table \"%s\" must be one expression giving one value",
							field_names[f], RelationGetRelationName(rel))));
		if (f == F_WHEN)
		{
			bool		isnull;
			Datum		v;

			if (SPI_gettypeid(SPI_tuptable->tupdesc, 1) != BOOLOID)
				ereport(ERROR,
						(errcode(ERRCODE_DATATYPE_MISMATCH),
						 errmsg("argument when= of a pgque trigger on table \"%s\" must be boolean, not %s",
								RelationGetRelationName(rel),
								format_type_be(SPI_gettypeid(SPI_tuptable->tupdesc, 1)))));
			v = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
			fire = !isnull && DatumGetBool(v);
			continue;
		}
		val = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
		nulls[f] = (val == NULL);
		if (val != NULL)
		{
			MemoryContext old = MemoryContextSwitchTo(caller);

			fields[f] = CStringGetTextDatum(val);
			MemoryContextSwitchTo(old);
		}
	}
	SPI_finish();
	AtEOXact_GUC(false, save_nest);
	SetUserIdAndSecContext(save_user, save_sec);
	return fire;
}

static void
set_field(Datum *fields, bool *nulls, int f, StringInfo s)
{
	fields[f] = PointerGetDatum(cstring_to_text_with_len(s->data, s->len));
	nulls[f] = false;
}

/* The row an INSERT/UPDATE/DELETE trigger gives back to the executor. */
static Datum
trigger_result(TriggerData *td, bool skip)
{
	if (TRIGGER_FIRED_AFTER(td->tg_event) || skip || TRIGGER_FIRED_BY_TRUNCATE(td->tg_event))
		return PointerGetDatum(NULL);
	if (TRIGGER_FIRED_BY_UPDATE(td->tg_event))
		return PointerGetDatum(td->tg_newtuple);
	return PointerGetDatum(td->tg_trigtuple);
}

/*
 * One firing; *pinned is set to the parse it pins (cdc_fire lets go of
 * it, also on an ERROR).
 */
static Datum
cdc_fire_pinned(FunctionCallInfo fcinfo, CdcFormat fmt, const char *fname, CdcTrigger *volatile *pinned)
{
	TriggerData *td = (TriggerData *) fcinfo->context;
	Relation	rel;
	TupleDesc	desc;
	CdcTrigger *e;
	HeapTuple	row = NULL;
	HeapTuple	oldrow = NULL;
	char		op;
	const char *op_name;
	bool		truncate;
	Datum		fields[F_NFIELDS];
	bool		nulls[F_NFIELDS];
	bool		*changed = NULL;
	StringInfoData s;
	Oid			ext_owner;
	Oid			save_user;
	int			save_sec;
	int			i;

	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("pgque.%s() must be called as a trigger", fname),
				 errhint("CREATE TRIGGER ... FOR EACH ROW EXECUTE FUNCTION pgque.%s('queue_name').", fname)));
	rel = td->tg_relation;
	desc = RelationGetDescr(rel);
	truncate = TRIGGER_FIRED_BY_TRUNCATE(td->tg_event);
	if (truncate)
	{
		op = 'R';
		op_name = "TRUNCATE";
	}
	else if (!TRIGGER_FIRED_FOR_ROW(td->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("pgque.%s() must be fired FOR EACH ROW for INSERT, UPDATE and DELETE", fname),
				 errdetail("Trigger \"%s\" on table \"%s\" is a statement-level trigger.",
						   td->tg_trigger->tgname, RelationGetRelationName(rel)),
				 errhint("Only a TRUNCATE trigger is FOR EACH STATEMENT.")));
	else if (TRIGGER_FIRED_BY_INSERT(td->tg_event))
	{
		op = 'I';
		op_name = "INSERT";
		row = td->tg_trigtuple;
	}
	else if (TRIGGER_FIRED_BY_UPDATE(td->tg_event))
	{
		op = 'U';
		op_name = "UPDATE";
		row = td->tg_newtuple;
		oldrow = td->tg_trigtuple;
	}
	else
	{
		op = 'D';
		op_name = "DELETE";
		row = td->tg_trigtuple;
		oldrow = td->tg_trigtuple;
	}

	/* session_replication_role = local: the trigger acts as if disabled (PgQ) */
	if (SessionReplicationRole == SESSION_REPLICATION_ROLE_LOCAL)
		return trigger_result(td, false);

	e = trigger_entry(rel, td->tg_trigger, truncate);
	e->pins++;
	*pinned = e;

	if (e->skip && TRIGGER_FIRED_AFTER(td->tg_event))
		bad_arg(rel, "SKIP", "SKIP works only in a BEFORE trigger (an AFTER trigger cannot skip the change)");
	if (e->deny)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("table \"%s\" (queue \"%s\"): change not allowed (%s)",
						e->table_name, text_to_cstring(e->queue), op_name),
				 errdetail("The pgque trigger \"%s\" has the argument deny.", td->tg_trigger->tgname)));
	if ((op == 'U' || op == 'D') && e->pkey_list[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("%s on table \"%s\" without a primary key: pgque.%s() cannot say which row changed",
						op_name, e->table_name, fname),
				 errhint("Add a primary key, or name the key columns with the trigger argument pkey=col,...")));

	ext_owner = pgque_run_as_role();
	check_table_owner(rel, ext_owner, text_to_cstring(e->queue));

	/* an UPDATE: a key change is refused; one that changed only left-out columns is no event */
	if (op == 'U')
	{
		bool		some_kept = false;
		bool		some_left = false;

		changed = palloc0(sizeof(bool) * Max(desc->natts, 1));
		for (i = 0; i < desc->natts; i++)
		{
			if (TupleDescAttr(desc, i)->attisdropped)
				continue;
			if (!e->is_pk[i] && !e->has_skipped_cols && fmt != CDC_SQL)
				continue;
			changed[i] = pgque_cdc_changed(desc, oldrow, row, i);
			if (!changed[i])
				continue;
			if (e->is_pk[i])
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("update of key column \"%s\" of table \"%s\" is not allowed by pgque.%s()",
								NameStr(TupleDescAttr(desc, i)->attname), e->table_name, fname),
						 errdetail("Consumers address rows by their key; as in PgQ, a key change must be a DELETE and an INSERT.")));
			if (e->left_out[i])
				some_left = true;
			else
				some_kept = true;
		}
		if (some_left && !some_kept)
			return trigger_result(td, e->skip);
	}

	memset(nulls, true, sizeof(nulls));
	memset(fields, 0, sizeof(fields));

	/* ev_type */
	initStringInfo(&s);
	if (fmt == CDC_JSON)
		appendStringInfo(&s, "{\"op\":\"%s\",\"table\":%s,\"pkey\":%s}", op_name, e->table_json,
						 e->pkey_json);
	else
	{
		appendStringInfoChar(&s, op);
		if (fmt == CDC_URLENC && !truncate)
			appendStringInfo(&s, ":%s", e->pkey_list);
	}
	set_field(fields, nulls, F_TYPE, &s);

	/* ev_data */
	initStringInfo(&s);
	if (truncate)
	{
		if (fmt == CDC_JSON)
			appendStringInfoString(&s, "{}");
	}
	else if (fmt == CDC_URLENC)
		pgque_cdc_urlenc_row(&s, desc, row, e->left_out);
	else if (fmt == CDC_JSON)
		pgque_cdc_json_row(&s, desc, row, e->left_out);
	else if (op == 'I')
		pgque_cdc_sql_insert(&s, desc, row, e->left_out);
	else if (op == 'U')
		pgque_cdc_sql_update(&s, desc, row, oldrow, e->left_out, e->is_pk, changed);
	else
		pgque_cdc_sql_where(&s, desc, oldrow, e->is_pk);
	set_field(fields, nulls, F_DATA, &s);

	/* ev_extra1: the table; ev_extra2: the backup of the row the trigger got (PgQ) */
	initStringInfo(&s);
	appendStringInfoString(&s, e->table_name);
	set_field(fields, nulls, F_EXTRA1, &s);
	if (e->backup)
	{
		initStringInfo(&s);
		if (fmt == CDC_JSON)
			pgque_cdc_json_row(&s, desc, td->tg_trigtuple, e->left_out);
		else
			pgque_cdc_urlenc_row(&s, desc, td->tg_trigtuple, e->left_out);
		set_field(fields, nulls, F_EXTRA1 + 1, &s);
	}

	/* _pgq_ev_* columns, then expressions, override the fields */
	for (i = 0; i < F_NFIELDS && !truncate; i++)
	{
		char	   *v;

		if (e->magic[i] == 0)
			continue;
		v = SPI_getvalue(row, desc, e->magic[i]);
		nulls[i] = (v == NULL);
		fields[i] = v == NULL ? (Datum) 0 : CStringGetTextDatum(v);
	}
	for (i = 0; i < F_NEXPR; i++)
		if (e->expr[i] != NULL)
			break;
	if (i < F_NEXPR && !eval_expressions(e, rel, op == 'D' ? oldrow : row, fields, nulls))
		return trigger_result(td, e->skip);

	/* the append, as the extension owner (PgQ's SECURITY DEFINER insert_event) */
	GetUserIdAndSecContext(&save_user, &save_sec);
	SetUserIdAndSecContext(ext_owner, save_sec | SECURITY_LOCAL_USERID_CHANGE);
	/* on the table owner's behalf: its "send" right on the queue (ADR 0047) */
	(void) pgque_insert_fields((struct varlena *) e->queue, fields, nulls, rel->rd_rel->relowner);
	SetUserIdAndSecContext(save_user, save_sec);

	return trigger_result(td, e->skip);
}

static void
unpin(CdcTrigger *e)
{
	e->pins--;
	free_if_unused(e);
}

/*
 * A firing, with the trigger's parse pinned while it runs: its plans,
 * queue name and column flags stay valid whatever the expressions do
 * (ADR 0037).
 */
static Datum
cdc_fire(FunctionCallInfo fcinfo, CdcFormat fmt, const char *fname)
{
	CdcTrigger *volatile pinned = NULL;
	Datum		result;

	PG_TRY();
	{
		result = cdc_fire_pinned(fcinfo, fmt, fname, &pinned);
	}
	PG_CATCH();
	{
		if (pinned != NULL)
			unpin(pinned);
		PG_RE_THROW();
	}
	PG_END_TRY();
	if (pinned != NULL)
		unpin(pinned);
	return result;
}

/* logutriga: ev_type 'I:pk,..', ev_data url-encoded row */
Datum
pgque_logutriga(PG_FUNCTION_ARGS)
{
	return cdc_fire(fcinfo, CDC_URLENC, "logutriga");
}

/* jsontriga: ev_type {"op":..,"table":[..],"pkey":[..]}, ev_data the row as JSON */
Datum
pgque_jsontriga(PG_FUNCTION_ARGS)
{
	return cdc_fire(fcinfo, CDC_JSON, "jsontriga");
}

/* sqltriga: ev_type 'I'/'U'/'D'/'R', ev_data a SQL fragment */
Datum
pgque_sqltriga(PG_FUNCTION_ARGS)
{
	return cdc_fire(fcinfo, CDC_SQL, "sqltriga");
}
