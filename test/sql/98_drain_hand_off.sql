-- The drain's read and hand-off of ADR 0127: window_direct.c reads a
-- window's heap pages in block order (the ev_txid index's TIDs, then each
-- page once), and receive hands a part straight into its result while the
-- rows come in ev_id order, the part cache taking the rest.  Every message
-- receive hands out, whole (all ten columns, as text) and in order, against
-- the same window read by the kept plan (pgque._window_rows: the executor,
-- unchanged by ADR 0127), formed as a message the way receive forms one,
-- for each read form: an unbucketed queue and a 32-bucket twin fed the same
-- events, drained a window at once (max_return past the window: the part
-- streamed), in parts of 7 (the part streamed, the rest cached), and of 1;
-- windows with transactions in progress at the old tick (prepared: one
-- commits between the ticks, one rolls back, one runs across ticks), a
-- subtransaction rolled back, payloads stored out of line (TOAST, 300 kB
-- each, incompressible) beside empty and NULL ones, NULL type and extra
-- columns, rows an owner updated (HOT: the new version lies later in the
-- page than rows with larger ids, so the rows come out of ev_id order and
-- the streamed part moves to the cache) and a window of 9,000 events (more
-- TIDs than one chunk of the direct read).
create schema ho98;
create table ho98.got (seq serial, q text, c text, max_return int4, win text, msg text, msg_id bigint);
create table ho98.plan (q text, win text, msgs text[]);
select pgque.create_queue('hb'), pgque.set_queue_config('hb', 'partition_buckets', '32');
select pgque.create_queue('hp');
select pgque.subscribe(q, c) from unnest(array['hb', 'hp']) q, unnest(array['all', 'p7', 'p1']) c order by 1;

-- a payload of about 300 kB that pglz does not shrink: stored out of line
create function ho98.big(seed int4) returns text language sql as $$
    select string_agg(md5(seed::text || '-' || i), '') from generate_series(1, 9400) i
$$;
-- the same events into both queues: payload i of tag, keyed over 13 keys
create function ho98.send(tag text, n int4) returns void language plpgsql as $$
declare
    q text;
begin
    foreach q in array array['hb', 'hp'] loop
        perform pgque.send_batch(q, 'default',
                                 array(select tag || '-' || pg_catalog.lpad(i::text, 5, '0') from generate_series(1, n) i),
                                 array(select 'k' || (i % 13) from generate_series(1, n) i));
    end loop;
end $$;
-- one event with every column given (NULLs where asked) into both queues
create function ho98.ev(i_type text, i_data text, e1 text, e2 text, e3 text, e4 text) returns void language plpgsql as $$
declare
    q text;
begin
    foreach q in array array['hb', 'hp'] loop
        perform pgque.insert_event(q, i_type, i_data, e1, e2, e3, e4);
    end loop;
end $$;
create function ho98.tick() returns void language sql as $$
    select pgque.ticker('hb'), pgque.ticker('hp');
$$;
-- a message as text, its columns in pgque.message's order (the batch id
-- left out: each consumer's batch is its own)
create function ho98.m(m pgque.message) returns text language sql as $$
    select row(m.msg_id, m.type, m.payload, m.retry_count, m.created_at, m.extra1, m.extra2, m.extra3, m.extra4)::text
$$;
-- drain consumer i_c of both queues, max_return i_max, recording every
-- message whole; each window as the kept plan reads it, at its first part
create function ho98.take(i_c text, i_max int4) returns void language plpgsql as $$
declare
    qn text;
    b  bigint;
    wk text;
    m  pgque.message;
begin
    foreach qn in array array['hb', 'hp'] loop
        loop
            b := null;
            for m in select * from pgque.receive(qn, i_c, i_max) loop
                if b is null then
                    wk := (select w.hi::text from pgque._batch_source(m.batch_id, null, null) w);
                    if not exists (select from ho98.plan p where p.q = qn || ':' || i_c and p.win = wk) then
                        insert into ho98.plan
                        select qn || ':' || i_c, wk,
                               coalesce(array_agg(row(e.ev_id, e.ev_type, e.ev_data, e.ev_retry, e.ev_time, e.ev_extra1,
                                                      e.ev_extra2, e.ev_extra3, e.ev_extra4)::text order by e.ev_id), '{}')
                          from pgque._batch_source(m.batch_id, null, null) w,
                               pgque._window_rows(w.source, w.lo_xmax, w.hi_xmax, w.lo_xip, w.hi, w.sub_id,
                                                  null, null, 1000000, null, null) e;
                    end if;
                end if;
                b := m.batch_id;
                insert into ho98.got (q, c, max_return, win, msg, msg_id) values (qn, i_c, i_max, wk, ho98.m(m), m.msg_id);
            end loop;
            exit when b is null;
            perform pgque.ack(b);
        end loop;
    end loop;
end $$;
-- a window at once (below the part cache's 50,000 rows: the read that
-- streams), parts of 7, parts of 1 (of 1,000 for the window of 9,000)
create function ho98.take_all(p1 int4 default 1) returns void language sql as $$
    select ho98.take('all', 20000), ho98.take('p7', 7), ho98.take('p1', p1);
$$;

-- window 1: plain sends
select ho98.send('a', 40);
select ho98.tick();
select ho98.take_all();

