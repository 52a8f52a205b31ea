-- Failure policy "pause" of partitioned consumers (ADR 0029, issue 17):
-- after a nack of an event of key K, no later event of K is handed out on
-- its slot until the failed one is acked on a retry or dead-lettered; the
-- other keys of the slot keep flowing.
--
-- State: one row per blocked key (pgque.blocked_key), never one per event.
-- The withheld events stay where they are, in the event tables: the row's
-- bk_tick is a cursor of its own (rotation and tick cleanup wait for it),
-- and bk_head the key's event in flight: the slot's receive withholds every
-- event of K with a larger ev_id.  When the head is done (acked after it
-- came back, or dead-lettered) the slot's ack "releases" the key: the
-- withheld events of K behind the slot's cursor are read again, once, and
-- appended again for the slot in that transaction (owner copies, as a
-- retry is, with their retry count unchanged, in ev_id order: one window);
-- the largest of them becomes the head (the key is "draining"), bk_tick
-- moves to the cursor, and the events of K that arrive meanwhile stay
-- withheld until the next release, one tick later.
-- A release that finds nothing withheld removes the row.  A NULL key has
-- no marker: its nack is a plain retry ("skip").

create table pgque.blocked_key (
    -- restrict: a marker stands for withheld events; whoever removes a
    -- subscription removes (unsubscribe) or moves (a resize's switch) its
    -- markers first, never silently (ADR 0038)
    bk_sub         int4 not null references pgque.subscription (sub_id) on delete restrict,
    bk_key         text not null,
    -- the key's event in flight (the failed one, or the last re-queued one
    -- while draining): events of the key with a larger ev_id are withheld
    bk_head        bigint not null,
    -- the withheld events are in the slot's windows after this tick
    bk_tick        bigint not null,
    bk_since       timestamptz not null default now(),
    -- the batch in which the head was handed out (or dead-lettered): its
    -- ack releases the key
    bk_done_batch  bigint,
    bk_draining    boolean not null default false,
    primary key (bk_sub, bk_key)
);
create index blocked_key_done_idx on pgque.blocked_key (bk_done_batch) where bk_done_batch is not null;
select pg_catalog.pg_extension_config_dump('pgque.blocked_key', '');

-- A policy name, checked: 'skip' or 'pause'.
create function pgque._check_failure_policy(i_policy text)
returns text language plpgsql immutable as $$
begin
    perform pgque._check_not_null('failure_policy', i_policy);
    if i_policy not in ('skip', 'pause') then
        raise exception 'unknown failure policy "%"',
              case when pg_catalog.octet_length(i_policy) <= 32 then i_policy
                   else pg_catalog.left(i_policy, 16) || '...' end
            using errcode = 'invalid_parameter_value',
                  hint = 'Use ''skip'' (a failed event is retried, later events of its key may pass it) '
                         'or ''pause'' (later events of its key wait for it).';
    end if;
    return i_policy;
end $$;

-- Whether a partitioned consumer pauses keys (NULL: none, it does not).
create function pgque._pauses(i_pc pgque.partition_consumer)
returns boolean language sql immutable as $$
    select coalesce(i_pc.failure_policy operator(pg_catalog.=) 'pause', false)
$$;

create function pgque._slot_pauses(i_queue_id int4, i_consumer text)
returns boolean language sql stable as $$
    select pgque._pauses((select pc from pgque.partition_consumer pc
                           where pc.queue_id operator(pg_catalog.=) i_queue_id
                             and pc.co_name operator(pg_catalog.=) i_consumer))
$$;

-- subscribe_slot(queue, consumer, slot, n, failure_policy): subscribe_slot,
-- then set the consumer's failure policy (NULL: leave it as it is).
create function pgque.subscribe_slot(queue_name text, consumer_name text, slot int4, n int4,
                                     failure_policy text)
returns void language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
begin
    if failure_policy is not null then
        perform pgque._check_failure_policy(failure_policy);
    end if;
    perform pgque.subscribe_slot(queue_name, consumer_name, slot, n);
    if failure_policy is not null then
        perform pgque.set_failure_policy(queue_name, consumer_name, failure_policy);
    end if;
end $$;

-- The failure policy of a partitioned consumer.
create function pgque.get_failure_policy(queue_name text, consumer_name text)
returns text language plpgsql stable security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    q  pgque.queue;
begin
    q := pgque._queue(queue_name);
    perform pgque._partitioned(q, consumer_name, null, 0);
    return (select pc.failure_policy from pgque.partition_consumer pc
             where pc.queue_id = q.queue_id and pc.co_name = consumer_name);
