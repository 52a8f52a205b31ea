-- benchmark/bench.sql: the SQL the benchmark scripts share (ADR 0097),
-- loaded by benchmark/lib.sh's bench_sql into the bench server's postgres
-- database: one source for the keyed stream and the drains that
-- make bench (partition.sh, coop.sh, unlogged.sh), slot_calls.sh and
-- slot_instructions.sh measure.  create or replace: loading it twice is
-- harmless.

-- i_events keyed events (zipfian over 2,000 tenants, 100 per transaction),
-- the same keys to each queue of qs, a tick of each every 1,000 events as
-- a running ticker would, and a last tick; with seed, the keys are the same
-- run after run (setseed)
create or replace procedure bench_produce_keyed(qs text[], i_events int, seed float8 default null)
language plpgsql as $$
declare
    keys text[];
    payloads text[] := array_fill('payload-abcdefghij'::text, array[100]);
    q text;
begin
    if seed is not null then
        perform setseed(seed);
    end if;
    for i in 1 .. i_events / 100 loop
        keys := array(select 'tenant-' || floor(exp(random() * ln(2000)))::int from generate_series(1, 100));
        foreach q in array qs loop
            perform pgque.send_batch(q, 'default', payloads, keys);
        end loop;
        commit;
        if i % 10 = 0 then
            foreach q in array qs loop
                perform pgque.ticker(q);
            end loop;
            commit;
        end if;
    end loop;
    foreach q in array qs loop
        perform pgque.force_tick(q);
        perform pgque.ticker(q);
    end loop;
end $$;

-- drain slots s0..s1 of consumer c (n slots), slot after slot: claim,
-- receive_partitioned(1000) / ack_partitioned, commit per batch; got: the
-- events handed out
create or replace procedure bench_drain_slots(q text, c text, n int, s0 int, s1 int, inout got bigint default 0)
language plpgsql as $$
declare
    k int;
    w text;
begin
    got := 0;
    for s in s0 .. s1 loop
        w := 'bench-' || s;
        perform pgque.claim_slot(q, c, s, w, '1 hour');
        loop
            select count(*) into k from pgque.receive_partitioned(q, c, s, n, w, 1000);
            exit when k = 0;
            got := got + k;
            perform pgque.ack_partitioned(q, c, s, n, w);
            commit;
        end loop;
    end loop;
end $$;

-- drain consumer c of q until nothing is left: receive(i_max) / ack,
-- commit per batch; with member, c is a cooperative group and the drain is
-- that member's (receive_coop); got: the events handed out, batches: the
-- batches
create or replace procedure bench_drain_plain(q text, c text, i_max int default 1000,
                                              inout got bigint default 0, inout batches int default 0,
                                              member text default null)
language plpgsql as $$
declare
    b bigint;
    k int;
begin
    got := 0;
    batches := 0;
    loop
        if member is null then
            select max(batch_id), count(*) into b, k from pgque.receive(q, c, i_max);
        else
            select max(batch_id), count(*) into b, k from pgque.receive_coop(q, c, member, i_max);
        end if;
        exit when b is null;
        got := got + k;
        batches := batches + 1;
        perform pgque.ack(b);
        commit;
    end loop;
end $$;

-- The machine's parallel capacity (ADR 0104): CPU ns that this backend
-- spends on a fixed loop of PL/pgSQL arithmetic that touches no shared
-- page and takes no lock, read from /proc/self/schedstat before and after
-- (superuser: the bench server's).  Run alone and then in 2 sessions at
-- once: on two real cores the 2 spend what the 1 does; on two
-- hyperthreads of one core, or vCPUs the host runs on one, each spends
-- more, and 2 x alone / together is how many sessions' worth of work the
-- machine does at once (the ceiling of any N workers against one).
create or replace function bench_spin_ns(i_loops int default 3000000)
returns bigint language plpgsql as $$
declare
    a bigint;
    x bigint := 0;
begin
    a := (bench_proc_self()).cpu_ns;
    for i in 1 .. i_loops loop
        x := x + i % 7;
    end loop;
    return (bench_proc_self()).cpu_ns - a;
end $$;

-- This backend's CPU ns so far, its ns waited for a core and its
-- voluntary and involuntary context switches, from /proc/self (ADR 0104):
-- read at a drain's start and end by the drains partition.sh and
-- slot_scaling.sh time, so that a run says how much CPU its events took,
-- summed over its sessions, apart from its wall clock
create or replace function bench_proc_self(out cpu_ns bigint, out wait_ns bigint, out vol bigint,
                                           out invol bigint)
language plpgsql as $$
declare
    st text := pg_read_file('/proc/self/status');
    sc text := pg_read_file('/proc/self/schedstat');
begin
    cpu_ns := split_part(sc, ' ', 1)::bigint;
    wait_ns := split_part(sc, ' ', 2)::bigint;
    vol := substring(st from '\nvoluntary_ctxt_switches:\s+(\d+)')::bigint;
    invol := substring(st from '\nnonvoluntary_ctxt_switches:\s+(\d+)')::bigint;
end $$;

-- CPU ns so far of every process of the server that pg_stat_activity
-- lists (client backends, background workers, walwriter, checkpointer,
-- autovacuum...), from /proc/<pid>/schedstat (ADR 0109): read before and
-- after a timed run, it says what else of the server spent the cores the
-- workers were timed on (the bench's own sampler too).  A process gone
-- between the list and the read reads NULL.
create or replace function bench_server_cpu(out pid int, out what text, out cpu_ns bigint)
returns setof record language sql as $$
    select a.pid,
           case when a.query like 'call bench\_slot\_worker(%' then 'slot worker'
                when a.query like 'call bench\_sample\_waits(%' then 'bench sampler'
                when a.backend_type = 'client backend' then 'client backend'
                else coalesce(nullif(a.backend_type, ''), 'unknown') end,
           split_part(pg_read_file('/proc/' || a.pid || '/schedstat', 0, 200, true), ' ', 1)::bigint
      from pg_stat_activity a
$$;
