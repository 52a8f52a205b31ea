-- pgque_bgw 0.1.0: assembled from sql/NN_*.sql by the Makefile; edit the parts, not this file.

\echo Use "CREATE EXTENSION pgque_bgw" to load this file. \quit
-- Roles: pgque_reader consumes, pgque_writer produces, pgque_admin runs the
-- queues and is a member of both.  Roles are cluster-wide and outlive the
-- extension; they are created only when missing.
do $roles$
declare
    r text;
begin
    foreach r in array array['pgque_reader', 'pgque_writer', 'pgque_admin'] loop
        if not exists (select 1 from pg_catalog.pg_roles where rolname = r) then
            begin
                execute format('create role %I nologin', r);
            exception when insufficient_privilege then
                raise exception 'role "%" does not exist and cannot be created by the installing role', r
                    using errcode = 'insufficient_privilege',
                          hint = 'Create the roles pgque_reader, pgque_writer and pgque_admin (NOLOGIN) first, or install as a role with CREATEROLE.';
            end;
        end if;
    end loop;
    foreach r in array array['pgque_reader', 'pgque_writer'] loop
        if not pg_catalog.pg_has_role('pgque_admin', r, 'member') then
            execute format('grant %I to pgque_admin', r);
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
    -- first subscribe_slot picks a count); 0: none; B: every child table has
    -- B bucket tables and keyed rows go to bucket hash(key) mod B.
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
    primary key (sub_queue, sub_consumer)
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

-- pg_dump keeps the queue state with the data (event tables are not
-- extension members, so they are dumped as ordinary tables).
select pg_catalog.pg_extension_config_dump('pgque.queue', '');
select pg_catalog.pg_extension_config_dump('pgque.queue_queue_id_seq', '');
select pg_catalog.pg_extension_config_dump('pgque.consumer', '');
select pg_catalog.pg_extension_config_dump('pgque.consumer_co_id_seq', '');
select pg_catalog.pg_extension_config_dump('pgque.subscription', '');
select pg_catalog.pg_extension_config_dump('pgque.subscription_sub_id_seq', '');
select pg_catalog.pg_extension_config_dump('pgque.tick', '');
select pg_catalog.pg_extension_config_dump('pgque.batch_id_seq', '');
select pg_catalog.pg_extension_config_dump('pgque.retry_queue', '');
select pg_catalog.pg_extension_config_dump('pgque.delayed_event', '');
select pg_catalog.pg_extension_config_dump('pgque.dead_letter', '');
select pg_catalog.pg_extension_config_dump('pgque.dead_letter_dl_id_seq', '');

-- Producers cache queue rows per backend (src/insert.c); every change of
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
-- that the NOTIFY channel pgque_<name> fits in 63.
create function pgque._queue(i_queue_name text)
returns pgque.queue language plpgsql stable as $$
declare
    q pgque.queue;
begin
    perform pgque._check_name('queue', i_queue_name, 57);
    select * into q from pgque.queue where queue_name = i_queue_name;
    if not found then
        raise exception 'queue "%" does not exist', i_queue_name
            using errcode = 'undefined_object';
    end if;
    return q;
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
        raise exception 'consumer "%" is not subscribed to queue "%"', i_consumer_name, i_queue_name
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

-- A positive interval, or a clear error.
create function pgque._check_interval(i_what text, i_value interval, i_allow_zero boolean default false)
returns void language plpgsql as $$
begin
    if i_value is null then
        raise exception '% must not be null', i_what
            using errcode = 'null_value_not_allowed';
    end if;
    if i_value < interval '0' or (i_value = interval '0' and not i_allow_zero) then
        raise exception '% must be %, got %', i_what,
              case when i_allow_zero then 'zero or positive' else 'positive' end, i_value
            using errcode = 'invalid_parameter_value';
    end if;
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
    select * into q from pgque.queue where queue_id = q.queue_id for update;
    select count(*) into nsubs from pgque.subscription where sub_queue = q.queue_id;
    if nsubs > 0 and not x_force then
        raise exception 'queue "%" still has % consumer(s)', x_queue_name, nsubs
            using errcode = 'dependent_objects_still_exist',
                  hint = 'Unsubscribe them first, or call pgque.drop_queue(queue_name, true).';
    end if;
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
    -- invalidation, src/insert.c); rows some of them append meanwhile to
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
-- current table (src/insert.c), so a window that ends before the last
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
    perform pgque._check_not_null('parameter name', x_param_name);
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
        raise exception 'insert into queue "%" is disabled', i_queue_name
            using errcode = 'object_not_in_prerequisite_state',
                  hint = 'pgque.set_queue_config(queue, ''disable_insert'', ''false'') re-enables it.';
    end if;
    return q;
end $$;

-- insert_event and send are the producer hot path, in C (src/insert.c):
-- one cached plan looks the queue up, one per queue inserts.
create function pgque.insert_event(queue_name text, ev_type text, ev_data text,
                                   ev_extra1 text, ev_extra2 text, ev_extra3 text, ev_extra4 text)
returns bigint language c security definer
set search_path = pgque, pg_catalog, pg_temp
as 'MODULE_PATHNAME', 'pgque_insert_event';

create function pgque.insert_event(queue_name text, ev_type text, ev_data text)
returns bigint language c security definer
set search_path = pgque, pg_catalog, pg_temp
as 'MODULE_PATHNAME', 'pgque_insert_event';

