-- Observability: PgQue's observability set (queue_stats, consumer_stats,
-- queue_health, otel_metrics, stuck_consumers, in_flight, throughput,
-- error_rate), issue #13.  Same names, columns and types as PgQue.
--
-- Every figure comes from what the engine keeps anyway: sequence positions,
-- tick rows (tick_event_seq), subscriptions, the retry and dead-letter
-- tables (through their time indexes).  Event tables are read only where
-- sequence positions cannot tell: a partition slot's own share
-- (_slot_pending_all, one window read per partitioned consumer, as the
-- alerts count it) and, for queue_health's ticker_running, the first event
-- past a tick that looks stalled (ADR 0051).  None writes: they are
-- declared stable, so a write would be an error, and they run in a
-- read-only transaction (test/sql/22_observability.sql).

-- The buckets of throughput() and error_rate(): aligned to multiples of
-- bucket_size since the epoch, covering [now() - period, now()].  Refuses
-- NULL, non-positive and oversize intervals, a bucket longer than the
-- period, and more than 10,000 buckets.
create function pgque._buckets(i_period interval, i_bucket_size interval,
                               out first_epoch numeric, out bucket_secs numeric, out nbuckets int4)
language plpgsql stable as $$
declare
    span numeric;
begin
    perform pgque._check_interval('period', i_period);
    perform pgque._check_not_null('bucket_size', i_bucket_size);
    if extract(epoch from i_bucket_size) <= 0 then
        -- PgQue's words (throughput), which its scripts match
        raise exception 'bucket size must be > 0, got %', i_bucket_size
            using errcode = 'invalid_parameter_value';
    end if;
    perform pgque._check_interval('bucket_size', i_bucket_size);
    bucket_secs := extract(epoch from i_bucket_size);
    span := extract(epoch from i_period);
    if bucket_secs <= 0 or span <= 0 then
        -- '1 month -30 days' is positive as an interval and zero seconds long
        raise exception 'period and bucket_size must be positive, got % and %', i_period, i_bucket_size
            using errcode = 'invalid_parameter_value';
    end if;
    if bucket_secs > span then
        raise exception 'bucket_size % is longer than period %', i_bucket_size, i_period
            using errcode = 'invalid_parameter_value',
                  hint = 'Use a bucket_size of at most the period.';
    end if;
    if pg_catalog.ceil(span / bucket_secs) > 10000 then
        raise exception 'period % in buckets of % makes % buckets, more than 10000',
              i_period, i_bucket_size, pg_catalog.ceil(span / bucket_secs)
            using errcode = 'invalid_parameter_value',
                  hint = 'Use a larger bucket_size or a shorter period.';
    end if;
    first_epoch := pg_catalog.floor(extract(epoch from pg_catalog.now() - i_period) / bucket_secs) * bucket_secs;
    nbuckets := (pg_catalog.floor((extract(epoch from pg_catalog.now()) - first_epoch) / bucket_secs) + 1)::int4;
end $$;

-- queue_stats(): one row per queue.
--   depth           what the slowest subscription has still to read (event
--                   sequence positions, as get_consumer_info's
--                   pending_events); 0 without subscriptions
--   oldest_msg_age  age of the first tick past the slowest cursor that
--                   carries new events (the oldest unconsumed event was
--                   ticked then); NULL when every cursor is caught up
--   events_per_sec  get_queue_info's ev_per_sec (over the last 20 ticks)
create function pgque.queue_stats()
returns table (queue_name text, queue_id int4, depth bigint, oldest_msg_age interval, consumers int4,
               events_per_sec numeric, cur_table int4, rotation_age interval, rotation_period interval,
               ticker_paused boolean, last_tick_time timestamptz, last_tick_id bigint, dlq_count bigint)
language sql stable security definer
set search_path = pgque, pg_catalog, pg_temp as $$
    select q.queue_name, q.queue_id,
           coalesce(cs.depth, 0), now() - cs.oldest, coalesce(cs.n, 0)::int4,
           i.ev_per_sec::numeric, q.queue_cur_table, now() - q.queue_switch_time,
           q.queue_rotation_period, q.queue_ticker_paused,
           lt.tick_time, lt.tick_id,
           (select count(*) from pgque.dead_letter d where d.dl_queue_id = q.queue_id)
      from pgque.queue q
      join pgque.get_queue_info() i on i.queue_name = q.queue_name
      left join lateral (select t.tick_id, t.tick_time from pgque.tick t where t.tick_queue = q.queue_id
                          order by t.tick_id desc limit 1) lt on true
      -- read once, not per queue: a slot's share reads its window
      left join (select c.queue_id, count(*) as n, max(c.pending_events) as depth,
                        min(c.oldest_pending_time) as oldest
                   from pgque._consumer_state() c group by c.queue_id) cs on cs.queue_id = q.queue_id
     order by q.queue_name
