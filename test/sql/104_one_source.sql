-- One source for the rules C and SQL shared (ADR 0133): each now has one
-- entry point, and this file checks its outcomes and errors.
--   * the event relations' names: pgque._event_table / pgque._event_seq
--     (C, src/rules.c), the producer's own spelling too;
--   * a window's source text: pgque._source_part / pgque._source_join
--     (C, src/source.c), which window_direct.c parses back;
--   * opening a plain consumer's batch: pgque._open_batch, the open of
--     _next_batch and of receive()'s _plain_receive_open.
-- Workers are off; ticks are explicit.  Queue and batch ids are never
-- printed (a name is shown with its queue id replaced by Q).  The file
-- sorts before 10_roles (its number is 104): pgque's sequences are set back
-- at its end, so that the files after it print the ids they always printed.

create temp table t104_seqs as
select c.oid, pg_sequence_last_value(c.oid) as v from pg_class c
 where c.relkind = 'S' and c.relnamespace = 'pgque'::regnamespace;

-- the entry points are internal: no pgque role may call them
select p.proname, count(*) filter (where has_function_privilege(r.oid, p.oid, 'execute')) as callable_by_roles
  from pg_proc p, pg_roles r
 where p.pronamespace = 'pgque'::regnamespace
   and p.proname in ('_event_table', '_event_seq', '_source_part', '_source_join', '_open_batch')
   and r.rolname in ('pgque_reader', 'pgque_writer', 'pgque_admin', 'public')
 group by p.proname order by p.proname;

-- names: the parent, a child table, a bucket, the sequences
select pgque._event_table(7, null, null) as parent, pgque._event_table(7, 2, null) as child,
       pgque._event_table(7, 2, 31) as bucket,
       pgque._event_seq(7, 'id') as id_seq, pgque._event_seq(7, 'tick') as tick_seq;
-- the largest int4s fit a name (63 bytes)
select pgque._event_table(2147483647, 2147483647, 2147483647) as longest,
       length(pgque._event_table(2147483647, 2147483647, 2147483647)) as bytes;
-- bad input: a clear message and its SQLSTATE
select pgque_test.error_of($$select pgque._event_table(null, 0, null)$$) as null_queue;
select pgque_test.error_of($$select pgque._event_table(-1, 0, null)$$) as negative_queue;
select pgque_test.error_of($$select pgque._event_table(1, -3, null)$$) as negative_table;
select pgque_test.error_of($$select pgque._event_table(1, 0, -1)$$) as negative_bucket;
select pgque_test.error_of($$select pgque._event_table(1, null, 4)$$) as bucket_without_table;
select pgque_test.error_of($$select pgque._event_seq(null, 'id')$$) as seq_null_queue;
select pgque_test.error_of($$select pgque._event_seq(1, null)$$) as seq_null_kind;
select pgque_test.error_of($$select pgque._event_seq(1, 'ID')$$) as seq_unknown_kind;
select pgque_test.error_of($$select pgque._event_seq(1, repeat('x', 100))$$) as seq_long_kind_cut;

-- a queue's relations are made and found by these names: the tables and
-- sequences create_queue and the buckets made are exactly the names
select pgque.create_queue('os104') as created;
select pgque.set_queue_config('os104', 'partition_buckets', '4') as bucketed;
with q as (select * from pgque.queue where queue_name = 'os104'),
     named as (
       select pgque._event_table(q.queue_id, null, null) as n from q
       union all select pgque._event_table(q.queue_id, t, null) from q, generate_series(0, q.queue_ntables - 1) t
       union all select pgque._event_table(q.queue_id, t, b) from q, generate_series(0, q.queue_ntables - 1) t,
                                                              generate_series(0, q.queue_partition_buckets - 1) b
       union all select pgque._event_seq(q.queue_id, 'id') from q
       union all select pgque._event_seq(q.queue_id, 'tick') from q),
     made as (
       select c.relname::text as n from pg_class c, q
        where c.relnamespace = 'pgque'::regnamespace and c.relkind in ('r', 'S')
          and c.relname::text ~ ('^event_' || q.queue_id || '(_|$)'))
select (select count(*) from named) as named,
       (select count(*) from made) as made,
       not exists (select n from named except select n from made)
       and not exists (select n from made except select n from named) as the_same,
       (select q.queue_data_pfx = 'pgque.' || pgque._event_table(q.queue_id, null, null)
               and q.queue_event_seq = 'pgque.' || pgque._event_seq(q.queue_id, 'id')
               and q.queue_tick_seq = 'pgque.' || pgque._event_seq(q.queue_id, 'tick') from q) as the_row_says_so;

-- the producer (C: append.c, insert_plan.c) writes to the table SQL names
-- current_event_table: a keyed event goes to its bucket of that table
select pgque.send('os104', 'k1', 'one') is not null as sent,
       pgque.send_batch('os104', 'k2', array['two', 'three']) is not null as sent_batch;
select regexp_replace(pgque.current_event_table('os104'), 'event_[0-9]+_', 'event_Q_') as current_table;
create function pg_temp.rows_in(i_table text) returns bigint language plpgsql as $$
declare n bigint;
begin
    execute 'select count(*) from ' || i_table into n;
    return n;
