-- Online resize of a partitioned consumer (issue #17, ADR 0030): N changes
-- at a tick boundary B.  Every key's events up to B are processed under the
-- old layout (old N, old slot subscriptions "C#k/old"), those after B under
-- the new one ("C#k/new", subscribed at B).  The old slots' windows end at
-- B; the new slots serve once every old slot's cursor reached B (the old
-- layout is "drained"), so no key is ever in two slots' hands at once.
--
-- States (docs/system-design.md):  serving(n)  --resize_partitioned-->
-- draining(old n -> new n, B)  --last old cursor at B, completion-->
-- serving(new n).  One row of pgque.partition_resize per draining consumer.

create table pgque.partition_resize (
    queue_id       int4 not null,
    co_name        text not null,
    from_n         int4 not null,
    to_n           int4 not null,
    boundary_tick  bigint not null,
    -- the subscriptions of each layout, by slot (1-based: slot k at [k + 1];
    -- NULL for an old slot that was not subscribed)
    old_subs       int4[] not null,
    new_subs       int4[] not null,
    started_at     timestamptz not null default now(),
    -- when a watchdog pass first found it drained and not switched (the
    -- switch may wait for a lock): key_state_orphaned's switch_pending
    -- counts only from the next pass on (ADR 0038)
    drained_seen_at timestamptz,
    primary key (queue_id, co_name),
    foreign key (queue_id, co_name) references pgque.partition_consumer (queue_id, co_name) on delete cascade
);
select pg_catalog.pg_extension_config_dump('pgque.partition_resize', '');

-- The boundary tick of an old-layout slot subscription of a draining
-- consumer (its windows end there), else NULL.  Read after the window's end
-- tick is picked: a tick past B commits after the resize, so a statement
-- that sees it sees the resize too.
create function pgque._resize_cap(i_sub int4)
returns bigint language plpgsql stable as $$
begin
    -- PL/pgSQL: its plan kept for the session, where a SQL function's
    -- body was parsed and planned again in every slot receive (ADR 0088)
    return (select r.boundary_tick from pgque.partition_resize r
             where i_sub operator(pg_catalog.=) any (r.old_subs));
end $$;

-- Where a retried (or replayed) event of subscription i_owner goes: to the
-- new-layout slot of its key when i_owner is an old-layout slot of a
-- draining consumer (the event lands after B, which the old slot never
-- reads), else to i_owner.  Volatile: every call reads the latest committed
-- resize (the callers hold what a resize waits for: ADR 0030).
create function pgque._retry_owner(i_owner int4, i_key text)
returns int4 language plpgsql volatile as $$
declare
    target int4;
begin
    if i_owner is null then
        return null;
    end if;
    select r.new_subs[pgque._slot_of(i_key, r.to_n) operator(pg_catalog.+) 1] into target
      from pgque.partition_resize r
     where i_owner operator(pg_catalog.=) any (r.old_subs);
    return coalesce(target, i_owner);
end $$;

-- The draining resize of a consumer, if any.
create function pgque._resize_of(i_queue_id int4, i_consumer text)
returns pgque.partition_resize language sql stable as $$
    select * from pgque.partition_resize r where r.queue_id = i_queue_id and r.co_name = i_consumer
$$;

-- Called by _partitioned() for a slot operation naming n = i_n: the new
-- layout's slots are not served while the old layout drains (55000, retry).
create function pgque._resize_gate(q pgque.queue, i_consumer text, i_n int4)
returns void language plpgsql as $$
declare
    r pgque.partition_resize;
begin
    r := pgque._resize_of(q.queue_id, i_consumer);
    if r.to_n is not null and i_n = r.to_n then
        raise exception 'consumer "%" of queue "%" is being resized from n = % to n = %', i_consumer, q.queue_name, r.from_n, r.to_n
            using errcode = 'object_not_in_prerequisite_state',
                  detail = pg_catalog.format('Its slots of n = %s serve once every slot of n = %s has consumed up to tick %s (the boundary).',
                                             r.to_n, r.from_n, r.boundary_tick),
                  hint = pg_catalog.format('Serve the slots of n = %s meanwhile (claim_slot addresses them) and retry; see pgque.partition_resize_status.', r.from_n);
    end if;
end $$;

