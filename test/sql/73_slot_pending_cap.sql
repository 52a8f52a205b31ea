-- The watchdog counts a slot's pending events up to a cap (ADR 0096): a
-- slot far behind (a stopped worker) is not read whole on every pass.
-- _slot_pending_all(skip, cap): a slot that reads its own buckets and whose
-- cursor is more than cap events of the stream behind the latest tick
-- reads its own rows alone and stops at the cap-th; the others keep the
-- exact group read (ADR 0031), and so does a layout without own buckets.
-- Workers are off here; the ticks are explicit.

-- rows read from queue q's event tables so far in this transaction
create function pg_temp.rows_read(q text) returns bigint language sql as $$
    select coalesce(sum(coalesce(t.seq_tup_read, 0) + coalesce(t.idx_tup_fetch, 0)), 0)::bigint
      from pg_stat_xact_user_tables t
     where t.schemaname = 'pgque'
       and t.relname like 'event\_' || (select queue_id from pgque.queue where queue_name = q) || '\_%'
$$;
-- every slot of consumer c of queue q: (slot, pending) with cap i_cap
create function pg_temp.pending(q text, c text, n int4, i_cap int8)
returns table (slot int4, pending bigint) language sql as $$
    select k, p.pending
      from generate_series(0, n - 1) k
      join pgque.consumer co on co.co_name = pgque._slot_name(c, k, n)
      join pgque.subscription s on s.sub_consumer = co.co_id
                                and s.sub_queue = (select queue_id from pgque.queue where queue_name = q)
      join pgque._slot_pending_all('{}', i_cap) p on p.sub_id = s.sub_id
     order by k
$$;

select pgque.create_queue('pc_b');
select pgque.set_queue_config('pc_b', 'partition_buckets', '8');
select pgque.create_queue('pc_u');
select pgque.set_queue_config('pc_u', 'partition_buckets', '0');
select pgque.maint_rotate_tables_step2() >= 0 as stamped;
select pgque.subscribe_slot(q, 'w', s, 4) from unnest(array['pc_b', 'pc_u']) q, generate_series(0, 3) s;
-- 60,000 events over 1,000 keys: about 15,000 for each slot
select count(*) as sent
  from unnest(array['pc_b', 'pc_u']) q,
       unnest(pgque.send_batch(q, 'ev', array_fill('p'::text, array[60000]),
                               array(select 'key-' || (g % 1000) from generate_series(1, 60000) g)));
select pgque.ticker(q) is not null as ticked from unnest(array['pc_b', 'pc_u']) q;

-- each slot's own share, exact (no cap): what the events say
select p.slot, p.pending = (select count(*) from generate_series(1, 60000) g
                             where pgque._slot_of('key-' || (g % 1000), 4) = p.slot) as exact,
       p.pending > 10000 as over_10000
  from pg_temp.pending('pc_b', 'w', 4, null) p;

-- with a cap, a slot far behind stops at it, and the read stops with it:
-- at most the cap's rows of each slot, where the exact count reads all
begin;
select * from pg_temp.pending('pc_b', 'w', 4, 50);
select pg_temp.rows_read('pc_b') between 1 and 4 * 50 * 2 as capped_read_is_small;
commit;
begin;
select sum(pending) as exact_total from pg_temp.pending('pc_b', 'w', 4, null);
select pg_temp.rows_read('pc_b') >= 60000 as exact_read_reads_all;
commit;

-- a cap below 1 is refused (no count of 0 for a slot with events)
select * from pgque._slot_pending_all('{}', 0);

-- a layout without own buckets (a filtered read per slot would scan the
-- stream once per slot): the cap changes nothing, every count exact
select (select array_agg(pending order by slot) from pg_temp.pending('pc_u', 'w', 4, 50))
     = (select array_agg(pending order by slot) from pg_temp.pending('pc_u', 'w', 4, null)) as unbucketed_exact;

-- a slot near the latest tick keeps its exact count in the same call: slot
-- 0 drained, then 30 more events, of which slot 0's are counted exactly
select pgque.claim_slot('pc_b', 'w', 0, 'pc-worker') > 0 as claimed;
do $$
begin
    loop
        exit when not exists (select from pgque.receive_partitioned('pc_b', 'w', 0, 4, 'pc-worker', 5000));
        perform pgque.ack_partitioned('pc_b', 'w', 0, 4, 'pc-worker');
    end loop;
end $$;
select count(*) as sent
  from unnest(pgque.send_batch('pc_b', 'ev', array_fill('p'::text, array[30]),
                               array(select 'key-' || g from generate_series(1, 30) g)));
select pgque.ticker('pc_b') is not null as ticked;
select c.slot, c.pending as capped, e.pending as exact, c.pending = e.pending as same
  from pg_temp.pending('pc_b', 'w', 4, 50) c join pg_temp.pending('pc_b', 'w', 4, null) e using (slot)
 order by slot;
select (select pending from pg_temp.pending('pc_b', 'w', 4, 50) where slot = 0)
     = (select count(*) from generate_series(1, 30) g where pgque._slot_of('key-' || g, 4) = 0) as slot0_exact;

-- the watchdog's conditions: a slot far behind is unpolled and lagging
-- with its count at the watchdog's cap (10,000), said capped; slot 0,
-- near the latest tick, with its exact count, not capped
select kind, subject, details->>'pending_events' as pending_events,
       details->>'pending_events_capped' as capped
  from pgque._alert_conditions('0 s', '1 hour', '0 s', '1 hour', '1 hour')
 where kind in ('slot_unpolled', 'consumer_lagging') and subject like 'pc\_b/%'
 order by kind, subject;
-- the plain consumers' lagging detail is not capped
select pgque.subscribe('pc_b', 'plain');
select count(*) as sent from unnest(pgque.send_batch('pc_b', 'ev', array['p'], array['key-1']));
select pgque.ticker('pc_b') is not null as ticked;
select details->>'pending_events' as pending_events, details->>'pending_events_capped' as capped
  from pgque._alert_conditions('0 s', '1 hour', '0 s', '1 hour', '1 hour')
 where kind = 'consumer_lagging' and subject = 'pc_b/plain';

select pgque.unsubscribe('pc_b', 'plain');
select pgque.unsubscribe_slot(q, 'w', s) from unnest(array['pc_b', 'pc_u']) q, generate_series(0, 3) s;
select pgque.drop_queue(q) from unnest(array['pc_b', 'pc_u']) q;
