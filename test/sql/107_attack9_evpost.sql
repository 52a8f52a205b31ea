-- The second reader of evpost.c (a send_batch chunk's ev_txid entries as
-- posting tuples on the index's rightmost leaf, ADR 0138): the attacks that
-- found nothing, kept as guards.  A batch of 3,000 events is the yardstick:
-- through evpost it leaves 19 leaf tuples (17 posting tuples), row by row
-- with core's deduplication 51 (14), row by row without any 3,000.  Every
-- btree of these queues' tables checked with its heap by amcheck
-- (heapallindexed, rootdescend) at the end.  Workers are off.  The file sorts before
-- 10_roles (its number is 107): pgque's sequences are set back at its end to
-- where they were.

create temp table t107_seqs as
select c.oid, pg_sequence_last_value(c.oid) as v from pg_class c
 where c.relkind = 'S' and c.relnamespace = 'pgque'::regnamespace;
create extension if not exists pageinspect;
create extension if not exists amcheck;

-- the leaf entries of an index: tuples, posting tuples, heap TIDs
create function pg_temp.leaf(i regclass, out tuples bigint, out postings bigint, out tids bigint)
language sql as $$
    select count(*), count(*) filter (where p.tids is not null),
           coalesce(sum(coalesce(cardinality(p.tids), 1)), 0)
      from generate_series(1, pg_relation_size(i) / current_setting('block_size')::int - 1) b,
           bt_page_stats(i::text, b::int) s, bt_page_items(i::text, b::int) p
     where s.type = 'l' and (s.btpo_next = 0 or p.itemoffset > 1)
$$;
-- a queue's current event table (bucket b: its bucket table)
create function pg_temp.tbl(q text, b int4 default null) returns regclass language sql as $$
    select ('pgque.' || pgque._event_table(queue_id, queue_cur_table, b))::regclass
      from pgque.queue where queue_name = q
$$;
create function pg_temp.idx(q text, b int4 default null) returns regclass language sql as $$
    select (pg_temp.tbl(q, b)::text || '_txid_idx')::regclass
$$;
-- the rightmost leaf of an index: its block, items and LP_DEAD items
create function pg_temp.rightmost(i regclass, out blkno int4, out leftmost boolean, out live int4, out dead int4)
language sql as $$
    select s.blkno, s.btpo_prev = 0, s.live_items, s.dead_items
      from generate_series(1, pg_relation_size(i) / current_setting('block_size')::int - 1) b,
           bt_page_stats(i::text, b::int) s
     where s.type = 'l' and s.btpo_next = 0
$$;

-- Indexes a superuser adds on ev_txid: evpost writes into those a
-- deduplication could have written (the second plain one, fillfactor 10),
-- not into one whose opclass has no equalimage function (allequalimage
-- off), an INCLUDE, NULLS FIRST or DESC one, or deduplicate_items off
create operator class pg_temp_xid8_noeq for type xid8 using btree as
    operator 1 <, operator 2 <=, operator 3 =, operator 4 >=, operator 5 >,
    function 1 xid8cmp(xid8, xid8);
select pgque.create_queue('a9ix') is not null as created;
do $$ begin
    execute format('create index a9_noeq on %s (ev_txid pg_temp_xid8_noeq)', pg_temp.tbl('a9ix'));
    execute format('create index a9_incl on %s (ev_txid) include (ev_id)', pg_temp.tbl('a9ix'));
    execute format('create index a9_nf on %s (ev_txid nulls first)', pg_temp.tbl('a9ix'));
    execute format('create index a9_desc on %s (ev_txid desc)', pg_temp.tbl('a9ix'));
    execute format('create index a9_ff on %s (ev_txid) with (fillfactor = 10)', pg_temp.tbl('a9ix'));
    execute format('create index a9_two on %s (ev_txid)', pg_temp.tbl('a9ix'));
    execute format('create index a9_dd on %s (ev_txid) with (deduplicate_items = off)', pg_temp.tbl('a9ix'));
end $$;
select allequalimage from bt_metap('pgque.a9_noeq');
select cardinality(pgque.send_batch('a9ix', 't', array_fill('a'::text, array[3000]))) as sent;
select replace(i::text, pg_temp.tbl('a9ix')::text, 'own') as index, l.*
  from unnest(array['pgque.a9_noeq', 'pgque.a9_incl', 'pgque.a9_nf', 'pgque.a9_desc', 'pgque.a9_ff',
                    'pgque.a9_two', 'pgque.a9_dd', pg_temp.idx('a9ix')]::regclass[]) with ordinality u(i, n),
       pg_temp.leaf(i) l
 order by n;

-- REINDEX CONCURRENTLY and CREATE INDEX CONCURRENTLY of an ev_txid index
-- between batches: the new index takes the next batch as posting tuples
reindex index concurrently pgque.a9_two;
select pg_temp.tbl('a9ix') as a9ix_tbl \gset
create index concurrently a9_cic on :a9ix_tbl (ev_txid);
select cardinality(pgque.send_batch('a9ix', 't', array_fill('b'::text, array[3000]))) as sent;
select i::text as index, l.* from unnest(array['pgque.a9_two', 'pgque.a9_cic']::regclass[]) i, pg_temp.leaf(i) l
 order by 1;

-- a unique, partial or expression index makes the table the executor's
-- (the kept plan, index_insert row by row): a batch goes in whole
select pgque.create_queue('a9plan') is not null as created;
select pg_temp.tbl('a9plan') as a9plan_tbl \gset
create unique index a9_uniq on :a9plan_tbl (ev_id);
create index a9_part on :a9plan_tbl (ev_txid) where ev_type = 't';
create index a9_expr on :a9plan_tbl ((ev_txid::text));
select cardinality(pgque.send_batch('a9plan', 't', array_fill('p'::text, array[3000]))) as sent;
select (pg_temp.leaf(pg_temp.idx('a9plan'))).*;

-- an unlogged queue (no WAL for its tables): posting tuples all the same
select pgque.create_queue('a9unl', '{"unlogged": true}') is not null as created;
select relpersistence from pg_class where oid = pg_temp.idx('a9unl');
select cardinality(pgque.send_batch('a9unl', 't', array_fill('u'::text, array[3000]))) as sent;
select (pg_temp.leaf(pg_temp.idx('a9unl'))).*;

-- partition buckets: a batch's rows split by key, each bucket's index its own posting tuples
select pgque.create_queue('a9bkt') is not null as created;
select pgque.set_queue_config('a9bkt', 'partition_buckets', '4') is not null as configured;
select cardinality(pgque.send_batch('a9bkt', 't', array_fill('k'::text, array[3000]),
       (select array_agg((g % 11)::text order by g) from generate_series(1, 3000) g))) as sent;
select sum((pg_temp.leaf(pg_temp.idx('a9bkt', b))).tids) as tids,
       sum((pg_temp.leaf(pg_temp.idx('a9bkt', b))).postings) > 4 as posted
  from generate_series(0, 3) b;

-- the rightmost leaf emptied by a DELETE and VACUUM, not the leftmost: no
-- lower bound is read there, so the batch goes through index_insert
select pgque.create_queue('a9emp') is not null as created;
select pg_temp.tbl('a9emp') as a9emp_tbl \gset
select cardinality(pgque.send_batch('a9emp', 't', array_fill('a'::text, array[3000]))) as sent;
select cardinality(pgque.send_batch('a9emp', 't', array_fill('z'::text, array[900]))) as sent;
delete from :a9emp_tbl where ev_data = 'z';
vacuum :a9emp_tbl;
select leftmost, live from pg_temp.rightmost(pg_temp.idx('a9emp'));
select cardinality(pgque.send_batch('a9emp', 't', array_fill('b'::text, array[500]))) as sent;
select leftmost, live > 0 as refilled from pg_temp.rightmost(pg_temp.idx('a9emp'));

-- the rightmost leaf full of a rolled-back batch's entries, marked LP_DEAD
-- by an index scan: no room for a posting tuple, index_insert deletes them
-- and the rest of the batch is posted
select pgque.create_queue('a9dead') is not null as created;
select pg_temp.tbl('a9dead') as a9dead_tbl \gset
select cardinality(pgque.send_batch('a9dead', 't', array_fill('a'::text, array[200]))) as sent;
begin;
select cardinality(pgque.send_batch('a9dead', 't', array_fill('gone'::text, array[1000]))) as sent;
rollback;
set enable_seqscan = off;
set enable_bitmapscan = off;
select count(*) from :a9dead_tbl where ev_txid > '0'::xid8;
select count(*) from :a9dead_tbl where ev_txid > '0'::xid8;
reset enable_seqscan;
reset enable_bitmapscan;
select dead > 0 as dead_marked from pg_temp.rightmost(pg_temp.idx('a9dead'));
select cardinality(pgque.send_batch('a9dead', 't', array_fill('b'::text, array[1000]))) as sent;
select dead as dead_left from pg_temp.rightmost(pg_temp.idx('a9dead'));
select (pg_temp.leaf(pg_temp.idx('a9dead'))).*;

-- a batch rolled back by a PL/pgSQL exception after its posting tuples
-- were written, then one more: only the second is read through the index
select pgque.create_queue('a9exc') is not null as created;
select pg_temp.tbl('a9exc') as a9exc_tbl \gset
do $$ begin
    begin
        perform pgque.send_batch('a9exc', 't', array_fill('gone'::text, array[700]));
        raise exception 'undo';
    exception when raise_exception then null;
    end;
    perform pgque.send_batch('a9exc', 't', array_fill('kept'::text, array[700]));
end $$;
set enable_seqscan = off;
set enable_bitmapscan = off;
select ev_data, count(*) from :a9exc_tbl where ev_txid > '0'::xid8 group by 1;
reset enable_seqscan;
reset enable_bitmapscan;

-- toasted payloads (3 kB of hex each, 2,000 of them) and a batch of
-- 100,000 events: the index holds one TID per row
select pgque.create_queue('a9big') is not null as created;
select cardinality(pgque.send_batch('a9big', 't', (select array_agg(p) from (
       select string_agg(md5(g::text || x::text), '') p from generate_series(1, 2000) g, generate_series(1, 96) x
        group by g) s))) as sent;
select cardinality(pgque.send_batch('a9big', 't', array_fill('x'::text, array[100000]))) as sent;
select tids, postings > 400 as posted from pg_temp.leaf(pg_temp.idx('a9big'));

-- rotation step 1 inside a producer's transaction between two of its
-- batches: one key in two tables, every event received once
select pgque.create_queue('a9rot') is not null as created;
select pgque.subscribe('a9rot', 'c') is not null as subscribed;
select pgque.set_queue_config('a9rot', 'rotation_period', '1 millisecond') is not null as configured;
select pgque.send('a9rot', 'first') > 0 as sent;
select pgque.ticker('a9rot') is not null as ticked;
select pgque.ack(max(batch_id)) is not null as acked from pgque.receive('a9rot', 'c', 100);
select pg_sleep(0.01);
begin;
select cardinality(pgque.send_batch('a9rot', 't', array_fill('r1'::text, array[500]))) as sent;
select pgque.maint_rotate_tables_step1('a9rot') as rotated;
select cardinality(pgque.send_batch('a9rot', 't', array_fill('r2'::text, array[500]))) as sent;
commit;
select pgque.maint_rotate_tables_step2() >= 0 as step2;
select pgque.ticker('a9rot') is not null as ticked;
select payload, count(*) as received, count(distinct msg_id) as distinct_ids
  from pgque.receive('a9rot', 'c', 10000) group by 1 order by 1;

-- every btree of these queues' tables sound and holding every row
select count(*) as indexes_sound
  from pgque.queue q join pg_class t on t.relname like 'event\_' || q.queue_id || '\_%'
       join pg_index i on i.indrelid = t.oid join pg_class c on c.oid = i.indexrelid
       join pg_am a on a.oid = c.relam
 where q.queue_name like 'a9%' and t.relnamespace = 'pgque'::regnamespace and t.relkind = 'r'
   and a.amname = 'btree' and bt_index_parent_check(i.indexrelid, true, true) is not null;

select count(pgque.drop_queue(q, true)) as dropped
  from unnest(array['a9ix', 'a9plan', 'a9unl', 'a9bkt', 'a9emp', 'a9dead', 'a9exc', 'a9big', 'a9rot']) q;
drop operator class pg_temp_xid8_noeq using btree;
drop operator family pg_temp_xid8_noeq using btree;
select count(pg_catalog.setval(s.oid::regclass, coalesce(s.v, q.seqstart), s.v is not null)) >= 0 as sequences_back
  from t107_seqs s join pg_sequence q on q.seqrelid = s.oid;
-- the extensions go with the file: a later one creating amcheck (70) gets no NOTICE
drop extension pageinspect;
drop extension amcheck;
