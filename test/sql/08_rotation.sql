-- Rotation under maint() alone: the three child tables cycle 0 -> 1 -> 2 -> 0,
-- nothing is lost, a lagging consumer holds rotation back, and the event
-- tables never hold a dead tuple.
select pgque.create_queue('rot');
select pgque.subscribe('rot', 'c');
select pgque.set_queue_config('rot', 'rotation_period', '1 millisecond');
create temp table received (msg_id bigint);
create temp table cur_tables (step serial, cur int4);

-- one round: send, tick, consume, maint() (each statement is a transaction)
select pgque.send('rot', 'e') is not null;
insert into received select msg_id from pgque_test.drain('rot', 'c');
select pg_sleep(0.01);
select pgque.maint() >= 0 as maint_ran;
insert into cur_tables (cur) select queue_cur_table from pgque.queue where queue_name = 'rot';
select pgque.send('rot', 'e') is not null;
insert into received select msg_id from pgque_test.drain('rot', 'c');
select pg_sleep(0.01);
select pgque.maint() >= 0 as maint_ran;
insert into cur_tables (cur) select queue_cur_table from pgque.queue where queue_name = 'rot';
select pgque.send('rot', 'e') is not null;
insert into received select msg_id from pgque_test.drain('rot', 'c');
select pg_sleep(0.01);
select pgque.maint() >= 0 as maint_ran;
insert into cur_tables (cur) select queue_cur_table from pgque.queue where queue_name = 'rot';
select pgque.send('rot', 'e') is not null;
insert into received select msg_id from pgque_test.drain('rot', 'c');
select pg_sleep(0.01);
select pgque.maint() >= 0 as maint_ran;
insert into cur_tables (cur) select queue_cur_table from pgque.queue where queue_name = 'rot';
select pgque.send('rot', 'e') is not null;
insert into received select msg_id from pgque_test.drain('rot', 'c');
select pg_sleep(0.01);
select pgque.maint() >= 0 as maint_ran;
insert into cur_tables (cur) select queue_cur_table from pgque.queue where queue_name = 'rot';
select pgque.send('rot', 'e') is not null;
insert into received select msg_id from pgque_test.drain('rot', 'c');
select pg_sleep(0.01);
select pgque.maint() >= 0 as maint_ran;
insert into cur_tables (cur) select queue_cur_table from pgque.queue where queue_name = 'rot';
select pgque.send('rot', 'e') is not null;
insert into received select msg_id from pgque_test.drain('rot', 'c');
select pg_sleep(0.01);
select pgque.maint() >= 0 as maint_ran;
insert into cur_tables (cur) select queue_cur_table from pgque.queue where queue_name = 'rot';

-- the current table after each round: every child takes its turn, back to 0
select string_agg(cur::text, ' ' order by step) as cur_table_per_round from cur_tables;
-- every event sent was received once
select count(*) as received, count(distinct msg_id) as distinct_ids, max(msg_id) as last_id from received;

-- a consumer that does not consume holds rotation back, without losing events
select pgque.subscribe('rot', 'slow');
select pgque.send('rot', 'for slow ' || i) from generate_series(1, 3) i;
select pgque.ticker('rot') is not null as ticked;
select queue_cur_table as cur_before from pgque.queue where queue_name = 'rot';
select count(*) from pgque_test.drain('rot', 'c');
select pgque.maint() >= 0;
select pgque.send('rot', 'more');
select count(*) from pgque_test.drain('rot', 'c');
select pg_sleep(0.01);
select pgque.maint() >= 0;
select pgque.send('rot', 'more');
select count(*) from pgque_test.drain('rot', 'c');
select pg_sleep(0.01);
select pgque.maint() >= 0;
select pgque.send('rot', 'more');
select count(*) from pgque_test.drain('rot', 'c');
select pg_sleep(0.01);
select pgque.maint() >= 0;
-- at most one switch passed since "slow" subscribed: rotation waits for it
select queue_cur_table as cur_after from pgque.queue where queue_name = 'rot';
-- and its events are intact
select count(*) as slow_gets_everything from pgque_test.drain('rot', 'slow');

-- zero dead tuples in every event table after all this
select pg_stat_force_next_flush();
select c.relname, s.n_dead_tup
  from pg_stat_user_tables s join pg_class c on c.oid = s.relid
 where s.schemaname = 'pgque' and c.relname ~ ('^event_' || (select queue_id from pgque.queue where queue_name = 'rot') || '_')
 order by 1;

-- step functions reject bad input
select pgque_test.error_of($$select pgque.maint_rotate_tables_step1('nope')$$) as unknown_queue;
select pgque_test.error_of($$select pgque.maint_rotate_tables_step1(null)$$) as null_queue;
select pgque.drop_queue('rot', true);
