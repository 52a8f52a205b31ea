-- Internal helpers: input validation and lookups shared by the API.
-- They run as the caller of a SECURITY DEFINER function (i.e. as the owner),
-- are granted to nobody, and qualify every name.

-- Reject NULL, empty and oversize names with a clear message and SQLSTATE.
create function pgque._check_name(i_kind text, i_name text, i_max_bytes int4)
returns void language plpgsql as $$
begin
    if i_name is null then
        raise exception '% name must not be null', i_kind
            using errcode = 'null_value_not_allowed';
    end if;
    if i_name = '' then
        raise exception '% name must not be empty', i_kind
            using errcode = 'invalid_parameter_value';
    end if;
    -- PgQue's words ("queue name too long: 58 bytes (max 57)"): scripts match them
    if pg_catalog.octet_length(i_name) > i_max_bytes and i_kind = 'queue' then
        raise exception 'queue name too long: % bytes (max %)', pg_catalog.octet_length(i_name), i_max_bytes
            using errcode = 'name_too_long',
                  detail = 'The NOTIFY channel pgque_<queue name> must fit in 63 bytes.';
    elsif pg_catalog.octet_length(i_name) > i_max_bytes then
        raise exception '% name too long: % bytes (max %)', i_kind, pg_catalog.octet_length(i_name), i_max_bytes
            using errcode = 'name_too_long';
    end if;
end $$;

-- A name about to be stored (a new queue, consumer, member, partitioned
-- consumer) or a worker id: no control character (ADR 0071).  Names are
-- quoted in messages the workers log; a newline in one forged lines of the
-- server log.  Names 0.2.0 stored are still found by the lookups
-- (_check_name); the worker log escapes what they carry.
create function pgque._check_new_name(i_kind text, i_name text)
returns void language plpgsql as $$
declare
    c  text := pg_catalog.substring(i_name, '[[:cntrl:]]');
begin
    if c is not null then
        raise exception '% name must not contain control characters', i_kind
            using errcode = 'invalid_parameter_value',
                  detail = pg_catalog.format('Character %s of the name is U+%s.',
                                             pg_catalog.strpos(i_name, c),
                                             pg_catalog.lpad(pg_catalog.to_hex(pg_catalog.ascii(c)), 4, '0')),
                  hint = 'Use printable characters: names are quoted in the server log.';
    end if;
end $$;

-- Reject a NULL argument.
create function pgque._check_not_null(i_what text, i_value anyelement)
returns void language plpgsql as $$
begin
    if i_value is null then
        raise exception '% must not be null', i_what
            using errcode = 'null_value_not_allowed';
    end if;
end $$;

-- The queue row, or a clear error.  Queue names are limited to 57 bytes so
-- that the NOTIFY channel pgque_<name> fits in 63 (the limit, like every
-- @PGQUE_...@ number in these files, comes from src/rules.h).
create function pgque._queue(i_queue_name text)
returns pgque.queue language plpgsql stable as $$
declare
    q pgque.queue;
begin
    perform pgque._check_name('queue', i_queue_name, @PGQUE_QUEUE_NAME_MAX@);
    select * into q from pgque.queue where queue_name = i_queue_name;
    if not found then
        raise exception 'queue not found: %', i_queue_name
            using errcode = 'undefined_object';
    end if;
    return q;
end $$;

