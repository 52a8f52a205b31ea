-- Partition buckets (ADR 0013): keyed rows are stored in bucket tables by
-- hash(key) mod B, and slot k of N (N dividing B) reads only its buckets.
-- Workers are off here; the ticks are explicit.

-- drain_slot(queue, consumer, slot, n): receive_partitioned/ack until empty
create function pgque_test.drain_slot(i_queue text, i_consumer text, i_slot int4, i_n int4)
returns table (msg_id bigint, extra1 text, retry_count int4)
language plpgsql as $$
declare
    m  pgque.message;
    b  bigint;
begin
    perform pgque.claim_slot(i_queue, i_consumer, i_slot, 'tester');
    loop
        b := null;
        for m in select * from pgque.receive_partitioned(i_queue, i_consumer, i_slot, i_n, 'tester', 7) loop
            b := m.batch_id;
            msg_id := m.msg_id; extra1 := m.extra1; retry_count := m.retry_count;
            return next;
        end loop;
        exit when b is null;
        perform pgque.ack_partitioned(i_queue, i_consumer, i_slot, i_n, 'tester');
    end loop;
end $$;

-- where each stored event of a queue lives: (table suffix, key)
create function pgque_test.placement(i_queue text)
returns table (ev_id bigint, tbl text, key text)
language plpgsql as $$
declare
    qid int4 := (select queue_id from pgque.queue where queue_name = i_queue);
begin
    return query execute format(
        'select ev_id, pg_catalog.substr(tableoid::regclass::text, %s), ev_extra1 from pgque.%I order by ev_id',
        length('pgque.event_' || qid || '_') + 1, 'event_' || qid);
end $$;

-- the event relations that this transaction scanned so far
create function pgque_test.scanned(i_queue text)
returns text language sql as $$
    select coalesce(string_agg(pg_catalog.substr(relname, length('event_' || q.queue_id || '_') + 1), ' ' order by relname), '-')
      from pg_stat_xact_user_tables t, pgque.queue q
     where q.queue_name = i_queue and t.schemaname = 'pgque'
       and t.relname like 'event\_' || q.queue_id || '\_%'
       and coalesce(t.seq_scan, 0) + coalesce(t.idx_scan, 0) > 0
$$;

select pgque.create_queue('bk');
select pgque.set_queue_config('bk', 'partition_buckets', '8');
select queue_partition_buckets from pgque.queue where queue_name = 'bk';
-- 8 bucket tables under each of the 3 child tables, each with its txid index
select count(*) as bucket_tables
  from pg_inherits i join pg_class p on p.oid = i.inhparent
 where p.relname ~ ('^event_' || (select queue_id from pgque.queue where queue_name = 'bk') || '_[0-2]$');
select count(*) as bucket_indexes from pg_indexes
 where schemaname = 'pgque'
   and indexname ~ ('^event_' || (select queue_id from pgque.queue where queue_name = 'bk') || '_[0-2]_b[0-7]_txid_idx$');

-- the count is fixed once chosen; bad values are refused
select pgque.set_queue_config('bk', 'partition_buckets', '8') as same_again;
select pgque_test.error_of($$select pgque.set_queue_config('bk', 'partition_buckets', '16')$$) as other_count;
select pgque_test.error_of($$select pgque.set_queue_config('bk', 'partition_buckets', null)$$) as reset;
select pgque.create_queue('bk_bad');
select pgque_test.error_of($$select pgque.set_queue_config('bk_bad', 'partition_buckets', '257')$$) as too_many;
select pgque_test.error_of($$select pgque.set_queue_config('bk_bad', 'partition_buckets', '-1')$$) as negative;
select pgque_test.error_of($$select pgque.set_queue_config('bk_bad', 'partition_buckets', 'many')$$) as not_a_number;
select pgque.drop_queue('bk_bad');

