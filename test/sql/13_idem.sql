-- Producer idempotency: send_idem (SPEC §4, I1-I4).
select pgque.create_queue('idem');
select pgque.subscribe('idem', 'c');

-- I1: a duplicate within the TTL returns the original id and appends nothing
select event_id as first_id, deduped from pgque.send_idem('idem', 'migrate', 'tenant t1 to v2', 'migrate:t1:v2') \gset
select :first_id > 0 as has_id, :'deduped' as deduped;
select event_id = :first_id as same_id, deduped from pgque.send_idem('idem', 'migrate', 'tenant t1 to v2', 'migrate:t1:v2');
select event_id = :first_id as same_id, deduped from pgque.send_idem('idem', 'migrate', '{"other": "payload"}'::jsonb, 'migrate:t1:v2');
select count(*) as events_in_log from pgque_test.events('idem');
-- the key rides in ev_extra2, the partition key in ev_extra1
select pgque.send_idem('idem', 'migrate', 'tenant t2', 'migrate:t2:v2', '1 hour', 'tenant-t2') is not null as keyed;
select ev_type, ev_data, ev_extra1, ev_extra2 from pgque_test.events('idem') order by ev_id;

-- keys are exact: the key names the effect, so v1 and v2 both append
select deduped from pgque.send_idem('idem', 'migrate', 'tenant t1 to v1', 'migrate:t1:v1');
select count(*) as events_in_log from pgque_test.events('idem');
-- and a key is per queue
select pgque.create_queue('idem2');
select deduped as other_queue_deduped from pgque.send_idem('idem2', 'migrate', 'x', 'migrate:t1:v2');

-- I3: a rolled-back send_idem leaves the key free
begin;
select deduped from pgque.send_idem('idem', 'once', 'rolled back', 'once:1');
rollback;
select deduped as after_rollback from pgque.send_idem('idem', 'once', 'kept', 'once:1');
select ev_data from pgque_test.events('idem') where ev_extra2 = 'once:1';

-- I4: after the TTL the key appends a new event; before, it does not
select event_id as short_id from pgque.send_idem('idem', 'short', 'a', 'short:1', '1 second') \gset
select deduped as within_ttl from pgque.send_idem('idem', 'short', 'b', 'short:1', '1 second');
select pg_sleep(1.1);
select event_id <> :short_id as new_id, deduped as after_ttl from pgque.send_idem('idem', 'short', 'c', 'short:1', '1 second');
select string_agg(ev_data, ',' order by ev_id) as short_events from pgque_test.events('idem') where ev_extra2 = 'short:1';

-- GC: expired keys are reaped by maint(), live ones stay
select pgque.send_idem('idem', 'gc', 'x', 'gc:' || i, '1 second') is not null from generate_series(1, 3) i;
select pg_sleep(1.1);
select count(*) as expired_before from pgque.idem where expires_at <= now();
select pgque.maint() >= 4 as maint_reaped;
select count(*) as expired_after from pgque.idem where expires_at <= now();
select count(*) > 0 as live_keys_kept from pgque.idem where idem_key = 'migrate:t1:v2';
select pgque.maint_idem('idem') as nothing_left_to_reap;

-- consumers see each accepted event once
select count(*) as delivered, count(distinct msg_id) as distinct_ids from pgque_test.drain('idem', 'c');

-- a key belongs to the sending role (security issue #25 item 10): another
-- application's writer that sends a key first does not make the victim's
-- send "deduped" with the attacker's event
create role idem_attacker login in role pgque_writer;
create role idem_victim login in role pgque_writer;
set role idem_attacker;
select deduped as attacker_first from pgque.send_idem('idem', 'pay', 'attacker', 'pay-42');
reset role;
set role idem_victim;
select event_id as victim_id, deduped as victim_deduped from pgque.send_idem('idem', 'pay', 'victim', 'pay-42') \gset
select :'victim_deduped' as victim_deduped;
-- the victim's own retry is still deduplicated, against its own event
select event_id = :victim_id as victim_retry_same_id, deduped as victim_retry_deduped
  from pgque.send_idem('idem', 'pay', 'victim again', 'pay-42');
reset role;
select string_agg(ev_data, ',' order by ev_id) as pay_42_events from pgque_test.events('idem') where ev_extra2 = 'pay-42';
select idem_role::text, count(*) from pgque.idem where idem_key = 'pay-42' group by 1 order by 1;
-- a claim made before 0.3.0 has no role (0): every role matches it until it
-- expires, so an update lets no duplicate through
insert into pgque.idem (queue_id, idem_role, idem_key, event_id, expires_at)
select queue_id, '-', 'legacy-1', 1, now() + interval '1 hour' from pgque.queue where queue_name = 'idem';
set role idem_victim;
select event_id, deduped as legacy_claim_deduped from pgque.send_idem('idem', 'pay', 'x', 'legacy-1');
reset role;
drop role idem_attacker;
drop role idem_victim;

-- bad input
select pgque_test.error_of($$select * from pgque.send_idem('idem', 't', 'p', null)$$) as null_key;
select pgque_test.error_of($$select * from pgque.send_idem('idem', 't', 'p', '')$$) as empty_key;
select pgque_test.error_of($$select * from pgque.send_idem('idem', 't', 'p', 'k', '0 s')$$) as zero_ttl;
select pgque_test.error_of($$select * from pgque.send_idem('idem', 't', 'p', 'k', '-1 hour')$$) as negative_ttl;
select pgque_test.error_of($$select * from pgque.send_idem('idem', 't', 'p', 'k', null)$$) as null_ttl;
select pgque_test.error_of($$select * from pgque.send_idem('nope', 't', 'p', 'k')$$) as unknown_queue;
select pgque_test.error_of($$select * from pgque.send_idem('idem', null, 'p', 'k')$$) as null_type;
select pgque_test.error_of($$select pgque.maint_idem('nope')$$) as maint_unknown_queue;
-- dropping a queue drops its keys
select pgque.drop_queue('idem2');
select count(*) as idem2_keys from pgque.idem where queue_id not in (select queue_id from pgque.queue);
select pgque.drop_queue('idem', true);
