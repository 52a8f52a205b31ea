-- Four of PgQue's behaviours that pgque_bgw had declared as differences and
-- now does PgQue's way (issue #27), written from PgQue's reference and
-- PgQ's documented semantics.

-- 1. force_tick / force_next_tick move the event sequence as PgQ does, by
-- ticker_max_count * 2 + 1000, so the next ticker() ticks; nothing is lost
-- or delivered twice around the jump
select pgque.create_queue('cheap_q');
select pgque.subscribe('cheap_q', 'c');
select pgque.send('cheap_q', 'before') as before_id \gset
select pgque.force_next_tick('cheap_q') = (select max(tick_id) from pgque.tick t join pgque.queue q on q.queue_id = t.tick_queue
                                            where q.queue_name = 'cheap_q') as returns_last_tick;
select pg_catalog.pg_sequence_last_value(queue_event_seq::regclass) - :before_id as bump_default_max_count
  from pgque.queue where queue_name = 'cheap_q';
select pgque.ticker('cheap_q') is not null as ticks_after_force;
select pgque.send('cheap_q', 'after') > :before_id + 2000 as next_id_past_the_jump;
select pgque.set_queue_config('cheap_q', 'ticker_max_count', '10');
select pgque.force_tick('cheap_q') is not null as forced;
select pgque.ticker('cheap_q') is not null as ticks_after_force_tick;
select pg_catalog.pg_sequence_last_value(queue_event_seq::regclass) - :before_id as bump_after_max_count_10
  from pgque.queue where queue_name = 'cheap_q';
select string_agg(payload, ',' order by msg_id) as each_event_once from pgque_test.drain('cheap_q', 'c');
select pgque.ticker('cheap_q') is null as not_due_again;

-- 2. send_idem lists PgQue's reaper pgque.maint_idem among the queue's
-- extra maintenance hooks, once; maintenance reaps claims itself and does
-- not run the hook a second time
select pgque.create_queue('cheap_idem');
select queue_extra_maint is null as no_hook_before from pgque.queue where queue_name = 'cheap_idem';
select deduped from pgque.send_idem('cheap_idem', 'x', 'one', 'k1', '10 milliseconds');
select deduped from pgque.send_idem('cheap_idem', 'x', 'two', 'k2');
select deduped from pgque.send_idem('cheap_idem', 'x', 'two', 'k2');
select queue_extra_maint from pgque.queue where queue_name = 'cheap_idem';
-- a role that may only send registers it too (the API writes it, as the
-- owner); it sets nothing else
create role cheap_writer in role pgque_writer;
grant usage on schema pgque_test to cheap_writer;
select pgque.create_queue('cheap_idem2');
set role cheap_writer;
select deduped from pgque.send_idem('cheap_idem2', 'x', 'w', 'kw');
select pgque_test.error_of($$update pgque.queue set queue_extra_maint = '{public.evil}'$$) as writer_sets_no_hook;
reset role;
select queue_extra_maint from pgque.queue where queue_name = 'cheap_idem2';
-- a hook set by hand stays, and keeps its place before the reaper
update pgque.queue set queue_extra_maint = array['pgque.maint_idem', 'pgque.no_such_hook'] where queue_name = 'cheap_idem';
select deduped from pgque.send_idem('cheap_idem', 'x', 'three', 'k3');
select queue_extra_maint from pgque.queue where queue_name = 'cheap_idem';
update pgque.queue set queue_extra_maint = array['pgque.maint_idem'] where queue_name = 'cheap_idem';
select pg_sleep(0.05);
-- the hook runner skips it: 0 actions, no warning
select pgque._maint_extra() as extra_hooks_run;
-- maint_operations() lists the same steps with or without it (no maint()
-- call on its account)
create temp table cheap_ops as select * from pgque.maint_operations();
update pgque.queue set queue_extra_maint = null where queue_name = 'cheap_idem';
select count(*) as same_steps_without_the_hook
  from (select * from cheap_ops except select * from pgque.maint_operations()) d;
update pgque.queue set queue_extra_maint = array['pgque.maint_idem'] where queue_name = 'cheap_idem';
-- maint() reaps the expired claim, the live one stays
select pgque.maint() >= 1 as maint_reaps;
select idem_key from pgque.idem i join pgque.queue q using (queue_id)
 where q.queue_name = 'cheap_idem' order by idem_key;

