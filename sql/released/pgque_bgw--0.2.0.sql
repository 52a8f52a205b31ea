-- pgque_bgw 0.2.0: assembled from sql/NN_*.sql by the Makefile; edit the parts, not this file.

\echo Use "CREATE EXTENSION pgque_bgw" to load this file. \quit
-- Schema guard.  The control file names schema pgque; CREATE EXTENSION
-- creates it, or uses it as it is when it exists already.  A role with
-- CREATE on the database may create schema pgque before anyone installs,
-- put functions or operators in it (pgque.format(text, text), pgque.now()),
-- and wait: this script runs with superuser rights and search_path = pgque,
-- pg_temp, so an unqualified call would run that role's code as superuser;
-- and the SECURITY DEFINER API, which puts pgque first in its path, would
-- run it as the extension owner for ever after.  So the schema must be
-- empty and belong to the installing role.  Everything below is qualified:
-- it runs before the check has passed.
do $guard$
declare
    v_nsp    pg_catalog.oid;
    v_owner  pg_catalog.oid;
    v_ext    pg_catalog.oid;
    v_what   pg_catalog.text;
begin
    select e.extnamespace, e.extowner into strict v_nsp, v_ext
      from pg_catalog.pg_extension e where e.extname operator(pg_catalog.=) 'pgque_bgw'::pg_catalog.name;
    select n.nspowner into strict v_owner
      from pg_catalog.pg_namespace n where n.oid operator(pg_catalog.=) v_nsp;
    if v_owner operator(pg_catalog.<>) v_ext then
        raise exception 'schema pgque exists and belongs to role %, not to the installing role %',
              pg_catalog.pg_get_userbyid(v_owner), pg_catalog.pg_get_userbyid(v_ext)
            using errcode = 'object_not_in_prerequisite_state',
                  detail = 'The owner of schema pgque may create objects in it that the extension would call with its owner''s rights.',
                  hint = 'Drop schema pgque (it is left behind by DROP EXTENSION), or have its owner install the extension.';
    end if;
    select pg_catalog.concat_ws(', ',
               (select 'relation ' operator(pg_catalog.||) pg_catalog.min(c.relname::pg_catalog.text)
                  from pg_catalog.pg_class c where c.relnamespace operator(pg_catalog.=) v_nsp),
               (select 'function ' operator(pg_catalog.||) pg_catalog.min(p.proname::pg_catalog.text)
                  from pg_catalog.pg_proc p where p.pronamespace operator(pg_catalog.=) v_nsp),
               (select 'type ' operator(pg_catalog.||) pg_catalog.min(t.typname::pg_catalog.text)
                  from pg_catalog.pg_type t where t.typnamespace operator(pg_catalog.=) v_nsp),
               (select 'operator ' operator(pg_catalog.||) pg_catalog.min(o.oprname::pg_catalog.text)
                  from pg_catalog.pg_operator o where o.oprnamespace operator(pg_catalog.=) v_nsp),
               (select 'collation ' operator(pg_catalog.||) pg_catalog.min(o.collname::pg_catalog.text)
                  from pg_catalog.pg_collation o where o.collnamespace operator(pg_catalog.=) v_nsp),
               (select 'conversion ' operator(pg_catalog.||) pg_catalog.min(o.conname::pg_catalog.text)
                  from pg_catalog.pg_conversion o where o.connamespace operator(pg_catalog.=) v_nsp),
               (select 'operator family ' operator(pg_catalog.||) pg_catalog.min(o.opfname::pg_catalog.text)
                  from pg_catalog.pg_opfamily o where o.opfnamespace operator(pg_catalog.=) v_nsp),
               (select 'text search configuration ' operator(pg_catalog.||) pg_catalog.min(o.cfgname::pg_catalog.text)
                  from pg_catalog.pg_ts_config o where o.cfgnamespace operator(pg_catalog.=) v_nsp),
               (select 'text search dictionary ' operator(pg_catalog.||) pg_catalog.min(o.dictname::pg_catalog.text)
                  from pg_catalog.pg_ts_dict o where o.dictnamespace operator(pg_catalog.=) v_nsp),
               (select 'text search parser ' operator(pg_catalog.||) pg_catalog.min(o.prsname::pg_catalog.text)
                  from pg_catalog.pg_ts_parser o where o.prsnamespace operator(pg_catalog.=) v_nsp),
               (select 'text search template ' operator(pg_catalog.||) pg_catalog.min(o.tmplname::pg_catalog.text)
                  from pg_catalog.pg_ts_template o where o.tmplnamespace operator(pg_catalog.=) v_nsp),
               (select 'statistics object ' operator(pg_catalog.||) pg_catalog.min(o.stxname::pg_catalog.text)
                  from pg_catalog.pg_statistic_ext o where o.stxnamespace operator(pg_catalog.=) v_nsp),
               (select 'extension ' operator(pg_catalog.||) pg_catalog.min(o.extname::pg_catalog.text)
                  from pg_catalog.pg_extension o where o.extnamespace operator(pg_catalog.=) v_nsp
                   and o.extname operator(pg_catalog.<>) 'pgque_bgw'::pg_catalog.name))
      into v_what;
    if v_what operator(pg_catalog.<>) '' then
        raise exception 'schema pgque is not empty: %', v_what
            using errcode = 'object_not_in_prerequisite_state',
                  detail = 'Objects already in schema pgque would shadow the functions and operators the extension calls.',
                  hint = 'Drop or move the objects in schema pgque (or the schema), then install again.';
    end if;
end
$guard$;
-- Roles: pgque_reader consumes, pgque_writer produces, pgque_admin runs the
-- queues and is a member of both.  Roles are cluster-wide and outlive the
-- extension; they are created only when missing.  A role that exists
-- already must look as this script would have made it (NOLOGIN, no other
-- attribute, a member of pgque_* roles only): a role with CREATEROLE could
-- otherwise pre-create them with attributes or memberships of its choosing,
-- which every later grant of pgque_* would hand on.
do $roles$
declare
    r      text;
    extra  text;
begin
    foreach r in array array['pgque_reader', 'pgque_writer', 'pgque_admin'] loop
        select pg_catalog.concat_ws(', ',
                   case when a.rolsuper then 'SUPERUSER' end,
                   case when a.rolcreatedb then 'CREATEDB' end,
                   case when a.rolcreaterole then 'CREATEROLE' end,
                   case when a.rolreplication then 'REPLICATION' end,
                   case when a.rolbypassrls then 'BYPASSRLS' end,
                   case when a.rolcanlogin then 'LOGIN' end,
                   (select pg_catalog.string_agg('member of ' || pg_catalog.quote_ident(g.rolname), ', '
                                                 order by g.rolname)
                      from pg_catalog.pg_auth_members m
                      join pg_catalog.pg_roles g on g.oid = m.roleid
                     where m.member = a.oid
                       and g.rolname not in ('pgque_reader', 'pgque_writer', 'pgque_admin')))
          into extra
          from pg_catalog.pg_roles a where a.rolname = r;
        if extra <> '' then
            raise exception 'role "%" exists with attributes the pgque_bgw install does not give it: %', r, extra
                using errcode = 'object_not_in_prerequisite_state',
                      detail = 'pgque_reader, pgque_writer and pgque_admin are NOLOGIN roles with no other attribute and no membership outside pgque_*; every role granted them inherits what they have.',
                      hint = pg_catalog.format('Check who made role %I; drop it, or remove the attributes (ALTER ROLE %I NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS NOLOGIN) and memberships (REVOKE ... FROM %I), then install again.', r, r, r);
        end if;
    end loop;
    foreach r in array array['pgque_reader', 'pgque_writer', 'pgque_admin'] loop
        if not exists (select 1 from pg_catalog.pg_roles where rolname = r) then
            begin
                execute pg_catalog.format('create role %I nologin', r);
            exception when insufficient_privilege then
                raise exception 'role "%" does not exist and cannot be created by the installing role', r
                    using errcode = 'insufficient_privilege',
                          hint = 'Create the roles pgque_reader, pgque_writer and pgque_admin (NOLOGIN) first, or install as a role with CREATEROLE.';
            end;
        end if;
    end loop;
    foreach r in array array['pgque_reader', 'pgque_writer'] loop
        if not pg_catalog.pg_has_role('pgque_admin', r, 'member') then
            execute pg_catalog.format('grant %I to pgque_admin', r);
        end if;
    end loop;
end
$roles$;
-- Catalog tables.  Names and columns follow PgQ/PgQue; additions are marked.

create table pgque.queue (
    queue_id                  serial primary key,
    queue_name                text not null unique,
    queue_ntables             int4 not null default 3,
    queue_cur_table           int4 not null default 0,
    queue_rotation_period     interval not null default '2 hours',
    -- rotation bookkeeping: step1 = xid of the switch, step2 = first xid
    -- assigned after the switch committed (NULL until rotation step 2 ran)
    queue_switch_step1        xid8 not null default pg_catalog.pg_current_xact_id(),
    queue_switch_step2        xid8 default pg_catalog.pg_current_xact_id(),
    queue_switch_time         timestamptz not null default now(),
    queue_external_ticker     boolean not null default false,
    queue_disable_insert      boolean not null default false,
    queue_ticker_paused       boolean not null default false,
    queue_ticker_max_count    int4 not null default 500,
    queue_ticker_max_lag      interval not null default '3 seconds',
    queue_ticker_idle_period  interval not null default '1 minute',
    queue_max_retries         int4,
    queue_data_pfx            text not null,
    queue_event_seq           text not null,
    queue_tick_seq            text not null,
    queue_extra_maint         text[],
    -- addition: partition buckets (ADR 0013).  NULL: not chosen yet (the
    -- first subscribe_slot by an admin picks a count); 0: none; B: every
    -- child table has B bucket tables and keyed rows go to bucket
    -- hash(key) mod B.
    -- buckets_step1/2 play the part of switch_step1/2 for the change from an
    -- unbucketed to a bucketed layout: transactions from step2 on never
    -- write a child table's own (unbucketed) heap.
    queue_partition_buckets   int4,
    queue_buckets_step1       xid8,
    queue_buckets_step2       xid8
);

create table pgque.consumer (
    co_id    serial primary key,
    co_name  text not null unique
);

-- One row per (queue, consumer): the cursor (sub_last_tick) and the open batch.
create table pgque.subscription (
    sub_id          serial not null unique,
    sub_queue       int4 not null references pgque.queue (queue_id),
    sub_consumer    int4 not null references pgque.consumer (co_id),
    sub_last_tick   bigint not null,
    sub_active      timestamptz not null default now(),
    sub_batch       bigint unique,
    sub_next_tick   bigint,
    -- addition: receive() progress inside the open tick window, so that a
    -- window larger than max_return is handed out in parts and none is lost
    sub_batch_pos   bigint,
    sub_batch_last  bigint,
    -- addition: the role that subscribed the consumer; only its members and
    -- admins may use or change the subscription (pgque._authorize)
    sub_owner       regrole not null,
    -- addition: cooperative consumers (ADR 0017).  'coop_main': a group
    -- whose tick windows its members take (pgque.coop_window);
    -- sub_coop_hw: every window up to this tick has been cut.
    sub_role        text not null default 'normal' check (sub_role in ('normal', 'coop_main')),
    sub_coop_hw     bigint,
    primary key (sub_queue, sub_consumer)
) with (fillfactor = 50);

-- addition: the members (subconsumers) of a cooperative group.  Whether a
-- member is alive is not here but in shared memory (src/coop.c).
create table pgque.coop_member (
    cm_sub         int4 not null references pgque.subscription (sub_id) on delete cascade,
    cm_name        text not null,
    cm_registered  timestamptz not null default now(),
    primary key (cm_sub, cm_name)
);

-- addition: the tick windows of a cooperative group between its cursor and
-- its high-water mark, one row each: free (cw_member NULL) or held by a
-- member as batch cw_batch.  A finished window's row is deleted; the group
-- cursor is the start of the oldest row left (ADR 0017).
create table pgque.coop_window (
    cw_sub         int4 not null references pgque.subscription (sub_id) on delete cascade,
    cw_prev_tick   bigint not null,
    cw_next_tick   bigint not null,
    cw_member      text,
    cw_batch       bigint unique,
    cw_claimed_at  timestamptz,
    -- receive progress inside the window, as sub_batch_pos/last (ADR 0003)
    cw_pos         bigint,
    cw_last        bigint,
    primary key (cw_sub, cw_prev_tick)
) with (fillfactor = 50);
-- one window per member at a time
create unique index coop_window_member_uq on pgque.coop_window (cw_sub, cw_member)
    where cw_member is not null;

-- addition: batches of cooperative members that were taken over, so that
-- the fenced member's ack or nack is refused by name (PQ003), not as an
-- unknown batch.  Kept for a day (maintenance).
create table pgque.coop_fence (
    cf_batch     bigint primary key,
    cf_sub       int4 not null references pgque.subscription (sub_id) on delete cascade,
    cf_member    text not null,
    cf_by        text not null,
    cf_by_batch  bigint not null,
    cf_at        timestamptz not null default now()
);

-- addition: the batch state of partition slots, one row per lease epoch
-- (ADR 0023).  A slot owner's receive and ack lock and write only the row
-- of its own epoch, never the subscription row, so a takeover never waits
-- for a fenced (frozen) owner's open transaction.  sb_last_tick is what
-- this epoch has acked (its cursor); the slot's cursor is the greatest of
-- these and sub_last_tick, into which every ack folds (skipping a locked
-- row: the next ack folds it).
create table pgque.slot_batch (
    sb_sub        int4 not null references pgque.subscription (sub_id) on delete cascade,
    sb_epoch      bigint not null,
    sb_last_tick  bigint not null,
    sb_batch      bigint unique,
    sb_next_tick  bigint,
    -- receive progress inside the window, as sub_batch_pos/last (ADR 0003)
    sb_pos        bigint,
    sb_last       bigint,
    primary key (sb_sub, sb_epoch)
) with (fillfactor = 50);

create table pgque.tick (
    tick_queue      int4 not null,
    tick_id         bigint not null,
    tick_time       timestamptz not null default now(),
    tick_snapshot   pg_catalog.pg_snapshot not null,
    tick_event_seq  bigint not null,
    primary key (tick_queue, tick_id)
);

create sequence pgque.batch_id_seq;

-- Every event table inherits this shape: pgque.event_<queue_id> is the
-- queue's parent, pgque.event_<queue_id>_0..2 the rotating children.
create table pgque.event_template (
    ev_id      bigint not null,
    ev_time    timestamptz not null default now(),
    ev_txid    xid8 not null default pg_catalog.pg_current_xact_id(),
    ev_owner   int4,
    ev_retry   int4,
    ev_type    text,
    ev_data    text,
    ev_extra1  text,
    ev_extra2  text,
    ev_extra3  text,
    ev_extra4  text
);

-- Events waiting to be redelivered to one subscription (ev_owner = sub_id).
create table pgque.retry_queue (
    ev_retry_after  timestamptz not null,
    ev_queue        int4 not null,
    like pgque.event_template,
    primary key (ev_owner, ev_id)
);
create index retry_queue_due_idx on pgque.retry_queue (ev_retry_after);

-- addition: events sent with send_at(), waiting for their delivery time.
-- The event id is allocated at send time, so send_at() returns it.
create table pgque.delayed_event (
    de_queue       int4 not null references pgque.queue (queue_id) on delete cascade,
    de_deliver_at  timestamptz not null,
    like pgque.event_template,
    primary key (de_queue, ev_id)
);
create index delayed_event_due_idx on pgque.delayed_event (de_deliver_at);

create table pgque.dead_letter (
    dl_id           bigserial primary key,
    dl_queue_id     int4 not null references pgque.queue (queue_id) on delete cascade,
    dl_consumer_id  int4 not null references pgque.consumer (co_id) on delete cascade,
    dl_time         timestamptz not null default now(),
    dl_reason       text,
    ev_id           bigint not null,
    ev_time         timestamptz not null,
    ev_txid         xid8,
    ev_owner        int4,
    ev_retry        int4,
    ev_type         text,
    ev_data         text,
    ev_extra1       text,
    ev_extra2       text,
    ev_extra3       text,
    ev_extra4       text
);
create index dead_letter_queue_time_idx on pgque.dead_letter (dl_queue_id, dl_time);
create unique index dead_letter_event_uq on pgque.dead_letter (dl_queue_id, dl_consumer_id, ev_id);

-- What receive() and friends return.
create type pgque.message as (
    msg_id       bigint,
    batch_id     bigint,
    type         text,
    payload      text,
    retry_count  int4,
    created_at   timestamptz,
    extra1       text,
    extra2       text,
    extra3       text,
    extra4       text
);

-- PgQue's settings row: tick_period_ms is the period of ticker_loop(), the
-- scheduler of the pg_cron and manual modes (the workers tick on commit).
create table pgque.config (
    one             boolean primary key default true check (one),
    tick_period_ms  int4 not null default 100
                    check (tick_period_ms between 1 and 1000 and 1000 % tick_period_ms = 0)
);
insert into pgque.config default values;

-- One row, whatever loads it: a restore's COPY brings the dumped row while
-- its CREATE EXTENSION has inserted the default one already, and the loaded
-- values replace the default instead of failing on the key (ADR 0022).
create function pgque._config_one_row() returns trigger language plpgsql
set search_path = pgque, pg_catalog, pg_temp as $$
begin
    update pgque.config set tick_period_ms = new.tick_period_ms where one;
    if found then
        return null;
    end if;
    return new;
end $$;
create trigger config_one_row before insert on pgque.config
    for each row execute function pgque._config_one_row();

-- pg_dump keeps the queue state with the data (event tables are not
-- extension members, so they are dumped as ordinary tables).
select pg_catalog.pg_extension_config_dump('pgque.queue', '');
select pg_catalog.pg_extension_config_dump('pgque.queue_queue_id_seq', '');
select pg_catalog.pg_extension_config_dump('pgque.consumer', '');
select pg_catalog.pg_extension_config_dump('pgque.consumer_co_id_seq', '');
select pg_catalog.pg_extension_config_dump('pgque.subscription', '');
select pg_catalog.pg_extension_config_dump('pgque.subscription_sub_id_seq', '');
select pg_catalog.pg_extension_config_dump('pgque.coop_member', '');
select pg_catalog.pg_extension_config_dump('pgque.coop_window', '');
select pg_catalog.pg_extension_config_dump('pgque.coop_fence', '');
select pg_catalog.pg_extension_config_dump('pgque.slot_batch', '');
select pg_catalog.pg_extension_config_dump('pgque.tick', '');
select pg_catalog.pg_extension_config_dump('pgque.batch_id_seq', '');
select pg_catalog.pg_extension_config_dump('pgque.retry_queue', '');
select pg_catalog.pg_extension_config_dump('pgque.delayed_event', '');
select pg_catalog.pg_extension_config_dump('pgque.dead_letter', '');
select pg_catalog.pg_extension_config_dump('pgque.dead_letter_dl_id_seq', '');
select pg_catalog.pg_extension_config_dump('pgque.config', '');

-- Producers cache queue rows per backend (src/queue_cache.c); every change of
-- pgque.queue sends a relcache invalidation that flushes those caches.
create function pgque._queue_changed() returns trigger
language c as 'MODULE_PATHNAME', 'pgque_queue_changed';
create trigger queue_changed after insert or update or delete or truncate on pgque.queue
    for each statement execute function pgque._queue_changed();
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
    if pg_catalog.octet_length(i_name) > i_max_bytes then
        raise exception '% name is too long (% bytes)', i_kind, pg_catalog.octet_length(i_name)
            using errcode = 'name_too_long',
                  detail = pg_catalog.format('The limit is %s bytes.', i_max_bytes);
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
    perform pgque._check_name('queue', i_queue_name, 57);
    select * into q from pgque.queue where queue_name = i_queue_name;
    if not found then
        raise exception 'queue not found: %', i_queue_name
            using errcode = 'undefined_object';
    end if;
    return q;
end $$;

-- A queue's DDL lock (ADR 0020): a transaction-level advisory lock on the
-- queue id.  DDL that drops or replaces a queue's relations (drop_queue)
-- takes it exclusively before any other lock; the workers' units take it
-- shared with a try before they read the queue's sequences or event tables,
-- and skip the queue when it is taken.  Without it, a worker holding a
-- sequence or table lock and waiting for the queue row deadlocked with
-- drop_queue holding the row and waiting for that relation.
create function pgque._queue_lock_class()
returns int4 language sql immutable as $$ select 1885827445 $$;   -- 'pgqu'

create function pgque._queue_ddl_lock(i_queue_id int4)
returns void language sql as $$
    select pg_catalog.pg_advisory_xact_lock(pgque._queue_lock_class(), i_queue_id);
$$;

create function pgque._queue_try_share(i_queue_id int4)
returns boolean language sql as $$
    select pg_catalog.pg_try_advisory_xact_lock_shared(pgque._queue_lock_class(), i_queue_id);
$$;

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
        raise exception 'consumer "%" is a partition slot consumer', i_consumer_name
            using errcode = 'wrong_object_type',
                  hint = pg_catalog.format('Use %s_partitioned() for slot consumers.', i_func);
    end if;
end $$;

-- A positive interval of at most 100 years, or a clear error.  The upper
-- bound keeps now() + interval (and now() - interval) inside the range of
-- timestamptz, so a far-future value is refused here rather than
-- overflowing later (or being accepted for good).
create function pgque._check_interval(i_what text, i_value interval, i_allow_zero boolean default false)
returns void language plpgsql
-- pinned: ticker_loop(), which cannot pin its own path, calls it
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

-- Per-consumer authorization.  A consumer (its subscription, its partition
-- slots, its batches) belongs to the role that subscribed it.  The caller
-- is not current_user (inside the SECURITY DEFINER API that is the owner)
-- but the session's current role, from C: src/caller.c.
create function pgque._caller()
returns regrole language c stable as 'MODULE_PATHNAME', 'pgque_caller';

-- Whether the caller is a queue admin: a member of pgque_admin or of the
-- extension's owner (superusers are members of every role).  Admins may use
-- every consumer and make layout choices (partition buckets).
create function pgque._caller_is_admin()
returns boolean language sql stable as $$
    select pg_catalog.pg_has_role(pgque._caller(), 'pgque_admin', 'member')
        or coalesce((select pg_catalog.pg_has_role(pgque._caller(), e.extowner, 'member')
                       from pg_catalog.pg_extension e where e.extname = 'pgque_bgw'), false)
$$;

-- Refuse the caller unless it is a member of the consumer's owning role or
-- an admin.  It is called by the lookup each operation on an existing
-- consumer starts with: _register, _unregister, _next_batch (by name),
-- _open_batch (by batch id) and _partitioned (partition slots, before any
-- lease is touched; the slot subscription's own lookup then finds the same
-- owner).
create function pgque._authorize(i_owner regrole, i_queue_id int4, i_consumer text)
returns void language plpgsql stable as $$
declare
    me regrole := pgque._caller();
begin
    if me = i_owner or pg_catalog.pg_has_role(me, i_owner, 'member') or pgque._caller_is_admin() then
        return;
    end if;
    raise exception 'permission denied for consumer "%" of queue "%", owned by role "%"',
          i_consumer, (select queue_name from pgque.queue where queue_id = i_queue_id), i_owner
        using errcode = 'insufficient_privilege',
              detail = pg_catalog.format('Role "%s" is not a member of role "%s" or of pgque_admin.', me, i_owner),
              hint = 'Use the consumer as the role that subscribed it (or a member of that role), '
                     'subscribe a consumer of your own, or ask a pgque_admin.';
end $$;
-- Queue lifecycle: create, drop, configure.

-- create_queue(queue_name) -> 1 created, 0 already existed.
create function pgque.create_queue(i_queue_name text)
returns int4 language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    qid   int4;
    pfx   text;
    i     int4;
begin
    perform pgque._check_name('queue', i_queue_name, 57);
    -- serialise creators of the same name; the loser sees the row
    perform pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext('pgque.create_queue'), pg_catalog.hashtext(i_queue_name));
    if exists (select 1 from pgque.queue where queue_name = i_queue_name) then
        return 0;
    end if;

    qid := pg_catalog.nextval('pgque.queue_queue_id_seq');
    pfx := 'event_' || qid;
    insert into pgque.queue (queue_id, queue_name, queue_data_pfx, queue_event_seq, queue_tick_seq)
    values (qid, i_queue_name, 'pgque.' || pfx,
            'pgque.' || pfx || '_id_seq', 'pgque.' || pfx || '_tick_seq');
    -- the state is whole from the first queue on (ADR 0022)
    insert into pgque.state_seal default values on conflict do nothing;

    execute pg_catalog.format('create sequence pgque.%I', pfx || '_id_seq');
    execute pg_catalog.format('create sequence pgque.%I', pfx || '_tick_seq');
    execute pg_catalog.format('create table pgque.%I () inherits (pgque.event_template)', pfx);
    for i in 0 .. 2 loop
        -- Children are append-only and reclaimed by TRUNCATE: never vacuumed,
        -- packed full.  The ev_txid index serves the snapshot-window scan.
        execute pg_catalog.format(
            'create table pgque.%I () inherits (pgque.%I) with (fillfactor = 100, autovacuum_enabled = off)',
            pfx || '_' || i, pfx);
        execute pg_catalog.format('alter table pgque.%I alter column ev_id set default pg_catalog.nextval(%L)',
            pfx || '_' || i, 'pgque.' || pfx || '_id_seq');
        execute pg_catalog.format('create index %I on pgque.%I (ev_txid)', pfx || '_' || i || '_txid_idx', pfx || '_' || i);
        execute pg_catalog.format('grant select on pgque.%I to pgque_admin', pfx || '_' || i);
    end loop;
    execute pg_catalog.format('grant select on pgque.%I to pgque_admin', pfx);
    -- the sequences go with the queue's parent table (drop_queue, and
    -- DROP EXTENSION ... CASCADE)
    execute pg_catalog.format('alter sequence pgque.%I owned by pgque.%I.ev_id', pfx || '_id_seq', pfx);
    execute pg_catalog.format('alter sequence pgque.%I owned by pgque.%I.ev_id', pfx || '_tick_seq', pfx);

    -- The first tick: consumers subscribe at the latest tick.  setval, not
    -- nextval: under wal_level = minimal a sequence created in this
    -- transaction is not WAL-logged, and a nextval here would leave a
    -- cached-ahead count in the page image written at commit, letting the
    -- sequence repeat values after a crash.
    perform pg_catalog.setval(('pgque.' || pfx || '_tick_seq')::regclass, 1);
    insert into pgque.tick (tick_queue, tick_id, tick_snapshot, tick_event_seq)
    values (qid, 1, pg_catalog.pg_current_snapshot(), 0);
    return 1;
end $$;

-- drop_queue(queue_name [, force]) -> 1.  Refuses while consumers are
-- subscribed unless force, which unsubscribes them first.
create function pgque.drop_queue(x_queue_name text, x_force boolean)
returns int4 language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    q      pgque.queue;
    c      text;
    nsubs  int4;
    i      int4;
    b      int4;
begin
    perform pgque._check_not_null('force', x_force);
    q := pgque._queue(x_queue_name);
    -- the queue's DDL lock first: the workers skip the queue from now on
    -- and this waits for the ones that have it in hand (ADR 0020)
    perform pgque._queue_ddl_lock(q.queue_id);
    select * into q from pgque.queue where queue_id = q.queue_id for update;
    select count(*) into nsubs from pgque.subscription where sub_queue = q.queue_id;
    if nsubs > 0 and not x_force then
        raise exception 'queue "%" still has % consumer(s)', x_queue_name, nsubs
            using errcode = 'dependent_objects_still_exist',
                  hint = 'Unsubscribe them first, or call pgque.drop_queue(queue_name, true).';
    end if;
    -- forced: cooperative groups lose their members with them
    delete from pgque.coop_member m using pgque.subscription s
     where s.sub_id = m.cm_sub and s.sub_queue = q.queue_id;
    for c in select co.co_name from pgque.subscription s
               join pgque.consumer co on co.co_id = s.sub_consumer
              where s.sub_queue = q.queue_id loop
        perform pgque._unregister(q, c);
    end loop;
    delete from pgque.retry_queue where ev_queue = q.queue_id;
    delete from pgque.idem where queue_id = q.queue_id;
    perform pgque._slot_forget(q.queue_id, null);
    delete from pgque.tick where tick_queue = q.queue_id;
    for i in 0 .. q.queue_ntables - 1 loop
        for b in 0 .. coalesce(q.queue_partition_buckets, 0) - 1 loop
            execute pg_catalog.format('drop table pgque.%I', 'event_' || q.queue_id || '_' || i || '_b' || b);
        end loop;
        execute pg_catalog.format('drop table pgque.%I', 'event_' || q.queue_id || '_' || i);
    end loop;
    execute pg_catalog.format('drop table pgque.%I', 'event_' || q.queue_id);   -- and its sequences
    if pg_catalog.to_regclass(pgque._space_reserve_name(q)) is not null then
        execute 'drop table ' || pgque._space_reserve_name(q);
    end if;
    delete from pgque.queue where queue_id = q.queue_id;
    return 1;
end $$;

create function pgque.drop_queue(x_queue_name text)
returns int4 language sql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
    select pgque.drop_queue(x_queue_name, false)
