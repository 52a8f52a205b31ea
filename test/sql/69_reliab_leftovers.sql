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

-- many forgets in one transaction (the commit looks them up sorted, one
-- pass under the partition locks): 40 consumers unsubscribed, the even
-- ones subscribed and claimed again in the same transaction, one of them
-- unsubscribed once more after its claim
select count(pgque.subscribe_slot('t69_q', 'm' || i, 0, 1)) as subscribed,
       count(pgque.claim_slot('t69_q', 'm' || i, 0, 'old')) as claimed
  from generate_series(1, 40) i;
begin;
select count(pgque.unsubscribe_slot('t69_q', 'm' || i, 0)) as unsubscribed from generate_series(1, 40) i;
select count(pgque.subscribe_slot('t69_q', 'm' || i, 0, 1)) as again,
       count(pgque.claim_slot('t69_q', 'm' || i, 0, 'new')) as claimed_again
  from generate_series(2, 40, 2) i;
select pgque.unsubscribe_slot('t69_q', 'm40', 0);
commit;
select owner, count(*), min(consumer), max(consumer) from pgque._slot_leases()
 where consumer like 'm%' group by owner;
select count(*) filter (where substr(consumer, 2)::int % 2 = 0) as even_left,
       count(*) filter (where consumer = 'm40') as m40_left
  from pgque._slot_leases() where consumer like 'm%';
select pgque.drop_queue('t69_q', true);
select count(*) as after_drop from pgque._slot_leases() where queue_id not in (select queue_id from pgque.queue);
drop function pgque_test.t69_leases();
drop table pgque_test.t69_before;
