/*
 * pgque_bgw.h
 *		Declarations shared between the module's C files.
 */
#ifndef PGQUE_BGW_H
#define PGQUE_BGW_H

extern bool pgque_is_preloaded(void);

#endif							/* PGQUE_BGW_H */
