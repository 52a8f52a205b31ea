-- Online resize of a partitioned consumer (ADR 0030): N changes at a tick
-- boundary B; the old slots deliver only events up to B, the new slots are
-- not served before the old layout has drained, then serve the events after
-- B with the new slot function.  Workers are off; the ticks are explicit.
select pgque.create_queue('rz');
select pgque.subscribe_slot('rz', 'rc', k, 4) from generate_series(0, 3) k;

-- bad input
select pgque_test.error_of($$select pgque.resize_partitioned(null, 'rc', 8)$$) as null_queue;
select pgque_test.error_of($$select pgque.resize_partitioned('rz', null, 8)$$) as null_consumer;
select pgque_test.error_of($$select pgque.resize_partitioned('rz', 'rc', null)$$) as null_n;
select pgque_test.error_of($$select pgque.resize_partitioned('nope', 'rc', 8)$$) as unknown_queue;
select pgque_test.error_of($$select pgque.resize_partitioned('rz', 'nobody', 8)$$) as unknown_consumer;
select pgque_test.error_of($$select pgque.resize_partitioned('rz', 'rc#0/4', 8)$$) as slot_name;
select pgque_test.error_of($$select pgque.resize_partitioned('rz', 'rc', 0)$$) as n_zero;
select pgque_test.error_of($$select pgque.resize_partitioned('rz', 'rc', 1025)$$) as n_too_big;
select pgque_test.error_of($$select pgque.resize_partitioned('rz', 'rc', 4)$$) as same_n;

-- what every slot delivered, in order
create temp table rz_got (seq serial, n int4, slot int4, key text, payload text, msg_id bigint, retry int4);

-- drain(n): every slot k of n, as worker wk, until it returns nothing
create function pg_temp.drain(i_n int4) returns int4 language plpgsql as $$
declare
    k int4;
    m pgque.message;
    b bigint;
    got int4 := 0;
begin
    for k in 0 .. i_n - 1 loop
        perform pgque.claim_slot('rz', 'rc', k, 'w' || k);
        loop
            b := null;
            for m in select * from pgque.receive_partitioned('rz', 'rc', k, i_n, 'w' || k, 7) loop
                insert into rz_got (n, slot, key, payload, msg_id, retry)
                values (i_n, k, m.extra1, m.payload, m.msg_id, m.retry_count);
                b := m.batch_id;
                got := got + 1;
            end loop;
            exit when b is null;
            perform pgque.ack_partitioned('rz', 'rc', k, i_n, 'w' || k);
        end loop;
    end loop;
    return got;
end $$;

-- 4 -> 8: 40 keys before the resize, 40 after
select count(pgque.send('rz', 'e', 'before-1', 'key-' || i)) from generate_series(1, 40) i;
select pgque.ticker('rz') is not null as ticked;
-- one old slot takes its first batch before the resize: its window ends before B
select pgque.claim_slot('rz', 'rc', 0, 'w0') is not null as claimed;
select count(*) as slot0_started from pgque.receive_partitioned('rz', 'rc', 0, 4, 'w0', 3);
select count(pgque.send('rz', 'e', 'before-2', 'key-' || i)) from generate_series(1, 40) i;
select pgque.resize_partitioned('rz', 'rc', 8) as boundary \gset
select :boundary = (select max(tick_id) from pgque.tick t join pgque.queue q on q.queue_id = t.tick_queue
                     where q.queue_name = 'rz') as boundary_is_the_newest_tick;
select count(pgque.send('rz', 'e', 'after-8', 'key-' || i)) from generate_series(1, 40) i;
select pgque.ticker('rz') is not null as ticked;

select queue_name, consumer, old_n, new_n, draining_slots from pgque.partition_resize_status;
select pgque_test.error_of($$select pgque.resize_partitioned('rz', 'rc', 3)$$) as already_resizing;
select pgque_test.error_of($$select pgque.subscribe_slot('rz', 'rc', 0, 4)$$) as subscribe_while_resizing;
-- the new layout is not served yet: a clear, retryable error
select pgque_test.error_of($$select * from pgque.receive_partitioned('rz', 'rc', 5, 8, 'w5', 10)$$) as new_layout_early;
-- the view still shows the old layout, which claim_slot addresses
select count(*) as rows, min(n) as n from pgque.partition_slot_status where consumer = 'rc';

-- the old slots deliver the events before B only, each on slot_of(key, 4)
select pg_temp.drain(4) as old_delivered;
select n, count(*) as events, count(distinct payload) as payloads, string_agg(distinct payload, ',') as which,
       count(*) filter (where slot <> pgque._slot_of(key, 4)) as wrong_slot
  from rz_got group by n;
-- drained: no draining slot is left, the switch waits for the next claim (or the watchdog)
select old_n, new_n, draining_slots from pgque.partition_resize_status;
select pgque_test.error_of($$select * from pgque.receive_partitioned('rz', 'rc', 0, 8, 'w0', 10)$$) as still_gated;
-- the first claim switches to the new layout (fresh, larger epochs)
select pgque.claim_slot('rz', 'rc', 7, 'w7') > (select max(epoch) from pgque.partition_slot_status) - 1 as claimed_new_slot;
select count(*) as resizing from pgque.partition_resize_status;
select co_name, n from pgque.partition_consumer where co_name = 'rc';
select string_agg(co_name, ' ' order by co_name) as slot_consumers from pgque.consumer where co_name like 'rc#%';
-- a worker still on the old n is told that n changed
select pgque_test.error_of($$select * from pgque.receive_partitioned('rz', 'rc', 0, 4, 'w0', 10)$$) as old_n_after;

