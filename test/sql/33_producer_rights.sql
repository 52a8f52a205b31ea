-- Producer rights without SECURITY DEFINER (ADR 0032): send, send_batch and
-- insert_event are SECURITY INVOKER C functions that run their lookup and
-- append as the extension owner.  Who may call them is still PostgreSQL's
-- EXECUTE check (a writer may, a reader and a role with nothing may not, with
-- the same SQLSTATEs as before), and no name they use goes through the
-- caller's search_path.
create role pgque_t33_writer in role pgque_writer;
create role pgque_t33_reader in role pgque_reader;
create role pgque_t33_nobody;
grant usage on schema pgque_test to public;

-- The hostile path first, while this backend's plans are still unprepared
-- (each test file is a new session): a schema listed before pg_catalog with
-- exact-match look-alikes of what the producer's SQL calls, temp tables and
-- tables named like the catalog and event tables, each recording a call.
create schema evil33;
grant usage on schema evil33 to public;
create table evil33.calls (what text, who name);
grant insert on evil33.calls to public;
create function evil33.hit(i_what text) returns void language sql as
  $$ insert into evil33.calls values (i_what, current_user) $$;
create function evil33.nextval(regclass) returns bigint language sql as
  $$ select evil33.hit('nextval'); select -1::bigint $$;
create function evil33.now() returns timestamptz language sql as
  $$ select evil33.hit('now'); select pg_catalog.now() $$;
create function evil33.unnest(text[]) returns setof text language sql as
  $$ select evil33.hit('unnest'); select pg_catalog.unnest($1) $$;
create function evil33.generate_series(int4, int4) returns setof int4 language sql as
  $$ select evil33.hit('generate_series'); select pg_catalog.generate_series($1, $2) $$;
create function evil33.hashtextextended(text, int8) returns int8 language sql as
  $$ select evil33.hit('hashtextextended'); select 0::int8 $$;
create function evil33.texteq(text, text) returns boolean language sql as
  $$ select evil33.hit('=(text,text)'); select $1 operator(pg_catalog.=) $2 $$;
create operator evil33.= (leftarg = text, rightarg = text, function = evil33.texteq);
create table evil33.queue (like pgque.queue);
select pgque.create_queue('rights_sp');
select 'event_' || queue_id || '_' || queue_cur_table as evtab from pgque.queue where queue_name = 'rights_sp' \gset
create table evil33.:"evtab" (like pgque.event_template);
select pgque.create_queue('rights_spb'), pgque.set_queue_config('rights_spb', 'partition_buckets', '4');

set role pgque_t33_writer;
create temp table queue (queue_name text, queue_id int4, queue_cur_table int4);
create temp table event_template (ev_id bigint);
create temp table :"evtab" (like event_template);
set search_path = pg_temp, evil33, pg_catalog, public;
select pgque.send('rights_sp', 'p1') > 0 as sent;
select pgque.send('rights_sp', 't', 'p2', 'key-a') > 0 as sent_keyed;
select pgque.send('rights_sp', '{"a": 1}'::jsonb) > 0 as sent_jsonb;
select array_length(pgque.send_batch('rights_sp', 't', array['b1', 'b2'], array['k1', 'k2']), 1) as batch;
select array_length(pgque.send_batch('rights_spb', 't', array['c1', 'c2', 'c3'], array['k1', 'k2', 'k3']), 1) as bucketed_batch;
select pgque.send('rights_spb', 't', 'c4', 'k4') > 0 as bucketed_keyed;
select pgque.insert_event('rights_sp', 't', 'p3') > 0 as inserted;
reset search_path;
-- nothing went to the look-alike tables either
select (select count(*) from pg_temp.queue) + (select count(*) from pg_temp.event_template) as temp_rows;
drop table pg_temp.queue, pg_temp.event_template, pg_temp.:"evtab";
reset role;
-- none of the look-alikes ran, for the writer or for the owner
select count(*) as evil_calls from evil33.calls;
select count(*) as evil_rows from evil33.queue;
-- every event is where it belongs, with real ids; bucketed keys in their bucket
select ev_type, ev_data, ev_extra1, ev_id > 0 as real_id from pgque_test.events('rights_sp') order by ev_id;
select count(*) as bucketed_events from pgque_test.events('rights_spb');

-- The entry points: C, SECURITY INVOKER, no SET; EXECUTE as before.
select p.oid::regprocedure as entry_point, p.prosecdef, p.proconfig,
       has_function_privilege('pgque_writer', p.oid, 'execute') as writer_may,
       has_function_privilege('pgque_reader', p.oid, 'execute') as reader_may
  from pg_proc p join pg_language l on l.oid = p.prolang
 where p.pronamespace = 'pgque'::regnamespace and l.lanname = 'c'
   and p.proname in ('send', 'send_batch', 'insert_event', '_insert_event')
 order by 1::text;