-- subscribe_slot / unsubscribe_slot change a layout: not while it drains.
create function pgque._resize_refuse(q pgque.queue, i_consumer text, i_func text)
returns void language plpgsql as $$
declare
    r pgque.partition_resize;
begin
    r := pgque._resize_of(q.queue_id, i_consumer);
    if r.to_n is not null then
        raise exception '% is not possible while consumer "%" of queue "%" is being resized from n = % to n = %',
              i_func, i_consumer, q.queue_name, r.from_n, r.to_n
            using errcode = 'object_not_in_prerequisite_state',
                  hint = 'Wait until pgque.partition_resize_status no longer lists it.';
    end if;
end $$;

-- Has every old slot consumed up to the boundary?
create function pgque._resize_drained(r pgque.partition_resize)
returns boolean language sql stable as $$
    select not exists (select 1 from pg_catalog.unnest(r.old_subs) o(sub_id)
                         join pgque.subscription s on s.sub_id = o.sub_id
                        where pgque._slot_cursor(s) < r.boundary_tick)
$$;

-- The old slots still draining (cursor before the boundary).
create function pgque._resize_draining(r pgque.partition_resize)
returns int4[] language sql stable as $$
    select coalesce(pg_catalog.array_agg(o.k - 1 order by o.k), '{}')
      from pg_catalog.unnest(r.old_subs) with ordinality o(sub_id, k)
      join pgque.subscription s on s.sub_id = o.sub_id
     where pgque._slot_cursor(s) < r.boundary_tick
$$;

-- The switch of a resize (ADR 0030, 0038): the blocked keys of the old
-- layout's slot i_sub (slot i_slot of i_from_n) move to their key's new
-- slot, with their withheld events, so that a key's block, its withheld
-- events and its retry have one owner.  A key whose head is done is
-- released first (its copies go to the new slot, _retry_owner).  The events
-- the old slot withheld (its windows from the key's bk_tick to the boundary
-- B, ev_id above the head) are appended again for the new slot, in ev_id
-- order (now: after B, in the new slot's stream), where they stay withheld
-- behind the head; the marker follows as (new slot, key, same head,
-- bk_tick B, not done): the head comes back on the new slot (its retry is
-- moved there by the switch or was routed there by the retry mover) and
-- its ack releases them with the key's new-layout events.  Called by
-- _resize_complete, which holds the queue's DDL lock.  -> keys moved.
create function pgque._pause_move(r pgque.partition_resize, i_sub int4, i_slot int4)
returns int4 language plpgsql as $$
declare
    lo      bigint;
    copies  int4;
    moved   int4;
begin
    perform pgque._pause_release(i_sub, array(select b.bk_key from pgque.blocked_key b
                                               where b.bk_sub = i_sub and b.bk_done_batch is not null),
                                 r.from_n, i_slot, null);
    select pg_catalog.min(b.bk_tick) into lo from pgque.blocked_key b where b.bk_sub = i_sub;
    if lo is null then
        return 0;
    end if;
    with w as materialized (
        -- one row per event: its original or the slot's retry copy (same
        -- columns), never one of two events an admin gave one id (ADR 0113)
        select distinct on (e.ev_id, e.ev_type, e.ev_data, e.ev_extra1, e.ev_extra2, e.ev_extra3, e.ev_extra4) e.*
          from pgque._pause_passed_rows(i_sub, r.from_n, i_slot, lo, r.boundary_tick, null, null) e
          join pgque.blocked_key k on k.bk_sub = i_sub and k.bk_key = e.ev_extra1 and e.ev_id > k.bk_head
         order by e.ev_id, e.ev_type, e.ev_data, e.ev_extra1, e.ev_extra2, e.ev_extra3, e.ev_extra4,
                  (e.ev_owner is null))
    select count(pgque._insert_event(q.queue_name, w2.ev_id, w2.ev_time,
                                     r.new_subs[pgque._slot_of(w2.ev_extra1, r.to_n) + 1], w2.ev_retry,
                                     w2.ev_type, w2.ev_data, w2.ev_extra1, w2.ev_extra2,
                                     w2.ev_extra3, w2.ev_extra4, false))
      into copies
      from (select * from w order by w.ev_id) w2, pgque.queue q
     where q.queue_id = r.queue_id;
    with gone as (delete from pgque.blocked_key b where b.bk_sub = i_sub returning b.*)
    insert into pgque.blocked_key as x (bk_sub, bk_key, bk_head, bk_tick, bk_since, bk_done_batch, bk_draining)
    select r.new_subs[pgque._slot_of(g.bk_key, r.to_n) + 1], g.bk_key, g.bk_head, r.boundary_tick,
           g.bk_since, null, g.bk_draining
      from gone g
    on conflict (bk_sub, bk_key) do update
       set bk_head = least(x.bk_head, excluded.bk_head),
           bk_tick = least(x.bk_tick, excluded.bk_tick),
           bk_since = least(x.bk_since, excluded.bk_since);
    get diagnostics moved = row_count;
    return moved;
