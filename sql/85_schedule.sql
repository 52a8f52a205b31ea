-- Running without the background workers: ticker_loop() for sub-second
-- ticking from a scheduler, and start()/stop() to schedule it with pg_cron.

-- ticker_loop(duration, period): tick every period for duration, committing
-- after each pass (a procedure: CALL it).  The default duration is PgQue's
-- one pg_cron slot of 1 s; start() schedules it once a minute (pg_cron 1.4
-- has no seconds) with an explicit duration of 59 s.  It runs as the caller, under the caller's search_path (a
-- procedure that commits cannot pin one with SET), so every function and
-- operator in it is qualified: a database owner's "operator public.+" is
-- never picked (ADR 0014).
-- A NULL period (the default) is pgque.config.tick_period_ms, read at the
-- start: set_tick_period_ms() changes the rate from the next call on.
create procedure pgque.ticker_loop(i_duration interval default '1 second',
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
-- SECURITY INVOKER (ADR 0042): pg_cron runs a job as the role that
-- scheduled it, which must be able to log in; pgque_owner cannot.  So the
-- jobs belong to the caller (an admin with LOGIN and the use of pg_cron),
-- and run ticker_loop() and maint() with its rights, as it could itself.
create function pgque.start()
returns void language plpgsql
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
        raise exception 'pg_cron extension is not installed in database "%": PgQue itself works without pg_cron, but pgque.start() schedules cron jobs', db
            using errcode = 'object_not_in_prerequisite_state',
                  detail = 'pgque runs in manual mode: nothing ticks or maintains the queues by itself.',
                  hint = 'Call pgque.ticker() (or CALL pgque.ticker_loop()) and pgque.maint() periodically, '
                         'install pg_cron here, or run the background workers (shared_preload_libraries = pgque_bgw).';
    end if;
    -- pg_cron's schema belongs to the superuser that created pg_cron: a
    -- non-superuser needs one grant, said here rather than as PostgreSQL's
    -- bare "permission denied for schema cron" (docs/install.md)
    if not pg_catalog.has_schema_privilege('cron', 'usage') then
        raise exception 'permission denied for schema cron: pgque.start() schedules its jobs with pg_cron as role "%"',
                        current_user
            using errcode = 'insufficient_privilege',
                  detail = 'pg_cron runs a job as the role that scheduled it; that role needs the use of schema cron.',
                  hint = pg_catalog.format('As a superuser, in database %I: grant usage on schema cron to %I;',
                                           db, current_user);
    end if;
    perform pgque.stop();
    -- pg_cron lives in this database (it can only be created in
    -- cron.database_name), so cron.schedule() schedules here: unlike
    -- cron.schedule_in_database() it is granted to PUBLIC, and the use of
    -- schema cron is all the caller needs
    execute 'select cron.schedule($1, $2, $3)'
      using 'pgque_ticker_' || db, '* * * * *', 'call pgque.ticker_loop(''59 seconds'')';
    execute 'select cron.schedule($1, $2, $3)'
      using 'pgque_maint_' || db, '* * * * *', 'select pgque.maint()';
end $$;

-- stop(): remove the jobs start() made; harmless without pg_cron.  As its
-- caller, like start(): it removes the caller's jobs (pg_cron lets a role
-- unschedule its own).
create function pgque.stop()
returns void language plpgsql
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
-- as in PgQue.  SECURITY INVOKER (ADR 0042): DROP EXTENSION is the
-- extension owner's (the installing role, to which sql/90_grants.sql grants
-- this) or a superuser's; the schema belongs to pgque_owner, so only a
-- superuser drops it here, and otherwise it stays behind, empty, as DROP
-- EXTENSION leaves it (a later install uses it).
create function pgque.uninstall()
returns void language plpgsql
set search_path = pgque, pg_catalog, pg_temp as $$
begin
    perform pgque.stop();
    drop extension pgque_bgw cascade;
    -- the schema outlives its extension (CREATE EXTENSION made it for the
    -- control file's "schema = pgque"); PgQue drops it with what is in it
    if exists (select from pg_catalog.pg_namespace n
                where n.nspname operator(pg_catalog.=) 'pgque'::pg_catalog.name
                  and pg_catalog.pg_has_role(n.nspowner, 'usage')) then
        drop schema pgque cascade;
    end if;
end $$;
