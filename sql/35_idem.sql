-- Producer idempotency (SPEC §4): send_idem appends once per (queue,
-- sending role, idem_key) per TTL window.  The key space is the sending
-- role's (pgque._caller(), the session's role whatever SECURITY DEFINER
-- frames lie between): another application's writer, a different role,
-- cannot answer "deduped" to a key it chose first and so drop the victim's
-- event (security issue #25 item 10).  Writers that must share keys use one
-- role.  A claim row and the event are written in the
-- same transaction, so a rolled-back send leaves the key free; concurrent
-- duplicates meet on the primary key and exactly one appends.  No advisory
-- lock, no subtransaction.  Expired claims are reaped by maintenance.

create table pgque.idem (
    queue_id    int4 not null,
    idem_key    text not null,
    event_id    bigint not null,
    expires_at  timestamptz not null,
    -- the sending role; 0 ('-') for a claim made before 0.3.0, which had
    -- no owner: every role still matches it until it expires
    idem_role   regrole not null,
    primary key (queue_id, idem_role, idem_key)
);
create index idem_expires_idx on pgque.idem (expires_at);
select pg_catalog.pg_extension_config_dump('pgque.idem', '');

create function pgque.send_idem(queue_name text, type_name text, payload text, idem_key text,
                                ttl interval default '1 hour', partition_key text default null)
returns table (event_id bigint, deduped boolean)
language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
#variable_conflict use_variable
declare
    q        pgque.queue;
    new_id   bigint;
    got      bigint;
    live     boolean;
    attempt  int4;
    me       regrole := pgque._caller();
begin
    q := pgque._producer_queue(queue_name);
    perform pgque._type(type_name);
    perform pgque._check_not_null('idem_key', idem_key);
    if idem_key = '' then
        raise exception 'idem_key must not be empty'
            using errcode = 'invalid_parameter_value';
    end if;
    -- the key is a primary-key column: a bound, not btree's row-size error
    if pg_catalog.octet_length(idem_key) > 1024 then
        raise exception 'idem_key is too long (% bytes)', pg_catalog.octet_length(idem_key)
            using errcode = 'invalid_parameter_value',
                  detail = 'The limit is 1024 bytes.';
    end if;
    -- bounded, so that every key is collected some day (and now() + ttl
    -- cannot overflow); checked before the general bound, whose message
    -- would name 100 years
    if ttl > interval '30 days' then
        raise exception 'ttl must be at most 30 days, got %', ttl
            using errcode = 'invalid_parameter_value',
                  hint = 'A key is kept, and deduplicates, until its ttl runs out; for longer windows, deduplicate in the consumer.';
    end if;
    perform pgque._check_interval('ttl', ttl);

    for attempt in 1 .. 2 loop
        -- a live claim: a duplicate, answered without writing anything
        select i.event_id, i.expires_at > now() into got, live
          from pgque.idem i
         where i.queue_id = q.queue_id and i.idem_key = idem_key
           and i.idem_role in (me, '-'::regrole)
         order by i.expires_at > now() desc
         limit 1;
        if got is not null and live then
            return query select got, true;
            return;
        end if;

        -- claim the key (or re-claim an expired one) for a new event id
        new_id := pg_catalog.nextval(q.queue_event_seq::regclass);
        got := null;
        insert into pgque.idem as i (queue_id, idem_role, idem_key, event_id, expires_at)
        values (q.queue_id, me, idem_key, new_id, now() + ttl)
        on conflict on constraint idem_pkey do update
           set event_id = excluded.event_id, expires_at = excluded.expires_at
         where i.expires_at <= now()
        returning i.event_id into got;
        if got is not null then
            -- PgQue's wiring: the queue lists the reaper among its extra
            -- maintenance hooks.  Written once per queue (the queue row we
            -- read says whether it is there), so the hot path stays
            -- read-only; maintenance reaps every queue's claims anyway and
            -- skips this hook (_maint_extra), so it never runs twice.
            if not coalesce(q.queue_extra_maint @> array['pgque.maint_idem'], false) then
                update pgque.queue qq
                   set queue_extra_maint = pg_catalog.array_append(qq.queue_extra_maint, 'pgque.maint_idem')
                 where qq.queue_id = q.queue_id
                   and not coalesce(qq.queue_extra_maint @> array['pgque.maint_idem'], false);
            end if;
            perform pgque._insert_event(queue_name, new_id, null, null, null, type_name, payload,
                                        partition_key, idem_key, null, null, true);
            return query select new_id, false;
            return;
        end if;
        -- someone else holds a live claim (we waited for it to commit):
        -- loop once more to read it
    end loop;
    raise exception 'could not claim or read idempotency key "%" of queue "%"', idem_key, queue_name
        using errcode = 'serialization_failure',
              hint = 'The claim expired while this call ran (a TTL shorter than the transaction); retry.';
end $$;

create function pgque.send_idem(queue_name text, type_name text, payload jsonb, idem_key text,
                                ttl interval default '1 hour', partition_key text default null)
returns table (event_id bigint, deduped boolean)
language sql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
    select * from pgque.send_idem(queue_name, type_name, payload::text, idem_key, ttl, partition_key)
$$;

-- One bounded batch of expired claims, of one queue or (NULL) all (the
-- maintenance worker runs each batch in its own transaction until one comes
-- back short).  -> rows removed.
create function pgque._maint_idem_batch(i_limit int4, i_queue_id int4 default null)
returns int4 language plpgsql
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    n int4;
begin
    delete from pgque.idem
     where ctid = any (array(select ctid from pgque.idem
                              where expires_at <= now()
                                and (i_queue_id is null or queue_id = i_queue_id)
                              limit i_limit));
    get diagnostics n = row_count;
    return n;
end $$;

-- Reap expired claims in bounded batches until none is left.  -> rows removed.
create function pgque._maint_idem_all(i_queue_id int4)
returns int4 language plpgsql as $$
declare
    n      int4 := 0;
    batch  int4;
begin
    loop
        batch := pgque._maint_idem_batch(10000, i_queue_id);
        n := n + batch;
        exit when batch < 10000;
    end loop;
    return n;
end $$;

create function pgque.maint_idem()
returns int4 language sql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
    select pgque._maint_idem_all(null)
$$;

create function pgque.maint_idem(i_queue_name text)
returns int4 language sql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
    select pgque._maint_idem_all((pgque._queue(i_queue_name)).queue_id)
$$;
