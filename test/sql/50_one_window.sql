-- One tick window per batch (issue #27 item 1, ADR 0057), written from
-- PgQue's reference and its cooperative recipe (docs/examples.md): the
-- default receive() and receive_coop() hand out the events between two
-- consecutive ticks per batch, however many windows wait and however large
-- max_return is; merging waiting windows is a plain consumer's opt-in
-- (set_consumer_config 'merge_windows').

-- batches(queue, consumer, max_return, kind): receive (or receive_coop with
-- kind = the member) and ack until nothing is left; one row per batch:
-- its events' payloads in the order handed out
create function pgque_test.batches(i_queue text, i_consumer text, i_max int4, i_member text default null)
returns table (batch int4, payloads text)
language plpgsql as $$
declare
    b  bigint;
    p  text;
    i  int4 := 0;
begin
    loop
        if i_member is null then
            select max(m.batch_id), string_agg(m.payload, ',' order by m.msg_id)
              into b, p from pgque.receive(i_queue, i_consumer, i_max) m;
        else
            select max(m.batch_id), string_agg(m.payload, ',' order by m.msg_id)
              into b, p from pgque.receive_coop(i_queue, i_consumer, i_member, i_max) m;
        end if;
        exit when b is null;
        perform pgque.ack(b);
        i := i + 1;
        batch := i;
        payloads := p;
        return next;
        exit when i > 20;
    end loop;
end $$;

-- PgQue's cooperative recipe: a tick before the group registers, two
-- windows of three events one tick apart, two members polling with
-- max_return 100.  Each member gets one window of three, in order; the
-- batches differ; nothing is handed out twice or lost.
select pgque.create_queue('ow_coop');
select pgque.force_next_tick('ow_coop') is not null as forced;
select pgque.ticker('ow_coop') is not null as ticked;
select pgque.register_subconsumer('ow_coop', 'workers', 'w1') as w1,
       pgque.register_subconsumer('ow_coop', 'workers', 'w2') as w2;
select count(pgque.send('ow_coop', '{"n": ' || i || '}')) from generate_series(1, 3) i;
select pgque.force_next_tick('ow_coop') is not null as forced;
select pgque.ticker('ow_coop') is not null as ticked;
select count(pgque.send('ow_coop', '{"n": ' || i || '}')) from generate_series(4, 6) i;
select pgque.force_next_tick('ow_coop') is not null as forced;
select pgque.ticker('ow_coop') is not null as ticked;
create temp table coop_seen as
    select 'w1'::text as member, * from pgque.receive_coop('ow_coop', 'workers', 'w1', 100);
insert into coop_seen select 'w2', * from pgque.receive_coop('ow_coop', 'workers', 'w2', 100);
select member, count(*) as events, string_agg(payload, ' ' order by msg_id) as payloads,
       count(distinct batch_id) as batches
  from coop_seen group by member order by member;
select count(distinct batch_id) = 2 as different_batches,
       count(distinct msg_id) = 6 and count(*) = 6 as each_event_once
  from coop_seen;
select pgque.ack(batch_id) as acked from coop_seen where member = 'w1' group by batch_id;
select pgque.ack(batch_id) as acked from coop_seen where member = 'w2' group by batch_id;
select count(*) as w1_nothing_left from pgque.receive_coop('ow_coop', 'workers', 'w1', 100);
select count(*) as w2_nothing_left from pgque.receive_coop('ow_coop', 'workers', 'w2', 100);

-- one member alone drains three waiting windows one batch per window
select count(pgque.send('ow_coop', 'a' || i)) from generate_series(1, 2) i;
select pgque.ticker('ow_coop') is not null as ticked;
select count(pgque.send('ow_coop', 'b' || i)) from generate_series(1, 3) i;
select pgque.ticker('ow_coop') is not null as ticked;
select count(pgque.send('ow_coop', 'c' || i)) from generate_series(1, 4) i;
select pgque.ticker('ow_coop') is not null as ticked;
select * from pgque_test.batches('ow_coop', 'workers', 100, 'w1');

-- A lagging plain consumer: three windows wait (2, 3 and 4 events); with
-- max_return 100 it gets one batch per window, in order, and a window
-- larger than max_return still comes in parts (ADR 0003)
select pgque.create_queue('ow_plain');
select pgque.subscribe('ow_plain', 'lag') as lag, pgque.subscribe('ow_plain', 'merged') as merged,
       pgque.subscribe('ow_plain', 'parts') as parts;
select count(pgque.send('ow_plain', 'a' || i)) from generate_series(1, 2) i;
select pgque.ticker('ow_plain') is not null as ticked;
select count(pgque.send('ow_plain', 'b' || i)) from generate_series(1, 3) i;
select pgque.ticker('ow_plain') is not null as ticked;
select count(pgque.send('ow_plain', 'c' || i)) from generate_series(1, 4) i;
select pgque.ticker('ow_plain') is not null as ticked;
select pgque.get_consumer_config('ow_plain', 'lag', 'merge_windows') as lag_merges;
select * from pgque_test.batches('ow_plain', 'lag', 100);
select * from pgque_test.batches('ow_plain', 'parts', 3);

-- The opt-in: merge_windows on, the waiting windows are merged up to about
-- max_return events (2 + 3 fit in 5, the third window follows), then all
-- of them at once; NULL resets it to one window per batch
select pgque.set_consumer_config('ow_plain', 'merged', 'merge_windows', 'true') as set_on;
select pgque.get_consumer_config('ow_plain', 'merged', 'merge_windows') as merged_merges;
select * from pgque_test.batches('ow_plain', 'merged', 5);
select count(pgque.send('ow_plain', 'd' || i)) from generate_series(1, 2) i;
select pgque.ticker('ow_plain') is not null as ticked;
select count(pgque.send('ow_plain', 'e' || i)) from generate_series(1, 2) i;
select pgque.ticker('ow_plain') is not null as ticked;
select * from pgque_test.batches('ow_plain', 'merged', 100);
select pgque.set_consumer_config('ow_plain', 'merged', 'MERGE_WINDOWS', null) as reset;
select pgque.get_consumer_config('ow_plain', 'merged', 'merge_windows') as merged_merges;
select count(pgque.send('ow_plain', 'f' || i)) from generate_series(1, 2) i;
select pgque.ticker('ow_plain') is not null as ticked;
select count(pgque.send('ow_plain', 'g' || i)) from generate_series(1, 2) i;
select pgque.ticker('ow_plain') is not null as ticked;
select * from pgque_test.batches('ow_plain', 'merged', 100);

-- a consumer that merges and is then converted to a cooperative group:
-- its members still take one window each
select pgque.set_consumer_config('ow_plain', 'lag', 'merge_windows', 'on') as set_on;
select count(pgque.send('ow_plain', 'h' || i)) from generate_series(1, 2) i;
select pgque.ticker('ow_plain') is not null as ticked;
select count(pgque.send('ow_plain', 'i' || i)) from generate_series(1, 2) i;
select pgque.ticker('ow_plain') is not null as ticked;
select pgque.register_subconsumer('ow_plain', 'lag', 'm1', true) as converted;
select * from pgque_test.batches('ow_plain', 'lag', 100, 'm1');

-- Refusals, each with its SQLSTATE
select pgque_test.error_of($$select pgque.set_consumer_config('ow_coop', 'workers', 'merge_windows', 'true')$$) as coop_main;
select pgque.set_consumer_config('ow_coop', 'workers', 'merge_windows', 'false') as coop_main_off_is_fine;
select pgque_test.error_of($$select pgque.set_consumer_config('ow_plain', 'merged', 'batch_size', '1')$$) as unknown_param;
select pgque_test.error_of($$select pgque.set_consumer_config('ow_plain', 'merged', 'merge_windows', 'maybe')$$) as not_boolean;
select pgque_test.error_of($$select pgque.set_consumer_config('ow_plain', 'merged', 'merge_windows', repeat('t', 100000))$$) as long_value;
select pgque_test.error_of($$select pgque.set_consumer_config('ow_plain', 'nobody', 'merge_windows', 'true')$$) as not_subscribed;
select pgque_test.error_of($$select pgque.set_consumer_config('no_such_queue', 'merged', 'merge_windows', 'true')$$) as no_queue;
select pgque_test.error_of($$select pgque.set_consumer_config(null, 'merged', 'merge_windows', 'true')$$) as null_queue;
select pgque_test.error_of($$select pgque.set_consumer_config('ow_plain', null, 'merge_windows', 'true')$$) as null_consumer;
select pgque_test.error_of($$select pgque.set_consumer_config('ow_plain', 'merged', null, 'true')$$) as null_param;
select pgque_test.error_of($$select pgque.get_consumer_config('ow_plain', 'merged', null)$$) as get_null_param;
select pgque.subscribe_slot('ow_plain', 'keyed', 0, 2) as slot0;
select pgque_test.error_of($$select pgque.set_consumer_config('ow_plain', 'keyed', 'merge_windows', 'true')$$) as partitioned;
select pgque_test.error_of($$select pgque.set_consumer_config('ow_plain', 'keyed#0/2', 'merge_windows', 'true')$$) as slot;
select pgque_test.error_of($$select pgque.get_consumer_config('ow_plain', 'keyed#0/2', 'merge_windows')$$) as get_slot;

-- Who may set it: the consumer's role, a member of it, or an admin; not
-- another reader, not a role with LOGIN only
create role pgque_t_ow_reader login in role pgque_reader;
create role pgque_t_ow_other login in role pgque_reader;
create role pgque_t_ow_admin login in role pgque_admin;
create role pgque_t_ow_nobody login;
grant usage on schema pgque_test to public;
set role pgque_t_ow_reader;
select pgque.subscribe('ow_plain', 'app') as subscribed;
select pgque.set_consumer_config('ow_plain', 'app', 'merge_windows', 'true') as owner_sets;
reset role;
set role pgque_t_ow_other;
select pgque_test.error_of($$select pgque.set_consumer_config('ow_plain', 'app', 'merge_windows', 'false')$$) as other_reader_sets;
select pgque_test.error_of($$select pgque.get_consumer_config('ow_plain', 'app', 'merge_windows')$$) as other_reader_reads;
reset role;
set role pgque_t_ow_nobody;
select pgque_test.error_of($$select pgque.set_consumer_config('ow_plain', 'app', 'merge_windows', 'false')$$) as login_only_sets;
reset role;
set role pgque_t_ow_admin;
select pgque.set_consumer_config('ow_plain', 'app', 'merge_windows', 'false') as admin_sets;
reset role;
select pgque.get_consumer_config('ow_plain', 'app', 'merge_windows') as app_merges;

select pgque.unsubscribe('ow_plain', 'app') as unsubscribed;
drop role pgque_t_ow_reader, pgque_t_ow_other, pgque_t_ow_admin, pgque_t_ow_nobody;
select pgque.drop_queue('ow_coop', true) as dropped, pgque.drop_queue('ow_plain', true) as dropped;