$$;

-- consumer_stats(): one row per subscription (slots as "<consumer>#<k>/<n>").
-- lag and pending_events are get_consumer_info's; last_batch_start is when
-- the open batch started, or, with none open, when the last one finished.
create function pgque.consumer_stats()
returns table (queue_name text, consumer_name text, lag interval, pending_events bigint,
               last_batch_start timestamptz, batch_active boolean, batch_id bigint)
language sql stable security definer
set search_path = pgque, pg_catalog, pg_temp as $$
    select c.queue_name, c.consumer_name, c.lag, c.pending_events,
           c.sub_active, c.sub_batch is not null, c.sub_batch
      from pgque._consumer_state() c
     order by c.queue_name, c.consumer_name
$$;

-- stuck_consumers(threshold): subscriptions whose cursor has not moved for
-- longer than threshold although newer ticks exist.  A consumer that is
-- caught up is never stuck, however long ago its cursor tick was.
create function pgque.stuck_consumers(threshold interval default '1 hour')
returns table (queue_name text, consumer_name text, lag interval, last_active timestamptz)
language plpgsql stable security definer
set search_path = pgque, pg_catalog, pg_temp as $$
#variable_conflict use_column
begin
    perform pgque._check_interval('threshold', threshold, true);
    return query
        select c.queue_name, c.consumer_name, c.lag, c.sub_active
          from pgque._consumer_state() c
         where c.last_tick_id > c.sub_last_tick
           and c.lag > stuck_consumers.threshold
         order by c.lag desc, c.queue_name, c.consumer_name;
end $$;

-- in_flight(queue_name): the open batches of a queue.  estimated_events is
-- the event-sequence span of what the batch has left to hand out (an upper
-- bound: rolled-back sends take sequence values too).
create function pgque.in_flight(queue_name text)
returns table (consumer_name text, batch_id bigint, batch_age interval, estimated_events bigint)
language plpgsql stable security definer
set search_path = pgque, pg_catalog, pg_temp as $$
#variable_conflict use_column
declare
    q pgque.queue;
begin
    q := pgque._queue(in_flight.queue_name);
    return query
        select c.consumer_name, c.sub_batch, now() - c.sub_active,
               greatest(nt.tick_event_seq - greatest(c.cursor_seq, coalesce(c.sub_batch_pos, 0)), 0)
          from pgque._consumer_state() c
          join pgque.tick nt on nt.tick_queue = c.queue_id and nt.tick_id = c.sub_next_tick
         where c.queue_id = q.queue_id and c.sub_batch is not null
         order by c.consumer_name;
end $$;

-- throughput(queue_name, period, bucket_size): events appended per bucket,
-- from the tick history: each tick's tick_event_seq minus the previous
-- tick's, counted in the bucket of the tick's time.  Sequence positions, so
-- rolled-back sends count and redeliveries do not.  Every bucket of the
-- period is returned, empty ones with 0; history goes back as far as tick
-- cleanup keeps ticks (at least a rotation period).
create function pgque.throughput(queue_name text, period interval, bucket_size interval)
returns table (bucket_start timestamptz, events bigint, events_per_sec numeric)
language plpgsql stable security definer
set search_path = pgque, pg_catalog, pg_temp as $$
#variable_conflict use_column
declare
    q        pgque.queue;
    b        record;
    first_id bigint;
    prev_seq bigint;
begin
    q := pgque._queue(throughput.queue_name);
    b := pgque._buckets(period, bucket_size);
    select min(t.tick_id) into first_id from pgque.tick t
     where t.tick_queue = q.queue_id and t.tick_time >= pg_catalog.to_timestamp(b.first_epoch::float8);
    select t.tick_event_seq into prev_seq from pgque.tick t
     where t.tick_queue = q.queue_id and t.tick_id < first_id order by t.tick_id desc limit 1;
    return query
        with ticks as (
            select t.tick_time, t.tick_event_seq
                   - coalesce(lag(t.tick_event_seq) over (order by t.tick_id), prev_seq, t.tick_event_seq) as d
              from pgque.tick t
             where t.tick_queue = q.queue_id and t.tick_id >= first_id
        ), per as (
            select floor((extract(epoch from k.tick_time) - b.first_epoch) / b.bucket_secs)::int4 as i,
                   sum(k.d)::bigint as n
              from ticks k group by 1
        )
        select pg_catalog.to_timestamp((b.first_epoch + g.i * b.bucket_secs)::float8),
               coalesce(per.n, 0), round(coalesce(per.n, 0) / b.bucket_secs, 3)
          from generate_series(0, b.nbuckets - 1) g(i)
          left join per on per.i = g.i
         order by g.i;
