-- pgque:replay-on-upgrade (idempotent: ALTER EXTENSION UPDATE runs this part again, ADR 0019)
-- Privileges: least privilege for the three roles, nothing for PUBLIC.
-- Internal functions (names starting with "_") are granted to nobody: they
-- run only inside the SECURITY DEFINER API, as the owner.

-- Nothing for PUBLIC on the extension's own objects.  Its members only,
-- not "all ... in schema pgque": ALTER EXTENSION UPDATE runs this part
-- again, and the queues' event tables and sequences (made by create_queue,
-- not members) keep the rights create_queue gave them; a fresh install has
-- no others.
do $revoke$
declare
    r record;
begin
    for r in select pg_catalog.format('revoke all on %s %s from public',
                                      case when c.relkind operator(pg_catalog.=) 'S' then 'sequence' else 'table' end,
                                      c.oid::pg_catalog.regclass) as cmd
               from pg_catalog.pg_class c
               join pg_catalog.pg_depend d on d.objid operator(pg_catalog.=) c.oid
                and d.classid operator(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
              where d.deptype operator(pg_catalog.=) 'e'
                and d.refclassid operator(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
                and d.refobjid operator(pg_catalog.=) (select e.oid from pg_catalog.pg_extension e
                                                        where e.extname operator(pg_catalog.=) 'pgque_bgw')
                and c.relkind operator(pg_catalog.=) any ('{r,v,m,p,f,S}'::pg_catalog."char"[])
             union all
             select pg_catalog.format('revoke all on routine %s from public', p.oid::pg_catalog.regprocedure)
               from pg_catalog.pg_proc p
               join pg_catalog.pg_depend d on d.objid operator(pg_catalog.=) p.oid
                and d.classid operator(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
              where d.deptype operator(pg_catalog.=) 'e'
                and d.refclassid operator(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
                and d.refobjid operator(pg_catalog.=) (select e.oid from pg_catalog.pg_extension e
                                                        where e.extname operator(pg_catalog.=) 'pgque_bgw') loop
        execute r.cmd;
    end loop;
end
$revoke$;
grant usage on schema pgque to pgque_reader, pgque_writer, pgque_admin;

-- The grantee anchor (ADR 0079): a role named in a rights list counts
-- while it holds SELECT on this empty, column-less table.  The extension's
-- roles hold it for good (a new queue names pgque_writer and pgque_reader);
-- grant_queue/grant_consumer give it to the others.
grant select on pgque.grantee_anchor to pgque_reader, pgque_writer, pgque_admin;

-- producing
grant execute on function
    pgque.send(text, text), pgque.send(text, jsonb),
    pgque.send(text, text, text), pgque.send(text, text, jsonb),
    pgque.send(text, text, text, text), pgque.send(text, text, jsonb, text),
    pgque.send_batch(text, text[]), pgque.send_batch(text, jsonb[]),
    pgque.send_batch(text, text, text[]), pgque.send_batch(text, text, jsonb[]),
    pgque.send_batch(text, text, text[], text[]), pgque.send_batch(text, text, jsonb[], text[]),
    pgque.send_at(text, text, text, timestamptz), pgque.send_at(text, text, jsonb, timestamptz),
    pgque.insert_event(text, text, text),
    pgque.send_idem(text, text, text, text, interval, text),
    pgque.send_idem(text, text, jsonb, text, interval, text),
    pgque.insert_event(text, text, text, text, text, text, text),
    pgque.dlq_replay(bigint), pgque.dlq_replay_all(text)
  to pgque_writer;

-- consuming
grant execute on function
    pgque.subscribe(text, text), pgque.unsubscribe(text, text),
    pgque.register_consumer(text, text), pgque.register_consumer_at(text, text, bigint),
    pgque.unregister_consumer(text, text),
    pgque.set_consumer_config(text, text, text, text), pgque.get_consumer_config(text, text, text),
    -- replay by time (ADR 0067)
    pgque.subscribe(text, text, text), pgque.subscribe(text, text, timestamptz),
    pgque.seek(text, text, text), pgque.seek(text, text, timestamptz),
    pgque.subscribe_partitioned(text, text, int4, text),
    pgque.subscribe_partitioned(text, text, int4, timestamptz),
    pgque.receive(text, text, int4), pgque.ack(bigint),
    pgque.receive_wait(text, text, int4, interval),
    pgque.nack(bigint, pgque.message, interval, text),
    pgque.next_batch(text, text), pgque.next_batch_info(text, text),
    pgque.next_batch_custom(text, text, interval, int4, interval),
    pgque.get_batch_events(bigint), pgque.finish_batch(bigint),
    pgque.event_retry(bigint, bigint, timestamptz), pgque.event_retry(bigint, bigint, int4),
    pgque.get_queue_info(), pgque.get_queue_info(text),
    pgque.get_consumer_info(), pgque.get_consumer_info(text), pgque.get_consumer_info(text, text),
    pgque.get_batch_info(bigint), pgque.dlq_inspect(text, int4), pgque.version(),
    pgque.subscribe_slot(text, text, int4, int4), pgque.unsubscribe_slot(text, text, int4),
    pgque.claim_slot(text, text, int4, text, interval), pgque.release_slot(text, text, int4, text),
    pgque.claim_any_slot(text, text, text, interval),
    pgque.receive_partitioned(text, text, int4, int4, text, int4),
    pgque.ack_partitioned(text, text, int4, int4, text),
    pgque.nack_partitioned(text, text, int4, int4, text, pgque.message, interval, text),
    pgque.get_partition_slot_info(), pgque.metrics(),
    pgque.resize_partitioned(text, text, int4), pgque.get_partition_resize_info(),
    pgque.partition_n(text, text),
    pgque.subscribe_slot(text, text, int4, int4, text), pgque.get_failure_policy(text, text),
    pgque.set_failure_policy(text, text, text), pgque.get_blocked_keys(),
    pgque.queue_stats(), pgque.consumer_stats(), pgque.queue_health(), pgque.otel_metrics(),
    pgque.stuck_consumers(interval), pgque.in_flight(text),
    pgque.throughput(text, interval, interval), pgque.error_rate(text, interval, interval),
    -- cooperative consumers (PgQue: pgque_reader)
    pgque.register_subconsumer(text, text, text, boolean),
    pgque.subscribe_subconsumer(text, text, text, boolean),
    pgque.unregister_subconsumer(text, text, text, int4),
    pgque.unsubscribe_subconsumer(text, text, text, int4),
    pgque.touch_subconsumer(text, text, text),
    pgque.receive_coop(text, text, text, int4, interval),
    pgque.next_batch(text, text, text, interval),
    pgque.next_batch_custom(text, text, text, interval, int4, interval, interval),
    -- sharing a consumer: its owner or an admin (ADR 0058)
    pgque.grant_consumer(text, text, regrole), pgque.revoke_consumer(text, text, regrole)
  to pgque_reader;
grant select on pgque.partition_slot_status to pgque_reader, pgque_admin;
grant select on pgque.partition_resize_status to pgque_reader, pgque_admin;
grant select on pgque.blocked_keys to pgque_reader, pgque_admin;

-- running the queues
grant execute on function
    pgque.create_queue(text), pgque.drop_queue(text), pgque.drop_queue(text, boolean),
    pgque.set_queue_config(text, text, text),
    pgque.ticker(), pgque.ticker(text), pgque.ticker(text, bigint, timestamptz, bigint),
    pgque.force_tick(text), pgque.force_next_tick(text),
    pgque.maint(), pgque.maint_retry_events(), pgque.maint_tick_cleanup(),
    pgque.maint_idem(), pgque.maint_idem(text),
    pgque.maint_rotate_tables_step1(text), pgque.maint_rotate_tables_step2(),
    pgque.batch_retry(bigint, int4), pgque.dlq_purge(text, interval), pgque.status(),
    pgque.launcher_workers(),
    pgque.start(), pgque.stop(), pgque.maint_alerts(interval),
    pgque.create_queue(text, jsonb), pgque.pause_queue(text), pgque.resume_queue(text),
    pgque.set_tick_period_ms(int4), pgque.maint_deliver_delayed(),
    pgque.event_dead(bigint, bigint, text, timestamptz, xid8, int4, text, text, text, text, text, text),
    pgque.get_batch_cursor(bigint, text, int4), pgque.get_batch_cursor(bigint, text, int4, text),
    -- PgQ's low-level functions (PgQue: pgque_admin)
    pgque.current_event_table(text), pgque.quote_fqname(text),
    pgque.batch_event_sql(bigint), pgque.batch_event_tables(bigint),
    pgque.seq_getval(text), pgque.seq_setval(text, int8),
    pgque.maint_operations(), pgque.maint_tables_to_vacuum(),
    pgque.insert_event_raw(text, bigint, timestamptz, int4, int4, text, text, text, text, text, text),
    pgque.event_retry_raw(text, text, timestamptz, bigint, timestamptz, int4, text, text, text, text, text, text),
    pgque.find_tick_helper(int4, int8, timestamptz, int8, int8, interval),
    pgque.grant_perms(text), pgque.tune_storage(text), pgque.upgrade_schema()
  to pgque_admin;
-- PgQue's internal insert_event_bulk() and uninstall() stay the owner's.
grant select on pgque.delayed_events, pgque.config to pgque_admin;
grant execute on function pgque.grant_queue(text, regrole, text), pgque.revoke_queue(text, regrole, text)
  to pgque_admin;
grant select on pgque.queue_rights, pgque.consumer_rights, pgque.partition_slot to pgque_admin;
grant select on pgque.alerts to pgque_reader, pgque_admin;
grant select on pgque.alert, pgque.maint_failure to pgque_admin;
grant execute on procedure pgque.ticker_loop(interval, interval) to pgque_admin;
-- The internal helpers that entry points running as their caller call
-- (ADR 0042): ticker_loop() (a procedure that commits cannot be SECURITY
-- DEFINER), start() and stop() (pg_cron jobs belong to their caller).  Each
-- reads nothing of the extension's: an interval check, whether the library
-- is preloaded, the caller's own pg_cron jobs.  Pinned.
grant execute on function pgque._check_interval(text, interval, boolean), pgque._preloaded(),
                          pgque._cron_jobs() to pgque_admin;

-- change-data-capture triggers: CREATE TRIGGER needs EXECUTE on them (a
-- firing does not); the table's owner must also be a pgque_writer when
-- they fire (ADR 0015)
grant execute on function pgque.logutriga(), pgque.jsontriga(), pgque.sqltriga() to pgque_admin;

-- catalog tables are readable by admin; payloads only through the API
grant select on pgque.queue, pgque.consumer, pgque.subscription, pgque.tick,
                 pgque.retry_queue, pgque.delayed_event, pgque.dead_letter, pgque.event_template,
                 pgque.coop_member, pgque.coop_window, pgque.coop_fence, pgque.state_seal, pgque.slot_batch,
                 pgque.blocked_key, pgque.unlogged_seal, pgque.addressed_event
  to pgque_admin;

-- The installing role (pg_extension.extowner; ADR 0042) owns no object of
-- the extension: it gets, in this database only, what the three roles hold
-- on the extension's members, granted to it by name, and uninstall().  Not
-- a membership of pgque_admin, which would reach every database of the
-- cluster with the extension.  A superuser needs none of it.  Its USAGE on
-- schema pgque is granted by sql/89_owner.sql, which gave it to pgque_owner.
do $installer$
declare
    r       record;
    v_ext   pg_catalog.oid;
    v_inst  pg_catalog.oid;
begin
    select e.oid, e.extowner into strict v_ext, v_inst
      from pg_catalog.pg_extension e where e.extname operator(pg_catalog.=) 'pgque_bgw'::pg_catalog.name;
    if (select a.rolsuper from pg_catalog.pg_roles a where a.oid operator(pg_catalog.=) v_inst) then
        return;
    end if;
    for r in select pg_catalog.format('grant %s on %s %s to %I', x.privs,
                                      case when c.relkind operator(pg_catalog.=) 'S'::pg_catalog."char" then 'sequence' else 'table' end,
                                      c.oid::pg_catalog.regclass, pg_catalog.pg_get_userbyid(v_inst)) as cmd
               from pg_catalog.pg_class c
               join pg_catalog.pg_depend d on d.objid operator(pg_catalog.=) c.oid
                and d.classid operator(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
               cross join lateral (
                   select pg_catalog.string_agg(distinct a.privilege_type, ', ') as privs
                     from pg_catalog.aclexplode(c.relacl) a
                    where a.grantee operator(pg_catalog.=) any (array['pgque_reader'::pg_catalog.regrole,
                              'pgque_writer'::pg_catalog.regrole, 'pgque_admin'::pg_catalog.regrole]::pg_catalog.oid[])) x
              where d.deptype operator(pg_catalog.=) 'e'::pg_catalog."char"
                and d.refclassid operator(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
                and d.refobjid operator(pg_catalog.=) v_ext
                and x.privs is not null
             union all
             select pg_catalog.format('grant execute on routine %s to %I', p.oid::pg_catalog.regprocedure,
                                      pg_catalog.pg_get_userbyid(v_inst))
               from pg_catalog.pg_proc p
               join pg_catalog.pg_depend d on d.objid operator(pg_catalog.=) p.oid
                and d.classid operator(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
              where d.deptype operator(pg_catalog.=) 'e'::pg_catalog."char"
                and d.refclassid operator(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
                and d.refobjid operator(pg_catalog.=) v_ext
                and (p.oid operator(pg_catalog.=) pg_catalog.to_regprocedure('pgque.uninstall()')
                     or exists (select from pg_catalog.aclexplode(p.proacl) a
                                 where a.grantee operator(pg_catalog.=) any (array['pgque_reader'::pg_catalog.regrole,
                                           'pgque_writer'::pg_catalog.regrole, 'pgque_admin'::pg_catalog.regrole]::pg_catalog.oid[]))) loop
        execute r.cmd;
    end loop;
end
$installer$;
