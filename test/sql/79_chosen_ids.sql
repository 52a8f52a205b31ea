-- Event ids a caller chooses (insert_event_raw, ADR 0061; ADR 0101).  A
-- receive part resumes after an ev_id, so two events of one id in one
-- window lose the second when a part ends between them (ADR 0093).  The
-- attack: an id above the queue's sequence is one the sequence hands to a
-- producer later; the event sent with it then vanishes for a consumer that
-- reads in parts.  Explicit ids above the sequence's position are refused
-- (22023); ids it has handed out stay allowed (PgQ's re-insert of a known
-- event); a writer may not choose ids at all (42501).
select pgque.create_queue('ids');
select pgque.subscribe('ids', 'ids_c');
create role ids_admin login in role pgque_admin;
create role ids_writer login in role pgque_writer;
create role ids_writer2 login in role pgque_writer;
create role ids_login login;
grant usage on schema pgque_test to ids_admin, ids_writer, ids_writer2, ids_login;
select queue_event_seq as seq from pgque.queue where queue_name = 'ids' \gset
create temp table ledger (who text, id bigint, payload text);
grant insert, select on ledger to ids_admin, ids_writer, ids_writer2;
select pgque.send('ids', 't', 'before') as first_id \gset

-- 1: the attack: the admin claims the id the sequence hands out second
-- from now, then two writers send; a consumer reading one event a part
-- must get every event the writers were told was sent
set role ids_admin;
select pgque_test.error_of(format($$insert into ledger select 'admin', pgque.insert_event_raw('ids', %s, now(), null, null, 't', 'claimed', null, null, null, null), 'claimed'$$,
                                  :first_id + 2)) as claim_future_id;
set role ids_writer;
insert into ledger select 'writer1', pgque.send('ids', 't', 'w1'), 'w1';
set role ids_writer2;
insert into ledger select 'writer2', pgque.send('ids', 't', 'w2'), 'w2';
reset role;
select who, id - :first_id as id_from_first, payload from ledger order by id, who;
create temp table got as select * from pgque_test.drain('ids', 'ids_c', 1);
select l.who, l.payload, g.msg_id is not null as delivered
  from ledger l left join got g on g.payload = l.payload
 order by l.id, l.who;
select count(*) filter (where g.msg_id is null) as writers_events_lost
  from ledger l left join got g on g.payload = l.payload where l.who like 'writer%';

-- 2: what stays allowed: an id the sequence has handed out (at most its
-- position), NULL (the next id), and at the position itself
set role ids_admin;
select pgque.insert_event_raw('ids', :first_id, now(), null, null, 't', 'again', null, null, null, null) = :first_id as known_id;
select pgque.insert_event_raw('ids', pgque.seq_getval(:'seq'), now(), null, null, 't', 'at position', null, null, null, null)
       = pgque.seq_getval(:'seq') as at_position;
select pgque.insert_event_raw('ids', null, now(), null, null, 't', 'next', null, null, null, null)
       = pgque.seq_getval(:'seq') as null_takes_next;
-- past the position by one, and int8's greatest: refused, nothing written
select pgque_test.error_of(format($$select pgque.insert_event_raw('ids', %s, now(), null, null, 't', 'd', null, null, null, null)$$,
                                  pgque.seq_getval(:'seq') + 1)) as one_past;
select pgque_test.error_of($$select pgque.insert_event_raw('ids', 9223372036854775807, now(), null, null, 't', 'd', null, null, null, null)$$) as greatest;
-- the way to an id above: move the sequence first (forward only, seq_setval)
select pgque.seq_setval(:'seq', 10000000) as moved;
select pgque.insert_event_raw('ids', 10000000, now(), null, null, 't', 'after move', null, null, null, null) as after_move;
reset role;
select ev_data, ev_id - :first_id as id_from_first from pgque_test.events('ids')
 where ev_data in ('again', 'at position', 'next', 'after move', 'd') order by ev_id, ev_data;

-- 3: a writer chooses no id, not even a known one (no EXECUTE: 42501); a
-- login role without pgque rights neither
set role ids_writer;
select pgque_test.error_of(format($$select pgque.insert_event_raw('ids', %s, now(), null, null, 't', 'd', null, null, null, null)$$,
                                  :first_id)) as writer_known_id;
select pgque_test.error_of($$select pgque.insert_event_raw('ids', null, now(), null, null, 't', 'd', null, null, null, null)$$) as writer_null_id;
select pgque_test.error_of(format($$select pgque.event_retry_raw('ids', 'ids_c', now(), %s, now(), 0, 't', 'd', null, null, null, null)$$,
                                  :first_id)) as writer_retry_raw;
set role ids_login;
select pgque_test.error_of($$select pgque.insert_event_raw('ids', 1, now(), null, null, 't', 'd', null, null, null, null)$$) as login_role;
reset role;

-- 4: event_retry_raw takes the same rule (its event joins the queue when
-- due, for its consumer, beside what producers send then)
set role ids_admin;
select pgque_test.error_of(format($$select pgque.event_retry_raw('ids', 'ids_c', now(), %s, now(), 0, 't', 'retry future', null, null, null, null)$$,
                                  pgque.seq_getval(:'seq') + 1)) as retry_future_id;
select pgque.event_retry_raw('ids', 'ids_c', now(), :first_id, now(), 0, 't', 'retry known', null, null, null, null)
       = :first_id as retry_known_id;
reset role;
select ev_data from pgque.retry_queue where ev_data like 'retry%' order by ev_data;

-- 5: the check reads the sequence of the queue named, not another's: a
-- queue whose sequence is far ahead does not let an id through on another
select pgque.create_queue('ids_far');
select pgque.seq_setval(queue_event_seq, 90000000) from pgque.queue where queue_name = 'ids_far';
select pgque_test.error_of($$select pgque.insert_event_raw('ids', 20000000, now(), null, null, 't', 'd', null, null, null, null)$$) as other_queues_seq;
select pgque.drop_queue('ids_far');

select pgque.drop_queue('ids', true);
drop table ledger, got;
revoke usage on schema pgque_test from ids_admin, ids_writer, ids_writer2, ids_login;
drop role ids_admin, ids_writer, ids_writer2, ids_login;
