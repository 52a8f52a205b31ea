-- Consumers and subscriptions: each subscription is an independent cursor
-- (sub_last_tick) over the same stored events, so every consumer sees every
-- event (fan-out) from one copy.

-- Subscribe (or, with i_tick_pos, reposition) a consumer.  New cursors start
-- at the latest tick and belong to i_owner (default: the caller).  An
-- existing subscription is the owner's: another role is refused, it never
-- takes it over.  -> 1 new / 0 existed (repositioning returns 1).
create function pgque._register(q pgque.queue, i_consumer_name text, i_tick_pos bigint,
                                i_owner regrole default null)
returns int4 language plpgsql as $$
declare
    cid  int4;
    s    pgque.subscription;
    pos  bigint;
    n    int4;
begin
    perform pgque._check_queue_right(q, 'subscribe');
    insert into pgque.consumer (co_name) values (i_consumer_name) on conflict (co_name) do nothing;
    select co_id into cid from pgque.consumer where co_name = i_consumer_name;

    select * into s from pgque.subscription where sub_queue = q.queue_id and sub_consumer = cid for update;
    if found then
        perform pgque._authorize(s.sub_owner, q.queue_id, i_consumer_name);
    end if;
    if i_tick_pos is not null then
        if not exists (select 1 from pgque.tick where tick_queue = q.queue_id and tick_id = i_tick_pos) then
            raise exception 'tick not found: % (queue %)', i_tick_pos, q.queue_name
                using errcode = 'invalid_parameter_value';
        end if;
        pos := i_tick_pos;
    else
        select max(tick_id) into pos from pgque.tick where tick_queue = q.queue_id;
    end if;
    if s.sub_id is not null then
        if i_tick_pos is null then
            return 0;
        end if;
        if s.sub_role = 'coop_main' then
            raise exception 'consumer % on queue % is a cooperative main consumer; it cannot be repositioned',
                  i_consumer_name, q.queue_name
                using errcode = 'wrong_object_type',
                      hint = 'Its members hold windows after its cursor; unregister them first.';
        end if;
        -- repositioning drops an open batch
        update pgque.subscription
           set sub_last_tick = i_tick_pos, sub_batch = null, sub_next_tick = null,
               sub_batch_pos = null, sub_batch_last = null, sub_active = now()
         where sub_id = s.sub_id;
        return 1;
    end if;

    insert into pgque.subscription (sub_queue, sub_consumer, sub_last_tick, sub_owner)
    values (q.queue_id, cid, pos, coalesce(i_owner, pgque._caller()))
    on conflict (sub_queue, sub_consumer) do nothing;
    get diagnostics n = row_count;
    if n = 0 then
        -- a concurrent subscribe won: its owner decides, as above
        perform pgque._authorize((select sub_owner from pgque.subscription
                                   where sub_queue = q.queue_id and sub_consumer = cid),
                                 q.queue_id, i_consumer_name);
    end if;
    return n;
end $$;

-- Remove a subscription with its pending retries and its dead letters.
-- -> 1 removed / 0 was not subscribed.
create function pgque._unregister(q pgque.queue, i_consumer_name text)
returns int4 language plpgsql as $$
declare
    s pgque.subscription;
begin
    select sub.* into s
      from pgque.subscription sub join pgque.consumer c on c.co_id = sub.sub_consumer
     where sub.sub_queue = q.queue_id and c.co_name = i_consumer_name
       for update of sub;
    if not found then
        return 0;
    end if;
    perform pgque._authorize(s.sub_owner, q.queue_id, i_consumer_name);
    if s.sub_role = 'coop_main' and exists (select 1 from pgque.coop_member where cm_sub = s.sub_id) then
        raise exception 'cannot unregister cooperative main consumer with registered subconsumers'
            using errcode = 'object_not_in_prerequisite_state',
                  detail = pg_catalog.format('Consumer "%s" of queue "%s" has %s members.', i_consumer_name, q.queue_name,
                                             (select count(*) from pgque.coop_member where cm_sub = s.sub_id)),
                  hint = 'Unregister them with pgque.unregister_subconsumer() first.';
    end if;
    perform pgque._coop_forget(s.sub_id, null);
    delete from pgque.retry_queue where ev_owner = s.sub_id;
    delete from pgque.dead_letter where dl_queue_id = q.queue_id and dl_consumer_id = s.sub_consumer;
    delete from pgque.blocked_key where bk_sub = s.sub_id;     -- unsubscribing drops them (ADR 0038)
    delete from pgque.subscription where sub_id = s.sub_id;
    delete from pgque.consumer c
     where c.co_id = s.sub_consumer
       and not exists (select 1 from pgque.subscription x where x.sub_consumer = c.co_id);
    return 1;
end $$;

