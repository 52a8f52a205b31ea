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

-- The per-call steps of the plain receive(): the argument checks (on the
-- first try), then the consumer's open batch or the next one (NULL: none).
create function pgque._receive_open(i_queue_name text, i_consumer_name text, i_max_return int4,
                                    i_check bool)
returns bigint language plpgsql as $$
begin
    if i_check then
        perform pgque._check_max_return(i_max_return);
        perform pgque._check_name('consumer', i_consumer_name, 64);
        perform pgque._refuse_slot_consumer(i_consumer_name, 'receive');
    end if;
    return (pgque._next_batch(i_queue_name, i_consumer_name, null, null, null, i_max_return)).batch_id;
end $$;

-- receive() of a plain consumer (src/receive.c, ADR 0033).
create function pgque.receive(queue_name text, consumer_name text, max_return int4 default 100)
returns setof pgque.message language c volatile security definer
set search_path = pgque, pg_catalog, pg_temp
as 'MODULE_PATHNAME', 'pgque_receive';

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

-- receive_wait's look and open in one statement (ADR 0108): with i_check,
-- the look of _receive_ready (its checks, rights and readiness, no lock);
-- when the consumer has a batch to hand out, its open (_next_batch, which
-- locks the consumer's row) follows in the same statement, where the call
-- ran the look and then receive's open with the same checks again.
-- Without i_check (a later try of the call, after an empty window): the
-- open alone.  -> the batch (NULL: none), pause (false: a plain consumer),
-- the queue's id (with i_check) and whether the consumer's row was locked.
create function pgque._receive_wait_open(i_queue_name text, i_consumer_name text, i_max_return int4,
                                         i_check bool, out batch_id int8, out pause boolean,
                                         out queue_id int4, out locked boolean)
returns record language plpgsql as $$
declare
    r record;
begin
    pause := false;
    locked := false;
    if i_check then
        select * into r from pgque._receive_ready(i_queue_name, i_consumer_name, i_max_return);
        queue_id := r.queue_id;
        if not r.ready then
            return;
        end if;
    end if;
    locked := true;
    batch_id := (pgque._next_batch(i_queue_name, i_consumer_name, null, null, null, i_max_return)).batch_id;
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
