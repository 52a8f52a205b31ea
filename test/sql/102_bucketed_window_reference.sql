-- A bucketed queue's window against the unbucketed reference (ADR 0131):
-- the same events sent to three queues, "b2" with 32 partition buckets
-- from its start, "l2" unbucketed until its buckets are added in the middle
-- of the stream (rows in the child table's own heap and in buckets in one
-- window), and "p2" without buckets (the reference); every consumer of
-- each drains them a window at once and in parts of 3, and the messages
-- (all columns but the batch id, in order) must be the same for the three
-- queues.  The cases a rule that skips relations of a window would have to
-- keep: windows where most buckets hold no row of the window (3 events
-- over 32 buckets), a transaction in progress at the old tick that writes
-- a bucket no row of the window is in yet and commits before the new tick
-- (read through the in-progress xid's scan), a prepared transaction
-- committed after the tick (its rows in the next window only), a
-- subtransaction rolled back, a rotation of the tables in the middle of a
-- backlog (windows across the switch: both tables' buckets), and a window
-- of 2,000 events.  Each window is also read by the kept plan
-- (pgque._window_rows, the executor) for b2 and l2: the same messages.
-- The file sorts before 10_roles (its number is 102): pgque's sequences
-- are set back at its end, so that the files after it print the ids they
-- always printed; no id is printed here.
create temp table t102_seqs as
select c.oid, pg_sequence_last_value(c.oid) as v from pg_class c
 where c.relkind = 'S' and c.relnamespace = 'pgque'::regnamespace;
create schema bw102;
create table bw102.got (seq serial, q text, c text, win text, msg text, msg_id bigint);
create table bw102.plan (q text, win text, msgs text[], relations int4);
select pgque.create_queue('b2'), pgque.set_queue_config('b2', 'partition_buckets', '32');
select pgque.create_queue('l2'), pgque.set_queue_config('l2', 'partition_buckets', '0');
select pgque.create_queue('p2');
select pgque.subscribe(q, c) from unnest(array['b2', 'l2', 'p2']) q, unnest(array['all', 'p3']) c order by 1;

-- the same events into the three queues, keyed: event i of tag, key k(i)
create function bw102.send(tag text, n int4, k int4 default 7) returns void language plpgsql as $$
declare
    q text;
begin
    foreach q in array array['b2', 'l2', 'p2'] loop
        perform pgque.send_batch(q, 'default',
                                 array(select tag || '-' || pg_catalog.lpad(i::text, 5, '0') from generate_series(1, n) i),
                                 array(select tag || (i % k) from generate_series(1, n) i));
    end loop;
end $$;
create function bw102.tick() returns void language sql as $$
    select pgque.ticker('b2'), pgque.ticker('l2'), pgque.ticker('p2');
$$;
-- a message as text, without its batch id (each consumer's own)
create function bw102.m(m pgque.message) returns text language sql as $$
    select row(m.msg_id, m.type, m.payload, m.retry_count, m.created_at, m.extra1, m.extra2, m.extra3, m.extra4)::text
$$;
-- drain consumer i_c of the three queues, max_return i_max, every message
-- recorded; each window of b2 and l2 also as the kept plan reads it
create function bw102.take(i_c text, i_max int4) returns void language plpgsql as $$
declare
    qn text;
    b  bigint;
    wk text;
    m  pgque.message;
begin
    foreach qn in array array['b2', 'l2', 'p2'] loop
        loop
            b := null;
            for m in select * from pgque.receive(qn, i_c, i_max) loop
                if b is null then
                    wk := (select w.hi::text from pgque._batch_source(m.batch_id, null, null) w);
                    if qn <> 'p2' and not exists (select from bw102.plan p where p.q = qn || ':' || i_c and p.win = wk) then
                        insert into bw102.plan
                        select qn || ':' || i_c, wk,
                               coalesce(array_agg(row(e.ev_id, e.ev_type, e.ev_data, e.ev_retry, e.ev_time, e.ev_extra1,
                                                      e.ev_extra2, e.ev_extra3, e.ev_extra4)::text order by e.ev_id), '{}'),
                               (select array_length(regexp_split_to_array(w.source, ' union all '), 1))
                          from pgque._batch_source(m.batch_id, null, null) w
                          left join pgque._window_rows(w.source, w.lo_xmax, w.hi_xmax, w.lo_xip, w.hi, w.sub_id,
                                                       null, null, 1000000, null, null) e on true
                         group by w.source;
                    end if;
                end if;
                b := m.batch_id;
                insert into bw102.got (q, c, win, msg, msg_id) values (qn, i_c, wk, bw102.m(m), m.msg_id);
            end loop;
            exit when b is null;
            perform pgque.ack(b);
        end loop;
    end loop;
end $$;
create function bw102.take_all() returns void language sql as $$
    select bw102.take('all', 100000), bw102.take('p3', 3);
$$;
-- how many of a queue's relations hold rows (the buckets written so far)
create function bw102.relations_with_rows(qn text) returns bigint language plpgsql as $$
declare
    r record;
    n bigint := 0;
    has boolean;
begin
    for r in select c.relname from pg_class c join pg_namespace s on s.oid = c.relnamespace
              where s.nspname = 'pgque' and c.relkind = 'r'
                and c.relname like 'event\_' || (select queue_id from pgque.queue where queue_name = qn) || '\_%' loop
        execute format('select exists (select from only pgque.%I)', r.relname) into has;
        n := n + has::int;
    end loop;
    return n;
end $$;

-- window 1: 3 events over 32 buckets (29 or more hold no row)
select bw102.send('a', 3, 3);
select bw102.tick();
select bw102.take_all();
select bw102.relations_with_rows('b2') as b2_relations_with_rows;

-- window 2: x, in progress at the old tick, writes a key of its own (a
-- bucket no other row of the window is in) and commits between the ticks;
-- z commits after the new tick (its rows in window 3 only); y rolls back;
-- a rolled-back subtransaction
begin; select bw102.send('x', 1, 1); prepare transaction 'bw102_x';
begin; select bw102.send('z', 4, 2); prepare transaction 'bw102_z';
begin; select bw102.send('y', 6, 3); prepare transaction 'bw102_y';
select bw102.tick();
select bw102.send('b', 2, 2);
begin;
select bw102.send('s', 2, 1);
savepoint s1;
select bw102.send('u', 5, 5);
rollback to savepoint s1;
commit;
commit prepared 'bw102_x';
rollback prepared 'bw102_y';
select bw102.tick();
select bw102.take_all();
commit prepared 'bw102_z';
select bw102.send('c', 5);
select bw102.tick();
select bw102.take_all();

-- window 4: l2's buckets added while w, which wrote l2's child table
-- itself, is in progress; w commits after the next events went to buckets
begin; select bw102.send('w', 9); prepare transaction 'bw102_w';
select pgque.set_queue_config('l2', 'partition_buckets', '32') as l2_bucketed_now;
select bw102.send('d', 9);
commit prepared 'bw102_w';
select bw102.tick();
select bw102.take_all();
select bw102.relations_with_rows('l2') > 1 as l2_rows_in_its_heap_and_buckets;

-- windows 5 and 6: a backlog across a rotation of the tables (step 1 in
-- the middle of it, a transaction in progress holding rows in the old
-- table and committed after the switch), then its step 2
select count(pgque.set_queue_config(q, 'rotation_period', '1 millisecond')) from unnest(array['b2', 'l2', 'p2']) q;
select bw102.send('e', 40);
select bw102.tick();
begin; select bw102.send('r', 6); prepare transaction 'bw102_r';
select pg_sleep(0.01);
select count(*) filter (where pgque.maint_rotate_tables_step1(q) = 1) as switched
  from unnest(array['b2', 'l2', 'p2']) q;
select bw102.send('f', 40);
commit prepared 'bw102_r';
select bw102.tick();
select bw102.send('g', 10);
select bw102.tick();
select bw102.take_all();
select pgque.maint_rotate_tables_step2() >= 0 as step2_ran;
select bw102.send('h', 10);
select bw102.tick();
select bw102.take_all();

-- window 7: 2,000 events
select bw102.send('i', 2000, 64);
select bw102.tick();
select bw102.take_all();

-- every message once per consumer and queue, none of y's or u's
select c, q, count(*) as messages, count(distinct msg_id) as distinct_ids,
       count(*) filter (where msg like '%,y-%' or msg like '%,u-%') as rolled_back
  from bw102.got group by 1, 2 order by 1, 2;
-- each consumer: the three queues handed out the same messages in the same order
select c, count(distinct m) as distinct_drains
  from (select c, q, array_agg(msg order by seq) as m from bw102.got group by c, q) d
 group by c order by c;
-- each window of b2 and l2, each consumer: the messages the kept plan reads
select g.c, g.q, count(*) as windows, sum(array_length(g.msgs, 1)) as messages,
       bool_and(g.msgs = p.msgs) as same_messages_same_order
  from (select c, q, win, array_agg(msg order by seq) as msgs from bw102.got where q <> 'p2' group by c, q, win) g
  join bw102.plan p on p.q = g.q || ':' || g.c and p.win = g.win
 group by g.c, g.q order by g.c, g.q;
-- the relations each window of b2 and l2 read, window by window: the
-- child table's own heap and 32 buckets; l2's own heap alone before its
-- buckets; both tables' buckets across the switch
select p.q, array_agg(p.relations order by pg_snapshot_xmax(p.win::pg_snapshot)) as relations_per_window
  from bw102.plan p where p.q like '%:all' group by p.q order by p.q;
-- z's rows came in a later window than x's (committed after the tick)
select max(g.seq) filter (where g.msg like '%,x-%') < min(g.seq) filter (where g.msg like '%,z-%') as z_after_x
  from bw102.got g where g.c = 'all' and g.q = 'b2';

drop schema bw102 cascade;
select pgque.drop_queue(q, true) from unnest(array['b2', 'l2', 'p2']) q;
select count(pg_catalog.setval(s.oid::regclass, coalesce(s.v, q.seqstart), s.v is not null)) >= 0 as sequences_back
  from t102_seqs s join pg_sequence q on q.seqrelid = s.oid;
