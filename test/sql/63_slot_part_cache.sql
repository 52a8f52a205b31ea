-- A partition slot's receive after the merge of ADR 0078 with ADR 0082:
-- the open returns the window's bounds, and the relations (_event_source,
-- most of what locating a window costs) only when the backend's part
-- cache does not hold the window; a pausing slot's open never asks for
-- them (its read in SQL names them).  A step's count is the difference
-- from the one before (from 'start', whose count is not shown).
-- Counted with the transaction's function statistics, never timed.
set track_functions = 'all';
select pgque.create_queue('spc');
select pgque.set_queue_config('spc', 'partition_buckets', '4') is not null as bucketed;
select pgque.maint_rotate_tables_step2() is not null as rotated;
select pgque.subscribe_slot('spc', 'c', k, 2) from generate_series(0, 1) k;
select pgque.subscribe_slot('spc', 'p', k, 2, 'pause') from generate_series(0, 1) k;
select pgque.subscribe_slot('spc', 'c2', k, 2) from generate_series(0, 1) k;
select pgque.claim_slot('spc', 'c', 0, 'w') is not null as claimed_c;
select pgque.claim_slot('spc', 'p', 0, 'w') is not null as claimed_p;
select pgque.claim_slot('spc', 'c2', 0, 'w') is not null as claimed_c2;
select pgque.ticker('spc') is not null as ticked;

create temp table spc_keys as
select (select 'k' || g from generate_series(1, 100) g where pgque._slot_of('k' || g, 2) = 0 limit 1) as k0,
       (select 'k' || g from generate_series(1, 100) g where pgque._slot_of('k' || g, 2) = 1 limit 1) as k1;

-- one window: five events of slot 0, two of slot 1
select pgque.send_batch('spc', 'default', array['a', 'b', 'c', 'd', 'e', 'x', 'y'],
                        array[k0, k0, k0, k0, k0, k1, k1]) is not null as sent from spc_keys;
select pgque.ticker('spc') is not null as ticked;

create temp table spc_calls (funcname text, calls bigint);
create function pg_temp.spc_step(i_step text) returns table (step text, event_source bigint)
language plpgsql as $$
declare
    c bigint := coalesce((select s.calls from pg_stat_xact_user_functions s
                           where s.schemaname = 'pgque' and s.funcname = '_event_source'), 0);
    b bigint := coalesce((select x.calls from spc_calls x where x.funcname = '_event_source'), 0);
begin
    delete from spc_calls;
    insert into spc_calls values ('_event_source', c);
    return query select i_step, c - b;
end $$;

-- the window in parts of two: the first part's open names the relations,
-- the part the cache holds does not
begin;
select step from pg_temp.spc_step('start');
select payload from pgque.receive_partitioned('spc', 'c', 0, 2, 'w', 2);
select * from pg_temp.spc_step('part 1: the window read');
select pgque.ack_partitioned('spc', 'c', 0, 2, 'w') as acked;
select payload from pgque.receive_partitioned('spc', 'c', 0, 2, 'w', 2);
select * from pg_temp.spc_step('part 2: from the cache');
select pgque.ack_partitioned('spc', 'c', 0, 2, 'w') as acked;
-- a pausing slot reads in SQL (_receive_paused), which names the relations
-- itself: once, its open names none
select payload from pgque.receive_partitioned('spc', 'p', 0, 2, 'w', 10);
select * from pg_temp.spc_step('pausing slot');
select pgque.ack_partitioned('spc', 'p', 0, 2, 'w') as acked;
-- another consumer's slot: the cache holds c's window, so the open asks
-- for no relations, the cache cannot serve, and _batch_source names them
select payload from pgque.receive_partitioned('spc', 'c2', 0, 2, 'w', 2);
select * from pg_temp.spc_step('c2: the cache held another reader''s window');
-- and c's last part, the cache now holding c2's window: the same
select payload from pgque.receive_partitioned('spc', 'c', 0, 2, 'w', 2);
select * from pg_temp.spc_step('part 3: after another reader''s window');
select pgque.ack_partitioned('spc', 'c', 0, 2, 'w') as acked;
select pgque.ack_partitioned('spc', 'c2', 0, 2, 'w') as acked;
commit;

select pgque.release_slot('spc', 'c', 0, 'w') as released_c;
select pgque.release_slot('spc', 'p', 0, 'w') as released_p;
select pgque.release_slot('spc', 'c2', 0, 'w') as released_c2;
select pgque.drop_queue('spc', true) as dropped;
reset track_functions;
