-- PgQ's low-level functions that PgQue installs (issue #27 item 7), each
-- with PgQ's meaning in our layout (rotating child tables, partition
-- buckets, windows handed out in parts) and rights (pgque_admin only),
-- written from PgQ's and PgQue's documented behaviour.
select pgque.create_queue('ll');
select pgque.subscribe('ll', 'll_a'), pgque.subscribe('ll', 'll_b');
create role ll_login login;
create role ll_admin login in role pgque_admin;
create role ll_reader login in role pgque_reader;
create role ll_writer login in role pgque_writer;
grant usage on schema pgque_test to ll_reader, ll_admin;

-- current_event_table: the current child table; what a producer appends
-- is there (a query on it reads its partition buckets too)
select pgque.current_event_table('ll') = format('pgque.event_%s_%s', queue_id, queue_cur_table) as is_current
  from pgque.queue where queue_name = 'll';
select pgque.send('ll', 't', 'one'), pgque.send('ll', 't', 'two', 'key-1');
select pgque.current_event_table('ll') as cur \gset
select count(*) as events_there from :cur;
select pgque_test.error_of($$select pgque.current_event_table('ll_nope')$$) as unknown_queue;
select pgque_test.error_of($$select pgque.current_event_table(null)$$) as null_queue;
-- inserts disabled: refused as for every producer, unless replica
select pgque.set_queue_config('ll', 'disable_insert', 'true');
select pgque_test.error_of($$select pgque.current_event_table('ll')$$) as disabled;
set session_replication_role = replica;
select pgque.current_event_table('ll') = :'cur' as replica_may;
reset session_replication_role;
select pgque.set_queue_config('ll', 'disable_insert', 'false');

-- quote_fqname: the first dot separates the schema; none means public
select pgque.quote_fqname('pgque.event_1_0') as plain, pgque.quote_fqname('My Schema.a.b') as quoted,
       pgque.quote_fqname('t') as public_default;
select pgque_test.error_of($$select pgque.quote_fqname(null)$$) as null_name,
       pgque_test.error_of($$select pgque.quote_fqname('s.')$$) as empty_part,
       pgque_test.error_of($$select pgque.quote_fqname(repeat('x', 64))$$) as too_long;

-- seq_getval / seq_setval: a queue's sequences; forward only
select queue_event_seq as seq, queue_tick_seq as tseq from pgque.queue where queue_name = 'll' \gset
select pgque.seq_getval(:'seq') as event_seq_now;
select pgque.seq_setval(:'seq', 1000) as moved_to, pgque.seq_getval(:'seq') as reads;
select pgque.seq_setval(:'seq', 10) as never_back, pgque.seq_getval(:'seq') as still;
select pgque.send('ll', 't', 'after the move') as next_id;
select pgque_test.error_of($$select pgque.seq_getval('pgque.batch_id_seq')$$) as not_a_queue_sequence,
       pgque_test.error_of($$select pgque.seq_getval('public.ll_nope')$$) as unknown,
       pgque_test.error_of(format('select pgque.seq_setval(%L, 9223372036854775807)', :'seq')) as would_use_it_up,
       pgque_test.error_of(format('select pgque.seq_setval(%L, null)', :'seq')) as null_value;
select pgque.seq_getval(:'tseq') = max(tick_id) as tick_seq_reads
  from pgque.tick t join pgque.queue q on q.queue_id = t.tick_queue where q.queue_name = 'll';

-- batch_event_sql: a statement that returns what the consumer receives,
-- also for a window handed out in parts (ADR 0003)
select pgque.ticker('ll') is not null as ticked;
select count(*) as first_part from pgque.receive('ll', 'll_a', 1);
select pgque.ack(batch_id) from pgque.next_batch_info('ll', 'll_a');
select batch_id as b from pgque.next_batch_info('ll', 'll_a') \gset
select pgque.batch_event_sql(:b) as bsql \gset
select ev_id, ev_data, ev_extra1 from (:bsql) e;
select array(select ev_id from (:bsql) e) = array(select ev_id from pgque.get_batch_events(:b)) as same_as_receive;
-- batch_event_tables: the tables the window can lie in, by the readers' rule
select t = :'cur' as current_table from pgque.batch_event_tables(:b) t;
select pgque_test.error_of($$select pgque.batch_event_sql(-5)$$) as unknown_batch,
       pgque_test.error_of($$select pgque.batch_event_tables(null)$$) as null_batch;

