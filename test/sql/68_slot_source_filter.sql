-- A slot's source holds only the slot's rows (ADR 0088): _event_source
-- names the slot's own buckets without any test of the key (n divides the
-- number of buckets: every row of such a bucket is the slot's), and puts
-- the slot's rule (_slot_of) on the relations that hold other slots' rows
-- too: a table without buckets, a number of buckets n does not divide, a
-- child table's own rows from before its buckets.  receive_partitioned
-- then reads without the window plan's per-row slot filter; each slot
-- must still get exactly its keys, every event once.
-- Workers are off here; the ticks are explicit.

-- the source of slot i_slot of i_n (NULLs: a plain reader), described:
-- the bucket numbers it reads, whether it reads a whole child table or a
-- child's own rows, and the key tests it makes (table numbers left out)
create function pg_temp.src(i_queue text, i_n int4, i_slot int4,
                            out buckets text, out whole_table boolean, out child_only boolean, out key_tests text)
language sql as $$
    with s as (select pgque._event_source(q, pg_catalog.pg_current_snapshot(), pg_catalog.pg_current_snapshot(),
                                          i_n, i_slot) as t
                 from pgque.queue q where q.queue_name = i_queue)
    select (select coalesce(string_agg(b, ',' order by b::int), '-')
              from (select distinct m[1] as b from regexp_matches(s.t, '_b(\d+)', 'g') m) x),
           s.t ~ 'from pgque\.event_\d+_\d+( |\))',
           s.t ~ 'from only pgque\.event_\d+_\d+',
           (select coalesce(string_agg(distinct m[1], '; '), '-')
              from regexp_matches(s.t, 'where (pgque\._slot_of\([^)]*\) operator\(pg_catalog\.=\) -?\d+)', 'g') m)
      from s
$$;

-- drain every slot of consumer c (n slots) of queue q: (slot, ev_id, key)
create function pg_temp.drain_all(q text, c text, n int4)
returns table (slot int4, ev_id bigint, key text)
language plpgsql as $$
declare
    m  pgque.message;
    b  bigint;
begin
    for s in 0 .. n - 1 loop
        perform pgque.claim_slot(q, c, s, 'ssf-worker');
        loop
            b := null;
            for m in select * from pgque.receive_partitioned(q, c, s, n, 'ssf-worker', 7) loop
                b := m.batch_id;
                slot := s; ev_id := m.msg_id; key := m.extra1;
                return next;
            end loop;
            exit when b is null;
            perform pgque.ack_partitioned(q, c, s, n, 'ssf-worker');
        end loop;
    end loop;
end $$;

create table pgque_ssf_sent (queue text, ev_id bigint);

-- every event sent once, to the slot of its key: (delivered, distinct
-- events, events sent, deliveries to another slot), of the drain in ssf_d
create temp table ssf_d (slot int4, ev_id bigint, key text);
create function pg_temp.exact(q text, n int4, out delivered bigint, out distinct_events bigint,
                              out sent bigint, out wrong_slot bigint)
language sql as $$
    select (select count(*) from ssf_d), (select count(distinct d.ev_id) from ssf_d d),
           (select count(*) from pgque_ssf_sent s where s.queue = q),
           (select count(*) from ssf_d d where d.slot <> pgque._slot_of(d.key, n))
$$;

-- the drain of every slot of consumer c into ssf_d, in one transaction,
-- and how many keys its reads tested (calls of _slot_of: track_functions)
create function pg_temp.drain(q text, c text, n int4) returns bigint
language plpgsql as $$
begin
    truncate ssf_d;
    insert into ssf_d select * from pg_temp.drain_all(q, c, n);
    return coalesce(pg_catalog.pg_stat_get_xact_function_calls('pgque._slot_of(text,int4)'::pg_catalog.regprocedure), 0);
end $$;
set track_functions = 'all';

