-- The second reader of this session's branches (ADR 0114), in one session
-- with no worker (the ticks are explicit):
--  1. slot readers and a plain reader of a 32-bucket queue against an
--     unbucketed twin (the plain reader's windows read without the
--     executor, ADR 0110; the slots' through the kept plan while their
--     source names the child table's own heap, filtered, and without it in
--     the last round, once no writer older than the buckets' step 2 is
--     left): writers in prepared
--     transactions (committed between ticks, rolled back, across ticks), a
--     subtransaction rolled back, a takeover of a slot mid-batch, a
--     rotation; every committed event acked once per slot consumer.
--  2. pgque._queues_unticked (ADR 0113) against _has_unticked_events for
--     the same two queues: late committers, rolled-back writers, a
--     subtransaction rolled back, a rotated table.
--  3. the internal functions the branches added are nobody's to call.
--  4. receive_wait's per-session queue id (ADR 0108): a queue dropped and
--     made again under the name, and a role without the right after a call
--     of one with it;
--  5. repeated ids across buckets read without the executor in parts.
create schema a4;
create table a4.acked (seq serial, q text, c text, slot int4, batch_id bigint, payload text, key text);
select pgque.create_queue('a4b'), pgque.set_queue_config('a4b', 'partition_buckets', '32');
select pgque.create_queue('a4p');
select pgque.subscribe_slot(q, 'sl', s, 4) from unnest(array['a4b', 'a4p']) q, generate_series(0, 3) s;
select pgque.subscribe(q, 'c') from unnest(array['a4b', 'a4p']) q;
select pgque.claim_slot(q, 'sl', s, 'w' || s) > 0 as claimed from unnest(array['a4b', 'a4p']) q, generate_series(0, 3) s;

create function a4.send(tag text, n int4) returns void language plpgsql as $$
declare
    q text;
begin
    foreach q in array array['a4b', 'a4p'] loop
        perform pgque.send_batch(q, 'default',
                                 array(select tag || '-' || pg_catalog.lpad(i::text, 4, '0') from generate_series(1, n) i),
                                 array(select 'k' || (i % 37) from generate_series(1, n) i));
    end loop;
end $$;
create function a4.tick() returns void language sql as $$
    select pgque.ticker('a4b'), pgque.ticker('a4p');
$$;
-- the rows this transaction fetched through the ev_txid indexes of queue
-- i_queue's tables (the read without the executor fetches each row so;
-- the kept plan's bitmap scans fetch none there)
create function a4.index_fetched(i_queue text) returns bigint language sql as $$
    select coalesce(sum(pg_catalog.pg_stat_get_xact_tuples_fetched(i.indexrelid)), 0)::bigint
      from pg_catalog.pg_index i join pg_catalog.pg_class c on c.oid = i.indrelid
     where c.relnamespace = 'pgque'::regnamespace
       and c.relname like 'event\_' || (select queue_id from pgque.queue where queue_name = i_queue) || '\_%'
$$;
-- drain every slot of 'sl' (worker w<slot>) and the plain consumer 'c' of
-- both queues in parts of 5, each part acked; -> the rows the bucketed
-- queue's slot reads fetched through its indexes
create function a4.drain() returns bigint language plpgsql as $$
declare
    qn text;
    s  int4;
    n  int4;
    f0 bigint := a4.index_fetched('a4b');
    f  bigint;
    b  bigint;
    m  pgque.message;
begin
    foreach qn in array array['a4b', 'a4p'] loop
        for s in 0..3 loop
            loop
                n := 0;
                for m in select * from pgque.receive_partitioned(qn, 'sl', s, 4, 'w' || s, 5) loop
                    n := n + 1;
                    insert into a4.acked (q, c, slot, batch_id, payload, key)
                    values (qn, 'sl', s, m.batch_id, m.payload, m.extra1);
                end loop;
                exit when pgque.ack_partitioned(qn, 'sl', s, 4, 'w' || s) = 0 and n = 0;
            end loop;
        end loop;
    end loop;
    f := a4.index_fetched('a4b') - f0;
    foreach qn in array array['a4b', 'a4p'] loop
        loop
            b := null;
            for m in select * from pgque.receive(qn, 'c', 5) loop
                b := m.batch_id;
                insert into a4.acked (q, c, slot, batch_id, payload, key)
                values (qn, 'c', null, m.batch_id, m.payload, m.extra1);
            end loop;
            exit when b is null;
            perform pgque.ack(b);
        end loop;
    end loop;
    return f;
end $$;

