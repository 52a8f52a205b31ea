-- Replay by time (ADR 0067): seek() moves a consumer's cursor to the
-- earliest retained tick, the latest tick, or the last tick before a point
-- in time; subscribe(..., start) puts a new consumer there.  The events
-- after the cursor come again in their original order with their original
-- ids: they are read from the event tables, which retention keeps
-- (sql/21_retention.sql).  A position is a tick: "the events at or after
-- t" are those first ticked at or after t.

-- The position a user wrote (i_what names the argument): 'earliest',
-- 'latest' or a point in time as text.  -> (what, at): what is
-- 'earliest', 'latest' or 'time'.
create function pgque._seek_parse(i_what text, i_position text, out what text, out at timestamptz)
returns record language plpgsql as $$
begin
    perform pgque._check_not_null(i_what, i_position);
    what := pg_catalog.lower(pg_catalog.btrim(i_position));
    if what in ('earliest', 'latest') then
        return;
    end if;
    begin
        at := i_position::timestamptz;
    exception when invalid_datetime_format or datetime_field_overflow
                   or invalid_parameter_value or invalid_text_representation then
        raise exception '% must be ''earliest'', ''latest'' or a point in time, got "%"',
              i_what, pg_catalog.left(i_position, 64)
            using errcode = 'invalid_parameter_value',
                  hint = 'For example pgque.seek(''orders'', ''billing'', now() - interval ''1 hour'').';
    end;
    what := 'time';
end $$;

-- The tick a cursor goes to (the caller holds the table rotation truncates
-- next, so nothing is truncated under it):
--   earliest  the earliest tick every window after which is whole
--             (_earliest_tick);
--   latest    the latest tick (where subscribe() starts);
--   time      the last tick before i_at: the next window holds the events
--             first ticked at or after it.  Before the retained span (or
--             a tick whose window is not whole): the earliest tick, and
--             clamped says so.
-- A queue whose every tick is older than its last truncation (no tick
-- for two rotations) has no whole start: the latest tick, clamped.
create function pgque._seek_tick(q pgque.queue, i_what text, i_at timestamptz,
                                 out tick_id bigint, out tick_time timestamptz, out clamped boolean)
returns record language plpgsql stable as $$
declare
    e     pgque.tick;
    lt    pgque.tick;
    snap  pg_catalog.pg_snapshot;
begin
    e := pgque._earliest_tick(q);
    select * into lt from pgque.tick t where t.tick_queue = q.queue_id order by t.tick_id desc limit 1;
    clamped := false;
    if i_what = 'latest' then
        tick_id := lt.tick_id; tick_time := lt.tick_time;
        return;
    elsif i_what = 'time' then
        select t.tick_id, t.tick_time, t.tick_snapshot into tick_id, tick_time, snap
          from pgque.tick t
         where t.tick_queue = q.queue_id and t.tick_time < i_at
         order by t.tick_time desc, t.tick_id desc limit 1;
        if tick_id >= e.tick_id
           and (q.queue_truncated_xid is null or pg_catalog.pg_snapshot_xmin(snap) > q.queue_truncated_xid) then
            return;
        end if;
        clamped := true;
    end if;
    if e.tick_id is null then
        tick_id := lt.tick_id; tick_time := lt.tick_time; clamped := true;
    else
        tick_id := e.tick_id; tick_time := e.tick_time;
    end if;
end $$;

-- Hold the table rotation step 1 truncates next (ACCESS SHARE: step 1's
-- LOCK ... NOWAIT then skips the queue until this transaction ends, as for
-- any reader of it) and choose the tick of the position, held too (FOR KEY
-- SHARE: tick cleanup skips it), so every cursor moved to it stands where
-- all later events are still stored.  No worker ever waits for a seek left
-- open in a transaction (ADR 0040, 0067).  A rotation that held the table
-- first is waited for (a maintenance transaction), then seen: hence READ
-- COMMITTED, each statement with a new snapshot.  Says so when the
-- position was before the retained span.  -> the tick, its time, clamped.
create function pgque._seek_hold(q pgque.queue, i_consumer text, i_what text, i_at timestamptz,
                                 out tick_id bigint, out tick_time timestamptz, out clamped boolean)
returns record language plpgsql as $$
declare
    tries  int4 := 0;
    cur    int4;
