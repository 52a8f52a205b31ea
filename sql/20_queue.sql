-- Queue lifecycle: create, drop, configure.

-- The storage of a queue's event tables (children and buckets): append-only
-- and reclaimed by TRUNCATE, so never vacuumed and packed full.  The one
-- source of create_queue, the buckets and tune_storage.
create function pgque._event_table_options()
returns text language sql immutable as $$
    select 'fillfactor = 100, autovacuum_enabled = off'::text
$$;

-- A queue's event tables: the parent, its child tables and their
-- partition buckets (i_children: the children and buckets only), by name.
-- The one source of the rights, the storage options, the persistence
-- (unlogged queues) and the bytes of a queue's tables.
create function pgque._queue_event_tables(i_queue_id int4, i_children boolean default false)
returns setof regclass language sql stable as $$
    select c.oid::pg_catalog.regclass from pg_catalog.pg_class c
     where c.relnamespace operator(pg_catalog.=) 'pgque'::pg_catalog.regnamespace
       and c.relkind operator(pg_catalog.=) 'r'
       and c.relname operator(pg_catalog.~) ('^event_' operator(pg_catalog.||) i_queue_id
                                             operator(pg_catalog.||)
                                             case when i_children then '_[0-9]+(_b[0-9]+)?$'
                                                  else '(_[0-9]+(_b[0-9]+)?)?$' end)
     order by c.relname
$$;

-- The rights on a queue's event tables (parent, children, buckets):
-- admins read them; payloads are nobody else's (docs/security.md).  The
-- one source of create_queue, the buckets and grant_perms.
create function pgque._event_table_grants(i_queue_id int4)
returns void language plpgsql as $$
declare
    r regclass;
begin
    for r in select t from pgque._queue_event_tables(i_queue_id) t loop
        execute pg_catalog.format('grant select on %s to pgque_admin', r);
    end loop;
end $$;

-- create_queue(queue_name) -> 1 created, 0 already existed.
create function pgque.create_queue(i_queue_name text)
returns int4 language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    qid   int4;
    pfx   text;
    i     int4;