-- The extension's own locks (ADR 0040, src/locks.c): transaction-level
-- locks on (one of pgque's tables, a 48-bit key), in a key space no SQL
-- function of PostgreSQL reaches.  Only the owner may execute this (the API
-- and the workers run as the owner): a role that can merely connect can
-- neither take them nor make us wait on them, as it could with the advisory
-- locks of 0.2.0.  -> whether it is held (always true when i_wait).
create function pgque._lock(i_class regclass, i_key int8, i_exclusive boolean, i_wait boolean)
returns boolean language c volatile strict as 'MODULE_PATHNAME', 'pgque_lock';

-- The queue's DDL lock, below: _lock on (pgque.queue, queue id), the rule
-- written once in C (src/locks.c), which the ticker calls too.
create function pgque._queue_lock(i_queue_id int4, i_exclusive boolean, i_wait boolean)
returns boolean language c volatile strict as 'MODULE_PATHNAME', 'pgque_queue_lock_sql';

-- A queue's DDL lock (ADR 0020, 0040): the extension's lock on (pgque.queue,
-- queue id).  DDL that drops or replaces a queue's relations (drop_queue)
-- takes it exclusively before any other lock; the workers' units take it
-- shared with a try before they read the queue's sequences or event tables,
-- and skip the queue when it is taken.  Without it, a worker holding a
-- sequence or table lock and waiting for the queue row deadlocked with
-- drop_queue holding the row and waiting for that relation.
create function pgque._queue_ddl_lock(i_queue_id int4)
returns void language sql as $$
    select pgque._queue_lock(i_queue_id, true, true);
$$;

create function pgque._queue_try_share(i_queue_id int4)
returns boolean language sql as $$
    select pgque._queue_lock(i_queue_id, false, false);
$$;

create function pgque._queue_try_exclusive(i_queue_id int4)
returns boolean language sql as $$
    select pgque._queue_lock(i_queue_id, true, false);
$$;

-- The queue's DDL lock, shared, for a caller that must not go on without
-- it (the release of a blocked key, ADR 0038).  A resize or a drop holds it
-- exclusively for a moment; the wait is bounded all the same: 55P03 after
-- 2 s, the caller's transaction rolls back and its client retries.
create function pgque._queue_share_wait(i_queue_id int4)
returns void language plpgsql set lock_timeout = '2s' as $$
begin
    perform pgque._queue_lock(i_queue_id, false, true);
exception when lock_not_available then
    raise exception 'the queue is locked for a change of its layout'
        using errcode = 'lock_not_available',
              detail = 'A resize or a drop of the queue holds its lock.',
              hint = 'Roll back and retry.';
end $$;

-- The subscription of a consumer to a queue, or a clear error.
create function pgque._subscription(i_queue_name text, i_consumer_name text)
returns pgque.subscription language plpgsql stable as $$
declare
    q pgque.queue;
    s pgque.subscription;
begin
    q := pgque._queue(i_queue_name);
    -- 64 bytes for user names, more for slot names (<consumer>#<k>/<n>)
    perform pgque._check_name('consumer', i_consumer_name, 96);
    select sub.* into s
      from pgque.subscription sub
      join pgque.consumer c on c.co_id = sub.sub_consumer
     where sub.sub_queue = q.queue_id and c.co_name = i_consumer_name;
    if not found then
        raise exception 'Not subscriber to queue: %/%', i_queue_name, i_consumer_name
            using errcode = 'undefined_object',
                  hint = 'Subscribe it with pgque.subscribe().';
    end if;
    return s;
end $$;

-- Slot consumers (<consumer>#<k>/<n>) are served only by the partitioned API.
create function pgque._refuse_slot_consumer(i_consumer_name text, i_func text)
returns void language plpgsql as $$
begin
    if pg_catalog.strpos(i_consumer_name, '#') > 0 then
        raise exception 'consumer "%" is a partition slot consumer; use pgque.%_partitioned()', i_consumer_name, i_func
            using errcode = 'wrong_object_type',
                  hint = 'Slot consumers are served by receive_partitioned(), ack_partitioned() and nack_partitioned().';
    end if;
end $$;

-- A positive interval of at most 100 years, or a clear error.  The upper
-- bound keeps now() + interval (and now() - interval) inside the range of
-- timestamptz, so a far-future value is refused here rather than
-- overflowing later (or being accepted for good).
create function pgque._check_interval(i_what text, i_value interval, i_allow_zero boolean default false)
returns void language plpgsql
-- pinned, and SECURITY DEFINER: ticker_loop(), which cannot pin its own path
-- and runs as its caller (a pgque_admin, the job user of start()), calls it;
-- it calls _check_not_null, which nobody but pgque_owner may (ADR 0042)
security definer
set search_path = pgque, pg_catalog, pg_temp as $$
begin
    perform pgque._check_not_null(i_what, i_value);
    if i_value < interval '0' or (i_value = interval '0' and not i_allow_zero) then
        raise exception '% must be %, got %', i_what,
              case when i_allow_zero then 'zero or positive' else 'positive' end, i_value
            using errcode = 'invalid_parameter_value';
    end if;
    if i_value > interval '100 years' then
        raise exception '% must be at most 100 years, got %', i_what, i_value
            using errcode = 'invalid_parameter_value';
    end if;
end $$;

-- A finite point in time at most 100 years ahead, or a clear error: an
-- infinite or far-future delivery, retry or tick time would never come.
create function pgque._check_timestamp(i_what text, i_value timestamptz)
returns void language plpgsql as $$
begin
    perform pgque._check_not_null(i_what, i_value);
    if not pg_catalog.isfinite(i_value) then
        raise exception '% must be a finite time, got %', i_what, i_value
            using errcode = 'invalid_parameter_value';
    end if;
    if i_value > pg_catalog.now() + interval '100 years' then
        raise exception '% must be at most 100 years ahead, got %', i_what, i_value
            using errcode = 'invalid_parameter_value';
    end if;
end $$;

-- A pgque_bgw.* integer setting in its base unit (seconds, bytes), read in
-- C (src/guc.c): calling it loads the library, which defines the settings,
-- so the defaults are written once, there, and never copied here.
create function pgque._setting(i_name text)
returns float8 language c stable strict as 'MODULE_PATHNAME', 'pgque_setting_sql';

-- A threshold setting of the watchdog as an interval.
create function pgque._guc_interval(i_name text)
returns interval language sql stable strict as $$
    select pg_catalog.make_interval(secs => pgque._setting(i_name))
$$;

-- The role the extension's own work runs as: pgque_owner, the owner of
-- schema pgque and of every object in it (ADR 0014, 0042).  C's lookup
-- (src/caller.c), the one the workers, the producer and CDC use.
create function pgque._owner()
returns regrole language c stable as 'MODULE_PATHNAME', 'pgque_owner_sql';

-- Per-consumer authorization.  A consumer (its subscription, its partition
-- slots, its batches) belongs to the role that subscribed it.  The caller
-- is not current_user (inside the SECURITY DEFINER API that is the owner)
-- but the session's current role, from C: src/caller.c.
create function pgque._caller()
returns regrole language c stable as 'MODULE_PATHNAME', 'pgque_caller';

-- Whether the caller is a queue admin: a member of pgque_admin or of the
-- extension's owner (superusers are members of every role).  Admins may use
-- every consumer and make layout choices (partition buckets).  In C
-- (src/rules.c, pgque_caller_is_admin), the rule _may_use's C uses too
-- (ADR 0121).
create function pgque._caller_is_admin()
returns boolean language c stable as 'MODULE_PATHNAME', 'pgque_caller_is_admin_sql';

-- Per-queue rights (ADR 0047): refuse the caller unless it is a member of a
-- role granted i_right ('send', 'subscribe') on the queue, of pgque_admin or
-- of the extension's owner.  The rule is C's (src/rules.c), which the
-- producer calls with the senders it caches: one source for both.
create function pgque._check_queue_right(i_queue_name text, i_right text, i_grantees regrole[])
returns void language c stable as 'MODULE_PATHNAME', 'pgque_check_queue_right_sql';

create function pgque._check_queue_right(q pgque.queue, i_right text)
returns void language sql stable as $$
    select pgque._check_queue_right(q.queue_name, i_right,
                                    case i_right when 'send' then q.queue_senders else q.queue_subscribers end)
$$;

-- The names of a queue's event relations in schema pgque (ADR 0133): the
-- parent event_<queue> (table_no NULL), a child table event_<queue>_<table>
-- (bucket NULL) and its partition bucket event_<queue>_<table>_b<bucket>;
-- the sequences event_<queue>_id_seq and event_<queue>_tick_seq.  Spelled
-- once, in C (src/rules.c): the producer names its table with it and every
-- SQL part calls these.
create function pgque._event_table(i_queue_id int4, i_table_no int4, i_bucket int4)
returns text language c immutable parallel safe as 'MODULE_PATHNAME', 'pgque_event_table_sql';

create function pgque._event_seq(i_queue_id int4, i_kind text)
returns text language c immutable parallel safe as 'MODULE_PATHNAME', 'pgque_event_seq_sql';

-- The grantee anchor (ADR 0079, table pgque.grantee_anchor): a role named
-- in a regrole list counts only while it holds its own SELECT on the
-- anchor (the C rule of src/rules.c, which the producer uses too).
create function pgque._role_anchored(i_role regrole)
returns boolean language c stable as 'MODULE_PATHNAME', 'pgque_role_anchored_sql';

-- The extension's roles and its installer: anchored at install
-- (sql/90_grants.sql), never released (a new queue names pgque_writer and
-- pgque_reader by default).
create function pgque._anchor_kept(i_role regrole)
returns boolean language sql stable as $$
    select exists (select from pg_catalog.pg_roles r
                    where r.oid operator(pg_catalog.=) i_role
                      and r.rolname operator(pg_catalog.=) any
                          ('{pgque_reader,pgque_writer,pgque_admin,pgque_owner}'::pg_catalog.name[]))
        or exists (select from pg_catalog.pg_extension e
                    where e.extname operator(pg_catalog.=) 'pgque_bgw'
                      and e.extowner operator(pg_catalog.=) i_role)
$$;

-- Anchor a role about to be named in a list (grant_queue, grant_consumer):
-- its own SELECT on the anchor, granted by pgque_owner, the table's owner.
-- The lock (which SELECT cannot take) orders grants and releases: a
-- release that reads the lists after a grant committed sees its role.
create function pgque._anchor(i_role regrole)
returns void language plpgsql as $$
begin
    lock table pgque.grantee_anchor in share row exclusive mode;
    if not pgque._role_anchored(i_role) then
        execute pg_catalog.format('grant select on table pgque.grantee_anchor to %I',
                                  (select r.rolname from pg_catalog.pg_roles r
                                    where r.oid operator(pg_catalog.=) i_role));
    end if;
end $$;

-- Anchor the owner of a new consumer (ADR 0071): DROP ROLE then refuses
-- it, and pg_dump writes its anchor by name, as for a listed role.  The
-- extension's roles and installer are anchored for good (no lock taken).
create function pgque._anchor_owner(i_role regrole)
returns void language sql as $$
    select pgque._anchor(i_role) where not pgque._anchor_kept(i_role)
$$;

-- Whether a list names the role, or a consumer is its (committed, as this
-- statement sees them).
create function pgque._anchor_listed(i_role regrole)
returns boolean language sql stable as $$
    select exists (select from pgque.queue q
                    where i_role = any (q.queue_senders) or i_role = any (q.queue_subscribers))
        or exists (select from pgque.subscription s where i_role = any (s.sub_users) or s.sub_owner = i_role)
        or exists (select from pgque.partition_consumer pc where i_role = any (pc.users) or pc.owner = i_role)
$$;

-- Release the anchor of the roles given that no list names any more
-- (revoke_queue, revoke_consumer, unsubscribe, drop_queue): DROP ROLE may
-- then drop them.  -> number of roles released.
create function pgque._anchor_release(i_roles regrole[])
returns int4 language plpgsql as $$
declare
    r  regrole;
    n  int4 := 0;
begin
    if i_roles is null or pg_catalog.cardinality(i_roles) = 0 then
        return 0;
    end if;
    for r in select distinct u.role from pg_catalog.unnest(i_roles) u(role)
              join pg_catalog.pg_roles pr on pr.oid operator(pg_catalog.=) u.role loop
        continue when pgque._anchor_kept(r) or pgque._anchor_listed(r);
        -- a role to release: the lock only now (a session holding it open
        -- holds up the grants), and the lists read again under it
        lock table pgque.grantee_anchor in share row exclusive mode;
        continue when not pgque._role_anchored(r) or pgque._anchor_listed(r);
        execute pg_catalog.format('revoke select on table pgque.grantee_anchor from %I',
                                  (select pr.rolname from pg_catalog.pg_roles pr
                                    where pr.oid operator(pg_catalog.=) r));
        n := n + 1;
    end loop;
    return n;
end $$;

-- The roles of a list that still exist (a pg_roles row), in their order;
-- an empty list for NULL.
create function pgque._live_roles(i_roles regrole[])
returns regrole[] language sql stable as $$
    select array(select u.role from pg_catalog.unnest(i_roles) with ordinality u(role, i)
                  where exists (select from pg_catalog.pg_roles r
                                 where r.oid operator(pg_catalog.=) u.role) order by u.i)
$$;

-- Whether an OID of the rights lists (the senders and subscribers of the
-- queues, the users and owners of the consumers) has no role any more:
-- one look at every OID of the lists at once, each distinct one asked of
-- _live_roles once (ADR 0095).  The gate of _maint_stale_roles and the
-- has-work of its step in maint_operations() (ADR 0100).
create function pgque._rights_roles_stale()
returns boolean language plpgsql as $$
begin
    -- NULL (no OID at all) counts as stale, as the gate always did
    return not coalesce((select pg_catalog.cardinality(pgque._live_roles(pg_catalog.array_agg(u.role)))
       operator(pg_catalog.=) pg_catalog.count(*)
      from (select distinct x.role from (
            select pg_catalog.unnest(q.queue_senders operator(pg_catalog.||) q.queue_subscribers) from pgque.queue q
            union all select pg_catalog.unnest(s.sub_users) from pgque.subscription s
            union all select s.sub_owner from pgque.subscription s
            union all select pg_catalog.unnest(pc.users) from pgque.partition_consumer pc
            union all select pc.owner from pgque.partition_consumer pc) x(role)) u), false);
end $$;

-- The (queue, role) pairs of idempotency claims whose role is gone (ADR
-- 0091): its OID, written by a dump as a bare number, would be another
-- role's after a restore, which would then be answered "deduped" with the
-- dropped role's event ids.  The roles are found by a skip scan of the
-- primary key (one probe per queue and role, not a pass over the claims);
-- '-' (0) is the shared key space of 0.2.0's claims, no role.  What
-- _maint_stale_roles deletes and what its step in maint_operations() asks.
create function pgque._idem_roles_gone(out queue_id int4, out role pg_catalog.oid)
returns setof record language sql stable as $$
    with recursive r(queue_id, role) as (
        (select x.queue_id, x.idem_role from pgque.idem x
          order by x.queue_id, x.idem_role limit 1)
        union all
        select y.queue_id, y.idem_role
          from r cross join lateral (
               select x.queue_id, x.idem_role from pgque.idem x
                where (x.queue_id, x.idem_role) operator(pg_catalog.>) (r.queue_id, r.role)
                order by x.queue_id, x.idem_role limit 1) y)
    select r.queue_id, r.role from r
     where r.role operator(pg_catalog.<>) 0::pg_catalog.oid
       and not exists (select from pg_catalog.pg_roles pr where pr.oid operator(pg_catalog.=) r.role)
$$;

-- Maintenance (ADR 0079): take the OIDs that have no pg_roles row (a role
-- dropped after DROP OWNED took its anchor) out of the four lists, and
-- give the consumers whose owner is gone to pgque_admin (ADR 0071), and
-- drop the idempotency claims of a role that is gone (ADR 0091), so
-- that no dump carries one.  One statement per list; nothing to write
-- when no OID is stale.  -> number of rows changed.
-- First one look at every OID of the lists at once, each distinct one
-- asked of _live_roles once: with none stale (a pass in nearly every
-- maintenance interval) no list is written.  The five statements below
-- called _live_roles once per row and list, 3,000 calls a pass with 1,000
-- queues (ADR 0095).
create function pgque._maint_stale_roles()
returns int4 language plpgsql as $$
declare
    n  int4;
    t  int4 := 0;
begin
    if pgque._rights_roles_stale() then
        -- some OID of the lists is stale: each list, and the owners
        update pgque.queue q
           set queue_senders = pgque._live_roles(q.queue_senders),
               queue_subscribers = pgque._live_roles(q.queue_subscribers)
         where pgque._live_roles(q.queue_senders || q.queue_subscribers)
               operator(pg_catalog.<>) (q.queue_senders || q.queue_subscribers);
        get diagnostics n = row_count;
        t := t + n;
        update pgque.subscription s set sub_users = pgque._live_roles(s.sub_users)
         where pgque._live_roles(s.sub_users) operator(pg_catalog.<>) s.sub_users;
        get diagnostics n = row_count;
        t := t + n;
        update pgque.partition_consumer pc set users = pgque._live_roles(pc.users)
         where pgque._live_roles(pc.users) operator(pg_catalog.<>) pc.users;
        get diagnostics n = row_count;
        t := t + n;
        -- a consumer whose owner is gone passes to pgque_admin (ADR 0071): a
        -- name, which a dump writes as a name; its admins may use, unsubscribe
        -- or grant it
        update pgque.subscription s set sub_owner = 'pgque_admin'::pg_catalog.regrole
         where pgque._live_roles(array[s.sub_owner]) operator(pg_catalog.=) '{}';
        get diagnostics n = row_count;
        t := t + n;
        update pgque.partition_consumer pc set owner = 'pgque_admin'::pg_catalog.regrole
         where pgque._live_roles(array[pc.owner]) operator(pg_catalog.=) '{}';
        get diagnostics n = row_count;
        t := t + n;
    end if;
    -- the idempotency claims of a dropped role (ADR 0091)
    delete from pgque.idem i
     using pgque._idem_roles_gone() d
     where i.queue_id operator(pg_catalog.=) d.queue_id and i.idem_role operator(pg_catalog.=) d.role;
    get diagnostics n = row_count;
    return t + n;
end $$;

-- Whether the caller may use a consumer owned by i_owner whose users are
-- i_users (ADR 0058): a member of the owner, of one of the users, of
-- pgque_admin or of the extension's owner.  The owner, as a user, counts
-- only while anchored (ADR 0079, 0071): a bare OID a restore wrote onto
-- another role grants nothing.  i_users NULL: the owner's acts
-- (unsubscribe, reposition, resize, failure policy, the grants), which
-- users may not do.  The one rule of _authorize and of the filters of
-- dlq_replay_all and blocked_keys.  It runs twice per part a consumer
-- receives and acks: in C (src/rules.c, pgque_may_use, ADR 0121), where its
-- PL/pgSQL ran a statement (the users' EXISTS) on every call, and as a SQL
-- function (not inlined: it has a subquery) it planned its body on every
-- call, ~430,000 instructions (ADR 0082).
create function pgque._may_use(i_owner regrole, i_users regrole[])
returns boolean language c stable as 'MODULE_PATHNAME', 'pgque_may_use_sql';

-- Refuse the caller unless it holds "subscribe" on the queue and may use
-- the consumer (_may_use: its owner's member, a member of one of its
-- users, or an admin; i_users NULL for what only the owner may do).  It is
-- called by the lookup each operation on an existing consumer starts with:
-- _register, _unregister, _next_batch (by name), _open_batch (by batch
-- id) and _partitioned (partition slots, before any lease is touched; the
-- slot subscription's own lookup then finds the same owner and users).
create function pgque._authorize(i_owner regrole, i_users regrole[], i_queue_id int4, i_consumer text)
returns void language plpgsql stable as $$
declare
    me regrole := pgque._caller();
begin
    perform pgque._check_queue_right(q, 'subscribe') from pgque.queue q where q.queue_id = i_queue_id;
    if pgque._may_use(i_owner, i_users) then
        return;
    end if;
    -- a user of the consumer asking for the owner's act: say so
    if i_users is null and exists (select from pg_catalog.unnest(coalesce(
                                       (select s.sub_users from pgque.subscription s join pgque.consumer c
                                            on c.co_id = s.sub_consumer
                                         where s.sub_queue = i_queue_id and c.co_name = i_consumer),
                                       (select pc.users from pgque.partition_consumer pc
                                         where pc.queue_id = i_queue_id and pc.co_name = i_consumer))) u(role)
                                    where pg_catalog.pg_has_role(me, u.role, 'member')
                                      and pgque._role_anchored(u.role)) then
        raise exception 'permission denied to change consumer "%" of queue "%", owned by role "%"',
              i_consumer, (select queue_name from pgque.queue where queue_id = i_queue_id), i_owner
            using errcode = 'insufficient_privilege',
                  detail = pg_catalog.format('Role "%s" may use the consumer, not unsubscribe, reposition, resize '
                                             'or share it.', me),
                  hint = 'Ask its owner or a pgque_admin.';
    end if;
    raise exception 'permission denied for consumer "%" of queue "%", owned by role "%"',
          i_consumer, (select queue_name from pgque.queue where queue_id = i_queue_id), i_owner
        using errcode = 'insufficient_privilege',
              detail = pg_catalog.format('Role "%s" is not a member of role "%s", of a role the consumer is '
                                         'granted to or of pgque_admin.', me, i_owner),
              hint = 'Use the consumer as the role that subscribed it (or a role it was granted to with '
                     'pgque.grant_consumer()), subscribe a consumer of your own, or ask a pgque_admin.';
end $$;

-- The users a new consumer starts with (ADR 0058): {pgque_reader} when an
-- admin subscribes it (PgQue's deployment: a migration role holding
-- pgque_admin subscribes, the application consumes), so that every role
-- holding the queue's subscribe right may use it; none otherwise.
create function pgque._default_users()
returns regrole[] language sql stable as $$
    select case when pgque._caller_is_admin() then '{pgque_reader}'::pg_catalog.regrole[]
                else '{}'::pg_catalog.regrole[] end
$$;

-- quote_fqname(name) -> the name quoted for SQL (PgQ's helper): the first
-- dot separates the schema, no dot means schema public.  Each part must be
-- a usable identifier: 1..63 bytes.
create function pgque.quote_fqname(i_name text)
returns text language plpgsql immutable
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    pos  int4;
    s    text;
    n    text;
begin
    if i_name is null then
        raise exception 'name must not be null'
            using errcode = 'null_value_not_allowed';
    end if;
    pos := pg_catalog.strpos(i_name, '.');
    if pos > 0 then
        s := pg_catalog.substr(i_name, 1, pos - 1);
        n := pg_catalog.substr(i_name, pos + 1);
    else
        s := 'public';
        n := i_name;
    end if;
    if s = '' or n = '' then
        raise exception 'name "%" has an empty part', pg_catalog.left(i_name, 200)
            using errcode = 'invalid_parameter_value',
                  hint = 'Pass "schema.name" or "name" (schema public).';
    end if;
    if pg_catalog.octet_length(s) > 63 or pg_catalog.octet_length(n) > 63 then
        raise exception 'name is too long (% bytes)', pg_catalog.octet_length(i_name)
            using errcode = 'name_too_long',
                  detail = 'The limit is 63 bytes for the schema and for the name.';
    end if;
    return pg_catalog.quote_ident(s) || '.' || pg_catalog.quote_ident(n);
end $$;

-- The queue sequence named i_seq_name (PgQ's spelling: "schema.name", no
-- dot for public): a queue's event or tick sequence, or a clear error.
-- seq_getval and seq_setval act on these only: they run as pgque_owner,
-- which must not read or move sequences on a caller's behalf.
create function pgque._queue_seq(i_seq_name text)
returns regclass language plpgsql stable as $$
declare
    seq  regclass;
begin
    perform pgque._check_name('sequence', i_seq_name, 127);
    seq := pg_catalog.to_regclass(pgque.quote_fqname(i_seq_name));
    if seq is null or not exists (select from pgque.queue q
                                   where pg_catalog.to_regclass(q.queue_event_seq) = seq
                                      or pg_catalog.to_regclass(q.queue_tick_seq) = seq) then
        raise exception 'queue sequence not found: %', i_seq_name
            using errcode = 'undefined_object',
                  detail = 'seq_getval and seq_setval read and move the event and tick sequences of the queues (pgque.queue.queue_event_seq, queue_tick_seq) only.',
                  hint = 'For another sequence use pg_catalog.pg_sequence_last_value() or setval() with your own rights.';
    end if;
    return seq;
end $$;

-- seq_getval(seq_name) -> the sequence's last_value, without moving it.
create function pgque.seq_getval(i_seq_name text)
returns bigint language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    res  bigint;
begin
    execute 'select last_value from ' || pgque._queue_seq(i_seq_name)::text into res;
    return res;
end $$;

-- seq_setval(seq_name, new_value) -> the sequence's value: moved forward to
-- new_value, never back (PgQ).  At most 2^62, so that one call cannot use
-- up the sequence.  The queue's row is locked, as the ticker locks it, so
-- that a tick never reads a sequence half moved; producers take event ids
-- without a lock, so, as in PgQ, ids taken in the same instant as a move
-- of the event sequence may be taken again: move it while nobody sends.
create function pgque.seq_setval(i_seq_name text, i_new_value int8)
returns bigint language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    seq  regclass := pgque._queue_seq(i_seq_name);
    res  bigint;
begin
    perform pgque._check_not_null('new_value', i_new_value);
    if i_new_value > 4611686018427387904 then
        raise exception 'new_value must be at most 4611686018427387904 (2^62), got %', i_new_value
            using errcode = 'invalid_parameter_value';
    end if;
    perform from pgque.queue q
      where pg_catalog.to_regclass(q.queue_event_seq) = seq or pg_catalog.to_regclass(q.queue_tick_seq) = seq
      for no key update;
    execute 'select last_value from ' || seq::text into res;
    if res < i_new_value then
        perform pg_catalog.setval(seq, i_new_value);
        return i_new_value;
    end if;
    return res;
end $$;
