/*
 * pgque_proxy.c: the keyed send of pgque_proxy over cached libpq
 * connections with a prepared remote statement (ADR 0115, built from ADR
 * 0111's spike).  A library of its own, linked with libpq: a proxy node
 * need not preload pgque_bgw, and pgque_bgw.so (preloaded into every
 * shard's workers) must not carry libpq.
 *
 * It reaches a shard with nothing PL/Proxy would not use for the same call
 * (ADR 0115, the maintainers' decision on ADR 0111 item 1):
 *  - the user mapping on server pgque_shards of the user PL/Proxy takes,
 *    the current user (GetUserId(): PL/Proxy 2.x without its default_user
 *    option, as set_shards makes the server), PUBLIC's as fallback
 *    (GetUserMapping), and USAGE on the server for that user;
 *  - of the mapping only "user" and "password", as keyword arrays (never
 *    spliced into a string), "user" that user's name when the mapping
 *    names none (PL/Proxy's rule);
 *  - the partition's connection string from the server's options, checked
 *    by pgque._check_shard_conninfo (the one source of that rule) at every
 *    connect, parsed by libpq and passed keyword by keyword with
 *    expand_dbname = 0.
 *
 * One connection per (server, user, partition) per backend.  A
 * connection is never reused with a call in flight: an error or interrupt
 * between sending and reading the result closes it (PostgreSQL 15 has no
 * non-blocking cancel; the call may have committed on the shard, and the
 * error says so).  Changes of the server, of a user mapping or of a role
 * (syscache callbacks; a role: ADR 0119) mark every connection stale,
 * closed at its next use, never inside the callback.
 *
 * The failure classification stays in SQL (pgque._unreachable, through
 * pgque._shard_failed): this file raises a refused connection as 08001 and
 * a broken link as 08006, and a shard's own error with its SQLSTATE, by
 * handing them to pgque._shard_failed.
 */
#include "postgres.h"

#include <poll.h>

#include "access/xact.h"
#include "catalog/pg_foreign_server.h"
#include "catalog/pg_type.h"
#include "commands/defrem.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "foreign/foreign.h"
#include "libpq-fe.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "parser/parse_func.h"
#include "pgstat.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/memutils.h"
#include "utils/syscache.h"

#if PG_VERSION_NUM >= 180000
PG_MODULE_MAGIC_EXT(.name = "pgque_proxy", .version = PGQUE_VERSION);
#else
PG_MODULE_MAGIC;
#endif

/* PostgreSQL 16 folded the per-kind ACL checks into object_aclcheck */
#if PG_VERSION_NUM >= 160000
#define pg_foreign_server_aclcheck(srv, role, mode) \
	object_aclcheck(ForeignServerRelationId, (srv), (role), (mode))
#endif

/* the server PL/Proxy's functions name (cluster 'pgque_shards') */
#define SHARD_SERVER "pgque_shards"
/* the prepared remote statement of the keyed send */
#define SEND_STMT "pgque_proxy_send"
#define SEND_SQL "select pgque.send($1, $2, $3, $4)"

typedef struct ShardConnKey
{
	Oid			serverid;
	Oid			userid;			/* the current user, as PL/Proxy's */
	int			partition;
} ShardConnKey;

typedef struct ShardConn
{
	ShardConnKey key;
	PGconn	   *conn;			/* NULL: not connected */
	bool		prepared;		/* SEND_STMT prepared on conn */
	bool		in_flight;		/* a call was sent and its result not read */
	bool		stale;			/* server or mapping changed: close at next use */
} ShardConn;

static HTAB *shard_conns = NULL;

/* a callback marked connections stale: sweep them at the next call */
static bool stale_pending = false;

/* the server's oid and partition count, reread after any server change */
static Oid	cached_server = InvalidOid;
static int	cached_partitions = 0;
static bool cached_valid = false;

static void
close_conn(ShardConn *sc)
{
	if (sc->conn)
		PQfinish(sc->conn);
	sc->conn = NULL;
	sc->prepared = false;
	sc->in_flight = false;
	sc->stale = false;
}

/* A server or user mapping changed: mark, never close here (a callback may
 * run in the middle of anything, a call of ours included). */