-- consumers: slots of N = 4 (divides 8), N = 3 (does not), and a plain one
-- (buckets step 2 stamped, then a tick: windows from here on start past it)
select pgque.maint_rotate_tables_step2() >= 1 as stamped;
select pgque.force_tick('bk') is not null as forced;
select pgque.ticker('bk') is not null as ticked;
select pgque.subscribe_slot('bk', 'four', s, 4) from generate_series(0, 3) s;
select pgque.subscribe_slot('bk', 'three', s, 3) from generate_series(0, 2) s;
select pgque.subscribe('bk', 'plain');

-- single sends, a keyed batch with mixed keys (and a NULL payload), a batch
-- whose keys all go to one bucket, an unkeyed batch
select pgque.send('bk', 'ev', 'a1', 'tenant-a') > 0 as sent;
select pgque.send('bk', 'ev', 'b1', 'tenant-b') > 0 as sent;
select pgque.send('bk', 'ev', 'n1') > 0 as sent_unkeyed;
select ids = (select array_agg(x order by x) from unnest(ids) x) as ids_ascending,
       cardinality(ids) as n
  from (select pgque.send_batch('bk', 'ev', array['a2', null, 'c1', 'd1', 'b2', 'a3'],
                                array['tenant-a', 'tenant-b', 'tenant-c', 'tenant-d', 'tenant-b', 'tenant-a']) as ids) s;
select cardinality(pgque.send_batch('bk', 'ev', array['a4', 'a5'], array['tenant-a', 'tenant-a'])) as same_bucket;
select cardinality(pgque.send_batch('bk', 'ev', array['n2', 'n3'])) as unkeyed;
select cardinality(pgque.send_batch('bk', 'ev', array[]::text[], array[]::text[])) as empty;

-- every row sits in bucket hash(key) mod 8 of the current table; NULL keys in bucket 0
select tbl, key, count(*) from pgque_test.placement('bk') group by tbl, key order by tbl, key;
select bool_and(tbl = '0_b' || pgque._slot_of(key, 8)) as every_row_in_its_bucket
  from pgque_test.placement('bk');
select count(*) as rows_outside_buckets from pgque.event_template e
 where e.tableoid = ('pgque.event_' || (select queue_id from pgque.queue where queue_name = 'bk') || '_0')::regclass;

select pgque.ticker('bk') is not null as ticked;

-- slot 3 of 4 reads only buckets 3 and 7 of the current table (statistics
-- flushed first: pg_stat_xact_* also shows what earlier transactions of
-- this session have not flushed yet)
select pg_stat_force_next_flush();
begin;
select extra1 from pgque_test.drain_slot('bk', 'four', 3, 4) order by msg_id;
select pgque_test.scanned('bk') as slot_3_of_4_scanned;
commit;
-- N = 3 does not divide 8: the whole table, filtered
select pg_stat_force_next_flush();
begin;
select extra1 from pgque_test.drain_slot('bk', 'three', 0, 3) order by msg_id;
select pgque_test.scanned('bk') as slot_0_of_3_scanned;
commit;

-- every slot gets exactly its keys, in ev_id order; slots are disjoint and
-- together make the whole stream
create temp table got as
select 'four' as c, s as slot, d.* from generate_series(0, 3) s, pgque_test.drain_slot('bk', 'four', s, 4) d
union all
select 'three', s, d.* from generate_series(0, 2) s, pgque_test.drain_slot('bk', 'three', s, 3) d;
select c, bool_and(pgque._slot_of(extra1, case c when 'four' then 4 else 3 end) = slot) as own_keys_only
  from got where msg_id is not null group by c order by c;
select c, count(*) as events, count(distinct msg_id) as distinct_events from got group by c order by c;
select c, count(*) filter (where msg_id in (select ev_id from pgque_test.placement('bk'))) as all_stored
  from got group by c order by c;

-- the plain consumer reads every bucket (and only buckets: the buckets'
-- step 2 is past, so no producer writes the child table itself)
select pg_stat_force_next_flush();
begin;
select count(*) as plain_events from pgque_test.drain('bk', 'plain', 100);
select pgque_test.scanned('bk') as plain_scanned;
commit;

