-- Unlogged queues (ADR 0068, issue #31 item 4): create_queue(q,
-- '{"unlogged": true}') or set_queue_config(q, 'unlogged', 'true') makes the
-- queue's event tables UNLOGGED: no WAL for the events, so sends and drains
-- cost less, and PostgreSQL empties the tables at crash recovery (and a
-- standby never has them).  Everything else of the queue stays logged: its
-- row, ticks, cursors, retries, dead letters, idempotency claims and its
-- sequences, so event and tick ids never go back.
--
-- The crash is seen through a seal: one row per unlogged queue in the
-- UNLOGGED table below.  A clean restart keeps it; crash recovery, a base
-- backup and a promoted standby have it empty, exactly when the event
-- tables are.  A queue marked unlogged without its seal lost its events:
-- the first of the ticker and maint() to see it resets the queue
-- (_unlogged_gate) before anything ticks it, in a short transaction of its
-- own; a consumer opening a batch, or reading one, before that gets 55000
-- (_unlogged_ready, _unlogged_whole), so no consumer ever takes an emptied
-- window for delivered events, and none holds the queue hostage.

-- Not in pg_extension_config_dump: a dump does not carry the seal, so a
-- restored unlogged queue is reset once, as after a crash (the order in
-- which a restore would load it cannot be tied to the state seal, ADR 0022:
-- a logged table may not reference an unlogged one).
create unlogged table pgque.unlogged_seal (
    queue_id   int4 primary key references pgque.queue (queue_id) on delete cascade,
    sealed_at  timestamptz not null default now()
);

-- The clear error for an unlogged queue's events on a standby (PostgreSQL
-- refuses to read unlogged relations during recovery).
create function pgque._unlogged_refuse_standby(q pgque.queue)
returns void language plpgsql stable as $$
begin
    if q.queue_unlogged and pg_catalog.pg_is_in_recovery() then
        raise exception 'queue "%" is unlogged: its events are not on a standby', q.queue_name
            using errcode = 'feature_not_supported',
                  detail = 'The event tables of an unlogged queue are not replicated; a standby has them empty.',
                  hint = 'Read the queue on the primary.  After a promotion the queue starts empty and an unlogged_reset alert says what was lost.';
    end if;
end $$;

-- Whether the events of an unlogged queue are still there (its seal is).
-- Reads only: the backstop of every batch read (_batch_source) and the
-- consumers' gate (_unlogged_ready), which raise while a crash's reset is
-- still to come.
create function pgque._unlogged_whole(q pgque.queue)
returns boolean language plpgsql stable as $$
begin
    perform pgque._unlogged_refuse_standby(q);
    if not exists (select from pgque.unlogged_seal u where u.queue_id = q.queue_id) then
        raise exception 'the events of unlogged queue "%" were lost in a crash', q.queue_name
            using errcode = 'object_not_in_prerequisite_state',
                  detail = 'The ticker''s next pass (or maint()) resets the queue: cursors move to its latest tick.',
                  hint = 'Retry after the next tick (without the workers: run pgque.ticker() or pgque.maint()); the unlogged_reset alert says what was dropped.';
    end if;
    return true;
end $$;

-- The gate of a consumer opening a batch (receive, next_batch, the slot
-- receive, a cooperative member): an unlogged queue without its seal is
-- refused with 55000 until the ticker or maint() reset it (ADR 0089).  A
-- consumer's call never resets: the reset locks the queue row and every
-- subscription of the queue until its transaction ends, and a consumer
-- that did it and then idled in its transaction made the others wait and
-- the ticker skip the queue.  Reads only.
create function pgque._unlogged_ready(q pgque.queue)
returns void language plpgsql stable as $$
begin
    if q.queue_unlogged then
        perform pgque._unlogged_whole(q);
    end if;
end $$;

create function pgque._unlogged_ready(i_queue_id int4)
returns void language sql stable as $$
    select pgque._unlogged_whole(q) from pgque.queue q
     where q.queue_id = i_queue_id and q.queue_unlogged
$$;