end $$;

-- error_rate(queue_name, period, bucket_size): per bucket,
--   retries       retries due in the bucket and not redelivered yet
--                 (retry_queue by ev_retry_after).  The engine keeps no
--                 history of retries once redelivered, so this is a
--                 backlog, not a rate: with maintenance running, past
--                 buckets show 0 (see docs/operations.md).
--   dead_letters  dead letters made in the bucket (dead_letter.dl_time),
--                 as long as they are kept (dlq_purge, dlq_replay remove)
create function pgque.error_rate(queue_name text, period interval, bucket_size interval)
returns table (bucket_start timestamptz, retries bigint, dead_letters bigint)
language plpgsql stable security definer
set search_path = pgque, pg_catalog, pg_temp as $$
#variable_conflict use_column
declare
    q    pgque.queue;
    b    record;
    from_ts timestamptz;
begin
    q := pgque._queue(error_rate.queue_name);
    b := pgque._buckets(period, bucket_size);
    from_ts := pg_catalog.to_timestamp(b.first_epoch::float8);
    return query
        with r as (
            select floor((extract(epoch from x.ev_retry_after) - b.first_epoch) / b.bucket_secs)::int4 as i,
                   count(*) as n
              from pgque.retry_queue x
             where x.ev_retry_after >= from_ts and x.ev_retry_after <= now() and x.ev_queue = q.queue_id
             group by 1
        ), d as (
            select floor((extract(epoch from x.dl_time) - b.first_epoch) / b.bucket_secs)::int4 as i,
                   count(*) as n
              from pgque.dead_letter x
             where x.dl_queue_id = q.queue_id and x.dl_time >= from_ts and x.dl_time <= now()
             group by 1
        )
        select pg_catalog.to_timestamp((b.first_epoch + g.i * b.bucket_secs)::float8),
               coalesce(r.n, 0), coalesce(d.n, 0)
          from generate_series(0, b.nbuckets - 1) g(i)
          left join r on r.i = g.i
          left join d on d.i = g.i
         order by g.i;
end $$;

