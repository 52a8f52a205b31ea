/*
 * coop.h
 *		The shared-memory member table of cooperative consumers (coop.c).
 */
#ifndef PGQUE_COOP_H
#define PGQUE_COOP_H

/* entries of the whole table: all databases, all groups */
#define PGQUE_COOP_MEMBERS_MAX 4096

extern void pgque_coop_request(void);
extern void pgque_coop_startup(void);

#endif							/* PGQUE_COOP_H */
