-- Retention (ADR 0067): how long a queue keeps events its cursors have
-- passed, which windows are still whole (where a replay may start), and
-- what the retained span costs (status(), metrics(), the retention_size
-- alert).  Rotation asks _retention_passed (sql/70_maint.sql); seek() and
-- subscribe(..., start) position cursors (sql/52_seek.sql).

-- Retention (ADR 0067): may the oldest table, the one rotation step 1
-- truncates, go?  Yes when it holds no event, or when the newest tick at
-- or before now() - retention sees its newest xid finished: every event of
-- the table was ticked by then.  (The table is written no more: the switch
-- after it is complete.)  No retention: yes.  Two index probes (the
-- table's ev_txid, tick_time_idx).
create function pgque._retention_passed(q pgque.queue)
returns boolean language plpgsql stable as $$
declare
    newest  xid8;
begin
    if q.queue_retention is null then
        return true;
    end if;
    execute pg_catalog.format('select ev_txid from pgque.%I order by ev_txid desc limit 1',
                              pgque._event_table(q.queue_id, (q.queue_cur_table + 1) % q.queue_ntables, null))
       into newest;
    return newest is null
        or coalesce((select pg_catalog.pg_snapshot_xmin(t.tick_snapshot) > newest
                       from pgque.tick t
                      where t.tick_queue = q.queue_id
                        and t.tick_time <= pg_catalog.now() - q.queue_retention
                      order by t.tick_time desc limit 1), false);
end $$;

-- The earliest tick a cursor may stand at so that every window after it is
-- whole: the first one whose snapshot sees the xid of every truncated event
-- as finished (none truncated yet: the first tick kept).  A window
-- reaching back before the previous switch reads every table
-- (_event_source).
create function pgque._earliest_tick(q pgque.queue)
returns pgque.tick language sql stable as $$
    select t.* from pgque.tick t
     where t.tick_queue = q.queue_id
       and (q.queue_truncated_xid is null
            or pg_catalog.pg_snapshot_xmin(t.tick_snapshot) > q.queue_truncated_xid)
     order by t.tick_id limit 1
$$;

-- Bytes on disk of a queue's event tables: the parent, the child tables,
-- their partition buckets, with indexes and TOAST.
create function pgque._queue_bytes(q pgque.queue)
returns int8 language sql stable as $$
    select coalesce(sum(pg_catalog.pg_total_relation_size(t)), 0)::int8
      from pgque._queue_event_tables(q.queue_id) t
$$;

-- One row per queue: its retention, where the retained span starts (the
-- earliest tick a replay may start at, and its time) and the bytes its
-- event tables hold.  The one source of status(), metrics() and the
-- retention_size alert.
create function pgque._retention_state(
    out queue_id int4, out queue_name text, out retention interval,
    out oldest_tick_id bigint, out oldest_time timestamptz, out bytes int8)
returns setof record language sql stable as $$
    select q.queue_id, q.queue_name, q.queue_retention, e.tick_id, e.tick_time, pgque._queue_bytes(q)
      from pgque.queue q
      left join lateral (select * from pgque._earliest_tick(q)) e on true
     order by q.queue_name
$$;
