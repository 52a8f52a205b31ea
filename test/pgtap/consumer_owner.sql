-- Per-consumer authorization (issue #11): a consumer, its batches and its
-- partition slots belong to the role that subscribed it.  Another
-- application's reader (pgque_t_app2) replays the attacks of the issue on
-- application 1's consumer and slots and is refused with 42501; the owning
-- role and its members, pgque_admin and the extension's owner are not.
\ir setup.psql

-- application 1 (pgque_t_reader) subscribes "c1" and opens a batch
select is(pg_temp.run_as('pgque_t_admin', $$select pgque.create_queue('bq')$$), '1', 'admin creates queue bq');
select is(pg_temp.run_as('pgque_t_reader', $$select pgque.subscribe('bq', 'c1')$$), '1', 'app1 subscribes c1');
select is((select s.sub_owner::text from pgque.subscription s join pgque.consumer c on c.co_id = s.sub_consumer
            where c.co_name = 'c1'), 'pgque_t_reader', 'c1 belongs to the role that subscribed it');
select is(pg_temp.run_as('pgque_t_writer', $$select count(pgque.send('bq', 'ev', 'p' || k, 'key-' || k)) from generate_series(1, 6) k$$),
          '6', 'writer sends 6 events');
select isnt(pg_temp.run_as('pgque_t_admin', $$select pgque.ticker('bq')$$), null, 'admin ticks');
select pg_temp.run_as('pgque_t_reader', $$select batch_id from pgque.receive('bq', 'c1', 10)$$) as b \gset
select pg_temp.run_as('pgque_t_reader', $$select min(msg_id) from pgque.receive('bq', 'c1', 10)$$) as m \gset
select isnt(:'b'::text, null::text, 'app1 has an open batch');
select (select min(tick_id) from pgque.tick t join pgque.queue q on q.queue_id = t.tick_queue
         where q.queue_name = 'bq') as tick \gset

-- the refusal says which consumer, which queue, whose
select is(pg_temp.error_as('pgque_t_app2', $$select * from pgque.receive('bq', 'c1')$$),
          '42501: permission denied for consumer "c1" of queue "bq", owned by role "pgque_t_reader"',
          'app2 receive on c1: refused, naming consumer, queue and owner');

-- app2 on app1's consumer: every operation refused
select pg_temp.denied('pgque_t_app2', $$select * from pgque.receive('bq', 'c1')$$, 'app2 cannot receive c1');
select pg_temp.denied('pgque_t_app2', $$select pgque.next_batch('bq', 'c1')$$, 'app2 cannot next_batch c1');
select pg_temp.denied('pgque_t_app2', $$select * from pgque.next_batch_info('bq', 'c1')$$, 'app2 cannot next_batch_info c1');
select pg_temp.denied('pgque_t_app2', $$select * from pgque.next_batch_custom('bq', 'c1', null, null, null)$$,
                      'app2 cannot next_batch_custom c1');
select pg_temp.denied('pgque_t_app2', format('select * from pgque.get_batch_events(%s)', :b),
                      'app2 cannot read the events of c1''s batch by its id');
select pg_temp.denied('pgque_t_app2', format('select pgque.ack(%s)', :b), 'app2 cannot ack c1''s batch');
select pg_temp.denied('pgque_t_app2',
                      format('select pgque.nack(%s, row(%s, %s, null, null, 0, null, null, null, null, null)::pgque.message)', :b, :m, :b),
                      'app2 cannot nack an event of c1''s batch');
select pg_temp.denied('pgque_t_app2', format('select pgque.event_retry(%s, %s, 0)', :b, :m),
                      'app2 cannot event_retry (seconds) in c1''s batch');
select pg_temp.denied('pgque_t_app2', format('select pgque.event_retry(%s, %s, now())', :b, :m),
                      'app2 cannot event_retry (time) in c1''s batch');
select pg_temp.denied('pgque_t_app2', format('select pgque.finish_batch(%s)', :b), 'app2 cannot finish c1''s batch');
select pg_temp.denied('pgque_t_app2', format('select pgque.register_consumer_at(%L, %L, %s)', 'bq', 'c1', :tick),
                      'app2 cannot reposition c1');
select pg_temp.denied('pgque_t_app2', $$select pgque.subscribe('bq', 'c1')$$, 'app2 cannot take c1 over by subscribing it');
select pg_temp.denied('pgque_t_app2', $$select * from pgque.seek('bq', 'c1', 'earliest')$$, 'app2 cannot move c1 with seek');
select pg_temp.denied('pgque_t_app2', $$select * from pgque.seek('bq', 'c1', now())$$, 'app2 cannot move c1 with seek to a time');
select pg_temp.denied('pgque_t_app2', $$select pgque.subscribe('bq', 'c1', start => 'earliest')$$,
                      'app2 cannot take c1 over by subscribing it with a start');
select pg_temp.denied('pgque_t_app2', $$select pgque.register_consumer('bq', 'c1')$$,
                      'app2 cannot take c1 over by register_consumer');
select pg_temp.denied('pgque_t_app2', $$select pgque.unsubscribe('bq', 'c1')$$, 'app2 cannot unsubscribe c1');
select pg_temp.denied('pgque_t_app2', $$select pgque.unregister_consumer('bq', 'c1')$$, 'app2 cannot unregister c1');
select is((select s.sub_owner::text || ' ' || s.sub_batch from pgque.subscription s
             join pgque.consumer c on c.co_id = s.sub_consumer where c.co_name = 'c1'),
          'pgque_t_reader ' || :b, 'c1 is still app1''s, with its batch open');
-- an application's SECURITY DEFINER wrapper is authorised as the session's
-- role, not as the wrapper's owner
create schema app1 authorization pgque_t_reader;
select is(pg_temp.run_as('pgque_t_reader', $$
    create function app1.peek() returns bigint language sql security definer
    as 'select count(*) from pgque.receive(''bq'', ''c1'', 10)';
    grant usage on schema app1 to pgque_t_app2;
    grant execute on function app1.peek() to pgque_t_app2;
    select 'made'$$), 'made', 'app1 makes a SECURITY DEFINER wrapper and grants it to app2');
select pg_temp.denied('pgque_t_app2', $$select app1.peek()$$, 'app2 through app1''s SECURITY DEFINER wrapper: refused');
select is(pg_temp.run_as('pgque_t_reader', $$select app1.peek()$$), '6', 'app1 through its own wrapper: allowed');
-- the same name on another queue is a consumer of app2's own
select is(pg_temp.run_as('pgque_t_admin', $$select pgque.create_queue('bq2')$$), '1', 'admin creates queue bq2');
select is(pg_temp.run_as('pgque_t_app2', $$select pgque.subscribe('bq2', 'c1')$$), '1',
          'app2 may subscribe its own c1 on another queue');
select is(pg_temp.run_as('pgque_t_app2', $$select count(*) from pgque.receive('bq2', 'c1')$$), '0',
          'and use it');

-- app1's own role, and a member of it, can
select is(pg_temp.run_as('pgque_t_app1_worker', $$select count(*) from pgque.receive('bq', 'c1', 10)$$), '6',
          'a member of app1''s role receives c1');
select is(pg_temp.run_as('pgque_t_reader', format('select count(*) from pgque.get_batch_events(%s)', :b)), '6',
          'app1 reads its batch''s events');
select is(pg_temp.run_as('pgque_t_reader',
                         format('select pgque.nack(%s, row(%s, %s, null, null, 0, null, null, null, null, null)::pgque.message)', :b, :m, :b)),
          '1', 'app1 nacks an event of its batch');
select is(pg_temp.run_as('pgque_t_reader', format('select pgque.event_retry(%s, %s + 1, 0)', :b, :m)), '1',
          'app1 retries an event of its batch');
select is(pg_temp.run_as('pgque_t_reader', format('select pgque.ack(%s)', :b)), '1', 'app1 acks its batch');
select is(pg_temp.run_as('pgque_t_reader', format('select pgque.register_consumer_at(%L, %L, %s)', 'bq', 'c1', :tick)), '1',
          'app1 repositions c1');
select is(pg_temp.run_as('pgque_t_reader', $$select pgque.subscribe('bq', 'c1')$$), '0',
          'app1 subscribing c1 again is harmless');

-- pgque_admin and the owner can use and remove it
select is(pg_temp.run_as('pgque_t_admin', $$select pgque.next_batch('bq', 'c1') is not null$$), 'true',
          'admin opens a batch of c1');
select pg_temp.run_as('pgque_t_admin', $$select pgque.next_batch('bq', 'c1')$$) as b2 \gset
select is(pg_temp.run_as('pgque_t_admin', format('select pgque.batch_retry(%s, 0) >= 0', :b2)), 'true',
          'admin retries c1''s batch');
select is(pg_temp.run_as('pgque_t_owner', format('select pgque.finish_batch(%s)', :b2)), '1',
          'the extension owner finishes c1''s batch');
select is(pg_temp.run_as('pgque_t_admin', $$select pgque.unsubscribe('bq', 'c1')$$), '1', 'admin unsubscribes c1');

-------------------------------------------------------------------------------
-- partition slots: app1 subscribes "p" (2 slots) and worker w1 holds slot 0
select is(pg_temp.run_as('pgque_t_reader', $$select count(pgque.subscribe_slot('bq', 'p', k, 2)) from generate_series(0, 1) k$$),
          '2', 'app1 subscribes the 2 slots of p');
select is((select owner::text from pgque.partition_consumer where co_name = 'p'), 'pgque_t_reader',
          'p belongs to app1');
select is((select count(*)::int4 from pgque.subscription s join pgque.consumer c on c.co_id = s.sub_consumer
            where c.co_name like 'p#%' and s.sub_owner = 'pgque_t_reader'::regrole), 2,
          'so do its slot subscriptions');
select is(pg_temp.run_as('pgque_t_reader', $$select pgque.claim_slot('bq', 'p', 0, 'w1') > 0$$), 'true',
          'app1''s worker w1 claims slot 0');
select is(pg_temp.run_as('pgque_t_writer', $$select count(pgque.send('bq', 'ev', 'q' || k, 'key-' || k)) from generate_series(1, 8) k$$),
          '8', 'writer sends 8 keyed events');
select isnt(pg_temp.run_as('pgque_t_admin', $$select pgque.ticker('bq')$$), null, 'admin ticks');
select is(pg_temp.run_as('pgque_t_reader', $$select count(*) > 0 from pgque.receive_partitioned('bq', 'p', 0, 2, 'w1')$$),
          'true', 'w1 receives slot 0');
select pg_temp.run_as('pgque_t_reader', $$select batch_id from pgque.receive_partitioned('bq', 'p', 0, 2, 'w1')$$) as sb \gset
select pg_temp.run_as('pgque_t_reader', $$select min(msg_id) from pgque.receive_partitioned('bq', 'p', 0, 2, 'w1')$$) as sm \gset

select pg_temp.denied('pgque_t_app2', $$select pgque.subscribe_slot('bq', 'p', 1, 2)$$, 'app2 cannot subscribe a slot of p');
select pg_temp.denied('pgque_t_app2', $$select pgque.claim_slot('bq', 'p', 1, 'x')$$, 'app2 cannot claim a free slot of p');
select pg_temp.denied('pgque_t_app2', $$select pgque.claim_slot('bq', 'p', 0, 'w1')$$,
                      'app2 cannot renew w1''s lease by its worker name');
select pg_temp.denied('pgque_t_app2', $$select pgque.claim_slot('bq', 'p', 0, 'x', '100 years')$$,
                      'app2 cannot claim slot 0 for 100 years');
select pg_temp.denied('pgque_t_app2', $$select pgque.release_slot('bq', 'p', 0, 'w1')$$,
                      'app2 cannot release w1''s lease by its worker name');
select pg_temp.denied('pgque_t_app2', $$select * from pgque.receive_partitioned('bq', 'p', 0, 2, 'w1')$$,
                      'app2 cannot receive slot 0 as w1');
select pg_temp.denied('pgque_t_app2', $$select pgque.ack_partitioned('bq', 'p', 0, 2, 'w1')$$,
                      'app2 cannot ack slot 0 as w1');
select pg_temp.denied('pgque_t_app2',
                      format('select pgque.nack_partitioned(%L, %L, 0, 2, %L, row(%s, %s, null, null, 0, null, null, null, null, null)::pgque.message)',
                             'bq', 'p', 'w1', :sm, :sb),
                      'app2 cannot nack slot 0 as w1');
select pg_temp.denied('pgque_t_app2', format('select pgque.ack(%s)', :sb),
                      'app2 cannot ack the slot''s batch by its (sequential) id');
select pg_temp.denied('pgque_t_app2', $$select pgque.unsubscribe_slot('bq', 'p', 1)$$, 'app2 cannot unsubscribe a slot of p');
select is((select lease_owner || ' ' || (select count(*) from pgque.partition_consumer where co_name = 'p')
             from pgque.get_partition_slot_info() where consumer = 'p' and slot = 0),
          'w1 1', 'w1 still holds slot 0 and p is still subscribed');
select is((select queue_partition_buckets from pgque.queue where queue_name = 'bq'), null::int4,
          'no reader fixed a bucket layout on bq');

-- app1 can, admin can, the owner can
select is(pg_temp.run_as('pgque_t_reader', $$select pgque.ack_partitioned('bq', 'p', 0, 2, 'w1')$$), '1',
          'w1 acks slot 0');
select is(pg_temp.run_as('pgque_t_reader', $$select pgque.release_slot('bq', 'p', 0, 'w1')$$), 'true',
          'w1 releases slot 0');
select is(pg_temp.run_as('pgque_t_app1_worker', $$select pgque.claim_slot('bq', 'p', 1, 'w2') > 0$$), 'true',
          'a member of app1''s role claims slot 1');
select is(pg_temp.run_as('pgque_t_admin', $$select pgque.release_slot('bq', 'p', 1, 'w2')$$), 'true',
          'admin releases slot 1');
select is(pg_temp.run_as('pgque_t_admin', $$select pgque.claim_slot('bq', 'p', 1, 'ops') > 0$$), 'true',
          'admin claims slot 1');
select is(pg_temp.run_as('pgque_t_admin', $$select count(*) >= 0 from pgque.receive_partitioned('bq', 'p', 1, 2, 'ops')$$),
          'true', 'admin receives slot 1');
select is(pg_temp.run_as('pgque_t_reader', $$select pgque.unsubscribe_slot('bq', 'p', 0)$$), '',
          'app1 unsubscribes slot 0');
select is(pg_temp.run_as('pgque_t_owner', $$select pgque.unsubscribe_slot('bq', 'p', 1)$$), '',
          'the owner unsubscribes slot 1');
select is((select count(*)::int4 from pgque.partition_consumer where co_name = 'p'), 0, 'p is gone');

-------------------------------------------------------------------------------
-- dead letters: they are the consumer's.  Another application's writer may
-- neither replay app1's (which removes them and makes c1 process the events
-- again) one by one nor with replay_all; app1's own role, an admin and the
-- owner may.
select is(pg_temp.run_as('pgque_t_admin', $$select pgque.create_queue('dq') + pgque.set_queue_config('dq', 'max_retries', '0')$$),
          '2', 'admin creates queue dq, no retries');