-- send: text payloads are stored byte for byte, jsonb ones canonicalised.
create function pgque.send(queue_name text, payload text)
returns bigint language c security definer
set search_path = pgque, pg_catalog, pg_temp
as 'MODULE_PATHNAME', 'pgque_send';

create function pgque.send(queue_name text, type_name text, payload text)
returns bigint language c security definer
set search_path = pgque, pg_catalog, pg_temp
as 'MODULE_PATHNAME', 'pgque_send';

-- keyed send: the partition key rides in ev_extra1 (NULL key: slot 0)
create function pgque.send(queue_name text, type_name text, payload text, partition_key text)
returns bigint language c security definer
set search_path = pgque, pg_catalog, pg_temp
as 'MODULE_PATHNAME', 'pgque_send';

create function pgque.send(queue_name text, payload jsonb)
returns bigint language sql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
    select pgque.send(queue_name, payload::text)
$$;

create function pgque.send(queue_name text, type_name text, payload jsonb)
returns bigint language sql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
    select pgque.send(queue_name, type_name, payload::text)
$$;

create function pgque.send(queue_name text, type_name text, payload jsonb, partition_key text)
returns bigint language sql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
    select pgque.send(queue_name, type_name, payload::text, partition_key)
$$;

-- send_batch: one INSERT ... SELECT per call, in C; ids in input order.
create function pgque._jsonb_texts(i_payloads jsonb[])
returns text[] language sql immutable as $$
    select case when i_payloads is null then null
                else coalesce((select pg_catalog.array_agg(p::text order by o)
                                 from pg_catalog.unnest(i_payloads) with ordinality u(p, o)), '{}') end
$$;

create function pgque.send_batch(queue_name text, type_name text, payloads text[])
returns bigint[] language c security definer
set search_path = pgque, pg_catalog, pg_temp
as 'MODULE_PATHNAME', 'pgque_send_batch';

create function pgque.send_batch(queue_name text, type_name text, payloads text[], partition_keys text[])
returns bigint[] language c security definer
set search_path = pgque, pg_catalog, pg_temp
as 'MODULE_PATHNAME', 'pgque_send_batch';

create function pgque.send_batch(queue_name text, payloads text[])
returns bigint[] language sql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
    select pgque.send_batch(queue_name, 'default', payloads)
$$;

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
    perform pgque._check_not_null('deliver_at', deliver_at);
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
returns int4 language plpgsql as $$
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

