-- Roles: a writer cannot consume, a reader cannot produce, PUBLIC can do
-- neither and cannot read payloads.  SECURITY DEFINER functions pin
-- search_path, and a temp table cannot hijack them.
create role pgque_t_writer login in role pgque_writer;
create role pgque_t_reader login in role pgque_reader;
create role pgque_t_admin login in role pgque_admin;
create role pgque_t_nobody login;
grant usage on schema pgque_test to public;

-- the reader's consumer is the reader's (per-consumer ownership: see
-- test/pgtap/privileges.sql)
select pgque.create_queue('sec');
set role pgque_t_reader;
select pgque.subscribe('sec', 'app');
reset role;
select pgque.send('sec', 'secret payload');
select pgque.ticker('sec') is not null as ticked;

-- the three roles exist, admin is a member of reader and writer
select r.rolname, pg_has_role('pgque_admin', r.rolname, 'member') as admin_is_member
  from pg_roles r where r.rolname in ('pgque_reader', 'pgque_writer', 'pgque_admin') order by 1;

set role pgque_t_writer;
select pgque.send('sec', 'from writer') is not null as writer_sends;
select pgque.send_batch('sec', array['w1']) is not null as writer_send_batch;
select pgque_test.error_of($$select * from pgque.receive('sec', 'app')$$) as writer_receive;
select pgque_test.error_of($$select pgque.subscribe('sec', 'w')$$) as writer_subscribe;
select pgque_test.error_of($$select pgque.create_queue('w')$$) as writer_create_queue;
select pgque_test.error_of($$select * from pgque.event_template$$) as writer_reads_payloads;
reset role;

set role pgque_t_reader;
select payload from pgque.receive('sec', 'app');
select pgque.ack(batch_id) = 1 as reader_acks from (select distinct batch_id from pgque.receive('sec', 'app')) b;
select pgque_test.error_of($$select pgque.send('sec', 'x')$$) as reader_send;
select pgque_test.error_of($$select pgque.insert_event('sec', 't', 'x')$$) as reader_insert_event;
select pgque_test.error_of($$select pgque.ticker()$$) as reader_ticker;
select pgque_test.error_of($$select pgque.drop_queue('sec', true)$$) as reader_drop_queue;
reset role;

set role pgque_t_admin;
select pgque.ticker() >= 0 as admin_ticks;
select count(*) > 0 as admin_status from pgque.status();
select pgque.create_queue('admin_made') as admin_creates;
select pgque.send('admin_made', 'admin is a writer too') is not null as admin_sends;
reset role;

set role pgque_t_nobody;
select pgque_test.error_of($$select pgque.send('sec', 'x')$$) as public_send;
select pgque_test.error_of($$select * from pgque.receive('sec', 'app')$$) as public_receive;
select pgque_test.error_of($$select pgque.version()$$) as public_version;
select pgque_test.error_of($$select * from pgque.queue$$) as public_reads_queue;
select pgque_test.error_of($$select * from pgque.event_template$$) as public_reads_payloads;
reset role;
-- and the event tables themselves
select pgque_test.error_of(format('set role pgque_t_nobody; select * from pgque.%I', 'event_' || queue_id || '_0'))
       as public_reads_event_table
  from pgque.queue where queue_name = 'sec';
reset role;
select pgque_test.error_of(format('set role pgque_t_reader; select * from pgque.%I', 'event_' || queue_id || '_0'))
       as reader_reads_event_table
  from pgque.queue where queue_name = 'sec';
reset role;

-- no function of the API is executable by PUBLIC
select count(*) as public_executable
  from pg_proc p
 where p.pronamespace = 'pgque'::regnamespace
   and has_function_privilege('pgque_t_nobody', p.oid, 'execute');
-- every SECURITY DEFINER function pins search_path, with pg_temp last
select p.oid::regprocedure as unpinned
  from pg_proc p
 where p.pronamespace = 'pgque'::regnamespace and p.prosecdef
   and not coalesce('search_path=pgque, pg_catalog, pg_temp' = any(p.proconfig), false);
-- internal helpers (_name) are granted to no role, but the three that entry
-- points running as their caller call (ticker_loop, start, stop: ADR 0042)
select p.oid::regprocedure as granted_internal
  from pg_proc p, unnest(array['pgque_reader', 'pgque_writer', 'pgque_admin']) r
 where p.pronamespace = 'pgque'::regnamespace and p.proname like '\_%'
   and has_function_privilege(r, p.oid, 'execute');

-- a temp table named like a catalog table does not change what the API reads
set role pgque_t_reader;
create temp table subscription (sub_id int);
create temp table queue (queue_name text);
reset role;
select pgque.send('sec', 'after temp tables');
select pgque.ticker('sec') is not null as ticked;
set role pgque_t_reader;
-- one tick window per batch (ADR 0057): the writer's window, then this one
select payload from pgque.receive('sec', 'app');
select pgque.ack(batch_id) = 1 as reader_acks from (select distinct batch_id from pgque.receive('sec', 'app')) b;
select payload from pgque.receive('sec', 'app');
reset role;

revoke usage on schema pgque_test from public;
drop owned by pgque_t_writer, pgque_t_reader, pgque_t_admin, pgque_t_nobody;
drop role pgque_t_writer, pgque_t_reader, pgque_t_admin, pgque_t_nobody;
select pgque.drop_queue('sec', true), pgque.drop_queue('admin_made');
