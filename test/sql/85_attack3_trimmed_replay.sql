-- Second reader (ADR 0107): the windows whose old tick listed transactions
-- in progress (ADR 0106 trims that list to the xids the new tick sees
-- finished) read by the other readers: the four partition slots of a
-- 32-bucket queue beside a plain consumer of the same queue, then a seek of
-- the plain consumer back to the start, which replays every window (its
-- old ticks' lists trimmed again), with an event an admin addressed to it
-- (ADR 0105) and a retry copy it acked.  Prepared transactions stand for
-- the concurrent writers: "a" commits between two ticks, "b" rolls back,
-- "c" runs across three ticks, "z" holds an xid and writes nothing, "e"
-- addresses an event to the plain consumer and commits in a window.
-- Every committed event once per reader and once more in the replay, no
-- rolled-back one, the addressed event in the replay too, the acked retry
-- copy not.
create schema a85;
create table a85.got (who text, round int4, payload text);
select pgque.create_queue('a85q'), pgque.set_queue_config('a85q', 'partition_buckets', '32');
select pgque.subscribe('a85q', 'a85c');
select pgque.subscribe_partitioned('a85q', 'a85ps', 4);
select bool_and(pgque.claim_slot('a85q', 'a85ps', k, 'w' || k, '1 hour') > 0) as claimed from generate_series(0, 3) k;

create function a85.send(tag text, n int4) returns void language sql as $$
    select pgque.send_batch('a85q', 'default',
                            array(select tag || '-' || pg_catalog.lpad(i::text, 3, '0') from generate_series(1, n) i),
                            array(select 'k' || (i % 29) from generate_series(1, n) i));
$$;
-- every slot in parts of 7, then the plain consumer in parts of 7
create function a85.take(r int4) returns void language plpgsql as $$
declare
    k int4;
    n int4;
begin
    for k in 0 .. 3 loop
        loop
            insert into a85.got select 'slots', r, m.payload
              from pgque.receive_partitioned('a85q', 'a85ps', k, 4, 'w' || k, 7) m;
            get diagnostics n = row_count;
            exit when n = 0;
            perform pgque.ack_partitioned('a85q', 'a85ps', k, 4, 'w' || k);
        end loop;
    end loop;
    insert into a85.got select 'plain', r, d.payload from pgque_test.drain('a85q', 'a85c', 7) d;
end $$;

select a85.send('r0', 20);
select pgque.ticker('a85q') is not null as ticked;
select a85.take(0);
-- a retry copy the plain consumer gets and acks (the original was
-- nacked, and is not in the ledger): the replay has the original once, the
-- seek dropped the copy
select a85.send('x', 1);
select pgque.ticker('a85q') is not null as ticked;
select m.payload as retried, pgque.nack(m.batch_id, m, '0 seconds', 'again')
  from pgque.receive('a85q', 'a85c', 1) m;
select pgque.ack(batch_id) from pgque.receive('a85q', 'a85c', 100) limit 1;
select pgque.maint() >= 0 as retries_moved;
select pgque.ticker('a85q') is not null as ticked;
select a85.take(0);
begin; select a85.send('a', 30); prepare transaction 'a85_a';
begin; select a85.send('b', 30); prepare transaction 'a85_b';
begin; select a85.send('c', 30); prepare transaction 'a85_c';
begin; select pg_catalog.pg_current_xact_id() is not null as z_has_xid; prepare transaction 'a85_z';
begin;
select pgque.insert_event_raw('a85q', null, now(), (select s.sub_id from pgque.subscription s
                                                     join pgque.consumer co on co.co_id = s.sub_consumer
                                                    where co.co_name = 'a85c'
                                                      and s.sub_queue = (select queue_id from pgque.queue where queue_name = 'a85q')),
                              null, 'default', 'e-addressed', 'k1', null, null, null) is not null as addressed;
prepare transaction 'a85_e';
select a85.send('r1', 25);
-- the old tick: a, b, c, z and e in progress
select pgque.ticker('a85q') is not null as ticked;
select a85.send('r2', 25);
commit prepared 'a85_a';
rollback prepared 'a85_b';
commit prepared 'a85_e';
-- the new tick: c and z still in progress
select pgque.ticker('a85q') is not null as ticked;
select a85.take(1);
select a85.send('r3', 15);
select pgque.ticker('a85q') is not null as ticked;
select a85.take(2);
-- c commits at last, z never wrote
commit prepared 'a85_c';
rollback prepared 'a85_z';
select a85.send('r4', 10);
select pgque.ticker('a85q') is not null as ticked;
select a85.take(3);

-- the replay: the plain consumer back to the queue's start
select clamped from pgque.seek('a85q', 'a85c', 'earliest');
insert into a85.got select 'replay', 9, d.payload from pgque_test.drain('a85q', 'a85c', 7) d;

-- per reader: every committed event once, none of b; e is the plain
-- consumer's alone
select who, split_part(payload, '-', 1) as sent_by, count(*) as events, count(distinct payload) as distinct_payloads
  from a85.got group by 1, 2 order by 1, 2;
-- the slots and the plain consumer got the same events but e
select (select array_agg(payload order by payload) from a85.got where who = 'slots')
     = (select array_agg(payload order by payload) from a85.got
         where who = 'plain' and payload <> 'e-addressed'
           and (payload, 1) not in (select payload, 1 from a85.got where who = 'plain' group by payload having count(*) > 1))
       as slots_and_plain_agree;
-- the replay: what the plain consumer got, each once
select (select array_agg(payload order by payload) from a85.got where who = 'replay')
     = (select array_agg(distinct payload order by payload) from a85.got where who = 'plain') as replay_is_every_event_once;

select pgque.unsubscribe('a85q', 'a85c');
select pgque.drop_queue('a85q', true);
drop schema a85 cascade;
