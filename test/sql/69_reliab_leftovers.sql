-- Reliability leftovers of ADR 0089, one block each: the hole, then what
-- holds now.

-- 1. A forget takes effect at commit.  unsubscribe_slot (the last slot),
-- drop_queue and a resize's switch forget the consumer's leases in shared
-- memory; made at once, a rolled-back unsubscribe (or one rolled back to a
-- savepoint) lost the leases of a consumer that still existed.
select pgque.create_queue('t69_q');
select pgque.subscribe_slot('t69_q', 'p', 0, 2), pgque.subscribe_slot('t69_q', 'p', 1, 2);
select pgque.claim_slot('t69_q', 'p', 0, 'w0') is not null as w0_claimed,
       pgque.claim_slot('t69_q', 'p', 1, 'w1') is not null as w1_claimed;
-- the leases as they are: slot, owner, epoch
create table pgque_test.t69_before as
select slot, owner, epoch from pgque._slot_leases() where consumer = 'p';
create function pgque_test.t69_leases() returns text language sql as $$
    select coalesce(pg_catalog.string_agg(l.slot || ':' || l.owner ||
                        case when b.epoch = l.epoch then '' else ' (new epoch)' end, ', ' order by l.slot), 'none')
      from pgque._slot_leases() l left join pgque_test.t69_before b using (slot)
     where l.consumer = 'p'
$$;
select pgque_test.t69_leases() as leases;

-- rolled back: the leases stay, same owners and epochs
begin;
select pgque.unsubscribe_slot('t69_q', 'p', 0), pgque.unsubscribe_slot('t69_q', 'p', 1);
-- inside the transaction they are gone for it, as after its commit
select pgque_test.t69_leases() as in_transaction;
rollback;
select pgque_test.t69_leases() as after_rollback;
-- the owners go on under the same epoch: a claim renews
select pgque.claim_slot('t69_q', 'p', 0, 'w0') = (select epoch from pgque_test.t69_before where slot = 0) as same_epoch;

-- rolled back to a savepoint, the transaction committing
begin;
savepoint s;
select pgque.unsubscribe_slot('t69_q', 'p', 0), pgque.unsubscribe_slot('t69_q', 'p', 1);
rollback to savepoint s;
commit;
select pgque_test.t69_leases() as after_savepoint;

-- a savepoint released keeps the forget for the commit to apply; the
-- transaction rolled back keeps the leases
begin;
savepoint s;
select pgque.unsubscribe_slot('t69_q', 'p', 0), pgque.unsubscribe_slot('t69_q', 'p', 1);
release savepoint s;
rollback;
select pgque_test.t69_leases() as after_released_savepoint_rollback;

-- drop_queue rolled back
begin;
select pgque.drop_queue('t69_q', true);
rollback;
select pgque_test.t69_leases() as after_drop_rollback;

-- in the transaction the forgotten slots are nobody's: the owner's receive
-- gets PQ001 (as after the commit), a claim takes the slot anew (new epoch);
-- rolled back, all of it is undone
begin;
select pgque.unsubscribe_slot('t69_q', 'p', 1);
select pgque.unsubscribe_slot('t69_q', 'p', 0);
select pgque.subscribe_slot('t69_q', 'p', 0, 2), pgque.subscribe_slot('t69_q', 'p', 1, 2);
select pgque_test.error_of($$select pgque.receive_partitioned('t69_q', 'p', 0, 2, 'w0')$$) as w0_receive;
select pgque.release_slot('t69_q', 'p', 1, 'w1') as w1_released;
select pgque.claim_slot('t69_q', 'p', 1, 'w2') is not null as w2_claimed;
select pgque_test.t69_leases() as re_subscribed;
rollback;
select pgque_test.t69_leases() as after_resubscribe_rollback;

-- the same, committed: the claims made after the forget stay, the rest goes
begin;
select pgque.unsubscribe_slot('t69_q', 'p', 1);
select pgque.unsubscribe_slot('t69_q', 'p', 0);
select pgque.subscribe_slot('t69_q', 'p', 0, 2), pgque.subscribe_slot('t69_q', 'p', 1, 2);
select pgque.claim_slot('t69_q', 'p', 1, 'w2') is not null as w2_claimed;
commit;
select pgque_test.t69_leases() as after_resubscribe_commit;

-- committed: the leases go
select pgque.unsubscribe_slot('t69_q', 'p', 0), pgque.unsubscribe_slot('t69_q', 'p', 1);
select pgque_test.t69_leases() as after_commit;
select pgque.drop_queue('t69_q', true);
drop function pgque_test.t69_leases();
drop table pgque_test.t69_before;
