-- Batches (PgQ primitives): a batch is the window between the subscription's
-- cursor tick (sub_last_tick) and a later tick (sub_next_tick).  Its events
-- are those whose inserting transaction the later snapshot sees and the
-- earlier one does not, so batches need no row locks on events.

create type pgque.batch_info as (
    batch_id             bigint,
    cur_tick_id          bigint,
    prev_tick_id         bigint,
    cur_tick_time        timestamptz,
    prev_tick_time       timestamptz,
    cur_tick_event_seq   bigint,
    prev_tick_event_seq  bigint
);

-- The partition slot of a key for n slots (SPEC §3): a NULL key is slot 0.
-- In C (src/rules.c), the one definition the producer's bucket routing
-- also uses: hashtextextended(key, 0) mod n, made non-negative.
create function pgque._slot_of(i_key text, i_n int4)
returns int4 language c immutable parallel safe
as 'MODULE_PATHNAME', 'pgque_slot_of_sql';

-- The tick that ends the next batch after prev (NULL fields: none yet):
-- the first tick past min_count events or min_interval, else the last one
-- within span_events (at least the next tick), and none younger than
-- min_lag.
create function pgque._pick_tick(i_queue int4, prev pgque.tick, i_min_lag interval, i_min_count int4,
                                 i_min_interval interval, i_span_events int4)
returns pgque.tick language plpgsql as $$
declare
    nxt   pgque.tick;
begin
    if i_min_count is not null or i_min_interval is not null then
        select * into nxt from pgque.tick
         where tick_queue = i_queue and tick_id > prev.tick_id
           and (tick_event_seq >= prev.tick_event_seq + i_min_count
                or tick_time >= prev.tick_time + i_min_interval)
         order by tick_id limit 1;
    elsif i_span_events is not null then
        select t.* into nxt
          from (select * from pgque.tick
                 where tick_queue = i_queue and tick_id > prev.tick_id
                 order by tick_id limit 1000) t
         where t.tick_event_seq <= prev.tick_event_seq + i_span_events
         order by t.tick_id desc limit 1;
    end if;
    if nxt.tick_id is null and i_min_count is null and i_min_interval is null then
        select * into nxt from pgque.tick
         where tick_queue = i_queue and tick_id > prev.tick_id
         order by tick_id limit 1;
    end if;

    if nxt.tick_id is null or (i_min_lag is not null and nxt.tick_time > now() - i_min_lag) then
        return null;
    end if;
    return nxt;
end $$;

-- Open a plain subscription's next batch (ADR 0133): the tick that ends it
-- (_pick_tick's rule after prev, span_events only for a consumer that opted
-- in to merged windows) and a new batch id on its row, which the caller
-- locked and found with no open batch.  batch_id NULL (nxt NULL): no tick
-- yet, nothing opened.  The one open of _next_batch and of the plain
-- receive's _plain_receive_open (sql/60_receive.sql).
create function pgque._open_batch(s pgque.subscription, prev pgque.tick, i_min_lag interval,
                                  i_min_count int4, i_min_interval interval, i_span_events int4,
                                  out batch_id bigint, out nxt pgque.tick)
language plpgsql as $$
begin
    nxt := pgque._pick_tick(s.sub_queue, prev, i_min_lag, i_min_count, i_min_interval,
                            case when s.sub_merge_windows then i_span_events end);
    if nxt.tick_id is null then
        nxt := null;
        return;
    end if;
    update pgque.subscription x
       set sub_batch = pg_catalog.nextval('pgque.batch_id_seq'), sub_next_tick = nxt.tick_id,
           sub_batch_pos = null, sub_batch_last = null, sub_active = pg_catalog.now()
     where x.sub_id = s.sub_id
    returning x.sub_batch into batch_id;
end $$;

