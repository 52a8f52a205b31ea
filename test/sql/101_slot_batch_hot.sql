-- A partition slot's batch row updated HOT (ADR 0130): pgque.slot_batch
-- keeps no index on sb_batch, the receive's open, mark and empty-window
-- finish and the ack's finish find the epoch's row by its key (sb_sub,
-- sb_epoch), and what looks a slot batch up by its id alone (pgque.ack,
-- the window of a batch id, the pausing slot's read, the consumer views)
-- answers as before.  Workers are off; ticks are explicit.  Batch ids and
-- epochs are never printed.  The file sorts before 10_roles (its number is
-- 101): pgque's sequences are set back at its end to where they were, so
-- that the files after it print the ids they always printed.

create temp table t101_seqs as
select c.oid, pg_sequence_last_value(c.oid) as v from pg_class c
 where c.relkind = 'S' and c.relnamespace = 'pgque'::regnamespace;

-- the table's indexes: the key alone, no index holds an updated column
select i.indexrelid::regclass as index, pg_get_indexdef(i.indexrelid) as definition
  from pg_index i where i.indrelid = 'pgque.slot_batch'::regclass order by 1;

select pgque.create_queue('sl101') is not null as created;
select pgque.subscribe_slot('sl101', 'c', s, 2) from generate_series(0, 1) s;
-- a key of each slot of 2
create temp table k101 as
select s, (select 'k' || i from generate_series(1, 1000) i
            where pgque._slot_of('k' || i, 2) = s order by i limit 1) as k
  from generate_series(0, 1) s;
-- window 1: slot 1's events only (3); window 2: slot 0's (3), then slot 1's (1)
select count(pgque.send('sl101', 'e', 'a' || i, (select k from k101 where s = 1))) as sent
  from generate_series(1, 3) i;
select pgque.force_tick('sl101') is not null as forced, pgque.ticker('sl101') is not null as ticked;
select count(pgque.send('sl101', 'e', 'b' || i, (select k from k101 where s = 0))) as sent
  from generate_series(1, 3) i;
select count(pgque.send('sl101', 'e', 'c1', (select k from k101 where s = 1))) as sent;
select pgque.force_tick('sl101') is not null as forced, pgque.ticker('sl101') is not null as ticked;

select pgque.claim_slot('sl101', 'c', s, 'w1', '1 hour') is not null as claimed from generate_series(0, 1) s;

create function pg_temp.slot_row(i_slot int4)
returns table (open boolean, marked boolean, pos_set boolean, rows_of_slot bigint)
language sql as $$
    select b.sb_batch is not null, b.sb_last is not null, b.sb_pos is not null,
           (select count(*) from pgque.slot_batch x where x.sb_sub = b.sb_sub)
      from pgque.slot_batch b
      join pgque.subscription s on s.sub_id = b.sb_sub
      join pgque.consumer c on c.co_id = s.sub_consumer
     where c.co_name = pgque._slot_name('c', i_slot, 2)
     order by b.sb_epoch desc limit 1
$$;

-- slot 0, a part of 2 (span 2 x 2 events: window 1 alone, empty for slot
-- 0, is finished by the receive and the next one opened): the part, the
-- row marked at its end; the same part again
begin;
select array_agg(payload order by msg_id) as first_part
  from pgque.receive_partitioned('sl101', 'c', 0, 2, 'w1', 2);
select * from pg_temp.slot_row(0);
select array_agg(payload order by msg_id) as the_same_part_again
  from pgque.receive_partitioned('sl101', 'c', 0, 2, 'w1', 2);
-- the open batch found by its id alone: its window, its source, and
-- pgque.ack refusing a slot's batch as before
select count(*) as window_of_the_id
  from pgque._slot_batch_window((select b.sb_batch from pgque.slot_batch b
                                  join pgque.subscription s on s.sub_id = b.sb_sub
                                  join pgque.consumer c on c.co_id = s.sub_consumer
                                 where c.co_name = pgque._slot_name('c', 0, 2) and b.sb_batch is not null));
select count(*) as source_of_the_id
  from pgque._batch_source((select b.sb_batch from pgque.slot_batch b
                             join pgque.subscription s on s.sub_id = b.sb_sub
                             join pgque.consumer c on c.co_id = s.sub_consumer
                            where c.co_name = pgque._slot_name('c', 0, 2) and b.sb_batch is not null), 2, 0);
select pgque_test.error_of(format('select pgque.ack(%s)',
         (select b.sb_batch from pgque.slot_batch b
            join pgque.subscription s on s.sub_id = b.sb_sub
            join pgque.consumer c on c.co_id = s.sub_consumer
           where c.co_name = pgque._slot_name('c', 0, 2) and b.sb_batch is not null))) as plain_ack_of_a_slot_batch;
-- the consumer's view shows the open batch
select sub_batch is not null as view_shows_the_batch
  from pgque._consumer_state() where consumer_name = pgque._slot_name('c', 0, 2);
select pgque.ack_partitioned('sl101', 'c', 0, 2, 'w1') as part_acked;
select * from pg_temp.slot_row(0);
select array_agg(payload order by msg_id) as the_rest
  from pgque.receive_partitioned('sl101', 'c', 0, 2, 'w1', 10);
select pgque.ack_partitioned('sl101', 'c', 0, 2, 'w1') as window_acked;
select pgque.ack_partitioned('sl101', 'c', 0, 2, 'w1') as nothing_open;
select * from pg_temp.slot_row(0);
-- every update of the epoch's row in this transaction was HOT
select n_tup_upd > 0 as updated, n_tup_upd = n_tup_hot_upd as all_hot
  from pg_stat_xact_user_tables where relid = 'pgque.slot_batch'::regclass;
commit;
select count(*) as nothing_more from pgque.receive_partitioned('sl101', 'c', 0, 2, 'w1', 10);

-- _slot_finish takes the row by its key and the batch: another
-- subscription's or epoch's key, or another batch id, finishes nothing
select count(*) as slot1_part from pgque.receive_partitioned('sl101', 'c', 1, 2, 'w1', 2);
create temp table r101 as
select b.* from pgque.slot_batch b
  join pgque.subscription s on s.sub_id = b.sb_sub
  join pgque.consumer c on c.co_id = s.sub_consumer
 where c.co_name = pgque._slot_name('c', 1, 2) and b.sb_batch is not null;
select pgque._slot_finish(r.sb_batch, r.sb_sub, r.sb_epoch + 1) as other_epoch,
       pgque._slot_finish(r.sb_batch + 1000000, r.sb_sub, r.sb_epoch) as other_batch,
       pgque._slot_finish(r.sb_batch, (select min(sb_sub) from pgque.slot_batch where sb_sub <> r.sb_sub),
                          r.sb_epoch) as other_sub
  from r101 r;
select * from pg_temp.slot_row(1);
select pgque._slot_finish(r.sb_batch, r.sb_sub, r.sb_epoch) as finished_by_key from r101 r;
-- the part acked: a new batch id for the rest of the window
select open, marked, pos_set from pg_temp.slot_row(1);
select (select b.sb_batch from pgque.slot_batch b where b.sb_sub = r.sb_sub and b.sb_epoch = r.sb_epoch)
       is distinct from r.sb_batch as new_id from r101 r;
select pgque.ack(r.sb_batch) as plain_ack_of_the_old_id from r101 r;
select array_agg(payload order by msg_id) as slot1_rest
  from pgque.receive_partitioned('sl101', 'c', 1, 2, 'w1', 10);
select pgque.ack_partitioned('sl101', 'c', 1, 2, 'w1') as slot1_acked;

-- a takeover: the new epoch adopts the open batch (same id, one row),
-- the old epoch's ack is fenced (PQ002), nothing acked comes again
select count(pgque.send('sl101', 'e', 'd' || i, (select k from k101 where s = 0))) as sent
  from generate_series(1, 3) i;
select pgque.force_tick('sl101') is not null as forced, pgque.ticker('sl101') is not null as ticked;
select pgque.release_slot('sl101', 'c', 0, 'w1') as released;
select pgque.claim_slot('sl101', 'c', 0, 'w1', '1 second') is not null as claimed_short;
select array_agg(payload order by msg_id) as w1_part
  from pgque.receive_partitioned('sl101', 'c', 0, 2, 'w1', 2);
select pgque.ack_partitioned('sl101', 'c', 0, 2, 'w1') as w1_part_acked;
select array_agg(payload order by msg_id) as w1_next_part
  from pgque.receive_partitioned('sl101', 'c', 0, 2, 'w1', 2);
select pg_sleep(1.2);  -- the lease's ttl passes (nothing must happen in it)
select pgque.claim_slot('sl101', 'c', 0, 'w2', '1 hour') is not null as taken_over;
select regexp_replace(pgque_test.error_of($$select pgque.ack_partitioned('sl101', 'c', 0, 2, 'w1')$$),
                      'epoch [0-9]+', 'epoch N') as ack_stale_epoch;
select array_agg(payload order by msg_id) as w2_same_part
  from pgque.receive_partitioned('sl101', 'c', 0, 2, 'w2', 10);
select * from pg_temp.slot_row(0);
select pgque.ack_partitioned('sl101', 'c', 0, 2, 'w2') as w2_acked;
select count(*) as nothing_replayed from pgque.receive_partitioned('sl101', 'c', 0, 2, 'w2', 10);
select * from pg_temp.slot_row(0);

-- batch ids stay unique over every row, without the unique index
select count(sb_batch) = count(distinct sb_batch) as ids_unique from pgque.slot_batch;

select pgque.drop_queue('sl101', true) as dropped;
select count(pg_catalog.setval(s.oid::regclass, coalesce(s.v, q.seqstart), s.v is not null)) >= 0 as sequences_back
  from t101_seqs s join pg_sequence q on q.seqrelid = s.oid;
