-- Failure policy pause through an online resize (ADR 0029, 0030, 0038):
-- a key's block, its withheld events and its retry have one owner.  Path
-- (a): the retry is acked on the old slot after the boundary, and its
-- release appends the withheld events where the key's retry goes (the new
-- slot), not for the old slot (which reads nothing past the boundary).
-- Path (b): the key fails on the old slot during the drain, its retry goes
-- to the new slot; the switch moves the block and the withheld events
-- there, instead of dropping them with the old subscription.  Workers are
-- off; the ticks are explicit.

-- step(queue, n, slot, fail): one batch of slot k of n as worker 'w<k>/<n>':
-- nack the payloads listed (retry at once), skip the rest of a nacked key's
-- events in the batch (the pause worker contract), record the others, ack.
create temp table pr_got (seq serial, q text, n int4, slot int4, key text, payload text, retry int4);
create function pg_temp.step(i_q text, i_n int4, i_slot int4, i_fail text[] default '{}')
returns text language plpgsql as $$
declare
    w      text := 'w' || i_slot || '/' || i_n;
    m      pgque.message;
    nacked text[] := '{}';
    res    text[] := '{}';
begin
    perform pgque.claim_slot(i_q, 'c', i_slot, w);
    for m in select * from pgque.receive_partitioned(i_q, 'c', i_slot, i_n, w, 100) loop
        if m.extra1 = any(nacked) then
            res := res || ('(' || m.payload || ')');
        elsif m.payload = any(i_fail) then
            perform pgque.nack_partitioned(i_q, 'c', i_slot, i_n, w, m, '0 seconds', 'test');
            nacked := nacked || m.extra1;
            res := res || ('!' || m.payload);
        else
            insert into pr_got (q, n, slot, key, payload, retry) values (i_q, i_n, i_slot, m.extra1, m.payload, m.retry_count);
            res := res || m.payload;
        end if;
    end loop;
    perform pgque.ack_partitioned(i_q, 'c', i_slot, i_n, w);
    return array_to_string(res, ' ');
end $$;
-- every slot of n once, in slot order: 'slot: what it got | ...'
create function pg_temp.round(i_q text, i_n int4) returns text language plpgsql as $$
declare
    out text[] := '{}';
    r   text;
begin
    for k in 0 .. i_n - 1 loop
        r := pg_temp.step(i_q, i_n, k);
        if r <> '' then
            out := out || (k || ': ' || r);
        end if;
    end loop;
    return array_to_string(out, ' | ');
end $$;
-- what no slot will ever read, as the watchdog checks it
-- (switch_pending counts a drained resize from the watchdog pass after the
-- one that found it drained: that earlier pass is written here)
create function pg_temp.orphans() returns text language sql as $$
    update pgque.partition_resize r set drained_seen_at = now() - interval '1 second'
     where r.drained_seen_at is null and pgque._resize_drained(r);
    select coalesce(string_agg(subject || ' ' || (details->'reasons')::text, '; ' order by subject), 'none')
      from pgque._pause_orphan_conditions()
$$;
-- what a pass sees first: nothing (a switch that waits for a lock is not
-- orphaned state)
create function pg_temp.orphans_first_pass() returns text language sql as $$
    select coalesce(string_agg(subject || ' ' || (details->'reasons')::text, '; ' order by subject), 'none')
      from pgque._pause_orphan_conditions()
$$;

---------------------------------------------------------------------------
-- Path (a): 1 -> 2.  A1 fails on the old slot; its retry comes back there
-- before the boundary, and is acked after it.
select pgque.create_queue('pa');
select pgque.subscribe_slot('pa', 'c', 0, 1, 'pause');
select pgque.send('pa', 'e', 'A1', 'A'), pgque.send('pa', 'e', 'A2', 'A'), pgque.send('pa', 'e', 'X1', 'X');
select pgque.ticker('pa') is not null as ticked;
select pg_temp.step('pa', 1, 0, array['A1']) as a_fails;
select pgque.maint_retry_events() as retried;
select pgque.send('pa', 'e', 'A3', 'A');
select pgque.ticker('pa') is not null as ticked;
-- the old slot holds the batch with A1's retry (A3 is withheld) ...
select payload, retry_count from pgque.receive_partitioned('pa', 'c', 0, 1, 'w0/1', 100);
-- ... when the resize takes its boundary
select pgque.resize_partitioned('pa', 'c', 2) is not null as resized;
select pgque.send('pa', 'e', 'A4', 'A'), pgque.send('pa', 'e', 'X2', 'X');
select pgque.ticker('pa') is not null as ticked;
-- the ack after the boundary releases A: A2 and A3 (withheld in that
-- batch) are appended again for A's new slot (they land after the
-- boundary, which the old slot never reads), and the marker stays on the
-- old slot with A3 as its head
select pgque.ack_partitioned('pa', 'c', 0, 1, 'w0/1') as acked;
select x.ev_owner = r.new_subs[pgque._slot_of('A', 2) + 1] as a2_copy_for_new_slot
  from pgque_test.events('pa') x, pgque.partition_resize r
 where x.ev_data = 'A2' and x.ev_owner is not null;