-- find_tick_helper: the tick next_batch_custom would end the batch at
select queue_id as qid from pgque.queue where queue_name = 'll' \gset
select t.tick_id as t0, t.tick_time as t0_time, t.tick_event_seq as t0_seq
  from pgque.tick t where t.tick_queue = :qid order by tick_id limit 1 \gset
select next_tick_id = (select max(tick_id) from pgque.tick where tick_queue = :qid) as past_two_events
  from pgque.find_tick_helper(:qid, :t0, :'t0_time', :t0_seq, 2, null);
select next_tick_id is null as not_yet
  from pgque.find_tick_helper(:qid, :t0, :'t0_time', :t0_seq, 1000000, null);
select next_tick_id is null as no_limit_no_tick
  from pgque.find_tick_helper(:qid, :t0, :'t0_time', :t0_seq, null, null);
select pgque_test.error_of(format('select pgque.find_tick_helper(%s, %s, now(), 0, 0, null)', :qid, :t0)) as zero_count,
       pgque_test.error_of('select pgque.find_tick_helper(-1, 1, now(), 0, 1, null)') as unknown_queue;

-- insert_event_raw: every field chosen; an owner makes it one consumer's
-- (ll_b finishes its first window first, so both read the next one)
select pgque.ack(batch_id) from (select distinct batch_id from pgque.receive('ll', 'll_b')) x;
select sub_id as sub_b from pgque.subscription s join pgque.consumer c on c.co_id = s.sub_consumer
 where c.co_name = 'll_b' \gset
-- chosen ids are ids the queue has handed out (ADR 0101): the sequence
-- moves past them first
select pgque.seq_setval(:'seq', 7000) as ids_below;
select pgque.insert_event_raw('ll', 5000, '2020-01-02 03:04:05+00', null, 2, 'raw', 'for all', 'x1', null, null, 'x4') as raw_id;
select pgque.insert_event_raw('ll', null, now(), :sub_b, null, 'raw', 'for b only', null, null, null, null) as owned_id;
select pgque_test.error_of($$select pgque.insert_event_raw('ll', 0, now(), null, null, 't', 'd', null, null, null, null)$$) as zero_id,
       pgque_test.error_of($$select pgque.insert_event_raw('ll', null, now(), -7, null, 't', 'd', null, null, null, null)$$) as not_a_subscription,
       pgque_test.error_of($$select pgque.insert_event_raw('ll', null, null, null, null, 't', 'd', null, null, null, null)$$) as null_time;
-- event_retry_raw: due again for one consumer, through the retry mover
select pgque.event_retry_raw('ll', 'll_a', now() - interval '1 second', 7000, now(), 4, 'retried', 'for a only',
                             null, null, null, null) as retry_id;
select pgque.event_retry_raw('ll', 'll_a', now(), 7000, now(), 9, 'again', 'kept as it was',
                             null, null, null, null) as same_id_again;
select pgque_test.error_of($$select pgque.event_retry_raw('ll', 'll_nope', now(), null, now(), 0, 't', 'd', null, null, null, null)$$) as not_subscribed,
       pgque_test.error_of($$select pgque.event_retry_raw('ll', 'll_a', 'infinity', null, now(), 0, 't', 'd', null, null, null, null)$$) as infinite_time;
select pgque.maint_retry_events() as moved;
select pgque.ack(:b);
select pgque.ticker('ll') is not null as ticked;
select msg_id, type, payload, retry_count, created_at = '2020-01-02 03:04:05+00' as kept_time, extra1, extra4
  from pgque.receive('ll', 'll_a') order by msg_id;
select msg_id, type, payload from pgque.receive('ll', 'll_b') order by msg_id;