$$;

-- Partition buckets (ADR 0013): bucket table b of child table t holds the
-- keyed rows with hash(key) mod B = b (NULL keys: bucket 0).  When N divides
-- B, slot k of N reads only buckets k, k+N, k+2N, ...: its own rows, on
-- pages of their own.
create function pgque._create_buckets(q pgque.queue, i_buckets int4)
returns void language plpgsql as $$
declare
    t    int4;
    b    int4;
    tbl  text;
begin
    for t in 0 .. q.queue_ntables - 1 loop
        for b in 0 .. i_buckets - 1 loop
            tbl := 'event_' || q.queue_id || '_' || t || '_b' || b;
            execute pg_catalog.format(
                'create table pgque.%I () inherits (pgque.%I) with (fillfactor = 100, autovacuum_enabled = off)',
                tbl, 'event_' || q.queue_id || '_' || t);
            execute pg_catalog.format('create index %I on pgque.%I (ev_txid)', tbl || '_txid_idx', tbl);
            execute pg_catalog.format('grant select on pgque.%I to pgque_admin', tbl);
        end loop;
    end loop;
    -- producers see the new layout through the queue row (relcache
    -- invalidation, src/queue_cache.c); rows some of them append meanwhile to
    -- the child tables themselves stay readable until buckets_step2 is past
    update pgque.queue
       set queue_partition_buckets = i_buckets,
           queue_buckets_step1 = pg_catalog.pg_current_xact_id(), queue_buckets_step2 = null
     where queue_id = q.queue_id;
end $$;

-- set_queue_config(..., 'partition_buckets', B): NULL (choose at the first
-- subscribe_slot), 0 (none) or 1..256.  A queue that has buckets keeps them.
create function pgque._set_buckets(q pgque.queue, i_buckets int4)
returns void language plpgsql as $$
begin
    select * into q from pgque.queue where queue_id = q.queue_id for update;
    if i_buckets is not null and (i_buckets < 0 or i_buckets > 256) then
        raise exception 'partition_buckets must be between 0 and 256, got %', i_buckets
            using errcode = 'invalid_parameter_value';
    end if;
    if coalesce(q.queue_partition_buckets, 0) > 0 then
        if i_buckets is distinct from q.queue_partition_buckets then
            raise exception 'queue "%" already has % partition buckets', q.queue_name, q.queue_partition_buckets
                using errcode = 'feature_not_supported',
                      hint = 'The bucket count of a queue is fixed once chosen; create a new queue for another one.';
        end if;
        return;
    end if;
    if coalesce(i_buckets, 0) > 0 then
        perform pgque._create_buckets(q, i_buckets);
    else
        update pgque.queue set queue_partition_buckets = i_buckets where queue_id = q.queue_id;
    end if;
end $$;

-- The relations that can hold events of the window between snapshots i_lo
-- and i_hi, as a FROM item; with i_n, only those of slot i_slot where the
-- buckets allow it (the caller still filters by slot: it is exact either
-- way).  Child tables: rotation guarantees a window lies after the
-- previous switch, and producers take their xid before they look up the
-- current table (src/queue_cache.c), so a window that ends before the last
-- switch began is all in the previous table, one that starts after the
-- switch's step 2 all in the current one.
create function pgque._event_source(q pgque.queue, i_lo pg_catalog.pg_snapshot, i_hi pg_catalog.pg_snapshot,
                                    i_n int4, i_slot int4)
returns text language plpgsql stable as $$
declare
    prev   int4 := (q.queue_cur_table + q.queue_ntables - 1) % q.queue_ntables;
    nb     int4 := coalesce(q.queue_partition_buckets, 0);
    tabs   int4[];
    parts  text[];
begin
    if pg_catalog.pg_snapshot_xmax(i_hi) < q.queue_switch_step1 then
        tabs := array[prev];
    elsif q.queue_switch_step2 is not null and pg_catalog.pg_snapshot_xmin(i_lo) > q.queue_switch_step2 then
        tabs := array[q.queue_cur_table];
    else
        tabs := array[prev, q.queue_cur_table];
    end if;
    -- one statement builds it (the ticker and every receive call this)
    select pg_catalog.array_agg(src order by t, o) into parts
      from (
        -- no buckets, or none that match n: the whole table, filtered
        select t, 0 as o, pg_catalog.format('select * from pgque.%I', 'event_' || q.queue_id || '_' || t) as src
          from pg_catalog.unnest(tabs) t
         where nb = 0 or (i_n is not null and nb % i_n <> 0)
        union all
        -- rows written to the child table itself before its buckets' step 2
        select t, 0, pg_catalog.format('select * from only pgque.%I', 'event_' || q.queue_id || '_' || t)
          from pg_catalog.unnest(tabs) t
         where nb > 0 and (i_n is null or nb % i_n = 0)
           and (q.queue_buckets_step2 is null or pg_catalog.pg_snapshot_xmin(i_lo) <= q.queue_buckets_step2)
        union all
        -- this slot's buckets (all of them for plain readers)
        select t, 1 + b, pg_catalog.format('select * from pgque.%I', 'event_' || q.queue_id || '_' || t || '_b' || b)
          from pg_catalog.unnest(tabs) t,
               pg_catalog.generate_series(coalesce(i_slot, 0), nb - 1, coalesce(i_n, 1)) b
         where nb > 0 and (i_n is null or nb % i_n = 0)) s;
    return '(' || pg_catalog.array_to_string(parts, ' union all ') || ')';
end $$;

-- set_queue_config(queue_name, param, value) -> 1.  param is the short name
-- (the queue_ prefix is accepted too); a NULL value restores the default.
create function pgque.set_queue_config(x_queue_name text, x_param_name text, x_param_value text)
returns int4 language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    q      pgque.queue;
    p      text;
    iv     interval;
    n      int4;
begin
    q := pgque._queue(x_queue_name);
    perform pgque._check_name('parameter', x_param_name, 63);
    if pg_catalog.octet_length(x_param_value) > 256 then
        raise exception 'value of queue parameter "%" is too long (% bytes)', x_param_name,
              pg_catalog.octet_length(x_param_value)
            using errcode = 'invalid_parameter_value',
                  detail = 'The limit is 256 bytes.';
    end if;
    p := pg_catalog.regexp_replace(pg_catalog.lower(x_param_name), '^queue_', '');

    if p in ('ticker_max_lag', 'ticker_idle_period', 'rotation_period') then
        iv := x_param_value::interval;
        if iv is not null then
            perform pgque._check_interval(p, iv);
        end if;
        execute pg_catalog.format('update pgque.queue set %I = coalesce($1, %s) where queue_id = $2',
            'queue_' || p,
            case p when 'ticker_max_lag' then $i$'3 seconds'::interval$i$
                   when 'ticker_idle_period' then $i$'1 minute'::interval$i$
                   else $i$'2 hours'::interval$i$ end)
            using iv, q.queue_id;
    elsif p = 'ticker_max_count' then
        n := x_param_value::int4;
        if n is not null and n < 1 then
            raise exception 'ticker_max_count must be positive, got %', n
                using errcode = 'invalid_parameter_value';
        end if;
        update pgque.queue set queue_ticker_max_count = coalesce(n, 500) where queue_id = q.queue_id;
    elsif p = 'max_retries' then
        n := x_param_value::int4;
        if n is not null and n < 0 then
            raise exception 'max_retries must be zero or positive, got %', n
                using errcode = 'invalid_parameter_value';
        end if;
        update pgque.queue set queue_max_retries = n where queue_id = q.queue_id;
    elsif p = 'partition_buckets' then
        perform pgque._set_buckets(q, x_param_value::int4);
    elsif p in ('ticker_paused', 'external_ticker', 'disable_insert') then
        execute pg_catalog.format('update pgque.queue set %I = coalesce($1, false) where queue_id = $2', 'queue_' || p)
            using x_param_value::boolean, q.queue_id;
    else
        raise exception 'unknown queue parameter "%"', x_param_name
            using errcode = 'invalid_parameter_value',
                  hint = 'Known parameters: ticker_max_count, ticker_max_lag, ticker_idle_period, ticker_paused, rotation_period, max_retries, external_ticker, disable_insert, partition_buckets.';
    end if;
    return 1;
end $$;

-- create_queue(queue_name, options) -> as create_queue(queue_name): 1
-- created, 0 existed.  Each key of the options object is then applied with
-- set_queue_config (to an existing queue too), in the same transaction: an
-- unknown key or a bad value undoes the whole call.  Values may be JSON
-- strings, numbers or booleans; JSON null restores the default.
create function pgque.create_queue(i_queue_name text, i_options jsonb)
returns int4 language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    created int4;
    kv      record;
begin
    perform pgque._check_not_null('options', i_options);
    if pg_catalog.jsonb_typeof(i_options) <> 'object' then
        raise exception 'options must be a JSON object, got %', pg_catalog.jsonb_typeof(i_options)
            using errcode = 'invalid_parameter_value',
                  hint = 'For example {"max_retries": 10, "rotation_period": "1 hour"}.';
    end if;
    created := pgque.create_queue(i_queue_name);
    for kv in select o.key, o.value from pg_catalog.jsonb_each(i_options) o order by o.key loop
        if pg_catalog.jsonb_typeof(kv.value) not in ('string', 'number', 'boolean', 'null') then
            raise exception 'option "%" must be a string, number, boolean or null, got %', kv.key, pg_catalog.jsonb_typeof(kv.value)
                using errcode = 'invalid_parameter_value';
        end if;
        perform pgque.set_queue_config(i_queue_name, kv.key, kv.value #>> '{}');
    end loop;
    return created;
end $$;

-- pause_queue / resume_queue: the ticker stops / resumes ticking the queue
-- (set_queue_config 'ticker_paused').  Producers keep appending; consumers
-- see nothing new until it resumes.
create function pgque.pause_queue(i_queue_name text)
returns void language sql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
    select pgque.set_queue_config(i_queue_name, 'ticker_paused', 'true');
$$;

create function pgque.resume_queue(i_queue_name text)
returns void language sql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
    select pgque.set_queue_config(i_queue_name, 'ticker_paused', 'false');
$$;
-- Producing: insert_event (PgQ primitive), send, send_batch, send_at.

-- The one place that appends an event row with every column chosen (C, the
-- same cached plan as send()).  NULL ev_id / ev_time: next id / now().
-- check_disabled: producers respect disable_insert, maintenance does not.
create function pgque._insert_event(queue_name text, i_ev_id bigint, i_ev_time timestamptz,
                                    i_ev_owner int4, i_ev_retry int4, i_ev_type text, i_ev_data text,
                                    i_ev_extra1 text, i_ev_extra2 text, i_ev_extra3 text, i_ev_extra4 text,
                                    i_check_disabled boolean)
returns bigint language c volatile
as 'MODULE_PATHNAME', 'pgque_insert_event_full';

-- The event type of the send family: NULL is refused (insert_event, the raw
-- PgQ primitive, still accepts it).
create function pgque._type(i_type_name text)
returns text language plpgsql immutable as $$
begin
    if i_type_name is null then
        raise exception 'type_name must not be null'
            using errcode = 'null_value_not_allowed';
    end if;
    return i_type_name;
end $$;

-- The queue row for a producer: unknown queues and disabled inserts raise.
-- session_replication_role = replica bypasses disable_insert (PgQ rule).
create function pgque._producer_queue(i_queue_name text)
returns pgque.queue language plpgsql stable as $$
declare
    q pgque.queue;
begin
    q := pgque._queue(i_queue_name);
    if q.queue_disable_insert and pg_catalog.current_setting('session_replication_role') <> 'replica' then
        raise exception 'Insert into queue disallowed'
            using errcode = 'object_not_in_prerequisite_state',
                  detail = pg_catalog.format('Queue %s has disable_insert set.', i_queue_name),
                  hint = 'pgque.set_queue_config(queue, ''disable_insert'', ''false'') re-enables it.';
    end if;
    return q;
end $$;

-- insert_event, send and send_batch are the producer hot path, in C
-- (src/produce.c): one cached plan looks the queue up, one per queue
-- inserts.  They are SECURITY INVOKER without a pinned search_path: the
-- caller's right is PostgreSQL's EXECUTE check (sql/90_grants.sql), and the
-- C code runs the lookup and the append as the extension owner with every
-- name qualified, without the GUC save/restore of SECURITY DEFINER ... SET
-- (ADR 0032).
create function pgque.insert_event(queue_name text, ev_type text, ev_data text,
                                   ev_extra1 text, ev_extra2 text, ev_extra3 text, ev_extra4 text)
returns bigint language c
as 'MODULE_PATHNAME', 'pgque_insert_event';

create function pgque.insert_event(queue_name text, ev_type text, ev_data text)
returns bigint language c
as 'MODULE_PATHNAME', 'pgque_insert_event';

-- send: text payloads are stored byte for byte, jsonb ones canonicalised
-- (payload::text, in C).
create function pgque.send(queue_name text, payload text)
returns bigint language c
as 'MODULE_PATHNAME', 'pgque_send';

create function pgque.send(queue_name text, type_name text, payload text)
returns bigint language c
as 'MODULE_PATHNAME', 'pgque_send';

-- keyed send: the partition key rides in ev_extra1 (NULL key: slot 0)
create function pgque.send(queue_name text, type_name text, payload text, partition_key text)
returns bigint language c
as 'MODULE_PATHNAME', 'pgque_send';

create function pgque.send(queue_name text, payload jsonb)
returns bigint language c
as 'MODULE_PATHNAME', 'pgque_send_jsonb';

create function pgque.send(queue_name text, type_name text, payload jsonb)
returns bigint language c
as 'MODULE_PATHNAME', 'pgque_send_jsonb';

create function pgque.send(queue_name text, type_name text, payload jsonb, partition_key text)
returns bigint language c
as 'MODULE_PATHNAME', 'pgque_send_jsonb';

-- send_batch: one INSERT ... SELECT per call, in C; ids in input order.
-- A multi-dimensional array is refused, as the text[] forms do (src/produce.c),
-- rather than flattened.
create function pgque._jsonb_texts(i_payloads jsonb[])
returns text[] language plpgsql immutable as $$
begin
    if pg_catalog.array_ndims(i_payloads) > 1 then
        raise exception 'payloads must be a one-dimensional array'
            using errcode = 'array_subscript_error';
    end if;
    return case when i_payloads is null then null
                else coalesce((select pg_catalog.array_agg(p::text order by o)
                                 from pg_catalog.unnest(i_payloads) with ordinality u(p, o)), '{}') end;
end $$;

create function pgque.send_batch(queue_name text, type_name text, payloads text[])
returns bigint[] language c
as 'MODULE_PATHNAME', 'pgque_send_batch';

create function pgque.send_batch(queue_name text, type_name text, payloads text[], partition_keys text[])
returns bigint[] language c
as 'MODULE_PATHNAME', 'pgque_send_batch';

create function pgque.send_batch(queue_name text, payloads text[])
returns bigint[] language c
as 'MODULE_PATHNAME', 'pgque_send_batch';

create function pgque.send_batch(queue_name text, payloads jsonb[])
returns bigint[] language sql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
    select pgque.send_batch(queue_name, 'default', pgque._jsonb_texts(payloads))
$$;

create function pgque.send_batch(queue_name text, type_name text, payloads jsonb[])
returns bigint[] language sql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
    select pgque.send_batch(queue_name, type_name, pgque._jsonb_texts(payloads))
$$;

create function pgque.send_batch(queue_name text, type_name text, payloads jsonb[], partition_keys text[])
returns bigint[] language sql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
    select pgque.send_batch(queue_name, type_name, pgque._jsonb_texts(payloads), partition_keys)
$$;

-- send_at: deliver no earlier than deliver_at.  The event id is allocated
-- now and returned; a time not in the future appends at once.
create function pgque.send_at(queue_name text, type_name text, payload text, deliver_at timestamptz)
returns bigint language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    q   pgque.queue;
    id  bigint;
begin
    q := pgque._producer_queue(queue_name);
    perform pgque._type(type_name);
    perform pgque._check_timestamp('deliver_at', deliver_at);
    if deliver_at <= now() then
        return pgque._insert_event(queue_name, null, null, null, null, type_name, payload,
                                   null, null, null, null, true);
    end if;
    id := pg_catalog.nextval(q.queue_event_seq::regclass);
    insert into pgque.delayed_event (de_queue, de_deliver_at, ev_id, ev_time, ev_txid, ev_type, ev_data)
    values (q.queue_id, deliver_at, id, now(), pg_catalog.pg_current_xact_id(), type_name, payload);
    return id;
end $$;

create function pgque.send_at(queue_name text, type_name text, payload jsonb, deliver_at timestamptz)
returns bigint language sql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
    select pgque.send_at(queue_name, type_name, payload::text, deliver_at)
$$;

-- insert_event_bulk(queue_name, ev_type, ev_data_list) -> ids in input
-- order: PgQue's internal set-based primitive behind send_batch, the same C
-- entry point.  Granted to nobody (the owner may call it), as in PgQue.
create function pgque.insert_event_bulk(queue_name text, ev_type text, ev_data_list text[])
returns bigint[] language c security definer
set search_path = pgque, pg_catalog, pg_temp
as 'MODULE_PATHNAME', 'pgque_send_batch';
-- Change-data-capture triggers (PgQ's logutriga, jsontriga, sqltriga), in C
-- (src/cdc.c): one event per row change, appended in the changing
-- transaction through the producer hot path.  Attach with
--   create trigger t after insert or update or delete on tbl
--       for each row execute function pgque.logutriga('queue' [, arg ...]);
-- and, for TRUNCATE, a FOR EACH STATEMENT trigger.  Not SECURITY DEFINER:
-- the C code itself runs the append as the extension owner and the
-- expressions as the table's owner (ADR 0015).

-- ev_type 'I:pk1,pk2' / 'U:..' / 'D:..' / 'R', ev_data url-encoded row
create function pgque.logutriga() returns trigger
language c as 'MODULE_PATHNAME', 'pgque_logutriga';

-- ev_type {"op":"INSERT","table":["schema","table"],"pkey":["id"]}, ev_data JSON row
create function pgque.jsontriga() returns trigger
language c as 'MODULE_PATHNAME', 'pgque_jsontriga';

-- ev_type 'I' / 'U' / 'D' / 'R', ev_data a SQL fragment
create function pgque.sqltriga() returns trigger
language c as 'MODULE_PATHNAME', 'pgque_sqltriga';
-- Producer idempotency (SPEC §4): send_idem appends once per (queue,
-- idem_key) per TTL window.  A claim row and the event are written in the
-- same transaction, so a rolled-back send leaves the key free; concurrent
-- duplicates meet on the primary key and exactly one appends.  No advisory
-- lock, no subtransaction.  Expired claims are reaped by maintenance.

create table pgque.idem (
    queue_id    int4 not null,
    idem_key    text not null,
    event_id    bigint not null,
    expires_at  timestamptz not null,
    primary key (queue_id, idem_key)
);
create index idem_expires_idx on pgque.idem (expires_at);
select pg_catalog.pg_extension_config_dump('pgque.idem', '');

create function pgque.send_idem(queue_name text, type_name text, payload text, idem_key text,
                                ttl interval default '1 hour', partition_key text default null)
returns table (event_id bigint, deduped boolean)
language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
#variable_conflict use_variable
declare
    q        pgque.queue;
    new_id   bigint;
    got      bigint;
    live     boolean;
    attempt  int4;
begin
    q := pgque._producer_queue(queue_name);
    perform pgque._type(type_name);
    perform pgque._check_not_null('idem_key', idem_key);
    if idem_key = '' then
        raise exception 'idem_key must not be empty'
            using errcode = 'invalid_parameter_value';
    end if;
    -- the key is a primary-key column: a bound, not btree's row-size error
    if pg_catalog.octet_length(idem_key) > 1024 then
        raise exception 'idem_key is too long (% bytes)', pg_catalog.octet_length(idem_key)
            using errcode = 'invalid_parameter_value',
                  detail = 'The limit is 1024 bytes.';
    end if;
    -- bounded, so that every key is collected some day (and now() + ttl
    -- cannot overflow); checked before the general bound, whose message
    -- would name 100 years
    if ttl > interval '30 days' then
        raise exception 'ttl must be at most 30 days, got %', ttl
            using errcode = 'invalid_parameter_value',
                  hint = 'A key is kept, and deduplicates, until its ttl runs out; for longer windows, deduplicate in the consumer.';
    end if;
    perform pgque._check_interval('ttl', ttl);

    for attempt in 1 .. 2 loop
        -- a live claim: a duplicate, answered without writing anything
        select i.event_id, i.expires_at > now() into got, live
          from pgque.idem i where i.queue_id = q.queue_id and i.idem_key = idem_key;
        if got is not null and live then
            return query select got, true;
            return;
        end if;

        -- claim the key (or re-claim an expired one) for a new event id
        new_id := pg_catalog.nextval(q.queue_event_seq::regclass);
        got := null;
        insert into pgque.idem as i (queue_id, idem_key, event_id, expires_at)
        values (q.queue_id, idem_key, new_id, now() + ttl)
        on conflict on constraint idem_pkey do update
           set event_id = excluded.event_id, expires_at = excluded.expires_at
         where i.expires_at <= now()
        returning i.event_id into got;
        if got is not null then
            perform pgque._insert_event(queue_name, new_id, null, null, null, type_name, payload,
                                        partition_key, idem_key, null, null, true);
            return query select new_id, false;
            return;
        end if;
        -- someone else holds a live claim (we waited for it to commit):
        -- loop once more to read it
    end loop;
    raise exception 'could not claim or read idempotency key "%" of queue "%"', idem_key, queue_name
        using errcode = 'serialization_failure',
              hint = 'The claim expired while this call ran (a TTL shorter than the transaction); retry.';
end $$;

create function pgque.send_idem(queue_name text, type_name text, payload jsonb, idem_key text,
                                ttl interval default '1 hour', partition_key text default null)
returns table (event_id bigint, deduped boolean)
language sql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
    select * from pgque.send_idem(queue_name, type_name, payload::text, idem_key, ttl, partition_key)
$$;

-- One bounded batch of expired claims, of one queue or (NULL) all (the
-- maintenance worker runs each batch in its own transaction until one comes
-- back short).  -> rows removed.
create function pgque._maint_idem_batch(i_limit int4, i_queue_id int4 default null)
returns int4 language plpgsql
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    n int4;
begin
    delete from pgque.idem
     where ctid = any (array(select ctid from pgque.idem
                              where expires_at <= now()
                                and (i_queue_id is null or queue_id = i_queue_id)
                              limit i_limit));
    get diagnostics n = row_count;
    return n;
end $$;

-- Reap expired claims in bounded batches until none is left.  -> rows removed.
create function pgque._maint_idem_all(i_queue_id int4)
returns int4 language plpgsql as $$
declare
    n      int4 := 0;
    batch  int4;
begin
    loop
        batch := pgque._maint_idem_batch(10000, i_queue_id);
        n := n + batch;
        exit when batch < 10000;
    end loop;
    return n;
end $$;

create function pgque.maint_idem()
returns int4 language sql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
    select pgque._maint_idem_all(null)
$$;

create function pgque.maint_idem(i_queue_name text)
returns int4 language sql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
    select pgque._maint_idem_all((pgque._queue(i_queue_name)).queue_id)
$$;
-- Ticks: a tick records the queue's event-sequence position and a snapshot.
-- A batch is what a later tick's snapshot sees that an earlier one did not.

-- The snapshot for a tick.  A transaction does not list its own xid as in
-- progress in its snapshot, so events it inserted would count as committed
-- "before" a tick taken in the same transaction; add it, so that such events
-- fall into the next tick (SPEC §2: events committed with a tick are not in it).
create function pgque._tick_snapshot()
returns pg_catalog.pg_snapshot language plpgsql volatile as $$
declare
    s   pg_catalog.pg_snapshot := pg_catalog.pg_current_snapshot();
    me  xid8 := pg_catalog.pg_current_xact_id_if_assigned();
begin
    if me is null or me >= pg_catalog.pg_snapshot_xmax(s) then
        return s;
    end if;
    return (select pg_catalog.format('%s:%s:%s',
                       least(pg_catalog.pg_snapshot_xmin(s), me), pg_catalog.pg_snapshot_xmax(s),
                       pg_catalog.string_agg(x::text, ',' order by x))
              from (select pg_catalog.pg_snapshot_xip(s) as x union select me) xs)::pg_catalog.pg_snapshot;
end $$;

-- The queue's event-sequence position (0 before the first event).
create function pgque._event_seq_pos(q pgque.queue)
returns bigint language sql volatile as $$
    select coalesce(pg_catalog.pg_sequence_last_value(q.queue_event_seq::regclass), 0)
$$;

-- Insert a tick unconditionally and wake listeners.  The caller holds the
-- queue row lock, so ticks of one queue are taken one at a time and their
-- snapshots grow with tick_id.
create function pgque._tick(q pgque.queue)
returns bigint language plpgsql as $$
declare
    tid   bigint;
    last  pgque.tick;
    snap  pg_catalog.pg_snapshot;
begin
    snap := pgque._tick_snapshot();
    select * into last from pgque.tick where tick_queue = q.queue_id order by tick_id desc limit 1;
    if found and pg_catalog.pg_snapshot_xmax(snap) < pg_catalog.pg_snapshot_xmax(last.tick_snapshot) then
        raise exception 'cannot tick queue "%": this transaction''s snapshot is older than the last tick', q.queue_name
            using errcode = 'serialization_failure',
                  hint = 'Call the ticker in a READ COMMITTED transaction.';
    end if;
    insert into pgque.tick (tick_queue, tick_id, tick_time, tick_snapshot, tick_event_seq)
    values (q.queue_id, pg_catalog.nextval(q.queue_tick_seq::regclass), now(), snap,
            greatest(pgque._event_seq_pos(q), coalesce(last.tick_event_seq, 0)))
    returning tick_id into tid;
    -- the queue's cooperative groups get the new window (ADR 0017)
    perform pgque._coop_sync(s.sub_id) from pgque.subscription s
      where s.sub_queue = q.queue_id and s.sub_role = 'coop_main';
    perform pg_catalog.pg_notify('pgque_' || q.queue_name, tid::text);
    return tid;
end $$;

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

-- Is a tick due: new events (the sequence moved, or committed events are
-- not yet covered), or the idle period passed?  Reads only.
create function pgque._tick_due(q pgque.queue)
returns boolean language plpgsql as $$
declare
    last pgque.tick;
begin
    select * into last from pgque.tick where tick_queue = q.queue_id order by tick_id desc limit 1;
    return not found
        or pgque._event_seq_pos(q) > last.tick_event_seq
        or last.tick_time + q.queue_ticker_idle_period <= now()
        or pgque._has_unticked_events(q, last);
end $$;

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

-- The ticker's periodic safety probe (ADR 0031): queues whose event
-- sequence moved past their latest tick.  Events sent through pgque mark
-- their queue at commit; this finds rows written into the event tables
-- directly.
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
-- ticker worker's visit of many queues at once (idle ticks falling due
-- together, its first pass after a start, COMMIT PREPARED).  -> the ids
-- ticked.  On an error the worker visits them one by one instead.
create function pgque._tick_many(i_queue_ids int4[])
returns setof int4 language plpgsql as $$
declare
    q pgque.queue;
begin
    for q in select * from pgque.queue x
              where x.queue_id = any(i_queue_ids) and pgque._ticked_by_worker(x)
              order by x.queue_id loop
        if pgque._tick_if_due(q) is not null then
            return next q.queue_id;
        end if;
    end loop;
end $$;

-- Tick a queue if it is due.  The check runs first without a lock, so a
-- queue with nothing to do costs the ticker no write; then again under the
-- queue row lock, which serialises tickers of one queue.
create function pgque._tick_if_due(q pgque.queue)
returns bigint language plpgsql as $$
begin
    -- a queue being dropped is skipped (its DDL lock, ADR 0020)
    if not pgque._queue_try_share(q.queue_id) or not pgque._tick_due(q) then
        return null;
    end if;
    select * into q from pgque.queue where queue_id = q.queue_id for update;
    if not pgque._ticked_by_worker(q) or not pgque._tick_due(q) then
        return null;
    end if;
    return pgque._tick(q);
end $$;

-- The queue row of a queue this database's ticker may tick: paused and
-- externally ticked queues are refused.
create function pgque._ticked_here(i_queue_name text)
returns pgque.queue language plpgsql as $$
declare
    q pgque.queue;
begin
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
    return i_tick_id;
end $$;

-- force_tick(queue_name) -> the last tick id.  It does not tick: it moves the
-- event sequence so that the next ticker() call ticks.
create function pgque.force_tick(i_queue_name text)
returns bigint language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    q pgque.queue;
begin
    q := pgque._ticked_here(i_queue_name);
    perform pg_catalog.nextval(q.queue_event_seq::regclass);
    return (select max(tick_id) from pgque.tick where tick_queue = q.queue_id);
end $$;

create function pgque.force_next_tick(i_queue_name text)
returns bigint language sql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
    select pgque.force_tick(i_queue_name)
$$;
-- Watchdog alerts (SPEC §6): the watchdog worker evaluates the rules every
-- pgque_bgw.watchdog_interval with _watchdog_pass().  An alert opens once
-- (WARNING in the server log, NOTIFY pgque_alert with the alert's id and
-- kind only, a row in pgque.alert) and clears once (LOG, NOTIFY, cleared_at); nothing is
-- written while nothing changes.  Nothing depends on pg_locks or backend
-- pids, so alerts work through poolers.

create table pgque.alert (
    alert_id    bigserial primary key,
    kind        text not null,
    subject     text not null,          -- kind-specific identity: queue/consumer/slot
    queue_name  text,
    consumer    text,
    slot        int4,
    opened_at   timestamptz not null default now(),
    cleared_at  timestamptz,
    details     jsonb not null default '{}'
);
create unique index alert_open_uq on pgque.alert (kind, subject) where cleared_at is null;
create index alert_cleared_idx on pgque.alert (cleared_at) where cleared_at is not null;
select pg_catalog.pg_extension_config_dump('pgque.alert', '');
select pg_catalog.pg_extension_config_dump('pgque.alert_alert_id_seq', '');

create view pgque.alerts as
    select alert_id, kind, queue_name, consumer, slot, opened_at, details
      from pgque.alert where cleared_at is null;

create type pgque.alert_condition as (
    kind text, subject text, queue_name text, consumer text, slot int4, details jsonb);

-- The conditions true now, one row per (kind, subject).
create function pgque._alert_conditions(i_slot_unpolled_after interval, i_slot_stale_after interval,
                                        i_lag_alert_after interval, i_ticker_stalled_after interval,
                                        i_rotation_grace interval)
returns setof pgque.alert_condition language plpgsql as $$
declare
    now_ts timestamptz := pg_catalog.clock_timestamp();
    p_subs int4[];
    p_counts int8[];
begin
    -- every slot's pending events, one window read per partitioned consumer
    -- (ADR 0031)
    select pg_catalog.array_agg(p.sub_id), pg_catalog.array_agg(p.pending) into p_subs, p_counts
      from pgque._slot_pending_all() p;

    -- partition slots: pending work nobody polls; leases left to expire
    return query
    with slots as (
        select q.queue_name as qn, pc.consumer as cn, pc.slot as sl, pc.n,
               s.sub_id, s.sub_active,
               l.owner, l.lease_until, l.last_receive, l.epoch
          from pgque._slot_list() pc
          join pgque.queue q on q.queue_id = pc.queue_id
          join pgque.subscription s on s.sub_queue = q.queue_id and s.sub_consumer = pc.co_id
          left join pgque._slot_leases() l on l.queue_id = q.queue_id and l.consumer = pc.consumer and l.slot = pc.slot
    ), polled as (
        select sl.*, greatest(sl.last_receive, sl.sub_active) as last_poll, p.pending
          from slots sl
          left join rows from (pg_catalog.unnest(p_subs), pg_catalog.unnest(p_counts)) p(sub_id, pending) on p.sub_id = sl.sub_id
    )
    select 'slot_unpolled'::text, p.qn || '/' || p.cn || '/' || p.sl, p.qn, p.cn, p.sl,
           pg_catalog.jsonb_build_object(
               'pending_events', p.pending,
               'last_poll', p.last_poll,
               'seconds_since_poll', round(extract(epoch from now_ts - p.last_poll)::numeric, 1),
               'lease_owner', case when p.lease_until > now_ts then p.owner end)
      from polled p
     where p.pending > 0 and p.last_poll < now_ts - i_slot_unpolled_after
    union all
    select 'slot_stale', s.qn || '/' || s.cn || '/' || s.sl, s.qn, s.cn, s.sl,
           pg_catalog.jsonb_build_object(
               'lease_owner', s.owner, 'epoch', s.epoch, 'lease_until', s.lease_until,
               'seconds_expired', round(extract(epoch from now_ts - s.lease_until)::numeric, 1))
      from slots s
     where s.owner is not null and s.lease_until < now_ts - i_slot_stale_after;

    -- consumers (and slots) whose oldest unconsumed event is too old
    return query
    select 'consumer_lagging'::text, q.queue_name || '/' || c.co_name, q.queue_name, c.co_name, null::int4,
           pg_catalog.jsonb_build_object(
               'oldest_pending_tick', nt.tick_time,
               'lag_seconds', round(extract(epoch from now_ts - nt.tick_time)::numeric, 1),
               'pending_events', lt.tick_event_seq - ct.tick_event_seq)
      from pgque.subscription s
      join pgque.queue q on q.queue_id = s.sub_queue
      join pgque.consumer c on c.co_id = s.sub_consumer
      join pgque.tick ct on ct.tick_queue = s.sub_queue and ct.tick_id = s.sub_last_tick
      join lateral (select * from pgque.tick t where t.tick_queue = s.sub_queue and t.tick_id > s.sub_last_tick
                       and t.tick_event_seq > ct.tick_event_seq order by t.tick_id limit 1) nt on true
      join lateral (select * from pgque.tick t where t.tick_queue = s.sub_queue
                     order by t.tick_id desc limit 1) lt on true
      -- a slot's own pending count (a join: probing the arrays per
      -- subscription cost 0.1 ms each, 0.1 s a pass at 1,000 slots)
      left join rows from (pg_catalog.unnest(p_subs), pg_catalog.unnest(p_counts)) p(sub_id, pending)
        on p.sub_id = s.sub_id
     where nt.tick_time < now_ts - i_lag_alert_after
       and (pg_catalog.strpos(c.co_name, '#') = 0 or p.pending > 0);

    -- cooperative members silent for too long while they hold a batch (the
    -- group's own lag is consumer_lagging above: its cursor is the group's)
    return query
    select 'coop_member_silent'::text, q.queue_name || '/' || c.co_name || '/' || m.member, q.queue_name,
           c.co_name || '.' || m.member, null::int4,
           pg_catalog.jsonb_build_object(
               'batch', m.batch, 'prev_tick', m.prev_tick, 'next_tick', m.next_tick,
               'last_seen', m.last_seen,
               'seconds_silent', round(extract(epoch from now_ts - m.last_seen)::numeric, 1))
      from pgque._coop_member_info() m
      join pgque.subscription s on s.sub_id = m.sub_id
      join pgque.queue q on q.queue_id = s.sub_queue
      join pgque.consumer c on c.co_id = s.sub_consumer
     where m.batch is not null and m.last_seen < now_ts - i_slot_stale_after;

    -- rotation overdue because a subscription's cursor holds the oldest
    -- table: only when the queue's latest tick is past the switch, so that
    -- the cursor could move past it (else a transaction holds every cursor:
    -- long_transaction below; or the ticker: ticker_stalled), and when the
    -- subscription has had a newer tick to move to for longer than the
    -- grace (else it is a healthy consumer one poll behind the tick that
    -- has just freed rotation, e.g. when a long transaction ends)
    return query
    select 'rotation_pinned'::text, q.queue_name || '/' || c.co_name, q.queue_name, c.co_name, null::int4,
           pg_catalog.jsonb_build_object(
               'rotation_due_since', q.queue_switch_time + q.queue_rotation_period,
               'overdue_seconds', round(extract(epoch from now_ts - (q.queue_switch_time + q.queue_rotation_period))::numeric, 1),
               'cursor_tick_time', t.tick_time,
               'current_table', q.queue_cur_table)
      from pgque.queue q
      join pgque.subscription s on s.sub_queue = q.queue_id
      join pgque.consumer c on c.co_id = s.sub_consumer
      join pgque.tick t on t.tick_queue = s.sub_queue and t.tick_id = s.sub_last_tick
      join lateral (select x.tick_snapshot from pgque.tick x where x.tick_queue = q.queue_id
                     order by x.tick_id desc limit 1) lt on true
     where q.queue_switch_step2 is not null
       and q.queue_switch_time + q.queue_rotation_period + i_rotation_grace < now_ts
       and pg_catalog.pg_snapshot_xmin(t.tick_snapshot) <= q.queue_switch_step2
       and pg_catalog.pg_snapshot_xmin(lt.tick_snapshot) > q.queue_switch_step2
       and (select n.tick_time from pgque.tick n
             where n.tick_queue = s.sub_queue and n.tick_id > s.sub_last_tick
             order by n.tick_id limit 1) + i_rotation_grace < now_ts;

    -- transactions holding rotation back, failed maintenance steps (ADR 0024)
    return query select * from pgque._alert_cause_conditions(i_rotation_grace);

    -- resizes of partitioned consumers still draining (ADR 0030)
    return query select * from pgque._resize_conditions();
    -- keys of pausing partitioned consumers blocked for too long (ADR 0029)
    return query select * from pgque._pause_alert_conditions(
                                   pgque._guc_interval('pgque_bgw.key_blocked_after', null));

    -- queues with new events and no tick for too long
    return query
    select 'ticker_stalled'::text, q.queue_name, q.queue_name, null::text, null::int4,
           pg_catalog.jsonb_build_object(
               'last_tick', lt.tick_time,
               'seconds_since_tick', round(extract(epoch from now_ts - lt.tick_time)::numeric, 1),
               'new_events', pgque._event_seq_pos(q) - lt.tick_event_seq,
               'ticker_paused', q.queue_ticker_paused)
      from pgque.queue q
      join lateral (select * from pgque.tick t where t.tick_queue = q.queue_id
                     order by t.tick_id desc limit 1) lt on true
     where not q.queue_external_ticker
       and lt.tick_time < now_ts - i_ticker_stalled_after
       -- new events moved the sequence; or a late committer (ADR 0005),
       -- probed only once the idle tick is overdue too: a running ticker
       -- ticks it at its commit, and an idle queue is not probed on every
       -- pass (ADR 0031)
       and (pgque._event_seq_pos(q) > lt.tick_event_seq
            or (lt.tick_time < now_ts - q.queue_ticker_idle_period and pgque._has_unticked_events(q, lt)));