static void
inval_callback(Datum arg, int cacheid, uint32 hashvalue)
{
	HASH_SEQ_STATUS seq;
	ShardConn  *sc;

	cached_valid = false;
	if (shard_conns == NULL)
		return;
	hash_seq_init(&seq, shard_conns);
	while ((sc = hash_seq_search(&seq)) != NULL)
		sc->stale = true;
	stale_pending = true;
}

/* Close every stale connection, outside any callback and with no call in
 * flight: a dropped and recreated server or a user the backend no longer
 * sends as keeps none open. */
static void
sweep_stale(void)
{
	HASH_SEQ_STATUS seq;
	ShardConn  *sc;

	stale_pending = false;
	hash_seq_init(&seq, shard_conns);
	while ((sc = hash_seq_search(&seq)) != NULL)
		if (sc->stale)
			close_conn(sc);
}

static void
close_all_at_exit(int code, Datum arg)
{
	HASH_SEQ_STATUS seq;
	ShardConn  *sc;

	if (shard_conns == NULL)
		return;
	hash_seq_init(&seq, shard_conns);
	while ((sc = hash_seq_search(&seq)) != NULL)
		if (sc->conn)
		{
			PQfinish(sc->conn);
			sc->conn = NULL;
		}
}

/* At the end of a transaction that failed, no connection may keep a call
 * in flight (the PG_CATCH below closes it already; this is the backstop). */
static void
xact_callback(XactEvent event, void *arg)
{
	HASH_SEQ_STATUS seq;
	ShardConn  *sc;

	if (event != XACT_EVENT_ABORT && event != XACT_EVENT_PARALLEL_ABORT)
		return;
	if (shard_conns == NULL)
		return;
	hash_seq_init(&seq, shard_conns);
	while ((sc = hash_seq_search(&seq)) != NULL)
		if (sc->in_flight)
			close_conn(sc);
}

static void
init_cache(void)
{
	HASHCTL		ctl;

	if (shard_conns)
		return;
	ctl.keysize = sizeof(ShardConnKey);
	ctl.entrysize = sizeof(ShardConn);
	shard_conns = hash_create("pgque_proxy connections", 16, &ctl, HASH_ELEM | HASH_BLOBS);
	CacheRegisterSyscacheCallback(FOREIGNSERVEROID, inval_callback, (Datum) 0);
	CacheRegisterSyscacheCallback(USERMAPPINGOID, inval_callback, (Datum) 0);
	/* a role renamed (the name a mapping without user sends) or a
	 * membership revoked (USAGE through it): connect again, and check
	 * again (ADR 0119) */
	CacheRegisterSyscacheCallback(AUTHOID, inval_callback, (Datum) 0);
	CacheRegisterSyscacheCallback(AUTHMEMMEMROLE, inval_callback, (Datum) 0);
	RegisterXactCallback(xact_callback, NULL);
	on_proc_exit(close_all_at_exit, (Datum) 0);
}

/* pgque._shard_failed(shard, state, msg, detail, hint): raises, always
 * (i_retry is false): the classification and the words are SQL's. */
static void
shard_failed(int partition, const char *state, const char *msg, const char *detail,
			 const char *hint)
{
	Oid			types[5] = {INT4OID, TEXTOID, TEXTOID, TEXTOID, TEXTOID};
	Datum		vals[5];
	char		nulls[5] = {' ', ' ', ' ', ' ', ' '};

	vals[0] = Int32GetDatum(partition);
	vals[1] = CStringGetTextDatum(state);
	vals[2] = CStringGetTextDatum(msg ? msg : "");
	if (detail)
		vals[3] = CStringGetTextDatum(detail);
	else
		nulls[3] = 'n';
	if (hint)
		vals[4] = CStringGetTextDatum(hint);
	else
		nulls[4] = 'n';
	SPI_connect();
	SPI_execute_with_args("select pgque._shard_failed($1, $2, $3, $4, $5)",
						  5, types, vals, nulls, false, 0);
	/* not reached: it raises */
	elog(ERROR, "pgque._shard_failed returned for shard %d (%s: %s)", partition, state, msg);
}

