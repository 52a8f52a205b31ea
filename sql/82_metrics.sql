-- metrics(): one row per metric, labels as jsonb, for scraping (Prometheus
-- via postgres_exporter, or any poller).  Everything comes from sequence
-- positions, catalog rows and the shared-memory lease and worker tables:
-- reading it writes nothing.  Stable, and every function it reads is too:
-- one snapshot for all its rows.  Ages are measured from now() and never
-- negative: a tick newer than the caller's now() (a transaction begun
-- before it) is age 0 (ADR 0051).
create function pgque.metrics(out metric text, out labels jsonb, out value float8)
returns setof record language sql stable security definer
set search_path = pgque, pg_catalog, pg_temp as $$
    -- read once: a slot's share reads its window (_slot_pending_all), up to
    -- _slot_pending_cap() rows for a slot far behind (ADR 0094)
    with ci as materialized (select * from pgque._consumer_info()),
         rs as materialized (select * from pgque._retention_state())
    -- per queue
    select 'pgque_events_produced_total', jsonb_build_object('queue', q.queue_name),
           pgque._event_seq_pos(q)::float8
      from pgque.queue q
    union all
    select 'pgque_ticks_total', jsonb_build_object('queue', q.queue_name),
           coalesce(pg_catalog.pg_sequence_last_value(q.queue_tick_seq::regclass), 0)::float8
      from pgque.queue q
    union all
    select 'pgque_seconds_since_last_tick', jsonb_build_object('queue', q.queue_name),
           extract(epoch from greatest(now() - (select max(t.tick_time) from pgque.tick t where t.tick_queue = q.queue_id),
                                       interval '0'))::float8
      from pgque.queue q
    union all
    select 'pgque_current_table', jsonb_build_object('queue', q.queue_name), q.queue_cur_table::float8
      from pgque.queue q
    union all
    -- 1: the queue's event tables are unlogged (ADR 0068)
    select 'pgque_queue_unlogged', jsonb_build_object('queue', q.queue_name), q.queue_unlogged::int::float8
      from pgque.queue q
    union all
    select 'pgque_seconds_since_rotation', jsonb_build_object('queue', q.queue_name),
           extract(epoch from now() - q.queue_switch_time)::float8
      from pgque.queue q
    union all
    -- events the slowest consumer has still to read: queue_stats().depth
    -- (its consumers' largest pending count; 0 without consumers); PgQue's
    -- pgque.queue.depth in otel_metrics()
    select 'pgque_queue_depth', jsonb_build_object('queue', q.queue_name),
           coalesce(max(i.pending_events), 0)::float8
      from pgque.queue q left join ci i on i.queue_name = q.queue_name
     group by q.queue_name
    union all
    -- the retained span (ADR 0067): the event tables' bytes, the time of
    -- the earliest tick a replay may start at, the retention (NULL: none)
    select 'pgque_queue_bytes', jsonb_build_object('queue', r.queue_name), r.bytes::float8
      from rs r
    union all
    select 'pgque_retained_oldest_timestamp_seconds', jsonb_build_object('queue', r.queue_name),
           extract(epoch from r.oldest_time)::float8
      from rs r
    union all
    select 'pgque_retention_seconds', jsonb_build_object('queue', r.queue_name),
           extract(epoch from r.retention)::float8
      from rs r
    union all
    -- per consumer (slots included, as subscriptions "<consumer>#<k>/<n>",
    -- each counting its own share)
    select 'pgque_consumer_pending_events', jsonb_build_object('queue', i.queue_name, 'consumer', i.consumer_name),
           i.pending_events::float8
      from ci i
    union all
    -- 1: that count stopped at _slot_pending_cap() (a partition slot far
    -- behind): pgque_consumer_pending_events is a lower bound (ADR 0094)
    select 'pgque_consumer_pending_events_capped', jsonb_build_object('queue', i.queue_name, 'consumer', i.consumer_name),
           i.pending_capped::int::float8
      from ci i
    union all
    select 'pgque_consumer_lag_seconds', jsonb_build_object('queue', i.queue_name, 'consumer', i.consumer_name),
           extract(epoch from i.lag)::float8
      from ci i
    union all
    select 'pgque_batches_total', '{}'::jsonb,
           coalesce(pg_catalog.pg_sequence_last_value('pgque.batch_id_seq'::regclass), 0)::float8
    union all
    select 'pgque_retry_pending', jsonb_build_object('queue', q.queue_name), count(r.*)::float8
      from pgque.queue q left join pgque.retry_queue r on r.ev_queue = q.queue_id group by q.queue_name
    union all
    select 'pgque_dead_letters', jsonb_build_object('queue', q.queue_name), count(d.*)::float8
      from pgque.queue q left join pgque.dead_letter d on d.dl_queue_id = q.queue_id group by q.queue_name
    union all
    -- per partition slot: lease state and counters from shared memory
    select 'pgque_slot_lease_live', jsonb_build_object('queue', q.queue_name, 'consumer', l.consumer, 'slot', l.slot),
           (l.owner is not null and l.lease_until > clock_timestamp())::int::float8
      from pgque._slot_leases() l join pgque.queue q on q.queue_id = l.queue_id
    union all
    select 'pgque_slot_receives_total', jsonb_build_object('queue', q.queue_name, 'consumer', l.consumer, 'slot', l.slot),
           l.receives::float8
      from pgque._slot_leases() l join pgque.queue q on q.queue_id = l.queue_id
    union all
    select 'pgque_slot_epoch', jsonb_build_object('queue', q.queue_name, 'consumer', l.consumer, 'slot', l.slot),
           l.epoch::float8
      from pgque._slot_leases() l join pgque.queue q on q.queue_id = l.queue_id
    union all
    -- alerts: every kind of the registry (_alert_kinds; 0 when none is
    -- open), and any other kind that has an open alert
    select 'pgque_alerts_open', jsonb_build_object('kind', k.kind),
           (select count(*) from pgque.alert a where a.cleared_at is null and a.kind = k.kind)::float8
      from (select r.kind from pgque._alert_kinds() r
            union
            select o.kind from pgque.alert o where o.cleared_at is null) k
    union all
    -- workers
    select 'pgque_worker_running', jsonb_build_object('worker', w.component),
           (w.status = 'running')::int::float8
      from pgque._worker_status() w where w.component in ('ticker', 'maintenance', 'watchdog')
    union all
    -- each process's memory after its last pass (ADR 0035)
    select 'pgque_worker_memory_bytes', jsonb_build_object('worker', m.worker), m.bytes::float8
      from pgque._worker_memory() m
$$;
