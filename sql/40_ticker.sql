-- Ticks: a tick records the queue's event-sequence position and a snapshot.
-- A batch is what a later tick's snapshot sees that an earlier one did not.

-- The snapshot for a tick.  A transaction does not list its own xid as in
-- progress in its snapshot, so events it inserted would count as committed
-- "before" a tick taken in the same transaction; add it, so that such events
-- fall into the next tick (SPEC §2: events committed with a tick are not in it).
-- The rule is C (src/tick.c, ADR 0123), the one the tick itself uses.
create function pgque._tick_snapshot()
returns pg_catalog.pg_snapshot language c volatile
as 'MODULE_PATHNAME', 'pgque_tick_snapshot_sql';

-- A sequence's last value (NULL before its first), or NULL when the name
-- names no sequence (C: src/queue_cache.c).
create function pgque._seq_last_value(i_seq text)
returns bigint language c volatile strict
as 'MODULE_PATHNAME', 'pgque_seq_last_value';

-- The queue's event-sequence position (0 before the first event, and
-- while its sequence is renamed, dropped or replaced: the statements that
-- read every queue's position at once, the ticker's probe, the watchdog's
-- conditions, metrics, failed for every queue of the database with it,
-- ADR 0105; the queue's producers are refused with 42P01 instead and its
-- events are still ticked by the probe of its event tables).
create function pgque._event_seq_pos(q pgque.queue)
returns bigint language sql volatile as $$
    select coalesce(pgque._seq_last_value(q.queue_event_seq), 0)
$$;

-- The caller wrote a tick of the queue: its receive_wait() callers are
-- woken when the transaction commits (src/wake.c, ADR 0102).
create function pgque._tick_wakes_at_commit(i_queue_id int4)
returns void language c volatile
as 'MODULE_PATHNAME', 'pgque_tick_wakes_at_commit';

