-- Dead-letter queue: inspect, replay (to the consumer that dead-lettered
-- only), replay_all, purge.
select pgque.create_queue('d');
select pgque.set_queue_config('d', 'max_retries', '0');
select pgque.subscribe('d', 'failing'), pgque.subscribe('d', 'healthy');
select pgque.send('d', 'bad', 'payload-' || i) from generate_series(1, 3) i;
select pgque.ticker('d') is not null as ticked;

-- "failing" dead-letters all three; "healthy" processes them
select pgque.nack(m.batch_id, m, '0 s', 'handler crashed on ' || m.payload) from pgque.receive('d', 'failing') m;
select pgque.ack(batch_id) from (select distinct batch_id from pgque.receive('d', 'failing')) b;
select count(*) as healthy_got from pgque_test.drain('d', 'healthy');

-- inspect: newest first, limited
select ev_id, ev_type, ev_data, ev_retry, dl_reason, c.co_name
  from pgque.dlq_inspect('d') d join pgque.consumer c on c.co_id = d.dl_consumer_id;
select count(*) as limited from pgque.dlq_inspect('d', 2);

-- replay one: same event id, back to "failing" only, with a fresh retry count
select pgque.dlq_replay((select min(dl_id) from pgque.dead_letter)) as replayed_ev_id;
select count(*) as dlq_rows_left from pgque.dlq_inspect('d');
select msg_id, payload, retry_count from pgque_test.drain('d', 'failing');
select count(*) as healthy_sees_nothing from pgque_test.drain('d', 'healthy');

-- replay_all: the rest goes back to "failing"
select * from pgque.dlq_replay_all('d');
select msg_id, payload, retry_count from pgque_test.drain('d', 'failing');
select count(*) as healthy_still_nothing from pgque_test.drain('d', 'healthy');
select * from pgque.dlq_replay_all('d') as nothing_to_replay;

-- purge: only rows older than the given age
select pgque.send('d', 'bad', 'again');
select pgque.ticker('d') is not null as ticked;
select pgque.nack(m.batch_id, m, '0 s', 'still failing') from pgque.receive('d', 'failing') m;
select pgque.ack(batch_id) from (select distinct batch_id from pgque.receive('d', 'failing')) b;
select pgque.dlq_purge('d', '1 hour') as purged_none;
update pgque.dead_letter set dl_time = now() - interval '31 days';
select pgque.dlq_purge('d') as purged_default_30_days;
select count(*) as dlq_empty from pgque.dead_letter;

-- rejections
select pgque_test.error_of($$select pgque.dlq_replay(424242)$$) as unknown_dl;
select pgque_test.error_of($$select pgque.dlq_replay(null)$$) as null_dl;
select pgque_test.error_of($$select * from pgque.dlq_inspect('d', 0)$$) as zero_limit;
select pgque_test.error_of($$select * from pgque.dlq_inspect('d', null)$$) as null_limit;
select pgque_test.error_of($$select * from pgque.dlq_inspect('nope')$$) as unknown_queue;
select pgque_test.error_of($$select * from pgque.dlq_replay_all(null)$$) as null_queue;
select pgque_test.error_of($$select pgque.dlq_purge('d', '-1 day')$$) as negative_age;
select pgque_test.error_of($$select pgque.dlq_purge('d', null)$$) as null_age;
select pgque.drop_queue('d', true);
