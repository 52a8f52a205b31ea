-- Partition keys (SPEC §3): routing, per-key order, fixed N, the lease API
-- and its rejections.  Workers are off here; the ticks are explicit.
select pgque.create_queue('pk');

-- the hash formula, pinned: slot = (hashtextextended(key, 0) % n + n) % n,
-- a NULL key is slot 0
select k, n, pgque._slot_of(k, n) as slot
  from (values ('tenant-1'), ('tenant-2'), ('tenant-42'), ('a'), ('b'), ('файл'), (null)) v(k),
       (values (1), (3), (8), (16)) m(n)
 order by k nulls last, n;
select count(*) as formula_mismatches
  from generate_series(1, 2000) i, (values (2), (7), (32)) m(n)
 where pgque._slot_of('key-' || i, n) <> ((hashtextextended('key-' || i, 0) % n + n) % n);

-- N = 3 slots, fixed per (queue, consumer); repeating is harmless
select pgque.subscribe_slot('pk', 'proc', k, 3) from generate_series(0, 2) k;
select pgque.subscribe_slot('pk', 'proc', 1, 3) as again;
select pgque_test.error_of($$select pgque.subscribe_slot('pk', 'proc', 0, 4)$$) as other_n;
select co_name, n from pgque.partition_consumer;

-- leases: claim returns an epoch; the owner renews with the same epoch; a
-- live lease of another worker gives NULL
select pgque.claim_slot('pk', 'proc', k, 'w' || k) > 0 as claimed from generate_series(0, 2) k;
select pgque.claim_slot('pk', 'proc', 0, 'w0') = (select epoch from pgque.partition_slot_status where slot = 0) as renew_same_epoch,
       pgque.claim_slot('pk', 'proc', 0, 'intruder') is null as intruder_gets_null;

-- interleaved keys A,B,A,A,B (and a NULL key) over several batches
select pgque.send('pk', 'e', 'A1', 'A'), pgque.send('pk', 'e', 'B1', 'B');
select pgque.ticker('pk') is not null as ticked;
select pgque.send('pk', 'e', 'A2', 'A'), pgque.send('pk', 'e', 'A3', 'A'), pgque.send('pk', 'e', 'N1', null);
select pgque.ticker('pk') is not null as ticked;
select pgque.send('pk', 'e', 'B2', 'B'), pgque.send_batch('pk', 'e', array['A4', 'B3'], array['A', 'B']);
select pgque.ticker('pk') is not null as ticked;
select pgque._slot_of('A', 3) as slot_of_a, pgque._slot_of('B', 3) as slot_of_b;

create temp table got (slot int4, seq serial, msg_id bigint, payload text, key text);
do $$
declare
    k int4;
    m pgque.message;
    b bigint;
begin
    for k in 0 .. 2 loop
        loop
            b := null;
            for m in select * from pgque.receive_partitioned('pk', 'proc', k, 3, 'w' || k, 2) loop
                insert into got (slot, msg_id, payload, key) values (k, m.msg_id, m.payload, m.extra1);
                b := m.batch_id;
            end loop;
            exit when b is null;
            perform pgque.ack_partitioned('pk', 'proc', k, 3, 'w' || k);
        end loop;
    end loop;
end $$;
-- each slot got only its keys, in ev_id order
select slot, string_agg(payload, ',' order by seq) as delivered from got group by slot order by slot;
select count(*) as wrong_slot from got where slot <> pgque._slot_of(key, 3);
select count(*) as out_of_order
  from (select msg_id < lag(msg_id) over (partition by slot order by seq) as back from got) x where back;
-- the union of the slots is the whole stream, and they are pairwise disjoint
select (select count(*) from got) as delivered, (select count(distinct msg_id) from got) as distinct_ids,
       (select count(*) from pgque_test.events('pk')) as in_log;

-- a retried keyed event comes back on the same slot, retry_count 1
select pgque.send('pk', 'e', 'A-retry', 'A');
select pgque.ticker('pk') is not null as ticked;
select pgque.nack_partitioned('pk', 'proc', pgque._slot_of('A', 3), 3, 'w' || pgque._slot_of('A', 3), m, '0 s', 'try again')
  from pgque.receive_partitioned('pk', 'proc', pgque._slot_of('A', 3), 3, 'w' || pgque._slot_of('A', 3)) m;
select pgque.ack_partitioned('pk', 'proc', pgque._slot_of('A', 3), 3, 'w' || pgque._slot_of('A', 3));
select pgque.maint_retry_events() as moved;
select pgque.ticker('pk') is not null as ticked;
select k as slot, m.payload, m.retry_count
  from generate_series(0, 2) k, lateral pgque.receive_partitioned('pk', 'proc', k, 3, 'w' || k) m;

-- the status view: one row per slot, with lease, the queue's events past
-- the slot's cursor (PgQue's pending_events: a retried event is no new
-- position) and this slot's own share of what it has to read
select slot, n, lease_owner, epoch > 0 as has_epoch, pending_events, slot_pending_events,
       last_receive_at is not null as polled
  from pgque.partition_slot_status order by slot;

