-- Replay by time (ADR 0067): seek() and subscribe(..., start) for a plain
-- consumer.  A position is a tick: seek to t delivers exactly the events
-- first ticked at or after t, in their original order with their ids.

select pgque.create_queue('sk');
select pgque.subscribe('sk', 'c');
-- batch a, ticked; then t1; then batch b, ticked; then t2; then batch c
select pgque.send('sk', 'a' || i) from generate_series(1, 3) i;
select pgque.ticker('sk') is not null as ticked;
create temp table marks as select 't1'::text as name, clock_timestamp() as at;
select pg_sleep(0.01);
select pgque.send('sk', 'b' || i) from generate_series(1, 3) i;
select pgque.ticker('sk') is not null as ticked;
insert into marks select 't2', clock_timestamp();
select pg_sleep(0.01);
select pgque.send('sk', 'c' || i) from generate_series(1, 3) i;
select string_agg(payload, ' ' order by batch_no, msg_id) as first_pass from pgque_test.drain('sk', 'c');

-- seek to t1: exactly b and c, in order, with the ids of the first pass
select clamped from pgque.seek('sk', 'c', (select at from marks where name = 't1'));
select string_agg(msg_id || ':' || payload, ' ' order by batch_no, msg_id) as from_t1 from pgque_test.drain('sk', 'c');
-- the same position written as text
select clamped from pgque.seek('sk', 'c', (select at from marks where name = 't2')::text);
select string_agg(msg_id || ':' || payload, ' ' order by batch_no, msg_id) as from_t2 from pgque_test.drain('sk', 'c');
-- earliest: everything; latest: nothing
select tick_id, clamped from pgque.seek('sk', 'c', 'earliest');
select string_agg(payload, ' ' order by batch_no, msg_id) as from_earliest from pgque_test.drain('sk', 'c');
select clamped from pgque.seek('sk', 'c', ' LATEST ');
select count(*) as after_latest from pgque_test.drain('sk', 'c');
-- a time after the last tick is the latest; one before the first the earliest, clamped
select clamped from pgque.seek('sk', 'c', now() + interval '1 hour');
select count(*) as after_future from pgque_test.drain('sk', 'c');
select tick_id, clamped from pgque.seek('sk', 'c', timestamptz '2000-01-01 00:00+00');
select count(*) as after_clamped from pgque_test.drain('sk', 'c');

-- an open batch is dropped: its events come again from the new position,
-- and an ack of the dropped batch finishes nothing (moves no cursor)
select pgque.seek('sk', 'c', 'earliest') is not null;
select pgque.ticker('sk');
create temp table open_batch as select distinct batch_id from pgque.receive('sk', 'c', 2);
select count(*) as open_batches from open_batch;
select clamped from pgque.seek('sk', 'c', (select at from marks where name = 't2'));
select pgque.ack(batch_id) as dropped_batch_acks_nothing from open_batch;
select string_agg(payload, ' ' order by batch_no, msg_id) as after_drop from pgque_test.drain('sk', 'c');

-- subscribe with a start: a new consumer starts there; an existing one
-- keeps its cursor (0, and a notice)
select pgque.subscribe('sk', 'd', start => 'earliest');
select string_agg(payload, ' ' order by batch_no, msg_id) as d_from_earliest from pgque_test.drain('sk', 'd');
select pgque.subscribe('sk', 'e', start => (select at from marks where name = 't1'));
select string_agg(payload, ' ' order by batch_no, msg_id) as e_from_t1 from pgque_test.drain('sk', 'e');
select pgque.subscribe('sk', 'f', start => 'latest');
select count(*) as f_from_latest from pgque_test.drain('sk', 'f');
select pgque.subscribe('sk', 'd', start => 'earliest');
select count(*) as d_kept from pgque_test.drain('sk', 'd');
-- two arguments: as before, at the latest tick
select pgque.subscribe('sk', 'g');
select count(*) as g_from_latest from pgque_test.drain('sk', 'g');

-- register_consumer_at keeps working beside it
select pgque.register_consumer_at('sk', 'c', (select tick_id from pgque.seek('sk', 'c', 'earliest')));
select count(*) as at_earliest_tick from pgque_test.drain('sk', 'c');

-- bad input: each refused with its SQLSTATE, nothing moved
select pgque_test.error_of($$select pgque.seek('sk', 'c', null::text)$$) as null_text;
select pgque_test.error_of($$select pgque.seek('sk', 'c', null::timestamptz)$$) as null_time;
select pgque_test.error_of($$select pgque.seek('sk', 'c', 'yesterday-ish')$$) as not_a_position;
select pgque_test.error_of($$select pgque.seek('sk', 'c', '')$$) as empty_position;
select pgque_test.error_of($$select pgque.seek('nope', 'c', 'earliest')$$) as unknown_queue;
select pgque_test.error_of($$select pgque.seek(null, 'c', 'earliest')$$) as null_queue;
select pgque_test.error_of($$select pgque.seek('sk', 'nobody', 'earliest')$$) as not_subscribed;
select pgque_test.error_of($$select pgque.seek('sk', null, 'earliest')$$) as null_consumer;
select pgque_test.error_of($$select pgque.seek('sk', 'c#0/2', 'earliest')$$) as slot_name;
select pgque_test.error_of($$select pgque.seek('sk', repeat('x', 65), 'earliest')$$) as long_name;
select pgque_test.error_of($$select pgque.subscribe('sk', 'h', null::text)$$) as null_start;
select pgque_test.error_of($$select pgque.subscribe('sk', 'h', null::timestamptz)$$) as null_start_time;
select pgque_test.error_of($$select pgque.subscribe('sk', 'h', 'soon')$$) as bad_start;
select count(*) as h_not_subscribed from pgque.get_consumer_info('sk') where consumer_name = 'h';
-- a seek must see a rotation that commits while it waits: READ COMMITTED only
begin isolation level repeatable read;
select pgque_test.error_of($$select pgque.seek('sk', 'c', 'earliest')$$) as repeatable_read;
rollback;
-- (cooperative groups and partitioned consumers: regress 43_seek_kinds)
select pgque.drop_queue('sk', true);
