-- Delayed delivery: send_at delivers no earlier than deliver_at.
select pgque.create_queue('later');
select pgque.subscribe('later', 'c');

-- a time that is not in the future appends at once
select pgque.send_at('later', 'now', 'at once', now() - interval '1 minute') as immediate_id;
select msg_id, type, payload from pgque_test.drain('later', 'c');

-- a future time: the id is allocated now and returned, the event waits
select pgque.send_at('later', 'reminder', 'in a second', clock_timestamp() + interval '1 second') as delayed_id \gset
select pgque.send_at('later', 'reminder', '{"in": "an hour"}'::jsonb, now() + interval '1 hour') as hour_id \gset
select count(*) as waiting from pgque.delayed_event;
select pgque.maint_retry_events() as moved_before_due;
select count(*) as nothing_yet from pgque_test.drain('later', 'c');

select pg_sleep(1.2);
select pgque.maint_retry_events() as moved_when_due;
select msg_id = :delayed_id as same_id, type, payload, retry_count from pgque_test.drain('later', 'c');
select ev_id = :hour_id as hour_still_waiting, ev_data from pgque.delayed_event;

-- rejections
select pgque_test.error_of($$select pgque.send_at('later', 't', 'p', null)$$) as null_time;
select pgque_test.error_of($$select pgque.send_at('nope', 't', 'p', now())$$) as unknown_queue;
select pgque_test.error_of($$select pgque.send_at('later', null, 'p', now())$$) as null_type;
-- dropping the queue drops what waits in it
select pgque.drop_queue('later', true);
select count(*) as delayed_left from pgque.delayed_event;
