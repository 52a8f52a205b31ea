-- Reliability leftovers of issue #30 (ADR 0091), one block each: what
-- was wrong, then what holds now.

-- 1. A replay by seek delivers each id once.  A retry (nack) appends a
-- copy of the event under its id, owned by the subscription; a seek back
-- past it read the original and the acked copy both.  The seek drops the
-- copies the consumer acked; a retry still owed stays.
select pgque.create_queue('t67_q');
select pgque.subscribe('t67_q', 'c'), pgque.subscribe('t67_q', 'd');
select count(pgque.send('t67_q', 'ev', 'p' || i)) as sent from generate_series(1, 3) i;
select pgque.ticker('t67_q') is not null as ticked;
create temp table t67_b as select r.msg_id, r.batch_id, r.retry_count, r as m from pgque.receive('t67_q', 'c', 10) r;
select array_agg(msg_id order by msg_id) as first_read from t67_b;
-- event 2 to retry at once, the batch acked
select pgque.nack(b.batch_id, b.m, '0 seconds', 'test') from t67_b b where b.msg_id = 2;
select pgque.ack((select batch_id from t67_b limit 1));
drop table t67_b;
-- another consumer of the queue, d, with a retry copy of event 1 it acked
create temp table t67_b as select r.msg_id, r.batch_id, r.retry_count, r as m from pgque.receive('t67_q', 'd', 10) r;
select pgque.nack(b.batch_id, b.m, '0 seconds', 'test') from t67_b b where b.msg_id = 1;
select pgque.ack((select batch_id from t67_b limit 1));
select pgque.maint_retry_events() as moved;
select pgque.ticker('t67_q') is not null as ticked;
drop table t67_b;
create temp table t67_b as select r.msg_id, r.batch_id, r.retry_count, r as m from pgque.receive('t67_q', 'c', 10) r;
select array_agg(msg_id order by msg_id) as retried, max(retry_count) as retry_count from t67_b;
select pgque.ack((select batch_id from t67_b limit 1));
drop table t67_b;
select count(*) as d_acked from (select pgque.ack(batch_id) from (select distinct batch_id from pgque.receive('t67_q', 'd', 10)) x) y;
create view pgque_test.t67_copies as
select c.co_name as consumer, count(*) as copies
  from pgque_test.events('t67_q') e join pgque.subscription s on s.sub_id = e.ev_owner
  join pgque.consumer c on c.co_id = s.sub_consumer group by 1 order by 1;
select * from pgque_test.t67_copies;
-- a seek whose transaction rolls back keeps the copy
begin;
select clamped from pgque.seek('t67_q', 'c', 'earliest');
select * from pgque_test.t67_copies;
rollback;
select * from pgque_test.t67_copies;
-- every batch until none, as 'id' or 'id(retry count)', in delivery order
create function pgque_test.t67_drain(i_q text, i_c text) returns text language plpgsql as $$
declare
    got  text := '';
    b    bigint;
    r    record;
begin
    loop
        b := null;
        for r in select * from pgque.receive(i_q, i_c, 100) m order by m.msg_id loop
            b := r.batch_id;
            got := got || r.msg_id || case when r.retry_count > 0 then '(' || r.retry_count || ')' else '' end || ' ';
        end loop;
        exit when b is null;
        perform pgque.ack(b);
    end loop;
    return pg_catalog.rtrim(got);
