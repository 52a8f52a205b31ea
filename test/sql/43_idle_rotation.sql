-- Rotation of an idle queue (issue #27 item 3), driven by hand as PgQue's
-- manual mode does: pgque.ticker() and pgque.maint(), one transaction each.
-- Step 1 keeps the queue's latest tick when it deletes the ticks behind the
-- previous switch, ticks an idle queue whose latest tick is older than that
-- switch, and takes the latest tick for the cursor of a queue nobody reads:
-- an idle queue keeps rotating, with or without consumers, and an event a
-- consumer subscribing now could still read is neither stranded nor
-- truncated.
create temp table idle_rounds (step serial, queue text, cur int4, ticks int8);
create function pg_temp.round(i_queue text) returns void language sql as $$
    insert into idle_rounds (queue, cur, ticks)
    select q.queue_name, q.queue_cur_table,
           (select count(*) from pgque.tick t where t.tick_queue = q.queue_id)
      from pgque.queue q where q.queue_name = i_queue;
$$;

-- 1. no consumer, one event ticked, then nothing: every second maint() call
--    switches (one stamps step 2, the next ticks and switches): 0 -> 1 -> 2 -> 0
select pgque.create_queue('idle_rot');
select pgque.set_queue_config('idle_rot', 'rotation_period', '1 millisecond');
select pgque.send('idle_rot', 'old') is not null as sent;
select pgque.ticker('idle_rot') is not null as ticked;
select pg_sleep(0.01);
select pgque.maint() >= 1 as maint_ran;
select pg_temp.round('idle_rot');
select pg_sleep(0.01);
select pgque.maint() >= 1 as maint_ran;
select pg_temp.round('idle_rot');
select pg_sleep(0.01);
select pgque.maint() >= 1 as maint_ran;
select pg_temp.round('idle_rot');
select pg_sleep(0.01);
select pgque.maint() >= 1 as maint_ran;
select pg_temp.round('idle_rot');
select pg_sleep(0.01);
select pgque.maint() >= 1 as maint_ran;
select pg_temp.round('idle_rot');
select pg_sleep(0.01);
select pgque.maint() >= 1 as maint_ran;
select pg_temp.round('idle_rot');
-- the current table per round cycles, and the latest tick is always kept
select string_agg(cur::text, ' ' order by step) as cur_per_round,
       min(ticks) as fewest_ticks
  from idle_rounds where queue = 'idle_rot';
-- the truncated tables hold nothing: the event nobody could read is gone
select count(*) as events_left from pgque_test.events('idle_rot');

-- 2. no consumer and a paused ticker: an event after the latest tick (a
--    consumer that subscribes now reads it at the next tick) holds rotation
--    back; step 1 does not tick a paused queue, so it switches no table
select pgque.create_queue('idle_keep');
select pgque.set_queue_config('idle_keep', 'rotation_period', '1 millisecond');
select pgque.set_queue_config('idle_keep', 'ticker_paused', 'true');
select pgque.send('idle_keep', 'late') is not null as sent;
select pg_sleep(0.01);
select pgque.maint() >= 0 as maint_ran;
select pg_temp.round('idle_keep');
select pg_sleep(0.01);
select pgque.maint() >= 0 as maint_ran;
select pg_temp.round('idle_keep');
select pg_sleep(0.01);
select pgque.maint() >= 0 as maint_ran;
select pg_temp.round('idle_keep');
select string_agg(cur::text, ' ' order by step) as cur_per_round, max(ticks) as ticks
  from idle_rounds where queue = 'idle_keep';
select pgque.subscribe('idle_keep', 'newcomer');
select pgque.set_queue_config('idle_keep', 'ticker_paused', 'false');
select type, payload from pgque_test.drain('idle_keep', 'newcomer');
-- once it is read, the queue rotates again (step 1 ticks, the consumer's
-- next receive passes the switch)
select pg_sleep(0.01);
select pgque.maint() >= 0 as maint_ran;
select count(*) from pgque_test.drain('idle_keep', 'newcomer');
select pgque.maint() >= 0 as maint_ran;
select pg_sleep(0.01);
select pgque.maint() >= 1 as maint_ran;
select queue_cur_table as cur_after_read from pgque.queue where queue_name = 'idle_keep';

-- 3. a consumer that is caught up on an idle queue, and polls: step 1
--    ticks the idle queue, the consumer's next receive passes the switch,
--    so rotation goes on; an event it has not read holds it back, kept
select pgque.create_queue('idle_sub');
select pgque.set_queue_config('idle_sub', 'rotation_period', '1 millisecond');
select pgque.subscribe('idle_sub', 'c');
select pgque.send('idle_sub', 'first') is not null as sent;
select payload from pgque_test.drain('idle_sub', 'c');
select pg_sleep(0.01);
select pgque.maint() >= 0 as maint_ran;
select pg_temp.round('idle_sub');
select count(*) from pgque_test.drain('idle_sub', 'c');
select pg_sleep(0.01);
select pgque.maint() >= 0 as maint_ran;
select pg_temp.round('idle_sub');
select count(*) from pgque_test.drain('idle_sub', 'c');
select pg_sleep(0.01);
select pgque.maint() >= 0 as maint_ran;
select pg_temp.round('idle_sub');
select count(*) from pgque_test.drain('idle_sub', 'c');
select pg_sleep(0.01);
select pgque.maint() >= 0 as maint_ran;
select pg_temp.round('idle_sub');
select count(*) from pgque_test.drain('idle_sub', 'c');
select pg_sleep(0.01);
select pgque.maint() >= 0 as maint_ran;
select pg_temp.round('idle_sub');
select count(*) from pgque_test.drain('idle_sub', 'c');
select pg_sleep(0.01);
select pgque.maint() >= 0 as maint_ran;
select pg_temp.round('idle_sub');
select count(*) from pgque_test.drain('idle_sub', 'c');
select pg_sleep(0.01);
select pgque.maint() >= 0 as maint_ran;
select pg_temp.round('idle_sub');
select count(*) from pgque_test.drain('idle_sub', 'c');
-- maint() stamps step 2, then ticks the idle queue, the consumer's receive
-- passes the switch, and the next maint() switches: 0 -> 1 -> 2 -> 0
select string_agg(cur::text, ' ' order by step) as cur_per_round, min(ticks) as fewest_ticks
  from idle_rounds where queue = 'idle_sub';
-- an unread event: the consumer's cursor stays before it, rotation waits
select pgque.send('idle_sub', 'unread') is not null as sent;
select pgque.ticker('idle_sub') is not null as ticked;
select pg_sleep(0.01);
select pgque.maint() >= 0 as maint_ran;
select pg_sleep(0.01);
select pgque.maint() >= 0 as maint_ran;
select pg_sleep(0.01);
select pgque.maint() >= 0 as maint_ran;
select pg_sleep(0.01);
select pgque.maint() >= 0 as maint_ran;
select payload from pgque_test.drain('idle_sub', 'c');

select pgque.drop_queue('idle_rot');
select pgque.drop_queue('idle_keep', true);
select pgque.drop_queue('idle_sub', true);
