-- A plain consumer of a bucketed queue reads each window bucket by bucket
-- and merges the buckets' ascending runs (ADR 0082): it receives what the
-- consumer of an unbucketed twin receives, in the same order, with parts of
-- a window served from the part cache while rotation moves the queue's
-- tables between the parts (the later parts read only the window's bounds).
select pgque.create_queue('bm'), pgque.set_queue_config('bm', 'partition_buckets', '32');
select pgque.create_queue('pm');
select pgque.subscribe('bm', 'c'), pgque.subscribe('pm', 'c');
select pgque.set_queue_config(q, 'rotation_period', '1 millisecond') from unnest(array['bm', 'pm']) q;
create temp table got (seq serial, q text, round int4, msg_id bigint, payload text, key text);
create temp table tables_seen (round int4, q text, cur int4);

-- one round: a window of 60 keyed events (keys sharing a bucket, keys
-- alone in one) sent to both queues, ticked, its first part of 7 received
-- and acked; then rotation (maint), then the rest of the window in parts
create function pg_temp.send_round(r int4) returns void language plpgsql as $$
declare
    q text;
begin
    foreach q in array array['bm', 'pm'] loop
        perform pgque.send_batch(q, 'default',
                                 array(select 'r' || r || '-' || pg_catalog.lpad(i::text, 2, '0') from generate_series(1, 60) i),
                                 array(select 'k' || (i * 7 % 13) from generate_series(1, 60) i));
    end loop;
end $$;
create function pg_temp.first_part(r int4) returns int4 language plpgsql as $$
declare
    q text;
    m pgque.message;
    b bigint;
    n int4 := 0;
begin
    foreach q in array array['bm', 'pm'] loop
        b := null;
        for m in select * from pgque.receive(q, 'c', 7) loop
            insert into got (q, round, msg_id, payload, key) values (q, r, m.msg_id, m.payload, m.extra1);
            b := m.batch_id;
            n := n + 1;
        end loop;
        perform pgque.ack(b);
    end loop;
    return n;
end $$;

select pg_temp.send_round(1);
select pgque.ticker('bm') is not null and pgque.ticker('pm') is not null as ticked;
select pg_temp.first_part(1) as first_parts;
select pg_sleep(0.01);
select pgque.maint() >= 0 as maint_ran;
select pgque.maint() >= 0 as maint_ran;
insert into tables_seen select 1, queue_name, queue_cur_table from pgque.queue where queue_name in ('bm', 'pm');
insert into got (q, round, msg_id, payload, key)
select q, 1, msg_id, payload, extra1 from unnest(array['bm', 'pm']) q, pgque_test.drain(q, 'c', 7);
select pg_temp.send_round(2);
select pgque.ticker('bm') is not null and pgque.ticker('pm') is not null as ticked;
select pg_temp.first_part(2) as first_parts;
select pg_sleep(0.01);
select pgque.maint() >= 0 as maint_ran;
select pgque.maint() >= 0 as maint_ran;
insert into tables_seen select 2, queue_name, queue_cur_table from pgque.queue where queue_name in ('bm', 'pm');
insert into got (q, round, msg_id, payload, key)
select q, 2, msg_id, payload, extra1 from unnest(array['bm', 'pm']) q, pgque_test.drain(q, 'c', 7);
select pg_temp.send_round(3);
select pgque.ticker('bm') is not null and pgque.ticker('pm') is not null as ticked;
select pg_temp.first_part(3) as first_parts;
select pg_sleep(0.01);
select pgque.maint() >= 0 as maint_ran;
select pgque.maint() >= 0 as maint_ran;
insert into tables_seen select 3, queue_name, queue_cur_table from pgque.queue where queue_name in ('bm', 'pm');
insert into got (q, round, msg_id, payload, key)
select q, 3, msg_id, payload, extra1 from unnest(array['bm', 'pm']) q, pgque_test.drain(q, 'c', 7);
select pg_temp.send_round(4);
select pgque.ticker('bm') is not null and pgque.ticker('pm') is not null as ticked;
select pg_temp.first_part(4) as first_parts;
select pg_sleep(0.01);
select pgque.maint() >= 0 as maint_ran;
select pgque.maint() >= 0 as maint_ran;
insert into tables_seen select 4, queue_name, queue_cur_table from pgque.queue where queue_name in ('bm', 'pm');
insert into got (q, round, msg_id, payload, key)
select q, 4, msg_id, payload, extra1 from unnest(array['bm', 'pm']) q, pgque_test.drain(q, 'c', 7);

-- rotation moved the tables between the parts of the windows
select q, string_agg(cur::text, ' ' order by round) as cur_table_per_round from tables_seen group by q order by q;
-- every event once, in ev_id order (no transaction spans a tick here)
select q, count(*) as events, count(distinct msg_id) as distinct_ids,
       bool_and(prev is null or msg_id > prev) as in_ev_id_order
  from (select q, msg_id, lag(msg_id) over (partition by q order by seq) as prev from got) g
 group by q order by q;
-- the bucketed queue's consumer got what the unbucketed one got, in order
select (select string_agg(payload || '/' || key, ' ' order by seq) from got where q = 'bm')
     = (select string_agg(payload || '/' || key, ' ' order by seq) from got where q = 'pm') as same_as_unbucketed;
-- a key's events in the order they were sent
select count(*) as keys_out_of_order
  from (select key, payload, lag(payload) over (partition by key order by seq) as prev
          from got where q = 'bm') k
 where prev > payload;

select pgque.drop_queue('bm', true), pgque.drop_queue('pm', true);

-- Two consumers of one queue read the same windows in one backend; a
-- retried event is its consumer's alone.  The part cache is keyed by the
-- reader as well as by the window (a part it holds is matched without the
-- relations' names): c2 never gets c1's retry from c1's cached rows.
select pgque.create_queue('bo'), pgque.set_queue_config('bo', 'partition_buckets', '32');
select pgque.subscribe('bo', 'c1'), pgque.subscribe('bo', 'c2');
select count(pgque.send('bo', 'default', 'e' || i, 'k' || i)) from generate_series(1, 20) i;
select pgque.ticker('bo') is not null as ticked;
create temp table seen (who text, payload text, retry int4);
create function pg_temp.part(who text, n int4) returns int4 language plpgsql as $$
declare
    m pgque.message;
    b bigint;
    k int4 := 0;
begin
    for m in select * from pgque.receive('bo', who, n) loop
        insert into seen values (who, m.payload, m.retry_count);
        b := m.batch_id;
        -- c1 sends its first event of e5 back for a retry
        if who = 'c1' and m.payload = 'e5' and m.retry_count is null then
            perform pgque.nack(b, m, '0 seconds', 'retry me');
        end if;
        k := k + 1;
    end loop;
    if b is not null then
        perform pgque.ack(b);
    end if;
    return k;
end $$;
select pg_temp.part('c1', 7) as c1_part, pg_temp.part('c2', 7) as c2_part;
select pg_temp.part('c1', 7) as c1_part, pg_temp.part('c2', 7) as c2_part;
select pg_temp.part('c1', 7) as c1_part, pg_temp.part('c2', 7) as c2_part;
select pgque.maint() >= 0 as maint_ran;
select pgque.ticker('bo') is not null as ticked;
select pg_temp.part('c1', 7) as c1_part, pg_temp.part('c2', 7) as c2_part;
select pg_temp.part('c1', 7) as c1_part, pg_temp.part('c2', 7) as c2_part;
select who, count(*) as events, count(*) filter (where retry is not null) as retried,
       string_agg(payload, ' ' order by payload) filter (where retry is not null) as retried_payloads
  from seen group by who order by who;
select pgque.drop_queue('bo', true);
