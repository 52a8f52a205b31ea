-- A plain consumer's window of a bucketed queue comes back as one ascending
-- run per bucket; the part cache puts the rows in ev_id order by placing
-- each at its id's offset in an array of the window's id range, closed up
-- in place (ADR 0086, ADR 0093), or merges the runs when the ids spread too
-- wide.  Every shape of id range against an unbucketed twin fed the same
-- sends: holes left by rolled-back sends (placed), a hole wider than four
-- times the window's rows (merged), a window larger than the cache's first
-- arrays (1,024 rows), windows of one and of two rows, in parts of several
-- sizes; the smallest and greatest ids are read from the runs' ends, so a
-- window whose smallest id is in its last bucket and whose greatest is in
-- its first is one of them; last, ids a writer chose (insert_event_raw):
-- a repeated one and the greatest int8.
select pgque.create_queue('bp'), pgque.set_queue_config('bp', 'partition_buckets', '32');
select pgque.create_queue('pp');
select pgque.subscribe('bp', 'c'), pgque.subscribe('pp', 'c');
create temp table got (seq serial, q text, round int4, msg_id bigint, payload text, key text);

-- n keyed events to both queues; with hole > 0, a send of that many more
-- rolled back in the middle (its ids are used up: a hole in the window)
create function pg_temp.send_round(r int4, n int4, hole int4, keys int4) returns void language plpgsql as $$
declare
    q text;
begin
    foreach q in array array['bp', 'pp'] loop
        perform pgque.send_batch(q, 'default',
                                 array(select 'r' || r || '-' || pg_catalog.lpad(i::text, 5, '0') from generate_series(1, n / 2) i),
                                 array(select 'k' || (i % keys) from generate_series(1, n / 2) i));
        if hole > 0 then
            begin
                perform pgque.send_batch(q, 'default', array_fill('gone'::text, array[hole]));
                raise exception 'roll back' using errcode = 'P0001';
            exception when sqlstate 'P0001' then
                null;
            end;
        end if;
        perform pgque.send_batch(q, 'default',
                                 array(select 'r' || r || '-' || pg_catalog.lpad(i::text, 5, '0') from generate_series(n / 2 + 1, n) i),
                                 array(select 'k' || (i % keys) from generate_series(n / 2 + 1, n) i));
    end loop;
    perform pgque.ticker('bp');
    perform pgque.ticker('pp');
end $$;
create function pg_temp.take(r int4, part int4) returns void language plpgsql as $$
begin
    insert into got (q, round, msg_id, payload, key)
    select q, r, d.msg_id, d.payload, d.extra1 from unnest(array['bp', 'pp']) q, pgque_test.drain(q, 'c', part) d;
end $$;

