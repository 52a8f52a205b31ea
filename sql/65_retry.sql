-- Retry and dead-letter queue.

-- Schedule a redelivery of one event to one subscription (same ev_id, same
-- partition key, ev_retry + 1).  -> 1 / 0 if it is already scheduled.
create function pgque._retry_event(s pgque.subscription, e pgque.event_template, i_due timestamptz)
returns int4 language plpgsql as $$
declare
    n int4;
begin
    insert into pgque.retry_queue (ev_retry_after, ev_queue, ev_id, ev_time, ev_txid, ev_owner, ev_retry,
                                   ev_type, ev_data, ev_extra1, ev_extra2, ev_extra3, ev_extra4)
    values (i_due, s.sub_queue, e.ev_id, e.ev_time, e.ev_txid, s.sub_id, coalesce(e.ev_retry, 0) + 1,
            e.ev_type, e.ev_data, e.ev_extra1, e.ev_extra2, e.ev_extra3, e.ev_extra4)
    on conflict (ev_owner, ev_id) do nothing;
    get diagnostics n = row_count;
    return n;
end $$;

-- Move one event to the dead-letter queue.  -> 1 / 0 if it is there already.
create function pgque._dead_letter(s pgque.subscription, e pgque.event_template, i_reason text)
returns int4 language plpgsql as $$
declare
    n int4;
begin
    insert into pgque.dead_letter (dl_queue_id, dl_consumer_id, dl_reason, ev_id, ev_time, ev_txid,
                                   ev_owner, ev_retry, ev_type, ev_data,
                                   ev_extra1, ev_extra2, ev_extra3, ev_extra4)
    values (s.sub_queue, s.sub_consumer, i_reason, e.ev_id, e.ev_time, e.ev_txid,
            e.ev_owner, e.ev_retry, e.ev_type, e.ev_data,
            e.ev_extra1, e.ev_extra2, e.ev_extra3, e.ev_extra4)
    on conflict (dl_queue_id, dl_consumer_id, ev_id) do nothing;
    get diagnostics n = row_count;
    return n;
end $$;

-- event_dead(batch_id, event_id, reason, ev_time, ev_txid, ev_retry, ev_type,
-- ev_data, ev_extra1..4) -> 1 / 0 if the event is dead-lettered already for
-- the batch's consumer.  PgQue's primitive under nack(): the row is the
-- caller's (an admin's) description of the event, stored as given.
create function pgque.event_dead(batch_id bigint, event_id bigint, reason text, ev_time timestamptz,
                                 ev_txid xid8, ev_retry int4, ev_type text, ev_data text,
                                 ev_extra1 text default null, ev_extra2 text default null,
                                 ev_extra3 text default null, ev_extra4 text default null)
returns int4 language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    s  pgque.subscription;
    e  pgque.event_template;
begin
    s := pgque._open_batch_or_raise(batch_id);
    perform pgque._check_not_null('event_id', event_id);
    perform pgque._check_not_null('ev_time', ev_time);
    perform pgque._pause_refuse_primitive(s, 'event_dead');
    -- event_template's columns: ev_id, ev_time, ev_txid, ev_owner, ev_retry,
    -- ev_type, ev_data, ev_extra1..4
    e := row(event_id, ev_time, ev_txid, null, ev_retry, ev_type, ev_data,
             ev_extra1, ev_extra2, ev_extra3, ev_extra4)::pgque.event_template;
    return pgque._dead_letter(s, e, reason);
end $$;

create function pgque.event_retry(x_batch_id bigint, x_event_id bigint, x_retry_time timestamptz)
returns int4 language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    s  pgque.subscription;
    e  pgque.event_template;
begin
    s := pgque._open_batch_or_raise(x_batch_id);
    perform pgque._check_not_null('event_id', x_event_id);
    perform pgque._check_timestamp('retry_time', x_retry_time);
    perform pgque._pause_refuse_primitive(s, 'event_retry');
    select * into e from pgque._batch_rows(x_batch_id, 1, x_event_id);
    if not found then
        raise exception 'msg_id % not found in batch %', x_event_id, x_batch_id
            using errcode = 'invalid_parameter_value';
    end if;
    return pgque._retry_event(s, e, x_retry_time);
end $$;

