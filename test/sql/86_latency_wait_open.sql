-- receive_wait's look and open in one statement (ADR 0108, 0121): with a
-- batch ready a call runs one _plain_receive_open, which looks and opens,
-- and neither the look of before (_receive_ready, for what it does not
-- serve) nor _next_batch; a call that waits looks once before its sleep
-- (the queue's id remembered from the session's last call) and once
-- after.  Counted per transaction (pg_stat_get_xact_function_calls), so
-- nothing else's calls count.
set track_functions = 'all';
create function pg_temp.calls(f text) returns int8 language sql as $$
    select coalesce(pg_stat_get_xact_function_calls(f::regprocedure), 0)
$$;
-- the counts not yet flushed carry over from earlier transactions: each
-- phase counts from a mark
create temp table mark (looks int8, wait_opens int8, receive_opens int8, next_batches int8);
create function pg_temp.mark() returns void language sql as $$
    delete from mark;
    insert into mark select pg_temp.calls('pgque._receive_ready(text, text, int4)'),
                            pg_temp.calls('pgque._plain_receive_open(text, text, int4, boolean, boolean, boolean, int4)'),
                            0,
                            pg_temp.calls('pgque._next_batch(text, text, interval, int4, interval, int4)');
$$;
select pgque.create_queue('lw86');
select pgque.subscribe('lw86', 'c');
select pgque.send('lw86', 'a') > 0 as sent;
select pgque.ticker('lw86') > 0 as ticked;
begin;
select pg_temp.mark();
select count(*) as got from pgque.receive_wait('lw86', 'c', 10, '0');
select pg_temp.calls('pgque._receive_ready(text, text, int4)') - looks as old_looks,
       pg_temp.calls('pgque._plain_receive_open(text, text, int4, boolean, boolean, boolean, int4)') - wait_opens as wait_opens,
       pg_temp.calls('pgque._next_batch(text, text, interval, int4, interval, int4)') - next_batches as next_batches
  from mark;
commit;
-- ack what it got: the consumer is at the queue's end
select pgque.ack(b) from (select sub_batch as b from pgque.subscription s
                           join pgque.consumer c on c.co_id = s.sub_consumer
                          where c.co_name = 'c' and s.sub_queue = (select queue_id from pgque.queue where queue_name = 'lw86')) x;
-- nothing there: this session's second call knows the queue's id (the
-- first, which found a batch, remembered it), looks
-- once before the sleep and once at the timeout, and opens nothing (the
-- open is what locks the consumer's row)
begin;
select pg_temp.mark();
select count(*) as got from pgque.receive_wait('lw86', 'c', 10, '50 milliseconds');
select pg_temp.calls('pgque._plain_receive_open(text, text, int4, boolean, boolean, boolean, int4)') - wait_opens as looks,
       pg_temp.calls('pgque._receive_ready(text, text, int4)') - looks as old_looks,
       pg_temp.calls('pgque._next_batch(text, text, interval, int4, interval, int4)') - next_batches as next_batches
  from mark;
commit;
-- the look and open is the receive's own: not callable by the API's roles
select has_function_privilege('pgque_reader', 'pgque._plain_receive_open(text, text, int4, boolean, boolean, boolean, int4)', 'execute') as reader_may,
       has_function_privilege('pgque_admin', 'pgque._plain_receive_open(text, text, int4, boolean, boolean, boolean, int4)', 'execute') as admin_may,
       has_function_privilege('public', 'pgque._plain_receive_open(text, text, int4, boolean, boolean, boolean, int4)', 'execute') as public_may;
select pgque.unsubscribe('lw86', 'c');
select pgque.drop_queue('lw86');
reset track_functions;