begin
    if pg_catalog.current_setting('transaction_isolation') <> 'read committed' then
        raise exception 'cannot move consumer "%" on queue "%" in a % transaction', i_consumer, q.queue_name,
              pg_catalog.upper(pg_catalog.current_setting('transaction_isolation'))
            using errcode = 'invalid_transaction_state',
                  detail = 'A seek must see a rotation that commits while it waits for the table rotation truncates.',
                  hint = 'Call it in a READ COMMITTED transaction.';
    end if;
    loop
        select queue_cur_table into cur from pgque.queue where queue_id = q.queue_id;
        execute pg_catalog.format('lock table pgque.%I in access share mode',
                                  pgque._event_table(q.queue_id, (cur + 1) % q.queue_ntables, null));
        -- a new statement: a rotation that held the table is seen now
        select * into q from pgque.queue where queue_id = q.queue_id;
        exit when q.queue_cur_table = cur;
    end loop;
    loop
        select * into tick_id, tick_time, clamped from pgque._seek_tick(q, i_what, i_at);
        -- a tick cleanup that deleted it meanwhile: choose again
        perform from pgque.tick t where t.tick_queue = q.queue_id and t.tick_id = _seek_hold.tick_id for key share;
        exit when found;
        tries := tries + 1;
        if tries >= 3 then
            raise exception 'no tick to seek to on queue "%"', q.queue_name
                using errcode = 'object_not_in_prerequisite_state',
                      hint = 'Tick the queue (pgque.ticker()) and try again.';
        end if;
    end loop;
    if clamped then
        raise notice 'consumer "%" on queue "%": the position is before the retained span; it starts at the earliest retained tick %',
              i_consumer, q.queue_name, tick_id
            using detail = 'Nothing older is stored: it was truncated by rotation, or never sent.',
                  hint = 'Keep them longer with set_queue_config(queue, ''retention'', ...).';
    end if;
end $$;

-- Rows a seek deletes or moves are locked without waiting: a member or a
-- slot owner in the middle of a call (or frozen in one) makes the seek
-- fail, never wait (ADR 0023: nobody waits for a frozen owner).
create function pgque._seek_busy(i_consumer text, i_queue_name text, i_what text)
returns void language plpgsql as $$
begin
    raise exception 'consumer "%" on queue "%" is busy: % is held by a transaction in progress',
          i_consumer, i_queue_name, i_what
        using errcode = 'lock_not_available',
              hint = 'Try again; a worker stuck in a transaction must end it first (pg_stat_activity).';
end $$;

-- The events an admin addressed to one subscription (insert_event_raw
-- with ev_owner, ADR 0105).  A seek drops the copies a consumer acked
-- (below): rows owned by the subscription in the windows it passed.  An
-- addressed event is owned the same way and is no copy: its row, named
-- here by (ev_id, ev_txid), comes again in its place.  A retry of it is a
-- copy (another transaction's row) and goes as any.  Gone with the
-- subscription, and once rotation truncated the row (rotation step 1).
create table pgque.addressed_event (
    ae_sub    int4 not null references pgque.subscription (sub_id) on delete cascade,
    ae_ev_id  int8 not null,
    ae_txid   xid8 not null,
    primary key (ae_sub, ae_ev_id, ae_txid)
);
select pg_catalog.pg_extension_config_dump('pgque.addressed_event', '');

-- Is the owned row (i_sub, i_ev_id, i_txid) an event an admin addressed
-- to the subscription, not a copy (pgque.addressed_event)?  One probe of
-- its primary key.
create function pgque._addressed(i_sub int4, i_ev_id bigint, i_txid xid8)
returns boolean language sql stable as $$
    select exists (select from pgque.addressed_event a
                    where a.ae_sub operator(pg_catalog.=) i_sub and a.ae_ev_id operator(pg_catalog.=) i_ev_id
                      and a.ae_txid operator(pg_catalog.=) i_txid)
$$;

-- The copies a replay must not deliver (ADR 0091).  A retry (nack, PgQ's
-- event_retry) and a release of a paused key (ADR 0029) append copies of
-- events under their ids, owned by the subscription (ev_owner).  A seek
-- back to tick i_tick reads the windows after it again: an original there
-- comes again in its place, and a copy the consumer already acked would
-- come a second time, after the key's later events.  So the copies the
-- consumer passed (acked: in its windows from i_tick to its cursor, and a
-- slot's acked part of its open window up to its position, _slot_passed)
-- go, in the seek's transaction; a copy after the cursor (a retry still
-- owed) stays, and a copy made after the seek is after every tick it can
-- reach; an event an admin addressed to the subscription is no copy and
-- stays (pgque.addressed_event).  The rows are the owner's alone (no other
-- reader sees them).  i_n, i_slot: a slot's
-- layout (NULL: a plain consumer or a cooperative group, whose cursor is
-- the low-water mark).  -> copies removed.
create function pgque._seek_drop_copies(q pgque.queue, i_sub int4, i_n int4, i_slot int4, i_tick bigint)
returns int4 language plpgsql as $$
declare
    cur    bigint;
    pos    bigint;
    nxt    bigint;
    lo     pg_catalog.pg_snapshot;
    hi     pg_catalog.pg_snapshot;
    nx     pg_catalog.pg_snapshot;
    n      int4 := 0;
    m      int4;
