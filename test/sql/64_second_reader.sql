-- Attacks of the second reader on what landed for 0.3.0: each block is
-- an attack that worked, the fix named in its comment.

-- Who may reset an unlogged queue that lost its events (ADR 0068): only a
-- caller that may use the consumer it names (or, for a cooperative member
-- to register, subscribe to the queue).  A role without the queue's
-- subscribe right that called receive_coop, next_batch or
-- receive_partitioned ran the whole reset before its permission error: it
-- waited for and held the queue row and every subscription row of the
-- queue (the ticker skipped the queue meanwhile) and got the reset's
-- unlogged_reset alert, with its figures, as a WARNING.  Each call is
-- refused now before the gate; the rightful consumer's call resets.
create role t64_alice login;
create role t64_mallory login;
grant pgque_reader to t64_alice, t64_mallory;
select pgque.create_queue('t64_q', '{"unlogged": true}');
select pgque.revoke_queue('t64_q', 'pgque_reader', 'subscribe');
select pgque.grant_queue('t64_q', 't64_alice', 'subscribe');
set role t64_alice;
select pgque.subscribe('t64_q', 'c_alice');
select pgque.register_subconsumer('t64_q', 'g_alice', 'm1');
select pgque.subscribe_slot('t64_q', 'p_alice', 0, 1);
select pgque.claim_slot('t64_q', 'p_alice', 0, 'w1') is not null as claimed;
reset role;
select pgque.send('t64_q', 'before') > 0 as sent;
select pgque.ticker('t64_q') is not null as ticked;
-- the crash (as regress 54 simulates it): the seal and the events gone
create function pgque_test.t64_crash() returns void language plpgsql as $$
declare
    q pgque.queue := (select q from pgque.queue q where queue_name = 't64_q');
begin
    delete from pgque.unlogged_seal where queue_id = q.queue_id;
    execute format('truncate %s', q.queue_data_pfx);
