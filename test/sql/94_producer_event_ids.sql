-- The producer draws each event id without a right check on the queue's
-- sequence (ADR 0117), as core's identity columns draw theirs: every
-- append runs as pgque_owner, the sequence's owner, after the checks that
-- decide who may produce (EXECUTE, the queue's "send" right).  So the
-- sequence's own ACL decides nothing: with pgque_owner's USAGE and UPDATE
-- on it revoked (only a superuser can), send, keyed send, send_batch and
-- insert_event still append, with distinct ids in sending order; before,
-- each failed with 42501 on the sequence.  (SELECT stays: the ticker
-- reads the sequence's position as pgque_owner.)  What still decides is
-- unchanged: a role without the queue's "send" right, or without
-- EXECUTE, is refused (42501), and no producer gets a right on the
-- sequence itself (its nextval stays refused).
create role pgque_t94_writer in role pgque_writer;
create role pgque_t94_nobody;
create schema t94;
grant usage on schema t94 to public;
-- the SQLSTATE of a statement (or ok), so the output names no sequence
create function t94.try(sql text) returns text language plpgsql as $$
begin
    execute sql;
    return 'ok';
exception when others then
    return sqlstate;
end $$;
select pgque.create_queue('p94'), pgque.create_queue('p94b'),
       pgque.set_queue_config('p94b', 'partition_buckets', '4');
select pgque.subscribe('p94', 'c'), pgque.subscribe('p94b', 'c');
select queue_event_seq as seq from pgque.queue where queue_name = 'p94' \gset
select queue_event_seq as seqb from pgque.queue where queue_name = 'p94b' \gset

-- the producer's only rights on the sequences are pgque_owner's
select pg_catalog.has_sequence_privilege('pgque_t94_writer', :'seq', 'usage') as writer_usage,
       pg_catalog.has_sequence_privilege('pgque_t94_writer', :'seq', 'update') as writer_update,
       pg_catalog.has_sequence_privilege('pgque_owner', :'seq', 'usage') as owner_usage;

-- pgque_owner's USAGE and UPDATE on both queues' sequences revoked: what
-- nextval asks of the role that calls it
revoke usage, update on sequence :seq, :seqb from pgque_owner;
select pg_catalog.has_sequence_privilege('pgque_owner', :'seq', 'usage,update') as owner_draw,
       pg_catalog.has_sequence_privilege('pgque_owner', :'seqb', 'usage,update') as owner_draw_b,
       pg_catalog.has_sequence_privilege('pgque_owner', :'seq', 'select') as owner_select;

set role pgque_t94_writer;
select t94.try($$select pgque.send('p94', 'e1')$$) as send,
       t94.try($$select pgque.send('p94', 't', 'e2', 'k2')$$) as send_keyed,
       t94.try($$select pgque.send('p94', '{"e": 3}'::jsonb)$$) as send_jsonb,
       t94.try($$select pgque.send_batch('p94', 't', array['e4', 'e5', 'e6'])$$) as send_batch,
       t94.try($$select pgque.send_batch('p94', 't', array['e7', 'e8'], array['k7', 'k8'])$$) as send_batch_keyed,
       t94.try($$select pgque.insert_event('p94', 't', 'e9')$$) as insert_event,
       t94.try($$select pgque.send('p94b', 't', 'b1', 'k1')$$) as bucketed_send,
       t94.try($$select pgque.send_batch('p94b', 't', array['b2', 'b3', 'b4'], array['k2', 'k3', 'k4'])$$) as bucketed_batch;
-- the sequence itself stays out of the producer's reach
select t94.try(pg_catalog.format('select pg_catalog.nextval(%L)', :'seq')) as writer_nextval,
       t94.try(pg_catalog.format('select pg_catalog.setval(%L, 1)', :'seq')) as writer_setval;
reset role;

-- who may produce still decides: the queue's "send" right and EXECUTE
select pgque.revoke_queue('p94', 'pgque_writer', 'send');
set role pgque_t94_writer;
select t94.try($$select pgque.send('p94', 'refused')$$) as send_without_right,
       t94.try($$select pgque.send_batch('p94', 't', array['refused'])$$) as batch_without_right;
reset role;
select pgque.grant_queue('p94', 'pgque_writer', 'send');
set role pgque_t94_nobody;
select t94.try($$select pgque.send('p94', 'refused')$$) as send_by_nobody;
reset role;

-- every event appended once, its id drawn from the queue's sequence in
-- sending order; the sequence's position is the last id (how the ticker
-- sees new events), and a consumer receives each event once
select count(*) as events, count(distinct ev_id) as distinct_ids,
       array_agg(ev_data order by ev_id) as in_id_order,
       max(ev_id) = pg_catalog.pg_sequence_last_value(:'seq'::regclass) as last_id_is_seq_last
  from pgque_test.events('p94');
select count(*) as events_b, count(distinct ev_id) as distinct_ids_b,
       max(ev_id) = pg_catalog.pg_sequence_last_value(:'seqb'::regclass) as last_id_is_seq_last_b
  from pgque_test.events('p94b');
select pgque.ticker('p94') is not null as ticked, pgque.ticker('p94b') is not null as ticked_b;
select count(*) as received, count(distinct msg_id) as distinct_received
  from pgque.receive('p94', 'c', 100);
select count(*) as received_b, count(distinct msg_id) as distinct_received_b
  from pgque.receive('p94b', 'c', 100);

grant usage, update on sequence :seq, :seqb to pgque_owner;
select pgque.drop_queue('p94', true), pgque.drop_queue('p94b', true);
drop schema t94 cascade;
drop role pgque_t94_writer, pgque_t94_nobody;