/*
 * A shard's notice or warning goes to the caller, as PL/Proxy relays it
 * (plproxy_remote_error): NOTICE for class 00, WARNING otherwise, naming
 * the shard.  libpq's default would print it raw to this server's stderr,
 * past log_min_messages and out of the client's sight (ADR 0119).  What
 * says the connection is ending (an error outside a call, a FATAL, the
 * WARNING of an immediate shutdown: class 57P) goes to this server's log
 * only: the call that finds the connection gone reports that itself.
 */
static void
relay_notice(void *arg, const PGresult *res)
{
	const char *ss = PQresultErrorField(res, PG_DIAG_SQLSTATE);
	const char *sev = PQresultErrorField(res, PG_DIAG_SEVERITY_NONLOCALIZED);
	const char *msg = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
	const char *det = PQresultErrorField(res, PG_DIAG_MESSAGE_DETAIL);
	const char *hint = PQresultErrorField(res, PG_DIAG_MESSAGE_HINT);
	int			elevel;

	if (ss == NULL || strlen(ss) != 5)
		ss = "01000";
	if (strncmp(ss, "57P", 3) == 0 ||
		(sev != NULL && (strcmp(sev, "ERROR") == 0 || strcmp(sev, "FATAL") == 0 ||
						 strcmp(sev, "PANIC") == 0)))
		elevel = LOG_SERVER_ONLY;
	else
		elevel = strncmp(ss, "00", 2) == 0 ? NOTICE : WARNING;
	ereport(elevel,
			(errcode(MAKE_SQLSTATE(ss[0], ss[1], ss[2], ss[3], ss[4])),
			 errmsg("shard %d: %s", (int) (intptr_t) arg, msg ? msg : ""),
			 det ? errdetail_internal("%s", det) : 0,
			 hint ? errhint("%s", hint) : 0));
}

/* libpq's message without its trailing newline */
static char *
conn_message(PGconn *conn)
{
	char	   *m = pstrdup(PQerrorMessage(conn));
	int			n = strlen(m);

	while (n > 0 && (m[n - 1] == '\n' || m[n - 1] == ' '))
		m[--n] = '\0';
	return m;
}

/* The server pgque_shards and its partition count (options p0 .. pN-1, as
 * pgque.shards() reads them). */
static void
load_server(void)
{
	ForeignServer *srv;
	ListCell   *lc;
	int			n = 0;

	if (cached_valid)
		return;
	srv = GetForeignServerByName(SHARD_SERVER, true);
	if (srv == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("no shard set: the server pgque_shards does not exist or has no partitions"),
				 errhint("Run pgque.set_shards(array['host=... dbname=...', ...]) and create a user mapping (docs/scale-out.md).")));
	foreach(lc, srv->options)
	{
		DefElem    *d = lfirst(lc);
		const char *p = d->defname;

		if (p[0] == 'p' && p[1] != '\0' && strspn(p + 1, "0123456789") == strlen(p + 1))
			n++;
	}
	if (n == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("no shard set: the server pgque_shards does not exist or has no partitions"),
				 errhint("Run pgque.set_shards(array['host=... dbname=...', ...]) and create a user mapping (docs/scale-out.md).")));
	cached_server = srv->serverid;
	cached_partitions = n;
	cached_valid = true;
}

/*
 * Wait until conn's socket is ready (readable, or writable when
 * for_write), or an interrupt raises.  WL_EXIT_ON_PM_DEATH: a dead
 * postmaster ends the backend.
 */
