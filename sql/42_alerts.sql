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

-- The alert kinds: one row each, the one list that the watchdog (the hint
-- of its WARNING, and the kinds evaluated by a function of their own),
-- metrics() (a pgque_alerts_open series per kind) and the tests of the
-- docs and of the monitoring kit (TAP 023: docs/alerts.md's table,
-- monitoring/prometheus-alerts.yml) read.  Columns:
--   kind        the alert's kind (pgque.alert.kind)
--   severity    warning or critical (the Prometheus rules' severity)
--   threshold   the setting that bounds it (docs/gucs.md), or NULL
--   hint        the hint of the WARNING it opens with
--   docs        its runbook: its row of docs/alerts.md (the Prometheus
--               rules' runbook annotation)
--   conditions  a function () -> setof pgque.alert_condition that says
--               when it holds, reading its threshold itself
--               (pgque._guc_interval(threshold)); the watchdog's pass calls
--               it.  NULL: _alert_conditions' shared reads below evaluate
--               it (one read of the slots' pending events for several
--               kinds), or the worker supervision (worker_down,
--               sql/43_worker_alerts.sql).
-- A new kind is one conditions function, one row here, its docs and its
-- test (docs/monitoring.md, "Adding an alert kind").
create function pgque._alert_kinds(out kind text, out severity text, out threshold text, out hint text,
                                   out docs text, out conditions text)
returns setof record language sql immutable as $$
    select k.kind, k.severity, k.threshold, k.hint,
           -- the runbook: the kind's row of the table of docs/alerts.md
           'docs/alerts.md#' || k.kind, k.conditions
      from (values
    ('slot_unpolled', 'warning', 'pgque_bgw.slot_unpolled_after',
     'Make sure workers poll every slot (cycle over all slots, or run as many workers as slots).', null),
    ('slot_stale', 'warning', 'pgque_bgw.slot_stale_after',
     'A worker holding the lease stopped; another worker will take the slot over with claim_slot().', null),
    ('consumer_lagging', 'warning', 'pgque_bgw.lag_alert_after',
     'The consumer is behind: check that it runs and keeps up, or add workers.', null),
    ('coop_member_silent', 'warning', 'pgque_bgw.slot_stale_after',
     'A cooperative member holding a batch is silent: another member takes the window over after dead_interval, or restart it.', null),
    ('rotation_pinned', 'critical', 'pgque_bgw.maint_interval',
     'A subscription is not consuming and holds rotation: fix its consumer or unsubscribe it.', null),
    ('long_transaction', 'critical', 'pgque_bgw.long_transaction_after',
     'A transaction holds the queue''s rotation back: end it (COMMIT, ROLLBACK, pg_terminate_backend(pid), or ROLLBACK PREPARED for a prepared one) and fix what leaves it open.', null),
    ('maint_failed', 'critical', null,
     'A maintenance step fails: see the error in the details and the server log; on "No space left on device" add space to the event tables'' tablespace (docs/operations.md).', null),
    ('ticker_stalled', 'critical', 'pgque_bgw.ticker_stalled_after',
     'Check the ticker: pgque.status(), ticker_paused, pgque_bgw.enabled.', null),
    ('worker_down', 'critical', 'pgque_bgw.worker_down_after',
     'See pgque.status() and pgque.launcher_workers(): the launcher restarts a stopped worker within pgque_bgw.worker_restart_max; a worker that is not started says why (worker budget, max_worker_processes).',
     null),
    ('resize_stalled', 'warning', 'pgque_bgw.resize_stalled_after',
     'Old-layout slots of a resize are not drained: make sure workers serve the old n (pgque.partition_resize_status lists the slots).',
     'pgque._resize_conditions'),
    ('key_blocked', 'warning', 'pgque_bgw.key_blocked_after',
     'A key of a partitioned consumer with failure policy pause waits for its failed event: fix what makes it fail, or let it reach the dead-letter queue (pgque.blocked_keys).',
     'pgque._pause_alert_conditions'),
    ('key_state_orphaned', 'critical', null,
     'Blocked keys or retries of a partitioned consumer that no slot will read: their events are not delivered; see the details and docs/alerts.md before unsubscribing anything.',
     'pgque._pause_orphan_conditions'),
    ('worker_memory', 'warning', 'pgque_bgw.worker_memory_limit',
     'A pgque_bgw process holds more memory than pgque_bgw.worker_memory_limit: watch pgque_worker_memory_bytes; if it keeps growing, report it with the output of pg_log_backend_memory_contexts(pid); a superuser''s pg_terminate_backend(pid) frees it (the launcher restarts the worker).',
     'pgque._worker_memory_conditions'),
    ('retention_size', 'warning', 'pgque_bgw.retention_size_limit',
     'The queue''s retained events take more room than pgque_bgw.retention_size_limit: shorten its retention (set_queue_config(queue, ''retention'', ...)), make room, or raise the limit; a cursor far behind also keeps tables (pgque.get_consumer_info()).',
     'pgque._retention_conditions'),
    ('unlogged_reset', 'warning', 'pgque_bgw.unlogged_reset_alert_for',
     'An unlogged queue lost its events in a crash (or a restore, or a promotion) and was reset: its consumers resume with the events sent since; the producers of the dropped events (details: dropped_at_most, since) may send them again.',
     'pgque._unlogged_conditions')
    ) k(kind, severity, threshold, hint, conditions)
$$;

-- The conditions true now, one row per (kind, subject).  The sequences and
-- event tables of the queues in i_skip are not read (the watchdog's pass
-- could not take their DDL lock, ADR 0040).
create function pgque._alert_conditions(i_slot_unpolled_after interval, i_slot_stale_after interval,
                                        i_lag_alert_after interval, i_ticker_stalled_after interval,
                                        i_rotation_grace interval, i_skip int4[] default '{}')
returns setof pgque.alert_condition language plpgsql as $$
declare
    now_ts timestamptz := pg_catalog.clock_timestamp();
    fn     text;
    -- the queues whose ticker_stalled is open: their sequences are read
    -- whatever the ticker's probe said (ADR 0103)
    stalled text[] := array(select a.subject from pgque.alert a
                             where a.cleared_at is null and a.kind = 'ticker_stalled');
    p_subs int4[];
    p_counts int8[];
    p_capped boolean[];
    -- a slot's pending events are counted up to this many (ADR 0096, 0094):
    -- a pass reads no more of a stopped slot's backlog than that
    cap    constant int8 := pgque._slot_pending_cap();
begin
    -- every slot's pending events, one window read per partitioned consumer
    -- (ADR 0031), and one capped read per slot far behind (ADR 0096)
    select pg_catalog.array_agg(p.sub_id), pg_catalog.array_agg(p.pending), pg_catalog.array_agg(p.capped)
      into p_subs, p_counts, p_capped
      from pgque._slot_pending_all(i_skip, cap) p;

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
        select sl.*, greatest(sl.last_receive, sl.sub_active) as last_poll, p.pending, p.capped
          from slots sl
          left join rows from (pg_catalog.unnest(p_subs), pg_catalog.unnest(p_counts), pg_catalog.unnest(p_capped))
                    p(sub_id, pending, capped) on p.sub_id = sl.sub_id
    )
    select 'slot_unpolled'::text, p.qn || '/' || p.cn || '/' || p.sl, p.qn, p.cn, p.sl,
           pg_catalog.jsonb_build_object(
               'pending_events', p.pending,
               'pending_events_capped', p.capped,
               'last_poll', p.last_poll,
               'seconds_since_poll', round(extract(epoch from now_ts - p.last_poll)::numeric, 1),
               'lease_owner', case when p.lease_until > now_ts then p.owner end)
      from polled p
     -- a capped count (ADR 0094) is a lower bound: in the filtered layout a
     -- slot far behind may count 0 of the events read and still have some
     where (p.pending > 0 or p.capped) and p.last_poll < now_ts - i_slot_unpolled_after
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
               -- a slot's own share, as get_consumer_info and metrics (ADR 0051)
               'pending_events', coalesce(p.pending, lt.tick_event_seq - ct.tick_event_seq),
               'pending_events_capped', coalesce(p.capped, false))
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
      left join rows from (pg_catalog.unnest(p_subs), pg_catalog.unnest(p_counts), pg_catalog.unnest(p_capped))
                p(sub_id, pending, capped) on p.sub_id = s.sub_id
     where nt.tick_time < now_ts - i_lag_alert_after
       and (pg_catalog.strpos(c.co_name, '#') = 0 or p.pending > 0 or p.capped);

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

    -- the kinds with a conditions function of their own (_alert_kinds):
    -- resizes still draining (ADR 0030), keys blocked too long (ADR 0029),
    -- state no slot will read (ADR 0038), workers over their memory limit
    -- (ADR 0035), ...
    for fn in select distinct k.conditions from pgque._alert_kinds() k
               where k.conditions is not null order by 1 loop
        return query execute pg_catalog.format('select * from %s()', fn::pg_catalog.regproc);
    end loop;

    -- queues with new events and no tick for too long
    return query
    with c as materialized (
        select q, q.queue_id, lt.tick_time, lt.tick_event_seq,
               -- new events moved the sequence; or a late committer (ADR
               -- 0005), probed only once the idle tick is overdue too: a
               -- running ticker ticks it at its commit, and an idle queue is
               -- not probed on every pass (ADR 0031).  Not read for a skipped
               -- queue (ADR 0040: _uninspected_conditions speaks for it).
               -- Nor for a queue the ticker serves whose sequence its probe
               -- read within the bound and found covered by the latest tick,
               -- or ticked (ADR 0103): an event appended since is younger
               -- than the bound, and once the ticker stops probing the
               -- sequence is read again.  'probe': the late committers' probe
               -- decides, for all such queues at once (ADR 0113).
               case when q.queue_id = any (i_skip) then null
                    when pgque._ticked_by_worker(q) and q.queue_name <> all (stalled)
                         and pgque._ticker_covered(q.queue_id, now_ts - i_ticker_stalled_after)
                         then case when lt.tick_time < now_ts - q.queue_ticker_idle_period then 'probe' end
                    when pgque._event_seq_pos(q) > lt.tick_event_seq then 'moved'
                    when lt.tick_time < now_ts - q.queue_ticker_idle_period then 'probe' end as why
          from pgque.queue q
          join lateral (select * from pgque.tick t where t.tick_queue = q.queue_id
                         order by t.tick_id desc limit 1) lt on true
         where not q.queue_external_ticker
           and lt.tick_time < now_ts - i_ticker_stalled_after),
    -- one read for all the queues to probe, once (not per row of c)
    u as materialized (
        select pgque._queues_unticked(array(select p.queue_id from c p where p.why = 'probe')) as ids)
    select 'ticker_stalled'::text, (c.q).queue_name, (c.q).queue_name, null::text, null::int4,
           pg_catalog.jsonb_build_object(
               'last_tick', c.tick_time,
               'seconds_since_tick', round(extract(epoch from now_ts - c.tick_time)::numeric, 1),
               'new_events', pgque._event_seq_pos(c.q) - c.tick_event_seq,
               'ticker_paused', (c.q).queue_ticker_paused)
      from c
     where c.why = 'moved'
        or (c.why = 'probe'
            and c.queue_id in (select pg_catalog.unnest(u.ids) from u));