-- Open a batch for a subscription, or return the one already open.  The row
-- lock on the subscription is the receive lock: concurrent callers queue and
-- get the same batch.  A batch is one tick window, as in PgQ and PgQue
-- (ADR 0057); i_span_events (receive's max_return) lets it cover several
-- waiting windows up to about that many events only for a consumer that
-- opted in (sub_merge_windows, pgque.set_consumer_config).
create function pgque._next_batch(i_queue_name text, i_consumer_name text,
                                  i_min_lag interval, i_min_count int4, i_min_interval interval,
                                  i_span_events int4)
returns pgque.batch_info language plpgsql as $$
declare
    s     pgque.subscription;
    prev  pgque.tick;
    nxt   pgque.tick;
    res   pgque.batch_info;
    o     record;
begin
    s := pgque._subscription(i_queue_name, i_consumer_name);
    -- an unlogged queue that lost its events and is not reset yet is
    -- refused (ADR 0068, 0089), to a caller authorized first
    if exists (select from pgque.queue q where q.queue_id = s.sub_queue and q.queue_unlogged) then
        perform pgque._authorize(s.sub_owner, s.sub_users, s.sub_queue, i_consumer_name);
        perform pgque._unlogged_ready(s.sub_queue);
    end if;
    select * into s from pgque.subscription where sub_id = s.sub_id for update;
    perform pgque._authorize(s.sub_owner, s.sub_users, s.sub_queue, i_consumer_name);
    -- a cooperative group's windows are its members': a plain batch on the
    -- group would skip them.  A group without members (our unregister
    -- turns the last member's group back into a plain consumer, so only a
    -- hand-edited row is one) gets no batch, as in PgQue: nothing is
    -- opened, the group's cursor does not move.
    if s.sub_role = 'coop_main'
       and not exists (select from pgque.coop_member m where m.cm_sub = s.sub_id) then
        select * into prev from pgque.tick where tick_queue = s.sub_queue and tick_id = s.sub_last_tick;
        return (null, null, prev.tick_id, null, prev.tick_time, null, prev.tick_event_seq)::pgque.batch_info;
    end if;
    if s.sub_role = 'coop_main' then
        raise exception 'consumer % on queue % is a cooperative main consumer; use cooperative receive/next_batch with a subconsumer',
              i_consumer_name, i_queue_name
            using errcode = 'wrong_object_type',
                  hint = 'Call pgque.receive_coop(queue, consumer, subconsumer) or next_batch(queue, consumer, subconsumer).';
    end if;
    select * into prev from pgque.tick where tick_queue = s.sub_queue and tick_id = s.sub_last_tick;

    if s.sub_batch is not null then
        select * into nxt from pgque.tick where tick_queue = s.sub_queue and tick_id = s.sub_next_tick;
        return (s.sub_batch, nxt.tick_id, prev.tick_id, nxt.tick_time, prev.tick_time,
                nxt.tick_event_seq, prev.tick_event_seq)::pgque.batch_info;
    end if;

    o := pgque._open_batch(s, prev, i_min_lag, i_min_count, i_min_interval, i_span_events);
    nxt := o.nxt;
    res.batch_id := o.batch_id;
    if nxt.tick_id is null then
        return (null, null, prev.tick_id, null, prev.tick_time, null, prev.tick_event_seq)::pgque.batch_info;
    end if;
    return (res.batch_id, nxt.tick_id, prev.tick_id, nxt.tick_time, prev.tick_time,
            nxt.tick_event_seq, prev.tick_event_seq)::pgque.batch_info;
end $$;

-- Partition slots (ADR 0023): the batch state of a slot lives in the row of
-- the owner's lease epoch (pgque.slot_batch), so that an owner's receive and
-- ack lock only that row, never the subscription row, and a takeover never
-- waits for a fenced owner's open transaction.

-- The row of lease epoch i_epoch, locked: the receive lock of one owner
-- (its concurrent calls queue on it and get the same batch; no other
-- owner ever waits on it).  A new epoch starts where the earlier epochs
-- got (ADR 0039): their rows are read as committed, without a lock, so a
-- row that a frozen owner holds is read, never waited for, and what that
-- owner has not committed (not acked) is not taken for acked.  The row
-- furthest on (the greatest sb_last_tick, then the newest epoch) is
-- adopted when its transaction has ended (same open batch, same batch id);
-- when a frozen owner still holds it, a row of this epoch is made at the
-- same place: the same window and the acked position inside it (sb_pos),
-- under a new batch id, so the events acked in the window are not handed
-- out again and no key goes back.  A row behind the slot's cursor drops
-- its open batch (another epoch acked past it).
create function pgque._slot_batch_row(i_sub pgque.subscription, i_epoch bigint)
returns pgque.slot_batch language plpgsql as $$
declare
    r     pgque.slot_batch;
    o     pgque.slot_batch;
    pos   bigint;
    cur   bigint;
    nm    text;
begin
    select * into r from pgque.slot_batch where sb_sub = i_sub.sub_id and sb_epoch = i_epoch for update;
    if not found then
        -- A seek of the consumer in progress holds the subscription FOR
        -- UPDATE and is about to delete the epochs' rows and move
        -- sub_last_tick: wait for it here (KEY SHARE, as this epoch's row
        -- would take anyway), then read the subscription and the rows as
        -- it left them.  Read before the wait, they were the old position,
        -- and a takeover during a seek started there (isolation
        -- slot_seek_takeover, ADR 0070).
        -- the slot's name first, for the error below: a slot removed
        -- meanwhile takes its consumer row along
        select c.co_name into nm from pgque.consumer c where c.co_id = i_sub.sub_consumer;
        perform from pgque.subscription x where x.sub_id = i_sub.sub_id for key share;
        select * into i_sub from pgque.subscription x where x.sub_id = i_sub.sub_id;
        select * into o from pgque.slot_batch b
         where b.sb_sub = i_sub.sub_id and b.sb_epoch < i_epoch
         order by b.sb_last_tick desc, b.sb_epoch desc limit 1;
        if o.sb_batch is not null then
            -- an earlier epoch that committed a part of the same window
            -- later (a fenced owner's late commit of an ack it made while
            -- its lease was live) may have got further inside it
            select pg_catalog.max(b.sb_pos) into pos from pgque.slot_batch b
             where b.sb_sub = i_sub.sub_id and b.sb_epoch < i_epoch
               and b.sb_last_tick = o.sb_last_tick and b.sb_next_tick = o.sb_next_tick;
        end if;
        if o.sb_epoch is not null and pos is not distinct from o.sb_pos then
            update pgque.slot_batch b set sb_epoch = i_epoch
             where (b.sb_sub, b.sb_epoch) = (select x.sb_sub, x.sb_epoch from pgque.slot_batch x
                                              where x.sb_sub = o.sb_sub and x.sb_epoch = o.sb_epoch
                                                for update skip locked)
            returning * into r;
        end if;
        if r.sb_sub is null then
            begin
                -- gone while this call waited for it above (the re-read
                -- found no row): what the insert's foreign key says below
                if i_sub.sub_id is null then
                    raise foreign_key_violation;
                end if;
                cur := pgque._slot_cursor(i_sub);
                if o.sb_last_tick is distinct from cur then
                    pos := null;
                end if;
                insert into pgque.slot_batch (sb_sub, sb_epoch, sb_last_tick, sb_batch, sb_next_tick, sb_pos)
                values (i_sub.sub_id, i_epoch, cur,
                        case when pos is not null then pg_catalog.nextval('pgque.batch_id_seq') end,
                        case when pos is not null then o.sb_next_tick end, pos)
                on conflict do nothing;
            exception when foreign_key_violation then
                -- the slot's subscription went since this statement's
                -- snapshot: a resize switched layouts (ADR 0030), or
                -- unsubscribe_slot
                raise exception 'slot subscription "%" is gone', nm
                    using errcode = 'object_not_in_prerequisite_state',
                          detail = 'Its consumer was resized (pgque.resize_partitioned) or the slot unsubscribed.',
                          hint = 'Read n again (pgque.partition_n) and claim again.';
            end;
            -- a concurrent call of this epoch made it: a new statement sees it
            select * into r from pgque.slot_batch where sb_sub = i_sub.sub_id and sb_epoch = i_epoch for update;
            -- at another epoch's place under a new batch id: the done marks
            -- of the earlier epochs' batches follow it (ADR 0141)
            if pos is not null and r.sb_batch is not null then
                perform pgque._pause_follow(i_sub.sub_id, i_epoch, r.sb_batch);
            end if;
        end if;
    end if;
    cur := pgque._slot_cursor(i_sub);
    if r.sb_last_tick < cur then
        update pgque.slot_batch
           set sb_last_tick = cur, sb_batch = null, sb_next_tick = null, sb_pos = null, sb_last = null
         where sb_sub = r.sb_sub and sb_epoch = r.sb_epoch
        returning * into r;
    end if;
    return r;
end $$;

-- The open batch of slot subscription i_sub under lease epoch i_epoch, or
-- the next one (batch_id NULL: none), with where its events are: what
-- _batch_source reads for a batch id, so that receive_partitioned reads its
-- part without that statement (issue #30).  The source (the relations,
-- most of the cost) only when i_want_source: a part the caller's part
-- cache holds needs the bounds alone (ADR 0082).  The caller has checked the
-- lease and the right to the consumer (_slot_enter).  A slot sees about 1/n
-- of a window: a batch spans windows for i_max_return x n events of the
-- stream.
create function pgque._slot_window(i_sub pgque.subscription, i_epoch bigint, i_n int4, i_slot int4,
                                   i_max_return int4, i_want_source boolean,
                                   out batch_id bigint, out source text, out lo_xmax xid8,
                                   out hi_xmax xid8, out lo_xip xid8[], out hi pg_catalog.pg_snapshot,
                                   out pos bigint)
language plpgsql as $$
declare
    r     pgque.slot_batch;
    prev  pgque.tick;
    nxt   pgque.tick;
    cap   bigint;
    q     pgque.queue;
begin
    r := pgque._slot_batch_row(i_sub, i_epoch);
    select * into prev from pgque.tick where tick_queue = i_sub.sub_queue and tick_id = r.sb_last_tick;
    if r.sb_batch is null then
        nxt := pgque._pick_tick(i_sub.sub_queue, prev, null, null, null,
                                (least(i_max_return::int8 * i_n, 1000000000))::int4);
        -- an old-layout slot of a resize ends its windows at the boundary
        -- (ADR 0030); read after the pick, so a tick past it implies the
        -- resize is seen
        cap := pgque._resize_cap(i_sub.sub_id);
        if cap is not null and prev.tick_id >= cap then
            nxt := null;
        elsif cap is not null and nxt.tick_id > cap then
            select * into nxt from pgque.tick where tick_queue = i_sub.sub_queue and tick_id = cap;
        end if;
        if nxt.tick_id is null then
            return;
        end if;
        update pgque.slot_batch
           set sb_batch = pg_catalog.nextval('pgque.batch_id_seq'), sb_next_tick = nxt.tick_id,
               sb_pos = null, sb_last = null
         where sb_sub = r.sb_sub and sb_epoch = r.sb_epoch
        returning * into r;
    else
        select * into nxt from pgque.tick where tick_queue = i_sub.sub_queue and tick_id = r.sb_next_tick;
    end if;
    batch_id := r.sb_batch;
    if i_want_source then
        -- the queue row read after the window's end tick, as _batch_source
        -- reads them in one snapshot: it knows every switch that tick saw
        select * into q from pgque.queue where queue_id = i_sub.sub_queue;
        source := pgque._event_source(q, prev.tick_snapshot, nxt.tick_snapshot, i_n, i_slot);
    end if;
    select * into lo_xmax, hi_xmax, lo_xip, hi from pgque._window_bounds(prev.tick_snapshot, nxt.tick_snapshot);
    pos := r.sb_pos;
end $$;

-- Fold an epoch's cursor into sub_last_tick (which rotation, tick cleanup
-- and the views read) and drop the rows of earlier epochs.  Both skip rows
-- locked by another transaction (a frozen fenced owner): the next ack
-- folds again, and until then _slot_cursor() reads past it.
create function pgque._slot_fold(i_sub int4, i_epoch bigint, i_tick bigint)
returns void language plpgsql as $$
begin
    update pgque.subscription s
       set sub_last_tick = i_tick, sub_active = now()
     where s.sub_id = (select x.sub_id from pgque.subscription x
                        where x.sub_id = i_sub and x.sub_last_tick < i_tick
                          for no key update skip locked);
    delete from pgque.slot_batch b
     where (b.sb_sub, b.sb_epoch) in (select o.sb_sub, o.sb_epoch from pgque.slot_batch o
                                       where o.sb_sub = i_sub and o.sb_epoch < i_epoch
                                         for update skip locked);
