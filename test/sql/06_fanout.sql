-- Fan-out: every consumer sees every event, from one stored copy, with its
-- own cursor.
select pgque.create_queue('f');
select pgque.subscribe('f', c) from unnest(array['audit', 'billing', 'search']) c;
select pgque.send_batch('f', 'e', array['one', 'two', 'three']);
select count(*) as stored_once from pgque_test.events('f');

-- each consumer gets all three, independently
select c, (select array_agg(payload order by msg_id) from pgque_test.drain('f', c)) as got
  from unnest(array['audit', 'billing', 'search']) c;

-- cursors move independently: only "audit" consumes the next event
select pgque.send('f', 'four');
select payload from pgque_test.drain('f', 'audit');
select consumer_name, pending_events > 0 as behind from pgque.get_consumer_info('f') order by 1;
select c, (select array_agg(payload) from pgque_test.drain('f', c)) as got
  from unnest(array['billing', 'search']) c;
-- one consumer's retry goes to it alone
select pgque.send('f', 'five');
select pgque.ticker('f') is not null as ticked;
select pgque.nack(m.batch_id, m, '0 s') from pgque.receive('f', 'billing') m;
select pgque.ack(batch_id) from (select distinct batch_id from pgque.receive('f', 'billing')) b;
select count(*) from pgque_test.drain('f', 'audit');
select count(*) from pgque_test.drain('f', 'search');
select pgque.maint_retry_events();
select c, (select array_agg(payload || '/' || coalesce(retry_count, 0)) from pgque_test.drain('f', c)) as got
  from unnest(array['audit', 'billing', 'search']) c;
select pgque.drop_queue('f', true);
