-- The unlogged_reset alert (ADR 0068): an unlogged queue lost its events
-- in a crash and was reset (sql/23_unlogged.sql).

-- pgque_bgw.unlogged_reset_alert_for (its default is guc.c's)
create function pgque._unlogged_reset_alert_for()
returns interval language sql stable as $$
    select pgque._guc_interval('pgque_bgw.unlogged_reset_alert_for')
$$;

-- unlogged_reset: an unlogged queue was reset after a crash (or a restore,
-- or a promotion) within pgque_bgw.unlogged_reset_alert_for.  The reset
-- opens it at once (_unlogged_reset); this keeps it open that long.
create function pgque._unlogged_conditions(i_for interval default pgque._unlogged_reset_alert_for())
returns setof pgque.alert_condition language sql stable
set search_path = pgque, pg_catalog, pg_temp as $$
    select 'unlogged_reset'::text, q.queue_name, q.queue_name, null::text, null::int4, q.queue_unlogged_reset
      from pgque.queue q
     where q.queue_unlogged_reset is not null
       and (q.queue_unlogged_reset->>'reset_at')::timestamptz > pg_catalog.now() - i_for
$$;
