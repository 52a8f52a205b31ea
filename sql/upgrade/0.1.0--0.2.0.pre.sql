-- 0.1.0 -> 0.2.0, hand-written steps: what "create or replace" of the
-- parts cannot do (ADR 0019).  Runs before every function of 0.2.0 is
-- replayed, so the functions find the columns and tables they use.  Each
-- step leaves the object exactly as a fresh 0.2.0 install makes it
-- (test/t/017_upgrade.pl compares them).

-- Consumers belong to a role (docs/security.md, pgque._authorize).  0.1.0
-- let every pgque_reader use every consumer; the consumers it made are
-- given to pgque_reader, so the applications that use them keep working
-- after the update, as before.  An admin narrows one to its application's
-- role with UPDATE pgque.subscription SET sub_owner = ... (and
-- pgque.partition_consumer.owner for slot consumers): docs/install.md.
alter table pgque.subscription add column sub_owner regrole;
update pgque.subscription set sub_owner = 'pgque_reader'::regrole;
alter table pgque.subscription alter column sub_owner set not null;

alter table pgque.partition_consumer add column owner regrole;
update pgque.partition_consumer set owner = 'pgque_reader'::regrole;
alter table pgque.partition_consumer alter column owner set not null;

-- PgQue's settings row (set_tick_period_ms, ticker_loop's period).
create table pgque.config (
    one             boolean primary key default true check (one),
    tick_period_ms  int4 not null default 100
                    check (tick_period_ms between 1 and 1000 and 1000 % tick_period_ms = 0)
);
insert into pgque.config default values;
select pg_catalog.pg_extension_config_dump('pgque.config', '');

-- _register gained the owner argument: the old signature would stay beside
-- the new one as an overload.
drop function pgque._register(pgque.queue, text, bigint);

-- ticker_loop's period now defaults to NULL (read from pgque.config):
-- "create or replace" may not change a default, so it is made again (its
-- grant comes back with sql/90_grants.sql).
drop procedure pgque.ticker_loop(interval, interval);

