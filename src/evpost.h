/*
 * evpost.h
 *		A batch's ev_txid index entries as posting tuples (evpost.c,
 *		ADR 0137): the rows of one send_batch chunk share one ev_txid, so
 *		their entries go into the index's rightmost leaf as one posting
 *		tuple per up to ~220 rows, where index_insert makes one entry and
 *		one descent per row.  Called by append.c only.
 */
#ifndef PGQUE_EVPOST_H
#define PGQUE_EVPOST_H

#include "postgres.h"

#include "nodes/execnodes.h"
#include "storage/itemptr.h"
#include "utils/rel.h"

/*
 * Can irel, an index of an event table, take posting tuples of the column
 * heap_attno (1-based)?  A btree of that one column, ascending, under xid8's
 * own ordering, deduplication allowed (the metapage's allequalimage, the
 * index's deduplicate_items).  Checked per call: cheap, and an ALTER INDEX
 * invalidates no verdict of append.c's.
 */
extern bool pgque_evpost_fits(Relation irel, AttrNumber heap_attno);

/*
 * Insert the index entries of the n heap rows tids (one key, key, for all)
 * into irel, an index pgque_evpost_fits: as posting tuples where the
 * rightmost leaf takes them, by index_insert for the rest.  tids is sorted
 * here.
 */
extern void pgque_evpost_insert(Relation irel, Relation heaprel, IndexInfo *ii, Datum key,
								ItemPointerData *tids, int n);

#endif							/* PGQUE_EVPOST_H */
