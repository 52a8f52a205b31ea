-- 0.2.0 -> 0.3.0, hand-written steps: what "create or replace" of the
-- parts cannot do (ADR 0019).  Runs before every function of 0.3.0 is
-- replayed, so the functions find the columns and tables they use.  Each
-- step leaves the object exactly as a fresh 0.3.0 install makes it
-- (test/t/017_upgrade.pl compares them).  The released scripts of 0.1.0,
-- 0.2.0 and the 0.1.0 -> 0.2.0 step are frozen in sql/released/.
--
-- Before this file the update has run the guard, the roles and the
-- ownership hand-over (the parts marked first-on-upgrade, ADR 0042): schema
-- pgque holds nothing another role made and pgque_owner owns everything.
-- Function bodies are still the old ones here, and an old owner may have
-- replaced them: no step here may call a pgque function or change rows
-- (which fires the extension's triggers); data fixes go to the post step,
-- after every function is ours again.

-- Idempotency keys belong to the sending role (security issue #25 item 10,
-- sql/35_idem.sql).  The claims of 0.2.0 had no owner: they keep role 0,
-- which every role still matches until the claim expires (at most 30 days),
-- so an update never lets a duplicate through.
-- The column here, its value, NOT NULL and the new key in the post step
-- (a data fix, after every function is ours again).
alter table pgque.idem add column idem_role regrole;
alter table pgque.idem drop constraint idem_pkey;

-- ADR 0038: a blocked key's subscription is no longer deleted under it
-- (on delete restrict, was cascade): unsubscribing deletes the markers
-- explicitly, a resize's switch moves them.
alter table pgque.blocked_key drop constraint blocked_key_bk_sub_fkey;
alter table pgque.blocked_key add constraint blocked_key_bk_sub_fkey
    foreign key (bk_sub) references pgque.subscription (sub_id) on delete restrict;

-- The queue's DDL lock is the extension's own lock now, not an advisory
-- lock on (this class constant, queue id) that any role could take
-- (ADR 0040): the constant goes.
drop function pgque._queue_lock_class();

-- The watchdog's reads leave out the queues whose DDL lock it could not
-- take (ADR 0040): both take the list as a new last argument.
drop function pgque._slot_pending_all();
drop function pgque._alert_conditions(interval, interval, interval, interval, interval);

-- A slot's pending count stops at _slot_pending_cap() in every reader and
-- says so (ADR 0094): _consumer_state has a new last column, pending_capped.
drop function pgque._consumer_state();

-- Per-queue rights (ADR 0047): the columns here, their values, defaults
-- and NOT NULL in the post step (a data fix; a default given here would
-- leave a "missing value" in the catalog that a fresh install has not).
alter table pgque.queue
    add column queue_senders regrole[],
    add column queue_subscribers regrole[];

-- Per-consumer users (ADR 0058): the columns here, their values, defaults
-- and NOT NULL in the post step (as the queue rights above).  The checks
-- take the users as a new argument, and _register the users of a new slot.
alter table pgque.subscription add column sub_users regrole[];
alter table pgque.partition_consumer add column users regrole[];
drop function pgque._authorize(regrole, int4, text);
drop function pgque._register(pgque.queue, text, bigint, regrole);

-- partition_slot_status: pending_events is PgQue's figure (the queue's
-- events past the slot's cursor), the slot's share moves to a new last
-- column slot_pending_events (ADR 0058): a new return type.
drop view pgque.partition_slot_status;
drop function pgque.get_partition_slot_info();

-- pgque.config's key under PgQue's name too (issue #27: PgQue's tests read
-- pgque.config.singleton): a generated column, so that 0.2.0's dumps, which
-- copy the key as "one", still load.
alter table pgque.config add column singleton boolean generated always as (one) stored;

-- The per-slot count was kept only as a test oracle: regress 32 holds it
-- now; every reader counts with _slot_pending_all (issue #29).
drop function pgque._slot_pending(int4, int4, int4);

-- Settings are read through pgque._setting() (src/guc.c), whose defaults
-- are the only ones: the threshold reader loses its default argument.
drop function pgque._guc_interval(text, interval);

-- The lease ttl's bounds are checked once, in C: _slot_claim takes the
-- interval itself (was milliseconds, checked in SQL and again in C).
drop function pgque._slot_claim(int4, text, int4, text, int8);

-- One tick window per batch (ADR 0057): a plain consumer's opt-in to
-- merging waiting windows; its value, default and NOT NULL in the post
-- step.  A cooperative member no longer spans windows: _coop_take lost
-- its span argument.
alter table pgque.subscription add column sub_merge_windows boolean;
drop function pgque._coop_take(pgque.subscription, text, interval, bigint, interval, int4, interval);

-- Retention and replay (ADR 0067): the queue's retention and the switch
-- marks that tell which windows are whole, and the index that finds a
-- position by time.  The marks of a queue of 0.2.0 are set in the post step.
alter table pgque.queue
    add column queue_retention interval,
    add column queue_prev_step2 xid8,
    add column queue_truncated_xid xid8;
create index tick_time_idx on pgque.tick (tick_queue, tick_time);

-- The grantee anchor (ADR 0079): every role named in the rights lists
-- holds SELECT on it, so DROP ROLE refuses the role.  The extension's
-- roles get theirs from sql/90_grants.sql (replayed); 0.2.0 had no lists.
create table pgque.grantee_anchor ();

-- pgque.tick.tick_snapshot defaults to the current snapshot, as PgQ's
-- column does (PgQue's tests insert synthetic ticks without one).
alter table pgque.tick alter column tick_snapshot set default pg_catalog.pg_current_snapshot();

-- key_state_orphaned's switch_pending counts a drained resize only from the
-- watchdog pass after the one that found it drained (ADR 0038): the pass
-- notes when, here.
alter table pgque.partition_resize add column drained_seen_at timestamptz;

-- Unlogged queues (ADR 0068): the queue's flag and the figures of its last
-- reset (value, default and NOT NULL of the flag in the post step, as the
-- queue rights above), and the seal whose loss in a crash says the events
-- went with it (not dumped: sql/23_unlogged.sql).
alter table pgque.queue
    add column queue_unlogged boolean,
    add column queue_unlogged_reset jsonb;
create unlogged table pgque.unlogged_seal (
    queue_id   int4 primary key references pgque.queue (queue_id) on delete cascade,
    sealed_at  timestamptz not null default now()
);
-- The slot's receive opens in one statement and says where the batch's
-- events are (issue #30): _slot_receive_open returns more columns, and
-- _slot_window replaces _slot_next_batch.
drop function pgque._slot_receive_open(text, text, int4, int4, text, int4, boolean);
drop function pgque._slot_next_batch(text, text, bigint, int4);
-- A plain consumer's receive opens in one statement too (ADR 0121):
-- _plain_receive_open replaces _receive_open.
drop function pgque._receive_open(text, text, int4, boolean);

-- The events an admin addressed to one subscription with insert_event_raw
-- (ADR 0105): a seek keeps them where it drops the consumer's acked copies.
create table pgque.addressed_event (
    ae_sub    int4 not null references pgque.subscription (sub_id) on delete cascade,
    ae_ev_id  int8 not null,
    ae_txid   xid8 not null,
    primary key (ae_sub, ae_ev_id, ae_txid)
);
select pg_catalog.pg_extension_config_dump('pgque.addressed_event', '');

-- A slot batch's updates are HOT (ADR 0130): sb_batch loses its unique
-- index (the ids stay unique: batch_id_seq hands each out once).
alter table pgque.slot_batch drop constraint slot_batch_sb_batch_key;
-- _slot_finish finds the row by its key: it takes the subscription and
-- the epoch (the receive has them).
drop function pgque._slot_finish(bigint);
-- A pausing slot's read finds the row by its key too (ADR 0139):
-- _receive_paused takes the subscription and the epoch.
drop function pgque._receive_paused(bigint, int4, int4, int4);
