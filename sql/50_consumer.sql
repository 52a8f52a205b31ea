-- Consumers and subscriptions: each subscription is an independent cursor
-- (sub_last_tick) over the same stored events, so every consumer sees every
-- event (fan-out) from one copy.

-- Subscribe (or, with i_tick_pos, reposition) a consumer.  New cursors start
-- at the latest tick and belong to i_owner with users i_users (default: the
-- caller, and the users _default_users() gives it, ADR 0058).  An existing
-- subscription is the owner's: a role that may not use it is refused, it
-- never takes it over; only the owner (or an admin) repositions it.
-- -> 1 new / 0 existed (repositioning returns 1).
create function pgque._register(q pgque.queue, i_consumer_name text, i_tick_pos bigint,
                                i_owner regrole default null, i_users regrole[] default null)
returns int4 language plpgsql as $$
declare
    cid  int4;
    s    pgque.subscription;
    pos  bigint;
    n    int4;
begin
    perform pgque._check_queue_right(q, 'subscribe');
    if not exists (select from pgque.consumer where co_name = i_consumer_name) then
        perform pgque._check_new_name('consumer', i_consumer_name);
    end if;
    insert into pgque.consumer (co_name) values (i_consumer_name) on conflict (co_name) do nothing;
    select co_id into cid from pgque.consumer where co_name = i_consumer_name;

    select * into s from pgque.subscription where sub_queue = q.queue_id and sub_consumer = cid for update;
    if found then
        -- a user may subscribe the name again (0, nothing changes), not move it
        perform pgque._authorize(s.sub_owner, case when i_tick_pos is null then s.sub_users end,
                                 q.queue_id, i_consumer_name);
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

    insert into pgque.subscription (sub_queue, sub_consumer, sub_last_tick, sub_owner, sub_users)
    values (q.queue_id, cid, pos, coalesce(i_owner, pgque._caller()),
            case when i_owner is null then pgque._default_users() else coalesce(i_users, '{}') end)
    on conflict (sub_queue, sub_consumer) do nothing;
    get diagnostics n = row_count;
    if n = 1 then
        perform pgque._anchor_owner(coalesce(i_owner, pgque._caller()));     -- ADR 0071
    end if;
    if n = 0 then
        -- a concurrent subscribe won: its owner and users decide, as above
        perform pgque._authorize(x.sub_owner, x.sub_users, q.queue_id, i_consumer_name)
           from pgque.subscription x where x.sub_queue = q.queue_id and x.sub_consumer = cid;
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
    -- the owner's act: a user may not unsubscribe it (ADR 0058)
    perform pgque._authorize(s.sub_owner, null, q.queue_id, i_consumer_name);
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
    perform pgque._anchor_release(s.sub_users || s.sub_owner);     -- ADR 0079, 0071
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

-- Per-consumer users (ADR 0058).  A consumer belongs to the role that
-- subscribed it; its owner (or an admin) may let other roles use it:
-- receive, ack, nack, the batch primitives, members of a cooperative
-- group, the slots of a partitioned consumer.  Unsubscribing,
-- repositioning, resizing, its failure policy and these grants stay the
-- owner's.  A user still needs the queue's subscribe right (ADR 0047).
-- A partitioned consumer is named without "#": its slots follow it.
-- -> the consumer's (queue, owner, users), locked, after checking that the
-- caller is its owner or an admin; is_partitioned: a partitioned consumer.
create function pgque._consumer_grant_check(i_queue_name text, i_consumer_name text, i_role regrole,
                                            out q pgque.queue, out is_partitioned boolean,
                                            out owner regrole, out users regrole[])
language plpgsql as $$
declare
    s  pgque.subscription;
begin
    q := pgque._queue(i_queue_name);
    perform pgque._user_consumer_name(i_consumer_name);
    perform pgque._check_not_null('role', i_role);
    select pc.owner, pc.users into owner, users from pgque.partition_consumer pc
     where pc.queue_id = q.queue_id and pc.co_name = i_consumer_name for update;
    is_partitioned := found;
    if not is_partitioned then
        s := pgque._subscription_row(q, i_consumer_name, true);
        if s.sub_id is null then
            raise exception 'Not subscriber to queue: %/%', i_queue_name, i_consumer_name
                using errcode = 'undefined_object',
                      hint = 'Subscribe it with pgque.subscribe() (or pgque.subscribe_slot()) first.';
        end if;
        owner := s.sub_owner;
        users := s.sub_users;
    end if;
    perform pgque._authorize(owner, null, q.queue_id, i_consumer_name);
