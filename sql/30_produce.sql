-- Producing: insert_event (PgQ primitive), send, send_batch, send_at.

-- The one place that appends an event row with every column chosen (C, the
-- same cached plan as send()).  NULL ev_id / ev_time: next id / now().
-- check_disabled: producers respect disable_insert, maintenance does not.
create function pgque._insert_event(queue_name text, i_ev_id bigint, i_ev_time timestamptz,
                                    i_ev_owner int4, i_ev_retry int4, i_ev_type text, i_ev_data text,
                                    i_ev_extra1 text, i_ev_extra2 text, i_ev_extra3 text, i_ev_extra4 text,
                                    i_check_disabled boolean)
returns bigint language c volatile
as 'MODULE_PATHNAME', 'pgque_insert_event_full';

-- The event type of the send family: NULL is refused (insert_event, the raw
-- PgQ primitive, still accepts it).
create function pgque._type(i_type_name text)
returns text language plpgsql immutable as $$
begin
    if i_type_name is null then
        raise exception 'type_name must not be null'
            using errcode = 'null_value_not_allowed';
    end if;
    return i_type_name;
end $$;

-- The queue row for a producer: unknown queues, a caller without "send" on
-- it (ADR 0047) and disabled inserts raise.
-- session_replication_role = replica bypasses disable_insert (PgQ rule).
create function pgque._producer_queue(i_queue_name text)
returns pgque.queue language plpgsql stable as $$
declare
    q pgque.queue;
begin
    q := pgque._queue(i_queue_name);
    perform pgque._check_queue_right(q, 'send');
    if q.queue_disable_insert and pg_catalog.current_setting('session_replication_role') <> 'replica' then
        raise exception 'Insert into queue disallowed'
            using errcode = 'object_not_in_prerequisite_state',
                  detail = pg_catalog.format('Queue %s has disable_insert set.', i_queue_name),
                  hint = 'pgque.set_queue_config(queue, ''disable_insert'', ''false'') re-enables it.';
    end if;
    return q;
end $$;

-- insert_event, send and send_batch are the producer hot path, in C
-- (src/produce.c): one cached plan looks the queue up, one per queue
-- inserts.  They are SECURITY INVOKER without a pinned search_path: the
-- caller's right is PostgreSQL's EXECUTE check (sql/90_grants.sql), and the
-- C code runs the lookup and the append as the extension owner with every
-- name qualified, without the GUC save/restore of SECURITY DEFINER ... SET
-- (ADR 0032).
create function pgque.insert_event(queue_name text, ev_type text, ev_data text,
                                   ev_extra1 text, ev_extra2 text, ev_extra3 text, ev_extra4 text)
returns bigint language c
as 'MODULE_PATHNAME', 'pgque_insert_event';

create function pgque.insert_event(queue_name text, ev_type text, ev_data text)
returns bigint language c
as 'MODULE_PATHNAME', 'pgque_insert_event';

-- send: text payloads are stored byte for byte, jsonb ones canonicalised
-- (payload::text, in C).
create function pgque.send(queue_name text, payload text)
returns bigint language c
as 'MODULE_PATHNAME', 'pgque_send';

create function pgque.send(queue_name text, type_name text, payload text)
returns bigint language c
as 'MODULE_PATHNAME', 'pgque_send';

-- keyed send: the partition key rides in ev_extra1 (NULL key: slot 0)
create function pgque.send(queue_name text, type_name text, payload text, partition_key text)
returns bigint language c
as 'MODULE_PATHNAME', 'pgque_send';

create function pgque.send(queue_name text, payload jsonb)
returns bigint language c
as 'MODULE_PATHNAME', 'pgque_send_jsonb';

create function pgque.send(queue_name text, type_name text, payload jsonb)
returns bigint language c
as 'MODULE_PATHNAME', 'pgque_send_jsonb';

create function pgque.send(queue_name text, type_name text, payload jsonb, partition_key text)
returns bigint language c
as 'MODULE_PATHNAME', 'pgque_send_jsonb';

