-- receive() of a plain consumer in C (ADR 0033): a window handed out in
-- parts across max_return, the parts kept formed as messages between calls,
-- the part's end for ack(), a bucketed queue, retries owned by one
-- subscription, a payload stored out of line.

-- part(queue, consumer, n): one receive, kept in part_rows and summed up
-- (rows, first and last payload, one batch id, ascending msg_id); then ack
create temp table part_rows (like pgque.message, rn bigserial);
create function pgque_test.part(i_queue text, i_consumer text, i_n int4, i_ack bool default true)
returns table (n bigint, first_payload text, last_payload text, one_batch bool, ordered bool)
language plpgsql as $$
declare
    b bigint;
begin
    truncate part_rows;
    insert into part_rows select * from pgque.receive(i_queue, i_consumer, i_n);
    return query
        select count(*), (array_agg(p.payload order by p.rn))[1], (array_agg(p.payload order by p.rn desc))[1],
               count(distinct p.batch_id) <= 1,
               coalesce(bool_and(p.msg_id > prev), true)
          from (select r.*, lag(r.msg_id, 1, 0::bigint) over (order by r.rn) as prev from part_rows r) p;
    select max(batch_id) into b from part_rows;
    if i_ack and b is not null then
        perform pgque.ack(b);
    end if;
end $$;

select pgque.create_queue('rp');
select pgque.subscribe('rp', 'a') as sub_a, pgque.subscribe('rp', 'b') as sub_b;
select count(pgque.send('rp', 'e' || i)) from generate_series(1, 25) i;
select pgque.ticker('rp') is not null as ticked;

-- 25 events in parts of 10: 10, 10, 5, each part one batch id, in order
select * from pgque_test.part('rp', 'a', 10);
-- the open part comes back the same until acked, under the same batch id
select * from pgque_test.part('rp', 'a', 10, false);
select (select array_agg(batch_id || ':' || msg_id order by msg_id) from pgque.receive('rp', 'a', 10))
     = (select array_agg(batch_id || ':' || msg_id order by msg_id) from part_rows) as same_part;
select sub_batch_last is not null as part_end_marked
  from pgque.subscription s join pgque.consumer c on c.co_id = s.sub_consumer where c.co_name = 'a';
select * from pgque_test.part('rp', 'a', 10);
-- the last part: no end marked, the ack finishes the window
select * from pgque_test.part('rp', 'a', 10, false);
select sub_batch_last is null as whole_window
  from pgque.subscription s join pgque.consumer c on c.co_id = s.sub_consumer where c.co_name = 'a';
select pgque.ack((select max(batch_id) from part_rows)) as acked;
select count(*) as a_drained from pgque.receive('rp', 'a', 10);

-- consumer b reads the same window in parts of another size, in between
-- a's calls the part cache switches owner; a larger max_return on an open
-- part returns the rest of the window, and clears the end mark
select * from pgque_test.part('rp', 'b', 7);
select * from pgque_test.part('rp', 'b', 7, false);
select * from pgque_test.part('rp', 'b', 100, false);
select sub_batch_last is null as end_cleared
  from pgque.subscription s join pgque.consumer c on c.co_id = s.sub_consumer where c.co_name = 'b';
select pgque.ack((select max(batch_id) from part_rows)) as acked;
select count(*) as b_drained from pgque.receive('rp', 'b', 10);

-- a window of exactly max_return: one part, nothing marked
select count(pgque.send('rp', 'x' || i)) from generate_series(1, 5) i;
select pgque.ticker('rp') is not null as ticked;
select * from pgque_test.part('rp', 'a', 5, false);
select sub_batch_last is null as exact_part
  from pgque.subscription s join pgque.consumer c on c.co_id = s.sub_consumer where c.co_name = 'a';
select pgque.ack((select max(batch_id) from part_rows)) as acked;
-- max_return at or past the read-ahead: no rows kept, same result
select * from pgque_test.part('rp', 'b', 50000);

-- an ack rolled back: the same part again, then the rest
select count(pgque.send('rp', 'y' || i)) from generate_series(1, 12) i;
select pgque.ticker('rp') is not null as ticked;
select * from pgque_test.part('rp', 'a', 4);
begin;
select * from pgque_test.part('rp', 'a', 4);
rollback;
select * from pgque_test.part('rp', 'a', 4);
select * from pgque_test.part('rp', 'a', 4);
select count(*) as a_done from pgque.receive('rp', 'a', 4);

-- retries belong to the subscription that nacked: a sees its retry, b does not
select count(*) from pgque_test.drain('rp', 'b');
select count(pgque.send('rp', 'z' || i)) from generate_series(1, 6) i;
select pgque.ticker('rp') is not null as ticked;
select pgque.nack(m.batch_id, m, '0 seconds') as nacked
  from pgque.receive('rp', 'a', 3) m where m.payload = 'z2';
select * from pgque_test.part('rp', 'a', 3);
select * from pgque_test.part('rp', 'a', 3);
select * from pgque_test.part('rp', 'b', 4);
select * from pgque_test.part('rp', 'b', 4);
select pgque.maint_retry_events() as moved;
select pgque.ticker('rp') is not null as ticked;
select payload, retry_count from pgque.receive('rp', 'a', 1);
select pgque.ack(batch_id) from (select distinct batch_id from pgque.receive('rp', 'a', 1)) x;
select count(*) as b_sees_no_retry from pgque_test.drain('rp', 'b');

