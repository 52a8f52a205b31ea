-- A plain consumer's part opened in one statement (ADR 0121):
-- _plain_receive_open, for receive() and receive_wait(), against the SQL
-- it replaces (the argument checks, then _next_batch, as _receive_open
-- ran them; next_batch() for another role).  Each outcome side by side:
-- the new open's (through receive(): its batch, or none, and its events,
-- or the error) | the old SQL's (a batch, none, or the error), both in a
-- subtransaction rolled back, so the one does not see what the other
-- opened.  Then what the open returns besides (the same batch and events
-- again, the tries after empty windows, merge_windows), the rights (none,
-- a user of the consumer), the refusals (a slot consumer, a cooperative
-- main consumer), a paused ticker and an unlogged queue with and without
-- its events.
create function pg_temp.cmp(q text, c text, n int4) returns text language plpgsql as $$
declare
    a  text;
    b  text;
begin
    begin
        select case when max(batch_id) is null then 'none' else 'batch' end || '/' || count(*) into a
          from pgque.receive(q, c, n);
        raise exception 'undo' using errcode = 'P0005';
    exception when others then
        if sqlstate <> 'P0005' then
            a := sqlstate || ': ' || sqlerrm;
        end if;
    end;
    begin
        perform pgque._check_max_return(n);
        perform pgque._check_name('consumer', c, 64);
        perform pgque._refuse_slot_consumer(c, 'receive');
        select case when x.batch_id is null then 'none' else 'batch' end into b
          from pgque._next_batch(q, c, null, null, null, n) x;
        raise exception 'undo' using errcode = 'P0005';
    exception when others then
        if sqlstate <> 'P0005' then
            b := sqlstate || ': ' || sqlerrm;
        end if;
    end;
    return a || ' | ' || b;
end $$;
-- the same for a role of the API: receive() against next_batch()
create function pg_temp.cmp_api(q text, c text) returns text language plpgsql as $$
declare
    a  text;
    b  text;
begin
    begin
        select case when max(batch_id) is null then 'none' else 'batch' end || '/' || count(*) into a
          from pgque.receive(q, c, 100);
        raise exception 'undo' using errcode = 'P0005';
    exception when others then
        if sqlstate <> 'P0005' then
            a := sqlstate || ': ' || sqlerrm;
        end if;
    end;
    begin
        select case when pgque.next_batch(q, c) is null then 'none' else 'batch' end into b;
        raise exception 'undo' using errcode = 'P0005';
    exception when others then
        if sqlstate <> 'P0005' then
            b := sqlstate || ': ' || sqlerrm;
        end if;
    end;
    return a || ' | ' || b;
end $$;
-- receive_wait() (timeout 0: one look) said the same way
create function pg_temp.wait(q text, c text, n int4) returns text language plpgsql as $$
declare
    a  text;
begin
    select case when max(batch_id) is null then 'none' else 'batch' end || '/' || count(*) into a
      from pgque.receive_wait(q, c, n, '0');
    return a;
exception when others then
    return sqlstate || ': ' || sqlerrm;
end $$;

select pgque.create_queue('po');
select pgque.subscribe('po', 'c');
select pgque.create_queue('po_other');

-- no tick yet: nothing, both ways
select pg_temp.cmp('po', 'c', 10) as no_tick;
select pgque.send('po', 'e' || i) > 0 as sent from generate_series(1, 3) i;
select pg_temp.cmp('po', 'c', 10) as sent_not_ticked;
select pgque.ticker('po') is not null as ticked;

-- the first open
select pg_temp.cmp('po', 'c', 10) as first_open;
select pg_temp.wait('po', 'c', 10) as first_open_wait;

-- bad input: the same SQLSTATEs and words, both ways and by receive_wait
select pg_temp.cmp('po', 'c', null) as max_return_null;
select pg_temp.cmp('po', 'c', 0) as max_return_zero;
select pg_temp.cmp('po', 'c', -5) as max_return_negative;
select pg_temp.cmp('po', 'c', 2147483647) as max_return_huge;
select pg_temp.cmp(null, 'c', 10) as queue_null;
select pg_temp.cmp('po', null, 10) as consumer_null;
select pg_temp.cmp('', 'c', 10) as queue_empty;
select pg_temp.cmp('po', '', 10) as consumer_empty;
select pg_temp.cmp(repeat('q', 58), 'c', 10) as queue_too_long;
select pg_temp.cmp('po', repeat('c', 65), 10) as consumer_too_long;
select pg_temp.cmp('nope', 'c', 10) as unknown_queue;
select pg_temp.cmp('po', 'nobody', 10) as unknown_consumer;
select pg_temp.cmp('po_other', 'c', 10) as not_subscribed;
select pg_temp.cmp('po', 'c#0/2', 10) as slot_consumer;
select pg_temp.wait('po', null, 0) as wait_max_return_zero_first;
select pg_temp.wait('po', null, 10) as wait_consumer_null;
select pg_temp.wait('nope', 'c', 10) as wait_unknown_queue;
select pg_temp.wait('po', 'c#0/2', 10) as wait_slot_consumer;