-- send_batch: one INSERT ... SELECT per call, in C; ids in input order.
-- A multi-dimensional array is refused, as the text[] forms do (src/produce.c),
-- rather than flattened.
create function pgque._jsonb_texts(i_payloads jsonb[])
returns text[] language plpgsql immutable as $$
begin
    if pg_catalog.array_ndims(i_payloads) > 1 then
        raise exception 'payloads must be a one-dimensional array'
            using errcode = 'array_subscript_error';
    end if;
    return case when i_payloads is null then null
                else coalesce((select pg_catalog.array_agg(p::text order by o)
                                 from pg_catalog.unnest(i_payloads) with ordinality u(p, o)), '{}') end;
end $$;

create function pgque.send_batch(queue_name text, type_name text, payloads text[])
returns bigint[] language c
as 'MODULE_PATHNAME', 'pgque_send_batch';

create function pgque.send_batch(queue_name text, type_name text, payloads text[], partition_keys text[])
returns bigint[] language c
as 'MODULE_PATHNAME', 'pgque_send_batch';

create function pgque.send_batch(queue_name text, payloads text[])
returns bigint[] language c
as 'MODULE_PATHNAME', 'pgque_send_batch';

create function pgque.send_batch(queue_name text, payloads jsonb[])
returns bigint[] language sql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
    select pgque.send_batch(queue_name, 'default', pgque._jsonb_texts(payloads))
$$;

create function pgque.send_batch(queue_name text, type_name text, payloads jsonb[])
returns bigint[] language sql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
    select pgque.send_batch(queue_name, type_name, pgque._jsonb_texts(payloads))
$$;

create function pgque.send_batch(queue_name text, type_name text, payloads jsonb[], partition_keys text[])
returns bigint[] language sql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
    select pgque.send_batch(queue_name, type_name, pgque._jsonb_texts(payloads), partition_keys)
$$;

-- send_at: deliver no earlier than deliver_at.  The event id is allocated
-- now and returned; a time not in the future appends at once.
create function pgque.send_at(queue_name text, type_name text, payload text, deliver_at timestamptz)
returns bigint language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    q   pgque.queue;
    id  bigint;
begin
    q := pgque._producer_queue(queue_name);
    perform pgque._type(type_name);
    perform pgque._check_timestamp('deliver_at', deliver_at);
    if deliver_at <= now() then
        return pgque._insert_event(queue_name, null, null, null, null, type_name, payload,
                                   null, null, null, null, true);
    end if;
    id := pg_catalog.nextval(q.queue_event_seq::regclass);
    insert into pgque.delayed_event (de_queue, de_deliver_at, ev_id, ev_time, ev_txid, ev_type, ev_data)
    values (q.queue_id, deliver_at, id, now(), pg_catalog.pg_current_xact_id(), type_name, payload);
    return id;
end $$;

create function pgque.send_at(queue_name text, type_name text, payload jsonb, deliver_at timestamptz)
returns bigint language sql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
    select pgque.send_at(queue_name, type_name, payload::text, deliver_at)
$$;

-- insert_event_bulk(queue_name, ev_type, ev_data_list) -> ids in input
-- order: PgQue's internal set-based primitive behind send_batch, the same C
-- entry point.  Granted to nobody (the owner may call it), as in PgQue.
create function pgque.insert_event_bulk(queue_name text, ev_type text, ev_data_list text[])
returns bigint[] language c security definer
set search_path = pgque, pg_catalog, pg_temp
as 'MODULE_PATHNAME', 'pgque_send_batch';

-- current_event_table(queue_name) -> the queue's current event table
-- (PgQ), e.g. to COPY into it or count what it holds; valid until the
-- transaction ends (rotation may switch it).  The producer's rules apply:
-- the caller's "send" right, and disable_insert unless
-- session_replication_role = replica.  Keyed events of a bucketed queue
-- are in the table's children (its partition buckets), which a query on
-- the table reads too.
create function pgque.current_event_table(x_queue_name text)
returns text language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    q pgque.queue := pgque._producer_queue(x_queue_name);
begin
    return pg_catalog.format('pgque.%I', pgque._event_table(q.queue_id, q.queue_cur_table, null));
end $$;

