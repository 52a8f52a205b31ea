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
           -- retention holds the oldest table on purpose (ADR 0067)
           and pgque._retention_passed(q)
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
                               pgque._event_table(d.queue_id, (d.queue_cur_table + 1) % d.queue_ntables, null)))::oid
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
     where h.since < pg_catalog.clock_timestamp() - pgque._guc_interval('pgque_bgw.long_transaction_after')
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
