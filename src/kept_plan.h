/*
 * kept_plan.h
 *		A kept SPI plan that a cache may let go of while a caller up the
 *		stack is still executing it (src/kept_plan.c, ADR 0037).
 */
#ifndef PGQUE_KEPT_PLAN_H
#define PGQUE_KEPT_PLAN_H

#include "postgres.h"
#include "textdomain.h"

#include "executor/spi.h"

typedef struct PgqueKeptPlan
{
	SPIPlanPtr	plan;			/* kept (SPI_keepplan) */
	int			users;			/* executions of it in progress in this backend */
	bool		dropped;		/* no cache holds it: freed when users is 0 */
} PgqueKeptPlan;

extern SPIPlanPtr pgque_prepare_kept(const char *sql, int nargs, Oid *argtypes);
extern SPIPlanPtr pgque_kept_generic_once(SPIPlanPtr *slot, const char *sql, int nargs, Oid *argtypes);
extern PgqueKeptPlan *pgque_kept_plan_prepare(const char *sql, int nargs, Oid *argtypes,
											  int cursor_options);
extern void pgque_kept_plan_drop(PgqueKeptPlan *kp);
extern int	pgque_kept_plan_execute(PgqueKeptPlan *kp, Datum *args, const char *nulls,
									bool read_only, long tcount);
extern int	pgque_kept_plan_execute_extended(PgqueKeptPlan *kp, const SPIExecuteOptions *options);

#endif							/* PGQUE_KEPT_PLAN_H */
