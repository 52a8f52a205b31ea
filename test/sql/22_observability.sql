-- The observability set (PgQue's queue_stats, consumer_stats, queue_health,
-- otel_metrics, stuck_consumers, in_flight, throughput, error_rate): known
-- figures on an idle and a busy queue, stuck and active consumers, every
-- check of queue_health in each status, bad input, and no writes.  Times
-- are compared, never printed; ages are made by moving catalog timestamps.

-------------------------------------------------------------------------------
-- an idle queue: no consumer, nothing sent
select pgque.create_queue('oi');
select queue_name, depth, oldest_msg_age, consumers, cur_table, rotation_period, ticker_paused,
       last_tick_id, dlq_count, rotation_age < '1 minute' as rotated_recently,
       last_tick_time > now() - interval '1 minute' as ticked_recently
  from pgque.queue_stats() where queue_name = 'oi';
select count(*) as consumer_rows from pgque.consumer_stats() where queue_name = 'oi';
select count(*) as in_flight_rows from pgque.in_flight('oi');
select check_name, status from pgque.queue_health() where queue_name = 'oi';
select count(*) as buckets, sum(events) as events, sum(events_per_sec) as per_sec
  from pgque.throughput('oi', '1 hour', '10 minutes');
select count(*) as buckets, sum(retries) as retries, sum(dead_letters) as dead_letters
  from pgque.error_rate('oi', '1 hour', '10 minutes');

-------------------------------------------------------------------------------
-- a busy queue: 15 events in two ticks; c_active read everything (one
-- event dead-lettered, one nacked for a retry due now), c_batch holds an
-- open batch of the second tick, c_stuck never read
select pgque.create_queue('ob');
select pgque.subscribe('ob', c) from unnest(array['c_active', 'c_batch', 'c_stuck']) c;
select count(pgque.send('ob', 't', 'first ' || i)) from generate_series(1, 10) i;
select pgque.ticker('ob') as tick_2;
select pgque.ack(b) from (select distinct batch_id b from pgque.receive('ob', 'c_batch')) x;
select count(pgque.send('ob', 't', 'second ' || i)) from generate_series(1, 5) i;
select pgque.ticker('ob') as tick_3;
select count(*) as c_batch_received from pgque.receive('ob', 'c_batch');
create temp table got as select * from pgque.receive('ob', 'c_active');
select count(*) as c_active_received from got;
select pgque.set_queue_config('ob', 'max_retries', '0');
select pgque.nack(m.batch_id, row(m.*)::pgque.message, '0', 'broken') as dead_lettered from got m where m.payload = 'first 1';
select pgque.set_queue_config('ob', 'max_retries', null);
select pgque.nack(m.batch_id, row(m.*)::pgque.message, '0', 'flaky') as retried from got m where m.payload = 'first 2';
select pgque.ack(min(batch_id)) from got;
-- one tick window per batch (ADR 0057): the second window, acked, catches
-- c_active up
select count(*) as c_active_second_window, pgque.ack(min(batch_id)) as acked
  from pgque.receive('ob', 'c_active');
-- c_stuck's cursor (tick 1) is three hours old
update pgque.tick set tick_time = tick_time - interval '3 hours'
 where tick_queue = (select queue_id from pgque.queue where queue_name = 'ob') and tick_id = 1;

select queue_name, depth, consumers, last_tick_id, dlq_count,
       oldest_msg_age < '1 minute' as oldest_ticked_recently,
       events_per_sec > 0 as has_rate
  from pgque.queue_stats() where queue_name = 'ob';
-- depth is the slowest consumer's pending_events, as get_consumer_info says
select s.depth = (select max(pending_events) from pgque.get_consumer_info('ob')) as depth_is_slowest
  from pgque.queue_stats() s where s.queue_name = 'ob';
select consumer_name, pending_events, batch_active, batch_id is not null as has_batch_id,
       lag > '2 hours' as lag_over_2h
  from pgque.consumer_stats() where queue_name = 'ob' order by consumer_name;
-- lag and pending_events are get_consumer_info's (one transaction: one now())
begin;
select count(*) as rows, bool_and(s.lag = i.lag and s.pending_events = i.pending_events
                                  and s.batch_id is not distinct from i.current_batch) as same_as_consumer_info
  from pgque.consumer_stats() s
  join pgque.get_consumer_info() i using (queue_name, consumer_name)
 where queue_name = 'ob';