select partition_key, n, state, (select ev_data from pgque_test.events('pa') e where e.ev_id = head_ev_id limit 1) as head
  from pgque.blocked_keys where queue_name = 'pa';
-- the old slot drains up to the boundary (X2, after B, is not its own)
select pg_temp.round('pa', 1) as old_drain;
select draining_slots from pgque.partition_resize_status where queue_name = 'pa';
-- drained, not switched: the blocked key waits for the switch; the pass
-- that first finds it so does not call it orphaned, the next one does
select pg_temp.orphans_first_pass() as first_pass;
select pg_temp.orphans() as orphans_before_switch;
-- the switch moves the block to A's new slot, head A3
select pgque.partition_n('pa', 'c') as n;
select partition_key, n, slot = pgque._slot_of('A', 2) as on_new_slot, state,
       (select ev_data from pgque_test.events('pa') e where e.ev_id = head_ev_id limit 1) as head
  from pgque.blocked_keys where queue_name = 'pa';
select pg_temp.orphans() as orphans_after_switch;
-- the new layout: A2, A3 (the head), then A4 once it is acked
select pgque.ticker('pa') is not null as ticked;
select pg_temp.round('pa', 2) as new_1;
select pgque.ticker('pa') is not null as ticked;
select pg_temp.round('pa', 2) as new_2;
select pgque.ticker('pa') is not null as ticked;
select pg_temp.round('pa', 2) as new_3;
select count(*) as blocked from pgque.blocked_keys where queue_name = 'pa';
select key, string_agg(payload || coalesce(':' || nullif(retry, 0), ''), ' ' order by seq) as processed
  from pr_got where q = 'pa' group by key order by key;

---------------------------------------------------------------------------
-- Path (b): 1 -> 2.  B1 fails on the old slot during the drain; its retry
-- goes to the new slot; B2 (same batch) and B3 (a later window before the
-- boundary) are withheld on the old slot.
select pgque.create_queue('pb');
select pgque.subscribe_slot('pb', 'c', 0, 1, 'pause');
select pgque.send('pb', 'e', 'B1', 'B'), pgque.send('pb', 'e', 'B2', 'B'), pgque.send('pb', 'e', 'Y1', 'Y');
select pgque.ticker('pb') is not null as ticked;
select pgque.send('pb', 'e', 'B3', 'B');
select pgque.resize_partitioned('pb', 'c', 2) is not null as resized;
select pgque.send('pb', 'e', 'B4', 'B'), pgque.send('pb', 'e', 'Y2', 'Y');
select pgque.ticker('pb') is not null as ticked;
select pg_temp.step('pb', 1, 0, array['B1']) as b_fails_during_drain;
-- the retry mover sends B1's retry to B's new slot (after the boundary)
select pgque.maint_retry_events() as retried;
select x.ev_owner = r.new_subs[pgque._slot_of('B', 2) + 1] as b1_retry_for_new_slot
  from pgque_test.events('pb') x, pgque.partition_resize r
 where x.ev_data = 'B1' and x.ev_owner is not null;
select pgque.ticker('pb') is not null as ticked;
-- the old slot has drained up to the boundary (B3 withheld); the marker
-- stays, head B1 (not done)
select draining_slots from pgque.partition_resize_status where queue_name = 'pb';
select partition_key, n, state, (select ev_data from pgque_test.events('pb') e where e.ev_id = head_ev_id limit 1) as head
  from pgque.blocked_keys where queue_name = 'pb';