-- Cooperative consumers (ADR 0017): the group's role and high-water mark
-- on its subscription, the members, the windows and the fences.
-- (no default while adding: a default on ADD COLUMN is kept as the
-- column's "missing value", which a fresh install does not have)
alter table pgque.subscription
    add column sub_role text check (sub_role in ('normal', 'coop_main')),
    add column sub_coop_hw bigint;
update pgque.subscription set sub_role = 'normal';
alter table pgque.subscription
    alter column sub_role set default 'normal',
    alter column sub_role set not null;

create table pgque.coop_member (
    cm_sub         int4 not null references pgque.subscription (sub_id) on delete cascade,
    cm_name        text not null,
    cm_registered  timestamptz not null default now(),
    primary key (cm_sub, cm_name)
);

create table pgque.coop_window (
    cw_sub         int4 not null references pgque.subscription (sub_id) on delete cascade,
    cw_prev_tick   bigint not null,
    cw_next_tick   bigint not null,
    cw_member      text,
    cw_batch       bigint unique,
    cw_claimed_at  timestamptz,
    cw_pos         bigint,
    cw_last        bigint,
    primary key (cw_sub, cw_prev_tick)
) with (fillfactor = 50);
create unique index coop_window_member_uq on pgque.coop_window (cw_sub, cw_member)
    where cw_member is not null;

create table pgque.coop_fence (
    cf_batch     bigint primary key,
    cf_sub       int4 not null references pgque.subscription (sub_id) on delete cascade,
    cf_member    text not null,
    cf_by        text not null,
    cf_by_batch  bigint not null,
    cf_at        timestamptz not null default now()
);
select pg_catalog.pg_extension_config_dump('pgque.coop_member', '');
select pg_catalog.pg_extension_config_dump('pgque.coop_window', '');
select pg_catalog.pg_extension_config_dump('pgque.coop_fence', '');

-- Partition slots keep their batch state per lease epoch (ADR 0023), not in
-- the subscription row.  An open batch of a slot ('#' is refused in other
-- consumer names) moves to an epoch-0 row, which the slot's next owner
-- adopts: it gets the same batch, as before the update.
create table pgque.slot_batch (
    sb_sub        int4 not null references pgque.subscription (sub_id) on delete cascade,
    sb_epoch      bigint not null,
    sb_last_tick  bigint not null,
    sb_batch      bigint unique,
    sb_next_tick  bigint,
    sb_pos        bigint,
    sb_last       bigint,
    primary key (sb_sub, sb_epoch)
) with (fillfactor = 50);
select pg_catalog.pg_extension_config_dump('pgque.slot_batch', '');
insert into pgque.slot_batch (sb_sub, sb_epoch, sb_last_tick, sb_batch, sb_next_tick, sb_pos, sb_last)
select s.sub_id, 0, s.sub_last_tick, s.sub_batch, s.sub_next_tick, s.sub_batch_pos, s.sub_batch_last
  from pgque.subscription s join pgque.consumer c on c.co_id = s.sub_consumer
 where s.sub_batch is not null and strpos(c.co_name, '#') > 0;
update pgque.subscription s
   set sub_batch = null, sub_next_tick = null, sub_batch_pos = null, sub_batch_last = null
  from pgque.consumer c
 where c.co_id = s.sub_consumer and s.sub_batch is not null and strpos(c.co_name, '#') > 0;
-- the slot functions' lease check now returns the epoch too, and the
-- shared receive takes it
drop function pgque._slot_guard(pgque.queue, text, int4, int4, text, boolean);
drop function pgque._receive(text, text, int4, int4, int4);

-- Failed maintenance steps, for the maint_failed alert (ADR 0024).
create table pgque.maint_failure (
    mf_subject       text primary key,   -- step, or step/queue
    mf_step          text not null,
    mf_queue         text,
    mf_error         text not null,
    mf_sqlstate      text not null,
    mf_failures      int8 not null default 1,
    mf_first_at      timestamptz not null default now(),
    mf_last_at       timestamptz not null default now(),
    mf_recovered_at  timestamptz,
    mf_reported      boolean not null default false
);

-- The parent of the queues' space reserves (ADR 0025).
create table pgque.space_reserve_template (r pg_catalog.bpchar(400));

-- Failure policy pause of partitioned consumers (ADR 0029): the policy,
-- the blocked keys.
alter table pgque.partition_consumer add column failure_policy text check (failure_policy in ('skip', 'pause'));
update pgque.partition_consumer set failure_policy = 'skip';
alter table pgque.partition_consumer
    alter column failure_policy set default 'skip',
    alter column failure_policy set not null;
create table pgque.blocked_key (
    bk_sub         int4 not null references pgque.subscription (sub_id) on delete cascade,
    bk_key         text not null,
    bk_head        bigint not null,
    bk_tick        bigint not null,
    bk_since       timestamptz not null default now(),
    bk_done_batch  bigint,
    bk_draining    boolean not null default false,
    primary key (bk_sub, bk_key)
);
create index blocked_key_done_idx on pgque.blocked_key (bk_done_batch) where bk_done_batch is not null;
select pg_catalog.pg_extension_config_dump('pgque.blocked_key', '');

-- Restores (ADR 0022): the seal, written here because a database being
-- updated is whole (a fresh install leaves it to the first create_queue).
create table pgque.state_seal (
    one                    boolean primary key default true check (one),
    sealed_at              timestamptz not null default now(),
    after_tick_queue       int4,
    after_tick_id          bigint,
    after_alert            bigint references pgque.alert (alert_id) on delete restrict,
    after_slots_queue      int4,
    after_slots_consumer   text,
    after_window_sub       int4,
    after_window_tick      bigint,
    after_slot_batch_sub   int4,
    after_slot_batch_epoch bigint,
    after_blocked_sub      int4,
    after_blocked_key      text,
    foreign key (after_tick_queue, after_tick_id) references pgque.tick (tick_queue, tick_id) on delete restrict,
    foreign key (after_slots_queue, after_slots_consumer) references pgque.partition_consumer (queue_id, co_name) on delete restrict,
    foreign key (after_window_sub, after_window_tick) references pgque.coop_window (cw_sub, cw_prev_tick) on delete restrict,
    foreign key (after_slot_batch_sub, after_slot_batch_epoch) references pgque.slot_batch (sb_sub, sb_epoch) on delete restrict,
    foreign key (after_blocked_sub, after_blocked_key) references pgque.blocked_key (bk_sub, bk_key) on delete restrict,
    check (pg_catalog.num_nonnulls(after_tick_queue, after_tick_id, after_alert, after_slots_queue,
                                   after_slots_consumer, after_window_sub, after_window_tick,
                                   after_slot_batch_sub, after_slot_batch_epoch,
                                   after_blocked_sub, after_blocked_key) = 0)
);
select pg_catalog.pg_extension_config_dump('pgque.state_seal', '');
insert into pgque.state_seal default values;

-- Online resize of a partitioned consumer (ADR 0030): one row per resize
-- still draining.
create table pgque.partition_resize (
    queue_id       int4 not null,
    co_name        text not null,
    from_n         int4 not null,
    to_n           int4 not null,
    boundary_tick  bigint not null,
    old_subs       int4[] not null,
    new_subs       int4[] not null,
    started_at     timestamptz not null default now(),
    primary key (queue_id, co_name),
    foreign key (queue_id, co_name) references pgque.partition_consumer (queue_id, co_name) on delete cascade
);
select pg_catalog.pg_extension_config_dump('pgque.partition_resize', '');