commit;
select consumer_name, estimated_events, batch_age < '1 minute' as batch_young,
       batch_id = (select batch_id from pgque.consumer_stats() where consumer_name = 'c_batch') as same_batch
  from pgque.in_flight('ob');

-- stuck: behind a newer tick for longer than the threshold; a consumer
-- that is caught up (c_active) is never stuck
select queue_name, consumer_name, lag > '2 hours' as lag_over_2h, last_active is not null as has_last_active
  from pgque.stuck_consumers() where queue_name = 'ob';
select consumer_name from pgque.stuck_consumers('0') where queue_name = 'ob' order by consumer_name;
select count(*) as stuck_over_4h from pgque.stuck_consumers('4 hours') where queue_name = 'ob';

-- throughput: tick 2 took 10 events, tick 3 five; tick 1 (3 hours ago)
-- took none.  Buckets aligned to bucket_size, every bucket listed.
select count(*) as buckets, sum(events) as events,
       bool_and(events_per_sec = round(events / 3600.0, 3)) as per_sec_ok
  from pgque.throughput('ob', '1 hour', '1 hour');
select count(*) as buckets, sum(events) as events
  from pgque.throughput('ob', '10 hours', '1 hour');
select bool_and(extract(epoch from bucket_start)::numeric % 600 = 0) as aligned,
       bool_and(bucket_start > now() - interval '1 hour 10 minutes') as in_period
  from pgque.throughput('ob', '1 hour', '10 minutes');

-- error_rate: the dead letter at its time; the retry while it waits (due
-- now): once maintenance redelivers it, it is gone from the count
select count(*) as buckets, sum(retries) as retries, sum(dead_letters) as dead_letters
  from pgque.error_rate('ob', '1 hour', '10 minutes');
select pgque.maint_retry_events() as redelivered;
select sum(retries) as retries, sum(dead_letters) as dead_letters
  from pgque.error_rate('ob', '1 hour', '10 minutes');
-- a dead letter older than the period is outside it
update pgque.dead_letter set dl_time = dl_time - interval '2 hours';
select sum(dead_letters) as dead_letters_last_hour, (select sum(dead_letters) from pgque.error_rate('ob', '3 hours', '1 hour')) as last_3h
  from pgque.error_rate('ob', '1 hour', '10 minutes');

-------------------------------------------------------------------------------
-- queue_health: each check in each status
select pgque.create_queue('oh');
select pgque.subscribe('oh', 'h1');
select count(pgque.send('oh', 't', 'x' || i)) from generate_series(1, 3) i;
select pgque.ticker('oh') is not null as ticked;
create function pg_temp.health(i_check text) returns text language sql as $$
    select status from pgque.queue_health() where queue_name = 'oh' and check_name = i_check
$$;
create function pg_temp.age_last_tick(i_age interval) returns void language sql as $$
    update pgque.tick set tick_time = now() - i_age
     where (tick_queue, tick_id) = (select queue_id, (select max(tick_id) from pgque.tick where tick_queue = queue_id)
                                       from pgque.queue where queue_name = 'oh')
$$;
select check_name, status from pgque.queue_health() where queue_name = 'oh';

