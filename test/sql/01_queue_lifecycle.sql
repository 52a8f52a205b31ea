-- Queue lifecycle: create, configure, drop; every rejection with its SQLSTATE.

-- create_queue returns 1 when it creates, 0 when the queue exists
select pgque.create_queue('orders') as created, pgque.create_queue('orders') as existed;

-- a queue is a parent event table with three children, two sequences and a first tick
select c.relname, c.relkind
  from pg_class c join pg_namespace n on n.oid = c.relnamespace
 where n.nspname = 'pgque'
   and c.relname ~ ('^event_' || (select queue_id from pgque.queue where queue_name = 'orders') || '(_|$)')
   and c.relkind in ('r', 'S')
 order by 1;
select count(*) as first_ticks from pgque.tick t join pgque.queue q on q.queue_id = t.tick_queue
 where q.queue_name = 'orders';

-- defaults of a new queue
select queue_ntables, queue_cur_table, queue_rotation_period, queue_ticker_max_count,
       queue_ticker_max_lag, queue_ticker_idle_period, queue_max_retries, queue_ticker_paused,
       queue_external_ticker, queue_disable_insert
  from pgque.queue where queue_name = 'orders';

-- names: 57 bytes fit (the NOTIFY channel pgque_<name> must fit 63), 58 do not
select pgque.create_queue(repeat('a', 57)) as created_57;
select pgque_test.error_of($$select pgque.create_queue(repeat('a', 58))$$) as name_58;
-- the limit counts bytes: 29 two-byte characters are 58 bytes
select pgque_test.error_of($$select pgque.create_queue(repeat('é', 29))$$) as multibyte_58;
select pgque_test.error_of($$select pgque.create_queue(null)$$) as null_name;
select pgque_test.error_of($$select pgque.create_queue('')$$) as empty_name;
-- names with quotes and spaces are data, not SQL
select pgque.create_queue('we"ird name; drop table x') as weird_created;
select pgque.send('we"ird name; drop table x', 'ok') is not null as weird_send;

-- set_queue_config: short names and queue_-prefixed names
select pgque.set_queue_config('orders', 'ticker_max_count', '10'),
       pgque.set_queue_config('orders', 'queue_ticker_max_lag', '1s'),
       pgque.set_queue_config('orders', 'ticker_idle_period', '5min'),
       pgque.set_queue_config('orders', 'rotation_period', '1 hour'),
       pgque.set_queue_config('orders', 'max_retries', '0'),
       pgque.set_queue_config('orders', 'ticker_paused', 'true');
select queue_ticker_max_count, queue_ticker_max_lag, queue_ticker_idle_period,
       queue_rotation_period, queue_max_retries, queue_ticker_paused
  from pgque.queue where queue_name = 'orders';
-- a paused queue refuses ticker(queue) and is skipped by ticker()
select pgque_test.error_of($$select pgque.ticker('orders')$$) as paused_tick;
-- NULL restores the default
select pgque.set_queue_config('orders', p, null)
  from unnest(array['ticker_max_count', 'ticker_max_lag', 'ticker_idle_period', 'rotation_period',
                    'max_retries', 'ticker_paused']) p;
select queue_ticker_max_count, queue_ticker_max_lag, queue_ticker_idle_period,
       queue_rotation_period, queue_max_retries, queue_ticker_paused
  from pgque.queue where queue_name = 'orders';

-- rejected values
select v.what, pgque_test.error_of(format('select pgque.set_queue_config(%L, %L, %L)', v.q, v.p, v.val)) as error
  from (values ('count zero',       'orders', 'ticker_max_count', '0'),
               ('count negative',   'orders', 'ticker_max_count', '-5'),
               ('count not a number','orders', 'ticker_max_count', 'many'),
               ('lag zero',         'orders', 'ticker_max_lag', '0'),
               ('lag negative',     'orders', 'ticker_max_lag', '-1 s'),
               ('lag not interval', 'orders', 'ticker_max_lag', 'soon'),
               ('idle zero',        'orders', 'ticker_idle_period', '0 s'),
               ('rotation zero',    'orders', 'rotation_period', '0'),
               ('retries negative', 'orders', 'max_retries', '-1'),
               ('paused not bool',  'orders', 'ticker_paused', 'maybe'),
               ('unknown param',    'orders', 'color', 'blue'),
               ('unknown queue',    'nope', 'ticker_max_count', '1')) v(what, q, p, val);
select pgque_test.error_of($$select pgque.set_queue_config('orders', null, '1')$$) as null_param;
select pgque_test.error_of($$select pgque.set_queue_config(null, 'max_retries', '1')$$) as null_queue;

-- drop_queue refuses while consumers are subscribed, unless forced
select pgque.subscribe('orders', 'billing');
select pgque_test.error_of($$select pgque.drop_queue('orders')$$) as drop_with_consumer;
select pgque.drop_queue('orders', true) as forced;
select count(*) as queue_rows from pgque.queue where queue_name = 'orders';
select count(*) as subscriptions_left from pgque.subscription;
select count(*) as billing_consumer_rows from pgque.consumer where co_name = 'billing';
-- and works without consumers
select pgque.drop_queue(repeat('a', 57)) as dropped;
select pgque_test.error_of($$select pgque.drop_queue('orders')$$) as drop_unknown;
select pgque_test.error_of($$select pgque.drop_queue(null)$$) as drop_null;
select pgque_test.error_of($$select pgque.drop_queue('we"ird name; drop table x', null)$$) as drop_null_force;
select pgque.drop_queue('we"ird name; drop table x');
-- nothing of the dropped queues is left behind
select count(*) as event_tables_left
  from pg_class c join pg_namespace n on n.oid = c.relnamespace
 where n.nspname = 'pgque' and c.relname ~ '^event_[0-9]';
select count(*) as ticks_left from pgque.tick;
