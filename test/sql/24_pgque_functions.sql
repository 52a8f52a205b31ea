-- PgQue's functions that 0.1.0 lacked (issue #13), from PgQue's reference:
-- create_queue(queue, options), pause_queue/resume_queue, insert_event_bulk,
-- event_dead, get_batch_cursor, maint_deliver_delayed and delayed_events,
-- set_tick_period_ms with ticker_loop(), the queue_extra_maint hooks of
-- maint(), status() rows.  (uninstall() is in the TAP test 002_install.)

-- create_queue with options: created, each option applied
select pgque.create_queue('pf', '{"max_retries": 7, "rotation_period": "1 hour", "ticker_max_count": 50, "ticker_paused": false}');
select queue_max_retries, queue_rotation_period, queue_ticker_max_count, queue_ticker_paused
  from pgque.queue where queue_name = 'pf';
-- an existing queue: 0, and the options are still applied
select pgque.create_queue('pf', '{"max_retries": 3}');
select queue_max_retries from pgque.queue where queue_name = 'pf';
-- JSON null restores the default
select pgque.create_queue('pf', '{"max_retries": null}');
select queue_max_retries is null as default_max_retries from pgque.queue where queue_name = 'pf';
-- bad options undo the whole call: the queue is not created
select pgque.create_queue('pf_bad', '{"max_retries": 2, "no_such_option": 1}');
select count(*) as pf_bad_created from pgque.queue where queue_name = 'pf_bad';
select pgque.create_queue('pf_bad', '[1, 2]');
select pgque.create_queue('pf_bad', '{"max_retries": [1]}');
select pgque.create_queue('pf_bad', null::jsonb);
select pgque.create_queue('pf_bad', '{"max_retries": -1}');
select count(*) as pf_bad_created from pgque.queue where queue_name = 'pf_bad';

-- pause_queue / resume_queue: the ticker skips a paused queue; sends still append
select pgque.subscribe('pf', 'c');
select pgque.pause_queue('pf');
select pgque.send('pf', 'while paused') > 0 as sent;
create temp table pf_last as
select max(tick_id) as t from pgque.tick where tick_queue = (select queue_id from pgque.queue where queue_name = 'pf');
select pgque.ticker() >= 0 as ticker_ran;
select max(tick_id) is not distinct from (select t from pf_last) as paused_queue_not_ticked
  from pgque.tick where tick_queue = (select queue_id from pgque.queue where queue_name = 'pf');
select count(*) as received_while_paused from pgque.receive('pf', 'c');
select pgque.resume_queue('pf');
select pgque.ticker('pf') is not null as ticked_after_resume;
select payload from pgque.receive('pf', 'c');
select pgque.ack(current_batch) from pgque.get_consumer_info('pf', 'c');
select pgque.pause_queue('nope');
select pgque.resume_queue(null);

-- insert_event_bulk: ids in input order, as send_batch
select array_length(pgque.insert_event_bulk('pf', 'bulk', array['a', 'b', 'c']), 1) as bulk_ids;
select pgque.ticker('pf') is not null as ticked;
select type, payload from pgque.receive('pf', 'c') order by msg_id;

-- get_batch_cursor: the first quick_limit rows, the rest by FETCH; with a
-- condition; the condition runs as the caller (SECURITY INVOKER)
begin;
select ev_data from pgque.get_batch_cursor((select current_batch from pgque.get_consumer_info('pf', 'c')), 'bc', 2);
-- the rest of the batch is left in the cursor
create function pg_temp.rest_of(c refcursor) returns setof text language plpgsql as $$
declare
    r record;
begin
    loop
        fetch c into r;
        exit when not found;
        return next r.ev_data;
    end loop;
end $$;
select * from pg_temp.rest_of('bc');
close bc;
select ev_data from pgque.get_batch_cursor((select current_batch from pgque.get_consumer_info('pf', 'c')), 'bc2', 10,
                                           $$ev_data <> 'b'$$);
commit;
-- an admin's condition cannot read what only the extension owner may
create role pf_admin in role pgque_admin;
begin;
set local role pf_admin;
\set VERBOSITY terse
select ev_data from pgque.get_batch_cursor((select current_batch from pgque.get_consumer_info('pf', 'c')), 'bc6', 10,
                                           $$exists (select 1 from pgque.idem)$$);