-- ticker_running: events wait for a tick since the first one past the last
-- tick was sent (or the last tick, if later) for longer than the queue's
-- ticker_max_lag (3 s): warning; than ticker_stalled_after (60 s):
-- critical; paused: warning.  Not since the last tick: on a queue idle for
-- an hour, an event committed a moment ago is ok (issue #28 item 5).
create function pg_temp.age_new_events(i_age interval) returns void language plpgsql as $$
declare
    q pgque.queue;
begin
    select * into q from pgque.queue where queue_name = 'oh';
    execute format('update pgque.%I set ev_time = now() - $1'
                   ' where ev_id > (select max(tick_event_seq) from pgque.tick where tick_queue = $2)',
                   'event_' || q.queue_id) using i_age, q.queue_id;
end $$;
select pg_temp.age_last_tick('1 hour');
select count(pgque.send('oh', 't', 'late')) as unticked;
select pg_temp.health('ticker_running') as ticker_idle_hour_event_now;
select detail ~ '^1 event\(s\) not ticked yet, waiting @ (0|[1-4] secs?); last tick @ 1 hour( \d+ secs?)? ago$' as ticker_detail_fresh
  from pgque.queue_health() where queue_name = 'oh' and check_name = 'ticker_running';
select pg_temp.age_last_tick('10 seconds');
select pg_temp.health('ticker_running') as ticker_10s_event_now;
select pg_temp.age_new_events('10 seconds');
select pg_temp.health('ticker_running') as ticker_10s;
select pg_temp.age_last_tick('2 minutes');
select pg_temp.health('ticker_running') as ticker_2min_event_10s;
select pg_temp.age_new_events('2 minutes');
select pg_temp.health('ticker_running') as ticker_2min;
select detail ~ '^1 event\(s\) not ticked yet, waiting @ 2 mins( \d+ secs?)?; last tick .+ ago$' as ticker_detail
  from pgque.queue_health() where queue_name = 'oh' and check_name = 'ticker_running';
-- a send rolled back moves the sequence, but no committed event waits
select pgque.ticker('oh') is not null as ticked;
begin;
select count(pgque.send('oh', 't', 'rolled back')) as sent;
rollback;
select pg_temp.age_last_tick('2 minutes');
select pg_temp.health('ticker_running') as ticker_rolled_back;
select detail ~ '^1 event\(s\) not ticked yet, none committed; ' as ticker_detail_none
  from pgque.queue_health() where queue_name = 'oh' and check_name = 'ticker_running';
select count(pgque.send('oh', 't', 'late 2')) as unticked;
select pg_temp.age_new_events('2 minutes');
select pgque.set_queue_config('oh', 'ticker_paused', 'true');
select pg_temp.health('ticker_running') as ticker_paused;
select pgque.set_queue_config('oh', 'ticker_paused', 'false');
select pgque.ticker('oh') is not null as ticked;
select pg_temp.health('ticker_running') as ticker_after_tick;

-- consumer_lag: h1's oldest unconsumed event was ticked 10 minutes ago
-- (over lag_alert_after, 5 min): warning; 3 hours (over rotation_period):
-- critical
select pg_temp.health('consumer_lag:h1') as lag_fresh;
update pgque.tick set tick_time = now() - interval '10 minutes'
 where tick_queue = (select queue_id from pgque.queue where queue_name = 'oh') and tick_id = 2;
select pg_temp.health('consumer_lag:h1') as lag_10min;
update pgque.tick set tick_time = now() - interval '3 hours'
 where tick_queue = (select queue_id from pgque.queue where queue_name = 'oh') and tick_id = 2;
select pg_temp.health('consumer_lag:h1') as lag_3h;

-- rotation_health: last rotation 5 hours ago (period 2 hours): critical
-- while h1's cursor holds the oldest table, warning once it has moved on
update pgque.queue set queue_switch_time = now() - interval '5 hours' where queue_name = 'oh';
select pg_temp.health('rotation_health') as rotation_pinned;
select detail ~ 'consumer "h1" holds the oldest table' as names_h1
  from pgque.queue_health() where queue_name = 'oh' and check_name = 'rotation_health';
create temp table hgot as select * from pgque.receive('oh', 'h1');
select count(*) as h1_received from hgot;
select pgque.set_queue_config('oh', 'max_retries', '0');
select pgque.nack(m.batch_id, row(m.*)::pgque.message, '0', 'broken') as dead_lettered from hgot m where m.payload = 'x1';
select pgque.set_queue_config('oh', 'max_retries', null);
select pgque.nack(m.batch_id, row(m.*)::pgque.message, '0', 'flaky') as retried from hgot m where m.payload = 'x2';
select pgque.ack(min(batch_id)) from hgot;
-- one tick window per batch (ADR 0057): the next two windows ('late',
-- 'late 2'), acked, catch h1 up
select string_agg(payload, ',') as h1_window_3, pgque.ack(min(batch_id)) as acked from pgque.receive('oh', 'h1');
select string_agg(payload, ',') as h1_window_4, pgque.ack(min(batch_id)) as acked from pgque.receive('oh', 'h1');
select pg_temp.health('rotation_health') as rotation_overdue_not_pinned,
       pg_temp.health('consumer_lag:h1') as lag_caught_up;

-- dlq_health: a dead letter in the last hour: warning; older: ok
select pg_temp.health('dlq_health') as dlq_new;
update pgque.dead_letter set dl_time = now() - interval '2 hours'
 where dl_queue_id = (select queue_id from pgque.queue where queue_name = 'oh');
select pg_temp.health('dlq_health') as dlq_old;

-- retry_health: a retry overdue by 5 minutes: warning; by 2 hours: critical
select pg_temp.health('retry_health') as retry_due_now;
update pgque.retry_queue set ev_retry_after = now() - interval '5 minutes'
 where ev_queue = (select queue_id from pgque.queue where queue_name = 'oh');
select pg_temp.health('retry_health') as retry_5min;
update pgque.retry_queue set ev_retry_after = now() - interval '2 hours'
 where ev_queue = (select queue_id from pgque.queue where queue_name = 'oh');
select pg_temp.health('retry_health') as retry_2h;
select pgque.maint_retry_events() as redelivered;
select pg_temp.health('retry_health') as retry_after_maint;

-- statuses are one of three
select array_agg(distinct status order by status) <@ array['critical', 'ok', 'warning'] as known_statuses
  from pgque.queue_health();

-------------------------------------------------------------------------------
-- otel_metrics(): metrics() under other names, same rows and values
select pgque.subscribe_slot('oh', 'p', 0, 1);
select pgque.claim_slot('oh', 'p', 0, 'w', '1 hour') > 0 as claimed;
begin;
-- (values of this file's queue and of no queue: a queue's bytes are read
-- from its files, outside the snapshot, and the tests running beside this
-- one write to theirs between the two calls)
select (select count(*) from pgque.metrics()) = (select count(*) from pgque.otel_metrics()) as same_count,
       not exists (select labels, value::numeric from pgque.metrics()
                    where coalesce(labels->>'queue', 'oh') = 'oh'
                   except all select labels, metric_value from pgque.otel_metrics()
                    where coalesce(labels->>'queue', 'oh') = 'oh')
       and not exists (select labels, metric_value from pgque.otel_metrics()
                        where coalesce(labels->>'queue', 'oh') = 'oh'
                       except all select labels, value::numeric from pgque.metrics()
                        where coalesce(labels->>'queue', 'oh') = 'oh') as same_values;
-- the names and types (counter for *_total), each with as many rows as
-- its metric in metrics()
select metric_name, metric_type from pgque.otel_metrics() group by 1, 2 order by 1;
select (select array_agg(n order by n) from (select count(*) as n from pgque.metrics() group by metric) a)
     = (select array_agg(n order by n) from (select count(*) as n from pgque.otel_metrics() group by metric_name) b)
       as same_rows_per_metric;
commit;

-------------------------------------------------------------------------------
-- no writes: every function in a read-only transaction; no xid, no row
-- inserted, updated or deleted.  throughput() and error_rate() read no
-- event table; the consumer figures read a partition slot's share of the
-- window (_slot_pending_all, as the alerts, ADR 0051), not checked here.
-- The counters of the session's pending statistics are compared before and
-- after the calls (they are not flushed inside a transaction block).
create function pg_temp.pgque_stats(out written bigint, out event_reads bigint, out meta_reads bigint)
language sql as $$
    select coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), 0),
           coalesce(sum(coalesce(seq_scan, 0) + coalesce(idx_scan, 0)) filter (where relname ~ '^event_'), 0),
           coalesce(sum(coalesce(seq_scan, 0) + coalesce(idx_scan, 0)) filter (where relname in ('tick', 'subscription')), 0)
      from pg_stat_xact_user_tables where schemaname = 'pgque'