end $$;

-- Ack a slot's open batch i_batch of subscription i_sub's lease epoch
-- i_epoch: the part handed out, or the whole window (the epoch's cursor
-- moves to its end, then folds).  -> 1 / 0 (not that row's open batch).
-- The row by its key: no index holds sb_batch (ADR 0130).
create function pgque._slot_finish(i_batch bigint, i_sub int4, i_epoch bigint)
returns int4 language plpgsql as $$
declare
    r pgque.slot_batch;
begin
    select * into r from pgque.slot_batch
     where sb_sub = i_sub and sb_epoch = i_epoch and sb_batch = i_batch;
    if not found then
        return 0;
    end if;
    return pgque._slot_finish_row(r);
end $$;

-- _slot_finish of the epoch's row in hand (ack_partitioned has it locked),
-- updated by its key and batch (HOT, ADR 0130).
create function pgque._slot_finish_row(r pgque.slot_batch)
returns int4 language plpgsql as $$
begin
    if r.sb_last is not null then
        update pgque.slot_batch
           set sb_batch = pg_catalog.nextval('pgque.batch_id_seq'), sb_pos = sb_last, sb_last = null
         where sb_sub = r.sb_sub and sb_epoch = r.sb_epoch and sb_batch = r.sb_batch;
        return 1;
    end if;
    update pgque.slot_batch
       set sb_last_tick = sb_next_tick, sb_batch = null, sb_next_tick = null, sb_pos = null, sb_last = null
     where sb_sub = r.sb_sub and sb_epoch = r.sb_epoch and sb_batch = r.sb_batch;
    perform pgque._slot_fold(r.sb_sub, r.sb_epoch, r.sb_next_tick);
    return 1;
end $$;

-- The events of one window, from the relations that _event_source() chose
-- (C: the plan is kept per source, src/window.c).
create function pgque._window_rows(i_source text, i_lo_xmax xid8, i_hi_xmax xid8, i_lo_xip xid8[],
                                   i_hi pg_catalog.pg_snapshot, i_owner int4, i_after bigint,
                                   i_ev_id bigint, i_limit int4, i_n int4, i_slot int4)
returns setof pgque.event_template language c volatile
as 'MODULE_PATHNAME', 'pgque_window_rows';

-- Rows of windows already read were deleted in this transaction (a seek's
-- copies, _seek_drop_copies): the part caches of every session filled
-- before are stale, now and again at the commit (ADR 0099; src/window.c).
create function pgque._window_rows_deleted()
returns void language c volatile
as 'MODULE_PATHNAME', 'pgque_window_rows_deleted';

-- The window predicate with the caller's parameter numbers (lo's xmax,
-- hi's xmax, lo's xip, hi), for SQL that counts a window's events itself
-- (_slot_pending_all): the rule is C's, src/window.c, written once.
create function pgque._window_where(i_lo_xmax int4, i_hi_xmax int4, i_lo_xip int4, i_hi int4)
returns text language c immutable strict
as 'MODULE_PATHNAME', 'pgque_window_where_sql';

