/*
 * window.h
 *		The window read (src/window.c) and its part caches, shared by the
 *		SQL-callable pgque._window_rows() and the plain receive
 *		(src/receive.c).
 */
#ifndef PGQUE_WINDOW_H
#define PGQUE_WINDOW_H

#include "textdomain.h"

#include "executor/spi.h"
#include "tcop/dest.h"

#include "source.h"

/*
 * The window plan's parameters, in order; the source (the relations to
 * read) is not a parameter but picks the plan.
 */
#define WINDOW_NPARAMS 10
#define WA_LO 0					/* xid8: the old tick's xmax */
#define WA_HI 1					/* xid8: the new tick's xmax */
#define WA_XIP 2				/* xid8[]: in progress at the old tick */
#define WA_SNAP 3				/* pg_snapshot: the new tick */
#define WA_OWNER 4				/* int4: the reader's sub_id (NULL: all) */
#define WA_AFTER 5				/* int8: past this ev_id (NULL: from the start) */
#define WA_EV_ID 6				/* int8: this one event (NULL: all) */
#define WA_LIMIT 7				/* int4: at most this many rows */
#define WA_N 8					/* int4: slot count (NULL: no slot filter) */
#define WA_SLOT 9				/* int4: this slot's share */

/* the columns of pgque.event_template, as the window read returns them */
#define EV_ID 0
#define EV_TIME 1
#define EV_TXID 2
#define EV_OWNER 3
#define EV_RETRY 4
#define EV_TYPE 5
#define EV_DATA 6
#define EV_EXTRA1 7
#define EV_NATTS 11

/* their types, in order (sql/02_tables.sql): the one copy */
extern const Oid pgque_event_types[EV_NATTS];

/*
 * A window read's result has event_template's columns, or an ERROR (42804):
 * what reads its rows (the receive's messages, _window_rows' rows typed as
 * event_template) takes each value as that column's type.
 */
extern void pgque_window_check_desc(TupleDesc desc);

/*
 * Rows read ahead past a part, kept per backend (see window.c): at most
 * this many rows and bytes.
 */
#define WINDOW_CACHE_ROWS 50000
#define WINDOW_CACHE_BYTES (16 * 1024 * 1024)
/*
 * at most this much of a cache's rows' memory is kept between windows (an
 * AllocSet's first block: at most its largest block)
 */
#define WINDOW_CACHE_KEEP_MAX ALLOCSET_DEFAULT_MAXSIZE

/*
 * The rows of one window after "from" (or from its start), in ev_id
 * order.  Keyed by the window itself: the source and the parameters
 * except after/ev_id/limit.
 */
typedef struct WindowCache
{
	bool		valid;
	uint64		epoch;			/* pgque_window_epoch() before the rows were
								 * read: another one, and they may be stale */
	LocalTransactionId lxid;	/* filled under a transaction snapshot
								 * (REPEATABLE READ): only in that transaction
								 * (Invalid: in any) */
	bool		filling;		/* a read is forming rows into it: a read nested
								 * in that one (a policy, ADR 0037) neither uses
								 * nor resets it */
	MemoryContext cxt;			/* the rows */
	MemoryContext arrcxt;		/* tuples and ev_ids (and their reorders) */
	Size		keep;			/* cxt's first block, kept by a reset: what
								 * the largest window's rows used (ADR 0131) */
	char	   *source;
	Datum		key[WINDOW_NPARAMS];	/* copies; after/ev_id/limit unused */
	bool		keynull[WINDOW_NPARAMS];
	bool		has_from;		/* the rows start after "from" ... */
	int64		from;			/* ... or at the window's start */
	bool		complete;		/* the rows run to the window's end */
	bool		heaped;			/* tuples/ev_ids are a max-heap on ev_id (full) */
	bool		has_cut;		/* a row at or past "cut" was not kept ... */
	int64		cut;			/* ... so only rows before it are (until sealed) */
	int			ntuples;
	int			maxtuples;
	Size		bytes;
	HeapTuple  *tuples;			/* in ev_id order */
	int64	   *ev_ids;
} WindowCache;

extern uint64 pgque_window_epoch(void);
extern bool pgque_window_cache_matches(WindowCache *c, const char *source, Datum *args, char *nulls);
extern void pgque_window_cache_reset(WindowCache *c, const char *source, Datum *args, char *nulls);
extern int	pgque_window_cache_start(WindowCache *c, Datum *args, char *nulls);

/*
 * The end of a part of rows in ev_id order from row from, want rows of
 * avail: never between two rows of one ev_id (ADR 0105).
 */
extern int	pgque_window_part_end(const int64 *ids, int from, int64 want, int avail);

/*
 * A window read in no order, bounded by the cache: keep_smallest keeps the
 * rows with the smallest ev_ids that fit (never fewer than min_rows),
 * wants tells before a row is formed whether it would be kept, and seal
 * puts what was kept in ev_id order (complete when nothing was left out).
 */
extern bool pgque_window_cache_wants(WindowCache *c, int64 ev_id);
extern void pgque_window_cache_keep_smallest(WindowCache *c, HeapTuple tup, int64 ev_id, int min_rows);
extern void pgque_window_cache_seal(WindowCache *c);

/*
 * Run the kept window plan for source (the caller is connected to SPI):
 * in ev_id order up to args[WA_LIMIT] rows, or (ordered false) every row
 * in no order; the rows go to dest, or to SPI_tuptable when dest is NULL.
 */
extern int	pgque_window_read(const char *source, Datum *args, char *nulls, bool read_only,
							  bool ordered, DestReceiver *dest);


/*
 * The same read without the executor (window_direct.c, ADR 0110): every
 * row of one reader's window in no order to dest; false, with no row
 * handed out, when the source is not one it reads (then the plan does).
 */
extern bool pgque_window_read_direct(const char *source, Datum *args, char *nulls,
									 DestReceiver *dest, uint64 *nrows);

/*
 * The ev_txid index a window is read through, one rule for both C readers
 * (window_direct.c): opened, or NULL when rel has none that qualifies.
 */
extern Relation pgque_event_txid_index(Relation rel, AttrNumber att, bool keep_locks);

/* the predicate's last test, for a row's ev_txid: hi (a pg_snapshot) sees it finished */
extern bool pgque_window_row_visible(Datum txid, Datum hi);

/*
 * the window predicate, written once (window.c; SQL: pgque._window_where);
 * lo_xip 0: the old tick had no transaction in progress
 */
extern void pgque_window_where(StringInfo buf, int lo_xmax, int hi_xmax, int lo_xip, int hi);

#endif							/* PGQUE_WINDOW_H */
