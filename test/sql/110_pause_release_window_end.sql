-- A pausing slot releases a key whose head was done only once the window
-- holding the head is passed (ADR 0141).  A resize 1 -> 2 moves a blocked
-- key with the events its old slot withheld, appended again for the new
-- slot (ADR 0038), and routes the head's retry there: both can land in one
-- window of the new slot, each event with its ev_id, the head first.  A
-- release at the ack of the head's part appended again what the slot had
-- passed (the key's new-layout events, withheld before) and left the
-- window's later parts to hand out the rest of the copies ahead of them.
-- Each key's events must come in the order they were sent.  Workers are
-- off; ticks are explicit; ids are never printed.  The file sorts before
-- 10_roles (its number is 110): pgque's sequences are set back at its end.

create temp table t110_seqs as
select c.oid, pg_sequence_last_value(c.oid) as v from pg_class c
 where c.relkind = 'S' and c.relnamespace = 'pgque'::regnamespace;

select pgque.create_queue('q110') > 0 as created,
       pgque.set_queue_config('q110', 'partition_buckets', '8') > 0 as bucketed;
select pgque.subscribe_slot('q110', 'c', 0, 1, 'pause') is null as subscribed;
create table sent110 (payload text primary key, key text, n bigserial);
create table got110 (payload text, key text, slot int4, n_at int4, seq bigserial);
create table fail110 (payload text primary key, done boolean not null default false);

-- a transaction of 3 events a tick: keys a, b, c; key a's events are a<t>
create procedure send110(i_from int4, i_to int4) language plpgsql as $$
begin
    for t in i_from .. i_to loop
        insert into sent110 (payload, key)
        select k || t, k from unnest(array['a', 'b', 'c']) k;
        perform pgque.send_batch('q110', 'e',
                                 array(select s.payload from sent110 s where s.payload in ('a' || t, 'b' || t, 'c' || t) order by s.n),
                                 array(select s.key from sent110 s where s.payload in ('a' || t, 'b' || t, 'c' || t) order by s.n));
        commit;
        perform pgque.force_tick('q110'), pgque.ticker('q110');
        commit;
    end loop;
end $$;

-- a worker: the slots of the consumer's current n, parts of 2, each part
-- recorded and acked in one transaction (a named failure nacked, its key's
-- later events in the part left), until two passes find nothing
create procedure drain110() language plpgsql as $$
declare
    pn   int4;
    k    int4;
    idle int4 := 0;
    cnt  int4;
    m    pgque.message;
    nk   text[];
begin
    loop
        pn := pgque.partition_n('q110', 'c');
        cnt := 0;
        for s in 0 .. pn - 1 loop
            perform pgque.claim_slot('q110', 'c', s, 'w', '1 hour');
            loop
                k := 0;
                nk := '{}';
                for m in select * from pgque.receive_partitioned('q110', 'c', s, pn, 'w', 2) loop
                    k := k + 1;
                    continue when m.extra1 = any(nk);
                    if exists (select from fail110 f where f.payload = m.payload and not f.done) then
                        update fail110 set done = true where payload = m.payload;
                        perform pgque.nack_partitioned('q110', 'c', s, pn, 'w', m, '0 seconds');
                        nk := nk || m.extra1;
                        continue;
                    end if;
                    insert into got110 (payload, key, slot, n_at) values (m.payload, m.extra1, s, pn);
                end loop;
                exit when k = 0;
                perform pgque.ack_partitioned('q110', 'c', s, pn, 'w');
                commit;
                cnt := cnt + k;
            end loop;
            commit;
        end loop;
        perform pgque.maint_retry_events();
        perform pgque.force_tick('q110'), pgque.ticker('q110');
        commit;
        idle := case when cnt = 0 then idle + 1 else 0 end;
        exit when idle >= 2;
    end loop;
end $$;

-- key a pauses on a1 (its first event) while the old layout drains; b and
-- c flow; the resize comes before the drain, so a's withheld events and
-- a1's retry both move to a's new slot
call send110(1, 4);
insert into fail110 values ('a1');
select pgque.resize_partitioned('q110', 'c', 2) > 0 as resized;
call send110(5, 7);
call drain110();

select pgque.partition_n('q110', 'c') as n_after;
select count(*) as delivered, count(distinct payload) as distinct_delivered,
       (select count(*) from sent110) as sent,
       (select count(*) from fail110 where done) as nacked
  from got110;
-- key a: a1 by its retry, then a2 .. a7 in order, all on a's new slot
select string_agg(payload, ' ' order by seq) as key_a from got110 where key = 'a';
select count(*) as out_of_order
  from (select s.n, lag(s.n) over (partition by g.key order by g.seq) as prev
          from got110 g join sent110 s using (payload)) x
 where prev > n;
select count(*) as keys_left_paused from pgque.blocked_key;

select pgque.drop_queue('q110', true) as dropped;
drop procedure drain110;
drop procedure send110;
drop table got110, sent110, fail110;
select count(pg_catalog.setval(s.oid::regclass, coalesce(s.v, q.seqstart), s.v is not null)) >= 0 as sequences_back
  from t110_seqs s join pg_sequence q on q.seqrelid = s.oid;
