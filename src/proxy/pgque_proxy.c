/*
 * pgque_proxy.c: the keyed send and the keyed batch of pgque_proxy over
 * cached libpq connections with prepared remote statements (ADR 0115,
 * built from ADR 0111's spike; the batch: ADR 0122).  A library of its own, linked with libpq: a proxy node
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
#include "catalog/pg_collation.h"
#include "catalog/pg_type.h"
#include "commands/defrem.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "foreign/foreign.h"
#include "libpq-fe.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "optimizer/optimizer.h"
#include "port/pg_bswap.h"
#include "parser/parse_func.h"
#include "pgstat.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/fmgroids.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/syscache.h"

/* pgque_bgw's version branches (not its message domain: the proxy has none) */
#include "../compat.h"

PGQUE_MODULE_MAGIC("pgque_proxy");

/* the server PL/Proxy's functions name (cluster 'pgque_shards') */
#define SHARD_SERVER "pgque_shards"
/* the prepared remote statement of the keyed send */
#define SEND_STMT "pgque_proxy_send"
#define SEND_SQL "select pgque.send($1, $2, $3, $4)"
/* the prepared remote statement of a keyed batch's part (ADR 0122) */
#define BATCH_STMT "pgque_proxy_send_batch"
#define BATCH_SQL "select pgque.send_batch($1, $2, $3, $4)"
/* a batch part larger than this (as sent), or a message read (an answer's
 * error or notice texts) larger, closes its connection after the call:
 * libpq keeps its buffers at their largest size, per connection, for as
 * long as the connection is cached (ADR 0125) */
#define KEEP_BYTES (1024 * 1024)

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
	bool		batch_prepared; /* BATCH_STMT prepared on conn */
	bool		in_flight;		/* a call was sent and its result not read */
	bool		stale;			/* server or mapping changed: close at next use */
	bool		grown;			/* a message read passed KEEP_BYTES: close after the call */
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
	sc->batch_prepared = false;
	sc->in_flight = false;
	sc->stale = false;
	sc->grown = false;
}

/* the texts of a message (error or notice) passed KEEP_BYTES */
static bool
texts_grown(const char *m, const char *dt, const char *ht)
{
	return (m ? strlen(m) : 0) + (dt ? strlen(dt) : 0) + (ht ? strlen(ht) : 0) > KEEP_BYTES;
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

static void proc_inval_callback(Datum arg, int cacheid, uint32 hashvalue);

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
	/* pgque._key_hash replaced: plan its expression again (ADR 0122) */
	CacheRegisterSyscacheCallback(PROCOID, proc_inval_callback, (Datum) 0);
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
	pg_unreachable();
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
	ShardConn  *sc = (ShardConn *) arg;
	int			elevel;

	/* a huge notice grew libpq's buffer: the call closes the connection */
	if (texts_grown(msg, det, hint))
		sc->grown = true;
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
			 errmsg("shard %d: %s", sc->key.partition, msg ? msg : ""),
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
 * A failure of a call to one shard, as the keyed batch keeps it until every
 * part's answer is read (ADR 0122): the SQLSTATE and words that
 * pgque._shard_failed and pgque._unreachable take.
 */
typedef struct ShardFailure
{
	char	   *state;
	char	   *msg;
	char	   *detail;
	char	   *hint;
} ShardFailure;

/* A failure of the connection: kept in *f when the caller collects them
 * (the batch), raised through pgque._shard_failed otherwise. */
static bool
failed(ShardFailure *f, int partition, const char *state, char *msg)
{
	if (f == NULL)
	{
		shard_failed(partition, state, msg, NULL, NULL);
		return false;			/* not reached */
	}
	f->state = pstrdup(state);
	f->msg = msg;
	f->detail = NULL;
	f->hint = NULL;
	return false;
}

/*
 * Why a call's answer failed (res NULL, not rows, or the connection broken):
 * true with *f the shard's own error (its SQLSTATE, texts); false when the
 * connection was lost (f->state NULL, f->msg libpq's message).  The single
 * send and a batch's part read an answer so.
 */
static bool
answer_failure(PGresult *res, PGconn *conn, ShardFailure *f)
{
	const char *st = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
	const char *m = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;
	const char *dt = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_DETAIL) : NULL;
	const char *ht = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_HINT) : NULL;

	f->state = st ? pstrdup(st) : NULL;
	f->msg = m ? pstrdup(m) : conn_message(conn);
	f->detail = dt ? pstrdup(dt) : NULL;
	f->hint = ht ? pstrdup(ht) : NULL;
	return f->state != NULL && PQstatus(conn) != CONNECTION_BAD;
}

static bool flush_out(PGconn *conn);
static bool prepare_on(ShardConn *sc, const char *name, const char *sql, int nparams,
					   const Oid *types, ShardFailure *f);