end $$;

-- Did this database's ticker, at or after i_since, read the queue's event
-- sequence in a probe and find it covered by its latest tick, or tick it?
-- (src/ticker.c; false without the library: the sequence is read.)
create function pgque._ticker_covered(i_queue_id int4, i_since timestamptz)
returns boolean language c volatile strict as 'MODULE_PATHNAME', 'pgque_ticker_covered';

-- The queues a watchdog pass could not inspect, and since when (the
-- watchdog process remembers them from pass to pass: src/watchdog.c).
create function pgque._watch_uninspected(i_queue_ids int4[], out queue_id int4, out since timestamptz)
returns setof record language c volatile strict as 'MODULE_PATHNAME', 'pgque_watch_uninspected';

-- ticker_stalled for the queues the pass could not inspect (their DDL lock
-- is taken: a drop_queue at work or stuck behind another lock) for longer
-- than the stall bound: the ticker cannot tick them either, and whether
-- events wait cannot be read (ADR 0040).
create function pgque._uninspected_conditions(i_queue_ids int4[], i_ticker_stalled_after interval)
returns setof pgque.alert_condition language sql volatile as $$
    select 'ticker_stalled'::text, q.queue_name, q.queue_name, null::text, null::int4,
           pg_catalog.jsonb_build_object(
               'last_tick', lt.tick_time,
               'seconds_since_tick', round(extract(epoch from pg_catalog.clock_timestamp() - lt.tick_time)::numeric, 1),
               'inspected', false,
               'uninspected_since', u.since,
               'reason', 'the queue''s DDL lock is taken (drop_queue)',
               'ticker_paused', q.queue_ticker_paused)
      from pgque._watch_uninspected(i_queue_ids) u
      join pgque.queue q on q.queue_id = u.queue_id
      join lateral (select * from pgque.tick t where t.tick_queue = q.queue_id
                     order by t.tick_id desc limit 1) lt on true
     where not q.queue_external_ticker
       and u.since < pg_catalog.clock_timestamp() - i_ticker_stalled_after
       and lt.tick_time < pg_catalog.clock_timestamp() - i_ticker_stalled_after