-- the open batch again: the same id and the same events, in parts
begin;
create temp table p1 as select * from pgque.receive('po', 'c', 2);
create temp table p2 as select * from pgque.receive('po', 'c', 2);
create temp table p3 as select * from pgque.receive_wait('po', 'c', 2, '0');
select (select count(*) from p1) as part, (select count(distinct batch_id) from (table p1 union all table p2 union all table p3) x) as batch_ids,
       (select array_agg(msg_id order by msg_id) from p1) = (select array_agg(msg_id order by msg_id) from p2) as same_events,
       (select array_agg(msg_id order by msg_id) from p1) = (select array_agg(msg_id order by msg_id) from p3) as same_by_wait,
       (select max(batch_id) from p1) = (select x.batch_id from pgque._next_batch('po', 'c', null, null, null, 2) x) as old_sql_same_batch;
-- the rest of the window after the ack of the part, then nothing
select pgque.ack(batch_id) from p1 limit 1;
select payload from pgque.receive('po', 'c', 2) order by msg_id;
select pgque.ack(batch_id) from pgque.receive('po', 'c', 2) limit 1;
select pg_temp.cmp('po', 'c', 10) as all_acked;
commit;

-- empty windows on the way are finished and the next one tried, within
-- one call (the tries after the first by the subscription it locked)
select pgque.force_tick('po') is not null as forced;
select pgque.ticker('po') is not null as empty_window;
select pgque.force_tick('po') is not null as forced;
select pgque.ticker('po') is not null as empty_window;
select pgque.send('po', 'after-empty') > 0 as sent;
select pgque.ticker('po') is not null as ticked;
select payload from pgque.receive('po', 'c', 10);
select pgque.ack(sub_batch) from pgque.subscription s join pgque.consumer c on c.co_id = s.sub_consumer
 where c.co_name = 'c' and s.sub_queue = (select queue_id from pgque.queue where queue_name = 'po');
-- only empty windows: all finished, nothing returned, the cursor at the last tick
select pgque.force_tick('po') is not null as forced;
select pgque.ticker('po') is not null as empty_window;
select pg_temp.wait('po', 'c', 10) as only_empty_windows;
select (select sub_last_tick from pgque.subscription s join pgque.consumer c on c.co_id = s.sub_consumer
         where c.co_name = 'c' and s.sub_queue = (select queue_id from pgque.queue where queue_name = 'po'))
     = (select max(tick_id) from pgque.tick where tick_queue = (select queue_id from pgque.queue where queue_name = 'po'))
       as cursor_at_last_tick;

-- merge_windows: a batch covers the waiting windows up to max_return
select pgque.subscribe('po', 'm');
select pgque.set_consumer_config('po', 'm', 'merge_windows', 'true');
select pgque.send('po', 'w1') > 0 as sent;
select pgque.ticker('po') is not null as ticked;
select pgque.send('po', 'w2') > 0 as sent;
select pgque.ticker('po') is not null as ticked;
select array_agg(payload order by msg_id) as merged from pgque.receive('po', 'm', 100);
select pgque.ack(batch_id) from pgque.receive('po', 'm', 100) limit 1;
select pgque.ack(batch_id) from pgque.receive('po', 'c', 100) limit 1;

-- a paused ticker: no tick, nothing to open
select pgque.set_queue_config('po', 'ticker_paused', 'true');
select pgque.send('po', 'paused') > 0 as sent;
select pg_temp.cmp('po', 'c', 10) as paused_ticker;
select pg_temp.wait('po', 'c', 10) as paused_ticker_wait;
select pgque.set_queue_config('po', 'ticker_paused', 'false');
select pgque.ticker('po') is not null as ticked;
select pg_temp.cmp('po', 'c', 10) as resumed;
select pgque.ack(batch_id) from pgque.receive('po', 'c', 100) limit 1;
select pgque.ack(batch_id) from pgque.receive('po', 'm', 100) limit 1;

