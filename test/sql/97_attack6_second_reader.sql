-- The second reader's attacks on this session's C paths (ADR 0125): the
-- plain ack (src/ack.c, ADR 0120), the plain open of receive() and
-- receive_wait() (_plain_receive_open, ADR 0121) and the tick (src/tick.c,
-- ADR 0123), by roles that hold one pgque role, with a search_path and
-- objects of their own.  Beside regress 89, 90 and 96, which compare each
-- outcome with the SQL it replaced, this file tries what an attacker
-- would: the new internal functions called directly, a shadowing schema
-- and temporary tables named like pgque's first on the path, another
-- role's consumer through receive_wait's look (no lock, no batch ready),
-- a grant revoked between two calls of a session whose plans are kept,
-- and what a pgque_admin may do to the ticker's tables and sequences.
-- Workers are off; ticks are explicit.  Batch ids are never printed.

create role t97_owner login;
grant pgque_reader to t97_owner;
grant pgque_writer to t97_owner;
create role t97_other login;
grant pgque_reader to t97_other;
create role t97_user login;
grant pgque_reader to t97_user;
create role t97_admin login;
grant pgque_admin to t97_admin;
create role t97_login login;
grant usage on schema pgque_test to public;

select pgque.create_queue('att97');
set role t97_owner;
select pgque.subscribe('att97', 'c97');
reset role;

-- the functions this session's C paths added or turned into C are the
-- owner's alone: no pgque role, no other role may call them
select p.oid::regprocedure as callable, r.rolname
  from pg_proc p, pg_roles r
 where p.pronamespace = 'pgque'::regnamespace
   and p.proname in ('_tick', '_tick_visit', '_tick_snapshot', '_tick_due_after', '_plain_receive_open',
                     '_ack_sql', '_ack_batch', '_finish_batch')
   and r.rolname in ('pgque_admin', 'pgque_reader', 'pgque_writer', 't97_owner', 't97_login')
   and has_function_privilege(r.oid, p.oid, 'execute');
set role t97_admin;
select pgque_test.error_of($$select pgque._tick_snapshot()$$) as tick_snapshot_by_admin;
select pgque_test.error_of($$select pgque._tick(q) from pgque.queue q where queue_name = 'att97'$$) as tick_by_admin;
select pgque_test.error_of($$select pgque._tick_visit(q, true) from pgque.queue q where queue_name = 'att97'$$)
       as tick_visit_by_admin;
select pgque_test.error_of($$select pgque._finish_batch(1)$$) as finish_batch_by_admin;
reset role;
set role t97_owner;
select pgque_test.error_of($$select * from pgque._plain_receive_open('att97', 'c97', 10, false, true, false, null)$$)
       as plain_open_by_reader;
select pgque_test.error_of($$select pgque._ack_sql(1)$$) as ack_sql_by_reader;
reset role;
set role t97_login;
select pgque_test.error_of($$select pgque.ack(1)$$) as ack_by_login_only;
select pgque_test.error_of($$select * from pgque.receive('att97', 'c97', 10)$$) as receive_by_login_only;
reset role;