create function pgque.event_retry(x_batch_id bigint, x_event_id bigint, x_retry_seconds int4)
returns int4 language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
begin
    perform pgque._check_not_null('retry_seconds', x_retry_seconds);
    if x_retry_seconds < 0 then
        raise exception 'retry_seconds must be zero or positive, got %', x_retry_seconds
            using errcode = 'invalid_parameter_value';
    end if;
    return pgque.event_retry(x_batch_id, x_event_id, now() + pg_catalog.make_interval(secs => x_retry_seconds));
end $$;

-- batch_retry(batch_id, seconds): every event of the batch to retry.
create function pgque.batch_retry(i_batch_id bigint, i_retry_seconds int4)
returns int4 language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    s  pgque.subscription;
    e  pgque.event_template;
    n  int4 := 0;
begin
    s := pgque._open_batch_or_raise(i_batch_id);
    perform pgque._check_not_null('retry_seconds', i_retry_seconds);
    if i_retry_seconds < 0 then
        raise exception 'retry_seconds must be zero or positive, got %', i_retry_seconds
            using errcode = 'invalid_parameter_value';
    end if;
    perform pgque._pause_refuse_primitive(s, 'batch_retry');
    for e in select * from pgque._batch_rows(i_batch_id, null, null) loop
        n := n + pgque._retry_event(s, e, now() + pg_catalog.make_interval(secs => i_retry_seconds));
    end loop;
    return n;
end $$;

-- dlq_inspect(queue_name, limit_count): newest dead letters first.
create function pgque.dlq_inspect(queue_name text, limit_count int4 default 100)
returns setof pgque.dead_letter language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    q pgque.queue;
begin
    q := pgque._queue(queue_name);
    -- dead letters carry payloads: the queue's readers only (ADR 0047)
    perform pgque._check_queue_right(q, 'subscribe');
    perform pgque._check_not_null('limit_count', limit_count);
    if limit_count < 1 then
        raise exception 'limit_count must be positive, got %', limit_count
            using errcode = 'invalid_parameter_value';
    end if;
    return query select * from pgque.dead_letter where dl_queue_id = q.queue_id
                  order by dl_time desc, dl_id desc limit limit_count;
end $$;

-- dlq_replay(dead_letter_id) -> the event id.  The event goes back, with its
-- id and a fresh retry budget, to the consumer that dead-lettered it only.
-- That acts on the consumer (it removes its dead letter and makes it
-- process the event again), so the caller must be allowed to use it
-- (_authorize): a writer of another application may not.
create function pgque.dlq_replay(dead_letter_id bigint)
returns bigint language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    d    pgque.dead_letter;
    q    pgque.queue;
    sid  int4;
    own  regrole;
    usr  regrole[];
begin
    perform pgque._check_not_null('dead_letter_id', dead_letter_id);
    select * into d from pgque.dead_letter where dl_id = dead_letter_id for update;
    if not found then
        raise exception 'dead letter entry not found: %', dead_letter_id
            using errcode = 'undefined_object';
    end if;
    select * into q from pgque.queue where queue_id = d.dl_queue_id;
    select sub_id, sub_owner, sub_users into sid, own, usr from pgque.subscription
     where sub_queue = d.dl_queue_id and sub_consumer = d.dl_consumer_id;
    if sid is null then
        raise exception 'the consumer of dead letter % is no longer subscribed to queue "%"', dead_letter_id, q.queue_name
            using errcode = 'object_not_in_prerequisite_state';
    end if;
    perform pgque._authorize(own, usr, q.queue_id, (select co_name from pgque.consumer where co_id = d.dl_consumer_id));
    -- an old-layout slot's dead letter during a resize: its key's new slot (ADR 0030)
    perform pgque._insert_event(q.queue_name, d.ev_id, d.ev_time, pgque._retry_owner(sid, d.ev_extra1),
                                null, d.ev_type, d.ev_data,
                                d.ev_extra1, d.ev_extra2, d.ev_extra3, d.ev_extra4, false);
    delete from pgque.dead_letter where dl_id = dead_letter_id;
    return d.ev_id;
end $$;

-- dlq_replay_all(queue_name) -> (replayed, failed, first_error).  Replays
-- the dead letters of the consumers the caller may use (_may_use: its
-- own, those granted to it, or every one for an admin); those of other
-- roles' consumers stay.
-- failed: dead letters whose consumer is no longer subscribed.
create function pgque.dlq_replay_all(queue_name text,
                                     out replayed bigint, out failed bigint, out first_error text)