-- a retried keyed event goes back to its bucket and returns on its slot
select pgque.send('bk', 'ev', 'b3', 'tenant-b') > 0 as sent;
select pgque.ticker('bk') is not null as ticked;
select pgque.claim_slot('bk', 'four', pgque._slot_of('tenant-b', 4), 'tester') > 0 as claimed;
select m.payload, pgque.nack_partitioned('bk', 'four', pgque._slot_of('tenant-b', 4), 4, 'tester', m, '0 seconds') as nacked
  from pgque.receive_partitioned('bk', 'four', pgque._slot_of('tenant-b', 4), 4, 'tester') m;
select pgque.ack_partitioned('bk', 'four', pgque._slot_of('tenant-b', 4), 4, 'tester') as acked;
select pgque.maint_retry_events() as moved;
select pgque.ticker('bk') is not null as ticked;
select tbl = '0_b' || pgque._slot_of('tenant-b', 8) as retry_row_in_its_bucket
  from pgque_test.placement('bk') where key = 'tenant-b' and ev_id = (select max(ev_id) from pgque_test.placement('bk'));
select extra1, retry_count from pgque_test.drain_slot('bk', 'four', pgque._slot_of('tenant-b', 4), 4);

-- rows stored before the buckets existed (in the child table itself) are
-- still delivered, to the right slot, in order
select pgque.create_queue('bk_late');
select pgque.set_queue_config('bk_late', 'partition_buckets', '0');
select pgque.subscribe_slot('bk_late', 'w', s, 2) from generate_series(0, 1) s;
select queue_partition_buckets as no_automatic_buckets from pgque.queue where queue_name = 'bk_late';
select pgque.send('bk_late', 'ev', 'before-' || k, 'key-' || k) > 0 as sent from generate_series(1, 4) k;
select pgque.set_queue_config('bk_late', 'partition_buckets', '4') as bucketed_later;
select pgque.send('bk_late', 'ev', 'after-' || k, 'key-' || k) > 0 as sent from generate_series(1, 4) k;
select pgque.ticker('bk_late') is not null as ticked;
select tbl like '%_b%' as in_bucket, count(*) from pgque_test.placement('bk_late') group by 1 order by 1;
select s as slot, d.extra1, e.ev_data
  from generate_series(0, 1) s, pgque_test.drain_slot('bk_late', 'w', s, 2) d
  join pgque_test.events('bk_late') e on e.ev_id = d.msg_id
 order by s, d.msg_id;

-- the first partitioned consumer picks the bucket count: a multiple of n, at least 32
select pgque.create_queue('auto4');
select pgque.subscribe_slot('auto4', 'c', 0, 4);
select pgque.create_queue('auto5');
select pgque.subscribe_slot('auto5', 'c', 0, 5);
select pgque.create_queue('auto100');
select pgque.subscribe_slot('auto100', 'c', 0, 100);
select pgque.create_queue('auto1');
select pgque.subscribe_slot('auto1', 'c', 0, 1);
select queue_name, queue_partition_buckets from pgque.queue
 where queue_name in ('auto4', 'auto5', 'auto100', 'auto1') order by queue_name;

-- rotation truncates the buckets with their child table; drop_queue drops them
select pgque.set_queue_config('bk', 'rotation_period', '1 millisecond');
select pgque.maint() >= 0 as maint_ran;
select pgque.maint() >= 0 as maint_ran;
select queue_cur_table from pgque.queue where queue_name = 'bk';
select pgque.send('bk', 'ev', 'after-rotation', 'tenant-a') > 0 as sent;
select pgque.ticker('bk') is not null as ticked;
select extra1 from pgque_test.drain_slot('bk', 'four', pgque._slot_of('tenant-a', 4), 4);
select tbl from pgque_test.placement('bk') where key = 'tenant-a' order by ev_id desc limit 1;
select qid as bk_id from (select queue_id as qid from pgque.queue where queue_name = 'bk') s \gset
select pgque.drop_queue('bk', true);
select count(*) as tables_left from pg_class where relname like 'event\_' || :bk_id || '\_%';