select is(pg_temp.run_as('pgque_t_reader', $$select pgque.subscribe('dq', 'c1')$$), '1', 'app1 subscribes c1 to dq');
select is(pg_temp.run_as('pgque_t_app2', $$select pgque.subscribe('dq', 'c2')$$), '1', 'app2 subscribes c2 to dq');
select is(pg_temp.run_as('pgque_t_writer', $$select count(pgque.send('dq', 'ev', 'd' || k)) from generate_series(1, 3) k$$),
          '3', 'writer sends 3 events');
select isnt(pg_temp.run_as('pgque_t_admin', $$select pgque.ticker('dq')$$), null, 'admin ticks dq');
select is(pg_temp.run_as('pgque_t_reader',
          $$select sum(pgque.nack(m.batch_id, m, '0 s', 'poison')) from pgque.receive('dq', 'c1') m$$),
          '3', 'c1 dead-letters the 3 events');
select is(pg_temp.run_as('pgque_t_app2',
          $$select sum(pgque.nack(m.batch_id, m, '0 s', 'poison')) from pgque.receive('dq', 'c2') m$$),
          '3', 'c2 dead-letters them too');
select (select min(dl_id) from pgque.dead_letter d join pgque.consumer c on c.co_id = d.dl_consumer_id
         where c.co_name = 'c1') as dl1 \gset
