-- Layout rights and exact slot names (issue #11).  A queue's partition
-- bucket layout is fixed for good once chosen, so only an admin's
-- subscribe_slot chooses it; a reader's leaves the queue unbucketed, and
-- its slots still get exactly their keys (filtered child tables).
-- unsubscribe_slot frees n only when none of the consumer's own slots is
-- left, matching slot names exactly (a LIKE pattern matched "a_b" to "aXb").
create role pgque_t_lay_reader login in role pgque_reader;
create role pgque_t_lay_admin login in role pgque_admin;
grant usage on schema pgque_test to public;

-- a reader's first subscribe_slot fixes no layout
select pgque.create_queue('lay_r');
set role pgque_t_lay_reader;
select pgque.subscribe_slot('lay_r', 'w', k, 4) from generate_series(0, 3) k;
reset role;
select queue_partition_buckets is null as reader_left_unbucketed
  from pgque.queue where queue_name = 'lay_r';
select count(*) as bucket_tables from pg_class c, pgque.queue q
 where q.queue_name = 'lay_r' and c.relname like 'event\_' || q.queue_id || '\_%\_b%';
-- ... and its slots still get every event once, each key on its own slot
select pgque.send('lay_r', 'ev', 'p' || k, 'key-' || k) > 0 as sent from generate_series(1, 8) k;
select pgque.ticker('lay_r') is not null as ticked;
set role pgque_t_lay_reader;
create temp table lay_got as
    select k as slot, d.msg_id, d.extra1 from generate_series(0, 3) k, pgque_test.drain_slot('lay_r', 'w', k, 4) d;
reset role;
select bool_and(pgque._slot_of(extra1, 4) = slot) as each_key_on_its_slot, count(*) as received,
       count(distinct msg_id) as distinct_events
  from lay_got;

-- an admin's first subscribe_slot chooses the buckets (32 for n = 4)
select pgque.create_queue('lay_a');
set role pgque_t_lay_admin;
select pgque.subscribe_slot('lay_a', 'w', 0, 4);
reset role;
select queue_partition_buckets as admin_chose from pgque.queue where queue_name = 'lay_a';
-- an admin's subscribe on the reader's queue does too (the layout was still open)
set role pgque_t_lay_admin;
select pgque.subscribe_slot('lay_r', 'admins', 0, 2);
reset role;
select queue_partition_buckets as admin_chose_later from pgque.queue where queue_name = 'lay_r';

-- exact slot names: removing every slot of "a_b" frees its n although
-- "aXb" (which LIKE 'a_b#%' would match) still has slots
select pgque.create_queue('lay_like');
select pgque.subscribe_slot('lay_like', 'a_b', k, 2) from generate_series(0, 1) k;
select pgque.subscribe_slot('lay_like', 'aXb', 0, 2);
select pgque.unsubscribe_slot('lay_like', 'a_b', k) from generate_series(0, 1) k;
select co_name, n from pgque.partition_consumer pc join pgque.queue q using (queue_id)
 where q.queue_name = 'lay_like' order by co_name;
-- so "a_b" may choose another n now
select pgque.subscribe_slot('lay_like', 'a_b', 0, 3);
select co_name, n from pgque.partition_consumer pc join pgque.queue q using (queue_id)
 where q.queue_name = 'lay_like' order by co_name;
-- and the same for a name with "%"
select pgque.subscribe_slot('lay_like', 'p%q', 0, 2);
select pgque.subscribe_slot('lay_like', 'pZZq', 0, 2);
select pgque.unsubscribe_slot('lay_like', 'p%q', 0);
select co_name from pgque.partition_consumer pc join pgque.queue q using (queue_id)
 where q.queue_name = 'lay_like' and co_name like 'p%' order by co_name;

select pgque.drop_queue(q, true) from unnest(array['lay_r', 'lay_a', 'lay_like']) q;
revoke usage on schema pgque_test from public;
drop owned by pgque_t_lay_reader, pgque_t_lay_admin;
drop role pgque_t_lay_reader, pgque_t_lay_admin;
