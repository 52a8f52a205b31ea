-- Cooperative consumers (issue #14, ADR 0017): members of one group share
-- its cursor window by window, never get the same window, the group cursor
-- moves only over a prefix of finished windows, takeovers fence the old
-- member, and mixing with plain or partitioned consumption is refused.
select pgque.create_queue('cq');

-- registration: group and member, PgQue's return values
select pgque.register_subconsumer('cq', 'grp', 'a') as new_group;
select pgque.subscribe_subconsumer('cq', 'grp', 'b') as new_member;
select pgque.register_subconsumer('cq', 'grp', 'a') as again;
select sub_role from pgque.subscription s join pgque.consumer c on c.co_id = s.sub_consumer where c.co_name = 'grp';

-- three ticks, three windows, cut by the ticker
select count(*) from (select pgque.send('cq', 'w1-' || i) from generate_series(1, 3) i) s;
select pgque.ticker('cq') is not null as ticked;
select count(*) from (select pgque.send('cq', 'w2-' || i) from generate_series(1, 3) i) s;
select pgque.ticker('cq') is not null as ticked;
select count(*) from (select pgque.send('cq', 'w3-' || i) from generate_series(1, 3) i) s;
select pgque.ticker('cq') is not null as ticked;
select count(*) as windows, count(cw_member) as held from pgque.coop_window;

-- members take different windows (max_return 3: one window each)
create temp table got as select 'a' as m, * from pgque.receive_coop('cq', 'grp', 'a', 3);
insert into got select 'b', * from pgque.receive_coop('cq', 'grp', 'b', 3);
select m, payload from got order by msg_id;
select count(distinct batch_id) as batches from got;
-- a second receive re-returns the member's open batch
select count(*) as same from pgque.receive_coop('cq', 'grp', 'a', 3) r
  join got g on g.msg_id = r.msg_id and g.batch_id = r.batch_id and g.m = 'a';

-- plain receive / next_batch refuse the group, with PgQue's message
select pgque_test.error_of($$select * from pgque.receive('cq', 'grp')$$);
select pgque_test.error_of($$select pgque.next_batch('cq', 'grp')$$);
select pgque_test.error_of($$select pgque.register_consumer_at('cq', 'grp', 1)$$);

-- the group's cursor stays before the oldest unfinished window: b finishes
-- window 2 first, the cursor does not move; a finishes window 1, it jumps
-- over both
create temp table cur0 as select sub_last_tick from pgque.subscription where sub_role = 'coop_main';
select pgque.ack((select distinct batch_id from got where m = 'b'));
select s.sub_last_tick = c.sub_last_tick as cursor_held
  from pgque.subscription s, cur0 c where s.sub_role = 'coop_main';
select pgque.ack((select distinct batch_id from got where m = 'a'));
select s.sub_last_tick - c.sub_last_tick as cursor_moved
  from pgque.subscription s, cur0 c where s.sub_role = 'coop_main';
select pgque.ack((select distinct batch_id from got where m = 'a')) as ack_again;

-- get_consumer_info: the group and its members
select consumer_name, current_batch is not null as holds from pgque.get_consumer_info('cq') order by 1;
select consumer_name from pgque.get_consumer_info('cq', 'grp.a');

-- parts: a window larger than max_return is handed out in parts, none lost
select count(*) from pgque.receive_coop('cq', 'grp', 'a', 2);
select pgque.ack((select cw_batch from pgque.coop_window where cw_member = 'a'));
select payload from pgque.receive_coop('cq', 'grp', 'a', 2);
select pgque.ack((select cw_batch from pgque.coop_window where cw_member = 'a'));
select count(*) as windows_left from pgque.coop_window;

-- empty windows are finished without a batch
select pgque.force_next_tick('cq') is not null and pgque.ticker('cq') is not null as ticked;
select count(*) as empty_windows from pgque.coop_window;
select count(*) from pgque.receive_coop('cq', 'grp', 'a');
select count(*) as windows_left from pgque.coop_window;

-- takeover after dead_interval: a new batch id; the old one is fenced
select count(*) from (select pgque.send('cq', 'tk-' || i) from generate_series(1, 2) i) s;
select pgque.ticker('cq') is not null as ticked;
create temp table old as select distinct batch_id from pgque.receive_coop('cq', 'grp', 'a');
select count(*) from pgque.receive_coop('cq', 'grp', 'b', 100, '1 hour') as not_dead_yet;
update pgque.coop_window set cw_claimed_at = now() - interval '2 hours' where cw_member = 'a';
select pgque._coop_forget(null, null) >= 0 as heartbeats_forgotten;
-- the watchdog sees a silent member holding a batch
select kind, consumer, details ? 'seconds_silent' as has_silence
  from pgque._alert_conditions('1 hour', '1 minute', '1 day', '1 hour', '1 hour')
 where kind = 'coop_member_silent';
create temp table new as select distinct batch_id from pgque.receive_coop('cq', 'grp', 'b', 100, '1 hour');
select n.batch_id > o.batch_id as newer_batch from old o, new n;
-- (batch ids depend on the tests before: shown as "batch N")
select regexp_replace(pgque_test.error_of(format('select pgque.ack(%s)', batch_id)), 'batch [0-9]+', 'batch N') as error_of from old;
select regexp_replace(pgque_test.error_of(format($$select pgque.nack(%s, row(1, %s, 't', 'p', 0, now(), null, null, null, null)::pgque.message)$$,
                                  batch_id, batch_id)), 'batch [0-9]+', 'batch N') as error_of from old;
select pgque.ack(batch_id) from new;

-- nack of a member's event: retry owned by the group
select count(*) from (select pgque.send('cq', 'nk') ) s;
select pgque.ticker('cq') is not null as ticked;
select pgque.nack(m.batch_id, m, '0 s') from pgque.receive_coop('cq', 'grp', 'a') m;
select pgque.ack(batch_id) from (select distinct batch_id from pgque.receive_coop('cq', 'grp', 'a')) b;
select r.ev_owner = s.sub_id as group_owns_retry from pgque.retry_queue r, pgque.subscription s
 where s.sub_role = 'coop_main';
select pgque.maint_retry_events();
select pgque.ticker('cq') is not null as ticked;
select payload, retry_count from pgque.receive_coop('cq', 'grp', 'b');
select pgque.ack(batch_id) from (select distinct batch_id from pgque.receive_coop('cq', 'grp', 'b')) b;

-- unregister: refused with an open batch, events to retry with batch_handling 1
select count(*) from (select pgque.send('cq', 'un-' || i) from generate_series(1, 2) i) s;
select pgque.ticker('cq') is not null as ticked;
select count(*) from pgque.receive_coop('cq', 'grp', 'b');
select pgque_test.error_of($$select pgque.unregister_subconsumer('cq', 'grp', 'b')$$);
select pgque_test.error_of($$select pgque.unregister_consumer('cq', 'grp')$$);
select pgque.unregister_subconsumer('cq', 'grp', 'b', 1);
select count(*) as retried from pgque.retry_queue where ev_data like 'un-%';
select pgque.unsubscribe_subconsumer('cq', 'grp', 'b') as gone_already;
select pgque.touch_subconsumer('cq', 'grp', 'a') as touched, pgque.touch_subconsumer('cq', 'grp', 'zz') as unknown;

-- the last member leaving makes the group a normal consumer again
select pgque.unregister_subconsumer('cq', 'grp', 'a');
select sub_role, sub_coop_hw from pgque.subscription s join pgque.consumer c on c.co_id = s.sub_consumer where c.co_name = 'grp';

-- conversion of a normal consumer needs convert_normal
select pgque_test.error_of($$select pgque.register_subconsumer('cq', 'grp', 'a')$$);
select pgque.register_subconsumer('cq', 'grp', 'a', true);

-- no mixing with partition slots
select pgque.subscribe_slot('cq', 'part', 0, 1);
select pgque_test.error_of($$select pgque.register_subconsumer('cq', 'part', 'a')$$);
select pgque_test.error_of($$select pgque.subscribe_slot('cq', 'grp', 0, 1)$$);
select pgque_test.error_of($$select pgque.register_subconsumer('cq', 'part#0/1', 'a')$$);

-- a group belongs to the role that subscribed it; one an admin subscribed
-- is shared with pgque_reader (ADR 0058): made private, another reader is
-- refused
select pgque.revoke_consumer('cq', 'grp', 'pgque_reader') as made_private;
create role coop_other in role pgque_reader;
grant usage on schema pgque_test to coop_other;
set role coop_other;
select pgque_test.error_of($$select * from pgque.receive_coop('cq', 'grp', 'intruder')$$);
select pgque_test.error_of($$select pgque.register_subconsumer('cq', 'grp', 'intruder')$$);
select pgque_test.error_of($$select pgque.unregister_subconsumer('cq', 'grp', 'a')$$);
reset role;
select count(*) as intruders from pgque.coop_member where cm_name = 'intruder';
revoke usage on schema pgque_test from coop_other;
drop role coop_other;

-- cold receive_coop registers; unknown names are refused clearly
select count(*) from pgque.receive_coop('cq', 'grp2', 'x');
select pgque.next_batch('cq', 'nogroup', 'x') is null as registered_cold;
select pgque_test.error_of($$select * from pgque.receive_coop('nope', 'grp', 'x')$$);
select pgque_test.error_of($$select * from pgque.receive_coop('cq', 'grp', 'x', 10, '0 s')$$);

-- next_batch primitives: the PgQ loop over a member batch
select count(*) from (select pgque.send('cq', 'nb') ) s;
select pgque.ticker('cq') is not null as ticked;
create temp table nb as select * from pgque.next_batch_custom('cq', 'grp', 'a', null, null, null);
select batch_id is not null as opened, next_tick_id > prev_tick_id as window from nb;
select ev_data from pgque.get_batch_events((select batch_id from nb));
select queue_name, consumer_name from pgque.get_batch_info((select batch_id from nb));
select pgque.next_batch('cq', 'grp', 'a') = (select batch_id from nb) as same_batch;
select pgque.finish_batch((select batch_id from nb));

select pgque.drop_queue('cq', true);
select count(*) as coop_rows_left from pgque.coop_window, pgque.coop_member;
