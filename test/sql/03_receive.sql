-- receive / ack / nack contracts.
select pgque.create_queue('r');
select pgque.subscribe('r', 'c') as new_sub, pgque.subscribe('r', 'c') as existing_sub;

-- nothing ticked yet: receive returns nothing
select count(*) as before_tick from pgque.receive('r', 'c');
select pgque.send('r', 'm' || i) from generate_series(1, 5) i;
select pgque.ticker('r') is not null as ticked;

-- receive returns up to max_return events of the open batch, in ev_id order
create temp table got as select * from pgque.receive('r', 'c', 3);
select msg_id, type, payload, retry_count from got order by msg_id;
-- until ack, receive returns the same events of the same batch
select (select array_agg(msg_id order by msg_id) from pgque.receive('r', 'c', 3)) = (select array_agg(msg_id order by msg_id) from got) as same_events,
       (select distinct batch_id from pgque.receive('r', 'c', 3)) = (select distinct batch_id from got) as same_batch;
-- ack returns 1, and 0 for a batch already acked or unknown
select pgque.ack((select distinct batch_id from got)) as first_ack,
       pgque.ack((select distinct batch_id from got)) as second_ack,
       pgque.ack(999999) as unknown_ack;
-- the rest of the tick window comes next: nothing past max_return is lost
select msg_id, payload, batch_id <> (select distinct batch_id from got) as new_batch_id
  from pgque.receive('r', 'c', 3);
select pgque.ack((select distinct batch_id from pgque.receive('r', 'c', 3))) as ack_rest;
select count(*) as drained from pgque.receive('r', 'c');

-- an empty tick window finishes itself and the cursor moves on
select pgque.force_next_tick('r') is not null as forced;
select pgque.ticker('r') is not null as empty_tick;
select count(*) as empty_window from pgque.receive('r', 'c');
select current_batch is null as no_open_batch,
       last_tick = (select max(tick_id) from pgque.tick t join pgque.queue q on q.queue_id = t.tick_queue
                     where q.queue_name = 'r') as at_latest_tick
  from pgque.get_consumer_info('r', 'c');

-- nack: the event comes back to this consumer with retry_count + 1, same msg_id
select pgque.send('r', 'flaky') as flaky_id \gset
select pgque.ticker('r') is not null as ticked;
create temp table b1 as select * from pgque.receive('r', 'c');
select msg_id = :flaky_id as is_flaky, retry_count from b1;
-- a msg_id that is not in the batch is refused; the caller's payload is ignored
select pgque_test.error_of(format('select pgque.nack(%s, row(424242, %s, ''x'', ''forged'', null, now(), null, null, null, null)::pgque.message)',
                                  (select batch_id from b1), (select batch_id from b1))) as forged_msg;
select pgque.nack(m.batch_id, m, '0 seconds', 'first failure') as nacked from pgque.receive('r', 'c') m;
-- nacking it twice in the batch schedules it once
select pgque.nack(m.batch_id, m, '0 seconds') as nacked_again from pgque.receive('r', 'c') m;
select pgque.ack((select batch_id from b1)) as acked;
select count(*) as not_yet_moved from pgque.receive('r', 'c');
select pgque.maint_retry_events() as moved;
select batch_no, msg_id = :flaky_id as is_flaky, payload, retry_count from pgque_test.drain('r', 'c');

-- a retry_after in the future is respected
select pgque.send('r', 'later') as later_id \gset
select pgque.ticker('r') is not null as ticked;
select pgque.nack(m.batch_id, m, '1 hour') from pgque.receive('r', 'c') m;
select pgque.ack(batch_id) from (select distinct batch_id from pgque.receive('r', 'c')) b;
select pgque.maint_retry_events() as moved_none;
select ev_retry_after > now() + interval '59 minutes' as due_in_an_hour from pgque.retry_queue;

