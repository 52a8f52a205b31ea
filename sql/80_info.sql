-- Observing: version, status and the PgQ info functions.

create function pgque.version()
returns text language sql immutable security definer
set search_path = pgque, pg_catalog, pg_temp as $$
    select '@PGQUE_VERSION@'::text
$$;

-- Is the library in shared_preload_libraries?  Executable by pgque_admin:
-- start() runs as its caller.
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

-- The pg_cron jobs that start() made for this database, if pg_cron is here,
-- as far as the current role sees them: pg_cron shows a role its own jobs
-- only, and start() schedules them as its caller (ADR 0042).  Nothing, not
-- an error, for a role without the use of schema cron (pgque_owner inside
-- status(), unless a superuser granted it).  Executable by pgque_admin:
-- stop() runs as its caller.
create function pgque._cron_jobs(out jobid bigint, out jobname text, out schedule text)
returns setof record language plpgsql
set search_path = pgque, pg_catalog, pg_temp as $$
begin
    if not exists (select 1 from pg_catalog.pg_extension where extname = 'pg_cron')
       or not pg_catalog.has_schema_privilege('cron', 'usage')
       or not pg_catalog.has_table_privilege('cron.job', 'select') then
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

-- status() -> (component, status, detail).  PgQue's rows first, with its
-- names and meanings (scripts parse them by component): postgresql and
-- pgque (version()), scheduler, ticker, maintenance, pg_cron and
-- pg_timetable (only when unavailable), queues, consumers; then ours:
-- library, workers, watchdog, alerts.  Where the launcher serves this
-- database, the ticker and maintenance rows are its workers' (running or
-- stopped, pid, last pass, last error); else they say whether pg_cron jobs
-- are seen.  Each component has one row.
-- Rows that only inform say 'info' (PgQue's word).
create function pgque.status(out component text, out status text, out detail text)
returns setof record language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    workers_on boolean;
    worker_rows boolean;             -- the launcher serves this database: its loops have rows
    cron_here  boolean := exists (select 1 from pg_catalog.pg_extension where extname = 'pg_cron');
    period     int4 := (select c.tick_period_ms from pgque.config c);
    jobs       text;
    job        record;
    wc         text[];              -- the workers' rows, read once
    ws         text[];
    wd         text[];
    i          int4;
begin
    component := 'postgresql'; status := 'info'; detail := pg_catalog.version();
    return next;
    component := 'pgque'; status := 'info'; detail := pgque.version();
    return next;

    select pg_catalog.array_agg(x.component), pg_catalog.array_agg(x.status), pg_catalog.array_agg(x.detail)
      into wc, ws, wd from pgque._worker_status() x;
    worker_rows := 'ticker' = any (wc);
    workers_on := pgque._workers_serve();
    select pg_catalog.string_agg(j.jobname || ' (job ' || j.jobid || ', ' || j.schedule || ')', ', ')
      into jobs from pgque._cron_jobs() j;
    component := 'scheduler';
    if workers_on then
        status := 'workers'; detail := 'the pgque_bgw background workers tick and maintain this database';
    elsif jobs is not null then
        status := 'pg_cron'; detail := jobs;
    else
        status := 'manual'; detail := 'call pgque.ticker() and pgque.maint() periodically, or pgque.start() with pg_cron'
                                      ' (its jobs belong to the role that called it: that role sees them in cron.job)';
    end if;
    return next;

    -- ticker, maintenance: the workers' rows, or the pg_cron job seen
    for i in 1 .. coalesce(pg_catalog.array_length(wc, 1), 0) loop
        if worker_rows and wc[i] in ('ticker', 'maintenance') then
            component := wc[i]; status := ws[i]; detail := wd[i];
            return next;
        end if;
    end loop;
    if not worker_rows then
        for job in select k.kind, j.jobid, j.schedule
                     from (values ('ticker', 'pgque_ticker_'), ('maintenance', 'pgque_maint_')) k(kind, prefix)
                     left join pgque._cron_jobs() j on j.jobname = k.prefix || pg_catalog.current_database()
                    order by k.kind desc loop
            component := job.kind;
            if job.jobid is not null then
                status := 'scheduled';
                detail := pg_catalog.format('scheduler=pg_cron, job_id=%s, schedule %s', job.jobid, job.schedule);
            elsif not cron_here then
                status := 'stopped';
                detail := 'not scheduled' || case when job.kind = 'ticker' then ' (tick_period_ms=' || period || ')' else '' end
                          || ': the workers do not serve this database and pg_cron is not installed';
            else
                status := 'unknown';
                detail := 'no job of pgque.start() is visible here'
                          || case when job.kind = 'ticker' then ' (tick_period_ms=' || period || ')' else '' end
                          || ': its jobs belong to the role that called it, which sees them in cron.job';
            end if;
            return next;
        end loop;
    end if;
    if not cron_here then
        component := 'pg_cron'; status := 'unavailable';
        detail := 'the pgque_bgw background workers schedule without it; with them off, call pgque.ticker()'
                  ' and pgque.maint() periodically (manual mode)';
        return next;
    end if;
    component := 'pg_timetable'; status := 'unavailable';
    detail := 'pgque_bgw does not schedule with pg_timetable: its background workers (or pg_cron, or'
              ' pgque.ticker() and pgque.maint() called periodically) do';
    return next;
    component := 'queues'; status := 'info';
    detail := (select count(*) from pgque.queue)::text || ' queues configured';
    return next;
    component := 'consumers'; status := 'info';
    detail := (select count(*) from pgque.subscription)::text || ' active subscriptions';
    return next;

    -- ours
    component := 'library';
    if pgque._preloaded() then
        status := 'preloaded'; detail := 'pgque_bgw is in shared_preload_libraries';
    else
        status := 'not preloaded';
        detail := 'add pgque_bgw to shared_preload_libraries for the background workers and slot leases';
    end if;
    return next;
    for i in 1 .. coalesce(pg_catalog.array_length(wc, 1), 0) loop
        if not (worker_rows and wc[i] in ('ticker', 'maintenance')) then
            component := wc[i]; status := ws[i]; detail := wd[i];
            return next;
        end if;
    end loop;
    component := 'alerts';
    select case when count(*) = 0 then 'ok' else 'open' end,
           coalesce(pg_catalog.string_agg(a.kind || ' (' || pgque._alert_where(a) || ')', '; ' order by a.alert_id),
                    'no open alert')
      into status, detail from pgque.alert a where a.cleared_at is null;
    return next;
    -- each queue with a retention: its retained span and bytes (ADR 0067)
    return query
    select 'retention'::text, 'info'::text,
           pg_catalog.format('queue "%s": retention %s, oldest retained event ticked at %s, %s in event tables',
                             r.queue_name, r.retention, coalesce(r.oldest_time::text, 'none'),
                             pg_catalog.pg_size_pretty(r.bytes))
      from pgque._retention_state() r
     where r.retention is not null;
    -- each unlogged queue (ADR 0068): its events do not survive a crash
    return query
    select 'unlogged'::text, 'info'::text,
           pg_catalog.format('queue "%s": unlogged (its events are lost in a crash, and not on a standby)%s',
                             q.queue_name,
                             case when q.queue_unlogged_reset is not null
                                  then pg_catalog.format('; last reset %s, at most %s events dropped',
                                                         q.queue_unlogged_reset->>'reset_at',
                                                         q.queue_unlogged_reset->>'dropped_at_most')
                                  else '' end)
      from pgque.queue q
     where q.queue_unlogged
     order by q.queue_id;
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

-- One row per subscription (slots included): the cursor, what it has still
-- to read and since when; the one source of get_consumer_info(),
-- consumer_stats(), queue_stats(), queue_health() and metrics().
--   lag             now() minus the cursor tick's time, never negative: a
--                   caller whose now() is older than a tick it sees (a
--                   transaction begun before the tick) is caught up
--   pending_events  event sequence positions past the cursor; for a
--                   partition slot its own share, as the alerts count it
--                   (_slot_pending_all: one window read per partitioned
--                   consumer, ADR 0031, ADR 0051), up to
--                   _slot_pending_cap() for a slot far behind (ADR 0094)
--   pending_capped  that count stopped at the cap: pending_events is a
--                   lower bound (false for every other subscription)
--   oldest_pending_time  the first tick past the cursor that carries new
--                   events: the oldest unconsumed event was ticked then
--                   (the measure of the consumer_lagging alert); NULL for
--                   a slot with no event of its own
-- A slot's cursor and its current owner's open batch are in
-- pgque.slot_batch (ADR 0023).
create function pgque._consumer_state(
    out queue_id int4, out queue_name text, out consumer_name text,
    out sub_last_tick bigint, out sub_active timestamptz, out sub_batch bigint,
    out sub_next_tick bigint, out sub_batch_pos bigint,
    out cursor_time timestamptz, out cursor_seq bigint, out cursor_xmin xid8,
    out lag interval, out pending_events bigint,
    out oldest_pending_time timestamptz, out last_tick_id bigint, out pending_capped boolean)
returns setof record language sql stable as $$
    with slot_pending as materialized (select p.sub_id, p.pending, p.capped
                                         from pgque._slot_pending_all('{}', pgque._slot_pending_cap()) p)
    select q.queue_id, q.queue_name, c.co_name,
           t.tick_id, s.sub_active, coalesce(s.sub_batch, sb.sb_batch),
           coalesce(s.sub_next_tick, sb.sb_next_tick), coalesce(s.sub_batch_pos, sb.sb_pos),
           t.tick_time, t.tick_event_seq, pg_catalog.pg_snapshot_xmin(t.tick_snapshot),
           greatest(pg_catalog.now() operator(pg_catalog.-) t.tick_time, interval '0'),
           coalesce(sp.pending,
                    greatest(pgque._event_seq_pos(q) operator(pg_catalog.-) t.tick_event_seq, 0)),
           case when sp.pending operator(pg_catalog.=) 0 then null else
           (select nt.tick_time from pgque.tick nt
             where nt.tick_queue operator(pg_catalog.=) s.sub_queue
               and nt.tick_id operator(pg_catalog.>) t.tick_id
               and nt.tick_event_seq operator(pg_catalog.>) t.tick_event_seq
             order by nt.tick_id limit 1) end,
           (select max(lt.tick_id) from pgque.tick lt where lt.tick_queue operator(pg_catalog.=) s.sub_queue),
           coalesce(sp.capped, false)
      from pgque.subscription s
      join pgque.queue q on q.queue_id operator(pg_catalog.=) s.sub_queue
      join pgque.consumer c on c.co_id operator(pg_catalog.=) s.sub_consumer
      left join lateral (select b.sb_batch, b.sb_next_tick, b.sb_pos from pgque.slot_batch b
                          where b.sb_sub operator(pg_catalog.=) s.sub_id
                          order by b.sb_epoch desc limit 1) sb on true
      left join slot_pending sp on sp.sub_id operator(pg_catalog.=) s.sub_id
      join pgque.tick t on t.tick_queue operator(pg_catalog.=) s.sub_queue
                       and t.tick_id operator(pg_catalog.=) pgque._slot_cursor(s)
$$;

-- get_consumer_info(): PgQ's figures of every subscription (slots as
-- "<consumer>#<k>/<n>", from _consumer_state: a slot's own cursor, open
-- batch and share) and of every cooperative member.  Stable: one snapshot
-- for every row, also when metrics() reads it.  _consumer_info() has one
-- more column, pending_capped (_consumer_state's: the slot's count stopped
-- at _slot_pending_cap(), ADR 0094; false for members), which metrics()
-- says; get_consumer_info() keeps PgQ's columns.
create function pgque._consumer_info(
    out queue_name text, out consumer_name text, out lag interval, out last_seen interval,
    out last_tick bigint, out current_batch bigint, out next_tick bigint, out pending_events bigint,
    out pending_capped boolean)