$$;

create function pgque._alert_where(a pgque.alert)
returns text language sql immutable as $$
    select case when a.queue_name is not null then pg_catalog.format('queue "%s"', a.queue_name)
                else pg_catalog.format('"%s"', a.subject) end
           operator(pg_catalog.||) case when a.consumer is not null
                                        then pg_catalog.format(', consumer "%s"', a.consumer) else '' end
           operator(pg_catalog.||) coalesce(', slot ' operator(pg_catalog.||) a.slot::pg_catalog.text, '')
$$;

-- The bound ticker_stalled opens at: one watchdog pass early, so that it
-- is open before a waiting event's latency reaches ticker_stalled_after
-- (ADR 0028); never earlier than half the threshold, which stays well
-- above a healthy ticker's worst case (ticker_max_lag, 3 s by default).
create function pgque._ticker_stalled_lead()
returns interval language sql stable as $$
    select greatest(pgque._guc_interval('pgque_bgw.ticker_stalled_after')
                      operator(pg_catalog.-) pgque._guc_interval('pgque_bgw.watchdog_interval'),
                    pgque._guc_interval('pgque_bgw.ticker_stalled_after') operator(pg_catalog./) 2)
$$;

-- The grace of rotation_pinned and long_transaction: two maintenance
-- passes and a watchdog pass.
create function pgque._rotation_grace()
returns interval language sql stable as $$
    select 2 operator(pg_catalog.*) pgque._guc_interval('pgque_bgw.maint_interval')
           operator(pg_catalog.+) pgque._guc_interval('pgque_bgw.watchdog_interval')
