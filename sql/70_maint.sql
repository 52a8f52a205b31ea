-- Maintenance: rotation (two steps in two transactions), retry and delayed
-- re-injection, tick history cleanup.

-- Is rotation due: the rotation period passed since the last switch, that
-- switch is complete (step 2 stamped) and the queue's retention lets the
-- oldest table go (_retention_passed, ADR 0067)?  Step 1 below asks it first;
-- the maintenance worker lists the queues by it (_maint_queue_steps).
create function pgque._rotation_due(q pgque.queue)
returns boolean language sql stable as $$
    select q.queue_switch_step2 is not null
       and q.queue_switch_time + q.queue_rotation_period <= pg_catalog.now()
       and pgque._retention_passed(q)
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
    newest  xid8;
    nxt     int4;
    tbl     text;
begin
    q := pgque._queue(i_queue_name);
    -- not FOR UPDATE: an open transaction that made a row referencing the
    -- queue (a worker's part that dead-lettered an event) holds it FOR KEY
    -- SHARE, and a frozen one would hold the maintenance worker here, every
    -- queue's maintenance with it (ADR 0142); no key changes below
    select * into q from pgque.queue where queue_id = q.queue_id for no key update;
    if not pgque._rotation_due(q) then
        return 0;
    end if;
    -- the latest tick older than the previous switch (an idle queue): tick
    -- it now, as its ticker would at its idle period, unless it is paused or
    -- ticked from outside, or a transaction older than the switch still
    -- runs (no tick could pass it then).  Consumers pass the switch at their
    -- next receive, instead of an idle period later; and a queue nobody
    -- reads rotates (issue #27 item 3)
    if pgque._ticked_by_worker(q)
       and pg_catalog.pg_snapshot_xmin(pg_catalog.pg_current_snapshot()) > q.queue_switch_step2
       and (select pg_catalog.pg_snapshot_xmin(t.tick_snapshot) from pgque.tick t
             where t.tick_queue = q.queue_id order by t.tick_id desc limit 1) <= q.queue_switch_step2 then
        perform pgque._tick(q);
    end if;
    -- everything written before the previous switch must be consumed by all
    -- (a blocked key's tick counts as a cursor: its withheld events, ADR 0029)
    select min(pg_catalog.pg_snapshot_xmin(t.tick_snapshot)) into lowest
      from (select s.sub_last_tick as tk from pgque.subscription s where s.sub_queue = q.queue_id
            union all
            select pgque._blocked_ticks(q.queue_id)) c
      join pgque.tick t on t.tick_queue = q.queue_id and t.tick_id = c.tk;
    -- nobody reads the queue: a consumer that subscribes now starts at the
    -- latest tick, which stands for its cursor, so the events it would read
    -- stay in the tables it reads (_event_source) and are not truncated
    if not exists (select from pgque.subscription s where s.sub_queue = q.queue_id) then
        select pg_catalog.pg_snapshot_xmin(t.tick_snapshot) into lowest
          from pgque.tick t where t.tick_queue = q.queue_id order by t.tick_id desc limit 1;
    end if;
    if lowest is not null and lowest <= q.queue_switch_step2 then
        return 0;
    end if;

    nxt := (q.queue_cur_table + 1) % q.queue_ntables;
    tbl := pg_catalog.format('pgque.%I', pgque._event_table(q.queue_id, nxt, null));
    begin
        -- pg_dump or a long reader holds it: try again next time
        execute 'lock table ' || tbl || ' in access exclusive mode nowait';
    exception when lock_not_available then
        return 0;
    end;
    if pgque._rotation_would_lose(q, tbl, lowest) then
        return 0;
    end if;
    -- the newest xid it holds (an index probe, as above): a tick whose
    -- snapshot sees it finished starts a whole window (ADR 0067)
    execute 'select ev_txid from ' || tbl || ' order by ev_txid desc limit 1' into newest;
    perform pgque._truncate_event_table(tbl::regclass);
    -- the marks of addressed events whose row went with it (ADR 0105)
    execute pg_catalog.format('delete from pgque.addressed_event a using pgque.subscription s'
                              ' where s.sub_id operator(pg_catalog.=) a.ae_sub'
                              '   and s.sub_queue operator(pg_catalog.=) $1'
                              '   and not exists (select from pgque.%I ev'
                              '                    where ev.ev_txid operator(pg_catalog.=) a.ae_txid'
                              '                      and ev.ev_id operator(pg_catalog.=) a.ae_ev_id)',
                              pgque._event_table(q.queue_id, null, null))
        using q.queue_id;
    -- the table current until now becomes the previous one
    update pgque.queue
       set queue_cur_table = nxt, queue_switch_time = now(),
           queue_switch_step1 = pg_catalog.pg_current_xact_id(), queue_switch_step2 = null,
           queue_truncated_xid = greatest(q.queue_truncated_xid, newest),
           queue_prev_step2 = q.queue_switch_step2
     where queue_id = q.queue_id;
    q.queue_truncated_xid := greatest(q.queue_truncated_xid, newest);
    if q.queue_retention is null then
        -- ticks older than every cursor and than the previous switch, except
        -- the latest: a queue that nobody reads and nothing ticks since would
        -- be left with no tick, and the next step 1 could not tell which
        -- events a new subscriber (who starts at the latest tick) may still
        -- read: it would never rotate again (issue #27 item 3)
        delete from pgque.tick
         where tick_queue = q.queue_id
           and pg_catalog.pg_snapshot_xmax(tick_snapshot) < q.queue_switch_step2
           and tick_id < (select max(x.tick_id) from pgque.tick x where x.tick_queue = q.queue_id);
    else
        -- retention: the ticks no whole window starts at any more; the
        -- others stay, a replay may start at any of them
        delete from pgque.tick
         where tick_queue = q.queue_id
           and q.queue_truncated_xid is not null
           and pg_catalog.pg_snapshot_xmin(tick_snapshot) <= q.queue_truncated_xid
           and tick_id < (select max(x.tick_id) from pgque.tick x where x.tick_queue = q.queue_id);
    end if;
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
    n  int4 := 0;
    nb int4 := 0;
    sw int4[];
    bk int4[];
begin
    -- the queues to stamp are read first, and a list with none updates
    -- nothing: an UPDATE of no row still fires pgque.queue's statement
    -- trigger, whose relcache invalidation made every producer drop its
    -- cached queue rows and the ticker read its queue list again after
    -- every maintenance pass (ADR 0103)
    sw := array(select queue_id from pgque.queue
                 where queue_switch_step2 is null
                   and queue_switch_step1 is distinct from pg_catalog.pg_current_xact_id_if_assigned());
    -- the same stamp for a change to partition buckets
    bk := array(select queue_id from pgque.queue
                 where queue_buckets_step2 is null and queue_buckets_step1 is not null
                   and queue_buckets_step1 is distinct from pg_catalog.pg_current_xact_id_if_assigned());
    if pg_catalog.cardinality(sw) > 0 then
        update pgque.queue set queue_switch_step2 = pg_catalog.pg_current_xact_id()
         where queue_id = any (sw) and queue_switch_step2 is null;
        get diagnostics n = row_count;
    end if;
    if pg_catalog.cardinality(bk) > 0 then
        update pgque.queue set queue_buckets_step2 = pg_catalog.pg_current_xact_id()
         where queue_id = any (bk) and queue_buckets_step2 is null;
        get diagnostics nb = row_count;
    end if;
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
    -- a queue with retention keeps its ticks until rotation truncates
    -- their events; a tick a seek holds (it is moving a cursor there) is
    -- skipped, never waited for (ADR 0067)
    delete from pgque.tick d
     where d.ctid = any (array(
        select t.ctid from pgque.tick t
          join pgque.queue q on t.tick_queue = q.queue_id
         where q.queue_retention is null
           and t.tick_time < now() - q.queue_rotation_period
           and t.tick_id < coalesce((select min(c.tk) from (select s.sub_last_tick as tk from pgque.subscription s
                                                              where s.sub_queue = q.queue_id
                                                             union all
                                                             select pgque._blocked_ticks(q.queue_id)) c),
                                    (select max(x.tick_id) from pgque.tick x where x.tick_queue = q.queue_id))
           for update of t skip locked));
    get diagnostics n = row_count;
    return n;
end $$;

-- The queues' extra maintenance hooks (PgQ's queue_extra_maint: function
-- names, each called as fn(queue_name) -> int4), in the order they run,
-- with fn NULL and why when one is not run.  Only pgque_owner can write
-- pgque.queue, so only it sets hooks; a hook is run only if it exists with
-- that signature and belongs to pgque_owner, the owner of schema pgque:
-- only a superuser can make such a function (ADR 0042), and it runs with
-- pgque_owner's rights; one in a schema the caller (pgque_owner) may not
-- use is missing.  PgQue's idempotency reaper, which send_idem
-- lists, is left out: maint() and the worker reap every queue's expired
-- claims already.  The one list of _maint_extra() and maint_operations().
create function pgque._maint_extra_hooks(out queue_name text, out hook text, out fn regprocedure,
                                         out skipped text)
returns setof record language sql stable as $$
    select q.queue_name, h.hook,
           case when p.oid is not null and p.proowner operator(pg_catalog.=) pgque._owner() then p.oid end,
           case when p.oid is null then 'missing'
                when p.proowner operator(pg_catalog.<>) pgque._owner() then 'not owned by pgque_owner' end
      from pgque.queue q
     cross join pg_catalog.unnest(q.queue_extra_maint) with ordinality h(hook, pos)
     cross join lateral (select pg_catalog.parse_ident(h.hook, false) as id) i
      -- looked up only in a schema the caller may use: to_regprocedure
      -- raises 42501 for another one, which made maint() fail at step 8
      left join pg_catalog.pg_proc p
        on p.oid operator(pg_catalog.=)
           case when pg_catalog.cardinality(i.id) operator(pg_catalog.<>) 2
                     or exists (select from pg_catalog.pg_namespace n
                                 where n.nspname operator(pg_catalog.=) i.id[1]
                                   and pg_catalog.has_schema_privilege(n.oid, 'usage'))
                then pg_catalog.to_regprocedure(h.hook operator(pg_catalog.||) '(text)') end
     where h.hook operator(pg_catalog.<>) 'pgque.maint_idem'
     order by q.queue_id, h.pos
$$;

-- The hooks of _maint_extra_hooks(), run (a WARNING for each one that is
-- not).  -> the hooks' sum.
create function pgque._maint_extra()
returns int4 language plpgsql
-- pinned: the maintenance worker calls it directly
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    r      record;
    n      int4 := 0;
    got    int4;
begin
    for r in select * from pgque._maint_extra_hooks() loop
        if r.skipped = 'missing' then
            raise warning 'extra maintenance hook % of queue % does not exist as %(text)', r.hook, r.queue_name, r.hook;
            continue;
        elsif r.skipped is not null then
            raise warning 'extra maintenance hook % of queue % is skipped: it is not owned by pgque_owner',
                  pg_catalog.to_regprocedure(r.hook || '(text)'), r.queue_name
                using hint = 'Only functions owned by pgque_owner, the owner of schema pgque, run as hooks: a superuser may ALTER FUNCTION ... OWNER TO pgque_owner (docs/security.md).';
            continue;
        end if;
        execute pg_catalog.format('select (%s(%L::pg_catalog.text))::pg_catalog.int4', r.fn::oid::regproc, r.queue_name) into got;
        n := n + coalesce(got, 0);
    end loop;
    return n;
end $$;

-- The maintenance steps, one list that both walkers take in this order:
-- the maintenance worker (src/maint.c: each step in a transaction of its
-- own, failures recorded for maint_failed) and maint() below (every step
-- in the caller's transaction).  ADR 0065 says why this order:
--   rotation step 2 first stamps switches made by earlier transactions,
--     the only stamp a single transaction can give (ADR 0007);
--   rotation step 1 and the space reserve, per queue;
--   rotation step 2 again stamps this pass's switches where the walker
--     commits between steps (the worker: the next switch can come one pass
--     later, not two); in maint() it finds nothing: step 2 skips the
--     switches of the current transaction;
--   retries and delayed events, then cooperative groups (their cursors),
--   then the tick history (it reads the cursors), the queues' hooks, the
--   expired idempotency keys (bounded batches), the alert retention and
--   the OIDs of dropped roles in the rights lists (ADR 0079).
-- Columns:
--   step          the name a failure is recorded under (pgque.maint_failure)
--   call          the expression run (select <call>); $1 is the queue's name
--   per_queue     run per queue; consecutive per-queue steps run queue by
--                 queue.  A negative result: it freed space and must run
--                 again in a later transaction (the worker at once, maint()
--                 at its next call, skipping the queue's later steps)
--   due           per-queue: the column of _maint_queue_steps() that makes
--                 the worker visit a queue for it (maint() visits every
--                 queue); a step that acted makes the queue's later steps due
--   counted       its result counts in maint()'s number of actions
--   again_at      run again (the worker: in a new transaction) while the
--                 result reaches this; NULL: once
--   wakes_ticker  a positive result made events: the worker wakes the ticker
--   report        the label of its results in the worker's status() line
--   operation     the public function a PgQ scheduler calls for it
--                 (maint_operations(): func_name(func_arg), func_arg the
--                 queue of a per-queue step); NULL: only maint() runs it
create function pgque._maint_steps(out step_no int4, out step text, out call text, out per_queue boolean,
                                   out due text, out counted boolean, out again_at int4,
                                   out wakes_ticker boolean, out report text, out operation text)
returns setof record language sql immutable as $$
    values
    (0,  'unlogged queues lost in a crash', 'pgque._unlogged_reset_all()', false, null, true, null, false, null, null),
    (1,  'rotation step 2', 'pgque.maint_rotate_tables_step2()', false, null, true, null, false, null,
     'pgque.maint_rotate_tables_step2'),
    (2,  'rotation step 1', 'pgque._maint_rotate_step1($1)', true, 'rotate', true, null, false, 'switched',
     'pgque.maint_rotate_tables_step1'),
    (3,  'space reserve', 'pgque._space_reserve_keep($1)', true, 'reserve', false, null, false, null, null),
    (4,  'rotation step 2', 'pgque.maint_rotate_tables_step2()', false, null, true, null, false, null,
     'pgque.maint_rotate_tables_step2'),
    (5,  'moving retries and delayed events', 'pgque.maint_retry_events()', false, null, true, null, true, 'moved',
     'pgque.maint_retry_events'),
    (6,  'cooperative groups', 'pgque._coop_maint()', false, null, true, null, false, null, null),
    (7,  'tick history cleanup', 'pgque.maint_tick_cleanup()', false, null, true, null, false, null,
     'pgque.maint_tick_cleanup'),
    (8,  'extra maintenance hooks', 'pgque._maint_extra()', false, null, true, null, false, null, null),
    (9,  'reaping expired idempotency keys', 'pgque._maint_idem_batch(10000)', false, null, true, 10000, false,
     'idem_reaped', 'pgque.maint_idem'),
    (10, 'alert retention', 'pgque.maint_alerts(pgque._alert_retention())', false, null,
     false, null, false, null, null),
    (11, 'dropped roles in the rights', 'pgque._maint_stale_roles()', false, null, true, null, false, null, null)
$$;

-- maint(): every maintenance step, for every queue, in the order of
-- _maint_steps() (the worker's order, above).  Successive maint() calls
-- (one transaction each) keep rotating: step 2 stamps at the start what
-- an earlier call switched.  -> number of actions taken.
create function pgque.maint()
returns int4 language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    n    int8 := 0;
    r    int8;
    s    record;
    qn   text;
    skip text[];
begin
    -- nothing while the queue state is not whole: a restore is loading it
    -- (ADR 0022; the workers ask the same)
    if pgque._state_held() is not null then
        return 0;
    end if;
    for s in select * from pgque._maint_steps() order by step_no loop
        if s.per_queue then
            for qn in select queue_name from pgque.queue order by queue_id loop
                -- a queue whose earlier step must run again in a later
                -- transaction (-1: a full disk freed its space reserve,
                -- ADR 0025) waits for the next call
                continue when qn = any (skip);
                execute 'select (' || s.call || ')::pg_catalog.int8' into r using qn;
                if r < 0 then
                    skip := skip || qn;
                elsif s.counted then
                    n := n + r;
                end if;
            end loop;
        else
            loop
                execute 'select (' || s.call || ')::pg_catalog.int8' into r;
                if s.counted then
                    n := n + r;
                end if;
                exit when s.again_at is null or r < s.again_at;
            end loop;
        end if;
    end loop;
    return n::int4;
end $$;


-- maint_tables_to_vacuum() -> the tables that need frequent vacuuming
-- (PgQ): none while autovacuum is on (it handles them); else the catalog
-- tables that maintenance and consumers update all the time.  The event
-- tables are never vacuumed: rotation TRUNCATEs them.
create function pgque.maint_tables_to_vacuum()
returns setof text language sql stable
set search_path = pgque, pg_catalog, pg_temp as $$
    select t from pg_catalog.unnest(array['pgque.subscription', 'pgque.queue', 'pgque.tick',
                                          'pgque.retry_queue', 'pgque.delayed_event', 'pgque.coop_window',
                                          'pgque.slot_batch', 'pgque.idem', 'pgque.consumer']) t
     where pg_catalog.current_setting('autovacuum') <> 'on'
       and pg_catalog.to_regclass(t) is not null
$$;

-- maint_operations() -> (func_name, func_arg): the maintenance to run now,
-- one call each, in its own transaction, in this order (PgQ's contract:
-- select func_name(func_arg), or VACUUM func_arg when func_name is
-- 'vacuum').  The steps of the maintenance worker (src/maint.c), the
-- queues from the list it reads (_maint_queue_steps): rotation step 1 of
-- each queue whose rotation is due, step 2, retries and delayed events,
-- tick history, expired idempotency claims; then maint() when a step
-- without a function of its own has work (a queue's space reserve,
-- cooperative groups, the queues' extra maintenance hooks, which run as
-- pgque_owner only); then the tables to vacuum.  Nothing while the queue
-- state is not whole (a restore is loading it, ADR 0022).
create function pgque.maint_operations(out func_name text, out func_arg text)
returns setof record language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    due     record;
    st      record;
    more    boolean := false;   -- a step only maint() runs has work
begin
    if pgque._state_held() is not null then
        return;
    end if;
    -- the maintenance worker's list and order (_maint_steps()), a step
    -- with an operation once, or once per queue it is due for
    for st in select * from pgque._maint_steps() order by step_no loop
        if st.operation is null then
            continue;
        end if;
        func_name := st.operation;
        if st.per_queue then
            for due in select q.queue_name, pg_catalog.to_jsonb(q) as d from pgque._maint_queue_steps() q loop
                if (due.d ->> st.due)::boolean then
                    func_arg := due.queue_name;
                    return next;
                end if;
            end loop;
        else
            func_arg := null;
            return next;
        end if;
    end loop;
    -- the steps without an operation of their own: maint() when one has
    -- work, each asked what its own step would do (ADR 0091): step 3 a
    -- queue's space reserve due (_maint_queue_steps, the worker's list),
    -- step 6 a group with windows to cut or a cursor to move, or a fence
    -- past its time (_coop_maint_due), step 8 a hook that would run
    -- (_maint_extra_hooks: one that is missing or not pgque_owner's is not);
    -- ADR 0100: step 0 an unlogged queue that lost its seal
    -- (_unlogged_lost), step 10 an alert past its retention
    -- (_alert_expired), step 11 a rights list naming a dropped role
    -- (_rights_roles_stale, the gate of its cleanup) or a claim of one
    -- (_idem_roles_gone, what it deletes)
    select coalesce(bool_or(q.reserve), false) into more from pgque._maint_queue_steps() q;
    if more
       or pgque._coop_maint_due()
       or exists (select from pgque._maint_extra_hooks() h where h.fn is not null)
       or exists (select from pgque.queue q where pgque._unlogged_lost(q))
       or exists (select from pgque.alert a where pgque._alert_expired(a, pgque._alert_retention()))
       or pgque._rights_roles_stale()
       or exists (select from pgque._idem_roles_gone()) then
        func_name := 'pgque.maint';
        func_arg := null;
        return next;
    end if;
    func_name := 'vacuum';
    for func_arg in select * from pgque.maint_tables_to_vacuum() loop
        return next;
    end loop;
end $$;

