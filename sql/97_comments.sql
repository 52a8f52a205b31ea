-- pgque:replay-on-upgrade (COMMENT is idempotent; ADR 0019)
-- Comments on the schema, the catalog tables, the views and the types: one
-- line each, so that \dn+, \d+ and \dT+ say what each holds (issue #28).
-- The functions' and the documented views' come from docs/sql-reference.md
-- (sql/gen_comments.pl, appended after the parts); test/sql/35_comments.sql
-- lists any public object left without one.
comment on schema pgque is 'pgque_bgw: ordered append-only event log (PgQ model); the API, the catalog and the event tables';
comment on table pgque.queue is 'one row per queue: its event tables, rotation, ticker settings and sequences';
comment on table pgque.grantee_anchor is 'empty: every role named in a queue''s rights or a consumer''s users holds SELECT on it, so DROP ROLE refuses the role (ADR 0079)';
comment on table pgque.consumer is 'consumer names, shared by the queues that have a subscription of that name';
comment on table pgque.subscription is 'one row per (queue, consumer): the cursor (sub_last_tick), the open batch and the owning role';
comment on table pgque.tick is 'the ticks of each queue: the event-sequence position and the snapshot that slice the log into batches';
comment on table pgque.event_template is 'the shape every event table inherits: event_<queue_id> is a queue''s parent, event_<queue_id>_0..2 its rotating children';
comment on table pgque.retry_queue is 'events waiting to be redelivered to one subscription (ev_owner), with their time';
comment on table pgque.dead_letter is 'events that ran out of retries, with the reason, per consumer (dlq_inspect, dlq_replay, dlq_purge)';
comment on table pgque.delayed_event is 'events sent with send_at(), waiting for their delivery time';
comment on table pgque.idem is 'producer idempotency claims: one per (queue, sending role, key) until it expires';
comment on table pgque.config is 'PgQue''s settings row: tick_period_ms, the period of ticker_loop() in pg_cron and manual modes';
comment on table pgque.alert is 'alerts: one row from when a condition opens until it clears (the view alerts shows the open ones)';
comment on table pgque.maint_failure is 'failed maintenance steps, until the watchdog has reported them and the step succeeded again';
comment on table pgque.partition_consumer is 'partitioned consumers: the number of slots n, the owner, the buckets and the failure policy';
comment on table pgque.partition_resize is 'one row per partitioned consumer whose online resize is still draining to its boundary tick';
comment on table pgque.slot_batch is 'per partition slot and lease epoch: the batch and the position that epoch has acked';
comment on table pgque.blocked_key is 'failure policy pause: one row per blocked partition key, whose later events are withheld';
comment on table pgque.coop_member is 'the members (subconsumers) of cooperative consumer groups';
comment on table pgque.coop_window is 'cooperative groups: one row per tick window not yet finished, free or held by a member';
comment on table pgque.coop_fence is 'batches of cooperative members that were taken over, so that the fenced member''s ack is refused by name';
comment on table pgque.space_reserve_template is 'the shape of the queues'' disk-space reserves, freed when rotation finds no space to TRUNCATE';
comment on table pgque.state_seal is 'one-row seal that marks the queue state whole (absent while a restore loads it)';
comment on table pgque.unlogged_seal is 'unlogged: a row per unlogged queue whose events are still there (a crash empties it with the event tables)';
comment on table pgque.addressed_event is 'events an admin addressed to one subscription with insert_event_raw: a seek replays them where it drops acked retry copies (ADR 0105)';
comment on view pgque.alerts is 'open alerts: (alert_id, kind, queue_name, consumer, slot, opened_at, details)';
comment on type pgque.message is 'an event as receive() hands it out: msg_id, batch_id, type, payload, retry_count, created_at, extra1..4';
comment on type pgque.batch_info is 'what next_batch_info() returns: the batch id and its two ticks (ids, times, event sequences)';
comment on type pgque.alert_condition is 'one alert condition as the watchdog''s checks return it: kind, subject and details';
