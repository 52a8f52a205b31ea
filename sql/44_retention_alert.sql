-- The retention_size alert (ADR 0067): a queue's retained events take more
-- room than the DBA allows (pgque_bgw.retention_size_limit).

-- pgque_bgw.retention_size_limit in bytes (its default is guc.c's)
create function pgque._retention_size_limit()
returns int8 language sql stable as $$
    select pgque._setting('pgque_bgw.retention_size_limit')::pg_catalog.int8
$$;

-- retention_size: a queue with a retention whose event tables hold more
-- than i_limit bytes (pgque_bgw.retention_size_limit; 0 or NULL: none).
-- One alert per queue; it clears when rotation has truncated it under the
-- limit, or the retention is removed.
create function pgque._retention_conditions(i_limit int8 default pgque._retention_size_limit())
returns setof pgque.alert_condition language sql stable
set search_path = pgque, pg_catalog, pg_temp as $$
    select 'retention_size'::text, r.queue_name, r.queue_name, null::text, null::int4,
           pg_catalog.jsonb_build_object(
               'bytes', r.bytes, 'limit_bytes', i_limit, 'retention', r.retention,
               'oldest_retained', r.oldest_time)
      from pgque._retention_state() r
     where i_limit > 0 and r.retention is not null and r.bytes > i_limit
$$;