-- maint_operations: the worker's steps; a queue whose rotation is due is
-- rotated by running them, one transaction each
select pgque.set_queue_config('ll', 'rotation_period', '1 second');
update pgque.queue set queue_switch_time = now() - interval '1 hour' where queue_name = 'll';
select func_name, func_arg from pgque.maint_operations();
select pgque.ack(batch_id) from (select distinct batch_id from pgque.receive('ll', 'll_a')) x;
select pgque.ack(batch_id) from (select distinct batch_id from pgque.receive('ll', 'll_b')) x;
select queue_cur_table as before from pgque.queue where queue_name = 'll' \gset
select pgque.maint_rotate_tables_step1('ll') as switched;
select queue_cur_table <> :before as rotated from pgque.queue where queue_name = 'll';
select count(*) filter (where func_name = 'pgque.maint_rotate_tables_step1') as step1_rows_now
  from pgque.maint_operations();
-- with autovacuum off (the test configuration), the tables to vacuum
select t from pgque.maint_tables_to_vacuum() t order by 1;
select count(*) = (select count(*) from pgque.maint_tables_to_vacuum()) as vacuum_rows
  from pgque.maint_operations() where func_name = 'vacuum';

-- grant_perms and tune_storage set the queue's tables again as
-- create_queue sets them; never anything for PUBLIC
select format('pgque.event_%s_%s', :qid, queue_cur_table) as tbl from pgque.queue where queue_name = 'll' \gset
revoke select on :tbl from pgque_admin;
alter table :tbl set (fillfactor = 70, autovacuum_enabled = on);
select has_table_privilege('pgque_admin', :'tbl', 'select') as admin_reads, reloptions
  from pg_class where oid = :'tbl'::regclass;
select pgque.grant_perms('ll') as granted, pgque.tune_storage('ll') as tuned;
select has_table_privilege('pgque_admin', :'tbl', 'select') as admin_reads,
       has_table_privilege('public', :'tbl', 'select') as public_reads, reloptions
  from pg_class where oid = :'tbl'::regclass;
select pgque_test.error_of($$select pgque.tune_storage('ll_nope')$$) as unknown_queue;

-- upgrade_schema: the schema changes only with ALTER EXTENSION UPDATE
select pgque.upgrade_schema();

-- Who may call them: pgque_admin (and the extension's owner), as in
-- PgQue; nobody else (a login role, a reader, a writer).
create temp table ll_fn as
select p.oid::regprocedure as fn from pg_proc p
 where p.pronamespace = 'pgque'::regnamespace
   and p.proname in ('current_event_table', 'quote_fqname', 'batch_event_sql', 'batch_event_tables',
                     'seq_getval', 'seq_setval', 'maint_operations', 'maint_tables_to_vacuum',
                     'insert_event_raw', 'event_retry_raw', 'find_tick_helper', 'grant_perms',
                     'tune_storage', 'upgrade_schema');
select count(*) as functions,
       count(*) filter (where has_function_privilege('ll_admin', fn, 'execute')) as admin,
       count(*) filter (where has_function_privilege('ll_writer', fn, 'execute')) as writer,
       count(*) filter (where has_function_privilege('ll_reader', fn, 'execute')) as reader,
       count(*) filter (where has_function_privilege('ll_login', fn, 'execute')) as login
  from ll_fn;
set role ll_reader;
select pgque_test.error_of($$select pgque.current_event_table('ll')$$) as reader_current_table,
       pgque_test.error_of($$select pgque.seq_getval('pgque.event_1_id_seq')$$) as reader_seq;
reset role;
-- an admin: a queue whose "send" is not the admin's own still allows it
-- (admins hold every queue right, ADR 0047); a sequence it cannot read
-- directly is read through seq_getval only when it is a queue's
set role ll_admin;
select pgque.current_event_table('ll') = :'tbl' as admin_current_table;
select pgque.seq_getval(:'seq') >= 1000 as admin_reads_queue_seq;
select pgque_test.error_of($$select pgque.seq_setval('pgque.batch_id_seq', 1)$$) as admin_other_seq;
reset role;

-- pgque.config keeps PgQue's column names (its tests read singleton)
select singleton, tick_period_ms from pgque.config;

select pgque.drop_queue('ll', true);
revoke usage on schema pgque_test from ll_reader, ll_admin;
drop role ll_login, ll_admin, ll_reader, ll_writer;
