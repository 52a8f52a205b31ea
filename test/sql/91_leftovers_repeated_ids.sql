-- Leftovers (ADR 0113): every row of an id an admin repeated
-- (insert_event_raw, ADR 0101, 0105).
--
-- 1: nack of an id that names two different events of the batch is refused
-- (21000): the id alone cannot say which one failed, and a consumer's
-- retries hold one event per id (it retried one of them, whichever the read
-- returned first).  Rows of one event (an identical repeat) are one nack.
select pgque.create_queue('rid_plain');
select pgque.subscribe('rid_plain', 'c');
select pgque.send('rid_plain', 'default', 'one') as id1 \gset
select pgque.insert_event_raw('rid_plain', :id1, now(), null, null, 'default', 'other', null, null, null, null) = :id1 as repeated;
select pgque.send('rid_plain', 'default', 'same') as id2 \gset
select pgque.insert_event_raw('rid_plain', :id2, now(), null, null, 'default', 'same', null, null, null, null) = :id2 as repeated_same;
select pgque.ticker('rid_plain') is not null as ticked;
select msg_id - :id1 as rel, payload from pgque.receive('rid_plain', 'c', 10) order by msg_id, payload;
select batch_id as b from pgque.receive('rid_plain', 'c', 10) limit 1 \gset
select pgque_test.error_of(format($$select pgque.nack(%s, row(%s, %s, 'default', 'one', 0, now(), null, null, null, null)::pgque.message, '0s')$$,
                                  :b, :id1, :b)) as err \gset
select left(:'err', 5) as nack_two_events, :'err' like '%names more than one event of batch%' as says_why;
select pgque.nack(:b, row(:id2, :b, 'default', 'same', 0, now(), null, null, null, null)::pgque.message, '0s') as nack_one_event;
select ev_id - :id1 as rel, ev_data from pgque.retry_queue
 where ev_queue = (select queue_id from pgque.queue where queue_name = 'rid_plain') order by ev_id;
select pgque.ack(:b) as acked;

-- 2: a paused key's release appends every withheld event again, both
-- events of a repeated id (it kept one row per id: 'two-other' was lost);
-- the head's retry copy and its original stay one event.
select pgque.create_queue('rid_pause');
select pgque.subscribe_slot('rid_pause', 'pc', 0, 1, 'pause');
select pgque.claim_slot('rid_pause', 'pc', 0, 'w') is not null as claimed;
select pgque.send('rid_pause', 'default', 'head', 'k') as head \gset
select pgque.send('rid_pause', 'default', 'two', 'k') as two \gset
select pgque.insert_event_raw('rid_pause', :two, now(), null, null, 'default', 'two-other', 'k', null, null, null) = :two as repeated;
select pgque.ticker('rid_pause') is not null as ticked;
select msg_id - :head as rel, payload from pgque.receive_partitioned('rid_pause', 'pc', 0, 1, 'w', 10) order by msg_id, payload;
select pgque.nack_partitioned('rid_pause', 'pc', 0, 1, 'w', m, '0 seconds', 'fail')
  from pgque.receive_partitioned('rid_pause', 'pc', 0, 1, 'w', 10) m where m.payload = 'head';
select pgque.ack_partitioned('rid_pause', 'pc', 0, 1, 'w') as acked;
select pgque.maint_retry_events() >= 1 as retried;
create temp table rid_got (seq serial, q text, rel bigint, payload text);
create function pg_temp.take(i_q text, i_base bigint, i_c text, i_slot int4, i_n int4, i_w text)
returns int4 language plpgsql as $$
declare
    k int4;
begin
    perform pgque.ticker(i_q);
    insert into rid_got (q, rel, payload)
    select i_q, m.msg_id - i_base, m.payload from pgque.receive_partitioned(i_q, i_c, i_slot, i_n, i_w, 100) m
     order by m.msg_id, m.payload;
    get diagnostics k = row_count;
    perform pgque.ack_partitioned(i_q, i_c, i_slot, i_n, i_w);
    return k;
end $$;
select pg_temp.take('rid_pause', :head, 'pc', 0, 1, 'w') as head_retry;
select pg_temp.take('rid_pause', :head, 'pc', 0, 1, 'w') as released;
select pg_temp.take('rid_pause', :head, 'pc', 0, 1, 'w') as after;
select rel, payload from rid_got where q = 'rid_pause' order by seq;
select count(*) as blocked from pgque.blocked_keys where queue_name = 'rid_pause';

-- 3: a resize moves a blocked key's withheld events to the key's new slot
-- (ADR 0038), both events of a repeated id (it kept one row per id).
-- ADR 0038's path (b): B1 fails on the old slot during the drain.
select pgque.create_queue('rid_resize');
select pgque.subscribe_slot('rid_resize', 'c', 0, 1, 'pause');
select pgque.send('rid_resize', 'e', 'B1', 'B') as b1 \gset
select pgque.send('rid_resize', 'e', 'B2', 'B') as b2 \gset
select pgque.insert_event_raw('rid_resize', :b2, now(), null, null, 'e', 'B2x', 'B', null, null, null) = :b2 as repeated;
select pgque.ticker('rid_resize') is not null as ticked;
select pgque.send('rid_resize', 'e', 'B3', 'B') > 0 as sent;
select pgque.resize_partitioned('rid_resize', 'c', 2) is not null as resized;
select pgque.send('rid_resize', 'e', 'B4', 'B') > 0 as sent;
select pgque.ticker('rid_resize') is not null as ticked;
select pgque.claim_slot('rid_resize', 'c', 0, 'w0/1') is not null as claimed;
select pgque.nack_partitioned('rid_resize', 'c', 0, 1, 'w0/1', m, '0 seconds', 'fail')
  from pgque.receive_partitioned('rid_resize', 'c', 0, 1, 'w0/1', 100) m where m.payload = 'B1';
select pgque.ack_partitioned('rid_resize', 'c', 0, 1, 'w0/1') as acked;
select pgque.maint_retry_events() >= 1 as retried;
select pgque.ticker('rid_resize') is not null as ticked;
-- the switch (a watchdog pass) moves the block and appends B2, B2x and B3
-- again for B's new slot
set client_min_messages = error;
select count(*) >= 0 as passed from pgque._watchdog_pass('1 hour', '1 hour', '1 hour', '1 hour', '1 hour');
reset client_min_messages;
select pgque.partition_n('rid_resize', 'c') as n;
select pgque._slot_of('B', 2) as bslot \gset
select pgque.claim_slot('rid_resize', 'c', :bslot, 'wb') is not null as claimed;
select pg_temp.take('rid_resize', :b1, 'c', :bslot, 2, 'wb') as taken_1;
select pg_temp.take('rid_resize', :b1, 'c', :bslot, 2, 'wb') as taken_2;
select pg_temp.take('rid_resize', :b1, 'c', :bslot, 2, 'wb') as taken_3;
select string_agg(payload, ' ' order by seq) as new_slot_got from rid_got where q = 'rid_resize';
select count(*) as blocked from pgque.blocked_keys where queue_name = 'rid_resize';