-- a pgque_admin cannot plant code on the tables the tick writes and reads
-- (pgque_owner's), nor move or drop a queue's tick sequence, nor repoint
-- the queue's sequence through set_queue_config
set role t97_admin;
create function pg_temp.t97_trg() returns trigger language plpgsql as
    $$ begin raise notice 'planted trigger ran as %', current_user; return new; end $$;
select pgque_test.error_of($$create trigger t97 before insert on pgque.tick
                              for each row execute function pg_temp.t97_trg()$$) as trigger_on_tick;
select pgque_test.error_of($$create trigger t97 before update on pgque.queue
                              for each row execute function pg_temp.t97_trg()$$) as trigger_on_queue;
select pgque_test.error_of($$create trigger t97 before update on pgque.subscription
                              for each row execute function pg_temp.t97_trg()$$) as trigger_on_subscription;
select regexp_replace(pgque_test.error_of(format('alter sequence %s restart with 1', queue_tick_seq)),
                      'event_[0-9]+_', 'event_N_') as alter_tick_seq,
       regexp_replace(pgque_test.error_of(format('drop sequence %s', queue_tick_seq)),
                      'event_[0-9]+_', 'event_N_') as drop_tick_seq,
       regexp_replace(pgque_test.error_of(format('select pg_catalog.setval(%L, 1)', queue_tick_seq)),
                      'event_[0-9]+_', 'event_N_') as setval_tick_seq
  from pgque.queue where queue_name = 'att97';
select pgque_test.error_of($$select pgque.set_queue_config('att97', 'tick_seq', 'pg_catalog.pg_class')$$)
       as config_tick_seq;
select pgque_test.error_of($$select pgque.set_queue_config('att97', 'queue_name', 'x')$$) as config_name;
select pgque_test.error_of($$update pgque.queue set queue_tick_seq = 'x' where queue_name = 'att97'$$)
       as update_queue_row;
reset role;

-- a queue whose name is as long as names may be: the tick's channel
-- (pgque_ || name) fits, the C tick writes it and notifies
select pgque.create_queue(repeat('n', 57)) > 0 as long_name_created;
select pgque_test.error_of($$select pgque.create_queue(repeat('n', 58))$$) as longer_name;
select pgque.send(repeat('n', 57), 'ev', 'long') > 0 as sent;
select pgque.ticker(repeat('n', 57)) is not null as long_name_ticked;
select pgque.drop_queue(repeat('n', 57), true) as dropped;

-- receive_wait's look reads the consumer's row without a lock and returns
-- early when there is nothing to hand out: the caller's right is checked
-- before that return, so another role learns nothing and waits for
-- nothing (refused, not an empty answer after the timeout)
set role t97_other;
select pgque_test.error_of($$select * from pgque.receive_wait('att97', 'c97', 10, '10 seconds')$$)
       as other_role_wait_nothing_ready;
reset role;
set role t97_owner;
select count(pgque.send('att97', 'ev', 'a' || g)) as sent from generate_series(1, 6) g;
reset role;
select pgque.ticker('att97') is not null as ticked;
set role t97_other;
select pgque_test.error_of($$select * from pgque.receive_wait('att97', 'c97', 10, '10 seconds')$$)
       as other_role_wait_ready;
select pgque_test.error_of($$select * from pgque.receive('att97', 'c97', 10)$$) as other_role_receive;
reset role;

-- the owner's part, then another role's ack of it (the C path, its plans
-- kept from the owner's calls in this session): refused, nothing moves;
-- the owner's receive_wait hands out the same part again
set role t97_owner;
create temp table p1 as select * from pgque.receive('att97', 'c97', 2);
grant select on p1 to public;
select count(*) as part1 from p1;
reset role;
set role t97_other;
select pgque_test.error_of($$select pgque.ack((select max(batch_id) from p1))$$) as other_role_ack;
reset role;
set role t97_owner;
select (select array_agg(msg_id order by msg_id) from pgque.receive_wait('att97', 'c97', 2, '0'))
       = (select array_agg(msg_id order by msg_id) from p1) as same_part_again;
select pgque.ack((select max(batch_id) from p1)) as owner_ack;
reset role;

-- a role granted the consumer uses it; revoked, its next call in the same
-- session is refused (the kept plans hold no right), by each path
select pgque.grant_consumer('att97', 'c97', 't97_user');
set role t97_user;
create temp table p2 as select * from pgque.receive_wait('att97', 'c97', 2, '0');
grant select on p2 to public;
select count(*) as user_part from p2;
select pgque.ack((select max(batch_id) from p2)) as user_ack;
create temp table p3 as select * from pgque.receive('att97', 'c97', 1);
grant select on p3 to public;
select count(*) as user_part2 from p3;
reset role;
select pgque.revoke_consumer('att97', 'c97', 't97_user');
set role t97_user;
select pgque_test.error_of($$select pgque.ack((select max(batch_id) from p3))$$) as revoked_ack;
select pgque_test.error_of($$select * from pgque.receive('att97', 'c97', 1)$$) as revoked_receive;
select pgque_test.error_of($$select * from pgque.receive_wait('att97', 'c97', 1, '0')$$) as revoked_wait;
reset role;
set role t97_owner;
create temp table rest as select * from pgque.receive('att97', 'c97', 100);
select count(*) as owner_rest, min(payload) as first from rest;
select pgque.ack((select max(batch_id) from rest)) as owner_ack_rest;
reset role;

-- names through the caller's path: a schema of its own and pg_temp first,
-- holding tables named like pgque's (with rows that would match), an "="
-- on int4 and bigint, nextval, now, greatest's and pg_notify's namesakes:
-- the ack, the open, the wait's look and the tick (ticker() by an admin
-- whose path is the same) never use them and give what they give without
create schema t97_evil;
grant usage, create on schema t97_evil to public;
create function t97_evil.rec(i_what text) returns boolean language plpgsql as
    $$ begin raise notice 'planted % called by %', i_what, current_user; return true; end $$;
create function t97_evil.eq8(bigint, bigint) returns boolean language sql as
    $$ select t97_evil.rec('= on bigint') and $1 operator(pg_catalog.=) $2 $$;
create function t97_evil.eq4(int4, int4) returns boolean language sql as
    $$ select t97_evil.rec('= on int4') and $1 operator(pg_catalog.=) $2 $$;
create operator t97_evil.= (leftarg = bigint, rightarg = bigint, function = t97_evil.eq8);
create operator t97_evil.= (leftarg = int4, rightarg = int4, function = t97_evil.eq4);
create function t97_evil.nextval(regclass) returns bigint language sql as $$ select case when t97_evil.rec('nextval') then 1::int8 end $$;
create function t97_evil.nextval(text) returns bigint language sql as $$ select case when t97_evil.rec('nextval') then 1::int8 end $$;
create function t97_evil.now() returns timestamptz language sql as
    $$ select case when t97_evil.rec('now') then pg_catalog.now() end $$;
create function t97_evil.pg_notify(text, text) returns void language sql as $$ select t97_evil.rec('pg_notify'); $$;
create function t97_evil._authorize(regrole, regrole[], int4, text) returns void language sql as
    $$ select t97_evil.rec('_authorize'); $$;
create function t97_evil._tick_due_after(anyelement, anyelement) returns boolean language sql as
    $$ select t97_evil.rec('_tick_due_after') $$;
grant execute on all functions in schema t97_evil to public;
set role t97_owner;
create temp table subscription (sub_id int4, sub_batch int8, sub_role text, sub_queue int4, sub_consumer int4);
insert into subscription select 1, g, 'normal', 1, 1 from generate_series(1, 1000) g;
create temp table consumer (co_id int4, co_name text);
insert into consumer values (1, 'c97');
create temp table tick (tick_queue int4, tick_id int8);
create temp table queue (queue_id int4, queue_name text);
insert into queue values (1, 'att97');
set search_path = pg_temp, t97_evil, public, pg_catalog;
select count(pgque.send('att97', 'ev', 'sp' || g)) as sent from generate_series(1, 4) g;
reset role;
set role t97_admin;
set search_path = pg_temp, t97_evil, public, pg_catalog;
select pgque.ticker('att97') is not null as ticked_evil_path;
select pgque.ticker() >= 0 as ticker_all_evil_path;
reset role;
set role t97_owner;
set search_path = pg_temp, t97_evil, public, pg_catalog;
-- the control: the caller's own statement finds the planted "="
select 1 = 1 as planted_operator_found;
create temp table sp1 as select * from pgque.receive_wait('att97', 'c97', 3, '0');
select count(*) as evil_path_wait, min(payload) as first from sp1;
select pgque.ack((select max(batch_id) from sp1)) as evil_path_ack_part;
create temp table sp2 as select * from pgque.receive('att97', 'c97', 100);
select count(*) as evil_path_rest, min(msg_id) > (select max(msg_id) from sp1) as after_part from sp2;
select pgque.ack((select max(batch_id) from sp2)) as evil_path_ack_rest;
select pgque.ack((select max(batch_id) from sp2)) as evil_path_ack_again;
select count(*) as nothing_left from pgque.receive('att97', 'c97', 100);
reset search_path;
drop table pg_temp.subscription, pg_temp.consumer, pg_temp.tick, pg_temp.queue;
reset role;
set client_min_messages = warning;
drop schema t97_evil cascade;
reset client_min_messages;

-- the ack of a batch id that only looks like a plain one: the next batch
-- id of the sequence (not handed out yet), and the id a part's ack retired
set role t97_owner;
select count(pgque.send('att97', 'ev', 'n' || g)) as sent from generate_series(1, 3) g;
reset role;
select pgque.ticker('att97') is not null as ticked;
set role t97_owner;
create temp table n1 as select * from pgque.receive('att97', 'c97', 1);
select pgque.ack((select max(batch_id) from n1)) as ack_part;
select pgque.ack((select max(batch_id) from n1)) as ack_retired_id;
select pgque.ack((select max(batch_id) from n1) + 1000000) as ack_future_id;
create temp table n2 as select * from pgque.receive('att97', 'c97', 100);
select count(*) as rest_still_there from n2;
select pgque.ack((select max(batch_id) from n2)) as ack_rest;
reset role;

select pgque.drop_queue('att97', true) as dropped;
drop owned by t97_owner, t97_other, t97_user, t97_admin, t97_login;
drop role t97_owner, t97_other, t97_user, t97_admin, t97_login;
revoke usage on schema pgque_test from public;