create role pgque_t_app2_writer login in role pgque_writer, pgque_t_app2;
select pg_temp.denied('pgque_t_writer', format('select pgque.dlq_replay(%s)', :dl1),
                      'a writer of no application cannot replay c1''s dead letter');
select pg_temp.denied('pgque_t_app2_writer', format('select pgque.dlq_replay(%s)', :dl1),
                      'app2''s writer cannot replay c1''s dead letter');
select is(pg_temp.run_as('pgque_t_app2_writer', $$select replayed || ' ' || failed from pgque.dlq_replay_all('dq')$$),
          '3 0', 'app2''s writer replay_all replays c2''s dead letters only');
select is((select count(*)::int4 from pgque.dead_letter d join pgque.consumer c on c.co_id = d.dl_consumer_id
            where c.co_name = 'c1'), 3, 'c1 keeps its 3 dead letters');
select is(pg_temp.run_as('pgque_t_writer', $$select replayed || ' ' || failed from pgque.dlq_replay_all('dq')$$),
          '0 0', 'a writer of no application replays nothing');
grant pgque_writer to pgque_t_app1_worker;
select is(pg_temp.run_as('pgque_t_app1_worker', format('select pgque.dlq_replay(%s) > 0', :dl1)), 'true',
          'a writer that is a member of app1''s role replays c1''s dead letter');