/*
 * Connect sc to its partition, the checks of PL/Proxy first (they raise:
 * they are the same for every shard, and nothing was sent yet).  A failure
 * of the connection itself is 08001 (nothing was sent): raised through
 * pgque._shard_failed when f is NULL, kept in *f (and false returned)
 * otherwise.  The caller holds sc in PG_TRY: an interrupt here closes it.
 */
static bool
connect_shard(ShardConn *sc, ShardFailure *f)
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

	srv = GetForeignServer(sc->key.serverid);
	aclresult = pgque_foreign_server_aclcheck(srv->serverid, userid, ACL_USAGE);
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
	PQsetNoticeReceiver(sc->conn, relay_notice, sc);
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
	/* non-blocking: a large batch part is written in the latch loop
	 * (flush_out), so that an interrupt ends a shard that stops reading */
	if (PQstatus(sc->conn) != CONNECTION_OK || PQsetnonblocking(sc->conn, 1) != 0)
	{
		char	   *m = conn_message(sc->conn);

		close_conn(sc);
		return failed(f, sc->key.partition, "08001",
					  psprintf("could not connect to shard %d (PQconnect): %s", sc->key.partition, m));
	}
	if (!prepare_on(sc, SEND_STMT, SEND_SQL, 4, NULL, f))
		return false;
	sc->prepared = true;
	return true;
}

/*
 * Write what libpq holds for conn to its socket, in the latch loop (the
 * connection is non-blocking).  The shard's answers are read meanwhile, as
 * libpq asks (a shard that writes a notice while we write must not block
 * both).  False when the connection broke.
 */
static bool
flush_out(PGconn *conn)
{
	int			r;

	while ((r = PQflush(conn)) == 1)
	{
		int			rc;

		rc = WaitLatchOrSocket(MyLatch,
							   WL_LATCH_SET | WL_EXIT_ON_PM_DEATH |
							   WL_SOCKET_READABLE | WL_SOCKET_WRITEABLE,
							   PQsocket(conn), -1L, PG_WAIT_EXTENSION);
		if (rc & WL_LATCH_SET)
		{
			ResetLatch(MyLatch);
			CHECK_FOR_INTERRUPTS();
		}
		if ((rc & WL_SOCKET_READABLE) && !PQconsumeInput(conn))
			return false;
	}
	return r == 0;
}

/*
 * Prepare statement name as sql on sc's connection and wait for it.  The
 * call is marked in flight meanwhile: an interrupt in the wait leaves it
 * to be closed.  A failure: a broken link (or none answered) as 08001
 * (nothing was sent), the shard's refusal (no pgque_bgw there, ...) with
 * its own SQLSTATE; the connection is closed either way.
 */
static bool
prepare_on(ShardConn *sc, const char *name, const char *sql, int nparams,
		   const Oid *types, ShardFailure *f)
{
	PGresult   *volatile res = NULL;

	sc->in_flight = true;
	if (!PQsendPrepare(sc->conn, name, sql, nparams, types) || !flush_out(sc->conn))
	{
		char	   *m = conn_message(sc->conn);

		close_conn(sc);
		return failed(f, sc->key.partition, "08001",
					  psprintf("could not prepare on shard %d (PQconnect): %s", sc->key.partition, m));
	}
	read_result(sc->conn, &res);
	sc->in_flight = false;
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
		return failed(f, sc->key.partition, broken || state == NULL ? "08001" : state,
					  broken ? psprintf("lost the connection to shard %d while preparing (PQconnect): %s",
										sc->key.partition, m) : m);
	}
	PQclear(res);
	return true;
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
 * The SQL that serves a call the C path leaves to it: sql, with the
 * function's arguments from first on as $1 .. $nargs; its one value,
 * copied into the caller's memory (SPI's goes at SPI_finish).
 */
static Datum
sql_fallback(FunctionCallInfo fcinfo, const char *sql, int first, int nargs, const Oid *types)
{
	Datum		vals[FUNC_MAX_ARGS];
	char		nulls[FUNC_MAX_ARGS];
	bool		isnull;
	Datum		r;
	MemoryContext cxt = CurrentMemoryContext;

	for (int i = 0; i < nargs; i++)
	{
		nulls[i] = PG_ARGISNULL(first + i) ? 'n' : ' ';
		vals[i] = PG_ARGISNULL(first + i) ? (Datum) 0 : PG_GETARG_DATUM(first + i);
	}
	SPI_connect();
	if (SPI_execute_with_args(sql, nargs, (Oid *) types, vals, nulls, false, 0) != SPI_OK_SELECT ||
		SPI_processed != 1)
		elog(ERROR, "\"%s\" did not answer", sql);
	r = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	if (!isnull)
	{
		Form_pg_attribute att = TupleDescAttr(SPI_tuptable->tupdesc, 0);
		MemoryContext old = MemoryContextSwitchTo(cxt);

		r = datumCopy(r, att->attbyval, att->attlen);
		MemoryContextSwitchTo(old);
	}
	SPI_finish();
	fcinfo->isnull = isnull;
	return isnull ? (Datum) 0 : r;
}

