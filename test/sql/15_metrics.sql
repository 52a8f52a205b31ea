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

-- reading the metrics assigns no transaction id (it writes nothing)
begin;
select count(*) > 0 as has_metrics from pgque.metrics();
select pg_current_xact_id_if_assigned() is null as wrote_nothing;
commit;
select pgque.drop_queue('m', true);