end $$;

-- set_failure_policy(queue, consumer, policy) -> the previous policy.
-- 'pause' -> 'skip' releases every blocked key of the consumer first (its
-- withheld events are appended again), so nothing is lost; it waits for the
-- slots' open batches (their transactions) to end.
create function pgque.set_failure_policy(queue_name text, consumer_name text, failure_policy text)
returns text language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    q    pgque.queue;
    pc   pgque.partition_consumer;
    k    record;
begin
    q := pgque._queue(queue_name);
    perform pgque._check_failure_policy(failure_policy);
    perform pgque._partitioned(q, consumer_name, null, 0);
    select * into pc from pgque.partition_consumer p
     where p.queue_id = q.queue_id and p.co_name = consumer_name for update;
    -- a change is the owner's act, not a user's (ADR 0058)
    if pc.failure_policy <> set_failure_policy.failure_policy then
        perform pgque._authorize(pc.owner, null, q.queue_id, consumer_name);
    end if;
    if pc.failure_policy = 'pause' and failure_policy = 'skip' then
        -- the slots' receive locks: a batch received under pause (its
        -- withheld events left out) is acked before its keys are released
        perform from pgque.slot_batch b
          join pgque.subscription s on s.sub_id = b.sb_sub
          join pgque.consumer c on c.co_id = s.sub_consumer
         where s.sub_queue = q.queue_id
           and c.co_name like pgque._like_escape(consumer_name) || '#%/' || pc.n
           for update of b;
        for k in select s.sub_id, c.co_name as sub_name,
                        array(select b.bk_key from pgque.blocked_key b where b.bk_sub = s.sub_id) as keys
                   from pgque.subscription s
                   join pgque.consumer c on c.co_id = s.sub_consumer
                  where s.sub_queue = q.queue_id
                    and c.co_name like pgque._like_escape(consumer_name) || '#%/' || pc.n
                  order by s.sub_id loop
            perform pgque._pause_release(k.sub_id, k.keys, pc.n,
                                         pg_catalog.split_part(pg_catalog.split_part(k.sub_name, '#', 2), '/', 1)::int4,
                                         null, true);
        end loop;
    end if;
    update pgque.partition_consumer p set failure_policy = set_failure_policy.failure_policy
     where p.queue_id = q.queue_id and p.co_name = consumer_name;
    return pc.failure_policy;
end $$;

-- Where a slot's cursor is now: the tick its newest epoch acked, and the
-- position inside the open window after it (NULL: none handed out and
-- acked).  The events of the slot at or before it were passed.
create function pgque._slot_passed(i_sub int4, out tick bigint, out pos bigint, out next_tick bigint)
language plpgsql stable as $$
declare
    s  pgque.subscription;
    r  pgque.slot_batch;
begin
    select * into s from pgque.subscription where sub_id = i_sub;
    select * into r from pgque.slot_batch b where b.sb_sub = i_sub order by b.sb_epoch desc limit 1;
    tick := pgque._slot_cursor(s);
    if r.sb_last_tick = tick and r.sb_batch is not null and r.sb_pos is not null then
        pos := r.sb_pos;
        next_tick := r.sb_next_tick;
    end if;
end $$;

-- The events of slot i_slot of subscription i_sub in its windows from tick
-- i_from to tick i_to, plus those of window (i_to, i_next] up to ev_id
-- i_pos: what the slot passed.  Retried copies (ev_owner = the slot) and
-- the originals both: a caller keeps one per ev_id.
create function pgque._pause_passed_rows(i_sub int4, i_n int4, i_slot int4,
                                         i_from bigint, i_to bigint, i_pos bigint, i_next bigint)
returns setof pgque.event_template language plpgsql as $$
declare
    q   pgque.queue;
    lo  pg_catalog.pg_snapshot;
    hi  pg_catalog.pg_snapshot;
    nx  pg_catalog.pg_snapshot;
