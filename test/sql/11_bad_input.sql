-- Bad input: every public function, tried with NULLs, unknown names, oversize
-- names and out-of-range numbers, answers with a clear error and SQLSTATE.
select pgque.create_queue('bi');
select pgque.subscribe('bi', 'c');
select pgque.send('bi', 'x');
select pgque.ticker('bi') is not null as ticked;

create temp table cases (func text, what text, sql text);
insert into cases values
 ('create_queue(text)', 'oversize',        $$select pgque.create_queue(repeat('q', 100))$$),
 ('drop_queue(text)', 'unknown',           $$select pgque.drop_queue('nope')$$),
 ('drop_queue(text,boolean)', 'null force',$$select pgque.drop_queue('bi', null)$$),
 ('set_queue_config(text,text,text)', 'bad value', $$select pgque.set_queue_config('bi', 'ticker_max_lag', '-3 s')$$),
 ('insert_event(text,text,text)', 'unknown', $$select pgque.insert_event('nope', 't', 'd')$$),
 ('insert_event(text,text,text,text,text,text,text)', 'null queue', $$select pgque.insert_event(null, 't', 'd', null, null, null, null)$$),
 ('send(text,text)', 'oversize queue',     $$select pgque.send(repeat('q', 58), 'x')$$),
 ('send(text,jsonb)', 'null queue',        $$select pgque.send(null, '{}'::jsonb)$$),
 ('send(text,text,text)', 'null type',     $$select pgque.send('bi', null, 'x'::text)$$),
 ('send(text,text,jsonb)', 'unknown',      $$select pgque.send('nope', 't', '{}'::jsonb)$$),
 ('send(text,text,text,text)', 'null type',$$select pgque.send('bi', null, 'x'::text, 'k')$$),
 ('send(text,text,jsonb,text)', 'unknown', $$select pgque.send('nope', 't', '{}'::jsonb, 'k')$$),
 ('send_batch(text,text[])', 'null array', $$select pgque.send_batch('bi', null::text[])$$),
 ('send_batch(text,jsonb[])', 'unknown',   $$select pgque.send_batch('nope', array['{}']::jsonb[])$$),
 ('send_batch(text,text,text[])', 'null type', $$select pgque.send_batch('bi', null, array['a'])$$),
 ('send_batch(text,text,jsonb[])', 'null array', $$select pgque.send_batch('bi', 't', null::jsonb[])$$),
 ('send_batch(text,text,text[],text[])', 'length mismatch', $$select pgque.send_batch('bi', 't', array['a'], array['k', 'l'])$$),
 ('send_batch(text,text,jsonb[],text[])', 'null keys', $$select pgque.send_batch('bi', 't', array['{}']::jsonb[], null)$$),
 ('send_at(text,text,text,timestamp with time zone)', 'null time', $$select pgque.send_at('bi', 't', 'x', null)$$),
 ('send_at(text,text,jsonb,timestamp with time zone)', 'unknown', $$select pgque.send_at('nope', 't', '{}'::jsonb, now())$$),
 ('ticker()', 'no arguments',              $$select 'ticker() takes no input'$$),
 ('ticker(text)', 'unknown',               $$select pgque.ticker('nope')$$),
 ('ticker(text,bigint,timestamp with time zone,bigint)', 'not external', $$select pgque.ticker('bi', 100, now(), 1)$$),
 ('force_tick(text)', 'null',              $$select pgque.force_tick(null)$$),
 ('force_next_tick(text)', 'unknown',      $$select pgque.force_next_tick('nope')$$),
 ('subscribe(text,text)', 'empty consumer',$$select pgque.subscribe('bi', '')$$),
 ('unsubscribe(text,text)', 'null consumer', $$select pgque.unsubscribe('bi', null)$$),
 ('register_consumer(text,text)', 'oversize consumer', $$select pgque.register_consumer('bi', repeat('c', 65))$$),
 ('register_consumer_at(text,text,bigint)', 'unknown tick', $$select pgque.register_consumer_at('bi', 'c2', 999999)$$),
 ('unregister_consumer(text,text)', 'unknown queue', $$select pgque.unregister_consumer('nope', 'c')$$),
 ('receive(text,text,integer)', 'zero max', $$select * from pgque.receive('bi', 'c', 0)$$),
 ('ack(bigint)', 'null',                   $$select pgque.ack(null)$$),
 ('nack(bigint,pgque.message,interval,text)', 'unknown batch', $$select pgque.nack(424242, row(1,424242,'t','p',null,now(),null,null,null,null)::pgque.message)$$),
 ('next_batch(text,text)', 'unknown consumer', $$select pgque.next_batch('bi', 'nobody')$$),
 ('next_batch_info(text,text)', 'null queue', $$select * from pgque.next_batch_info(null, 'c')$$),
 ('next_batch_custom(text,text,interval,integer,interval)', 'negative count', $$select * from pgque.next_batch_custom('bi', 'c', null, -1, null)$$),
 ('get_batch_events(bigint)', 'unknown batch', $$select * from pgque.get_batch_events(424242)$$),
 ('finish_batch(bigint)', 'null',          $$select pgque.finish_batch(null)$$),
 ('event_retry(bigint,bigint,timestamp with time zone)', 'unknown batch', $$select pgque.event_retry(424242, 1, now())$$),
 ('event_retry(bigint,bigint,integer)', 'negative seconds', $$select pgque.event_retry(424242, 1, -5)$$),
 ('batch_retry(bigint,integer)', 'null batch', $$select pgque.batch_retry(null, 5)$$),
 ('maint()', 'no arguments',               $$select 'maint() takes no input'$$),
 ('maint_retry_events()', 'no arguments',  $$select 'maint_retry_events() takes no input'$$),
 ('maint_tick_cleanup()', 'no arguments',  $$select 'maint_tick_cleanup() takes no input'$$),
 ('maint_rotate_tables_step1(text)', 'unknown', $$select pgque.maint_rotate_tables_step1('nope')$$),
 ('maint_rotate_tables_step2()', 'no arguments', $$select 'maint_rotate_tables_step2() takes no input'$$),
 ('dlq_inspect(text,integer)', 'negative limit', $$select * from pgque.dlq_inspect('bi', -1)$$),
 ('dlq_replay(bigint)', 'unknown',         $$select pgque.dlq_replay(424242)$$),
 ('dlq_replay_all(text)', 'unknown',       $$select * from pgque.dlq_replay_all('nope')$$),
 ('dlq_purge(text,interval)', 'negative',  $$select pgque.dlq_purge('bi', '-1 s')$$),
 ('get_queue_info()', 'no arguments',      $$select 'get_queue_info() takes no input'$$),
 ('get_queue_info(text)', 'unknown',       $$select * from pgque.get_queue_info('nope')$$),
 ('get_consumer_info()', 'no arguments',   $$select 'get_consumer_info() takes no input'$$),
 ('get_consumer_info(text)', 'null',       $$select * from pgque.get_consumer_info(null)$$),
 ('get_consumer_info(text,text)', 'unknown consumer', $$select * from pgque.get_consumer_info('bi', 'nobody')$$),
 ('get_batch_info(bigint)', 'unknown',     $$select * from pgque.get_batch_info(424242)$$),
 ('send_idem(text,text,text,text,interval,text)', 'null key', $$select * from pgque.send_idem('bi', 't', 'p', null)$$),
 ('send_idem(text,text,jsonb,text,interval,text)', 'zero ttl', $$select * from pgque.send_idem('bi', 't', '{}'::jsonb, 'k', '0 s')$$),
 ('maint_idem()', 'no arguments',          $$select 'maint_idem() takes no input'$$),
 ('maint_idem(text)', 'unknown',           $$select pgque.maint_idem('nope')$$),
 ('start()', 'no pg_cron',                $$select pgque.start()$$),
 ('stop()', 'no arguments',                $$select 'stop() takes no input'$$),
 ('ticker_loop(interval,interval)', 'zero period', $$call pgque.ticker_loop('1 s', '0 s')$$),
 ('ticker_loop(interval,interval)', 'period > duration', $$call pgque.ticker_loop('1 s', '2 s')$$),
 ('subscribe_slot(text,text,integer,integer)', 'slot >= n', $$select pgque.subscribe_slot('bi', 'p', 3, 3)$$),
 ('unsubscribe_slot(text,text,integer)', 'not partitioned', $$select pgque.unsubscribe_slot('bi', 'p', 0)$$),
 ('claim_slot(text,text,integer,text,interval)', 'unknown queue', $$select pgque.claim_slot('nope', 'p', 0, 'w')$$),
 ('release_slot(text,text,integer,text)', 'null worker', $$select pgque.release_slot('bi', 'p', 0, null)$$),
 ('receive_partitioned(text,text,integer,integer,text,integer)', 'zero max', $$select * from pgque.receive_partitioned('bi', 'p', 0, 1, 'w', 0)$$),
 ('ack_partitioned(text,text,integer,integer,text)', 'not partitioned', $$select pgque.ack_partitioned('bi', 'p', 0, 1, 'w')$$),
 ('nack_partitioned(text,text,integer,integer,text,pgque.message,interval,text)', 'null msg', $$select pgque.nack_partitioned('bi', 'p', 0, 1, 'w', null)$$),
 ('get_partition_slot_info()', 'no arguments', $$select 'get_partition_slot_info() takes no input'$$),
 ('maint_alerts(interval)', 'negative retention', $$select pgque.maint_alerts('-1 day')$$),
 ('metrics()', 'no arguments',            $$select 'metrics() takes no input'$$),
 ('status()', 'no arguments',              $$select 'status() takes no input'$$),
 ('version()', 'no arguments',             $$select 'version() takes no input'$$),
 ('logutriga()', 'called directly',        $$select pgque.logutriga()$$),
 ('jsontriga()', 'called directly',        $$select pgque.jsontriga()$$),
 ('sqltriga()', 'called directly',         $$select pgque.sqltriga()$$);