-- 1: 600 events over 2,000 keys, a hole of 40 (placed), parts of 7
select pg_temp.send_round(1, 600, 40, 2000);
select pg_temp.take(1, 7);
-- 2: 20 events, a hole of 200 (wider than four times the rows: merged), parts of 3
select pg_temp.send_round(2, 20, 200, 13);
select pg_temp.take(2, 3);
-- 3: 3,000 events (the cache's arrays grow past 1,024), a hole of 5, parts of 500
select pg_temp.send_round(3, 3000, 5, 2000);
select pg_temp.take(3, 500);
-- 4: one event, then two (one per half), parts of 1
select pgque.send('bp', 'default', 'r4-00001', 'k1'), pgque.send('pp', 'default', 'r4-00001', 'k1');
select pg_temp.take(4, 1);
select pg_temp.send_round(5, 2, 0, 2000);
select pg_temp.take(5, 1);
-- 6: the first half's keys in late buckets, the second half's in early ones,
-- so the window's smallest id is in a late bucket, its greatest in an early one
create function pg_temp.key_in(b int4) returns text language sql as $$
    select k from (select 'k' || i as k from generate_series(1, 5000) i) s
     where pgque._slot_of(k, 32) = b limit 1
$$;
select count(*) from (select pgque.send(q, 'default', 'r6-' || pg_catalog.lpad(i::text, 5, '0'),
                                        pg_temp.key_in(case when i <= 50 then 31 - i % 4 else i % 4 end))
                        from unnest(array['bp', 'pp']) q, generate_series(1, 100) i) s;
select pgque.ticker('bp') is not null and pgque.ticker('pp') is not null as ticked;
select pg_temp.take(6, 9);

-- every event once, in ev_id order, and none of the rolled-back ones
select q, count(*) as events, count(distinct msg_id) as distinct_ids,
       bool_and(prev is null or msg_id > prev) as in_ev_id_order,
       count(*) filter (where payload = 'gone') as rolled_back_seen
  from (select q, msg_id, payload, lag(msg_id) over (partition by q order by seq) as prev from got) g
 group by q order by q;
-- the holes are there: ids of a window are not contiguous
select round, max(msg_id) - min(msg_id) + 1 - count(*) as ids_missing
  from got where q = 'bp' group by round order by round;
-- the bucketed queue's consumer got what the unbucketed one got, in order
select (select string_agg(payload || '/' || key, ' ' order by seq) from got where q = 'bp')
     = (select string_agg(payload || '/' || key, ' ' order by seq) from got where q = 'pp') as same_as_unbucketed;
-- a key's events in the order they were sent
select count(*) as keys_out_of_order
  from (select key, payload, lag(payload) over (partition by key order by seq) as prev
          from got where q = 'bp') k
 where prev > payload;
-- round 6's smaller ids really lie in the last buckets, its greater ones in the first
select bool_and(pgque._slot_of(key, 32) >= 28) filter (where payload <= 'r6-00050')
       and bool_and(pgque._slot_of(key, 32) < 4) filter (where payload > 'r6-00050') as smaller_ids_in_later_buckets
  from got where q = 'bp' and round = 6;

-- 7: ids an admin chooses (insert_event_raw): one repeated and the
-- greatest the sequence can reach (2^62) beside ids a million lower: the
-- rows cannot be placed (a repeated id, a range far wider than the rows)
-- and are sorted instead; every event
-- once, in ev_id order (two events of one id in either order), the same as
-- the twin's.  One part for the window: a part that ends between two events
-- of one id loses the second (a part resumes after an ev_id), in either
-- layout and before this change too (ADR 0093, noticed and left alone)
create temp table got7 (seq serial, q text, msg_id bigint, payload text, key text);
-- a chosen id is at most the sequence's position (ADR 0101): the sequences
-- move to 2^62 (seq_setval's cap) first, the greatest id it allows
select count(pgque.seq_setval(queue_event_seq, 4611686018427387904)) as moved
  from pgque.queue where queue_name in ('bp', 'pp');
select count(pgque.insert_event_raw(q, id, now(), null, null, 'default', 'r7-' || pg_catalog.lpad(i::text, 2, '0'),
                                    'k' || (case when i = 11 then 5 else i end), null, null, null))
  from unnest(array['bp', 'pp']) q,
       lateral (select i, case when i = 11 then 1000005 when i = 12 then 4611686018427387904 else 1000000 + i end as id
                  from generate_series(1, 12) i) s;
insert into got7 (q, msg_id, payload, key)
select q, d.msg_id, d.payload, d.extra1 from unnest(array['bp', 'pp']) q, pgque_test.drain(q, 'c', 100) d;
select q, count(*) as events, count(distinct msg_id) as distinct_ids,
       bool_and(prev is null or msg_id >= prev) as in_ev_id_order, max(msg_id) as greatest
  from (select q, msg_id, lag(msg_id) over (partition by q order by seq) as prev from got7) g
 group by q order by q;
select (select string_agg(msg_id || '/' || payload || '/' || key, ' ' order by msg_id, payload) from got7 where q = 'bp')
     = (select string_agg(msg_id || '/' || payload || '/' || key, ' ' order by msg_id, payload) from got7 where q = 'pp') as same_as_unbucketed;
select q, string_agg(payload, ' ' order by payload) as repeated_id_events from got7 where msg_id = 1000005 group by q order by q;

-- 8: ids at both ends of int8, in two buckets (rows an owner or superuser
-- wrote into the bucket tables themselves: insert_event_raw takes only
-- positive ids): their range does not fit in 64 bits, so it is not placed
do $$
declare
    q pgque.queue;
begin
    select * into q from pgque.queue where queue_name = 'bp';
    execute pg_catalog.format('insert into pgque.%I (ev_id, ev_time, ev_txid, ev_type, ev_data, ev_extra1)'
                              ' select -9223372036854775808 + i, now(), pg_current_xact_id(), ''default'', ''r8-min+'' || i, ''k1''
                                  from generate_series(0, 9) i',
                              'event_' || q.queue_id || '_' || q.queue_cur_table || '_b0');
    execute pg_catalog.format('insert into pgque.%I (ev_id, ev_time, ev_txid, ev_type, ev_data, ev_extra1)'
                              ' values (9223372036854775807, now(), pg_current_xact_id(), ''default'', ''r8-max'', ''k0'')',
                              'event_' || q.queue_id || '_' || q.queue_cur_table || '_b1');
end $$;
select count(*) as events, bool_and(prev is null or msg_id > prev) as in_ev_id_order,
       string_agg(payload, ' ' order by seq) filter (where seq in (1, 10, 11)) as first_tenth_last
  from (select d.msg_id, d.payload, s, lag(d.msg_id) over (order by s) as prev, s as seq
          from pgque_test.drain('bp', 'c', 4) with ordinality as d(batch_no, msg_id, type, payload, retry_count, extra1, s)) d;

select pgque.drop_queue('bp', true), pgque.drop_queue('pp', true);
