/*
 * compat.h
 *		Every PG_VERSION_NUM branch of pgque_bgw lives here, so the rest of
 *		the code reads as if there were one PostgreSQL version.
 *
 * Supported: PostgreSQL 14 to 18.  Built with -Werror and tested on 15
 * (Debian bookworm), 17 (trixie) and 18 (sid): make test PG=NN, ADR 0018.
 */
#ifndef PGQUE_COMPAT_H
#define PGQUE_COMPAT_H

#include "postgres.h"

#include "access/transam.h"
#include "postmaster/bgworker.h"

#if PG_VERSION_NUM < 140000
#error "pgque_bgw requires PostgreSQL 14 or later (xid8, pg_snapshot)"
#endif

/*
 * PostgreSQL 15 split shared-memory sizing into shmem_request_hook; on 14 the
 * request is made directly from _PG_init.
 */
#if PG_VERSION_NUM >= 150000
#define PGQUE_HAVE_SHMEM_REQUEST_HOOK 1
#endif

/* PostgreSQL 16 moved the varlena macros (VARSIZE_ANY_EXHDR, ...) out of postgres.h. */
#if PG_VERSION_NUM >= 160000
#include "varatt.h"
#endif

/* PostgreSQL 15 renamed EmitWarningsOnPlaceholders. */
#if PG_VERSION_NUM < 150000
#define MarkGUCPrefixReserved(prefix) EmitWarningsOnPlaceholders(prefix)
#endif

/* PostgreSQL 16 folded the per-class ownership checks into object_ownercheck. */
#if PG_VERSION_NUM >= 160000
#define pgque_database_ownercheck(dboid, roleid) object_ownercheck(DatabaseRelationId, (dboid), (roleid))
#define pgque_extension_ownercheck(extoid, roleid) object_ownercheck(ExtensionRelationId, (extoid), (roleid))
#else
#define pgque_database_ownercheck(dboid, roleid) pg_database_ownercheck((dboid), (roleid))
#define pgque_extension_ownercheck(extoid, roleid) pg_extension_ownercheck((extoid), (roleid))
#endif

/*
 * This backend's index in ProcGlobal->allProcs, kept in shared memory so
 * others can set its latch.  PostgreSQL 17 dropped PGPROC.pgprocno for
 * GetNumberFromPGProc (both need storage/proc.h where used).
 */
#if PG_VERSION_NUM >= 170000
#define pgque_my_procno() ((int) GetNumberFromPGProc(MyProc))
#else
#define pgque_my_procno() (MyProc->pgprocno)
#endif

/*
 * This backend's local transaction id (window.c: a part cache filled under
 * a transaction snapshot serves that transaction only, ADR 0105).
 * PostgreSQL 17 moved it into PGPROC.vxid.  Needs storage/proc.h.
 */
#if PG_VERSION_NUM >= 170000
#define pgque_my_lxid() (MyProc->vxid.lxid)
#else
#define pgque_my_lxid() (MyProc->lxid)
#endif

/*
 * PostgreSQL 18 lets the caller accept a deferrable primary key; the CDC
 * triggers keep the earlier meaning (an immediate one only).  Needs
 * utils/relcache.h where used.
 */
#if PG_VERSION_NUM >= 180000
#define pgque_primary_key_index(rel) RelationGetPrimaryKeyIndex((rel), false)
#else
#define pgque_primary_key_index(rel) RelationGetPrimaryKeyIndex(rel)
#endif

/*
 * The leaf at one end of a btree level (append.c's rightmost-leaf hint,
 * ADR 0092): PostgreSQL 17 dropped the unused snapshot argument.  Needs
 * access/nbtree.h where used.
 */
#if PG_VERSION_NUM >= 170000
#define pgque_bt_rightmost_leaf(rel) _bt_get_endpoint((rel), 0, true)
#else
#define pgque_bt_rightmost_leaf(rel) _bt_get_endpoint((rel), 0, true, NULL)
#endif

