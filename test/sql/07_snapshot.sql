-- Snapshot visibility: a batch is what the later tick's snapshot sees and the
-- earlier one did not.
select pgque.create_queue('v');
select pgque.subscribe('v', 'c');

-- events sent in the same transaction as a tick are not in that tick ...
begin;
select pgque.send('v', 'same transaction as the tick');
select pgque.ticker('v') is not null as ticked_in_same_tx;
commit;
select count(*) as not_in_that_tick from pgque.receive('v', 'c');
-- ... they are in the next one (the ticker notices them without new sends)
select pgque.ticker('v') is not null as next_tick;
select payload from pgque.receive('v', 'c');
select pgque.ack(batch_id) from (select distinct batch_id from pgque.receive('v', 'c')) b;

-- rolled-back sends never appear
begin;
select pgque.send('v', 'rolled back');
rollback;
select pgque.send('v', 'committed');
select payload from pgque_test.drain('v', 'c');

select pgque.drop_queue('v', true);
