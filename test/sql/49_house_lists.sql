-- The lists the loops walk and the rules written once (issue #29, ADR
-- 0065), workers off: the maintenance step list that maint() and the
-- worker both walk, the alert-kind registry, the settings read through one
-- C function (defaults only in guc.c), the window predicate from C; bad
-- input to each, and no role below the owner reaches them.
create role pgque_t49_login login;
create role pgque_t49_admin in role pgque_admin;
create role pgque_t49_owner login;   -- a role with CREATE only
grant create on database contrib_regression to pgque_t49_owner;
grant usage on schema pgque_test to public;
select pgque.create_queue('hl');   -- maint() acts only once a queue exists

-- the settings: the value of pg_settings, in its base unit, unset as set
select s.name, pgque._setting(s.name) as base_units,
       pgque._setting(s.name) = s.setting::float8 * case s.unit when 'ms' then 0.001 when 'kB' then 1024 else 1 end
         as agrees_with_pg_settings
  from pg_settings s
 where s.name in ('pgque_bgw.ticker_stalled_after', 'pgque_bgw.tick_interval', 'pgque_bgw.worker_memory_limit',
                  'pgque_bgw.alert_retention', 'pgque_bgw.max_slots')
 order by 1;
select pgque._guc_interval('pgque_bgw.lag_alert_after') as lag_alert_after;
select pgque._setting(null) is null as null_in_null_out;
select v.what, pgque_test.error_of(v.sql) as error from (values
 ('not ours',    $$select pgque._setting('work_mem')$$),
 ('unknown',     $$select pgque._setting('pgque_bgw.no_such_setting')$$),
 ('not integer', $$select pgque._setting('pgque_bgw.enabled')$$),
 ('a list',      $$select pgque._setting('pgque_bgw.databases')$$),
 ('prefix only', $$select pgque._setting('pgque_bgw.')$$)) v(what, sql);

-- the maintenance steps: rotation step 2 before and after step 1, the
-- cooperative groups before the tick history (which reads their cursors),
-- every call a function of the extension, names as maint_failure records
select step_no, step, per_queue, due, counted, again_at, wakes_ticker, report
  from pgque._maint_steps() order by step_no;
select count(*) filter (where not exists (
           select from pg_proc p where p.pronamespace = 'pgque'::regnamespace
              and p.proname = split_part(split_part(s.call, '(', 1), '.', 2))) as calls_unknown,
       bool_and(s.call like 'pgque.%') as calls_qualified,
       bool_and(s.per_queue = (s.call like '%$1%')) as queue_steps_take_the_queue
  from pgque._maint_steps() s;
-- maint() walks the same list: a cleared alert older than the retention
-- goes (the worker's step, which maint() did not run before), a newer stays
insert into pgque.alert (kind, subject, opened_at, cleared_at)
values ('maint_failed', 'old', now() - interval '9 days', now() - interval '8 days'),
       ('maint_failed', 'new', now() - interval '2 days', now() - interval '1 day');
select pgque.maint() >= 0 as maint_ran;
select subject from pgque.alert where kind = 'maint_failed' and subject in ('old', 'new') order by 1;
delete from pgque.alert where subject = 'new';

-- the registry: a kind once, a known severity, a threshold that is a
-- setting, a conditions function that exists and returns conditions
select count(*) = count(distinct kind) as kinds_unique,
       bool_and(severity in ('warning', 'critical')) as severities_known,
       bool_and(threshold is null or threshold in (select name from pg_settings)) as thresholds_are_settings,
       bool_and(hint is not null and hint <> '') as every_kind_has_a_hint
  from pgque._alert_kinds();
select k.kind, p.prorettype = 'pgque.alert_condition'::regtype as returns_conditions,
       p.proretset as set_returning, p.pronargs - p.pronargdefaults as required_args
  from pgque._alert_kinds() k join pg_proc p on p.oid = k.conditions::regproc
 order by 1;
-- each conditions function runs with no argument, with no alert to open
select k.kind, pgque_test.error_of(format('select count(*) from %s()', k.conditions)) as error
  from pgque._alert_kinds() k where k.conditions is not null order by 1;

-- the watchdog's thresholds are the settings', read in SQL: ticker_stalled
-- one watchdog pass early (at least half its bound), rotation's grace two
-- maintenance passes and a watchdog pass; a pass with no argument runs
select pgque._ticker_stalled_lead() as ticker_stalled_lead, pgque._rotation_grace() as rotation_grace;
select pgque._ticker_stalled_lead() = greatest(pgque._guc_interval('pgque_bgw.ticker_stalled_after')
                                               - pgque._guc_interval('pgque_bgw.watchdog_interval'),
                                               pgque._guc_interval('pgque_bgw.ticker_stalled_after') / 2)
         as lead_rule;
-- (what it opens depends on the earlier tests' state: its warnings are
-- not shown and its rows rolled back)
begin;
set local client_min_messages = error;
select opened >= 0 and cleared >= 0 as pass_with_the_settings from pgque._watchdog_pass();
rollback;

-- the window predicate: C's text with the caller's parameter numbers
select pgque._window_where(1, 2, 6, 7) like '%$1%$2%any($6)%$7)' as numbered;
select v.what, pgque_test.error_of(v.sql) as error from (values
 ('zero',  $$select pgque._window_where(0, 2, 3, 4)$$),
 ('huge',  $$select pgque._window_where(1, 2, 3, 1000)$$),
 ('minus', $$select pgque._window_where(1, -2, 3, 4)$$)) v(what, sql);
select pgque._window_where(null, 2, 3, 4) is null as null_in_null_out;

-- the owner the hooks and the workers run as: pgque_owner
select pgque._owner() = 'pgque_owner'::regrole as owner_is_pgque_owner;

-- nobody below the owner reaches them: a LOGIN-only role, a role with
-- CREATE on the database, pgque_admin
set role pgque_t49_login;
select pgque_test.error_of($$select pgque._setting('pgque_bgw.lag_alert_after')$$) as login_setting,
       pgque_test.error_of($$select * from pgque._maint_steps()$$) as login_steps;
reset role;
set role pgque_t49_owner;
select pgque_test.error_of($$select * from pgque._alert_kinds()$$) as create_only_kinds,
       pgque_test.error_of($$select pgque._window_where(1, 2, 3, 4)$$) as create_only_where;
reset role;
set role pgque_t49_admin;
select pgque_test.error_of($$select pgque._setting('pgque_bgw.lag_alert_after')$$) as admin_setting,
       pgque_test.error_of($$select pgque._owner()$$) as admin_owner,
       pgque_test.error_of($$select * from pgque._maint_steps()$$) as admin_steps;
-- an admin runs maint(), which walks the list as the owner
select pgque.maint() >= 0 as admin_maint;
reset role;

drop role pgque_t49_login, pgque_t49_admin;
revoke create on database contrib_regression from pgque_t49_owner;
drop role pgque_t49_owner;
select pgque.drop_queue('hl');
