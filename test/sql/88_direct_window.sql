-- The window read without the executor (ADR 0110): a plain receive reads a
-- window's relations through their ev_txid indexes in C, not through the
-- kept plan.  A 32-bucket queue and an unbucketed twin fed the same sends,
-- with concurrent writers as prepared transactions (one committing between
-- two ticks, one rolling back, one running across ticks), a subtransaction
-- rolled back, a retry for another consumer (ev_owner), and a rotation
-- between rounds; each batch's events as receive hands them out (parts of 7)
-- against the same batch read by the kept plan (pgque._window_rows, the
-- executor's read, unchanged): the same events, every committed event once.
create schema dw88;
create table dw88.got (seq serial, q text, round int4, batch_id bigint, win text, msg_id bigint, payload text, key text);
create table dw88.plan (q text, win text, ids bigint[]);
select pgque.create_queue('db'), pgque.set_queue_config('db', 'partition_buckets', '32');
select pgque.create_queue('dp');
select pgque.subscribe('db', 'c'), pgque.subscribe('dp', 'c');
select pgque.subscribe('db', 'c2'), pgque.subscribe('dp', 'c2');

create function dw88.send(tag text, n int4) returns void language plpgsql as $$
declare
    q text;
begin
    foreach q in array array['db', 'dp'] loop
        perform pgque.send_batch(q, 'default',
                                 array(select tag || '-' || pg_catalog.lpad(i::text, 5, '0') from generate_series(1, n) i),
                                 array(select 'k' || (i % 41) from generate_series(1, n) i));
    end loop;
end $$;
create function dw88.tick() returns void language sql as $$
    select pgque.ticker('db'), pgque.ticker('dp');
$$;
-- drain consumer i_c of both queues in parts of i_max; each window's ids as
-- the kept plan reads them (the whole window), taken at its first part
create function dw88.take(r int4, i_c text, i_max int4) returns void language plpgsql as $$
declare
    qn text;
    b  bigint;
    wk text;
    m  pgque.message;
begin
    foreach qn in array array['db', 'dp'] loop
        loop
            b := null;
            for m in select * from pgque.receive(qn, i_c, i_max) loop
                if b is null then
                    wk := (select w.hi::text from pgque._batch_source(m.batch_id, null, null) w);
                    if not exists (select from dw88.plan p where p.q = qn || ':' || i_c and p.win = wk) then
                        insert into dw88.plan
                        select qn || ':' || i_c, wk, coalesce(array_agg(e.ev_id order by e.ev_id), '{}')
                          from pgque._batch_source(m.batch_id, null, null) w,
                               pgque._window_rows(w.source, w.lo_xmax, w.hi_xmax, w.lo_xip, w.hi, w.sub_id,
                                                  null, null, 1000000, null, null) e;
                    end if;
                end if;
                b := m.batch_id;
                insert into dw88.got (q, round, batch_id, win, msg_id, payload, key)
                values (qn || ':' || i_c, r, m.batch_id, wk, m.msg_id, m.payload, m.extra1);
            end loop;
            exit when b is null;
            perform pgque.ack(b);
        end loop;
    end loop;
end $$;

-- round 1: a commits between the ticks, b rolls back, c runs across ticks
select dw88.send('r0', 40);
select dw88.tick();
begin; select dw88.send('a', 60); prepare transaction 'dw88_a';
begin; select dw88.send('b', 30); prepare transaction 'dw88_b';
begin; select dw88.send('c', 30); prepare transaction 'dw88_c';
select dw88.send('r1', 50);
select dw88.tick();
-- a subtransaction rolled back: its rows lie in the tables, never delivered
begin;
select dw88.send('sk', 5);
savepoint s1;
select dw88.send('su', 5);
rollback to savepoint s1;
commit;
commit prepared 'dw88_a';
rollback prepared 'dw88_b';
select pgque.send('db', 'aa'), pgque.send('dp', 'aa');
select dw88.tick();
select dw88.take(1, 'c', 7);
-- c2 takes the same windows and asks one event of each queue again
do $$
declare
    qn text;
    b  bigint;
    m  pgque.message;
begin
    foreach qn in array array['db', 'dp'] loop
        loop
            b := null;
            for m in select * from pgque.receive(qn, 'c2', 1000) loop
                b := m.batch_id;
                if m.payload = 'r1-00007' then
                    perform pgque.nack(m.batch_id, m, '0 seconds');
                end if;
            end loop;
            exit when b is null;
            perform pgque.ack(b);
        end loop;
    end loop;
end $$;
select pgque.maint() >= 0 as maint_ran;
-- round 2: c commits at last; the retry is c2's only (ev_owner)
commit prepared 'dw88_c';
select dw88.send('r2', 30);
select dw88.tick();
select dw88.take(2, 'c', 7);
select dw88.take(2, 'c2', 7);

-- round 3: a rotation (both tables read by the window of the switch)
select pgque.set_queue_config(q, 'rotation_period', '1 millisecond') from unnest(array['db', 'dp']) q;
begin; select dw88.send('w', 10); prepare transaction 'dw88_w';
select dw88.send('r3', 20);
select dw88.tick();
select pg_catalog.pg_sleep(0.01);
select pgque.maint() >= 0 as maint_ran;
select pgque.maint() >= 0 as maint_ran;
select queue_name, queue_cur_table, queue_switch_step2 is not null as step2_stamped
  from pgque.queue where queue_name in ('db', 'dp') order by 1;
select dw88.send('r4', 20);
commit prepared 'dw88_w';
select dw88.tick();
select dw88.send('r5', 20);
select dw88.tick();
select dw88.take(3, 'c', 7);
select dw88.take(3, 'c2', 1000);

-- every committed event once per consumer and queue, none rolled back
select q, split_part(payload, '-', 1) as sent_by, count(*) as events, count(distinct payload) as distinct_payloads
  from dw88.got group by 1, 2 order by 1, 2;
-- each window: receive's events are the kept plan's, and come in ev_id order
select g.q, count(*) as windows,
       bool_and(g.ids = p.ids) as same_as_plan,
       bool_and(g.ordered) as in_ev_id_order
  from (select q, win, array_agg(msg_id order by msg_id) as ids,
               array_agg(msg_id order by seq) = array_agg(msg_id order by msg_id) as ordered
          from dw88.got group by q, win) g
  join dw88.plan p on p.q = g.q and p.win = g.win
 group by g.q order by g.q;
-- each key's events in the same order in both queues
select count(*) as keys, bool_and(b = p) as same_order_per_key
  from (select key, array_agg(payload order by seq) filter (where q = 'db:c') as b,
               array_agg(payload order by seq) filter (where q = 'dp:c') as p
          from dw88.got group by key) k;

-- How a window was read, in the statistics of the transaction that read it
-- (the pending counts, which grow only, so as a difference within one
-- transaction): the read without the executor fetches each row through the
-- ev_txid index (the index's tuples fetched); the kept plan's bitmap scans
-- fetch none there.  The later parts of a window come from the part cache.
create function dw88.index_fetched(i_queue text) returns bigint language sql as $$
    select coalesce(sum(pg_catalog.pg_stat_get_xact_tuples_fetched(i.indexrelid)), 0)::bigint
      from pg_catalog.pg_index i join pg_catalog.pg_class c on c.oid = i.indrelid
     where c.relnamespace = 'pgque'::regnamespace
       and c.relname like 'event\_' || (select queue_id from pgque.queue where queue_name = i_queue) || '\_%'
$$;
-- drain c in parts of 7 (round r): the rows each queue's reads fetched
-- through its indexes
create function dw88.drained(r int4, out fetched_db bigint, out fetched_dp bigint) language plpgsql as $$
declare
    db0 bigint;
    dp0 bigint;
begin
    db0 := dw88.index_fetched('db');
    dp0 := dw88.index_fetched('dp');
    perform dw88.take(r, 'c', 7);
    fetched_db := dw88.index_fetched('db') - db0;
    fetched_dp := dw88.index_fetched('dp') - dp0;
end $$;
-- a statement on bucket b of db's current table (%s: its name)
create function dw88.on_bucket(b int4, i_sql text) returns void language plpgsql as $$
begin
    execute format(i_sql, format('pgque.%I', 'event_' || (select queue_id || '_' || queue_cur_table
                                                          from pgque.queue where queue_name = 'db') || '_b' || b));
end $$;
select dw88.send('r6', 40);
select dw88.tick();
select * from dw88.drained(6);

-- A relation the executor reads otherwise is read by the plan, whole:
-- row security on one bucket (the owner's read ignores it, but the policy
-- belongs to the executor), a bucket whose only ev_txid index is partial, ev_txid
-- without its NOT NULL (an owner's ALTER), a table that inherits a bucket
-- (the executor reads it with the bucket).
select dw88.on_bucket(5, 'alter table %s enable row level security');
select dw88.send('r7', 40);
select dw88.tick();
select * from dw88.drained(7);
select dw88.on_bucket(5, 'alter table %s disable row level security');
select dw88.on_bucket(7, 'drop index %s_txid_idx');
select dw88.on_bucket(7, 'create index on %s (ev_txid) where ev_id > 0');
select dw88.send('r8', 40);
select dw88.tick();
select * from dw88.drained(8);
select dw88.on_bucket(7, 'create index on %s (ev_txid)');
-- (PostgreSQL 18 keeps a bucket's NOT NULL, inherited from event_template,
-- and refuses the owner's ALTER with 42P16: there the read stays direct)
create function dw88.drop_txid_not_null(b int4) returns bool language plpgsql as $$
begin
    perform dw88.on_bucket(b, 'alter table %s alter column ev_txid drop not null');
    return true;
exception when invalid_table_definition then
    return false;
end $$;
create table dw88.nullable as select dw88.drop_txid_not_null(2) as nullable;
select dw88.send('r9', 40);
select dw88.tick();
select d.fetched_dp, (d.fetched_db = 0) = n.nullable as plan_read_iff_nullable
  from dw88.drained(9) d, dw88.nullable n;
select dw88.on_bucket(2, 'alter table %s alter column ev_txid set not null');
-- the inheriting table holds a copy of one of the bucket's rows of the
-- window under another id: the plan delivers it, as it always did
create function dw88.child_of_r10() returns void language plpgsql as $$
declare
    bucket regclass;
begin
    execute format('select tableoid::regclass from pgque.%I where ev_data = %L',
                   'event_' || (select queue_id || '_' || queue_cur_table from pgque.queue where queue_name = 'db'),
                   'r10-00001')
       into bucket;
    execute format('create table dw88.child () inherits (%s)', bucket);
    execute format('insert into dw88.child select ev_id + 1000000, ev_time, ev_txid, null, null, ev_type, %L,'
                   '       ev_extra1, null, null, null from %s where ev_data = %L',
                   'in-child', bucket, 'r10-00001');
end $$;
select dw88.send('r10', 40);
select dw88.tick();
select dw88.child_of_r10();
select * from dw88.drained(10);
drop table dw88.child;
-- and plain again: the direct read
select dw88.send('r11', 40);
select dw88.tick();
select * from dw88.drained(11);
select q, round, count(*) as events, count(distinct payload) as distinct_payloads
  from dw88.got where round >= 6 group by 1, 2 order by 1, 2;
select g.q, count(*) as windows, bool_and(g.ids = p.ids) as same_as_plan
  from (select q, win, array_agg(msg_id order by msg_id) as ids from dw88.got where round >= 6 group by q, win) g
  join dw88.plan p on p.q = g.q and p.win = g.win
 group by g.q order by g.q;

-- A consumer role that holds the queue's subscribe right reads through
-- receive (security definer) as before; one without it is refused as before.
create role dw88_reader login;
grant pgque_reader to dw88_reader;
create role dw88_nobody login;
select dw88.send('r12', 10);
select dw88.tick();
set role dw88_reader;
select count(*) as events from pgque.receive('db', 'c', 1000);
reset role;
set role dw88_nobody;
select count(*) from pgque.receive('db', 'c', 1000);
reset role;
drop role dw88_reader;
drop role dw88_nobody;

select pgque.drop_queue('db', true), pgque.drop_queue('dp', true);
drop schema dw88 cascade;