$$;
begin transaction read only;
show transaction_read_only;
select written as w0, event_reads as e0, meta_reads as m0 from pg_temp.pgque_stats() \gset
select count(*) >= 0 as ok from pgque.throughput('ob', '1 day', '1 minute');
select count(*) >= 0 as ok from pgque.error_rate('ob', '1 day', '1 minute');
select event_reads - :e0 as event_table_reads_by_history from pg_temp.pgque_stats();
select count(*) >= 0 as ok from pgque.queue_stats();
select count(*) >= 0 as ok from pgque.consumer_stats();
select count(*) >= 0 as ok from pgque.queue_health();
select count(*) >= 0 as ok from pgque.otel_metrics();
select count(*) >= 0 as ok from pgque.stuck_consumers();
select count(*) >= 0 as ok from pgque.in_flight('ob');
select pg_current_xact_id_if_assigned() is null as no_xid,
       written - :w0 as rows_written,
       meta_reads - :m0 > 0 as read_ticks_and_cursors
  from pg_temp.pgque_stats();
commit;

-------------------------------------------------------------------------------
-- bad input: a clear error and SQLSTATE each
select what, pgque_test.error_of(sql) as error from (values
 ('in_flight null queue',        $$select * from pgque.in_flight(null)$$),
 ('in_flight empty queue',       $$select * from pgque.in_flight('')$$),
 ('in_flight unknown queue',     $$select * from pgque.in_flight('nope')$$),
 ('in_flight huge queue name',   $$select * from pgque.in_flight(repeat('q', 1000))$$),
 ('stuck_consumers null',        $$select * from pgque.stuck_consumers(null)$$),
 ('stuck_consumers negative',    $$select * from pgque.stuck_consumers('-1 second')$$),
 ('stuck_consumers far',         $$select * from pgque.stuck_consumers('1000000 years')$$),
 ('throughput null queue',       $$select * from pgque.throughput(null, '1 hour', '1 minute')$$),
 ('throughput unknown queue',    $$select * from pgque.throughput('nope', '1 hour', '1 minute')$$),
 ('throughput null period',      $$select * from pgque.throughput('ob', null, '1 minute')$$),
 ('throughput null bucket',      $$select * from pgque.throughput('ob', '1 hour', null)$$),
 ('throughput zero period',      $$select * from pgque.throughput('ob', '0', '1 minute')$$),
 ('throughput negative bucket',  $$select * from pgque.throughput('ob', '1 hour', '-1 minute')$$),
 ('throughput zero bucket',      $$select * from pgque.throughput('ob', '1 hour', '0')$$),
 ('throughput far period',       $$select * from pgque.throughput('ob', '1000000 years', '1 day')$$),
 ('throughput bucket > period',  $$select * from pgque.throughput('ob', '1 hour', '2 hours')$$),
 ('throughput 10001 buckets',    $$select * from pgque.throughput('ob', '10001 seconds', '1 second')$$),
 ('throughput 100y by 1 second', $$select * from pgque.throughput('ob', '100 years', '1 second')$$),
 ('throughput zero-second interval', $$select * from pgque.throughput('ob', '1 hour', '1 month -30 days')$$),
 ('error_rate null queue',       $$select * from pgque.error_rate(null, '1 hour', '1 minute')$$),
 ('error_rate unknown queue',    $$select * from pgque.error_rate('nope', '1 hour', '1 minute')$$),
 ('error_rate negative period',  $$select * from pgque.error_rate('ob', '-1 hour', '1 minute')$$),
 ('error_rate far bucket',       $$select * from pgque.error_rate('ob', '1 hour', '1000000 years')$$),
 ('error_rate bucket > period',  $$select * from pgque.error_rate('ob', '1 minute', '1 hour')$$),
 ('error_rate 10001 buckets',    $$select * from pgque.error_rate('ob', '10001 minutes', '1 minute')$$)) v(what, sql)
 order by what collate "C";
-- the limits themselves are accepted: 10,000 buckets, bucket = period, zero threshold
select count(*) as rows_10000_buckets from pgque.throughput('ob', '10000 seconds', '1 second');
select count(*) as rows_one_bucket from pgque.error_rate('ob', '1 hour', '1 hour');
select count(*) >= 0 as zero_threshold_ok from pgque.stuck_consumers('0');

-- a reader may call them all
create role obs_reader login in role pgque_reader;
set role obs_reader;
select (select count(*) from pgque.queue_stats()) > 0 as stats,
       (select count(*) from pgque.consumer_stats()) > 0 as consumers,
       (select count(*) from pgque.queue_health()) > 0 as health,
       (select count(*) from pgque.otel_metrics()) > 0 as otel,
       (select count(*) from pgque.stuck_consumers()) >= 0 as stuck,
       (select count(*) from pgque.in_flight('ob')) >= 0 as in_flight,
       (select count(*) from pgque.throughput('ob', '1 hour', '1 hour')) > 0 as throughput,
       (select count(*) from pgque.error_rate('ob', '1 hour', '1 hour')) > 0 as error_rate;
reset role;
drop role obs_reader;

select pgque.drop_queue(q, true) from unnest(array['oi', 'ob', 'oh']) q;
