-- Change-data-capture triggers: pgque.logutriga(), jsontriga(), sqltriga()
-- (issue #13, ADR 0015).  Every argument, formats, keys, errors, rights, and
-- the events reaching a consumer.
select pgque.create_queue('cdc');
select pgque.subscribe('cdc', 'cdc_c');

-- The roles: a table owner who may produce (pgque_admin: it may attach the
-- triggers and is a pgque_writer), one who may not, and a role that changes
-- rows with no pgque rights at all.
create role cdc_owner login in role pgque_admin;
create role cdc_plain login;
create role cdc_changer login;
create schema "Cdc Schema" authorization cdc_owner;
grant usage on schema "Cdc Schema" to cdc_changer, cdc_plain;
grant create on schema "Cdc Schema" to cdc_plain;
grant usage on schema pgque_test to cdc_owner, cdc_plain, cdc_changer;

-- a table with odd names and types
set role cdc_owner;
create table "Cdc Schema"."Odd Table" (
    id int8 primary key, "select" text, "Odd ""Col""" text, n numeric, d date,
    ts timestamptz, b bool, j jsonb, arr text[], i2 int2, i4 int4, by bytea);
grant insert, update, delete, select, truncate on "Cdc Schema"."Odd Table" to cdc_changer;
create trigger a_log after insert or update or delete on "Cdc Schema"."Odd Table"
    for each row execute function pgque.logutriga('cdc');
create trigger b_json after insert or update or delete on "Cdc Schema"."Odd Table"
    for each row execute function pgque.jsontriga('cdc');
create trigger c_sql after insert or update or delete on "Cdc Schema"."Odd Table"
    for each row execute function pgque.sqltriga('cdc');
reset role;
set timezone = 'UTC';

-- a role with no pgque rights changes the rows: the events are appended
set role cdc_changer;
select has_schema_privilege('pgque', 'usage') as changer_may_use_pgque;
insert into "Cdc Schema"."Odd Table" values
    (1, 'a b&c=d', 'it''s "q"', 1.50, '2024-02-29', '2024-01-02 03:04:05.5+00', true,
     '{"k": [1, "two"]}', '{x,"y z"}', -2, 2147483647, '\x00ff'),
    (2, null, null, null, null, null, null, null, null, null, null, null);
update "Cdc Schema"."Odd Table" set "select" = 'é%+', n = 2 where id = 1;
-- an update that changes nothing is still an event (sqltriga writes the key onto itself)
update "Cdc Schema"."Odd Table" set "select" = "select" where id = 2;
delete from "Cdc Schema"."Odd Table" where id = 2;
reset role;
select ev_id, ev_type, ev_data, ev_extra1, ev_extra2, ev_extra3, ev_extra4 from pgque_test.events('cdc');

-- the events reach a consumer after a tick
select pgque.ticker('cdc') is not null as ticked;
select msg_id, type, extra1 from pgque.receive('cdc', 'cdc_c') order by msg_id;
select pgque.ack(b) from (select distinct batch_id b from pgque.receive('cdc', 'cdc_c')) x;

-- update of a key column is refused (PgQ: a key change is a delete and an insert)
select pgque_test.error_of($$update "Cdc Schema"."Odd Table" set id = 5 where id = 1$$) as key_update;
select id from "Cdc Schema"."Odd Table";

-- a rolled-back change leaves no event: the event is in the change's transaction
select count(*) as events_before from pgque_test.events('cdc');
begin;
insert into "Cdc Schema"."Odd Table" (id) values (3);
rollback;
select count(*) as events_after_rollback from pgque_test.events('cdc');
drop table "Cdc Schema"."Odd Table";

-- A table without a primary key: inserts are events ('I:'), updates and
-- deletes need pkey=.
select pgque.create_queue('cdc_nopk');
create table cdc_nopk (a int, b text, c text);
create trigger l after insert or update or delete on cdc_nopk
    for each row execute function pgque.logutriga('cdc_nopk');
create trigger s after insert or update or delete on cdc_nopk
    for each row execute function pgque.sqltriga('cdc_nopk');
insert into cdc_nopk values (1, 'x', 'y');
select pgque_test.error_of($$update cdc_nopk set b = 'z'$$) as update_without_key;
select pgque_test.error_of($$delete from cdc_nopk$$) as delete_without_key;
-- pkey= names the key: composite, in the order given, spaces allowed
drop trigger l on cdc_nopk;
drop trigger s on cdc_nopk;
create trigger l after insert or update or delete on cdc_nopk
    for each row execute function pgque.logutriga('cdc_nopk', 'pkey=b, a');
create trigger s after insert or update or delete on cdc_nopk
    for each row execute function pgque.sqltriga('cdc_nopk', 'pkey=b,a');
update cdc_nopk set c = null;
delete from cdc_nopk;
-- sqltriga cannot address a row whose key is NULL
insert into cdc_nopk values (2, null, 'y');
select pgque_test.error_of($$delete from cdc_nopk$$) as null_key;
select ev_id, ev_type, ev_data, ev_extra1 from pgque_test.events('cdc_nopk');

-- ignore=: the column is left out; an update of only ignored columns is no event
select pgque.create_queue('cdc_arg');
create table cdc_arg (id int primary key, v text, noise text, "_pgq_ev_extra3" text);
create trigger j after insert or update or delete on cdc_arg
    for each row execute function pgque.jsontriga('cdc_arg', 'ignore=noise', 'backup');
create trigger s after insert or update or delete on cdc_arg
    for each row execute function pgque.sqltriga('cdc_arg', 'ignore=noise', 'backup');
insert into cdc_arg values (1, 'v1', 'n1', 'magic');
update cdc_arg set noise = 'n2';
update cdc_arg set v = 'v2', noise = 'n3', "_pgq_ev_extra3" = null;
select ev_id, ev_type, ev_data, ev_extra2, ev_extra3 from pgque_test.events('cdc_arg');
delete from cdc_arg;
drop trigger j on cdc_arg;
drop trigger s on cdc_arg;
alter table cdc_arg drop column "_pgq_ev_extra3";

-- when= and the ev_*= expressions see the row (the new one; the old one for
-- a delete); a NULL condition is no event
create trigger l after insert or update or delete on cdc_arg
    for each row execute function pgque.logutriga('cdc_arg', 'when=v <> ''skip me''',
        'ev_type=''row.'' || lower(tg_op_guess)', 'ev_extra2=v || ''!''');
select pgque_test.error_of($$insert into cdc_arg values (10, 'a')$$) as unknown_column_in_expression;
drop trigger l on cdc_arg;
create trigger l after insert or update or delete on cdc_arg
    for each row execute function pgque.logutriga('cdc_arg', 'when=v <> ''skip me''',
        'ev_type=''row.'' || id', 'ev_data=pg_catalog.upper(v)', 'ev_extra1=''t:'' || id',
        'ev_extra2=v || ''!''', 'ev_extra3=current_user', 'ev_extra4=null');
insert into cdc_arg values (10, 'a'), (11, 'skip me'), (12, null);
delete from cdc_arg where id = 10;
select ev_type, ev_data, ev_extra1, ev_extra2, ev_extra3, ev_extra4
  from pgque_test.events('cdc_arg') where ev_type like 'row.%';
drop trigger l on cdc_arg;
-- a non-boolean when=, two statements, a bad expression
create trigger l after insert on cdc_arg for each row execute function pgque.logutriga('cdc_arg', 'when=id');
select pgque_test.error_of($$insert into cdc_arg values (20, 'x')$$) as when_not_boolean;
drop trigger l on cdc_arg;
create trigger l after insert on cdc_arg
    for each row execute function pgque.logutriga('cdc_arg', 'when=true) as x; select (1');
select pgque_test.error_of($$insert into cdc_arg values (20, 'x')$$) as two_statements;
drop trigger l on cdc_arg;
delete from cdc_arg;

-- SKIP in a BEFORE trigger: the event is queued, the row change is not made
create trigger skip_it before insert or update or delete on cdc_arg
    for each row execute function pgque.logutriga('cdc_arg', 'SKIP');
insert into cdc_arg values (30, 'redirected');
select count(*) as rows_stored from cdc_arg;
select ev_type, ev_data from pgque_test.events('cdc_arg') order by ev_id desc limit 1;
drop trigger skip_it on cdc_arg;
-- SKIP in an AFTER trigger cannot skip anything
create trigger skip_after after insert on cdc_arg
    for each row execute function pgque.logutriga('cdc_arg', 'SKIP');
select pgque_test.error_of($$insert into cdc_arg values (31, 'x')$$) as skip_after;
drop trigger skip_after on cdc_arg;
-- a BEFORE trigger without SKIP lets the change through
create trigger before_log before insert on cdc_arg
    for each row execute function pgque.sqltriga('cdc_arg');
insert into cdc_arg values (32, 'kept');
select id, v from cdc_arg;
drop trigger before_log on cdc_arg;

-- deny: every change is refused
create trigger deny_it before insert or update or delete on cdc_arg
    for each row execute function pgque.logutriga('cdc_arg', 'deny');
select pgque_test.error_of($$insert into cdc_arg values (40, 'x')$$) as denied;
drop trigger deny_it on cdc_arg;

-- TRUNCATE: a statement trigger, one event of type 'R'
create trigger tr_l after truncate on cdc_arg for each statement execute function pgque.logutriga('cdc_arg');
create trigger tr_j after truncate on cdc_arg for each statement execute function pgque.jsontriga('cdc_arg');
create trigger tr_s after truncate on cdc_arg for each statement execute function pgque.sqltriga('cdc_arg');
truncate cdc_arg;
select ev_type, ev_data, ev_extra1 from pgque_test.events('cdc_arg') order by ev_id desc limit 3;
drop trigger tr_l on cdc_arg;
drop trigger tr_j on cdc_arg;
drop trigger tr_s on cdc_arg;
create trigger tr_bad after truncate on cdc_arg
    for each statement execute function pgque.logutriga('cdc_arg', 'pkey=id');
select pgque_test.error_of($$truncate cdc_arg$$) as truncate_with_pkey;
drop trigger tr_bad on cdc_arg;

-- misuse: statement-level row trigger, direct call, no queue, unknown queue,
-- bad arguments, unknown columns
create trigger st after insert on cdc_arg for each statement execute function pgque.logutriga('cdc_arg');
select pgque_test.error_of($$insert into cdc_arg values (50, 'x')$$) as statement_level;
drop trigger st on cdc_arg;
select pgque_test.error_of($$select pgque.logutriga()$$) as direct_call;
create function pgque_test.cdc_try(i_args text) returns text language plpgsql as $$
declare
    r text;
begin
    execute 'create trigger try after insert on cdc_arg for each row execute function pgque.logutriga('
            || i_args || ')';
    r := pgque_test.error_of($q$insert into cdc_arg values (60, 'x')$q$);
    execute 'drop trigger try on cdc_arg';
    delete from cdc_arg;
    return r;
end $$;
select a as args, pgque_test.cdc_try(a) as result
  from unnest(array[
        '',
        $$'no_such_queue'$$,
        $$''$$,
        quote_literal(repeat('q', 58)),
        $$'cdc_arg', 'bogus'$$,
        $$'cdc_arg', 'ignore='$$,
        $$'cdc_arg', 'ignore=nope'$$,
        $$'cdc_arg', 'pkey=id,nope'$$,
        $$'cdc_arg', 'pkey=id', 'pkey=v'$$,
        $$'cdc_arg', 'when='$$,
        $$'cdc_arg', 'ev_extra5=1'$$]) a;

-- disable_insert is honoured; session_replication_role = replica fires only
-- ENABLE ALWAYS/REPLICA triggers, and they may insert; local disables them
create trigger l after insert on cdc_arg for each row execute function pgque.logutriga('cdc_arg');
select pgque.set_queue_config('cdc_arg', 'disable_insert', 'true');
select pgque_test.error_of($$insert into cdc_arg values (70, 'x')$$) as disabled;
alter table cdc_arg enable always trigger l;
set session_replication_role = replica;
insert into cdc_arg values (71, 'replica');
set session_replication_role = local;
insert into cdc_arg values (72, 'local');
reset session_replication_role;
select pgque.set_queue_config('cdc_arg', 'disable_insert', 'false');
select ev_type, ev_data from pgque_test.events('cdc_arg') order by ev_id desc limit 1;
select id, v from cdc_arg order by id;
-- a new column shows up in the next event (the trigger's cache is invalidated)
alter table cdc_arg add column added int default 7;
insert into cdc_arg values (73, 'after alter');
select ev_type, ev_data from pgque_test.events('cdc_arg') order by ev_id desc limit 1;
drop trigger l on cdc_arg;

-- Rights.  A role without pgque_admin may not attach the triggers.
set role cdc_plain;
create table "Cdc Schema".plain_t (id int primary key);
select pgque_test.error_of($$create trigger x after insert on "Cdc Schema".plain_t
                              for each row execute function pgque.logutriga('cdc_arg')$$) as attach_without_rights;
grant trigger, insert on "Cdc Schema".plain_t to cdc_owner;
reset role;
-- nor may a pgque_writer: attaching needs EXECUTE, granted to pgque_admin
create role cdc_writer login in role pgque_writer;
grant create, usage on schema "Cdc Schema" to cdc_writer;
grant usage on schema pgque_test to cdc_writer;
set role cdc_writer;
create table "Cdc Schema".writer_t (id int primary key);
select pgque_test.error_of($$create trigger x after insert on "Cdc Schema".writer_t
                              for each row execute function pgque.logutriga('cdc_arg')$$) as writer_attach;
reset role;
-- A trigger attached by an admin to a table whose owner is no pgque_writer
-- refuses to produce: the owner would write into a queue it may not send to.
set role cdc_owner;
create trigger x after insert on "Cdc Schema".plain_t for each row execute function pgque.logutriga('cdc_arg');
select pgque_test.error_of($$insert into "Cdc Schema".plain_t values (1)$$) as owner_not_writer;
reset role;
grant pgque_writer to cdc_plain;
set role cdc_owner;
insert into "Cdc Schema".plain_t values (1);
reset role;
select ev_type, ev_data, ev_extra1 from pgque_test.events('cdc_arg') order by ev_id desc limit 1;
-- Expressions run as the table's owner, restricted, with search_path
-- pg_catalog, pg_temp: not as the extension owner, not as the changing role.
create function public.cdc_helper(int) returns text language sql as 'select ''helper''';
set role cdc_owner;
create table "Cdc Schema".expr_t (id int primary key);
grant insert on "Cdc Schema".expr_t to cdc_changer;
create trigger x after insert on "Cdc Schema".expr_t for each row execute function
    pgque.logutriga('cdc_arg', 'ev_extra2=current_user', 'ev_extra3=session_user',
                    'when=id <> 3 or (select count(*) > 0 from pg_catalog.pg_authid)');
reset role;
insert into "Cdc Schema".expr_t values (1);
set role cdc_changer;
insert into "Cdc Schema".expr_t values (2);
reset role;
select ev_type, ev_extra2, ev_extra3 from pgque_test.events('cdc_arg') order by ev_id desc limit 2;
select pgque_test.error_of($$insert into "Cdc Schema".expr_t values (3)$$) as expr_has_owner_rights_only;
set role cdc_owner;
drop trigger x on "Cdc Schema".expr_t;
create trigger x after insert on "Cdc Schema".expr_t for each row execute function
    pgque.logutriga('cdc_arg', 'ev_extra2=cdc_helper(id)');
reset role;
select pgque_test.error_of($$insert into "Cdc Schema".expr_t values (4)$$) as unqualified_function;

drop schema "Cdc Schema" cascade;
drop table cdc_arg, cdc_nopk;
drop function public.cdc_helper(int), pgque_test.cdc_try(text);
select pgque.unsubscribe('cdc', 'cdc_c');
select pgque.drop_queue(q, true) from unnest(array['cdc', 'cdc_nopk', 'cdc_arg']) q;
drop owned by cdc_owner, cdc_plain, cdc_changer, cdc_writer;
drop role cdc_owner, cdc_plain, cdc_changer, cdc_writer;