$$;

-- Open an alert: its row, a WARNING naming it with its kind's hint, a
-- NOTIFY.  The watchdog's pass opens what became true; an event that is
-- its own cause opens it at once (unlogged_reset, sql/23_unlogged.sql).  An
-- alert of that kind and subject already open takes the new details and
-- is said again.  -> the row.
create function pgque._alert_open(c pgque.alert_condition)
returns pgque.alert language plpgsql
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    a  pgque.alert;
begin
    insert into pgque.alert (kind, subject, queue_name, consumer, slot, details)
    values (c.kind, c.subject, c.queue_name, c.consumer, c.slot, c.details)
    on conflict (kind, subject) where cleared_at is null do update set details = excluded.details
    returning * into a;
    raise warning 'pgque_bgw alert % opened: %: %', c.kind, pgque._alert_where(a), c.details
        -- a NULL hint would make RAISE fail and with it the whole pass
        using hint = coalesce((select k.hint from pgque._alert_kinds() k where k.kind = c.kind),
                              'See docs/alerts.md for what to do.');
    -- any role may LISTEN: the payload names the alert, pgque.alerts
    -- (which needs pgque rights) has what it is about
    perform pg_catalog.pg_notify('pgque_alert', pg_catalog.jsonb_build_object(
        'event', 'opened', 'alert_id', a.alert_id, 'kind', a.kind)::text);
    return a;
end $$;

-- Open what became true, clear what stopped being true.  The thresholds
-- are the settings' (the watchdog passes none); a test passes its own.
-- -> (opened, cleared)
create function pgque._watchdog_pass(
    i_slot_unpolled_after interval default pgque._guc_interval('pgque_bgw.slot_unpolled_after'),
    i_slot_stale_after interval default pgque._guc_interval('pgque_bgw.slot_stale_after'),
    i_lag_alert_after interval default pgque._guc_interval('pgque_bgw.lag_alert_after'),
    i_ticker_stalled_after interval default pgque._ticker_stalled_lead(),
    i_rotation_grace interval default pgque._rotation_grace(),
    out opened int4, out cleared int4)
language plpgsql
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    conds       pgque.alert_condition[];
    c           pgque.alert_condition;
    a           pgque.alert;
    skip        int4[];
    seen        text[];
