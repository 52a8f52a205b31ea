-- 10,000 events in one transaction are delivered as one batch; a receive
-- with a smaller max_return hands the same window out in parts, losing none.
select pgque.create_queue('bulk');
select pgque.subscribe('bulk', 'big'), pgque.subscribe('bulk', 'small');

do $$
begin
    for i in 1 .. 10000 loop
        perform pgque.send('bulk', 'n', i::text);
    end loop;
end $$;
select pgque.ticker('bulk') is not null as ticked;

-- one receive, one batch, all 10,000 in ev_id order
create temp table big as select * from pgque.receive('bulk', 'big', 20000);
select count(*) as events, count(distinct batch_id) as batches,
       bool_and(payload::int = msg_id) as in_order_and_intact from big;
select pgque.ack((select distinct batch_id from big));

-- max_return 300: 34 parts of the same tick window, every event once
select count(*) as events, count(distinct msg_id) as distinct_events,
       count(distinct batch_no) as parts, min(msg_id) as first, max(msg_id) as last
  from pgque_test.drain('bulk', 'small', 300);

-- the same through send_batch, in one call
select cardinality(pgque.send_batch('bulk', 'n', array(select i::text from generate_series(1, 10000) i))) as sent;
select count(*) as events, count(distinct batch_no) as batches from pgque_test.drain('bulk', 'big', 10000);
select pgque.drop_queue('bulk', true);
