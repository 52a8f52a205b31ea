-- Restores (ADR 0022): the workers (and maint()) act on a database only
-- while its queue state is whole.  pg_restore without -1 and psql -f of a
-- plain dump commit CREATE EXTENSION first and then load the tables one by
-- one; the workers start at once, and a rotation check that sees pgque.queue
-- and the events but not yet pgque.subscription or pgque.tick truncates
-- events a lagging consumer still needs.

-- The seal: one row meaning "the queue state in this database is whole".
-- The first create_queue writes it (never the install script, so a restore's
-- CREATE EXTENSION leaves it out), and pg_dump dumps it with the data.  The
-- references are never set (the check): they only make pg_dump restore this
-- table's data after the tables the workers read, for it orders the data of
-- an extension's tables by their foreign keys (also for pg_restore -j).
-- The tables they name lead, through their own keys, to the queues,
-- consumers and subscriptions.  ON DELETE RESTRICT: a deleted tick, alert,
-- slot consumer, finished window or slot batch of an earlier lease epoch
-- costs one probe of this one-row table
-- (about 12 us a row; NO ACTION's extra probe doubles it).
create table pgque.state_seal (
    one                    boolean primary key default true check (one),
    sealed_at              timestamptz not null default now(),
    after_tick_queue       int4,
    after_tick_id          bigint,
    after_alert            bigint references pgque.alert (alert_id) on delete restrict,
    after_slots_queue      int4,
    after_slots_consumer   text,
    after_window_sub       int4,
    after_window_tick      bigint,
    after_slot_batch_sub   int4,
    after_slot_batch_epoch bigint,
    after_blocked_sub      int4,
    after_blocked_key      text,
    foreign key (after_tick_queue, after_tick_id) references pgque.tick (tick_queue, tick_id) on delete restrict,
    foreign key (after_slots_queue, after_slots_consumer) references pgque.partition_consumer (queue_id, co_name) on delete restrict,
    foreign key (after_window_sub, after_window_tick) references pgque.coop_window (cw_sub, cw_prev_tick) on delete restrict,
    foreign key (after_slot_batch_sub, after_slot_batch_epoch) references pgque.slot_batch (sb_sub, sb_epoch) on delete restrict,
    foreign key (after_blocked_sub, after_blocked_key) references pgque.blocked_key (bk_sub, bk_key) on delete restrict,
    check (pg_catalog.num_nonnulls(after_tick_queue, after_tick_id, after_alert, after_slots_queue,
                                   after_slots_consumer, after_window_sub, after_window_tick,
                                   after_slot_batch_sub, after_slot_batch_epoch,
                                   after_blocked_sub, after_blocked_key) = 0)
);
select pg_catalog.pg_extension_config_dump('pgque.state_seal', '');

-- Why the workers must not act on this database now, or NULL when its
-- queue state is whole: sealed, every cursor's tick there, the sequences the
-- workers and consumers draw from set past the restored rows (a restore sets
-- sequences after all table data), and the ticks not ahead of this
-- cluster's transaction counter.  Index probes only: maint() asks it on
-- every call; the workers until it first says NULL (src/restore.c).
create function pgque._state_held()
returns text language plpgsql
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    why text;
begin
    if not exists (select from pgque.state_seal) then
        if exists (select from pgque.queue) then
            return 'the queue state is being loaded: pgque.state_seal has no row yet (a restore in progress, or one that did not finish)';
        end if;
        return 'no queue yet';
    end if;
    select pg_catalog.format('the tick %s of consumer %s on queue %s is not loaded yet',
                             s.sub_last_tick, c.co_name, q.queue_name)
      into why
      from pgque.subscription s
      join pgque.queue q on q.queue_id = s.sub_queue
      join pgque.consumer c on c.co_id = s.sub_consumer
     where not exists (select from pgque.tick t where t.tick_queue = s.sub_queue and t.tick_id = s.sub_last_tick)
     limit 1;
    if why is not null then
        return why;
    end if;
    -- a blocked key's tick holds its withheld events (ADR 0029)
    select pg_catalog.format('the tick %s of a blocked key of consumer %s on queue %s is not loaded yet',
                             b.bk_tick, c.co_name, q.queue_name)
      into why
      from pgque.blocked_key b
      join pgque.subscription s on s.sub_id = b.bk_sub
      join pgque.queue q on q.queue_id = s.sub_queue
      join pgque.consumer c on c.co_id = s.sub_consumer
     where not exists (select from pgque.tick t where t.tick_queue = s.sub_queue and t.tick_id = b.bk_tick)
     limit 1;
    if why is not null then
        return why;
    end if;
    select pg_catalog.format('the tick sequence of queue %s is behind its last tick %s (not restored yet)',
                             q.queue_name, t.tick_id)
      into why
      from pgque.queue q
      cross join lateral (select x.tick_id from pgque.tick x where x.tick_queue = q.queue_id
                           order by x.tick_id desc limit 1) t
     where coalesce(pg_catalog.pg_sequence_last_value(q.queue_tick_seq::regclass), 0) < t.tick_id
     limit 1;
    if why is not null then
        return why;
    end if;
    if coalesce(pg_catalog.pg_sequence_last_value('pgque.alert_alert_id_seq'::regclass), 0)
           < coalesce((select max(alert_id) from pgque.alert), 0)
       or coalesce(pg_catalog.pg_sequence_last_value('pgque.batch_id_seq'::regclass), 0)
           < greatest((select max(sub_batch) from pgque.subscription),
                                 (select max(cw_batch) from pgque.coop_window), 0) then
        return 'the alert or batch sequence is behind the restored rows (not restored yet)';
    end if;
    select pg_catalog.format('the last tick of queue %s was taken at transaction %s, ahead of this cluster''s %s: '
                             'the state was restored from a cluster further on in transaction ids',
                             q.queue_name, pg_catalog.pg_snapshot_xmax(t.tick_snapshot),
                             pg_catalog.pg_snapshot_xmax(pg_catalog.pg_current_snapshot()))
      into why
      from pgque.queue q
      cross join lateral (select x.tick_snapshot from pgque.tick x where x.tick_queue = q.queue_id
                           order by x.tick_id desc limit 1) t
     where pg_catalog.pg_snapshot_xmax(t.tick_snapshot) > pg_catalog.pg_snapshot_xmax(pg_catalog.pg_current_snapshot())
     limit 1;
    return why;
end $$;
