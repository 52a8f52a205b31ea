-- Catalog tables.  Names and columns follow PgQ/PgQue; additions are marked.

create table pgque.queue (
    queue_id                  serial primary key,
    queue_name                text not null unique,
    queue_ntables             int4 not null default 3,
    queue_cur_table           int4 not null default 0,
    queue_rotation_period     interval not null default '2 hours',
    -- rotation bookkeeping: step1 = xid of the switch, step2 = first xid
    -- assigned after the switch committed (NULL until rotation step 2 ran)
    queue_switch_step1        xid8 not null default pg_catalog.pg_current_xact_id(),
    queue_switch_step2        xid8 default pg_catalog.pg_current_xact_id(),
    queue_switch_time         timestamptz not null default now(),
    queue_external_ticker     boolean not null default false,
    queue_disable_insert      boolean not null default false,
    queue_ticker_paused       boolean not null default false,
    queue_ticker_max_count    int4 not null default 500,
    queue_ticker_max_lag      interval not null default '3 seconds',
    queue_ticker_idle_period  interval not null default '1 minute',
    queue_max_retries         int4,
    queue_data_pfx            text not null,
    queue_event_seq           text not null,
    queue_tick_seq            text not null,
    queue_extra_maint         text[],
    -- addition: partition buckets (ADR 0013).  NULL: not chosen yet (the
    -- first subscribe_slot by an admin picks a count); 0: none; B: every
    -- child table has B bucket tables and keyed rows go to bucket
    -- hash(key) mod B.
    -- buckets_step1/2 play the part of switch_step1/2 for the change from an
    -- unbucketed to a bucketed layout: transactions from step2 on never
    -- write a child table's own (unbucketed) heap.
    queue_partition_buckets   int4,
    queue_buckets_step1       xid8,
    queue_buckets_step2       xid8,
    -- addition: per-queue rights (ADR 0047).  Members of these roles (and
    -- admins) may send to / subscribe to and receive from the queue;
    -- PUBLIC never.  pgque.grant_queue / revoke_queue change them.
    queue_senders             regrole[] not null default '{pgque_writer}',
    queue_subscribers         regrole[] not null default '{pgque_reader}',
    -- addition: retention and replay (ADR 0067).  queue_retention: events
    -- stay readable this long after their tick even when every cursor has
    -- passed them (NULL: none, rotation as PgQ's).  queue_prev_step2: step 2
    -- of the switch that made the previous table current, so the oldest
    -- table holds only events of xids below it and a window starting at or
    -- after it needs none of that table (NULL: no such switch yet, the
    -- oldest table is empty).  queue_truncated_xid: the newest xid of an
    -- event rotation truncated, so a tick whose snapshot's xmin is above it
    -- starts a window that is whole (NULL: no event was truncated yet).
    queue_retention           interval,
    queue_prev_step2          xid8,
    queue_truncated_xid       xid8,
    -- addition: unlogged queues (ADR 0068).  queue_unlogged: the event
    -- tables are UNLOGGED (emptied by a crash; the seal in
    -- pgque.unlogged_seal says whether they still hold their events).
    -- queue_unlogged_reset: the figures of the last reset after a crash
    -- (the unlogged_reset alert's details), NULL before any.
    queue_unlogged            boolean not null default false,
    queue_unlogged_reset      jsonb
);

-- The grantee anchor (ADR 0079): a table with no column and no row.  Every
-- role named in a regrole list (queue_senders, queue_subscribers,
-- sub_users, partition_consumer.users) holds SELECT on it, granted by
-- grant_queue/grant_consumer, so DROP ROLE refuses the role ("privileges
-- for table pgque.grantee_anchor") and pg_dump writes the grant by name.
-- A listed role counts only while it holds that grant itself
-- (pgque._role_anchored): an OID a dropped role left grants nothing, in
-- this cluster or in one a dump is restored into.
create table pgque.grantee_anchor ();

create table pgque.consumer (
    co_id    serial primary key,
    co_name  text not null unique
);

-- One row per (queue, consumer): the cursor (sub_last_tick) and the open batch.
create table pgque.subscription (
    sub_id          serial not null unique,
    sub_queue       int4 not null references pgque.queue (queue_id),
    sub_consumer    int4 not null references pgque.consumer (co_id),
    sub_last_tick   bigint not null,
    sub_active      timestamptz not null default now(),
    sub_batch       bigint unique,
    sub_next_tick   bigint,
    -- addition: receive() progress inside the open tick window, so that a
    -- window larger than max_return is handed out in parts and none is lost
    sub_batch_pos   bigint,
    sub_batch_last  bigint,
    -- addition: the role that subscribed the consumer; only its members and
    -- admins may use or change the subscription (pgque._authorize)
    sub_owner       regrole not null,
    -- addition: cooperative consumers (ADR 0017).  'coop_main': a group
    -- whose tick windows its members take (pgque.coop_window);
    -- sub_coop_hw: every window up to this tick has been cut.
    sub_role        text not null default 'normal' check (sub_role in ('normal', 'coop_main')),
    sub_coop_hw     bigint,
    -- addition: roles that may use the consumer besides its owner (ADR
    -- 0058): members of these roles holding the queue's subscribe right.
    -- A consumer an admin subscribes starts with {pgque_reader} (PgQue's
    -- migration-role pattern), any other with {} (private to its owner);
    -- grant_consumer / revoke_consumer change it.  A partition slot's copy
    -- follows its partitioned consumer's (partition_consumer.users).
    sub_users       regrole[] not null default '{}',
    -- addition: receive() of this plain consumer may merge several waiting
    -- tick windows into one batch, up to about max_return events (an
    -- opt-in, pgque.set_consumer_config; ADR 0057).  Off: one tick window
    -- per batch, as PgQ and PgQue.
    sub_merge_windows boolean not null default false,
    primary key (sub_queue, sub_consumer)
) with (fillfactor = 50);

-- addition: the members (subconsumers) of a cooperative group.  Whether a
-- member is alive is not here but in shared memory (src/coop.c).
create table pgque.coop_member (
    cm_sub         int4 not null references pgque.subscription (sub_id) on delete cascade,
    cm_name        text not null,
    cm_registered  timestamptz not null default now(),
    primary key (cm_sub, cm_name)
);

-- addition: the tick windows of a cooperative group between its cursor and
-- its high-water mark, one row each: free (cw_member NULL) or held by a
-- member as batch cw_batch.  A finished window's row is deleted; the group
-- cursor is the start of the oldest row left (ADR 0017).
create table pgque.coop_window (
    cw_sub         int4 not null references pgque.subscription (sub_id) on delete cascade,
    cw_prev_tick   bigint not null,
    cw_next_tick   bigint not null,
    cw_member      text,
    cw_batch       bigint unique,
    cw_claimed_at  timestamptz,
    -- receive progress inside the window, as sub_batch_pos/last (ADR 0003)
    cw_pos         bigint,
    cw_last        bigint,
    primary key (cw_sub, cw_prev_tick)
) with (fillfactor = 50);
-- one window per member at a time
create unique index coop_window_member_uq on pgque.coop_window (cw_sub, cw_member)
    where cw_member is not null;

-- addition: batches of cooperative members that were taken over, so that
-- the fenced member's ack or nack is refused by name (PQ003), not as an
-- unknown batch.  Kept for a day (maintenance).
create table pgque.coop_fence (
    cf_batch     bigint primary key,
    cf_sub       int4 not null references pgque.subscription (sub_id) on delete cascade,
    cf_member    text not null,
    cf_by        text not null,
    cf_by_batch  bigint not null,
    cf_at        timestamptz not null default now()
);

-- addition: the batch state of partition slots, one row per lease epoch
-- (ADR 0023).  A slot owner's receive and ack lock and write only the row
-- of its own epoch, never the subscription row, so a takeover never waits
-- for a fenced (frozen) owner's open transaction.  sb_last_tick is what
-- this epoch has acked (its cursor); the slot's cursor is the greatest of
-- these and sub_last_tick, into which every ack folds (skipping a locked
-- row: the next ack folds it).  No index holds an updated column: the
-- open, the mark and the finish of every part are HOT updates (ADR 0130),
-- which insert nothing into the primary key's few leaves that all the
-- slots' workers read.  The row is found by (sb_sub, sb_epoch) wherever the
-- caller knows them; by the batch id alone (an ack or a read by batch id)
-- through a scan of this small table.
create table pgque.slot_batch (
    sb_sub        int4 not null references pgque.subscription (sub_id) on delete cascade,
    sb_epoch      bigint not null,
    sb_last_tick  bigint not null,
    -- unique by construction, with no index (ADR 0130: the row's
    -- updates stay HOT): every id comes from batch_id_seq, and a row made
    -- at another epoch's place takes a new one (_slot_batch_row)
    sb_batch      bigint,
    sb_next_tick  bigint,
    -- receive progress inside the window, as sub_batch_pos/last (ADR 0003)
    sb_pos        bigint,
    sb_last       bigint,
    primary key (sb_sub, sb_epoch)
) with (fillfactor = 50);

create table pgque.tick (
    tick_queue      int4 not null,
    tick_id         bigint not null,
    tick_time       timestamptz not null default now(),
    -- PgQ's default: a tick inserted by hand (PgQue's tests make
    -- synthetic ticks) records the current snapshot; ticker() sets its own
    tick_snapshot   pg_catalog.pg_snapshot not null default pg_catalog.pg_current_snapshot(),
    tick_event_seq  bigint not null,
    primary key (tick_queue, tick_id)
);
-- a position by time: seek() and the retention check of rotation (ADR 0067)
create index tick_time_idx on pgque.tick (tick_queue, tick_time);

create sequence pgque.batch_id_seq;

-- Every event table inherits this shape: pgque.event_<queue_id> is the
-- queue's parent, pgque.event_<queue_id>_0..2 the rotating children.
create table pgque.event_template (
    ev_id      bigint not null,
    ev_time    timestamptz not null default now(),
    ev_txid    xid8 not null default pg_catalog.pg_current_xact_id(),
    ev_owner   int4,
    ev_retry   int4,
    ev_type    text,
    ev_data    text,
    ev_extra1  text,
    ev_extra2  text,
    ev_extra3  text,
    ev_extra4  text
);

-- Events waiting to be redelivered to one subscription (ev_owner = sub_id).
create table pgque.retry_queue (
    ev_retry_after  timestamptz not null,
    ev_queue        int4 not null,
    like pgque.event_template,
    primary key (ev_owner, ev_id)
);
create index retry_queue_due_idx on pgque.retry_queue (ev_retry_after);

-- addition: events sent with send_at(), waiting for their delivery time.
-- The event id is allocated at send time, so send_at() returns it.
create table pgque.delayed_event (
    de_queue       int4 not null references pgque.queue (queue_id) on delete cascade,
    de_deliver_at  timestamptz not null,
    like pgque.event_template,
    primary key (de_queue, ev_id)
);
create index delayed_event_due_idx on pgque.delayed_event (de_deliver_at);

create table pgque.dead_letter (
    dl_id           bigserial primary key,
    dl_queue_id     int4 not null references pgque.queue (queue_id) on delete cascade,
    dl_consumer_id  int4 not null references pgque.consumer (co_id) on delete cascade,
    dl_time         timestamptz not null default now(),
    dl_reason       text,
    ev_id           bigint not null,
    ev_time         timestamptz not null,
    ev_txid         xid8,
    ev_owner        int4,
    ev_retry        int4,
    ev_type         text,
    ev_data         text,
    ev_extra1       text,
    ev_extra2       text,
    ev_extra3       text,
    ev_extra4       text
);
create index dead_letter_queue_time_idx on pgque.dead_letter (dl_queue_id, dl_time);
create unique index dead_letter_event_uq on pgque.dead_letter (dl_queue_id, dl_consumer_id, ev_id);

-- What receive() and friends return.
create type pgque.message as (
    msg_id       bigint,
    batch_id     bigint,
    type         text,
    payload      text,
    retry_count  int4,
    created_at   timestamptz,
    extra1       text,
    extra2       text,
    extra3       text,
    extra4       text
);

-- PgQue's settings row: tick_period_ms is the period of ticker_loop(), the
-- scheduler of the pg_cron and manual modes (the workers tick on commit).
create table pgque.config (
    -- the key that keeps this table to one row (0.2.0's name: its dumps
    -- copy it by this name)
    one             boolean primary key default true check (one),
    tick_period_ms  int4 not null default 100
                    check (tick_period_ms between 1 and 1000 and 1000 % tick_period_ms = 0),
    -- PgQue's name of the key (its tests read it); generated, so that no
    -- dump carries it and 0.2.0's dumps load unchanged
    singleton       boolean generated always as (one) stored
);
insert into pgque.config default values;

-- One row, whatever loads it: a restore's COPY brings the dumped row while
-- its CREATE EXTENSION has inserted the default one already, and the loaded
-- values replace the default instead of failing on the key (ADR 0022).
create function pgque._config_one_row() returns trigger language plpgsql
set search_path = pgque, pg_catalog, pg_temp as $$
begin
    update pgque.config set tick_period_ms = new.tick_period_ms where one;
    if found then
        return null;
    end if;
    return new;
end $$;
create trigger config_one_row before insert on pgque.config
    for each row execute function pgque._config_one_row();

-- pg_dump keeps the queue state with the data (event tables are not
-- extension members, so they are dumped as ordinary tables).
select pg_catalog.pg_extension_config_dump('pgque.queue', '');
select pg_catalog.pg_extension_config_dump('pgque.queue_queue_id_seq', '');
select pg_catalog.pg_extension_config_dump('pgque.consumer', '');
select pg_catalog.pg_extension_config_dump('pgque.consumer_co_id_seq', '');
select pg_catalog.pg_extension_config_dump('pgque.subscription', '');
select pg_catalog.pg_extension_config_dump('pgque.subscription_sub_id_seq', '');
select pg_catalog.pg_extension_config_dump('pgque.coop_member', '');
select pg_catalog.pg_extension_config_dump('pgque.coop_window', '');
select pg_catalog.pg_extension_config_dump('pgque.coop_fence', '');
select pg_catalog.pg_extension_config_dump('pgque.slot_batch', '');
select pg_catalog.pg_extension_config_dump('pgque.tick', '');
select pg_catalog.pg_extension_config_dump('pgque.batch_id_seq', '');
select pg_catalog.pg_extension_config_dump('pgque.retry_queue', '');
select pg_catalog.pg_extension_config_dump('pgque.delayed_event', '');
select pg_catalog.pg_extension_config_dump('pgque.dead_letter', '');
select pg_catalog.pg_extension_config_dump('pgque.dead_letter_dl_id_seq', '');
select pg_catalog.pg_extension_config_dump('pgque.config', '');

-- Producers cache queue rows per backend (src/queue_cache.c); every change of
-- pgque.queue sends a relcache invalidation that flushes those caches.
create function pgque._queue_changed() returns trigger
language c as 'MODULE_PATHNAME', 'pgque_queue_changed';
create trigger queue_changed after insert or update or delete or truncate on pgque.queue
    for each statement execute function pgque._queue_changed();
