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
                  'pgque_slot_lease_live', 'pgque_retry_pending', 'pgque_dead_letters')
 order by metric, labels::text;
-- one pgque_alerts_open series per kind of the registry (pgque._alert_kinds:
-- a new kind changes no expected output here), 0 with none open
select count(*) = (select count(*) from pgque._alert_kinds()) as one_per_kind,
       count(distinct labels->>'kind') = count(*) as distinct_kinds,
       bool_and(value = 0) as none_open,
       bool_and(labels->>'kind' in (select kind from pgque._alert_kinds())) as only_registry_kinds
  from pgque.metrics() where metric = 'pgque_alerts_open';

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

-- attacks: the helpers behind the figures are nobody's to call (they read
-- event tables with the owner's rights); the figures are pgque_reader's; a
-- function a caller puts in pg_temp under a helper's name is never called
create role pgque_t_m_login login;
create role pgque_t_m_creator login;
do $$ begin execute format('grant create on database %I to pgque_t_m_creator', current_database()); end $$;
create role pgque_t_m_reader login in role pgque_reader;
create role pgque_t_m_writer login in role pgque_writer;
grant usage on schema pgque_test to pgque_t_m_login, pgque_t_m_creator, pgque_t_m_reader, pgque_t_m_writer;
create function pg_temp.denied(i_role text) returns table (call text, error text) language plpgsql as $$
begin
    execute format('set role %I', i_role);
    return query select c, left(pgque_test.error_of(c), 5) from (values
        ('select count(*) from pgque._consumer_state()'),
        ('select count(*) from pgque._slot_pending_all()'),
        ('select pgque._unticked_since(null::pgque.queue, null, 0)')) v(c);
    reset role;
end $$;
select r as role, d.call, d.error
  from unnest(array['pgque_t_m_login', 'pgque_t_m_creator', 'pgque_t_m_reader', 'pgque_t_m_writer']) r,
       pg_temp.denied(r) d
 order by 1, 2;
set role pgque_t_m_login;
select left(pgque_test.error_of('select count(*) from pgque.get_consumer_info()'), 5) as login_info,
       left(pgque_test.error_of('select count(*) from pgque.metrics()'), 5) as login_metrics;
reset role;
set role pgque_t_m_reader;
create function pg_temp._slot_pending_all(out sub_id int4, out pending bigint) returns setof record
language plpgsql as $$ begin raise exception 'hijacked'; end $$;
create function pg_temp._consumer_state() returns setof record
language plpgsql as $$ begin raise exception 'hijacked'; end $$;
select i.consumer_name, i.pending_events as info, c.pending_events as stats, m.value as metric
  from pgque.get_consumer_info('m') i
  join pgque.consumer_stats() c on c.queue_name = 'm' and c.consumer_name = i.consumer_name
  join pgque.metrics() m on m.metric = 'pgque_consumer_pending_events'
                         and m.labels = jsonb_build_object('queue', 'm', 'consumer', i.consumer_name)
 order by 1;
select count(*) > 0 as reader_health from pgque.queue_health() where queue_name = 'm';
reset role;
drop function pg_temp._slot_pending_all(), pg_temp._consumer_state();
do $$ begin execute format('revoke create on database %I from pgque_t_m_creator', current_database()); end $$;
revoke usage on schema pgque_test from pgque_t_m_login, pgque_t_m_creator, pgque_t_m_reader, pgque_t_m_writer;
drop role pgque_t_m_login, pgque_t_m_creator, pgque_t_m_reader, pgque_t_m_writer;

select pgque.drop_queue('m', true);