select is(pg_temp.run_as('pgque_t_admin', $$select replayed || ' ' || failed from pgque.dlq_replay_all('dq')$$),
          '2 0', 'admin replays the rest of c1''s');
revoke pgque_writer from pgque_t_app1_worker;
drop role pgque_t_app2_writer;

-- consumer users (ADR 0058): an admin's consumer (PgQue's migration role)
-- is every reader's of the queue; a reader's own stays private until its
-- owner or an admin grants it; users consume, they do not own
select is(pg_temp.run_as('pgque_t_admin', $$select pgque.subscribe('dq', 'mig')$$), '1', 'admin subscribes mig');
select is(pg_temp.run_as('pgque_t_app2', $$select 'ok' from (select count(*) from pgque.receive('dq', 'mig')) x$$), 'ok',
          'app2 uses the admin''s consumer');
select pg_temp.denied('pgque_t_app2', $$select pgque.unsubscribe('dq', 'mig')$$, 'app2 cannot unsubscribe the admin''s consumer');
select pg_temp.denied('pgque_t_app2', $$select pgque.revoke_consumer('dq', 'mig', 'pgque_reader')$$,
                      'app2 cannot narrow the admin''s consumer');
select pg_temp.denied('pgque_t_app2', $$select pgque.grant_consumer('dq', 'c1', 'pgque_t_app2')$$,
                      'app2 cannot grant itself app1''s consumer');
