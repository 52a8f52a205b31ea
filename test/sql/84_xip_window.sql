-- A window whose old tick listed transactions in progress (ADR 0106): the
-- read keeps only the xids the new tick sees finished, and reads the range
-- alone when none is left.
-- Prepared transactions stand for the concurrent writers (no second session
-- is needed): "a" writes into many buckets and commits between the ticks,
-- "b" writes and rolls back, "c" writes and is still in progress at the new
-- tick (and at the next three ticks), "o" and "o2" write only to another
-- queue and commit.  A 32-bucket queue against an unbucketed twin fed the
-- same sends, drained in parts of 7: every committed event once, none of
-- the rolled-back ones, in ev_id order, each key's events in the same order
-- in both queues.
create schema xip84;
create table xip84.got (seq serial, q text, round int4, batch_no int4, msg_id bigint, payload text, key text);
select pgque.create_queue('xb'), pgque.set_queue_config('xb', 'partition_buckets', '32');
select pgque.create_queue('xp');
select pgque.create_queue('xo');
select pgque.subscribe('xb', 'c'), pgque.subscribe('xp', 'c');

-- n events named tag-00001.. to both queues, keyed over 37 keys
create function xip84.send(tag text, n int4) returns void language plpgsql as $$
declare
    q text;
begin
    foreach q in array array['xb', 'xp'] loop
        perform pgque.send_batch(q, 'default',
                                 array(select tag || '-' || pg_catalog.lpad(i::text, 5, '0') from generate_series(1, n) i),
                                 array(select 'k' || (i % 37) from generate_series(1, n) i));
    end loop;
end $$;
create function xip84.tick() returns void language sql as $$
    select pgque.ticker('xb'), pgque.ticker('xp'), pgque.ticker('xo');
$$;
create function xip84.take(r int4) returns void language plpgsql as $$
begin
    insert into xip84.got (q, round, batch_no, msg_id, payload, key)
    select q, r, d.batch_no, d.msg_id, d.payload, d.extra1 from unnest(array['xb', 'xp']) q, pgque_test.drain(q, 'c', 7) d;
end $$;

select xip84.send('r0', 40);
select xip84.tick();
begin; select xip84.send('a', 60); prepare transaction 'xip84_a';
begin; select xip84.send('b', 30); prepare transaction 'xip84_b';
begin; select xip84.send('c', 30); prepare transaction 'xip84_c';
begin; select pgque.send('xo', 'elsewhere'); prepare transaction 'xip84_o';
select xip84.send('r1', 50);
-- the old tick: a, b, c and o in progress
select xip84.tick();
select xip84.send('r2', 50);
commit prepared 'xip84_a';
rollback prepared 'xip84_b';
commit prepared 'xip84_o';
-- the new tick: c still in progress
select xip84.tick();
select xip84.take(1);
-- a window whose old tick lists c (running), d (rolls back) and o2 (commits,
-- wrote elsewhere only): none of them adds a row; c is left out of the list
begin; select pgque.send('xo', 'elsewhere too'); prepare transaction 'xip84_o2';
begin; select xip84.send('d', 40); prepare transaction 'xip84_d';
-- a later transaction that ends: a snapshot lists only the xids in progress
-- below its xmax (the newest ended xid + 1), so without it the tick would
-- list neither o2 nor d
select pgque.send('xo', 'after d');
select xip84.tick();
select xip84.send('r3', 30);
commit prepared 'xip84_o2';
rollback prepared 'xip84_d';
select xip84.tick();
select xip84.take(2);
-- c commits at last: its rows are the next window's
commit prepared 'xip84_c';
select xip84.send('r4', 20);
select xip84.take(3);

-- every committed event once, per round, none rolled back
select q, round, split_part(payload, '-', 1) as sent_by, count(*) as events, count(distinct payload) as distinct_payloads
  from xip84.got group by 1, 2, 3 order by 1, 2, 3;
-- each batch in ev_id order (a's and c's ids are older than their windows' others)
select q, count(*) as events, count(distinct msg_id) as distinct_ids,
       bool_and(prev is null or msg_id > prev) as batches_in_ev_id_order
  from (select q, msg_id, lag(msg_id) over (partition by q, round, batch_no order by seq) as prev
          from xip84.got) g
 group by q order by q;
-- each key's events in the same order in both queues
select count(*) as keys, bool_and(b = p) as same_order_per_key
  from (select key, array_agg(payload order by seq) filter (where q = 'xb') as b,
               array_agg(payload order by seq) filter (where q = 'xp') as p
          from xip84.got group by key) k;

-- The tables a window reads (_event_tables): those of before a switch only
-- when a transaction that can add rows to the window is older than the
-- switch's step 2, not whenever one older is in progress at the old tick.
-- w writes before the switch and commits inside a window (both tables: its
-- row is in the old one); z holds an xid from before the switch, writes
-- nothing and runs across every tick (one table where w is not in the window).
select pgque.create_queue('xr'), pgque.set_queue_config('xr', 'partition_buckets', '4');
select pgque.subscribe('xr', 'c');
select pgque.set_queue_config('xr', 'rotation_period', '1 millisecond');
-- the cursor past the queue's creation, so that maint() may switch
select pgque.send('xr', 'r4');
select payload from pgque_test.drain('xr', 'c', 2);
begin; select pgque.send('xr', 'w-before-switch'); prepare transaction 'xip84_w';
begin; select pg_catalog.pg_current_xact_id() is not null as has_xid; prepare transaction 'xip84_z';
select pgque.send('xr', 'r5');
select pgque.ticker('xr') is not null as ticked;
select pg_catalog.pg_sleep(0.01);
select pgque.maint() >= 0 as maint_ran;
select pgque.maint() >= 0 as maint_ran;
select queue_cur_table as cur_after_switch, queue_switch_step2 is not null as step2_stamped
  from pgque.queue where queue_name = 'xr';
select pgque.send('xr', 'r6');
select pgque.ticker('xr') is not null as ticked;
commit prepared 'xip84_w';
select pgque.send('xr', 'r7');
select pgque.ticker('xr') is not null as ticked;
select pgque.send('xr', 'r8');
select pgque.ticker('xr') is not null as ticked;
-- per window from the switch on: w and z in progress at its old tick or not,
-- and the tables it reads
select pg_catalog.pg_snapshot_xmin(lo.tick_snapshot) <= q.queue_switch_step2 as lo_xmin_before_step2,
       pg_catalog.array_length(pgque._event_tables(q, lo.tick_snapshot, hi.tick_snapshot), 1) as tables
  from pgque.queue q
  join pgque.tick lo on lo.tick_queue = q.queue_id
  join pgque.tick hi on hi.tick_queue = q.queue_id and hi.tick_id = lo.tick_id + 1
 where q.queue_name = 'xr' and pg_catalog.pg_snapshot_xmax(hi.tick_snapshot) > q.queue_switch_step2
 order by lo.tick_id;
select payload from pgque_test.drain('xr', 'c', 2) order by msg_id;
rollback prepared 'xip84_z';

select pgque.drop_queue('xb', true), pgque.drop_queue('xp', true), pgque.drop_queue('xo', true),
       pgque.drop_queue('xr', true);
drop schema xip84 cascade;