/* pgque._send_keyed with a NULL key: pgque._route_send(queue, type,
 * payload, NULL, true), the typed keyless send (to any live shard) */
static Datum
send_keyless(FunctionCallInfo fcinfo)
{
	static const Oid types[3] = {TEXTOID, TEXTOID, TEXTOID};

	return sql_fallback(fcinfo, "select pgque._route_send($1, $2, $3, null, true)", 1, 3, types);
}

/*
 * pgque._send_keyed(i_hash int4, i_queue, i_type, i_payload, i_key) ->
 * the event id from shard i_hash mod S: pgque.send(queue, type, payload,
 * key) there, committed there when it returns (as PL/Proxy's call).  A
 * NULL key (and so a NULL hash): a keyless send (send_keyless).
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

	/* no key: a keyless send, PL/Proxy's (the wrapper has no CASE, whose
	 * both branches the executor built at every call: ADR 0122) */
	if (PG_ARGISNULL(0) && PG_ARGISNULL(4))
		return send_keyless(fcinfo);
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
		close_conn(sc);
	}
again:
	if (sc->conn && (sc->stale || sc->in_flight || !sc->prepared || idle_conn_is_dead(sc->conn)))
		close_conn(sc);

	PG_TRY();
	{
		if (sc->conn == NULL)
			connect_shard(sc, NULL);
		if (!PQsendQueryPrepared(sc->conn, SEND_STMT, 4, v, NULL, NULL, 0) || !flush_out(sc->conn))
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
		ShardFailure fail;
		bool		own = answer_failure(res, sc->conn, &fail);

		if (res)
			PQclear(res);
		if (!own)
		{
			close_conn(sc);
			shard_failed(key.partition, "08006",
						 psprintf("lost the connection to shard %d during the call: %s", key.partition, fail.msg),
						 NULL, NULL);
		}
		/*
		 * The prepared statement is gone on the shard (a pooler between
		 * that moved the connection, a DEALLOCATE or DISCARD there): the
		 * Bind failed and nothing ran, so the connection is dropped and
		 * the call made once more on a new one, prepared again; kept, it
		 * failed every later call of the session (ADR 0119).
		 */
		if (strcmp(fail.state, "26000") == 0)
		{
			close_conn(sc);
			if (!prepared_again)
			{
				prepared_again = true;
				res = NULL;
				goto again;
			}
		}
		/*
		 * the shard's own error; the connection is idle and stays, unless
		 * the error's texts were large: libpq keeps its input buffer at the
		 * largest message read, for as long as the connection is cached
		 */
		if (sc->grown || texts_grown(fail.msg, fail.detail, fail.hint))
			close_conn(sc);
		shard_failed(key.partition, fail.state, fail.msg, fail.detail, fail.hint);
	}
	/*
	 * An answer that is not one int8 (at most 20 characters) is unusable:
	 * its error follows, and the connection that read it is closed first,
	 * as the keyed batch's is (ADR 0125: a hostile shard's huge answer
	 * kept libpq's grown buffer for the session)
	 */
	if (sc->grown || PQntuples(res) != 1 || PQnfields(res) != 1 ||
		(!PQgetisnull(res, 0, 0) && PQgetlength(res, 0, 0) > 20))
		close_conn(sc);
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
	{
		/* freed before int8in may raise: libpq's memory is not palloc's */
		char	   *v = pstrdup(PQgetvalue(res, 0, 0));

		PQclear(res);
		id = DatumGetInt64(DirectFunctionCall1(int8in, CStringGetDatum(v)));
	}
	PG_RETURN_INT64(id);
}

/* ------------------------------------------------------------ keyed batch */

/* One shard's part of a keyed batch (ADR 0122). */
typedef enum PartState
{
	PART_TODO,					/* to be sent in this round */
	PART_SENT,					/* sent, its answer not read */
	PART_OK,					/* committed there, its ids read */
	PART_FAILED,				/* fail holds why */
	PART_BAD_ANSWER				/* committed there, its answer unusable */
} PartState;

typedef struct BatchPart
{
	int			shard;
	int			n;				/* its events */
	int		   *ords;			/* their 0-based places in the batch, in order */
	ShardConn  *sc;
	PartState	state;
	bool		retried;		/* prepared again once after a 26000 */
	bool		big;			/* past KEEP_BYTES as sent */
	int64	   *ids;			/* PART_OK: n ids */
	char	   *bad;			/* PART_BAD_ANSWER: what was wrong */
	ShardFailure fail;			/* PART_FAILED */
} BatchPart;

/*
 * A text[] in PostgreSQL's binary array format (array_send's: the header,
 * then each element's length, -1 for NULL, and bytes), from the elements
 * elems[ords[0 .. n-1]], lower bound lbound: what the shard's array_recv
 * reads for the part's payloads or keys.  Neither quoted nor parsed as
 * text: array_out and array_in were a quarter of the batch's cost.
 */
