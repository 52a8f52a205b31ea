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
