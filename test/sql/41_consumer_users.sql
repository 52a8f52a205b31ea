-- Per-consumer users (ADR 0058, issue #27 item 2).  PgQue's deployment
-- pattern, as its installation.md writes it: DDL (create_queue, subscribe)
-- runs as "a migration or operator role that holds pgque_admin"; the
-- application, granted the sibling roles pgque_writer and pgque_reader,
-- sends, receives, acks and nacks on the consumer the migration made.  A
-- consumer an admin subscribes is usable by every role holding the queue's
-- subscribe right; one any other role subscribes stays private to it until
-- it (or an admin) grants it with grant_consumer().
create role migrator login;
grant pgque_admin to migrator;
create role app_orders login;
grant pgque_writer to app_orders;
grant pgque_reader to app_orders;
-- another application on the same server, consumer-only, and a
-- producer-only service (PgQue's app_webhook), and a role with LOGIN only
create role app_billing login;
grant pgque_reader to app_billing;
create role app_webhook login;
grant pgque_writer to app_webhook;
create role t41_nobody login;
grant usage on schema pgque_test to public;

-- the migration: a queue, a plain consumer, a cooperative group and a
-- partitioned consumer of two slots
set role migrator;
select pgque.create_queue('orders');
select pgque.subscribe('orders', 'order_processor');
select pgque.subscribe_subconsumer('orders', 'order_workers', 'w1');
select pgque.subscribe_slot('orders', 'order_shards', 0, 2), pgque.subscribe_slot('orders', 'order_shards', 1, 2);
reset role;
-- the migration's consumers belong to it and are shared with pgque_reader
select queue_name, consumer_name, owner, users from pgque.consumer_rights
 where queue_name = 'orders' order by consumer_name;

-- the application sends ...
set role app_orders;
select count(pgque.send('orders', 'order.created', '{"id": ' || k || '}', 'cust-' || k)) as sent
  from generate_series(1, 6) k;
reset role;
select pgque.ticker('orders') is not null as ticked;

-- ... and consumes the migration's plain consumer: receive, nack one, ack
set role app_orders;
create temp table t41_batch as select m from pgque.receive('orders', 'order_processor', 10) m;
select count(*) as received, count(distinct (m).batch_id) as batches from t41_batch;
select pgque.nack((m).batch_id, m, '0 seconds', 'retry me') as nacked
  from t41_batch order by (m).msg_id limit 1;
select pgque.ack((m).batch_id) as acked from t41_batch limit 1;
-- subscribing the name again is harmless (0) and takes nothing over
select pgque.subscribe('orders', 'order_processor') as subscribed_again;
-- the cooperative group: a registered member and a cold one
select count(*) as coop_w1 from pgque.receive_coop('orders', 'order_workers', 'w1', 10);
select pgque.ack(batch_id) as coop_acked
  from (select distinct batch_id from pgque.receive_coop('orders', 'order_workers', 'w1', 10)) b;
select count(*) as coop_w2_cold from pgque.receive_coop('orders', 'order_workers', 'w2', 10);
select pgque.touch_subconsumer('orders', 'order_workers', 'w2') as touched;
-- the partitioned consumer: claim, receive, nack, ack on both slots
select pgque.claim_slot('orders', 'order_shards', k, 'wk' || k) > 0 as claimed
  from generate_series(0, 1) k;
create temp table t41_slots as
  select k as slot, m from generate_series(0, 1) k,
       lateral pgque.receive_partitioned('orders', 'order_shards', k, 2, 'wk' || k, 100) m;
select count(*) as slot_received from t41_slots;
select pgque.nack_partitioned('orders', 'order_shards', slot, 2, 'wk' || slot, m, '0 seconds', 'again') as slot_nacked
  from t41_slots order by (m).msg_id limit 1;
select bool_and(pgque.ack_partitioned('orders', 'order_shards', k, 2, 'wk' || k) >= 0) as slot_acked
  from generate_series(0, 1) k;
select pgque.release_slot('orders', 'order_shards', 0, 'wk0') as released;
-- setting the failure policy it already has changes nothing and is allowed
select pgque.set_failure_policy('orders', 'order_shards', 'skip') as same_policy;

-- what only the owner (or an admin) may do: unsubscribe, reposition,
-- convert, resize, change the failure policy, share
select pgque_test.error_of($$select pgque.unsubscribe('orders', 'order_processor')$$) as user_unsubscribe;
select pgque_test.error_of($$select pgque.register_consumer_at('orders', 'order_processor', 1)$$) as user_reposition;
select pgque_test.error_of($$select pgque.unsubscribe_slot('orders', 'order_shards', 1)$$) as user_unsubscribe_slot;
select pgque_test.error_of($$select pgque.resize_partitioned('orders', 'order_shards', 3)$$) as user_resize;
select pgque_test.error_of($$select pgque.set_failure_policy('orders', 'order_shards', 'pause')$$) as user_policy;
select pgque_test.error_of($$select pgque.unregister_consumer('orders', 'order_workers')$$) as user_unregister_group;
select pgque_test.error_of($$select pgque.grant_consumer('orders', 'order_processor', 'app_billing')$$) as user_grant;
select pgque_test.error_of($$select pgque.revoke_consumer('orders', 'order_processor', 'pgque_reader')$$) as user_revoke;
reset role;

-- the attacks.  app_billing, another application's reader, subscribes its
-- own consumer: it is private to app_billing
set role app_billing;
select pgque.subscribe('orders', 'billing');
reset role;
set role app_orders;
select pgque.send('orders', 'order.created', '{"id": 7}') > 0 as sent;
reset role;
select pgque.ticker('orders') is not null as ticked;
set role app_billing;
select batch_id as billing_batch from pgque.receive('orders', 'billing', 1) limit 1 \gset
reset role;
set role app_orders;
select pgque_test.error_of($$select * from pgque.receive('orders', 'billing')$$) as other_app_receive;
select pgque_test.error_of(format('select pgque.ack(%s)', :billing_batch)) as other_app_ack;
select pgque_test.error_of(format('select * from pgque.get_batch_events(%s)', :billing_batch)) as other_app_events;
select pgque_test.error_of($$select pgque.subscribe('orders', 'billing')$$) as other_app_take_over;
select pgque_test.error_of($$select pgque.grant_consumer('orders', 'billing', 'app_orders')$$) as grant_itself;
reset role;

-- app_billing shares it with app_orders; a user may not pass it on
set role app_billing;
select pgque.grant_consumer('orders', 'billing', 'app_orders') as granted,
       pgque.grant_consumer('orders', 'billing', 'app_orders') as granted_again;
reset role;
set role app_orders;
select pgque.ack(:billing_batch) as shared_ack;
select pgque_test.error_of($$select pgque.grant_consumer('orders', 'billing', 't41_nobody')$$) as pass_on;
reset role;
set role app_billing;
select pgque.revoke_consumer('orders', 'billing', 'app_orders') as revoked,
       pgque.revoke_consumer('orders', 'billing', 'app_orders') as revoked_again;
reset role;
set role app_orders;
select pgque_test.error_of($$select * from pgque.receive('orders', 'billing')$$) as after_revoke;
reset role;

-- an admin may share and narrow any consumer: the migration's made private
set role migrator;
select pgque.grant_consumer('orders', 'billing', 'app_orders') as admin_granted;
select pgque.revoke_consumer('orders', 'order_processor', 'pgque_reader') as admin_narrowed;
reset role;
set role app_orders;
select pgque_test.error_of($$select * from pgque.receive('orders', 'order_processor')$$) as narrowed;
select count(*) >= 0 as billing_now_usable from pgque.receive('orders', 'billing', 1);
reset role;
set role migrator;
select pgque.grant_consumer('orders', 'order_processor', 'app_orders') as granted_by_name;
reset role;

-- a user still needs the queue's subscribe right (ADR 0047): the queue
-- narrowed to another role refuses app_orders on the shared group
select pgque.revoke_queue('orders', 'pgque_reader', 'subscribe');
set role app_orders;
select pgque_test.error_of($$select * from pgque.receive_coop('orders', 'order_workers', 'w1', 10)$$) as no_queue_right;
reset role;
select pgque.grant_queue('orders', 'app_orders', 'subscribe');
set role app_orders;
select count(*) >= 0 as queue_right_back from pgque.receive_coop('orders', 'order_workers', 'w1', 10);
reset role;
select pgque.grant_queue('orders', 'pgque_reader', 'subscribe');

-- roles without the consumer API cannot even try
set role app_webhook;
select pgque_test.error_of($$select pgque.grant_consumer('orders', 'billing', 'app_webhook')$$) as writer_grant;
reset role;
set role t41_nobody;
select pgque_test.error_of($$select pgque.grant_consumer('orders', 'billing', 't41_nobody')$$) as login_only_grant;
reset role;

-- bad input, each with its SQLSTATE
set role app_billing;
select pgque_test.error_of($$select pgque.grant_consumer(null, 'billing', 'app_orders')$$) as null_queue;
select pgque_test.error_of($$select pgque.grant_consumer('orders', null, 'app_orders')$$) as null_consumer;
select pgque_test.error_of($$select pgque.grant_consumer('orders', 'billing', null)$$) as null_role;
select pgque_test.error_of($$select pgque.grant_consumer('nope', 'billing', 'app_orders')$$) as unknown_queue;
select pgque_test.error_of($$select pgque.grant_consumer('orders', 'nope', 'app_orders')$$) as unknown_consumer;
select pgque_test.error_of($$select pgque.grant_consumer('orders', '', 'app_orders')$$) as empty_consumer;
select pgque_test.error_of($$select pgque.grant_consumer('orders', 'order_shards#0/2', 'app_orders')$$) as slot_name;
select pgque_test.error_of($$select pgque.grant_consumer('orders', 'billing', 0::oid::regrole)$$) as public_role;
select pgque_test.error_of($$select pgque.grant_consumer('orders', 'billing', 'no_such_role')$$) as unknown_role;
select pgque_test.error_of($$select pgque.revoke_consumer('orders', 'billing', null)$$) as revoke_null_role;
select pgque.revoke_consumer('orders', 'billing', 0::oid::regrole) as revoke_public;
reset role;

-- bounded: at most 32 roles besides the owner
do $$
begin
    for k in 1 .. 33 loop
        execute format('create role t41_g%s', k);
    end loop;
end $$;
set role app_billing;
select pgque.revoke_consumer('orders', 'billing', 'app_orders') as cleared;
select sum(pgque.grant_consumer('orders', 'billing', ('t41_g' || k)::regrole)) as granted_32
  from generate_series(1, 32) k;
select pgque_test.error_of($$select pgque.grant_consumer('orders', 'billing', 't41_g33')$$) as the_33rd;
reset role;

-- a granted role cannot be dropped (ADR 0079: it holds the anchor); after
-- DROP OWNED its OID stays in the list, matches nobody, and its owner can
-- take it out by OID
select oid as g1 from pg_roles where rolname = 't41_g1' \gset
drop role t41_g1;
drop owned by t41_g1;
drop role t41_g1;
set role app_orders;
select pgque_test.error_of($$select * from pgque.receive('orders', 'billing')$$) as stale_oid_matches_nobody;
reset role;
set role app_billing;
select pgque.revoke_consumer('orders', 'billing', :g1::oid::regrole) as stale_oid_revoked;
reset role;
select cardinality(users) as users_left from pgque.consumer_rights where consumer_name = 'billing';

-- unsubscribing as the owner still works, and takes the grants with it
set role app_billing;
select pgque.unsubscribe('orders', 'billing');
reset role;
select count(*) as billing_gone from pgque.consumer_rights where consumer_name = 'billing';

drop table t41_batch, t41_slots;
reset role;
select pgque.drop_queue('orders', true);
do $$
begin
    for k in 2 .. 33 loop
        execute format('drop role t41_g%s', k);
    end loop;
end $$;
revoke usage on schema pgque_test from public;
drop role migrator, app_orders, app_billing, app_webhook, t41_nobody;
