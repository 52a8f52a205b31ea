-- The ticker's cost rules (ADR 0031), workers off, ticks explicit: the
-- queue filter in one place, the batched visit, the sequence probe, and
-- every slot's pending count from one read per partitioned consumer, equal
-- to the per-slot count.
select pgque.create_queue('it_a'), pgque.create_queue('it_b'), pgque.create_queue('it_c');
select pgque.set_queue_config('it_b', 'ticker_paused', 'true');
select pgque.set_queue_config('it_c', 'external_ticker', 'true');

-- the filter: the worker's list and ticker() both skip paused and external queues
select queue_name, idle_ms, max_lag_ms, last_tick is not null as has_tick
  from pgque._ticker_queues() where queue_name like 'it\_%' order by queue_name;
select queue_name, pgque._ticked_by_worker(q) as ticked_by_worker
  from pgque.queue q where queue_name like 'it\_%' order by queue_name;

-- _tick_many ticks only the due ones among those given (and never a paused one)
select pgque.send('it_a', 'x'), pgque.send('it_b', 'y');
select q.queue_name as ticked
  from pgque._tick_many(array(select queue_id from pgque.queue where queue_name like 'it\_%')) t
  join pgque.queue q on q.queue_id = t
 order by 1;
select count(*) as ticked_again
  from pgque._tick_many(array(select queue_id from pgque.queue where queue_name like 'it\_%'));

-- the sequence probe finds a row written into an event table directly
select count(*) as moved_before from pgque._ticks_seq_moved() t
  join pgque.queue q on q.queue_id = t where q.queue_name like 'it\_%';
do $$ begin
  execute format('insert into pgque.event_%s_%s (ev_type, ev_data) values (''direct'', ''z'')',
                 (select queue_id from pgque.queue where queue_name = 'it_a'),
                 (select queue_cur_table from pgque.queue where queue_name = 'it_a'));
end $$;
select q.queue_name as moved from pgque._ticks_seq_moved() t
  join pgque.queue q on q.queue_id = t where q.queue_name like 'it\_%';
select pgque.ticker('it_a') is not null as ticked;
select count(*) as moved_after from pgque._ticks_seq_moved() t
  join pgque.queue q on q.queue_id = t where q.queue_name like 'it\_%';

-- pending per slot: 4 slots of an unbucketed queue and of a bucketed one,
-- cursors at different ticks
select pgque.create_queue('it_pk'), pgque.create_queue('it_bk');
select pgque.set_queue_config('it_bk', 'partition_buckets', '8');
select count(pgque.subscribe_slot(q, 'w', k, 4)) from unnest(array['it_pk', 'it_bk']) q, generate_series(0, 3) k;
select count(pgque.send(q, 'e', 'p' || i, 'key-' || i)) from unnest(array['it_pk', 'it_bk']) q, generate_series(1, 40) i;
select pgque.ticker('it_pk') is not null as t1, pgque.ticker('it_bk') is not null as t2;
-- slots 0 and 1 read and ack their first batch
select q, k, pgque.claim_slot(q, 'w', k, 'w' || k) > 0 as claimed
  from unnest(array['it_pk', 'it_bk']) q, generate_series(0, 1) k order by 1, 2;
select q, k, count(m.*) as received
  from unnest(array['it_pk', 'it_bk']) q, generate_series(0, 1) k,
       lateral pgque.receive_partitioned(q, 'w', k, 4, 'w' || k, 1000) m
 group by q, k order by 1, 2;
select count(pgque.ack_partitioned(q, 'w', k, 4, 'w' || k))
  from unnest(array['it_pk', 'it_bk']) q, generate_series(0, 1) k;
select count(pgque.send(q, 'e', 'p' || i, 'key-' || i)) from unnest(array['it_pk', 'it_bk']) q, generate_series(41, 60) i;
select pgque.ticker('it_pk') is not null as t1, pgque.ticker('it_bk') is not null as t2;
-- the oracle: one slot's share of the events after its cursor (up to the
-- latest tick), read slot by slot (0.2.0's pgque._slot_pending, kept here
-- only to check the one-read count against)
create function pg_temp.slot_pending(i_sub_id int4, i_n int4, i_slot int4)
returns bigint language plpgsql stable as $$
declare
    r  record;
    n  bigint;
begin
    -- one statement, so the queue row and the ticks come from one snapshot
    select qq as q, t1.tick_snapshot as snap1,
           (select t.tick_snapshot from pgque.tick t where t.tick_queue = s.sub_queue
               and t.tick_id <= coalesce(pgque._resize_cap(s.sub_id), t.tick_id)
             order by t.tick_id desc limit 1) as snap2
      into r
      from pgque.subscription s
      join pgque.queue qq on qq.queue_id = s.sub_queue
      join pgque.tick t1 on t1.tick_queue = s.sub_queue and t1.tick_id = pgque._slot_cursor(s)
     where s.sub_id = i_sub_id;
    if not found then
        return null;
    end if;
    execute pg_catalog.format(
        'select count(*) from %s ev'
        ' where ((ev.ev_txid >= $1 and ev.ev_txid < $2) or ev.ev_txid = any($3))'
        '   and pg_catalog.pg_visible_in_snapshot(ev.ev_txid, $4)'
        '   and (ev.ev_owner is null or ev.ev_owner = $5)'
        '   and pgque._slot_of(ev.ev_extra1, $6) = $7', pgque._event_source(r.q, r.snap1, r.snap2, i_n, i_slot))
    into n
    using pg_catalog.pg_snapshot_xmax(r.snap1), pg_catalog.pg_snapshot_xmax(r.snap2),
          array(select pg_catalog.pg_snapshot_xip(r.snap1)), r.snap2, i_sub_id, i_n, i_slot;
    return n;
end $$;
-- the one-read counts equal the per-slot ones; the totals are what was sent
-- less what slots 0 and 1 consumed
select q.queue_name, k, p.pending,
       p.pending = pg_temp.slot_pending(s.sub_id, 4, k) as same_as_per_slot
  from pgque.queue q, generate_series(0, 3) k
  join pgque.consumer c on true
  join pgque.subscription s on s.sub_consumer = c.co_id
  join pgque._slot_pending_all() p on p.sub_id = s.sub_id
 where q.queue_name in ('it_pk', 'it_bk') and s.sub_queue = q.queue_id
   and c.co_name = pgque._slot_name('w', k, 4)
 order by 1, 2;
select queue_name, sum(slot_pending_events) as pending
  from pgque.partition_slot_status where queue_name in ('it_pk', 'it_bk') group by 1 order by 1;
-- slots whose cursor tick is gone (a restore cut short, ADR 0022): their
-- counts are NULL (unknown), the others' stay, in the same one read
begin;
delete from pgque.tick t
 using pgque.subscription s, pgque.consumer c, pgque.queue q
 where q.queue_name = 'it_pk' and s.sub_queue = q.queue_id
   and c.co_name = pgque._slot_name('w', 3, 4) and s.sub_consumer = c.co_id
   and t.tick_queue = s.sub_queue and t.tick_id = pgque._slot_cursor(s);
select k, p.pending
  from pgque.queue q, generate_series(0, 3) k
  join pgque.consumer c on c.co_name = pgque._slot_name('w', k, 4)
  join pgque.subscription s on s.sub_consumer = c.co_id
  join pgque._slot_pending_all() p on p.sub_id = s.sub_id
 where q.queue_name = 'it_pk' and s.sub_queue = q.queue_id
 order by k;
rollback;
