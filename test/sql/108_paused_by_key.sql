-- A pausing slot's part read by its epoch row's key (ADR 0139):
-- pgque._receive_paused takes the subscription and the lease epoch that
-- the receive's open returned and finds the slot_batch row by its primary
-- key, where it found it by the batch id alone (two scans of the table,
-- which has no index on sb_batch since ADR 0130).  What it hands out is
-- unchanged: a blocked key's events past its head withheld, the head's
-- retry marking its key done in the batch, a part ending WITH TIES on a
-- repeated id (ADR 0105), the part's end marked in sb_last.  Workers are
-- off; ticks are explicit; batch ids and epochs are never printed.  The
-- file sorts before 10_roles (its number is 108): pgque's sequences are
-- set back at its end to where they were.
--
-- slot_batch holds 1,000 more rows, one each of 1,000 subscriptions no
-- slot reads (made by hand: the table's size is the point): a table of a few rows is
-- scanned by the planner's choice (a page is cheaper than an index probe),
-- one of 1,000 is not, so a scan counted is a lookup that has no index to
-- use, one by sb_batch alone.

create temp table t108_seqs as
select c.oid, pg_sequence_last_value(c.oid) as v from pg_class c
 where c.relkind = 'S' and c.relnamespace = 'pgque'::regnamespace;

-- the new signature replaces the old one; no role but the owner may call it
select to_regprocedure('pgque._receive_paused(bigint,int4,int4,int4)') is null as old_signature_gone,
       to_regprocedure('pgque._receive_paused(bigint,int4,bigint,int4,int4,int4)') is not null as new_signature;
select r.rolname, has_function_privilege(r.oid, 'pgque._receive_paused(bigint,int4,bigint,int4,int4,int4)', 'execute')
       as can_execute
  from pg_roles r where r.rolname in ('pgque_reader', 'pgque_writer', 'pgque_admin', 'pgque_owner')
 order by 1;
select count(*) as granted_to_public
  from pg_proc p, aclexplode(p.proacl) a
 where p.oid = 'pgque._receive_paused(bigint,int4,bigint,int4,int4,int4)'::regprocedure and a.grantee = 0;

-- a pausing slot ('pc') and another pausing consumer ('oc') on one queue
select pgque.create_queue('pk108') is not null as created;
select pgque.subscribe_slot('pk108', 'pc', 0, 1, 'pause') is not null as subscribed,
       pgque.subscribe_slot('pk108', 'oc', 0, 1, 'pause') is not null as other_subscribed;
select pgque.claim_slot('pk108', c, 0, 'w') is not null as claimed from unnest(array['pc', 'oc']) c;
select count(pgque.register_consumer('pk108', 'filler' || i)) as registered from generate_series(1, 1000) i;
insert into pgque.slot_batch (sb_sub, sb_epoch, sb_last_tick)
select s.sub_id, 1, 1
  from pgque.subscription s join pgque.consumer c on c.co_id = s.sub_consumer
 where c.co_name like 'filler%';
vacuum analyze pgque.slot_batch;

-- the ledger: each part of at most i_max events handed out, in order, then
-- acked; the nacked payloads are nacked (retried at once) and the rest of
-- their key's events in the part skipped, as a pausing worker does
create temp table got108 (seq serial, part int4, payload text, key text, retry int4);
create function pg_temp.take(i_part int4, i_max int4, i_fail text[] default '{}')
returns text language plpgsql as $$
declare
    m      pgque.message;
    nacked text[] := '{}';
    res    text[] := '{}';
begin
    perform pgque.ticker('pk108');
    for m in select * from pgque.receive_partitioned('pk108', 'pc', 0, 1, 'w', i_max) order by msg_id, payload loop
        if m.extra1 = any(nacked) then
            res := res || ('(' || m.payload || ')');
            continue;
        end if;
        if m.payload = any(i_fail) then
            perform pgque.nack_partitioned('pk108', 'pc', 0, 1, 'w', m, '0 seconds', 'test');
            nacked := nacked || m.extra1;
            res := res || ('!' || m.payload);
            continue;
        end if;
        insert into got108 (part, payload, key, retry) values (i_part, m.payload, m.extra1, m.retry_count);
        res := res || m.payload;
    end loop;
    perform pgque.ack_partitioned('pk108', 'pc', 0, 1, 'w');
    return array_to_string(res, ' ');
end $$;
-- pc's open slot_batch row and its blocked keys
create function pg_temp.pc_row(out open boolean, out marked boolean, out blocked text)
language sql as $$
    select b.sb_batch is not null, b.sb_last is not null,
           (select string_agg(k.bk_key || case when k.bk_done_batch is not null then ':done' else '' end
                                       || case when k.bk_draining then ':draining' else '' end, ' '
                              order by k.bk_key)
              from pgque.blocked_key k where k.bk_sub = b.sb_sub)
      from pgque.slot_batch b
      join pgque.subscription s on s.sub_id = b.sb_sub
      join pgque.consumer c on c.co_id = s.sub_consumer
     where c.co_name = pgque._slot_name('pc', 0, 1)
     order by b.sb_epoch desc limit 1
$$;

-- window 1: A1 fails, key A blocks on it; A2 in the same part is skipped
select count(pgque.send('pk108', 'e', p, k)) as sent
  from (values ('A1', 'A'), ('B1', 'B'), ('A2', 'A'), ('N1', null)) v(p, k);
select pg_temp.take(1, 10, array['A1']) as part1;
select * from pg_temp.pc_row();
-- window 2 (read in parts of 2): A's events withheld; C1 and C1x share an
-- id, so the part that ends on C1 ends after C1x (WITH TIES, 3 rows);
-- A1's retry is not in this window yet
select count(pgque.send('pk108', 'e', p, k)) as sent
  from (values ('B2', 'B'), ('A3', 'A'), ('D1', 'D')) v(p, k);
select pgque.send('pk108', 'e', 'C1', 'C') as c1 \gset
select pgque.insert_event_raw('pk108', :c1, now(), null, null, 'e', 'C1x', 'C', null, null, null) = :c1 as repeated;
select count(pgque.send('pk108', 'e', p, k)) as sent
  from (values ('A4', 'A'), ('D2', 'D'), ('B3', 'B'), ('N2', null)) v(p, k);
select pg_temp.take(2, 2) as part2;
select pg_temp.take(3, 2) as part3_with_ties;
-- the same part twice before its ack: the row marked at its end
select count(*) as part4_first_read from pgque.receive_partitioned('pk108', 'pc', 0, 1, 'w', 2);
select * from pg_temp.pc_row();
select pg_temp.take(4, 2) as part4;
select pg_temp.take(5, 2) as part5_window_end;
-- A1's retry comes back alone and succeeds: its key is done in that batch,
-- the ack releases it, and the withheld A2, A3, A4 follow in id order
select pgque.maint_retry_events() >= 1 as retried;
select pgque.ticker('pk108') is not null as ticked;
begin;
select count(*) as retry_part from pgque.receive_partitioned('pk108', 'pc', 0, 1, 'w', 10);
select * from pg_temp.pc_row();
commit;
select pg_temp.take(6, 10) as part6_a1_retry;
select * from pg_temp.pc_row();
select pg_temp.take(7, 2) as part7_released;
select pg_temp.take(8, 2) as part8_released;
select pg_temp.take(9, 2) as part9_nothing;
select * from pg_temp.pc_row();
-- every event once, per key in id order
select part, string_agg(payload || coalesce(':' || retry, ''), ' ' order by seq) as handed_out
  from got108 group by part order by part;
select key, string_agg(payload, ' ' order by seq) as processed from got108 group by key order by key nulls last;

-- by the key alone: another epoch's, another subscription's or another
-- batch id gets nothing and marks nothing; the open's key gets the part.
-- A new window with a blocked key (E1 fails), then a part left open.
select count(pgque.send('pk108', 'e', p, k)) as sent
  from (values ('E1', 'E'), ('F1', 'F'), ('E2', 'E'), ('F2', 'F'), ('F3', 'F')) v(p, k);
select pg_temp.take(10, 10, array['E1']) as part10;
select count(pgque.send('pk108', 'e', p, k)) as sent
  from (values ('E3', 'E'), ('F4', 'F'), ('F5', 'F'), ('F6', 'F')) v(p, k);
select pgque.ticker('pk108') is not null as ticked;
select count(*) as oc_part from pgque.receive_partitioned('pk108', 'oc', 0, 1, 'w', 10);
select count(*) as pc_part from pgque.receive_partitioned('pk108', 'pc', 0, 1, 'w', 10);
create temp table k108 as
select c.co_name, b.sb_batch, b.sb_sub, b.sb_epoch from pgque.slot_batch b
  join pgque.subscription s on s.sub_id = b.sb_sub
  join pgque.consumer c on c.co_id = s.sub_consumer
 where b.sb_batch is not null;
select count(*) as open_batches from k108;
select (select count(*) from pgque._receive_paused(p.sb_batch, p.sb_sub, p.sb_epoch + 1, 2, 1, 0)) as other_epoch,
       (select count(*) from pgque._receive_paused(p.sb_batch, o.sb_sub, o.sb_epoch, 2, 1, 0)) as other_sub,
       (select count(*) from pgque._receive_paused(o.sb_batch, p.sb_sub, p.sb_epoch, 2, 1, 0)) as other_sub_batch,
       (select count(*) from pgque._receive_paused(p.sb_batch + 1000000, p.sb_sub, p.sb_epoch, 2, 1, 0)) as other_id
  from k108 p, k108 o where p.co_name = pgque._slot_name('pc', 0, 1) and o.co_name = pgque._slot_name('oc', 0, 1);
select * from pg_temp.pc_row();
select array_agg(m.payload order by m.msg_id) as by_the_key
  from k108 p, pgque._receive_paused(p.sb_batch, p.sb_sub, p.sb_epoch, 2, 1, 0) m
 where p.co_name = pgque._slot_name('pc', 0, 1);
select * from pg_temp.pc_row();

-- no scan of slot_batch by the paused receive (its open, the read, the
-- mark), where a lookup by the batch id alone scans it (the counter
-- counts): the backend's counts grow inside one transaction, and are
-- read before and after
begin;
select seq_scan as s0 from pg_stat_xact_user_tables where relid = 'pgque.slot_batch'::regclass \gset
select array_agg(payload order by msg_id) as paused_receive
  from pgque.receive_partitioned('pk108', 'pc', 0, 1, 'w', 2);
select seq_scan - :s0 as paused_receive_seq_scans
  from pg_stat_xact_user_tables where relid = 'pgque.slot_batch'::regclass;
select count(*) as window_by_id from pgque._slot_batch_window((select sb_batch from k108 where co_name = pgque._slot_name('pc', 0, 1)));
select count(*) as source_by_id from pgque._batch_source((select sb_batch from k108 where co_name = pgque._slot_name('pc', 0, 1)), 1, 0);
select seq_scan - :s0 as seq_scans_of_the_id_lookups
  from pg_stat_xact_user_tables where relid = 'pgque.slot_batch'::regclass;
commit;

select pgque.drop_queue('pk108', true) as dropped;
select count(pg_catalog.setval(s.oid::regclass, coalesce(s.v, q.seqstart), s.v is not null)) >= 0 as sequences_back
  from t108_seqs s join pg_sequence q on q.seqrelid = s.oid;