static void
wait_socket(PGconn *conn, bool for_write)
{
	int			rc;

	rc = WaitLatchOrSocket(MyLatch,
						   WL_LATCH_SET | WL_EXIT_ON_PM_DEATH |
						   (for_write ? WL_SOCKET_WRITEABLE : WL_SOCKET_READABLE),
						   PQsocket(conn), -1L, PG_WAIT_EXTENSION);
	if (rc & WL_LATCH_SET)
	{
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
}

/*
 * Read the results of the statement sent on conn, waiting in the latch
 * loop; *resp holds the last one as it comes (the caller's, so that an
 * interrupt in the wait leaves nothing it cannot free).  Ends early when
 * the connection breaks.
 */
static void
read_result(PGconn *conn, PGresult *volatile *resp)
{
	for (;;)
	{
		PGresult   *r;

		while (PQisBusy(conn))
		{
			wait_socket(conn, false);
			if (!PQconsumeInput(conn))
				break;
		}
		r = PQgetResult(conn);
		if (r == NULL)
			break;
		if (*resp)
			PQclear(*resp);
		*resp = r;
		if (PQstatus(conn) == CONNECTION_BAD)
			break;
	}
}

/*
 * Connect sc to its partition, the checks of PL/Proxy first.  Any failure
 * of the connection itself is 08001 through pgque._shard_failed (nothing
 * was sent).  The caller holds sc in PG_TRY: an interrupt here closes it.
 */
static void
connect_shard(ShardConn *sc)
{
	Oid			userid = sc->key.userid;
	ForeignServer *srv;
	UserMapping *um;
	AclResult	aclresult;
	char		name[16];
	char	   *conninfo = NULL;
	char	   *err = NULL;
	PQconninfoOption *opts,
			   *o;
	const char **kw;
	const char **val;
	int			n = 0,
				nopts = 0;
	bool		got_user = false;
	ListCell   *lc;
	Oid			checkargs[1] = {TEXTOID};
	Oid			checkfn;
	PGresult   *volatile res;

	srv = GetForeignServer(sc->key.serverid);
	aclresult = pg_foreign_server_aclcheck(srv->serverid, userid, ACL_USAGE);
	if (aclresult != ACLCHECK_OK)
		aclcheck_error(aclresult, OBJECT_FOREIGN_SERVER, srv->servername);
	/* 42704 when the user has no mapping and there is no PUBLIC one */
	um = GetUserMapping(userid, srv->serverid);

	snprintf(name, sizeof(name), "p%d", sc->key.partition);
	foreach(lc, srv->options)
	{
		DefElem    *d = lfirst(lc);

		if (strcmp(d->defname, name) == 0)
			conninfo = defGetString(d);
	}
	if (conninfo == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("server pgque_shards has no partition %s", name)));

	/* the server's owner can ALTER SERVER past set_shards: the rule again */
	checkfn = LookupFuncName(list_make2(makeString("pgque"), makeString("_check_shard_conninfo")),
							 1, checkargs, false);
	OidFunctionCall1(checkfn, CStringGetTextDatum(conninfo));

	opts = PQconninfoParse(conninfo, &err);
	if (opts == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("cannot read the connection string of shard %d: %s", sc->key.partition,
						err ? err : "out of memory")));
	for (o = opts; o->keyword; o++)
		nopts++;
	kw = palloc0(sizeof(char *) * (nopts + 5));
	val = palloc0(sizeof(char *) * (nopts + 5));
	/* user and password come from the mapping alone (the check refuses
	 * them anyway); the encoding of the text parameters is this database's */
	for (o = opts; o->keyword; o++)
		if (o->val != NULL && strcmp(o->keyword, "user") != 0 && strcmp(o->keyword, "password") != 0
			&& strcmp(o->keyword, "client_encoding") != 0)
		{
			kw[n] = pstrdup(o->keyword);
			val[n] = pstrdup(o->val);
			n++;
		}
	PQconninfoFree(opts);
	/* of the mapping, what PL/Proxy's validator lets it hold */
	foreach(lc, um->options)
	{
		DefElem    *d = lfirst(lc);

		if (strcmp(d->defname, "user") == 0 || strcmp(d->defname, "password") == 0)
		{
			kw[n] = d->defname;
			val[n] = defGetString(d);
			if (strcmp(d->defname, "user") == 0)
				got_user = true;
			n++;
		}
	}
	if (!got_user)
	{
		kw[n] = "user";
		val[n] = GetUserNameFromId(userid, false);
		n++;
	}
	kw[n] = "client_encoding";
	val[n] = GetDatabaseEncodingName();
	n++;
	kw[n] = NULL;
	val[n] = NULL;

	sc->conn = PQconnectStartParams(kw, val, 0);
	if (sc->conn == NULL)
		ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory")));
	PQsetNoticeReceiver(sc->conn, relay_notice, (void *) (intptr_t) sc->key.partition);
	if (PQstatus(sc->conn) != CONNECTION_BAD)
	{
		PostgresPollingStatusType st = PGRES_POLLING_WRITING;

		for (;;)
		{
			if (st == PGRES_POLLING_OK || st == PGRES_POLLING_FAILED)
				break;
			wait_socket(sc->conn, st == PGRES_POLLING_WRITING);
			st = PQconnectPoll(sc->conn);
		}
	}
	if (PQstatus(sc->conn) != CONNECTION_OK)
	{
		char	   *m = conn_message(sc->conn);

		close_conn(sc);
		shard_failed(sc->key.partition, "08001",
					 psprintf("could not connect to shard %d (PQconnect): %s", sc->key.partition, m),
					 NULL, NULL);
	}
	if (!PQsendPrepare(sc->conn, SEND_STMT, SEND_SQL, 4, NULL))
	{
		char	   *m = conn_message(sc->conn);

		close_conn(sc);
		shard_failed(sc->key.partition, "08001",
					 psprintf("could not prepare on shard %d (PQconnect): %s", sc->key.partition, m),
					 NULL, NULL);
	}
	res = NULL;
	read_result(sc->conn, &res);
	if (res == NULL || PQresultStatus(res) != PGRES_COMMAND_OK)
	{
		char	   *state = res && PQresultErrorField(res, PG_DIAG_SQLSTATE)
			? pstrdup(PQresultErrorField(res, PG_DIAG_SQLSTATE)) : NULL;
		char	   *m = res && PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY)
			? pstrdup(PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY)) : conn_message(sc->conn);
		bool		broken = PQstatus(sc->conn) == CONNECTION_BAD;

		if (res)
			PQclear(res);
		close_conn(sc);
		/* a shard that cannot prepare the send (no pgque_bgw, ...) says why */
		shard_failed(sc->key.partition, broken || state == NULL ? "08001" : state,
					 broken ? psprintf("lost the connection to shard %d while preparing (PQconnect): %s",
									   sc->key.partition, m) : m, NULL, NULL);
	}
	PQclear(res);
	sc->prepared = true;
}