begin
    opened := 0;
    cleared := 0;
    -- The open alerts, read before any condition (ADR 0112): the pass
    -- clears only these, each as it was then ('alert_id/xmin': its row
    -- version, by the transaction that wrote it).  Every read of a
    -- condition below takes a snapshot of its own, later than this one; an
    -- alert opened (or opened again) after it, by the transaction that is
    -- its own cause (an unlogged queue's reset) or by another pass, may
    -- have a condition this pass read before it committed: the next pass,
    -- whose reads all follow it, decides.
    seen := array(select x.alert_id::text || '/' || x.xmin::text
                    from pgque.alert x where x.cleared_at is null);
    -- The pass reads the queues' sequences and event tables, each under
    -- its DDL lock taken shared, held to the end of the pass (ADR 0020).
    -- A queue whose lock is taken (drop_queue at work) is left out, not
    -- waited for: the others are inspected, its alerts stay as they are,
    -- and one left out for longer than the stall bound opens
    -- ticker_stalled (ADR 0040).
    skip := array(select q.queue_id from pgque.queue q
                   where not pgque._queue_try_share(q.queue_id) order by q.queue_id);
    -- drained resizes switch to their new layout (ADR 0030)
    perform pgque._resize_complete_drained();
    -- the drained resizes the switch left (a lock it waits for): noted, so
    -- that a later pass can tell a switch that never comes (switch_pending)
    update pgque.partition_resize r set drained_seen_at = pg_catalog.now()
     where (r.queue_id, r.co_name) in (select x.queue_id, x.co_name from pgque.partition_resize x
                                        where x.drained_seen_at is null and x.queue_id <> all (skip)
                                          and pgque._resize_drained(x)
                                          for update skip locked);
    conds := array(select x from pgque._alert_conditions(i_slot_unpolled_after, i_slot_stale_after,
                                                         i_lag_alert_after, i_ticker_stalled_after,
                                                         i_rotation_grace, skip) x)
             || array(select x from pgque._uninspected_conditions(skip, i_ticker_stalled_after) x);
    -- a resize that drained after the switch was tried above is not
    -- orphaned state (key_state_orphaned switch_pending): try once more
    if exists (select 1 from pg_catalog.unnest(conds) n
                where n.kind = 'key_state_orphaned' and n.details->'reasons' ? 'switch_pending')
       and pgque._resize_complete_drained() > 0 then
        conds := array(select x from pgque._alert_conditions(i_slot_unpolled_after, i_slot_stale_after,
                                                             i_lag_alert_after, i_ticker_stalled_after,
                                                             i_rotation_grace, skip) x)
                 || array(select x from pgque._uninspected_conditions(skip, i_ticker_stalled_after) x);
    end if;

    for c in select * from pg_catalog.unnest(conds) n
              where not exists (select 1 from pgque.alert x
                                 where x.cleared_at is null and x.kind = n.kind and x.subject = n.subject)
              order by n.kind, n.subject loop
        perform pgque._alert_open(c);
        opened := opened + 1;
    end loop;

    -- what stopped being true (read once, as a set), of the alerts open
    -- before the conditions were read and not written since (ADR 0112)
    for a in update pgque.alert x set cleared_at = now()
              where x.alert_id = any (array(
                        select o.alert_id from pgque.alert o
                         where o.cleared_at is null
                           and o.kind <> 'worker_down'  -- _worker_down_pass's (sql/43_worker_alerts.sql)
                           -- a queue left out of this pass keeps its alerts
                           and not exists (select 1 from pgque.queue sq
                                            where sq.queue_id = any (skip) and sq.queue_name = o.queue_name)
                           and not exists (select 1 from pg_catalog.unnest(conds) n
                                            where n.kind = o.kind and n.subject = o.subject)))
                and x.cleared_at is null
                and x.alert_id::text || '/' || x.xmin::text = any (seen)
             returning x.* loop
        raise log 'pgque_bgw alert % cleared: %, open since %', a.kind, pgque._alert_where(a), a.opened_at;
        perform pg_catalog.pg_notify('pgque_alert', pg_catalog.jsonb_build_object(
            'event', 'cleared', 'alert_id', a.alert_id, 'kind', a.kind)::text);
        cleared := cleared + 1;
    end loop;
    perform pgque._maint_failure_settle();
end $$;

-- An alert row past its retention: cleared longer ago than i_retention.
-- The rows maint_alerts deletes, and the has-work of its maintenance step
-- in maint_operations() (ADR 0100).
create function pgque._alert_expired(a pgque.alert, i_retention interval)
returns boolean language sql stable as $$
    select a.cleared_at is not null and a.cleared_at < pg_catalog.now() - i_retention
$$;

-- The retention of the alert history the maintenance step keeps
-- (pgque_bgw.alert_retention; NULL without the library: nothing expires).
create function pgque._alert_retention()
returns interval language sql stable as $$
    select pgque._guc_interval('pgque_bgw.alert_retention')
$$;

-- Alert history retention (the maintenance worker runs it).  -> rows deleted
create function pgque.maint_alerts(i_retention interval default '7 days')
returns int4 language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    n int4;
begin
    perform pgque._check_interval('retention', i_retention, true);
    delete from pgque.alert a where pgque._alert_expired(a, i_retention);
    get diagnostics n = row_count;
    return n;
end $$;
