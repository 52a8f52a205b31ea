-- The second reader's attacks on this session's changes (ADR 0129): the
-- drain's block-order read and the part handed straight out (ADR 0127:
-- src/window_direct.c, src/receive.c), the queue's DDL lock written once
-- in C (pgque._queue_lock, src/locks.c) and the event index's shapes an
-- owner can give a table (a btree or a BRIN, ADR 0126: whichever the
-- build makes, this file's output is the same).  Each attack here held;
-- the file keeps it held.  Workers are off; ticks are explicit.  Queue
-- and batch ids are never printed.  The file sorts before 10_roles (its
-- number is 100): pgque's sequences are set back at its end to where they
-- were, so that the files after it print the ids they always printed.

create temp table t100_seqs as
select c.oid, pg_sequence_last_value(c.oid) as v from pg_class c
 where c.relkind = 'S' and c.relnamespace = 'pgque'::regnamespace;

create role t100_reader login;
grant pgque_reader to t100_reader;
create role t100_writer login;
grant pgque_writer to t100_writer;
create role t100_admin login;
grant pgque_admin to t100_admin;
create role t100_login login;
grant usage on schema pgque_test to public;

-- _queue_lock and the event index's probes are the owner's alone: no
-- pgque role, no other role may call them (the probes exist once the
-- BRIN does; counted, not named, so that both builds print the same)
select count(*) filter (where has_function_privilege(r.oid, p.oid, 'execute')) as callable_by_others
  from pg_proc p, pg_roles r
 where p.pronamespace = 'pgque'::regnamespace
   and p.proname in ('_queue_lock', '_lock', '_event_txid_reaches', '_event_txid_newest',
                     '_create_event_txid_index')
   and r.rolname in ('pgque_admin', 'pgque_reader', 'pgque_writer', 't100_reader', 't100_writer',
                     't100_admin', 't100_login');
set role t100_admin;
select pgque_test.error_of($$select pgque._queue_lock(1, true, false)$$) as queue_lock_by_admin;
reset role;
set role t100_login;
select pgque_test.error_of($$select pgque._queue_lock(1, false, false)$$) as queue_lock_by_login;
reset role;

-- _queue_lock's input: a key out of the lock's range is refused (22003),
-- NULLs return NULL (strict), and no lock is left behind
select pgque_test.error_of($$select pgque._queue_lock(-1, false, false)$$) as negative_queue_id;
select pgque._queue_lock(null, false, false) as null_id, pgque._queue_lock(1, null, false) as null_mode;
select count(*) as locks_left from pg_locks
 where locktype = 'object' and classid = 'pgque.queue'::regclass and pid = pg_backend_pid();

-- a planted "queue" table first on the caller's path: the lock is still
-- pgque.queue's (resolved in schema pgque by its OID, never by the path)
create schema t100_evil;
create table t100_evil.queue (queue_id int4);
begin;
set local search_path = t100_evil, pgque, pg_catalog;
select pgque._queue_lock(424242, false, true) as locked;
select classid = 'pgque.queue'::regclass as on_pgque_queue, objid, mode from pg_locks
 where locktype = 'object' and objid = 424242 and pid = pg_backend_pid();
commit;
set client_min_messages = warning;
drop schema t100_evil cascade;
reset client_min_messages;

-- ... and a queue of a consumer with planted names: the DDL lock's
-- wrappers (drop_queue's exclusive one, the workers' shared try) still
-- meet on pgque.queue's key
select pgque.create_queue('att100');
set role t100_reader;
select pgque.subscribe('att100', 'c100');
reset role;

-- The part handed straight out (ADR 0127), attacked with what the
-- owner of the tables can do: a row updated after the others were
-- written, so that its new version lies at the heap's end, out of ev_id
-- order; a part of most of a window whose result spills to disk (a
-- work_mem of 64 kB), so the rows streamed before the stray one are read
-- back from the tuplestore's file into the part cache.  The part is in
-- ev_id order, whole, and with the rest it is every event once.
set role t100_writer;
select count(*) as sent from (select pgque.send_batch('att100', array(select 'p' || g from generate_series(1, 1500) g))
                              union all
                              select pgque.send_batch('att100', array(select 'q' || g from generate_series(1, 1500) g))) s;
reset role;
do $$
declare
    q pgque.queue;
begin
    select * into q from pgque.queue where queue_name = 'att100';
    execute format('update pgque.%I set ev_data = ev_data || %L where ev_data = %L',
                   'event_' || q.queue_id || '_' || q.queue_cur_table, '-moved', 'p10');
end $$;
select pgque.ticker('att100') is not null as ticked;
set role t100_reader;
set work_mem = '64kB';
create temp table part1 as select row_number() over () as rn, * from pgque.receive('att100', 'c100', 2500);
reset work_mem;
select count(*) as part, count(distinct msg_id) as distinct_ids,
       bool_and(msg_id > prev) as in_id_order,
       count(*) filter (where payload = 'p10-moved') as moved_row_in_it
  from (select *, lag(msg_id, 1, 0::bigint) over (order by rn) as prev from part1) x;
select pgque.ack((select max(batch_id) from part1)) as acked;
create temp table part2 as select * from pgque.receive('att100', 'c100', 2500);
select count(*) as rest, min(msg_id) > (select max(msg_id) from part1) as after_part1 from part2;
select count(*) as every_event, count(distinct msg_id) as once
  from (select msg_id from part1 union all select msg_id from part2) u;
select pgque.ack((select max(batch_id) from part2)) as acked;
reset role;

-- The same part asked twice before its ack (streamed whole, it is not
-- kept: read again from the table) and by a cursor held across the
-- second receive: the same rows, and nothing of another consumer's.
set role t100_writer;
select count(pgque.send('att100', 'ev', 'r' || g)) as sent from generate_series(1, 40) g;
reset role;
set role t100_reader;
select pgque.subscribe('att100', 'c100b');
reset role;
set role t100_writer;
select count(pgque.send('att100', 'ev', 's' || g)) as sent from generate_series(1, 40) g;
reset role;
select pgque.ticker('att100') is not null as ticked;
set role t100_reader;
begin;
declare c1 cursor for select * from pgque.receive('att100', 'c100', 1000);
move 1 in c1;
create temp table again as select * from pgque.receive('att100', 'c100', 1000);
create temp table other as select * from pgque.receive('att100', 'c100b', 1000);
fetch all from c1 \g /dev/null
commit;
-- the part again: the same messages; the other consumer's window is the
-- same one (it subscribed before that tick), read under its own batch
select count(*) as first_consumer, count(*) filter (where payload like 'r%') as r_events
  from again;
select count(*) as second_consumer,
       (select array_agg(msg_id order by msg_id) from again) = array_agg(msg_id order by msg_id) as same_events,
       bool_and(batch_id <> (select max(batch_id) from again)) as its_own_batch
  from other;
select pgque.ack((select max(batch_id) from again)) as acked, pgque.ack((select max(batch_id) from other)) as acked_b;
reset role;

-- Memory per call stays flat: 60 windows, each sent, ticked, received in
-- parts of 30 (the first streamed, the rest from the cache) and acked, a
-- transaction each; the backend's memory contexts before and after.
create temp table mem (at text, bytes bigint);
insert into mem select 'before', sum(total_bytes) from pg_backend_memory_contexts;
\o /dev/null
\set ECHO none
select format($f$select pgque.send_batch('att100', array(select 'm' || g from generate_series(1, 50) g))$f$),
       $f$select pgque.ticker('att100')$f$,
       $f$select pgque.ack(b) from (select distinct batch_id as b from pgque.receive('att100', 'c100', 30)) x$f$,
       $f$select pgque.ack(b) from (select distinct batch_id as b from pgque.receive('att100', 'c100', 30)) x$f$,
       $f$select pgque.ack(b) from (select distinct batch_id as b from pgque.receive('att100', 'c100b', 100)) x$f$
  from generate_series(1, 60) \gexec
\set ECHO all
\o
insert into mem select 'after', sum(total_bytes) from pg_backend_memory_contexts;
select (select bytes from mem where at = 'after') - (select bytes from mem where at = 'before') < 65536
       as memory_flat_over_60_windows;
select count(*) as left_over from pgque.receive('att100', 'c100', 1000);

-- An owner's shapes of a table's ev_txid index, which every reader must
-- read right or pass over (the plan then reads): none at all, a btree in
-- descending order, only ones no reader may use (a hash, a partial
-- btree, a btree with a column included).  Each time a
-- tick (whose summariser, with a BRIN, skips a table it cannot use) and a
-- window read whole and once.
create function pg_temp.reindex_att100(i_how text) returns void language plpgsql as $$
declare
    q pgque.queue;
    t int4;
    tbl text;
    r record;
begin
    select * into q from pgque.queue where queue_name = 'att100';
    for t in 0 .. q.queue_ntables - 1 loop
        tbl := 'event_' || q.queue_id || '_' || t;
        for r in select c.relname from pg_index i join pg_class c on c.oid = i.indexrelid
                  where i.indrelid = ('pgque.' || tbl)::regclass loop
            execute format('drop index pgque.%I', r.relname);
        end loop;
        if i_how = 'desc' then
            execute format('create index %I on pgque.%I (ev_txid desc)', tbl || '_txid_idx', tbl);
        elsif i_how = 'odd' then
            -- none a reader may use: a hash, a partial btree, one with a column included
            execute format('create index %I on pgque.%I using hash (ev_txid)', tbl || '_txid_hash', tbl);
            execute format('create index %I on pgque.%I (ev_txid) where ev_id > 0', tbl || '_txid_part', tbl);
            execute format('create index %I on pgque.%I (ev_txid) include (ev_id)', tbl || '_txid_incl', tbl);
        end if;
    end loop;
end $$;
create function pg_temp.round() returns table (got bigint, distinct_ids bigint, in_order boolean)
language plpgsql as $$
declare
    b bigint;
begin
    create temp table rr as select row_number() over () as rn, * from pgque.receive('att100', 'c100', 100000);
    select max(batch_id) into b from rr;
    perform pgque.ack(b);
    perform pgque.ack(x.batch_id) from (select distinct batch_id from pgque.receive('att100', 'c100b', 100000)) x;
    return query select count(*), count(distinct msg_id),
                        coalesce(bool_and(msg_id > prev), true)
                   from (select *, lag(msg_id, 1, 0::bigint) over (order by rn) as prev from rr) x;
    drop table rr;
end $$;
select pg_temp.reindex_att100('none');
select pgque.send_batch('att100', array(select 'n' || g from generate_series(1, 300) g)) is not null as sent;
select pgque.ticker('att100') is not null as ticked;
select * from pg_temp.round();
select pg_temp.reindex_att100('desc');
select pgque.send_batch('att100', array(select 'd' || g from generate_series(1, 300) g)) is not null as sent;
select pgque.ticker('att100') is not null as ticked;
select * from pg_temp.round();
select pg_temp.reindex_att100('odd');
select pgque.send_batch('att100', array(select 'o' || g from generate_series(1, 300) g)) is not null as sent;
select pgque.ticker('att100') is not null as ticked;
select * from pg_temp.round();

select pgque.drop_queue('att100', true) as dropped;
drop owned by t100_reader, t100_writer, t100_admin, t100_login;
drop role t100_reader, t100_writer, t100_admin, t100_login;
revoke usage on schema pgque_test from public;
select count(pg_catalog.setval(s.oid::regclass, coalesce(s.v, q.seqstart), s.v is not null)) >= 0 as sequences_back
  from t100_seqs s join pg_sequence q on q.seqrelid = s.oid;
