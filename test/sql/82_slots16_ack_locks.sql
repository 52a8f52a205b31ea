-- A partition slot's ack reads pgque.blocked_key only when its consumer
-- pauses (ADR 0104): only a pausing consumer has blocked keys (a switch
-- to skip releases them all, ADR 0029), and the read cost every other
-- ack a statement and the locks of three relations (the table and its two
-- indexes), which 16 workers took in the shared lock table once their 16
-- fast-path slots were spent.  Workers are off here; the ticks are explicit.

-- the relations of pgque.blocked_key (the table, its indexes) this backend
-- holds a lock on: read in the ack's own transaction, before its commit
create function pg_temp.blocked_key_locks() returns bigint language sql as $$
    select count(*) from pg_locks l
     where l.pid = pg_backend_pid() and l.locktype = 'relation'
       and l.relation in (select 'pgque.blocked_key'::regclass
                          union all
                          select i.indexrelid from pg_index i where i.indrelid = 'pgque.blocked_key'::regclass)
$$;

select pgque.create_queue('s16');
select pgque.set_queue_config('s16', 'partition_buckets', '4');
select pgque.set_queue_config('s16', 'max_retries', '0');
select pgque.maint_rotate_tables_step2() >= 0 as stamped;
select pgque.subscribe_slot('s16', 'sk', s, 2) from generate_series(0, 1) s;
select pgque.subscribe_slot('s16', 'pa', s, 2, 'pause') from generate_series(0, 1) s;
select pgque.get_failure_policy('s16', 'sk') as sk_policy, pgque.get_failure_policy('s16', 'pa') as pa_policy;
select pgque.claim_slot('s16', c, s, 'w-' || c || s) > 0 as claimed
  from unnest(array['sk', 'pa']) c, generate_series(0, 1) s;
-- 40 events over 8 keys, each slot gets its keys' events
select count(*) as sent
  from unnest(pgque.send_batch('s16', 'ev', array(select 'p' || g from generate_series(1, 40) g),
                               array(select 'key-' || (g % 8) from generate_series(1, 40) g)));
select pgque.ticker('s16') is not null as ticked;

-- a skip consumer's slot: receive and ack in one transaction; the ack
-- finished a batch (1) and took no lock on blocked_key
begin;
select count(*) > 0 as got from pgque.receive_partitioned('s16', 'sk', 0, 2, 'w-sk0', 100);
select pgque.ack_partitioned('s16', 'sk', 0, 2, 'w-sk0') as acked;
select pg_temp.blocked_key_locks() as skip_ack_blocked_key_locks;
commit;

-- a pausing consumer's slot: its ack still reads blocked_key
begin;
select count(*) > 0 as got from pgque.receive_partitioned('s16', 'pa', 0, 2, 'w-pa0', 100);
select pgque.ack_partitioned('s16', 'pa', 0, 2, 'w-pa0') as acked;
select pg_temp.blocked_key_locks() > 0 as pause_ack_reads_blocked_key;
commit;

-- and still releases the key whose head its batch finished: slot 1 of the
-- pausing consumer nacks its first event (max_retries 0: to the dead
-- letter queue, the head done in this batch), the worker skips the rest
-- of that key's events in the batch (the pause contract), the ack
-- releases the key: its withheld events are appended again (the marker
-- stays, draining, until they pass)
create temp table pa_first as
select m.* from pgque.receive_partitioned('s16', 'pa', 1, 2, 'w-pa1', 100) m order by m.msg_id limit 1;
select pgque.nack_partitioned('s16', 'pa', 1, 2, 'w-pa1', row(m.*)::pgque.message, '0 seconds', 'test') as nacked
  from pa_first m;
select count(*) as blocked_before_ack from pgque.blocked_key;
select pgque.ack_partitioned('s16', 'pa', 1, 2, 'w-pa1') as acked;
select count(*) as blocked_after_ack from pgque.blocked_key;
select pgque.ticker('s16') is not null as ticked;
-- the nacked key's other events, appended again by the release
select count(*) = (select count(*) - 1 from generate_series(1, 40) g
                    where 'key-' || (g % 8) = (select extra1 from pa_first)) as the_key_again,
       bool_and(m.extra1 = (select extra1 from pa_first)) as only_that_key
  from pgque.receive_partitioned('s16', 'pa', 1, 2, 'w-pa1', 100) m;
select pgque.ack_partitioned('s16', 'pa', 1, 2, 'w-pa1') as acked;

-- a switch from pause to skip releases every blocked key first: what the
-- skip consumer's ack no longer reads.  Slot 1 blocks a key again (its
-- retry is due later: the head is not done), then the policy goes to
-- skip: no blocked key is left, the withheld events come again, and the
-- ack under skip takes no lock on blocked_key
select count(*) as sent
  from unnest(pgque.send_batch('s16', 'ev', array(select 'q' || g from generate_series(1, 40) g),
                               array(select 'key-' || (g % 8) from generate_series(1, 40) g)));
select pgque.ticker('s16') is not null as ticked;
select pgque.set_queue_config('s16', 'max_retries', '5');
create temp table pa_second as
select m.* from pgque.receive_partitioned('s16', 'pa', 1, 2, 'w-pa1', 100) m order by m.msg_id limit 1;
select pgque.nack_partitioned('s16', 'pa', 1, 2, 'w-pa1', row(m.*)::pgque.message, '1 hour', 'test') as nacked
  from pa_second m;
select pgque.ack_partitioned('s16', 'pa', 1, 2, 'w-pa1') as acked;
select count(*) as blocked_under_pause from pgque.blocked_key;
select pgque.set_failure_policy('s16', 'pa', 'skip') as previous;
select count(*) as blocked_after_switch from pgque.blocked_key;
select pgque.ticker('s16') is not null as ticked;
begin;
select count(*) = (select count(*) - 1 from generate_series(1, 40) g
                    where 'key-' || (g % 8) = (select extra1 from pa_second)) as withheld_come_again
  from pgque.receive_partitioned('s16', 'pa', 1, 2, 'w-pa1', 100) m;
select pgque.ack_partitioned('s16', 'pa', 1, 2, 'w-pa1') as acked;
select pg_temp.blocked_key_locks() as skip_ack_blocked_key_locks;
commit;
