-- Unlogged queues (ADR 0068): the option in create_queue and
-- set_queue_config, the tables it makes unlogged, the seal, and the reset
-- when the seal is gone (a crash: simulated here by deleting the seal and
-- emptying the event tables, as crash recovery does; TAP 066 crashes a
-- real server).  Every consumer kind, the idempotency claims, the alert,
-- status() and metrics().

-- the persistence of every event table of a queue: 'u' or 'p', and how
-- many; then its two sequences' (always 'p': ids never go back)
create function pgque_test.persistence(i_queue text) returns text
language sql as $$
    select string_agg(distinct c.relpersistence::text, ',') || ' x' || count(*)
           || ', sequences ' || (select string_agg(distinct s.relpersistence::text, ',') from pg_class s
                                  where s.relnamespace = 'pgque'::regnamespace and s.relkind = 'S'
                                    and s.relname ~ ('^event_' || (select queue_id from pgque.queue where queue_name = i_queue) || '_(id|tick)_seq$'))
      from pg_class c
     where c.relnamespace = 'pgque'::regnamespace and c.relkind = 'r'
       and c.relname ~ ('^event_' || (select queue_id from pgque.queue where queue_name = i_queue) || '(_[0-9]+(_b[0-9]+)?)?$')
$$;
-- a crash, as far as the queue can tell: its seal and its events gone
create function pgque_test.crash(i_queue text) returns void
language plpgsql as $$
declare
    q pgque.queue := (select q from pgque.queue q where queue_name = i_queue);
begin
    delete from pgque.unlogged_seal where queue_id = q.queue_id;
    execute format('truncate %s', q.queue_data_pfx);
end $$;

-- the option
select pgque.create_queue('ul', '{"unlogged": true}');
select queue_unlogged, pgque_test.persistence('ul') as tables,
       exists (select from pgque.unlogged_seal s where s.queue_id = q.queue_id) as sealed
  from pgque.queue q where queue_name = 'ul';
select pgque.create_queue('ul_logged');
select queue_unlogged, pgque_test.persistence('ul_logged') as tables
  from pgque.queue where queue_name = 'ul_logged';
-- set_queue_config both ways (the queue_ prefix too); NULL is the default: logged
select pgque.set_queue_config('ul_logged', 'queue_unlogged', 'on');
select pgque_test.persistence('ul_logged') as now_unlogged;
select pgque.set_queue_config('ul_logged', 'unlogged', null);
select queue_unlogged, pgque_test.persistence('ul_logged') as logged_again,
       exists (select from pgque.unlogged_seal s where s.queue_id = q.queue_id) as sealed
  from pgque.queue q where queue_name = 'ul_logged';
-- events survive the change both ways
select pgque.send('ul_logged', 'ev', 'kept') is not null as sent;
select pgque.set_queue_config('ul_logged', 'unlogged', 'true');
select pgque.set_queue_config('ul_logged', 'unlogged', 'false');
select ev_data from pgque_test.events('ul_logged');
-- bad values: clear errors, nothing changed
select pgque_test.error_of($$select pgque.set_queue_config('ul', 'unlogged', 'maybe')$$) as not_a_boolean;
select pgque_test.error_of($$select pgque.create_queue('ul_bad', '{"unlogged": "yes please"}')$$) as create_bad;
select pgque_test.error_of($$select pgque.create_queue('ul_bad', '{"unlogged": [true]}')$$) as create_array;
select count(*) as ul_bad_not_created from pgque.queue where queue_name = 'ul_bad';
select queue_unlogged as ul_still_unlogged from pgque.queue where queue_name = 'ul';

-- buckets made later are unlogged too
select pgque.set_queue_config('ul', 'partition_buckets', '4');
select pgque_test.persistence('ul') as with_buckets;

-- consumers of every kind: plain, a cooperative group, a pausing
-- partitioned consumer (n = 1, so slot 0 has every key)
select pgque.subscribe('ul', 'plain');
select pgque.register_subconsumer('ul', 'grp', 'm1');
select pgque.subscribe_slot('ul', 'part', 0, 1);
select pgque.set_failure_policy('ul', 'part', 'pause');
select pgque.claim_slot('ul', 'part', 0, 'w1') is not null as claimed;
select pgque.send('ul', 'ev', 'before ' || i, 'k' || (i % 2)) is not null from generate_series(1, 4) i;
select event_id is not null as idem_sent, deduped from pgque.send_idem('ul', 'ev', 'idem before', 'key-1');
select pgque.ticker('ul') is not null as ticked;
-- the plain consumer drains; the group's member and the slot each open a
-- batch; the slot nacks key k1's first event: k1 is blocked, its head in
-- retry_queue
select count(*) as plain_got from pgque_test.drain('ul', 'plain');
select count(*) as m1_got from pgque.receive_coop('ul', 'grp', 'm1', 100);
create temp table slot_msgs as select * from pgque.receive_partitioned('ul', 'part', 0, 1, 'w1', 100);
select count(*) as slot_got from slot_msgs;
select pgque.nack_partitioned('ul', 'part', 0, 1, 'w1',
         (m.msg_id, m.batch_id, m.type, m.payload, m.retry_count, m.created_at,
          m.extra1, m.extra2, m.extra3, m.extra4)::pgque.message, '1 hour', 'test')
  from slot_msgs m where payload = 'before 1';
select count(*) as blocked_keys from pgque.blocked_key;
-- more events, ticked, that nobody reads before the crash
select pgque.send('ul', 'ev', 'unread ' || i, 'k0') is not null from generate_series(1, 3) i;
select pgque.ticker('ul') is not null as ticked;
create temp table before_crash as
select (select max(tick_id) from pgque.tick t join pgque.queue q on q.queue_id = t.tick_queue where q.queue_name = 'ul') as last_tick,
       (select pg_sequence_last_value(queue_event_seq::regclass) from pgque.queue where queue_name = 'ul') as last_ev;

