-- A send_batch's ev_txid entries as posting tuples (src/evpost.c, ADR 0137):
-- the rows of a batch share their transaction's ev_txid, and their entries
-- go into the index's rightmost leaf as one posting tuple per up to 222
-- rows (deduplication's own limit on an 8 kB page), where index_insert
-- made one entry per row.  Counted with pageinspect over the leaf pages;
-- every index checked with its heap by amcheck.  Only where the index is
-- one deduplication could have written so: deduplicate_items off, or a
-- descending index an owner added, take entries row by row.  Workers are
-- off.  The file sorts before 10_roles (its number is 106): pgque's
-- sequences are set back at its end to where they were.

create temp table t106_seqs as
select c.oid, pg_sequence_last_value(c.oid) as v from pg_class c
 where c.relkind = 'S' and c.relnamespace = 'pgque'::regnamespace;
create extension pageinspect;
create extension amcheck;

select pgque.create_queue('ep106') is not null as created;

-- the leaf entries of an index: tuples, posting tuples, heap TIDs
create function pg_temp.leaf(i regclass, out tuples bigint, out postings bigint, out tids bigint)
language sql as $$
    select count(*), count(*) filter (where p.tids is not null),
           coalesce(sum(coalesce(cardinality(p.tids), 1)), 0)
      from generate_series(1, pg_relation_size(i) / current_setting('block_size')::int - 1) b,
           bt_page_stats(i::text, b::int) s, bt_page_items(i::text, b::int) p
     where s.type = 'l' and (s.btpo_next = 0 or p.itemoffset > 1)
$$;
create function pg_temp.txid_index() returns regclass language sql as $$
    select ('pgque.' || pgque._event_table(queue_id, queue_cur_table, null) || '_txid_idx')::regclass
      from pgque.queue where queue_name = 'ep106'
$$;

-- 500 rows into an empty index: the first makes the leaf, the rest in
-- posting tuples of 222, 222 and 55
select cardinality(pgque.send_batch('ep106', 't', array_fill('a'::text, array[500]))) as sent;
select * from pg_temp.leaf(pg_temp.txid_index());

-- one event: one plain entry; a batch of 10: one posting tuple
select pgque.send('ep106', 'one') > 0 as sent;
select cardinality(pgque.send_batch('ep106', 't', array_fill('b'::text, array[10]))) as sent;
select * from pg_temp.leaf(pg_temp.txid_index());

-- two batches of one transaction: the same key twice, in order
begin;
select cardinality(pgque.send_batch('ep106', 't', array_fill('c'::text, array[10]))) as sent;
select cardinality(pgque.send_batch('ep106', 't', array_fill('d'::text, array[10]))) as sent;
commit;
select * from pg_temp.leaf(pg_temp.txid_index());

-- deduplicate_items off: the index takes no posting tuple, row by row
do $$ begin execute format('alter index %s set (deduplicate_items = off)', pg_temp.txid_index()); end $$;
select cardinality(pgque.send_batch('ep106', 't', array_fill('e'::text, array[10]))) as sent;
select * from pg_temp.leaf(pg_temp.txid_index());
do $$ begin execute format('alter index %s reset (deduplicate_items)', pg_temp.txid_index()); end $$;
select cardinality(pgque.send_batch('ep106', 't', array_fill('f'::text, array[10]))) as sent;
select * from pg_temp.leaf(pg_temp.txid_index());

-- a descending index on ev_txid beside it: its entries row by row, the
-- queue's own index still posting
do $$ begin
    execute format('create index ep106_desc on %s (ev_txid desc)',
                   (select indrelid::regclass from pg_index where indexrelid = pg_temp.txid_index()));
end $$;
create temp table t106_desc as select * from pg_temp.leaf('pgque.ep106_desc');
select cardinality(pgque.send_batch('ep106', 't', array_fill('g'::text, array[10]))) as sent;
select * from pg_temp.leaf(pg_temp.txid_index());
select l.tuples - d.tuples as desc_new_tuples, l.postings - d.postings as desc_new_postings,
       l.tids - d.tids as desc_new_tids
  from pg_temp.leaf('pgque.ep106_desc') l, t106_desc d;

-- every index of the table sound and holding every row (heapallindexed)
select count(*) as indexes_sound from pg_index i
 where i.indrelid = (select indrelid from pg_index where indexrelid = pg_temp.txid_index())
   and bt_index_parent_check(i.indexrelid, true, true) is not null;
select (xpath('/row/c/text()', query_to_xml(format('select count(*) as c from %s',
        (select indrelid::regclass from pg_index where indexrelid = pg_temp.txid_index())), false, true, '')))[1]::text
       as event_rows;

select pgque.drop_queue('ep106', true) as dropped;
-- the extensions go with the file: a later one creating amcheck (70) gets no NOTICE
drop extension pageinspect;
drop extension amcheck;
select count(pg_catalog.setval(s.oid::regclass, coalesce(s.v, q.seqstart), s.v is not null)) >= 0 as sequences_back
  from t106_seqs s join pg_sequence q on q.seqrelid = s.oid;
