-- The producer's rightmost-leaf hint on a small ev_txid btree (ADR 0092).
-- Core inserts a key past every other one straight into the rightmost leaf
-- it cached, but caches it only in a tree of 3 levels or more (about
-- 150,000 events); below that, each send descended from the root.  The
-- append now caches the rightmost leaf itself: a send into a two-level
-- index touches one index buffer (the leaf), not two (root and leaf).
select pgque.create_queue('hint');
select queue_id as qid, queue_cur_table as cur from pgque.queue where queue_name = 'hint' \gset
-- a tree of two levels: a few leaves under a root
select count(pgque.send('hint', 'fill ' || g)) as filled from generate_series(1, 2000) g;
-- the index buffers a send touches: 500 sends, one transaction each
create function pgque_test.hint_idx_blocks() returns bigint language sql as $$
    select coalesce(sum(idx_blks_hit + idx_blks_read), 0)::bigint
      from pg_catalog.pg_statio_all_indexes
     where schemaname = 'pgque' and relname = 'event_' || (select queue_id from pgque.queue where queue_name = 'hint')
                                      || '_' || (select queue_cur_table from pgque.queue where queue_name = 'hint')
$$;
select pg_catalog.pg_stat_force_next_flush();
select pg_catalog.pg_stat_clear_snapshot();
select pgque_test.hint_idx_blocks() as b0 \gset
do $$
begin
    for i in 1..500 loop
        perform pgque.send('hint', 'one ' || i);
        commit;
    end loop;
end $$;
select pg_catalog.pg_stat_force_next_flush();
select pg_catalog.pg_stat_clear_snapshot();
select (pgque_test.hint_idx_blocks() - :b0) / 500.0 < 1.3 as one_leaf_per_send;
-- the same through send_batch (rows of one transaction share the key)
select cardinality(pgque.send_batch('hint', 'b', array_fill('x'::text, array[300]))) as batched;
-- an owner's second btree, on a column whose keys go anywhere (ev_data):
-- the direct append keeps both (ADR 0085), the hint of the second is
-- dropped by core at almost every append and made again at most once in 16
select format('create index hint_data_idx on pgque.event_%s_%s (ev_data)', :qid, :cur) as ddl \gset
:ddl;
do $$
begin
    for i in 1..500 loop
        perform pgque.send('hint', md5(i::text));
        commit;
    end loop;
end $$;
-- every row is in the indexes, and the indexes are sound
create extension if not exists amcheck;
select count(*) as checked from pg_catalog.pg_index i
  join pg_catalog.pg_class t on t.oid = i.indrelid
 where t.relnamespace = 'pgque'::regnamespace and t.relname like 'event\_' || :qid || '\_%'
   and bt_index_parent_check(i.indexrelid, true) is not null;
set enable_seqscan = off;
select count(*) as by_index from pgque.event_template
 where tableoid::regclass::text like 'pgque.event\_' || :qid || '\_%' and ev_txid >= '0';
reset enable_seqscan;
select pgque.drop_queue('hint', true);
drop function pgque_test.hint_idx_blocks();
drop extension amcheck;
