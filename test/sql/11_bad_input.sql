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
 ('next_batch(text,text,text,interval)', 'negative dead interval', $$select pgque.next_batch('bi', 'g', 'm', '-1 s')$$),
 ('next_batch_custom(text,text,text,interval,integer,interval,interval)', 'zero count', $$select * from pgque.next_batch_custom('bi', 'g', 'm', null, 0, null)$$),
 ('register_subconsumer(text,text,text,boolean)', 'dot in subconsumer', $$select pgque.register_subconsumer('bi', 'g', 'm.1')$$),
 ('subscribe_subconsumer(text,text,text,boolean)', 'null convert', $$select pgque.subscribe_subconsumer('bi', 'g', 'm', null)$$),
 ('unregister_subconsumer(text,text,text,integer)', 'bad handling', $$select pgque.unregister_subconsumer('bi', 'g', 'm', 2)$$),
 ('unsubscribe_subconsumer(text,text,text,integer)', 'unknown queue', $$select pgque.unsubscribe_subconsumer('nope', 'g', 'm')$$),
 ('touch_subconsumer(text,text,text)', 'oversize subconsumer', $$select pgque.touch_subconsumer('bi', 'g', repeat('m', 65))$$),
 ('receive_coop(text,text,text,integer,interval)', 'zero max', $$select * from pgque.receive_coop('bi', 'g', 'm', 0)$$),
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
 ('grant_queue(text,regrole,text)', 'unknown queue',   $$select pgque.grant_queue('nope', 'pgque_reader', 'subscribe')$$),
 ('grant_queue(text,regrole,text)', 'null queue',      $$select pgque.grant_queue(null, 'pgque_reader', 'subscribe')$$),
 ('grant_queue(text,regrole,text)', 'null role',       $$select pgque.grant_queue('bi', null, 'subscribe')$$),
 ('grant_queue(text,regrole,text)', 'PUBLIC (0)',      $$select pgque.grant_queue('bi', '-', 'send')$$),
 ('grant_queue(text,regrole,text)', 'dropped role oid', $$select pgque.grant_queue('bi', 4000000000::oid::regrole, 'send')$$),
 ('grant_queue(text,regrole,text)', 'unknown role',    $$select pgque.grant_queue('bi', 'no_such_role_bi', 'send')$$),
 ('grant_queue(text,regrole,text)', 'null right',      $$select pgque.grant_queue('bi', 'pgque_reader', null)$$),
 ('grant_queue(text,regrole,text)', 'unknown right',   $$select pgque.grant_queue('bi', 'pgque_reader', 'read')$$),
 ('grant_queue(text,regrole,text)', 'upper-case right', $$select pgque.grant_queue('bi', 'pgque_reader', 'SEND')$$),
 ('grant_queue(text,regrole,text)', 'held already',    $$select pgque.grant_queue('bi', 'pgque_reader', 'subscribe')$$),
 ('revoke_queue(text,regrole,text)', 'unknown queue',  $$select pgque.revoke_queue('nope', 'pgque_reader', 'subscribe')$$),
 ('revoke_queue(text,regrole,text)', 'null role',      $$select pgque.revoke_queue('bi', null, 'subscribe')$$),
 ('revoke_queue(text,regrole,text)', 'PUBLIC (0)',     $$select pgque.revoke_queue('bi', '-', 'subscribe')$$),
 ('revoke_queue(text,regrole,text)', 'unknown right',  $$select pgque.revoke_queue('bi', 'pgque_reader', '')$$),
 ('revoke_queue(text,regrole,text)', 'not held',       $$select pgque.revoke_queue('bi', 'pgque_writer', 'subscribe')$$),
 ('grant_consumer(text,text,regrole)', 'unknown queue',    $$select pgque.grant_consumer('nope', 'c', 'pgque_writer')$$),
 ('grant_consumer(text,text,regrole)', 'unknown consumer', $$select pgque.grant_consumer('bi', 'nobody', 'pgque_writer')$$),
 ('grant_consumer(text,text,regrole)', 'slot name',        $$select pgque.grant_consumer('bi', 'c#0/2', 'pgque_writer')$$),
 ('grant_consumer(text,text,regrole)', 'null role',        $$select pgque.grant_consumer('bi', 'c', null)$$),
 ('grant_consumer(text,text,regrole)', 'PUBLIC (0)',       $$select pgque.grant_consumer('bi', 'c', '-')$$),
 ('grant_consumer(text,text,regrole)', 'dropped role oid', $$select pgque.grant_consumer('bi', 'c', 4000000000::oid::regrole)$$),
 ('grant_consumer(text,text,regrole)', 'held already',     $$select pgque.grant_consumer('bi', 'c', 'pgque_reader')$$),
 ('revoke_consumer(text,text,regrole)', 'null consumer',   $$select pgque.revoke_consumer('bi', null, 'pgque_reader')$$),
 ('revoke_consumer(text,text,regrole)', 'PUBLIC (0)',      $$select pgque.revoke_consumer('bi', 'c', '-')$$),
 ('revoke_consumer(text,text,regrole)', 'not held',        $$select pgque.revoke_consumer('bi', 'c', 'pgque_writer')$$),
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
 ('claim_any_slot(text,text,text,interval)', 'not partitioned', $$select * from pgque.claim_any_slot('bi', 'p', 'w')$$),
 ('claim_any_slot(text,text,text,interval)', 'unknown queue', $$select * from pgque.claim_any_slot('nope', 'p', 'w')$$),
 ('release_slot(text,text,integer,text)', 'null worker', $$select pgque.release_slot('bi', 'p', 0, null)$$),
 ('receive_partitioned(text,text,integer,integer,text,integer)', 'zero max', $$select * from pgque.receive_partitioned('bi', 'p', 0, 1, 'w', 0)$$),
 ('ack_partitioned(text,text,integer,integer,text)', 'not partitioned', $$select pgque.ack_partitioned('bi', 'p', 0, 1, 'w')$$),
 ('nack_partitioned(text,text,integer,integer,text,pgque.message,interval,text)', 'null msg', $$select pgque.nack_partitioned('bi', 'p', 0, 1, 'w', null)$$),
 ('get_partition_slot_info()', 'no arguments', $$select 'get_partition_slot_info() takes no input'$$),
 ('resize_partitioned(text,text,integer)', 'not partitioned', $$select pgque.resize_partitioned('bi', 'p', 2)$$),
 ('partition_n(text,text)', 'null consumer', $$select pgque.partition_n('bi', null)$$),
 ('get_partition_resize_info()', 'no arguments', $$select 'get_partition_resize_info() takes no input'$$),
 ('subscribe_slot(text,text,integer,integer,text)', 'unknown policy', $$select pgque.subscribe_slot('bi', 'p', 0, 1, 'x')$$),
 ('get_failure_policy(text,text)', 'not partitioned', $$select pgque.get_failure_policy('bi', 'p')$$),
 ('set_failure_policy(text,text,text)', 'unknown policy', $$select pgque.set_failure_policy('bi', 'p', 'x')$$),
 ('get_blocked_keys()', 'no arguments',    $$select 'get_blocked_keys() takes no input'$$),
 ('maint_alerts(interval)', 'negative retention', $$select pgque.maint_alerts('-1 day')$$),
 ('metrics()', 'no arguments',            $$select 'metrics() takes no input'$$),
 ('queue_stats()', 'no arguments',        $$select 'queue_stats() takes no input'$$),
 ('consumer_stats()', 'no arguments',     $$select 'consumer_stats() takes no input'$$),
 ('queue_health()', 'no arguments',       $$select 'queue_health() takes no input'$$),
 ('otel_metrics()', 'no arguments',       $$select 'otel_metrics() takes no input'$$),
 ('stuck_consumers(interval)', 'negative threshold', $$select * from pgque.stuck_consumers('-1 hour')$$),
 ('in_flight(text)', 'unknown',           $$select * from pgque.in_flight('nope')$$),
 ('throughput(text,interval,interval)', 'bucket > period', $$select * from pgque.throughput('bi', '1 minute', '1 hour')$$),
 ('error_rate(text,interval,interval)', 'too many buckets', $$select * from pgque.error_rate('bi', '1 day', '1 second')$$),
 ('status()', 'no arguments',              $$select 'status() takes no input'$$),
 ('launcher_workers()', 'no arguments',    $$select 'launcher_workers() takes no input'$$),
 ('version()', 'no arguments',             $$select 'version() takes no input'$$),
 ('create_queue(text,jsonb)', 'array options', $$select pgque.create_queue('bi', '[]')$$),
 ('pause_queue(text)', 'unknown',          $$select pgque.pause_queue('nope')$$),
 ('resume_queue(text)', 'null',            $$select pgque.resume_queue(null)$$),
 ('insert_event_bulk(text,text,text[])', 'null list', $$select pgque.insert_event_bulk('bi', 't', null)$$),
 ('get_batch_cursor(bigint,text,integer)', 'negative limit', $$select * from pgque.get_batch_cursor(1, 'c', -1)$$),
 ('get_batch_cursor(bigint,text,integer,text)', 'empty condition', $$select * from pgque.get_batch_cursor(1, 'c', 1, '')$$),
 ('event_dead(bigint,bigint,text,timestamp with time zone,xid8,integer,text,text,text,text,text,text)', 'unknown batch',
                                           $$select pgque.event_dead(424242, 1, 'r', now(), null, 0, 't', 'p')$$),
 ('maint_deliver_delayed()', 'no arguments', $$select 'maint_deliver_delayed() takes no input'$$),
 ('set_tick_period_ms(integer)', 'not a divisor', $$select pgque.set_tick_period_ms(7)$$),
 ('uninstall()', 'no arguments',           $$select 'uninstall() takes no input'$$),
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

-- grant_queue: at most PGQUE_QUEUE_GRANTEES_MAX (32) roles per right and queue
do $$ begin
    for i in 1 .. 32 loop
        execute format('create role bi_grantee_%s nologin', i);
    end loop;
end $$;
select sum(pgque.grant_queue('bi', ('bi_grantee_' || i)::regrole, 'send')) as granted
  from generate_series(1, 31) i;
select pgque_test.error_of($$select pgque.grant_queue('bi', 'bi_grantee_32', 'send')$$) as over_the_limit;
select pgque.drop_queue('bi', true);
do $$ begin
    for i in 1 .. 32 loop
        execute format('drop role bi_grantee_%s', i);
    end loop;
end $$;