/* An idle connection whose socket is readable was closed by the other side
 * (its backend terminated, its server restarted): as PL/Proxy does, it is
 * dropped before use, nothing sent on it. */
static bool
idle_conn_is_dead(PGconn *conn)
{
	struct pollfd pfd;

	if (PQstatus(conn) != CONNECTION_OK || PQtransactionStatus(conn) != PQTRANS_IDLE)
		return true;
	pfd.fd = PQsocket(conn);
	pfd.events = POLLIN;
	pfd.revents = 0;
	if (poll(&pfd, 1, 0) != 0)
		return true;
	return false;
}

/*
 * pgque._send_keyed(i_hash int4, i_queue, i_type, i_payload, i_key) ->
 * the event id from shard i_hash mod S: pgque.send(queue, type, payload,
 * key) there, committed there when it returns (as PL/Proxy's call).
 */
PG_FUNCTION_INFO_V1(pgque_proxy_send_keyed);
Datum
pgque_proxy_send_keyed(PG_FUNCTION_ARGS)
{
	ShardConnKey key;
	ShardConn  *sc;
	bool		found;
	volatile bool prepared_again = false;	/* set after PG_TRY, read after the next */
	const char *v[4];
	int			i;
	PGresult   *volatile res = NULL;
	int64		id;
	MemoryContext oldcxt = CurrentMemoryContext;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("the routing hash of a keyed send must not be NULL")));
	if (PG_GETARG_INT32(0) < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the routing hash of a keyed send must not be negative")));
	init_cache();
	if (stale_pending)
		sweep_stale();
	load_server();

	memset(&key, 0, sizeof(key));
	key.serverid = cached_server;
	/* PL/Proxy's user (its default_user unset): the current user, so SET
	 * ROLE and a SECURITY DEFINER function reach the shards as it does */
	key.userid = GetUserId();
	key.partition = PG_GETARG_INT32(0) % cached_partitions;
	for (i = 0; i < 4; i++)
		v[i] = PG_ARGISNULL(i + 1) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(i + 1));

	sc = hash_search(shard_conns, &key, HASH_ENTER, &found);
	if (!found)
	{
		sc->conn = NULL;
		sc->prepared = false;
		sc->in_flight = false;
		sc->stale = false;
	}