begin
    select qq.* into q from pgque.queue qq join pgque.subscription s on s.sub_queue = qq.queue_id
     where s.sub_id = i_sub;
    select t.tick_snapshot into lo from pgque.tick t where t.tick_queue = q.queue_id and t.tick_id = i_from;
    select t.tick_snapshot into hi from pgque.tick t where t.tick_queue = q.queue_id and t.tick_id = i_to;
    if lo is null or hi is null then
        -- rotation and tick cleanup keep these ticks (ADR 0029): never here
        raise exception 'tick % or % of a blocked key of subscription % is missing', i_from, i_to, i_sub
            using errcode = 'internal_error';
    end if;
    if i_to > i_from then
        return query
            select e.* from pgque._window_rows(pgque._event_source(q, lo, hi, i_n, i_slot),
                                               pg_catalog.pg_snapshot_xmax(lo), pg_catalog.pg_snapshot_xmax(hi),
                                               array(select pg_catalog.pg_snapshot_xip(lo)), hi, i_sub,
                                               null, null, null, i_n, i_slot) e;
    end if;
    if i_pos is not null then
        select t.tick_snapshot into nx from pgque.tick t where t.tick_queue = q.queue_id and t.tick_id = i_next;
        return query
            select e.* from pgque._window_rows(pgque._event_source(q, hi, nx, i_n, i_slot),
                                               pg_catalog.pg_snapshot_xmax(hi), pg_catalog.pg_snapshot_xmax(nx),
                                               array(select pg_catalog.pg_snapshot_xip(hi)), nx, i_sub,
                                               null, null, null, i_n, i_slot) e
             where e.ev_id <= i_pos;
    end if;
end $$;

-- Release blocked keys i_keys of slot subscription i_sub: their withheld
-- events that the slot passed (above each key's head, in the windows since
-- the oldest of their ticks: one read for all of them) are appended again
-- for this slot (as a retry is, with their retry count unchanged, now, in
-- ev_id order); per key the largest becomes the head (draining) and
-- bk_tick the slot's cursor; a key with none is unblocked.  i_epoch: the
-- caller's lease epoch row gives the cursor (NULL: the slot's newest).
-- i_drop: re-queue and forget the keys (set_failure_policy skip).
-- -> events re-queued.
create function pgque._pause_release(i_sub int4, i_keys text[], i_n int4, i_slot int4, i_epoch bigint,
                                     i_drop boolean default false)
returns int4 language plpgsql as $$
declare
    r      pgque.slot_batch;
    lo     bigint;
    ptick  bigint;
    ppos   bigint;
    pnext  bigint;
    n      int4;
begin
    select pg_catalog.min(k.bk_tick) into lo
      from (select b.bk_tick from pgque.blocked_key b
             where b.bk_sub = i_sub and b.bk_key = any(i_keys) for update) k;
    if lo is null then
        return 0;
    end if;
    if i_epoch is not null then
        select * into r from pgque.slot_batch where sb_sub = i_sub and sb_epoch = i_epoch;
        ptick := r.sb_last_tick;
        if r.sb_batch is not null then
            ppos := r.sb_pos;
            pnext := r.sb_next_tick;
        end if;
    else
        select x.tick, x.pos, x.next_tick into ptick, ppos, pnext from pgque._slot_passed(i_sub) x;
    end if;
    -- the copies land after the slot's cursor, for an old-layout slot of a
    -- draining resize possibly after the boundary, which it never reads:
    -- they go where a retry of the key goes (_retry_owner: the key's new
    -- slot; the marker stays here, withholding the key's later events up
    -- to the boundary, and the switch moves it: ADR 0038).  The queue's
    -- DDL lock, shared, as the retry mover holds it: a resize takes it
    -- exclusively before its boundary tick, so these copies either commit
    -- before B (the old slot reads them) or see the resize.
    perform pgque._queue_share_wait((select s.sub_queue from pgque.subscription s where s.sub_id = i_sub));
    -- the producers' insert (C: it routes rows to partition buckets), in
    -- ev_id order, in this transaction: one window, handed out in order
    with w as materialized (
        -- one row per event: its original or the slot's retry copy (same
        -- columns), never one of two events an admin gave one id (ADR 0113)
        select distinct on (e.ev_id, e.ev_type, e.ev_data, e.ev_extra1, e.ev_extra2, e.ev_extra3, e.ev_extra4) e.*
          from pgque._pause_passed_rows(i_sub, i_n, i_slot, lo, ptick, ppos, pnext) e
          join pgque.blocked_key k on k.bk_sub = i_sub and k.bk_key = e.ev_extra1 and e.ev_id > k.bk_head
         where k.bk_key = any(i_keys)
         order by e.ev_id, e.ev_type, e.ev_data, e.ev_extra1, e.ev_extra2, e.ev_extra3, e.ev_extra4,
                  (e.ev_owner is null)),
    ins as (
        select count(pgque._insert_event(q.queue_name, w2.ev_id, w2.ev_time,
                                         pgque._retry_owner(i_sub, w2.ev_extra1), w2.ev_retry,
                                         w2.ev_type, w2.ev_data, w2.ev_extra1, w2.ev_extra2,
                                         w2.ev_extra3, w2.ev_extra4, false))::int4 as cnt
          from (select * from w order by w.ev_id) w2,
               pgque.subscription s join pgque.queue q on q.queue_id = s.sub_queue
         where s.sub_id = i_sub),
    tops as (
        select w.ev_extra1 as key, pg_catalog.max(w.ev_id) as top from w group by w.ev_extra1),
    upd as (
        update pgque.blocked_key b
           set bk_head = t.top, bk_tick = ptick, bk_done_batch = null, bk_draining = true
          from tops t
         where not i_drop and b.bk_sub = i_sub and b.bk_key = t.key),
    del as (
        delete from pgque.blocked_key b
         where b.bk_sub = i_sub and b.bk_key = any(i_keys)
           and (i_drop or not exists (select from tops t where t.key = b.bk_key)))
    select ins.cnt into n from ins;
    return n;