begin
    perform pgque._check_name('queue', i_queue_name, @PGQUE_QUEUE_NAME_MAX@);
    if exists (select 1 from pgque.queue where queue_name = i_queue_name) then
        return 0;
    end if;
    perform pgque._check_new_name('queue', i_queue_name);

    -- Creators of the same name meet on the unique queue name (ADR 0040):
    -- the second waits for the first to end, then inserts nothing and
    -- returns 0 (or creates it, if the first rolled back).  No lock any
    -- role could take in advance.  (Such a race costs a queue id.)
    qid := pg_catalog.nextval('pgque.queue_queue_id_seq');
    pfx := pgque._event_table(qid, null, null);
    insert into pgque.queue (queue_id, queue_name, queue_data_pfx, queue_event_seq, queue_tick_seq)
    values (qid, i_queue_name, 'pgque.' || pfx,
            'pgque.' || pgque._event_seq(qid, 'id'), 'pgque.' || pgque._event_seq(qid, 'tick'))
    on conflict (queue_name) do nothing;
    if not found then
        return 0;
    end if;
    -- the state is whole from the first queue on (ADR 0022)
    insert into pgque.state_seal default values on conflict do nothing;

    execute pg_catalog.format('create sequence pgque.%I', pgque._event_seq(qid, 'id'));
    execute pg_catalog.format('create sequence pgque.%I', pgque._event_seq(qid, 'tick'));
    execute pg_catalog.format('create table pgque.%I () inherits (pgque.event_template)', pfx);
    for i in 0 .. 2 loop
        -- Children are append-only and reclaimed by TRUNCATE: never vacuumed,
        -- packed full.  The ev_txid index serves the snapshot-window scan.
        execute pg_catalog.format(
            'create table pgque.%I () inherits (pgque.%I) with (%s)',
            pgque._event_table(qid, i, null), pfx, pgque._event_table_options());
        execute pg_catalog.format('alter table pgque.%I alter column ev_id set default pg_catalog.nextval(%L)',
            pgque._event_table(qid, i, null), 'pgque.' || pgque._event_seq(qid, 'id'));
        execute pg_catalog.format('create index %I on pgque.%I (ev_txid)', pgque._event_table(qid, i, null) || '_txid_idx',
            pgque._event_table(qid, i, null));
    end loop;
    perform pgque._event_table_grants(qid);
    -- the sequences go with the queue's parent table (drop_queue, and
    -- DROP EXTENSION ... CASCADE)
    execute pg_catalog.format('alter sequence pgque.%I owned by pgque.%I.ev_id', pgque._event_seq(qid, 'id'), pfx);
    execute pg_catalog.format('alter sequence pgque.%I owned by pgque.%I.ev_id', pgque._event_seq(qid, 'tick'), pfx);

    -- The first tick: consumers subscribe at the latest tick.  setval, not
    -- nextval: under wal_level = minimal a sequence created in this
    -- transaction is not WAL-logged, and a nextval here would leave a
    -- cached-ahead count in the page image written at commit, letting the
    -- sequence repeat values after a crash.
    perform pg_catalog.setval(('pgque.' || pgque._event_seq(qid, 'tick'))::regclass, 1);
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
    gone   regrole[];
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
    -- the partitioned consumers' users, released with the rest at the end
    gone := array(select u.role from pgque.partition_consumer pc, pg_catalog.unnest(pc.users || pc.owner) u(role)
                   where pc.queue_id = q.queue_id);
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
            execute pg_catalog.format('drop table pgque.%I', pgque._event_table(q.queue_id, i, b));
        end loop;
        execute pg_catalog.format('drop table pgque.%I', pgque._event_table(q.queue_id, i, null));
    end loop;
    execute pg_catalog.format('drop table pgque.%I', pgque._event_table(q.queue_id, null, null));   -- and its sequences
    if pg_catalog.to_regclass(pgque._space_reserve_name(q)) is not null then
        execute 'drop table ' || pgque._space_reserve_name(q);
    end if;
    delete from pgque.queue where queue_id = q.queue_id;
    perform pgque._anchor_release(q.queue_senders || q.queue_subscribers || gone);
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
            tbl := pgque._event_table(q.queue_id, t, b);
            execute pg_catalog.format(
                'create table pgque.%I () inherits (pgque.%I) with (%s)',
                tbl, pgque._event_table(q.queue_id, t, null), pgque._event_table_options());
            execute pg_catalog.format('create index %I on pgque.%I (ev_txid)', tbl || '_txid_idx', tbl);
        end loop;
    end loop;
    perform pgque._event_table_grants(q.queue_id);
    -- an unlogged queue's buckets are unlogged too (ADR 0068)
    perform pgque._event_tables_persistence(q);
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

-- The smallest xid whose rows can belong to the window between snapshots
-- i_lo and i_hi (ADR 0106): the old tick's xmax, or an xid in progress at
-- the old tick that the new one sees finished.  One still running at the
-- new tick adds no row (the window's predicate wants rows the new tick
-- sees), so an old transaction that runs across many ticks no longer makes
-- every window read the tables of before a switch (_event_tables,
-- _event_source), only the window it ends in.  i_hi NULL: the old tick's
-- xmin.  In C (src/window.c): a SQL body with a subquery is not inlined
-- and is planned again in every transaction (as ADR 0088 found).
create function pgque._window_xmin(i_lo pg_catalog.pg_snapshot, i_hi pg_catalog.pg_snapshot)
returns xid8 language c immutable
as 'MODULE_PATHNAME', 'pgque_window_xmin_sql';