-- the rights: none, the queue's right without the consumer, a user of the
-- consumer (grant_consumer), the owner
create role po_nobody login;
create role po_reader login in role pgque_reader;
create role po_user login in role pgque_reader;
create role po_owner login in role pgque_reader;
set role po_owner;
select pgque.subscribe('po', 'owned');
reset role;
select pgque.send('po', 'for-owned') > 0 as sent;
select pgque.ticker('po') is not null as ticked;
set role po_nobody;
select pg_temp.cmp_api('po', 'owned') as no_rights;
select pg_temp.wait('po', 'owned', 10) as no_rights_wait;
set role po_reader;
select pg_temp.cmp_api('po', 'owned') as not_its_consumer;
select pg_temp.wait('po', 'owned', 10) as not_its_consumer_wait;
reset role;
select pgque.grant_consumer('po', 'owned', 'po_user');
set role po_user;
select pg_temp.cmp_api('po', 'owned') as granted_user;
select pg_temp.wait('po', 'owned', 10) as granted_user_wait;
set role po_owner;
select pg_temp.cmp_api('po', 'owned') as owner;
reset role;
-- revoked: refused again
select pgque.revoke_consumer('po', 'owned', 'po_user');
set role po_user;
select pg_temp.cmp_api('po', 'owned') as revoked_user;
reset role;

-- a cooperative main consumer: refused with _next_batch's words; one
-- without members (a hand-edited row) gets nothing
select pgque.register_subconsumer('po', 'g', 'm1');
select pgque.send('po', 'coop') > 0 as sent;
select pgque.ticker('po') is not null as ticked;
select pg_temp.cmp('po', 'g', 10) as coop_main;
select pg_temp.wait('po', 'g', 10) as coop_main_wait;
begin;
delete from pgque.coop_member where cm_sub = (select s.sub_id from pgque.subscription s join pgque.consumer c on c.co_id = s.sub_consumer
                                               where c.co_name = 'g');
select pg_temp.cmp('po', 'g', 10) as coop_main_without_members;
select pg_temp.wait('po', 'g', 10) as coop_main_without_members_wait;
rollback;

-- an unlogged queue: opened as before; one that lost its events (no
-- seal: a crash) is refused until its reset
select pgque.create_queue('pu');
select pgque.set_queue_config('pu', 'unlogged', 'true');
select pgque.subscribe('pu', 'c');
select pgque.send('pu', 'u' || i) > 0 from generate_series(1, 2) i;
select pgque.ticker('pu') is not null as ticked;
select pg_temp.cmp('pu', 'c', 10) as unlogged;
select pg_temp.wait('pu', 'c', 10) as unlogged_wait;
begin;
delete from pgque.unlogged_seal where queue_id = (select queue_id from pgque.queue where queue_name = 'pu');
select pg_temp.cmp('pu', 'c', 10) as unlogged_lost;
select pg_temp.wait('pu', 'c', 10) as unlogged_lost_wait;
rollback;
select array_agg(payload order by msg_id) as unlogged_events from pgque.receive('pu', 'c', 10);

-- a read-only transaction: refused (the open locks and writes)
begin read only;
select pg_temp.cmp('po', 'c', 10) as read_only;
select pg_temp.wait('po', 'c', 10) as read_only_wait;
rollback;

-- the open is the receive's own: granted to nobody
select has_function_privilege('pgque_reader', 'pgque._plain_receive_open(text, text, int4, boolean, boolean, boolean, int4)', 'execute') as reader_may,
       has_function_privilege('pgque_admin', 'pgque._plain_receive_open(text, text, int4, boolean, boolean, boolean, int4)', 'execute') as admin_may,
       has_function_privilege('public', 'pgque._plain_receive_open(text, text, int4, boolean, boolean, boolean, int4)', 'execute') as public_may;

select pgque.unregister_subconsumer('po', 'g', 'm1');
select pgque.unsubscribe('po', 'g');
select pgque.unsubscribe('po', 'owned');
select pgque.unsubscribe('po', 'm');
select pgque.unsubscribe('po', 'c');
select pgque.drop_queue('po');
select pgque.drop_queue('po_other');
select pgque.unsubscribe('pu', 'c');
select pgque.drop_queue('pu');
drop role po_nobody, po_reader, po_user, po_owner;
