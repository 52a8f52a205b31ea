-- The second reader's attacks on a pausing slot's read by its row's key
-- (ADR 0139): pgque._receive_paused(batch, sub, epoch, max, n, slot) and
-- the two SQL helpers it joins, _slot_row_window(pgque.slot_batch) and
-- _window_source(queue_id, lo, hi, n, slot), as a role with LOGIN only,
-- a member of each pgque role, a consumer's user without the lease, a
-- fenced old owner after a takeover, another application's user, the
-- owner of a schema on the caller's search_path (planted operators and
-- types) and the owner with NULL and made-up arguments.  Each attack
-- here held; the file keeps it held.  Workers are off; ticks are
-- explicit; batch ids, epochs and sub ids are never printed.  The file
-- sorts before 10_roles (its number is 109): pgque's sequences are set
-- back at its end to where they were.

create temp table t109_seqs as
select c.oid, pg_sequence_last_value(c.oid) as v from pg_class c
 where c.relkind = 'S' and c.relnamespace = 'pgque'::regnamespace;

create role t109_login login;
create role t109_reader login;
grant pgque_reader to t109_reader;
create role t109_writer login;
grant pgque_writer to t109_writer;
create role t109_admin login;
grant pgque_admin to t109_admin;
create role t109_app2 login;
grant pgque_reader to t109_app2;
grant usage on schema pgque_test to public;
-- the consumer's user owns a schema it may put on its search_path
create schema t109_evil authorization t109_reader;

-- no role but the owner may execute the read or the helpers it joins
-- (nor PUBLIC: no grant to it at all)
select p.proname, count(*) filter (where has_function_privilege(r.oid, p.oid, 'execute')) as callable_by_others,
       (select count(*) from aclexplode(p.proacl) a where a.grantee = 0) as granted_to_public
  from pg_proc p, pg_roles r
 where p.pronamespace = 'pgque'::regnamespace
   and p.proname in ('_receive_paused', '_slot_row_window', '_window_source', '_slot_batch_window', '_batch_source')
   and r.rolname in ('pgque_admin', 'pgque_reader', 'pgque_writer', 't109_login', 't109_reader',
                     't109_writer', 't109_admin', 't109_app2')
 group by p.proname, p.proacl order by 1;
-- ... and none of them is SECURITY DEFINER (they run as their caller);
-- the read's one SET is its lock_timeout (a frozen old owner, TAP 169)
select p.proname, p.prosecdef, p.proconfig is not null as has_set
  from pg_proc p
 where p.pronamespace = 'pgque'::regnamespace
   and p.proname in ('_receive_paused', '_slot_row_window', '_window_source')
 order by 1;

-- called directly: refused for every one of them
set role t109_login;
select pgque_test.error_of($$select * from pgque._receive_paused(1, 1, 1, 10, 1, 0)$$) as paused_by_login;
select pgque_test.error_of($$select * from pgque._window_source(1, null, null, 1, 0)$$) as source_by_login;
reset role;
set role t109_reader;
select pgque_test.error_of($$select * from pgque._receive_paused(1, 1, 1, 10, 1, 0)$$) as paused_by_reader;
select pgque_test.error_of($$select * from pgque._slot_row_window(null::pgque.slot_batch)$$) as row_window_by_reader;
select pgque_test.error_of($$select * from pgque._window_source(1, null, null, 1, 0)$$) as source_by_reader;
reset role;
set role t109_writer;
select pgque_test.error_of($$select * from pgque._receive_paused(1, 1, 1, 10, 1, 0)$$) as paused_by_writer;
select pgque_test.error_of($$select * from pgque._slot_row_window(null::pgque.slot_batch)$$) as row_window_by_writer;
reset role;
set role t109_admin;
select pgque_test.error_of($$select * from pgque._receive_paused(1, 1, 1, 10, 1, 0)$$) as paused_by_admin;
select pgque_test.error_of($$select * from pgque._window_source(1, null, null, 1, 0)$$) as source_by_admin;
select pgque_test.error_of($$select * from pgque._slot_batch_window(1)$$) as batch_window_by_admin;
reset role;