end $$;

-- Store a consumer's users: its subscription's, or a partitioned
-- consumer's and every one of its slots' (those of a resize in progress
-- included: "<consumer>#..." names nobody else may take).
create function pgque._consumer_set_users(q pgque.queue, i_consumer_name text, is_partitioned boolean,
                                          i_users regrole[])
returns void language plpgsql as $$
begin
    if is_partitioned then
        update pgque.partition_consumer set users = i_users
         where queue_id = q.queue_id and co_name = i_consumer_name;
    end if;
    update pgque.subscription s set sub_users = i_users
      from pgque.consumer c
     where c.co_id = s.sub_consumer and s.sub_queue = q.queue_id
       and case when is_partitioned
                then pg_catalog.left(c.co_name, pg_catalog.length(i_consumer_name) + 1)
                     = i_consumer_name || '#'
                else c.co_name = i_consumer_name end;
end $$;

-- grant_consumer(queue_name, consumer_name, role_name) -> 1 granted, 0 held already.
create function pgque.grant_consumer(queue_name text, consumer_name text, role_name regrole)
returns int4 language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    c  record;
begin
    c := pgque._consumer_grant_check(queue_name, consumer_name, role_name);
    -- (revoke_consumer takes a dropped role's OID out of the list)
    if not exists (select from pg_catalog.pg_roles r where r.oid = role_name) then
        raise exception 'role with OID % does not exist', role_name::oid
            using errcode = 'undefined_object',
                  hint = 'PUBLIC may not use a consumer and cannot be given one.';
    end if;
    if role_name = any (c.users) then
        return 0;
    end if;
    if pg_catalog.cardinality(c.users) >= @PGQUE_CONSUMER_USERS_MAX@ then
        raise exception 'consumer "%" of queue "%" is granted to % roles already', consumer_name, queue_name,
              pg_catalog.cardinality(c.users)
            using errcode = 'program_limit_exceeded',
                  detail = 'The limit is @PGQUE_CONSUMER_USERS_MAX@ roles per consumer.',
                  hint = 'Grant the consumer to a group role and make the roles members of it.';
    end if;
    perform pgque._consumer_set_users(c.q, consumer_name, c.is_partitioned, c.users || role_name);
    perform pgque._anchor(role_name);   -- DROP ROLE now refuses it (ADR 0079)
    return 1;
end $$;

-- revoke_consumer(queue_name, consumer_name, role_name) -> 1 revoked, 0 not held.
-- The role's next call on the consumer is refused; a batch it holds stays
-- open for the owner (or another user) to receive again and ack.
create function pgque.revoke_consumer(queue_name text, consumer_name text, role_name regrole)
returns int4 language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    c  record;
begin
    c := pgque._consumer_grant_check(queue_name, consumer_name, role_name);
    if not (role_name = any (c.users)) then
        return 0;
    end if;
    perform pgque._consumer_set_users(c.q, consumer_name, c.is_partitioned,
                                      pg_catalog.array_remove(c.users, role_name));
    perform pgque._anchor_release(array[role_name]);
    return 1;
end $$;

-- consumer_rights: who owns each consumer and who else may use it (a
-- partitioned consumer once, under its own name; admins only).
create view pgque.consumer_rights as
    select q.queue_name, c.co_name as consumer_name, s.sub_owner as owner, s.sub_users as users
      from pgque.subscription s
      join pgque.queue q on q.queue_id = s.sub_queue
      join pgque.consumer c on c.co_id = s.sub_consumer
     where pg_catalog.strpos(c.co_name, '#') = 0
    union all
    select q.queue_name, pc.co_name, pc.owner, pc.users
      from pgque.partition_consumer pc
      join pgque.queue q on q.queue_id = pc.queue_id;

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
    perform pgque._authorize(s.sub_owner, null, s.sub_queue, i_consumer_name);
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