-- A window's bounds for the window read: the xmax of both tick snapshots,
-- the earlier one's in-progress xids and the later snapshot.  A set (of one
-- row), so that a FROM item reads it.  In C (src/window.c, ADR 0121): the
-- SQL of before (a sub-select of pg_snapshot_xip into an array) cost a
-- third of a plain consumer's open.
create function pgque._window_bounds(i_lo pg_catalog.pg_snapshot, i_hi pg_catalog.pg_snapshot,
                                     out lo_xmax xid8, out hi_xmax xid8, out lo_xip xid8[],
                                     out hi pg_catalog.pg_snapshot)
returns setof record language c immutable rows 1
as 'MODULE_PATHNAME', 'pgque_window_bounds_sql';

-- The window of an open batch, one function per kind of batch: the reader
-- (sub_id), its queue, the two ticks' snapshots, the window's bounds as the
-- window read takes them (lo's xmax and xip, hi's xmax) and the position
-- acked inside it (the bounds: _window_bounds, as _slot_window's).  No
-- row: no such batch of that kind.  receive() reads its kind's one alone
-- for a part it holds in memory (ADR 0082): the union below starts the
-- scans of all three.
-- A plain consumer's batch.
create function pgque._sub_batch_window(i_batch_id bigint,
                                        out sub_id int4, out queue_id int4,
                                        out lo pg_catalog.pg_snapshot, out hi pg_catalog.pg_snapshot,
                                        out lo_xmax xid8, out hi_xmax xid8, out lo_xip xid8[], out pos bigint)
returns setof record language sql stable as $$
    select sub.sub_id, sub.sub_queue, t1.tick_snapshot, t2.tick_snapshot,
           b.lo_xmax, b.hi_xmax, b.lo_xip, sub.sub_batch_pos
      from pgque.subscription sub
      join pgque.tick t1 on t1.tick_queue = sub.sub_queue and t1.tick_id = sub.sub_last_tick
      join pgque.tick t2 on t2.tick_queue = sub.sub_queue and t2.tick_id = sub.sub_next_tick
     cross join lateral pgque._window_bounds(t1.tick_snapshot, t2.tick_snapshot) b
     where sub.sub_batch = i_batch_id
$$;

-- A cooperative member's batch: its window, read as the group (ADR 0017).
create function pgque._coop_batch_window(i_batch_id bigint,
                                         out sub_id int4, out queue_id int4,
                                         out lo pg_catalog.pg_snapshot, out hi pg_catalog.pg_snapshot,
                                         out lo_xmax xid8, out hi_xmax xid8, out lo_xip xid8[], out pos bigint)
returns setof record language sql stable as $$
    select sub.sub_id, sub.sub_queue, t1.tick_snapshot, t2.tick_snapshot,
           b.lo_xmax, b.hi_xmax, b.lo_xip, w.cw_pos
      from pgque.coop_window w
      join pgque.subscription sub on sub.sub_id = w.cw_sub
      join pgque.tick t1 on t1.tick_queue = sub.sub_queue and t1.tick_id = w.cw_prev_tick
      join pgque.tick t2 on t2.tick_queue = sub.sub_queue and t2.tick_id = w.cw_next_tick
     cross join lateral pgque._window_bounds(t1.tick_snapshot, t2.tick_snapshot) b
     where w.cw_batch = i_batch_id
$$;

-- A partition slot's batch: the window of its epoch's row r (ADR 0023).
-- The join once, for the row found by its batch id (_slot_batch_window)
-- and by its key (the pausing slot's read, _receive_paused).
create function pgque._slot_row_window(r pgque.slot_batch,
                                       out sub_id int4, out queue_id int4,
                                       out lo pg_catalog.pg_snapshot, out hi pg_catalog.pg_snapshot,
                                       out lo_xmax xid8, out hi_xmax xid8, out lo_xip xid8[], out pos bigint)
returns setof record language sql stable as $$
    select sub.sub_id, sub.sub_queue, t1.tick_snapshot, t2.tick_snapshot,
           b.lo_xmax, b.hi_xmax, b.lo_xip, r.sb_pos
      from pgque.subscription sub
      join pgque.tick t1 on t1.tick_queue = sub.sub_queue and t1.tick_id = r.sb_last_tick
      join pgque.tick t2 on t2.tick_queue = sub.sub_queue and t2.tick_id = r.sb_next_tick
     cross join lateral pgque._window_bounds(t1.tick_snapshot, t2.tick_snapshot) b
     where sub.sub_id = r.sb_sub
$$;

-- A partition slot's batch by its id alone: a scan of slot_batch, which
-- has no index on sb_batch (ADR 0130).
create function pgque._slot_batch_window(i_batch_id bigint,
                                         out sub_id int4, out queue_id int4,
                                         out lo pg_catalog.pg_snapshot, out hi pg_catalog.pg_snapshot,
                                         out lo_xmax xid8, out hi_xmax xid8, out lo_xip xid8[], out pos bigint)
returns setof record language sql stable as $$
    select w.*
      from pgque.slot_batch sb
     cross join lateral pgque._slot_row_window(sb) w
     where sb.sb_batch = i_batch_id
$$;

-- The relations that hold a window's events (_event_source) for a slot's
-- share (i_n, i_slot; NULL: the whole window), from queue i_queue_id's row
-- read in the caller's statement, the one that read the window's ticks:
-- it knows every switch the later tick saw.  No row: an unlogged queue
-- emptied by a crash is reset before this window is read (ADR 0068).
create function pgque._window_source(i_queue_id int4, i_lo pg_catalog.pg_snapshot,
                                     i_hi pg_catalog.pg_snapshot, i_n int4, i_slot int4)
returns setof text language sql stable as $$
    select pgque._event_source(q, i_lo, i_hi, i_n, i_slot)
      from pgque.queue q
     where q.queue_id = i_queue_id
       and (not q.queue_unlogged or pgque._unlogged_whole(q))
$$;

-- Where an open batch's events are: the relations (_event_source) and the
-- window's bounds, read in one statement so that the queue row and the
-- ticks come from one snapshot.  No row: the batch is not open.
create function pgque._batch_source(i_batch_id bigint, i_n int4, i_slot int4,
                                    out source text, out lo_xmax xid8, out hi_xmax xid8,
                                    out lo_xip xid8[], out hi pg_catalog.pg_snapshot,
                                    out sub_id int4, out pos bigint)
returns setof record language sql stable as $$
    select src.source, w.lo_xmax, w.hi_xmax, w.lo_xip, w.hi, w.sub_id, w.pos
      from (select * from pgque._sub_batch_window(i_batch_id)
            union all
            select * from pgque._coop_batch_window(i_batch_id)
            union all
            -- slot_batch has no index on sb_batch (ADR 0130): scanned only
            -- for a batch that is no plain or cooperative one (a one-time
            -- filter: two probes of unique indexes)
            select * from pgque._slot_batch_window(i_batch_id)
             where not exists (select from pgque.subscription s where s.sub_batch = i_batch_id)
               and not exists (select from pgque.coop_window c where c.cw_batch = i_batch_id)) w
     cross join lateral pgque._window_source(w.queue_id, w.lo, w.hi, i_n, i_slot) src(source)
$$;

-- The events of an open batch in ev_id order, past what receive() already
-- had acked inside it (sub_batch_pos).  i_limit caps the rows; i_ev_id picks
-- one event; i_n/i_slot keep only one partition slot's share.  Retried and
-- replayed events (ev_owner set) are seen only by their owning subscription.
create function pgque._batch_rows(i_batch_id bigint, i_limit int4, i_ev_id bigint,
                                  i_n int4 default null, i_slot int4 default null)
returns setof pgque.event_template language plpgsql as $$
declare
    w record;
begin
    select * into w from pgque._batch_source(i_batch_id, i_n, i_slot);
    if not found then
        raise exception 'batch not found: %', i_batch_id
            using errcode = 'undefined_object',
                  hint = 'It was finished (acked) already, or never existed.';
    end if;
    return query
        select * from pgque._window_rows(w.source, w.lo_xmax, w.hi_xmax, w.lo_xip, w.hi, w.sub_id,
                                         w.pos, i_ev_id, i_limit, i_n, i_slot);
end $$;

create function pgque.next_batch_custom(i_queue_name text, i_consumer_name text,
                                        i_min_lag interval, i_min_count int4, i_min_interval interval,
                                        out batch_id bigint, out cur_tick_id bigint, out prev_tick_id bigint,
                                        out cur_tick_time timestamptz, out prev_tick_time timestamptz,
                                        out cur_tick_event_seq bigint, out prev_tick_event_seq bigint)
language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    b pgque.batch_info;
begin
    if i_min_count is not null and i_min_count < 1 then
        raise exception 'min_count must be positive, got %', i_min_count
            using errcode = 'invalid_parameter_value';
    end if;
    if i_min_lag is not null then
        perform pgque._check_interval('min_lag', i_min_lag, true);
    end if;
    if i_min_interval is not null then
        perform pgque._check_interval('min_interval', i_min_interval);
    end if;
    b := pgque._next_batch(i_queue_name, i_consumer_name, i_min_lag, i_min_count, i_min_interval, null);
    select b.* into batch_id, cur_tick_id, prev_tick_id, cur_tick_time, prev_tick_time,
                    cur_tick_event_seq, prev_tick_event_seq;
end $$;

create function pgque.next_batch_info(i_queue_name text, i_consumer_name text,
                                      out batch_id bigint, out cur_tick_id bigint, out prev_tick_id bigint,
                                      out cur_tick_time timestamptz, out prev_tick_time timestamptz,
                                      out cur_tick_event_seq bigint, out prev_tick_event_seq bigint)
language sql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
    select * from pgque.next_batch_custom(i_queue_name, i_consumer_name, null, null, null)
$$;

create function pgque.next_batch(i_queue_name text, i_consumer_name text)
returns bigint language sql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
    select batch_id from pgque.next_batch_custom(i_queue_name, i_consumer_name, null, null, null)
$$;

-- get_batch_events(batch_id): the batch's events in ev_id order; ev_txid is
-- bigint as in PgQ.
create function pgque.get_batch_events(x_batch_id bigint,
    out ev_id bigint, out ev_time timestamptz, out ev_txid bigint, out ev_retry int4,
    out ev_type text, out ev_data text, out ev_extra1 text, out ev_extra2 text,
    out ev_extra3 text, out ev_extra4 text)
returns setof record language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
begin
    perform pgque._open_batch_or_raise(x_batch_id);
    return query
        select e.ev_id, e.ev_time, e.ev_txid::text::bigint, e.ev_retry, e.ev_type, e.ev_data,
               e.ev_extra1, e.ev_extra2, e.ev_extra3, e.ev_extra4
          from pgque._batch_rows(x_batch_id, null, null) e;
end $$;

-- get_batch_cursor(batch_id, cursor_name, quick_limit[, extra_where]): PgQ's
-- cursor over a batch.  Declares cursor_name over the batch's events (the
-- columns of get_batch_events, in ev_id order) and returns its first
-- quick_limit rows; FETCH the rest from the cursor in the same transaction.
-- extra_where is a trusted SQL condition pasted into the cursor's query, as
-- in PgQ.  So that it cannot run with more rights than its caller, the
-- function is SECURITY INVOKER: the events come from get_batch_events()
-- (which checks the batch and the caller's right to its consumer), the
-- condition runs as the caller.
create function pgque.get_batch_cursor(i_batch_id bigint, i_cursor_name text, i_quick_limit int4,
                                       i_extra_where text,
    out ev_id bigint, out ev_time timestamptz, out ev_txid bigint, out ev_retry int4,
    out ev_type text, out ev_data text, out ev_extra1 text, out ev_extra2 text,
    out ev_extra3 text, out ev_extra4 text)
returns setof record language plpgsql
set search_path = pgque, pg_catalog, pg_temp as $$
begin
    -- checked here, not by the owner-only helpers of sql/10_util.sql: this
    -- function runs as its caller
    if i_batch_id is null or i_cursor_name is null or i_quick_limit is null then
        raise exception '% must not be null',
              case when i_batch_id is null then 'batch_id'
                   when i_cursor_name is null then 'cursor name' else 'quick_limit' end
            using errcode = 'null_value_not_allowed';
    end if;
    if i_cursor_name operator(pg_catalog.=) '' then
        raise exception 'cursor name must not be empty'
            using errcode = 'invalid_parameter_value';
    end if;
    if pg_catalog.octet_length(i_cursor_name) > 63 then
        raise exception 'cursor name is too long (% bytes)', pg_catalog.octet_length(i_cursor_name)
            using errcode = 'name_too_long',
                  detail = 'The limit is 63 bytes.';
    end if;
    if i_quick_limit < 0 then
        raise exception 'quick_limit must be zero or positive, got %', i_quick_limit
            using errcode = 'invalid_parameter_value';
    end if;
    if i_extra_where is not null and pg_catalog.btrim(i_extra_where) = '' then
        raise exception 'extra_where must not be empty'
            using errcode = 'invalid_parameter_value',
                  hint = 'Pass NULL, or use the three-argument form, for no condition.';
    end if;
    begin
        execute pg_catalog.format(
            'declare %I no scroll cursor for select * from pgque.get_batch_events(%s) b%s order by b.ev_id',
            i_cursor_name, i_batch_id,
            case when i_extra_where is null then '' else ' where (' || i_extra_where || ')' end);
    exception when others then
        -- a condition that does not parse or name the batch's columns is
        -- bad input, said so; anything else (a permission) as it is
        if i_extra_where is null or left(sqlstate, 2) <> '42' or sqlstate = '42501' then
            raise;
        end if;
        raise exception 'extra_where is not a valid condition on the batch events: %', sqlerrm
            using errcode = 'invalid_parameter_value',
                  hint = 'Columns: ev_id, ev_time, ev_txid, ev_retry, ev_type, ev_data, ev_extra1..ev_extra4.';
    end;
    return query execute pg_catalog.format('fetch %s from %I', i_quick_limit, i_cursor_name);
end $$;

create function pgque.get_batch_cursor(i_batch_id bigint, i_cursor_name text, i_quick_limit int4,
    out ev_id bigint, out ev_time timestamptz, out ev_txid bigint, out ev_retry int4,
    out ev_type text, out ev_data text, out ev_extra1 text, out ev_extra2 text,
    out ev_extra3 text, out ev_extra4 text)
returns setof record language sql
set search_path = pgque, pg_catalog, pg_temp as $$
    select * from pgque.get_batch_cursor(i_batch_id, i_cursor_name, i_quick_limit, null);
$$;

-- Close a batch: the cursor moves to the batch's end tick.  -> 1 / 0 unknown.
-- C (src/ack.c, ADR 0120): the one statement of plain ack's C path, of
-- finish_batch() and of receive's finish of an empty window.
create function pgque._finish_batch(i_batch_id bigint)
returns int4 language c volatile as 'MODULE_PATHNAME', 'pgque_finish_batch_sql';

create function pgque.finish_batch(x_batch_id bigint)
returns int4 language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
begin
    perform pgque._check_not_null('batch_id', x_batch_id);
    if (pgque._open_batch(x_batch_id)).sub_role = 'coop_main' then
        return pgque._coop_finish(x_batch_id);
    end if;
    if pgque._finish_batch(x_batch_id) = 0 then
        raise warning 'batch not found: %', x_batch_id;
        return 0;
    end if;
    return 1;
end $$;

-- The open batch's subscription, locked (the receive lock), once the caller
-- is known to be allowed to use its consumer; all NULL if the batch is
-- unknown.  Every call that names a batch by id starts here.
create function pgque._open_batch(i_batch_id bigint)
returns pgque.subscription language plpgsql as $$
declare
    s pgque.subscription;
begin
    -- on a hot standby a batch the primary opened is read without a lock,
    -- as PgQ reads it (ADR 0089): only the primary moves it
    if pg_catalog.pg_is_in_recovery() then
        select * into s from pgque.subscription where sub_batch = i_batch_id;
    else
        select * into s from pgque.subscription where sub_batch = i_batch_id for update;
    end if;
    if not found then
        -- a cooperative member's batch: the group's row, not locked (members
        -- never wait on it), carrying the window; the window row is locked
        -- first (not on a standby: PostgreSQL refuses a row lock there even
        -- when no row qualifies), then read
        if not pg_catalog.pg_is_in_recovery() then
            perform from pgque.coop_window w where w.cw_batch = i_batch_id for update;
        end if;
        select sub.sub_id, sub.sub_queue, sub.sub_consumer, w.cw_prev_tick, sub.sub_active, w.cw_batch,
               w.cw_next_tick, w.cw_pos, w.cw_last, sub.sub_owner, sub.sub_role, sub.sub_coop_hw, sub.sub_users, sub.sub_merge_windows
          into s
          from pgque.coop_window w join pgque.subscription sub on sub.sub_id = w.cw_sub
         where w.cw_batch = i_batch_id;
        if not found then
            -- a partition slot's batch (ADR 0023): the slot's row, not
            -- locked, carrying the batch (the slot API takes its own lock)
            select sub.sub_id, sub.sub_queue, sub.sub_consumer, b.sb_last_tick, sub.sub_active, b.sb_batch,
                   b.sb_next_tick, b.sb_pos, b.sb_last, sub.sub_owner, sub.sub_role, sub.sub_coop_hw, sub.sub_users, sub.sub_merge_windows
              into s
              from pgque.slot_batch b join pgque.subscription sub on sub.sub_id = b.sb_sub
             where b.sb_batch = i_batch_id;
        end if;
        if not found then
            perform pgque._coop_refuse_fenced(i_batch_id);
        end if;
    end if;
    if s.sub_id is not null then
        perform pgque._authorize(s.sub_owner, s.sub_users, s.sub_queue,
                                 (select co_name from pgque.consumer where co_id = s.sub_consumer));
    end if;
    return s;
end $$;

-- The open batch's subscription, or a clear error.
create function pgque._open_batch_or_raise(i_batch_id bigint)
returns pgque.subscription language plpgsql as $$
declare
    s pgque.subscription;
begin
    perform pgque._check_not_null('batch_id', i_batch_id);
    s := pgque._open_batch(i_batch_id);
    if s.sub_id is null then
        raise exception 'batch not found: %', i_batch_id
            using errcode = 'undefined_object',
                  hint = 'It was finished (acked) already, or never existed.';
    end if;
    return s;
end $$;

-- batch_event_sql(batch_id) -> a SELECT of the open batch's events in
-- ev_id order (PgQ).  It reads through get_batch_events, the one reader of
-- every batch (ADR 0034), so that what it returns is what the consumer
-- receives: a window handed out in parts, a partition slot's share, retries
-- for this consumer only.  PgQ's statement over the event tables cannot say
-- these.  Run it with the caller's rights, in the batch's lifetime.
create function pgque.batch_event_sql(x_batch_id bigint)
returns text language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
begin
    perform pgque._open_batch_or_raise(x_batch_id);
    return pg_catalog.format(
        'select ev_id, ev_time, ev_txid, ev_retry, ev_type, ev_data, ev_extra1, ev_extra2, ev_extra3, ev_extra4'
        ' from pgque.get_batch_events(%s) order by 1', x_batch_id);
end $$;

-- batch_event_tables(batch_id) -> the event tables that can hold events of
-- the open batch (PgQ): the previous and/or the current child table, by the
-- rule every reader uses (_event_tables).  A bucketed table's buckets are
-- its children: a query on it reads them too.
create function pgque.batch_event_tables(x_batch_id bigint)
returns setof text language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    s  pgque.subscription := pgque._open_batch_or_raise(x_batch_id);
    q  pgque.queue;
begin
    select * into q from pgque.queue where queue_id = s.sub_queue;
    return query
        select pg_catalog.format('pgque.%I', pgque._event_table(q.queue_id, t, null))
          from pgque.tick lo, pgque.tick hi,
               pg_catalog.unnest(pgque._event_tables(q, lo.tick_snapshot, hi.tick_snapshot)) with ordinality u(t, o)
         where lo.tick_queue = q.queue_id and lo.tick_id = s.sub_last_tick
           and hi.tick_queue = q.queue_id and hi.tick_id = s.sub_next_tick
         order by u.o;
end $$;

-- find_tick_helper(queue_id, prev_tick_id, prev_tick_time, prev_tick_seq,
-- min_count, min_interval) -> (next_tick_id, next_tick_time, next_tick_seq):
-- the tick that ends a next_batch_custom batch after the given one (PgQ's
-- helper; the rule is _pick_tick's, next_batch_custom's own): the first
-- tick past min_count events or min_interval; NULLs when there is none
-- yet, or when neither limit is given.
create function pgque.find_tick_helper(i_queue_id int4, i_prev_tick_id int8, i_prev_tick_time timestamptz,
                                       i_prev_tick_seq int8, i_min_count int8, i_min_interval interval,
                                       out next_tick_id int8, out next_tick_time timestamptz,
                                       out next_tick_seq int8)
language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    t  pgque.tick;
begin
    perform pgque._check_not_null('queue_id', i_queue_id);
    perform pgque._check_not_null('prev_tick_id', i_prev_tick_id);
    perform pgque._check_not_null('prev_tick_time', i_prev_tick_time);
    perform pgque._check_not_null('prev_tick_seq', i_prev_tick_seq);
    -- an event position (a sequence value): what no sequence reaches would
    -- overflow the search below
    if i_prev_tick_seq < 0 or i_prev_tick_seq > 4611686018427387904 then
        raise exception 'prev_tick_seq must be between 0 and 4611686018427387904 (2^62), got %', i_prev_tick_seq
            using errcode = 'invalid_parameter_value';
    end if;
    if i_min_count is not null and (i_min_count < 1 or i_min_count > 2147483647) then
        raise exception 'min_count must be between 1 and 2147483647, got %', i_min_count
            using errcode = 'invalid_parameter_value';
    end if;
    if i_min_interval is not null then
        perform pgque._check_interval('min_interval', i_min_interval);
    end if;
    if not exists (select from pgque.queue where queue_id = i_queue_id) then
        raise exception 'queue not found: id %', i_queue_id
            using errcode = 'undefined_object';
    end if;
    if i_min_count is null and i_min_interval is null then
        return;
    end if;
    t := pgque._pick_tick(i_queue_id,
                          row(i_queue_id, i_prev_tick_id, i_prev_tick_time, null, i_prev_tick_seq)::pgque.tick,
                          null, i_min_count::int4, i_min_interval, null);
    next_tick_id := t.tick_id;
    next_tick_time := t.tick_time;
    next_tick_seq := t.tick_event_seq;
end $$;