-- release: owner only; the epoch is kept and the next claim gets a larger one
select pgque.release_slot('pk', 'proc', 2, 'somebody') as not_owner,
       pgque.release_slot('pk', 'proc', 2, 'w2') as owner;
select epoch as e2 from pgque.partition_slot_status where slot = 2 \gset
select pgque.claim_slot('pk', 'proc', 2, 'w9') > :e2 as larger_epoch;

-- the lease check: a non-holder is fenced (PQ002), a slot without a lease
-- says so (PQ001)
select pgque_test.error_of($$select * from pgque.receive_partitioned('pk', 'proc', 2, 3, 'w2')$$) as fenced_receive;
select pgque_test.error_of($$select pgque.ack_partitioned('pk', 'proc', 2, 3, 'w2')$$) as fenced_ack;
select pgque.release_slot('pk', 'proc', 2, 'w9');
select pgque_test.error_of($$select * from pgque.receive_partitioned('pk', 'proc', 2, 3, 'w9')$$) as not_held;

-- plain receive/ack/nack refuse slot consumers
select pgque_test.error_of($$select * from pgque.receive('pk', 'proc#0/3')$$) as plain_receive;
select pgque_test.error_of(format('select pgque.ack(%s)', (select b.sb_batch from pgque.slot_batch b join pgque.subscription s on s.sub_id = b.sb_sub join pgque.consumer c on c.co_id = s.sub_consumer where c.co_name = pgque._slot_name('proc', pgque._slot_of('A', 3), 3)))) as plain_ack;
-- a slot's open batch (in pgque.slot_batch, ADR 0023) shows in consumer_stats
select consumer_name, batch_active, batch_id = (select b.sb_batch from pgque.slot_batch b join pgque.subscription s on s.sub_id = b.sb_sub join pgque.consumer c on c.co_id = s.sub_consumer where c.co_name = consumer_name) as its_batch
  from pgque.consumer_stats() where queue_name = 'pk' and consumer_name = pgque._slot_name('proc', pgque._slot_of('A', 3), 3);

-- rejections
select v.what, pgque_test.error_of(v.sql) as error from (values
 ('wrong n on receive',   $$select * from pgque.receive_partitioned('pk', 'proc', 0, 4, 'w0')$$),
 ('slot out of range',    $$select * from pgque.receive_partitioned('pk', 'proc', 3, 3, 'w0')$$),
 ('negative slot',        $$select pgque.claim_slot('pk', 'proc', -1, 'w0')$$),
 ('null slot',            $$select pgque.claim_slot('pk', 'proc', null, 'w0')$$),
 ('empty worker',         $$select pgque.claim_slot('pk', 'proc', 0, '')$$),
 ('null worker',          $$select pgque.claim_slot('pk', 'proc', 0, null)$$),
 ('long worker',          $$select pgque.claim_slot('pk', 'proc', 0, repeat('w', 65))$$),
 ('ttl under 1 s',        $$select pgque.claim_slot('pk', 'proc', 0, 'w0', '500 ms')$$),
 ('null ttl',             $$select pgque.claim_slot('pk', 'proc', 0, 'w0', null)$$),
 ('unknown consumer',     $$select pgque.claim_slot('pk', 'nobody', 0, 'w0')$$),
 ('unknown queue',        $$select pgque.claim_slot('nope', 'proc', 0, 'w0')$$),
 ('n zero',               $$select pgque.subscribe_slot('pk', 'other', 0, 0)$$),
 ('n too large',          $$select pgque.subscribe_slot('pk', 'other', 0, 5000)$$),
 ('slot >= n',            $$select pgque.subscribe_slot('pk', 'other', 2, 2)$$),
 ('# in consumer',        $$select pgque.subscribe_slot('pk', 'a#b', 0, 2)$$),
 ('null n',               $$select pgque.subscribe_slot('pk', 'other', 0, null)$$),
 ('null max_return',      $$select * from pgque.receive_partitioned('pk', 'proc', 0, 3, 'w0', null)$$),
 ('nack without batch',   $$select pgque.nack_partitioned('pk', 'proc', 1, 3, 'w1', row(1,1,'t','p',null,now(),null,null,null,null)::pgque.message)$$),
 ('unsubscribe unknown',  $$select pgque.unsubscribe_slot('pk', 'nobody', 0)$$),
 ('null n on ack',        $$select pgque.ack_partitioned('pk', 'proc', 0, null, 'w0')$$)) v(what, sql);

-- unsubscribing the last slot frees N (and its leases)
select pgque.unsubscribe_slot('pk', 'proc', k) from generate_series(0, 2) k;
select count(*) as partition_consumers_left from pgque.partition_consumer;
select count(*) as leases_left from pgque._slot_leases();
select pgque.subscribe_slot('pk', 'proc', 0, 4) as other_n_now_allowed;
select pgque.drop_queue('pk', true);
select count(*) as leases_after_drop from pgque._slot_leases();