end $$;

-- The switch to the new layout, once drained: retries and dead letters of
-- the old slots go to their key's new slot, the old subscriptions go, n
-- becomes the new n, and the old layout's leases are forgotten (the new
-- slots start with fresh, larger epochs).  Waits for nothing: the queue's
-- DDL lock is only tried (the ticker, the retry mover, the watchdog) and a
-- row lock held by a frozen old owner ends the attempt after lock_timeout.
-- -> true when this call completed it.
create function pgque._resize_complete(i_queue_id int4, i_consumer text)
returns boolean language plpgsql set lock_timeout = '200ms' as $$
declare
    r     pgque.partition_resize;
    olds  int4[];
    k     int4;
    moved int4 := 0;
begin
    r := pgque._resize_of(i_queue_id, i_consumer);
    if r.to_n is null or not pgque._resize_drained(r) then
        return false;
    end if;
    -- the retry mover holds it shared while it moves retries (ADR 0020)
    if not pgque._queue_try_exclusive(i_queue_id) then
        return false;
    end if;
    select * into r from pgque.partition_resize x
     where x.queue_id = i_queue_id and x.co_name = i_consumer for update;
    if not found or not pgque._resize_drained(r) then
        return false;
    end if;
    olds := array(select o from pg_catalog.unnest(r.old_subs) o where o is not null);
    -- blocked keys and their withheld events (failure policy pause) go
    -- with their key, as its retries do (ADR 0038)
    for k in 0 .. r.from_n - 1 loop
        if r.old_subs[k + 1] is not null then
            moved := moved + pgque._pause_move(r, r.old_subs[k + 1], k);
        end if;
    end loop;
    update pgque.retry_queue rq
       set ev_owner = r.new_subs[pgque._slot_of(rq.ev_extra1, r.to_n) + 1]
     where rq.ev_owner = any (olds);
    update pgque.dead_letter d
       set dl_consumer_id = (select s.sub_consumer from pgque.subscription s
                              where s.sub_id = r.new_subs[pgque._slot_of(d.ev_extra1, r.to_n) + 1])
     where d.dl_queue_id = i_queue_id
       and d.dl_consumer_id in (select s.sub_consumer from pgque.subscription s where s.sub_id = any (olds));
    -- what the old subscriptions take with them must have moved: refuse
    -- (stay draining, resize_stalled) rather than lose it (ADR 0038)
    if exists (select from pgque.blocked_key b where b.bk_sub = any (olds))
       or exists (select from pgque.retry_queue rq where rq.ev_owner = any (olds))
       or exists (select from pgque.dead_letter d
                   where d.dl_queue_id = i_queue_id
                     and d.dl_consumer_id in (select s.sub_consumer from pgque.subscription s where s.sub_id = any (olds))) then
        raise exception 'state of the old layout of consumer "%" was not moved to the new one', i_consumer
            using errcode = 'internal_error',
                  detail = pg_catalog.format('Old slots %s still own blocked keys, retries or dead letters.', olds),
                  hint = 'The resize stays draining; report this with the server log.';
    end if;
    -- (the consumer names go too, unless another queue uses them)
    with gone as (delete from pgque.subscription s where s.sub_id = any (olds) returning s.sub_consumer)
    delete from pgque.consumer c
     where c.co_id in (select sub_consumer from gone)
       and not exists (select 1 from pgque.subscription x
                        where x.sub_consumer = c.co_id and x.sub_id <> all (olds));
    update pgque.partition_consumer pc set n = r.to_n
     where pc.queue_id = i_queue_id and pc.co_name = i_consumer;
    delete from pgque.partition_resize x where x.queue_id = i_queue_id and x.co_name = i_consumer;
    -- the old layout's leases go when this commits (an abort keeps them),
    -- the new layout's claims of this transaction stay (ADR 0089)
    perform pgque._slot_forget(i_queue_id, i_consumer);
    raise log 'pgque_bgw: consumer "%" of queue % resized from n = % to n = % at tick % (% blocked keys moved)',
              i_consumer, i_queue_id, r.from_n, r.to_n, r.boundary_tick, moved;
    return true;