end $$;
-- the replay: 1, 2, 3 once each (before: 1 2 3 2(1))
select clamped from pgque.seek('t67_q', 'c', 'earliest');
select pgque_test.t67_drain('t67_q', 'c') as replayed;
-- d's copy is d's: c's seek never touches another consumer's rows
select * from pgque_test.t67_copies;
-- a retry still owed when the seek comes (nacked, not yet moved) is not
-- lost: it comes after the replay
select pgque.ticker('t67_q') is not null as ticked;
select clamped from pgque.seek('t67_q', 'c', 'earliest');
create temp table t67_b as select r.msg_id, r.batch_id, r.retry_count, r as m from pgque.receive('t67_q', 'c', 10) r;
select pgque.nack(b.batch_id, b.m, '0 seconds', 'owed') from t67_b b where b.msg_id = 3;
select pgque.ack((select batch_id from t67_b limit 1));
drop table t67_b;
select clamped from pgque.seek('t67_q', 'c', 'earliest');
select pgque.maint_retry_events() as moved;
select pgque.ticker('t67_q') is not null as ticked;
select pgque_test.t67_drain('t67_q', 'c') as replayed_with_owed_retry;
drop function pgque_test.t67_drain(text, text);
drop view pgque_test.t67_copies;
select pgque.drop_queue('t67_q', true);

-- 2. Forgets at commit, kept sorted as they come (one predicate for the
-- claim, the checks, the listing and the commit).  Subtransactions:
-- a claim after the forget whose savepoint rolls back no longer saves its
-- entry; one whose savepoint is released does; a loop of savepoints
-- around the same forget, rolled back, keeps the leases.
select pgque.create_queue('t67_s');
select count(pgque.subscribe_slot('t67_s', 'f' || i, 0, 1)) as subscribed,
       count(pgque.claim_slot('t67_s', 'f' || i, 0, 'old')) as claimed
  from generate_series(1, 6) i;
create table pgque_test.t67_before as
select consumer, owner, epoch from pgque._slot_leases() where consumer like 'f%';
create function pgque_test.t67_leases() returns text language sql as $$
    select coalesce(pg_catalog.string_agg(l.consumer || ':' || l.owner ||
                        case when b.epoch = l.epoch then '' else '*' end, ' ' order by l.consumer), 'none')
      from pgque._slot_leases() l left join pgque_test.t67_before b using (consumer)
     where l.consumer like 'f%'
$$;
select pgque_test.t67_leases() as leases;
begin;
-- forgets of three targets in an order the sorted list does not keep
select pgque.unsubscribe_slot('t67_s', 'f5', 0), pgque.unsubscribe_slot('t67_s', 'f1', 0),
       pgque.unsubscribe_slot('t67_s', 'f3', 0), pgque.unsubscribe_slot('t67_s', 'f2', 0);
select pgque.subscribe_slot('t67_s', 'f1', 0, 1), pgque.subscribe_slot('t67_s', 'f2', 0, 1),
       pgque.subscribe_slot('t67_s', 'f3', 0, 1);
savepoint a;
select pgque.claim_slot('t67_s', 'f1', 0, 'new') is not null as f1_claimed;
rollback to savepoint a;
savepoint b;
select pgque.claim_slot('t67_s', 'f2', 0, 'new') is not null as f2_claimed;
release savepoint b;
-- f3 claimed, then forgotten again: the later forget wins
select pgque.claim_slot('t67_s', 'f3', 0, 'new') is not null as f3_claimed;
select pgque.unsubscribe_slot('t67_s', 'f3', 0);
select pgque.subscribe_slot('t67_s', 'f3', 0, 1);
select pgque_test.t67_leases() as in_transaction;
commit;
-- f1 (its claim rolled back), f3 (forgotten after its claim) and f5 gone;
-- f2 the new claim's; f4 and f6 untouched
select pgque_test.t67_leases() as after_commit;
-- a loop of savepoints around the same forget, rolled back: leases kept
begin;
do $$ begin
    for i in 1 .. 200 loop
        begin   -- a subtransaction each, released: its forget folds into the parent's
            perform pgque.unsubscribe_slot('t67_s', 'f4', 0);
            perform pgque.subscribe_slot('t67_s', 'f4', 0, 1);
        exception when division_by_zero then null;
        end;
    end loop;
end $$;
select pgque_test.t67_leases() as in_loop;
rollback;
select pgque_test.t67_leases() as after_loop_rollback;
select pgque.drop_queue('t67_s', true);
drop function pgque_test.t67_leases();
drop table pgque_test.t67_before;