-- The append runs as pgque_owner, the owner of the extension's objects
-- (not the extension's owner, a superuser here: ADR 0042), under the
-- caller's search_path (nothing is resolved through it): a trigger a
-- superuser put on the current event table shows both.
create table pgque_test.t33_seen (who_is_owner boolean, caller text, path text);
grant insert on pgque_test.t33_seen to pgque_owner;
create function pgque_test.t33_seen() returns trigger language plpgsql as $$
begin
    insert into pgque_test.t33_seen
    select current_user = n.nspowner::regrole::name, session_user::text || '/' || pg_catalog.current_setting('role'),
           pg_catalog.current_setting('search_path')
      from pg_catalog.pg_namespace n where n.nspname = 'pgque';
    return null;
end $$;
select pgque.create_queue('rights');
select 'event_' || queue_id || '_' || queue_cur_table as evtab from pgque.queue where queue_name = 'rights' \gset
create trigger t33 after insert on pgque.:"evtab" for each row execute function pgque_test.t33_seen();
set role pgque_t33_writer;
set search_path = public;
select pgque.send('rights', 'as writer') > 0 as writer_sends;
select array_length(pgque.send_batch('rights', array['w1', 'w2']), 1) as writer_send_batch;
select pgque.send('rights', 't', '{"b": 2}'::jsonb, 'k') > 0 as writer_sends_jsonb;
select pgque.insert_event('rights', 't', 'x', 'e1', 'e2', 'e3', 'e4') > 0 as writer_insert_event;
-- back as the writer, with the writer's settings
select current_user, current_setting('search_path') as search_path;
reset search_path;
reset role;
select who_is_owner, caller like '%/pgque_t33_writer' as called_by_writer, path, count(*)
  from pgque_test.t33_seen group by 1, 2, 3;

-- An error inside the append hands the caller's identity back too.
select pgque.set_queue_config('rights', 'disable_insert', 'true');
set role pgque_t33_writer;
select pgque_test.error_of($$select pgque.send('rights', 'refused')$$) as disabled;
select current_user as after_error;
do $$
begin
    perform pgque.send_batch('rights', 't', array['x']);
exception when others then
    raise notice 'caught %, now %', sqlstate, current_user;
end $$;
select pgque_test.error_of($$select pgque.send('nope', 'x')$$) as unknown_queue;
select pgque_test.error_of($$select pgque.send(null, 'x')$$) as null_queue;
reset role;
select pgque.set_queue_config('rights', 'disable_insert', 'false');

-- A reader and a role with nothing are refused, as before (42501).
set role pgque_t33_reader;
select pgque_test.error_of($$select pgque.send('rights', 'x')$$) as reader_send;
select pgque_test.error_of($$select pgque.send('rights', '{}'::jsonb)$$) as reader_send_jsonb;
select pgque_test.error_of($$select pgque.send('rights', 't', 'x', 'k')$$) as reader_send_keyed;
select pgque_test.error_of($$select pgque.send_batch('rights', array['x'])$$) as reader_send_batch;
select pgque_test.error_of($$select pgque.insert_event('rights', 't', 'x')$$) as reader_insert_event;
select pgque_test.error_of($$select pgque._insert_event('rights', null, null, null, null, 't', 'x', null, null, null, null, true)$$) as reader_internal;
reset role;
set role pgque_t33_nobody;
select pgque_test.error_of($$select pgque.send('rights', 'x')$$) as nobody_send;
select pgque_test.error_of($$select pgque.send_batch('rights', 't', array['x'])$$) as nobody_send_batch;
reset role;

-- Revoking the writer role takes effect at the next send, cached queue or
-- not; granting it again too (across sessions: specs/send_rights.spec).
set role pgque_t33_writer;
select pgque.send('rights', 'before revoke') > 0 as sent_before;
reset role;
revoke pgque_writer from pgque_t33_writer;
set role pgque_t33_writer;
select pgque_test.error_of($$select pgque.send('rights', 'after revoke')$$) as after_revoke;
select pgque_test.error_of($$select pgque.send_batch('rights', array['after revoke'])$$) as batch_after_revoke;
reset role;
grant pgque_writer to pgque_t33_writer;
set role pgque_t33_writer;
select pgque.send('rights', 'granted again') > 0 as sent_after_grant;
reset role;
-- nothing refused was appended
select ev_data from pgque_test.events('rights') order by ev_id;

select pgque.drop_queue('rights', true), pgque.drop_queue('rights_sp', true), pgque.drop_queue('rights_spb', true);
drop table pgque_test.t33_seen;
drop function pgque_test.t33_seen();
set client_min_messages = warning;
drop schema evil33 cascade;
reset client_min_messages;
revoke usage on schema pgque_test from public;
drop role pgque_t33_writer, pgque_t33_reader, pgque_t33_nobody;
