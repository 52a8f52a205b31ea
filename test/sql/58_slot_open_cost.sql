-- What one receive_partitioned and one ack_partitioned run (issue #30,
-- ADR 0078): the queue, the consumer and the slot's subscription read in
-- one statement (_slot_enter), the checks one by one only when something
-- is wrong, and the tries after an empty window without the first try's
-- checks.  Counted with the transaction's function statistics: which
-- PL/pgSQL functions a call runs, never how long it takes.
set track_functions = 'all';
select pgque.create_queue('so');
select pgque.subscribe_slot('so', 'c', k, 2) from generate_series(0, 1) k;
select pgque.claim_slot('so', 'c', 0, 'w') is not null as claimed;

create temp table so_keys as
select (select 'k' || g from generate_series(1, 100) g where pgque._slot_of('k' || g, 2) = 0 limit 1) as k0,
       (select 'k' || g from generate_series(1, 100) g where pgque._slot_of('k' || g, 2) = 1 limit 1) as k1;

-- three windows of slot 1's events only (three each: more than the span of
-- max_return 1 x n 2, so a batch is one window), then one of slot 0's
select pgque.send_batch('so', 'default', array['a', 'b', 'c'], array[k1, k1, k1]) is not null as sent from so_keys;
select pgque.ticker('so') is not null as ticked;
select pgque.send_batch('so', 'default', array['a', 'b', 'c'], array[k1, k1, k1]) is not null as sent from so_keys;
select pgque.ticker('so') is not null as ticked;
select pgque.send_batch('so', 'default', array['a', 'b', 'c'], array[k1, k1, k1]) is not null as sent from so_keys;
select pgque.ticker('so') is not null as ticked;
select pgque.send('so', 'default', 'mine', k0) is not null as sent from so_keys;
select pgque.ticker('so') is not null as ticked;

-- the counts of this transaction (and of earlier ones not yet reported):
-- a step's calls are the difference from a copy taken before it
create temp table so_calls (funcname text, calls bigint);
create function pg_temp.so_calls(i_step text) returns table (step text, funcname text, calls bigint)
language sql as $$
    select i_step, f.funcname::text, coalesce(s.calls, 0) - coalesce(b.calls, 0)
      from unnest(array['_slot_receive_open', '_slot_receive_next', '_slot_enter', '_slot_window',
                        '_slot_finish', '_slot_finish_row', '_slot_guard', '_queue', '_subscription', '_authorize',
                        '_partitioned']) f(funcname)
      left join pg_stat_xact_user_functions s on s.schemaname = 'pgque' and s.funcname = f.funcname
      left join so_calls b on b.funcname = f.funcname
     order by f.funcname
$$;

-- the receive: one open (checks, lease, the first window), three tries
-- that pass the empty windows of slot 1's events, the last one hands out
-- slot 0's event; one right check, no lookup of the queue or subscription
-- by name
begin;
insert into so_calls select funcname, calls from pg_stat_xact_user_functions where schemaname = 'pgque';
select payload, retry_count from pgque.receive_partitioned('so', 'c', 0, 2, 'w', 1);
select * from pg_temp.so_calls('receive') where calls > 0 or funcname in ('_queue', '_slot_guard', '_subscription');
delete from so_calls;
insert into so_calls select funcname, calls from pg_stat_xact_user_functions where schemaname = 'pgque';

-- the ack: one statement's rows, the same checks, the epoch's row
select pgque.ack_partitioned('so', 'c', 0, 2, 'w') as acked;
select * from pg_temp.so_calls('ack') where calls > 0 or funcname in ('_queue', '_slot_guard', '_subscription');
commit;

-- what is wrong is said as before: the checks one by one (_slot_guard)
select pgque_test.error_of($$select * from pgque.receive_partitioned('so', 'c', 0, 3, 'w', 1)$$) as wrong_n;
select pgque_test.error_of($$select * from pgque.receive_partitioned('so', 'c', 2, 2, 'w', 1)$$) as wrong_slot;
select pgque_test.error_of($$select * from pgque.receive_partitioned('so', 'c', 0, 2, 'w', 0)$$) as bad_max_return;
select pgque_test.error_of($$select * from pgque.receive_partitioned('so', 'c', 1, 2, 'w', 1)$$) as no_lease;
select regexp_replace(pgque_test.error_of($$select pgque.ack_partitioned('so', 'c', 0, 2, 'other')$$),
                      'epoch \d+', 'epoch E') as fenced;
select pgque_test.error_of($$select * from pgque.receive_partitioned('so', 'nobody', 0, 2, 'w', 1)$$) as no_consumer;
select pgque_test.error_of($$select * from pgque.receive_partitioned('none', 'c', 0, 2, 'w', 0)$$) as no_queue_first;

-- a slot subscription whose users are not its consumer's (only a hand edit
-- makes one) gets its own right check, as before
begin;
delete from so_calls;
insert into so_calls select funcname, calls from pg_stat_xact_user_functions where schemaname = 'pgque';
update pgque.subscription set sub_users = '{pgque_admin}'
 where sub_consumer = (select co_id from pgque.consumer where co_name = 'c#0/2');
select count(*) as received from pgque.receive_partitioned('so', 'c', 0, 2, 'w', 1);
select * from pg_temp.so_calls('receive, users differ') where funcname = '_authorize';
rollback;

select pgque.release_slot('so', 'c', 0, 'w') as released;
select pgque.drop_queue('so', true) as dropped;
reset track_functions;
