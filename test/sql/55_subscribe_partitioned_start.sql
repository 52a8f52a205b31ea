-- A partitioned consumer made with a start (ADR 0067, 0070):
-- subscribe_partitioned(queue, consumer, n, start) subscribes every slot and
-- puts each slot it subscribed at one tick, chosen as seek() chooses it
-- ('earliest', 'latest', a time; a time before the retained span clamped);
-- slots that existed keep their cursors; the errors are subscribe_slot's
-- and seek's.

select pgque.create_queue('spq');
select pgque.send('spq', 'ev', 'e' || i, 'k' || (i % 4)) is not null from generate_series(1, 4) i;
select pgque.ticker('spq') is not null as ticked;
create temp table marks as select clock_timestamp() as t1;
select pg_sleep(0.01);
select pgque.send('spq', 'ev', 'e' || i, 'k' || (i % 4)) is not null from generate_series(5, 8) i;
select pgque.ticker('spq') is not null as ticked;

-- a helper: drain every slot of consumer c (n slots), acking each batch
create function pg_temp.drain(c text, n int4)
returns table (slot int4, msg_id bigint, payload text, key text) language plpgsql as $$
declare
    got int4;
begin
    for k in 0 .. n - 1 loop
        perform pgque.claim_slot('spq', c, k, 'w' || k);
        for i in 1 .. 10 loop
            return query select k, r.msg_id, r.payload, r.extra1
                           from pgque.receive_partitioned('spq', c, k, n, 'w' || k) r;
            get diagnostics got = row_count;
            exit when got = 0;
            perform pgque.ack_partitioned('spq', c, k, n, 'w' || k);
        end loop;
    end loop;
end $$;

-- 'earliest': all eight events, each on its key's slot, once, in id order per slot
select pgque.subscribe_partitioned('spq', 'pe', 2, start => 'earliest') as subscribed;
select count(distinct s.sub_last_tick) as one_cursor, count(*) as slots
  from pgque.subscription s join pgque.consumer c on c.co_id = s.sub_consumer
 where c.co_name like 'pe#%';
create temp table got as select * from pg_temp.drain('pe', 2);
select string_agg(msg_id || ':' || payload, ' ' order by msg_id) as from_earliest,
       count(*) = count(distinct msg_id) as once_each,
       bool_and(pgque._slot_of(key, 2) = slot) as each_on_its_slot
  from got;

-- a time: the events first ticked at or after it (e5..e8)
select pgque.subscribe_partitioned('spq', 'pt', 2, start => (select t1 from marks)) as subscribed;
select string_agg(msg_id || ':' || payload, ' ' order by msg_id) as from_t1
  from pg_temp.drain('pt', 2);
-- the same as text
select pgque.subscribe_partitioned('spq', 'ptx', 3, start => (select t1 from marks)::text) as subscribed;
select string_agg(msg_id || ':' || payload, ' ' order by msg_id) as from_t1_text
  from pg_temp.drain('ptx', 3);

-- 'latest' (the default): nothing of what is there
select pgque.subscribe_partitioned('spq', 'pl', 2) as subscribed;
select count(*) as from_latest from pg_temp.drain('pl', 2);

-- before the retained span: clamped to it, and a NOTICE says so
set client_min_messages = notice;
select pgque.subscribe_partitioned('spq', 'pb', 2, start => '2000-01-01'::timestamptz) as subscribed;
reset client_min_messages;
select count(*) as from_clamped from pg_temp.drain('pb', 2);

-- again: 0, every cursor stays (a NOTICE says so)
set client_min_messages = notice;
select pgque.subscribe_partitioned('spq', 'pe', 2, start => 'earliest') as again;
reset client_min_messages;
select count(*) as nothing_replayed from pg_temp.drain('pe', 2);

-- a consumer with some slots: the new ones start at the tick, the others stay
-- (slot 0 subscribed at the latest tick, so nothing is pending for it)
select pgque.subscribe_slot('spq', 'pp', 0, 2);
select pgque.subscribe_partitioned('spq', 'pp', 2, start => 'earliest') as subscribed_one;
select s.k as slot, count(d.msg_id) as events, coalesce(bool_and(pgque._slot_of(d.key, 2) = s.k), true) as its_keys
  from generate_series(0, 1) s(k)
  left join (select * from pg_temp.drain('pp', 2)) d on d.slot = s.k
 group by s.k order by s.k;

-- refused, with subscribe_slot's and seek's errors, and nothing left behind
select pgque_test.error_of($$select pgque.subscribe_partitioned('spq', 'px', 2, start => 'sideways')$$) as bad_start;
select pgque_test.error_of($$select pgque.subscribe_partitioned('spq', 'px', 2, start => null::text)$$) as null_start;
select pgque_test.error_of($$select pgque.subscribe_partitioned('spq', 'px', 2, start => null::timestamptz)$$) as null_start_time;
select pgque_test.error_of($$select pgque.subscribe_partitioned('spq', 'px', 0, start => 'earliest')$$) as zero_n;
select pgque_test.error_of($$select pgque.subscribe_partitioned('spq', 'px', 1025)$$) as huge_n;
select pgque_test.error_of($$select pgque.subscribe_partitioned('spq', 'px', -2147483648)$$) as min_n;
select pgque_test.error_of($$select pgque.subscribe_partitioned('spq', 'px', null)$$) as null_n;
select pgque_test.error_of($$select pgque.subscribe_partitioned('spq', 'pe', 3, start => 'earliest')$$) as other_n;
select pgque_test.error_of($$select pgque.subscribe_partitioned('nosuch', 'px', 2, start => 'earliest')$$) as no_queue;
select pgque.register_subconsumer('spq', 'grp', 'm1');
select pgque_test.error_of($$select pgque.subscribe_partitioned('spq', 'grp', 2, start => 'earliest')$$) as cooperative;
begin isolation level repeatable read;
select pgque_test.error_of($$select pgque.subscribe_partitioned('spq', 'px', 2, start => 'earliest')$$) as repeatable_read;
rollback;
select count(*) as px_left from pgque.consumer where co_name like 'px#%';
select count(*) as px_row from pgque.partition_consumer where co_name = 'px';
select pgque.drop_queue('spq', true);