end $$;
select pg_temp.rows_in(pgque.current_event_table('os104')) as rows_under_current;

-- the source's text: the parts and their join, exactly
select pgque._source_part('event_7_1', false, null) as whole,
       pgque._source_part('event_7_1', true, ' where x') as only_filtered,
       pgque._source_part('Odd Name', false, null) as quoted;
select pgque._source_join(array['select * from pgque.a', null, 'select * from pgque.b']) as joined_skipping_null,
       pgque._source_join(array['select * from pgque.a']) as one,
       pgque._source_join('{}'::text[]) as empty,
       pgque._source_join(null) is null as strict;
select pgque_test.error_of($$select pgque._source_part(null, false, null)$$) as part_null_relation;
select pgque_test.error_of($$select pgque._source_part('a', null, null)$$) as part_null_only;

-- _event_source as the readers get it: a plain reader of every bucket, a
-- slot of 2 (its own buckets), a slot of 3 (3 does not divide 4: filtered)
select pgque.ticker('os104') is not null as ticked;
select regexp_replace(pgque._event_source(q, lo.tick_snapshot, hi.tick_snapshot, n, s),
                      'event_[0-9]+_', 'event_Q_', 'g') as source
  from pgque.queue q, pgque.tick lo, pgque.tick hi,
       (values (null::int4, null::int4), (2, 1), (3, 2)) v(n, s)
 where q.queue_name = 'os104' and lo.tick_queue = q.queue_id and hi.tick_queue = q.queue_id
   and lo.tick_id = 1 and hi.tick_id = 2
 order by n nulls first;

-- opening a batch: receive() and next_batch() open through _open_batch
-- and hand out the same window from the same row state
select pgque.subscribe('os104', 'c_recv') as sub1, pgque.subscribe('os104', 'c_next') as sub2;
select pgque.send('os104', 'k3', 'four') is not null as sent;
select pgque.ticker('os104') is not null as ticked;
create temp table t104_got as select * from pgque.receive('os104', 'c_recv', 100);
select payload from t104_got order by msg_id;
select pgque.next_batch('os104', 'c_next') is not null as opened;
select co.co_name, s.sub_batch is not null as open, s.sub_next_tick - s.sub_last_tick as ticks,
       s.sub_batch_pos is null as pos_cleared, s.sub_active is not null as active
  from pgque.subscription s join pgque.consumer co on co.co_id = s.sub_consumer
  join pgque.queue q on q.queue_id = s.sub_queue
 where q.queue_name = 'os104' order by co.co_name;
-- the same events by the batch next_batch opened
select ev_data from pgque.get_batch_events(pgque.next_batch('os104', 'c_next')) order by ev_id;
-- nothing past the last tick: neither opens, the row stays
select pgque.finish_batch(pgque.next_batch('os104', 'c_next')) as finished,
       pgque.ack((select distinct batch_id from t104_got)) as acked;
select count(*) as nothing_more from pgque.receive('os104', 'c_recv', 100);
select pgque.next_batch('os104', 'c_next') is null as none_to_open;
select co.co_name, s.sub_batch is null as none_open, s.sub_next_tick is null as no_next
  from pgque.subscription s join pgque.consumer co on co.co_id = s.sub_consumer
  join pgque.queue q on q.queue_id = s.sub_queue
 where q.queue_name = 'os104' order by co.co_name;
-- _open_batch itself on a row with no later tick: nothing opened, NULLs
select o.batch_id is null as no_batch, (o.nxt).tick_id is null as no_tick
  from pgque.subscription s join pgque.consumer co on co.co_id = s.sub_consumer
  join pgque.tick t on t.tick_queue = s.sub_queue and t.tick_id = s.sub_last_tick,
       pgque._open_batch(s, t, null, null, null, null) o
 where co.co_name = 'c_next';
-- a merged-windows consumer's span goes through it too: three windows
-- waiting, receive(100) of a consumer that merges takes them in one batch
-- (ADR 0057); next_batch_custom's min_count through it: two windows
select pgque.set_consumer_config('os104', 'c_recv', 'merge_windows', 'true') as merging;
select pgque.send('os104', 'k4', 'w1') is not null as sent;
select pgque.ticker('os104') is not null as ticked;
select pgque.send('os104', 'k4', 'w2') is not null as sent;
select pgque.ticker('os104') is not null as ticked;
select pgque.send('os104', 'k4', 'w3') is not null as sent;
select pgque.ticker('os104') is not null as ticked;
select payload from pgque.receive('os104', 'c_recv', 100) order by msg_id;
select b.cur_tick_id - b.prev_tick_id as custom_ticks_spanned
  from pgque.next_batch_custom('os104', 'c_next', null, 2, null) b;
select co.co_name, s.sub_next_tick - s.sub_last_tick as ticks_spanned
  from pgque.subscription s join pgque.consumer co on co.co_id = s.sub_consumer
  join pgque.queue q on q.queue_id = s.sub_queue
 where q.queue_name = 'os104' order by co.co_name;

select pgque.drop_queue('os104', true) as dropped;
select count(pg_catalog.setval(s.oid::regclass, coalesce(s.v, q.seqstart), s.v is not null)) >= 0 as sequences_back
  from t104_seqs s join pg_sequence q on q.seqrelid = s.oid;