-- The gate of every path that ticks a queue (the ticker, the external
-- ticker, set_queue_config): an unlogged queue without its seal is reset
-- first.  A logged queue costs nothing; an
-- unlogged one an index probe.  Without i_wait (the workers, ADR 0040) a
-- queue row another transaction holds is not waited for.  -> false only
-- when the queue still needs its reset (not waited for, or a restore is
-- loading the state): the caller does not tick it now.
create function pgque._unlogged_gate(q pgque.queue, i_wait boolean default true)
returns boolean language plpgsql as $$
begin
    if not q.queue_unlogged then
        return true;
    end if;
    perform pgque._unlogged_refuse_standby(q);
    if exists (select from pgque.unlogged_seal u where u.queue_id = q.queue_id) then
        return true;
    end if;
    return pgque._unlogged_reset(q, i_wait);
end $$;

-- The reset of an unlogged queue whose events a crash emptied: the empty,
-- consistent state.  The ticks stay (logged; their ids and the event ids
-- never go back); every consumer's position moves to the latest tick, the
-- one recorded before the crash (the gate runs before any tick after it),
-- so the events sent after the crash, which are not visible in that
-- tick's snapshot, are all in the next window:
--   plain cursors and open batches; cooperative groups (cursor, high-water
--   mark; their windows go, the members stay); partition slots (every
--   lease epoch's row, leases and epochs untouched); a pausing slot's
--   blocked keys stay only for a head still waiting in retry_queue
--   (logged), the rest go with their withheld events;
--   the idempotency claims of lost events go, so a producer may send again;
--   the replay marks (ADR 0067): no window before this transaction is whole.
-- Retries, delayed events and dead letters are logged and stay.  A resize
-- in progress drains at once (every cursor is past its boundary).  Under
-- the queue row lock, the seal checked again; never while a restore loads
-- the state (ADR 0022); without i_wait, not when another transaction holds
-- the queue row (a worker's call: it comes again).  -> whether the queue is
-- whole now (reset here, or by someone else meanwhile).
create function pgque._unlogged_reset(q pgque.queue, i_wait boolean default true)
returns boolean language plpgsql as $$
declare
    last     pgque.tick;
    oldest   pgque.tick;
    present  int8;
    dropped  int8;
    kept     int4;
    details  jsonb;
    floor_xid xid8;
begin
    if pgque._state_held() is not null or not pgque._queue_try_share(q.queue_id) then
        return false;
    end if;
    if i_wait then
        select * into q from pgque.queue where queue_id = q.queue_id for no key update;
    else
        select * into q from pgque.queue where queue_id = q.queue_id for no key update skip locked;
    end if;
    if not found then
        return false;
    end if;
    if not q.queue_unlogged or exists (select from pgque.unlogged_seal u where u.queue_id = q.queue_id) then
        return true;
    end if;
    -- a worker never waits for a consumer (ADR 0040, 0089): a subscription,
    -- slot batch, window or blocked key of the queue that another
    -- transaction holds (a consumer's finish_batch left open) makes it
    -- come again at its next pass, instead of stalling the ticker
    if not i_wait then
        begin
            perform from pgque.subscription s where s.sub_queue = q.queue_id for update nowait;
            perform from pgque.slot_batch b join pgque.subscription s on s.sub_id = b.sb_sub
             where s.sub_queue = q.queue_id for update of b nowait;
            perform from pgque.coop_window w join pgque.subscription s on s.sub_id = w.cw_sub
             where s.sub_queue = q.queue_id for update of w nowait;
            perform from pgque.blocked_key k join pgque.subscription s on s.sub_id = k.bk_sub
             where s.sub_queue = q.queue_id for update of k nowait;
        exception when lock_not_available then
            return false;
        end;
    end if;
    select * into last from pgque.tick where tick_queue = q.queue_id order by tick_id desc limit 1;
    -- the oldest cursor: what was still to be read from there was dropped
    select t.* into oldest from pgque.subscription s
      join pgque.tick t on t.tick_queue = s.sub_queue and t.tick_id = s.sub_last_tick
     where s.sub_queue = q.queue_id
     order by t.tick_id limit 1;
    if oldest.tick_id is null then
        oldest := last;
    end if;
    -- the events there now were sent after the crash
    execute pg_catalog.format('select count(*) from pgque.%I', pgque._event_table(q.queue_id, null, null)) into present;
    -- at most: the sequence runs ahead of what committed (rollbacks, and up
    -- to 32 values a crash skips)
    dropped := greatest(pgque._event_seq_pos(q) - oldest.tick_event_seq - present, 0);

    update pgque.subscription
       set sub_last_tick = last.tick_id, sub_batch = null, sub_next_tick = null,
           sub_batch_pos = null, sub_batch_last = null,
           sub_coop_hw = case when sub_role = 'coop_main' then last.tick_id else sub_coop_hw end
     where sub_queue = q.queue_id;
    delete from pgque.coop_window w using pgque.subscription s
     where s.sub_id = w.cw_sub and s.sub_queue = q.queue_id;
    update pgque.slot_batch b
       set sb_last_tick = last.tick_id, sb_batch = null, sb_next_tick = null, sb_pos = null, sb_last = null
      from pgque.subscription s
     where s.sub_id = b.sb_sub and s.sub_queue = q.queue_id;
    delete from pgque.blocked_key b using pgque.subscription s
     where s.sub_id = b.bk_sub and s.sub_queue = q.queue_id
       and not exists (select from pgque.retry_queue r where r.ev_owner = b.bk_sub and r.ev_id = b.bk_head);
    update pgque.blocked_key b
       set bk_tick = last.tick_id, bk_done_batch = null, bk_draining = false
      from pgque.subscription s
     where s.sub_id = b.bk_sub and s.sub_queue = q.queue_id;
    get diagnostics kept = row_count;
    execute pg_catalog.format(
        'delete from pgque.idem i where i.queue_id = $1
            and not exists (select from pgque.%I e where e.ev_id = i.event_id)', pgque._event_table(q.queue_id, null, null))
      using q.queue_id;

    -- the replay floor (ADR 0100): the windows up to the last tick lost
    -- their events, the one after it holds every event sent since the
    -- crash (the consumers resume there).  So a seek's 'earliest' is that
    -- tick: the floor is the newest xmin of the ticks before it, which no
    -- whole window starts at.  A tick before it with the same xmin (a
    -- transaction open across both) leaves no xid between them: the floor
    -- is then this transaction, as for a rotation, and 'earliest' is the
    -- first tick after the reset (details.replay_from_last_tick false).
    select pg_catalog.pg_snapshot_xmin(t.tick_snapshot) into floor_xid
      from pgque.tick t where t.tick_queue = q.queue_id and t.tick_id < last.tick_id
     order by 1 desc limit 1;
    if floor_xid is not null
       and floor_xid >= pg_catalog.pg_snapshot_xmin(last.tick_snapshot) then
        floor_xid := pg_catalog.pg_current_xact_id();
    end if;
    details := pg_catalog.jsonb_build_object(
        'reset_at', pg_catalog.now(), 'dropped_at_most', dropped, 'since', oldest.tick_time,
        'last_tick', last.tick_id, 'sent_after_crash', present, 'blocked_keys_kept', kept,
        'replay_from_last_tick', floor_xid is distinct from pg_catalog.pg_current_xact_id()
                                 and (q.queue_truncated_xid is null
                                      or pg_catalog.pg_snapshot_xmin(last.tick_snapshot) > q.queue_truncated_xid));
    update pgque.queue
       set queue_truncated_xid = greatest(queue_truncated_xid, floor_xid),
           queue_unlogged_reset = details
     where queue_id = q.queue_id;
    insert into pgque.unlogged_seal (queue_id) values (q.queue_id);
    -- the alert now, whether a watchdog runs or not; it clears
    -- pgque_bgw.unlogged_reset_alert_for later (_unlogged_conditions)
    perform pgque._alert_open(('unlogged_reset', q.queue_name, q.queue_name, null, null, details)::pgque.alert_condition);
    return true;
end $$;

-- Whether an unlogged queue lost its seal (a crash, a restore) and waits
-- for its reset: the queues _unlogged_reset_all resets, and the has-work
-- of its step in maint_operations() (ADR 0100).
create function pgque._unlogged_lost(q pgque.queue)
returns boolean language sql stable as $$
    select q.queue_unlogged and not pg_catalog.pg_is_in_recovery()
       and not exists (select from pgque.unlogged_seal u where u.queue_id = q.queue_id)
$$;

-- Every unlogged queue whose seal is gone, reset: the first maintenance
-- step, for the queues the ticker does not visit (paused, external ticker)
-- and for pg_cron and manual set-ups.  A queue row held by another
-- transaction is not waited for (the next pass comes).  -> queues reset.
create function pgque._unlogged_reset_all()
returns int4 language sql as $$
    select count(*) filter (where pgque._unlogged_reset(q, false))::int4
      from pgque.queue q
     where pgque._unlogged_lost(q)
$$;

-- set_queue_config(q, 'unlogged', v): every event table of the queue
-- (parent, children, buckets) SET UNLOGGED or SET LOGGED, under the queue's
-- DDL lock taken exclusively (ADR 0020: the workers skip the queue, and
-- this waits for the ones at work).  PostgreSQL rewrites each table: SET
-- LOGGED writes its events to WAL; both hold ACCESS EXCLUSIVE on the
-- tables meanwhile (producers and consumers wait).  A queue that lost its
-- events in a crash is reset first.
create function pgque._unlogged_set(q pgque.queue, i_unlogged boolean)
returns void language plpgsql as $$
begin
    perform pgque._check_not_null('unlogged', i_unlogged);
    if pg_catalog.pg_is_in_recovery() then
        raise exception 'cannot change queue "%" on a standby', q.queue_name
            using errcode = 'read_only_sql_transaction';
    end if;
    -- the DDL lock first, as drop_queue (ADR 0020), then the reset
    perform pgque._queue_ddl_lock(q.queue_id);
    perform pgque._unlogged_gate(q);
    select * into q from pgque.queue where queue_id = q.queue_id for update;
    update pgque.queue set queue_unlogged = i_unlogged where queue_id = q.queue_id;
    q.queue_unlogged := i_unlogged;
    perform pgque._event_tables_persistence(q);
    if i_unlogged then
        insert into pgque.unlogged_seal (queue_id) values (q.queue_id) on conflict do nothing;
    else
        delete from pgque.unlogged_seal where queue_id = q.queue_id;
    end if;
end $$;

-- Each event table of the queue (parent, children, buckets) made as
-- persistent as the queue says (queue_unlogged): the one source of
-- set_queue_config and of the buckets made later (_create_buckets).  The
-- queue's sequences stay logged: ALTER TABLE SET UNLOGGED takes the
-- sequences a table owns along (PostgreSQL 15+), and the event and tick ids
-- must never go back after a crash (the workers would also hold: ticks
-- ahead of their sequence look like a restore in progress, ADR 0022).
create function pgque._event_tables_persistence(q pgque.queue)
returns void language plpgsql as $$
declare
    r regclass;
begin
    for r in select t from pgque._queue_event_tables(q.queue_id) t
               join pg_catalog.pg_class c on c.oid = t
              where c.relpersistence <> case when q.queue_unlogged then 'u' else 'p' end
              order by c.relname loop
        execute pg_catalog.format('alter table %s set %s', r,
                                  case when q.queue_unlogged then 'unlogged' else 'logged' end);
    end loop;
    for r in select c.oid::regclass from pg_catalog.pg_class c
              where c.relnamespace = 'pgque'::pg_catalog.regnamespace and c.relkind = 'S'
                and c.relname in (pgque._event_seq(q.queue_id, 'id'), pgque._event_seq(q.queue_id, 'tick'))
                and c.relpersistence <> 'p'
              order by c.relname loop
        execute pg_catalog.format('alter sequence %s set logged', r);
    end loop;
end $$;