-- Insert a tick unconditionally and wake listeners.  The caller holds the
-- queue row lock, so ticks of one queue are taken one at a time and their
-- snapshots grow with tick_id.  C (src/tick.c, ADR 0123), the tick the
-- ticker worker writes: the snapshot (_tick_snapshot's rule), 40001 when
-- this transaction's snapshot is older than the last tick's, the insert
-- (tick_id from the queue's tick sequence, tick_time now(), tick_event_seq
-- the larger of the event sequence's position and the last tick's), the
-- cooperative groups' windows (_coop_sync, ADR 0017), pg_notify on
-- 'pgque_' || queue_name with the tick id, and receive_wait's wake-up at
-- commit (ADR 0102).
create function pgque._tick(q pgque.queue)
returns bigint language c volatile strict
as 'MODULE_PATHNAME', 'pgque_tick_sql';

-- Are there committed events that the last tick does not cover?  The event
-- sequence alone cannot say: a producer may draw its id before a tick and
-- commit after it.  Probe the ev_txid index instead for transactions past
-- the tick's snapshot (or in progress at it) that have committed since.
create function pgque._has_unticked_events(q pgque.queue, last pgque.tick)
returns boolean language sql as $$
    -- through the window read (C, plan kept per source): the ticker asks
    -- this of every idle queue on every pass
    select exists (
        select 1 from pgque._window_rows(
            pgque._event_source(q, last.tick_snapshot, pg_catalog.pg_current_snapshot(), null, null),
            pg_catalog.pg_snapshot_xmax(last.tick_snapshot),
            pg_catalog.pg_snapshot_xmax(pg_catalog.pg_current_snapshot()),
            array(select pg_catalog.pg_snapshot_xip(last.tick_snapshot)),
            pg_catalog.pg_current_snapshot(), null, null, null, 1, null, null))
$$;

-- Of the queues i_queue_ids, those whose latest tick leaves committed events
-- uncovered: _has_unticked_events of many queues in one call, for the
-- watchdog's ticker_stalled while the ticker does not probe (ADR 0113).
-- The read is C (src/window.c): each queue's tables through their ev_txid
-- index, with no plan per queue (a window read per queue planned 1,000 of
-- them on every pass).
create function pgque._queues_unticked_read(i_queue_ids int4[], i_tables regclass[],
                                            i_los pg_catalog.pg_snapshot[], i_hi pg_catalog.pg_snapshot)
returns int4[] language c volatile strict as 'MODULE_PATHNAME', 'pgque_queues_unticked_read';

create function pgque._queues_unticked(i_queue_ids int4[])
returns int4[] language sql volatile as $$
    select coalesce(pgque._queues_unticked_read(
               pg_catalog.array_agg(q.queue_id order by q.queue_id),
               pg_catalog.array_agg(pg_catalog.to_regclass(q.queue_data_pfx) order by q.queue_id),
               pg_catalog.array_agg(lt.tick_snapshot order by q.queue_id),
               pg_catalog.pg_current_snapshot()), '{}')
      from pgque.queue q
      join lateral (select t.tick_snapshot from pgque.tick t where t.tick_queue = q.queue_id
                     order by t.tick_id desc limit 1) lt on true
     where q.queue_id = any (i_queue_ids)
$$;

-- Is a tick due after the queue's latest tick last (NULL: none yet): new
-- events (the sequence moved, or committed events are not yet covered), or
-- the idle period passed?  Reads only.  The one statement of the rule: SQL
-- that the C visit's statements inline (src/tick.c, ADR 0123), so it is
-- fully qualified (the worker's search_path is pg_catalog, pg_temp).
create function pgque._tick_due_after(q pgque.queue, last pgque.tick)
returns boolean language sql volatile as $$
    select last is null
        or pgque._event_seq_pos(q) operator(pg_catalog.>) last.tick_event_seq
        or (last.tick_time operator(pg_catalog.+) q.queue_ticker_idle_period)
           operator(pg_catalog.<=) pg_catalog.now()
        or pgque._has_unticked_events(q, last)
$$;

-- Is a tick due now?
create function pgque._tick_due(q pgque.queue)
returns boolean language sql volatile as $$
    select pgque._tick_due_after(q, (select t from pgque.tick t
                                       where t.tick_queue operator(pg_catalog.=) q.queue_id
                                       order by t.tick_id desc limit 1))
$$;

-- The rule for the queues this database's ticker serves, in one place for
-- C (ticker.c, through _ticker_queues) and SQL: neither paused nor ticked
-- by an external ticker.
create function pgque._ticked_by_worker(q pgque.queue)
returns boolean language sql immutable as $$
    select not q.queue_ticker_paused and not q.queue_external_ticker
$$;

-- The ticker worker's queue list (ticker.c caches it until pgque.queue
-- changes): the queues it serves, their idle period and latest tick.
create function pgque._ticker_queues(out queue_id int4, out queue_name text, out max_lag_ms int8,
                                     out idle_ms int8, out last_tick timestamptz)
returns setof record language sql stable as $$
    select q.queue_id, q.queue_name,
           (extract(epoch from q.queue_ticker_max_lag) * 1000)::int8,
           (extract(epoch from q.queue_ticker_idle_period) * 1000)::int8,
           (select t.tick_time from pgque.tick t where t.tick_queue = q.queue_id
             order by t.tick_id desc limit 1)
      from pgque.queue q
     where pgque._ticked_by_worker(q)
     order by q.queue_id
$$;

-- Queues whose event sequence moved past their latest tick: ADR 0031's
-- periodic safety probe of the ticker, in SQL, for a caller without the
-- worker.  The worker's probe reads the sequences by OID against the
-- positions its ticks are known to cover, and no tick row (src/ticker.c,
-- ADR 0103).  Events sent through pgque mark their queue at commit; this
-- finds rows written into the event tables directly.
create function pgque._ticks_seq_moved()
returns setof int4 language sql as $$
    select q.queue_id from pgque.queue q
      join lateral (select t.tick_event_seq from pgque.tick t where t.tick_queue = q.queue_id
                     order by t.tick_id desc limit 1) lt on true
     where pgque._ticked_by_worker(q)
       and case when pgque._queue_try_share(q.queue_id)
                then pgque._event_seq_pos(q) > lt.tick_event_seq else false end
     order by q.queue_id
$$;

-- Tick those of the given queues that are due, in one transaction: the
-- ticker worker's visit of one queue or many at once (idle ticks falling
-- due together, its first pass after a start, COMMIT PREPARED).  -> the
-- ids ticked, and minus the id of each queue whose row another transaction
-- holds locked: the worker does not wait for it (ADR 0040) and visits it
-- again at its next poll.  On an error the worker visits them one by one.
-- Its statements and those of the functions it calls run on generic plans
-- (ADR 0118): the loop's query over i_queue_ids was planned anew at every
-- visit (a custom plan each time, some 300k instructions of a tick's 1.1M).
-- Both answers are one expression, planned at the first visit that ticks:
-- the row found locked had a statement of its own, planned only the first
-- time a row was, at a moment nobody chose (ADR 0136).
create function pgque._tick_many(i_queue_ids int4[])
returns setof int4 language plpgsql
set plan_cache_mode = force_generic_plan as $$
declare
    q  pgque.queue;
    t  bigint;
begin
    for q in select * from pgque.queue x
              where x.queue_id = any(i_queue_ids) and pgque._ticked_by_worker(x)
              order by x.queue_id loop
        t := pgque._tick_visit(q, false);
        if t is not null then
            return next case when t = 0 then -q.queue_id else q.queue_id end;
        end if;
    end loop;
end $$;

-- Tick a queue if it is due.  The check runs first without a lock, so a
-- queue with nothing to do costs the ticker no write; then again under the
-- queue row lock, which serialises tickers of one queue.  That lock is FOR
-- NO KEY UPDATE: the key-share locks of foreign keys (a subscribe, a
-- send_at or a dead letter in a transaction left open) do not hold it.
-- Without i_wait a row locked by another transaction (an open
-- set_queue_config, a rotation step) is not waited for.  A queue being
-- dropped is skipped (its DDL lock, ADR 0020); an unlogged queue that lost
-- its events in a crash is reset before any tick after the crash
-- (_unlogged_gate, ADR 0068).  -> the tick id; NULL when not due, not
-- served by the ticker (_ticked_by_worker) or being dropped; 0 when the
-- row was locked (or the reset would wait for it) and i_wait false.  C
-- (src/tick.c, ADR 0123): the ticker worker's visit of a queue, the same
-- code.
create function pgque._tick_visit(q pgque.queue, i_wait boolean)
returns bigint language c volatile strict
as 'MODULE_PATHNAME', 'pgque_tick_visit_sql';

create function pgque._tick_if_due(q pgque.queue)
returns bigint language sql as $$
    select pgque._tick_visit(q, true)
$$;

-- The queue row of a queue this database's ticker may tick: paused and
-- externally ticked queues are refused.
create function pgque._ticked_here(i_queue_name text)
returns pgque.queue language plpgsql as $$
declare
    q pgque.queue;
begin
    perform pgque._check_name('queue', i_queue_name, @PGQUE_QUEUE_NAME_MAX@);
    if not exists (select from pgque.queue x where x.queue_name = i_queue_name) then
        -- PgQ's ticker words ("no such queue"), which PgQue's scripts match,
        -- with the text PgQue's clients classify (ADR 0016)
        raise exception 'no such queue (queue not found: %)', i_queue_name
            using errcode = 'undefined_object';
    end if;
    q := pgque._queue(i_queue_name);
    if q.queue_ticker_paused then
        raise exception 'queue "%" is paused', i_queue_name
            using errcode = 'object_not_in_prerequisite_state',
                  hint = 'pgque.set_queue_config(queue, ''ticker_paused'', ''false'') resumes it.';
    end if;
    if q.queue_external_ticker then
        raise exception 'queue "%" is ticked by an external ticker', i_queue_name
            using errcode = 'object_not_in_prerequisite_state';
    end if;
    return q;
end $$;

-- ticker(queue_name) -> the new tick id, or NULL when no tick was due.
create function pgque.ticker(i_queue_name text)
returns bigint language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    q pgque.queue;
begin
    q := pgque._ticked_here(i_queue_name);
    return pgque._tick_if_due(q);
end $$;

-- ticker() -> how many queues ticked.  Paused and externally ticked queues
-- are skipped; queues are visited in id order, and a due one is locked only
-- while it is ticked.
create function pgque.ticker()
returns bigint language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    q      pgque.queue;
    n      bigint := 0;
begin
    for q in select * from pgque.queue x where pgque._ticked_by_worker(x) order by queue_id loop
        if pgque._tick_if_due(q) is not null then
            n := n + 1;
        end if;
    end loop;
    return n;
end $$;

-- External ticker (PgQ): push a tick with a given id, time and event position.
create function pgque.ticker(i_queue_name text, i_tick_id bigint, i_orig_timestamp timestamptz, i_event_seq bigint)
returns bigint language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    q     pgque.queue;
    last  pgque.tick;
begin
    q := pgque._queue(i_queue_name);
    perform pgque._check_not_null('tick_id', i_tick_id);
    perform pgque._check_timestamp('timestamp', i_orig_timestamp);
    perform pgque._check_not_null('event_seq', i_event_seq);
    perform pgque._unlogged_gate(q);
    select * into q from pgque.queue where queue_id = q.queue_id for update;
    if not q.queue_external_ticker then
        raise exception 'queue "%" is not configured for an external ticker', i_queue_name
            using errcode = 'object_not_in_prerequisite_state';
    end if;
    select * into last from pgque.tick where tick_queue = q.queue_id order by tick_id desc limit 1;
    if i_tick_id <= last.tick_id then
        raise exception 'tick id % is not after the last tick %', i_tick_id, last.tick_id
            using errcode = 'invalid_parameter_value';
    end if;
    if i_event_seq < last.tick_event_seq then
        raise exception 'event_seq % is below the last tick''s %', i_event_seq, last.tick_event_seq
            using errcode = 'invalid_parameter_value';
    end if;
    insert into pgque.tick (tick_queue, tick_id, tick_time, tick_snapshot, tick_event_seq)
    values (q.queue_id, i_tick_id, i_orig_timestamp, pgque._tick_snapshot(), i_event_seq);
    perform pg_catalog.setval(q.queue_tick_seq::regclass, i_tick_id);
    perform pgque._coop_sync(s.sub_id) from pgque.subscription s
      where s.sub_queue = q.queue_id and s.sub_role = 'coop_main';
    perform pg_catalog.pg_notify('pgque_' || q.queue_name, i_tick_id::text);
    perform pgque._tick_wakes_at_commit(q.queue_id);
    return i_tick_id;
end $$;

-- force_tick(queue_name) -> the last tick id.  It does not tick: it moves the
-- event sequence by ticker_max_count * 2 + 1000, as PgQ does, so that the
-- next ticker() call ticks (and a caller reading the sequence sees PgQ's
-- jump).  The values are drawn with nextval, not set with setval: a
-- producer drawing ids at the same time can never be handed one twice,
-- which setval(nextval + n) allows if it draws more than n in between.
-- At most 100,000 values (a few tenths of a second): ticker_max_count may be as
-- large as int4 allows, and PgQ's amount would then take an hour.
create function pgque.force_tick(i_queue_name text)
returns bigint language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    q pgque.queue;
begin
    q := pgque._ticked_here(i_queue_name);
    perform pg_catalog.nextval(q.queue_event_seq::regclass)
       from pg_catalog.generate_series(1, least(q.queue_ticker_max_count::int8 * 2 + 1000, 100000));
    return (select max(tick_id) from pgque.tick where tick_queue = q.queue_id);
end $$;

create function pgque.force_next_tick(i_queue_name text)
returns bigint language sql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
    select pgque.force_tick(i_queue_name)
$$;