static void
binary_text_array(StringInfo buf, Datum *elems, bool *nulls, const int *ords, int n, int lbound)
{
	bool		hasnull = false;
	Size		size = 20;
	char	   *w;

	for (int e = 0; e < n; e++)
	{
		int			i = ords ? ords[e] : e;

		hasnull |= nulls[i];
		size += 4 + (nulls[i] ? 0 : VARSIZE_ANY_EXHDR(DatumGetPointer(elems[i])));
	}
	if (size >= MaxAllocSize)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("a part of a keyed batch would be %zu bytes, past 1 GB", size),
				 errhint("Send smaller batches.")));
	resetStringInfo(buf);
	enlargeStringInfo(buf, (int) size);
	w = buf->data;
#define PUT32(v) do { uint32 v_ = pg_hton32((uint32) (v)); memcpy(w, &v_, 4); w += 4; } while (0)
	PUT32(1);					/* dimensions */
	PUT32(hasnull ? 1 : 0);
	PUT32(TEXTOID);
	PUT32(n);
	PUT32(lbound);
	for (int e = 0; e < n; e++)
	{
		int			i = ords ? ords[e] : e;

		if (nulls[i])
			PUT32(-1);
		else
		{
			const char *t = DatumGetPointer(elems[i]);
			int			len = VARSIZE_ANY_EXHDR(t);

			PUT32(len);
			memcpy(w, VARDATA_ANY(t), len);
			w += len;
		}
	}
#undef PUT32
	buf->len = (int) size;
	buf->data[buf->len] = '\0';
}

/*
 * The ids of a part from the shard's bigint[] in binary (array_send's
 * format), into ids[0 .. want-1].  NULL when it is exactly that; else what
 * is wrong: another count, a NULL, another type or shape, a short answer.
 */
static const char *
parse_ids(const char *s, int len, int want, int64 *ids)
{
	uint32		w;
	uint64		q;
	int			ndim;

#define GET32(dst) (len < 4 ? false : (memcpy(&w, s, 4), s += 4, len -= 4, (dst) = (int32) pg_ntoh32(w), true))
	if (!GET32(ndim))
		return "a short array";
	if (ndim == 0)
		return "no ids";
	if (ndim != 1)
		return "an array of another shape";
	{
		int32		flags,
					elemtype,
					dim,
					lbound;

		if (!GET32(flags) || !GET32(elemtype) || !GET32(dim) || !GET32(lbound))
			return "a short array";
		if (elemtype != INT8OID)
			return "an array of another type";
		if (flags != 0)
			return "an array with NULL ids";
		(void) lbound;			/* any: the ids are taken in their order */
		if (dim != want)
			return dim > want ? "more ids than events" : "fewer ids than events";
	}
	for (int i = 0; i < want; i++)
	{
		int32		elen;

		if (!GET32(elen))
			return "a short array";
		if (elen != 8)
			return elen < 0 ? "a NULL id" : "an id of another size";
		if (len < 8)
			return "a short array";
		memcpy(&q, s, 8);
		s += 8;
		len -= 8;
		ids[i] = (int64) pg_ntoh64(q);
	}
#undef GET32
	return len == 0 ? NULL : "a long array";
}

/*
 * The routing hash, pgque._key_hash(key), evaluated here as the planner
 * inlines it (expression_planner): the function's own body, never a second
 * copy of the hash.  Planned once per backend, again after any change of
 * pg_proc (a syscache callback: the extension updated, the function
 * replaced); its ExprState is made per call, from the expression.
 */
static MemoryContext key_hash_cxt = NULL;
static Expr *key_hash_expr = NULL;
static uint64 key_hash_gen = 0; /* pg_proc changes seen */

static void
proc_inval_callback(Datum arg, int cacheid, uint32 hashvalue)
{
	key_hash_expr = NULL;		/* freed at the next build, not here */
	key_hash_gen++;
}

static Expr *
key_hash_plan(void)
{
	Oid			argtypes[1] = {TEXTOID};
	Oid			fn;
	Param	   *param;
	MemoryContext old;
	Expr	   *e;
	uint64		gen = key_hash_gen;

	if (key_hash_expr)
		return key_hash_expr;
	if (key_hash_cxt == NULL)
		key_hash_cxt = AllocSetContextCreate(TopMemoryContext, "pgque_proxy key hash",
											 ALLOCSET_SMALL_SIZES);
	else
		MemoryContextReset(key_hash_cxt);
	fn = LookupFuncName(list_make2(makeString("pgque"), makeString("_key_hash")), 1, argtypes, false);
	if (get_func_rettype(fn) != INT4OID)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("pgque._key_hash(text) must return int4")));
	old = MemoryContextSwitchTo(key_hash_cxt);
	param = makeNode(Param);
	param->paramkind = PARAM_EXTERN;
	param->paramid = 1;
	param->paramtype = TEXTOID;
	param->paramtypmod = -1;
	param->paramcollid = DEFAULT_COLLATION_OID;
	param->location = -1;
	e = expression_planner((Expr *) makeFuncExpr(fn, INT4OID, list_make1(param), InvalidOid,
												  DEFAULT_COLLATION_OID, COERCE_EXPLICIT_CALL));
	MemoryContextSwitchTo(old);
	/* kept unless pg_proc changed while it was planned (its lookups take
	 * invalidations): then this call uses it, the next plans again */
	if (gen == key_hash_gen)
		key_hash_expr = e;
	return e;
}