-- round 1, before the buckets' step 2: read by the kept plan
select a4.send('r0', 40);
select a4.tick();
begin; select a4.send('pa', 30); prepare transaction 'a4_pa';
begin; select a4.send('pb', 20); prepare transaction 'a4_pb';
begin; select a4.send('pc', 20); prepare transaction 'a4_pc';
select a4.send('r1', 40);
select a4.tick();
begin;
select a4.send('sk', 6);
savepoint s1;
select a4.send('su', 6);
rollback to savepoint s1;
commit;
commit prepared 'a4_pa';
rollback prepared 'a4_pb';
select a4.tick();
select a4.drain() >= 0 as drained_round1;

-- round 2, the step 2 stamped: the slots' sources are their buckets alone
select pgque.maint_rotate_tables_step2() >= 0 as stamped;
select a4.send('r2', 40);
select a4.tick();
select a4.drain() >= 0 as drained_round2;
commit prepared 'a4_pc';
select a4.send('r3', 40);
select a4.tick();
-- a takeover of slot 1 mid-batch: w1 read a part, w9 takes the slot,
-- reads the batch from its start and acks it; w1's ack is refused (its
-- lease of one second expired first)
select pgque.claim_slot('a4b', 'sl', 1, 'w1', '1 second') > 0 as renewed_short;
do $$
declare
    m pgque.message;
begin
    for m in select * from pgque.receive_partitioned('a4b', 'sl', 1, 4, 'w1', 3) loop
        null;
    end loop;
end $$;
select pg_catalog.pg_sleep(1.1);
select pgque.claim_slot('a4b', 'sl', 1, 'w9', '30 seconds') > 0 as taken_over;
do $$
declare
    m pgque.message;
    n int4;
begin
    loop
        n := 0;
        for m in select * from pgque.receive_partitioned('a4b', 'sl', 1, 4, 'w9', 5) loop
            n := n + 1;
            insert into a4.acked (q, c, slot, batch_id, payload, key)
            values ('a4b', 'sl', 1, m.batch_id, m.payload, m.extra1);
        end loop;
        exit when pgque.ack_partitioned('a4b', 'sl', 1, 4, 'w9') = 0 and n = 0;
    end loop;
end $$;
select split_part(pgque_test.error_of($$select pgque.ack_partitioned('a4b', 'sl', 1, 4, 'w1')$$), ':', 1)
       as fenced_ack;
select pgque.release_slot('a4b', 'sl', 1, 'w9');
select pgque.claim_slot('a4b', 'sl', 1, 'w1', '30 seconds') > 0 as given_back;
select a4.drain() >= 0 as drained_round3;

-- round 3: a rotation; a writer across the switch
select pgque.set_queue_config(q, 'rotation_period', '1 millisecond') from unnest(array['a4b', 'a4p']) q;
begin; select a4.send('pw', 10); prepare transaction 'a4_pw';
select a4.send('r4', 20);
select a4.tick();
select pg_catalog.pg_sleep(0.01);
select pgque.maint() >= 0 as maint_ran;
select pgque.maint() >= 0 as maint_ran;
select a4.send('r5', 20);
commit prepared 'a4_pw';
select a4.tick();
select a4.send('r6', 20);
select a4.tick();
select a4.drain() >= 0 as drained_round4;
-- round 5: no writer older than the buckets' step 2 left; the slots'
-- windows are their buckets alone, read without the executor too (rows
-- fetched through the ev_txid indexes)
select pg_catalog.clock_timestamp() as before_round5 \gset
select pg_catalog.pg_sleep(0.01);
select a4.send('r7', 40);
select a4.tick();
select a4.send('r8', 40);
select a4.tick();
select a4.drain() > 0 as slots_read_direct;
-- a seek replay of c to before round 5 on both queues: the windows are
-- read again (without the executor on the bucketed queue), every event of
-- rounds 5 once more, once, in both queues alike; then nothing more
create table a4.replayed (q text, payload text);
create function a4.replay(qn text) returns int4 language plpgsql as $$
declare
    b bigint;
    n int4 := 0;
    m pgque.message;
begin
    loop
        b := null;
        for m in select * from pgque.receive(qn, 'c', 5) loop
            b := m.batch_id;
            n := n + 1;
            insert into a4.replayed values (qn, m.payload);
        end loop;
        exit when b is null;
        perform pgque.ack(b);
    end loop;
    return n;
end $$;
select q, (select clamped from pgque.seek(q, 'c', :'before_round5'::timestamptz)) as clamped
  from unnest(array['a4b', 'a4p']) q;
select a4.replay('a4b') as replayed_b, a4.replay('a4p') as replayed_p;
select q, split_part(payload, '-', 1) as sent_by, count(*) as events, count(distinct payload) as distinct_payloads
  from a4.replayed group by 1, 2 order by 1, 2;
select a4.replay('a4b') as again_b, a4.replay('a4p') as again_p;

-- the ledger: every committed event acked once per consumer and queue, the
-- slot consumer's four slots together; nothing rolled back (pb, su)
select q, c, split_part(payload, '-', 1) as sent_by, count(*) as acked, count(distinct payload) as distinct_payloads
  from a4.acked group by 1, 2, 3 order by 1, 2, 3;