-- An event id a caller chooses (insert_event_raw, event_retry_raw): NULL
-- (the next id), or one the queue's sequence has handed out already, at
-- most its position (ADR 0101).  An id above it is one the sequence hands
-- to a producer later, and a window with two events of one id loses the
-- second when a receive part ends between them (a part resumes after an
-- ev_id, ADR 0093): choosing one would make that producer's event vanish.
-- The sequence only moves forward (nextval, seq_setval), so an id at most
-- its position now is never handed out again.
create function pgque._check_chosen_ev_id(q pgque.queue, i_ev_id bigint)
returns void language plpgsql as $$
declare
    pos  bigint;
begin
    if i_ev_id is null then
        return;
    end if;
    if i_ev_id < 1 then
        raise exception 'ev_id must be positive, got %', i_ev_id
            using errcode = 'invalid_parameter_value',
                  hint = 'Pass NULL to take the next id of the queue.';
    end if;
    pos := pgque._event_seq_pos(q);
    if i_ev_id > pos then
        raise exception 'ev_id % is above the ids queue "%" has handed out (%)', i_ev_id, q.queue_name, pos
            using errcode = 'invalid_parameter_value',
                  detail = 'The queue''s sequence would hand this id to a producer later, and one of two events of one id can be lost to a consumer that reads the window in parts.',
                  hint = 'Pass NULL to take the next id, or move the sequence past the id first with pgque.seq_setval(queue_event_seq, id).';
    end if;
end $$;

-- insert_event_raw(queue_name, ev_id, ev_time, ev_owner, ev_retry, ev_type,
-- ev_data, ev_extra1..4) -> the event id.  PgQ's low-level append with
-- every field chosen: NULL ev_id takes the next id, else an id the queue
-- has handed out (_check_chosen_ev_id); ev_owner, when set, is
-- a subscription of the queue (its id, pgque.subscription.sub_id) that
-- alone will receive the event, as a retry does (but a seek back replays
-- it as an event, where it drops the retry copies the consumer acked:
-- pgque.addressed_event, ADR 0105).  The producers' append
-- (_insert_event, in C): "send" right, disable_insert, partition buckets.
create function pgque.insert_event_raw(queue_name text, ev_id bigint, ev_time timestamptz,
                                       ev_owner int4, ev_retry int4, ev_type text, ev_data text,
                                       ev_extra1 text, ev_extra2 text, ev_extra3 text, ev_extra4 text)
returns bigint language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    q  pgque.queue := pgque._queue(insert_event_raw.queue_name);
    id bigint;
begin
    perform pgque._check_timestamp('ev_time', insert_event_raw.ev_time);
    perform pgque._check_chosen_ev_id(q, insert_event_raw.ev_id);
    if insert_event_raw.ev_retry is not null and insert_event_raw.ev_retry < 0 then
        raise exception 'ev_retry must be zero or positive, got %', insert_event_raw.ev_retry
            using errcode = 'invalid_parameter_value';
    end if;
    if insert_event_raw.ev_owner is not null
       and not exists (select from pgque.subscription s
                        where s.sub_id = insert_event_raw.ev_owner and s.sub_queue = q.queue_id) then
        raise exception 'ev_owner % is not a subscription of queue "%"', insert_event_raw.ev_owner, q.queue_name
            using errcode = 'invalid_parameter_value',
                  hint = 'Pass NULL for every consumer, or a sub_id of the queue (pgque.subscription).';
    end if;
    id := pgque._insert_event(q.queue_name, insert_event_raw.ev_id, insert_event_raw.ev_time,
                              insert_event_raw.ev_owner, insert_event_raw.ev_retry,
                              insert_event_raw.ev_type, insert_event_raw.ev_data,
                              insert_event_raw.ev_extra1, insert_event_raw.ev_extra2,
                              insert_event_raw.ev_extra3, insert_event_raw.ev_extra4, true);
    -- an event addressed to one subscription is no retry copy: a seek
    -- back over it replays it (ADR 0105)
    if insert_event_raw.ev_owner is not null then
        insert into pgque.addressed_event (ae_sub, ae_ev_id, ae_txid)
        values (insert_event_raw.ev_owner, id, pg_catalog.pg_current_xact_id())
        on conflict do nothing;
    end if;
    return id;
end $$;