-- Tick a queue if it is due.  The check runs first without a lock, so a
-- queue with nothing to do costs the ticker no write; then again under the
-- queue row lock, which serialises tickers of one queue.
create function pgque._tick_if_due(q pgque.queue)
returns bigint language plpgsql as $$
begin
    if not pgque._tick_due(q) then
        return null;
    end if;
    select * into q from pgque.queue where queue_id = q.queue_id for update;
    if q.queue_ticker_paused or q.queue_external_ticker or not pgque._tick_due(q) then
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
    for q in select * from pgque.queue
              where not queue_ticker_paused and not queue_external_ticker
              order by queue_id loop
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
    perform pgque._check_not_null('timestamp', i_orig_timestamp);
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
-- (WARNING in the server log, NOTIFY pgque_alert with a JSON payload, a row
-- in pgque.alert) and clears once (LOG, NOTIFY, cleared_at); nothing is
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
begin
    -- partition slots: pending work nobody polls; leases left to expire
    return query
    with slots as (
        select q.queue_name as qn, pc.co_name as cn, k as sl, pc.n,
               s.sub_id, s.sub_active,
               l.owner, l.lease_until, l.last_receive, l.epoch
          from pgque.partition_consumer pc
          join pgque.queue q on q.queue_id = pc.queue_id
         cross join lateral pg_catalog.generate_series(0, pc.n - 1) k
          join pgque.consumer c on c.co_name = pgque._slot_name(pc.co_name, k, pc.n)
          join pgque.subscription s on s.sub_queue = q.queue_id and s.sub_consumer = c.co_id
          left join pgque._slot_leases() l on l.queue_id = q.queue_id and l.consumer = pc.co_name and l.slot = k
    ), polled as (
        select *, greatest(last_receive, sub_active) as last_poll,
               pgque._slot_pending(sub_id, n, sl) as pending
          from slots
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
     where nt.tick_time < now_ts - i_lag_alert_after
       and (pg_catalog.strpos(c.co_name, '#') = 0
            or pgque._slot_pending(s.sub_id, (select pc.n from pgque.partition_consumer pc
                                                where pc.queue_id = q.queue_id
                                                  and pc.co_name = pg_catalog.split_part(c.co_name, '#', 1)),
                                   pg_catalog.split_part(pg_catalog.split_part(c.co_name, '#', 2), '/', 1)::int4) > 0);

    -- rotation overdue because a subscription's cursor holds the oldest table
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
     where q.queue_switch_step2 is not null
       and q.queue_switch_time + q.queue_rotation_period + i_rotation_grace < now_ts
       and pg_catalog.pg_snapshot_xmin(t.tick_snapshot) <= q.queue_switch_step2;

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
       and (pgque._event_seq_pos(q) > lt.tick_event_seq or pgque._has_unticked_events(q, lt));
end $$;

create function pgque._alert_where(a pgque.alert)
returns text language sql immutable as $$
    select pg_catalog.format('queue "%s"', a.queue_name)
           || case when a.consumer is not null then pg_catalog.format(', consumer "%s"', a.consumer) else '' end
           || coalesce(', slot ' || a.slot, '')
$$;

-- Open what became true, clear what stopped being true.  -> (opened, cleared)
create function pgque._watchdog_pass(i_slot_unpolled_after interval, i_slot_stale_after interval,
                                     i_lag_alert_after interval, i_ticker_stalled_after interval,
                                     i_rotation_grace interval,
                                     out opened int4, out cleared int4)
language plpgsql as $$
declare
    conds       pgque.alert_condition[];
    c           pgque.alert_condition;
    a           pgque.alert;
    where_text  text;
begin
    opened := 0;
    cleared := 0;
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
                end;
        perform pg_catalog.pg_notify('pgque_alert', pg_catalog.jsonb_build_object(
            'event', 'opened', 'alert_id', a.alert_id, 'kind', a.kind, 'queue', a.queue_name,
            'consumer', a.consumer, 'slot', a.slot, 'opened_at', a.opened_at, 'details', a.details)::text);
        opened := opened + 1;
    end loop;

    for a in update pgque.alert x set cleared_at = now()
              where x.cleared_at is null
                and not exists (select 1 from pg_catalog.unnest(conds) n
                                 where n.kind = x.kind and n.subject = x.subject)
             returning x.* loop
        raise log 'pgque_bgw alert % cleared: %, open since %', a.kind, pgque._alert_where(a), a.opened_at;
        perform pg_catalog.pg_notify('pgque_alert', pg_catalog.jsonb_build_object(
            'event', 'cleared', 'alert_id', a.alert_id, 'kind', a.kind, 'queue', a.queue_name,
            'consumer', a.consumer, 'slot', a.slot, 'opened_at', a.opened_at,
            'cleared_at', a.cleared_at)::text);
        cleared := cleared + 1;
    end loop;
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
-- Partition keys (SPEC §3): events of one key are consumed in order by one
-- worker at a time, different keys in parallel, over N fixed slots.  Each
-- slot k of consumer C is its own subscription "C#k/N"; N is persisted per
-- (queue, consumer).  Slot ownership (leases with epoch fencing) lives in
-- shared memory (src/slots.c): claims and renewals write no row and no WAL.

create table pgque.partition_consumer (
    queue_id  int4 not null references pgque.queue (queue_id) on delete cascade,
    co_name   text not null,
    n         int4 not null check (n >= 1),
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
    select i_consumer || '#' || i_slot || '/' || i_n
$$;

-- A worker id: not NULL, not empty, at most 64 bytes.
create function pgque._check_worker(i_worker text)
returns void language plpgsql as $$
begin
    perform pgque._check_name('worker', i_worker, 64);
end $$;

-- The persisted N of a partitioned consumer, after checking the caller's N
-- (if given) and the slot number against it.  Wrong N is refused before any
-- lease check, so it is never silently misrouted.
create function pgque._partitioned(q pgque.queue, i_consumer text, i_n int4, i_slot int4)
returns int4 language plpgsql as $$
declare
    pn int4;
begin
    perform pgque._user_consumer_name(i_consumer);
    perform pgque._check_not_null('slot', i_slot);
    select pc.n into pn from pgque.partition_consumer pc
     where pc.queue_id = q.queue_id and pc.co_name = i_consumer;
    if not found then
        raise exception 'consumer "%" has no partition slots on queue "%"', i_consumer, q.queue_name
            using errcode = 'undefined_object',
                  hint = 'Subscribe its slots with pgque.subscribe_slot().';
    end if;
    if i_n is not null and i_n <> pn then
        raise exception 'consumer "%" of queue "%" is pinned to n = %, not %', i_consumer, q.queue_name, pn, i_n
            using errcode = 'invalid_parameter_value';
    end if;
    if i_slot < 0 or i_slot >= pn then
        raise exception 'slot % is out of range 0..% for consumer "%"', i_slot, pn - 1, i_consumer
            using errcode = 'invalid_parameter_value';
    end if;
    return pn;
end $$;

-- subscribe_slot(queue, consumer, slot, n): subscribe slot k of n.  The
-- first call pins n for (queue, consumer); another n is refused; repeating
-- a call is harmless.
create function pgque.subscribe_slot(queue_name text, consumer_name text, slot int4, n int4)
returns void language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    q   pgque.queue;
    pn  int4;
begin
    q := pgque._queue(queue_name);
    perform pgque._user_consumer_name(consumer_name);
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
    insert into pgque.partition_consumer as pc (queue_id, co_name, n)
    values (q.queue_id, consumer_name, n)
    on conflict (queue_id, co_name) do update set n = pc.n
    returning pc.n into pn;
    if pn <> n then
        raise exception 'consumer "%" of queue "%" is pinned to n = %, not %', consumer_name, queue_name, pn, n
            using errcode = 'invalid_parameter_value',
                  hint = 'Unsubscribe every slot first to choose another n.';
    end if;
    perform pgque._register(q, pgque._slot_name(consumer_name, slot, n), null);
    -- the queue's first partitioned consumer chooses its partition buckets
    -- (ADR 0013): a multiple of n, at least 32, so that n and its divisors
    -- read only their own buckets
    select * into q from pgque.queue where queue_id = q.queue_id for update;
    if q.queue_partition_buckets is null and n between 2 and 64 then
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
    if pgque._unregister(q, pgque._slot_name(consumer_name, slot, pn)) = 0 then
        raise exception 'slot % of consumer "%" is not subscribed to queue "%"', slot, consumer_name, queue_name
            using errcode = 'undefined_object';
    end if;
    if not exists (select 1 from pgque.subscription s join pgque.consumer c on c.co_id = s.sub_consumer
                    where s.sub_queue = q.queue_id
                      and c.co_name like pg_catalog.replace(pg_catalog.replace(consumer_name, '\', '\\'), '%', '\%') || '#%/' || pn) then
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
    perform pgque._partitioned(q, consumer_name, null, slot);
    perform pgque._check_worker(worker);
    perform pgque._check_not_null('ttl', ttl);
    if ttl < interval '1 second' then
        raise exception 'ttl must be at least 1 second, got %', ttl
            using errcode = 'invalid_parameter_value';
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
-- n and slot, check and renew the lease.  -> the slot's subscription name.
create function pgque._slot_guard(q pgque.queue, i_consumer text, i_slot int4, i_n int4,
                                  i_worker text, i_is_ack boolean)
returns text language plpgsql as $$
begin
    perform pgque._check_not_null('n', i_n);
    perform pgque._partitioned(q, i_consumer, i_n, i_slot);
    perform pgque._check_worker(i_worker);
    perform pgque._slot_check(q.queue_id, i_consumer, i_slot, i_worker, i_is_ack, q.queue_name);
    return pgque._slot_name(i_consumer, i_slot, i_n);
end $$;

-- receive_partitioned: only this slot's events, in ev_id order.
create function pgque.receive_partitioned(queue_name text, consumer_name text, slot int4, n int4,
                                          worker text, max_return int4 default 100)
returns setof pgque.message language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    q   pgque.queue;
    sn  text;
begin
    q := pgque._queue(queue_name);
    perform pgque._check_max_return(max_return);
    sn := pgque._slot_guard(q, consumer_name, slot, n, worker, false);
    return query select * from pgque._receive(queue_name, sn, max_return, n, slot);
end $$;

-- ack_partitioned -> 1 acked / 0 no open batch.  A fenced worker raises.
create function pgque.ack_partitioned(queue_name text, consumer_name text, slot int4, n int4, worker text)
returns int4 language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    q   pgque.queue;
    s   pgque.subscription;
begin
    q := pgque._queue(queue_name);
    s := pgque._subscription(queue_name, pgque._slot_guard(q, consumer_name, slot, n, worker, true));
    select * into s from pgque.subscription where sub_id = s.sub_id for update;
    if s.sub_batch is null then
        return 0;
    end if;
    return pgque._ack_batch(s);
end $$;

-- nack_partitioned: retry (on the same slot: same key) or dead letter.
create function pgque.nack_partitioned(queue_name text, consumer_name text, slot int4, n int4, worker text,
                                       msg pgque.message, retry_after interval default '60 seconds',
                                       reason text default null)
returns int4 language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    q   pgque.queue;
    s   pgque.subscription;
begin
    q := pgque._queue(queue_name);
    perform pgque._check_not_null('msg.msg_id', msg.msg_id);
    perform pgque._check_interval('retry_after', retry_after, true);
    s := pgque._subscription(queue_name, pgque._slot_guard(q, consumer_name, slot, n, worker, true));
    select * into s from pgque.subscription where sub_id = s.sub_id for update;
    if s.sub_batch is null then
        raise exception 'slot % of consumer "%" has no open batch', slot, consumer_name
            using errcode = 'object_not_in_prerequisite_state';
    end if;
    return pgque._nack_event(s, msg.msg_id, retry_after, reason, n, slot);
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
             order by t.tick_id desc limit 1) as snap2
      into r
      from pgque.subscription s
      join pgque.queue qq on qq.queue_id = s.sub_queue
      join pgque.tick t1 on t1.tick_queue = s.sub_queue and t1.tick_id = s.sub_last_tick
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

-- One row per slot of every partitioned consumer, leased or not.
create function pgque.get_partition_slot_info(
    out queue_name text, out consumer text, out slot int4, out n int4,
    out lease_owner text, out lease_until timestamptz, out epoch bigint,
    out last_tick bigint, out pending_events bigint,
    out last_receive_at timestamptz, out last_ack_at timestamptz, out alert text)
returns setof record language sql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
    select q.queue_name, pc.co_name, k, pc.n,
           case when l.lease_until > pg_catalog.clock_timestamp() then l.owner end,
           l.lease_until, coalesce(l.epoch, 0), s.sub_last_tick,
           pgque._slot_pending(s.sub_id, pc.n, k),
           l.last_receive, l.last_ack,
           (select pg_catalog.string_agg(a.kind, ',' order by a.kind) from pgque.alert a
             where a.cleared_at is null and a.queue_name = q.queue_name
               and a.consumer = pc.co_name and a.slot = k)
      from pgque.partition_consumer pc
      join pgque.queue q on q.queue_id = pc.queue_id
     cross join lateral pg_catalog.generate_series(0, pc.n - 1) k
      left join pgque.consumer c on c.co_name = pgque._slot_name(pc.co_name, k, pc.n)
      left join pgque.subscription s on s.sub_queue = q.queue_id and s.sub_consumer = c.co_id
      left join pgque._slot_leases() l on l.queue_id = q.queue_id and l.consumer = pc.co_name and l.slot = k
     order by q.queue_name, pc.co_name, k
$$;

create view pgque.partition_slot_status as
    select * from pgque.get_partition_slot_info();
-- Consumers and subscriptions: each subscription is an independent cursor
-- (sub_last_tick) over the same stored events, so every consumer sees every
-- event (fan-out) from one copy.

-- Subscribe (or, with i_tick_pos, reposition) a consumer.  New cursors start
-- at the latest tick.  -> 1 new / 0 existed (repositioning returns 1).
create function pgque._register(q pgque.queue, i_consumer_name text, i_tick_pos bigint)
returns int4 language plpgsql as $$
declare
    cid  int4;
    pos  bigint;
    n    int4;
begin
    insert into pgque.consumer (co_name) values (i_consumer_name) on conflict (co_name) do nothing;
    select co_id into cid from pgque.consumer where co_name = i_consumer_name;

    if i_tick_pos is not null then
        if not exists (select 1 from pgque.tick where tick_queue = q.queue_id and tick_id = i_tick_pos) then
            raise exception 'tick % does not exist in queue "%"', i_tick_pos, q.queue_name
                using errcode = 'invalid_parameter_value';
        end if;
        -- repositioning drops an open batch
        update pgque.subscription
           set sub_last_tick = i_tick_pos, sub_batch = null, sub_next_tick = null,
               sub_batch_pos = null, sub_batch_last = null, sub_active = now()
         where sub_queue = q.queue_id and sub_consumer = cid;
        if found then
            return 1;
        end if;
        pos := i_tick_pos;
    else
        select max(tick_id) into pos from pgque.tick where tick_queue = q.queue_id;
    end if;

    insert into pgque.subscription (sub_queue, sub_consumer, sub_last_tick)
    values (q.queue_id, cid, pos)
    on conflict (sub_queue, sub_consumer) do nothing;
    get diagnostics n = row_count;
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

-- Open a batch for a subscription, or return the one already open.  The row
-- lock on the subscription is the receive lock: concurrent callers queue and
-- get the same batch.  i_span_events (receive) lets one batch cover several
-- pending tick windows up to about that many events, so fast ticks do not
-- force tiny batches on a busy consumer.
-- The partition slot of a key for n slots (SPEC §3): a NULL key is slot 0.
create function pgque._slot_of(i_key text, i_n int4)
returns int4 language sql immutable parallel safe as $$
    select case when i_key is null then 0
                else ((pg_catalog.hashtextextended(i_key, 0) % i_n + i_n) % i_n)::int4 end
$$;

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
    select * into prev from pgque.tick where tick_queue = s.sub_queue and tick_id = s.sub_last_tick;

    if s.sub_batch is not null then
        select * into nxt from pgque.tick where tick_queue = s.sub_queue and tick_id = s.sub_next_tick;
        return (s.sub_batch, nxt.tick_id, prev.tick_id, nxt.tick_time, prev.tick_time,
                nxt.tick_event_seq, prev.tick_event_seq)::pgque.batch_info;
    end if;

    if i_min_count is not null or i_min_interval is not null then
        select * into nxt from pgque.tick
         where tick_queue = s.sub_queue and tick_id > s.sub_last_tick
           and (tick_event_seq >= prev.tick_event_seq + i_min_count
                or tick_time >= prev.tick_time + i_min_interval)
         order by tick_id limit 1;
    elsif i_span_events is not null then
        select t.* into nxt
          from (select * from pgque.tick
                 where tick_queue = s.sub_queue and tick_id > s.sub_last_tick
                 order by tick_id limit 1000) t
         where t.tick_event_seq <= prev.tick_event_seq + i_span_events
         order by t.tick_id desc limit 1;
    end if;
    if nxt.tick_id is null and i_min_count is null and i_min_interval is null then
        select * into nxt from pgque.tick
         where tick_queue = s.sub_queue and tick_id > s.sub_last_tick
         order by tick_id limit 1;
    end if;

    if nxt.tick_id is null or (i_min_lag is not null and nxt.tick_time > now() - i_min_lag) then
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
        raise exception 'batch % is not open', i_batch_id
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
    perform pgque._check_not_null('batch_id', x_batch_id);
    return query
        select e.ev_id, e.ev_time, e.ev_txid::text::bigint, e.ev_retry, e.ev_type, e.ev_data,
               e.ev_extra1, e.ev_extra2, e.ev_extra3, e.ev_extra4
          from pgque._batch_rows(x_batch_id, null, null) e;
end $$;

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
    if pgque._finish_batch(x_batch_id) = 0 then
        raise warning 'finish_batch: batch % is not open', x_batch_id;
        return 0;
    end if;
    return 1;
end $$;

-- The open batch's subscription, locked (the receive lock); all NULL if the
-- batch is unknown.
create function pgque._open_batch(i_batch_id bigint)
returns pgque.subscription language plpgsql as $$
declare
    s pgque.subscription;
begin
    select * into s from pgque.subscription where sub_batch = i_batch_id for update;
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
        raise exception 'batch % is not open', i_batch_id
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
-- windows are finished here and the next one is tried.
create function pgque._receive(i_queue_name text, i_sub_name text, i_max_return int4,
                               i_n int4, i_slot int4)
returns setof pgque.message language plpgsql as $$
declare
    b        pgque.batch_info;
    n        bigint;
    tries    int4 := 0;
begin
    loop
        -- a slot sees about 1/n of a window: span windows for n times more
        b := pgque._next_batch(i_queue_name, i_sub_name, null, null, null,
                               (least(i_max_return::int8 * coalesce(i_n, 1), 1000000000))::int4);
        if b.batch_id is null then
            return;
        end if;
        -- One statement, no per-row PL/pgSQL: the part's rows, and (when the
        -- window holds more than max_return) where the part ends, so that
        -- ack() keeps the rest open.
        return query
            with part as materialized (
                -- the window read returns its rows in ev_id order
                select e.*
                  from pgque._batch_source(b.batch_id, i_n, i_slot) w,
                       pgque._window_rows(w.source, w.lo_xmax, w.hi_xmax, w.lo_xip, w.hi, w.sub_id,
                                          w.pos, null, i_max_return + 1, i_n, i_slot)
                       with ordinality as e(ev_id, ev_time, ev_txid, ev_owner, ev_retry, ev_type, ev_data,
                                            ev_extra1, ev_extra2, ev_extra3, ev_extra4, rn)),
            m as (
                select case when pg_catalog.max(rn) > i_max_return
                            then pg_catalog.max(ev_id) filter (where rn = i_max_return) end as last
                  from part),
            mark as (
                update pgque.subscription s
                   set sub_batch_last = m.last
                  from m
                 where s.sub_batch = b.batch_id and s.sub_batch_last is distinct from m.last)
            select p.ev_id, b.batch_id, p.ev_type, p.ev_data, p.ev_retry, p.ev_time,
                   p.ev_extra1, p.ev_extra2, p.ev_extra3, p.ev_extra4
              from part p
             where p.rn <= i_max_return
             order by p.rn;
        get diagnostics n = row_count;
        if n > 0 then
            return;
        end if;
        perform pgque._finish_batch(b.batch_id);
        tries := tries + 1;
        exit when tries >= 10;
    end loop;
end $$;

create function pgque._check_max_return(i_max_return int4)
returns void language plpgsql as $$
begin
    perform pgque._check_not_null('max_return', i_max_return);
    if i_max_return < 1 then
        raise exception 'max_return must be positive, got %', i_max_return
            using errcode = 'invalid_parameter_value';
    end if;
end $$;

create function pgque.receive(queue_name text, consumer_name text, max_return int4 default 100)
returns setof pgque.message language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
begin
    perform pgque._check_max_return(max_return);
    perform pgque._check_name('consumer', consumer_name, 64);
    perform pgque._refuse_slot_consumer(consumer_name, 'receive');
    return query select * from pgque._receive(queue_name, consumer_name, max_return, null, null);
end $$;

-- Plain ack/nack refuse batches of slot consumers.
create function pgque._refuse_slot_batch(s pgque.subscription, i_func text)
returns void language plpgsql as $$
begin
    perform pgque._refuse_slot_consumer(
        (select co_name from pgque.consumer where co_id = s.sub_consumer), i_func);
end $$;

-- ack(batch_id) -> 1 done / 0 unknown or already acked.
create function pgque.ack(batch_id bigint)
returns int4 language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    s pgque.subscription;
begin
    perform pgque._check_not_null('batch_id', batch_id);
    s := pgque._open_batch(batch_id);
    if s.sub_id is null then
        return 0;
    end if;
    perform pgque._refuse_slot_batch(s, 'ack');
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
        raise exception 'event % is not part of batch %', i_ev_id, s.sub_batch
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
    return pgque._nack_event(s, msg.msg_id, retry_after, reason);
end $$;
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

create function pgque.event_retry(x_batch_id bigint, x_event_id bigint, x_retry_time timestamptz)
returns int4 language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    s  pgque.subscription;
    e  pgque.event_template;
begin
    s := pgque._open_batch_or_raise(x_batch_id);
    perform pgque._check_not_null('event_id', x_event_id);
    perform pgque._check_not_null('retry_time', x_retry_time);
    select * into e from pgque._batch_rows(x_batch_id, 1, x_event_id);
    if not found then
        raise exception 'event % is not part of batch %', x_event_id, x_batch_id
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
create function pgque.dlq_replay(dead_letter_id bigint)
returns bigint language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    d    pgque.dead_letter;
    q    pgque.queue;
    sid  int4;
begin
    perform pgque._check_not_null('dead_letter_id', dead_letter_id);
    select * into d from pgque.dead_letter where dl_id = dead_letter_id for update;
    if not found then
        raise exception 'dead letter % does not exist', dead_letter_id
            using errcode = 'undefined_object';
    end if;
    select * into q from pgque.queue where queue_id = d.dl_queue_id;
    select sub_id into sid from pgque.subscription
     where sub_queue = d.dl_queue_id and sub_consumer = d.dl_consumer_id;
    if sid is null then
        raise exception 'the consumer of dead letter % is no longer subscribed to queue "%"', dead_letter_id, q.queue_name
            using errcode = 'object_not_in_prerequisite_state';
    end if;
    perform pgque._insert_event(q.queue_name, d.ev_id, d.ev_time, sid, null, d.ev_type, d.ev_data,
                                d.ev_extra1, d.ev_extra2, d.ev_extra3, d.ev_extra4, false);
    delete from pgque.dead_letter where dl_id = dead_letter_id;
    return d.ev_id;
end $$;

-- dlq_replay_all(queue_name) -> (replayed, failed, first_error).
create function pgque.dlq_replay_all(queue_name text,
                                     out replayed bigint, out failed bigint, out first_error text)
language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    q pgque.queue;
begin
    q := pgque._queue(queue_name);
    with d as (delete from pgque.dead_letter dl using pgque.subscription s
                where dl.dl_queue_id = q.queue_id and s.sub_queue = dl.dl_queue_id
                  and s.sub_consumer = dl.dl_consumer_id
            returning dl.*, s.sub_id)
    select count(pgque._insert_event(q.queue_name, d2.ev_id, d2.ev_time, d2.sub_id, null, d2.ev_type,
                                     d2.ev_data, d2.ev_extra1, d2.ev_extra2, d2.ev_extra3,
                                     d2.ev_extra4, false))
      into replayed
      from (select * from d order by d.ev_id) d2;
    select count(*) into failed from pgque.dead_letter where dl_queue_id = q.queue_id;
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
    if q.queue_switch_step2 is null
       or q.queue_switch_time + q.queue_rotation_period > now() then
        return 0;
    end if;
    -- everything written before the previous switch must be consumed by all
    select min(pg_catalog.pg_snapshot_xmin(t.tick_snapshot)) into lowest
      from pgque.subscription s
      join pgque.tick t on t.tick_queue = s.sub_queue and t.tick_id = s.sub_last_tick
     where s.sub_queue = q.queue_id;
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
    execute 'truncate ' || tbl;
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

-- Move every due retry and delayed event into its queue's current table.
-- Drains all that is due (not 10 rows per call).  -> events moved.
create function pgque.maint_retry_events()
returns int4 language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    q      pgque.queue;
    n      int4 := 0;
    moved  int4;
begin
    for q in select * from pgque.queue
              where queue_id in (select ev_queue from pgque.retry_queue where ev_retry_after <= now()
                                 union
                                 select de_queue from pgque.delayed_event where de_deliver_at <= now())
              order by queue_id loop
        -- through the producers' insert (C): it routes rows to partition buckets
        with m as (delete from pgque.retry_queue where ev_queue = q.queue_id and ev_retry_after <= now()
                   returning *)
        select count(pgque._insert_event(q.queue_name, m2.ev_id, m2.ev_time, m2.ev_owner, m2.ev_retry,
                                         m2.ev_type, m2.ev_data, m2.ev_extra1, m2.ev_extra2,
                                         m2.ev_extra3, m2.ev_extra4, false))
          into moved
          from (select * from m order by m.ev_id) m2;
        n := n + moved;
        with m as (delete from pgque.delayed_event where de_queue = q.queue_id and de_deliver_at <= now()
                   returning *)
        select count(pgque._insert_event(q.queue_name, m2.ev_id, m2.ev_time, null, null,
                                         m2.ev_type, m2.ev_data, m2.ev_extra1, m2.ev_extra2,
                                         m2.ev_extra3, m2.ev_extra4, false))
          into moved
          from (select * from m order by m.ev_id) m2;
        n := n + moved;
    end loop;
    return n;
end $$;

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
       and t.tick_id < coalesce((select min(s.sub_last_tick) from pgque.subscription s where s.sub_queue = q.queue_id),
                                (select max(x.tick_id) from pgque.tick x where x.tick_queue = q.queue_id));
    get diagnostics n = row_count;
    return n;
end $$;

-- maint(): every maintenance step, for every queue (rotation, retries and
-- delayed events, tick history, expired idempotency keys).  Rotation step 2 of a
-- switch made by an earlier transaction runs first, then step 1 where due,
-- so repeated maint() calls (one transaction each) keep rotating.
-- -> number of actions taken.
create function pgque.maint()
returns int4 language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    n    int4;
    qn   text;
begin
    n := pgque.maint_rotate_tables_step2();
    for qn in select queue_name from pgque.queue order by queue_id loop
        n := n + pgque.maint_rotate_tables_step1(qn);
    end loop;
    n := n + pgque.maint_retry_events();
    n := n + pgque.maint_tick_cleanup();
    n := n + pgque.maint_idem();
    return n;
end $$;
-- Observing: version, status and the PgQ info functions.

create function pgque.version()
returns text language sql immutable security definer
set search_path = pgque, pg_catalog, pg_temp as $$
    select '0.1.0'::text
$$;

create function pgque._preloaded()
returns boolean language c strict
as 'MODULE_PATHNAME', 'pgque_preloaded_sql';

-- What the shared-memory state table says about this database's workers.
create function pgque._worker_status(out component text, out status text, out detail text)
returns setof record language c strict
as 'MODULE_PATHNAME', 'pgque_worker_status';

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

-- status() -> (component, status, detail): versions, whether the library
-- is preloaded, each worker (state, pid, last tick, last maintenance, last
-- error), the scheduler in effect, counts.
create function pgque.status(out component text, out status text, out detail text)
returns setof record language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    workers_on boolean;
    jobs text;
begin
    component := 'postgresql'; status := 'ok'; detail := pg_catalog.version();
    return next;
    component := 'pgque_bgw'; status := 'ok'; detail := 'version ' || pgque.version();
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

    workers_on := pgque._preloaded() and pg_catalog.current_setting('pgque_bgw.enabled', true) = 'on';
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
    component := 'queues'; status := 'ok';
    detail := (select count(*) from pgque.queue)::text || ' queue(s)';
    return next;
    component := 'consumers'; status := 'ok';
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
     order by q.queue_name, c.co_name
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
    perform pgque._subscription(i_queue_name, i_consumer_name);
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
        raise exception 'batch % is not open', x_batch_id
            using errcode = 'undefined_object';
    end if;
end $$;
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
    -- alerts
    select 'pgque_alerts_open', jsonb_build_object('kind', k.kind),
           (select count(*) from pgque.alert a where a.cleared_at is null and a.kind = k.kind)::float8
      from (values ('slot_unpolled'), ('slot_stale'), ('consumer_lagging'), ('rotation_pinned'), ('ticker_stalled')) k(kind)
    union all
    -- workers
    select 'pgque_worker_running', jsonb_build_object('worker', w.component),
           (w.status = 'running')::int::float8
      from pgque._worker_status() w where w.component in ('ticker', 'maintenance', 'watchdog')
$$;
-- Running without the background workers: ticker_loop() for sub-second
-- ticking from a scheduler, and start()/stop() to schedule it with pg_cron.

-- ticker_loop(duration, period): tick every period for duration, committing
-- after each pass (a procedure: CALL it, e.g. from a pg_cron job every
-- minute).  It runs as the caller; every name in it is qualified.
create procedure pgque.ticker_loop(i_duration interval default '59 seconds',
                                   i_period interval default '100 milliseconds')
language plpgsql as $$
declare
    stop_at timestamptz;
begin
    perform pgque._check_interval('duration', i_duration);
    perform pgque._check_interval('period', i_period);
    if i_period > i_duration then
        raise exception 'period (%) must not exceed duration (%)', i_period, i_duration
            using errcode = 'invalid_parameter_value';
    end if;
    stop_at := pg_catalog.clock_timestamp() + i_duration;
    loop
        perform pgque.ticker();
        commit;
        exit when pg_catalog.clock_timestamp() + i_period > stop_at;
        perform pg_catalog.pg_sleep(extract(epoch from i_period));
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
-- Start this database's workers as soon as CREATE EXTENSION commits.
create function pgque._wake_launcher_at_commit()
returns void language c
as 'MODULE_PATHNAME', 'pgque_wake_launcher_at_commit';
select pgque._wake_launcher_at_commit();

-- Leases left in shared memory by an earlier install in this database are
-- forgotten (DROP EXTENSION also clears them at commit).
select pgque._slot_forget(null, null);
-- Privileges: least privilege for the three roles, nothing for PUBLIC.
-- Internal functions (names starting with "_") are granted to nobody: they
-- run only inside the SECURITY DEFINER API, as the owner.

revoke all on all functions in schema pgque from public;
revoke all on all procedures in schema pgque from public;
revoke all on all tables in schema pgque from public;
revoke all on all sequences in schema pgque from public;
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
    pgque.get_partition_slot_info(), pgque.metrics()
  to pgque_reader;
grant select on pgque.partition_slot_status to pgque_reader, pgque_admin;

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
    pgque.start(), pgque.stop(), pgque.maint_alerts(interval)
  to pgque_admin;
grant select on pgque.alerts to pgque_reader, pgque_admin;
grant select on pgque.alert to pgque_admin;
grant execute on procedure pgque.ticker_loop(interval, interval) to pgque_admin;

-- catalog tables are readable by admin; payloads only through the API
grant select on pgque.queue, pgque.consumer, pgque.subscription, pgque.tick,
                 pgque.retry_queue, pgque.delayed_event, pgque.dead_letter, pgque.event_template
  to pgque_admin;
-- Ownership: everything belongs to the role that ran CREATE EXTENSION.  For a
-- trusted install by a non-superuser the script runs with superuser rights
-- and would otherwise leave the objects owned by the bootstrap superuser; the
-- SECURITY DEFINER API should run with the installing role's rights, not more.
do $owner$
declare
    r record;
begin
    if current_user = pg_catalog.quote_ident($q$@extowner@$q$)
       or current_user = $q$@extowner@$q$ then
        return;
    end if;
    execute pg_catalog.format('alter schema pgque owner to %s', $q$@extowner@$q$);
    for r in select p.oid::regprocedure::text as obj, case p.prokind when 'p' then 'procedure' else 'function' end as kind
               from pg_catalog.pg_proc p where p.pronamespace = 'pgque'::regnamespace loop
        execute pg_catalog.format('alter %s %s owner to %s', r.kind, r.obj, $q$@extowner@$q$);
    end loop;
    for r in select c.oid::regclass::text as obj, c.relkind
               from pg_catalog.pg_class c
              where c.relnamespace = 'pgque'::regnamespace and c.relkind in ('r', 'v', 'p')
                and not exists (select 1 from pg_catalog.pg_depend d
                                 where d.classid = 'pg_class'::regclass and d.objid = c.oid and d.deptype = 'a'
                                   and d.refclassid = 'pg_class'::regclass) loop
        execute pg_catalog.format('alter table %s owner to %s', r.obj, $q$@extowner@$q$);
    end loop;
    for r in select c.oid::regclass::text as obj from pg_catalog.pg_class c
              where c.relnamespace = 'pgque'::regnamespace and c.relkind = 'S'
                and not exists (select 1 from pg_catalog.pg_depend d
                                 where d.classid = 'pg_class'::regclass and d.objid = c.oid and d.deptype in ('a', 'i')) loop
        execute pg_catalog.format('alter sequence %s owner to %s', r.obj, $q$@extowner@$q$);
    end loop;
    for r in select t.oid::regtype::text as obj from pg_catalog.pg_type t
              where t.typnamespace = 'pgque'::regnamespace and t.typtype = 'c'
                and not exists (select 1 from pg_catalog.pg_class c where c.oid = t.typrelid and c.relkind <> 'c') loop
        execute pg_catalog.format('alter type %s owner to %s', r.obj, $q$@extowner@$q$);
    end loop;
end
$owner$;
