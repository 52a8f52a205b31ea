-- The idle passes (ADR 0095): what a maintenance pass costs when nothing
-- it cleans is there.  Counted in calls (track_functions), which do not
-- depend on the machine's load.

-- 1. The dropped roles in the rights lists (ADR 0079): with no OID stale,
-- one call of _live_roles for all the lists, not one per row and list
-- (3,000 a pass with 1,000 queues).
select count(pgque.create_queue('t72_' || i)) from generate_series(1, 20) i;
create role t72_app;
select count(pgque.grant_queue('t72_' || i, 't72_app', 'send')) from generate_series(1, 20) i;
select count(pgque.subscribe('t72_' || i, 'c')) from generate_series(1, 20) i;
-- whatever OID an earlier file left stale, cleaned first
select pgque._maint_stale_roles() >= 0 as settled;
begin;
set local track_functions = 'all';
select pgque._maint_stale_roles() as nothing_stale;
select calls as live_roles_calls from pg_catalog.pg_stat_xact_user_functions
 where schemaname = 'pgque' and funcname = '_live_roles';
rollback;

-- a role dropped behind the lists' back (its anchor taken by DROP OWNED):
-- the pass still finds and cleans it, and the next one finds nothing
create role t72_ghost;
select pgque.grant_queue('t72_7', 't72_ghost', 'subscribe') as granted;
select (select oid from pg_catalog.pg_roles where rolname = 't72_ghost') as ghost \gset
\set VERBOSITY terse
drop owned by t72_ghost;
drop role t72_ghost;
\set VERBOSITY default
select count(*) as queues_stale from pgque.queue where :ghost::oid = any (queue_subscribers::oid[]);
select pgque._maint_stale_roles() as cleaned;
select count(*) as queues_stale from pgque.queue where :ghost::oid = any (queue_subscribers::oid[]);
select pgque._maint_stale_roles() as nothing_left;

select count(pgque.drop_queue('t72_' || i, true)) from generate_series(1, 20) i;
\set VERBOSITY terse
drop owned by t72_app;
drop role t72_app;
\set VERBOSITY default
