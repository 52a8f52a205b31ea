-- Every reader counts a partition slot's pending events up to one cap
-- (ADR 0094): metrics(), get_consumer_info(), get_partition_slot_info()
-- and the observability set read about _slot_pending_cap() rows of a slot
-- far behind (a stopped worker), not its whole backlog, and say the count
-- is capped; a slot within the cap keeps its exact count.  A layout without
-- own buckets (an n that does not divide them: the attack of ADR 0096)
-- reads at most the cap's rows of the stream for all its slots far behind.
-- Workers are off here; the ticks are explicit.

-- rows read from queue q's event tables so far in this transaction (and
-- the earlier ones of this session whose counts are not flushed yet: each
-- measure follows a flush, pg_stat_force_next_flush())
create function pg_temp.rows_read(q text) returns bigint language sql as $$
    select coalesce(sum(coalesce(t.seq_tup_read, 0) + coalesce(t.idx_tup_fetch, 0)), 0)::bigint
      from pg_stat_xact_user_tables t
     where t.schemaname = 'pgque'
       and t.relname like 'event\_' || (select queue_id from pgque.queue where queue_name = q) || '\_%'
$$;
-- the events of keys 'key-<g % 1000>', g in 1..i_count, that slot k of n owns
create function pg_temp.own(i_count int4, n int4, k int4) returns bigint language sql as $$
    select count(*) from generate_series(1, i_count) g where pgque._slot_of('key-' || (g % 1000), n) = k
$$;
create procedure pg_temp.drain(q text, s int4, n int4) language plpgsql as $$
begin
    perform pgque.claim_slot(q, 'w', s, 'mc-worker');
    loop
        exit when not exists (select from pgque.receive_partitioned(q, 'w', s, n, 'mc-worker', 5000));
        perform pgque.ack_partitioned(q, 'w', s, n, 'mc-worker');
    end loop;
    perform pgque.release_slot(q, 'w', s, 'mc-worker');
end $$;

