-- The privilege matrix of pgque_bgw (issue #11), run by pg_prove from
-- `make test` (test/run.sh) in a throwaway cluster.
--
-- Six roles: a plain login role (what PUBLIC gets), pgque_writer,
-- pgque_reader (application 1), pgque_admin, the reader of another
-- application (app2, a second role granted pgque_reader) and the owner of
-- the extension (a non-superuser that installed it: a trusted install).
-- Since ADR 0042 that owner owns no object (pgque_owner does): it holds, by
-- name, what the three roles hold on the extension's members, and
-- uninstall().
--
-- 1. Functions: who may execute each public function (every function of
--    schema pgque not starting with "_"), from the catalog, against the
--    matrix written below.  A function without a row, or a row without a
--    function, fails: a new function needs its row.
-- 2. Internal functions ("_") are executable by nobody but the owner.
-- 3. Tables, views and sequences of the schema likewise (a queue's event
--    tables and sequences, bucketed or not, under the name event_Q...).
-- 4. Per-queue rights (ADR 0047, issue #25 item 7): who may send to and
--    subscribe to (and receive from) a queue, by the calls that use them.
-- The per-consumer rules are in consumer_owner.sql.
\ir setup.psql

-------------------------------------------------------------------------------
-- 1. functions: who may execute each public function
create temp table expected_fn (fn text primary key, roles text not null);
insert into expected_fn values
    ('pgque.ack(bigint)', 'reader admin app2 owner'),
    ('pgque.ack_partitioned(text,text,integer,integer,text)', 'reader admin app2 owner'),
    ('pgque.batch_retry(bigint,integer)', 'admin owner'),
    ('pgque.claim_any_slot(text,text,text,interval)', 'reader admin app2 owner'),
    ('pgque.claim_slot(text,text,integer,text,interval)', 'reader admin app2 owner'),
    ('pgque.consumer_stats()', 'reader admin app2 owner'),
    ('pgque.create_queue(text)', 'admin owner'),
    ('pgque.create_queue(text,jsonb)', 'admin owner'),
    ('pgque.dlq_inspect(text,integer)', 'reader admin app2 owner'),
    ('pgque.dlq_purge(text,interval)', 'admin owner'),
    ('pgque.dlq_replay(bigint)', 'writer admin owner'),
    ('pgque.dlq_replay_all(text)', 'writer admin owner'),
    ('pgque.drop_queue(text)', 'admin owner'),
    ('pgque.drop_queue(text,boolean)', 'admin owner'),
    ('pgque.event_dead(bigint,bigint,text,timestamp with time zone,xid8,integer,text,text,text,text,text,text)', 'admin owner'),
    ('pgque.error_rate(text,interval,interval)', 'reader admin app2 owner'),
    ('pgque.event_retry(bigint,bigint,integer)', 'reader admin app2 owner'),
    ('pgque.event_retry(bigint,bigint,timestamp with time zone)', 'reader admin app2 owner'),
    ('pgque.finish_batch(bigint)', 'reader admin app2 owner'),
    ('pgque.force_next_tick(text)', 'admin owner'),
    ('pgque.force_tick(text)', 'admin owner'),
    ('pgque.get_batch_cursor(bigint,text,integer)', 'admin owner'),
    ('pgque.get_batch_cursor(bigint,text,integer,text)', 'admin owner'),
    ('pgque.get_batch_events(bigint)', 'reader admin app2 owner'),
    ('pgque.get_batch_info(bigint)', 'reader admin app2 owner'),
    ('pgque.get_consumer_config(text,text,text)', 'reader admin app2 owner'),
    ('pgque.set_consumer_config(text,text,text,text)', 'reader admin app2 owner'),
    ('pgque.get_consumer_info()', 'reader admin app2 owner'),
    ('pgque.get_consumer_info(text)', 'reader admin app2 owner'),
    ('pgque.get_consumer_info(text,text)', 'reader admin app2 owner'),
    ('pgque.get_partition_resize_info()', 'reader admin app2 owner'),
    ('pgque.get_partition_slot_info()', 'reader admin app2 owner'),
    ('pgque.get_blocked_keys()', 'reader admin app2 owner'),
    ('pgque.get_failure_policy(text,text)', 'reader admin app2 owner'),
    ('pgque.set_failure_policy(text,text,text)', 'reader admin app2 owner'),
    ('pgque.subscribe_slot(text,text,integer,integer,text)', 'reader admin app2 owner'),
    ('pgque.get_queue_info()', 'reader admin app2 owner'),
    ('pgque.grant_queue(text,regrole,text)', 'admin owner'),
    ('pgque.grant_consumer(text,text,regrole)', 'reader admin app2 owner'),
    ('pgque.revoke_consumer(text,text,regrole)', 'reader admin app2 owner'),
    ('pgque.revoke_queue(text,regrole,text)', 'admin owner'),
    ('pgque.get_queue_info(text)', 'reader admin app2 owner'),
    ('pgque.in_flight(text)', 'reader admin app2 owner'),
    ('pgque.insert_event(text,text,text)', 'writer admin owner'),
    ('pgque.jsontriga()', 'admin owner'),
    ('pgque.logutriga()', 'admin owner'),
    ('pgque.insert_event(text,text,text,text,text,text,text)', 'writer admin owner'),
    ('pgque.insert_event_bulk(text,text,text[])', ''),
    ('pgque.maint()', 'admin owner'),
    ('pgque.maint_alerts(interval)', 'admin owner'),
    ('pgque.maint_deliver_delayed()', 'admin owner'),
    ('pgque.maint_idem()', 'admin owner'),
    ('pgque.maint_idem(text)', 'admin owner'),
    ('pgque.maint_retry_events()', 'admin owner'),
    ('pgque.maint_rotate_tables_step1(text)', 'admin owner'),
    ('pgque.maint_rotate_tables_step2()', 'admin owner'),
    ('pgque.maint_tick_cleanup()', 'admin owner'),
    -- PgQ's low-level functions (issue #27 item 7; PgQue: pgque_admin)
    ('pgque.current_event_table(text)', 'admin owner'),
    ('pgque.quote_fqname(text)', 'admin owner'),
    ('pgque.batch_event_sql(bigint)', 'admin owner'),
    ('pgque.batch_event_tables(bigint)', 'admin owner'),
    ('pgque.seq_getval(text)', 'admin owner'),
    ('pgque.seq_setval(text,bigint)', 'admin owner'),
    ('pgque.maint_operations()', 'admin owner'),
    ('pgque.maint_tables_to_vacuum()', 'admin owner'),
    ('pgque.insert_event_raw(text,bigint,timestamp with time zone,integer,integer,text,text,text,text,text,text)', 'admin owner'),
    ('pgque.event_retry_raw(text,text,timestamp with time zone,bigint,timestamp with time zone,integer,text,text,text,text,text,text)', 'admin owner'),
    ('pgque.find_tick_helper(integer,bigint,timestamp with time zone,bigint,bigint,interval)', 'admin owner'),
    ('pgque.grant_perms(text)', 'admin owner'),
    ('pgque.tune_storage(text)', 'admin owner'),
    ('pgque.upgrade_schema()', 'admin owner'),
    ('pgque.metrics()', 'reader admin app2 owner'),
    ('pgque.nack(bigint,pgque.message,interval,text)', 'reader admin app2 owner'),
    ('pgque.nack_partitioned(text,text,integer,integer,text,pgque.message,interval,text)', 'reader admin app2 owner'),
    ('pgque.next_batch(text,text)', 'reader admin app2 owner'),
    ('pgque.next_batch_custom(text,text,interval,integer,interval)', 'reader admin app2 owner'),
    ('pgque.next_batch_info(text,text)', 'reader admin app2 owner'),
    ('pgque.partition_n(text,text)', 'reader admin app2 owner'),
    ('pgque.pause_queue(text)', 'admin owner'),
    ('pgque.otel_metrics()', 'reader admin app2 owner'),
    ('pgque.queue_health()', 'reader admin app2 owner'),
    ('pgque.queue_stats()', 'reader admin app2 owner'),
    ('pgque.receive(text,text,integer)', 'reader admin app2 owner'),
    ('pgque.receive_partitioned(text,text,integer,integer,text,integer)', 'reader admin app2 owner'),
    ('pgque.receive_coop(text,text,text,integer,interval)', 'reader admin app2 owner'),
    ('pgque.receive_wait(text,text,integer,interval)', 'reader admin app2 owner'),
    ('pgque.register_subconsumer(text,text,text,boolean)', 'reader admin app2 owner'),
    ('pgque.subscribe_subconsumer(text,text,text,boolean)', 'reader admin app2 owner'),
    ('pgque.unregister_subconsumer(text,text,text,integer)', 'reader admin app2 owner'),
    ('pgque.unsubscribe_subconsumer(text,text,text,integer)', 'reader admin app2 owner'),
    ('pgque.touch_subconsumer(text,text,text)', 'reader admin app2 owner'),
    ('pgque.next_batch(text,text,text,interval)', 'reader admin app2 owner'),
    ('pgque.next_batch_custom(text,text,text,interval,integer,interval,interval)', 'reader admin app2 owner'),
    ('pgque.register_consumer(text,text)', 'reader admin app2 owner'),
    ('pgque.register_consumer_at(text,text,bigint)', 'reader admin app2 owner'),
    ('pgque.release_slot(text,text,integer,text)', 'reader admin app2 owner'),
    ('pgque.resize_partitioned(text,text,integer)', 'reader admin app2 owner'),
    ('pgque.resume_queue(text)', 'admin owner'),
    ('pgque.send(text,jsonb)', 'writer admin owner'),
    ('pgque.send(text,text)', 'writer admin owner'),
    ('pgque.send(text,text,jsonb)', 'writer admin owner'),
    ('pgque.send(text,text,jsonb,text)', 'writer admin owner'),
    ('pgque.send(text,text,text)', 'writer admin owner'),
    ('pgque.send(text,text,text,text)', 'writer admin owner'),
    ('pgque.send_at(text,text,jsonb,timestamp with time zone)', 'writer admin owner'),
    ('pgque.send_at(text,text,text,timestamp with time zone)', 'writer admin owner'),
    ('pgque.send_batch(text,jsonb[])', 'writer admin owner'),
    ('pgque.send_batch(text,text,jsonb[])', 'writer admin owner'),
    ('pgque.send_batch(text,text,jsonb[],text[])', 'writer admin owner'),
    ('pgque.send_batch(text,text,text[])', 'writer admin owner'),
    ('pgque.send_batch(text,text,text[],text[])', 'writer admin owner'),
    ('pgque.send_batch(text,text[])', 'writer admin owner'),
    ('pgque.send_idem(text,text,jsonb,text,interval,text)', 'writer admin owner'),
    ('pgque.send_idem(text,text,text,text,interval,text)', 'writer admin owner'),
    ('pgque.set_queue_config(text,text,text)', 'admin owner'),
    ('pgque.set_tick_period_ms(integer)', 'admin owner'),
    ('pgque.sqltriga()', 'admin owner'),
    ('pgque.start()', 'admin owner'),
    ('pgque.status()', 'admin owner'),
    ('pgque.launcher_workers()', 'admin owner'),
    ('pgque.stop()', 'admin owner'),
    ('pgque.stuck_consumers(interval)', 'reader admin app2 owner'),
    ('pgque.subscribe(text,text)', 'reader admin app2 owner'),
    ('pgque.subscribe(text,text,text)', 'reader admin app2 owner'),
    ('pgque.subscribe(text,text,timestamp with time zone)', 'reader admin app2 owner'),
    ('pgque.seek(text,text,text)', 'reader admin app2 owner'),
    ('pgque.seek(text,text,timestamp with time zone)', 'reader admin app2 owner'),
    ('pgque.subscribe_partitioned(text,text,integer,text)', 'reader admin app2 owner'),
    ('pgque.subscribe_partitioned(text,text,integer,timestamp with time zone)', 'reader admin app2 owner'),
    ('pgque.subscribe_slot(text,text,integer,integer)', 'reader admin app2 owner'),
    ('pgque.throughput(text,interval,interval)', 'reader admin app2 owner'),
    ('pgque.ticker()', 'admin owner'),
    ('pgque.ticker(text)', 'admin owner'),
    ('pgque.ticker(text,bigint,timestamp with time zone,bigint)', 'admin owner'),
    ('pgque.ticker_loop(interval,interval)', 'admin owner'),
    ('pgque.unregister_consumer(text,text)', 'reader admin app2 owner'),
    ('pgque.unsubscribe(text,text)', 'reader admin app2 owner'),
    ('pgque.uninstall()', 'owner'),
    ('pgque.unsubscribe_slot(text,text,integer)', 'reader admin app2 owner'),
    ('pgque.version()', 'reader admin app2 owner');

create temp view actual_fn as
    select p.oid::regprocedure::text as fn,
           coalesce((select string_agg(w.label, ' ' order by w.ord) from who w
                      where has_function_privilege(w.r, p.oid, 'execute')), '') as roles
      from pg_proc p
     where p.pronamespace = 'pgque'::regnamespace and p.proname !~ '^_';

select is_empty($$select fn from actual_fn except select fn from expected_fn$$,
                'every public function of pgque has a row in the expected matrix');
select is_empty($$select fn from expected_fn except select fn from actual_fn$$,
                'every row of the expected function matrix is a function of pgque');
select is(a.roles, e.roles, e.fn || ' is executable by: ' || e.roles)
  from expected_fn e left join actual_fn a using (fn)
 order by e.fn;

-- no EXECUTE granted to PUBLIC itself, on any function
select is_empty($$select p.oid::regprocedure::text from pg_proc p, aclexplode(p.proacl) a
                   where p.pronamespace = 'pgque'::regnamespace and a.grantee = 0$$,
                'no function of pgque is granted to PUBLIC');

-------------------------------------------------------------------------------
-- 2. internal functions: pgque_owner only (the extension's owner neither)
select cmp_ok((select count(*) from pg_proc where pronamespace = 'pgque'::regnamespace and proname ~ '^_'),
              '>=', 40::bigint, 'the internal functions are there to check');
select is_empty($$select p.oid::regprocedure::text || ' by ' || w.label
                    from pg_proc p, who w
                   where p.pronamespace = 'pgque'::regnamespace and p.proname ~ '^_'
                     and has_function_privilege(w.r, p.oid, 'execute')
                     and p.oid not in ('pgque._check_interval(text,interval,boolean)'::regprocedure,
                                       'pgque._preloaded()'::regprocedure, 'pgque._cron_jobs()'::regprocedure)$$,
                'no internal function is executable by any of the roles, the extension''s owner included');
-- but the three that entry points running as their caller call (ticker_loop,
-- start, stop: the pg_cron jobs run as the role that called start())
select is((select string_agg(w.label, ' ' order by w.ord) from who w
            where has_function_privilege(w.r, p.oid, 'execute')),
          'admin owner', p.oid::regprocedure::text || ' is executable by: admin owner')
  from pg_proc p
 where p.oid in ('pgque._check_interval(text,interval,boolean)'::regprocedure,
                 'pgque._preloaded()'::regprocedure, 'pgque._cron_jobs()'::regprocedure)
 order by 1;
select is_empty($$select p.oid::regprocedure::text from pg_proc p
                   where p.pronamespace = 'pgque'::regnamespace
                     and p.proowner <> 'pgque_owner'::regrole$$,
                'pgque_owner owns every function (ADR 0042)');
select is_empty($$select m.roleid::regrole::text || ' ' || m.member::regrole::text from pg_auth_members m
                   where m.roleid = 'pgque_owner'::regrole
                      or (m.member = 'pgque_owner'::regrole and m.roleid <> 'pg_read_all_stats'::regrole)$$,
                'nobody is a member of pgque_owner, and it is a member of pg_read_all_stats only');
-- the extension's owner (a trusted install) cannot replace code other roles
-- call (issue #25 item 8: a replaced logutriga() ran as the superuser whose
-- INSERT fired it, a replaced status() as the superuser or the exporter
-- that called it), nor attach code to the extension's tables
select is(pg_temp.error_as('pgque_t_owner', $$create or replace function pgque.status(out component text, out status text, out detail text)
                                              returns setof record language sql as 'select null::text, null::text, null::text'$$),
          '42501: permission denied for schema pgque', 'the extension''s owner cannot replace status()');
select is(pg_temp.error_as('pgque_t_owner', $$create or replace function pgque.logutriga() returns trigger
                                              language plpgsql as 'begin return null; end'$$),
          '42501: permission denied for schema pgque', 'the extension''s owner cannot replace logutriga()');
select is(pg_temp.error_as('pgque_t_owner', $$alter function pgque.metrics() owner to pgque_t_owner$$),
          '42501: must be owner of function metrics', 'the extension''s owner cannot take metrics()');
select is(pg_temp.error_as('pgque_t_owner', $$create trigger t before update on pgque.subscription
                                              for each row execute function pg_catalog.suppress_redundant_updates_trigger()$$),
          '42501: permission denied for table subscription', 'the extension''s owner cannot attach a trigger to pgque.subscription');

-------------------------------------------------------------------------------
-- 3. tables, views, sequences: each role's privileges (the extension's
-- owner holds the three roles' rights on the extension's members, none on
-- the queues' event tables, which are not members: it reads events through
-- the API) (a = insert, r =
-- select, w = update, d = delete, D = truncate, x = references, t = trigger;
-- sequences: r = select, w = update, U = usage; - = none).  Two queues make
-- the per-queue relations exist, one of them with partition buckets.
select ok(pg_temp.run_as('pgque_t_owner', $$select pgque.create_queue('mx') = 1 and pgque.create_queue('mxb') = 1
                                                  and pgque.set_queue_config('mxb', 'partition_buckets', '2') is not null$$)::boolean,
          'the owner creates queue mx, and mxb with 2 partition buckets');

create temp table expected_rel (rel text primary key, privs text not null);
insert into expected_rel values
    ('addressed_event', 'public:- writer:- reader:- admin:r app2:- owner:r'),
    ('alert', 'public:- writer:- reader:- admin:r app2:- owner:r'),
    ('alert_alert_id_seq', 'public:- writer:- reader:- admin:- app2:- owner:-'),
    ('alerts', 'public:- writer:- reader:r admin:r app2:r owner:r'),
    ('batch_id_seq', 'public:- writer:- reader:- admin:- app2:- owner:-'),
    ('config', 'public:- writer:- reader:- admin:r app2:- owner:r'),
    ('consumer', 'public:- writer:- reader:- admin:r app2:- owner:r'),
    ('consumer_co_id_seq', 'public:- writer:- reader:- admin:- app2:- owner:-'),
    ('coop_fence', 'public:- writer:- reader:- admin:r app2:- owner:r'),
    ('coop_member', 'public:- writer:- reader:- admin:r app2:- owner:r'),
    ('coop_window', 'public:- writer:- reader:- admin:r app2:- owner:r'),
    ('dead_letter', 'public:- writer:- reader:- admin:r app2:- owner:r'),
    ('dead_letter_dl_id_seq', 'public:- writer:- reader:- admin:- app2:- owner:-'),
    ('delayed_event', 'public:- writer:- reader:- admin:r app2:- owner:r'),
    ('delayed_events', 'public:- writer:- reader:- admin:r app2:- owner:r'),
    ('event_Q', 'public:- writer:- reader:- admin:r app2:- owner:-'),
    ('event_Q_0', 'public:- writer:- reader:- admin:r app2:- owner:-'),
    ('event_Q_0_bK', 'public:- writer:- reader:- admin:r app2:- owner:-'),
    ('event_Q_1', 'public:- writer:- reader:- admin:r app2:- owner:-'),
    ('event_Q_1_bK', 'public:- writer:- reader:- admin:r app2:- owner:-'),
    ('event_Q_2', 'public:- writer:- reader:- admin:r app2:- owner:-'),
    ('event_Q_2_bK', 'public:- writer:- reader:- admin:r app2:- owner:-'),
    ('event_Q_id_seq', 'public:- writer:- reader:- admin:- app2:- owner:-'),
    ('event_Q_tick_seq', 'public:- writer:- reader:- admin:- app2:- owner:-'),
    ('event_template', 'public:- writer:- reader:- admin:r app2:- owner:r'),
    ('idem', 'public:- writer:- reader:- admin:- app2:- owner:-'),
    ('grantee_anchor', 'public:- writer:r reader:r admin:r app2:r owner:r'),
    ('maint_failure', 'public:- writer:- reader:- admin:r app2:- owner:r'),
    ('partition_consumer', 'public:- writer:- reader:- admin:- app2:- owner:-'),
    ('partition_resize', 'public:- writer:- reader:- admin:- app2:- owner:-'),
    ('partition_resize_status', 'public:- writer:- reader:r admin:r app2:r owner:r'),
    ('partition_slot_status', 'public:- writer:- reader:r admin:r app2:r owner:r'),
    ('partition_slot', 'public:- writer:- reader:- admin:r app2:- owner:r'),
    ('consumer_rights', 'public:- writer:- reader:- admin:r app2:- owner:r'),
    ('blocked_key', 'public:- writer:- reader:- admin:r app2:- owner:r'),
    ('blocked_keys', 'public:- writer:- reader:r admin:r app2:r owner:r'),
    ('queue', 'public:- writer:- reader:- admin:r app2:- owner:r'),
    ('queue_rights', 'public:- writer:- reader:- admin:r app2:- owner:r'),
    ('queue_queue_id_seq', 'public:- writer:- reader:- admin:- app2:- owner:-'),
    ('retry_queue', 'public:- writer:- reader:- admin:r app2:- owner:r'),
    ('slot_batch', 'public:- writer:- reader:- admin:r app2:- owner:r'),
    ('slot_epoch_seq', 'public:- writer:- reader:- admin:- app2:- owner:-'),
    ('space_reserve_template', 'public:- writer:- reader:- admin:- app2:- owner:-'),
    ('state_seal', 'public:- writer:- reader:- admin:r app2:- owner:r'),
    ('subscription', 'public:- writer:- reader:- admin:r app2:- owner:r'),
    ('subscription_sub_id_seq', 'public:- writer:- reader:- admin:- app2:- owner:-'),
    ('tick', 'public:- writer:- reader:- admin:r app2:- owner:r'),
    ('unlogged_seal', 'public:- writer:- reader:- admin:r app2:- owner:r');

create temp view actual_rel as
    select c.oid::regclass::text as relname,
           regexp_replace(regexp_replace(c.relname, '^event_[0-9]+', 'event_Q'), '_b[0-9]+$', '_bK') as rel,
           (select string_agg(w.label || ':' || coalesce(nullif(
                case when c.relkind = 'S' then
                    concat(case when has_sequence_privilege(w.r, c.oid, 'select') then 'r' end,
                           case when has_sequence_privilege(w.r, c.oid, 'update') then 'w' end,
                           case when has_sequence_privilege(w.r, c.oid, 'usage') then 'U' end)
                else
                    concat(case when has_table_privilege(w.r, c.oid, 'insert') then 'a' end,
                           case when has_table_privilege(w.r, c.oid, 'select') then 'r' end,
                           case when has_table_privilege(w.r, c.oid, 'update') then 'w' end,
                           case when has_table_privilege(w.r, c.oid, 'delete') then 'd' end,
                           case when has_table_privilege(w.r, c.oid, 'truncate') then 'D' end,
                           case when has_table_privilege(w.r, c.oid, 'references') then 'x' end,
                           case when has_table_privilege(w.r, c.oid, 'trigger') then 't' end)
                end, ''), '-'), ' ' order by w.ord)
              from who w) as privs
      from pg_class c
     where c.relnamespace = 'pgque'::regnamespace and c.relkind in ('r', 'p', 'v', 'm', 'S', 'f');

select is_empty($$select relname from actual_rel where rel not in (select rel from expected_rel)$$,
                'every table, view and sequence of pgque has a row in the expected matrix');
select is_empty($$select rel from expected_rel except select rel from actual_rel$$,
                'every row of the expected relation matrix is a relation of pgque');
select is(a.privs, e.privs, a.relname || ': ' || e.privs)
  from actual_rel a join expected_rel e using (rel)
 order by a.relname;
select is_empty($$select c.oid::regclass::text from pg_class c, aclexplode(c.relacl) a
                   where c.relnamespace = 'pgque'::regnamespace and a.grantee = 0$$,
                'no table, view or sequence of pgque is granted to PUBLIC');

-- the schema: USAGE for the three roles (and the owner), not for PUBLIC
select is((select string_agg(w.label, ' ' order by w.ord) from who w
            where has_schema_privilege(w.r, 'pgque', 'usage')),
          'writer reader admin app2 owner', 'schema pgque: usage for writer reader admin app2 owner');
select is((select string_agg(w.label, ' ' order by w.ord) from who w
            where has_schema_privilege(w.r, 'pgque', 'create')),
          null, 'schema pgque: create for none of them, the extension''s owner included (pgque_owner owns it)');

-------------------------------------------------------------------------------
-- 4. per-queue rights (ADR 0047).  Application 1 (pgque_t_reader,
-- pgque_t_writer) isolates queue "iso": it revokes the defaults from the
-- cluster-wide pgque_reader / pgque_writer and grants its own roles.
-- Application 2's reader (pgque_t_app2) and writer (pgque_t_app2w, made
-- here) hold the pgque roles but no right on "iso".
create role pgque_t_app2w login in role pgque_writer;
select is(pg_temp.run_as('pgque_t_admin', $$select pgque.create_queue('iso')$$), '1', 'admin creates queue iso');
select is(pg_temp.run_as('pgque_t_admin', $$select string_agg(queue_right || '=' || grantee::text, ' ' order by queue_right)
                                             from pgque.queue_rights where queue_name = 'iso'$$),
          'send=pgque_writer subscribe=pgque_reader', 'a new queue: send for pgque_writer, subscribe for pgque_reader, nothing for PUBLIC');
select is(pg_temp.run_as('pgque_t_admin', $$select pgque.revoke_queue('iso', 'pgque_reader', 'subscribe')
                                                 + pgque.revoke_queue('iso', 'pgque_writer', 'send')
                                                 + pgque.grant_queue('iso', 'pgque_t_reader', 'subscribe')
                                                 + pgque.grant_queue('iso', 'pgque_t_writer', 'send')$$), '4',
          'admin narrows iso to application 1''s roles');
select is(pg_temp.run_as('pgque_t_owner', $$select pgque.grant_queue('iso', 'pgque_t_writer', 'send')$$), '0',
          'the extension''s owner may grant too; a right held already: 0');
select pg_temp.denied('pgque_t_reader', $$select pgque.grant_queue('iso', 'pgque_t_app2', 'subscribe')$$,
                      'a grantee reader cannot grant the queue on');
select pg_temp.denied('pgque_t_writer', $$select pgque.revoke_queue('iso', 'pgque_t_reader', 'subscribe')$$,
                      'a grantee writer cannot revoke');

-- the attack of issue #25 item 7: application 2's reader and writer
select is(pg_temp.error_as('pgque_t_app2', $$select pgque.subscribe('iso', 'spy')$$),
          '42501: permission denied to subscribe to queue "iso"', 'app2''s reader cannot subscribe to iso, the error names queue and right');
select pg_temp.denied('pgque_t_app2', $$select pgque.register_consumer('iso', 'spy')$$, 'app2''s reader: register_consumer refused');
select pg_temp.denied('pgque_t_app2', $$select pgque.register_consumer_at('iso', 'spy', 1)$$, 'app2''s reader: register_consumer_at refused');
select pg_temp.denied('pgque_t_app2', $$select pgque.subscribe('iso', 'spy', start => 'earliest')$$, 'app2''s reader: subscribe with a start refused');
select pg_temp.denied('pgque_t_app2', $$select pgque.subscribe('iso', 'spy', start => now())$$, 'app2''s reader: subscribe with a start time refused');
select pg_temp.denied('pgque_t_app2', $$select pgque.subscribe_slot('iso', 'spy', 0, 2)$$, 'app2''s reader: subscribe_slot refused');
select pg_temp.denied('pgque_t_app2', $$select pgque.subscribe_partitioned('iso', 'spy', 2, start => 'earliest')$$, 'app2''s reader: subscribe_partitioned with a start refused');
select pg_temp.denied('pgque_t_app2', $$select pgque.subscribe_partitioned('iso', 'spy', 2, start => now())$$, 'app2''s reader: subscribe_partitioned with a start time refused');
select pg_temp.denied('pgque_t_app2', $$select pgque.register_subconsumer('iso', 'spyg', 'm1', false)$$, 'app2''s reader: register_subconsumer refused');
select is((select count(*) from pgque.subscription s join pgque.queue q on q.queue_id = s.sub_queue where q.queue_name = 'iso'),
          0::bigint, 'app2 left no subscription on iso');
select is(pg_temp.error_as('pgque_t_app2w', $$select pgque.send('iso', 'x')$$),
          '42501: permission denied to send to queue "iso"', 'app2''s writer cannot send to iso (C path), the error names queue and right');
select pg_temp.denied('pgque_t_app2w', $$select pgque.send('iso', 't', '{"a":1}'::jsonb, 'k')$$, 'app2''s writer: send with a key refused');
select pg_temp.denied('pgque_t_app2w', $$select pgque.send_batch('iso', array['a', 'b'])$$, 'app2''s writer: send_batch refused');
select pg_temp.denied('pgque_t_app2w', $$select pgque.send_batch('iso', array[]::text[])$$, 'app2''s writer: an empty send_batch refused too');
select pg_temp.denied('pgque_t_app2w', $$select pgque.insert_event('iso', 't', 'x')$$, 'app2''s writer: insert_event refused');
select pg_temp.denied('pgque_t_app2w', $$select pgque.send_at('iso', 't', 'x', now() + interval '1 hour')$$, 'app2''s writer: send_at (delayed, SQL path) refused');
select pg_temp.denied('pgque_t_app2w', $$select pgque.send_at('iso', 't', 'x', now() - interval '1 hour')$$, 'app2''s writer: send_at (now, C path) refused');
select pg_temp.denied('pgque_t_app2w', $$select pgque.send_idem('iso', 't', 'x', 'k1', interval '1 hour', null)$$, 'app2''s writer: send_idem refused');
select pg_temp.denied('pgque_t_public', $$select pgque.send('iso', 'x')$$, 'PUBLIC: send refused');
select pg_temp.denied('pgque_t_public', $$select pgque.subscribe('iso', 'spy')$$, 'PUBLIC: subscribe refused');
-- a reader may not send, a writer may not subscribe, whatever the grants
select pg_temp.denied('pgque_t_reader', $$select pgque.send('iso', 'x')$$, 'the queue''s reader cannot send');

-- the grantees
select ok(pg_temp.run_as('pgque_t_writer', $$select pgque.send('iso', 'e1') > 0$$)::boolean, 'the granted writer sends to iso');
select ok(pg_temp.run_as('pgque_t_writer', $$select cardinality(pgque.send_batch('iso', array['e2', 'e3'])) = 2$$)::boolean,
          'the granted writer sends a batch');
select ok(pg_temp.run_as('pgque_t_writer', $$select pgque.send_at('iso', 't', 'later', now() + interval '1 hour') > 0$$)::boolean,
          'the granted writer sends a delayed event');
select is(pg_temp.run_as('pgque_t_reader', $$select pgque.subscribe('iso', 'c1')$$), '1', 'the granted reader subscribes to iso');
select is(pg_temp.run_as('pgque_t_app1_worker', $$select pgque.subscribe('iso', 'c2')$$), '1',
          'a member of the granted reader role subscribes too');
select is(pg_temp.run_as('pgque_t_admin', $$select pgque.subscribe('iso', 'ca')$$), '1', 'an admin holds every right');
select ok(pg_temp.run_as('pgque_t_writer', $$select pgque.send('iso', 'e4') > 0$$)::boolean, 'the writer sends e4');
select ok(pg_temp.run_as('pgque_t_admin', $$select pgque.force_next_tick('iso') is not null and pgque.ticker('iso') is not null$$)::boolean,
          'admin ticks iso');
select is(pg_temp.run_as('pgque_t_reader', $$select string_agg(payload, ',' order by msg_id) from pgque.receive('iso', 'c1', 10)$$),
          'e1,e2,e3,e4', 'the granted reader receives what the granted writer sent');
select pg_temp.denied('pgque_t_app2', $$select * from pgque.receive('iso', 'c1', 10)$$, 'app2''s reader cannot receive from iso');
select pg_temp.denied('pgque_t_app2', $$select * from pgque.seek('iso', 'c1', 'earliest')$$, 'app2''s reader cannot replay iso with seek');
select is(pg_temp.run_as('pgque_t_reader', $$select clamped from pgque.seek('iso', 'c1', 'earliest')$$), 'false',
          'the granted reader seeks its consumer');
select is(pg_temp.run_as('pgque_t_reader', $$select string_agg(payload, ',' order by msg_id) from pgque.receive('iso', 'c1', 10)$$),
          'e1,e2,e3,e4', 'and receives the same events again');
select pg_temp.denied('pgque_t_app2', $$select * from pgque.dlq_inspect('iso')$$, 'app2''s reader cannot read iso''s dead letters (payloads) with dlq_inspect');
select is(pg_temp.run_as('pgque_t_reader', $$select count(*) from pgque.dlq_inspect('iso')$$), '0', 'the granted reader may');

-- revoking takes effect at once, for existing consumers and in a session
-- that has cached the queue (the producer's cache is flushed)
select is(pg_temp.run_as('pgque_t_admin', $$select pgque.revoke_queue('iso', 'pgque_t_reader', 'subscribe')
                                                 + pgque.revoke_queue('iso', 'pgque_t_writer', 'send')$$), '2',
          'admin revokes application 1''s rights');
select pg_temp.denied('pgque_t_writer', $$select pgque.send('iso', 'x')$$, 'after the revoke the writer cannot send');
select pg_temp.denied('pgque_t_reader', $$select * from pgque.receive('iso', 'c1', 10)$$, 'after the revoke the reader''s consumer cannot receive');
select pg_temp.denied('pgque_t_reader', $$select * from pgque.next_batch('iso', 'c1')$$, 'nor open a batch with next_batch');
select pg_temp.denied('pgque_t_reader', $$select * from pgque.seek('iso', 'c1', 'latest')$$, 'nor move its cursor with seek');
select is(pg_temp.run_as('pgque_t_admin', $$select pgque.grant_queue('iso', 'pgque_t_writer', 'send')$$), '1', 'admin grants send again');
select ok(pg_temp.run_as('pgque_t_writer', $$select pgque.send('iso', 'e5') > 0$$)::boolean, 'and the writer sends again');

-- the default: a queue nobody narrowed is open to the pgque roles
select is(pg_temp.run_as('pgque_t_app2', $$select pgque.subscribe('mx', 'c9')$$), '1',
          'on a queue with the default rights any pgque_reader subscribes (one application per database)');
select ok(pg_temp.run_as('pgque_t_app2w', $$select pgque.send('mx', 'x') > 0$$)::boolean,
          'and any pgque_writer sends');

select * from finish();
\ir cleanup.psql