-- window 2: transactions in progress at the old tick; x commits between
-- the ticks, y rolls back, z runs on across the next tick; a rolled-back
-- subtransaction
begin; select ho98.send('x', 30); prepare transaction 'ho98_x';
begin; select ho98.send('y', 20); prepare transaction 'ho98_y';
begin; select ho98.send('z', 25); prepare transaction 'ho98_z';
select ho98.send('b', 30);
select ho98.tick();
begin;
select ho98.send('s', 5);
savepoint s1;
select ho98.send('u', 5);
rollback to savepoint s1;
commit;
commit prepared 'ho98_x';
rollback prepared 'ho98_y';
select ho98.tick();
select ho98.take_all();
commit prepared 'ho98_z';
select ho98.send('c', 10);
select ho98.tick();
select ho98.take_all();

-- window 3: payloads out of line, empty and NULL; NULL type and extras
select ho98.ev('big', ho98.big(i), 'k' || i, null, 'e3', null) from generate_series(1, 4) i;
select ho98.ev(null, null, null, null, null, null);
select ho98.ev('', '', '', '', '', '');
select ho98.ev('t', 'd', null, 'e2', null, 'e4');
select ho98.send('d', 20);
select ho98.ev('big', ho98.big(9), null, null, null, null);
select ho98.tick();
select ho98.take_all();

-- window 4: rows an owner updated in place (HOT: the new version is
-- written later in the page than rows with larger ids), one to NULLs
select ho98.send('e', 30);
create function ho98.update_events() returns void language plpgsql as $$
declare
    q text;
begin
    foreach q in array array['hb', 'hp'] loop
        execute format('update pgque.%I set ev_extra2 = %L where ev_data in (%L, %L)',
                       'event_' || (select queue_id from pgque.queue where queue_name = q), 'updated', 'e-00002', 'e-00011');
        execute format('update pgque.%I set ev_type = null, ev_extra1 = null where ev_data = %L',
                       'event_' || (select queue_id from pgque.queue where queue_name = q), 'e-00005');
    end loop;
end $$;
select ho98.update_events();
select ho98.tick();
select ho98.take_all();

-- window 5: 9,000 events, more than one chunk of TIDs
select ho98.send('f', 9000);
select ho98.tick();
select ho98.take_all(1000);

-- every message once per consumer and queue, none of y's or u's
select c, q, count(*) as messages, count(distinct msg_id) as distinct_ids,
       count(*) filter (where msg like '%,y-%' or msg like '%,u-%') as rolled_back
  from ho98.got group by 1, 2 order by 1, 2;
-- each window, each consumer: the messages the kept plan reads, whole, in
-- the same order
select g.c, g.q, count(*) as windows, sum(array_length(g.msgs, 1)) as messages,
       bool_and(g.msgs = p.msgs) as same_messages_same_order
  from (select c, q, win, array_agg(msg order by seq) as msgs from ho98.got group by c, q, win) g
  join ho98.plan p on p.q = g.q || ':' || g.c and p.win = g.win
 group by g.c, g.q order by g.c, g.q;
-- the three consumers and both queues handed out the same messages
select count(distinct m) as distinct_drains
  from (select c, q, array_agg(msg order by seq) as m from ho98.got group by c, q) d;
-- the out-of-line payloads came whole, the updates and NULLs as stored
select count(*) filter (where msg like '%,big,%' and length(msg) > 300000) as big_whole,
       count(*) filter (where msg like '%updated%') as updated,
       count(*) filter (where msg like '%,,,,,,,)' or msg ~ '^\(\d+,,,') as null_columns
  from ho98.got where c = 'all' and q = 'hp';

-- A cursor over receive held across a second receive of the same part in
-- its transaction (the part streamed, so not kept in the part cache: read
-- again from the table): both hand out the same messages; FETCH reads the
-- first one's result as it was formed.
select ho98.send('g', 12);
select ho98.tick();
begin;
declare cur cursor for select payload from pgque.receive('hp', 'all', 20000);
fetch 3 from cur;
create temp table again as select ho98.m(m) as msg from pgque.receive('hp', 'all', 20000) m;
fetch all from cur;
select count(*) as messages, count(distinct msg) as distinct_messages from again;
close cur;
commit;
-- a part of 5 streamed, the rest of the window cached, then the same part
-- again in the same transaction (before it is acked): the same 5; after
-- the ack, the rest of the window from the cache
select ho98.send('h', 12);
select ho98.tick();
select pgque.ack(b) from (select max(batch_id) as b from pgque.receive('hp', 'p7', 20)) x;
begin;
create temp table first5 as select ho98.m(m) as msg from pgque.receive('hp', 'p7', 5) m;
create temp table again5 as select ho98.m(m) as msg from pgque.receive('hp', 'p7', 5) m;
select (select count(*) from first5) as part,
       (select array_agg(msg order by msg) from first5) = (select array_agg(msg order by msg) from again5) as same_part;
select pgque.ack(b) from (select max(batch_id) as b from pgque.receive('hp', 'p7', 5)) x;
commit;
select string_agg(payload, ',' order by msg_id) as rest from pgque.receive('hp', 'p7', 100);
-- a read-only transaction: receive opens and marks a batch, which writes
\set VERBOSITY terse
begin read only;
select count(*) from pgque.receive('hb', 'all', 20000);
rollback;
\set VERBOSITY default

select pgque.drop_queue('hb', true), pgque.drop_queue('hp', true);
drop schema ho98 cascade;