-- a pausing slot of t109_reader's consumer 'pc' (its user: t109_reader
-- alone), and t109_app2's own pausing consumer 'oc', on one queue
select pgque.create_queue('pk109') is not null as created;
set role t109_reader;
select pgque.subscribe_slot('pk109', 'pc', 0, 1, 'pause') is not null as subscribed;
select pgque.claim_slot('pk109', 'pc', 0, 'w1', '1 second') is not null as claimed;
reset role;
set role t109_app2;
select pgque.subscribe_slot('pk109', 'oc', 0, 1, 'pause') is not null as other_subscribed;
select pgque.claim_slot('pk109', 'oc', 0, 'x') is not null as other_claimed;
reset role;
select pgque.ticker('pk109') is not null as ticked;

-- the ledger of pc: what its user processed, part by part
create temp table got109 (seq serial, part int4, worker text, payload text, key text, retry int4);
grant all on got109 to public;
grant all on sequence got109_seq_seq to public;
create function pg_temp.take(i_part int4, i_worker text, i_max int4, i_fail text[] default '{}')
returns text language plpgsql as $$
declare
    m      pgque.message;
    nacked text[] := '{}';
    res    text[] := '{}';
begin
    for m in select * from pgque.receive_partitioned('pk109', 'pc', 0, 1, i_worker, i_max) order by msg_id, payload loop
        if m.extra1 = any(nacked) then
            res := res || ('(' || m.payload || ')');
            continue;
        end if;
        if m.payload = any(i_fail) then
            perform pgque.nack_partitioned('pk109', 'pc', 0, 1, i_worker, m, '0 seconds', 'test');
            nacked := nacked || m.extra1;
            res := res || ('!' || m.payload);
            continue;
        end if;
        insert into got109 (part, worker, payload, key, retry) values (i_part, i_worker, m.payload, m.extra1, m.retry_count);
        res := res || m.payload;
    end loop;
    perform pgque.ack_partitioned('pk109', 'pc', 0, 1, i_worker);
    return array_to_string(res, ' ');
end $$;
grant execute on function pg_temp.take(int4, text, int4, text[]) to public;

-- window 1: A1 fails, key A blocks on it (A2 skipped, withheld after)
set role t109_writer;
select count(pgque.send('pk109', 'e', p, k)) as sent
  from (values ('A1', 'A'), ('B1', 'B'), ('A2', 'A'), ('N1', null)) v(p, k);
reset role;
select pgque.ticker('pk109') is not null as ticked;
set role t109_reader;
select pg_temp.take(1, 'w1', 10, array['A1']) as part1;
reset role;
set role t109_writer;
select count(pgque.send('pk109', 'e', p, k)) as sent
  from (values ('B2', 'B'), ('A3', 'A'), ('C1', 'C'), ('C2', 'C')) v(p, k);
reset role;
select pgque.maint_retry_events() >= 1 as retried;
select pgque.ticker('pk109') is not null as ticked;

-- Not the lease's holder, another application, a writer: refused before
-- any read (the paused read takes only the key the open returned, never
-- an argument of the caller's).  A pgque_admin may use every consumer
-- (ADR 0058): it reads the lease holder's part (not acked here: w1 reads
-- it again below).
set role t109_reader;
select regexp_replace(pgque_test.error_of($$select * from pgque.receive_partitioned('pk109', 'pc', 0, 1, 'w9', 10)$$),
                      'epoch \d+', 'epoch N') as no_lease;
reset role;
set role t109_app2;
select pgque_test.error_of($$select * from pgque.receive_partitioned('pk109', 'pc', 0, 1, 'w1', 10)$$) as other_application;
reset role;
set role t109_writer;
select pgque_test.error_of($$select * from pgque.receive_partitioned('pk109', 'pc', 0, 1, 'w1', 10)$$) as writer;
reset role;
set role t109_admin;
select pgque_test.error_of($$select * from pgque.receive_partitioned('pk109', 'pc', 0, 1, 'w1', 10)$$) as admin;
reset role;
select count(*) as nothing_read_yet from got109 where part > 1;

