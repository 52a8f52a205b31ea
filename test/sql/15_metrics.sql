-- metrics(): one row per metric with labels; reading writes nothing.
select pgque.create_queue('m');
select pgque.subscribe('m', 'c');
select pgque.subscribe_slot('m', 'p', k, 2) from generate_series(0, 1) k;
select pgque.send('m', 'x') from generate_series(1, 3);
select pgque.ticker('m') is not null as ticked;
select pgque.claim_slot('m', 'p', 0, 'w') > 0 as claimed;

select metric, labels, value
  from pgque.metrics()
 where metric in ('pgque_events_produced_total', 'pgque_current_table', 'pgque_consumer_pending_events',
                  'pgque_slot_lease_live', 'pgque_alerts_open', 'pgque_retry_pending', 'pgque_dead_letters')
 order by metric, labels::text;

-- a partition slot counts its own share, the number the alerts use
-- (_slot_pending_all): slot 1 has no event of its own while slot 0 has
-- them all, in metrics, consumer_stats and get_consumer_info alike
select i.consumer_name, i.pending_events as info, c.pending_events as stats, m.value as metric,
       p.pending as alerts_count
  from pgque.get_consumer_info('m') i
  join pgque.consumer_stats() c on c.queue_name = 'm' and c.consumer_name = i.consumer_name
  join pgque.metrics() m on m.metric = 'pgque_consumer_pending_events'
                         and m.labels = jsonb_build_object('queue', 'm', 'consumer', i.consumer_name)
  left join pgque.consumer co on co.co_name = i.consumer_name
  left join pgque.subscription s on s.sub_consumer = co.co_id
  left join pgque._slot_pending_all() p on p.sub_id = s.sub_id
 order by i.consumer_name;
-- keyed events: each slot its own share, the window's total split
select count(pgque.send('m', 't', 'k' || i, 'key-' || i)) as sent_keyed from generate_series(1, 20) i;
select pgque.ticker('m') is not null as ticked;
select sum(pending_events) filter (where consumer_name like 'p#%') as slots_total,
       sum(pending_events) filter (where consumer_name = 'c') as plain,
       bool_and(pending_events < 23) filter (where consumer_name like 'p#%') as each_a_share
  from pgque.consumer_stats() where queue_name = 'm';
-- the consumer_lagging alert (any age over a threshold of -1 hour) names
-- the same count in its details
select a.consumer, (a.details->>'pending_events')::bigint = c.pending_events as alert_agrees
  from pgque._alert_conditions('1 hour', '1 hour', '-1 hour', '1 hour', '1 hour') a
  join pgque.consumer_stats() c on c.queue_name = a.queue_name and c.consumer_name = a.consumer
 where a.kind = 'consumer_lagging' and a.queue_name = 'm'
 order by 1;
-- a slot's open batch shows in get_consumer_info and consumer_stats
select count(*) > 0 as received from pgque.receive_partitioned('m', 'p', 0, 2, 'w', 100);
select i.current_batch = b.sb_batch as info_shows_batch, c.batch_active as stats_active
  from pgque.get_consumer_info('m', 'p#0/2') i
  join pgque.consumer_stats() c on c.queue_name = 'm' and c.consumer_name = 'p#0/2'
  join pgque.slot_batch b on b.sb_batch is not null
  join pgque.subscription s on s.sub_id = b.sb_sub
  join pgque.consumer co on co.co_id = s.sub_consumer and co.co_name = 'p#0/2';
select pgque.ack_partitioned('m', 'p', 0, 2, 'w') as acked;

-- a tick newer than this transaction's now() (a reader that began before
-- it; test/specs/metrics_lag_never_negative.spec makes one for real): the
-- lag is 0, never negative
begin;
update pgque.tick set tick_time = now() + interval '1 hour'
 where tick_queue = (select queue_id from pgque.queue where queue_name = 'm');
select min(value) as min_lag_seconds from pgque.metrics()
 where metric in ('pgque_consumer_lag_seconds', 'pgque_seconds_since_last_tick') and labels->>'queue' = 'm';
select min(lag) as min_stats_lag from pgque.consumer_stats() where queue_name = 'm';
rollback;

-- reading the metrics assigns no transaction id (it writes nothing)
begin;
select count(*) > 0 as has_metrics from pgque.metrics();
select pg_current_xact_id_if_assigned() is null as wrote_nothing;
commit;
select pgque.drop_queue('m', true);