again:
	if (sc->conn && (sc->stale || sc->in_flight || !sc->prepared || idle_conn_is_dead(sc->conn)))
		close_conn(sc);

	PG_TRY();
	{
		if (sc->conn == NULL)
			connect_shard(sc);
		if (!PQsendQueryPrepared(sc->conn, SEND_STMT, 4, v, NULL, NULL, 0))
		{
			char	   *m = conn_message(sc->conn);

			close_conn(sc);
			shard_failed(key.partition, "08006",
						 psprintf("could not send to shard %d: %s", key.partition, m), NULL, NULL);
		}
		sc->in_flight = true;
		read_result(sc->conn, &res);
		sc->in_flight = false;
	}
	PG_CATCH();
	{
		/* an interrupt or error with the call in flight: the connection is
		 * closed (never reused with a result pending) and the error says
		 * the call may have committed */
		bool		was_in_flight = sc->in_flight;
		ErrorData  *edata;

		if (res)
			PQclear(res);
		close_conn(sc);
		if (!was_in_flight)
			PG_RE_THROW();
		MemoryContextSwitchTo(oldcxt);
		edata = CopyErrorData();
		FlushErrorState();
		if (edata->detail == NULL)
			edata->detail = psprintf("The call to shard %d was in flight: it may have committed there.",
									 key.partition);
		if (edata->hint == NULL)
			edata->hint = pstrdup("The connection to the shard was closed. Retry with send_idem to avoid a duplicate.");
		ReThrowError(edata);
	}
	PG_END_TRY();

	if (res == NULL || PQresultStatus(res) != PGRES_TUPLES_OK || PQstatus(sc->conn) == CONNECTION_BAD)
	{
		const char *st = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
		char	   *state = st ? pstrdup(st) : NULL;
		char	   *m = res && PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY)
			? pstrdup(PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY)) : conn_message(sc->conn);
		char	   *dt = res && PQresultErrorField(res, PG_DIAG_MESSAGE_DETAIL)
			? pstrdup(PQresultErrorField(res, PG_DIAG_MESSAGE_DETAIL)) : NULL;
		char	   *ht = res && PQresultErrorField(res, PG_DIAG_MESSAGE_HINT)
			? pstrdup(PQresultErrorField(res, PG_DIAG_MESSAGE_HINT)) : NULL;
		bool		broken = PQstatus(sc->conn) == CONNECTION_BAD;

		if (res)
			PQclear(res);
		if (broken || state == NULL)
		{
			close_conn(sc);
			shard_failed(key.partition, "08006",
						 psprintf("lost the connection to shard %d during the call: %s", key.partition, m),
						 NULL, NULL);
		}
		/*
		 * The prepared statement is gone on the shard (a pooler between
		 * that moved the connection, a DEALLOCATE or DISCARD there): the
		 * Bind failed and nothing ran, so the connection is dropped and
		 * the call made once more on a new one, prepared again; kept, it
		 * failed every later call of the session (ADR 0119).
		 */
		if (strcmp(state, "26000") == 0)
		{
			close_conn(sc);
			if (!prepared_again)
			{
				prepared_again = true;
				res = NULL;
				goto again;
			}
		}
		/* the shard's own error; the connection is idle and stays */
		shard_failed(key.partition, state, m, dt, ht);
	}
	if (PQntuples(res) != 1 || PQnfields(res) != 1)
	{
		int			rows = PQntuples(res),
					cols = PQnfields(res);

		PQclear(res);
		ereport(ERROR,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg("shard %d answered a send with %d rows of %d columns", key.partition, rows, cols)));
	}
	if (PQgetisnull(res, 0, 0))
	{
		PQclear(res);
		PG_RETURN_NULL();
	}
	id = DatumGetInt64(DirectFunctionCall1(int8in, CStringGetDatum(PQgetvalue(res, 0, 0))));
	PQclear(res);
	PG_RETURN_INT64(id);
}