select is(pg_temp.run_as('pgque_t_reader', $$select pgque.grant_consumer('dq', 'c1', 'pgque_t_app2')$$), '1',
          'app1 shares c1 with app2');
select is(pg_temp.run_as('pgque_t_app2', $$select 'ok' from (select count(*) from pgque.receive('dq', 'c1')) x$$), 'ok',
          'app2 uses c1 once granted');
select pg_temp.denied('pgque_t_app2', $$select pgque.grant_consumer('dq', 'c1', 'pgque_t_public')$$,
                      'app2 cannot pass c1 on');
select is(pg_temp.run_as('pgque_t_reader', $$select pgque.revoke_consumer('dq', 'c1', 'pgque_t_app2')$$), '1',
          'app1 takes c1 back');
select pg_temp.denied('pgque_t_app2', $$select count(*) from pgque.receive('dq', 'c1')$$, 'app2 is refused c1 again');
select is(pg_temp.run_as('pgque_t_owner', $$select pgque.grant_consumer('dq', 'c1', 'pgque_t_app2')
                                               + pgque.revoke_consumer('dq', 'c1', 'pgque_t_app2')$$), '2',
          'the extension owner grants and revokes any consumer');
select pg_temp.denied('pgque_t_writer', $$select pgque.grant_consumer('dq', 'c1', 'pgque_t_writer')$$,
                      'a writer cannot grant consumers');
select pg_temp.denied('pgque_t_public', $$select pgque.grant_consumer('dq', 'c1', 'pgque_t_public')$$,
                      'a login role cannot grant consumers');
select is(pg_temp.run_as('pgque_t_admin', $$select pgque.unsubscribe('dq', 'mig')$$), '1', 'admin unsubscribes mig');

select * from finish();
\ir cleanup.psql
