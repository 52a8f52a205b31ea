-- Every outcome of a partition slot's open (receive_partitioned) and ack
-- (ack_partitioned), with its SQLSTATE (ADR 0128): the answers any change
-- of the slot path (C or SQL) must give again.  Unknown queue, consumer or
-- slot, a wrong or a resizing n, NULL and bad arguments, no lease, another
-- worker's lease, a stale epoch after a takeover, a released lease, a
-- paused key, an old layout's slot draining across a resize, a slot
-- unsubscribed, and roles without the right (LOGIN only, one pgque role,
-- a reader that is not the consumer's owner or user).  Workers are off;
-- ticks are explicit; batch ids and epochs are never printed.

create role t99_owner login;
grant pgque_reader to t99_owner;
grant pgque_writer to t99_owner;
create role t99_reader login;
grant pgque_reader to t99_reader;
create role t99_writer login;
grant pgque_writer to t99_writer;
create role t99_login login;
grant usage on schema pgque_test to public;
grant execute on function pgque_test.error_of(text) to public;
-- a lease message names the epoch, which earlier files' claims moved
create function pgque_test.lease_error_of(i_sql text) returns text language sql as $$
    select regexp_replace(pgque_test.error_of(i_sql), 'epoch [0-9]+', 'epoch N')
$$;
grant execute on function pgque_test.lease_error_of(text) to public;

select pgque.create_queue('sl99') is not null as created;
set role t99_owner;
select pgque.subscribe_slot('sl99', 'c', s, 2) from generate_series(0, 1) s;
reset role;
-- a key of each slot of 2 and of 4
create temp table k99 as
select n, s, (select 'k' || i from generate_series(1, 1000) i
               where pgque._slot_of('k' || i, n) = s order by i limit 1) as k
  from (values (2), (4)) v(n), generate_series(0, 3) s where s < n;
select count(pgque.send('sl99', 'e', 'p' || i, (select k from k99 where n = 2 and s = i % 2))) as sent
  from generate_series(1, 6) i;
select pgque.force_tick('sl99') is not null as forced, pgque.ticker('sl99') is not null as ticked;

set role t99_owner;
-- argument checks, the open's and the ack's, in the order they are made
select pgque_test.lease_error_of($$select * from pgque.receive_partitioned('nosuch', 'c', 0, 2, 'w1', 10)$$) as open_unknown_queue;
select pgque_test.lease_error_of($$select pgque.ack_partitioned('nosuch', 'c', 0, 2, 'w1')$$) as ack_unknown_queue;
select pgque_test.lease_error_of($$select * from pgque.receive_partitioned('sl99', 'nosuch', 0, 2, 'w1', 10)$$) as open_unknown_consumer;
select pgque_test.lease_error_of($$select pgque.ack_partitioned('sl99', 'nosuch', 0, 2, 'w1')$$) as ack_unknown_consumer;
select pgque_test.lease_error_of($$select * from pgque.receive_partitioned('sl99', 'c', 0, 3, 'w1', 10)$$) as open_wrong_n;
select pgque_test.lease_error_of($$select pgque.ack_partitioned('sl99', 'c', 0, 3, 'w1')$$) as ack_wrong_n;
select pgque_test.lease_error_of($$select * from pgque.receive_partitioned('sl99', 'c', 2, 2, 'w1', 10)$$) as open_slot_out_of_range;
select pgque_test.lease_error_of($$select pgque.ack_partitioned('sl99', 'c', -1, 2, 'w1')$$) as ack_negative_slot;
select pgque_test.lease_error_of($$select * from pgque.receive_partitioned(null, 'c', 0, 2, 'w1', 10)$$) as open_null_queue;
select pgque_test.lease_error_of($$select * from pgque.receive_partitioned('sl99', null, 0, 2, 'w1', 10)$$) as open_null_consumer;
select pgque_test.lease_error_of($$select * from pgque.receive_partitioned('sl99', 'c', null, 2, 'w1', 10)$$) as open_null_slot;
select pgque_test.lease_error_of($$select * from pgque.receive_partitioned('sl99', 'c', 0, null, 'w1', 10)$$) as open_null_n;
select pgque_test.lease_error_of($$select * from pgque.receive_partitioned('sl99', 'c', 0, 2, null, 10)$$) as open_null_worker;
select pgque_test.lease_error_of($$select * from pgque.receive_partitioned('sl99', 'c', 0, 2, 'w1', null)$$) as open_null_max_return;
select pgque_test.lease_error_of($$select * from pgque.receive_partitioned('sl99', 'c', 0, 2, 'w1', 0)$$) as open_zero_max_return;
select pgque_test.lease_error_of($$select * from pgque.receive_partitioned('sl99', 'c', 0, 2, '', 10)$$) as open_empty_worker;
select pgque_test.lease_error_of($$select * from pgque.receive_partitioned('sl99', 'c', 0, 2, e'w\n1', 10)$$) as open_control_worker;
select pgque_test.lease_error_of($$select * from pgque.receive_partitioned('sl99', 'c', 0, 2, repeat('w', 65), 10)$$) as open_long_worker;
select pgque_test.lease_error_of($$select pgque.ack_partitioned(null, 'c', 0, 2, 'w1')$$) as ack_null_queue;
select pgque_test.lease_error_of($$select pgque.ack_partitioned('sl99', 'c', 0, null, 'w1')$$) as ack_null_n;
select pgque_test.lease_error_of($$select pgque.ack_partitioned('sl99', 'c', 0, 2, null)$$) as ack_null_worker;
select pgque_test.lease_error_of($$select pgque.ack_partitioned('sl99', 'c#0/2', 0, 2, 'w1')$$) as ack_slot_name_as_consumer;

-- no lease: never claimed (PQ001), for the open and the ack
select pgque_test.lease_error_of($$select * from pgque.receive_partitioned('sl99', 'c', 0, 2, 'w1', 10)$$) as open_never_claimed;
select pgque_test.lease_error_of($$select pgque.ack_partitioned('sl99', 'c', 0, 2, 'w1')$$) as ack_never_claimed;

-- the lease holder: its part, the ack of the part, the rest, the ack of
-- the window, then nothing open (0)
select pgque.claim_slot('sl99', 'c', 0, 'w1', '1 hour') is not null as claimed;
select array_agg(payload order by msg_id) as first_part
  from pgque.receive_partitioned('sl99', 'c', 0, 2, 'w1', 2);
select array_agg(payload order by msg_id) as the_same_part_again
  from pgque.receive_partitioned('sl99', 'c', 0, 2, 'w1', 2);
select pgque.ack_partitioned('sl99', 'c', 0, 2, 'w1') as part_acked;
select array_agg(payload order by msg_id) as the_rest
  from pgque.receive_partitioned('sl99', 'c', 0, 2, 'w1', 10);
select pgque.ack_partitioned('sl99', 'c', 0, 2, 'w1') as window_acked;
select pgque.ack_partitioned('sl99', 'c', 0, 2, 'w1') as nothing_open;
select count(*) as nothing_more from pgque.receive_partitioned('sl99', 'c', 0, 2, 'w1', 10);

-- another worker's live lease: fenced (PQ002), the open and the ack
select pgque_test.lease_error_of($$select * from pgque.receive_partitioned('sl99', 'c', 0, 2, 'w2', 10)$$) as open_other_holder;
select pgque_test.lease_error_of($$select pgque.ack_partitioned('sl99', 'c', 0, 2, 'w2')$$) as ack_other_holder;

-- released: the open and the ack say no lease (PQ001)
select pgque.release_slot('sl99', 'c', 0, 'w1') as released;
select pgque_test.lease_error_of($$select * from pgque.receive_partitioned('sl99', 'c', 0, 2, 'w1', 10)$$) as open_released;
select pgque_test.lease_error_of($$select pgque.ack_partitioned('sl99', 'c', 0, 2, 'w1')$$) as ack_released;

-- a stale epoch: w1's lease of slot 1 expires, w2 takes the slot and its
-- open batch over; w1's ack and open are fenced (PQ002), its part stays
-- unacked and w2 gets the same events
select pgque.claim_slot('sl99', 'c', 1, 'w1', '1 second') is not null as claimed_short;
select array_agg(payload order by msg_id) as w1_part
  from pgque.receive_partitioned('sl99', 'c', 1, 2, 'w1', 10);
select pg_sleep(1.2);  -- the lease's ttl passes (nothing must happen in it)
select pgque.claim_slot('sl99', 'c', 1, 'w2', '1 hour') is not null as taken_over;
select pgque_test.lease_error_of($$select pgque.ack_partitioned('sl99', 'c', 1, 2, 'w1')$$) as ack_stale_epoch;
select pgque_test.lease_error_of($$select * from pgque.receive_partitioned('sl99', 'c', 1, 2, 'w1', 10)$$) as open_stale_epoch;
select array_agg(payload order by msg_id) as w2_same_events
  from pgque.receive_partitioned('sl99', 'c', 1, 2, 'w2', 10);
select pgque.ack_partitioned('sl99', 'c', 1, 2, 'w2') as w2_acked;
select count(*) as nothing_replayed from pgque.receive_partitioned('sl99', 'c', 1, 2, 'w2', 10);
-- w1 claims again after w2 released: a new epoch, still nothing replayed
select pgque.release_slot('sl99', 'c', 1, 'w2') as w2_released;
select pgque.claim_slot('sl99', 'c', 1, 'w1', '1 hour') is not null as w1_again;
select count(*) as nothing_replayed_to_w1 from pgque.receive_partitioned('sl99', 'c', 1, 2, 'w1', 10);
reset role;

-- roles without the right: LOGIN only (no execute), only pgque_writer (no
-- execute), a reader that is not the consumer's owner or user (42501 from
-- the consumer's check, before any lease is touched)
set role t99_login;
select pgque_test.lease_error_of($$select * from pgque.receive_partitioned('sl99', 'c', 0, 2, 'w1', 10)$$) as open_login_only;
select pgque_test.lease_error_of($$select pgque.ack_partitioned('sl99', 'c', 0, 2, 'w1')$$) as ack_login_only;
reset role;
set role t99_writer;
select pgque_test.lease_error_of($$select * from pgque.receive_partitioned('sl99', 'c', 0, 2, 'w1', 10)$$) as open_writer_only;
select pgque_test.lease_error_of($$select pgque.ack_partitioned('sl99', 'c', 0, 2, 'w1')$$) as ack_writer_only;
reset role;
set role t99_reader;
select pgque_test.lease_error_of($$select * from pgque.receive_partitioned('sl99', 'c', 1, 2, 'w1', 10)$$) as open_not_owner;
select pgque_test.lease_error_of($$select pgque.ack_partitioned('sl99', 'c', 1, 2, 'w1')$$) as ack_not_owner;
select pgque_test.lease_error_of($$select pgque.claim_slot('sl99', 'c', 0, 'w9')$$) as claim_not_owner;
reset role;
-- a user of the consumer may (grant_consumer), the lease still rules
select pgque.grant_consumer('sl99', 'c', 't99_reader');
set role t99_reader;
select pgque_test.lease_error_of($$select pgque.ack_partitioned('sl99', 'c', 1, 2, 'w9')$$) as user_without_lease;
select pgque.ack_partitioned('sl99', 'c', 1, 2, 'w1') as user_acks_as_w1;
reset role;

-- failure policy pause: a nacked event's key waits for its retry; the
-- open withholds the key's later events, the ack releases them
select pgque.set_failure_policy('sl99', 'c', 'pause') as previous_policy;
select count(pgque.send('sl99', 'e', 'q' || i, (select k from k99 where n = 2 and s = 0))) as sent
  from generate_series(1, 3) i;
select pgque.force_tick('sl99') is not null as forced, pgque.ticker('sl99') is not null as ticked;
set role t99_owner;
select pgque.claim_slot('sl99', 'c', 0, 'w1', '1 hour') is not null as claimed;
create temp table m99 as select * from pgque.receive_partitioned('sl99', 'c', 0, 2, 'w1', 10);
select array_agg(payload order by msg_id) as paused_slot_batch from m99;
select pgque.nack_partitioned('sl99', 'c', 0, 2, 'w1', m::text::pgque.message, '0 seconds', 'test') as nacked
  from m99 m where payload = 'q1';
select pgque.ack_partitioned('sl99', 'c', 0, 2, 'w1') as paused_acked;
reset role;
select count(*) as keys_blocked from pgque.blocked_key;
select pgque.maint_retry_events() as retries_due;
select pgque.force_tick('sl99') is not null as forced, pgque.ticker('sl99') is not null as ticked;
set role t99_owner;
select array_agg(payload || ':' || coalesce(retry_count, 0) order by msg_id) as the_retry_first
  from pgque.receive_partitioned('sl99', 'c', 0, 2, 'w1', 10);
select pgque.ack_partitioned('sl99', 'c', 0, 2, 'w1') as retry_acked;
reset role;
select pgque.force_tick('sl99') is not null as forced, pgque.ticker('sl99') is not null as ticked;
set role t99_owner;
select array_agg(payload order by msg_id) as released_after_the_retry
  from pgque.receive_partitioned('sl99', 'c', 0, 2, 'w1', 10);
select pgque.ack_partitioned('sl99', 'c', 0, 2, 'w1') as released_acked;
reset role;
select count(*) as keys_blocked_after from pgque.blocked_key;
select pgque.set_failure_policy('sl99', 'c', 'skip') as previous_policy;

-- an online resize 2 -> 4: the new n is refused while the old layout
-- drains (the gate), the old slots read up to the boundary, then the new
-- layout serves; nothing lost, nothing twice
select count(pgque.send('sl99', 'e', 'r' || i, (select k from k99 where n = 2 and s = i % 2))) as sent
  from generate_series(1, 4) i;
select pgque.force_tick('sl99') is not null as forced, pgque.ticker('sl99') is not null as ticked;
select pgque.resize_partitioned('sl99', 'c', 4) is not null as resized;
select count(pgque.send('sl99', 'e', 'a' || s, k)) as sent from k99 where n = 4;
select pgque.force_tick('sl99') is not null as forced, pgque.ticker('sl99') is not null as ticked;
set role t99_owner;
select pgque_test.lease_error_of($$select * from pgque.receive_partitioned('sl99', 'c', 0, 4, 'w1', 10)$$) as open_new_n_while_draining;
select pgque_test.lease_error_of($$select pgque.ack_partitioned('sl99', 'c', 0, 4, 'w1')$$) as ack_new_n_while_draining;
select pgque.release_slot('sl99', 'c', 1, 'w1') is not null as released;
create temp table got99 (slot int, payload text);
do $$
declare
    k int;
begin
    for s in 0 .. 1 loop
        perform pgque.claim_slot('sl99', 'c', s, 'w1', '1 hour');
        loop
            insert into got99 select s, payload from pgque.receive_partitioned('sl99', 'c', s, 2, 'w1', 10);
            get diagnostics k = row_count;
            exit when k = 0;
            perform pgque.ack_partitioned('sl99', 'c', s, 2, 'w1');
        end loop;
        perform pgque.release_slot('sl99', 'c', s, 'w1');
    end loop;
end $$;
select slot, array_agg(payload order by payload) as old_layout_to_the_boundary from got99 group by slot order by slot;
truncate got99;
do $$
declare
    k int;
begin
    for s in 0 .. 3 loop
        perform pgque.claim_slot('sl99', 'c', s, 'w1', '1 hour');
        loop
            insert into got99 select s, payload from pgque.receive_partitioned('sl99', 'c', s, 4, 'w1', 10);
            get diagnostics k = row_count;
            exit when k = 0;
            perform pgque.ack_partitioned('sl99', 'c', s, 4, 'w1');
        end loop;
    end loop;
end $$;
select slot, array_agg(payload order by payload) as new_layout_after from got99 group by slot order by slot;
select pgque_test.lease_error_of($$select * from pgque.receive_partitioned('sl99', 'c', 0, 2, 'w1', 10)$$) as open_old_n_after;
select pgque_test.lease_error_of($$select pgque.ack_partitioned('sl99', 'c', 0, 2, 'w1')$$) as ack_old_n_after;
select pgque.ack_partitioned('sl99', 'c', 3, 4, 'w1') as nothing_open_new_layout;
reset role;

-- a slot unsubscribed: its open and ack say so
set role t99_owner;
select pgque.unsubscribe_slot('sl99', 'c', 3);
select pgque_test.lease_error_of($$select * from pgque.receive_partitioned('sl99', 'c', 3, 4, 'w1', 10)$$) as open_unsubscribed;
select pgque_test.lease_error_of($$select pgque.ack_partitioned('sl99', 'c', 3, 4, 'w1')$$) as ack_unsubscribed;
reset role;


-- clean up
select pgque.drop_queue('sl99', true);
drop function pgque_test.lease_error_of(text);
revoke execute on function pgque_test.error_of(text) from public;
revoke usage on schema pgque_test from public;
drop owned by t99_owner, t99_reader, t99_writer, t99_login;
drop role t99_owner, t99_reader, t99_writer, t99_login;