returns setof record language sql stable
set search_path = pgque, pg_catalog, pg_temp as $$
    select cs.queue_name, cs.consumer_name, cs.lag, now() - cs.sub_active,
           cs.sub_last_tick, cs.sub_batch, cs.sub_next_tick, cs.pending_events, cs.pending_capped
      from pgque._consumer_state() cs
    union all
    -- the members of cooperative groups, as PgQue names them: lag and
    -- pending of the window each holds (the group's when it holds none)
    select q.queue_name, c.co_name || '.' || m.member, greatest(now() - t.tick_time, interval '0'),
           now() - m.last_seen,
           coalesce(m.prev_tick, s.sub_last_tick), m.batch, m.next_tick,
           case when m.batch is null then 0
                else greatest(coalesce(nt.tick_event_seq, pgque._event_seq_pos(q)) - t.tick_event_seq, 0) end,
           false
      from pgque._coop_member_info() m
      join pgque.subscription s on s.sub_id = m.sub_id
      join pgque.queue q on q.queue_id = s.sub_queue
      join pgque.consumer c on c.co_id = s.sub_consumer
      join pgque.tick t on t.tick_queue = s.sub_queue and t.tick_id = coalesce(m.prev_tick, s.sub_last_tick)
      left join pgque.tick nt on nt.tick_queue = s.sub_queue and nt.tick_id = m.next_tick
     order by 1, 2
$$;

create function pgque.get_consumer_info(
    out queue_name text, out consumer_name text, out lag interval, out last_seen interval,
    out last_tick bigint, out current_batch bigint, out next_tick bigint, out pending_events bigint)
returns setof record language sql stable security definer
set search_path = pgque, pg_catalog, pg_temp as $$
    select i.queue_name, i.consumer_name, i.lag, i.last_seen, i.last_tick, i.current_batch, i.next_tick,
           i.pending_events
      from pgque._consumer_info() i
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

-- upgrade_schema() -> the number of changes made (PgQ): always 0.  The
-- extension's tables change only with ALTER EXTENSION pgque_bgw UPDATE; a
-- NOTICE says when the installed version is behind the library's.
create function pgque.upgrade_schema()
returns int4 language plpgsql
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    have  text;
    avail text;
begin
    select e.extversion into have from pg_catalog.pg_extension e where e.extname = 'pgque_bgw';
    select a.default_version into avail from pg_catalog.pg_available_extensions a where a.name = 'pgque_bgw';
    if have is distinct from avail then
        raise notice 'pgque_bgw % is installed, % is available', have, avail
            using hint = 'ALTER EXTENSION pgque_bgw UPDATE changes the schema; upgrade_schema() never does.';
    end if;
    return 0;
end $$;