language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    q      pgque.queue;
    admin  boolean := pgque._caller_is_admin();
begin
    q := pgque._queue(queue_name);
    with d as (delete from pgque.dead_letter dl using pgque.subscription s
                where dl.dl_queue_id = q.queue_id and s.sub_queue = dl.dl_queue_id
                  and s.sub_consumer = dl.dl_consumer_id
                  and (admin or pgque._may_use(s.sub_owner, s.sub_users))
            returning dl.*, s.sub_id)
    select count(pgque._insert_event(q.queue_name, d2.ev_id, d2.ev_time,
                                     pgque._retry_owner(d2.sub_id, d2.ev_extra1), null, d2.ev_type,
                                     d2.ev_data, d2.ev_extra1, d2.ev_extra2, d2.ev_extra3,
                                     d2.ev_extra4, false))
      into replayed
      from (select * from d order by d.ev_id) d2;
    select count(*) into failed from pgque.dead_letter dl
     where dl.dl_queue_id = q.queue_id
       and not exists (select 1 from pgque.subscription s
                        where s.sub_queue = dl.dl_queue_id and s.sub_consumer = dl.dl_consumer_id);
    if failed > 0 then
        first_error := 'consumer no longer subscribed';
    end if;
end $$;

-- dlq_purge(queue_name, older_than) -> rows deleted.
create function pgque.dlq_purge(queue_name text, older_than interval default '30 days')
returns int4 language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    q  pgque.queue;
    n  int4;
begin
    q := pgque._queue(queue_name);
    perform pgque._check_interval('older_than', older_than, true);
    delete from pgque.dead_letter where dl_queue_id = q.queue_id and dl_time <= now() - older_than;
    get diagnostics n = row_count;
    return n;
end $$;

-- event_retry_raw(queue, consumer, retry_after, ev_id, ev_time, ev_retry,
-- ev_type, ev_data, ev_extra1..4) -> the event id.  PgQ's primitive with
-- every field chosen: the event is due again for this consumer only at
-- retry_after (the retry mover appends it then, ev_owner set; for a
-- cooperative group, to whichever member takes that window).  NULL ev_id
-- takes the next id of the queue; an event of the same id already waiting
-- for the consumer stays as it was.  ev_retry is stored as given.
create function pgque.event_retry_raw(x_queue text, x_consumer text, x_retry_after timestamptz,
                                      x_ev_id bigint, x_ev_time timestamptz, x_ev_retry int4,
                                      x_ev_type text, x_ev_data text, x_ev_extra1 text, x_ev_extra2 text,
                                      x_ev_extra3 text, x_ev_extra4 text)
returns bigint language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    s   pgque.subscription := pgque._subscription(x_queue, x_consumer);
    id  bigint := x_ev_id;
begin
    perform pgque._authorize(s.sub_owner, s.sub_users, s.sub_queue, x_consumer);
    perform pgque._check_timestamp('retry_after', x_retry_after);
    perform pgque._check_timestamp('ev_time', x_ev_time);
    perform pgque._check_chosen_ev_id((select q from pgque.queue q where q.queue_id = s.sub_queue), x_ev_id);
    if x_ev_retry is not null and x_ev_retry < 0 then
        raise exception 'ev_retry must be zero or positive, got %', x_ev_retry
            using errcode = 'invalid_parameter_value';
    end if;
    perform pgque._pause_refuse_primitive(s, 'event_retry_raw');
    if id is null then
        id := pg_catalog.nextval((select q.queue_event_seq from pgque.queue q where q.queue_id = s.sub_queue)::regclass);
    end if;
    insert into pgque.retry_queue (ev_retry_after, ev_queue, ev_id, ev_time, ev_txid, ev_owner, ev_retry,
                                   ev_type, ev_data, ev_extra1, ev_extra2, ev_extra3, ev_extra4)
    values (x_retry_after, s.sub_queue, id, x_ev_time, pg_catalog.pg_current_xact_id(), s.sub_id, x_ev_retry,
            x_ev_type, x_ev_data, x_ev_extra1, x_ev_extra2, x_ev_extra3, x_ev_extra4)
    on conflict (ev_owner, ev_id) do nothing;
    return id;
end $$;