/* hashes[i] = pgque._key_hash(keys[i]) for each non-NULL key */
static void
key_hashes(Datum *keys, bool *nulls, int n, int32 *hashes)
{
	ParamListInfo params = makeParamList(1);
	ExprContext *econtext = CreateStandaloneExprContext();
	ExprState  *state;

	params->numParams = 1;
	params->params[0].ptype = TEXTOID;
	params->params[0].pflags = PARAM_FLAG_CONST;
	econtext->ecxt_param_list_info = params;
	state = ExecInitExprWithParams(key_hash_plan(), params);
	for (int i = 0; i < n; i++)
	{
		bool		isnull;
		Datum		h;

		if (nulls[i])
			continue;
		params->params[0].value = keys[i];
		params->params[0].isnull = false;
		h = ExecEvalExprSwitchContext(state, econtext, &isnull);
		if (isnull || DatumGetInt32(h) < 0)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_EXCEPTION),
					 errmsg("pgque._key_hash gave %s for a key of a batch", isnull ? "NULL" : "a negative hash")));
		hashes[i] = DatumGetInt32(h);
		ResetExprContext(econtext);
	}
	FreeExprContext(econtext, true);
}

/* The connection of part p, connected and with BATCH_STMT prepared; false
 * with p->fail set (and the connection closed) when that failed. */
static bool
part_ready(BatchPart *p)
{
	ShardConn  *sc = p->sc;
	static const Oid types[4] = {TEXTOID, TEXTOID, TEXTARRAYOID, TEXTARRAYOID};

	if (sc->conn && (sc->stale || sc->in_flight || !sc->prepared || idle_conn_is_dead(sc->conn)))
		close_conn(sc);
	if (sc->conn == NULL && !connect_shard(sc, &p->fail))
		return false;
	if (!sc->batch_prepared)
	{
		if (!prepare_on(sc, BATCH_STMT, BATCH_SQL, 4, types, &p->fail))
			return false;
		sc->batch_prepared = true;
	}
	return true;
}

/* Read part p's answer (it was sent); *resp: the caller's, freed by it in
 * its PG_CATCH should the wait be interrupted. */
static void
part_read(BatchPart *p, PGresult *volatile *resp)
{
	ShardConn  *sc = p->sc;
	PGresult   *res;
	const char *why;

	read_result(sc->conn, resp);
	sc->in_flight = false;
	res = *resp;
	if (res == NULL || PQresultStatus(res) != PGRES_TUPLES_OK || PQstatus(sc->conn) == CONNECTION_BAD)
	{
		p->state = PART_FAILED;
		if (!answer_failure(res, sc->conn, &p->fail))
		{
			close_conn(sc);
			p->fail.state = "08006";
			p->fail.msg = psprintf("lost the connection to shard %d during the call: %s", p->shard, p->fail.msg);
			p->fail.detail = p->fail.hint = NULL;
			return;
		}
		/* its prepared statement is gone there: nothing ran; once more on
		 * a new connection, as the single send does (ADR 0119) */
		if (strcmp(p->fail.state, "26000") == 0 && !p->retried)
		{
			close_conn(sc);
			p->retried = true;
			p->state = PART_TODO;
			return;
		}
		/* the shard's own error; the connection is idle and stays, unless
		 * its prepared statement is gone or a message grew the buffer */
		if (strcmp(p->fail.state, "26000") == 0 || sc->grown ||
			texts_grown(p->fail.msg, p->fail.detail, p->fail.hint))
			close_conn(sc);
		return;
	}
	/* the part committed there: from here on it is counted as committed */
	p->ids = palloc(sizeof(int64) * Max(p->n, 1));
	if (PQntuples(res) != 1 || PQnfields(res) != 1)
		why = psprintf("%d rows of %d columns", PQntuples(res), PQnfields(res));
	else if (PQgetisnull(res, 0, 0))
		why = "NULL";
	else
		why = parse_ids(PQgetvalue(res, 0, 0), PQgetlength(res, 0, 0), p->n, p->ids);
	if (why)
	{
		p->state = PART_BAD_ANSWER;
		p->bad = pstrdup(why);
		/*
		 * The connection goes too: libpq keeps its input buffer at the
		 * largest message read, so a shard answering with a 24 MB array
		 * (or 2,000,000 rows) left that much with the connection, per
		 * shard and role, for the session (ADR 0125).  A shard that
		 * answers so is not one to keep talking to; a usable answer is
		 * 12 bytes an event of the part, bounded by what was sent.
		 */
		close_conn(sc);
	}
	else
	{
		p->state = PART_OK;
		if (sc->grown)
			close_conn(sc);
	}
}

