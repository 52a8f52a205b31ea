/*
 * pgque_bgw.h
 *		Declarations shared between the module's C files.
 */
#ifndef PGQUE_BGW_H
#define PGQUE_BGW_H

extern bool pgque_is_preloaded(void);

/* insert.c */
struct varlena;
extern void pgque_check_queue_name(struct varlena *name);

#endif							/* PGQUE_BGW_H */
