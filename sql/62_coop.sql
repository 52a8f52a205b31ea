-- Cooperative consumers (PgQue's subconsumers; ADR 0017): a pool of members
-- shares one logical consumer's cursor, window by window.  The group is the
-- subscription of the logical consumer (sub_role 'coop_main'); its windows
-- are rows of pgque.coop_window, cut when the queue ticks and taken by
-- members with SKIP LOCKED, so members never wait for each other; a window
-- is finished by deleting its row, and the group cursor (sub_last_tick)
-- follows the oldest window left.  Member heartbeats live in shared memory
-- (src/coop.c).

create function pgque._coop_touch(i_sub int4, i_member text, i_batch bigint)
returns void language c volatile as 'MODULE_PATHNAME', 'pgque_coop_touch';
create function pgque._coop_seen(i_sub int4, i_member text)
returns timestamptz language c volatile as 'MODULE_PATHNAME', 'pgque_coop_seen';
create function pgque._coop_forget(i_sub int4, i_member text)
returns int4 language c volatile as 'MODULE_PATHNAME', 'pgque_coop_forget';
-- entries of the member table, every database (src/coop.c)
create function pgque._coop_member_count_all()
returns int4 language c volatile as 'MODULE_PATHNAME', 'pgque_coop_count_all';
create function pgque._coop_members(out sub_id int4, out member text, out last_seen timestamptz,
                                    out batch bigint, out polls bigint)
returns setof record language c volatile as 'MODULE_PATHNAME', 'pgque_coop_members';

-- The lock of one member (ADR 0040): the extension's lock on
-- (pgque.coop_member, 48 bits of a hash of the group and the member), so
-- that it never meets another member's in practice, and no role outside
-- the extension can take it.
create function pgque._coop_member_lock(i_sub int4, i_member text)
returns void language sql volatile as $$
    select pgque._lock('pgque.coop_member'::pg_catalog.regclass,
                       pg_catalog.hashtextextended('pgque coop member ' || i_sub::text || '/' || i_member, 0)
                         operator(pg_catalog.&) 281474976710655, true, true)
$$;

-- The most members one group may have: bounds the shared-memory table per
-- consumer (src/coop.c holds 4096 members in all).
create function pgque._coop_max_members()
returns int4 language sql immutable as $$ select 256 $$;

-- Names of a cooperative call: queue, consumer, subconsumer (PgQue forbids a
-- dot in either part: members are shown as <consumer>.<subconsumer>).
create function pgque._coop_names(i_queue text, i_consumer text, i_subconsumer text)
returns void language plpgsql as $$
begin
    perform pgque._check_name('queue', i_queue, @PGQUE_QUEUE_NAME_MAX@);
    perform pgque._user_consumer_name(i_consumer);
    perform pgque._check_name('subconsumer', i_subconsumer, @PGQUE_COOP_NAME_MAX@);
    if pg_catalog.strpos(i_consumer, '.') > 0 then
        raise exception 'cooperative consumer name must not contain dot: %', i_consumer
            using errcode = 'invalid_name';
    end if;
    if pg_catalog.strpos(i_subconsumer, '.') > 0 then
        raise exception 'cooperative subconsumer name must not contain dot: %', i_subconsumer
            using errcode = 'invalid_name';
    end if;
end $$;

-- The group's main subscription (no lock), NULL when the consumer is not
-- subscribed or not cooperative.
create function pgque._coop_group(q pgque.queue, i_consumer text)
returns pgque.subscription language sql stable as $$
    select s.* from pgque.subscription s join pgque.consumer c on c.co_id = s.sub_consumer
     where s.sub_queue = q.queue_id and c.co_name = i_consumer and s.sub_role = 'coop_main'
$$;

-- Advance the group cursor over the finished windows and cut the windows
-- of ticks past the high-water mark.  The main row is taken with SKIP
-- LOCKED: when someone else holds it (another member's advance, the
-- ticker), this does nothing and the next call catches up.  -> windows cut,
-- or -1 when the row was busy.
-- A group's cursor: the start of its oldest window not finished, or its
-- high-water mark i_hw when none is open; never before i_last (its cursor
-- now).  No window starts before the cursor: the bound lets the index scan
-- skip the entries of windows finished (deleted) since the last vacuum.
-- The one rule of _coop_sync and of _coop_maint_due.
create function pgque._coop_low_water(i_sub int4, i_last bigint, i_hw bigint)
returns bigint language sql stable as $$
    select greatest(coalesce(pg_catalog.min(w.cw_prev_tick), i_hw), i_last)
      from pgque.coop_window w
     where w.cw_sub operator(pg_catalog.=) i_sub and w.cw_prev_tick operator(pg_catalog.>=) i_last
$$;

create function pgque._coop_sync(i_sub int4)
returns int4 language plpgsql as $$
declare
    g    pgque.subscription;
    hw   bigint;
    n    int4;
    pos  bigint;
begin
    select * into g from pgque.subscription
     where sub_id = i_sub and sub_role = 'coop_main'
       for no key update skip locked;
    if not found then
        return -1;
    end if;
    -- one window per tick interval past the high-water mark (at most 1000
    -- per call: a group converted far behind catches up over several)
    with t as (
        select tick_id, pg_catalog.lag(tick_id) over (order by tick_id) as prev
          from (select tick_id from pgque.tick
                 where tick_queue = g.sub_queue and tick_id >= g.sub_coop_hw
                 order by tick_id limit 1001) x),
    ins as (
        insert into pgque.coop_window (cw_sub, cw_prev_tick, cw_next_tick)
        select g.sub_id, t.prev, t.tick_id from t where t.prev is not null
        on conflict do nothing
        returning cw_next_tick)
    select count(*), max(cw_next_tick) into n, hw from ins;
    hw := greatest(g.sub_coop_hw, hw);
    pos := pgque._coop_low_water(g.sub_id, g.sub_last_tick, hw);
    if hw is distinct from g.sub_coop_hw or pos is distinct from g.sub_last_tick then
        update pgque.subscription set sub_coop_hw = hw, sub_last_tick = pos where sub_id = g.sub_id;
    end if;
    return n;
end $$;

-- Finish a member's window: its row goes; when it was the group's oldest,
-- the group cursor moves.  -> 1 / 0 unknown.
create function pgque._coop_finish(i_batch bigint)
returns int4 language plpgsql as $$
declare
    w    pgque.coop_window;
begin
    delete from pgque.coop_window where cw_batch = i_batch returning * into w;
    if not found then
        return 0;
    end if;
    if w.cw_prev_tick <= (select sub_last_tick from pgque.subscription where sub_id = w.cw_sub) then
        perform pgque._coop_sync(w.cw_sub);
    end if;
    return 1;
end $$;

-- Register a member (and the group, when it does not exist yet).
-- -> 1 new member or group / 0 both existed.
create function pgque._coop_register(q pgque.queue, i_consumer text, i_subconsumer text,
                                     i_convert_normal boolean)
returns int4 language plpgsql as $$
declare
    s        pgque.subscription;
    created  int4 := 0;
    n        int4;
begin
    if exists (select 1 from pgque.partition_consumer pc
                where pc.queue_id = q.queue_id and pc.co_name = i_consumer) then
        raise exception 'consumer "%" of queue "%" is a partitioned consumer', i_consumer, q.queue_name
            using errcode = 'wrong_object_type',
                  detail = 'A consumer is either partitioned (ordered per key) or cooperative (no order), not both.',
                  hint = 'Use another consumer name for the cooperative group.';
    end if;
    s := pgque._subscription_row(q, i_consumer, true);
    if s.sub_id is null then
        created := pgque._register(q, i_consumer, null);
        s := pgque._subscription_row(q, i_consumer, true);
        if s.sub_role = 'normal' and created = 1 then
            update pgque.subscription set sub_role = 'coop_main', sub_coop_hw = sub_last_tick
             where sub_id = s.sub_id returning * into s;
        end if;
    end if;
    perform pgque._authorize(s.sub_owner, s.sub_users, q.queue_id, i_consumer);
    if s.sub_role = 'normal' then
        if not i_convert_normal then
            raise exception 'consumer % on queue % is already a normal consumer; explicit conversion is required',
                  i_consumer, q.queue_name
                using errcode = 'object_not_in_prerequisite_state',
                      hint = 'Pass convert_normal => true to make it a cooperative group.';
        end if;
        -- members join a group as its users may; turning a plain consumer
        -- into a group is the owner's act (ADR 0058)
        perform pgque._authorize(s.sub_owner, null, q.queue_id, i_consumer);
        if s.sub_batch is not null then
            raise exception 'cannot convert active normal consumer % on queue % to cooperative main',
                  i_consumer, q.queue_name
                using errcode = 'object_not_in_prerequisite_state',
                      hint = 'Ack its open batch first.';
        end if;
        update pgque.subscription set sub_role = 'coop_main', sub_coop_hw = sub_last_tick
         where sub_id = s.sub_id returning * into s;
        created := 1;
    end if;
    if not exists (select 1 from pgque.coop_member where cm_sub = s.sub_id and cm_name = i_subconsumer) then
        perform pgque._check_new_name('subconsumer', i_subconsumer);
    end if;
    if not exists (select 1 from pgque.coop_member where cm_sub = s.sub_id and cm_name = i_subconsumer)
       and (select count(*) from pgque.coop_member where cm_sub = s.sub_id) >= pgque._coop_max_members() then
        raise exception 'cooperative consumer %/% has % members already', q.queue_name, i_consumer,
              pgque._coop_max_members()
            using errcode = 'program_limit_exceeded',
                  hint = 'Unregister members that are gone with pgque.unregister_subconsumer().';
    end if;
    insert into pgque.coop_member (cm_sub, cm_name) values (s.sub_id, i_subconsumer)
    on conflict do nothing;
    get diagnostics n = row_count;
    return greatest(created, n);
end $$;

-- The subscription row of (queue, consumer), optionally locked; all NULL
-- when there is none.
create function pgque._subscription_row(q pgque.queue, i_consumer text, i_lock boolean)
returns pgque.subscription language plpgsql as $$
declare
    s pgque.subscription;
begin
    if i_lock then
        select sub.* into s from pgque.subscription sub join pgque.consumer c on c.co_id = sub.sub_consumer
         where sub.sub_queue = q.queue_id and c.co_name = i_consumer
           for no key update of sub;
    else
        select sub.* into s from pgque.subscription sub join pgque.consumer c on c.co_id = sub.sub_consumer
         where sub.sub_queue = q.queue_id and c.co_name = i_consumer;
    end if;
    return s;
end $$;

create function pgque.register_subconsumer(i_queue text, i_consumer text, i_subconsumer text,
                                           i_convert_normal boolean default false)
returns int4 language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
begin
    perform pgque._coop_names(i_queue, i_consumer, i_subconsumer);
    perform pgque._check_not_null('convert_normal', i_convert_normal);
    return pgque._coop_register(pgque._queue(i_queue), i_consumer, i_subconsumer, i_convert_normal);
end $$;

create function pgque.subscribe_subconsumer(i_queue text, i_consumer text, i_subconsumer text,
                                            i_convert_normal boolean default false)
returns int4 language sql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
    select pgque.register_subconsumer(i_queue, i_consumer, i_subconsumer, i_convert_normal)
$$;

-- The group of a member, for a call by that member: the group must exist
-- and the caller may use it; with i_register a missing group or member is
-- registered (receive_coop's cold start), else it is an error.  The caller
-- is authorized before the member is looked up: a role that may not use
-- the group learns nothing of its members.
create function pgque._coop_member_group(i_queue text, i_consumer text, i_subconsumer text,
                                         i_register boolean)
returns pgque.subscription language plpgsql as $$
declare
    q  pgque.queue;
    g  pgque.subscription;
begin
    q := pgque._queue(i_queue);
    g := pgque._coop_group(q, i_consumer);
    if g.sub_id is not null then
        perform pgque._authorize(g.sub_owner, g.sub_users, g.sub_queue, i_consumer);
    else
        perform pgque._check_queue_right(q, 'subscribe');
    end if;
    -- an unlogged queue that lost its events and is not reset yet is
    -- refused (ADR 0068, 0089), to a caller that may subscribe to the queue
    perform pgque._unlogged_ready(q);
    if g.sub_id is null or not exists (select 1 from pgque.coop_member
                                        where cm_sub = g.sub_id and cm_name = i_subconsumer) then
        if i_register then
            perform pgque._coop_register(q, i_consumer, i_subconsumer, false);
            g := pgque._coop_group(q, i_consumer);
        elsif g.sub_id is null then
            raise exception 'cooperative main consumer not found: %/%', i_queue, i_consumer
                using errcode = 'undefined_object',
                      hint = 'Register a member with pgque.register_subconsumer().';
        else
            raise exception 'cooperative subconsumer not found: %/%/%', i_queue, i_consumer, i_subconsumer
                using errcode = 'undefined_object',
                      hint = 'Register it with pgque.register_subconsumer().';
        end if;
    end if;
    return g;
end $$;

-- Take a window for a member: the one it holds; else, with a dead
-- interval, one whose member was silent that long (takeover: a new batch
-- id, the old one fenced); else the oldest free window: one tick window
-- (receive_coop, ADR 0057: members share a backlog window by window), or
-- extended over the free windows after it until min_count/min_interval is
-- reached (next_batch_custom, PgQ's custom batch).  NULL: none.
create function pgque._coop_take(g pgque.subscription, i_member text, i_dead interval,
                                 i_min_lag interval, i_min_count int4, i_min_interval interval)
returns pgque.coop_window language plpgsql as $$
declare
    w      pgque.coop_window;
    t0     pgque.tick;
    te     pgque.tick;
    r      record;
    chain  bigint[] := '{}';
    endt   bigint;
    nb     bigint;
    tries  int4 := 0;
begin
    -- one caller per member at a time (two processes sharing a member name);
    -- different members never share this lock
    perform pgque._coop_member_lock(g.sub_id, i_member);
    select * into w from pgque.coop_window where cw_sub = g.sub_id and cw_member = i_member;
    if found then
        return w;
    end if;

    if i_dead is not null then
        select * into w from pgque.coop_window
         where cw_sub = g.sub_id and cw_member is not null and cw_member <> i_member
           and cw_prev_tick >= g.sub_last_tick
           and greatest(cw_claimed_at, pgque._coop_seen(g.sub_id, cw_member)) < now() - i_dead
         order by cw_prev_tick limit 1
           for update skip locked;
        if found then
            nb := pg_catalog.nextval('pgque.batch_id_seq');
            insert into pgque.coop_fence (cf_batch, cf_sub, cf_member, cf_by, cf_by_batch)
            values (w.cw_batch, g.sub_id, w.cw_member, i_member, nb);
            update pgque.coop_window
               set cw_member = i_member, cw_batch = nb, cw_claimed_at = now(), cw_last = null
             where cw_sub = w.cw_sub and cw_prev_tick = w.cw_prev_tick
            returning * into w;
            return w;
        end if;
    end if;

    loop
        select * into w from pgque.coop_window
         where cw_sub = g.sub_id and cw_member is null
           and cw_prev_tick >= (select sub_last_tick from pgque.subscription where sub_id = g.sub_id)
         order by cw_prev_tick limit 1
           for update skip locked;
        exit when found;
        -- no free window: cut the ticks past the high-water mark, unless
        -- there are none or someone else is cutting them right now
        tries := tries + 1;
        if tries > 2 or not exists (
               select 1 from pgque.tick t, pgque.subscription s
                where s.sub_id = g.sub_id and t.tick_queue = s.sub_queue and t.tick_id > s.sub_coop_hw) then
            return null;
        end if;
        if pgque._coop_sync(g.sub_id) <= 0 then
            return null;
        end if;
    end loop;

    select * into t0 from pgque.tick where tick_queue = g.sub_queue and tick_id = w.cw_prev_tick;
    endt := w.cw_next_tick;
    if i_min_count is not null or i_min_interval is not null then
        -- the end tick wanted
        select * into te from pgque.tick
         where tick_queue = g.sub_queue and tick_id >= w.cw_next_tick
           and (tick_event_seq >= t0.tick_event_seq + i_min_count
                or tick_time >= t0.tick_time + i_min_interval)
         order by tick_id limit 1;
        if te.tick_id is null then
            return null;
        end if;
        -- the free windows up to it that follow on without a gap
        if te.tick_id > w.cw_next_tick then
            for r in select cw_prev_tick, cw_next_tick from pgque.coop_window
                      where cw_sub = g.sub_id and cw_member is null
                        and cw_prev_tick > w.cw_prev_tick and cw_next_tick <= te.tick_id
                      order by cw_prev_tick
                        for update skip locked loop
                exit when r.cw_prev_tick <> endt;
                chain := chain || r.cw_prev_tick;
                endt := r.cw_next_tick;
            end loop;
        end if;
    end if;
    if endt is distinct from w.cw_next_tick then
        delete from pgque.coop_window where cw_sub = g.sub_id and cw_prev_tick = any (chain);
    end if;
    select * into te from pgque.tick where tick_queue = g.sub_queue and tick_id = endt;
    if i_min_lag is not null and te.tick_time > now() - i_min_lag then
        return null;
    end if;
    update pgque.coop_window
       set cw_member = i_member, cw_batch = pg_catalog.nextval('pgque.batch_id_seq'),
           cw_next_tick = endt, cw_claimed_at = now(), cw_pos = null, cw_last = null
     where cw_sub = w.cw_sub and cw_prev_tick = w.cw_prev_tick
    returning * into w;
    return w;
end $$;

-- The per-call steps of receive_coop: the argument checks (on the first
-- try), the member's group (registered on first use), then the member's
-- batch: its open window, a dead member's, or the next free window (NULL:
-- none).
create function pgque._coop_receive_open(i_queue text, i_consumer text, i_subconsumer text,
                                         i_max_return int4, i_dead interval, i_check bool)
returns bigint language plpgsql as $$
declare
    g  pgque.subscription;
    w  pgque.coop_window;
begin
    if i_check then
        perform pgque._coop_names(i_queue, i_consumer, i_subconsumer);
        perform pgque._check_max_return(i_max_return);
        if i_dead is not null then
            perform pgque._check_interval('dead_interval', i_dead);
        end if;
    end if;
    g := pgque._coop_member_group(i_queue, i_consumer, i_subconsumer, true);
    w := pgque._coop_take(g, i_subconsumer, i_dead, null, null, null);
    perform pgque._coop_touch(g.sub_id, i_subconsumer, w.cw_batch);
    return w.cw_batch;
end $$;

-- receive_coop: up to max_return events of the member's batch, read in C
-- as the plain receive (src/receive.c, ADR 0034).  A window with more is
-- handed out in parts (ack keeps the rest open under a new batch id);
-- empty windows are finished and the next one taken.
create function pgque.receive_coop(i_queue text, i_consumer text, i_subconsumer text,
                                   i_max_return int4 default 100, i_dead_interval interval default null)
returns setof pgque.message language c volatile security definer
set search_path = pgque, pg_catalog, pg_temp
as 'MODULE_PATHNAME', 'pgque_receive_coop';

create function pgque.next_batch_custom(i_queue text, i_consumer text, i_subconsumer text,
                                        i_min_lag interval, i_min_count int4, i_min_interval interval,
                                        i_dead_interval interval default null,
                                        out batch_id bigint, out prev_tick_id bigint, out next_tick_id bigint)
language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    g  pgque.subscription;
    w  pgque.coop_window;
begin
    perform pgque._coop_names(i_queue, i_consumer, i_subconsumer);
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
    if i_dead_interval is not null then
        perform pgque._check_interval('dead_interval', i_dead_interval);
    end if;
    g := pgque._coop_member_group(i_queue, i_consumer, i_subconsumer, true);
    w := pgque._coop_take(g, i_subconsumer, i_dead_interval, i_min_lag, i_min_count, i_min_interval);
    perform pgque._coop_touch(g.sub_id, i_subconsumer, w.cw_batch);
    batch_id := w.cw_batch;
    if batch_id is not null then
        prev_tick_id := w.cw_prev_tick;
        next_tick_id := w.cw_next_tick;
    end if;
end $$;

create function pgque.next_batch(i_queue text, i_consumer text, i_subconsumer text,
                                 i_dead_interval interval default null)
returns bigint language sql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
    select batch_id from pgque.next_batch_custom(i_queue, i_consumer, i_subconsumer, null, null, null,
                                                 i_dead_interval)
$$;

create function pgque.touch_subconsumer(i_queue text, i_consumer text, i_subconsumer text)
returns int4 language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    g  pgque.subscription;
begin
    perform pgque._coop_names(i_queue, i_consumer, i_subconsumer);
    g := pgque._coop_group(pgque._queue(i_queue), i_consumer);
    if g.sub_id is null then
        return 0;
    end if;
    -- before the member's lookup: 0 or 1 would tell a caller who may not
    -- use the group whether the name is a member
    perform pgque._authorize(g.sub_owner, g.sub_users, g.sub_queue, i_consumer);
    if not exists (select 1 from pgque.coop_member where cm_sub = g.sub_id and cm_name = i_subconsumer) then
        return 0;
    end if;
    perform pgque._coop_touch(g.sub_id, i_subconsumer, null);
    return 1;
end $$;

-- Remove a member.  Its open window is refused (batch_handling 0) or its
-- events not yet acked go to retry or the dead-letter queue as nack() would
-- send them (1).  The last member leaving turns the group back into a
-- normal consumer, its cursor at the oldest window not finished.
create function pgque.unregister_subconsumer(i_queue text, i_consumer text, i_subconsumer text,
                                             i_batch_handling int4 default 0)
returns int4 language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    q    pgque.queue;
    g    pgque.subscription;
    w    pgque.coop_window;
    e    pgque.event_template;
    gs   pgque.subscription;
begin
    perform pgque._coop_names(i_queue, i_consumer, i_subconsumer);
    perform pgque._check_not_null('batch_handling', i_batch_handling);
    if i_batch_handling not in (0, 1) then
        raise exception 'unsupported batch_handling value: %', i_batch_handling
            using errcode = 'invalid_parameter_value',
                  hint = '0 refuses a member with an open batch, 1 sends its events to retry first.';
    end if;
    q := pgque._queue(i_queue);
    g := pgque._coop_group(q, i_consumer);
    if g.sub_id is null then
        return 0;
    end if;
    perform pgque._authorize(g.sub_owner, g.sub_users, q.queue_id, i_consumer);
    select * into g from pgque.subscription where sub_id = g.sub_id for no key update;
    -- wait for a claim of this member still in flight (_coop_take holds
    -- this lock to its commit), so that its window is seen below
    perform pgque._coop_member_lock(g.sub_id, i_subconsumer);
    if not exists (select 1 from pgque.coop_member where cm_sub = g.sub_id and cm_name = i_subconsumer) then
        return 0;
    end if;
    select * into w from pgque.coop_window where cw_sub = g.sub_id and cw_member = i_subconsumer for update;
    if found then
        if i_batch_handling = 0 then
            raise exception 'cannot unregister active cooperative subconsumer %/%/% without batch_handling = 1',
                  i_queue, i_consumer, i_subconsumer
                using errcode = 'object_not_in_prerequisite_state',
                      detail = pg_catalog.format('It holds batch %s.', w.cw_batch),
                      hint = 'Ack its batch first, or pass batch_handling => 1 to send its events to retry.';
        end if;
        gs := g;
        gs.sub_batch := w.cw_batch;
        for e in select * from pgque._batch_rows(w.cw_batch, null, null) loop
            if coalesce(e.ev_retry, 0) >= coalesce(q.queue_max_retries, 5) then
                perform pgque._dead_letter(gs, e, 'subconsumer unregistered');
            else
                perform pgque._retry_event(gs, e, now() + interval '60 seconds');
            end if;
        end loop;
        delete from pgque.coop_window where cw_batch = w.cw_batch;
    end if;
    delete from pgque.coop_member where cm_sub = g.sub_id and cm_name = i_subconsumer;
    perform pgque._coop_forget(g.sub_id, i_subconsumer);
    if not exists (select 1 from pgque.coop_member where cm_sub = g.sub_id) then
        -- back to a normal consumer at the oldest window not finished (the
        -- windows finished after it are read again: at-least-once)
        update pgque.subscription
           set sub_last_tick = coalesce((select min(cw_prev_tick) from pgque.coop_window where cw_sub = g.sub_id),
                                        sub_coop_hw, sub_last_tick),
               sub_role = 'normal', sub_coop_hw = null, sub_active = now()
         where sub_id = g.sub_id;
        delete from pgque.coop_window where cw_sub = g.sub_id;
    else
        perform pgque._coop_sync(g.sub_id);
    end if;
    return 1;
end $$;

create function pgque.unsubscribe_subconsumer(i_queue text, i_consumer text, i_subconsumer text,
                                              i_batch_handling int4 default 0)
returns int4 language sql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
    select pgque.unregister_subconsumer(i_queue, i_consumer, i_subconsumer, i_batch_handling)
$$;

-- A batch id that was taken over: refuse its fenced member by name.
create function pgque._coop_refuse_fenced(i_batch bigint)
returns void language plpgsql as $$
declare
    f  record;
begin
    select cf.*, q.queue_name, c.co_name into f
      from pgque.coop_fence cf
      join pgque.subscription s on s.sub_id = cf.cf_sub
      join pgque.queue q on q.queue_id = s.sub_queue
      join pgque.consumer c on c.co_id = s.sub_consumer
     where cf.cf_batch = i_batch;
    if found then
        raise exception 'batch % was taken over: subconsumer %/%/% is fenced', i_batch, f.queue_name, f.co_name, f.cf_member
            using errcode = 'PQ003',
                  detail = pg_catalog.format('Subconsumer "%s" took the window over as batch %s at %s, after "%s" was silent for longer than its dead_interval.',
                                             f.cf_by, f.cf_by_batch, f.cf_at, f.cf_member),
                  hint = 'Drop the batch without side effects and call receive_coop() again; call touch_subconsumer() during long work.';
    end if;
end $$;

-- ack of a member batch: the part handed out, or the whole window.
create function pgque._coop_ack(s pgque.subscription)
returns int4 language plpgsql as $$
declare
    w  pgque.coop_window;
begin
    select * into w from pgque.coop_window where cw_batch = s.sub_batch;
    perform pgque._coop_touch(w.cw_sub, w.cw_member, null);
    if w.cw_last is not null then
        update pgque.coop_window
           set cw_batch = pg_catalog.nextval('pgque.batch_id_seq'), cw_pos = cw_last, cw_last = null
         where cw_batch = s.sub_batch;
        return 1;
    end if;
    return pgque._coop_finish(s.sub_batch);
end $$;

-- Every group: advance the cursor and cut windows (maintenance; the ticker
-- does it for the queue it ticks).  Fences older than a day go.
create function pgque._coop_maint()
returns int4 language plpgsql
-- pinned: the maintenance worker calls it directly
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    n int4 := 0;
    s int4;
begin
    for s in select sub_id from pgque.subscription where sub_role = 'coop_main' order by sub_id loop
        n := n + greatest(pgque._coop_sync(s), 0);
    end loop;
    delete from pgque.coop_fence where cf_at < now() - pgque._coop_fence_kept();
    return n;
end $$;

-- How long a taken-over member's fence is kept (its late ack is refused by
-- name until then).
create function pgque._coop_fence_kept()
returns interval language sql immutable as $$ select interval '1 day' $$;

-- Whether _coop_maint() has work (maint_operations() lists maint() for
-- it): a group with a tick past its high-water mark (windows to cut) or
-- whose cursor moves (_coop_low_water), or a fence past its time.
create function pgque._coop_maint_due()
returns boolean language sql stable as $$
    select exists (select from pgque.subscription g
                    where g.sub_role operator(pg_catalog.=) 'coop_main'
                      and (exists (select from pgque.tick t
                                    where t.tick_queue operator(pg_catalog.=) g.sub_queue
                                      and t.tick_id operator(pg_catalog.>) g.sub_coop_hw)
                           or pgque._coop_low_water(g.sub_id, g.sub_last_tick, g.sub_coop_hw)
                              operator(pg_catalog.<>) g.sub_last_tick))
        or exists (select from pgque.coop_fence f
                    where f.cf_at operator(pg_catalog.<) (pg_catalog.now() operator(pg_catalog.-) pgque._coop_fence_kept()))
$$;

-- The members of the groups, for get_consumer_info and the watchdog: their
-- window (if any) and when they were last heard of.
create function pgque._coop_member_info(out sub_id int4, out member text, out last_seen timestamptz,
                                        out batch bigint, out prev_tick bigint, out next_tick bigint,
                                        out claimed_at timestamptz)
returns setof record language sql volatile as $$
    select m.cm_sub, m.cm_name,
           -- a heartbeat or the claim of the window it holds; else registration
           coalesce(greatest(sm.last_seen, w.cw_claimed_at), m.cm_registered),
           w.cw_batch, w.cw_prev_tick, w.cw_next_tick, w.cw_claimed_at
      from pgque.coop_member m
      left join pgque.coop_window w on w.cw_sub = m.cm_sub and w.cw_member = m.cm_name
      left join pgque._coop_members() sm on sm.sub_id = m.cm_sub and sm.member = m.cm_name
$$;

-- A re-created extension starts with no member heartbeats of this database
-- (the shared-memory table outlives DROP EXTENSION; group ids restart).
select pgque._coop_forget(null, null);
