-- The modern consuming API: receive / ack / nack over the PgQ batch.

-- receive(queue, consumer, max_return) opens the next batch (or re-returns
-- the open one) and returns up to max_return of its events.  A window with
-- more events is handed out in parts: ack() of a part keeps the rest open
-- under a new batch id, so nothing past max_return is skipped.  Empty
-- windows are finished here and the next one is tried.  The loop, the
-- window read and where a part ends are in C for every kind of consumer
-- (src/receive.c, ADR 0033, 0034): plain (receive), partition slot
-- (receive_partitioned, its batch in the lease epoch's row of
-- pgque.slot_batch, ADR 0023) and cooperative member (receive_coop); the
-- per-call steps are the kinds' _*_receive_open functions.

create function pgque._check_max_return(i_max_return int4)
returns void language plpgsql as $$
begin
    perform pgque._check_not_null('max_return', i_max_return);
    if i_max_return < 1 then
        raise exception 'max_return must be >= 1, got %', i_max_return
            using errcode = 'invalid_parameter_value';
    end if;
end $$;

-- The per-call steps of the plain receive() and receive_wait() (ADR 0121),
-- one statement from C: with i_check (a call's first try), the argument
-- checks; with i_wait and i_check, receive_wait's look (the caller's right,
-- then whether there is a batch to hand out, without a lock: none ->
-- nothing is opened, locked false); then the consumer's row locked (the
-- receive lock: concurrent calls queue and get the same batch), the caller's
-- right on the locked row, and its open batch or the next one (_open_batch,
-- as _next_batch opens it), with where its events are: the window's bounds
-- always and its source (the relations) when i_want_source, as the slot's
-- open (ADR 0078), so that the part is read without another statement.
-- The row is found by its keys in one statement, the queue's and the
-- consumer's names as _subscription finds it.  What this does not serve
-- (no such row: the errors; an unlogged queue: its gate; a cooperative
-- main consumer: its refusal) goes to the SQL of before, _receive_ready and
-- _next_batch, which says what is wrong or opens as always; then sub_id is
-- NULL and no bounds are returned: C reads them per part and opens again on
-- a later try.  i_sub_id (the tries after an empty window): the consumer
-- that the call's first try locked and authorized, opened again without
-- checking what that try checked (issue #30 item 3).  -> the batch (NULL:
-- none), pause (false), the source, the bounds, the subscription and the
-- position acked inside the window, epoch 0 (a slot's column), the queue's
-- id (receive_wait's look), whether the consumer's row was locked and the
-- end of the part handed out last (sub_batch_last: C marks the part's end
-- only when it changes).
create function pgque._plain_receive_open(i_queue_name text, i_consumer_name text, i_max_return int4,
                                          i_wait bool, i_check bool, i_want_source bool, i_sub_id int4,
                                          out batch_id bigint, out pause boolean,
                                          out source text, out lo_xmax xid8, out hi_xmax xid8,
                                          out lo_xip xid8[], out hi pg_catalog.pg_snapshot,
                                          out sub_id int4, out pos bigint, out epoch bigint,
                                          out queue_id int4, out locked boolean, out part_last bigint)
language plpgsql as $$
declare
    s     pgque.subscription;
    l     pgque.subscription;
    r     record;
    prev  pgque.tick;
    nxt   pgque.tick;
    o     record;
begin
    pause := false;
    locked := false;
    epoch := 0;
    if i_sub_id is not null then
        -- a later try: the row this call locked (and finished a window of)
        select * into strict s from pgque.subscription x where x.sub_id = i_sub_id;
    else
        if i_check then
            perform pgque._check_max_return(i_max_return),
                    pgque._check_name('consumer', i_consumer_name, 64),
                    pgque._refuse_slot_consumer(i_consumer_name, 'receive');
        end if;
        if i_wait and i_check then
            -- the look: no lock while there is nothing to hand out
            select sub.* into l
              from pgque.subscription sub
             where sub.sub_queue = (select q.queue_id from pgque.queue q
                                     where q.queue_name = i_queue_name and not q.queue_unlogged)
               and sub.sub_consumer = (select c.co_id from pgque.consumer c where c.co_name = i_consumer_name);
            if l.sub_id is null or l.sub_role = 'coop_main' then
                -- the look of before (its checks, made again, pass): it
                -- raises what is wrong, or says an unlogged queue's or a
                -- group's readiness
                select * into r from pgque._receive_ready(i_queue_name, i_consumer_name, i_max_return);
                queue_id := r.queue_id;
                if r.ready then
                    locked := true;
                    batch_id := (pgque._next_batch(i_queue_name, i_consumer_name, null, null, null,
                                                   i_max_return)).batch_id;
                end if;
                return;
            end if;
            perform pgque._authorize(l.sub_owner, l.sub_users, l.sub_queue, i_consumer_name);
            queue_id := l.sub_queue;
            if l.sub_batch is null
               and not exists (select from pgque.tick t
                                where t.tick_queue = l.sub_queue and t.tick_id > l.sub_last_tick) then
                return;
            end if;
        end if;
        if pg_catalog.pg_is_in_recovery() then
            -- a hot standby takes no row lock, not even where no row
            -- qualifies: the path of before says why (an unlogged queue's
            -- 0A000 first, else the read-only refusal)
            locked := true;
            batch_id := (pgque._next_batch(i_queue_name, i_consumer_name, null, null, null,
                                           i_max_return)).batch_id;
            return;
        end if;
        locked := i_wait;
        -- the receive lock, on the row the names find now
        select sub.* into s
          from pgque.subscription sub
         where sub.sub_queue = (select q.queue_id from pgque.queue q
                                 where q.queue_name = i_queue_name and not q.queue_unlogged)
           and sub.sub_consumer = (select c.co_id from pgque.consumer c where c.co_name = i_consumer_name)
           for update;
        if s.sub_id is null or s.sub_role = 'coop_main' then
            -- gone, renamed, unlogged or a group: as always
            locked := true;
            batch_id := (pgque._next_batch(i_queue_name, i_consumer_name, null, null, null,
                                           i_max_return)).batch_id;
            return;
        end if;
        -- the right, on the row locked, always: what the look checked may
        -- have changed while the lock was waited for, in the row (its
        -- owner, users) and outside it (the queue's rights, a membership,
        -- an anchor: ADR 0125's second reading found a revoked "subscribe"
        -- passed when only the row was compared)
        perform pgque._authorize(s.sub_owner, s.sub_users, s.sub_queue, i_consumer_name);
    end if;
    select * into prev from pgque.tick t where t.tick_queue = s.sub_queue and t.tick_id = s.sub_last_tick;
    if s.sub_batch is not null then
        select * into nxt from pgque.tick t where t.tick_queue = s.sub_queue and t.tick_id = s.sub_next_tick;
        batch_id := s.sub_batch;
        pos := s.sub_batch_pos;
        part_last := s.sub_batch_last;
    else
        o := pgque._open_batch(s, prev, null, null, null, i_max_return);
        batch_id := o.batch_id;
        nxt := o.nxt;
        if batch_id is null then
            return;
        end if;
    end if;
    sub_id := s.sub_id;
    select * into lo_xmax, hi_xmax, lo_xip, hi from pgque._window_bounds(prev.tick_snapshot, nxt.tick_snapshot);
    if i_want_source then
        -- the queue row read after the window's end tick, as _slot_window
        -- reads it: it knows every switch that tick saw
        select pgque._event_source(q, prev.tick_snapshot, nxt.tick_snapshot, null, null) into source
          from pgque.queue q where q.queue_id = s.sub_queue;
    end if;
end $$;

-- receive() of a plain consumer (src/receive.c, ADR 0033, 0121).
create function pgque.receive(queue_name text, consumer_name text, max_return int4 default 100)
returns setof pgque.message language c volatile security definer
set search_path = pgque, pg_catalog, pg_temp
as 'MODULE_PATHNAME', 'pgque_receive_plain';

-- receive_wait(queue, consumer, max_return, timeout): receive() that, when
-- there is no batch, waits on the server for the tick that makes one, up
-- to timeout (at most @PGQUE_RECEIVE_WAIT_MAX_S@ seconds), woken by the
-- commit of the queue's next tick whoever ticks (src/wake.c); then the
-- events, or nothing.  Plain consumers only (ADR 0102).
--
-- _receive_ready is its look between waits: receive's checks and rights,
-- and whether the consumer has a batch to hand out (an open one, or a tick
-- past its cursor), without locking its row, so a call that waits holds
-- no row of its consumer while nothing is there.  A cooperative main
-- consumer with members is "ready": receive() refuses it.
create function pgque._receive_ready(i_queue_name text, i_consumer_name text, i_max_return int4,
                                     out queue_id int4, out ready boolean)
returns record language plpgsql as $$
declare
    s pgque.subscription;
begin
    perform pgque._check_max_return(i_max_return);
    perform pgque._check_name('consumer', i_consumer_name, 64);
    perform pgque._refuse_slot_consumer(i_consumer_name, 'receive');
    s := pgque._subscription(i_queue_name, i_consumer_name);
    perform pgque._authorize(s.sub_owner, s.sub_users, s.sub_queue, i_consumer_name);
    if exists (select from pgque.queue q where q.queue_id = s.sub_queue and q.queue_unlogged) then
        perform pgque._unlogged_ready(s.sub_queue);
    end if;
    queue_id := s.sub_queue;
    ready := s.sub_batch is not null
             or (exists (select from pgque.tick t
                          where t.tick_queue = s.sub_queue and t.tick_id > s.sub_last_tick)
                 and (s.sub_role is distinct from 'coop_main'
                      or exists (select from pgque.coop_member m where m.cm_sub = s.sub_id)));
end $$;

create function pgque.receive_wait(queue_name text, consumer_name text, max_return int4 default 100,
                                   timeout interval default '5 seconds')
returns setof pgque.message language c volatile security definer
set search_path = pgque, pg_catalog, pg_temp
as 'MODULE_PATHNAME', 'pgque_receive_wait';

-- Plain ack/nack refuse batches of slot consumers.
create function pgque._refuse_slot_batch(s pgque.subscription, i_func text)
returns void language plpgsql as $$
begin
    perform pgque._refuse_slot_consumer(
        (select co_name from pgque.consumer where co_id = s.sub_consumer), i_func);
end $$;

-- ack(batch_id) -> 1 done / 0 unknown or already acked.  A plain
-- consumer's batch is acked in C (src/ack.c, ADR 0120): its row locked, the
-- rules below (_authorize, _refuse_slot_consumer) in one statement, the
-- ack's UPDATE; every other batch through _ack_sql.  Its statements look
-- rows up by key: generic plans, not one custom plan per call (ADR 0033).
create function pgque.ack(batch_id bigint)
returns int4 language c volatile security definer
set search_path = pgque, pg_catalog, pg_temp
set plan_cache_mode = force_generic_plan
as 'MODULE_PATHNAME', 'pgque_ack';

-- ack's SQL path (its body before ADR 0120), for what the C path does not
-- take: a NULL id, a hot standby, a cooperative member's or a partition
-- slot's batch, a fenced member's, an unknown one.
create function pgque._ack_sql(i_batch_id bigint)
returns int4 language plpgsql as $$
declare
    s pgque.subscription;
begin
    perform pgque._check_not_null('batch_id', i_batch_id);
    s := pgque._open_batch(i_batch_id);
    if s.sub_id is null then
        return 0;
    end if;
    perform pgque._refuse_slot_batch(s, 'ack');
    if s.sub_role = 'coop_main' then
        return pgque._coop_ack(s);
    end if;
    return pgque._ack_batch(s);
end $$;

-- Ack what receive() handed out: the whole window (_finish_batch), or the
-- part before sub_batch_last, keeping the rest open under a fresh batch
-- id.  C (src/ack.c), the one rule of ack's C path and of _ack_sql.
create function pgque._ack_batch(s pgque.subscription)
returns int4 language c volatile as 'MODULE_PATHNAME', 'pgque_ack_batch_sql';

-- The retry-or-dead-letter decision for one event of an open batch.  The
-- event is re-read from the batch: a msg_id not in it is refused, and the
-- caller's copy of the payload is never trusted.
create function pgque._nack_event(s pgque.subscription, i_ev_id bigint, i_retry_after interval, i_reason text,
                                  i_n int4 default null, i_slot int4 default null)
returns int4 language plpgsql as $$
declare
    e    pgque.event_template;
    r    pgque.event_template;
    k    int4 := 0;
    q    pgque.queue;
begin
    -- every row of the id (a reader's read ends after the last of its id,
    -- ADR 0105): an id an admin repeated (insert_event_raw, ADR 0101) for
    -- another event is refused, as the id alone cannot say which of them
    -- the caller nacks and the retry queue holds one event per id and
    -- consumer; rows of one event (an original and its retry still owed
    -- after a seek, or an identical repeat) are one nack, as before (ADR 0113)
    for r in select * from pgque._batch_rows(s.sub_batch, 1, i_ev_id, i_n, i_slot) loop
        k := k + 1;
        if k = 1 then
            e := r;
        elsif (r.ev_type, r.ev_data, r.ev_extra1, r.ev_extra2, r.ev_extra3, r.ev_extra4)
              is distinct from (e.ev_type, e.ev_data, e.ev_extra1, e.ev_extra2, e.ev_extra3, e.ev_extra4) then
            raise exception 'msg_id % names more than one event of batch %', i_ev_id, s.sub_batch
                using errcode = 'cardinality_violation',
                      detail = 'An admin gave two different events this id (insert_event_raw); the id alone cannot say which one is nacked, and a consumer''s retries hold one event per id.',
                      hint = 'Handle both and ack the batch; to have one delivered again, an admin may append it anew with pgque.insert_event_raw (ev_id NULL, ev_owner the subscription).';
        end if;
    end loop;
    if k = 0 then
        raise exception 'msg_id % not found in batch %', i_ev_id, s.sub_batch
            using errcode = 'invalid_parameter_value';
    end if;
    select * into q from pgque.queue where queue_id = s.sub_queue;
    if coalesce(e.ev_retry, 0) >= coalesce(q.queue_max_retries, 5) then
        return pgque._dead_letter(s, e, i_reason);
    end if;
    return pgque._retry_event(s, e, now() + i_retry_after);
end $$;

-- nack(batch_id, msg, retry_after, reason) -> 1 scheduled / 0 already was.
-- The event goes back to this consumer only after retry_after, or to the
-- dead-letter queue once it has been retried max_retries times.
create function pgque.nack(batch_id bigint, msg pgque.message,
                           retry_after interval default '60 seconds', reason text default null)
returns int4 language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    s pgque.subscription;
begin
    if msg.msg_id is null then
        -- PgQue's words for it, which its scripts match
        raise exception 'msg_id <NULL> not found in batch %', batch_id
            using errcode = 'null_value_not_allowed',
                  detail = 'msg.msg_id must not be null.';
    end if;
    perform pgque._check_interval('retry_after', retry_after, true);
    s := pgque._open_batch_or_raise(batch_id);
    perform pgque._refuse_slot_batch(s, 'nack');
    if s.sub_role = 'coop_main' then
        perform pgque._coop_touch(s.sub_id, (select cw_member from pgque.coop_window where cw_batch = batch_id), null);
    end if;
    return pgque._nack_event(s, msg.msg_id, retry_after, reason);
end $$;