/* the shards of the parts in state st (or, with st2, in either), in the
 * parts' order, as an int4[] */
static Datum
shard_list(BatchPart *parts, int nparts, PartState st, PartState st2)
{
	Datum	   *d = palloc(sizeof(Datum) * Max(nparts, 1));
	int			n = 0;

	for (int i = 0; i < nparts; i++)
		if (parts[i].state == st || parts[i].state == st2)
			d[n++] = Int32GetDatum(parts[i].shard);
	return PointerGetDatum(construct_array(d, n, INT4OID, 4, true, TYPALIGN_INT));
}

static char *
shard_list_text(BatchPart *parts, int nparts, PartState st, PartState st2)
{
	return OidOutputFunctionCall(F_ARRAY_OUT, shard_list(parts, nparts, st, st2));
}

/* pgque._unreachable(state, msg): 'refused', 'lost' or NULL (the shard's
 * own error), SQL's classification */
static bool
is_unreachable(ShardFailure *f)
{
	Oid			argtypes[2] = {TEXTOID, TEXTOID};
	Oid			fn;
	LOCAL_FCINFO(fcinfo, 2);
	FmgrInfo	flinfo;

	fn = LookupFuncName(list_make2(makeString("pgque"), makeString("_unreachable")), 2, argtypes, false);
	fmgr_info(fn, &flinfo);
	InitFunctionCallInfoData(*fcinfo, &flinfo, 2, InvalidOid, NULL, NULL);
	fcinfo->args[0].value = CStringGetTextDatum(f->state);
	fcinfo->args[0].isnull = false;
	fcinfo->args[1].value = CStringGetTextDatum(f->msg ? f->msg : "");
	fcinfo->args[1].isnull = false;
	(void) FunctionCallInvoke(fcinfo);
	return !fcinfo->isnull;
}

/*
 * The batch's outcome when a part failed: raises, always.  The first part
 * (in the parts' order) that the shard answered with its own error or an
 * unusable answer decides, as the first one did when the parts went one
 * after another; else the unreachable shards are named (08006), with the
 * committed ones.  The words are SQL's (pgque._shard_failed,
 * pgque._batch_parts_failed).
 */
static void
batch_failed(BatchPart *parts, int nparts)
{
	ShardFailure *last_down = NULL;

	for (int i = 0; i < nparts; i++)
	{
		BatchPart  *p = &parts[i];

		if (p->state == PART_BAD_ANSWER)
			ereport(ERROR,
					(errcode(ERRCODE_PROTOCOL_VIOLATION),
					 errmsg("shard %d answered its part of a batch (%d events) with %s",
							p->shard, p->n, p->bad),
					 errdetail("The parts for shards %s were committed, this shard's included.",
							   shard_list_text(parts, nparts, PART_OK, PART_BAD_ANSWER))));
		if (p->state != PART_FAILED)
			continue;
		if (is_unreachable(&p->fail))
		{
			p->state = PART_TODO;	/* counted as down below */
			last_down = &p->fail;
			continue;
		}
		{
			Oid			types[7] = {INT4OID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, BOOLOID, INT4ARRAYOID};
			Datum		vals[7];
			char		nulls[7] = {' ', ' ', ' ', ' ', ' ', ' ', ' '};

			vals[0] = Int32GetDatum(p->shard);
			vals[1] = CStringGetTextDatum(p->fail.state);
			vals[2] = CStringGetTextDatum(p->fail.msg ? p->fail.msg : "");
			vals[3] = p->fail.detail ? CStringGetTextDatum(p->fail.detail) : (Datum) 0;
			nulls[3] = p->fail.detail ? ' ' : 'n';
			vals[4] = p->fail.hint ? CStringGetTextDatum(p->fail.hint) : (Datum) 0;
			nulls[4] = p->fail.hint ? ' ' : 'n';
			vals[5] = BoolGetDatum(false);
			vals[6] = shard_list(parts, nparts, PART_OK, PART_BAD_ANSWER);
			SPI_connect();
			SPI_execute_with_args("select pgque._shard_failed($1, $2, $3, $4, $5, $6, $7)",
								  7, types, vals, nulls, false, 0);
			elog(ERROR, "pgque._shard_failed returned for shard %d", p->shard);
		}
	}
	if (last_down)
	{
		Oid			types[3] = {INT4ARRAYOID, INT4ARRAYOID, TEXTOID};
		Datum		vals[3];

		vals[0] = shard_list(parts, nparts, PART_TODO, PART_TODO);
		vals[1] = shard_list(parts, nparts, PART_OK, PART_BAD_ANSWER);
		vals[2] = CStringGetTextDatum(last_down->msg ? last_down->msg : "");
		SPI_connect();
		SPI_execute_with_args("select pgque._batch_parts_failed($1, $2, $3)",
							  3, types, vals, NULL, false, 0);
	}
	elog(ERROR, "a keyed batch failed and no part says why");
}

