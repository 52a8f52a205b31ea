-- rotation_pinned blames a consumer only when its cursor is what pins
-- rotation (issue 12, ADR 0024, 0028): during a ticker outage the queue's
-- latest tick is from before the last switch, so no consumer could get past
-- it by moving, not even one that is behind; the missing tick pins rotation
-- (ticker_stalled, worker_down) and nobody is blamed.
select pgque.create_queue('rpb');
select pgque.send('rpb', 'e0') is not null as sent;
select pgque.ticker('rpb') is not null as ticked;
select pgque.subscribe('rpb', 'ok');
select pgque.subscribe('rpb', 'lag');
select pgque.send('rpb', 'e1') is not null as sent;
select pgque.ticker('rpb') is not null as ticked;
-- 'ok' consumes up to the latest tick, 'lag' does not
select pgque.ack(max(batch_id)) from pgque.receive('rpb', 'ok');
-- a rotation, then no tick (the ticker is down)
update pgque.queue set queue_switch_time = now() - interval '10 days' where queue_name = 'rpb';
select pgque.maint_rotate_tables_step1('rpb') as switched;
select pgque.maint_rotate_tables_step2() >= 1 as step2;
-- and the next one is overdue
update pgque.queue set queue_switch_time = now() - interval '10 days' where queue_name = 'rpb';
-- both cursors are before the last switch; 'lag' could move, but only to a
-- tick that is before the switch too
select c.co_name,
       pg_snapshot_xmin(t.tick_snapshot) <= q.queue_switch_step2 as cursor_before_switch,
       s.sub_last_tick = (select max(tick_id) from pgque.tick where tick_queue = q.queue_id) as at_latest_tick
  from pgque.subscription s
  join pgque.queue q on q.queue_id = s.sub_queue
  join pgque.consumer c on c.co_id = s.sub_consumer
  join pgque.tick t on t.tick_queue = s.sub_queue and t.tick_id = s.sub_last_tick
 where q.queue_name = 'rpb'
 order by 1;
select kind, consumer
  from pgque._alert_conditions('1 day', '1 day', '1 day', '1 day', '0')
 where queue_name = 'rpb'
 order by 1, 2;
select pgque.drop_queue('rpb', true);
