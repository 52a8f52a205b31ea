-- receive_wait() (ADR 0102): receive() that waits on the server for the
-- next batch.  Here the bad input and its SQLSTATEs, the rights (exactly
-- receive()'s), the refusals (a slot consumer, outside READ COMMITTED),
-- what it returns without waiting (a batch that is there; timeout 0), and
-- that a wait interrupted inside a savepoint leaves nothing behind.  The
-- wake-ups by the ticker are TAP 106's (workers off here).
select pgque.create_queue('rw');
select pgque.subscribe('rw', 'rw_c');
select pgque.create_queue('rw_other');

-- bad input
select pgque_test.error_of($$select * from pgque.receive_wait('rw', 'rw_c', 10, null)$$) as null_timeout;
select pgque_test.error_of($$select * from pgque.receive_wait('rw', 'rw_c', 10, '-1 second')$$) as negative_timeout;
select pgque_test.error_of($$select * from pgque.receive_wait('rw', 'rw_c', 10, '61 seconds')$$) as over_max;
select pgque_test.error_of($$select * from pgque.receive_wait('rw', 'rw_c', 10, '1 day')$$) as a_day;
select pgque_test.error_of($$select * from pgque.receive_wait('rw', 'rw_c', 10, '1 mon')$$) as a_month;
select pgque_test.error_of($$select * from pgque.receive_wait('rw', 'rw_c', 0, '0')$$) as max_return_zero;
select pgque_test.error_of($$select * from pgque.receive_wait('rw', 'rw_c', null, '0')$$) as max_return_null;
select pgque_test.error_of($$select * from pgque.receive_wait(null, 'rw_c', 10, '0')$$) as null_queue;
select pgque_test.error_of($$select * from pgque.receive_wait('rw', null, 10, '0')$$) as null_consumer;
select pgque_test.error_of($$select * from pgque.receive_wait('nope', 'rw_c', 10, '0')$$) as unknown_queue;
select pgque_test.error_of($$select * from pgque.receive_wait('rw', 'nobody', 10, '0')$$) as unknown_consumer;
select pgque_test.error_of($$select * from pgque.receive_wait('rw_other', 'rw_c', 10, '0')$$) as not_subscribed;
select pgque_test.error_of($$select * from pgque.receive_wait('rw', 'x#0/2', 10, '0')$$) as slot_consumer;
select pgque_test.error_of(format($$select * from pgque.receive_wait('rw', %L, 10, '0')$$, repeat('x', 65))) as long_name;

-- outside READ COMMITTED: refused, it would never see the tick
begin isolation level repeatable read;
select pgque_test.error_of($$select * from pgque.receive_wait('rw', 'rw_c', 10, '0')$$) as repeatable_read;
rollback;
begin isolation level serializable;
select pgque_test.error_of($$select * from pgque.receive_wait('rw', 'rw_c', 10, '0')$$) as serializable;
rollback;

-- nothing there: timeout 0 looks once; a short timeout waits it out
select count(*) as nothing from pgque.receive_wait('rw', 'rw_c', 10, '0');
select clock_timestamp() as t0 \gset
select count(*) as nothing_after_wait from pgque.receive_wait('rw', 'rw_c', 10, '200 ms');
select clock_timestamp() - :'t0'::timestamptz >= interval '200 ms' as waited_the_timeout;

-- the default timeout is 5 seconds
select pg_get_function_arguments('pgque.receive_wait'::regproc) as arguments;

-- a batch that is there: returned as receive() returns it, in parts
select count(pgque.send('rw', 't', 'p' || i)) as sent from generate_series(1, 5) i;
select pgque.ticker('rw') is not null as ticked;
select msg_id, type, payload from pgque.receive_wait('rw', 'rw_c', 3, '5 s') order by msg_id;
-- the same open batch again (as receive)
select count(*) as same_part_again from pgque.receive_wait('rw', 'rw_c', 3, '0');
select pgque.ack(batch_id) from pgque.receive_wait('rw', 'rw_c', 3, '0') limit 1;
select payload from pgque.receive_wait('rw', 'rw_c', 3, '0') order by msg_id;
select pgque.ack(batch_id) from pgque.receive_wait('rw', 'rw_c', 3, '0') limit 1;
-- empty windows are finished on the way, as receive() finishes them
select pgque.force_tick('rw') is not null as forced;
select pgque.ticker('rw') is not null as empty_tick;
select count(*) as empty_windows_give_nothing from pgque.receive_wait('rw', 'rw_c', 3, '0');
select (select sub_last_tick from pgque.subscription s join pgque.consumer c on c.co_id = s.sub_consumer
         where c.co_name = 'rw_c') = (select max(tick_id) from pgque.tick t join pgque.queue q
                                       on q.queue_id = t.tick_queue where q.queue_name = 'rw') as cursor_at_latest;

-- the longest timeout, 60 s, is taken (and waited: statement_timeout
-- ends it); a wait interrupted in a savepoint leaves nothing behind: the
-- next wait of the session works
set statement_timeout = '300ms';
do $$
begin
    perform count(*) from pgque.receive_wait('rw', 'rw_c', 10, '60 s');
    raise notice 'not interrupted';
exception when query_canceled then
    raise notice 'interrupted in a savepoint: %', sqlstate;
end $$;
reset statement_timeout;
select pgque.send('rw', 't', 'after') is not null as sent;
select pgque.ticker('rw') is not null as ticked;
select payload from pgque.receive_wait('rw', 'rw_c', 10, '1 s');
select pgque.ack(batch_id) from pgque.receive_wait('rw', 'rw_c', 10, '0') limit 1;

-- rights: exactly receive()'s
create role rw_login login;
create role rw_reader login in role pgque_reader;
create role rw_owner login in role pgque_reader;
grant usage on schema pgque_test to rw_login, rw_reader, rw_owner;
select pgque.grant_queue('rw', 'rw_owner', 'subscribe');
set role rw_owner;
select pgque.subscribe('rw', 'rw_owned');
reset role;
set role rw_login;
select pgque_test.error_of($$select * from pgque.receive_wait('rw', 'rw_owned', 10, '0')$$) as login_only;
set role rw_reader;
select pgque_test.error_of($$select * from pgque.receive_wait('rw', 'rw_owned', 10, '0')$$) as another_readers_consumer;
select pgque_test.error_of($$select * from pgque.receive('rw', 'rw_owned', 10)$$) as the_same_for_receive;
set role rw_owner;
select count(*) as owner_may from pgque.receive_wait('rw', 'rw_owned', 10, '0');
reset role;
-- PUBLIC holds nothing
select has_function_privilege('public', 'pgque.receive_wait(text, text, int4, interval)', 'execute') as public_may;
-- the wake-up hook is not callable by the API's roles
select has_function_privilege('pgque_reader', 'pgque._tick_wakes_at_commit(int4)', 'execute') as reader_may_wake;
select has_function_privilege('pgque_admin', 'pgque._receive_ready(text, text, int4)', 'execute') as admin_may_look;

select pgque.unsubscribe('rw', 'rw_owned');
select pgque.unsubscribe('rw', 'rw_c');
select pgque.drop_queue('rw');
select pgque.drop_queue('rw_other');
drop owned by rw_login, rw_reader, rw_owner;
drop role rw_login, rw_reader, rw_owner;