select pgque.create_queue('ssf_b');
select pgque.set_queue_config('ssf_b', 'partition_buckets', '8');
select pgque.create_queue('ssf_u');
select pgque.set_queue_config('ssf_u', 'partition_buckets', '0');
select pgque.maint_rotate_tables_step2() >= 0 as stamped;

-- what each reader's source reads and tests
select 'slot 1 of 4, 8 buckets' as reader, * from pg_temp.src('ssf_b', 4, 1)
union all
select 'slot 1 of 3, 8 buckets', * from pg_temp.src('ssf_b', 3, 1)
union all
select 'plain reader, 8 buckets', * from pg_temp.src('ssf_b', null, null)
union all
select 'slot 2 of 4, no buckets', * from pg_temp.src('ssf_u', 4, 2)
union all
select 'plain reader, no buckets', * from pg_temp.src('ssf_u', null, null);

-- each slot gets exactly its keys, once: n dividing the buckets (no key
-- tested), n not dividing them and no buckets (tested in the source)
select pgque.subscribe_slot('ssf_b', 'four', s, 4) from generate_series(0, 3) s;
select pgque.subscribe_slot('ssf_b', 'three', s, 3) from generate_series(0, 2) s;
select pgque.subscribe_slot('ssf_u', 'four', s, 4) from generate_series(0, 3) s;
insert into pgque_ssf_sent
select q, unnest(pgque.send_batch(q, 'ev', array(select 'p' || g from generate_series(1, 300) g),
                                  array(select 'key-' || (g % 37) from generate_series(1, 300) g)))
  from unnest(array['ssf_b', 'ssf_u']) q;
select pgque.ticker(q) is not null as ticked from unnest(array['ssf_b', 'ssf_u']) q;
-- a second window, so that batches span windows (max_return x n)
insert into pgque_ssf_sent
select q, unnest(pgque.send_batch(q, 'ev', array(select 'p' || g from generate_series(1, 50) g),
                                  array(select case when g % 5 = 0 then null else 'key-' || g end
                                          from generate_series(1, 50) g)))
  from unnest(array['ssf_b', 'ssf_u']) q;
select pgque.ticker(q) is not null as ticked from unnest(array['ssf_b', 'ssf_u']) q;
-- keys tested: none where the slot reads its own buckets, one per row
-- of the whole table read otherwise (the source's test)
select pg_temp.drain('ssf_b', 'four', 4) as key_tests;
select * from pg_temp.exact('ssf_b', 4);
select pg_temp.drain('ssf_b', 'three', 3) > 0 as keys_tested;
select * from pg_temp.exact('ssf_b', 3);
select pg_temp.drain('ssf_u', 'four', 4) > 0 as keys_tested;
select * from pg_temp.exact('ssf_u', 4);

-- rows a producer wrote to the child table itself before the buckets
-- existed: the slot's source reads that table's own rows with its key test
select pgque.create_queue('ssf_late');
select pgque.set_queue_config('ssf_late', 'partition_buckets', '0');
select pgque.subscribe_slot('ssf_late', 'two', s, 2) from generate_series(0, 1) s;
insert into pgque_ssf_sent
select 'ssf_late', unnest(pgque.send_batch('ssf_late', 'ev', array(select 'before' || g from generate_series(1, 40) g),
                                           array(select 'key-' || g from generate_series(1, 40) g)));
select pgque.set_queue_config('ssf_late', 'partition_buckets', '4') as bucketed_later;
insert into pgque_ssf_sent
select 'ssf_late', unnest(pgque.send_batch('ssf_late', 'ev', array(select 'after' || g from generate_series(1, 40) g),
                                           array(select 'key-' || g from generate_series(1, 40) g)));
select pgque.ticker('ssf_late') is not null as ticked;
select 'slot 1 of 2, 4 buckets added later' as reader, * from pg_temp.src('ssf_late', 2, 1);
select pg_temp.drain('ssf_late', 'two', 2) > 0 as keys_tested;
select * from pg_temp.exact('ssf_late', 2);

reset track_functions;
drop table pgque_ssf_sent;