end $$;

create function pgque._alert_where(a pgque.alert)
returns text language sql immutable as $$
    select case when a.queue_name is not null then pg_catalog.format('queue "%s"', a.queue_name)
                else pg_catalog.format('"%s"', a.subject) end
           operator(pg_catalog.||) case when a.consumer is not null
                                        then pg_catalog.format(', consumer "%s"', a.consumer) else '' end
           operator(pg_catalog.||) coalesce(', slot ' operator(pg_catalog.||) a.slot::pg_catalog.text, '')
$$;

-- Open what became true, clear what stopped being true.  -> (opened, cleared)
create function pgque._watchdog_pass(i_slot_unpolled_after interval, i_slot_stale_after interval,
                                     i_lag_alert_after interval, i_ticker_stalled_after interval,
                                     i_rotation_grace interval,
                                     out opened int4, out cleared int4)
language plpgsql
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    conds       pgque.alert_condition[];
    c           pgque.alert_condition;
    a           pgque.alert;
    where_text  text;
begin
    opened := 0;
    cleared := 0;
    -- the pass reads every queue's sequences and event tables: while a
    -- queue is being dropped, skip the pass (ADR 0020); alerts stay as
    -- they are
    if exists (select 1 from pgque.queue q where not pgque._queue_try_share(q.queue_id)) then
        return;
    end if;
    -- drained resizes switch to their new layout (ADR 0030)
    perform pgque._resize_complete_drained();
    conds := array(select x from pgque._alert_conditions(i_slot_unpolled_after, i_slot_stale_after,
                                                         i_lag_alert_after, i_ticker_stalled_after,
                                                         i_rotation_grace) x);

    for c in select * from pg_catalog.unnest(conds) n
              where not exists (select 1 from pgque.alert x
                                 where x.cleared_at is null and x.kind = n.kind and x.subject = n.subject)
              order by n.kind, n.subject loop
        insert into pgque.alert (kind, subject, queue_name, consumer, slot, details)
        values (c.kind, c.subject, c.queue_name, c.consumer, c.slot, c.details)
        returning * into a;
        where_text := pgque._alert_where(a);
        raise warning 'pgque_bgw alert % opened: %: %', c.kind, where_text, c.details
            using hint = case c.kind
                when 'slot_unpolled' then 'Make sure workers poll every slot (cycle over all slots, or run as many workers as slots).'
                when 'slot_stale' then 'A worker holding the lease stopped; another worker will take the slot over with claim_slot().'
                when 'consumer_lagging' then 'The consumer is behind: check that it runs and keeps up, or add workers.'
                when 'rotation_pinned' then 'A subscription is not consuming and holds rotation: fix its consumer or unsubscribe it.'
                when 'ticker_stalled' then 'Check the ticker: pgque.status(), ticker_paused, pgque_bgw.enabled.'
                when 'coop_member_silent' then 'A cooperative member holding a batch is silent: another member takes the window over after dead_interval, or restart it.'
                when 'long_transaction' then 'A transaction holds the queue''s rotation back: end it (COMMIT, ROLLBACK, pg_terminate_backend(pid), or ROLLBACK PREPARED for a prepared one) and fix what leaves it open.'
                when 'resize_stalled' then 'Old-layout slots of a resize are not drained: make sure workers serve the old n (pgque.partition_resize_status lists the slots).'
                when 'key_blocked' then 'A key of a partitioned consumer with failure policy pause waits for its failed event: fix what makes it fail, or let it reach the dead-letter queue (pgque.blocked_keys).'
                when 'maint_failed' then 'A maintenance step fails: see the error in the details and the server log; on "No space left on device" add space to the event tables'' tablespace (docs/operations.md).'
                -- a NULL hint would make RAISE fail and with it the whole pass
                else 'See docs/alerts.md for what to do.'
                end;
        -- any role may LISTEN: the payload names the alert, pgque.alerts
        -- (which needs pgque rights) has what it is about
        perform pg_catalog.pg_notify('pgque_alert', pg_catalog.jsonb_build_object(
            'event', 'opened', 'alert_id', a.alert_id, 'kind', a.kind)::text);
        opened := opened + 1;
    end loop;

    for a in update pgque.alert x set cleared_at = now()
              where x.cleared_at is null
                and x.kind <> 'worker_down'     -- _worker_down_pass's (sql/43_worker_alerts.sql)
                and not exists (select 1 from pg_catalog.unnest(conds) n
                                 where n.kind = x.kind and n.subject = x.subject)
             returning x.* loop
        raise log 'pgque_bgw alert % cleared: %, open since %', a.kind, pgque._alert_where(a), a.opened_at;
        perform pg_catalog.pg_notify('pgque_alert', pg_catalog.jsonb_build_object(
            'event', 'cleared', 'alert_id', a.alert_id, 'kind', a.kind)::text);
        cleared := cleared + 1;
    end loop;
    perform pgque._maint_failure_settle();
end $$;

-- Alert history retention (the maintenance worker runs it).  -> rows deleted
create function pgque.maint_alerts(i_retention interval default '7 days')
returns int4 language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    n int4;
begin
    perform pgque._check_interval('retention', i_retention, true);
    delete from pgque.alert where cleared_at is not null and cleared_at < now() - i_retention;
    get diagnostics n = row_count;
    return n;
end $$;
-- Alerts that name causes outside the cursors (ADR 0024): a transaction
-- that holds a queue's rotation back (long_transaction), and a maintenance
-- step that failed (maint_failed).  _alert_conditions (42_alerts.sql)
-- returns their rows with the others; the open-once/clear-once machinery
-- is the same (ADR 0012).

-- Maintenance steps that failed, one row per (step, queue): the
-- maintenance worker writes a row when a step fails and stamps
-- mf_recovered_at when the same step next succeeds.  The watchdog reports
-- every failure at least once (mf_reported), also one that recovered
-- before it looked, and forgets the row once the alert is cleared.
create table pgque.maint_failure (
    mf_subject       text primary key,   -- step, or step/queue
    mf_step          text not null,
    mf_queue         text,
    mf_error         text not null,
    mf_sqlstate      text not null,
    mf_failures      int8 not null default 1,
    mf_first_at      timestamptz not null default now(),
    mf_last_at       timestamptz not null default now(),
    mf_recovered_at  timestamptz,
    mf_reported      boolean not null default false
);

-- A maintenance step failed (the maintenance worker, and the rotation's
-- disk-full path, call it).  Writes on the first failure and on each
-- repeat (the count and the last error), nothing else.
create function pgque._maint_failed(i_step text, i_queue text, i_error text, i_sqlstate text)
returns void language sql
set search_path = pgque, pg_catalog, pg_temp as $$
    insert into pgque.maint_failure as f (mf_subject, mf_step, mf_queue, mf_error, mf_sqlstate)
    values (i_step || coalesce('/' || i_queue, ''), i_step, i_queue, i_error, i_sqlstate)
    on conflict (mf_subject) do update
       set mf_error = excluded.mf_error, mf_sqlstate = excluded.mf_sqlstate,
           mf_failures = case when f.mf_recovered_at is null then f.mf_failures + 1 else 1 end,
           mf_first_at = case when f.mf_recovered_at is null then f.mf_first_at else now() end,
           mf_last_at = now(), mf_recovered_at = null,
           -- a new failure after a recovery the watchdog already cleared
           mf_reported = f.mf_reported and f.mf_recovered_at is null;
$$;

-- The step succeeded: a failure of it recovered.  Writes nothing when the
-- step was not failing (the usual case: one primary-key probe).
create function pgque._maint_ok(i_step text, i_queue text)
returns void language sql
set search_path = pgque, pg_catalog, pg_temp as $$
    update pgque.maint_failure set mf_recovered_at = now()
     where mf_subject = i_step || coalesce('/' || i_queue, '') and mf_recovered_at is null;
$$;