select func, what, pgque_test.error_of(sql) as error from cases order by func, what;

-- every public function of the extension has a case above
select p.oid::regprocedure as untested
  from pg_proc p
 where p.pronamespace = 'pgque'::regnamespace and p.proname not like '\_%'
   and regexp_replace(p.oid::regprocedure::text, '^pgque\.', '') not in (select func from cases)
 order by 1;

-- and the NULL of every text argument of the API is refused (not a no-op)
select func, pgque_test.error_of(sql) as error from (values
 ('create_queue',  $$select pgque.create_queue(null)$$),
 ('send',          $$select pgque.send(null::text, 'x'::text)$$),
 ('subscribe q',   $$select pgque.subscribe(null, 'c')$$),
 ('subscribe c',   $$select pgque.subscribe('bi', null)$$),
 ('receive q',     $$select * from pgque.receive(null, 'c')$$),
 ('ticker q',      $$select pgque.ticker(null::text)$$),
 ('next_batch c',  $$select pgque.next_batch('bi', null)$$),
 ('get_batch_events', $$select * from pgque.get_batch_events(null)$$),
 ('event_retry ev',$$select pgque.event_retry(1, null, now())$$),
 ('dlq_inspect q', $$select * from pgque.dlq_inspect(null)$$),
 ('set_queue_config q', $$select pgque.set_queue_config(null, 'max_retries', '1')$$),
 ('get_batch_info',$$select * from pgque.get_batch_info(null)$$),
 ('register_consumer_at tick', $$select pgque.register_consumer_at('bi', 'c', null)$$),
 ('ext ticker id', $$select pgque.ticker('bi', null, now(), 1)$$)) v(func, sql)
 order by 1;
select pgque.drop_queue('bi', true);