-- Planted names on the caller's search_path: operators for every pair of
-- types the read compares (int4, int8, text) and types named int4 and
-- int8, in a schema of the consumer's own user, first on its path.  The
-- receive runs under its pinned search_path (SECURITY DEFINER, pgque,
-- pg_catalog, pg_temp), where the planted ones are never found: the
-- helpers, inlined without a SET of their own, are parsed there too.
set role t109_reader;
create function t109_evil.count_hit() returns void language sql set search_path = pg_catalog as $$
    select set_config('t109.hits', (coalesce(nullif(current_setting('t109.hits', true), ''), '0')::int + 1)::text, false)
$$;
create function t109_evil.eq4(a int4, b int4) returns boolean language plpgsql as $$
begin perform t109_evil.count_hit(); return a operator(pg_catalog.=) b; end $$;
create function t109_evil.eq8(a int8, b int8) returns boolean language plpgsql as $$
begin perform t109_evil.count_hit(); return a operator(pg_catalog.=) b; end $$;
create function t109_evil.eqt(a text, b text) returns boolean language plpgsql as $$
begin perform t109_evil.count_hit(); return a operator(pg_catalog.=) b; end $$;
create function t109_evil.le8(a int8, b int8) returns boolean language plpgsql as $$
begin perform t109_evil.count_hit(); return a operator(pg_catalog.<=) b; end $$;
create function t109_evil.gt84(a int8, b int4) returns boolean language plpgsql as $$
begin perform t109_evil.count_hit(); return a operator(pg_catalog.>) b; end $$;
create operator t109_evil.= (function = t109_evil.eq4, leftarg = int4, rightarg = int4);
create operator t109_evil.= (function = t109_evil.eq8, leftarg = int8, rightarg = int8);
create operator t109_evil.= (function = t109_evil.eqt, leftarg = text, rightarg = text);
create operator t109_evil.<= (function = t109_evil.le8, leftarg = int8, rightarg = int8);
create operator t109_evil.> (function = t109_evil.gt84, leftarg = int8, rightarg = int4);
create domain t109_evil.int4 as pg_catalog.text;
create domain t109_evil.int8 as pg_catalog.text;
select set_config('t109.hits', '0', false) as hits_before;
begin;
set local search_path = t109_evil, pg_catalog, pgque;
-- window 2 by its key: A1's retry (the head: its key done in this
-- batch), then B2 and the C's; A3 withheld
select pg_temp.take(2, 'w1', 10) as part2_planted_path;
commit;
select current_setting('t109.hits') as planted_operators_called;
reset role;
select pgque.ticker('pk109') is not null as ticked;
set role t109_reader;
-- A released: A2 and A3 come, in order
select pg_temp.take(3, 'w1', 10) as part3_released;
reset role;

-- the same read called by the owner directly, on the same planted path:
-- the read has no SET (the helpers would not be inlined with one), so
-- the caller's path is what it resolves names through: the planted type
-- int8 first (an error), then, without the types, the planted operators.
-- Only the owner may call it: its path is the owner's to choose.
create temp table t109_pc as
select s.sub_id from pgque.subscription s join pgque.consumer c on c.co_id = s.sub_consumer
 where c.co_name = pgque._slot_name('pc', 0, 1);
begin;
set local search_path = t109_evil, pg_catalog, pgque;
select pgque_test.error_of($$select count(*) from pgque._receive_paused(null, (select sub_id from pg_temp.t109_pc), 1, 10, 1, 0)$$)
       as direct_read_planted_type;
drop domain t109_evil.int4, t109_evil.int8;
select count(*) as direct_read from pgque._receive_paused(null, (select sub_id from pg_temp.t109_pc), 1, 10, 1, 0);
select current_setting('t109.hits')::int > 0 as planted_operators_called_by_the_direct_call;
rollback;

-- A takeover: w1's lease expires and w2 claims; the fenced w1 can
-- neither read nor ack (PQ002); w2 reads the window w1 left open
set role t109_writer;
select count(pgque.send('pk109', 'e', p, k)) as sent
  from (values ('D1', 'D'), ('B3', 'B'), ('D2', 'D'), ('E1', 'E')) v(p, k);