end $$;
-- whether a transaction since the last call locked or updated the queue
-- row: its xmax changed (an aborted one's stays)
create table pgque_test.t64_xmax (x xid);
insert into pgque_test.t64_xmax values ('0');
create function pgque_test.t64_touched() returns boolean language sql as $$
    with cur as (select q.xmax from pgque.queue q where q.queue_name = 't64_q'),
         upd as (update pgque_test.t64_xmax t set x = cur.xmax from cur
                  where t.x is distinct from cur.xmax returning 1)
    select exists (select from upd)
$$;
grant usage on schema pgque_test to t64_mallory;
grant execute on function pgque_test.error_of(text) to t64_mallory;
select pgque_test.t64_crash();
select pgque_test.t64_touched() is not null as baseline;

-- the attacker: no subscribe right on t64_q, no consumer of it; after
-- each call, whether it locked the queue row (the reset's first step)
set role t64_mallory;
select pgque_test.error_of($$select * from pgque.receive_coop('t64_q', 'g_alice', 'm1')$$) as coop_member_of_alice;
reset role;
select pgque_test.t64_touched() as queue_row_touched;
set role t64_mallory;
select pgque_test.error_of($$select * from pgque.receive_coop('t64_q', 'g_new', 'm1')$$) as coop_register;
reset role;
select pgque_test.t64_touched() as queue_row_touched;
set role t64_mallory;
select pgque_test.error_of($$select pgque.next_batch('t64_q', 'c_alice')$$) as next_batch;
reset role;
select pgque_test.t64_touched() as queue_row_touched;
set role t64_mallory;
select pgque_test.error_of($$select * from pgque.receive('t64_q', 'c_alice', 10)$$) as receive;
reset role;
select pgque_test.t64_touched() as queue_row_touched;
set role t64_mallory;
select pgque_test.error_of($$select * from pgque.receive_partitioned('t64_q', 'p_alice', 0, 1, 'w1', 10)$$) as partitioned;
reset role;
select pgque_test.t64_touched() as queue_row_touched;
-- the queue is still to be reset
select count(*) as sealed from pgque.unlogged_seal u join pgque.queue q using (queue_id) where q.queue_name = 't64_q';

-- the rightful consumer's calls do not reset it either (ADR 0089): each is
-- refused with 55000 without locking the queue row, until the ticker (or
-- maint()) resets the queue in a transaction of its own
grant execute on function pgque_test.error_of(text) to t64_alice;
grant usage on schema pgque_test to t64_alice;
set role t64_alice;
select pgque_test.error_of($$select * from pgque.receive_partitioned('t64_q', 'p_alice', 0, 1, 'w1', 10)$$) as partitioned;
select pgque_test.error_of($$select * from pgque.receive_coop('t64_q', 'g_alice', 'm1')$$) as coop;
select pgque_test.error_of($$select * from pgque.receive('t64_q', 'c_alice', 10)$$) as plain;
reset role;
select pgque_test.t64_touched() as queue_row_touched;
select count(*) as sealed from pgque.unlogged_seal u join pgque.queue q using (queue_id) where q.queue_name = 't64_q';
set client_min_messages = error;
select pgque.ticker('t64_q') is null as reset_nothing_due;
reset client_min_messages;
select count(*) as sealed_by_ticker from pgque.unlogged_seal u join pgque.queue q using (queue_id) where q.queue_name = 't64_q';
set role t64_alice;
select count(*) as partitioned_rows from pgque.receive_partitioned('t64_q', 'p_alice', 0, 1, 'w1', 10);
select count(*) as coop_rows from pgque.receive_coop('t64_q', 'g_alice', 'm1');
select count(*) as plain_rows from pgque.receive('t64_q', 'c_alice', 10);
reset role;
revoke execute on function pgque_test.error_of(text) from t64_alice;
revoke usage on schema pgque_test from t64_alice;

-- clean up
reset role;
select pgque.drop_queue('t64_q', true);
revoke execute on function pgque_test.error_of(text) from t64_mallory;
revoke usage on schema pgque_test from t64_mallory;
drop function pgque_test.t64_crash(), pgque_test.t64_touched();
drop table pgque_test.t64_xmax;
drop owned by t64_alice, t64_mallory;
drop role t64_alice, t64_mallory;

-- A release taken back by a claim in a subtransaction that rolls back
-- (ADR 0071): the claim cancelled the pending release outright, so after
-- the rollback to the savepoint the release the transaction committed was
-- lost and the slot stayed leased until its ttl (another worker could not
-- claim it).  The claim's abort now puts the release back in force.
select pgque.create_queue('t64_r');
select pgque.subscribe_slot('t64_r', 'rc', 0, 1);
select pgque.claim_slot('t64_r', 'rc', 0, 'w1') is not null as w1_claims;
begin;
select pgque.release_slot('t64_r', 'rc', 0, 'w1') as released;
savepoint a;
select pgque.claim_slot('t64_r', 'rc', 0, 'w1') is not null as taken_back_in_savepoint;
rollback to a;
commit;
select pgque.claim_slot('t64_r', 'rc', 0, 'w2') is not null as w2_claims_the_released_slot;
-- taken back for good (the savepoint released): w2 keeps it
begin;
select pgque.release_slot('t64_r', 'rc', 0, 'w2') as released;
savepoint a;
select pgque.claim_slot('t64_r', 'rc', 0, 'w2') is not null as taken_back;
release savepoint a;
commit;
select pgque.claim_slot('t64_r', 'rc', 0, 'w3') is null as w3_refused;
-- nested: taken back two levels down, committed to the middle one, which
-- rolls back: the release holds
begin;
select pgque.release_slot('t64_r', 'rc', 0, 'w2') as released;
savepoint a;
savepoint b;
select pgque.claim_slot('t64_r', 'rc', 0, 'w2') is not null as taken_back;
release savepoint b;
rollback to a;
commit;
select pgque.claim_slot('t64_r', 'rc', 0, 'w3') is not null as w3_claims;
-- a release taken back does not refuse PREPARE, and leaves nothing for
-- the next transaction
begin;
select pgque.release_slot('t64_r', 'rc', 0, 'w3') as released;
savepoint a;
select pgque.claim_slot('t64_r', 'rc', 0, 'w3') is not null as taken_back;
prepare transaction 't64_p';
commit prepared 't64_p';
select pgque.claim_slot('t64_r', 'rc', 0, 'w4') is null as w4_refused;
-- one in force still does
begin;
select pgque.release_slot('t64_r', 'rc', 0, 'w3') as released;
prepare transaction 't64_p2';
select count(*) as nothing_prepared from pg_prepared_xacts where gid = 't64_p2';
-- release and claim again, 10,000 times in a transaction and its
-- subtransactions: the list stays short (each claim takes its release back)
do $$
begin
    for i in 1..5000 loop
        perform pgque.release_slot('t64_r', 'rc', 0, 'w3');
        perform pgque.claim_slot('t64_r', 'rc', 0, 'w3');
        begin
            perform pgque.release_slot('t64_r', 'rc', 0, 'w3');
            perform pgque.claim_slot('t64_r', 'rc', 0, 'w3');
        exception when others then raise;
        end;
    end loop;
end $$;
select pgque.claim_slot('t64_r', 'rc', 0, 'w4') is null as w4_still_refused;
select pgque.release_slot('t64_r', 'rc', 0, 'w3') as released;
select pgque.claim_slot('t64_r', 'rc', 0, 'w4') is not null as w4_claims;
select pgque.release_slot('t64_r', 'rc', 0, 'w4') as released;
select pgque.unsubscribe_slot('t64_r', 'rc', 0);
select pgque.drop_queue('t64_r');
