-- The PgQ primitives keep their meaning: next_batch / get_batch_events /
-- finish_batch, next_batch_custom, event_retry, batch_retry,
-- register_consumer_at, force_tick, the external ticker, the info functions.
select pgque.create_queue('p');
select pgque.register_consumer('p', 'legacy');
select pgque.insert_event('p', 'ev', 'one'), pgque.insert_event('p', 'ev', 'two', 'e1', 'e2', 'e3', 'e4');
select pgque.ticker('p') is not null as ticked;

-- next_batch opens a batch, and returns the same id until finish_batch
select pgque.next_batch('p', 'legacy') as b \gset
select pgque.next_batch('p', 'legacy') = :b as same_batch;
select batch_id = :b as same, cur_tick_id > prev_tick_id as moves_forward,
       cur_tick_event_seq - prev_tick_event_seq as seq_delta
  from pgque.next_batch_info('p', 'legacy');
select ev_id, ev_txid > 0 as txid_is_bigint, ev_retry, ev_type, ev_data, ev_extra1, ev_extra4
  from pgque.get_batch_events(:b);
select queue_name, consumer_name, tick_id > prev_tick_id as window, seq_end - seq_start as events
  from pgque.get_batch_info(:b);
-- event_retry (both forms) and batch_retry
select pgque.event_retry(:b, 1::bigint, 0) as retry_seconds,
       pgque.event_retry(:b, 1::bigint, now()) as already_scheduled,
       pgque.batch_retry(:b, 3600) as batch_rest;
select pgque_test.error_of(format('select pgque.event_retry(%s, 99::bigint, 0)', :b)) as not_in_batch;
select pgque.finish_batch(:b) as finished;
select pgque.finish_batch(:b) as finished_again;
select pgque.next_batch('p', 'legacy') is null as nothing_new;
select pgque.maint_retry_events() as moved;
select pgque.ticker('p') is not null as ticked;
select pgque.next_batch('p', 'legacy') as b2 \gset
select ev_id, ev_retry, ev_data from pgque.get_batch_events(:b2);
select pgque.finish_batch(:b2);

-- next_batch_custom: min_count holds the batch until enough events arrive
select pgque.insert_event('p', 'ev', 'three');
select pgque.ticker('p') is not null as ticked;
select batch_id is null as held_back from pgque.next_batch_custom('p', 'legacy', null, 2, null);
select pgque.insert_event('p', 'ev', 'four');
select pgque.ticker('p') is not null as ticked;
select batch_id as b3 from pgque.next_batch_custom('p', 'legacy', null, 2, null) \gset
select ev_data from pgque.get_batch_events(:b3);
select pgque.finish_batch(:b3);
-- min_lag: a batch younger than min_lag is not handed out
select pgque.insert_event('p', 'ev', 'five');
select pgque.ticker('p') is not null as ticked;
select batch_id is null as too_young from pgque.next_batch_custom('p', 'legacy', '1 hour', null, null);

-- register_consumer_at: a cursor placed at a given tick replays from there
select pgque.register_consumer_at('p', 'replayer', (select min(tick_id) from pgque.tick t
                                                      join pgque.queue q on q.queue_id = t.tick_queue
                                                     where q.queue_name = 'p')) as placed;
select string_agg(payload, ',' order by msg_id) as replayed from pgque_test.drain('p', 'replayer');

-- force_tick does not tick; it makes the next ticker() call tick
select pgque.ticker('p') is null as not_due;
select pgque.force_tick('p') = (select max(tick_id) from pgque.tick t join pgque.queue q on q.queue_id = t.tick_queue
                                 where q.queue_name = 'p') as returns_last_tick;
select pgque.ticker('p') is not null as due_now;

-- ticker(): all queues, paused ones skipped
select pgque.create_queue('p2');
select pgque.send('p2', 'x');
select pgque.set_queue_config('p', 'ticker_paused', 'true');
select pgque.ticker() as queues_ticked;
select pgque.set_queue_config('p', 'ticker_paused', 'false');

-- external ticker: strictly increasing tick ids, non-decreasing event_seq
select pgque.set_queue_config('p2', 'external_ticker', 'true');
select pgque_test.error_of($$select pgque.ticker('p2')$$) as internal_tick_refused;
select pgque.ticker('p2', 1000, now(), 5) as pushed;
select pgque_test.error_of($$select pgque.ticker('p2', 1000, now(), 6)$$) as same_id;
select pgque_test.error_of($$select pgque.ticker('p2', 1001, now(), 4)$$) as seq_backwards;
select pgque.ticker('p2', 1001, now(), 5) as pushed_again;

-- get_queue_info / get_consumer_info
select queue_name, queue_ntables, queue_cur_table, ev_new >= 0 as has_ev_new, last_tick_id is not null as has_tick
  from pgque.get_queue_info() order by 1;
select consumer_name, current_batch is null as idle from pgque.get_consumer_info('p') order by 1;

-- unregister drops the consumer row once it has no subscription left
select pgque.unregister_consumer('p', 'legacy'), pgque.unregister_consumer('p', 'replayer');
select count(*) as consumers_left from pgque.consumer where co_name in ('legacy', 'replayer');
select pgque.drop_queue('p'), pgque.drop_queue('p2');