reset role;
select pgque.ticker('pk109') is not null as ticked;
set role t109_reader;
select array_agg(payload order by msg_id) as w1_part_not_acked
  from pgque.receive_partitioned('pk109', 'pc', 0, 1, 'w1', 2);
select pg_sleep(1.2);  -- the lease's ttl passes
select pgque.claim_slot('pk109', 'pc', 0, 'w2', '1 hour') is not null as taken_over;
select regexp_replace(pgque_test.error_of($$select * from pgque.receive_partitioned('pk109', 'pc', 0, 1, 'w1', 10)$$),
                      'epoch \d+', 'epoch N') as fenced_read;
select regexp_replace(pgque_test.error_of($$select pgque.ack_partitioned('pk109', 'pc', 0, 1, 'w1')$$),
                      'epoch \d+', 'epoch N') as fenced_ack;
-- D1 fails under w2: D withheld, the rest of the window comes
select pg_temp.take(4, 'w2', 2, array['D1']) as part4_w2;
select pg_temp.take(5, 'w2', 10) as part5_w2;
reset role;
select pgque.maint_retry_events() >= 1 as retried;
select pgque.ticker('pk109') is not null as ticked;
set role t109_reader;
select pg_temp.take(6, 'w2', 10) as part6_d1_retry;
reset role;
select pgque.ticker('pk109') is not null as ticked;
set role t109_reader;
select pg_temp.take(7, 'w2', 10) as part7_d_released;
select pg_temp.take(8, 'w2', 10) as part8_nothing;
reset role;

-- every event once, each key in the order sent; no key left blocked
select part, worker, string_agg(payload || coalesce(':' || nullif(retry, 0), ''), ' ' order by seq) as handed_out
  from got109 group by part, worker order by part;
select key, string_agg(payload, ' ' order by seq) as processed from got109 group by key order by key nulls last;
select count(*) as events, count(distinct payload) as distinct_events from got109;
select count(*) as blocked_keys_left from pgque.blocked_key k
  join pgque.subscription s on s.sub_id = k.bk_sub
  join pgque.consumer c on c.co_id = s.sub_consumer
 where c.co_name in (pgque._slot_name('pc', 0, 1), pgque._slot_name('oc', 0, 1));
-- the other application's consumer reads its own window whole: what
-- pc's parts marked and blocked is pc's alone
set role t109_app2;
select count(*) as oc_window from pgque.receive_partitioned('pk109', 'oc', 0, 1, 'x', 100);
reset role;

-- The owner's own calls with NULL and made-up arguments: nothing, never
-- a crash; a made-up row of slot_batch reads no window
select count(*) as all_null from pgque._receive_paused(null, null, null, null, null, null);
select count(*) as null_key from pgque._receive_paused(1, null, null, 10, 1, 0);
select count(*) as null_row from pgque._slot_row_window(null::pgque.slot_batch);
select count(*) as made_up_row
  from pgque._slot_row_window(row(-1, -1, -1, -1, -1, null, null)::pgque.slot_batch);
select count(*) as null_queue from pgque._window_source(null, null, null, null, null);
select pgque_test.error_of($$select count(*) from pgque._window_source(
    (select queue_id from pgque.queue where queue_name = 'pk109'), null, null, 1, 0)$$) as null_snapshots;
select count(*) as unknown_queue
  from pgque._window_source(-1, pg_current_snapshot(), pg_current_snapshot(), 1, 0);

select pgque.drop_queue('pk109', true) as dropped;
set client_min_messages = warning;
drop owned by t109_login, t109_reader, t109_writer, t109_admin, t109_app2 cascade;
reset client_min_messages;
drop role t109_login, t109_reader, t109_writer, t109_admin, t109_app2;
revoke usage on schema pgque_test from public;
select count(pg_catalog.setval(s.oid::regclass, coalesce(s.v, q.seqstart), s.v is not null)) >= 0 as sequences_back
  from t109_seqs s join pg_sequence q on q.seqrelid = s.oid;