-- each key's events in one slot, in the same order in both queues
select count(*) as keys,
       bool_and(b_slots = 1 and p_slots = 1) as one_slot_per_key,
       bool_and(b = p) as same_order_per_key
  from (select key,
               count(distinct slot) filter (where q = 'a4b') as b_slots,
               count(distinct slot) filter (where q = 'a4p') as p_slots,
               array_agg(payload order by seq) filter (where q = 'a4b' and c = 'sl') as b,
               array_agg(payload order by seq) filter (where q = 'a4p' and c = 'sl') as p
          from a4.acked where c = 'sl' group by key) k;

-- 2. pgque._queues_unticked, the watchdog's read while the ticker is
-- stopped, against _has_unticked_events (the window read) for both queues
create function a4.unticked(out q text, out by_c boolean, out by_window boolean) returns setof record
language sql as $$
    select qu.queue_name,
           qu.queue_id = any (pgque._queues_unticked(array[qu.queue_id])),
           pgque._has_unticked_events(qu, (select t from pgque.tick t where t.tick_queue = qu.queue_id
                                             order by t.tick_id desc limit 1))
      from pgque.queue qu where qu.queue_name in ('a4b', 'a4p') order by 1
$$;
select * from a4.unticked();
-- a late committer (in progress at the tick), then committed
begin; select a4.send('late', 3); prepare transaction 'a4_late';
select a4.tick();
select * from a4.unticked();
commit prepared 'a4_late';
select * from a4.unticked();
select a4.tick();
select * from a4.unticked();
-- writers that roll back, whole or a subtransaction: nothing to tick
begin; select a4.send('ab', 3); prepare transaction 'a4_ab';
select a4.tick();
rollback prepared 'a4_ab';
begin;
select pgque.send('a4b', 'kept-out'), pgque.send('a4p', 'kept-out');
rollback;
begin;
savepoint s;
select a4.send('sv', 2);
rollback to savepoint s;
commit;
select * from a4.unticked();
-- ids repeated, unknown, null: each queue once
select pgque._queues_unticked(array[q.queue_id, q.queue_id, -5, null]) as repeated
  from pgque.queue q where q.queue_name = 'a4b';
-- the read lets go of each queue's tables and indexes once it has read
-- them (ADR 0114): the watchdog asks it of every probed queue in one
-- statement, and held to the end of its transaction they were some 200
-- locks a 32-bucket queue (1,000 queues and 61 of 32 buckets: out of
-- shared memory, the pass failed).  A lock the transaction held before
-- stays.
create function a4.event_locks() returns bigint language sql as $$
    select count(*) from pg_catalog.pg_locks l join pg_catalog.pg_class c on c.oid = l.relation
     where l.pid = pg_catalog.pg_backend_pid() and l.locktype = 'relation'
       and c.relnamespace = 'pgque'::regnamespace and c.relname like 'event\_%'
$$;
begin;
select cardinality(pgque._queues_unticked(array(select queue_id from pgque.queue
                                                  where queue_name in ('a4b', 'a4p')))) as unticked;
select a4.event_locks() as event_relations_locked_after;
commit;
begin;
select pgque.send('a4b', 'held') > 0 as sent;
select a4.event_locks() > 0 as locked_by_the_send;
select a4.event_locks() as before_read \gset
select cardinality(pgque._queues_unticked(array(select queue_id from pgque.queue
                                                  where queue_name in ('a4b', 'a4p')))) as unticked;
select a4.event_locks() = :before_read as send_locks_kept;
commit;
select a4.tick();
select a4.drain() >= 0 as drained;
select q, c, count(*) as acked from a4.acked where payload like 'late-%' group by 1, 2 order by 1, 2;
select count(*) as rolled_back_delivered from a4.acked
 where payload like 'ab-%' or payload like 'sv-%' or payload = 'kept-out';

-- 3. the internal functions the branches added: nobody's but the owner's
select p.proname, r.rolname, pg_catalog.has_function_privilege(r.oid, p.oid, 'execute') as can_execute
  from pg_catalog.pg_proc p,
       (select oid, rolname from pg_catalog.pg_roles
         where rolname in ('pgque_reader', 'pgque_writer', 'pgque_admin')) r
 where p.pronamespace = 'pgque'::regnamespace
   and p.proname in ('_queues_unticked', '_queues_unticked_read', '_plain_receive_open')
 order by 1, 2;
select p.proname, coalesce(pg_catalog.array_to_string(p.proacl, ',') like '%=X/%' and
                           pg_catalog.array_to_string(p.proacl, ',') ~ '(^|,)=', false) as public_execute
  from pg_catalog.pg_proc p
 where p.pronamespace = 'pgque'::regnamespace
   and p.proname in ('_queues_unticked', '_queues_unticked_read', '_plain_receive_open')
 order by 1;