-- A consumer name from a user: valid, and not a slot name (# is reserved).
create function pgque._user_consumer_name(i_consumer_name text)
returns text language plpgsql as $$
begin
    perform pgque._check_name('consumer', i_consumer_name, 64);
    if pg_catalog.strpos(i_consumer_name, '#') > 0 then
        raise exception 'consumer name "%" contains "#"', i_consumer_name
            using errcode = 'invalid_name',
                  detail = '"#" is reserved for partition slot consumers (<consumer>#<slot>/<n>).',
                  hint = 'Use pgque.subscribe_slot() for partitioned consumption.';
    end if;
    return i_consumer_name;
end $$;

create function pgque.register_consumer(x_queue_name text, x_consumer_id text)
returns int4 language sql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
    select pgque._register(pgque._queue(x_queue_name), pgque._user_consumer_name(x_consumer_id), null)
$$;

create function pgque.subscribe(queue_name text, consumer_name text)
returns int4 language sql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
    select pgque._register(pgque._queue(queue_name), pgque._user_consumer_name(consumer_name), null)
$$;

create function pgque.register_consumer_at(x_queue_name text, x_consumer_name text, x_tick_pos bigint)
returns int4 language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
begin
    perform pgque._check_not_null('tick position', x_tick_pos);
    return pgque._register(pgque._queue(x_queue_name), pgque._user_consumer_name(x_consumer_name), x_tick_pos);
end $$;

create function pgque.unregister_consumer(x_queue_name text, x_consumer_name text)
returns int4 language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
begin
    perform pgque._check_name('consumer', x_consumer_name, 64);
    return pgque._unregister(pgque._queue(x_queue_name), x_consumer_name);
end $$;

create function pgque.unsubscribe(queue_name text, consumer_name text)
returns int4 language sql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
    select pgque.unregister_consumer(queue_name, consumer_name)
$$;

-- Per-consumer options (ADR 0057), one so far: merge_windows (boolean,
-- default off).  On, receive() of this plain consumer may merge several
-- waiting tick windows into one batch of up to about max_return events;
-- off, a batch is one tick window, as in PgQ and PgQue.  A cooperative
-- group's members always take one window each, so the option is refused
-- for a cooperative main consumer (and ignored while a consumer with it
-- is converted to one); partition slots merge windows by their own rule.
-- The consumer's owner, a member of it, or an admin may set it.
create function pgque._consumer_config_target(i_queue_name text, i_consumer_name text, i_param_name text,
                                              i_lock bool)
returns pgque.subscription language plpgsql as $$
declare
    q  pgque.queue;
    s  pgque.subscription;
begin
    q := pgque._queue(i_queue_name);
    perform pgque._check_name('consumer', i_consumer_name, 64);
    perform pgque._check_name('parameter', i_param_name, 63);
    if pg_catalog.lower(i_param_name) <> 'merge_windows' then
        raise exception 'unknown consumer parameter "%"', i_param_name
            using errcode = 'invalid_parameter_value',
                  detail = 'The consumer parameters are: merge_windows.';
    end if;
    if pg_catalog.strpos(i_consumer_name, '#') > 0
       or exists (select 1 from pgque.partition_consumer pc
                   where pc.queue_id = q.queue_id and pc.co_name = i_consumer_name) then
        raise exception 'consumer "%" of queue "%" is a partitioned consumer', i_consumer_name, i_queue_name
            using errcode = 'wrong_object_type',
                  detail = 'A partition slot always merges waiting windows, up to max_return × n events, '
                           'because it sees about 1/n of each (ADR 0057).',
                  hint = 'merge_windows is an option of plain consumers (pgque.subscribe).';
    end if;
    s := pgque._subscription(i_queue_name, i_consumer_name);
    if i_lock then
        select * into s from pgque.subscription where sub_id = s.sub_id for update;
    end if;
    perform pgque._authorize(s.sub_owner, s.sub_queue, i_consumer_name);
    return s;
end $$;

-- set_consumer_config(queue, consumer, param, value) -> 1.  A NULL value
-- restores the default.
create function pgque.set_consumer_config(queue_name text, consumer_name text, param_name text, param_value text)
returns int4 language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    s  pgque.subscription;
    v  boolean;
begin
    s := pgque._consumer_config_target(queue_name, consumer_name, param_name, true);
    if param_value is not null then
        if pg_catalog.octet_length(param_value) > 16
           or pg_catalog.lower(pg_catalog.btrim(param_value)) not in
                  ('true', 'false', 'on', 'off', 'yes', 'no', '1', '0', 't', 'f', 'y', 'n') then
            raise exception 'merge_windows must be a boolean, got "%"', pg_catalog.left(param_value, 16)
                using errcode = 'invalid_parameter_value',
                      hint = 'Use true or false (NULL restores the default, false).';
        end if;
        v := param_value::boolean;
    end if;
    if v and s.sub_role = 'coop_main' then
        raise exception 'consumer "%" of queue "%" is a cooperative main consumer', consumer_name, queue_name
            using errcode = 'wrong_object_type',
                  detail = 'Each member of a cooperative group takes one tick window per batch (ADR 0057).',
                  hint = 'merge_windows is an option of plain consumers.';
    end if;
    update pgque.subscription set sub_merge_windows = coalesce(v, false) where sub_id = s.sub_id;
    return 1;
end $$;

-- get_consumer_config(queue, consumer, param) -> the value as text.
create function pgque.get_consumer_config(queue_name text, consumer_name text, param_name text)
returns text language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
begin
    return (pgque._consumer_config_target(queue_name, consumer_name, param_name, false)).sub_merge_windows::text;
end $$;