rollback;
\set VERBOSITY default
drop role pf_admin;
select p.prosecdef as cursor_is_security_definer
  from pg_proc p where p.oid = 'pgque.get_batch_cursor(bigint,text,int4,text)'::regprocedure;
select pgque.get_batch_cursor(999999, 'bc3', 1);
select pgque.get_batch_cursor((select current_batch from pgque.get_consumer_info('pf', 'c')), null, 1);
select pgque.get_batch_cursor((select current_batch from pgque.get_consumer_info('pf', 'c')), 'bc4', -1);
select pgque.get_batch_cursor((select current_batch from pgque.get_consumer_info('pf', 'c')), 'bc5', 1, ' ');

-- event_dead: one row per event and consumer, idempotent
select pgque.event_dead(b.current_batch, 424242, 'by hand', now(), null, 2, 't', 'dead payload')
  from pgque.get_consumer_info('pf', 'c') b;
select pgque.event_dead(b.current_batch, 424242, 'by hand again', now(), null, 2, 't', 'dead payload')
  from pgque.get_consumer_info('pf', 'c') b;
select ev_id, dl_reason, ev_retry, ev_data from pgque.dlq_inspect('pf');
select pgque.event_dead(999999, 1, 'r', now(), null, 0, 't', 'p');
select pgque.event_dead(b.current_batch, null, 'r', now(), null, 0, 't', 'p') from pgque.get_consumer_info('pf', 'c') b;
select pgque.ack(current_batch) from pgque.get_consumer_info('pf', 'c');

-- maint_deliver_delayed and the delayed_events relation
select pgque.send_at('pf', 'later', 'in the past', now() - interval '1 second') > 0 as appended_now;
select pgque.send_at('pf', 'later', 'in a day', now() + interval '1 day') > 0 as delayed;
select queue_name, ev_type, deliver_at > now() as in_future from pgque.delayed_events;
update pgque.delayed_event set de_deliver_at = now() - interval '1 second';
select pgque.maint_deliver_delayed() as delivered;
select count(*) as still_delayed from pgque.delayed_events;

-- set_tick_period_ms: exact divisors of 1000 only; ticker_loop() reads it
select pgque.set_tick_period_ms(50);
select tick_period_ms from pgque.config;
select pgque.set_tick_period_ms(0);
select pgque.set_tick_period_ms(300);
select pgque.set_tick_period_ms(2000);
select pgque.set_tick_period_ms(null);
select pgque.set_tick_period_ms(1000);
-- with a period of 1 s, a 1 s loop makes one pass: it ticks what was sent
select pgque.send('pf', 'loop') > 0 as sent;
call pgque.ticker_loop('1 second');
select payload from pgque.receive('pf', 'c');
select pgque.ack(current_batch) from pgque.get_consumer_info('pf', 'c');
select pgque.set_tick_period_ms(100);

-- extra maintenance hooks: run by maint() if owned by pgque_owner, the owner
-- of the extension's objects (ADR 0042): only a superuser can hand it one
create function public.pf_hook(i_queue text) returns int4 language sql as $$ select 5 $$;
alter function public.pf_hook(text) owner to pgque_owner;
update pgque.queue set queue_extra_maint = array['public.pf_hook'] where queue_name = 'pf';
select pgque._maint_extra() as hook_sum;
update pgque.queue set queue_extra_maint = array['public.no_such_hook'] where queue_name = 'pf';
select pgque._maint_extra() as missing_hook;
create role pf_other;
create function public.pf_foreign(i_queue text) returns int4 language sql as $$ select 100 $$;
alter function public.pf_foreign(text) owner to pf_other;
update pgque.queue set queue_extra_maint = array['public.pf_foreign', 'public.pf_hook'] where queue_name = 'pf';
select pgque._maint_extra() as foreign_hook_skipped;
select pgque.maint() >= 5 as maint_runs_hooks;
update pgque.queue set queue_extra_maint = null where queue_name = 'pf';
drop function public.pf_hook(text), public.pf_foreign(text);
drop role pf_other;

-- status(): PgQue's "pgque" row, "info" for the informational rows
select component, status from pgque.status()
 where component in ('postgresql', 'pgque', 'queues', 'consumers') order by component;

select pgque.drop_queue('pf', true);