-- 4. receive_wait's queue id, remembered by name for the session: the
-- queue dropped and made again under its name is read as the new one
create function a4.wait_take(i_timeout interval) returns setof text language plpgsql as $$
declare
    m pgque.message;
    b bigint;
begin
    for m in select * from pgque.receive_wait('a4w', 'c', 10, i_timeout) loop
        b := m.batch_id;
        return next m.payload;
    end loop;
    if b is not null then
        perform pgque.ack(b);
    end if;
end $$;
select pgque.create_queue('a4w'), pgque.subscribe('a4w', 'c');
select pgque.send('a4w', 'first') > 0 as sent;
select pgque.ticker('a4w') is not null as ticked;
select * from a4.wait_take('1 second');
select pgque.drop_queue('a4w', true);
select pgque.create_queue('a4w'), pgque.subscribe('a4w', 'c');
select pgque.send('a4w', 'second') > 0 as sent;
select pgque.ticker('a4w') is not null as ticked;
select * from a4.wait_take('1 second');
-- a role without the queue's subscribe right is refused, whatever this
-- session's earlier call remembered
create role a4_nobody login;
grant pgque_reader to a4_nobody;
grant usage on schema a4 to a4_nobody;
grant execute on function a4.wait_take(interval) to a4_nobody;
select pgque.revoke_queue('a4w', 'pgque_reader', 'subscribe');
select pgque.send('a4w', 'third') > 0 as sent;
select pgque.ticker('a4w') is not null as ticked;
set role a4_nobody;
do $$
begin
    perform a4.wait_take('0.2 seconds');
    raise notice 'not refused';
exception when insufficient_privilege then
    raise notice 'refused: %', sqlerrm;
end $$;
reset role;
select * from a4.wait_take('1 second');
revoke all on schema a4 from a4_nobody;
revoke all on function a4.wait_take(interval) from a4_nobody;
drop role a4_nobody;

-- 5. repeated ids (insert_event_raw, ADR 0101) across buckets, read
-- without the executor in parts of 3 (a part ends after the last row of
-- its id, ADR 0105): every event once, in the same parts as the
-- unbucketed twin's
select pgque.create_queue('a4rb'), pgque.set_queue_config('a4rb', 'partition_buckets', '32');
select pgque.create_queue('a4rp');
select pgque.subscribe(q, 'c') from unnest(array['a4rb', 'a4rp']) q;
select pgque.maint_rotate_tables_step2() >= 0 as stamped;
select pgque.ticker(q) is not null as ticked from unnest(array['a4rb', 'a4rp']) q;
create table a4.ids as
select q, e as id, 'p' || row_number() over (partition by q order by e) as tag
  from unnest(array['a4rb', 'a4rp']) q,
       unnest(pgque.send_batch(q, 't', array(select 'a' || i from generate_series(1, 12) i),
                               array(select 'ka' || i from generate_series(1, 12) i))) e;
select count(pgque.insert_event_raw(q, id, pg_catalog.now(), null, null, 't', 'b-' || tag, 'kb' || tag,
                                    null, null, null)) as repeated
  from a4.ids;
select pgque.ticker(q) is not null as ticked from unnest(array['a4rb', 'a4rp']) q;
create table a4.rgot (q text, part int4, payload text, msg_id bigint);
create function a4.rdrain(qn text) returns bigint language plpgsql as $$
declare
    b  bigint;
    p  int4 := 0;
    m  pgque.message;
    f0 bigint := a4.index_fetched(qn);
begin
    loop
        b := null;
        p := p + 1;
        for m in select * from pgque.receive(qn, 'c', 3) loop
            b := m.batch_id;
            insert into a4.rgot values (qn, p, m.payload, m.msg_id);
        end loop;
        exit when b is null;
        perform pgque.ack(b);
    end loop;
    return a4.index_fetched(qn) - f0;
end $$;
select a4.rdrain('a4rb') > 0 as bucketed_read_direct, a4.rdrain('a4rp') >= 0 as drained;
select q, count(*) as events, count(distinct payload) as distinct_payloads,
       count(distinct msg_id) as ids, max(part) as parts
  from a4.rgot group by q order by q;
select (select array_agg(part || ':' || payload order by part, payload) from a4.rgot where q = 'a4rb')
     = (select array_agg(part || ':' || payload order by part, payload) from a4.rgot where q = 'a4rp') as same_parts;
select pgque.drop_queue(q, true) from unnest(array['a4rb', 'a4rp']) q;

select pgque.drop_queue(q, true) from unnest(array['a4b', 'a4p', 'a4w']) q;
drop schema a4 cascade;