-- the new slots deliver the events after B only, each on slot_of(key, 8)
select pg_temp.drain(8) as new_delivered;
select n, count(*) as events, string_agg(distinct payload, ',') as which,
       count(*) filter (where slot <> pgque._slot_of(key, n)) as wrong_slot
  from rz_got group by n order by n;
-- per key: every old-layout event before every new-layout one, in ev_id order
select count(*) as out_of_order
  from (select msg_id < lag(msg_id) over (partition by key order by seq) as back from rz_got) x where back;
select count(*) as duplicates from (select msg_id from rz_got group by msg_id having count(*) > 1) d;

-- 8 -> 3, with a retry scheduled by an old slot during the drain
truncate rz_got;
select count(pgque.send('rz', 'e', 'before-3', 'key-' || i)) from generate_series(1, 40) i;
select pgque.ticker('rz') is not null as ticked;
select pgque.resize_partitioned('rz', 'rc', 3) is not null as resized;
select count(pgque.send('rz', 'e', 'after-3', 'key-' || i)) from generate_series(1, 40) i;
select pgque.ticker('rz') is not null as ticked;
select old_n, new_n, draining_slots from pgque.partition_resize_status;
-- the old slot of key-1 nacks it: its retry lands after B, on its new slot
select pgque._slot_of('key-1', 8) as old_slot_of_key1, pgque._slot_of('key-1', 3) as new_slot_of_key1;
do $$
declare
    k int4 := pgque._slot_of('key-1', 8);
    m pgque.message;
begin
    perform pgque.claim_slot('rz', 'rc', k, 'w' || k);
    for m in select * from pgque.receive_partitioned('rz', 'rc', k, 8, 'w' || k, 100) where extra1 = 'key-1' loop
        perform pgque.nack_partitioned('rz', 'rc', k, 8, 'w' || k, m, '0 seconds', 'test');
    end loop;
end $$;
select pgque.maint_retry_events() as retries_moved;
select pgque.ticker('rz') is not null as ticked;
select pg_temp.drain(8) as old_delivered;
select n, count(*) as events, string_agg(distinct payload, ',') as which,
       count(*) filter (where slot <> pgque._slot_of(key, n)) as wrong_slot
  from rz_got group by n order by n;
-- shrinking: slot 5 of the old layout is gone after the switch
select pgque.claim_slot('rz', 'rc', 0, 'w0') is not null as switched;
select pgque_test.error_of($$select pgque.claim_slot('rz', 'rc', 5, 'w5')$$) as gone_slot;
select pg_temp.drain(3) as new_delivered;
select n, count(*) as events, string_agg(distinct payload, ',' order by payload) as which,
       count(*) filter (where slot <> pgque._slot_of(key, n)) as wrong_slot
  from rz_got group by n order by n;
-- the retried event came back once, on key-1's new slot, counted as a retry
select n, slot, payload, retry from rz_got where retry > 0;
select count(*) as out_of_order_before_retry
  from (select msg_id < lag(msg_id) over (partition by key order by seq) as back from rz_got where retry = 0) x
 where back;
select count(*) as resizing from pgque.partition_resize_status;

-- the resize_stalled alert: a resize older than the threshold, cleared by completion
-- (a SIGHUP setting: this throwaway server's configuration)
alter system set pgque_bgw.resize_stalled_after = '1s';
select pg_reload_conf();
select pgque.resize_partitioned('rz', 'rc', 2) is not null as resized;
select count(pgque.send('rz', 'e', 'x', 'key-' || i)) from generate_series(1, 5) i;
select pg_sleep(1.2);
show pgque_bgw.resize_stalled_after;
-- (its WARNING carries the start time)
-- (other tests' alerts may open or clear in the same pass: only ours is shown)
set client_min_messages = error;
select count(*) as passes from pgque._watchdog_pass('1 hour', '1 hour', '1 hour', '1 hour', '1 hour');
reset client_min_messages;
select kind, queue_name, consumer, details->'old_n' as old_n, details->'new_n' as new_n, details->'draining_slots' as draining
  from pgque.alerts where kind = 'resize_stalled';
select pg_temp.drain(3) >= 0 as drained;
-- the watchdog's pass switches the drained layout and clears the alert
set client_min_messages = error;
select count(*) as passes from pgque._watchdog_pass('1 hour', '1 hour', '1 hour', '1 hour', '1 hour');
reset client_min_messages;
select count(*) as open_resize_stalled from pgque.alerts where kind = 'resize_stalled';
select count(*) as cleared_resize_stalled from pgque.alert where kind = 'resize_stalled' and cleared_at is not null;
select co_name, n from pgque.partition_consumer where co_name = 'rc';
alter system reset pgque_bgw.resize_stalled_after;
select pg_reload_conf();
select pgque.drop_queue('rz', true);