-- a bucketed queue: a plain consumer reads every bucket, in ev_id order, in parts
select pgque.create_queue('rpb');
select pgque.set_queue_config('rpb', 'partition_buckets', '8');
select pgque.subscribe('rpb', 'p');
select count(pgque.send('rpb', 'default', 'k' || i, 'tenant-' || (i % 13))) from generate_series(1, 40) i;
select pgque.ticker('rpb') is not null as ticked;
select * from pgque_test.part('rpb', 'p', 15);
select * from pgque_test.part('rpb', 'p', 15);
select * from pgque_test.part('rpb', 'p', 15);
select count(*) as rpb_drained from pgque.receive('rpb', 'p', 15);

-- a payload stored out of line (10 kB that does not compress), in the first
-- part and in a kept one
create temp table big as
    select i, (select string_agg(md5(i::text || '-' || j::text), '') from generate_series(1, 320) j) as payload
      from generate_series(1, 3) i;
select count(pgque.send('rp', payload)) from big;
select pgque.ticker('rp') is not null as ticked;
create temp table big_got (payload text);
insert into big_got select payload from pgque.receive('rp', 'a', 1);
select pgque.ack((select max(batch_id) from pgque.receive('rp', 'a', 1)));
insert into big_got select payload from pgque.receive('rp', 'a', 1);
select pgque.ack((select max(batch_id) from pgque.receive('rp', 'a', 1)));
insert into big_got select payload from pgque.receive('rp', 'a', 1);
select count(*) as big_events, bool_and(length(payload) = 10240) as full_length,
       (select array_agg(md5(payload) order by md5(payload)) from big_got)
     = (select array_agg(md5(payload) order by md5(payload)) from big) as same_payloads
  from big_got;

-- a window larger than the rows receive keeps (50,000): the first 50,000
-- kept, the parts from them, the last part read again from its start
select pgque.create_queue('rpl');
select pgque.subscribe('rpl', 'l');
select cardinality(pgque.send_batch('rpl', array(select 'l' || i from generate_series(1, 50010) i))) as sent;
select pgque.ticker('rpl') is not null as ticked;
select * from pgque_test.part('rpl', 'l', 20000);
select * from pgque_test.part('rpl', 'l', 20000);
select * from pgque_test.part('rpl', 'l', 20000);
select count(*) as rpl_drained from pgque.receive('rpl', 'l', 20000);

-- a window larger than the bytes receive keeps (16 MB): 10,000 events of
-- 1,900 bytes stored inline, over 8 buckets, so the rows come interleaved and
-- the kept ones are chosen (the smallest ids), not the first read; every
-- event once, in ev_id order across the parts, whatever the part size
select pgque.create_queue('rpw');
select pgque.set_queue_config('rpw', 'partition_buckets', '8');
select pgque.subscribe('rpw', c) from unnest(array['w1', 'w2']) c;
create temp table wide_sent as
    select i, pgque.send('rpw', 'default',
                         left((select string_agg(md5(i::text || '/' || j::text), '') from generate_series(1, 60) j), 1900),
                         'tenant-' || (i % 97)) as msg_id
      from generate_series(1, 10000) i;
select pgque.ticker('rpw') is not null as ticked;
create temp table wide_got (consumer text, rn bigserial, msg_id bigint, len int);
create function pgque_test.drain_wide(i_consumer text, i_n int4) returns bigint language plpgsql as $$
declare
    b bigint;
    parts bigint := 0;
begin
    loop
        insert into wide_got (consumer, msg_id, len)
            select i_consumer, msg_id, length(payload) from pgque.receive('rpw', i_consumer, i_n);
        select max(batch_id) into b from pgque.receive('rpw', i_consumer, i_n);
        exit when b is null;
        perform pgque.ack(b);
        parts := parts + 1;
    end loop;
    return parts;
end $$;
select pgque_test.drain_wide('w1', 1000) as w1_parts, pgque_test.drain_wide('w2', 4999) as w2_parts;
select g.consumer, count(*) as events, count(distinct g.msg_id) as distinct_events,
       bool_and(g.len = 1900) as full_length,
       bool_and(g.msg_id > coalesce(g.prev, 0)) as ascending,
       (select array_agg(msg_id order by msg_id) from wide_sent)
     = array_agg(g.msg_id order by g.rn) as every_event_in_order
  from (select w.*, lag(w.msg_id) over (partition by w.consumer order by w.rn) as prev from wide_got w) g
 group by g.consumer order by g.consumer;
drop function pgque_test.drain_wide(text, int4);

-- the checks of receive() keep their errors
select pgque_test.error_of($$select * from pgque.receive('rp', 'a', 0)$$) as zero_max;
select pgque_test.error_of($$select * from pgque.receive('rp', null, 1)$$) as null_consumer;
select pgque_test.error_of($$select * from pgque.receive('nope', 'a', 1)$$) as unknown_queue;
select pgque_test.error_of($$select * from pgque.receive('rp', 'nobody', 1)$$) as unknown_consumer;

select pgque.unsubscribe('rp', 'a'), pgque.unsubscribe('rp', 'b'), pgque.unsubscribe('rpb', 'p');
select pgque.unsubscribe('rpl', 'l'), pgque.unsubscribe('rpw', 'w1'), pgque.unsubscribe('rpw', 'w2');
select pgque.drop_queue('rp'), pgque.drop_queue('rpb'), pgque.drop_queue('rpl'), pgque.drop_queue('rpw');
drop function pgque_test.part(text, text, int4, bool);
