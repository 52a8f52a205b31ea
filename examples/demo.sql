-- The demo behind `make demo`: one queue, two fan-out consumers, a retry, a
-- dead letter, a rotation, told in plain words.
--
-- Run: `make demo` (a throwaway cluster, test/demo.sh), or against a
-- scratch database of a server with pgque_bgw preloaded, as a superuser or
-- the database owner (it creates the extension):
--
--   psql -X -d scratch -f examples/demo.sql
\set QUIET on
\pset footer off
\set ON_ERROR_STOP on

\echo '== 1. create the extension and a queue'
create extension if not exists pgque_bgw;
select pgque.create_queue('files') as "create_queue('files') -> 1 = created";

\echo '== 2. two consumers subscribe: each gets every event (fan-out)'
select pgque.subscribe('files', 'indexer') as indexer, pgque.subscribe('files', 'billing') as billing;

\echo '== 3. producers send: single events (text and jsonb), a keyed event and a batch'
select pgque.send('files', 'file.created', '{"tenant": "t1", "path": "/a.txt"}'::jsonb) as ev1,
       pgque.send('files', 'file.created', '{"tenant": "t2", "path": "/b.txt"}'::jsonb) as ev2,
       pgque.send('files', 'file.deleted', '/a.txt', 'tenant-t1') as keyed_ev3;
select pgque.send_batch('files', 'file.overwritten', array['/c.txt', '/d.txt', '/e.txt']) as batch_ids;

\echo '== 4. a tick closes the window: the events become one batch for each consumer'
select pgque.ticker('files') as tick_id;

\echo '== 5. indexer receives the batch and acks it'
select msg_id, type, payload, extra1 as partition_key from pgque.receive('files', 'indexer');
select pgque.ack(batch_id) as "ack -> 1" from (select distinct batch_id from pgque.receive('files', 'indexer')) b;

\echo '== 6. billing fails on two events: one is retried, the other is a poison pill'
select pgque.set_queue_config('files', 'max_retries', '1') as "max_retries = 1";
select m.msg_id, m.payload,
       pgque.nack(m.batch_id, m, '0 seconds', 'billing backend timed out') as nacked
  from pgque.receive('files', 'billing') m where m.msg_id in (2, 4);
select pgque.ack(batch_id) as "ack the rest" from (select distinct batch_id from pgque.receive('files', 'billing')) b;

\echo '== 7. maintenance moves the due retries back into the queue; only billing sees them'
select pgque.maint_retry_events() as retries_moved;
select pgque.ticker('files') is not null as ticked;
select msg_id, payload, retry_count from pgque.receive('files', 'billing');
\echo '   billing acks event 2 this time but fails event 4 again: it has used its retry'
select m.msg_id, pgque.nack(m.batch_id, m, '0 seconds', 'corrupt payload') as nacked
  from pgque.receive('files', 'billing') m where m.msg_id = 4;
select pgque.ack(batch_id) as acked from (select distinct batch_id from pgque.receive('files', 'billing')) b;
select count(*) as "indexer got nothing new" from pgque.receive('files', 'indexer');

\echo '== 8. the dead-letter queue holds the poison pill, with its reason'
select ev_id, ev_type, ev_data, ev_retry, dl_reason from pgque.dlq_inspect('files');

\echo '== 9. rotation: the oldest of the three event tables is reclaimed by TRUNCATE'
select pgque.set_queue_config('files', 'rotation_period', '1 millisecond') as short_rotation;
select queue_cur_table as "current table before" from pgque.queue where queue_name = 'files';
select pg_sleep(0.01);
select pgque.maint() >= 1 as "maint() rotated";
select queue_cur_table as "current table after" from pgque.queue where queue_name = 'files';
select c.relname as event_table, s.n_dead_tup as dead_tuples
  from pg_stat_user_tables s join pg_class c on c.oid = s.relid
 where s.schemaname = 'pgque' and c.relname ~ '^event_[0-9]+_[0-9]$' order by 1;

\echo '== 10. status'
select * from pgque.get_consumer_info('files');
select component, status from pgque.status();

\echo '== 11. now the background workers: nothing calls ticker() any more'
alter system set pgque_bgw.enabled = on;
select pg_reload_conf() as reloaded;
do $$
begin
    for i in 1 .. 100 loop
        exit when (select count(*) from pg_stat_activity
                    where backend_type in ('pgque_bgw ticker', 'pgque_bgw maintenance', 'pgque_bgw watchdog')
                      and datname = current_database()) = 3;
        perform pg_sleep(0.1);
    end loop;
end $$;
select backend_type, datname from pg_stat_activity where backend_type like 'pgque_bgw %' order by 1;
select pgque.send('files', 'file.created', '/f.txt') as sent_without_ticking;
select pg_sleep(0.1);
select msg_id, type, payload from pgque.receive('files', 'indexer');
select component, status from pgque.status() where component in ('workers', 'ticker', 'scheduler');

\echo ''
\echo 'Done: 6 events were sent once and read by two consumers; indexer processed all of them,'
\echo 'billing processed 5 (one after a retry) and dead-lettered 1 with its reason; the queue'
\echo 'rotated to its next event table without leaving a single dead tuple. Then the background'
\echo 'workers took over: the 7th event reached its consumer with no ticker() call.'