exception
    when lock_not_available or deadlock_detected then
        return false;   -- an old owner's open transaction: the next call tries again
    when internal_error then
        -- nothing is dropped: the resize stays draining (resize_stalled)
        raise warning 'pgque_bgw: the resize of consumer "%" (queue %) cannot switch: %', i_consumer, i_queue_id, sqlerrm
            using hint = 'Nothing was dropped: it stays draining and is tried again (resize_stalled opens later).';
        return false;
end $$;

-- Every drained resize completes (the watchdog's pass; claim_slot does it
-- per consumer).  -> how many completed.
create function pgque._resize_complete_drained()
returns int4 language plpgsql as $$
declare
    r  record;
    n  int4 := 0;
begin
    for r in select x.queue_id, x.co_name from pgque.partition_resize x order by x.queue_id, x.co_name loop
        -- not while the queue's DDL lock is taken (ADR 0040)
        if not pgque._queue_try_share(r.queue_id) then
            continue;
        end if;
        begin
            if pgque._resize_complete(r.queue_id, r.co_name) then
                n := n + 1;
            end if;
        exception when others then
            -- one failing switch must not stop the watchdog's pass; it
            -- stays draining (and resize_stalled says so)
            raise warning 'pgque_bgw: switching the resize of consumer "%" (queue %) failed: %', r.co_name, r.queue_id, sqlerrm;
        end;
    end loop;
    return n;
end $$;

-- resize_partitioned(queue, consumer, new_n): change N online.  The
-- boundary B is a tick taken here, under the queue row lock that orders
-- every tick (so no old slot can ever see a tick past B before it sees the
-- resize) and after the queue's DDL lock (so the retry mover's in-flight
-- re-injections land before B).  -> B.
create function pgque.resize_partitioned(queue_name text, consumer_name text, new_n int4)
returns bigint language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    q     pgque.queue;
    pc    pgque.partition_consumer;
    r     pgque.partition_resize;
    b     bigint;
    olds  int4[];
    news  int4[];