-- 3. A pgque_reader on a consumer a superuser subscribed (ADR 0058: it
-- starts with the users {pgque_reader}): the reader consumes, never
-- changes it, and a queue narrowed to another application's role narrows
-- the consumer with it.
create role t67_reader login in role pgque_reader;
create role t67_app login in role pgque_reader;
grant usage on schema pgque_test to t67_reader, t67_app;
select pgque.create_queue('t67_r');
select pgque.subscribe('t67_r', 'c'), pgque.subscribe_partitioned('t67_r', 'pc', 2);
select pgque.register_subconsumer('t67_r', 'cg', 'm1');
select queue_name, consumer_name, owner, users from pgque.consumer_rights
 where queue_name = 't67_r' order by consumer_name;
select count(pgque.send('t67_r', 'ev', 'p' || i, 'k' || i)) as sent from generate_series(1, 4) i;
select pgque.ticker('t67_r') is not null as ticked;
set role t67_reader;
select count(*) as reader_receives from pgque.receive('t67_r', 'c', 10);
select pgque.claim_slot('t67_r', 'pc', 0, 'rw') is not null as reader_claims;
select pgque_test.error_of($$select pgque.unsubscribe('t67_r', 'c')$$) as unsubscribe;
select pgque_test.error_of($$select pgque.seek('t67_r', 'c', 'earliest')$$) as seek;
select pgque_test.error_of($$select pgque.register_consumer_at('t67_r', 'c', 1)$$) as reposition;
select pgque_test.error_of($$select pgque.grant_consumer('t67_r', 'c', 't67_reader')$$) as grant_consumer;
select pgque_test.error_of($$select pgque.revoke_consumer('t67_r', 'c', 'pgque_reader')$$) as revoke_consumer;
select pgque_test.error_of($$select pgque.register_subconsumer('t67_r', 'c', 'm9', true)$$) as convert;
select pgque_test.error_of($$select pgque.set_failure_policy('t67_r', 'pc', 'pause')$$) as failure_policy;
select pgque_test.error_of($$select pgque.resize_partitioned('t67_r', 'pc', 4)$$) as resize;
select pgque_test.error_of($$select pgque.unsubscribe_slot('t67_r', 'pc', 0)$$) as unsubscribe_slot;
select pgque_test.error_of($$select pgque.seek('t67_r', 'pc', 'earliest')$$) as seek_partitioned;
select pgque_test.error_of($$select pgque.seek('t67_r', 'cg', 'earliest')$$) as seek_group;
select pgque_test.error_of($$select pgque.unsubscribe('t67_r', 'cg')$$) as unsubscribe_group;
reset role;
-- narrowed to t67_app: the reader is out of the admin's consumers
select pgque.revoke_queue('t67_r', 'pgque_reader', 'subscribe'), pgque.grant_queue('t67_r', 't67_app', 'subscribe');
set role t67_reader;
select pgque_test.error_of($$select pgque.receive('t67_r', 'c', 10)$$) as receive_narrowed;
select pgque_test.error_of($$select pgque.claim_slot('t67_r', 'pc', 1, 'rw')$$) as claim_narrowed;
select pgque_test.error_of($$select pgque.receive_coop('t67_r', 'cg', 'm1', 10)$$) as coop_narrowed;
reset role;
set role t67_app;
select pgque_test.error_of($$select pgque.receive('t67_r', 'c', 10)$$) as app_receives;
reset role;
select pgque.drop_queue('t67_r', true);

-- 4. Idempotency keys are the sending role's OID: a role renamed keeps its
-- keys; a role dropped and made again under its name is another role (a
-- new OID): its key is new.  Maintenance drops the claims of a role that is
-- gone, so no dump carries a bare OID that a restore would give to
-- another role.
create role t67_w login in role pgque_writer;
select pgque.create_queue('t67_i');
set role t67_w;
select deduped from pgque.send_idem('t67_i', 'ev', 'a', 'key-1');
reset role;
alter role t67_w rename to t67_w2;
set role t67_w2;
select deduped as renamed_deduped from pgque.send_idem('t67_i', 'ev', 'a', 'key-1');
reset role;
drop role t67_w2;
select count(*) as claims_of_dropped_role from pgque.idem i join pgque.queue q using (queue_id)
 where q.queue_name = 't67_i' and not exists (select from pg_roles r where r.oid = i.idem_role);