-- after max_retries retries the next nack dead-letters the event
select pgque.set_queue_config('r', 'max_retries', '2');
select pgque.send('r', 'poison') as poison_id \gset
-- three deliveries: retry_count NULL, 1, 2; the third nack dead-letters
select pgque.maint_retry_events() >= 0 as moved;
select pgque.ticker('r') is not null as ticked;
select m.retry_count, pgque.nack(m.batch_id, m, '0 seconds', 'poison pill') as nacked
  from pgque.receive('r', 'c') m where payload = 'poison';
select pgque.ack(batch_id) from (select distinct batch_id from pgque.receive('r', 'c')) b;
select pgque.maint_retry_events() >= 0 as moved;
select pgque.ticker('r') is not null as ticked;
select m.retry_count, pgque.nack(m.batch_id, m, '0 seconds', 'poison pill') as nacked
  from pgque.receive('r', 'c') m where payload = 'poison';
select pgque.ack(batch_id) from (select distinct batch_id from pgque.receive('r', 'c')) b;
select pgque.maint_retry_events() >= 0 as moved;
select pgque.ticker('r') is not null as ticked;
select m.retry_count, pgque.nack(m.batch_id, m, '0 seconds', 'poison pill') as nacked
  from pgque.receive('r', 'c') m where payload = 'poison';
select pgque.ack(batch_id) from (select distinct batch_id from pgque.receive('r', 'c')) b;
select ev_id = :poison_id as is_poison, ev_retry, dl_reason from pgque.dlq_inspect('r');
select count(*) as poison_retries_left from pgque.retry_queue where ev_id = :poison_id;

-- max_retries = 0: the first nack dead-letters
select pgque.set_queue_config('r', 'max_retries', '0');
select pgque.send('r', 'no second chance') as once_id \gset
select pgque.ticker('r') is not null as ticked;
select pgque.nack(m.batch_id, m, '0 seconds', 'no retries') from pgque.receive('r', 'c') m where payload = 'no second chance';
select pgque.ack(batch_id) from (select distinct batch_id from pgque.receive('r', 'c')) b;
select ev_id = :once_id as is_once, ev_retry, dl_reason from pgque.dlq_inspect('r', 1);

-- rejections
select pgque_test.error_of($$select * from pgque.receive('r', 'c', 0)$$) as zero_max;
select pgque_test.error_of($$select * from pgque.receive('r', 'c', -1)$$) as negative_max;
select pgque_test.error_of($$select * from pgque.receive('r', 'c', null)$$) as null_max;
select pgque_test.error_of($$select * from pgque.receive('r', 'nobody')$$) as unknown_consumer;
select pgque_test.error_of($$select * from pgque.receive('nope', 'c')$$) as unknown_queue;
select pgque_test.error_of($$select * from pgque.receive('r', null)$$) as null_consumer;
select pgque_test.error_of($$select * from pgque.receive('r', repeat('c', 65))$$) as long_consumer;
select pgque_test.error_of($$select * from pgque.receive('r', 'c#0/4')$$) as slot_consumer;
select pgque_test.error_of($$select pgque.subscribe('r', 'c#0/4')$$) as hash_in_name;
select pgque_test.error_of($$select pgque.ack(null)$$) as null_ack;
select pgque_test.error_of($$select pgque.nack(null, null::pgque.message)$$) as null_nack;
select pgque_test.error_of($$select pgque.nack(999999, row(1,999999,'t','p',null,now(),null,null,null,null)::pgque.message)$$) as nack_unknown_batch;
select pgque_test.error_of($$select pgque.nack(1, row(1,1,'t','p',null,now(),null,null,null,null)::pgque.message, '-1 s')$$) as nack_negative_delay;
select pgque_test.error_of($$select pgque.nack(1, row(1,1,'t','p',null,now(),null,null,null,null)::pgque.message, null)$$) as nack_null_delay;

-- unsubscribe: 1, then 0; its retries and dead letters go with it
select pgque.unsubscribe('r', 'c') as removed, pgque.unsubscribe('r', 'c') as not_there;
select count(*) as retries_left from pgque.retry_queue;
select count(*) as dead_letters_left from pgque.dead_letter;
select pgque.drop_queue('r');
