-- pgque:first-on-upgrade (ALTER EXTENSION UPDATE runs this part before anything else, ADR 0042)
-- Nothing foreign in the way.  An update runs with the bootstrap
-- superuser's rights whoever starts it (the extension is trusted), on a
-- schema whose objects a non-superuser may have owned until 0.2.0: that
-- role could have added triggers, rules, policies, defaults, constraints
-- or indexes calling its own functions to the extension's tables, or put
-- functions, operators and casts in schema pgque that an unqualified name
-- of this script would resolve to.  Any of them would then run as
-- superuser.  So this guard refuses (55000, naming the object) while any
-- such thing exists.  On a fresh install the schema guard has just made
-- sure schema pgque is empty: nothing to find.  Everything here is
-- qualified, as it runs before anything is known to be safe.
do $foreign$
declare
    v_nsp  pg_catalog.oid := (select n.oid from pg_catalog.pg_namespace n
                               where n.nspname operator(pg_catalog.=) 'pgque'::pg_catalog.name);
    v_ext  pg_catalog.oid := (select e.oid from pg_catalog.pg_extension e
                               where e.extname operator(pg_catalog.=) 'pgque_bgw'::pg_catalog.name);
    v_what pg_catalog.text;
    v_path pg_catalog.text := pg_catalog.current_setting('search_path');
    v_added pg_catalog.oid[];
    -- The functions an install of the version an update starts from has
    -- (0.2.0: sql/released/pgque_bgw--0.2.0.sql, the same after 0.1.0 ->
    -- 0.2.0; and 0.1.0's, for the direct step from 0.1.0), as regprocedure under search_path = pg_catalog.  That
    -- version's owner was the extension's owner and owned schema pgque, so
    -- it could make a function of its own a member (ALTER EXTENSION
    -- pgque_bgw ADD FUNCTION pgque.now()), which would pass below as the
    -- extension's and, given to pgque_owner, be preferred to pg_catalog's by
    -- the API (search_path = pgque, pg_catalog, pg_temp).  A release that
    -- can be updated from adds its list here; TAP 017 walks the chain
    -- through it, TAP 047 replays the attack.  Not keyed on the version:
    -- PostgreSQL writes the new one before running the script, and a list
    -- left behind by a later release must fail closed (TAP 017 then says
    -- so); a fresh install has no member yet when this runs.
    v_known pg_catalog.text[] := array[
        'pgque._ack_batch(pgque.subscription)', 'pgque._alert_cause_conditions(interval)',
        'pgque._alert_conditions(interval,interval,interval,interval,interval)',
        'pgque._alert_where(pgque.alert)', 'pgque._authorize(regrole,integer,text)',
        'pgque._batch_rows(bigint,integer,bigint,integer,integer)',
        'pgque._batch_source(bigint,integer,integer)', 'pgque._blocked_ticks(integer)',
        'pgque._buckets(interval,interval)', 'pgque._caller()', 'pgque._caller_is_admin()',
        'pgque._check_failure_policy(text)', 'pgque._check_interval(text,interval,boolean)',
        'pgque._check_max_return(integer)', 'pgque._check_name(text,text,integer)',
        'pgque._check_not_null(text,anyelement)',
        'pgque._check_timestamp(text,timestamp with time zone)', 'pgque._check_worker(text)',
        'pgque._config_one_row()', 'pgque._consumer_state()',
        'pgque._coop_ack(pgque.subscription)', 'pgque._coop_finish(bigint)',
        'pgque._coop_forget(integer,text)', 'pgque._coop_group(pgque.queue,text)',
        'pgque._coop_maint()', 'pgque._coop_max_members()',
        'pgque._coop_member_group(text,text,text,boolean)', 'pgque._coop_member_info()',
        'pgque._coop_member_lock(integer,text)', 'pgque._coop_members()',
        'pgque._coop_names(text,text,text)',
        'pgque._coop_receive_open(text,text,text,integer,interval,boolean)',
        'pgque._coop_refuse_fenced(bigint)', 'pgque._coop_register(pgque.queue,text,text,boolean)',
        'pgque._coop_seen(integer,text)', 'pgque._coop_sync(integer)',
        'pgque._coop_take(pgque.subscription,text,interval,bigint,interval,integer,interval)',
        'pgque._coop_touch(integer,text,bigint)', 'pgque._create_buckets(pgque.queue,integer)',
        'pgque._cron_jobs()', 'pgque._dead_letter(pgque.subscription,pgque.event_template,text)',
        'pgque._deliver_due(boolean,boolean)', 'pgque._event_seq_pos(pgque.queue)',
        'pgque._event_source(pgque.queue,pg_snapshot,pg_snapshot,integer,integer)',
        'pgque._finish_batch(bigint)', 'pgque._guc_interval(text,interval)',
        'pgque._has_unticked_events(pgque.queue,pgque.tick)',
        'pgque._insert_event(text,bigint,timestamp with time zone,integer,integer,text,text,text,text,text,text,boolean)',
        'pgque._jsonb_texts(jsonb[])', 'pgque._like_escape(text)', 'pgque._maint_extra()',
        'pgque._maint_failed(text,text,text,text)', 'pgque._maint_failure_settle()',
        'pgque._maint_idem_all(integer)', 'pgque._maint_idem_batch(integer,integer)',
        'pgque._maint_ok(text,text)', 'pgque._maint_queue_steps()',
        'pgque._maint_rotate_step1(text)',
        'pgque._nack_event(pgque.subscription,bigint,interval,text,integer,integer)',
        'pgque._next_batch(text,text,interval,integer,interval,integer)',
        'pgque._open_batch(bigint)', 'pgque._open_batch_or_raise(bigint)',
        'pgque._partitioned(pgque.queue,text,integer,integer)',
        'pgque._pause_after_ack(integer,bigint,bigint,integer,integer)',
        'pgque._pause_alert_conditions(interval)',
        'pgque._pause_on_nack(pgque.subscription,bigint,integer,integer)',
        'pgque._pause_passed_rows(integer,integer,integer,bigint,bigint,bigint,bigint)',
        'pgque._pause_refuse_primitive(pgque.subscription,text)',
        'pgque._pause_release(integer,text[],integer,integer,bigint,boolean)',
        'pgque._pick_tick(integer,pgque.tick,interval,integer,interval,integer)',
        'pgque._preloaded()', 'pgque._producer_queue(text)', 'pgque._queue(text)',
        'pgque._queue_changed()', 'pgque._queue_ddl_lock(integer)', 'pgque._queue_lock_class()',
        'pgque._queue_try_share(integer)', 'pgque._receive_open(text,text,integer,boolean)',
        'pgque._receive_paused(bigint,integer,integer,integer)',
        'pgque._refuse_slot_batch(pgque.subscription,text)',
        'pgque._refuse_slot_consumer(text,text)',
        'pgque._register(pgque.queue,text,bigint,regrole)', 'pgque._resize_cap(integer)',
        'pgque._resize_complete(integer,text)', 'pgque._resize_complete_drained()',
        'pgque._resize_conditions()', 'pgque._resize_drained(pgque.partition_resize)',
        'pgque._resize_draining(pgque.partition_resize)',
        'pgque._resize_gate(pgque.queue,text,integer)', 'pgque._resize_of(integer,text)',
        'pgque._resize_refuse(pgque.queue,text,text)',
        'pgque._retry_event(pgque.subscription,pgque.event_template,timestamp with time zone)',
        'pgque._retry_owner(integer,text)', 'pgque._rotation_due(pgque.queue)',
        'pgque._rotation_holders(interval)', 'pgque._rotation_would_lose(pgque.queue,text,xid8)',
        'pgque._set_buckets(pgque.queue,integer)',
        'pgque._slot_batch_row(pgque.subscription,bigint)',
        'pgque._slot_check(integer,text,integer,text,boolean,text)',
        'pgque._slot_claim(integer,text,integer,text,bigint)',
        'pgque._slot_cursor(pgque.subscription)', 'pgque._slot_finish(bigint)',
        'pgque._slot_fold(integer,bigint,bigint)', 'pgque._slot_forget(integer,text)',
        'pgque._slot_guard(pgque.queue,text,integer,integer,text,boolean)',
        'pgque._slot_lease_count_all()', 'pgque._slot_leases()', 'pgque._slot_list()',
        'pgque._slot_nack_event(pgque.subscription,bigint,interval,text,integer,integer)',
        'pgque._slot_name(text,integer,integer)',
        'pgque._slot_next_batch(text,text,bigint,integer)', 'pgque._slot_of(text,integer)',
        'pgque._slot_open(text,text,bigint)', 'pgque._slot_passed(integer)',
        'pgque._slot_pauses(integer,text)', 'pgque._slot_pending(integer,integer,integer)',
        'pgque._slot_pending_all()',
        'pgque._slot_receive_open(text,text,integer,integer,text,integer,boolean)',
        'pgque._slot_recheck(integer,text,integer,text,bigint,text)',
        'pgque._slot_release(integer,text,integer,text)', 'pgque._space_reserve_keep(text)',
        'pgque._space_reserve_name(pgque.queue)', 'pgque._space_reserve_pages(regclass)',
        'pgque._state_held()', 'pgque._subscription(text,text)',
        'pgque._subscription_row(pgque.queue,text,boolean)', 'pgque._tick(pgque.queue)',
        'pgque._tick_due(pgque.queue)', 'pgque._tick_if_due(pgque.queue)',
        'pgque._tick_many(integer[])', 'pgque._tick_snapshot()',
        'pgque._ticked_by_worker(pgque.queue)', 'pgque._ticked_here(text)',
        'pgque._ticker_queues()', 'pgque._ticks_seq_moved()',
        'pgque._truncate_event_table(regclass)', 'pgque._type(text)',
        'pgque._unregister(pgque.queue,text)', 'pgque._user_consumer_name(text)',
        'pgque._wake_launcher_at_commit()', 'pgque._warn_if_unserved()',
        'pgque._watchdog_pass(interval,interval,interval,interval,interval)',
        'pgque._window_rows(text,xid8,xid8,xid8[],pg_snapshot,integer,bigint,bigint,integer,integer,integer)',
        'pgque._worker_down_hint()',
        'pgque._worker_down_pass(text[],timestamp with time zone[],timestamp with time zone[],interval)',
        'pgque._worker_status()', 'pgque._workers_serve()', 'pgque.ack(bigint)',
        'pgque.ack_partitioned(text,text,integer,integer,text)',
        'pgque.batch_retry(bigint,integer)', 'pgque.claim_slot(text,text,integer,text,interval)',
        'pgque.consumer_stats()', 'pgque.create_queue(text)', 'pgque.create_queue(text,jsonb)',
        'pgque.dlq_inspect(text,integer)', 'pgque.dlq_purge(text,interval)',
        'pgque.dlq_replay(bigint)', 'pgque.dlq_replay_all(text)', 'pgque.drop_queue(text)',
        'pgque.drop_queue(text,boolean)', 'pgque.error_rate(text,interval,interval)',
        'pgque.event_dead(bigint,bigint,text,timestamp with time zone,xid8,integer,text,text,text,text,text,text)',
        'pgque.event_retry(bigint,bigint,integer)',
        'pgque.event_retry(bigint,bigint,timestamp with time zone)', 'pgque.finish_batch(bigint)',
        'pgque.force_next_tick(text)', 'pgque.force_tick(text)',
        'pgque.get_batch_cursor(bigint,text,integer)',
        'pgque.get_batch_cursor(bigint,text,integer,text)', 'pgque.get_batch_events(bigint)',
        'pgque.get_batch_info(bigint)', 'pgque.get_blocked_keys()', 'pgque.get_consumer_info()',
        'pgque.get_consumer_info(text)', 'pgque.get_consumer_info(text,text)',
        'pgque.get_failure_policy(text,text)', 'pgque.get_partition_resize_info()',
        'pgque.get_partition_slot_info()', 'pgque.get_queue_info()', 'pgque.get_queue_info(text)',
        'pgque.in_flight(text)', 'pgque.insert_event(text,text,text)',
        'pgque.insert_event(text,text,text,text,text,text,text)',
        'pgque.insert_event_bulk(text,text,text[])', 'pgque.jsontriga()',
        'pgque.launcher_workers()', 'pgque.logutriga()', 'pgque.maint()',
        'pgque.maint_alerts(interval)', 'pgque.maint_deliver_delayed()', 'pgque.maint_idem()',
        'pgque.maint_idem(text)', 'pgque.maint_retry_events()',
        'pgque.maint_rotate_tables_step1(text)', 'pgque.maint_rotate_tables_step2()',
        'pgque.maint_tick_cleanup()', 'pgque.metrics()',
        'pgque.nack(bigint,pgque.message,interval,text)',
        'pgque.nack_partitioned(text,text,integer,integer,text,pgque.message,interval,text)',
        'pgque.next_batch(text,text)', 'pgque.next_batch(text,text,text,interval)',
        'pgque.next_batch_custom(text,text,interval,integer,interval)',
        'pgque.next_batch_custom(text,text,text,interval,integer,interval,interval)',
        'pgque.next_batch_info(text,text)', 'pgque.otel_metrics()', 'pgque.partition_n(text,text)',
        'pgque.pause_queue(text)', 'pgque.queue_health()', 'pgque.queue_stats()',
        'pgque.receive(text,text,integer)', 'pgque.receive_coop(text,text,text,integer,interval)',
        'pgque.receive_partitioned(text,text,integer,integer,text,integer)',
        'pgque.register_consumer(text,text)', 'pgque.register_consumer_at(text,text,bigint)',
        'pgque.register_subconsumer(text,text,text,boolean)',
        'pgque.release_slot(text,text,integer,text)',
        'pgque.resize_partitioned(text,text,integer)', 'pgque.resume_queue(text)',
        'pgque.send(text,jsonb)', 'pgque.send(text,text)', 'pgque.send(text,text,jsonb)',
        'pgque.send(text,text,jsonb,text)', 'pgque.send(text,text,text)',
        'pgque.send(text,text,text,text)',
        'pgque.send_at(text,text,jsonb,timestamp with time zone)',
        'pgque.send_at(text,text,text,timestamp with time zone)', 'pgque.send_batch(text,jsonb[])',
        'pgque.send_batch(text,text,jsonb[])', 'pgque.send_batch(text,text,jsonb[],text[])',
        'pgque.send_batch(text,text,text[])', 'pgque.send_batch(text,text,text[],text[])',
        'pgque.send_batch(text,text[])', 'pgque.send_idem(text,text,jsonb,text,interval,text)',
        'pgque.send_idem(text,text,text,text,interval,text)',
        'pgque.set_failure_policy(text,text,text)', 'pgque.set_queue_config(text,text,text)',
        'pgque.set_tick_period_ms(integer)', 'pgque.sqltriga()', 'pgque.start()', 'pgque.status()',
        'pgque.stop()', 'pgque.stuck_consumers(interval)', 'pgque.subscribe(text,text)',
        'pgque.subscribe_slot(text,text,integer,integer)',
        'pgque.subscribe_slot(text,text,integer,integer,text)',
        'pgque.subscribe_subconsumer(text,text,text,boolean)',
        'pgque.throughput(text,interval,interval)', 'pgque.ticker()', 'pgque.ticker(text)',
        'pgque.ticker(text,bigint,timestamp with time zone,bigint)',
        'pgque.ticker_loop(interval,interval)', 'pgque.touch_subconsumer(text,text,text)',
        'pgque.uninstall()', 'pgque.unregister_consumer(text,text)',
        'pgque.unregister_subconsumer(text,text,text,integer)', 'pgque.unsubscribe(text,text)',
        'pgque.unsubscribe_slot(text,text,integer)',
        'pgque.unsubscribe_subconsumer(text,text,text,integer)', 'pgque.version()',
        -- 0.1.0's that 0.2.0 dropped: the direct step from 0.1.0 starts
        -- with this guard too (0.1.0 was trusted as well)
        'pgque._receive(text,text,integer,integer,integer)', 'pgque._register(pgque.queue,text,bigint)'
        ]::pg_catalog.text[];
begin
    -- members the released version did not make (names printed qualified
    -- but for pg_catalog's, whatever the caller's search_path)
    if v_ext is not null then
        perform pg_catalog.set_config('search_path', 'pg_catalog', true);
        select pg_catalog.array_agg(p.oid) into v_added
          from pg_catalog.pg_proc p
          join pg_catalog.pg_depend d on d.objid operator(pg_catalog.=) p.oid
                                     and d.classid operator(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
                                     and d.refclassid operator(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
                                     and d.refobjid operator(pg_catalog.=) v_ext
                                     and d.deptype operator(pg_catalog.=) 'e'::pg_catalog."char"
         where not (p.oid::pg_catalog.regprocedure::pg_catalog.text operator(pg_catalog.=) any (v_known));
        perform pg_catalog.set_config('search_path', v_path, true);
    end if;
    with member as (
        select d.classid, d.objid from pg_catalog.pg_depend d
         where d.refclassid operator(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
           and d.refobjid operator(pg_catalog.=) v_ext
           and d.deptype operator(pg_catalog.=) 'e'::pg_catalog."char"),
    rel as (
        select c.oid from pg_catalog.pg_class c where c.relnamespace operator(pg_catalog.=) v_nsp),
    -- a function an attachment (default, constraint, index, partition key) may call: a
    -- built-in one, or one of the extension's C functions (which no
    -- non-superuser can redefine in C)
    safe_fn as (
        select p.oid from pg_catalog.pg_proc p
         where p.pronamespace operator(pg_catalog.=) 'pg_catalog'::pg_catalog.regnamespace
        union all
        select p.oid from pg_catalog.pg_proc p join member m on m.objid operator(pg_catalog.=) p.oid
                and m.classid operator(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
         where p.prolang operator(pg_catalog.=) (select l.oid from pg_catalog.pg_language l
                                                  where l.lanname operator(pg_catalog.=) 'c'::pg_catalog.name)
           and p.probin operator(pg_catalog.=) '$libdir/pgque_bgw'::pg_catalog.text),
    attachment as (
        select 'pg_catalog.pg_attrdef'::pg_catalog.regclass as classid, a.oid as objid,
               pg_catalog.format('default of %s.%s', a.adrelid::pg_catalog.regclass,
                                 (select t.attname from pg_catalog.pg_attribute t
                                   where t.attrelid operator(pg_catalog.=) a.adrelid
                                     and t.attnum operator(pg_catalog.=) a.adnum)) as what
          from pg_catalog.pg_attrdef a where a.adrelid operator(pg_catalog.=) any (select oid from rel)
        union all
        select 'pg_catalog.pg_constraint'::pg_catalog.regclass, k.oid,
               pg_catalog.format('constraint %I', k.conname)
          from pg_catalog.pg_constraint k
         where k.connamespace operator(pg_catalog.=) v_nsp
            or k.conrelid operator(pg_catalog.=) any (select oid from rel)
        union all
        -- a relation's own expressions (a partition key)
        select 'pg_catalog.pg_class'::pg_catalog.regclass, r.oid,
               pg_catalog.format('relation %s', r.oid::pg_catalog.regclass)
          from rel r
        union all
        select 'pg_catalog.pg_class'::pg_catalog.regclass, i.indexrelid,
               pg_catalog.format('index %s', i.indexrelid::pg_catalog.regclass)
          from pg_catalog.pg_index i where i.indrelid operator(pg_catalog.=) any (select oid from rel)),
    found as (
        -- objects in schema pgque that are not the extension's; the
        -- queues' tables, sequences and indexes (made by create_queue) are
        -- plain ones and pass, their attachments are checked below
        select 1 as ord, pg_catalog.format('function %s', p.oid::pg_catalog.regprocedure) as what
          from pg_catalog.pg_proc p
         where p.pronamespace operator(pg_catalog.=) v_nsp
           and not exists (select from member m where m.objid operator(pg_catalog.=) p.oid
                              and m.classid operator(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass)
        union all
        select 1, pg_catalog.format('function %s (made a member by ALTER EXTENSION ... ADD)', p.oid::pg_catalog.regprocedure)
          from pg_catalog.pg_proc p where p.oid operator(pg_catalog.=) any (v_added)
        union all
        select 2, pg_catalog.format('relation %s', c.oid::pg_catalog.regclass)
          from pg_catalog.pg_class c
         where c.relnamespace operator(pg_catalog.=) v_nsp
           and not (c.relkind operator(pg_catalog.=) any ('{r,p,S,i,I}'::pg_catalog."char"[]))
           and not exists (select from member m where m.objid operator(pg_catalog.=) c.oid
                              and m.classid operator(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass)
           -- a composite type's membership is its pg_type row's
           and not exists (select from member m where m.objid operator(pg_catalog.=) c.reltype
                              and m.classid operator(pg_catalog.=) 'pg_catalog.pg_type'::pg_catalog.regclass)
        union all
        select 3, pg_catalog.format('type %s', t.oid::pg_catalog.regtype)
          from pg_catalog.pg_type t
         where t.typnamespace operator(pg_catalog.=) v_nsp
           and t.typrelid operator(pg_catalog.=) 0::pg_catalog.oid
           and not exists (select from pg_catalog.pg_type e
                            where e.oid operator(pg_catalog.=) t.typelem
                              and e.typnamespace operator(pg_catalog.=) v_nsp)
           and not exists (select from member m where m.objid operator(pg_catalog.=) t.oid
                              and m.classid operator(pg_catalog.=) 'pg_catalog.pg_type'::pg_catalog.regclass)
        union all
        select 4, pg_catalog.format('operator %s', o.oid::pg_catalog.regoperator)
          from pg_catalog.pg_operator o where o.oprnamespace operator(pg_catalog.=) v_nsp
        union all
        select 4, pg_catalog.format('operator class %I', o.opcname)
          from pg_catalog.pg_opclass o where o.opcnamespace operator(pg_catalog.=) v_nsp
        union all
        select 4, pg_catalog.format('operator family %I', o.opfname)
          from pg_catalog.pg_opfamily o where o.opfnamespace operator(pg_catalog.=) v_nsp
        union all
        select 4, pg_catalog.format('collation %I', o.collname)
          from pg_catalog.pg_collation o where o.collnamespace operator(pg_catalog.=) v_nsp
        union all
        select 4, pg_catalog.format('conversion %I', o.conname)
          from pg_catalog.pg_conversion o where o.connamespace operator(pg_catalog.=) v_nsp
        union all
        select 4, pg_catalog.format('text search configuration %I', o.cfgname)
          from pg_catalog.pg_ts_config o where o.cfgnamespace operator(pg_catalog.=) v_nsp
        union all
        select 4, pg_catalog.format('text search dictionary %I', o.dictname)
          from pg_catalog.pg_ts_dict o where o.dictnamespace operator(pg_catalog.=) v_nsp
        union all
        -- wherever it lives: one on a pgque table computes its expressions
        -- in every ANALYZE as the table's owner
        select 4, pg_catalog.format('statistics object %I on %s', o.stxname, o.stxrelid::pg_catalog.regclass)
          from pg_catalog.pg_statistic_ext o where o.stxnamespace operator(pg_catalog.=) v_nsp
            or o.stxrelid operator(pg_catalog.=) any (select oid from rel)
        union all
        select 4, pg_catalog.format('extension %I', o.extname)
          from pg_catalog.pg_extension o where o.extnamespace operator(pg_catalog.=) v_nsp
           and o.oid operator(pg_catalog.<>) v_ext
        union all
        select 5, pg_catalog.format('cast (%s as %s)', k.castsource::pg_catalog.regtype, k.casttarget::pg_catalog.regtype)
          from pg_catalog.pg_cast k
         where exists (select from pg_catalog.pg_type t
                        where t.oid operator(pg_catalog.=) any (array[k.castsource, k.casttarget])
                          and t.typnamespace operator(pg_catalog.=) v_nsp)
           -- no version ever made a cast: a member one was added by ALTER EXTENSION ... ADD
        -- what fires on the extension's relations (and the queues'): the
        -- extension's own triggers are listed here by table, name and
        -- function; a part that adds one adds it to this list
        union all
        select 6, pg_catalog.format('trigger %I on %s', g.tgname, g.tgrelid::pg_catalog.regclass)
          from pg_catalog.pg_trigger g
          join pg_catalog.pg_class c on c.oid operator(pg_catalog.=) g.tgrelid
         where c.relnamespace operator(pg_catalog.=) v_nsp and not g.tgisinternal
           -- ours as made: enabled, without a WHEN clause (the old owner
           -- could CREATE OR REPLACE one with its function in WHEN, or
           -- disable it)
           and not (g.tgqual is null and g.tgenabled operator(pg_catalog.=) 'O'::pg_catalog."char" and (
                       (c.relname operator(pg_catalog.=) 'config'::pg_catalog.name
                        and g.tgname operator(pg_catalog.=) 'config_one_row'::pg_catalog.name
                        and g.tgfoid operator(pg_catalog.=) pg_catalog.to_regprocedure('pgque._config_one_row()'))
                    or (c.relname operator(pg_catalog.=) 'queue'::pg_catalog.name
                        and g.tgname operator(pg_catalog.=) 'queue_changed'::pg_catalog.name
                        and g.tgfoid operator(pg_catalog.=) pg_catalog.to_regprocedure('pgque._queue_changed()'))))
        union all
        -- a table of another schema inheriting from (or a partition of) a
        -- pgque relation: a statement of this script on the parent reaches
        -- its rows and fires its triggers, which the trigger test above
        -- (schema pgque only) does not see
        select 6, pg_catalog.format('relation %s, a child of %s', i.inhrelid::pg_catalog.regclass,
                                    i.inhparent::pg_catalog.regclass)
          from pg_catalog.pg_inherits i
          join pg_catalog.pg_class c on c.oid operator(pg_catalog.=) i.inhrelid
         where i.inhparent operator(pg_catalog.=) any (select oid from rel)
           and c.relnamespace operator(pg_catalog.<>) v_nsp
        union all
        select 6, pg_catalog.format('rule %I on %s', r.rulename, r.ev_class::pg_catalog.regclass)
          from pg_catalog.pg_rewrite r
         where r.ev_class operator(pg_catalog.=) any (select oid from rel)
           and r.rulename operator(pg_catalog.<>) '_RETURN'::pg_catalog.name
        union all
        select 6, pg_catalog.format('policy %I on %s', p.polname, p.polrelid::pg_catalog.regclass)
          from pg_catalog.pg_policy p where p.polrelid operator(pg_catalog.=) any (select oid from rel)
        union all
        select 6, pg_catalog.format('row level security on %s', c.oid::pg_catalog.regclass)
          from pg_catalog.pg_class c
         where c.relnamespace operator(pg_catalog.=) v_nsp and (c.relrowsecurity or c.relforcerowsecurity)
        union all
        select 7, pg_catalog.format('%s, which calls %s', a.what,
                                    case when d.refclassid operator(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
                                         then pg_catalog.format('function %s', d.refobjid::pg_catalog.regprocedure)
                                         when d.refclassid operator(pg_catalog.=) 'pg_catalog.pg_operator'::pg_catalog.regclass
                                         then pg_catalog.format('operator %s', d.refobjid::pg_catalog.regoperator)
                                         else pg_catalog.format('operator class %s', d.refobjid) end)
          from attachment a
          join pg_catalog.pg_depend d on d.classid operator(pg_catalog.=) a.classid
                                     and d.objid operator(pg_catalog.=) a.objid
         where (d.refclassid operator(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
                and not (d.refobjid operator(pg_catalog.=) any (select oid from safe_fn)))
            or (d.refclassid operator(pg_catalog.=) 'pg_catalog.pg_operator'::pg_catalog.regclass
                and not exists (select from pg_catalog.pg_operator o
                                 where o.oid operator(pg_catalog.=) d.refobjid
                                   and o.oprnamespace operator(pg_catalog.=) 'pg_catalog'::pg_catalog.regnamespace))
            or (d.refclassid operator(pg_catalog.=) 'pg_catalog.pg_opclass'::pg_catalog.regclass
                and not exists (select from pg_catalog.pg_opclass o
                                 where o.oid operator(pg_catalog.=) d.refobjid
                                   and o.opcnamespace operator(pg_catalog.=) 'pg_catalog'::pg_catalog.regnamespace))
        union all
        -- a column of a type with code of its own (a domain's check, a
        -- range's functions) from elsewhere
        select 7, pg_catalog.format('column %s.%I of type %s', t.attrelid::pg_catalog.regclass, t.attname,
                                    t.atttypid::pg_catalog.regtype)
          from pg_catalog.pg_attribute t join pg_catalog.pg_type y on y.oid operator(pg_catalog.=) t.atttypid
         where t.attrelid operator(pg_catalog.=) any (select oid from rel) and t.attnum operator(pg_catalog.>) 0
           and not t.attisdropped
           and not (y.typnamespace operator(pg_catalog.=) any (array['pg_catalog'::pg_catalog.regnamespace::pg_catalog.oid, v_nsp])))
    select pg_catalog.string_agg(f.what, ', ' order by f.ord, f.what)
      into v_what
      from (select * from found order by ord, what limit 10) f;
    if v_what is not null then
        raise exception 'schema pgque holds objects the extension did not make: %', v_what
            using errcode = 'object_not_in_prerequisite_state',
                  detail = 'This script runs with superuser rights; what another role attached to the extension''s tables or put in schema pgque would run with them.',
                  hint = 'Drop these objects (as their owner or a superuser), then run ALTER EXTENSION pgque_bgw UPDATE again (docs/security.md).';
    end if;
end
$foreign$;