-- The running transactions that hold a queue's rotation back, for every
-- queue whose rotation is overdue by more than i_rotation_grace:
--   xid:  an xid at or before the queue's switch stamp (step 2) is still
--         running, so no tick has a snapshot xmin past the stamp and no
--         cursor can get past it (a snapshot alone, without an xid, does not
--         hold rotation: tick snapshots' xmin counts only xids);
--   lock: every cursor is past, but a transaction holds a lock on the table
--         to truncate next (step 1's LOCK ... NOWAIT gives up each time).
-- A prepared transaction (PREPARE TRANSACTION) has no session: its gid is
-- named.  Sessions of other roles show their pid, state and times only to an owner
-- with pg_read_all_stats; without it an xid holder is still found (from
-- the snapshot) and its start is bounded by the queue's last switch.
create function pgque._rotation_holders(i_rotation_grace interval)
returns table (queue_name text, holds text, xid xid8, pid int4, datname name, usename name,
               application_name text, state text, xact_start timestamptz, query_start timestamptz,
               gid text, since timestamptz)
language sql stable
set search_path = pgque, pg_catalog, pg_temp as $$
    with due as (
        select q.*, lt.tick_snapshot as last_snapshot,
               (select pg_catalog.min(pg_catalog.pg_snapshot_xmin(t.tick_snapshot))
                  from pgque.subscription s
                  join pgque.tick t on t.tick_queue = s.sub_queue and t.tick_id = s.sub_last_tick
                 where s.sub_queue = q.queue_id) as lowest
          from pgque.queue q
          join lateral (select t.tick_snapshot from pgque.tick t where t.tick_queue = q.queue_id
                         order by t.tick_id desc limit 1) lt on true
         where q.queue_switch_step2 is not null
           and q.queue_switch_time + q.queue_rotation_period + i_rotation_grace < pg_catalog.clock_timestamp()
    ), running as (
        select x as xid from pg_catalog.pg_snapshot_xip(pg_catalog.pg_current_snapshot()) x
    )
    select d.queue_name, 'xid', r.xid, a.pid, a.datname, a.usename, a.application_name, a.state,
           a.xact_start, a.query_start, p.gid, coalesce(a.xact_start, p.prepared, d.queue_switch_time)
      from due d
      join running r on r.xid operator(pg_catalog.<=) d.queue_switch_step2
      left join pg_catalog.pg_stat_activity a on a.backend_xid operator(pg_catalog.=) pg_catalog.xid(r.xid)
      left join pg_catalog.pg_prepared_xacts p on p.transaction operator(pg_catalog.=) pg_catalog.xid(r.xid)
     where pg_catalog.pg_snapshot_xmin(d.last_snapshot) operator(pg_catalog.<=) d.queue_switch_step2
    union all
    select d.queue_name, 'lock', null, a.pid, a.datname, a.usename, a.application_name, a.state,
           a.xact_start, a.query_start, null, a.xact_start
      from due d
      -- the table step 1 truncates next, and its partition buckets
      join lateral (select pg_catalog.to_regclass(pg_catalog.format('pgque.%I',
                               'event_' || d.queue_id || '_' || (d.queue_cur_table + 1) % d.queue_ntables))::oid
                           as rel) nxt on true
      join pg_catalog.pg_stat_activity a
        on exists (select 1 from pg_catalog.pg_locks l
                    where l.pid = a.pid and l.locktype = 'relation' and l.granted
                      and l.database = (select oid from pg_catalog.pg_database
                                         where datname = pg_catalog.current_database())
                      and (l.relation = nxt.rel
                           or l.relation in (select i.inhrelid from pg_catalog.pg_inherits i
                                              where i.inhparent = nxt.rel)))
       and a.pid operator(pg_catalog.<>) pg_catalog.pg_backend_pid()
     where d.lowest operator(pg_catalog.>) d.queue_switch_step2
$$;

-- long_transaction and maint_failed conditions (see _alert_conditions).
-- The threshold is pgque_bgw.long_transaction_after (NULL when the
-- library is not loaded: no long_transaction then).
create function pgque._alert_cause_conditions(i_rotation_grace interval)
returns setof pgque.alert_condition language sql stable
set search_path = pgque, pg_catalog, pg_temp as $$
    select 'long_transaction'::text,
           h.queue_name || '/' || coalesce('xid ' || h.xid::text, 'pid ' || h.pid || ' since ' || h.since),
           h.queue_name, null::text, null::int4,
           pg_catalog.jsonb_strip_nulls(pg_catalog.jsonb_build_object(
               'holds', h.holds, 'pid', h.pid, 'xid', h.xid, 'datname', h.datname, 'usename', h.usename,
               'application_name', h.application_name, 'state', h.state, 'prepared_gid', h.gid,
               'xact_start', h.xact_start, 'query_start', h.query_start,
               'age_seconds', round(extract(epoch from pg_catalog.clock_timestamp() - h.since)::numeric, 1),
               'started_before_switch', case when h.xact_start is null and h.gid is null and h.holds = 'xid'
                                             then true end))
      from pgque._rotation_holders(i_rotation_grace) h
     where h.since < pg_catalog.clock_timestamp() - pgque._guc_interval('pgque_bgw.long_transaction_after', null)
    union all
    select 'maint_failed', f.mf_subject, f.mf_queue, null, null,
           pg_catalog.jsonb_strip_nulls(pg_catalog.jsonb_build_object(
               'step', f.mf_step, 'error', f.mf_error, 'sqlstate', f.mf_sqlstate,
               'failures', f.mf_failures, 'first_failed_at', f.mf_first_at,
               'last_failed_at', f.mf_last_at, 'recovered_at', f.mf_recovered_at))
      from pgque.maint_failure f
     where f.mf_recovered_at is null or not f.mf_reported
$$;

-- After a watchdog pass: failures with an open alert are reported; those
-- that recovered and whose alert is cleared are forgotten.
create function pgque._maint_failure_settle()
returns void language sql
set search_path = pgque, pg_catalog, pg_temp as $$
    update pgque.maint_failure f set mf_reported = true
     where not f.mf_reported
       and exists (select 1 from pgque.alert a
                    where a.kind = 'maint_failed' and a.subject = f.mf_subject and a.cleared_at is null);
    delete from pgque.maint_failure f
     where f.mf_recovered_at is not null and f.mf_reported
       and not exists (select 1 from pgque.alert a
                        where a.kind = 'maint_failed' and a.subject = f.mf_subject and a.cleared_at is null);
$$;
-- The worker_down alert (ADR 0028): a worker of this database (ticker,
-- maintenance, watchdog) that is wanted and has not run for
-- pgque_bgw.worker_down_after.  What is down comes from the shared-memory
-- state table (src/supervise.c); the rows follow ADR 0012 (open once, clear
-- once).  An outage that began and ended while no worker could write (the
-- watchdog and the ticker were both down) is written afterwards as one row
-- opened at the threshold and cleared when the worker came back.

create function pgque._worker_down_hint()
returns text language sql immutable as $$
    select 'See pgque.status() and pgque.launcher_workers(): the launcher restarts a stopped worker '
           'within pgque_bgw.worker_restart_max; a worker that is not started says why '
           '(worker budget, max_worker_processes).'::text
$$;

-- i_kind[k], i_down_since[k], i_up_at[k]: one row per outage; i_up_at null:
-- down now.  Kinds absent from the rows are up: their open alert clears.
-- -> (opened, cleared)
create function pgque._worker_down_pass(i_kind text[], i_down_since timestamptz[], i_up_at timestamptz[],
                                        i_threshold interval, out opened int4, out cleared int4)
language plpgsql
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    r record;
    a pgque.alert;
begin
    opened := 0;
    cleared := 0;
    -- ended outages first (a worker may be down again already)
    for r in select u.kind, u.down_since, u.up_at
               from rows from (pg_catalog.unnest(i_kind), pg_catalog.unnest(i_down_since),
                               pg_catalog.unnest(i_up_at)) u(kind, down_since, up_at)
              order by u.up_at nulls last, u.kind loop
        select * into a from pgque.alert x
         where x.kind = 'worker_down' and x.subject = r.kind and x.cleared_at is null;
        if r.up_at is not null and found then
            update pgque.alert x set cleared_at = greatest(r.up_at, x.opened_at)
             where x.alert_id = a.alert_id;
            raise log 'pgque_bgw alert worker_down cleared: worker %, open since %', r.kind, a.opened_at;
            perform pg_catalog.pg_notify('pgque_alert', pg_catalog.jsonb_build_object(
                'event', 'cleared', 'alert_id', a.alert_id, 'kind', 'worker_down')::text);
            cleared := cleared + 1;
        elsif not found then
            insert into pgque.alert (kind, subject, opened_at, cleared_at, details)
            values ('worker_down', r.kind, r.down_since + i_threshold, r.up_at,
                    pg_catalog.jsonb_build_object(
                        'worker', r.kind, 'down_since', r.down_since, 'up_at', r.up_at,
                        'seconds_down', round(extract(epoch from coalesce(r.up_at, pg_catalog.clock_timestamp())
                                                                  - r.down_since)::numeric, 1)))
            returning * into a;
            raise warning 'pgque_bgw alert worker_down opened: worker %: %', r.kind, a.details
                using hint = pgque._worker_down_hint();
            perform pg_catalog.pg_notify('pgque_alert', pg_catalog.jsonb_build_object(
                'event', 'opened', 'alert_id', a.alert_id, 'kind', 'worker_down')::text);
            opened := opened + 1;
            if r.up_at is not null then
                raise log 'pgque_bgw alert worker_down cleared: worker %, open since %', r.kind, a.opened_at;
                perform pg_catalog.pg_notify('pgque_alert', pg_catalog.jsonb_build_object(
                    'event', 'cleared', 'alert_id', a.alert_id, 'kind', 'worker_down')::text);
                cleared := cleared + 1;
            end if;
        end if;
    end loop;

    -- up now: clear
    for a in update pgque.alert x set cleared_at = now()
              where x.kind = 'worker_down' and x.cleared_at is null
                and x.subject <> all (array(select u.kind
                                              from rows from (pg_catalog.unnest(i_kind),
                                                              pg_catalog.unnest(i_up_at)) u(kind, up_at)
                                             where u.up_at is null))
             returning x.* loop
        raise log 'pgque_bgw alert worker_down cleared: worker %, open since %', a.subject, a.opened_at;
        perform pg_catalog.pg_notify('pgque_alert', pg_catalog.jsonb_build_object(
            'event', 'cleared', 'alert_id', a.alert_id, 'kind', 'worker_down')::text);
        cleared := cleared + 1;
    end loop;
end $$;
-- Partition keys (SPEC §3): events of one key are consumed in order by one
-- worker at a time, different keys in parallel, over N fixed slots.  Each
-- slot k of consumer C is its own subscription "C#k/N"; N is persisted per
-- (queue, consumer).  Slot ownership (leases with epoch fencing) lives in
-- shared memory (src/slots.c): claims and renewals write no row and no WAL.

create table pgque.partition_consumer (
    queue_id  int4 not null references pgque.queue (queue_id) on delete cascade,
    co_name   text not null,
    n         int4 not null check (n >= 1),
    -- the role that subscribed the first slot: it owns every slot
    -- subscription "<co_name>#<k>/<n>" (pgque._authorize)
    owner     regrole not null,
    -- what a nack does to the key's later events (ADR 0029): 'skip' they
    -- pass the retried one; 'pause' they wait for it (sql/46_pause.sql)
    failure_policy text not null default 'skip' check (failure_policy in ('skip', 'pause')),
    primary key (queue_id, co_name)
);
select pg_catalog.pg_extension_config_dump('pgque.partition_consumer', '');

-- Epochs only grow, across takeovers, restarts and failovers: a sequence is
-- WAL-logged ahead of use and replicated.
create sequence pgque.slot_epoch_seq;
select pg_catalog.pg_extension_config_dump('pgque.slot_epoch_seq', '');

create function pgque._slot_claim(i_queue_id int4, i_consumer text, i_slot int4, i_worker text, i_ttl_ms int8)
returns bigint language c strict as 'MODULE_PATHNAME', 'pgque_slot_claim_sql';
create function pgque._slot_release(i_queue_id int4, i_consumer text, i_slot int4, i_worker text)
returns boolean language c strict as 'MODULE_PATHNAME', 'pgque_slot_release_sql';
create function pgque._slot_check(i_queue_id int4, i_consumer text, i_slot int4, i_worker text,
                                  i_is_ack boolean, i_queue_name text)
returns bigint language c strict as 'MODULE_PATHNAME', 'pgque_slot_check_sql';
create function pgque._slot_forget(i_queue_id int4, i_consumer text)
returns int4 language c as 'MODULE_PATHNAME', 'pgque_slot_forget_sql';
create function pgque._slot_leases(
    out queue_id int4, out consumer text, out slot int4, out owner text, out lease_until timestamptz,
    out ttl_ms int8, out epoch int8, out claimed_at timestamptz, out last_receive timestamptz,
    out last_ack timestamptz, out claims int8, out receives int8, out acks int8)
returns setof record language c as 'MODULE_PATHNAME', 'pgque_slot_leases_sql';

create function pgque._slot_lease_count_all()
returns int4 language c as 'MODULE_PATHNAME', 'pgque_slot_count_all_sql';

create function pgque._slot_name(i_consumer text, i_slot int4, i_n int4)
returns text language sql immutable as $$
    select i_consumer operator(pg_catalog.||) '#' operator(pg_catalog.||) i_slot::pg_catalog.text
           operator(pg_catalog.||) '/' operator(pg_catalog.||) i_n::pg_catalog.text
$$;

-- Every slot of every partitioned consumer, with the consumer id of its
-- subscription (NULL: none): the one slot list of the watchdog,
-- _slot_pending_all and get_partition_slot_info.  The names are formed
-- first and joined with the consumers by hash: joined inside a larger join,
-- the planner formed them once per subscription (a million rows at 1,000
-- slot subscriptions, 0.4 s a watchdog pass for each of three queries).
create function pgque._slot_list(out queue_id int4, out consumer text, out n int4, out slot int4,
                                 out co_id int4)
returns setof record language sql stable as $$
    with names as materialized (
        select pc.queue_id, pc.co_name, pc.n, k, pgque._slot_name(pc.co_name, k, pc.n) as name
          from pgque.partition_consumer pc
         cross join lateral pg_catalog.generate_series(0, pc.n - 1) k)
    select nm.queue_id, nm.co_name, nm.n, nm.k, c.co_id
      from names nm
      left join pgque.consumer c on c.co_name operator(pg_catalog.=) nm.name
$$;

-- A worker id: not NULL, not empty, at most 64 bytes.
create function pgque._check_worker(i_worker text)
returns void language plpgsql as $$
begin
    perform pgque._check_name('worker', i_worker, 64);
end $$;

-- The persisted N of a partitioned consumer, after checking that the caller
-- may use the consumer, and the caller's N (if given) and the slot number
-- against it.  Every slot operation starts here, so the owner check comes
-- before any lease is touched.  Wrong N is refused before any lease check,
-- so it is never silently misrouted.
create function pgque._partitioned(q pgque.queue, i_consumer text, i_n int4, i_slot int4)
returns int4 language plpgsql as $$
declare
    pc pgque.partition_consumer;
    pn int4;
begin
    perform pgque._user_consumer_name(i_consumer);
    perform pgque._check_not_null('slot', i_slot);
    select * into pc from pgque.partition_consumer p
     where p.queue_id = q.queue_id and p.co_name = i_consumer;
    if not found then
        raise exception 'consumer "%" has no partition slots on queue "%"', i_consumer, q.queue_name
            using errcode = 'undefined_object',
                  hint = 'Subscribe its slots with pgque.subscribe_slot().';
    end if;
    perform pgque._authorize(pc.owner, q.queue_id, i_consumer);
    pn := pc.n;
    if i_n is not null and i_n <> pn then
        -- the new n of a resize still draining: retry later (ADR 0030)
        perform pgque._resize_gate(q, i_consumer, i_n);
        raise exception 'consumer "%" of queue "%" is pinned to n = %, not %', i_consumer, q.queue_name, pn, i_n
            using errcode = 'invalid_parameter_value',
                  hint = 'Its n may have changed (pgque.resize_partitioned): read n from pgque.partition_slot_status and claim again.';
    end if;
    if i_slot < 0 or i_slot >= pn then
        raise exception 'slot % is out of range 0..% for consumer "%"', i_slot, pn - 1, i_consumer
            using errcode = 'invalid_parameter_value',
                  hint = 'Its n may have changed (pgque.resize_partitioned): read n from pgque.partition_slot_status.';
    end if;
    return pn;
end $$;

-- subscribe_slot(queue, consumer, slot, n): subscribe slot k of n.  The
-- first call pins n for (queue, consumer) and makes the caller the owner of
-- every slot; another n is refused, another role too; repeating a call is
-- harmless.
create function pgque.subscribe_slot(queue_name text, consumer_name text, slot int4, n int4)
returns void language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    q   pgque.queue;
    pn  int4;
    own regrole;
begin
    q := pgque._queue(queue_name);
    perform pgque._user_consumer_name(consumer_name);
    if (pgque._coop_group(q, consumer_name)).sub_id is not null then
        raise exception 'consumer "%" of queue "%" is a cooperative consumer', consumer_name, queue_name
            using errcode = 'wrong_object_type',
                  detail = 'A consumer is either partitioned (ordered per key) or cooperative (no order), not both.',
                  hint = 'Use another consumer name for the partitioned consumer.';
    end if;
    perform pgque._check_not_null('n', n);
    perform pgque._check_not_null('slot', slot);
    if n < 1 or n > 1024 then
        raise exception 'n must be between 1 and 1024, got %', n
            using errcode = 'invalid_parameter_value';
    end if;
    if slot < 0 or slot >= n then
        raise exception 'slot % is out of range 0..%', slot, n - 1
            using errcode = 'invalid_parameter_value';
    end if;
    insert into pgque.partition_consumer as pc (queue_id, co_name, n, owner)
    values (q.queue_id, consumer_name, n, pgque._caller())
    on conflict (queue_id, co_name) do update set n = pc.n
    returning pc.n, pc.owner into pn, own;
    perform pgque._authorize(own, q.queue_id, consumer_name);
    perform pgque._resize_refuse(q, consumer_name, 'subscribe_slot');
    if pn <> n then
        raise exception 'consumer "%" of queue "%" is pinned to n = %, not %', consumer_name, queue_name, pn, n
            using errcode = 'invalid_parameter_value',
                  hint = 'Unsubscribe every slot first to choose another n.';
    end if;
    perform pgque._register(q, pgque._slot_name(consumer_name, slot, n), null, own);
    -- the queue's first partitioned consumer subscribed by an admin chooses
    -- its partition buckets (ADR 0013): a multiple of n, at least 32, so
    -- that n and its divisors read only their own buckets.  A layout is the
    -- admins' choice, fixed for good: a reader's subscribe leaves the queue
    -- unbucketed (slots then read the filtered child tables).
    select * into q from pgque.queue where queue_id = q.queue_id for update;
    if q.queue_partition_buckets is null and n between 2 and 64 and pgque._caller_is_admin() then
        perform pgque._create_buckets(q, n * ((32 + n - 1) / n));
    end if;
end $$;

-- unsubscribe_slot(queue, consumer, slot): the last slot frees n.
create function pgque.unsubscribe_slot(queue_name text, consumer_name text, slot int4)
returns void language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    q   pgque.queue;
    pn  int4;
begin
    q := pgque._queue(queue_name);
    pn := pgque._partitioned(q, consumer_name, null, slot);
    perform pgque._resize_refuse(q, consumer_name, 'unsubscribe_slot');
    if pgque._unregister(q, pgque._slot_name(consumer_name, slot, pn)) = 0 then
        raise exception 'slot % of consumer "%" is not subscribed to queue "%"', slot, consumer_name, queue_name
            using errcode = 'undefined_object';
    end if;
    -- exact names of this consumer's slots (a pattern would match others)
    if not exists (select 1 from pg_catalog.generate_series(0, pn - 1) k
                     join pgque.consumer c on c.co_name = pgque._slot_name(consumer_name, k, pn)
                     join pgque.subscription s on s.sub_consumer = c.co_id
                    where s.sub_queue = q.queue_id) then
        delete from pgque.partition_consumer where queue_id = q.queue_id and co_name = consumer_name;
        perform pgque._slot_forget(q.queue_id, consumer_name);
    end if;
end $$;

-- claim_slot: take a free or expired slot (new, larger epoch), renew one's
-- own (same epoch), or get NULL when another worker holds a live lease.
create function pgque.claim_slot(queue_name text, consumer_name text, slot int4, worker text,
                                 ttl interval default '30 seconds')
returns bigint language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    q pgque.queue;
begin
    q := pgque._queue(queue_name);
    -- a drained resize switches to the new layout here (ADR 0030)
    if (pgque._resize_of(q.queue_id, consumer_name)).to_n is not null then
        perform pgque._partitioned(q, consumer_name, null, 0);
        perform pgque._resize_complete(q.queue_id, consumer_name);
    end if;
    perform pgque._partitioned(q, consumer_name, null, slot);
    perform pgque._check_worker(worker);
    perform pgque._check_not_null('ttl', ttl);
    if ttl < interval '1 second' or ttl > interval '1 day' then
        raise exception 'ttl must be between 1 second and 1 day, got %', ttl
            using errcode = 'invalid_parameter_value',
                  hint = 'A worker renews its lease with every receive and ack; a short ttl hands a dead worker''s slots over sooner.';
    end if;
    return pgque._slot_claim(q.queue_id, consumer_name, slot, worker,
                             (extract(epoch from ttl) * 1000)::int8);
end $$;

-- release_slot: owner only (false otherwise); the epoch is kept.  Release
-- between batches: the open batch goes to the next owner.
create function pgque.release_slot(queue_name text, consumer_name text, slot int4, worker text)
returns boolean language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    q pgque.queue;
begin
    q := pgque._queue(queue_name);
    perform pgque._partitioned(q, consumer_name, null, slot);
    perform pgque._check_worker(worker);
    return pgque._slot_release(q.queue_id, consumer_name, slot, worker);
end $$;

-- The lease check shared by the partitioned receive/ack/nack: validate, check
-- n and slot, check and renew the lease.  -> the slot's subscription name
-- and the caller's lease epoch (the row of pgque.slot_batch it works on).
create function pgque._slot_guard(q pgque.queue, i_consumer text, i_slot int4, i_n int4,
                                  i_worker text, i_is_ack boolean, out sub_name text, out epoch bigint)
language plpgsql as $$
begin
    perform pgque._check_not_null('n', i_n);
    perform pgque._partitioned(q, i_consumer, i_n, i_slot);
    perform pgque._check_worker(i_worker);
    epoch := pgque._slot_check(q.queue_id, i_consumer, i_slot, i_worker, i_is_ack, q.queue_name);
    sub_name := pgque._slot_name(i_consumer, i_slot, i_n);
end $$;

-- The fence after an ack's or nack's writes: the caller must still hold the
-- lease of the same epoch, else PQ002 / PQ001 and the writes roll back
-- with the statement.  A worker frozen between its lease check and its
-- writes cannot move the slot's cursor after a takeover (ADR 0023).
create function pgque._slot_recheck(i_queue_id int4, i_consumer text, i_slot int4, i_worker text,
                                    i_epoch bigint, i_queue_name text)
returns void language c strict as 'MODULE_PATHNAME', 'pgque_slot_recheck_sql';

-- The slot's cursor: the greatest of what any epoch acked and the folded
-- sub_last_tick (a fold skips a locked subscription row, see _slot_fold).
create function pgque._slot_cursor(i_sub pgque.subscription)
returns bigint language sql stable as $$
    select greatest(i_sub.sub_last_tick,
                    (select pg_catalog.max(b.sb_last_tick) from pgque.slot_batch b
                      where b.sb_sub operator(pg_catalog.=) i_sub.sub_id))
$$;

-- The caller's open batch on its slot, as a subscription row carrying it
-- (sub_batch is NULL: none open); its epoch's row locked.
create function pgque._slot_open(i_queue_name text, i_sub_name text, i_epoch bigint)
returns pgque.subscription language plpgsql as $$
declare
    s   pgque.subscription;
    r   pgque.slot_batch;
begin
    s := pgque._subscription(i_queue_name, i_sub_name);
    r := pgque._slot_batch_row(s, i_epoch);
    s.sub_last_tick := r.sb_last_tick;
    s.sub_batch := r.sb_batch;
    s.sub_next_tick := r.sb_next_tick;
    s.sub_batch_pos := r.sb_pos;
    s.sub_batch_last := r.sb_last;
    return s;
end $$;

-- The per-call steps of receive_partitioned: the argument checks (on the
-- first try) and the lease check, whether the slot's consumer pauses, then
-- the slot's open batch or the next one (NULL: none).  A slot sees about
-- 1/n of a window: it spans windows for n times more events.
create function pgque._slot_receive_open(i_queue_name text, i_consumer text, i_slot int4, i_n int4,
                                         i_worker text, i_max_return int4, i_check bool,
                                         out batch_id bigint, out pause boolean)
language plpgsql as $$
declare
    q   pgque.queue;
    g   record;
begin
    q := pgque._queue(i_queue_name);
    if i_check then
        perform pgque._check_max_return(i_max_return);
    end if;
    g := pgque._slot_guard(q, i_consumer, i_slot, i_n, i_worker, false);
    pause := pgque._slot_pauses(q.queue_id, i_consumer);
    batch_id := (pgque._slot_next_batch(i_queue_name, g.sub_name, g.epoch,
                                        (least(i_max_return::int8 * i_n, 1000000000))::int4)).batch_id;
end $$;

-- receive_partitioned: only this slot's events, in ev_id order, read in C
-- as the plain receive (src/receive.c, ADR 0034).  It locks no
-- subscription row: a takeover never waits for the previous owner.
create function pgque.receive_partitioned(queue_name text, consumer_name text, slot int4, n int4,
                                          worker text, max_return int4 default 100)
returns setof pgque.message language c volatile security definer
set search_path = pgque, pg_catalog, pg_temp
as 'MODULE_PATHNAME', 'pgque_receive_partitioned';

-- ack_partitioned -> 1 acked / 0 no open batch.  A fenced worker raises,
-- also when the takeover came while it was acking (nothing it wrote stays).
create function pgque.ack_partitioned(queue_name text, consumer_name text, slot int4, n int4, worker text)
returns int4 language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    q   pgque.queue;
    g   record;
    s   pgque.subscription;
    res int4 := 0;
begin
    q := pgque._queue(queue_name);
    g := pgque._slot_guard(q, consumer_name, slot, n, worker, true);
    s := pgque._slot_open(queue_name, g.sub_name, g.epoch);
    if s.sub_batch is not null then
        res := pgque._slot_finish(s.sub_batch);
        -- failure policy pause: release the keys whose head was done in it
        if exists (select from pgque.blocked_key b where b.bk_done_batch = s.sub_batch) then
            perform pgque._pause_after_ack(s.sub_id, s.sub_batch, g.epoch, n, slot);
        end if;
    end if;
    perform pgque._slot_recheck(q.queue_id, consumer_name, slot, worker, g.epoch, queue_name);
    return res;
end $$;

-- A slot's nack: _nack_event, waiting at most a second for another
-- transaction that scheduled the same retry or dead letter and is still
-- open (a fenced owner frozen after its nack, ADR 0023): whether that one
-- commits decides whether this one is needed, so the caller retries later.
create function pgque._slot_nack_event(s pgque.subscription, i_ev_id bigint, i_retry_after interval,
                                       i_reason text, i_n int4, i_slot int4)
returns int4 language plpgsql set lock_timeout = '1s' as $$
begin
    return pgque._nack_event(s, i_ev_id, i_retry_after, i_reason, i_n, i_slot);
exception when lock_not_available then
    raise exception 'event % of slot % is being nacked by another open transaction', i_ev_id, i_slot
        using errcode = 'lock_not_available',
              detail = 'A worker that held the slot before (now fenced) nacked it in a transaction that is still open.',
              hint = 'Roll back and receive the batch again later: it stays open until that transaction ends.';
end $$;

-- nack_partitioned: retry (on the same slot: same key) or dead letter.
create function pgque.nack_partitioned(queue_name text, consumer_name text, slot int4, n int4, worker text,
                                       msg pgque.message, retry_after interval default '60 seconds',
                                       reason text default null)
returns int4 language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    q   pgque.queue;
    g   record;
    s   pgque.subscription;
    res int4;
begin
    q := pgque._queue(queue_name);
    perform pgque._check_not_null('msg.msg_id', msg.msg_id);
    perform pgque._check_interval('retry_after', retry_after, true);
    g := pgque._slot_guard(q, consumer_name, slot, n, worker, true);
    s := pgque._slot_open(queue_name, g.sub_name, g.epoch);
    if s.sub_batch is null then
        raise exception 'slot % of consumer "%" has no open batch', slot, consumer_name
            using errcode = 'object_not_in_prerequisite_state';
    end if;
    res := pgque._slot_nack_event(s, msg.msg_id, retry_after, reason, n, slot);
    if pgque._slot_pauses(q.queue_id, consumer_name) then
        perform pgque._pause_on_nack(s, msg.msg_id, n, slot);   -- block its key (ADR 0029)
    end if;
    perform pgque._slot_recheck(q.queue_id, consumer_name, slot, worker, g.epoch, queue_name);
    return res;
end $$;

-- This slot's share of the events after its cursor (up to the latest tick).
create function pgque._slot_pending(i_sub_id int4, i_n int4, i_slot int4)
returns bigint language plpgsql stable as $$
declare
    r  record;
    n  bigint;
begin
    -- one statement, so the queue row and the ticks come from one snapshot
    select qq as q, t1.tick_snapshot as snap1,
           (select t.tick_snapshot from pgque.tick t where t.tick_queue = s.sub_queue
               and t.tick_id <= coalesce(pgque._resize_cap(s.sub_id), t.tick_id)
             order by t.tick_id desc limit 1) as snap2
      into r
      from pgque.subscription s
      join pgque.queue qq on qq.queue_id = s.sub_queue
      join pgque.tick t1 on t1.tick_queue = s.sub_queue and t1.tick_id = pgque._slot_cursor(s)
     where s.sub_id = i_sub_id;
    if not found then
        return null;
    end if;
    execute pg_catalog.format(
        'select count(*) from %s ev'
        ' where ((ev.ev_txid >= $1 and ev.ev_txid < $2) or ev.ev_txid = any($3))'
        '   and pg_catalog.pg_visible_in_snapshot(ev.ev_txid, $4)'
        '   and (ev.ev_owner is null or ev.ev_owner = $5)'
        '   and pgque._slot_of(ev.ev_extra1, $6) = $7', pgque._event_source(r.q, r.snap1, r.snap2, i_n, i_slot))
    into n
    using pg_catalog.pg_snapshot_xmax(r.snap1), pg_catalog.pg_snapshot_xmax(r.snap2),
          array(select pg_catalog.pg_snapshot_xip(r.snap1)), r.snap2, i_sub_id, i_n, i_slot;
    return n;
end $$;

-- Every slot's share of the events after its cursor (up to the latest
-- tick), as _slot_pending counts it, with one read of the window per
-- partitioned consumer instead of one per slot (ADR 0031), and none for a
-- consumer whose slots are all at the latest tick.  An event counts for its
-- slot when its own cursor's snapshot does not see it: the window read is
-- the oldest cursor's.  -> (sub_id, pending); pending NULL when the slot's
-- cursor tick is gone.
create function pgque._slot_pending_all(out sub_id int4, out pending bigint)
returns setof record language plpgsql stable as $$
declare
    g  record;
begin
    for g in
        select qq as q, x.n, x.slots, x.subs, x.snaps, x.lo_tick, x.lo_snap, x.gone,
               lt.tick_id as hi_tick, lt.tick_snapshot as hi_snap
          from (select pc.queue_id, pc.n,
                       pg_catalog.array_agg(pc.slot order by pc.slot) filter (where t1.tick_id is not null) as slots,
                       pg_catalog.array_agg(s.sub_id order by pc.slot) filter (where t1.tick_id is not null) as subs,
                       pg_catalog.array_agg(t1.tick_snapshot order by pc.slot) filter (where t1.tick_id is not null) as snaps,
                       pg_catalog.min(t1.tick_id) as lo_tick,
                       (pg_catalog.array_agg(t1.tick_snapshot order by t1.tick_id)
                          filter (where t1.tick_id is not null))[1] as lo_snap,
                       -- slots whose cursor tick is gone
                       pg_catalog.array_agg(s.sub_id) filter (where t1.tick_id is null) as gone
                  from pgque._slot_list() pc
                  join pgque.subscription s on s.sub_queue = pc.queue_id and s.sub_consumer = pc.co_id
                  left join pgque.tick t1 on t1.tick_queue = s.sub_queue and t1.tick_id = pgque._slot_cursor(s)
                 group by pc.queue_id, pc.consumer, pc.n) x
          join pgque.queue qq on qq.queue_id = x.queue_id
          join lateral (select t.tick_id, t.tick_snapshot from pgque.tick t where t.tick_queue = x.queue_id
                         order by t.tick_id desc limit 1) lt on true
    loop
        if g.gone is not null then
            return query select u, null::bigint from pg_catalog.unnest(g.gone) u;
        end if;
        if g.subs is null then
            continue;
        end if;
        if g.lo_tick >= g.hi_tick then
            -- every slot is at the latest tick: nothing pending, nothing read
            return query select u, 0::bigint from pg_catalog.unnest(g.subs) u;
            continue;
        end if;
        return query execute pg_catalog.format(
            'select x.sub, count(e.ev_txid)'
            '  from rows from (pg_catalog.unnest($3::int4[]), pg_catalog.unnest($4::int4[]),'
            '                  pg_catalog.unnest($5::pg_catalog.pg_snapshot[])) x(slot, sub, snap1)'
            '  left join (select ev.ev_txid, ev.ev_owner, pgque._slot_of(ev.ev_extra1, $8) as slot'
            '               from %s ev'
            '              where ((ev.ev_txid >= $1 and ev.ev_txid < $2) or ev.ev_txid = any($6))'
            '                and pg_catalog.pg_visible_in_snapshot(ev.ev_txid, $7)) e'
            '    on e.slot = x.slot'
            '   and not pg_catalog.pg_visible_in_snapshot(e.ev_txid, x.snap1)'
            '   and (e.ev_owner is null or e.ev_owner = x.sub)'
            ' group by x.sub', pgque._event_source(g.q, g.lo_snap, g.hi_snap, null, null))
        using pg_catalog.pg_snapshot_xmax(g.lo_snap), pg_catalog.pg_snapshot_xmax(g.hi_snap),
              g.slots, g.subs, g.snaps, array(select pg_catalog.pg_snapshot_xip(g.lo_snap)),
              g.hi_snap, g.n;
    end loop;
end $$;

-- One row per slot of every partitioned consumer, leased or not.  Without
-- JIT: the planner sees generate_series() and never-analyzed catalog tables
-- as thousands of rows, and compiling the plan took seconds (measured 3.6 s
-- of a 4.2 s call on two slots), longer than a short lease.
create function pgque.get_partition_slot_info(
    out queue_name text, out consumer text, out slot int4, out n int4,
    out lease_owner text, out lease_until timestamptz, out epoch bigint,
    out last_tick bigint, out pending_events bigint,
    out last_receive_at timestamptz, out last_ack_at timestamptz, out alert text)
returns setof record language sql security definer
set search_path = pgque, pg_catalog, pg_temp set jit = off as $$
    select q.queue_name, pc.consumer, pc.slot, pc.n,
           case when l.lease_until > pg_catalog.clock_timestamp() then l.owner end,
           l.lease_until, coalesce(l.epoch, 0), pgque._slot_cursor(s),
           p.pending,
           l.last_receive, l.last_ack,
           (select pg_catalog.string_agg(a.kind, ',' order by a.kind) from pgque.alert a
             where a.cleared_at is null and a.queue_name = q.queue_name
               and a.consumer = pc.consumer and a.slot = pc.slot)
      from pgque._slot_list() pc
      join pgque.queue q on q.queue_id = pc.queue_id
      left join pgque.subscription s on s.sub_queue = q.queue_id and s.sub_consumer = pc.co_id
      left join pgque._slot_leases() l on l.queue_id = q.queue_id and l.consumer = pc.consumer and l.slot = pc.slot
      left join pgque._slot_pending_all() p on p.sub_id = s.sub_id
     order by q.queue_name, pc.consumer, pc.slot
$$;

create view pgque.partition_slot_status as
    select * from pgque.get_partition_slot_info();
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
    bk_sub         int4 not null references pgque.subscription (sub_id) on delete cascade,
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

-- Whether a partitioned consumer pauses keys.
create function pgque._slot_pauses(i_queue_id int4, i_consumer text)
returns boolean language sql stable as $$
    select coalesce((select pc.failure_policy operator(pg_catalog.=) 'pause' from pgque.partition_consumer pc
                      where pc.queue_id operator(pg_catalog.=) i_queue_id
                        and pc.co_name operator(pg_catalog.=) i_consumer), false)
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
    -- the producers' insert (C: it routes rows to partition buckets), in
    -- ev_id order, in this transaction: one window, handed out in order
    with w as materialized (
        select distinct on (e.ev_id) e.*
          from pgque._pause_passed_rows(i_sub, i_n, i_slot, lo, ptick, ppos, pnext) e
          join pgque.blocked_key k on k.bk_sub = i_sub and k.bk_key = e.ev_extra1 and e.ev_id > k.bk_head
         where k.bk_key = any(i_keys)
         order by e.ev_id, (e.ev_owner is null)),
    ins as (
        select count(pgque._insert_event(q.queue_name, w2.ev_id, w2.ev_time, i_sub, w2.ev_retry,
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

-- After a pausing slot's ack of batch i_batch: release the keys whose head
-- was done in it.  -> keys released.
create function pgque._pause_after_ack(i_sub int4, i_batch bigint, i_epoch bigint, i_n int4, i_slot int4)
returns int4 language plpgsql as $$
declare
    keys text[];
begin
    keys := array(select b.bk_key from pgque.blocked_key b
                   where b.bk_done_batch = i_batch and b.bk_sub = i_sub);
    perform pgque._pause_release(i_sub, keys, i_n, i_slot, i_epoch);
    return pg_catalog.cardinality(keys);
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
     where pgque._caller_is_admin() or pgque._caller() = pc.owner
        or pg_catalog.pg_has_role(pgque._caller(), pc.owner, 'member')
     order by 1, 2, 3, 5
$$;

create view pgque.blocked_keys as
    select * from pgque.get_blocked_keys();

-- key_blocked alerts (ADR 0029): one per slot holding a key blocked longer
-- than i_after (pgque_bgw.key_blocked_after; NULL when the library is not
-- loaded: none then).
create function pgque._pause_alert_conditions(i_after interval)
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

-- The oldest tick a queue's blocked keys hold (NULL: none): rotation, tick
-- cleanup and the restore checks treat it as a cursor (ADR 0029).
create function pgque._blocked_ticks(i_queue_id int4)
returns setof bigint language sql stable as $$
    select b.bk_tick from pgque.blocked_key b
      join pgque.subscription s on s.sub_id operator(pg_catalog.=) b.bk_sub
     where s.sub_queue operator(pg_catalog.=) i_queue_id
$$;

-- The receive of a pausing slot (called by _receive for its open batch):
-- as _receive's read, but the events of a blocked key past its head are
-- withheld (not handed out: the ack passes them, the key's release reads
-- them again), and a head handed out that is not waiting in the retry
-- queue any more marks its key done in this batch.  NULL keys never block.
create function pgque._receive_paused(i_batch bigint, i_max_return int4, i_n int4, i_slot int4)
returns setof pgque.message language plpgsql as $$
declare
    sid  int4;
begin
    select sb.sb_sub into sid from pgque.slot_batch sb where sb.sb_batch = i_batch;
    return query
        with part as materialized (
            select e.*
              from pgque._batch_source(i_batch, i_n, i_slot) w,
                   pgque._window_rows(w.source, w.lo_xmax, w.hi_xmax, w.lo_xip, w.hi, w.sub_id,
                                      w.pos, null, least(i_max_return::int8 + 1, 2147483647)::int4,
                                      i_n, i_slot)
                   with ordinality as e(ev_id, ev_time, ev_txid, ev_owner, ev_retry, ev_type, ev_data,
                                        ev_extra1, ev_extra2, ev_extra3, ev_extra4, rn)),
        m as (
            select case when pg_catalog.max(rn) > i_max_return
                        then pg_catalog.max(ev_id) filter (where rn = i_max_return) end as last
              from part),
        mark_slot as (
            update pgque.slot_batch sb
               set sb_last = m.last
              from m
             where sb.sb_batch = i_batch and sb.sb_last is distinct from m.last),
        -- one index probe per event (a scalar subquery: never a scan of
        -- every blocked key of the slot, however many there are)
        give as materialized (
            select p.*, (select k.bk_head from pgque.blocked_key k
                          where k.bk_sub = sid and k.bk_key = p.ev_extra1) as bk_head
              from part p
             where p.rn <= i_max_return),
        done as (
            update pgque.blocked_key k
               set bk_done_batch = i_batch
              from (select o.ev_extra1, o.ev_id from give o where o.ev_id = o.bk_head) h
             where k.bk_sub = sid and k.bk_key = h.ev_extra1 and k.bk_head = h.ev_id
               and k.bk_done_batch is distinct from i_batch
               and not exists (select from pgque.retry_queue r where r.ev_owner = sid and r.ev_id = h.ev_id))
        select o.ev_id, i_batch, o.ev_type, o.ev_data, o.ev_retry, o.ev_time,
               o.ev_extra1, o.ev_extra2, o.ev_extra3, o.ev_extra4
          from give o
         where o.bk_head is null or o.ev_id <= o.bk_head
         order by o.rn;
end $$;
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
    primary key (queue_id, co_name),
    foreign key (queue_id, co_name) references pgque.partition_consumer (queue_id, co_name) on delete cascade
);
select pg_catalog.pg_extension_config_dump('pgque.partition_resize', '');

-- The boundary tick of an old-layout slot subscription of a draining
-- consumer (its windows end there), else NULL.  Read after the window's end
-- tick is picked: a tick past B commits after the resize, so a statement
-- that sees it sees the resize too.
create function pgque._resize_cap(i_sub int4)
returns bigint language sql stable as $$
    select r.boundary_tick from pgque.partition_resize r
     where i_sub operator(pg_catalog.=) any (r.old_subs)
$$;

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
begin
    r := pgque._resize_of(i_queue_id, i_consumer);
    if r.to_n is null or not pgque._resize_drained(r) then
        return false;
    end if;
    -- the retry mover holds it shared while it moves retries (ADR 0020)
    if not pg_catalog.pg_try_advisory_xact_lock(pgque._queue_lock_class(), i_queue_id) then
        return false;
    end if;
    select * into r from pgque.partition_resize x
     where x.queue_id = i_queue_id and x.co_name = i_consumer for update;
    if not found or not pgque._resize_drained(r) then
        return false;
    end if;
    olds := array(select o from pg_catalog.unnest(r.old_subs) o where o is not null);
    update pgque.retry_queue rq
       set ev_owner = r.new_subs[pgque._slot_of(rq.ev_extra1, r.to_n) + 1]
     where rq.ev_owner = any (olds);
    update pgque.dead_letter d
       set dl_consumer_id = (select s.sub_consumer from pgque.subscription s
                              where s.sub_id = r.new_subs[pgque._slot_of(d.ev_extra1, r.to_n) + 1])
     where d.dl_queue_id = i_queue_id
       and d.dl_consumer_id in (select s.sub_consumer from pgque.subscription s where s.sub_id = any (olds));
    -- (the consumer names go too, unless another queue uses them)
    with gone as (delete from pgque.subscription s where s.sub_id = any (olds) returning s.sub_consumer)
    delete from pgque.consumer c
     where c.co_id in (select sub_consumer from gone)
       and not exists (select 1 from pgque.subscription x
                        where x.sub_consumer = c.co_id and x.sub_id <> all (olds));
    update pgque.partition_consumer pc set n = r.to_n
     where pc.queue_id = i_queue_id and pc.co_name = i_consumer;
    delete from pgque.partition_resize x where x.queue_id = i_queue_id and x.co_name = i_consumer;
    -- last: shared memory is not rolled back (an abort after this costs the
    -- workers one PQ001 and a claim)
    perform pgque._slot_forget(i_queue_id, i_consumer);
    raise log 'pgque_bgw: consumer "%" of queue % resized from n = % to n = % at tick %',
              i_consumer, i_queue_id, r.from_n, r.to_n, r.boundary_tick;
    return true;
exception when lock_not_available or deadlock_detected then
    return false;   -- an old owner's open transaction: the next call tries again
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
    select * into q from pgque.queue where queue_id = q.queue_id for update;
    select * into pc from pgque.partition_consumer p
     where p.queue_id = q.queue_id and p.co_name = consumer_name for update;
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
        perform pgque._register(q, pgque._slot_name(consumer_name, k, new_n), b, pc.owner);
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
                          operator(pg_catalog.-) pgque._guc_interval('pgque_bgw.resize_stalled_after', interval '10 minutes');
end $$;
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

-- Open a batch for a subscription, or return the one already open.  The row
-- lock on the subscription is the receive lock: concurrent callers queue and
-- get the same batch.  i_span_events (receive) lets one batch cover several
-- pending tick windows up to about that many events, so fast ticks do not
-- force tiny batches on a busy consumer.
create function pgque._next_batch(i_queue_name text, i_consumer_name text,
                                  i_min_lag interval, i_min_count int4, i_min_interval interval,
                                  i_span_events int4)
returns pgque.batch_info language plpgsql as $$
declare
    s     pgque.subscription;
    prev  pgque.tick;
    nxt   pgque.tick;
    res   pgque.batch_info;
begin
    s := pgque._subscription(i_queue_name, i_consumer_name);
    select * into s from pgque.subscription where sub_id = s.sub_id for update;
    perform pgque._authorize(s.sub_owner, s.sub_queue, i_consumer_name);
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

    nxt := pgque._pick_tick(s.sub_queue, prev, i_min_lag, i_min_count, i_min_interval, i_span_events);
    if nxt.tick_id is null then
        return (null, null, prev.tick_id, null, prev.tick_time, null, prev.tick_event_seq)::pgque.batch_info;
    end if;

    update pgque.subscription
       set sub_batch = pg_catalog.nextval('pgque.batch_id_seq'), sub_next_tick = nxt.tick_id,
           sub_batch_pos = null, sub_batch_last = null, sub_active = now()
     where sub_id = s.sub_id
    returning sub_batch into res.batch_id;
    return (res.batch_id, nxt.tick_id, prev.tick_id, nxt.tick_time, prev.tick_time,
            nxt.tick_event_seq, prev.tick_event_seq)::pgque.batch_info;
end $$;

-- Partition slots (ADR 0023): the batch state of a slot lives in the row of
-- the owner's lease epoch (pgque.slot_batch), so that an owner's receive and
-- ack lock only that row, never the subscription row, and a takeover never
-- waits for a fenced owner's open transaction.

-- The row of lease epoch i_epoch, locked: the receive lock of one owner
-- (its concurrent calls queue on it and get the same batch; no other
-- owner ever waits on it).  A new epoch adopts the newest row of an earlier
-- one whose transaction has ended (same open batch, same batch id), and
-- skips rows still locked by a frozen owner.  A row behind the slot's
-- cursor drops its open batch (another epoch acked past it).
create function pgque._slot_batch_row(i_sub pgque.subscription, i_epoch bigint)
returns pgque.slot_batch language plpgsql as $$
declare
    r     pgque.slot_batch;
    cur   bigint;
begin
    select * into r from pgque.slot_batch where sb_sub = i_sub.sub_id and sb_epoch = i_epoch for update;
    if not found then
        update pgque.slot_batch b set sb_epoch = i_epoch
         where (b.sb_sub, b.sb_epoch) = (select o.sb_sub, o.sb_epoch from pgque.slot_batch o
                                          where o.sb_sub = i_sub.sub_id and o.sb_epoch < i_epoch
                                          order by o.sb_epoch desc limit 1
                                            for update skip locked)
        returning * into r;
        if not found then
            begin
                insert into pgque.slot_batch (sb_sub, sb_epoch, sb_last_tick)
                values (i_sub.sub_id, i_epoch, pgque._slot_cursor(i_sub))
                on conflict do nothing;
            exception when foreign_key_violation then
                -- the slot's subscription went since this statement's
                -- snapshot: a resize switched layouts (ADR 0030), or
                -- unsubscribe_slot
                raise exception 'slot subscription "%" is gone', (select c.co_name from pgque.consumer c where c.co_id = i_sub.sub_consumer)
                    using errcode = 'object_not_in_prerequisite_state',
                          detail = 'Its consumer was resized (pgque.resize_partitioned) or the slot unsubscribed.',
                          hint = 'Read n again (pgque.partition_n) and claim again.';
            end;
            -- a concurrent call of this epoch made it: a new statement sees it
            select * into r from pgque.slot_batch where sb_sub = i_sub.sub_id and sb_epoch = i_epoch for update;
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

-- _next_batch for slot i_sub_name under lease epoch i_epoch.
create function pgque._slot_next_batch(i_queue_name text, i_sub_name text, i_epoch bigint, i_span_events int4)
returns pgque.batch_info language plpgsql as $$
declare
    s     pgque.subscription;
    r     pgque.slot_batch;
    prev  pgque.tick;
    nxt   pgque.tick;
    cap   bigint;
begin
    s := pgque._subscription(i_queue_name, i_sub_name);
    perform pgque._authorize(s.sub_owner, s.sub_queue, i_sub_name);
    r := pgque._slot_batch_row(s, i_epoch);
    select * into prev from pgque.tick where tick_queue = s.sub_queue and tick_id = r.sb_last_tick;
    if r.sb_batch is null then
        nxt := pgque._pick_tick(s.sub_queue, prev, null, null, null, i_span_events);
        -- an old-layout slot of a resize ends its windows at the boundary
        -- (ADR 0030); read after the pick, so a tick past it implies the
        -- resize is seen
        cap := pgque._resize_cap(s.sub_id);
        if cap is not null and prev.tick_id >= cap then
            nxt := null;
        elsif cap is not null and nxt.tick_id > cap then
            select * into nxt from pgque.tick where tick_queue = s.sub_queue and tick_id = cap;
        end if;
        if nxt.tick_id is null then
            return (null, null, prev.tick_id, null, prev.tick_time, null, prev.tick_event_seq)::pgque.batch_info;
        end if;
        update pgque.slot_batch
           set sb_batch = pg_catalog.nextval('pgque.batch_id_seq'), sb_next_tick = nxt.tick_id,
               sb_pos = null, sb_last = null
         where sb_sub = r.sb_sub and sb_epoch = r.sb_epoch
        returning * into r;
    else
        select * into nxt from pgque.tick where tick_queue = s.sub_queue and tick_id = r.sb_next_tick;
    end if;
    return (r.sb_batch, nxt.tick_id, prev.tick_id, nxt.tick_time, prev.tick_time,
            nxt.tick_event_seq, prev.tick_event_seq)::pgque.batch_info;
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

-- Ack a slot's open batch i_batch: the part handed out, or the whole
-- window (the epoch's cursor moves to its end, then folds).  -> 1 / 0.
create function pgque._slot_finish(i_batch bigint)
returns int4 language plpgsql as $$
declare
    r pgque.slot_batch;
begin
    select * into r from pgque.slot_batch where sb_batch = i_batch;
    if not found then
        return 0;
    end if;
    if r.sb_last is not null then
        update pgque.slot_batch
           set sb_batch = pg_catalog.nextval('pgque.batch_id_seq'), sb_pos = sb_last, sb_last = null
         where sb_batch = i_batch;
        return 1;
    end if;
    update pgque.slot_batch
       set sb_last_tick = sb_next_tick, sb_batch = null, sb_next_tick = null, sb_pos = null, sb_last = null
     where sb_batch = i_batch;
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

-- Where an open batch's events are: the relations (_event_source) and the
-- window's bounds, read in one statement so that the queue row and the
-- ticks come from one snapshot.  No row: the batch is not open.
create function pgque._batch_source(i_batch_id bigint, i_n int4, i_slot int4,
                                    out source text, out lo_xmax xid8, out hi_xmax xid8,
                                    out lo_xip xid8[], out hi pg_catalog.pg_snapshot,
                                    out sub_id int4, out pos bigint)
returns setof record language sql stable as $$
    select pgque._event_source(q, t1.tick_snapshot, t2.tick_snapshot, i_n, i_slot),
           pg_catalog.pg_snapshot_xmax(t1.tick_snapshot), pg_catalog.pg_snapshot_xmax(t2.tick_snapshot),
           array(select pg_catalog.pg_snapshot_xip(t1.tick_snapshot)), t2.tick_snapshot,
           sub.sub_id, sub.sub_batch_pos
      from pgque.subscription sub
      join pgque.queue q on q.queue_id = sub.sub_queue
      join pgque.tick t1 on t1.tick_queue = sub.sub_queue and t1.tick_id = sub.sub_last_tick
      join pgque.tick t2 on t2.tick_queue = sub.sub_queue and t2.tick_id = sub.sub_next_tick
     where sub.sub_batch = i_batch_id
    union all
    -- a cooperative member's batch: its window, read as the group (ADR 0017)
    select pgque._event_source(q, t1.tick_snapshot, t2.tick_snapshot, i_n, i_slot),
           pg_catalog.pg_snapshot_xmax(t1.tick_snapshot), pg_catalog.pg_snapshot_xmax(t2.tick_snapshot),
           array(select pg_catalog.pg_snapshot_xip(t1.tick_snapshot)), t2.tick_snapshot,
           sub.sub_id, w.cw_pos
      from pgque.coop_window w
      join pgque.subscription sub on sub.sub_id = w.cw_sub
      join pgque.queue q on q.queue_id = sub.sub_queue
      join pgque.tick t1 on t1.tick_queue = sub.sub_queue and t1.tick_id = w.cw_prev_tick
      join pgque.tick t2 on t2.tick_queue = sub.sub_queue and t2.tick_id = w.cw_next_tick
     where w.cw_batch = i_batch_id
    union all
    -- a partition slot's batch: the window of its epoch's row (ADR 0023)
    select pgque._event_source(q, t1.tick_snapshot, t2.tick_snapshot, i_n, i_slot),
           pg_catalog.pg_snapshot_xmax(t1.tick_snapshot), pg_catalog.pg_snapshot_xmax(t2.tick_snapshot),
           array(select pg_catalog.pg_snapshot_xip(t1.tick_snapshot)), t2.tick_snapshot,
           sub.sub_id, b.sb_pos
      from pgque.slot_batch b
      join pgque.subscription sub on sub.sub_id = b.sb_sub
      join pgque.queue q on q.queue_id = sub.sub_queue
      join pgque.tick t1 on t1.tick_queue = sub.sub_queue and t1.tick_id = b.sb_last_tick
      join pgque.tick t2 on t2.tick_queue = sub.sub_queue and t2.tick_id = b.sb_next_tick
     where b.sb_batch = i_batch_id
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
create function pgque._finish_batch(i_batch_id bigint)
returns int4 language plpgsql as $$
begin
    update pgque.subscription
       set sub_last_tick = sub_next_tick, sub_next_tick = null, sub_batch = null,
           sub_batch_pos = null, sub_batch_last = null, sub_active = now()
     where sub_batch = i_batch_id;
    return case when found then 1 else 0 end;
end $$;

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
    select * into s from pgque.subscription where sub_batch = i_batch_id for update;
    if not found then
        -- a cooperative member's batch: the group's row, not locked (members
        -- never wait on it), carrying the window; the window row is locked
        select sub.sub_id, sub.sub_queue, sub.sub_consumer, w.cw_prev_tick, sub.sub_active, w.cw_batch,
               w.cw_next_tick, w.cw_pos, w.cw_last, sub.sub_owner, sub.sub_role, sub.sub_coop_hw
          into s
          from pgque.coop_window w join pgque.subscription sub on sub.sub_id = w.cw_sub
         where w.cw_batch = i_batch_id
           for update of w;
        if not found then
            -- a partition slot's batch (ADR 0023): the slot's row, not
            -- locked, carrying the batch (the slot API takes its own lock)
            select sub.sub_id, sub.sub_queue, sub.sub_consumer, b.sb_last_tick, sub.sub_active, b.sb_batch,
                   b.sb_next_tick, b.sb_pos, b.sb_last, sub.sub_owner, sub.sub_role, sub.sub_coop_hw
              into s
              from pgque.slot_batch b join pgque.subscription sub on sub.sub_id = b.sb_sub
             where b.sb_batch = i_batch_id;
        end if;
        if not found then
            perform pgque._coop_refuse_fenced(i_batch_id);
        end if;
    end if;
    if s.sub_id is not null then
        perform pgque._authorize(s.sub_owner, s.sub_queue,
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
-- The modern consuming API: receive / ack / nack over the PgQ batch.

-- receive(queue, consumer, max_return) opens the next batch (or re-returns
-- the open one) and returns up to max_return of its events.  A window with
-- more events is handed out in parts: ack() of a part keeps the rest open
-- under a new batch id, so nothing past max_return is skipped.  Empty
-- windows are finished here and the next one is tried.  The loop, the
-- window read and where a part ends are in C for every kind of consumer
-- (src/receive.c, ADR 0033, 0034): plain (receive), partition slot
-- (receive_partitioned, its batch in the lease epoch's row of
-- pgque.slot_batch, ADR 0023) and cooperative member (receive_coop); the
-- per-call steps are the kinds' _*_receive_open functions.

create function pgque._check_max_return(i_max_return int4)
returns void language plpgsql as $$
begin
    perform pgque._check_not_null('max_return', i_max_return);
    if i_max_return < 1 then
        raise exception 'max_return must be positive, got %', i_max_return
            using errcode = 'invalid_parameter_value';
    end if;
end $$;

-- The per-call steps of the plain receive(): the argument checks (on the
-- first try), then the consumer's open batch or the next one (NULL: none).
create function pgque._receive_open(i_queue_name text, i_consumer_name text, i_max_return int4,
                                    i_check bool)
returns bigint language plpgsql as $$
begin
    if i_check then
        perform pgque._check_max_return(i_max_return);
        perform pgque._check_name('consumer', i_consumer_name, 64);
        perform pgque._refuse_slot_consumer(i_consumer_name, 'receive');
    end if;
    return (pgque._next_batch(i_queue_name, i_consumer_name, null, null, null, i_max_return)).batch_id;
end $$;

-- receive() of a plain consumer (src/receive.c, ADR 0033).
create function pgque.receive(queue_name text, consumer_name text, max_return int4 default 100)
returns setof pgque.message language c volatile security definer
set search_path = pgque, pg_catalog, pg_temp
as 'MODULE_PATHNAME', 'pgque_receive';

-- Plain ack/nack refuse batches of slot consumers.
create function pgque._refuse_slot_batch(s pgque.subscription, i_func text)
returns void language plpgsql as $$
begin
    perform pgque._refuse_slot_consumer(
        (select co_name from pgque.consumer where co_id = s.sub_consumer), i_func);
end $$;

-- ack(batch_id) -> 1 done / 0 unknown or already acked.  Its statements look
-- rows up by key: generic plans, not one custom plan per call (ADR 0033).
create function pgque.ack(batch_id bigint)
returns int4 language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp
set plan_cache_mode = force_generic_plan as $$
declare
    s pgque.subscription;
begin
    perform pgque._check_not_null('batch_id', batch_id);
    s := pgque._open_batch(batch_id);
    if s.sub_id is null then
        return 0;
    end if;
    perform pgque._refuse_slot_batch(s, 'ack');
    if s.sub_role = 'coop_main' then
        return pgque._coop_ack(s);
    end if;
    return pgque._ack_batch(s);
end $$;

-- Ack what receive() handed out: the whole window, or the part before
-- sub_batch_last, keeping the rest open under a fresh batch id.
create function pgque._ack_batch(s pgque.subscription)
returns int4 language plpgsql as $$
begin
    if s.sub_batch_last is not null then
        update pgque.subscription
           set sub_batch = pg_catalog.nextval('pgque.batch_id_seq'),
               sub_batch_pos = sub_batch_last, sub_batch_last = null, sub_active = now()
         where sub_id = s.sub_id;
        return 1;
    end if;
    return pgque._finish_batch(s.sub_batch);
end $$;

-- The retry-or-dead-letter decision for one event of an open batch.  The
-- event is re-read from the batch: a msg_id not in it is refused, and the
-- caller's copy of the payload is never trusted.
create function pgque._nack_event(s pgque.subscription, i_ev_id bigint, i_retry_after interval, i_reason text,
                                  i_n int4 default null, i_slot int4 default null)
returns int4 language plpgsql as $$
declare
    e    pgque.event_template;
    q    pgque.queue;
begin
    select * into e from pgque._batch_rows(s.sub_batch, 1, i_ev_id, i_n, i_slot);
    if not found then
        raise exception 'msg_id % not found in batch %', i_ev_id, s.sub_batch
            using errcode = 'invalid_parameter_value';
    end if;
    select * into q from pgque.queue where queue_id = s.sub_queue;
    if coalesce(e.ev_retry, 0) >= coalesce(q.queue_max_retries, 5) then
        return pgque._dead_letter(s, e, i_reason);
    end if;
    return pgque._retry_event(s, e, now() + i_retry_after);
end $$;

-- nack(batch_id, msg, retry_after, reason) -> 1 scheduled / 0 already was.
-- The event goes back to this consumer only after retry_after, or to the
-- dead-letter queue once it has been retried max_retries times.
create function pgque.nack(batch_id bigint, msg pgque.message,
                           retry_after interval default '60 seconds', reason text default null)
returns int4 language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    s pgque.subscription;
begin
    perform pgque._check_not_null('msg.msg_id', msg.msg_id);
    perform pgque._check_interval('retry_after', retry_after, true);
    s := pgque._open_batch_or_raise(batch_id);
    perform pgque._refuse_slot_batch(s, 'nack');
    if s.sub_role = 'coop_main' then
        perform pgque._coop_touch(s.sub_id, (select cw_member from pgque.coop_window where cw_batch = batch_id), null);
    end if;
    return pgque._nack_event(s, msg.msg_id, retry_after, reason);
end $$;
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
create function pgque._coop_members(out sub_id int4, out member text, out last_seen timestamptz,
                                    out batch bigint, out polls bigint)
returns setof record language c volatile as 'MODULE_PATHNAME', 'pgque_coop_members';

-- The transaction-level advisory lock of one member: a 64-bit hash of
-- the group and the member, so that it neither meets another member's nor,
-- in practice, an application's own advisory locks (which use small keys).
create function pgque._coop_member_lock(i_sub int4, i_member text)
returns void language sql volatile as $$
    select pg_catalog.pg_advisory_xact_lock(
        pg_catalog.hashtextextended('pgque coop member ' || i_sub::text || '/' || i_member, 0))
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
    perform pgque._check_name('queue', i_queue, 57);
    perform pgque._user_consumer_name(i_consumer);
    perform pgque._check_name('subconsumer', i_subconsumer, 64);
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
    -- no window starts before the cursor: the bound lets the index scan
    -- skip the entries of windows finished (deleted) since the last vacuum
    select coalesce(min(cw_prev_tick), hw) into pos from pgque.coop_window
     where cw_sub = g.sub_id and cw_prev_tick >= g.sub_last_tick;
    pos := greatest(pos, g.sub_last_tick);
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
    perform pgque._authorize(s.sub_owner, q.queue_id, i_consumer);
    if s.sub_role = 'normal' then
        if not i_convert_normal then
            raise exception 'consumer % on queue % is already a normal consumer; explicit conversion is required',
                  i_consumer, q.queue_name
                using errcode = 'object_not_in_prerequisite_state',
                      hint = 'Pass convert_normal => true to make it a cooperative group.';
        end if;
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
-- registered (receive_coop's cold start), else it is an error.
create function pgque._coop_member_group(i_queue text, i_consumer text, i_subconsumer text,
                                         i_register boolean)
returns pgque.subscription language plpgsql as $$
declare
    q  pgque.queue;
    g  pgque.subscription;
begin
    q := pgque._queue(i_queue);
    g := pgque._coop_group(q, i_consumer);
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
    perform pgque._authorize(g.sub_owner, g.sub_queue, i_consumer);
    return g;
end $$;

-- Take a window for a member: the one it holds; else, with a dead
-- interval, one whose member was silent that long (takeover: a new batch
-- id, the old one fenced); else the oldest free window, extended over the
-- free windows after it up to i_span events (receive_coop) or until
-- min_count/min_interval is reached (next_batch_custom).  NULL: none.
create function pgque._coop_take(g pgque.subscription, i_member text, i_dead interval, i_span int8,
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
    if i_span is not null or i_min_count is not null or i_min_interval is not null then
        -- the end tick wanted
        if i_min_count is not null or i_min_interval is not null then
            select * into te from pgque.tick
             where tick_queue = g.sub_queue and tick_id >= w.cw_next_tick
               and (tick_event_seq >= t0.tick_event_seq + i_min_count
                    or tick_time >= t0.tick_time + i_min_interval)
             order by tick_id limit 1;
            if te.tick_id is null then
                return null;
            end if;
        else
            select t.* into te
              from (select * from pgque.tick
                     where tick_queue = g.sub_queue and tick_id >= w.cw_next_tick
                     order by tick_id limit 1000) t
             where t.tick_event_seq <= t0.tick_event_seq + i_span
             order by t.tick_id desc limit 1;
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
    w := pgque._coop_take(g, i_subconsumer, i_dead, i_max_return, null, null, null);
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
    w := pgque._coop_take(g, i_subconsumer, i_dead_interval, null, i_min_lag, i_min_count, i_min_interval);
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
    if g.sub_id is null
       or not exists (select 1 from pgque.coop_member where cm_sub = g.sub_id and cm_name = i_subconsumer) then
        return 0;
    end if;
    perform pgque._authorize(g.sub_owner, g.sub_queue, i_consumer);
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
    perform pgque._authorize(g.sub_owner, q.queue_id, i_consumer);
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
    delete from pgque.coop_fence where cf_at < now() - interval '1 day';
    return n;
end $$;

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
-- Retry and dead-letter queue.

-- Schedule a redelivery of one event to one subscription (same ev_id, same
-- partition key, ev_retry + 1).  -> 1 / 0 if it is already scheduled.
create function pgque._retry_event(s pgque.subscription, e pgque.event_template, i_due timestamptz)
returns int4 language plpgsql as $$
declare
    n int4;
begin
    insert into pgque.retry_queue (ev_retry_after, ev_queue, ev_id, ev_time, ev_txid, ev_owner, ev_retry,
                                   ev_type, ev_data, ev_extra1, ev_extra2, ev_extra3, ev_extra4)
    values (i_due, s.sub_queue, e.ev_id, e.ev_time, e.ev_txid, s.sub_id, coalesce(e.ev_retry, 0) + 1,
            e.ev_type, e.ev_data, e.ev_extra1, e.ev_extra2, e.ev_extra3, e.ev_extra4)
    on conflict (ev_owner, ev_id) do nothing;
    get diagnostics n = row_count;
    return n;
end $$;

-- Move one event to the dead-letter queue.  -> 1 / 0 if it is there already.
create function pgque._dead_letter(s pgque.subscription, e pgque.event_template, i_reason text)
returns int4 language plpgsql as $$
declare
    n int4;
begin
    insert into pgque.dead_letter (dl_queue_id, dl_consumer_id, dl_reason, ev_id, ev_time, ev_txid,
                                   ev_owner, ev_retry, ev_type, ev_data,
                                   ev_extra1, ev_extra2, ev_extra3, ev_extra4)
    values (s.sub_queue, s.sub_consumer, i_reason, e.ev_id, e.ev_time, e.ev_txid,
            e.ev_owner, e.ev_retry, e.ev_type, e.ev_data,
            e.ev_extra1, e.ev_extra2, e.ev_extra3, e.ev_extra4)
    on conflict (dl_queue_id, dl_consumer_id, ev_id) do nothing;
    get diagnostics n = row_count;
    return n;
end $$;

-- event_dead(batch_id, event_id, reason, ev_time, ev_txid, ev_retry, ev_type,
-- ev_data, ev_extra1..4) -> 1 / 0 if the event is dead-lettered already for
-- the batch's consumer.  PgQue's primitive under nack(): the row is the
-- caller's (an admin's) description of the event, stored as given.
create function pgque.event_dead(batch_id bigint, event_id bigint, reason text, ev_time timestamptz,
                                 ev_txid xid8, ev_retry int4, ev_type text, ev_data text,
                                 ev_extra1 text default null, ev_extra2 text default null,
                                 ev_extra3 text default null, ev_extra4 text default null)
returns int4 language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    s  pgque.subscription;
    e  pgque.event_template;
begin
    s := pgque._open_batch_or_raise(batch_id);
    perform pgque._check_not_null('event_id', event_id);
    perform pgque._check_not_null('ev_time', ev_time);
    perform pgque._pause_refuse_primitive(s, 'event_dead');
    -- event_template's columns: ev_id, ev_time, ev_txid, ev_owner, ev_retry,
    -- ev_type, ev_data, ev_extra1..4
    e := row(event_id, ev_time, ev_txid, null, ev_retry, ev_type, ev_data,
             ev_extra1, ev_extra2, ev_extra3, ev_extra4)::pgque.event_template;
    return pgque._dead_letter(s, e, reason);
end $$;

create function pgque.event_retry(x_batch_id bigint, x_event_id bigint, x_retry_time timestamptz)
returns int4 language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    s  pgque.subscription;
    e  pgque.event_template;
begin
    s := pgque._open_batch_or_raise(x_batch_id);
    perform pgque._check_not_null('event_id', x_event_id);
    perform pgque._check_timestamp('retry_time', x_retry_time);
    perform pgque._pause_refuse_primitive(s, 'event_retry');
    select * into e from pgque._batch_rows(x_batch_id, 1, x_event_id);
    if not found then
        raise exception 'msg_id % not found in batch %', x_event_id, x_batch_id
            using errcode = 'invalid_parameter_value';
    end if;
    return pgque._retry_event(s, e, x_retry_time);
end $$;

create function pgque.event_retry(x_batch_id bigint, x_event_id bigint, x_retry_seconds int4)
returns int4 language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
begin
    perform pgque._check_not_null('retry_seconds', x_retry_seconds);
    if x_retry_seconds < 0 then
        raise exception 'retry_seconds must be zero or positive, got %', x_retry_seconds
            using errcode = 'invalid_parameter_value';
    end if;
    return pgque.event_retry(x_batch_id, x_event_id, now() + pg_catalog.make_interval(secs => x_retry_seconds));
end $$;

-- batch_retry(batch_id, seconds): every event of the batch to retry.
create function pgque.batch_retry(i_batch_id bigint, i_retry_seconds int4)
returns int4 language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    s  pgque.subscription;
    e  pgque.event_template;
    n  int4 := 0;
begin
    s := pgque._open_batch_or_raise(i_batch_id);
    perform pgque._check_not_null('retry_seconds', i_retry_seconds);
    if i_retry_seconds < 0 then
        raise exception 'retry_seconds must be zero or positive, got %', i_retry_seconds
            using errcode = 'invalid_parameter_value';
    end if;
    perform pgque._pause_refuse_primitive(s, 'batch_retry');
    for e in select * from pgque._batch_rows(i_batch_id, null, null) loop
        n := n + pgque._retry_event(s, e, now() + pg_catalog.make_interval(secs => i_retry_seconds));
    end loop;
    return n;
end $$;

-- dlq_inspect(queue_name, limit_count): newest dead letters first.
create function pgque.dlq_inspect(queue_name text, limit_count int4 default 100)
returns setof pgque.dead_letter language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    q pgque.queue;
begin
    q := pgque._queue(queue_name);
    perform pgque._check_not_null('limit_count', limit_count);
    if limit_count < 1 then
        raise exception 'limit_count must be positive, got %', limit_count
            using errcode = 'invalid_parameter_value';
    end if;
    return query select * from pgque.dead_letter where dl_queue_id = q.queue_id
                  order by dl_time desc, dl_id desc limit limit_count;
end $$;

-- dlq_replay(dead_letter_id) -> the event id.  The event goes back, with its
-- id and a fresh retry budget, to the consumer that dead-lettered it only.
-- That acts on the consumer (it removes its dead letter and makes it
-- process the event again), so the caller must be allowed to use it
-- (_authorize): a writer of another application may not.
create function pgque.dlq_replay(dead_letter_id bigint)
returns bigint language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    d    pgque.dead_letter;
    q    pgque.queue;
    sid  int4;
    own  regrole;
begin
    perform pgque._check_not_null('dead_letter_id', dead_letter_id);
    select * into d from pgque.dead_letter where dl_id = dead_letter_id for update;
    if not found then
        raise exception 'dead letter entry not found: %', dead_letter_id
            using errcode = 'undefined_object';
    end if;
    select * into q from pgque.queue where queue_id = d.dl_queue_id;
    select sub_id, sub_owner into sid, own from pgque.subscription
     where sub_queue = d.dl_queue_id and sub_consumer = d.dl_consumer_id;
    if sid is null then
        raise exception 'the consumer of dead letter % is no longer subscribed to queue "%"', dead_letter_id, q.queue_name
            using errcode = 'object_not_in_prerequisite_state';
    end if;
    perform pgque._authorize(own, q.queue_id, (select co_name from pgque.consumer where co_id = d.dl_consumer_id));
    -- an old-layout slot's dead letter during a resize: its key's new slot (ADR 0030)
    perform pgque._insert_event(q.queue_name, d.ev_id, d.ev_time, pgque._retry_owner(sid, d.ev_extra1),
                                null, d.ev_type, d.ev_data,
                                d.ev_extra1, d.ev_extra2, d.ev_extra3, d.ev_extra4, false);
    delete from pgque.dead_letter where dl_id = dead_letter_id;
    return d.ev_id;
end $$;

-- dlq_replay_all(queue_name) -> (replayed, failed, first_error).  Replays
-- the dead letters of the consumers the caller may use (_authorize: its
-- own, or every one for an admin); those of other roles' consumers stay.
-- failed: dead letters whose consumer is no longer subscribed.
create function pgque.dlq_replay_all(queue_name text,
                                     out replayed bigint, out failed bigint, out first_error text)
language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    q      pgque.queue;
    me     regrole := pgque._caller();
    admin  boolean := pgque._caller_is_admin();
begin
    q := pgque._queue(queue_name);
    with d as (delete from pgque.dead_letter dl using pgque.subscription s
                where dl.dl_queue_id = q.queue_id and s.sub_queue = dl.dl_queue_id
                  and s.sub_consumer = dl.dl_consumer_id
                  and (admin or s.sub_owner = me or pg_catalog.pg_has_role(me, s.sub_owner, 'member'))
            returning dl.*, s.sub_id)
    select count(pgque._insert_event(q.queue_name, d2.ev_id, d2.ev_time,
                                     pgque._retry_owner(d2.sub_id, d2.ev_extra1), null, d2.ev_type,
                                     d2.ev_data, d2.ev_extra1, d2.ev_extra2, d2.ev_extra3,
                                     d2.ev_extra4, false))
      into replayed
      from (select * from d order by d.ev_id) d2;
    select count(*) into failed from pgque.dead_letter dl
     where dl.dl_queue_id = q.queue_id
       and not exists (select 1 from pgque.subscription s
                        where s.sub_queue = dl.dl_queue_id and s.sub_consumer = dl.dl_consumer_id);
    if failed > 0 then
        first_error := 'consumer no longer subscribed';
    end if;
end $$;

-- dlq_purge(queue_name, older_than) -> rows deleted.
create function pgque.dlq_purge(queue_name text, older_than interval default '30 days')
returns int4 language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    q  pgque.queue;
    n  int4;
begin
    q := pgque._queue(queue_name);
    perform pgque._check_interval('older_than', older_than, true);
    delete from pgque.dead_letter where dl_queue_id = q.queue_id and dl_time <= now() - older_than;
    get diagnostics n = row_count;
    return n;
end $$;
-- Maintenance: rotation (two steps in two transactions), retry and delayed
-- re-injection, tick history cleanup.

-- Is rotation due: the rotation period passed since the last switch and
-- that switch is complete (step 2 stamped)?  Step 1 below asks it first;
-- the maintenance worker lists the queues by it (_maint_queue_steps).
create function pgque._rotation_due(q pgque.queue)
returns boolean language sql stable as $$
    select q.queue_switch_step2 is not null
       and q.queue_switch_time + q.queue_rotation_period <= pg_catalog.now()
$$;

-- Rotation step 1: when the rotation period has passed, the previous switch
-- is complete (step 2 stamped) and every cursor has moved past it, TRUNCATE
-- the oldest child and make it current.  -> 1 switched / 0 not now.
create function pgque.maint_rotate_tables_step1(i_queue_name text)
returns int4 language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    q       pgque.queue;
    lowest  xid8;
    nxt     int4;
    tbl     text;
begin
    q := pgque._queue(i_queue_name);
    select * into q from pgque.queue where queue_id = q.queue_id for update;
    if not pgque._rotation_due(q) then
        return 0;
    end if;
    -- everything written before the previous switch must be consumed by all
    -- (a blocked key's tick counts as a cursor: its withheld events, ADR 0029)
    select min(pg_catalog.pg_snapshot_xmin(t.tick_snapshot)) into lowest
      from (select s.sub_last_tick as tk from pgque.subscription s where s.sub_queue = q.queue_id
            union all
            select pgque._blocked_ticks(q.queue_id)) c
      join pgque.tick t on t.tick_queue = q.queue_id and t.tick_id = c.tk;
    if lowest is not null and lowest <= q.queue_switch_step2 then
        return 0;
    end if;

    nxt := (q.queue_cur_table + 1) % q.queue_ntables;
    tbl := pg_catalog.format('pgque.%I', 'event_' || q.queue_id || '_' || nxt);
    begin
        -- pg_dump or a long reader holds it: try again next time
        execute 'lock table ' || tbl || ' in access exclusive mode nowait';
    exception when lock_not_available then
        return 0;
    end;
    if pgque._rotation_would_lose(q, tbl, lowest) then
        return 0;
    end if;
    perform pgque._truncate_event_table(tbl::regclass);
    update pgque.queue
       set queue_cur_table = nxt, queue_switch_time = now(),
           queue_switch_step1 = pg_catalog.pg_current_xact_id(), queue_switch_step2 = null
     where queue_id = q.queue_id;
    -- ticks older than every cursor and than the previous switch
    delete from pgque.tick
     where tick_queue = q.queue_id
       and pg_catalog.pg_snapshot_xmax(tick_snapshot) < q.queue_switch_step2;
    return 1;
end $$;

-- The safety net under rotation step 1 (ADR 0022): true when the table
-- about to be truncated (locked by the caller, so nothing is appended
-- meanwhile) holds an event that no known cursor has passed: one written at
-- or after the oldest cursor's tick (i_lowest, its snapshot's xmin), or,
-- with no cursor, at or after the queue's latest tick; any event when a
-- cursor's tick or every tick is missing, as in a database whose restore
-- has not loaded them yet.  The switch check above it already guarantees
-- none, so this only ever fires on a state it did not expect: it says so.
-- Cost: one probe of each ev_txid index of the table (and of its
-- partition buckets), once per rotation.
create function pgque._rotation_would_lose(q pgque.queue, i_table text, i_lowest xid8)
returns boolean language plpgsql as $$
declare
    horizon  xid8 := i_lowest;
    newest   xid8;
    newer    boolean;
begin
    if exists (select from (select s.sub_last_tick as tk from pgque.subscription s where s.sub_queue = q.queue_id
                            union all
                            select pgque._blocked_ticks(q.queue_id)) c
                where not exists (select from pgque.tick t
                                   where t.tick_queue = q.queue_id and t.tick_id = c.tk)) then
        horizon := '0'::xid8;
    elsif horizon is null then
        select pg_catalog.pg_snapshot_xmin(t.tick_snapshot) into horizon
          from pgque.tick t where t.tick_queue = q.queue_id order by t.tick_id desc limit 1;
    end if;
    -- the newest event by the ev_txid index (a backward index scan per
    -- table; a WHERE ev_txid >= $1 would be planned as a sequential scan
    -- on these never-analysed tables)
    execute 'select ev_txid from ' || i_table || ' order by ev_txid desc limit 1' into newest;
    newer := newest >= coalesce(horizon, '0'::xid8);
    if newer and i_lowest is not null then
        raise warning 'rotation of queue "%" skipped: % holds events the oldest cursor has not passed', q.queue_name, i_table
            using detail = 'The cursors are behind the previous switch by their ticks, but not by the events; the table is kept.';
    end if;
    return coalesce(newer, false);
end $$;

-- Rotation step 2: stamp the first xid after the switch.  Must run in a later
-- transaction than step 1; switches made by this transaction are left for
-- the next call.  -> queues stamped.
create function pgque.maint_rotate_tables_step2()
returns int4 language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    n  int4;
    nb int4;
begin
    update pgque.queue
       set queue_switch_step2 = pg_catalog.pg_current_xact_id()
     where queue_switch_step2 is null
       and queue_switch_step1 is distinct from pg_catalog.pg_current_xact_id_if_assigned();
    get diagnostics n = row_count;
    -- the same stamp for a change to partition buckets
    update pgque.queue
       set queue_buckets_step2 = pg_catalog.pg_current_xact_id()
     where queue_buckets_step2 is null and queue_buckets_step1 is not null
       and queue_buckets_step1 is distinct from pg_catalog.pg_current_xact_id_if_assigned();
    get diagnostics nb = row_count;
    return n + nb;
end $$;

-- Move every due retry (i_retries) and/or delayed event (i_delayed) into
-- its queue's current table, through the producers' insert (C: it routes
-- rows to partition buckets).  Drains all that is due.  -> events moved.
create function pgque._deliver_due(i_retries boolean, i_delayed boolean)
returns int4 language plpgsql as $$
declare
    q      pgque.queue;
    n      int4 := 0;
    moved  int4;
begin
    for q in select * from pgque.queue
              where queue_id in (select ev_queue from pgque.retry_queue where i_retries and ev_retry_after <= now()
                                 union
                                 select de_queue from pgque.delayed_event where i_delayed and de_deliver_at <= now())
              order by queue_id loop
        if not pgque._queue_try_share(q.queue_id) then
            continue;   -- being dropped (ADR 0020)
        end if;
        if i_retries then
            with m as (delete from pgque.retry_queue where ev_queue = q.queue_id and ev_retry_after <= now()
                       returning *)
            -- a retry of an old-layout slot during a resize goes to its key's
            -- new slot (ADR 0030)
            select count(pgque._insert_event(q.queue_name, m2.ev_id, m2.ev_time,
                                             pgque._retry_owner(m2.ev_owner, m2.ev_extra1), m2.ev_retry,
                                             m2.ev_type, m2.ev_data, m2.ev_extra1, m2.ev_extra2,
                                             m2.ev_extra3, m2.ev_extra4, false))
              into moved
              from (select * from m order by m.ev_id) m2;
            n := n + moved;
        end if;
        if i_delayed then
            with m as (delete from pgque.delayed_event where de_queue = q.queue_id and de_deliver_at <= now()
                       returning *)
            select count(pgque._insert_event(q.queue_name, m2.ev_id, m2.ev_time, null, null,
                                             m2.ev_type, m2.ev_data, m2.ev_extra1, m2.ev_extra2,
                                             m2.ev_extra3, m2.ev_extra4, false))
              into moved
              from (select * from m order by m.ev_id) m2;
            n := n + moved;
        end if;
    end loop;
    return n;
end $$;

-- maint_retry_events(): every due retry and delayed event (not 10 rows per
-- call, as PgQ).  -> events moved.
create function pgque.maint_retry_events()
returns int4 language sql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
    select pgque._deliver_due(true, true);
$$;

-- maint_deliver_delayed(): only the send_at() events whose time has come
-- (PgQue's name; maint_retry_events() and maint() deliver them too).
create function pgque.maint_deliver_delayed()
returns int4 language sql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
    select pgque._deliver_due(false, true);
$$;

-- Tick history: ticks behind every cursor and older than a rotation period
-- serve nobody.  -> ticks deleted.
create function pgque.maint_tick_cleanup()
returns int4 language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    n int4;
begin
    delete from pgque.tick t
     using pgque.queue q
     where t.tick_queue = q.queue_id
       and t.tick_time < now() - q.queue_rotation_period
       and t.tick_id < coalesce((select min(c.tk) from (select s.sub_last_tick as tk from pgque.subscription s
                                                          where s.sub_queue = q.queue_id
                                                         union all
                                                         select pgque._blocked_ticks(q.queue_id)) c),
                                (select max(x.tick_id) from pgque.tick x where x.tick_queue = q.queue_id));
    get diagnostics n = row_count;
    return n;
end $$;

-- The queues' extra maintenance hooks (PgQ's queue_extra_maint: function
-- names, each called as fn(queue_name) -> int4).  Only the extension owner
-- can write pgque.queue, so only it sets hooks; a hook is run only if it
-- exists with that signature and belongs to the extension owner (else a
-- WARNING), and runs with the owner's rights.  -> the hooks' sum.
create function pgque._maint_extra()
returns int4 language plpgsql
-- pinned: the maintenance worker calls it directly
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    r      record;
    fn     regprocedure;
    owner  oid := (select e.extowner from pg_catalog.pg_extension e where e.extname = 'pgque_bgw');
    n      int4 := 0;
    got    int4;
begin
    for r in select q.queue_name, h.hook
               from pgque.queue q, pg_catalog.unnest(q.queue_extra_maint) with ordinality h(hook, pos)
              order by q.queue_id, h.pos loop
        fn := pg_catalog.to_regprocedure(r.hook || '(text)');
        if fn is null then
            raise warning 'extra maintenance hook % of queue % does not exist as %(text)', r.hook, r.queue_name, r.hook;
            continue;
        end if;
        if (select p.proowner from pg_catalog.pg_proc p where p.oid = fn) <> owner then
            raise warning 'extra maintenance hook % of queue % is skipped: it is not owned by the extension owner', fn, r.queue_name
                using hint = 'Only functions of the role that installed pgque_bgw run as hooks.';
            continue;
        end if;
        execute pg_catalog.format('select (%s(%L::pg_catalog.text))::pg_catalog.int4', fn::oid::regproc, r.queue_name) into got;
        n := n + coalesce(got, 0);
    end loop;
    return n;
end $$;

-- maint(): every maintenance step, for every queue (rotation and its space
-- reserve, retries and delayed events, tick history, expired idempotency keys, the queues'
-- extra maintenance hooks).  Rotation step 2 of a
-- switch made by an earlier transaction runs first, then step 1 where due,
-- so repeated maint() calls (one transaction each) keep rotating.
-- -> number of actions taken.
create function pgque.maint()
returns int4 language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    n    int4;
    r    int4;
    qn   text;
begin
    -- nothing while the queue state is not whole: a restore is loading it
    -- (ADR 0022; the workers ask the same)
    if pgque._state_held() is not null then
        return 0;
    end if;
    n := pgque.maint_rotate_tables_step2();
    for qn in select queue_name from pgque.queue order by queue_id loop
        -- -1: a full disk made it free the queue's space reserve; the next
        -- call (a later transaction) rotates (ADR 0025)
        r := pgque._maint_rotate_step1(qn);
        if r >= 0 then
            n := n + r;
            perform pgque._space_reserve_keep(qn);   -- not counted: no action on events
        end if;
    end loop;
    n := n + pgque.maint_retry_events();
    n := n + pgque._coop_maint();
    n := n + pgque.maint_tick_cleanup();
    n := n + pgque.maint_idem();
    n := n + pgque._maint_extra();
    return n;
end $$;

-- Rotation on a full disk (ADR 0025).  TRUNCATE gives the table and each of
-- its indexes (the ev_txid index, the TOAST index; of the partition buckets
-- too) a new file, and an index's new file gets its metapage at once: on a
-- full tablespace that write fails, and the old files, which hold the space
-- to reclaim, are freed only at commit.  So each queue keeps a space
-- reserve in its event tables' tablespace: a table pgque.space_reserve_<id>
-- of a few pages and neither index nor TOAST table, whose own TRUNCATE
-- needs no space at all.  When step 1 fails for lack of space, the reserve
-- is emptied (freed at commit) and step 1 runs again in the next
-- transaction; maintenance fills the reserve again once there is room.

-- The queues' reserves inherit from it (empty itself), so that DROP
-- EXTENSION ... CASCADE drops them as it drops the event tables.  A bounded
-- char needs no TOAST table, nor is a 400-byte row compressed.
create table pgque.space_reserve_template (r pg_catalog.bpchar(400));

-- Rotation's TRUNCATE of an event table (step 1 holds its ACCESS EXCLUSIVE
-- lock, which covers its buckets).  A table whose heaps have no page at all
-- is left as it is: it is what TRUNCATE would make, and on a full disk the
-- new files TRUNCATE makes cannot be written, so the empty tables of a full
-- queue still rotate and the reserve is kept for the one that holds data.
create function pgque._truncate_event_table(i_table regclass)
returns void language plpgsql
set search_path = pgque, pg_catalog, pg_temp as $$
begin
    if exists (select 1 from pg_catalog.pg_class c
                where (c.oid = i_table
                       or c.oid in (select i.inhrelid from pg_catalog.pg_inherits i where i.inhparent = i_table))
                  and pg_catalog.pg_relation_size(c.oid) > 0) then
        execute 'truncate ' || i_table::text;
    end if;
end $$;

-- The reserve's name, qualified and quoted.
create function pgque._space_reserve_name(q pgque.queue)
returns text language sql immutable as $$
    select pg_catalog.format('pgque.%I', 'space_reserve_' operator(pg_catalog.||) q.queue_id)
$$;

-- Pages one TRUNCATE of an event table needs: one metapage per index of the
-- table, of its buckets and of their TOAST tables; twice that (and 16
-- more) as a margin for producers that may take freed pages first.
create function pgque._space_reserve_pages(i_table regclass)
returns int8 language sql stable
set search_path = pgque, pg_catalog, pg_temp as $$
    -- index probes only (pg_inherits by parent, pg_class by oid, pg_index
    -- by indrelid): a seq scan of pg_class per queue cost ~10 ms with
    -- 1,000 queues (ADR 0031)
    with rels as (
        select i_table::oid as oid
        union all
        select i.inhrelid from pg_catalog.pg_inherits i where i.inhparent = i_table
    ), withtoast as (
        select r.oid from rels r
        union all
        select c.reltoastrelid from pg_catalog.pg_class c join rels r on c.oid = r.oid
         where c.reltoastrelid <> 0
    )
    select 16 + 2 * pg_catalog.count(*)
      from withtoast w join pg_catalog.pg_index x on x.indrelid = w.oid
$$;

-- Keep the queue's reserve: created where the queue's next table to
-- truncate lives (moved with it when an operator moves the event tables),
-- filled up to _space_reserve_pages.  Writes nothing when it is full.
-- -> pages added.
create function pgque._space_reserve_keep(i_queue_name text)
returns int8 language plpgsql
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    q       pgque.queue;
    nxt     regclass;
    res     regclass;
    spc     oid;
    want    int8;
    have    int8;
    bs      int8 := pg_catalog.current_setting('block_size')::int8;
    msg     text;
begin
    q := pgque._queue(i_queue_name);
    nxt := pg_catalog.to_regclass(pg_catalog.format('pgque.%I',
               'event_' || q.queue_id || '_' || (q.queue_cur_table + 1) % q.queue_ntables));
    if nxt is null then
        return 0;
    end if;
    spc := (select c.reltablespace from pg_catalog.pg_class c where c.oid = nxt);
    res := pg_catalog.to_regclass(pgque._space_reserve_name(q));
    if res is not null and (select c.reltablespace from pg_catalog.pg_class c where c.oid = res) <> spc then
        execute 'drop table ' || pgque._space_reserve_name(q);
        res := null;
    end if;
    if res is null then
        -- a row of 400 bytes in 10% of a page: a page per row
        execute pg_catalog.format(
            'create table %s () inherits (pgque.space_reserve_template) '
            'with (fillfactor = 10, autovacuum_enabled = off) tablespace %I',
            pgque._space_reserve_name(q),
            case when spc = 0 then 'pg_default'
                 else (select t.spcname from pg_catalog.pg_tablespace t where t.oid = spc) end);
        res := pg_catalog.to_regclass(pgque._space_reserve_name(q));
    end if;
    want := pgque._space_reserve_pages(nxt);
    have := pg_catalog.pg_relation_size(res) / bs;
    if have >= want then
        return 0;
    end if;
    begin
        execute pg_catalog.format('insert into %s select %L from pg_catalog.generate_series(1, $1)', res::text, '')
          using (want - have)::int4;
    exception when disk_full then
        -- still full: said by the maint_failed alert until there is room
        get stacked diagnostics msg = message_text;
        perform pgque._maint_failed('space reserve', i_queue_name, msg, '53100');
        return 0;
    end;
    perform pgque._maint_ok('space reserve', i_queue_name);
    return pg_catalog.pg_relation_size(res) / bs - have;
end $$;

-- Rotation step 1, with the disk-full path: on "no space left" the failure
-- is recorded (the maint_failed alert), the reserve is emptied and -1 is
-- returned: the caller commits (which frees the reserve's pages) and runs
-- step 1 again.  -> 1 switched / 0 not now / -1 reserve freed, run again.
create function pgque._maint_rotate_step1(i_queue_name text)
returns int4 language plpgsql
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    msg  text;
    res  text;
    n    int4;
begin
    n := pgque.maint_rotate_tables_step1(i_queue_name);
    perform pgque._maint_ok('rotation step 1', i_queue_name);
    return n;
exception when disk_full then
    get stacked diagnostics msg = message_text;
    perform pgque._maint_failed('rotation step 1', i_queue_name, msg, '53100');
    res := pgque._space_reserve_name(pgque._queue(i_queue_name));
    if pg_catalog.to_regclass(res) is null
       or pg_catalog.pg_relation_size(pg_catalog.to_regclass(res)) = 0 then
        raise warning 'rotation step 1 of queue "%" failed: %', i_queue_name, msg
            using detail = 'The space reserve of the queue is empty.',
                  hint = 'Free or add space in the tablespace of the queue''s event tables.';
        return 0;
    end if;
    execute 'truncate ' || res;
    raise warning 'rotation step 1 of queue "%" failed: %', i_queue_name, msg
        using detail = 'The queue''s space reserve is freed for the next attempt.';
    return -1;
end $$;

-- The queues with a per-queue maintenance step to run (maint.c), in one
-- statement of index probes instead of two transactions per queue and
-- pass (ADR 0031):
--   rotate:  rotation is due (_rotation_due);
--   reserve: _space_reserve_keep has work: the next table to truncate
--            exists and its reserve is missing or in another tablespace.
--            maint.c also keeps the reserve of every queue it switched
--            (the next table, and with it the pages wanted, changed) or
--            whose reserve step 1 emptied; a reserve short of pages
--            otherwise (partition buckets added since) is topped up at the
--            queue's next switch.  No relation is opened: with 1,000
--            queues a size per queue cost more than the rest of the pass;
--   either while a failure of it is recorded (its success marks the
--   failure recovered: the maint_failed alert clears).
create function pgque._maint_queue_steps(out queue_name text, out rotate boolean, out reserve boolean)
returns setof record language sql stable
set search_path = pgque, pg_catalog, pg_temp as $$
    select x.queue_name, x.rotate, x.reserve from (
        select q.queue_id, q.queue_name,
               pgque._rotation_due(q) or coalesce(f.rotate_failing, false) as rotate,
               (r.nxt is not null
                and (r.res is null
                     or (select c.reltablespace from pg_catalog.pg_class c where c.oid = r.res)
                        <> (select c.reltablespace from pg_catalog.pg_class c where c.oid = r.nxt)))
               or coalesce(f.reserve_failing, false) as reserve
          from pgque.queue q
         cross join lateral (
               select pg_catalog.to_regclass(pg_catalog.format('pgque.%I',
                          'event_' || q.queue_id || '_' || (q.queue_cur_table + 1) % q.queue_ntables)) as nxt,
                      pg_catalog.to_regclass(pgque._space_reserve_name(q)) as res) r
          left join (select mf.mf_queue,
                            pg_catalog.bool_or(mf.mf_step = 'rotation step 1') as rotate_failing,
                            pg_catalog.bool_or(mf.mf_step = 'space reserve') as reserve_failing
                       from pgque.maint_failure mf
                      where mf.mf_recovered_at is null
                      group by mf.mf_queue) f on f.mf_queue = q.queue_name) x
     where x.rotate or x.reserve
     order by x.queue_id
$$;
-- Observing: version, status and the PgQ info functions.

create function pgque.version()
returns text language sql immutable security definer
set search_path = pgque, pg_catalog, pg_temp as $$
    select '0.2.0'::text
$$;

create function pgque._preloaded()
returns boolean language c strict
as 'MODULE_PATHNAME', 'pgque_preloaded_sql';

-- What the shared-memory state table says about this database's workers.
create function pgque._worker_status(out component text, out status text, out detail text)
returns setof record language c strict
as 'MODULE_PATHNAME', 'pgque_worker_status';

-- Every database the launcher knows, served or not, one row per worker
-- loop (ADR 0026): the database's state and mode (split: a process per
-- loop; combined: one process runs the three), the process, since when it
-- is down, its restart back-off, its outages past worker_down_after, and
-- why it is not started.  Shared memory only: the same rows in every
-- database.
create function pgque.launcher_workers(out datname text, out datid oid, out db_state text, out mode text,
                                       out worker text, out pid int4, out down_since timestamptz,
                                       out restart_at timestamptz, out short_runs int4, out outages int8,
                                       out not_served_because text)
returns setof record language c strict
as 'MODULE_PATHNAME', 'pgque_launcher_workers';

-- At CREATE EXTENSION: a WARNING when the workers will not serve this
-- database, and why.
create function pgque._warn_if_unserved()
returns void language c strict
as 'MODULE_PATHNAME', 'pgque_warn_if_unserved';

-- The pg_cron jobs that start() made for this database, if pg_cron is here.
create function pgque._cron_jobs(out jobid bigint, out jobname text, out schedule text)
returns setof record language plpgsql as $$
begin
    if not exists (select 1 from pg_catalog.pg_extension where extname = 'pg_cron') then
        return;
    end if;
    return query execute
        'select jobid::int8, jobname::text, schedule::text from cron.job'
        ' where jobname in ($1, $2) and database = pg_catalog.current_database() order by jobid'
    using 'pgque_ticker_' || pg_catalog.current_database(), 'pgque_maint_' || pg_catalog.current_database();
end $$;

-- Do the background workers tick this database?  Only where its ticker
-- runs: not merely where the library is loaded and enabled (a database
-- outside pgque_bgw.databases, or not yet taken on, is not served).
create function pgque._workers_serve()
returns boolean language sql stable as $$
    select exists (select 1 from pgque._worker_status() w
                    where w.component = 'ticker' and w.status = 'running');
$$;

-- status() -> (component, status, detail): versions, whether the library
-- is preloaded, each worker (state, pid, last tick, last maintenance, last
-- error), the scheduler in effect, counts.  Rows that only inform say
-- 'info' (PgQue's word); the others say what state the part is in.
create function pgque.status(out component text, out status text, out detail text)
returns setof record language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    workers_on boolean;
    jobs text;
begin
    component := 'postgresql'; status := 'info'; detail := pg_catalog.version();
    return next;
    component := 'pgque'; status := 'info'; detail := 'pgque_bgw ' || pgque.version();
    return next;
    component := 'library';
    if pgque._preloaded() then
        status := 'preloaded'; detail := 'pgque_bgw is in shared_preload_libraries';
    else
        status := 'not preloaded';
        detail := 'add pgque_bgw to shared_preload_libraries for the background workers and slot leases';
    end if;
    return next;
    return query select * from pgque._worker_status();

    workers_on := pgque._workers_serve();
    select pg_catalog.string_agg(j.jobname || ' (job ' || j.jobid || ', ' || j.schedule || ')', ', ')
      into jobs from pgque._cron_jobs() j;
    component := 'scheduler';
    if workers_on then
        status := 'workers'; detail := 'the pgque_bgw background workers tick and maintain this database';
    elsif jobs is not null then
        status := 'pg_cron'; detail := jobs;
    else
        status := 'manual'; detail := 'call pgque.ticker() and pgque.maint() periodically, or pgque.start() with pg_cron';
    end if;
    return next;
    component := 'alerts';
    select case when count(*) = 0 then 'ok' else 'open' end,
           coalesce(pg_catalog.string_agg(a.kind || ' (' || pgque._alert_where(a) || ')', '; ' order by a.alert_id),
                    'no open alert')
      into status, detail from pgque.alert a where a.cleared_at is null;
    return next;
    component := 'queues'; status := 'info';
    detail := (select count(*) from pgque.queue)::text || ' queue(s)';
    return next;
    component := 'consumers'; status := 'info';
    detail := (select count(*) from pgque.subscription)::text || ' subscription(s)';
    return next;
end $$;

create function pgque.get_queue_info(
    out queue_name text, out queue_ntables int4, out queue_cur_table int4,
    out queue_rotation_period interval, out queue_switch_time timestamptz,
    out queue_external_ticker boolean, out queue_ticker_paused boolean,
    out queue_ticker_max_count int4, out queue_ticker_max_lag interval,
    out queue_ticker_idle_period interval, out ticker_lag interval,
    out ev_per_sec float8, out ev_new bigint, out last_tick_id bigint)
returns setof record language sql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
    select q.queue_name, q.queue_ntables, q.queue_cur_table, q.queue_rotation_period,
           q.queue_switch_time, q.queue_external_ticker, q.queue_ticker_paused,
           q.queue_ticker_max_count, q.queue_ticker_max_lag, q.queue_ticker_idle_period,
           now() - lt.tick_time,
           case when ot.tick_time is not null and lt.tick_time > ot.tick_time
                then (lt.tick_event_seq - ot.tick_event_seq)
                     / extract(epoch from lt.tick_time - ot.tick_time)::float8 end,
           greatest(pgque._event_seq_pos(q) - lt.tick_event_seq, 0),
           lt.tick_id
      from pgque.queue q
      left join lateral (select * from pgque.tick t where t.tick_queue = q.queue_id
                          order by t.tick_id desc limit 1) lt on true
      left join lateral (select * from pgque.tick t where t.tick_queue = q.queue_id
                          order by t.tick_id desc offset 20 limit 1) ot0 on true
      left join lateral (select coalesce(ot0.tick_time, (select min(tick_time) from pgque.tick t where t.tick_queue = q.queue_id)) as tick_time,
                                coalesce(ot0.tick_event_seq, (select min(tick_event_seq) from pgque.tick t where t.tick_queue = q.queue_id)) as tick_event_seq) ot on true
     order by q.queue_name
$$;

create function pgque.get_queue_info(i_queue_name text,
    out queue_name text, out queue_ntables int4, out queue_cur_table int4,
    out queue_rotation_period interval, out queue_switch_time timestamptz,
    out queue_external_ticker boolean, out queue_ticker_paused boolean,
    out queue_ticker_max_count int4, out queue_ticker_max_lag interval,
    out queue_ticker_idle_period interval, out ticker_lag interval,
    out ev_per_sec float8, out ev_new bigint, out last_tick_id bigint)
returns setof record language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
begin
    perform pgque._queue(i_queue_name);
    return query select * from pgque.get_queue_info() i where i.queue_name = i_queue_name;
end $$;

create function pgque.get_consumer_info(
    out queue_name text, out consumer_name text, out lag interval, out last_seen interval,
    out last_tick bigint, out current_batch bigint, out next_tick bigint, out pending_events bigint)
returns setof record language sql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
    select q.queue_name, c.co_name, now() - t.tick_time, now() - s.sub_active,
           s.sub_last_tick, s.sub_batch, s.sub_next_tick,
           greatest(pgque._event_seq_pos(q) - t.tick_event_seq, 0)
      from pgque.subscription s
      join pgque.queue q on q.queue_id = s.sub_queue
      join pgque.consumer c on c.co_id = s.sub_consumer
      join pgque.tick t on t.tick_queue = s.sub_queue and t.tick_id = s.sub_last_tick
    union all
    -- the members of cooperative groups, as PgQue names them: lag and
    -- pending of the window each holds (the group's when it holds none)
    select q.queue_name, c.co_name || '.' || m.member, now() - t.tick_time, now() - m.last_seen,
           coalesce(m.prev_tick, s.sub_last_tick), m.batch, m.next_tick,
           case when m.batch is null then 0
                else greatest(coalesce(nt.tick_event_seq, pgque._event_seq_pos(q)) - t.tick_event_seq, 0) end
      from pgque._coop_member_info() m
      join pgque.subscription s on s.sub_id = m.sub_id
      join pgque.queue q on q.queue_id = s.sub_queue
      join pgque.consumer c on c.co_id = s.sub_consumer
      join pgque.tick t on t.tick_queue = s.sub_queue and t.tick_id = coalesce(m.prev_tick, s.sub_last_tick)
      left join pgque.tick nt on nt.tick_queue = s.sub_queue and nt.tick_id = m.next_tick
     order by 1, 2
$$;

create function pgque.get_consumer_info(i_queue_name text,
    out queue_name text, out consumer_name text, out lag interval, out last_seen interval,
    out last_tick bigint, out current_batch bigint, out next_tick bigint, out pending_events bigint)
returns setof record language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
begin
    perform pgque._queue(i_queue_name);
    return query select * from pgque.get_consumer_info() i where i.queue_name = i_queue_name;
end $$;

create function pgque.get_consumer_info(i_queue_name text, i_consumer_name text,
    out queue_name text, out consumer_name text, out lag interval, out last_seen interval,
    out last_tick bigint, out current_batch bigint, out next_tick bigint, out pending_events bigint)
returns setof record language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
begin
    -- a member of a cooperative group is named <consumer>.<subconsumer>
    if pg_catalog.strpos(coalesce(i_consumer_name, ''), '.') = 0
       or not exists (select 1 from pgque.get_consumer_info() i
                       where i.queue_name = i_queue_name and i.consumer_name = i_consumer_name) then
        perform pgque._subscription(i_queue_name, i_consumer_name);
    end if;
    return query select * from pgque.get_consumer_info() i
                  where i.queue_name = i_queue_name and i.consumer_name = i_consumer_name;
end $$;

create function pgque.get_batch_info(x_batch_id bigint,
    out queue_name text, out consumer_name text, out batch_start timestamptz, out batch_end timestamptz,
    out prev_tick_id bigint, out tick_id bigint, out lag interval, out seq_start bigint, out seq_end bigint)
language plpgsql stable security definer
set search_path = pgque, pg_catalog, pg_temp as $$
begin
    perform pgque._check_not_null('batch_id', x_batch_id);
    select q.queue_name, c.co_name, t1.tick_time, t2.tick_time, t1.tick_id, t2.tick_id,
           now() - t2.tick_time, t1.tick_event_seq, t2.tick_event_seq
      into queue_name, consumer_name, batch_start, batch_end, prev_tick_id, tick_id, lag, seq_start, seq_end
      from pgque.subscription s
      join pgque.queue q on q.queue_id = s.sub_queue
      join pgque.consumer c on c.co_id = s.sub_consumer
      join pgque.tick t1 on t1.tick_queue = s.sub_queue and t1.tick_id = s.sub_last_tick
      join pgque.tick t2 on t2.tick_queue = s.sub_queue and t2.tick_id = s.sub_next_tick
     where s.sub_batch = x_batch_id;
    if not found then
        -- a cooperative member's batch: the group's name and the window
        select q.queue_name, c.co_name, t1.tick_time, t2.tick_time, t1.tick_id, t2.tick_id,
               now() - t2.tick_time, t1.tick_event_seq, t2.tick_event_seq
          into queue_name, consumer_name, batch_start, batch_end, prev_tick_id, tick_id, lag, seq_start, seq_end
          from pgque.coop_window w
          join pgque.subscription s on s.sub_id = w.cw_sub
          join pgque.queue q on q.queue_id = s.sub_queue
          join pgque.consumer c on c.co_id = s.sub_consumer
          join pgque.tick t1 on t1.tick_queue = s.sub_queue and t1.tick_id = w.cw_prev_tick
          join pgque.tick t2 on t2.tick_queue = s.sub_queue and t2.tick_id = w.cw_next_tick
         where w.cw_batch = x_batch_id;
    end if;
    if not found then
        perform pgque._coop_refuse_fenced(x_batch_id);
        raise exception 'batch not found: %', x_batch_id
            using errcode = 'undefined_object';
    end if;
end $$;

-- delayed_events: the send_at() events waiting for their time (PgQue's
-- relation name), without payloads (readers get those by receiving).
create view pgque.delayed_events as
select q.queue_name, d.ev_id, d.de_deliver_at as deliver_at, d.ev_time, d.ev_type
  from pgque.delayed_event d
  join pgque.queue q on q.queue_id = d.de_queue;
-- metrics(): one row per metric, labels as jsonb, for scraping (Prometheus
-- via postgres_exporter, or any poller).  Everything comes from sequence
-- positions, catalog rows and the shared-memory lease and worker tables:
-- reading it writes nothing.
create function pgque.metrics(out metric text, out labels jsonb, out value float8)
returns setof record language sql stable security definer
set search_path = pgque, pg_catalog, pg_temp as $$
    -- per queue
    select 'pgque_events_produced_total', jsonb_build_object('queue', q.queue_name),
           pgque._event_seq_pos(q)::float8
      from pgque.queue q
    union all
    select 'pgque_ticks_total', jsonb_build_object('queue', q.queue_name),
           coalesce(pg_catalog.pg_sequence_last_value(q.queue_tick_seq::regclass), 0)::float8
      from pgque.queue q
    union all
    select 'pgque_seconds_since_last_tick', jsonb_build_object('queue', q.queue_name),
           extract(epoch from now() - (select max(t.tick_time) from pgque.tick t where t.tick_queue = q.queue_id))::float8
      from pgque.queue q
    union all
    select 'pgque_current_table', jsonb_build_object('queue', q.queue_name), q.queue_cur_table::float8
      from pgque.queue q
    union all
    select 'pgque_seconds_since_rotation', jsonb_build_object('queue', q.queue_name),
           extract(epoch from now() - q.queue_switch_time)::float8
      from pgque.queue q
    union all
    -- per consumer (slots included, as subscriptions "<consumer>#<k>/<n>")
    select 'pgque_consumer_pending_events', jsonb_build_object('queue', i.queue_name, 'consumer', i.consumer_name),
           i.pending_events::float8
      from pgque.get_consumer_info() i
    union all
    select 'pgque_consumer_lag_seconds', jsonb_build_object('queue', i.queue_name, 'consumer', i.consumer_name),
           extract(epoch from i.lag)::float8
      from pgque.get_consumer_info() i
    union all
    select 'pgque_batches_total', '{}'::jsonb,
           coalesce(pg_catalog.pg_sequence_last_value('pgque.batch_id_seq'::regclass), 0)::float8
    union all
    select 'pgque_retry_pending', jsonb_build_object('queue', q.queue_name), count(r.*)::float8
      from pgque.queue q left join pgque.retry_queue r on r.ev_queue = q.queue_id group by q.queue_name
    union all
    select 'pgque_dead_letters', jsonb_build_object('queue', q.queue_name), count(d.*)::float8
      from pgque.queue q left join pgque.dead_letter d on d.dl_queue_id = q.queue_id group by q.queue_name
    union all
    -- per partition slot: lease state and counters from shared memory
    select 'pgque_slot_lease_live', jsonb_build_object('queue', q.queue_name, 'consumer', l.consumer, 'slot', l.slot),
           (l.owner is not null and l.lease_until > clock_timestamp())::int::float8
      from pgque._slot_leases() l join pgque.queue q on q.queue_id = l.queue_id
    union all
    select 'pgque_slot_receives_total', jsonb_build_object('queue', q.queue_name, 'consumer', l.consumer, 'slot', l.slot),
           l.receives::float8
      from pgque._slot_leases() l join pgque.queue q on q.queue_id = l.queue_id
    union all
    select 'pgque_slot_epoch', jsonb_build_object('queue', q.queue_name, 'consumer', l.consumer, 'slot', l.slot),
           l.epoch::float8
      from pgque._slot_leases() l join pgque.queue q on q.queue_id = l.queue_id
    union all
    -- alerts: every kind of docs/alerts.md (0 when none is open), and any
    -- other kind that has an open alert
    select 'pgque_alerts_open', jsonb_build_object('kind', k.kind),
           (select count(*) from pgque.alert a where a.cleared_at is null and a.kind = k.kind)::float8
      from (select v.kind from (values ('slot_unpolled'), ('slot_stale'), ('consumer_lagging'),
                                       ('coop_member_silent'), ('rotation_pinned'), ('long_transaction'),
                                       ('maint_failed'), ('ticker_stalled'), ('worker_down'),
                                       ('resize_stalled'), ('key_blocked')) v(kind)
            union
            select o.kind from pgque.alert o where o.cleared_at is null) k
    union all
    -- workers
    select 'pgque_worker_running', jsonb_build_object('worker', w.component),
           (w.status = 'running')::int::float8
      from pgque._worker_status() w where w.component in ('ticker', 'maintenance', 'watchdog')
$$;
-- Observability: PgQue's observability set (queue_stats, consumer_stats,
-- queue_health, otel_metrics, stuck_consumers, in_flight, throughput,
-- error_rate), issue #13.  Same names, columns and types as PgQue.
--
-- Every figure comes from what the engine keeps anyway: sequence positions,
-- tick rows (tick_event_seq), subscriptions, the retry and dead-letter
-- tables (through their time indexes).  No function here reads an event
-- table, and none writes: they are declared stable, so a write would be an
-- error, and they run in a read-only transaction (test/sql/22_observability.sql).

-- One row per subscription (slots included): the cursor, what it has still
-- to read and since when.  The figures of get_consumer_info() (lag,
-- pending_events) with the same formulas, plus the first tick past the
-- cursor that carries new events: the oldest unconsumed event was ticked
-- then (the measure of the consumer_lagging alert).
create function pgque._consumer_state(
    out queue_id int4, out queue_name text, out consumer_name text,
    out sub_last_tick bigint, out sub_active timestamptz, out sub_batch bigint,
    out sub_next_tick bigint, out sub_batch_pos bigint,
    out cursor_time timestamptz, out cursor_seq bigint, out cursor_xmin xid8,
    out lag interval, out pending_events bigint,
    out oldest_pending_time timestamptz, out last_tick_id bigint)
returns setof record language sql stable as $$
    select q.queue_id, q.queue_name, c.co_name,
           t.tick_id, s.sub_active, coalesce(s.sub_batch, sb.sb_batch),
           coalesce(s.sub_next_tick, sb.sb_next_tick), coalesce(s.sub_batch_pos, sb.sb_pos),
           t.tick_time, t.tick_event_seq, pg_catalog.pg_snapshot_xmin(t.tick_snapshot),
           pg_catalog.now() operator(pg_catalog.-) t.tick_time,
           greatest(pgque._event_seq_pos(q) operator(pg_catalog.-) t.tick_event_seq, 0),
           (select nt.tick_time from pgque.tick nt
             where nt.tick_queue operator(pg_catalog.=) s.sub_queue
               and nt.tick_id operator(pg_catalog.>) t.tick_id
               and nt.tick_event_seq operator(pg_catalog.>) t.tick_event_seq
             order by nt.tick_id limit 1),
           (select max(lt.tick_id) from pgque.tick lt where lt.tick_queue operator(pg_catalog.=) s.sub_queue)
      from pgque.subscription s
      join pgque.queue q on q.queue_id operator(pg_catalog.=) s.sub_queue
      join pgque.consumer c on c.co_id operator(pg_catalog.=) s.sub_consumer
      -- a partition slot: its cursor and the current owner's open batch
      -- are in pgque.slot_batch (ADR 0023)
      left join lateral (select b.sb_batch, b.sb_next_tick, b.sb_pos from pgque.slot_batch b
                          where b.sb_sub operator(pg_catalog.=) s.sub_id
                          order by b.sb_epoch desc limit 1) sb on true
      join pgque.tick t on t.tick_queue operator(pg_catalog.=) s.sub_queue
                       and t.tick_id operator(pg_catalog.=) pgque._slot_cursor(s)
$$;

-- A threshold GUC of the watchdog (integer seconds), or its default when
-- the library is not loaded.
create function pgque._guc_interval(i_name text, i_default interval)
returns interval language sql stable as $$
    select coalesce(pg_catalog.current_setting(i_name, true)::interval, i_default)
$$;

-- The buckets of throughput() and error_rate(): aligned to multiples of
-- bucket_size since the epoch, covering [now() - period, now()].  Refuses
-- NULL, non-positive and oversize intervals, a bucket longer than the
-- period, and more than 10,000 buckets.
create function pgque._buckets(i_period interval, i_bucket_size interval,
                               out first_epoch numeric, out bucket_secs numeric, out nbuckets int4)
language plpgsql stable as $$
declare
    span numeric;
begin
    perform pgque._check_interval('period', i_period);
    perform pgque._check_interval('bucket_size', i_bucket_size);
    bucket_secs := extract(epoch from i_bucket_size);
    span := extract(epoch from i_period);
    if bucket_secs <= 0 or span <= 0 then
        -- '1 month -30 days' is positive as an interval and zero seconds long
        raise exception 'period and bucket_size must be positive, got % and %', i_period, i_bucket_size
            using errcode = 'invalid_parameter_value';
    end if;
    if bucket_secs > span then
        raise exception 'bucket_size % is longer than period %', i_bucket_size, i_period
            using errcode = 'invalid_parameter_value',
                  hint = 'Use a bucket_size of at most the period.';
    end if;
    if pg_catalog.ceil(span / bucket_secs) > 10000 then
        raise exception 'period % in buckets of % makes % buckets, more than 10000',
              i_period, i_bucket_size, pg_catalog.ceil(span / bucket_secs)
            using errcode = 'invalid_parameter_value',
                  hint = 'Use a larger bucket_size or a shorter period.';
    end if;
    first_epoch := pg_catalog.floor(extract(epoch from pg_catalog.now() - i_period) / bucket_secs) * bucket_secs;
    nbuckets := (pg_catalog.floor((extract(epoch from pg_catalog.now()) - first_epoch) / bucket_secs) + 1)::int4;
end $$;

-- queue_stats(): one row per queue.
--   depth           what the slowest subscription has still to read (event
--                   sequence positions, as get_consumer_info's
--                   pending_events); 0 without subscriptions
--   oldest_msg_age  age of the first tick past the slowest cursor that
--                   carries new events (the oldest unconsumed event was
--                   ticked then); NULL when every cursor is caught up
--   events_per_sec  get_queue_info's ev_per_sec (over the last 20 ticks)
create function pgque.queue_stats()
returns table (queue_name text, queue_id int4, depth bigint, oldest_msg_age interval, consumers int4,
               events_per_sec numeric, cur_table int4, rotation_age interval, rotation_period interval,
               ticker_paused boolean, last_tick_time timestamptz, last_tick_id bigint, dlq_count bigint)
language sql stable security definer
set search_path = pgque, pg_catalog, pg_temp as $$
    select q.queue_name, q.queue_id,
           coalesce(cs.depth, 0), now() - cs.oldest, coalesce(cs.n, 0)::int4,
           i.ev_per_sec::numeric, q.queue_cur_table, now() - q.queue_switch_time,
           q.queue_rotation_period, q.queue_ticker_paused,
           lt.tick_time, lt.tick_id,
           (select count(*) from pgque.dead_letter d where d.dl_queue_id = q.queue_id)
      from pgque.queue q
      join pgque.get_queue_info() i on i.queue_name = q.queue_name
      left join lateral (select t.tick_id, t.tick_time from pgque.tick t where t.tick_queue = q.queue_id
                          order by t.tick_id desc limit 1) lt on true
      left join lateral (select count(*) as n, max(c.pending_events) as depth,
                                min(c.oldest_pending_time) as oldest
                           from pgque._consumer_state() c where c.queue_id = q.queue_id) cs on true
     order by q.queue_name
$$;

-- consumer_stats(): one row per subscription (slots as "<consumer>#<k>/<n>").
-- lag and pending_events are get_consumer_info's; last_batch_start is when
-- the open batch started, or, with none open, when the last one finished.
create function pgque.consumer_stats()
returns table (queue_name text, consumer_name text, lag interval, pending_events bigint,
               last_batch_start timestamptz, batch_active boolean, batch_id bigint)
language sql stable security definer
set search_path = pgque, pg_catalog, pg_temp as $$
    select c.queue_name, c.consumer_name, c.lag, c.pending_events,
           c.sub_active, c.sub_batch is not null, c.sub_batch
      from pgque._consumer_state() c
     order by c.queue_name, c.consumer_name
$$;

-- stuck_consumers(threshold): subscriptions whose cursor has not moved for
-- longer than threshold although newer ticks exist.  A consumer that is
-- caught up is never stuck, however long ago its cursor tick was.
create function pgque.stuck_consumers(threshold interval default '1 hour')
returns table (queue_name text, consumer_name text, lag interval, last_active timestamptz)
language plpgsql stable security definer
set search_path = pgque, pg_catalog, pg_temp as $$
#variable_conflict use_column
begin
    perform pgque._check_interval('threshold', threshold, true);
    return query
        select c.queue_name, c.consumer_name, c.lag, c.sub_active
          from pgque._consumer_state() c
         where c.last_tick_id > c.sub_last_tick
           and c.lag > stuck_consumers.threshold
         order by c.lag desc, c.queue_name, c.consumer_name;
end $$;

-- in_flight(queue_name): the open batches of a queue.  estimated_events is
-- the event-sequence span of what the batch has left to hand out (an upper
-- bound: rolled-back sends take sequence values too).
create function pgque.in_flight(queue_name text)
returns table (consumer_name text, batch_id bigint, batch_age interval, estimated_events bigint)
language plpgsql stable security definer
set search_path = pgque, pg_catalog, pg_temp as $$
#variable_conflict use_column
declare
    q pgque.queue;
begin
    q := pgque._queue(in_flight.queue_name);
    return query
        select c.consumer_name, c.sub_batch, now() - c.sub_active,
               greatest(nt.tick_event_seq - greatest(c.cursor_seq, coalesce(c.sub_batch_pos, 0)), 0)
          from pgque._consumer_state() c
          join pgque.tick nt on nt.tick_queue = c.queue_id and nt.tick_id = c.sub_next_tick
         where c.queue_id = q.queue_id and c.sub_batch is not null
         order by c.consumer_name;
end $$;

-- throughput(queue_name, period, bucket_size): events appended per bucket,
-- from the tick history: each tick's tick_event_seq minus the previous
-- tick's, counted in the bucket of the tick's time.  Sequence positions, so
-- rolled-back sends count and redeliveries do not.  Every bucket of the
-- period is returned, empty ones with 0; history goes back as far as tick
-- cleanup keeps ticks (at least a rotation period).
create function pgque.throughput(queue_name text, period interval, bucket_size interval)
returns table (bucket_start timestamptz, events bigint, events_per_sec numeric)
language plpgsql stable security definer
set search_path = pgque, pg_catalog, pg_temp as $$
#variable_conflict use_column
declare
    q        pgque.queue;
    b        record;
    first_id bigint;
    prev_seq bigint;
begin
    q := pgque._queue(throughput.queue_name);
    b := pgque._buckets(period, bucket_size);
    select min(t.tick_id) into first_id from pgque.tick t
     where t.tick_queue = q.queue_id and t.tick_time >= pg_catalog.to_timestamp(b.first_epoch::float8);
    select t.tick_event_seq into prev_seq from pgque.tick t
     where t.tick_queue = q.queue_id and t.tick_id < first_id order by t.tick_id desc limit 1;
    return query
        with ticks as (
            select t.tick_time, t.tick_event_seq
                   - coalesce(lag(t.tick_event_seq) over (order by t.tick_id), prev_seq, t.tick_event_seq) as d
              from pgque.tick t
             where t.tick_queue = q.queue_id and t.tick_id >= first_id
        ), per as (
            select floor((extract(epoch from k.tick_time) - b.first_epoch) / b.bucket_secs)::int4 as i,
                   sum(k.d)::bigint as n
              from ticks k group by 1
        )
        select pg_catalog.to_timestamp((b.first_epoch + g.i * b.bucket_secs)::float8),
               coalesce(per.n, 0), round(coalesce(per.n, 0) / b.bucket_secs, 3)
          from generate_series(0, b.nbuckets - 1) g(i)
          left join per on per.i = g.i
         order by g.i;
end $$;

-- error_rate(queue_name, period, bucket_size): per bucket,
--   retries       retries due in the bucket and not redelivered yet
--                 (retry_queue by ev_retry_after).  The engine keeps no
--                 history of retries once redelivered, so this is a
--                 backlog, not a rate: with maintenance running, past
--                 buckets show 0 (see docs/operations.md).
--   dead_letters  dead letters made in the bucket (dead_letter.dl_time),
--                 as long as they are kept (dlq_purge, dlq_replay remove)
create function pgque.error_rate(queue_name text, period interval, bucket_size interval)
returns table (bucket_start timestamptz, retries bigint, dead_letters bigint)
language plpgsql stable security definer
set search_path = pgque, pg_catalog, pg_temp as $$
#variable_conflict use_column
declare
    q    pgque.queue;
    b    record;
    from_ts timestamptz;
begin
    q := pgque._queue(error_rate.queue_name);
    b := pgque._buckets(period, bucket_size);
    from_ts := pg_catalog.to_timestamp(b.first_epoch::float8);
    return query
        with r as (
            select floor((extract(epoch from x.ev_retry_after) - b.first_epoch) / b.bucket_secs)::int4 as i,
                   count(*) as n
              from pgque.retry_queue x
             where x.ev_retry_after >= from_ts and x.ev_retry_after <= now() and x.ev_queue = q.queue_id
             group by 1
        ), d as (
            select floor((extract(epoch from x.dl_time) - b.first_epoch) / b.bucket_secs)::int4 as i,
                   count(*) as n
              from pgque.dead_letter x
             where x.dl_queue_id = q.queue_id and x.dl_time >= from_ts and x.dl_time <= now()
             group by 1
        )
        select pg_catalog.to_timestamp((b.first_epoch + g.i * b.bucket_secs)::float8),
               coalesce(r.n, 0), coalesce(d.n, 0)
          from generate_series(0, b.nbuckets - 1) g(i)
          left join r on r.i = g.i
          left join d on d.i = g.i
         order by g.i;
end $$;

-- queue_health(): operational checks, one row per check, status ok,
-- warning or critical (docs/operations.md lists the rules):
--   ticker_running            new events waiting for a tick
--   rotation_health           rotation overdue, and whether a cursor pins it
--   dlq_health                dead letters made in the last hour
--   retry_health              retries and delayed events overdue (maintenance)
--   consumer_lag:<consumer>   the consumer's oldest unconsumed event
-- Thresholds: the queue's ticker_max_lag and rotation_period, and the
-- watchdog's pgque_bgw.ticker_stalled_after and lag_alert_after.
create function pgque.queue_health()
returns table (queue_name text, check_name text, status text, detail text)
language plpgsql stable security definer
set search_path = pgque, pg_catalog, pg_temp as $$
#variable_conflict use_column
declare
    stalled_after interval := pgque._guc_interval('pgque_bgw.ticker_stalled_after', '20 seconds');
    lag_after     interval := pgque._guc_interval('pgque_bgw.lag_alert_after', '5 minutes');
begin
    return query
    with qs as (
        select q.*, lt.tick_time as last_tick_time,
               greatest(pgque._event_seq_pos(q) - lt.tick_event_seq, 0) as new_events
          from pgque.queue q
          left join lateral (select t.tick_time, t.tick_event_seq from pgque.tick t
                              where t.tick_queue = q.queue_id order by t.tick_id desc limit 1) lt on true
    ), checks as (
        -- the ticker
        select qs.queue_name, 1 as ord, 'ticker_running'::text as check_name,
               case when qs.new_events = 0 then 'ok'
                    when qs.queue_ticker_paused then 'warning'
                    when qs.last_tick_time < now() - stalled_after then 'critical'
                    when qs.last_tick_time < now() - qs.queue_ticker_max_lag then 'warning'
                    else 'ok' end as status,
               format('%s event(s) not ticked yet; last tick %s ago%s%s', qs.new_events,
                      date_trunc('second', now() - qs.last_tick_time),
                      case when qs.queue_ticker_paused then '; ticker paused' else '' end,
                      case when qs.queue_external_ticker then '; external ticker' else '' end) as detail
          from qs
        union all
        -- rotation: due after rotation_period; overdue by another period is
        -- a warning, or critical when a cursor holds it
        select qs.queue_name, 2, 'rotation_health',
               case when now() - qs.queue_switch_time <= 2 * qs.queue_rotation_period then 'ok'
                    when pin.consumer_name is not null then 'critical'
                    else 'warning' end,
               format('last rotation %s ago, rotation_period %s%s%s',
                      date_trunc('second', now() - qs.queue_switch_time), qs.queue_rotation_period,
                      case when qs.queue_switch_step2 is null then '; step 2 pending' else '' end,
                      case when pin.consumer_name is not null
                           then format('; consumer "%s" holds the oldest table (cursor %s behind)',
                                       pin.consumer_name, date_trunc('second', pin.lag))
                           else '' end)
          from qs
          left join lateral (select c.consumer_name, c.lag from pgque._consumer_state() c
                              where c.queue_id = qs.queue_id and qs.queue_switch_step2 is not null
                                and now() - qs.queue_switch_time > 2 * qs.queue_rotation_period
                                and c.cursor_xmin <= qs.queue_switch_step2
                                -- a caught-up cursor does not hold it (ADR 0024)
                                and (select pg_snapshot_xmin(t.tick_snapshot) from pgque.tick t
                                      where t.tick_queue = qs.queue_id
                                      order by t.tick_id desc limit 1) > qs.queue_switch_step2
                              order by c.cursor_seq, c.consumer_name limit 1) pin on true
        union all
        -- dead letters: growth in the last hour, or a large pile
        select qs.queue_name, 3, 'dlq_health',
               case when dl.recent > 0 or dl.total > 1000 then 'warning' else 'ok' end,
               format('%s dead letter(s), %s in the last hour', dl.total, dl.recent)
          from qs
          cross join lateral (select count(*) as total,
                                     count(*) filter (where d.dl_time > now() - interval '1 hour') as recent
                                from pgque.dead_letter d where d.dl_queue_id = qs.queue_id) dl
        union all
        -- maintenance: retries and delayed events past their time
        select qs.queue_name, 4, 'retry_health',
               case when od.oldest is null or od.oldest > now() - interval '1 minute' then 'ok'
                    when od.oldest > now() - interval '1 hour' then 'warning'
                    else 'critical' end,
               case when od.n = 0 then 'no retry or delayed event is due'
                    else format('%s retry(ies) and delayed event(s) due, the oldest %s ago', od.n,
                                date_trunc('second', now() - od.oldest)) end
          from qs
          cross join lateral (select count(*) as n, min(x.due) as oldest from (
                  select r.ev_retry_after as due from pgque.retry_queue r
                   where r.ev_queue = qs.queue_id and r.ev_retry_after <= now()
                  union all
                  select e.de_deliver_at from pgque.delayed_event e
                   where e.de_queue = qs.queue_id and e.de_deliver_at <= now()) x) od
        union all
        -- each consumer: its oldest unconsumed event (ticked at oldest_pending_time)
        select c.queue_name, 5, 'consumer_lag:' || c.consumer_name,
               case when c.oldest_pending_time is null then 'ok'
                    when c.oldest_pending_time < now() - qs.queue_rotation_period then 'critical'
                    when c.oldest_pending_time < now() - lag_after then 'warning'
                    else 'ok' end,
               format('%s pending event(s)%s; cursor %s behind', c.pending_events,
                      coalesce('; the oldest unconsumed ticked ' || date_trunc('second', now() - c.oldest_pending_time)
                               || ' ago', ''),
                      date_trunc('second', c.lag))
          from pgque._consumer_state() c
          join qs on qs.queue_id = c.queue_id
    )
    select k.queue_name, k.check_name, k.status, k.detail
      from checks k
     order by k.queue_name, k.ord, k.check_name;
end $$;

-- otel_metrics(): metrics() under OpenTelemetry-style names, with a type
-- (counter for the *_total metrics, gauge otherwise).  Built on metrics(),
-- so the two list the same metrics with the same values and labels; a
-- metric without a name below is still exported, under a name derived
-- from its own.
create function pgque.otel_metrics()
returns table (metric_name text, metric_type text, metric_value numeric, labels jsonb)
language sql stable security definer
set search_path = pgque, pg_catalog, pg_temp as $$
    select coalesce(n.otel, 'pgque.' || regexp_replace(substr(m.metric, 7), '_total$', '')),
           case when m.metric like '%\_total' then 'counter' else 'gauge' end,
           m.value::numeric, m.labels
      from pgque.metrics() m
      left join (values
          ('pgque_events_produced_total',   'pgque.queue.events_produced'),
          ('pgque_ticks_total',             'pgque.queue.ticks'),
          ('pgque_seconds_since_last_tick', 'pgque.queue.seconds_since_last_tick'),
          ('pgque_current_table',           'pgque.queue.current_table'),
          ('pgque_seconds_since_rotation',  'pgque.queue.seconds_since_rotation'),
          ('pgque_consumer_pending_events', 'pgque.consumer.pending_events'),
          ('pgque_consumer_lag_seconds',    'pgque.consumer.lag_seconds'),
          ('pgque_batches_total',           'pgque.batches'),
          ('pgque_retry_pending',           'pgque.queue.retry_pending'),
          ('pgque_dead_letters',            'pgque.message.dead_lettered'),
          ('pgque_slot_lease_live',         'pgque.slot.lease_live'),
          ('pgque_slot_receives_total',     'pgque.slot.receives'),
          ('pgque_slot_epoch',              'pgque.slot.epoch'),
          ('pgque_alerts_open',             'pgque.alerts.open'),
          ('pgque_worker_running',          'pgque.worker.running')) n(metric, otel)
        on n.metric = m.metric
$$;
-- Running without the background workers: ticker_loop() for sub-second
-- ticking from a scheduler, and start()/stop() to schedule it with pg_cron.

-- ticker_loop(duration, period): tick every period for duration, committing
-- after each pass (a procedure: CALL it, e.g. from a pg_cron job every
-- minute).  It runs as the caller, under the caller's search_path (a
-- procedure that commits cannot pin one with SET), so every function and
-- operator in it is qualified: a database owner's "operator public.+" is
-- never picked (ADR 0014).
-- A NULL period (the default) is pgque.config.tick_period_ms, read at the
-- start: set_tick_period_ms() changes the rate from the next call on.
create procedure pgque.ticker_loop(i_duration interval default '59 seconds',
                                   i_period interval default null)
language plpgsql as $$
declare
    stop_at timestamptz;
begin
    if i_period is null then
        i_period := pg_catalog.make_interval(secs => (select c.tick_period_ms from pgque.config c)
                                                     operator(pg_catalog./) 1000.0);
    end if;
    perform pgque._check_interval('duration', i_duration);
    perform pgque._check_interval('period', i_period);
    if i_period operator(pg_catalog.>) i_duration then
        raise exception 'period (%) must not exceed duration (%)', i_period, i_duration
            using errcode = 'invalid_parameter_value';
    end if;
    stop_at := pg_catalog.clock_timestamp() operator(pg_catalog.+) i_duration;
    loop
        perform pgque.ticker();
        commit;
        exit when pg_catalog.clock_timestamp() operator(pg_catalog.+) i_period operator(pg_catalog.>) stop_at;
        perform pg_catalog.pg_sleep(pg_catalog.extract('epoch', i_period)::pg_catalog.float8);
    end loop;
end $$;

-- start(): with the workers off, schedule ticker_loop() and maint() every
-- minute with pg_cron (installed in this database).  With the workers on
-- there is nothing to schedule.  Without pg_cron: a clear error.
create function pgque.start()
returns void language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    db text := pg_catalog.current_database();
begin
    if pgque._preloaded() and pg_catalog.current_setting('pgque_bgw.enabled', true) = 'on' then
        raise notice 'the pgque_bgw background workers tick and maintain this database; nothing to schedule'
            using hint = 'Set pgque_bgw.enabled = off to use pg_cron instead.';
        return;
    end if;
    if not exists (select 1 from pg_catalog.pg_extension where extname = 'pg_cron') then
        raise exception 'pg_cron is not installed in database "%"', db
            using errcode = 'object_not_in_prerequisite_state',
                  detail = 'pgque runs in manual mode: nothing ticks or maintains the queues by itself.',
                  hint = 'Call pgque.ticker() (or CALL pgque.ticker_loop()) and pgque.maint() periodically, '
                         'install pg_cron here, or run the background workers (shared_preload_libraries = pgque_bgw).';
    end if;
    perform pgque.stop();
    execute 'select cron.schedule_in_database($1, $2, $3, $4)'
      using 'pgque_ticker_' || db, '* * * * *', 'call pgque.ticker_loop()', db;
    execute 'select cron.schedule_in_database($1, $2, $3, $4)'
      using 'pgque_maint_' || db, '* * * * *', 'select pgque.maint()', db;
end $$;

-- stop(): remove the jobs start() made; harmless without pg_cron.
create function pgque.stop()
returns void language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    j record;
begin
    for j in select * from pgque._cron_jobs() loop
        execute 'select cron.unschedule($1)' using j.jobid;
    end loop;
end $$;

-- set_tick_period_ms(ms) -> ms: the period of ticker_loop() (pg_cron and
-- manual modes), an exact divisor of 1000 in 1..1000; effective from the
-- next ticker_loop() call.  The background workers tick on commit and are
-- not affected (pgque_bgw.tick_interval is their idle period).
create function pgque.set_tick_period_ms(p_period_ms int4)
returns int4 language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
begin
    perform pgque._check_not_null('period_ms', p_period_ms);
    if p_period_ms < 1 or p_period_ms > 1000 or 1000 % p_period_ms <> 0 then
        raise exception 'tick period must be an exact divisor of 1000 between 1 and 1000 ms, got %', p_period_ms
            using errcode = 'invalid_parameter_value',
                  hint = 'For example 50 (20 ticks a second), 100 (the default) or 1000.';
    end if;
    update pgque.config set tick_period_ms = p_period_ms;
    return p_period_ms;
end $$;

-- uninstall(): stop() the pg_cron jobs, then DROP EXTENSION pgque_bgw
-- CASCADE and the schema: PgQue's "drop schema pgque cascade".  Queues,
-- events and anything built on pgque's objects go.  The roles stay,
-- as in PgQue.  The extension owner's only: granted to nobody.
create function pgque.uninstall()
returns void language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
begin
    perform pgque.stop();
    drop extension pgque_bgw cascade;
    -- the schema outlives its extension (CREATE EXTENSION made it for the
    -- control file's "schema = pgque"); PgQue drops it with what is in it
    drop schema if exists pgque cascade;
end $$;
-- Restores (ADR 0022): the workers (and maint()) act on a database only
-- while its queue state is whole.  pg_restore without -1 and psql -f of a
-- plain dump commit CREATE EXTENSION first and then load the tables one by
-- one; the workers start at once, and a rotation check that sees pgque.queue
-- and the events but not yet pgque.subscription or pgque.tick truncates
-- events a lagging consumer still needs.

-- The seal: one row meaning "the queue state in this database is whole".
-- The first create_queue writes it (never the install script, so a restore's
-- CREATE EXTENSION leaves it out), and pg_dump dumps it with the data.  The
-- references are never set (the check): they only make pg_dump restore this
-- table's data after the tables the workers read, for it orders the data of
-- an extension's tables by their foreign keys (also for pg_restore -j).
-- The tables they name lead, through their own keys, to the queues,
-- consumers and subscriptions.  ON DELETE RESTRICT: a deleted tick, alert,
-- slot consumer, finished window or slot batch of an earlier lease epoch
-- costs one probe of this one-row table
-- (about 12 us a row; NO ACTION's extra probe doubles it).
create table pgque.state_seal (
    one                    boolean primary key default true check (one),
    sealed_at              timestamptz not null default now(),
    after_tick_queue       int4,
    after_tick_id          bigint,
    after_alert            bigint references pgque.alert (alert_id) on delete restrict,
    after_slots_queue      int4,
    after_slots_consumer   text,
    after_window_sub       int4,
    after_window_tick      bigint,
    after_slot_batch_sub   int4,
    after_slot_batch_epoch bigint,
    after_blocked_sub      int4,
    after_blocked_key      text,
    foreign key (after_tick_queue, after_tick_id) references pgque.tick (tick_queue, tick_id) on delete restrict,
    foreign key (after_slots_queue, after_slots_consumer) references pgque.partition_consumer (queue_id, co_name) on delete restrict,
    foreign key (after_window_sub, after_window_tick) references pgque.coop_window (cw_sub, cw_prev_tick) on delete restrict,
    foreign key (after_slot_batch_sub, after_slot_batch_epoch) references pgque.slot_batch (sb_sub, sb_epoch) on delete restrict,
    foreign key (after_blocked_sub, after_blocked_key) references pgque.blocked_key (bk_sub, bk_key) on delete restrict,
    check (pg_catalog.num_nonnulls(after_tick_queue, after_tick_id, after_alert, after_slots_queue,
                                   after_slots_consumer, after_window_sub, after_window_tick,
                                   after_slot_batch_sub, after_slot_batch_epoch,
                                   after_blocked_sub, after_blocked_key) = 0)
);
select pg_catalog.pg_extension_config_dump('pgque.state_seal', '');

-- Why the workers must not act on this database now, or NULL when its
-- queue state is whole: sealed, every cursor's tick there, the sequences the
-- workers and consumers draw from set past the restored rows (a restore sets
-- sequences after all table data), and the ticks not ahead of this
-- cluster's transaction counter.  Index probes only: maint() asks it on
-- every call; the workers until it first says NULL (src/restore.c).
create function pgque._state_held()
returns text language plpgsql
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    why text;
begin
    if not exists (select from pgque.state_seal) then
        if exists (select from pgque.queue) then
            return 'the queue state is being loaded: pgque.state_seal has no row yet (a restore in progress, or one that did not finish)';
        end if;
        return 'no queue yet';
    end if;
    select pg_catalog.format('the tick %s of consumer %s on queue %s is not loaded yet',
                             s.sub_last_tick, c.co_name, q.queue_name)
      into why
      from pgque.subscription s
      join pgque.queue q on q.queue_id = s.sub_queue
      join pgque.consumer c on c.co_id = s.sub_consumer
     where not exists (select from pgque.tick t where t.tick_queue = s.sub_queue and t.tick_id = s.sub_last_tick)
     limit 1;
    if why is not null then
        return why;
    end if;
    -- a blocked key's tick holds its withheld events (ADR 0029)
    select pg_catalog.format('the tick %s of a blocked key of consumer %s on queue %s is not loaded yet',
                             b.bk_tick, c.co_name, q.queue_name)
      into why
      from pgque.blocked_key b
      join pgque.subscription s on s.sub_id = b.bk_sub
      join pgque.queue q on q.queue_id = s.sub_queue
      join pgque.consumer c on c.co_id = s.sub_consumer
     where not exists (select from pgque.tick t where t.tick_queue = s.sub_queue and t.tick_id = b.bk_tick)
     limit 1;
    if why is not null then
        return why;
    end if;
    select pg_catalog.format('the tick sequence of queue %s is behind its last tick %s (not restored yet)',
                             q.queue_name, t.tick_id)
      into why
      from pgque.queue q
      cross join lateral (select x.tick_id from pgque.tick x where x.tick_queue = q.queue_id
                           order by x.tick_id desc limit 1) t
     where coalesce(pg_catalog.pg_sequence_last_value(q.queue_tick_seq::regclass), 0) < t.tick_id
     limit 1;
    if why is not null then
        return why;
    end if;
    if coalesce(pg_catalog.pg_sequence_last_value('pgque.alert_alert_id_seq'::regclass), 0)
           < coalesce((select max(alert_id) from pgque.alert), 0)
       or coalesce(pg_catalog.pg_sequence_last_value('pgque.batch_id_seq'::regclass), 0)
           < greatest((select max(sub_batch) from pgque.subscription),
                                 (select max(cw_batch) from pgque.coop_window), 0) then
        return 'the alert or batch sequence is behind the restored rows (not restored yet)';
    end if;
    select pg_catalog.format('the last tick of queue %s was taken at transaction %s, ahead of this cluster''s %s: '
                             'the state was restored from a cluster further on in transaction ids',
                             q.queue_name, pg_catalog.pg_snapshot_xmax(t.tick_snapshot),
                             pg_catalog.pg_snapshot_xmax(pg_catalog.pg_current_snapshot()))
      into why
      from pgque.queue q
      cross join lateral (select x.tick_snapshot from pgque.tick x where x.tick_queue = q.queue_id
                           order by x.tick_id desc limit 1) t
     where pg_catalog.pg_snapshot_xmax(t.tick_snapshot) > pg_catalog.pg_snapshot_xmax(pg_catalog.pg_current_snapshot())
     limit 1;
    return why;
end $$;
-- Start this database's workers as soon as CREATE EXTENSION commits.
create function pgque._wake_launcher_at_commit()
returns void language c
as 'MODULE_PATHNAME', 'pgque_wake_launcher_at_commit';
select pgque._wake_launcher_at_commit();

-- Leases left in shared memory by an earlier install in this database are
-- forgotten (DROP EXTENSION also clears them at commit).
select pgque._slot_forget(null, null);
-- pgque:replay-on-upgrade (idempotent: ALTER EXTENSION UPDATE runs this part again, ADR 0019)
-- Privileges: least privilege for the three roles, nothing for PUBLIC.
-- Internal functions (names starting with "_") are granted to nobody: they
-- run only inside the SECURITY DEFINER API, as the owner.

-- Nothing for PUBLIC on the extension's own objects.  Its members only,
-- not "all ... in schema pgque": ALTER EXTENSION UPDATE runs this part
-- again, and the queues' event tables and sequences (made by create_queue,
-- not members) keep the rights create_queue gave them; a fresh install has
-- no others.
do $revoke$
declare
    r record;
begin
    for r in select pg_catalog.format('revoke all on %s %s from public',
                                      case when c.relkind operator(pg_catalog.=) 'S' then 'sequence' else 'table' end,
                                      c.oid::pg_catalog.regclass) as cmd
               from pg_catalog.pg_class c
               join pg_catalog.pg_depend d on d.objid operator(pg_catalog.=) c.oid
                and d.classid operator(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
              where d.deptype operator(pg_catalog.=) 'e'
                and d.refclassid operator(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
                and d.refobjid operator(pg_catalog.=) (select e.oid from pg_catalog.pg_extension e
                                                        where e.extname operator(pg_catalog.=) 'pgque_bgw')
                and c.relkind operator(pg_catalog.=) any ('{r,v,m,p,f,S}'::pg_catalog."char"[])
             union all
             select pg_catalog.format('revoke all on routine %s from public', p.oid::pg_catalog.regprocedure)
               from pg_catalog.pg_proc p
               join pg_catalog.pg_depend d on d.objid operator(pg_catalog.=) p.oid
                and d.classid operator(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
              where d.deptype operator(pg_catalog.=) 'e'
                and d.refclassid operator(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
                and d.refobjid operator(pg_catalog.=) (select e.oid from pg_catalog.pg_extension e
                                                        where e.extname operator(pg_catalog.=) 'pgque_bgw') loop
        execute r.cmd;
    end loop;
end
$revoke$;
grant usage on schema pgque to pgque_reader, pgque_writer, pgque_admin;

-- producing
grant execute on function
    pgque.send(text, text), pgque.send(text, jsonb),
    pgque.send(text, text, text), pgque.send(text, text, jsonb),
    pgque.send(text, text, text, text), pgque.send(text, text, jsonb, text),
    pgque.send_batch(text, text[]), pgque.send_batch(text, jsonb[]),
    pgque.send_batch(text, text, text[]), pgque.send_batch(text, text, jsonb[]),
    pgque.send_batch(text, text, text[], text[]), pgque.send_batch(text, text, jsonb[], text[]),
    pgque.send_at(text, text, text, timestamptz), pgque.send_at(text, text, jsonb, timestamptz),
    pgque.insert_event(text, text, text),
    pgque.send_idem(text, text, text, text, interval, text),
    pgque.send_idem(text, text, jsonb, text, interval, text),
    pgque.insert_event(text, text, text, text, text, text, text),
    pgque.dlq_replay(bigint), pgque.dlq_replay_all(text)
  to pgque_writer;

-- consuming
grant execute on function
    pgque.subscribe(text, text), pgque.unsubscribe(text, text),
    pgque.register_consumer(text, text), pgque.register_consumer_at(text, text, bigint),
    pgque.unregister_consumer(text, text),
    pgque.receive(text, text, int4), pgque.ack(bigint),
    pgque.nack(bigint, pgque.message, interval, text),
    pgque.next_batch(text, text), pgque.next_batch_info(text, text),
    pgque.next_batch_custom(text, text, interval, int4, interval),
    pgque.get_batch_events(bigint), pgque.finish_batch(bigint),
    pgque.event_retry(bigint, bigint, timestamptz), pgque.event_retry(bigint, bigint, int4),
    pgque.get_queue_info(), pgque.get_queue_info(text),
    pgque.get_consumer_info(), pgque.get_consumer_info(text), pgque.get_consumer_info(text, text),
    pgque.get_batch_info(bigint), pgque.dlq_inspect(text, int4), pgque.version(),
    pgque.subscribe_slot(text, text, int4, int4), pgque.unsubscribe_slot(text, text, int4),
    pgque.claim_slot(text, text, int4, text, interval), pgque.release_slot(text, text, int4, text),
    pgque.receive_partitioned(text, text, int4, int4, text, int4),
    pgque.ack_partitioned(text, text, int4, int4, text),
    pgque.nack_partitioned(text, text, int4, int4, text, pgque.message, interval, text),
    pgque.get_partition_slot_info(), pgque.metrics(),
    pgque.resize_partitioned(text, text, int4), pgque.get_partition_resize_info(),
    pgque.partition_n(text, text),
    pgque.subscribe_slot(text, text, int4, int4, text), pgque.get_failure_policy(text, text),
    pgque.set_failure_policy(text, text, text), pgque.get_blocked_keys(),
    pgque.queue_stats(), pgque.consumer_stats(), pgque.queue_health(), pgque.otel_metrics(),
    pgque.stuck_consumers(interval), pgque.in_flight(text),
    pgque.throughput(text, interval, interval), pgque.error_rate(text, interval, interval),
    -- cooperative consumers (PgQue: pgque_reader)
    pgque.register_subconsumer(text, text, text, boolean),
    pgque.subscribe_subconsumer(text, text, text, boolean),
    pgque.unregister_subconsumer(text, text, text, int4),
    pgque.unsubscribe_subconsumer(text, text, text, int4),
    pgque.touch_subconsumer(text, text, text),
    pgque.receive_coop(text, text, text, int4, interval),
    pgque.next_batch(text, text, text, interval),
    pgque.next_batch_custom(text, text, text, interval, int4, interval, interval)
  to pgque_reader;
grant select on pgque.partition_slot_status to pgque_reader, pgque_admin;
grant select on pgque.partition_resize_status to pgque_reader, pgque_admin;
grant select on pgque.blocked_keys to pgque_reader, pgque_admin;

-- running the queues
grant execute on function
    pgque.create_queue(text), pgque.drop_queue(text), pgque.drop_queue(text, boolean),
    pgque.set_queue_config(text, text, text),
    pgque.ticker(), pgque.ticker(text), pgque.ticker(text, bigint, timestamptz, bigint),
    pgque.force_tick(text), pgque.force_next_tick(text),
    pgque.maint(), pgque.maint_retry_events(), pgque.maint_tick_cleanup(),
    pgque.maint_idem(), pgque.maint_idem(text),
    pgque.maint_rotate_tables_step1(text), pgque.maint_rotate_tables_step2(),
    pgque.batch_retry(bigint, int4), pgque.dlq_purge(text, interval), pgque.status(),
    pgque.launcher_workers(),
    pgque.start(), pgque.stop(), pgque.maint_alerts(interval),
    pgque.create_queue(text, jsonb), pgque.pause_queue(text), pgque.resume_queue(text),
    pgque.set_tick_period_ms(int4), pgque.maint_deliver_delayed(),
    pgque.event_dead(bigint, bigint, text, timestamptz, xid8, int4, text, text, text, text, text, text),
    pgque.get_batch_cursor(bigint, text, int4), pgque.get_batch_cursor(bigint, text, int4, text)
  to pgque_admin;
-- PgQue's internal insert_event_bulk() and uninstall() stay the owner's.
grant select on pgque.delayed_events, pgque.config to pgque_admin;
grant select on pgque.alerts to pgque_reader, pgque_admin;
grant select on pgque.alert, pgque.maint_failure to pgque_admin;
grant execute on procedure pgque.ticker_loop(interval, interval) to pgque_admin;

-- change-data-capture triggers: CREATE TRIGGER needs EXECUTE on them (a
-- firing does not); the table's owner must also be a pgque_writer when
-- they fire (ADR 0015)
grant execute on function pgque.logutriga(), pgque.jsontriga(), pgque.sqltriga() to pgque_admin;

-- catalog tables are readable by admin; payloads only through the API
grant select on pgque.queue, pgque.consumer, pgque.subscription, pgque.tick,
                 pgque.retry_queue, pgque.delayed_event, pgque.dead_letter, pgque.event_template,
                 pgque.coop_member, pgque.coop_window, pgque.coop_fence, pgque.state_seal, pgque.slot_batch,
                 pgque.blocked_key
  to pgque_admin;
-- A fresh install only (not replayed on upgrade): say at CREATE EXTENSION
-- when the background workers will not serve this database (ADR 0026).
select pgque._warn_if_unserved();
-- pgque:replay-on-upgrade (idempotent: ALTER EXTENSION UPDATE runs this part again, ADR 0019)
-- Ownership: everything belongs to the role that ran CREATE EXTENSION.  For a
-- trusted install by a non-superuser the script runs with superuser rights
-- and would otherwise leave the objects owned by the bootstrap superuser; the
-- SECURITY DEFINER API should run with the installing role's rights, not more.
--
-- The owner is read from pg_extension, not spliced in by the extowner
-- substitution: that is a quoted identifier pasted into the script text,
-- and a role name holding the closing dollar quote of a literal around it
-- would end the literal and run the rest of its name as code with the
-- installing superuser's rights (PostgreSQL 15.4+ refuses such names,
-- CVE-2023-39417, so there the install failed instead).  Every name below
-- goes through format('%I').
do $owner$
declare
    r record;
    v_owner name;
begin
    select pg_catalog.pg_get_userbyid(e.extowner) into strict v_owner
      from pg_catalog.pg_extension e where e.extname = 'pgque_bgw';
    if current_user = v_owner then
        return;
    end if;
    execute pg_catalog.format('alter schema pgque owner to %I', v_owner);
    for r in select p.oid::regprocedure::text as obj, case p.prokind when 'p' then 'procedure' else 'function' end as kind
               from pg_catalog.pg_proc p where p.pronamespace = 'pgque'::regnamespace loop
        execute pg_catalog.format('alter %s %s owner to %I', r.kind, r.obj, v_owner);
    end loop;
    for r in select c.oid::regclass::text as obj, c.relkind
               from pg_catalog.pg_class c
              where c.relnamespace = 'pgque'::regnamespace and c.relkind in ('r', 'v', 'p')
                and not exists (select 1 from pg_catalog.pg_depend d
                                 where d.classid = 'pg_class'::regclass and d.objid = c.oid and d.deptype = 'a'
                                   and d.refclassid = 'pg_class'::regclass) loop
        execute pg_catalog.format('alter table %s owner to %I', r.obj, v_owner);
    end loop;
    for r in select c.oid::regclass::text as obj from pg_catalog.pg_class c
              where c.relnamespace = 'pgque'::regnamespace and c.relkind = 'S'
                and not exists (select 1 from pg_catalog.pg_depend d
                                 where d.classid = 'pg_class'::regclass and d.objid = c.oid and d.deptype in ('a', 'i')) loop
        execute pg_catalog.format('alter sequence %s owner to %I', r.obj, v_owner);
    end loop;
    for r in select t.oid::regtype::text as obj from pg_catalog.pg_type t
              where t.typnamespace = 'pgque'::regnamespace and t.typtype = 'c'
                and not exists (select 1 from pg_catalog.pg_class c where c.oid = t.typrelid and c.relkind <> 'c') loop
        execute pg_catalog.format('alter type %s owner to %I', r.obj, v_owner);
    end loop;
end
$owner$;
