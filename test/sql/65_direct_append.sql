-- The producer's append without the executor (ADR 0085): send, send_batch,
-- insert_event, _insert_event and the CDC triggers form the row and insert
-- it with heap_insert and index_insert when the queue's table is as the
-- extension made it, and take the kept plan otherwise.  Each case checks
-- the rows themselves: the fields, the defaults (ev_time = now(), ev_txid =
-- the top-level xid), where they went, and what the executor would have
-- enforced on a table someone changed.
set timezone = 'UTC';
select pgque.create_queue('da');
select queue_id as qid from pgque.queue where queue_name = 'da' \gset
-- the events of a queue, in id order, with the table each one is in
create function pgque_test.da_rows(i_queue text)
returns table (tab text, ev_type text, ev_data text, ev_extra1 text, ev_extra2 text, ev_extra3 text,
               ev_extra4 text, ev_owner int4, ev_retry int4)
language plpgsql as $$
begin
    return query execute format(
        'select regexp_replace(tableoid::regclass::text, ''^pgque\.event_[0-9]+_'', ''''),
                ev_type, ev_data, ev_extra1, ev_extra2, ev_extra3, ev_extra4, ev_owner, ev_retry
           from pgque.event_%s order by ev_id',
        (select queue_id from pgque.queue where queue_name = i_queue));
end $$;

-- every field, NULLs included, and the defaults of the row
begin;
select pgque.send('da', 'p1') > 0 as sent;
select pgque.send('da', 't', 'p2', 'key') > 0 as sent_keyed;
select pgque.insert_event('da', null, null, null, null, null, null) > 0 as all_null;
select pgque.insert_event('da', 'ty', 'da', 'e1', 'e2', 'e3', 'e4') > 0 as all_set;
select pgque._insert_event('da', 9000000, '2020-01-02 03:04:05+00', 7, 3, 'full', 'fd',
                           null, 'x2', null, 'x4', true) as explicit_id;
select pgque.send('da', '{"b": [1, 2], "a": null}'::jsonb) > 0 as sent_jsonb;
select pgque.send_batch('da', 't', array['b1', null, 'b3']) is not null as batch;
select pgque.send_batch('da', 't', array['k1', 'k2'], array['key-1', null]) is not null as keyed_batch;
select count(*) as rows, bool_and(ev_time = now()) filter (where ev_id <> 9000000) as time_is_now,
       bool_and(ev_txid = pg_current_xact_id()) as txid_is_top,
       bool_and(ev_time = '2020-01-02 03:04:05+00') filter (where ev_id = 9000000) as given_time
  from pgque.event_template where tableoid::regclass::text like 'pgque.event\_' || :qid || '\_%';
commit;
select * from pgque_test.da_rows('da');

-- a subtransaction's rows: the top-level xid, and gone with a rolled-back savepoint
truncate pgque.event_template;
begin;
select pgque.send('da', 'kept-1') > 0 as sent;
savepoint s;
select pgque.send('da', 'rolled-back') > 0 as sent;
select pgque.send_batch('da', 't', array['rolled-back-too']) is not null as batch;
rollback to savepoint s;
savepoint s2;
select pgque.send('da', 'kept-2') > 0 as sent_in_savepoint;
release savepoint s2;
select count(distinct ev_txid) = 1 and min(ev_txid) = pg_current_xact_id() as one_top_xid
  from pgque.event_template;
commit;
select tab, ev_data from pgque_test.da_rows('da');

-- a toasted 1 MB payload (incompressible text: out of line), sent and batched
truncate pgque.event_template;
select string_agg(md5(i::text), '') as big from generate_series(1, 32768) i \gset
select pgque.send('da', :'big') > 0 as sent_1mb;
select pgque.send_batch('da', 't', array[:'big', 'small']) is not null as batched_1mb;
select length(ev_data) as len, md5(ev_data) = md5(:'big') as same
  from pgque.event_template order by ev_id;
select pg_relation_size(reltoastrelid) > 1000000 as toasted
  from pg_class where oid = ('pgque.event_' || :qid || '_0')::regclass;

-- every partition bucket's table, keyed sends and a batch split across them
select pgque.create_queue('da_b'), pgque.set_queue_config('da_b', 'partition_buckets', '4');
select pgque.send('da_b', 't', 'one-' || k, k) > 0 as sent from unnest(array['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h']) k;
select pgque.send_batch('da_b', 't', array(select 'batch-' || k from unnest(array['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h']) k),
                        array['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h']) is not null as batch;
select pgque.send('da_b', 't', 'keyless', null) > 0 as keyless;
-- each row sits in the bucket table of its key's slot; all four are used
select bool_and(tab = '0_b' || coalesce(pgque._slot_of(ev_extra1, 4), 0)) as each_in_its_bucket,
       count(distinct tab) as buckets_used, count(*) as events
  from pgque_test.da_rows('da_b');

-- an unlogged queue: its rows, in its unlogged tables
select pgque.create_queue('da_u', '{"unlogged": true}');
select pgque.send('da_u', 'u1') > 0 as sent, pgque.send_batch('da_u', 't', array['u2', 'u3']) is not null as batch;
select tab, ev_data, (select relpersistence from pg_class where oid = ('pgque.event_' || (select queue_id from pgque.queue where queue_name = 'da_u') || '_' || tab)::regclass) as persistence
  from pgque_test.da_rows('da_u');

-- a queue dropped and re-created under the same name in this session: the new tables
select pgque.send('da_u', 'before-drop') > 0 as sent;
select pgque.drop_queue('da_u');
select pgque.create_queue('da_u');
select pgque.send('da_u', 'after-recreate') > 0 as sent;
select tab, ev_data from pgque_test.da_rows('da_u');
begin;
-- ... and in one transaction
select pgque.drop_queue('da_u');
select pgque.create_queue('da_u');
select pgque.send('da_u', 'same-transaction') > 0 as sent;
commit;
select tab, ev_data from pgque_test.da_rows('da_u');

-- session_replication_role = replica: appends, also past disable_insert
select pgque.set_queue_config('da_u', 'disable_insert', 'true');
select pgque_test.error_of($$select pgque.send('da_u', 'refused')$$) as disabled;
set session_replication_role = replica;
select pgque.send('da_u', 'as-replica') > 0 as sent, pgque.send_batch('da_u', 't', array['replica-batch']) is not null as batch;
reset session_replication_role;
select pgque.set_queue_config('da_u', 'disable_insert', 'false');
select tab, ev_data from pgque_test.da_rows('da_u');

-- a read-only transaction (what a standby allows): refused
begin transaction read only;
select pgque_test.error_of($$select pgque.send('da_u', 'read-only')$$) as read_only;
rollback;

-- the CDC trigger's append
select pgque.create_queue('da_cdc');
create table pgque_test.da_src (id int primary key, v text);
create trigger da_log after insert on pgque_test.da_src
    for each row execute function pgque.logutriga('da_cdc');
insert into pgque_test.da_src values (1, 'one'), (2, null);
select tab, ev_type, ev_data, ev_extra1 from pgque_test.da_rows('da_cdc');
drop table pgque_test.da_src;

-- A table someone changed goes through the executor's INSERT, with its rules.
-- (errors with the queue's id left out: it depends on the tests before)
create function pgque_test.da_err(i_sql text) returns text language sql as
  $$ select regexp_replace(pgque_test.error_of(i_sql), 'event_\d+_(\d+)', 'event_N_\1') $$;
truncate pgque.event_template;
select 'pgque.event_' || :qid || '_' || queue_cur_table as tab, 'event_' || :qid || '_' || queue_cur_table as tab_name
  from pgque.queue where queue_id = :qid \gset
-- a CHECK constraint holds
alter table :tab add constraint no_bad check (ev_data is distinct from 'bad');
select pgque_test.da_err($$select pgque.send('da', 'bad')$$) as check_violated;
select pgque_test.da_err($$select pgque.send_batch('da', 't', array['ok', 'bad'])$$) as check_violated_batch;
alter table :tab drop constraint no_bad;
-- NOT NULL on a field
alter table :tab alter column ev_type set not null;
select pgque_test.da_err($$select pgque.insert_event('da', null, 'x')$$) as not_null;
alter table :tab alter column ev_type drop not null;
-- a trigger fires, as the role the append runs as
grant usage on schema pgque_test to pgque_owner;
create table pgque_test.da_fired (ev_data text, who name);
grant insert on pgque_test.da_fired to pgque_owner;
create function pgque_test.da_fire() returns trigger language plpgsql as $$
begin
    insert into pgque_test.da_fired values (new.ev_data, current_user);
    return new;
end $$;
create trigger da_fire before insert on :tab for each row execute function pgque_test.da_fire();
select pgque.send('da', 'with-trigger') > 0 as sent, pgque.send_batch('da', 't', array['batch-trigger']) is not null as batch;
set session_replication_role = replica;
select pgque.send('da', 'replica-skips-origin-trigger') > 0 as sent;
reset session_replication_role;
select * from pgque_test.da_fired;
drop trigger da_fire on :tab;
-- a default on a field the batch leaves out
alter table :tab alter column ev_extra4 set default 'dflt';
select pgque.send_batch('da', 't', array['with-default']) is not null as batch;
alter table :tab alter column ev_extra4 drop default;
-- a row-level security policy (forced on the owner)
alter table :tab enable row level security, force row level security;
create policy da_no_secret on :tab for insert with check (ev_data is distinct from 'secret');
select pgque_test.da_err($$select pgque.send('da', 'secret')$$) as policy;
drop policy da_no_secret on :tab;
alter table :tab disable row level security, no force row level security;
-- the owner's own INSERT right revoked: refused as the executor refuses it
revoke insert on :tab from pgque_owner;
select pgque_test.da_err($$select pgque.send('da', 'no-right')$$) as revoked;
grant insert on :tab to pgque_owner;
-- a unique index is enforced, a partial one filled as its predicate says
create unique index da_uniq on :tab (ev_extra1);
select pgque.send('da', 't', 'u1', 'same-key') > 0 as sent;
select pgque_test.da_err($$select pgque.send('da', 't', 'u2', 'same-key')$$) as unique_violated;
drop index pgque.da_uniq;
create index da_part on :tab (ev_extra2) where ev_extra2 is not null;
select pgque.insert_event('da', 't', 'part', null, 'x2', null, null) > 0 as sent;
set enable_seqscan = off;
select ev_data from pgque.event_template where ev_extra2 = 'x2';
reset enable_seqscan;
drop index pgque.da_part;
-- an index of another access method (BRIN): filled by the executor
create index da_brin on :tab using brin (ev_id);
select pgque.send('da', 'brin') > 0 as sent, pgque.send_batch('da', 't', array['brin-batch']) is not null as batch;
set enable_seqscan = off;
select ev_data from pgque.event_template where ev_id > 0 and ev_data like 'brin%' order by ev_id;
reset enable_seqscan;
drop index pgque.da_brin;
-- the table renamed under a warm cache: not found, as the plan says; found again after
select pgque.send('da', 'before-rename') > 0 as sent;
alter table :tab rename to da_renamed;
select pgque_test.da_err($$select pgque.send('da', 'renamed')$$) as renamed;
alter table pgque.da_renamed rename to :"tab_name";
-- and back to the plain table
select pgque.send('da', 'plain-again') > 0 as sent;
select tab, ev_data, ev_extra1, ev_extra4 from pgque_test.da_rows('da');

-- An index whose operator class runs user code that sends to another queue
-- and changes the table's rights (a relcache invalidation of the table
-- being appended to) inside the append: the nested send takes the kept
-- plan, the outer one finishes with what it opened, nothing is freed under
-- it, and the next send sees the change.
select pgque.create_queue('da_n');
create table pgque_test.da_nested_log (n int);
grant select, insert on pgque_test.da_nested_log to pgque_owner;
create function pgque_test.da_cmp(a text, b text) returns int language plpgsql as $$
begin
    if 'nest' in (a, b) and not exists (select from pgque_test.da_nested_log) then
        insert into pgque_test.da_nested_log values (1);
        perform pgque.send('da_n', 'nested');
        execute 'grant select on ' || (select 'pgque.event_' || queue_id || '_' || queue_cur_table
                                         from pgque.queue where queue_name = 'da') || ' to pgque_reader';
    end if;
    return bttextcmp(a, b);
end $$;
create operator class pgque_test.da_text_ops for type text using btree as
    operator 1 <, operator 2 <=, operator 3 =, operator 4 >=, operator 5 >,
    function 1 pgque_test.da_cmp(text, text);
create index da_nest on :tab (ev_data pgque_test.da_text_ops);
select pgque.send('da', 'nest') > 0 as sent_outer;
select pgque.send('da', 'after') > 0 as sent_after;
select ev_data from pgque.event_template where ev_data in ('nest', 'nested', 'after') order by ev_data;
select has_table_privilege('pgque_reader', :'tab', 'select') as granted_inside;
revoke select on :tab from pgque_reader;
drop index pgque.da_nest;
drop operator class pgque_test.da_text_ops using btree;
drop function pgque_test.da_cmp(text, text);

select pgque.drop_queue('da'), pgque.drop_queue('da_b'), pgque.drop_queue('da_u'), pgque.drop_queue('da_cdc'),
       pgque.drop_queue('da_n');
revoke usage on schema pgque_test from pgque_owner;
drop table pgque_test.da_fired, pgque_test.da_nested_log;