-- 3. the legacy next_batch on a cooperative group's main consumer: a group
-- without members (only a hand-edited row is one) gets no batch and no
-- batch is opened; a group with members still refuses (42809)
select pgque.create_queue('cheap_coop');
select pgque.register_consumer('cheap_coop', 'grp');
select pgque.send('cheap_coop', 'kept');
select pgque.force_next_tick('cheap_coop') is not null and pgque.ticker('cheap_coop') is not null as ticked;
update pgque.subscription s set sub_role = 'coop_main', sub_coop_hw = sub_last_tick
  from pgque.queue q, pgque.consumer c
 where q.queue_id = s.sub_queue and c.co_id = s.sub_consumer
   and q.queue_name = 'cheap_coop' and c.co_name = 'grp';
select pgque.next_batch('cheap_coop', 'grp') is null as no_batch;
select batch_id is null as no_batch_info, prev_tick_id is not null as at_its_cursor
  from pgque.next_batch_info('cheap_coop', 'grp');
select sub_batch is null as nothing_opened, sub_role
  from pgque.subscription s join pgque.consumer c on c.co_id = s.sub_consumer
 where c.co_name = 'grp';
update pgque.subscription s set sub_role = 'normal', sub_coop_hw = null
  from pgque.consumer c where c.co_id = s.sub_consumer and c.co_name = 'grp';
-- the event is still there for the consumer
select string_agg(payload, ',') as not_lost from pgque_test.drain('cheap_coop', 'grp');
-- a real group with a member: the plain forms still raise
select pgque.register_subconsumer('cheap_coop', 'grp', 'm1', true);
select pgque_test.error_of($$select pgque.next_batch('cheap_coop', 'grp')$$) as plain_next_batch_on_group;

-- 4. ticker_loop() runs for PgQue's one pg_cron slot (1 s) by default
select pg_catalog.pg_get_function_arguments('pgque.ticker_loop'::regproc) as ticker_loop_args;
select pgque.create_queue('cheap_loop');
select pgque.set_queue_config('cheap_loop', 'ticker_idle_period', '1 millisecond');
select pgque.set_tick_period_ms(1000);
select count(*) as ticks_before from pgque.tick t join pgque.queue q on q.queue_id = t.tick_queue
 where q.queue_name = 'cheap_loop' \gset
select pg_catalog.clock_timestamp() as loop_start \gset
call pgque.ticker_loop();
-- one pass at a 1000 ms period, and it returns within its slot
select count(*) - :ticks_before as ticks_in_one_slot from pgque.tick t join pgque.queue q on q.queue_id = t.tick_queue
 where q.queue_name = 'cheap_loop';
select pg_catalog.clock_timestamp() - :'loop_start'::timestamptz < interval '5 seconds' as returns_within_the_slot;
select pgque.set_tick_period_ms(100);
revoke usage on schema pgque_test from cheap_writer;
drop role cheap_writer;

-- 5. a tick inserted by hand (PgQue's tests make synthetic ticks for
-- throughput()) records the current snapshot, PgQ's default
select pgque.create_queue('cheap_tick');
insert into pgque.tick (tick_queue, tick_id, tick_time, tick_event_seq)
select queue_id, 1000, now(), 0 from pgque.queue where queue_name = 'cheap_tick';
select tick_snapshot is not null as snapshot_recorded
  from pgque.tick t join pgque.queue q on q.queue_id = t.tick_queue
 where q.queue_name = 'cheap_tick' and tick_id = 1000;
select pgque.drop_queue('cheap_tick');

-- 6. the bump is bounded: a ticker_max_count of 2^31-1 does not make an
-- admin's force_tick draw four billion values
select pgque.create_queue('cheap_big');
select pgque.set_queue_config('cheap_big', 'ticker_max_count', '2147483647');
select pgque.send('cheap_big', 'x') as big_id \gset
select pgque.force_tick('cheap_big') is not null as forced;
select pg_catalog.pg_sequence_last_value(queue_event_seq::regclass) - :big_id as bump_capped
  from pgque.queue where queue_name = 'cheap_big';
select pgque.drop_queue('cheap_big', true);
