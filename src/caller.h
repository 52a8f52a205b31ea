/*
 * caller.h
 *		Who called, and the role our work runs as (caller.c, ADR 0042).
 */
#ifndef PGQUE_CALLER_H
#define PGQUE_CALLER_H

#include "textdomain.h"

/* the role the shared-memory tables charge an entry to */
extern Oid	pgque_quota_role(void);
/* pgque_caller_privileged(): what the caller may use in the shared-memory tables */
#define PGQUE_PRIV_NONE 0
#define PGQUE_PRIV_NO_ROLE_CAP 1	/* not held to the per-role cap */
#define PGQUE_PRIV_RESERVE 2		/* that, and the reserve */
extern int	pgque_caller_privileged(void);
/* the role the workers, the producer and CDC run as: pgque_owner */
extern Oid	pgque_run_as_role(void);
/* the installing role, pg_extension.extowner; and that row's oid and version */
extern Oid	pgque_extension_owner(void);
extern Oid	pgque_extension_row(char **version, Oid *extoid);

#endif							/* PGQUE_CALLER_H */