-- When the first event appended after a tick was sent: the ev_time (its
-- transaction's start) of the first event, in ev_id order, past the tick's
-- event sequence position that this snapshot sees committed; NULL when none
-- is (sends rolled back or still open).  Retries and replays keep their
-- ev_id and are not "after" the tick.  One read of the window through the
-- ev_txid index (_window_rows, as the ticker's probe), for queue_health's
-- ticker_running, which asks only when the tick looks stalled (ADR 0051).
create function pgque._unticked_since(q pgque.queue, i_snap pg_catalog.pg_snapshot, i_seq bigint)
returns timestamptz language sql as $$
    select e.ev_time from pgque._window_rows(
            pgque._event_source(q, i_snap, pg_catalog.pg_current_snapshot(), null, null),
            pg_catalog.pg_snapshot_xmax(i_snap),
            pg_catalog.pg_snapshot_xmax(pg_catalog.pg_current_snapshot()),
            array(select pg_catalog.pg_snapshot_xip(i_snap)),
            pg_catalog.pg_current_snapshot(), null, i_seq, null, 1, null, null) e
$$;

-- queue_health(): operational checks, one row per check, status ok,
-- warning or critical (docs/operations.md lists the rules):
--   ticker_running            new events waiting for a tick
--   rotation_health           rotation overdue, and whether a cursor pins it
--   dlq_health                dead letters made in the last hour
--   retry_health              retries and delayed events overdue (maintenance)
--   consumer_lag:<consumer>   the consumer's oldest unconsumed event
-- Thresholds: the queue's ticker_max_lag and rotation_period, and the
-- watchdog's pgque_bgw.ticker_stalled_after and lag_alert_after.
create function pgque.queue_health()
returns table (queue_name text, check_name text, status text, detail text)
language plpgsql stable security definer
set search_path = pgque, pg_catalog, pg_temp as $$
#variable_conflict use_column
declare
    stalled_after interval := pgque._guc_interval('pgque_bgw.ticker_stalled_after');
    lag_after     interval := pgque._guc_interval('pgque_bgw.lag_alert_after');
begin
    return query
    with qs0 as (
        select q as qrow, q.*, lt.tick_time as last_tick_time, lt.tick_snapshot as last_tick_snap,
               lt.tick_event_seq as last_tick_seq,
               greatest(pgque._event_seq_pos(q) - lt.tick_event_seq, 0) as new_events
          from pgque.queue q
          left join lateral (select t.tick_time, t.tick_snapshot, t.tick_event_seq from pgque.tick t
                              where t.tick_queue = q.queue_id order by t.tick_id desc limit 1) lt on true
    ), qs as (
        -- since when events wait for a tick: not since the last tick (an
        -- idle queue ticks once per idle period) but since the first event
        -- past it was sent, or the last tick if that is later; read only
        -- when the last tick is old enough to matter.  NULL: none waits
        -- that this snapshot sees committed.
        select qs0.*,
               case when qs0.new_events = 0 then null
                    when qs0.last_tick_time >= now() - least(qs0.queue_ticker_max_lag, stalled_after)
                    then qs0.last_tick_time
                    -- the later of the two; NULL when no event waits
                    else (select greatest(qs0.last_tick_time, u.since)
                            from (select pgque._unticked_since(qs0.qrow, qs0.last_tick_snap, qs0.last_tick_seq)
                                           as since) u
                           where u.since is not null) end
                 as waiting_since
          from qs0
    ), cs as materialized (
        -- read once for every queue and check: a slot's share reads its window
        select * from pgque._consumer_state()
    ), checks as (
        -- the ticker
        select qs.queue_name, 1 as ord, 'ticker_running'::text as check_name,
               case when qs.new_events = 0 or qs.waiting_since is null then 'ok'
                    when qs.queue_ticker_paused then 'warning'
                    when qs.waiting_since < now() - stalled_after then 'critical'
                    when qs.waiting_since < now() - qs.queue_ticker_max_lag then 'warning'
                    else 'ok' end as status,
               format('%s event(s) not ticked yet%s; last tick %s ago%s%s', qs.new_events,
                      case when qs.new_events = 0 then ''
                           when qs.waiting_since is null then ', none committed'
                           else ', waiting ' || date_trunc('second', greatest(now() - qs.waiting_since, interval '0')) end,
                      date_trunc('second', now() - qs.last_tick_time),
                      case when qs.queue_ticker_paused then '; ticker paused' else '' end,
                      case when qs.queue_external_ticker then '; external ticker' else '' end) as detail
          from qs
        union all
        -- rotation: due after rotation_period; overdue by another period is
        -- a warning, or critical when a cursor holds it
        select qs.queue_name, 2, 'rotation_health',
               case when now() - qs.queue_switch_time <= 2 * qs.queue_rotation_period then 'ok'
                    when pin.consumer_name is not null then 'critical'
                    else 'warning' end,
               format('last rotation %s ago, rotation_period %s%s%s',
                      date_trunc('second', now() - qs.queue_switch_time), qs.queue_rotation_period,
                      case when qs.queue_switch_step2 is null then '; step 2 pending' else '' end,
                      case when pin.consumer_name is not null
                           then format('; consumer "%s" holds the oldest table (cursor %s behind)',
                                       pin.consumer_name, date_trunc('second', pin.lag))
                           else '' end)
          from qs
          left join lateral (select c.consumer_name, c.lag from cs c
                              where c.queue_id = qs.queue_id and qs.queue_switch_step2 is not null
                                and now() - qs.queue_switch_time > 2 * qs.queue_rotation_period
                                and c.cursor_xmin <= qs.queue_switch_step2
                                -- a caught-up cursor does not hold it (ADR 0024)
                                and (select pg_snapshot_xmin(t.tick_snapshot) from pgque.tick t
                                      where t.tick_queue = qs.queue_id
                                      order by t.tick_id desc limit 1) > qs.queue_switch_step2
                              order by c.cursor_seq, c.consumer_name limit 1) pin on true
        union all
        -- dead letters: growth in the last hour, or a large pile
        select qs.queue_name, 3, 'dlq_health',
               case when dl.recent > 0 or dl.total > 1000 then 'warning' else 'ok' end,
               format('%s dead letter(s), %s in the last hour', dl.total, dl.recent)
          from qs
          cross join lateral (select count(*) as total,
                                     count(*) filter (where d.dl_time > now() - interval '1 hour') as recent
                                from pgque.dead_letter d where d.dl_queue_id = qs.queue_id) dl
        union all
        -- maintenance: retries and delayed events past their time
        select qs.queue_name, 4, 'retry_health',
               case when od.oldest is null or od.oldest > now() - interval '1 minute' then 'ok'
                    when od.oldest > now() - interval '1 hour' then 'warning'
                    else 'critical' end,
               case when od.n = 0 then 'no retry or delayed event is due'
                    else format('%s retry(ies) and delayed event(s) due, the oldest %s ago', od.n,
                                date_trunc('second', now() - od.oldest)) end
          from qs
          cross join lateral (select count(*) as n, min(x.due) as oldest from (
                  select r.ev_retry_after as due from pgque.retry_queue r
                   where r.ev_queue = qs.queue_id and r.ev_retry_after <= now()
                  union all
                  select e.de_deliver_at from pgque.delayed_event e
                   where e.de_queue = qs.queue_id and e.de_deliver_at <= now()) x) od
        union all
        -- each consumer: its oldest unconsumed event (ticked at oldest_pending_time)
        select c.queue_name, 5, 'consumer_lag:' || c.consumer_name,
               case when c.oldest_pending_time is null then 'ok'
                    when c.oldest_pending_time < now() - qs.queue_rotation_period then 'critical'
                    when c.oldest_pending_time < now() - lag_after then 'warning'
                    else 'ok' end,
               format('%s pending event(s)%s; cursor %s behind', c.pending_events,
                      coalesce('; the oldest unconsumed ticked ' || date_trunc('second', now() - c.oldest_pending_time)
                               || ' ago', ''),
                      date_trunc('second', c.lag))
          from cs c
          join qs on qs.queue_id = c.queue_id
    )
    select k.queue_name, k.check_name, k.status, k.detail
      from checks k
     order by k.queue_name, k.ord, k.check_name;
end $$;

-- otel_metrics(): metrics() under OpenTelemetry-style names, with a type
-- (counter for the *_total metrics, gauge otherwise).  Built on metrics(),
-- so the two list the same metrics with the same values and labels; a
-- metric without a name below is still exported, under a name derived
-- from its own.
create function pgque.otel_metrics()
returns table (metric_name text, metric_type text, metric_value numeric, labels jsonb)
language sql stable security definer
set search_path = pgque, pg_catalog, pg_temp as $$
    select coalesce(n.otel, 'pgque.' || regexp_replace(substr(m.metric, 7), '_total$', '')),
           case when m.metric like '%\_total' then 'counter' else 'gauge' end,
           m.value::numeric, m.labels
      from pgque.metrics() m
      left join (values
          ('pgque_events_produced_total',   'pgque.queue.events_produced'),
          ('pgque_ticks_total',             'pgque.queue.ticks'),
          ('pgque_seconds_since_last_tick', 'pgque.queue.seconds_since_last_tick'),
          ('pgque_current_table',           'pgque.queue.current_table'),
          ('pgque_seconds_since_rotation',  'pgque.queue.seconds_since_rotation'),
          ('pgque_queue_depth',             'pgque.queue.depth'),
          ('pgque_consumer_pending_events', 'pgque.consumer.pending_events'),
          ('pgque_consumer_pending_events_capped', 'pgque.consumer.pending_events_capped'),
          ('pgque_consumer_lag_seconds',    'pgque.consumer.lag_seconds'),
          ('pgque_batches_total',           'pgque.batches'),
          ('pgque_retry_pending',           'pgque.queue.retry_pending'),
          ('pgque_dead_letters',            'pgque.message.dead_lettered'),
          ('pgque_slot_lease_live',         'pgque.slot.lease_live'),
          ('pgque_slot_receives_total',     'pgque.slot.receives'),
          ('pgque_slot_epoch',              'pgque.slot.epoch'),
          ('pgque_alerts_open',             'pgque.alerts.open'),
          ('pgque_worker_running',          'pgque.worker.running'),
          ('pgque_worker_memory_bytes',     'pgque.worker.memory'),
          ('pgque_queue_bytes',             'pgque.queue.bytes'),
          ('pgque_retained_oldest_timestamp_seconds', 'pgque.queue.retained_oldest_timestamp_seconds'),
          ('pgque_retention_seconds',       'pgque.queue.retention_seconds')) n(metric, otel)
        on n.metric = m.metric
$$;
