-- Reliability leftovers of issue #30 (ADR 0105).
--
-- 1: two events of one ev_id never lose one to the end of a part.  Every
-- reader resumes a window after the ev_id its last part ended at
-- (sub_batch_pos, sb_pos, cw_pos); an id an admin repeats (insert_event_raw
-- with a known id, ADR 0101) used to lose the second event when a part
-- ended between the two (ADR 0093).  A part now ends after the last row of
-- its last id.  Plain consumers, partition slots (skip and pause) and
-- parts of 1, 2, 3 and 5, on an unbucketed and a 32-bucket queue; then a
-- part as large as the part cache (the ordered read, WITH TIES).
select pgque.create_queue('dup_p'), pgque.create_queue('dup_b'),
       pgque.set_queue_config('dup_p', 'partition_buckets', '0'),
       pgque.set_queue_config('dup_b', 'partition_buckets', '32');
select count(pgque.subscribe(q, c))
  from unnest(array['dup_p', 'dup_b']) q, unnest(array['c1', 'c2', 'c3', 'c5']) c;
select count(*) as slot_consumers
  from unnest(array['dup_p', 'dup_b']) q,
       (values ('s1', 'skip'), ('s2', 'skip'), ('ps1', 'pause'), ('ps2', 'pause')) v(c, p),
       lateral (select pgque.subscribe_slot(q, v.c, 0, 1, v.p)) x;
create temp table dup_got (seq serial, q text, c text, msg_id bigint, payload text);

-- a slot consumer's drain: receive_partitioned / ack_partitioned until empty
create function pg_temp.drain_slot(i_q text, i_c text, i_max int4)
returns table (msg_id bigint, payload text) language plpgsql as $$
declare
    m  pgque.message;
    b  bigint;
begin
    perform pgque.claim_slot(i_q, i_c, 0, 'w');
    loop
        b := null;
        for m in select * from pgque.receive_partitioned(i_q, i_c, 0, 1, 'w', i_max) loop
            b := m.batch_id;
            msg_id := m.msg_id;
            payload := m.payload;
            return next;
        end loop;
        exit when b is null;
        perform pgque.ack_partitioned(i_q, i_c, 0, 1, 'w');
    end loop;
end $$;

-- six events, then the admin's copies: three more of the second's id and
-- one more of the fifth's, with other keys (other buckets), in one window
create temp table dup_ids (q text, i int4, id bigint);
insert into dup_ids
select q, i, pgque.send(q, 'default', 'e' || i, 'k' || i)
  from unnest(array['dup_p', 'dup_b']) q, generate_series(1, 6) i;
select count(pgque.insert_event_raw(d.q, d.id, now(), null, null, 'default', 'e' || d.i || x.suffix,
                                    'k' || (d.i * 7 + x.n), null, null, null))
  from dup_ids d,
       (values (2, 'b', 1), (2, 'c', 2), (2, 'd', 3), (5, 'b', 1)) x(i, suffix, n)
 where d.i = x.i;
select q, count(*) as events, count(distinct ev_id) as ids
  from (select 'dup_p' q, * from pgque_test.events('dup_p')
        union all select 'dup_b', * from pgque_test.events('dup_b')) e
 group by q order by q;
insert into dup_got (q, c, msg_id, payload)
select q, c, d.msg_id, d.payload
  from unnest(array['dup_p', 'dup_b']) q,
       (values ('c1', 1), ('c2', 2), ('c3', 3), ('c5', 5)) v(c, n),
       lateral pgque_test.drain(q, c, n) d;
insert into dup_got (q, c, msg_id, payload)
select q, c, d.msg_id, d.payload
  from unnest(array['dup_p', 'dup_b']) q,
       (values ('s1', 1), ('s2', 2), ('ps1', 1), ('ps2', 2)) v(c, n),
       lateral pg_temp.drain_slot(q, c, n) d;
-- every consumer: the ten events once each, in ev_id order
select q, c, count(*) as delivered, count(distinct payload) as distinct_events,
       bool_and(prev is null or msg_id >= prev) as in_ev_id_order
  from (select *, lag(msg_id) over (partition by q, c order by seq) as prev from dup_got) g
 group by q, c order by q, c;
select q, c, string_agg(payload, ' ' order by payload) as lost
  from (select q, c, 'e' || i || s as payload
          from unnest(array['dup_p', 'dup_b']) q,
               unnest(array['c1', 'c2', 'c3', 'c5', 's1', 's2', 'ps1', 'ps2']) c,
               (values (1, ''), (2, ''), (2, 'b'), (2, 'c'), (2, 'd'), (3, ''), (4, ''), (5, ''), (5, 'b'), (6, '')) e(i, s)
        except select q, c, payload from dup_got) l
 group by q, c order by q, c;