-- the one cap (the watchdog's too)
select pgque._slot_pending_cap() as cap;

select pgque.create_queue('mc');
select pgque.set_queue_config('mc', 'partition_buckets', '8');
select pgque.maint_rotate_tables_step2() >= 0 as stamped;
select pgque.subscribe_slot('mc', 'w', s, 4) from generate_series(0, 3) s;
-- 60,000 events over 1,000 keys: about 15,000 for each slot
select count(*) as sent
  from unnest(pgque.send_batch('mc', 'ev', array_fill('p'::text, array[60000]),
                               array(select 'key-' || (g % 1000) from generate_series(1, 60000) g)));
select pgque.ticker('mc') is not null as ticked;
-- slots 0-2 drained, slot 3 stopped with more than the cap of its own
call pg_temp.drain('mc', 0, 4);
call pg_temp.drain('mc', 1, 4);
call pg_temp.drain('mc', 2, 4);
select pg_temp.own(60000, 4, 3) > 10000 as slot3_over_cap;
-- 30 more events: slots 0-2 are near the latest tick, within the cap
select count(*) as sent
  from unnest(pgque.send_batch('mc', 'ev', array_fill('p'::text, array[30]),
                               array(select 'key-' || g from generate_series(1, 30) g)));
select pgque.ticker('mc') is not null as ticked;

-- get_consumer_info: slot 3 at the cap, the others exact; it reads about
-- the cap's rows (the exact count below reads the 60,030)
select pg_stat_force_next_flush();
begin;
select i.consumer_name, i.pending_events,
       i.pending_events = case when i.consumer_name = 'w#3/4' then 10000
                               else (select count(*) from generate_series(1, 30) g
                                      where pgque._slot_of('key-' || g, 4) = substr(i.consumer_name, 3, 1)::int) end
         as expected
  from pgque.get_consumer_info('mc') i order by 1;
select pg_temp.rows_read('mc') between 10000 and 10100 as info_reads_the_cap;
commit;
-- the exact count is still _slot_pending_all without a cap, and reads all
select pg_stat_force_next_flush();
begin;
select p.pending = pg_temp.own(60000, 4, 3) + (select count(*) from generate_series(1, 30) g
                                                 where pgque._slot_of('key-' || g, 4) = 3) as exact,
       p.capped
  from pgque._slot_pending_all() p
  join pgque.subscription s on s.sub_id = p.sub_id
  join pgque.consumer c on c.co_id = s.sub_consumer
 where c.co_name = 'w#3/4' and s.sub_queue = (select queue_id from pgque.queue where queue_name = 'mc');
select pg_temp.rows_read('mc') >= 60030 as exact_reads_all;
commit;

-- get_partition_slot_info: the count and its capped flag
select pg_stat_force_next_flush();
begin;
select slot, pending_events, slot_pending_events <= 30 or slot_pending_events = 10000 as counted,
       slot_pending_events_capped
  from pgque.get_partition_slot_info() where queue_name = 'mc' order by slot;
select pg_temp.rows_read('mc') between 10000 and 10100 as slot_info_reads_the_cap;
commit;
select slot, slot_pending_events_capped from pgque.partition_slot_status where queue_name = 'mc' order by slot;

-- metrics(): the count and pgque_consumer_pending_events_capped, in a
-- read-only transaction (it writes nothing), reading about the cap's rows
select pg_stat_force_next_flush();
begin read only;
select metric, labels->>'consumer' as consumer,
       case when metric = 'pgque_consumer_pending_events' and value <= 30 then 'exact' else value::text end as value
  from pgque.metrics()
 where metric like 'pgque\_consumer\_pending\_events%' and labels->>'queue' = 'mc'
 order by 1, 2;
select pg_temp.rows_read('mc') between 10000 and 10100 as metrics_reads_the_cap;
commit;
-- the observability set counts from the same state
select consumer_name, pending_events from pgque.consumer_stats()
 where queue_name = 'mc' and consumer_name = 'w#3/4';
-- the watchdog's detail says the same
select subject, details->>'pending_events' as pending_events, details->>'pending_events_capped' as capped
  from pgque._alert_conditions('0 s', '1 hour', '1 hour', '1 hour', '1 hour')
 where kind = 'slot_unpolled' and subject like 'mc/%' order by subject;

-- The attack ADR 0096 left open: a pgque_reader subscribes a partitioned
-- consumer with an n that does not divide the buckets (3 of 8: no own
-- buckets, every slot's rows filtered from the stream) and never reads it.
-- Every count of its slots (the watchdog's pass, a scrape) read the whole
-- stream since; now one read for its slots far behind, stopped at the cap.
create role pgque_t_mc_reader login in role pgque_reader;
select pgque.create_queue('ma');
select pgque.set_queue_config('ma', 'partition_buckets', '8');
select pgque.maint_rotate_tables_step2() >= 0 as stamped;
set role pgque_t_mc_reader;
select pgque.subscribe_slot('ma', 'att', s, 3) from generate_series(0, 2) s;
reset role;
select count(*) as sent
  from unnest(pgque.send_batch('ma', 'ev', array_fill('p'::text, array[30000]),
                               array(select 'key-' || (g % 1000) from generate_series(1, 30000) g)));
select pgque.ticker('ma') is not null as ticked;
-- the watchdog's pass: the attacker's slots unpolled, capped, lower bounds
-- of their shares whose sum is the cap (the rows read, all of theirs)
select pg_stat_force_next_flush();
begin;
select a.subject, (a.details->>'pending_events')::bigint <= pg_temp.own(30000, 3, a.slot) as lower_bound,
       (a.details->>'pending_events')::bigint > 0 as some, a.details->>'pending_events_capped' as capped
  from pgque._alert_conditions('0 s', '1 hour', '1 hour', '1 hour', '1 hour') a
 where a.kind = 'slot_unpolled' and a.subject like 'ma/%' order by a.subject;
select pg_temp.rows_read('ma') between 10000 and 10100 as watchdog_reads_the_cap;
commit;
select pg_stat_force_next_flush();
begin;
select sum(pending_events) as sum_of_shares, bool_and(slot_pending_events_capped) as all_capped
  from (select slot_pending_events as pending_events, slot_pending_events_capped
          from pgque.get_partition_slot_info() where queue_name = 'ma') i;
select pg_temp.rows_read('ma') between 10000 and 10100 as slot_info_reads_the_cap;
commit;
-- the exact count read the whole stream (30,000 rows)
select pg_stat_force_next_flush();
begin;
select sum(p.pending) as exact_sum from pgque._slot_pending_all() p
  join pgque.subscription s on s.sub_id = p.sub_id
 where s.sub_queue = (select queue_id from pgque.queue where queue_name = 'ma');
select pg_temp.rows_read('ma') >= 30000 as exact_reads_all;
commit;

-- a capped count is a lower bound, and the alerts read it so: in the
-- filtered layout a slot far behind may count 0 of the 10,000 events read
-- (slot 2 here has none at all) and slot_unpolled still opens for it
select pgque.create_queue('mz');
select pgque.set_queue_config('mz', 'partition_buckets', '8');
select pgque.maint_rotate_tables_step2() >= 0 as stamped;
select pgque.subscribe_slot('mz', 'att', s, 3) from generate_series(0, 2) s;
select count(*) as sent_slot0
  from unnest(pgque.send_batch('mz', 'ev', array_fill('p'::text, array[12000]),
                               array(select k from (select 'z-' || g as k from generate_series(1, 100000) g) x
                                      where pgque._slot_of(k, 3) = 0 limit 12000)));
select count(*) as sent_slot1
  from unnest(pgque.send_batch('mz', 'ev', array_fill('p'::text, array[10]),
                               array(select k from (select 'z-' || g as k from generate_series(1, 100000) g) x
                                      where pgque._slot_of(k, 3) = 1 limit 10)));
select pgque.ticker('mz') is not null as ticked;
select a.subject, a.details->>'pending_events' as pending, a.details->>'pending_events_capped' as capped
  from pgque._alert_conditions('0 s', '1 hour', '1 hour', '1 hour', '1 hour') a
 where a.kind = 'slot_unpolled' and a.subject = 'mz/att/2';

-- the new internal functions are not callable by the pgque roles (no
-- grant): 42501; a role's pg_temp function of the same name is not called
grant usage on schema pgque_test to pgque_t_mc_reader;
set role pgque_t_mc_reader;
select left(pgque_test.error_of('select count(*) from pgque._consumer_info()'), 5) as consumer_info,
       left(pgque_test.error_of('select pgque._slot_pending_cap()'), 5) as slot_pending_cap;
create function pg_temp._slot_pending_cap() returns int8 language sql as $$ select 1::int8 $$;
create function pg_temp._consumer_info() returns setof record language plpgsql as $$
begin raise exception 'hijacked'; end $$;
select value from pgque.metrics()
 where metric = 'pgque_consumer_pending_events' and labels->>'consumer' = 'w#3/4' and labels->>'queue' = 'mc';
reset role;
drop function pg_temp._slot_pending_cap(), pg_temp._consumer_info();

select pgque.unsubscribe_slot('ma', 'att', s) from generate_series(0, 2) s;
select pgque.unsubscribe_slot('mc', 'w', s) from generate_series(0, 3) s;
select pgque.drop_queue(q) from unnest(array['mc', 'ma']) q;
revoke usage on schema pgque_test from pgque_t_mc_reader;
drop role pgque_t_mc_reader;