select pg_temp.orphans() as orphans_before_switch;
-- the switch (here the watchdog's pass) moves the block, head B1, and
-- appends B2 and B3 again for B's new slot; nothing opens
set client_min_messages = error;
select count(*) as passes from pgque._watchdog_pass('1 hour', '1 hour', '1 hour', '1 hour', '1 hour');
reset client_min_messages;
select count(*) as resizing from pgque.partition_resize_status where queue_name = 'pb';
select count(*) as orphan_alerts from pgque.alert where kind = 'key_state_orphaned';
select partition_key, n, slot = pgque._slot_of('B', 2) as on_new_slot, state,
       (select ev_data from pgque_test.events('pb') e where e.ev_id = head_ev_id limit 1) as head
  from pgque.blocked_keys where queue_name = 'pb';
-- the new layout: B1's retry first, then B2, B3, B4 in order
select pgque.ticker('pb') is not null as ticked;
select pg_temp.round('pb', 2) as new_1;
select pgque.ticker('pb') is not null as ticked;
select pg_temp.round('pb', 2) as new_2;
select pgque.ticker('pb') is not null as ticked;
select pg_temp.round('pb', 2) as new_3;
select count(*) as blocked from pgque.blocked_keys where queue_name = 'pb';
select key, string_agg(payload || coalesce(':' || nullif(retry, 0), ''), ' ' order by seq) as processed
  from pr_got where q = 'pb' group by key order by key;

---------------------------------------------------------------------------
-- The switch refuses to drop what it cannot move: a blocked key of an old
-- slot whose withheld events cannot be read (planted: its tick is gone)
-- keeps the resize draining, with a warning, and the watchdog reports it;
-- the switch goes once it is gone.
select pgque.resize_partitioned('pb', 'c', 4) is not null as resized;
select pgque.ticker('pb') is not null as ticked;
select pg_temp.round('pb', 2) as old_drain;
insert into pgque.blocked_key (bk_sub, bk_key, bk_head, bk_tick)
select r.old_subs[pgque._slot_of('P', 2) + 1], 'P', 1, 0
  from pgque.partition_resize r join pgque.queue q on q.queue_id = r.queue_id where q.queue_name = 'pb';
-- (its warning names tick and subscription ids: not shown)
set client_min_messages = error;
select pgque.partition_n('pb', 'c') as still_old_n;
reset client_min_messages;
select pg_temp.orphans() as orphans;
delete from pgque.blocked_key where bk_key = 'P';
select pgque.partition_n('pb', 'c') as switched_n;

-- what no layout reads: a marker of a consumer that no longer pauses
-- (written around the API), a retry whose subscription is gone
select pgque.set_failure_policy('pb', 'c', 'skip') as previous;
insert into pgque.blocked_key (bk_sub, bk_key, bk_head, bk_tick)
select s.sub_id, 'Z', 1, s.sub_last_tick from pgque.subscription s join pgque.consumer c on c.co_id = s.sub_consumer
 where c.co_name = 'c#0/4' and s.sub_queue = (select queue_id from pgque.queue where queue_name = 'pb');
insert into pgque.retry_queue (ev_retry_after, ev_queue, ev_id, ev_time, ev_txid, ev_owner, ev_retry, ev_type, ev_data, ev_extra1)
select 'infinity', queue_id, -2, now(), '1', -5, 1, 'e', 'nobody', 'Q' from pgque.queue where queue_name = 'pa';
select kind, subject, queue_name, consumer, details from pgque._pause_orphan_conditions() order by subject;
-- a subscription is never deleted under its markers (unsubscribing deletes
-- them first, the switch moves them)
-- (23503 up to PostgreSQL 17, restrict_violation 23001 from 18 on)
select left(pgque_test.error_of(format('delete from pgque.subscription where sub_id = %s', bk_sub)), 5) in ('23503', '23001') as restricted
  from pgque.blocked_key where bk_key = 'Z';
delete from pgque.blocked_key where bk_key = 'Z';
delete from pgque.retry_queue where ev_data = 'nobody';
select pg_temp.orphans() as orphans;

-- unsubscribing a slot with a blocked key drops the marker with it
select pgque.set_failure_policy('pb', 'c', 'pause') as previous;
insert into pgque.blocked_key (bk_sub, bk_key, bk_head, bk_tick)
select s.sub_id, 'Z', 1, s.sub_last_tick from pgque.subscription s join pgque.consumer c on c.co_id = s.sub_consumer
 where c.co_name = 'c#0/4' and s.sub_queue = (select queue_id from pgque.queue where queue_name = 'pb');
select pgque.unsubscribe_slot('pb', 'c', 0);
select count(*) as markers_left from pgque.blocked_key where bk_key = 'Z';

select pgque.drop_queue('pa', true), pgque.drop_queue('pb', true);