end $$;

-- After a nack on a pausing slot: block the event's key (NULL key: no).
-- The event's row is read from the batch (the caller's copy is not
-- trusted); it went to the retry queue, or to the dead-letter queue (then
-- the head is done: this batch's ack releases the key).
create function pgque._pause_on_nack(s pgque.subscription, i_ev_id bigint, i_n int4, i_slot int4)
returns void language plpgsql as $$
declare
    e     pgque.event_template;
    done  bigint;
begin
    select * into e from pgque._batch_rows(s.sub_batch, 1, i_ev_id, i_n, i_slot);
    if e.ev_extra1 is null then
        return;
    end if;
    if not exists (select from pgque.retry_queue r where r.ev_owner = s.sub_id and r.ev_id = i_ev_id) then
        done := s.sub_batch;
    end if;
    insert into pgque.blocked_key as k (bk_sub, bk_key, bk_head, bk_tick, bk_done_batch)
    values (s.sub_id, e.ev_extra1, i_ev_id, s.sub_last_tick, done)
    on conflict (bk_sub, bk_key) do update
       set bk_head = least(k.bk_head, excluded.bk_head),
           bk_tick = least(k.bk_tick, excluded.bk_tick),
           bk_done_batch = case when excluded.bk_head <= k.bk_head then excluded.bk_done_batch
                                else k.bk_done_batch end,
           bk_draining = k.bk_draining and excluded.bk_head > k.bk_head;
end $$;

-- After a pausing slot finished part i_batch of its window (its ack, or
-- receive's finish of a part whose events were all withheld): release the
-- keys whose head was done in it, once the whole window is passed.  A part
-- before the window's last carries their mark to the next part's batch id
-- instead: the rest of the window may hold events of the key with smaller
-- ids than events passed before it (a resize's copies, a retry: each keeps
-- its ev_id, ADR 0038), and a release now would copy the passed ones and
-- let those through ahead of the copies (ADR 0141).  No key done in it:
-- nothing read but that.  -> keys released.
create function pgque._pause_after_ack(i_sub int4, i_batch bigint, i_epoch bigint, i_n int4, i_slot int4)
returns int4 language plpgsql as $$
declare
    keys text[];
    nxt  bigint;
begin
    if not exists (select from pgque.blocked_key b where b.bk_sub = i_sub and b.bk_done_batch = i_batch) then
        return 0;
    end if;
    select r.sb_batch into nxt from pgque.slot_batch r where r.sb_sub = i_sub and r.sb_epoch = i_epoch;
    if nxt is not null then
        update pgque.blocked_key b set bk_done_batch = nxt
         where b.bk_sub = i_sub and b.bk_done_batch = i_batch;
        return 0;
    end if;
    keys := array(select b.bk_key from pgque.blocked_key b
                   where b.bk_done_batch = i_batch and b.bk_sub = i_sub);
    perform pgque._pause_release(i_sub, keys, i_n, i_slot, i_epoch);
    return pg_catalog.cardinality(keys);
end $$;

-- receive's finish of a pausing slot's part whose events were all withheld
-- (src/receive.c): the finish, then what an ack of it does for the keys
-- done in it (_pause_after_ack).  -> 1 / 0 (not that row's open batch).
create function pgque._pause_finish(i_batch bigint, i_sub int4, i_epoch bigint, i_n int4, i_slot int4)
returns int4 language plpgsql as $$
begin
    if pgque._slot_finish(i_batch, i_sub, i_epoch) = 0 then
        return 0;
    end if;
    perform pgque._pause_after_ack(i_sub, i_batch, i_epoch, i_n, i_slot);
    return 1;
end $$;

-- A takeover's epoch made a row of its own at another epoch's place in
-- the window, under a new batch id (_slot_batch_row: a frozen owner holds
-- that epoch's row): the done marks naming a batch of the slot's earlier
-- epochs follow it to i_batch.  A mark carried to a part not yet acked
-- (ADR 0141) names the frozen owner's batch, which nobody acks: its key
-- would stay blocked for good (second reader, isolation
-- attack12_pause_carry_takeover).  A mark the frozen owner holds is waited
-- for at most a second (lock_not_available: receive again later, as
-- _receive_paused).
create function pgque._pause_follow(i_sub int4, i_epoch bigint, i_batch bigint)
returns void language plpgsql set lock_timeout = '1s' as $$
begin
    update pgque.blocked_key b set bk_done_batch = i_batch
     where b.bk_sub = i_sub
       and b.bk_done_batch in (select x.sb_batch from pgque.slot_batch x
                                where x.sb_sub = i_sub and x.sb_epoch < i_epoch and x.sb_batch is not null);
exception when lock_not_available then
    raise exception 'a blocked key of slot subscription % is held by another open transaction', i_sub
        using errcode = 'lock_not_available',
              detail = 'A worker that held the slot before (now fenced) changed it in a transaction that is still open.',
              hint = 'Receive again later: the slot takes the key over once that transaction ends.';
end $$;

-- PgQ's primitives that retry or dead-letter one event bypass the markers:
-- refused on the batches of pausing slots.
create function pgque._pause_refuse_primitive(s pgque.subscription, i_func text)
returns void language plpgsql as $$
begin
    if exists (select from pgque.consumer c
                join pgque.partition_consumer pc on pc.queue_id = s.sub_queue
                 and c.co_name like pgque._like_escape(pc.co_name) || '#%'
               where c.co_id = s.sub_consumer and pc.failure_policy = 'pause') then
        raise exception '%() cannot be used on a batch of a partitioned consumer with failure policy pause', i_func
            using errcode = 'feature_not_supported',
                  hint = 'Use pgque.nack_partitioned(): it blocks the key.';
    end if;
end $$;

create function pgque._like_escape(i_text text)
returns text language sql immutable as $$
    select pg_catalog.replace(pg_catalog.replace(pg_catalog.replace(i_text, '\', '\\'), '%', '\%'), '_', '\_')
$$;

-- One row per blocked key of the partitioned consumers the caller may use.
create function pgque.get_blocked_keys(
    out queue_name text, out consumer text, out slot int4, out n int4, out partition_key text,
    out head_ev_id bigint, out state text, out blocked_since timestamptz, out blocked_seconds numeric)
returns setof record language sql stable security definer
set search_path = pgque, pg_catalog, pg_temp as $$
    select q.queue_name, pc.co_name,
           pg_catalog.split_part(pg_catalog.split_part(c.co_name, '#', 2), '/', 1)::int4, pc.n,
           b.bk_key, b.bk_head, case when b.bk_draining then 'draining' else 'failed' end,
           b.bk_since, round(extract(epoch from pg_catalog.clock_timestamp() - b.bk_since)::numeric, 1)
      from pgque.blocked_key b
      join pgque.subscription s on s.sub_id = b.bk_sub
      join pgque.queue q on q.queue_id = s.sub_queue
      join pgque.consumer c on c.co_id = s.sub_consumer
      join pgque.partition_consumer pc on pc.queue_id = q.queue_id
       and pc.co_name = pg_catalog.split_part(c.co_name, '#', 1)
     where pgque._may_use(pc.owner, pc.users)
     order by 1, 2, 3, 5
$$;

create view pgque.blocked_keys as
    select * from pgque.get_blocked_keys();

-- key_blocked alerts (ADR 0029): one per slot holding a key blocked longer
-- than i_after (pgque_bgw.key_blocked_after; NULL: none).
create function pgque._pause_alert_conditions(
    i_after interval default pgque._guc_interval('pgque_bgw.key_blocked_after'))
returns setof pgque.alert_condition language sql stable
set search_path = pgque, pg_catalog, pg_temp as $$
    select 'key_blocked'::text, x.queue_name || '/' || x.consumer || '/' || x.slot,
           x.queue_name, x.consumer, x.slot,
           pg_catalog.jsonb_build_object(
               'keys_blocked', count(*),
               'oldest_key', (pg_catalog.array_agg(x.partition_key order by x.blocked_since, x.partition_key))[1],
               'oldest_head_ev_id', (pg_catalog.array_agg(x.head_ev_id order by x.blocked_since, x.partition_key))[1],
               'blocked_since', pg_catalog.min(x.blocked_since),
               'blocked_seconds', pg_catalog.max(x.blocked_seconds))
      from pgque.get_blocked_keys() x
     where x.blocked_since < pg_catalog.clock_timestamp() - i_after
     group by x.queue_name, x.consumer, x.slot
$$;

-- key_state_orphaned (ADR 0038): state of a partitioned consumer that no
-- slot will ever read, so that the events it stands for would be lost
-- without a word.  Exact and cheap: it reads the markers, the retry queue
-- and the resizes, never an event table.  One condition per consumer
-- (subject queue/consumer), or per queue for retries whose owner is gone:
--  - no_layout: a blocked key on a subscription that is not a slot of its
--    consumer's layout (n), or of a consumer that does not pause: no
--    receive withholds for it, no ack releases it;
--  - switch_pending: a blocked key or a retry of an old-layout slot of a
--    drained resize that has not switched (the old slot reads nothing past
--    the boundary, only the switch moves them; the watchdog tried the
--    switch in this pass);
--  - owner_gone: a retry whose subscription is gone.
create function pgque._pause_orphan_conditions()
returns setof pgque.alert_condition language sql stable
set search_path = pgque, pg_catalog, pg_temp as $$
    with slots as materialized (
        select s.sub_id, s.sub_queue, c.co_name,
               pg_catalog.split_part(c.co_name, '#', 1) as base,
               pg_catalog.split_part(pg_catalog.split_part(c.co_name, '#', 2), '/', 2) as n_text
          from pgque.subscription s join pgque.consumer c on c.co_id = s.sub_consumer
         where s.sub_id in (select b.bk_sub from pgque.blocked_key b
                            union select rq.ev_owner from pgque.retry_queue rq)),
    drained as materialized (
        select o.sub_id from pgque.partition_resize r, pg_catalog.unnest(r.old_subs) o(sub_id)
         where o.sub_id is not null and pgque._resize_drained(r)
           -- drained at an earlier watchdog pass already, and still not
           -- switched: a switch that waits for a lock is not orphaned state
           and r.drained_seen_at < pg_catalog.now()),
    st as (
        select sl.sub_queue as queue_id, sl.base as consumer,
               case when sl.sub_id in (select d.sub_id from drained d) then 'switch_pending'
                    when pc.co_name is null or pc.failure_policy <> 'pause'
                         or sl.n_text is distinct from pc.n::text then 'no_layout' end as reason,
               b.bk_key as key, 1 as keys, 0 as retries
          from pgque.blocked_key b
          join slots sl on sl.sub_id = b.bk_sub
          left join pgque.partition_consumer pc on pc.queue_id = sl.sub_queue and pc.co_name = sl.base
        union all
        select sl.sub_queue, sl.base, 'switch_pending', rq.ev_extra1, 0, 1
          from pgque.retry_queue rq join slots sl on sl.sub_id = rq.ev_owner
         where sl.sub_id in (select d.sub_id from drained d)
        union all
        select rq.ev_queue, null, 'owner_gone', rq.ev_extra1, 0, 1
          from pgque.retry_queue rq
         where not exists (select from pgque.subscription s where s.sub_id = rq.ev_owner))
    select 'key_state_orphaned'::text, q.queue_name || coalesce('/' || x.consumer, ''),
           q.queue_name, x.consumer, null::int4,
           pg_catalog.jsonb_build_object(
               'reasons', pg_catalog.array_agg(distinct x.reason order by x.reason),
               'blocked_keys', pg_catalog.sum(x.keys), 'retries', pg_catalog.sum(x.retries),
               'example_key', pg_catalog.min(x.key))
      from st x join pgque.queue q on q.queue_id = x.queue_id
     where x.reason is not null
     group by q.queue_name, x.consumer
$$;

-- The oldest tick a queue's blocked keys hold (NULL: none): rotation, tick
-- cleanup and the restore checks treat it as a cursor (ADR 0029).
create function pgque._blocked_ticks(i_queue_id int4)
returns setof bigint language sql stable as $$
    select b.bk_tick from pgque.blocked_key b
      join pgque.subscription s on s.sub_id operator(pg_catalog.=) b.bk_sub
     where s.sub_queue operator(pg_catalog.=) i_queue_id
$$;

-- The receive of a pausing slot (src/receive.c, for its open batch):
-- as _receive's read, but the events of a blocked key past its head are
-- withheld (not handed out: the ack passes them, the key's release reads
-- them again), and a head handed out that is not waiting in the retry
-- queue any more marks its key done in this batch.  NULL keys never block.
-- The batch is i_batch of the epoch's row by its key, subscription i_sub
-- and lease epoch i_epoch, which the receive's open returned: slot_batch
-- has no index on sb_batch (ADR 0130), and the key reads one row where
-- the id alone scanned the table twice (ADR 0139).  Another epoch's or
-- subscription's key, or another batch id: nothing.
-- The mark of a key done updates its blocked_key row, which a fenced
-- owner frozen after its own read of the head may still hold (its
-- transaction open): a takeover never waits for the previous owner, so
-- the read waits at most a second, as _slot_nack_event, and fails with
-- lock_not_available; the new owner receives again later (TAP 169).
create function pgque._receive_paused(i_batch bigint, i_sub int4, i_epoch bigint,
                                      i_max_return int4, i_n int4, i_slot int4)
returns setof pgque.message language plpgsql set lock_timeout = '1s' as $$
begin
    return query
        with part as materialized (
            select e.*
              from pgque.slot_batch sb
             cross join lateral pgque._slot_row_window(sb) w
             cross join lateral pgque._window_source(w.queue_id, w.lo, w.hi, i_n, i_slot) src(source)
             cross join lateral
                   pgque._window_rows(src.source, w.lo_xmax, w.hi_xmax, w.lo_xip, w.hi, w.sub_id,
                                      w.pos, null, least(i_max_return::int8 + 1, 2147483647)::int4,
                                      i_n, i_slot)
                   with ordinality as e(ev_id, ev_time, ev_txid, ev_owner, ev_retry, ev_type, ev_data,
                                        ev_extra1, ev_extra2, ev_extra3, ev_extra4, rn)
             where sb.sb_sub = i_sub and sb.sb_epoch = i_epoch and sb.sb_batch = i_batch),
        m as (
            select case when pg_catalog.max(rn) > i_max_return
                        then pg_catalog.max(ev_id) filter (where rn = i_max_return) end as last
              from part),
        mark_slot as (
            update pgque.slot_batch sb
               set sb_last = m.last
              from m
             where sb.sb_sub = i_sub and sb.sb_epoch = i_epoch and sb.sb_batch = i_batch
               and sb.sb_last is distinct from m.last),
        -- one index probe per event (a scalar subquery: never a scan of
        -- every blocked key of the slot, however many there are)
        -- the part: i_max_return rows and the other rows of the last
        -- one's id (the read comes WITH TIES): the next part resumes after
        -- that id, so a part never ends between two events of one id
        -- (ADR 0105)
        give as materialized (
            select p.*, (select k.bk_head from pgque.blocked_key k
                          where k.bk_sub = i_sub and k.bk_key = p.ev_extra1) as bk_head
              from part p, m
             where m.last is null or p.ev_id <= m.last),
        done as (
            update pgque.blocked_key k
               set bk_done_batch = i_batch
              from (select o.ev_extra1, o.ev_id from give o where o.ev_id = o.bk_head) h
             where k.bk_sub = i_sub and k.bk_key = h.ev_extra1 and k.bk_head = h.ev_id
               and k.bk_done_batch is distinct from i_batch
               and not exists (select from pgque.retry_queue r where r.ev_owner = i_sub and r.ev_id = h.ev_id))
        select o.ev_id, i_batch, o.ev_type, o.ev_data, o.ev_retry, o.ev_time,
               o.ev_extra1, o.ev_extra2, o.ev_extra3, o.ev_extra4
          from give o
         where o.bk_head is null or o.ev_id <= o.bk_head
         order by o.rn;
end $$;