-- The child tables (numbers) that can hold events of the window between
-- snapshots i_lo and i_hi (see _event_source below, and batch_event_tables).
-- PL/pgSQL: a SQL function with a subquery is not inlined, and every
-- transaction that located a window (each slot receive) parsed and planned
-- its body again, where PL/pgSQL keeps the plan for the session (ADR 0088).
create function pgque._event_tables(q pgque.queue, i_lo pg_catalog.pg_snapshot, i_hi pg_catalog.pg_snapshot)
returns int4[] language plpgsql immutable as $$
begin
    return case
        -- a window reaching back before the previous switch, only ever read
        -- by a cursor a replay moved there (ADR 0067): the oldest table too,
        -- which retention or the cursor itself kept
        when q.queue_prev_step2 is not null and pgque._window_xmin(i_lo, i_hi) < q.queue_prev_step2
            then (select pg_catalog.array_agg(x) from pg_catalog.generate_series(0, q.queue_ntables - 1) x)
        when pg_catalog.pg_snapshot_xmax(i_hi) < q.queue_switch_step1
            then array[(q.queue_cur_table + q.queue_ntables - 1) % q.queue_ntables]
        when q.queue_switch_step2 is not null and pgque._window_xmin(i_lo, i_hi) > q.queue_switch_step2
            then array[q.queue_cur_table]
        else array[(q.queue_cur_table + q.queue_ntables - 1) % q.queue_ntables, q.queue_cur_table]
    end;
end $$;

-- Whether a reader of n slots reads its own buckets alone (ADR 0013,
-- 0088): the queue has buckets and n divides their number, so every row
-- of a slot's bucket is the slot's.  n NULL: a plain reader (every bucket).
-- The one rule: _event_source and _slot_pending_all's capped reads.
create function pgque._slot_own_buckets(i_buckets int4, i_n int4)
returns boolean language sql immutable as $$
    select coalesce(i_buckets, 0) > 0
       and (i_n is null or coalesce(i_buckets, 0) % i_n = 0)
$$;

-- The writer of a source's text (src/source.c, ADR 0133): one relation of
-- schema pgque, whole or "only" its own rows, with SQL's filter (or NULL),
-- and the parts joined as one FROM item.  The form is C's, where the
-- window reads parse it back (window_direct.c) and count its relations
-- (receive.c); which relations a window reads is _event_source's.
create function pgque._source_part(i_rel text, i_only boolean, i_filter text)
returns text language c immutable parallel safe as 'MODULE_PATHNAME', 'pgque_source_part_sql';

create function pgque._source_join(i_parts text[])
returns text language c immutable strict parallel safe as 'MODULE_PATHNAME', 'pgque_source_join_sql';