begin
    if i_n is not null then
        select x.tick, x.pos, x.next_tick into cur, pos, nxt from pgque._slot_passed(i_sub) x;
    else
        select s.sub_last_tick into cur from pgque.subscription s where s.sub_id = i_sub;
    end if;
    select t.tick_snapshot into lo from pgque.tick t where t.tick_queue = q.queue_id and t.tick_id = i_tick;
    select t.tick_snapshot into hi from pgque.tick t where t.tick_queue = q.queue_id and t.tick_id = cur;
    select t.tick_snapshot into nx from pgque.tick t where t.tick_queue = q.queue_id and t.tick_id = nxt;
    -- nothing passed after the new position (a seek forward, or in place
    -- with no acked part of a window), or a tick already gone: no copy to
    -- drop.  The rows go by the window rule the readers use
    -- (_window_where, C's) on the subscription's own rows, found through
    -- the ev_txid index: not a read of every event since the position.
    if lo is null or hi is null or i_tick > cur then
        return 0;
    end if;
    if i_tick < cur then
        execute pg_catalog.format('delete from pgque.%I ev where ev.ev_owner operator(pg_catalog.=) $1 and %s'
                                  ' and not pgque._addressed(ev.ev_owner, ev.ev_id, ev.ev_txid)',
                                  pgque._event_table(q.queue_id, null, null), pgque._window_where(2, 3, 4, 5))
            using i_sub, pg_catalog.pg_snapshot_xmax(lo), pg_catalog.pg_snapshot_xmax(hi),
                  array(select pg_catalog.pg_snapshot_xip(lo)), hi;
        get diagnostics n = row_count;
    end if;
    -- a slot's acked part of its open window (cur, nxt], up to pos
    if pos is not null and nx is not null then
        execute pg_catalog.format('delete from pgque.%I ev where ev.ev_owner operator(pg_catalog.=) $1'
                                  ' and ev.ev_id operator(pg_catalog.<=) $6 and %s'
                                  ' and not pgque._addressed(ev.ev_owner, ev.ev_id, ev.ev_txid)',
                                  pgque._event_table(q.queue_id, null, null), pgque._window_where(2, 3, 4, 5))
            using i_sub, pg_catalog.pg_snapshot_xmax(hi), pg_catalog.pg_snapshot_xmax(nx),
                  array(select pg_catalog.pg_snapshot_xip(hi)), nx, pos;
        get diagnostics m = row_count;
        n := n + m;
    end if;
    -- rows of windows the part caches may hold are gone (ADR 0099)
    if n > 0 then
        perform pgque._window_rows_deleted();
    end if;
    return n;
end $$;

-- A plain consumer: the cursor moves, the open batch is dropped (as by
-- register_consumer_at()); an ack of that batch then finishes nothing.
-- Pending retries stay: they are new events.
create function pgque._seek_plain(s pgque.subscription, i_tick bigint)
returns void language sql as $$
    update pgque.subscription
       set sub_last_tick = i_tick, sub_batch = null, sub_next_tick = null,
           sub_batch_pos = null, sub_batch_last = null, sub_active = pg_catalog.now()
     where sub_id = s.sub_id;
$$;

-- A cooperative group (ADR 0017): its windows go, the members' batches
-- with them (an ack of one finishes nothing; the member's next receive
-- takes a window from the new cursor), and the group cursor and its
-- high-water mark move to the tick: windows are cut again from there.
-- The group row is held (the caller's FOR NO KEY UPDATE): _coop_sync
-- skips it.
create function pgque._seek_coop(q pgque.queue, s pgque.subscription, i_consumer text, i_tick bigint)
returns void language plpgsql as $$
begin
    begin
        perform from pgque.coop_window where cw_sub = s.sub_id for update nowait;
    exception when lock_not_available then
        perform pgque._seek_busy(i_consumer, q.queue_name, 'a window of a member');
    end;
    delete from pgque.coop_window where cw_sub = s.sub_id;
    update pgque.subscription
       set sub_last_tick = i_tick, sub_coop_hw = i_tick, sub_active = pg_catalog.now()
     where sub_id = s.sub_id;
end $$;

-- A partitioned consumer: every slot subscription "C#k/n" to the same
-- tick, in one transaction.  A slot's cursor is the greatest of
-- sub_last_tick and its epochs' rows (ADR 0023): the rows go, so the next
-- receive of whichever worker holds the lease starts a row of its epoch at
-- the new cursor, and an ack of a batch opened before finishes nothing.
-- Leases are not touched.  Refused while a resize drains (two layouts) or
-- a key is blocked (failure policy pause: its withheld events, ADR 0029).
create function pgque._seek_partitioned(q pgque.queue, i_consumer text, i_what text, i_at timestamptz,
                                        out tick_id bigint, out tick_time timestamptz, out clamped boolean)
returns record language plpgsql as $$
declare
    pc    pgque.partition_consumer;
    subs  int4[];
begin
    select * into pc from pgque.partition_consumer p
     where p.queue_id = q.queue_id and p.co_name = i_consumer;
    perform pgque._authorize(pc.owner, null, q.queue_id, i_consumer);
    -- against a resize (FOR UPDATE) and unsubscribe_slot
    begin
        select * into pc from pgque.partition_consumer p
         where p.queue_id = q.queue_id and p.co_name = i_consumer for no key update nowait;
    exception when lock_not_available then
        perform pgque._seek_busy(i_consumer, q.queue_name, 'the partitioned consumer');
    end;
    if exists (select from pgque.partition_resize r where r.queue_id = q.queue_id and r.co_name = i_consumer) then
        raise exception 'partitioned consumer "%" on queue "%" is being resized', i_consumer, q.queue_name
            using errcode = 'object_not_in_prerequisite_state',
                  detail = 'Its old and new slots read different windows until the old ones reach the boundary tick.',
                  hint = 'Seek once the resize is done (pgque.partition_resize_status).';
    end if;
    select pg_catalog.array_agg(s.sub_id order by s.sub_id) into subs
      from pgque.subscription s join pgque.consumer c on c.co_id = s.sub_consumer
     where s.sub_queue = q.queue_id
       and c.co_name in (select i_consumer || '#' || k || '/' || pc.n from pg_catalog.generate_series(0, pc.n - 1) k);
    -- FOR UPDATE: a slot owner's first call of an epoch inserts its batch
    -- row (a foreign key: KEY SHARE on the subscription); one under way
    -- makes the seek busy, a later one waits for the seek to end, so no row
    -- of the old position is committed after the rows went.  The owners'
    -- folds (NO KEY UPDATE SKIP LOCKED) skip it.
    begin
        perform from pgque.subscription where sub_id = any (subs) for update nowait;
    exception when lock_not_available then
        perform pgque._seek_busy(i_consumer, q.queue_name, 'a slot''s subscription');
    end;
    if exists (select from pgque.blocked_key b where b.bk_sub = any (subs)) then
        raise exception 'partitioned consumer "%" on queue "%" has blocked keys', i_consumer, q.queue_name
            using errcode = 'object_not_in_prerequisite_state',
                  detail = 'Failure policy pause withholds the later events of a key until its failed event is acked or dead-lettered.',
                  hint = 'Resolve them first (pgque.blocked_keys).';
    end if;
    begin
        perform from pgque.slot_batch where sb_sub = any (subs) for update nowait;
    exception when lock_not_available then
        perform pgque._seek_busy(i_consumer, q.queue_name, 'a slot''s batch');
    end;
    select * into tick_id, tick_time, clamped from pgque._seek_hold(q, i_consumer, i_what, i_at);
    -- the copies each slot acked go (ADR 0091): read before its batch rows
    perform pgque._seek_drop_copies(q, s.sub_id, pc.n, k, _seek_partitioned.tick_id)
       from pg_catalog.generate_series(0, pc.n - 1) k
       join pgque.consumer c on c.co_name = i_consumer || '#' || k || '/' || pc.n
       join pgque.subscription s on s.sub_consumer = c.co_id and s.sub_queue = q.queue_id;
    delete from pgque.slot_batch where sb_sub = any (subs);
    update pgque.subscription
       set sub_last_tick = _seek_partitioned.tick_id, sub_batch = null, sub_next_tick = null,
           sub_batch_pos = null, sub_batch_last = null, sub_active = pg_catalog.now()
     where sub_id = any (subs);
end $$;

-- seek(queue_name, consumer_name, 'earliest' | 'latest' | time), for a
-- plain, cooperative or partitioned consumer -> (tick_id, tick_time,
-- clamped): where the cursor now stands; clamped when the position was
-- before the retained span (a NOTICE says so too).
create function pgque._seek(i_queue_name text, i_consumer_name text, i_what text, i_at timestamptz,
                            out tick_id bigint, out tick_time timestamptz, out clamped boolean)
returns record language plpgsql as $$
declare
    q  pgque.queue;
    s  pgque.subscription;
begin
    q := pgque._queue(i_queue_name);
    perform pgque._user_consumer_name(i_consumer_name);
    perform pgque._check_queue_right(q, 'subscribe');
    select sub.* into s
      from pgque.subscription sub join pgque.consumer c on c.co_id = sub.sub_consumer
     where sub.sub_queue = q.queue_id and c.co_name = i_consumer_name;
    if not found then
        if exists (select from pgque.partition_consumer pc
                    where pc.queue_id = q.queue_id and pc.co_name = i_consumer_name) then
            select * into tick_id, tick_time, clamped
              from pgque._seek_partitioned(q, i_consumer_name, i_what, i_at);
            return;
        end if;
        raise exception 'Not subscriber to queue: %/%', i_queue_name, i_consumer_name
            using errcode = 'undefined_object',
                  hint = 'Subscribe it with pgque.subscribe(queue, consumer, start => ...).';
    end if;
    perform pgque._authorize(s.sub_owner, null, q.queue_id, i_consumer_name);
    -- the receive lock (FOR UPDATE) of a plain consumer, a member's
    -- _coop_sync (FOR NO KEY UPDATE) of a group: busy, never waited for
    begin
        select * into s from pgque.subscription where sub_id = s.sub_id for no key update nowait;
    exception when lock_not_available then
        perform pgque._seek_busy(i_consumer_name, q.queue_name, 'its subscription (a receive in progress)');
    end;
    select * into tick_id, tick_time, clamped from pgque._seek_hold(q, i_consumer_name, i_what, i_at);
    perform pgque._seek_drop_copies(q, s.sub_id, null, null, tick_id);     -- ADR 0091
    if s.sub_role = 'coop_main' then
        perform pgque._seek_coop(q, s, i_consumer_name, tick_id);
    else
        perform pgque._seek_plain(s, tick_id);
    end if;
end $$;

create function pgque.seek(queue_name text, consumer_name text, target text,
                           out tick_id bigint, out tick_time timestamptz, out clamped boolean)
returns record language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    p record;
begin
    p := pgque._seek_parse('target', target);
    select * into tick_id, tick_time, clamped from pgque._seek(queue_name, consumer_name, p.what, p.at);
end $$;

create function pgque.seek(queue_name text, consumer_name text, target timestamptz,
                           out tick_id bigint, out tick_time timestamptz, out clamped boolean)
returns record language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
begin
    perform pgque._check_not_null('target', target);
    select * into tick_id, tick_time, clamped from pgque._seek(queue_name, consumer_name, 'time', target);
end $$;

-- subscribe(queue_name, consumer_name, start => 'earliest' | 'latest' | time)
-- -> 1 subscribed there / 0 was subscribed already (its cursor is kept:
-- seek() moves it).
create function pgque._subscribe_at(i_queue_name text, i_consumer_name text, i_what text, i_at timestamptz)
returns int4 language plpgsql as $$
declare
    q  pgque.queue;
    s  pgque.subscription;
begin
    q := pgque._queue(i_queue_name);
    if pgque._register(q, pgque._user_consumer_name(i_consumer_name), null) = 0 then
        raise notice 'consumer "%" is subscribed to queue "%" already; its cursor stays where it is',
              i_consumer_name, i_queue_name
            using hint = 'pgque.seek() moves it.';
        return 0;
    end if;
    select sub.* into s
      from pgque.subscription sub join pgque.consumer c on c.co_id = sub.sub_consumer
     where sub.sub_queue = q.queue_id and c.co_name = i_consumer_name
       for no key update of sub;
    perform pgque._seek_plain(s, (select h.tick_id from pgque._seek_hold(q, i_consumer_name, i_what, i_at) h));
    return 1;
end $$;

create function pgque.subscribe(queue_name text, consumer_name text, start text)
returns int4 language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    p record;
begin
    p := pgque._seek_parse('start', start);
    return pgque._subscribe_at(queue_name, consumer_name, p.what, p.at);
end $$;

create function pgque.subscribe(queue_name text, consumer_name text, start timestamptz)
returns int4 language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
begin
    perform pgque._check_not_null('start', start);
    return pgque._subscribe_at(queue_name, consumer_name, 'time', start);
end $$;

-- subscribe_partitioned(queue_name, consumer_name, n, start): a partitioned
-- consumer made in one call, every slot "C#k/n" (k = 0 .. n-1) subscribed
-- as subscribe_slot() does (same checks, owner, buckets), and the slots this
-- call subscribes all put at one tick, chosen as seek() chooses it and held
-- the same way (ADR 0067, 0070): the consumer starts consistent, every key
-- at the same point.  Slots subscribed already keep their cursors (a NOTICE
-- says so: seek() moves all of them).  -> the number of slots subscribed now
-- (n for a new consumer, 0 when every slot was there).
create function pgque._subscribe_partitioned_at(i_queue_name text, i_consumer_name text, i_n int4,
                                                i_what text, i_at timestamptz)
returns int4 language plpgsql as $$
declare
    q      pgque.queue;
    fresh  int4[] := '{}';
    made   int4;
    t      bigint;
begin
    q := pgque._queue(i_queue_name);
    perform pgque._user_consumer_name(i_consumer_name);
    perform pgque._check_not_null('n', i_n);
    -- subscribe_slot checks n (slot 0 first: an n below 1 is refused
    -- there); a slot it did not make (subscribed before, or by a
    -- subscribe_slot that committed while this waited) keeps its cursor
    for k in 0 .. greatest(i_n, 1) - 1 loop
        made := pgque._subscribe_slot(i_queue_name, i_consumer_name, k, i_n);
        if made is not null then
            fresh := fresh || made;
        end if;
    end loop;
    if pg_catalog.cardinality(fresh) < i_n then
        raise notice 'partitioned consumer "%" on queue "%": % of its % slots were subscribed already; their cursors stay where they are',
              i_consumer_name, i_queue_name, i_n - pg_catalog.cardinality(fresh), i_n
            using hint = 'pgque.seek() moves every slot.';
    end if;
    if pg_catalog.cardinality(fresh) = 0 then
        return 0;
    end if;
    t := (select h.tick_id from pgque._seek_hold(q, i_consumer_name, i_what, i_at) h);
    perform pgque._seek_plain(s, t) from pgque.subscription s where s.sub_id = any (fresh);
    return pg_catalog.cardinality(fresh);
end $$;

create function pgque.subscribe_partitioned(queue_name text, consumer_name text, n int4,
                                            start text default 'latest')
returns int4 language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    p record;
begin
    p := pgque._seek_parse('start', start);
    return pgque._subscribe_partitioned_at(queue_name, consumer_name, n, p.what, p.at);
end $$;

create function pgque.subscribe_partitioned(queue_name text, consumer_name text, n int4, start timestamptz)
returns int4 language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
begin
    perform pgque._check_not_null('start', start);
    return pgque._subscribe_partitioned_at(queue_name, consumer_name, n, 'time', start);
end $$;
