-- Second reader of the session's branches (attack2): a seek that drops the
-- copies the consumer acked (ADR 0091) must not have them handed out again
-- from a part cache that read them before the seek (ADR 0099).
--
-- A window's rows were fixed by its two snapshots, so the part caches (the
-- receive's messages, _window_rows' rows) kept a window with no
-- invalidation.  _seek_drop_copies deletes rows of windows already passed:
-- the backend that read such a window and then seeks back to its start
-- (the consumer itself, on one connection) read the deleted copy from its
-- cache: the retried event came twice, the hole ADR 0091 closed.
select pgque.create_queue('t76_q');
select pgque.subscribe('t76_q', 'c');
select count(pgque.send('t76_q', 'ev', 'p' || i)) as sent from generate_series(1, 3) i;
select pgque.ticker('t76_q') is not null as ticked;
create temp table t76_b as select r.msg_id, r.batch_id, r as m from pgque.receive('t76_q', 'c', 10) r;
select array_agg(msg_id order by msg_id) as first_read from t76_b;
-- event 2 to retry at once; the batch acked; the copy moved and ticked
select pgque.nack(b.batch_id, b.m, '0 seconds', 'test') from t76_b b where b.msg_id = 2;
select pgque.ack((select batch_id from t76_b limit 1));
drop table t76_b;
select pgque.maint_retry_events() as moved;
select pg_sleep(0.01);
select pgque.ticker('t76_q') is not null as ticked;
-- the copy's window, read in parts: this backend keeps it in its cache
select array_agg(msg_id) as retried, max(retry_count) as retry_count from pgque.receive('t76_q', 'c', 10);
select pgque.ack((select batch_id from pgque.receive('t76_q', 'c', 10) limit 1)) as acked;
-- back to the start of the copy's window: the copy is dropped ...
select tick_id = (select max(tick_id) - 1 from pgque.tick t
                   where t.tick_queue = (select queue_id from pgque.queue where queue_name = 't76_q')) as at_copy_window,
       clamped
  from pgque.seek('t76_q', 'c', (select max(t.tick_time) from pgque.tick t
                                  where t.tick_queue = (select queue_id from pgque.queue where queue_name = 't76_q')));
select count(*) as copies_left
  from pgque_test.events('t76_q') e where e.ev_owner is not null;
-- ... and the replay of its window, in this backend, has nothing: the
-- copy was acked (it came {2} again from the cache before the fix)
select coalesce(array_agg(msg_id), '{}') as replayed from pgque.receive('t76_q', 'c', 10);

-- Another backend's cache: the isolation spec attack2_seek_cache.

-- A seek that dropped copies cannot be prepared: COMMIT PREPARED, in any
-- session, would make the deletion visible with no session told (0A000);
-- the copy stays.  A seek that drops nothing can.
select count(pgque.send('t76_q', 'ev', 'p4')) as sent;
select pg_sleep(0.01);
select pgque.ticker('t76_q') is not null as ticked;
create temp table t76_b as select r.msg_id, r.batch_id, r as m from pgque.receive('t76_q', 'c', 10) r;
select pgque.nack(b.batch_id, b.m, '0 seconds', 'test') from t76_b b where b.msg_id = 4;
select pgque.ack((select batch_id from t76_b limit 1));
drop table t76_b;
select pgque.maint_retry_events() as moved;
select pg_sleep(0.01);
select pgque.ticker('t76_q') is not null as ticked;
select array_agg(msg_id) as retried from pgque.receive('t76_q', 'c', 10);
select pgque.ack((select batch_id from pgque.receive('t76_q', 'c', 10) limit 1)) as acked;
begin;
select clamped from pgque.seek('t76_q', 'c', 'earliest');
\set VERBOSITY sqlstate
prepare transaction 't76_seek';
\set VERBOSITY default
select count(*) as prepared from pg_prepared_xacts where gid = 't76_seek';
select count(*) as copies_kept from pgque_test.events('t76_q') e where e.ev_owner is not null;
begin;
select clamped from pgque.seek('t76_q', 'c', 'latest');
prepare transaction 't76_seek_nothing';
commit prepared 't76_seek_nothing';

select pgque.unsubscribe('t76_q', 'c');
select pgque.drop_queue('t76_q');