-- The relations that can hold events of the window between snapshots i_lo
-- and i_hi, as a FROM item; with i_n, only the rows of slot i_slot: its
-- buckets where the buckets allow it (n divides their number: every row
-- of such a bucket is the slot's), the other relations filtered by the
-- slot's rule (_slot_of) here, so that a reader of a slot's own buckets
-- tests no row (ADR 0088; a caller that filters again is still exact).
-- Child tables: rotation guarantees a window lies after the
-- previous switch, and producers take their xid before they look up the
-- current table (src/queue_cache.c), so a window that ends before the last
-- switch began is all in the previous table, one that starts after the
-- switch's step 2 all in the current one; one that starts before the
-- previous switch's step 2 (a replay, ADR 0067) in any of them.
create function pgque._event_source(q pgque.queue, i_lo pg_catalog.pg_snapshot, i_hi pg_catalog.pg_snapshot,
                                    i_n int4, i_slot int4)
returns text language plpgsql stable as $$
declare
    nb     int4 := coalesce(q.queue_partition_buckets, 0);
    tabs   int4[] := pgque._event_tables(q, i_lo, i_hi);
    parts  text[];
    -- a relation holding other slots' rows too: keep the slot's
    slot_filter text := case when i_n is not null
                             then pg_catalog.format(' where pgque._slot_of(ev_extra1, %s) operator(pg_catalog.=) %s',
                                                    i_n, coalesce(i_slot, -1))
                        end;
begin
    -- one statement builds it (the ticker and every receive call this)
    select pg_catalog.array_agg(src order by t, o) into parts
      from (
        -- no buckets, or none that match n: the whole table, filtered
        select t, 0 as o, pgque._source_part(pgque._event_table(q.queue_id, t, null), false, slot_filter) as src
          from pg_catalog.unnest(tabs) t
         where not pgque._slot_own_buckets(nb, i_n)
        union all
        -- rows written to the child table itself before its buckets' step 2
        select t, 0, pgque._source_part(pgque._event_table(q.queue_id, t, null), true, slot_filter)
          from pg_catalog.unnest(tabs) t
         where pgque._slot_own_buckets(nb, i_n)
           and (q.queue_buckets_step2 is null or pgque._window_xmin(i_lo, i_hi) <= q.queue_buckets_step2)
        union all
        -- this slot's buckets (all of them for plain readers)
        select t, 1 + b, pgque._source_part(pgque._event_table(q.queue_id, t, b), false, null)
          from pg_catalog.unnest(tabs) t,
               pg_catalog.generate_series(coalesce(i_slot, 0), nb - 1, coalesce(i_n, 1)) b
         where pgque._slot_own_buckets(nb, i_n)) s;
    -- the form is C's (src/source.h), beside its readers
    return pgque._source_join(parts);
end $$;

-- Per-queue rights (ADR 0047).  A queue starts with "send" granted to
-- pgque_writer and "subscribe" (which covers receiving) to pgque_reader, so
-- that an application alone in its database works as in 0.2.0; PUBLIC
-- never holds either.  The pgque roles are cluster-wide: to keep another
-- application's readers and writers out, grant the queue to the
-- application's own roles and revoke it from pgque_reader / pgque_writer.
-- Admins (pgque_admin, the extension's owner) hold both on every queue.
create function pgque._queue_grantee_check(i_queue_name text, i_role regrole, i_right text)
returns pgque.queue language plpgsql as $$
declare
    q pgque.queue;
begin
    perform pgque._check_not_null('role', i_role);
    perform pgque._check_not_null('right', i_right);
    if i_right not in ('send', 'subscribe') then
        raise exception 'unknown queue right: "%"', pg_catalog.left(i_right, 32)
            using errcode = 'invalid_parameter_value',
                  hint = 'The rights are ''send'' and ''subscribe''.';
    end if;
    if not exists (select from pg_catalog.pg_roles r where r.oid = i_role) then
        raise exception 'role with OID % does not exist', i_role::oid
            using errcode = 'undefined_object',
                  hint = 'PUBLIC holds no right on a queue and cannot be given one.';
    end if;
    select * into q from pgque.queue where queue_name = i_queue_name for update;
    if not found then
        q := pgque._queue(i_queue_name);    -- raises the usual error
    end if;
    return q;
end $$;

-- grant_queue(queue_name, role, 'send' | 'subscribe') -> 1 granted, 0 held already.
create function pgque.grant_queue(i_queue_name text, i_role regrole, i_right text)
returns int4 language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    q     pgque.queue;
    cur   regrole[];
begin
    q := pgque._queue_grantee_check(i_queue_name, i_role, i_right);
    cur := case i_right when 'send' then q.queue_senders else q.queue_subscribers end;
    if i_role = any (cur) then
        return 0;
    end if;
    if pg_catalog.cardinality(cur) >= @PGQUE_QUEUE_GRANTEES_MAX@ then
        raise exception 'queue "%" has % roles with right "%" already', i_queue_name, pg_catalog.cardinality(cur), i_right
            using errcode = 'program_limit_exceeded',
                  detail = 'The limit is @PGQUE_QUEUE_GRANTEES_MAX@ roles per right and queue.',
                  hint = 'Grant the right to a group role and make the roles members of it.';
    end if;
    if i_right = 'send' then
        update pgque.queue set queue_senders = queue_senders || i_role where queue_id = q.queue_id;
    else
        update pgque.queue set queue_subscribers = queue_subscribers || i_role where queue_id = q.queue_id;
    end if;
    perform pgque._anchor(i_role);      -- DROP ROLE now refuses it (ADR 0079)
    return 1;
end $$;

-- revoke_queue(queue_name, role, 'send' | 'subscribe') -> 1 revoked, 0 not held.
-- Existing consumers of a role that loses "subscribe" can no longer receive.
create function pgque.revoke_queue(i_queue_name text, i_role regrole, i_right text)
returns int4 language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    q     pgque.queue;
begin
    q := pgque._queue_grantee_check(i_queue_name, i_role, i_right);
    if not (i_role = any (case i_right when 'send' then q.queue_senders else q.queue_subscribers end)) then
        return 0;
    end if;
    if i_right = 'send' then
        update pgque.queue set queue_senders = pg_catalog.array_remove(queue_senders, i_role) where queue_id = q.queue_id;
    else
        update pgque.queue set queue_subscribers = pg_catalog.array_remove(queue_subscribers, i_role) where queue_id = q.queue_id;
    end if;
    perform pgque._anchor_release(array[i_role]);
    return 1;
end $$;

-- queue_rights: who holds which right on each queue (admins hold all).
create view pgque.queue_rights as
    select q.queue_name, 'send'::text as queue_right, r.role::regrole as grantee
      from pgque.queue q, pg_catalog.unnest(q.queue_senders) r(role)
    union all
    select q.queue_name, 'subscribe', r.role::regrole
      from pgque.queue q, pg_catalog.unnest(q.queue_subscribers) r(role);

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
            raise exception 'max_retries must be >= 0, got %', n
                using errcode = 'invalid_parameter_value';
        end if;
        update pgque.queue set queue_max_retries = n where queue_id = q.queue_id;
    elsif p = 'partition_buckets' then
        perform pgque._set_buckets(q, x_param_value::int4);
    elsif p = 'retention' then
        -- events stay readable this long after their tick (ADR 0067); NULL: none
        iv := x_param_value::interval;
        if iv is not null then
            perform pgque._check_interval(p, iv);
        end if;
        update pgque.queue set queue_retention = iv where queue_id = q.queue_id;
    elsif p = 'unlogged' then
        -- the event tables unlogged or logged again (ADR 0068)
        perform pgque._unlogged_set(q, coalesce(x_param_value::boolean, false));
    elsif p in ('ticker_paused', 'external_ticker', 'disable_insert') then
        execute pg_catalog.format('update pgque.queue set %I = coalesce($1, false) where queue_id = $2', 'queue_' || p)
            using x_param_value::boolean, q.queue_id;
    else
        raise exception 'unknown queue parameter "%"', x_param_name
            using errcode = 'invalid_parameter_value',
                  hint = 'Known parameters: ticker_max_count, ticker_max_lag, ticker_idle_period, ticker_paused, rotation_period, max_retries, external_ticker, disable_insert, partition_buckets, retention, unlogged.';
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

-- grant_perms(queue_name) -> 1: PgQ's "give the queue's tables their
-- rights", here the rights every queue's tables have (_event_table_grants:
-- admins read them), set again.  Never PUBLIC, which PgQ granted.
create function pgque.grant_perms(x_queue_name text)
returns int4 language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    q pgque.queue := pgque._queue(x_queue_name);
begin
    -- not while the queue is being dropped (ADR 0020)
    perform pgque._queue_share_wait(q.queue_id);
    perform pgque._event_table_grants(q.queue_id);
    return 1;
end $$;

-- tune_storage(queue_name) -> 1: the storage settings of every event table
-- of the queue (children and buckets) set again (_event_table_options).
create function pgque.tune_storage(i_queue_name text)
returns int4 language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    q pgque.queue := pgque._queue(i_queue_name);
    r regclass;
begin
    perform pgque._queue_share_wait(q.queue_id);
    for r in select t from pgque._queue_event_tables(q.queue_id, true) t loop
        execute pg_catalog.format('alter table %s set (%s)', r, pgque._event_table_options());
    end loop;
    return 1;
end $$;
