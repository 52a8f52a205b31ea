-- The worker_down alert (ADR 0028): a worker of this database (ticker,
-- maintenance, watchdog) that is wanted and has not run for
-- pgque_bgw.worker_down_after.  What is down comes from the shared-memory
-- state table (src/supervise.c); the rows follow ADR 0012 (open once, clear
-- once).  An outage that began and ended while no worker could write (the
-- watchdog and the ticker were both down) is written afterwards as one row
-- opened at the threshold and cleared when the worker came back.

create function pgque._worker_down_hint()
returns text language sql immutable as $$
    select k.hint from pgque._alert_kinds() k where k.kind = 'worker_down'
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

-- Each running process of this database's workers ("combined" for the one
-- process of ADR 0026) and the launcher: the bytes under its
-- TopMemoryContext after its last pass, and when it measured them (ADR
-- 0035).  Shared memory only.
create function pgque._worker_memory(out worker text, out pid int4, out bytes int8,
                                     out measured_at timestamptz)
returns setof record language c strict
as 'MODULE_PATHNAME', 'pgque_worker_memory';

-- pgque_bgw.worker_memory_limit in bytes (its default is guc.c's)
create function pgque._worker_memory_limit()
returns int8 language sql stable as $$
    select pgque._setting('pgque_bgw.worker_memory_limit')::pg_catalog.int8
$$;

-- The worker_memory alert (ADR 0035): a pgque_bgw process of this database
-- (or the launcher) that holds more than i_limit bytes after a pass, as it
-- published (pgque._worker_memory()).  i_limit is
-- pgque_bgw.worker_memory_limit (0 or NULL: none).
-- One alert per process kind; it clears when the figure is back under the
-- limit, or the process is gone (a restarted one starts small).
create function pgque._worker_memory_conditions(i_limit int8 default pgque._worker_memory_limit())
returns setof pgque.alert_condition language sql stable
set search_path = pgque, pg_catalog, pg_temp as $$
    select 'worker_memory'::text, m.worker, null::text, null::text, null::int4,
           pg_catalog.jsonb_build_object(
               'worker', m.worker, 'pid', m.pid, 'bytes', m.bytes,
               'limit_bytes', i_limit, 'measured_at', m.measured_at)
      from pgque._worker_memory() m
     where i_limit > 0 and m.bytes > i_limit
$$;