create role t67_w2 login in role pgque_writer;
set role t67_w2;
select deduped as recreated_deduped from pgque.send_idem('t67_i', 'ev', 'a', 'key-1');
reset role;
select pgque._maint_stale_roles() > 0 as cleaned;
select count(*) as claims_of_dropped_role from pgque.idem i join pgque.queue q using (queue_id)
 where q.queue_name = 't67_i' and not exists (select from pg_roles r where r.oid = i.idem_role);
select count(*) as claims_left from pgque.idem i join pgque.queue q using (queue_id) where q.queue_name = 't67_i';
select pgque._maint_stale_roles() as nothing_left;
select pgque.drop_queue('t67_i', true);
drop role t67_w2;
revoke usage on schema pgque_test from t67_reader, t67_app;
drop role t67_reader;
drop role t67_app;

-- 5. maint_operations() lists maint() only when a step without a function
-- of its own has work: a cooperative group (step 6) only when its sync
-- would cut windows or move its cursor, or a fence is past its time (it
-- listed maint() whenever a group existed); a queue's extra hook (step 8)
-- only when it would run (not one that is missing or not pgque_owner's).
select pgque.create_queue('t67_m');
select pgque.register_subconsumer('t67_m', 'g', 'm1');
select pgque.maint() >= 0 as maintained;
select count(*) filter (where func_name = 'pgque.maint') as maint_listed from pgque.maint_operations();
-- a fence older than its time: step 6 has work, maint() does it
insert into pgque.coop_fence (cf_batch, cf_sub, cf_member, cf_by, cf_by_batch, cf_at)
select -67, s.sub_id, 'm1', 'm2', -68, now() - interval '2 days'
  from pgque.subscription s join pgque.consumer c on c.co_id = s.sub_consumer where c.co_name = 'g';
select count(*) filter (where func_name = 'pgque.maint') as maint_listed_fence from pgque.maint_operations();
select pgque.maint() >= 0 as maintained;
select count(*) filter (where func_name = 'pgque.maint') as maint_listed_after from pgque.maint_operations();
-- hooks: a missing one and one not pgque_owner's run nothing: not listed
create schema t67_hooks;
create function t67_hooks.hook(text) returns int4 language sql as 'select 1';
update pgque.queue set queue_extra_maint = array['t67_hooks.nohook', 't67_hooks.hook']
 where queue_name = 't67_m';
select hook, fn, skipped from pgque._maint_extra_hooks() where queue_name = 't67_m';
select count(*) filter (where func_name = 'pgque.maint') as maint_listed_hooks from pgque.maint_operations();
-- one pgque_owner owns (only a superuser can make it so), in a schema it
-- may use: listed
alter function t67_hooks.hook(text) owner to pgque_owner;
select count(*) filter (where func_name = 'pgque.maint') as maint_listed_schema_not_usable from pgque.maint_operations();
-- and maint() (pgque_owner's rights) warns and goes on (it failed with
-- 42501 at step 8: to_regprocedure in a schema it may not use)
select pgque_test.error_of($$select pgque.maint()$$) as maint_with_unusable_hook;
grant usage on schema t67_hooks to pgque_owner;
select hook, fn, skipped from pgque._maint_extra_hooks() where queue_name = 't67_m';
select count(*) filter (where func_name = 'pgque.maint') as maint_listed_hook_runs from pgque.maint_operations();
select pgque.drop_queue('t67_m', true);
drop schema t67_hooks cascade;

-- a forget of one consumer of every queue is no target the commit applies
-- (ADR 0099's second reader): refused, not counted and left
select pgque_test.error_of('select pgque._slot_forget(null, ''c'')') as forget_consumer_of_every_queue;
