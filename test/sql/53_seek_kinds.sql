-- Replay by time for a cooperative group and a partitioned consumer (ADR
-- 0067): every member / every slot moves to the same tick in one
-- transaction, open batches are closed (an ack of one finishes nothing),
-- and the events come again in their original order with their ids.

select pgque.create_queue('sq');
select pgque.send('sq', 'ev', 'e' || i, 'k' || (i % 4)) is not null from generate_series(1, 4) i;
select pgque.ticker('sq') is not null as ticked;
create temp table marks as select clock_timestamp() as t1;
select pg_sleep(0.01);
select pgque.send('sq', 'ev', 'e' || i, 'k' || (i % 4)) is not null from generate_series(5, 8) i;
select pgque.ticker('sq') is not null as ticked;

-- a cooperative group with two members, subscribed at the latest tick
select pgque.register_subconsumer('sq', 'grp', 'm1');
select pgque.register_subconsumer('sq', 'grp', 'm2');
select pgque.seek('sq', 'grp', 'earliest') is not null as moved;
-- m1 opens a batch (the first window) and does not ack it
create temp table m1_batch as select distinct batch_id from pgque.receive_coop('sq', 'grp', 'm1', 100);
select count(*) as m1_open from m1_batch;
-- seek to t1: m1's window goes with the others
select clamped from pgque.seek('sq', 'grp', (select t1 from marks));
select pgque.ack(batch_id) as m1_old_ack_finishes_nothing from m1_batch;
-- the members drain from t1: exactly e5..e8, each once, by id
create temp table coop_got (member text, msg_id bigint, payload text);
do $$
declare
    b bigint;
    m text;
    n int4 := 0;
begin
    loop
        n := n + 1;
        exit when n > 20;
        m := case when n % 2 = 0 then 'm1' else 'm2' end;
        b := null;
        insert into coop_got select m, r.msg_id, r.payload from pgque.receive_coop('sq', 'grp', m, 100) r;
        select distinct r.batch_id into b from pgque.receive_coop('sq', 'grp', m, 100) r;
        if b is not null then
            perform pgque.ack(b);
        end if;
    end loop;
end $$;
select string_agg(msg_id || ':' || payload, ' ' order by msg_id) as coop_from_t1,
       count(*) = count(distinct msg_id) as once_each
  from coop_got;
-- earliest: all eight again
select clamped from pgque.seek('sq', 'grp', 'earliest');
truncate coop_got;
do $$
declare
    b bigint;
begin
    for i in 1 .. 20 loop
        insert into coop_got select 'm1', r.msg_id, r.payload from pgque.receive_coop('sq', 'grp', 'm1', 100) r;
        select distinct r.batch_id into b from pgque.receive_coop('sq', 'grp', 'm1', 100) r;
        exit when b is null;
        perform pgque.ack(b);
    end loop;
end $$;
select string_agg(msg_id::text, ' ' order by msg_id) as coop_from_earliest from coop_got;

-- a partitioned consumer over 2 slots, both claimed
select pgque.subscribe_slot('sq', 'pc', k, 2) from generate_series(0, 1) k;
select pgque.claim_slot('sq', 'pc', k, 'w' || k) > 0 as claimed from generate_series(0, 1) k;
create temp table epochs as select slot, lease_owner, epoch from pgque.partition_slot_status where consumer = 'pc';
select pgque.seek('sq', 'pc', 'earliest') is not null as moved;
-- slot 0 opens a batch and does not ack it
create temp table slot0_open as select * from pgque.receive_partitioned('sq', 'pc', 0, 2, 'w0');
select count(*) > 0 as slot0_has_events from slot0_open;
select clamped from pgque.seek('sq', 'pc', (select t1 from marks));
-- its ack after the seek finishes nothing: the batch went with the seek
select pgque.ack_partitioned('sq', 'pc', 0, 2, 'w0') as slot0_old_ack;
-- each slot drains from t1: its own keys' events of e5..e8, in order
create temp table pc_got (slot int4, msg_id bigint, payload text, key text);
do $$
declare
    n int4;
begin
    for k in 0 .. 1 loop
        for i in 1 .. 10 loop
            insert into pc_got select k, r.msg_id, r.payload, r.extra1
              from pgque.receive_partitioned('sq', 'pc', k, 2, 'w' || k) r;
            get diagnostics n = row_count;
            exit when n = 0;
            perform pgque.ack_partitioned('sq', 'pc', k, 2, 'w' || k);
        end loop;
    end loop;
end $$;
select string_agg(msg_id || ':' || payload, ' ' order by msg_id) as slots_from_t1,
       count(*) = count(distinct msg_id) as once_each,
       bool_and(pgque._slot_of(key, 2) = slot) as each_on_its_slot
  from pc_got;
-- the slots' cursors are one tick
select count(distinct s.sub_last_tick) as one_cursor
  from pgque.subscription s join pgque.consumer c on c.co_id = s.sub_consumer
 where c.co_name like 'pc#%';
-- leases untouched: same owners and epochs
select count(*) as leases_kept
  from pgque.partition_slot_status p join epochs e using (slot, lease_owner, epoch)
 where p.consumer = 'pc';

-- latest: nothing more for any slot
select pgque.seek('sq', 'pc', 'latest') is not null as moved;
select count(*) as after_latest from pgque.receive_partitioned('sq', 'pc', 0, 2, 'w0');

-- refused: a resize in progress, blocked keys (failure policy pause), bad
-- input.  (A member or slot owner holding its row in an open transaction:
-- isolation spec slot_seek_busy.)
select pgque.resize_partitioned('sq', 'pc', 3);
select pgque_test.error_of($$select pgque.seek('sq', 'pc', 'earliest')$$) as resizing;
select pgque_test.error_of($$select pgque.seek('sq', 'pc', 'sideways')$$) as bad_target;
select pgque.drop_queue('sq', true);
