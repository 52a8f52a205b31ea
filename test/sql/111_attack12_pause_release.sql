-- Second reader of ADR 0141 (attack 12): a pausing slot releases a key
-- whose head was done only once the head's window is passed; a part before
-- the window's last carries the done mark to the next part's batch id, and
-- receive's finish of a part whose events were all withheld does what its
-- ack would (_pause_finish).  Each case below drains a queue with parts of
-- a given size and checks the ledger: every event handed out and acked
-- once (a nacked one again by its retry), each key's events in the order
-- they were sent, no key left blocked.  Workers are off; ticks are
-- explicit; ids are never printed.  The file sorts before 10_roles (its
-- number is 111): pgque's sequences are set back at its end.

create temp table t111_seqs as
select c.oid, pg_sequence_last_value(c.oid) as v from pg_class c
 where c.relkind = 'S' and c.relnamespace = 'pgque'::regnamespace;

-- who may call the internal steps: the owner alone (no PUBLIC grant)
create role a12_login login;
select r.rolname, f.fn, has_function_privilege(r.rolname, f.fn, 'execute') as may_execute
  from (values ('pgque_reader'), ('pgque_writer'), ('pgque_admin'), ('a12_login')) r(rolname),
       (values ('pgque._pause_finish(bigint,integer,bigint,integer,integer)'),
               ('pgque._pause_after_ack(integer,bigint,bigint,integer,integer)'),
               ('pgque._pause_follow(integer,bigint,bigint)'),
               ('pgque._pause_release(integer,text[],integer,integer,bigint,boolean)')) f(fn)
 order by 1, 2;
drop role a12_login;

create table sent111 (q text, payload text, key text, n bigserial, primary key (q, payload));
create table got111 (q text, payload text, key text, seq bigserial);
-- a payload nacked while fails > 0 (each nack counts one down)
create table fail111 (q text, payload text, fails int4 not null, primary key (q, payload));

-- one transaction per element of i_ticks, then a tick: 'a1 b1 a2' sends
-- those payloads, each payload's key its first letter
create procedure send111(i_q text, i_ticks text[]) language plpgsql as $$
declare
    t text;
begin
    foreach t in array i_ticks loop
        insert into sent111 (q, payload, key)
        select i_q, p, left(p, 1) from unnest(string_to_array(t, ' ')) with ordinality x(p, o) order by o;
        perform pgque.send_batch(i_q, 'e', array(select s.payload from sent111 s
                                                  where s.q = i_q and s.payload = any(string_to_array(t, ' ')) order by s.n),
                                 array(select s.key from sent111 s
                                        where s.q = i_q and s.payload = any(string_to_array(t, ' ')) order by s.n));
        commit;
        perform pgque.force_tick(i_q), pgque.ticker(i_q);
        commit;
    end loop;
end $$;

-- a worker of slot 0 of 1, parts of i_max: each part recorded and acked
-- in one transaction (a failing payload nacked, its key's later events in
-- the part left), until two passes find nothing
create procedure drain111(i_q text, i_max int4) language plpgsql as $$
declare
    k    int4;
    idle int4 := 0;
    cnt  int4;
    m    pgque.message;
    nk   text[];
begin
    loop
        cnt := 0;
        perform pgque.claim_slot(i_q, 'c', 0, 'w', '1 hour');
        loop
            k := 0;
            nk := '{}';
            for m in select * from pgque.receive_partitioned(i_q, 'c', 0, 1, 'w', i_max) loop
                k := k + 1;
                continue when m.extra1 = any(nk);
                if exists (select from fail111 f where f.q = i_q and f.payload = m.payload and f.fails > 0) then
                    update fail111 set fails = fails - 1 where q = i_q and payload = m.payload;
                    perform pgque.nack_partitioned(i_q, 'c', 0, 1, 'w', m, '0 seconds');
                    nk := nk || m.extra1;
                    continue;
                end if;
                insert into got111 (q, payload, key) values (i_q, m.payload, m.extra1);
            end loop;
            exit when k = 0;
            perform pgque.ack_partitioned(i_q, 'c', 0, 1, 'w');
            commit;
            cnt := cnt + k;
        end loop;
        commit;
        perform pgque.maint_retry_events();
        perform pgque.force_tick(i_q), pgque.ticker(i_q);
        commit;
        idle := case when cnt = 0 then idle + 1 else 0 end;
        exit when idle >= 2;
    end loop;
end $$;

-- the ledger of queue i_q: what each key got, and the checks
create function ledger111(i_q text, out keys text, out delivered bigint, out duplicates bigint,
                          out missing bigint, out out_of_order bigint, out keys_left_blocked bigint)
language sql as $$
    select (select string_agg(x.key || ':' || x.ps, ' ' order by x.key)
              from (select g.key, string_agg(g.payload, ',' order by g.seq) as ps
                      from got111 g where g.q = i_q group by g.key) x),
           (select count(*) from got111 g where g.q = i_q),
           (select count(*) - count(distinct g.payload) from got111 g where g.q = i_q),
           (select count(*) from sent111 s where s.q = i_q
               and not exists (select from got111 g where g.q = i_q and g.payload = s.payload)),
           (select count(*) from (select s.n, lag(s.n) over (partition by g.key order by g.seq) as prev
                                    from got111 g join sent111 s on s.q = g.q and s.payload = g.payload
                                   where g.q = i_q) y where y.prev > y.n),
           (select count(*) from pgque.blocked_key b join pgque.subscription s on s.sub_id = b.bk_sub
              join pgque.queue qq on qq.queue_id = s.sub_queue where qq.queue_name = i_q)