-- the crash (the reset's WARNING carries timestamps: checked in TAP 066)
set client_min_messages = error;
select pgque_test.crash('ul');
-- a batch read before the reset refuses: the slot's open batch is unreadable
select pgque_test.error_of($$select * from pgque.get_batch_events((select distinct batch_id from slot_msgs))$$) as read_before_reset;
-- an event sent after the crash, before anything noticed
select pgque.send('ul', 'ev', 'after crash', 'k0') is not null as sent_after_crash;
-- a consumer's call does not reset the queue (ADR 0089): it is refused
-- (55000) until the ticker's next visit (or maint()) resets it, in a
-- transaction of its own; then the consumer reads on
select count(*) as alerts_before from pgque.alert where kind = 'unlogged_reset';
select pgque_test.error_of($$select * from pgque.receive('ul', 'plain', 100)$$) as receive_before_reset;
select pgque_test.error_of($$select * from pgque.receive_coop('ul', 'grp', 'm1', 100)$$) as coop_before_reset;
select pgque_test.error_of($$select * from pgque.receive_partitioned('ul', 'part', 0, 1, 'w1', 100)$$) as slot_before_reset;
select count(*) as alerts_still from pgque.alert where kind = 'unlogged_reset';
select pgque.ticker('ul') is not null as ticked_after_reset;
select payload from pgque_test.drain('ul', 'plain');
select kind, subject, details->>'dropped_at_most' as dropped_at_most, details->>'sent_after_crash' as sent_after_crash,
       (details->>'last_tick')::bigint = (select last_tick from before_crash) as at_last_tick,
       details->>'blocked_keys_kept' as blocked_keys_kept, cleared_at is null as open
  from pgque.alert where kind = 'unlogged_reset';
select exists (select from pgque.unlogged_seal s join pgque.queue q using (queue_id) where q.queue_name = 'ul') as sealed_again;
-- every cursor is at the last tick before the crash (or past it)
select c.co_name, s.sub_last_tick >= (select last_tick from before_crash) as at_or_past, s.sub_batch is null as no_batch
  from pgque.subscription s join pgque.consumer c on c.co_id = s.sub_consumer
  join pgque.queue q on q.queue_id = s.sub_queue
 where q.queue_name = 'ul' order by 1;
select count(*) as coop_windows_before_the_crash from pgque.coop_window w
  join pgque.subscription s on s.sub_id = w.cw_sub
 where w.cw_prev_tick < (select last_tick from before_crash);
-- k1 stays blocked behind its head, which waits in retry_queue
select bk_key, bk_tick = (select last_tick from before_crash) as at_last_tick from pgque.blocked_key;
-- event ids go on past every id drawn before the crash
select pgque.send('ul', 'ev', 'next') > (select last_ev from before_crash) as ids_go_on;
-- the member and the slot get what was sent after the crash, nothing older
select pgque.ticker('ul') is not null as ticked;
select payload from pgque.receive_coop('ul', 'grp', 'm1', 100) order by msg_id;
select payload from pgque.receive_partitioned('ul', 'part', 0, 1, 'w1', 100) order by msg_id;
-- the claim of the lost idempotent event is gone: the producer sends again
select event_id > (select last_ev from before_crash) as new_id, deduped
  from pgque.send_idem('ul', 'ev', 'idem again', 'key-1');
-- a second look resets nothing
select pgque._unlogged_reset_all() as nothing_to_reset;
select count(*) as one_alert from pgque.alert where kind = 'unlogged_reset';

-- the ticker and maint() reset too (a queue nobody consumes)
select pgque.create_queue('ul2', '{"unlogged": true}');
select pgque.subscribe('ul2', 'c');
select pgque.send('ul2', 'ev', 'x') is not null as sent;
select pgque.ticker('ul2') is not null as ticked;
select pgque_test.crash('ul2');
select pgque.ticker('ul2') as not_due;
select details->>'dropped_at_most' as ul2_dropped from pgque.alert where kind = 'unlogged_reset' and subject = 'ul2';
select pgque.send('ul2', 'ev', 'y' || i) is not null from generate_series(1, 2) i;
select pgque.ticker('ul2') is not null as ticked;
select pgque_test.crash('ul2');
select pgque.maint() >= 1 as maint_reset;
select details->>'dropped_at_most' as second_reset_updates_the_alert, count(*) over () as still_one
  from pgque.alert where kind = 'unlogged_reset' and subject = 'ul2' and cleared_at is null;

-- the alert stays open pgque_bgw.unlogged_reset_alert_for (1 h by default)
select count(*) as conditions from pgque._unlogged_conditions();
select count(*) as conditions_after_it from pgque._unlogged_conditions('0 seconds');

-- status() and metrics() show the unlogged queues
select component, status, detail ~ '^queue "ul2?": unlogged .*; last reset .*, at most \d+ events dropped$' as says_it
  from pgque.status() where component = 'unlogged' order by detail;
select labels->>'queue' as queue, value from pgque.metrics()
 where metric = 'pgque_queue_unlogged' and labels->>'queue' like 'ul%' order by 1;

-- a logged queue beside it never resets
select pgque_test.error_of($$select pgque._unlogged_gate(q) from pgque.queue q where queue_name = 'ul_logged'$$) as logged_gate;

reset client_min_messages;
select pgque.drop_queue('ul', true), pgque.drop_queue('ul2', true), pgque.drop_queue('ul_logged');
select count(*) as seals_left from pgque.unlogged_seal;
