-- Every outcome of pgque.ack(batch_id) (ADR 0120): a plain consumer's ack
-- is C (src/ack.c), everything else the SQL path it replaced.  The
-- expected output was written by the PL/pgSQL ack before the change, so
-- each outcome here (the value, the SQLSTATE, message and detail, the
-- consumer's row after it) is the SQL's.  Workers are off; ticks are
-- explicit.  Batch ids are never printed (other files draw from the same
-- sequence): a batch is named by what receive handed out.

create role t89_owner login;
grant pgque_reader to t89_owner;
grant pgque_writer to t89_owner;
create role t89_other login;
grant pgque_reader to t89_other;
create role t89_user login;
grant pgque_reader to t89_user;
create role t89_team;
create role t89_member login in role t89_team;
grant pgque_reader to t89_member;

-- the outcome of an ack: its value, or the error's SQLSTATE, message and
-- detail (never its context, which names the function that raised it)
create function pg_temp.ack_of(i_batch bigint) returns text language plpgsql as $$
declare
    st text; msg text; det text;
begin
    return 'returns ' || coalesce(pgque.ack(i_batch)::text, 'NULL');
exception when others then
    get stacked diagnostics st = returned_sqlstate, msg = message_text, det = pg_exception_detail;
    return st || ': ' || msg || coalesce(' / ' || nullif(det, ''), '');
end $$;
grant execute on function pg_temp.ack_of(bigint) to public;

-- the consumer's row as far as an ack moves it: an open batch, where the
-- part handed out ends, and where the cursor is, relative to the queue's
-- first tick of this file
create function pg_temp.sub89(i_consumer text)
returns table (has_batch boolean, pos_set boolean, last_set boolean, cursor_ticks int8, next_set boolean)
language sql security definer as $$
    select s.sub_batch is not null, s.sub_batch_pos is not null, s.sub_batch_last is not null,
           (select count(*) from pgque.tick t where t.tick_queue = s.sub_queue and t.tick_id <= s.sub_last_tick) - 1,
           s.sub_next_tick is not null
      from pgque.subscription s join pgque.consumer c on c.co_id = s.sub_consumer
      join pgque.queue q on q.queue_id = s.sub_queue
     where q.queue_name = 'ack89' and c.co_name = i_consumer
$$;

select pgque.create_queue('ack89');
set role t89_owner;
select pgque.subscribe('ack89', 'c1');
reset role;
select pgque.grant_consumer('ack89', 'c1', 't89_user');
select pgque.grant_consumer('ack89', 'c1', 't89_team');
set role t89_owner;
select count(pgque.send('ack89', 'ev', 'p' || g)) as sent from generate_series(1, 25) g;
reset role;
select pgque.ticker('ack89') is not null as ticked;

-- a window of 25 handed out in parts of 10: each ack keeps the rest open
-- under a fresh batch id, the cursor stays; the last part's ack finishes
-- the window and moves the cursor
set role t89_owner;
create temp table part1 as select * from pgque.receive('ack89', 'c1', 10);
select count(*) as part1, min(msg_id) = (select min(msg_id) from part1) as first from part1;
select * from pg_temp.sub89('c1');
select pg_temp.ack_of((select max(batch_id) from part1)) as ack_part1;
select * from pg_temp.sub89('c1');
create temp table part2 as select * from pgque.receive('ack89', 'c1', 10);
select count(*) as part2, (select max(batch_id) from part2) <> (select max(batch_id) from part1) as fresh_batch,
       min(msg_id) > (select max(msg_id) from part1) as after_part1
  from part2;
-- the part acked before is gone: acked twice -> 0, nothing moves
select pg_temp.ack_of((select max(batch_id) from part1)) as ack_part1_again;
select * from pg_temp.sub89('c1');
select pg_temp.ack_of((select max(batch_id) from part2)) as ack_part2;
create temp table part3 as select * from pgque.receive('ack89', 'c1', 10);
select count(*) as part3, min(msg_id) > (select max(msg_id) from part2) as after_part2 from part3;
select pg_temp.ack_of((select max(batch_id) from part3)) as ack_part3;
select * from pg_temp.sub89('c1');
select pg_temp.ack_of((select max(batch_id) from part3)) as ack_part3_again;
select count(*) as nothing_left from pgque.receive('ack89', 'c1', 10);
reset role;

-- unknown ids -> 0; NULL -> 22004, as before
select pg_temp.ack_of(-1) as ack_negative, pg_temp.ack_of(0) as ack_zero,
       pg_temp.ack_of(9223372036854775807) as ack_max;
select pg_temp.ack_of(null) as ack_null;
select pgque_test.error_of('select pgque.ack(null)') as ack_null_direct;

-- a whole window in one part
set role t89_owner;
select count(pgque.send('ack89', 'ev', 'w' || g)) as sent from generate_series(1, 3) g;
reset role;
select pgque.ticker('ack89') is not null as ticked;
set role t89_owner;
create temp table whole as select * from pgque.receive('ack89', 'c1', 100);
select count(*) as whole from whole;
select pg_temp.ack_of((select max(batch_id) from whole)) as ack_whole;
select * from pg_temp.sub89('c1');
reset role;

-- rights: a role without any on the consumer is refused (42501, the
-- SQL rule's message) and nothing moves; a role granted the consumer
-- (sub_users), or a member of a role granted it, acks
set role t89_owner;
select count(pgque.send('ack89', 'ev', 'r' || g)) as sent from generate_series(1, 4) g;
reset role;
select pgque.ticker('ack89') is not null as ticked;
set role t89_owner;
create temp table rights as select * from pgque.receive('ack89', 'c1', 2);
grant select on rights to public;
select count(*) as rights_part from rights;
reset role;
set role t89_other;
select pg_temp.ack_of((select max(batch_id) from rights)) as ack_other_role;
reset role;
select * from pg_temp.sub89('c1');
set role t89_user;
select pg_temp.ack_of((select max(batch_id) from rights)) as ack_granted_user;
create temp table rights2 as select * from pgque.receive('ack89', 'c1', 2);
grant select on rights2 to public;
select count(*) as rights_rest from rights2;
reset role;
set role t89_member;
select pg_temp.ack_of((select max(batch_id) from rights2)) as ack_member_of_granted;
reset role;
select * from pg_temp.sub89('c1');

-- inside a read-only transaction: refused (25006) before anything moves
set role t89_owner;
select count(pgque.send('ack89', 'ev', 'ro')) as sent;
reset role;
select pgque.ticker('ack89') is not null as ticked;
set role t89_owner;
create temp table ro as select * from pgque.receive('ack89', 'c1', 10);
begin transaction read only;
select pg_temp.ack_of((select max(batch_id) from ro)) as ack_read_only;
rollback;
select pg_temp.ack_of((select max(batch_id) from ro)) as ack_after_read_only;
reset role;

-- a name resolved through the caller's search_path: the caller's own "="
-- on bigint and a function named like the ones ack calls, in a schema
-- first on its path, are never called (the ack runs on a pinned path)
create schema t89_evil;
grant usage, create on schema t89_evil to t89_owner;
set role t89_owner;
create function t89_evil.eq(bigint, bigint) returns boolean language plpgsql as
    $$ begin raise notice 'evil = called'; return $1 operator(pg_catalog.=) $2; end $$;
create operator t89_evil.= (leftarg = bigint, rightarg = bigint, function = t89_evil.eq);
create function t89_evil.nextval(regclass) returns bigint language plpgsql as
    $$ begin raise notice 'evil nextval called'; return 1; end $$;
create function t89_evil.now() returns timestamptz language plpgsql as
    $$ begin raise notice 'evil now called'; return pg_catalog.now(); end $$;
set search_path = t89_evil, public, pg_catalog;
select count(pgque.send('ack89', 'ev', 'sp' || g)) as sent from generate_series(1, 3) g;
reset role;
select pgque.ticker('ack89') is not null as ticked;
set role t89_owner;
create temp table sp as select * from pgque.receive('ack89', 'c1', 2);
select pg_temp.ack_of((select max(batch_id) from sp)) as ack_evil_path_part;
create temp table sp2 as select * from pgque.receive('ack89', 'c1', 2);
select pg_temp.ack_of((select max(batch_id) from sp2)) as ack_evil_path_rest;
reset search_path;
reset role;
drop schema t89_evil cascade;

-- a partition slot's batch: refused by plain ack (42809), the slot's
-- window stays open for ack_partitioned; also when a slot's subscription
-- holds a batch opened by name with next_batch (the subscription row,
-- not a slot_batch row)
select pgque.subscribe_slot('ack89', 'sl', s, 2) from generate_series(0, 1) s;
select pgque.claim_slot('ack89', 'sl', 0, 'w0') > 0 as claimed;
set role t89_owner;
select count(pgque.send('ack89', 'ev', 'k' || g, 'key' || g)) as sent from generate_series(1, 6) g;
reset role;
select pgque.ticker('ack89') is not null as ticked;
create temp table slot0 as select * from pgque.receive_partitioned('ack89', 'sl', 0, 2, 'w0', 100);
select count(*) > 0 as slot_got from slot0;
select pg_temp.ack_of((select max(batch_id) from slot0)) as ack_slot_batch;
select pgque.ack_partitioned('ack89', 'sl', 0, 2, 'w0') as ack_partitioned_after;
select pg_temp.ack_of(b) as ack_slot_next_batch
  from pgque.next_batch('ack89', 'sl#1/2') b;

-- a cooperative group: a member's batch is acked through the group (its
-- window's part, then the rest), never finishing the group's cursor for
-- another member's window
select pgque.subscribe_subconsumer('ack89', 'grp', 'm1');
select pgque.subscribe_subconsumer('ack89', 'grp', 'm2');
select count(pgque.send('ack89', 'ev', 'g' || g)) as sent from generate_series(1, 5) g;
select pgque.ticker('ack89') is not null as ticked;
select count(pgque.send('ack89', 'ev', 'h' || g)) as sent from generate_series(1, 5) g;
select pgque.ticker('ack89') is not null as ticked;
create temp table m1a as select * from pgque.receive_coop('ack89', 'grp', 'm1', 3);
create temp table m2a as select * from pgque.receive_coop('ack89', 'grp', 'm2', 100);
select (select count(*) from m1a) as m1_part, (select count(*) from m2a) as m2_window;
select pg_temp.ack_of((select max(batch_id) from m1a)) as ack_member_part;
select count(*) as windows_open, count(*) filter (where cw_pos is not null) as with_pos
  from pgque.coop_window w join pgque.subscription s on s.sub_id = w.cw_sub
  join pgque.consumer c on c.co_id = s.sub_consumer where c.co_name = 'grp';
select pg_temp.ack_of((select max(batch_id) from m2a)) as ack_member_window;
select pg_temp.ack_of((select max(batch_id) from m1a)) as ack_member_part_again;
select pg_temp.ack_of((select max(batch_id) from m2a)) as ack_member_window_again;
create temp table m1b as select * from pgque.receive_coop('ack89', 'grp', 'm1', 100);
select count(*) as m1_rest, min(msg_id) > (select max(msg_id) from m1a) as after_m1_part from m1b;
select pg_temp.ack_of((select max(batch_id) from m1b)) as ack_member_rest;
select count(*) as windows_left
  from pgque.coop_window w join pgque.subscription s on s.sub_id = w.cw_sub
  join pgque.consumer c on c.co_id = s.sub_consumer where c.co_name = 'grp';
-- the group's own name as a plain consumer: receive refuses it
select pgque_test.error_of($$select * from pgque.receive('ack89', 'grp', 10)$$) as receive_group;

-- a consumer whose queue is dropped while its batch is open: the batch
-- is gone with it (0), in the dropping transaction and after it
select pgque.create_queue('ack89d');
set role t89_owner;
select pgque.subscribe('ack89d', 'cd');
select count(pgque.send('ack89d', 'ev', 'd' || g)) as sent from generate_series(1, 3) g;
reset role;
select pgque.ticker('ack89d') is not null as ticked;
set role t89_owner;
create temp table dq as select * from pgque.receive('ack89d', 'cd', 2);
grant select on dq to public;
reset role;
begin;
select pgque.drop_queue('ack89d', true) as dropped;
select pg_temp.ack_of((select max(batch_id) from dq)) as ack_in_dropping_xact;
rollback;
select pgque.drop_queue('ack89d', true) as dropped;
set role t89_owner;
select pg_temp.ack_of((select max(batch_id) from dq)) as ack_after_drop;
reset role;

select pgque.unsubscribe_slot('ack89', 'sl', s) from generate_series(0, 1) s;
select pgque.drop_queue('ack89', true) as dropped;
drop owned by t89_owner, t89_other, t89_user, t89_member;
drop role t89_owner, t89_other, t89_user, t89_member, t89_team;
