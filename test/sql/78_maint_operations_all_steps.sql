-- maint_operations() lists every step of maint() (issue #30, ADR 0100):
-- steps 0 (unlogged queues lost in a crash), 10 (alert retention) and 11
-- (dropped roles in the rights lists, and the idempotency claims of
-- dropped roles behind the same gate) have no function of their own, and
-- maint_operations() did not list maint() for them: a pg_cron or manual
-- scheduler that runs only its rows (docs/operations.md) never ran them.
-- Each is now listed (as maint()) exactly when it has work: the has-work
-- predicate is the one its step uses (_unlogged_lost, _alert_expired,
-- _rights_roles_stale).  Each case: nothing listed, the state made, maint()
-- listed, every listed row run as a scheduler runs it, the work done,
-- nothing listed again.

-- the reset's WARNING names times: not in the expected output
set client_min_messages = error;
-- a scheduler: every row, in order, each as its own statement
create function pgque_test.t78_run_operations() returns int4 language plpgsql as $$
declare
    r record;
    n int4 := 0;
begin
    for r in select * from pgque.maint_operations() loop
        if r.func_name = 'vacuum' then
            continue;   -- VACUUM cannot run in a function; it changes nothing maint() does
        end if;
        if r.func_arg is null then
            execute pg_catalog.format('select %s()', r.func_name);
        else
            execute pg_catalog.format('select %s(%L)', r.func_name, r.func_arg);
        end if;
        n := n + 1;
    end loop;
    return n;
end $$;
create function pgque_test.t78_maint_listed() returns int8 language sql as $$
    select count(*) from pgque.maint_operations() where func_name = 'pgque.maint'
$$;

-- whatever earlier files left with work, done; their hooks left out
update pgque.queue set queue_extra_maint = null where queue_extra_maint is not null;
select pgque.maint() >= 0 as settled;
select pgque.maint() >= 0 as settled;
select pgque_test.t78_maint_listed() as listed_settled;

-- 1. step 10: an alert cleared longer ago than pgque_bgw.alert_retention
insert into pgque.alert (kind, subject, opened_at, cleared_at, details)
values ('maint_failed', 't78/old', now() - interval '40 days', now() - interval '30 days', '{}'),
       ('maint_failed', 't78/recent', now() - interval '2 days', now() - interval '1 day', '{}');
select pgque._alert_retention() as retention;
select pgque_test.t78_maint_listed() as listed_expired_alert;
select pgque_test.t78_run_operations() > 0 as ran;
select subject from pgque.alert where subject like 't78/%' order by subject;
select pgque_test.t78_maint_listed() as listed_after;
delete from pgque.alert where subject like 't78/%';

-- 2. step 11: a role dropped behind the rights lists' back (its anchor
-- taken by DROP OWNED), with an idempotency claim
select pgque.create_queue('t78_r');
create role t78_ghost login in role pgque_writer;
select pgque.grant_queue('t78_r', 't78_ghost', 'send') as granted;
set role t78_ghost;
select deduped from pgque.send_idem('t78_r', 'ev', 'a', 'key-1');
reset role;
select (select oid from pg_catalog.pg_roles where rolname = 't78_ghost') as ghost \gset
\set VERBOSITY terse
drop owned by t78_ghost;
drop role t78_ghost;
\set VERBOSITY default
select pgque._rights_roles_stale() as stale;
select pgque_test.t78_maint_listed() as listed_dropped_role;
select pgque_test.t78_run_operations() > 0 as ran;
select count(*) as senders_stale from pgque.queue where :ghost::oid = any (queue_senders::oid[]);
select count(*) as claims_of_dropped_role from pgque.idem i join pgque.queue q using (queue_id)
 where q.queue_name = 't78_r' and i.idem_role = :ghost::oid;
select pgque._rights_roles_stale() as stale_after;
select pgque_test.t78_maint_listed() as listed_after;

-- 3. step 0: an unlogged queue whose seal is gone (a crash, as regress 54
-- and 64 make one)
select pgque.create_queue('t78_u');
select pgque.set_queue_config('t78_u', 'unlogged', 'true');
select pgque.send('t78_u', 'before') > 0 as sent;
select pgque.ticker('t78_u') is not null as ticked;
delete from pgque.unlogged_seal where queue_id = (select queue_id from pgque.queue where queue_name = 't78_u');
select q.queue_name, pgque._unlogged_lost(q) as lost from pgque.queue q where q.queue_name = 't78_u';
select pgque_test.t78_maint_listed() as listed_lost_seal;
select pgque_test.t78_run_operations() > 0 as ran;
select count(*) as sealed from pgque.unlogged_seal u join pgque.queue q using (queue_id) where q.queue_name = 't78_u';
select count(*) as reset_alert from pgque.alert where kind = 'unlogged_reset' and queue_name = 't78_u';
select pgque_test.t78_maint_listed() as listed_after;

-- 4. all three at once: the rows do what maint() does
create role t78_ghost2;
select pgque.grant_queue('t78_r', 't78_ghost2', 'subscribe') as granted;
\set VERBOSITY terse
drop owned by t78_ghost2;
drop role t78_ghost2;
\set VERBOSITY default
insert into pgque.alert (kind, subject, opened_at, cleared_at, details)
values ('maint_failed', 't78/old2', now() - interval '40 days', now() - interval '30 days', '{}');
delete from pgque.unlogged_seal where queue_id = (select queue_id from pgque.queue where queue_name = 't78_u');
select pgque_test.t78_maint_listed() as listed_all;
select pgque_test.t78_run_operations() > 0 as ran;
select pgque._rights_roles_stale() as stale,
       (select count(*) from pgque.alert where subject = 't78/old2') as expired_alerts,
       (select count(*) from pgque.queue q where pgque._unlogged_lost(q)) as lost_queues,
       pgque_test.t78_maint_listed() as listed_after;

select pgque.drop_queue('t78_u', true);
select pgque.drop_queue('t78_r', true);
delete from pgque.alert where queue_name in ('t78_u', 't78_r') or subject like 't78/%';
drop function pgque_test.t78_run_operations();
drop function pgque_test.t78_maint_listed();
reset client_min_messages;
