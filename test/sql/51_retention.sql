-- Retention (ADR 0067): events stay in the event tables for at least the
-- queue's retention after their tick, even when every cursor has passed
-- them; rotation truncates a table only once all its events are older than
-- that and behind every cursor.  A short retention (1 second) and
-- rotation_period 1 ms, rounds of send / drain / maint.

-- a round, n times: send one event, drain it (tick, receive, ack), then
-- maint() twice (step 2 of the last switch, then step 1), each in its own
-- transaction
create procedure pgque_test.ret_rounds(i_queue text, i_consumer text, i_n int4)
language plpgsql as $$
begin
    for i in 1 .. i_n loop
        perform pgque.send(i_queue, 'round');
        commit;
        perform count(*) from pgque_test.drain(i_queue, i_consumer);
        commit;
        perform pg_sleep(0.005);
        perform pgque.maint();
        commit;
        perform pgque.maint();
        commit;
    end loop;
end $$;

-- the option, in create_queue and set_queue_config
select pgque.create_queue('ret', '{"retention": "1 second", "rotation_period": "1 millisecond"}');
select queue_retention from pgque.queue where queue_name = 'ret';
select pgque.set_queue_config('ret', 'queue_retention', '2 seconds');
select queue_retention from pgque.queue where queue_name = 'ret';
select pgque.set_queue_config('ret', 'retention', null);
select queue_retention is null as null_removes_it from pgque.queue where queue_name = 'ret';
select pgque.set_queue_config('ret', 'retention', '1 second');
-- bad values change nothing
select pgque_test.error_of($$select pgque.set_queue_config('ret', 'retention', '-1 day')$$) as negative;
select pgque_test.error_of($$select pgque.set_queue_config('ret', 'retention', '0')$$) as zero;
select pgque_test.error_of($$select pgque.set_queue_config('ret', 'retention', 'a week')$$) as not_an_interval;
select pgque_test.error_of($$select pgque.set_queue_config('ret', 'retention', '101 years')$$) as too_long;
select pgque_test.error_of($$select pgque.create_queue('ret_bad', '{"retention": "forever"}')$$) as create_bad;
select count(*) as ret_bad_not_created from pgque.queue where queue_name = 'ret_bad';
select queue_retention from pgque.queue where queue_name = 'ret';

-- every cursor passes every event at once, and rotation still keeps them:
-- six rounds within the retention (a minute: however slow the machine)
-- leave all six events stored
select pgque.set_queue_config('ret', 'retention', '1 minute');
select pgque.subscribe('ret', 'c');
call pgque_test.ret_rounds('ret', 'c', 6);
select string_agg(ev_id::text, ' ' order by ev_id) as stored from pgque_test.events('ret');
select pending_events from pgque.get_consumer_info('ret', 'c');
-- and a replay reads them again, in order, with their ids
select tick_id = (select min(tick_id) from pgque.tick t join pgque.queue q on q.queue_id = t.tick_queue
                   where q.queue_name = 'ret') as at_first_tick, clamped
  from pgque.seek('ret', 'c', 'earliest');
select string_agg(msg_id::text, ' ' order by batch_no, msg_id) as replayed from pgque_test.drain('ret', 'c');

-- once the retention has passed, rotation goes on: the oldest table goes
-- (its events ticked more than a second ago), the newer ones stay until
-- they are older than the retention too
select pgque.set_queue_config('ret', 'retention', '1 second');
select pg_sleep(1.1);
call pgque_test.ret_rounds('ret', 'c', 4);
select count(*) filter (where ev_id <= 6) < 6 as some_old_truncated,
       max(ev_id) as newest_stored
  from pgque_test.events('ret');
select pg_sleep(1.1);
call pgque_test.ret_rounds('ret', 'c', 4);
select count(*) filter (where ev_id <= 6) as old_stored,
       max(ev_id) as newest_stored
  from pgque_test.events('ret');
-- a replay from the start now begins after what was truncated, and says
-- nothing lost: everything after its tick is stored
select clamped from pgque.seek('ret', 'c', 'earliest');
select min(msg_id) > 6 as starts_after_truncated, count(*) = count(distinct msg_id) as once_each
  from pgque_test.drain('ret', 'c');
-- a position before the span goes to its start, and says so (the NOTICE,
-- whose tick id depends on the rounds' timing here: regress 42)
set client_min_messages = warning;
select clamped from pgque.seek('ret', 'c', now() - interval '1 day');
reset client_min_messages;

-- the ticks of a queue with retention stay for replay; tick cleanup
-- leaves them (rotation deletes those whose events went)
select pgque.maint_tick_cleanup() >= 0 as cleaned;
select (select count(*) from pgque.tick t where t.tick_queue = q.queue_id) > 1 as ticks_kept
  from pgque.queue q where q.queue_name = 'ret';

-- status() and metrics() show the retained span and its bytes
select component, status, detail ~ '^queue "ret": retention .*, oldest retained event ticked at .*, [0-9]+ kB in event tables$' as detail_ok
  from pgque.status() where component = 'retention';
select metric, labels, value > 0 as positive
  from pgque.metrics()
 where metric in ('pgque_queue_bytes', 'pgque_retained_oldest_timestamp_seconds', 'pgque_retention_seconds')
   and labels->>'queue' = 'ret'
 order by metric;
select value from pgque.metrics() where metric = 'pgque_alerts_open' and labels->>'kind' = 'retention_size';

-- the retention_size alert: a queue with retention over the limit
select subject, details->>'limit_bytes' as limit_bytes, (details->>'bytes')::int8 > 1 as over
  from pgque._retention_conditions(1);
select count(*) as none_under_a_huge_limit from pgque._retention_conditions(pg_catalog.pg_size_bytes('1TB'));
select count(*) as none_when_off from pgque._retention_conditions(0);
select count(*) as none_when_null from pgque._retention_conditions(null);
show pgque_bgw.retention_size_limit;
select pgque._retention_size_limit() as limit_bytes;

-- without retention, rotation is PgQ's again
select pgque.set_queue_config('ret', 'retention', null);
call pgque_test.ret_rounds('ret', 'c', 4);
select count(*) filter (where ev_id <= 10) as older_stored from pgque_test.events('ret');
select count(*) as retention_rows from pgque.status() where component = 'retention';
select pgque.drop_queue('ret', true);
drop procedure pgque_test.ret_rounds(text, text, int4);