/* A batch the C path does not split (NULL or multi-dimensional arrays, two
 * lengths, no key): whole to one shard, as _route_send_batch_on sends it,
 * the shard saying what is wrong. */
static Datum
send_whole(FunctionCallInfo fcinfo)
{
	static const Oid types[4] = {TEXTOID, TEXTOID, TEXTARRAYOID, TEXTARRAYOID};

	return sql_fallback(fcinfo, "select pgque._route_send_batch_on($1, $2, $3, $4, 'keyed')", 0, 4, types);
}

/*
 * pgque._send_batch_keyed(i_queue, i_type, i_payloads text[], i_keys
 * text[]) -> the ids in input order.  Event i goes to shard
 * pgque._key_hash(i_keys[i]) mod S (key_hashes: the one definition of the
 * routing hash, as _send_keyed's caller takes it), an event with a NULL
 * key to the first keyed event's shard.  One prepared pgque.send_batch per shard's
 * part, every part sent before any answer is read, each committed on its
 * shard when it answers (not atomic across shards: ADR 0027, 0084, 0122).
 */
PG_FUNCTION_INFO_V1(pgque_proxy_send_batch_keyed);
Datum
pgque_proxy_send_batch_keyed(PG_FUNCTION_ARGS)
{
	ArrayType  *payloads,
			   *keys;
	int			nev;
	int32	   *hv;
	Datum	   *pv = NULL,
			   *kv = NULL;
	bool	   *pn = NULL,
			   *kn = NULL;
	int			nh;
	int			dflt = -1;
	volatile int nparts = 0;
	BatchPart  *volatile parts;
	int		   *part_of_shard,
			   *part_of_event,
			   *places;
	char	   *queue,
			   *type;
	bool		whole;
	PGresult   *volatile res = NULL;
	volatile int round;
	MemoryContext oldcxt = CurrentMemoryContext;
	Datum	   *out;
	StringInfoData pbuf,
				kbuf;

	/* not splittable: the shard says what is wrong, as today */
	if (PG_ARGISNULL(2) || PG_ARGISNULL(3))
		return send_whole(fcinfo);
	payloads = PG_GETARG_ARRAYTYPE_P(2);
	keys = PG_GETARG_ARRAYTYPE_P(3);
	if (ARR_NDIM(payloads) > 1 || ARR_NDIM(keys) > 1 ||
		ArrayGetNItems(ARR_NDIM(payloads), ARR_DIMS(payloads)) !=
		ArrayGetNItems(ARR_NDIM(keys), ARR_DIMS(keys)))
		return send_whole(fcinfo);
	nev = ArrayGetNItems(ARR_NDIM(keys), ARR_DIMS(keys));
	deconstruct_array(keys, TEXTOID, -1, false, TYPALIGN_INT, &kv, &kn, &nh);
	{
		bool		any = false;

		for (int i = 0; i < nev && !any; i++)
			any = !kn[i];
		if (!any)
			return send_whole(fcinfo);
	}
	deconstruct_array(payloads, TEXTOID, -1, false, TYPALIGN_INT, &pv, &pn, &nh);

	init_cache();
	if (stale_pending)
		sweep_stale();
	load_server();
	queue = PG_ARGISNULL(0) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(0));
	type = PG_ARGISNULL(1) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(1));
	hv = palloc(sizeof(int32) * nev);
	if (cached_partitions > 1)
		key_hashes(kv, kn, nev, hv);

	/*
	 * The parts, in the order of their first event.  One shard (S = 1, or
	 * every key on one shard): the batch is its one part, as it came.
	 */
	parts = palloc0(sizeof(BatchPart) * Min(nev, cached_partitions));
	part_of_shard = palloc(sizeof(int) * cached_partitions);
	for (int s = 0; s < cached_partitions; s++)
		part_of_shard[s] = -1;
	for (int i = 0; i < nev && cached_partitions > 1; i++)
		if (!kn[i])
		{
			dflt = hv[i] % cached_partitions;
			break;
		}
	/* each event's part, then one array of places cut into the parts: the
	 * memory is the batch's, whatever S */
	part_of_event = palloc(sizeof(int) * nev);
	for (int i = 0; i < nev; i++)
	{
		int			s = cached_partitions == 1 ? 0 : kn[i] ? dflt : hv[i] % cached_partitions;

		if (part_of_shard[s] < 0)
		{
			part_of_shard[s] = nparts;
			parts[nparts].shard = s;
			nparts++;
		}
		part_of_event[i] = part_of_shard[s];
		parts[part_of_shard[s]].n++;
	}
	places = palloc(sizeof(int) * nev);
	for (int j = 0, at = 0; j < nparts; j++)
	{
		parts[j].ords = places + at;
		at += parts[j].n;
		parts[j].n = 0;
	}
	for (int i = 0; i < nev; i++)
	{
		BatchPart  *p = &parts[part_of_event[i]];

		p->ords[p->n++] = i;
	}
	whole = nparts == 1;
	initStringInfo(&pbuf);
	initStringInfo(&kbuf);
	for (int j = 0; j < nparts; j++)
	{
		ShardConnKey key;
		bool		found;

		memset(&key, 0, sizeof(key));
		key.serverid = cached_server;
		key.userid = GetUserId();	/* PL/Proxy's user, as the single send */
		key.partition = parts[j].shard;
		parts[j].sc = hash_search(shard_conns, &key, HASH_ENTER, &found);
		if (!found)
		{
			parts[j].sc->conn = NULL;
			close_conn(parts[j].sc);
		}
	}

	PG_TRY();
	{
		for (round = 0; round < 2; round++)
		{
			bool		again = false;

			/* connect first, every part: the checks that raise (USAGE, the
			 * mapping, the partition's string) raise before anything is sent */
			for (int j = 0; j < nparts; j++)
				if (parts[j].state == PART_TODO && !part_ready(&parts[j]))
					parts[j].state = PART_FAILED;

			/* every part sent before any answer is read */
			for (int j = 0; j < nparts; j++)
			{
				BatchPart  *p = &parts[j];
				const char *v[4];
				int			lens[4] = {0, 0, 0, 0};
				static const int formats[4] = {0, 0, 1, 1};

				if (p->state != PART_TODO)
					continue;
				/* the batch as it came (its lower bound too), or the part */
				binary_text_array(&pbuf, pv, pn, whole ? NULL : p->ords, p->n,
								  whole ? ARR_LBOUND(payloads)[0] : 1);
				binary_text_array(&kbuf, kv, kn, whole ? NULL : p->ords, p->n,
								  whole ? ARR_LBOUND(keys)[0] : 1);
				v[0] = queue;
				v[1] = type;
				v[2] = pbuf.data;
				v[3] = kbuf.data;
				lens[2] = pbuf.len;
				lens[3] = kbuf.len;
				p->sc->in_flight = true;
				p->state = PART_SENT;
				if (!PQsendQueryPrepared(p->sc->conn, BATCH_STMT, 4, v, lens, formats, 1) ||
					!flush_out(p->sc->conn))
				{
					char	   *m = conn_message(p->sc->conn);

					close_conn(p->sc);
					p->state = PART_FAILED;
					p->fail.state = "08006";
					p->fail.msg = psprintf("could not send to shard %d: %s", p->shard, m);
				}
				/* a large part's connection is closed after its answer */
				p->big = pbuf.len + kbuf.len > KEEP_BYTES;
			}

			/* every answer read, whatever an earlier one was: no result
			 * stays unread on a connection that is kept */
			for (int j = 0; j < nparts; j++)
			{
				BatchPart  *p = &parts[j];

				if (p->state != PART_SENT)
					continue;
				res = NULL;
				part_read(p, &res);
				if (res)
					PQclear(res);
				res = NULL;
				/* whatever its answer: libpq keeps its buffers at their largest */
				if (p->big && p->sc->conn)
					close_conn(p->sc);
				if (p->state == PART_TODO)
					again = true;
			}
			if (!again)
				break;
		}
	}
	PG_CATCH();
	{
		/*
		 * An interrupt or an error with parts in flight: their connections
		 * are closed (never reused with an answer pending), and the error
		 * says which parts may have committed and which did.
		 */
		ErrorData  *edata;
		StringInfoData flying;
		bool		any = false;

		if (res)
			PQclear(res);
		initStringInfo(&flying);
		for (int j = 0; j < nparts; j++)
		{
			ShardConn  *sc = parts[j].sc;

			if (sc->conn && (sc->in_flight || !sc->prepared))
			{
				if (sc->in_flight && parts[j].state == PART_SENT)
				{
					appendStringInfo(&flying, "%s%d", any ? "," : "", parts[j].shard);
					any = true;
				}
				close_conn(sc);
			}
		}
		if (!any)
			PG_RE_THROW();
		MemoryContextSwitchTo(oldcxt);
		edata = CopyErrorData();
		FlushErrorState();
		if (edata->detail == NULL)
			edata->detail = psprintf("The parts of the batch for shards {%s} were in flight: they may have committed there; the parts for shards %s were committed.",
									 flying.data, shard_list_text(parts, nparts, PART_OK, PART_BAD_ANSWER));
		if (edata->hint == NULL)
			edata->hint = pstrdup("The connections to those shards were closed. Resend the events whose keys map to them with send_idem to avoid duplicates.");
		ReThrowError(edata);
	}
	PG_END_TRY();

	for (int j = 0; j < nparts; j++)
		if (parts[j].state != PART_OK)
			batch_failed(parts, nparts);	/* raises */

	/* the ids in input order */
	out = palloc(sizeof(Datum) * Max(nev, 1));
	for (int j = 0; j < nparts; j++)
		for (int e = 0; e < parts[j].n; e++)
			out[parts[j].ords[e]] = Int64GetDatum(parts[j].ids[e]);
	PG_RETURN_ARRAYTYPE_P(construct_array(out, nev, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
}
