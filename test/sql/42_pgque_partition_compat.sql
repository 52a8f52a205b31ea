-- PgQue's partition-key relations and figures (issue #27 item 8, ADR
-- 0058), from PgQue's blueprints/partition-keys/SPEC.md (US-12.6) and its
-- observability reference:
--   partition_slot_status.pending_events  the queue's events between the
--       slot's cursor tick and the latest tick, before the hash filter;
--       ours per slot is slot_pending_events
--   pgque.partition_slot  (queue_id, co_name, slot, lease_owner,
--       lease_until, lease_ttl, epoch), one row per subscribed slot
--   otel_metrics(): pgque.queue.depth, a gauge labelled with the queue
select pgque.create_queue('pkc');
select pgque.subscribe_slot('pkc', 'w', 0, 2), pgque.subscribe_slot('pkc', 'w', 1, 2);
select count(pgque.send('pkc', 'ev', 'p' || k, 'key-' || k)) as sent from generate_series(1, 9) k;
select pgque.ticker('pkc') is not null as ticked;

-- one row per slot; before draining, every slot shows the queue's 9
-- pending events, and the slots' own shares add up to them
select slot, n, lease_owner, last_tick is not null as has_cursor, pending_events
  from pgque.partition_slot_status where queue_name = 'pkc' order by slot;
select sum(slot_pending_events) as shares_total, bool_and(slot_pending_events < 9) as each_a_share
  from pgque.partition_slot_status where queue_name = 'pkc';

-- pgque.partition_slot: PgQue's columns, in its order
select column_name, data_type from information_schema.columns
 where table_schema = 'pgque' and table_name = 'partition_slot' order by ordinal_position;
select co_name, slot, lease_owner, lease_until, lease_ttl, epoch
  from pgque.partition_slot p join pgque.queue q using (queue_id) where q.queue_name = 'pkc' order by slot;
select pgque.claim_slot('pkc', 'w', 0, 'wk-a', '45 seconds') as e0 \gset
select co_name, slot, lease_owner, lease_until > now() as live, lease_ttl, epoch = :e0 as same_epoch
  from pgque.partition_slot p join pgque.queue q using (queue_id) where q.queue_name = 'pkc' order by slot;

-- drained: every figure is 0
select pgque.claim_slot('pkc', 'w', 1, 'wk-b') > 0 as claimed;
select count(*) as drained from generate_series(0, 1) k,
       lateral pgque.receive_partitioned('pkc', 'w', k, 2, case k when 0 then 'wk-a' else 'wk-b' end, 100) m;
select sum(pgque.ack_partitioned('pkc', 'w', k, 2, case k when 0 then 'wk-a' else 'wk-b' end)) as acked
  from generate_series(0, 1) k;
select slot, pending_events, slot_pending_events
  from pgque.partition_slot_status where queue_name = 'pkc' order by slot;

-- otel_metrics(): pgque.queue.depth per queue, a gauge labelled with the
-- queue, the value of queue_stats().depth and of metrics()' pgque_queue_depth
select pgque.subscribe('pkc', 'plain');
select count(pgque.send('pkc', 'ev', 'later' || k)) as sent from generate_series(1, 4) k;
select pgque.ticker('pkc') is not null as ticked;
select o.metric_type, o.labels, o.metric_value,
       o.metric_value = (select s.depth from pgque.queue_stats() s where s.queue_name = 'pkc') as is_queue_stats_depth,
       o.metric_value = (select m.value::numeric from pgque.metrics() m
                          where m.metric = 'pgque_queue_depth' and m.labels ->> 'queue' = 'pkc') as is_metrics_row
  from pgque.otel_metrics() o where o.metric_name = 'pgque.queue.depth' and o.labels ->> 'queue' = 'pkc';
-- a queue without consumers has depth 0, and every queue has a row
select pgque.create_queue('pkc_empty');
select o.labels ->> 'queue' as queue, o.metric_value
  from pgque.otel_metrics() o where o.metric_name = 'pgque.queue.depth' and o.labels ->> 'queue' like 'pkc%'
 order by 1;
select (select count(*) from pgque.otel_metrics() o where o.metric_name = 'pgque.queue.depth')
     = (select count(*) from pgque.queue) as one_per_queue;

-- who may read pgque.partition_slot: admins, as in PgQue; not readers
create role t42_reader in role pgque_reader;
create role t42_admin in role pgque_admin;
grant usage on schema pgque_test to t42_reader;
set role t42_reader;
select pgque_test.error_of($$select count(*) from pgque.partition_slot$$) as reader;
select count(*) = 2 as reader_sees_status from pgque.partition_slot_status where queue_name = 'pkc';
reset role;
set role t42_admin;
select count(*) as admin_rows from pgque.partition_slot p join pgque.queue q using (queue_id) where q.queue_name = 'pkc';
reset role;

-- unsubscribing the slots takes their rows away
select pgque.unsubscribe_slot('pkc', 'w', 0), pgque.unsubscribe_slot('pkc', 'w', 1);
select count(*) as rows_left from pgque.partition_slot p join pgque.queue q using (queue_id) where q.queue_name = 'pkc';
select pgque.drop_queue('pkc', true), pgque.drop_queue('pkc_empty');
revoke usage on schema pgque_test from t42_reader;
drop role t42_reader, t42_admin;
