-- 0.2.0 -> 0.3.0, hand-written steps that need the 0.3.0 functions or
-- change rows: they run after every function was replayed (ADR 0019, 0042).

-- Idempotency keys belong to the sending role (the column came in the pre
-- step): the claims of 0.2.0 had no owner and keep role 0, which every
-- role still matches until the claim expires (at most 30 days), so an
-- update never lets a duplicate through.
update pgque.idem set idem_role = 0::pg_catalog.oid::pg_catalog.regrole;
alter table pgque.idem alter column idem_role set not null;
alter table pgque.idem add constraint idem_pkey primary key (queue_id, idem_role, idem_key);

-- Per-queue rights (ADR 0047, columns added in the pre step): every queue
-- of 0.2.0 gets the defaults a new queue gets, "send" for pgque_writer and
-- "subscribe" for pgque_reader, so the applications using the documented
-- roles keep working.
update pgque.queue set queue_senders = '{pgque_writer}', queue_subscribers = '{pgque_reader}';
alter table pgque.queue alter column queue_senders set default '{pgque_writer}',
                        alter column queue_senders set not null,
                        alter column queue_subscribers set default '{pgque_reader}',
                        alter column queue_subscribers set not null;

-- Per-consumer users (ADR 0058, columns added in the pre step): the
-- consumers of 0.2.0 stay private to the role that subscribed them, as they
-- were; an owner or an admin shares one with grant_consumer().  Only a
-- consumer an admin subscribes from 0.3.0 on starts shared.
update pgque.subscription set sub_users = '{}';
update pgque.partition_consumer set users = '{}';
alter table pgque.subscription alter column sub_users set default '{}',
                               alter column sub_users set not null;
alter table pgque.partition_consumer alter column users set default '{}',
                                     alter column users set not null;

-- One tick window per batch (ADR 0057, column added in the pre step): a
-- consumer of 0.2.0 got merged windows without asking; after the update it
-- gets one window per batch, as PgQue, until set_consumer_config turns
-- merging back on.
update pgque.subscription set sub_merge_windows = false;
alter table pgque.subscription alter column sub_merge_windows set default false,
                               alter column sub_merge_windows set not null;

-- Retention and replay (ADR 0067, columns added in the pre step): 0.2.0 did
-- not record the switch before the current one, so a queue of 0.2.0 counts
-- only its current table's span as whole (as if the other tables had been
-- truncated) and reads every table for
-- a window that starts before the current switch's step 2 (its step 1
-- while step 2 is still to come): replay reaches back to the last switch,
-- never to a window part of which was truncated.
update pgque.queue
   set queue_prev_step2 = coalesce(queue_switch_step2, queue_switch_step1),
       queue_truncated_xid = coalesce(queue_switch_step2, queue_switch_step1);

-- The grantee anchor (ADR 0079): the lists above name only the extension's
-- roles, anchored by sql/90_grants.sql; 0.2.0 had no lists, so no role
-- needs an anchor here and no OID in them can be stale.

-- ticker_loop()'s default duration is PgQue's one pg_cron slot (1 s) from
-- 0.3.0 on; the jobs 0.2.0's start() scheduled call it without arguments
-- once a minute, and would tick for one second of every minute.  They get
-- the explicit 59 s start() now schedules, where this role may change
-- them (a superuser; pg_cron lets a role change only its own jobs); else a
-- WARNING says to call start() again.
do $$
declare
    n int8;
begin
    -- pg_cron's own table only (a superuser installs pg_cron): a role with
    -- CREATE on the database could make a schema cron with a table job and
    -- a trigger on it, run by whoever updates (issue #25's rule: an update
    -- never touches what another role can make)
    if not exists (select from pg_catalog.pg_depend d
                     join pg_catalog.pg_extension e on e.oid = d.refobjid
                    where d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass
                      and d.objid = pg_catalog.to_regclass('cron.job')
                      and d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass
                      and d.deptype = 'e' and e.extname = 'pg_cron') then
        return;
    end if;
    begin
        execute 'update cron.job set command = $1 where command = $2 and jobname = $3'
          using 'call pgque.ticker_loop(''59 seconds'')', 'call pgque.ticker_loop()',
                'pgque_ticker_' || pg_catalog.current_database();
        get diagnostics n = row_count;
    exception when insufficient_privilege then
        n := -1;
    end;
    if n < 0 then
        raise warning 'the pg_cron job that calls pgque.ticker_loop() was not updated: it would tick one second a minute'
            using detail = 'ticker_loop() now runs for 1 s by default, PgQue''s pg_cron slot.',
                  hint = 'As the role that called pgque.start(), call pgque.start() again: it schedules ticker_loop(''59 seconds'').';
    end if;
end $$;

-- Consumer owners are anchored (ADR 0071): the owners of 0.2.0's consumers
-- get their anchor, so that they keep using them, DROP ROLE refuses them
-- and a dump names them; a consumer whose owner 0.2.0 let be dropped
-- passes to pgque_admin (a bare OID a dump would write onto another role).
select pgque._anchor_owner(o.role)
  from (select distinct s.sub_owner as role from pgque.subscription s
        union select pc.owner from pgque.partition_consumer pc) o
 where exists (select from pg_catalog.pg_roles r where r.oid = o.role);
select pgque._maint_stale_roles();
-- Unlogged queues (ADR 0068, column added in the pre step): every queue of
-- 0.2.0 is logged.
update pgque.queue set queue_unlogged = false;
alter table pgque.queue alter column queue_unlogged set default false,
                        alter column queue_unlogged set not null;
