/*
 * coop.h
 *		The shared-memory member table of cooperative consumers (coop.c).
 */
#ifndef PGQUE_COOP_H
#define PGQUE_COOP_H

#include "textdomain.h"

/* entries of the whole table: all databases, all groups */
#define PGQUE_COOP_MEMBERS_MAX 4096

extern void pgque_coop_request(void);
extern void pgque_coop_startup(void);
extern int	pgque_coop_reclaim(void);
extern void pgque_coop_list(Oid dboid, int32 **subs, char ***members, uint64 **gens, int *count);
extern int	pgque_coop_drop_if(int32 sub_id, const char *member, uint64 gen);
extern void pgque_coop_forget_db(Oid dboid);

#endif							/* PGQUE_COOP_H */