/*
 * The largest btree item a page takes (evpost.c): PostgreSQL 18 made
 * BTMaxItemSize a constant of the block size.  Needs access/nbtree.h.
 */
#if PG_VERSION_NUM >= 180000
#define pgque_bt_max_item_size(page) ((void) (page), BTMaxItemSize)
#else
#define pgque_bt_max_item_size(page) BTMaxItemSize(page)
#endif

/*
 * A btree page's opaque data (evpost.c): BTPageGetOpaque came with
 * PostgreSQL 15; on 14 the special space is cast by hand, as core's own
 * code did then.  Needs access/nbtree.h.
 */
#if PG_VERSION_NUM < 150000
#define BTPageGetOpaque(page) ((BTPageOpaque) PageGetSpecialPointer(page))
#endif

/*
 * An index scan (window_direct.c's read, ADR 0110): PostgreSQL 18 added
 * the instrumentation argument (NULL: none).  Needs access/genam.h.
 */
#if PG_VERSION_NUM >= 180000
#define pgque_index_beginscan(heap, index, snapshot, nkeys) \
	index_beginscan((heap), (index), (snapshot), NULL, (nkeys), 0)
#else
#define pgque_index_beginscan(heap, index, snapshot, nkeys) \
	index_beginscan((heap), (index), (snapshot), (nkeys), 0)
#endif

/*
 * The layout of a pg_snapshot (xid8funcs.c keeps it private; the same from
 * PostgreSQL 13 to 18): xip holds nxip xids, none at or past xmax.  A
 * reader that builds or walks one checks the datum's size against
 * PGQUE_SNAPSHOT_SIZE(nxip) where it did not make it itself (tick.c,
 * window.c).  Needs access/transam.h.
 */
typedef struct PgqueSnapshot
{
	int32		vl_len_;
	uint32		nxip;
	FullTransactionId xmin;
	FullTransactionId xmax;
	FullTransactionId xip[FLEXIBLE_ARRAY_MEMBER];
} PgqueSnapshot;

#define PGQUE_SNAPSHOT_SIZE(n) (offsetof(PgqueSnapshot, xip) + sizeof(FullTransactionId) * (n))

/* PG18 moved the module magic to carry name and version (pgque_bgw.so, pgque_proxy.so). */
#if PG_VERSION_NUM >= 180000
#define PGQUE_MODULE_MAGIC(libname) PG_MODULE_MAGIC_EXT(.name = (libname), .version = PGQUE_VERSION)
#else
#define PGQUE_MODULE_MAGIC(libname) PG_MODULE_MAGIC
#endif

/* PostgreSQL 16 folded the per-kind ACL checks into object_aclcheck (src/proxy). */
#if PG_VERSION_NUM >= 160000
#define pgque_foreign_server_aclcheck(srv, role, mode) \
	object_aclcheck(ForeignServerRelationId, (srv), (role), (mode))
#else
#define pgque_foreign_server_aclcheck(srv, role, mode) pg_foreign_server_aclcheck((srv), (role), (mode))
#endif

/*
 * bgworker.c's private BackgroundWorkerSlot and BackgroundWorkerArray (the
 * shared "Background Worker Data"), the same from PostgreSQL 10 to 18.
 * budget.c reads their in_use flags, never writes; before the first read it
 * checks this layout's size against BackgroundWorkerShmemSize() and counts
 * nothing when they differ (ADR 0036).  Needs postmaster/bgworker.h.
 */
typedef struct PgqueBgwSlot
{
	bool		in_use;
	bool		terminate;
	pid_t		pid;
	uint64		generation;
	BackgroundWorker worker;
} PgqueBgwSlot;

typedef struct PgqueBgwArray
{
	int			total_slots;
	uint32		parallel_register_count;
	uint32		parallel_terminate_count;
	PgqueBgwSlot slot[FLEXIBLE_ARRAY_MEMBER];
} PgqueBgwArray;

#endif							/* PGQUE_COMPAT_H */