begin
    q := pgque._queue(queue_name);
    perform pgque._check_not_null('new_n', new_n);
    -- unknown consumer (42704), another role's (42501)
    perform pgque._partitioned(q, consumer_name, null, 0);
    if new_n < 1 or new_n > 1024 then
        raise exception 'new_n must be between 1 and 1024, got %', new_n
            using errcode = 'invalid_parameter_value';
    end if;
    if q.queue_external_ticker then
        raise exception 'queue "%" is ticked by an external ticker', queue_name
            using errcode = 'object_not_in_prerequisite_state',
                  detail = 'A resize takes its boundary tick itself.';
    end if;
    perform pgque._queue_ddl_lock(q.queue_id);
    -- not FOR UPDATE: a worker's open part that dead-lettered an event
    -- holds the row FOR KEY SHARE (dead_letter's foreign key) until it
    -- commits, and a frozen one would keep this call waiting with the
    -- queue's DDL lock held, its ticks stopped (TAP 172); the key is not
    -- changed here, and the ticker's FOR NO KEY UPDATE still waits for this
    select * into q from pgque.queue where queue_id = q.queue_id for no key update;
    select * into pc from pgque.partition_consumer p
     where p.queue_id = q.queue_id and p.co_name = consumer_name for update;
    -- the owner's act, not a user's (ADR 0058)
    perform pgque._authorize(pc.owner, null, q.queue_id, consumer_name);
    r := pgque._resize_of(q.queue_id, consumer_name);
    if r.to_n is not null then
        raise exception 'consumer "%" of queue "%" is already being resized from n = % to n = %',
              consumer_name, queue_name, r.from_n, r.to_n
            using errcode = 'object_not_in_prerequisite_state',
                  hint = 'Wait until pgque.partition_resize_status no longer lists it, then resize again.';
    end if;
    if new_n = pc.n then
        raise exception 'consumer "%" of queue "%" already has n = %', consumer_name, queue_name, new_n
            using errcode = 'invalid_parameter_value';
    end if;
    olds := array(select s.sub_id
                    from pg_catalog.generate_series(0, pc.n - 1) k
                    left join pgque.consumer c on c.co_name = pgque._slot_name(consumer_name, k, pc.n)
                    left join pgque.subscription s on s.sub_queue = q.queue_id and s.sub_consumer = c.co_id
                   order by k);
    -- a DLQ replay of an old slot's event in flight lands before B
    perform 1 from pgque.dead_letter d
     where d.dl_queue_id = q.queue_id
       and d.dl_consumer_id in (select s.sub_consumer from pgque.subscription s where s.sub_id = any (olds))
       for update;
    b := pgque._tick(q);
    for k in 0 .. new_n - 1 loop
        perform pgque._register(q, pgque._slot_name(consumer_name, k, new_n), b, pc.owner, pc.users);
    end loop;
    news := array(select s.sub_id
                    from pg_catalog.generate_series(0, new_n - 1) k
                    join pgque.consumer c on c.co_name = pgque._slot_name(consumer_name, k, new_n)
                    join pgque.subscription s on s.sub_queue = q.queue_id and s.sub_consumer = c.co_id
                   order by k);
    insert into pgque.partition_resize (queue_id, co_name, from_n, to_n, boundary_tick, old_subs, new_subs)
    values (q.queue_id, consumer_name, pc.n, new_n, b, olds, news);
    -- old slots that were never subscribed or are already at B: nothing to wait for
    perform pgque._resize_complete(q.queue_id, consumer_name);
    return b;
end $$;

-- partition_n(queue, consumer): the n its workers serve now (the old n while
-- a resize drains; a drained resize switches here, as in claim_slot).  A
-- worker reads it at the top of every cycle over its slots.
create function pgque.partition_n(queue_name text, consumer_name text)
returns int4 language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    q pgque.queue;
begin
    q := pgque._queue(queue_name);
    if (pgque._resize_of(q.queue_id, consumer_name)).to_n is not null then
        perform pgque._partitioned(q, consumer_name, null, 0);
        perform pgque._resize_complete(q.queue_id, consumer_name);
    end if;
    return pgque._partitioned(q, consumer_name, null, 0);
end $$;

-- One row per draining resize.
create function pgque.get_partition_resize_info(
    out queue_name text, out consumer text, out old_n int4, out new_n int4, out boundary_tick bigint,
    out started_at timestamptz, out draining_slots int4[])
returns setof record language sql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
    select q.queue_name, r.co_name, r.from_n, r.to_n, r.boundary_tick, r.started_at, pgque._resize_draining(r)
      from pgque.partition_resize r
      join pgque.queue q on q.queue_id = r.queue_id
     order by q.queue_name, r.co_name
$$;

create view pgque.partition_resize_status as
    select * from pgque.get_partition_resize_info();

-- The resize_stalled alert: a resize still draining after
-- pgque_bgw.resize_stalled_after (the watchdog; ADR 0012 open once, clear
-- once: it clears when the resize completes).
create function pgque._resize_conditions()
returns setof pgque.alert_condition language plpgsql stable as $$
begin
    return query
    select 'resize_stalled'::text, q.queue_name operator(pg_catalog.||) '/' operator(pg_catalog.||) r.co_name,
           q.queue_name, r.co_name, null::int4,
           pg_catalog.jsonb_build_object(
               'old_n', r.from_n, 'new_n', r.to_n, 'boundary_tick', r.boundary_tick,
               'started_at', r.started_at, 'draining_slots', pgque._resize_draining(r))
      from pgque.partition_resize r
      join pgque.queue q on q.queue_id = r.queue_id
     where r.started_at < pg_catalog.clock_timestamp()
                          operator(pg_catalog.-) pgque._guc_interval('pgque_bgw.resize_stalled_after');
end $$;
