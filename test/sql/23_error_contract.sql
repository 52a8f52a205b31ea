-- The error contract (ADR 0016): PgQue's client libraries classify errors
-- by message text, case-insensitively.  Each condition they type (queue,
-- consumer, batch not found) must match their patterns; the others carry
-- PgQ's and PgQue's texts; every SQLSTATE still says what went wrong.
select pgque.create_queue('ec');
select pgque.subscribe('ec', 'c');
select pgque.send('ec', 'x');
select pgque.ticker('ec') is not null as ticked;
select pgque.create_queue('ec_off');
select pgque.set_queue_config('ec_off', 'disable_insert', 'true');

-- the patterns of PgQue's Go, Python and Ruby clients (their errors files)
create temp table client_class (class text, pattern text);
insert into client_class values
 ('queue not found',    '(queue not found|no such queue|no such event queue|event queue not found|event queue not created)'),
 ('consumer not found', '(consumer not registered|consumer not found|not subscriber to queue)'),
 ('batch not found',    '(batch not found|cannot find data for batch)');

-- state_msg(sql): 'SQLSTATE|message' of the error the statement raises
create function pg_temp.state_msg(i_sql text) returns text language plpgsql as $$
declare
    st text;
    msg text;
begin
    execute i_sql;
    return 'no error';
exception when others then
    get stacked diagnostics st = returned_sqlstate, msg = message_text;
    return st || '|' || msg;
end $$;

create temp table cases (what text, want_class text, sql text);
insert into cases values
 ('send to an unknown queue (C path)',       'queue not found',    $$select pgque.send('nope', 'x')$$),
 ('send_batch to an unknown queue',          'queue not found',    $$select pgque.send_batch('nope', array['a'])$$),
 ('insert_event to an unknown queue',        'queue not found',    $$select pgque.insert_event('nope', 't', 'd')$$),
 ('receive from an unknown queue',           'queue not found',    $$select * from pgque.receive('nope', 'c')$$),
 ('subscribe to an unknown queue',           'queue not found',    $$select pgque.subscribe('nope', 'c')$$),
 ('drop an unknown queue',                   'queue not found',    $$select pgque.drop_queue('nope')$$),
 ('receive as an unknown consumer',          'consumer not found', $$select * from pgque.receive('ec', 'nobody')$$),
 ('next_batch as an unknown consumer',       'consumer not found', $$select pgque.next_batch('ec', 'nobody')$$),
 ('receive with PgQue''s default max_return','no error',           $$select * from pgque.receive('ec', 'c', 2147483647)$$),
 ('get_batch_events of an unknown batch',    'batch not found',    $$select * from pgque.get_batch_events(999999)$$),
 ('get_batch_info of an unknown batch',      'batch not found',    $$select * from pgque.get_batch_info(999999)$$),
 ('event_retry in an unknown batch',         'batch not found',    $$select pgque.event_retry(999999, 1, 60)$$),
 ('nack of an event not in the batch',       null,                 $$select pgque.nack(b.batch_id, row(424242, b.batch_id, 't', 'p', null, now(), null, null, null, null)::pgque.message) from (select batch_id from pgque.receive('ec', 'c') limit 1) b$$),
 ('dlq_replay of an unknown entry',          null,                 $$select pgque.dlq_replay(999999)$$),
 ('send to a queue with disable_insert',     null,                 $$select pgque.send('ec_off', 'x')$$),
 ('insert_event to a queue with disable_insert', null,             $$select pgque.insert_event('ec_off', 't', 'd')$$),
 ('send_batch to a queue with disable_insert', null,               $$select pgque.send_batch('ec_off', array['a'])$$);

select c.what, r.state, regexp_replace(r.message, '[0-9]+', 'N', 'g') as message,
       coalesce((select string_agg(k.class, ', ') from client_class k where r.message ~* k.pattern), '-') as client_sees,
       c.want_class is not distinct from (select string_agg(k.class, ', ') from client_class k where r.message ~* k.pattern)
         or (c.want_class = 'no error' and r.state = 'no error') as as_expected
  from cases c,
       lateral (select pg_temp.state_msg(c.sql) as sm) x,
       lateral (select split_part(x.sm, '|', 1) as state, split_part(x.sm, '|', 2) as message) r
 order by c.what collate "C";

-- ack and finish_batch of an unknown batch: 0 (finish_batch with PgQ's WARNING), not an error
select pgque.ack(999999) as ack_unknown;
select pgque.finish_batch(999999) as finish_unknown;

-- Insert into a queue with disable_insert: the queue in the detail
select pgque.send('ec_off', 'x');
-- a replica-role session (replication) may still insert, as in PgQ
set session_replication_role = replica;
select pgque.insert_event('ec_off', 't', 'd') > 0 as replica_inserts;
reset session_replication_role;

select pgque.drop_queue('ec', true), pgque.drop_queue('ec_off', true);