$$;

create procedure setup111(i_q text) language plpgsql as $$
begin
    perform pgque.create_queue(i_q);
    perform pgque.subscribe_slot(i_q, 'c', 0, 1, 'pause');
end $$;

-- 1. parts of 1, the head the window's first event, its key's withheld
-- events the window's last (the final parts all withheld: receive's
-- finish of them releases); windows of one event after
call setup111('q111a');
insert into fail111 values ('q111a', 'a1', 1);
call send111('q111a', array['a1 b1', 'a2 b2 a3 a4', 'a5', 'b3']);
call drain111('q111a', 1);
select * from ledger111('q111a');

-- 2. two keys done in one part: a1 and b1 fail, their retries come back
-- in one window with the keys' withheld events spread over later parts
call setup111('q111b');
insert into fail111 values ('q111b', 'a1', 1), ('q111b', 'b1', 1);
call send111('q111b', array['a1 b1 c1', 'c2 a2 c3 b2 c4 a3 b3']);
call drain111('q111b', 2);
select * from ledger111('q111b');

-- 3. the head's retry fails again (the same key blocked again by its
-- head, in the window that carried nothing yet), then a released copy
-- fails (a draining copy nacked: the key blocked again on it)
call setup111('q111c');
insert into fail111 values ('q111c', 'a1', 2), ('q111c', 'a3', 1);
call send111('q111c', array['a1 b1', 'b2 a2 b3 a3 b4 a4 b5', 'a5 b6']);
call drain111('q111c', 2);
select * from ledger111('q111c');

-- 4. a head dead-lettered mid-window (max_retries 1: the retry's nack
-- dead-letters it, the key done at once in that part, _pause_on_nack);
-- a1 is not delivered, it is in the dead-letter queue
call setup111('q111d');
select pgque.set_queue_config('q111d', 'max_retries', '1') > 0 as configured;
insert into fail111 values ('q111d', 'a1', 2);
call send111('q111d', array['a1 b1', 'b2 a2 b3 a3 b4', 'a4']);
call drain111('q111d', 2);
select * from ledger111('q111d');
select count(*) as dead_lettered from pgque.dead_letter d
  join pgque.queue q on q.queue_id = d.dl_queue_id where q.queue_name = 'q111d';

-- 5. the head is the window's last event: its part is the window's last,
-- released at once (no carry); parts of 3 over a window of 3
call setup111('q111e');
insert into fail111 values ('q111e', 'a1', 1);
call send111('q111e', array['b1 c1 a1', 'b2 c2 a2']);
call drain111('q111e', 3);
select * from ledger111('q111e');

-- 6. a mark carried mid-window, then the policy goes to skip: the key is
-- released and dropped at once (its passed withheld events appended again,
-- the rest of the window no longer withheld): nothing lost, none twice
call setup111('q111f');
insert into fail111 values ('q111f', 'a1', 1);
call send111('q111f', array['a1 b1']);
select pgque.claim_slot('q111f', 'c', 0, 'w', '1 hour') is not null as claimed;
select count(*) as nacked from pgque.receive_partitioned('q111f', 'c', 0, 1, 'w', 10) m
 where m.payload = 'a1' and pgque.nack_partitioned('q111f', 'c', 0, 1, 'w', m, '0 seconds') = 1;
select pgque.ack_partitioned('q111f', 'c', 0, 1, 'w') as acked;
insert into got111 (q, payload, key) values ('q111f', 'b1', 'b');
update fail111 set fails = 0 where q = 'q111f';
select pgque.maint_retry_events() > 0 as retry_in;
call send111('q111f', array['a2 b2 a3 b3']);
-- the head's part alone, acked: its mark carried to the next part
insert into got111 (q, payload, key)
select 'q111f', m.payload, m.extra1 from pgque.receive_partitioned('q111f', 'c', 0, 1, 'w', 1) m;
select pgque.ack_partitioned('q111f', 'c', 0, 1, 'w') as acked;
select count(*) as carried_to_the_open_part from pgque.blocked_key b
  join pgque.slot_batch r on r.sb_sub = b.bk_sub and r.sb_batch = b.bk_done_batch;
select pgque.set_failure_policy('q111f', 'c', 'skip') as was;
call drain111('q111f', 1);
select * from ledger111('q111f');

select count(pgque.drop_queue(q, true)) as dropped
  from unnest(array['q111a', 'q111b', 'q111c', 'q111d', 'q111e', 'q111f']) q;
drop procedure drain111, send111, setup111;
drop function ledger111;
drop table got111, sent111, fail111;
select count(pg_catalog.setval(s.oid::regclass, coalesce(s.v, q.seqstart), s.v is not null)) >= 0 as sequences_back
  from t111_seqs s join pg_sequence q on q.seqrelid = s.oid;