-- a part of 50,000 (the part cache's size: read in ev_id order, WITH TIES)
-- whose 50,000th row's id repeats in row 50,001
select pgque.create_queue('dup_big'), pgque.subscribe('dup_big', 'c');
select min(id) as big_first
  from unnest(pgque.send_batch('dup_big', 'default',
                               array(select 'b' || i from generate_series(1, 50002) i))) id \gset
select pgque.insert_event_raw('dup_big', :big_first + 49999, now(), null, null, 'default', 'b50000x',
                              null, null, null, null) = :big_first + 49999 as repeated_50000th;
create temp table big_got as select * from pgque_test.drain('dup_big', 'c', 50000);
select count(*) as delivered, count(distinct payload) as distinct_events, max(batch_no) as parts,
       count(*) filter (where batch_no = 1) as first_part,
       count(*) filter (where payload in ('b50000', 'b50000x')) as both_of_the_id
  from big_got;
select pgque.unsubscribe('dup_big', 'c'), pgque.drop_queue('dup_big');

-- 2: a seek keeps an event an admin addressed to the consumer.  A seek
-- back drops the retry copies the consumer acked (ADR 0091: its own rows
-- in the windows it passed); insert_event_raw with ev_owner writes a row
-- owned the same way, which the seek took for a copy and deleted: the
-- replay lost it.  Now it is marked (pgque.addressed_event) and replays in
-- its place; a retry of it is a copy and goes as any.
select pgque.create_queue('addr'), pgque.subscribe('addr', 'c');
select sub_id as addr_sub from pgque.subscription s join pgque.consumer c on c.co_id = s.sub_consumer
 where s.sub_queue = (select queue_id from pgque.queue where queue_name = 'addr') and c.co_name = 'c' \gset
select count(pgque.send('addr', 'default', 'e' || i)) from generate_series(1, 2) i;
select pgque.ticker('addr') > 0 as ticked;
create temp table addr_first as select r.msg_id, r.batch_id, r.payload, r as m from pgque.receive('addr', 'c', 10) r;
select pgque.nack(f.batch_id, f.m, '0 seconds', 'retry e2') from addr_first f where f.payload = 'e2';
select pgque.ack((select batch_id from addr_first limit 1));
select pgque.maint_retry_events() as moved;
create role addr_admin login in role pgque_admin;
set role addr_admin;
select pgque.insert_event_raw('addr', null, now(), :addr_sub, null, 'default', 'addressed', null, null, null, null) > 0 as addressed;
reset role;
select count(*) as marks from pgque.addressed_event where ae_sub = :addr_sub;
select pg_sleep(0.01);
create temp table addr_got (seq serial, round text, msg_id bigint, payload text, retry_count int4);
insert into addr_got (round, msg_id, payload, retry_count)
select 'before seek', d.msg_id, d.payload, d.retry_count from pgque_test.drain('addr', 'c', 10) d;
select (pgque.seek('addr', 'c', 'earliest')).tick_id is not null as seeked;
insert into addr_got (round, msg_id, payload, retry_count)
select 'replay', d.msg_id, d.payload, d.retry_count from pgque_test.drain('addr', 'c', 10) d;
select round, string_agg(payload || coalesce('(' || retry_count || ')', ''), ' ' order by seq) as delivered
  from addr_got group by round order by min(seq);
select count(*) as marks_after_seek from pgque.addressed_event where ae_sub = :addr_sub;

-- the addressed event nacked: its retry (a copy, another transaction's
-- row) is dropped by the next seek; the event itself replays again
select (pgque.seek('addr', 'c', 'earliest')).tick_id is not null as seeked;
select pgque.ack(max(batch_id)) as acked_first_window from pgque.receive('addr', 'c', 10);
create temp table addr_second as select r.msg_id, r.batch_id, r.payload, r as m from pgque.receive('addr', 'c', 10) r;
select payload from addr_second;
select pgque.nack(f.batch_id, f.m, '0 seconds', 'retry addressed') from addr_second f where f.payload = 'addressed';
select pgque.ack((select batch_id from addr_second limit 1));
select pgque.maint_retry_events() as moved;
select pg_sleep(0.01);
insert into addr_got (round, msg_id, payload, retry_count)
select 'retried', d.msg_id, d.payload, d.retry_count from pgque_test.drain('addr', 'c', 10) d;
select (pgque.seek('addr', 'c', 'earliest')).tick_id is not null as seeked;
insert into addr_got (round, msg_id, payload, retry_count)
select 'replay 2', d.msg_id, d.payload, d.retry_count from pgque_test.drain('addr', 'c', 10) d;
select round, string_agg(payload || coalesce('(' || retry_count || ')', ''), ' ' order by seq) as delivered
  from addr_got where round in ('retried', 'replay 2') group by round order by min(seq);

-- the marks go with the rows rotation truncates, and with the subscription
select pgque.set_queue_config('addr', 'rotation_period', '1 millisecond');
-- five rounds of a send, a drain and maint() once the rotation period has
-- passed, each step in a transaction of its own (as five rounds of
-- statements would be)
create temp table rotation_round (round int4, sent boolean, drained int8, maint_ran boolean);
do $$
declare
    sent     boolean;
    drained  int8;
    ran      boolean;
begin
    for i in 1 .. 5 loop
        sent := pgque.send('addr', 'default', 'r' || i) > 0;
        commit;
        drained := (select count(*) from pgque_test.drain('addr', 'c', 10));
        commit;
        perform pg_sleep(0.01);
        ran := pgque.maint() >= 0;
        commit;
        insert into rotation_round values (i, sent, drained, ran);
        commit;
    end loop;
end $$;
select round, sent, drained, maint_ran from rotation_round order by round;
select count(*) as marks_after_rotation from pgque.addressed_event where ae_sub = :addr_sub;
set role addr_admin;
select pgque.insert_event_raw('addr', null, now(), :addr_sub, null, 'default', 'addressed 2', null, null, null, null) > 0 as addressed;
reset role;
select pgque.unsubscribe('addr', 'c');
select count(*) as marks_after_unsubscribe from pgque.addressed_event where ae_sub = :addr_sub;
select pgque.drop_queue('addr');
drop role addr_admin;

-- 4: a renamed event sequence.  The statements that read every queue's
-- sequence position at once (the ticker's probe _ticks_seq_moved, the
-- watchdog's conditions, metrics, get_queue_info) failed for every queue
-- of the database with one queue's sequence renamed or dropped: now that
-- queue's position reads 0 and its producers get 42P01 naming it.
select queue_event_seq as dup_p_seq from pgque.queue where queue_name = 'dup_p' \gset
begin;
alter sequence :dup_p_seq rename to dup_p_seq_renamed;
-- a change of pgque.queue: the producers' queue cache is read again
update pgque.queue set queue_ticker_max_count = queue_ticker_max_count where queue_name = 'dup_p';
select pgque_test.error_of('select count(*) from pgque._ticks_seq_moved()') as probe;
select pgque_test.error_of('select count(*) from pgque.get_queue_info()') as queue_info;
select pgque_test.error_of('select count(*) from pgque.metrics()') as metrics;
select pgque_test.error_of($$select count(*) from pgque._alert_conditions('1 s', '1 s', '1 s', '1 s', '1 s')$$)
       as alert_conditions;
select queue_name, ev_new from pgque.get_queue_info() where queue_name in ('dup_p', 'dup_b') order by queue_name;
select regexp_replace(pgque_test.error_of($$select pgque.send('dup_p', 'default', 'no sequence')$$),
                      'event_[0-9]+', 'event_N', 'g') as send_renamed;
select pgque.send('dup_b', 'default', 'other queue') > 0 as other_queue_sends;
select pgque.ticker('dup_b') is not null as other_queue_ticks;
rollback;
-- dropped, then a table in its name: the same
begin;
set local client_min_messages = warning;   -- the defaults dropped with it name the queue's id
drop sequence :dup_p_seq cascade;
select pgque_test.error_of('select count(*) from pgque._ticks_seq_moved()') as probe_dropped;
create table :dup_p_seq ();
update pgque.queue set queue_ticker_max_count = queue_ticker_max_count where queue_name = 'dup_p';
select pgque_test.error_of('select count(*) from pgque._ticks_seq_moved()') as probe_table;
select regexp_replace(pgque_test.error_of($$select pgque.send('dup_p', 'default', 'a table')$$),
                      'event_[0-9]+', 'event_N', 'g') as send_table;
select pgque.send('dup_b', 'default', 'other queue') > 0 as other_queue_sends;
rollback;
select pgque.send('dup_p', 'default', 'back') > 0 as renamed_back_sends;
-- the sequence reader is internal: no pgque role runs it
create role seq_admin login in role pgque_admin;
grant usage on schema pgque_test to seq_admin;
set role seq_admin;
select pgque_test.error_of($$select pgque._seq_last_value('pgque.queue_queue_id_seq')$$) as admin_seq_reader;
reset role;
revoke usage on schema pgque_test from seq_admin;
drop role seq_admin;

-- 5: pgque.queue's own columns retyped by their owner.  The producers'
-- queue cache took the values as the table's types (queue_cur_table as an
-- int4, queue_senders as an array of regrole): a text there was read as a
-- number or an array header.  Refused with 42804 before any value is read.
begin;
alter table pgque.queue alter column queue_cur_table drop default;
alter table pgque.queue alter column queue_cur_table type text using queue_cur_table::text;
select pgque_test.error_of($$select pgque.send('dup_b', 'default', 'retyped cur_table')$$) as cur_table_text;
rollback;
begin;
alter extension pgque_bgw drop view pgque.queue_rights;
drop view pgque.queue_rights;
alter table pgque.queue alter column queue_senders drop default;
alter table pgque.queue alter column queue_senders type text using queue_senders::text;
select pgque_test.error_of($$select pgque.send('dup_b', 'default', 'retyped senders')$$) as senders_text;
rollback;
begin;
alter table pgque.queue alter column queue_disable_insert drop default;
alter table pgque.queue alter column queue_disable_insert type text using queue_disable_insert::text;
select pgque_test.error_of($$select pgque.send('dup_b', 'default', 'retyped disable_insert')$$) as disable_insert_text;
rollback;
-- back as they were: the queue sends
select pgque.send('dup_b', 'default', 'after') > 0 as sends_again;
