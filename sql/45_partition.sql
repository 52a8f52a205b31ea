-- Partition keys (SPEC §3): events of one key are consumed in order by one
-- worker at a time, different keys in parallel, over N fixed slots.  Each
-- slot k of consumer C is its own subscription "C#k/N"; N is persisted per
-- (queue, consumer).  Slot ownership (leases with epoch fencing) lives in
-- shared memory (src/slots.c): claims and renewals write no row and no WAL.

create table pgque.partition_consumer (
    queue_id  int4 not null references pgque.queue (queue_id) on delete cascade,
    co_name   text not null,
    n         int4 not null check (n >= 1),
    -- the role that subscribed the first slot: it owns every slot
    -- subscription "<co_name>#<k>/<n>" (pgque._authorize)
    owner     regrole not null,
    -- what a nack does to the key's later events (ADR 0029): 'skip' they
    -- pass the retried one; 'pause' they wait for it (sql/46_pause.sql)
    failure_policy text not null default 'skip' check (failure_policy in ('skip', 'pause')),
    -- roles that may use the consumer besides its owner (ADR 0058), copied
    -- to every slot subscription's sub_users
    users     regrole[] not null default '{}',
    primary key (queue_id, co_name)
);
select pg_catalog.pg_extension_config_dump('pgque.partition_consumer', '');

-- Epochs only grow, across takeovers, restarts and failovers: a sequence is
-- WAL-logged ahead of use and replicated.
create sequence pgque.slot_epoch_seq;
select pg_catalog.pg_extension_config_dump('pgque.slot_epoch_seq', '');

-- _slot_claim checks the ttl (1 second to 1 day): the one check, in C.
create function pgque._slot_claim(i_queue_id int4, i_consumer text, i_slot int4, i_worker text, i_ttl interval)
returns bigint language c strict as 'MODULE_PATHNAME', 'pgque_slot_claim_ttl_sql';
-- the lease ttl's bounds (src/slot_sql.c, the one check), for a caller that
-- may claim no slot at all (claim_any_slot)
create function pgque._lease_ttl_check(i_ttl interval)
returns void language c strict as 'MODULE_PATHNAME', 'pgque_lease_ttl_check_sql';
create function pgque._slot_release(i_queue_id int4, i_consumer text, i_slot int4, i_worker text)
returns boolean language c strict as 'MODULE_PATHNAME', 'pgque_slot_release_sql';
create function pgque._slot_check(i_queue_id int4, i_consumer text, i_slot int4, i_worker text,
                                  i_is_ack boolean, i_queue_name text)
returns bigint language c strict as 'MODULE_PATHNAME', 'pgque_slot_check_sql';
create function pgque._slot_forget(i_queue_id int4, i_consumer text)
returns int4 language c as 'MODULE_PATHNAME', 'pgque_slot_forget_sql';
create function pgque._slot_leases(
    out queue_id int4, out consumer text, out slot int4, out owner text, out lease_until timestamptz,
    out ttl_ms int8, out epoch int8, out claimed_at timestamptz, out last_receive timestamptz,
    out last_ack timestamptz, out claims int8, out receives int8, out acks int8)
returns setof record language c as 'MODULE_PATHNAME', 'pgque_slot_leases_sql';

create function pgque._slot_lease_count_all()
returns int4 language c as 'MODULE_PATHNAME', 'pgque_slot_count_all_sql';

create function pgque._slot_name(i_consumer text, i_slot int4, i_n int4)
returns text language sql immutable as $$
    select i_consumer operator(pg_catalog.||) '#' operator(pg_catalog.||) i_slot::pg_catalog.text
           operator(pg_catalog.||) '/' operator(pg_catalog.||) i_n::pg_catalog.text
$$;

-- Every slot of every partitioned consumer, with the consumer id of its
-- subscription (NULL: none): the one slot list of the watchdog,
-- _slot_pending_all and get_partition_slot_info.  The names are formed
-- first and joined with the consumers by hash: joined inside a larger join,
-- the planner formed them once per subscription (a million rows at 1,000
-- slot subscriptions, 0.4 s a watchdog pass for each of three queries).
create function pgque._slot_list(out queue_id int4, out consumer text, out n int4, out slot int4,
                                 out co_id int4)
returns setof record language sql stable as $$
    with names as materialized (
        select pc.queue_id, pc.co_name, pc.n, k, pgque._slot_name(pc.co_name, k, pc.n) as name
          from pgque.partition_consumer pc
         cross join lateral pg_catalog.generate_series(0, pc.n - 1) k)
    select nm.queue_id, nm.co_name, nm.n, nm.k, c.co_id
      from names nm
      left join pgque.consumer c on c.co_name operator(pg_catalog.=) nm.name
$$;

-- A worker id: not NULL, not empty, at most 64 bytes.
create function pgque._check_worker(i_worker text)
returns void language plpgsql as $$
begin
    perform pgque._check_name('worker', i_worker, 64);
    -- not stored in a table: a lease lives in shared memory, which a
    -- restart (the update's) empties, so every call may check it
    perform pgque._check_new_name('worker', i_worker);
end $$;

-- The persisted N of a partitioned consumer, after checking that the caller
-- may use the consumer, and the caller's N (if given) and the slot number
-- against it.  Every slot operation starts here, so the owner check comes
-- before any lease is touched.  Wrong N is refused before any lease check,
-- so it is never silently misrouted.
create function pgque._partitioned(q pgque.queue, i_consumer text, i_n int4, i_slot int4)
returns int4 language plpgsql as $$
declare
    pc pgque.partition_consumer;
    pn int4;
begin
    perform pgque._user_consumer_name(i_consumer);
    perform pgque._check_not_null('slot', i_slot);
    select * into pc from pgque.partition_consumer p
     where p.queue_id = q.queue_id and p.co_name = i_consumer;
    if not found then
        raise exception 'consumer "%" is not a partitioned consumer of queue "%"', i_consumer, q.queue_name
            using errcode = 'undefined_object',
                  hint = 'Subscribe its slots with pgque.subscribe_slot().';
    end if;
    perform pgque._authorize(pc.owner, pc.users, q.queue_id, i_consumer);
    pn := pc.n;
    if i_n is not null and i_n <> pn then
        -- the new n of a resize still draining: retry later (ADR 0030)
        perform pgque._resize_gate(q, i_consumer, i_n);
        raise exception 'consumer "%" of queue "%" is pinned to n=%, not n=%', i_consumer, q.queue_name, pn, i_n
            using errcode = 'invalid_parameter_value',
                  hint = 'Its n may have changed (pgque.resize_partitioned): read n from pgque.partition_slot_status and claim again.';
    end if;
    if i_slot < 0 or i_slot >= pn then
        raise exception 'slot % is out of range 0..% for consumer "%"', i_slot, pn - 1, i_consumer
            using errcode = 'invalid_parameter_value',
                  hint = 'Its n may have changed (pgque.resize_partitioned): read n from pgque.partition_slot_status.';
    end if;
    return pn;
end $$;

-- subscribe_slot(queue, consumer, slot, n): subscribe slot k of n.  The
-- first call pins n for (queue, consumer) and makes the caller the owner of
-- every slot; another n is refused, another role too; repeating a call is
-- harmless.
create function pgque.subscribe_slot(queue_name text, consumer_name text, slot int4, n int4)
returns void language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
begin
    perform pgque._subscribe_slot(queue_name, consumer_name, slot, n);
end $$;

-- subscribe_slot's work -> the slot's subscription when this call made it,
-- NULL when it was there (subscribed before, or by a concurrent call that
-- committed first): subscribe_partitioned positions only what it made
-- (ADR 0089).
create function pgque._subscribe_slot(queue_name text, consumer_name text, slot int4, n int4)
returns int4 language plpgsql as $$
declare
    q   pgque.queue;
    pn  int4;
    own regrole;
    usr regrole[];
    fresh boolean;
    made int4;
begin
    q := pgque._queue(queue_name);
    perform pgque._user_consumer_name(consumer_name);
    if (pgque._coop_group(q, consumer_name)).sub_id is not null then
        raise exception 'consumer "%" of queue "%" is a cooperative consumer', consumer_name, queue_name
            using errcode = 'wrong_object_type',
                  detail = 'A consumer is either partitioned (ordered per key) or cooperative (no order), not both.',
                  hint = 'Use another consumer name for the partitioned consumer.';
    end if;
    perform pgque._check_not_null('n', n);
    perform pgque._check_not_null('slot', slot);
    if n < 1 or n > 1024 then
        raise exception 'n must be between 1 and 1024, got %', n
            using errcode = 'invalid_parameter_value';
    end if;
    if slot < 0 or slot >= n then
        raise exception 'slot % is out of range 0..%', slot, n - 1
            using errcode = 'invalid_parameter_value';
    end if;
    if not exists (select from pgque.partition_consumer p where p.queue_id = q.queue_id and p.co_name = consumer_name) then
        perform pgque._check_new_name('consumer', consumer_name);
    end if;
    insert into pgque.partition_consumer as pc (queue_id, co_name, n, owner, users)
    values (q.queue_id, consumer_name, n, pgque._caller(), pgque._default_users())
    on conflict (queue_id, co_name) do update set n = pc.n
    returning pc.n, pc.owner, pc.users, pc.xmax operator(pg_catalog.=) '0'::pg_catalog.xid
      into pn, own, usr, fresh;
    -- a new consumer's owner is anchored (ADR 0071); an existing one's is
    -- not: the role holding a restored bare OID must not anchor itself
    if fresh then
        perform pgque._anchor_owner(own);
    end if;
    perform pgque._authorize(own, usr, q.queue_id, consumer_name);
    perform pgque._resize_refuse(q, consumer_name, 'subscribe_slot');
    if pn <> n then
        raise exception 'consumer "%" of queue "%" is pinned to n=%, not n=%', consumer_name, queue_name, pn, n
            using errcode = 'invalid_parameter_value',
                  hint = 'Unsubscribe every slot first to choose another n.';
    end if;
    if pgque._register(q, pgque._slot_name(consumer_name, slot, n), null, own, usr) = 1 then
        select s.sub_id into made
          from pgque.subscription s join pgque.consumer c on c.co_id = s.sub_consumer
         where s.sub_queue = q.queue_id and c.co_name = pgque._slot_name(consumer_name, slot, n);
    end if;
    -- the queue's first partitioned consumer subscribed by an admin chooses
    -- its partition buckets (ADR 0013): a multiple of n, at least 32, so
    -- that n and its divisors read only their own buckets.  A layout is the
    -- admins' choice, fixed for good: a reader's subscribe leaves the queue
    -- unbucketed (slots then read the filtered child tables), and takes no
    -- lock on the queue row: a reader's subscribe left open in a
    -- transaction must not hold the queue's ticks (ADR 0040).
    if pgque._caller_is_admin() then
        select * into q from pgque.queue where queue_id = q.queue_id for update;
        if q.queue_partition_buckets is null and n between 2 and 64 then
            perform pgque._create_buckets(q, n * ((32 + n - 1) / n));
        end if;
    end if;
    return made;
end $$;

-- unsubscribe_slot(queue, consumer, slot): the last slot frees n.
create function pgque.unsubscribe_slot(queue_name text, consumer_name text, slot int4)
returns void language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    q   pgque.queue;
    pn  int4;
    usr regrole[];
begin
    q := pgque._queue(queue_name);
    pn := pgque._partitioned(q, consumer_name, null, slot);
    -- the owner's act (ADR 0058)
    perform pgque._authorize(pc.owner, null, q.queue_id, consumer_name)
       from pgque.partition_consumer pc where pc.queue_id = q.queue_id and pc.co_name = consumer_name;
    perform pgque._resize_refuse(q, consumer_name, 'unsubscribe_slot');
    if pgque._unregister(q, pgque._slot_name(consumer_name, slot, pn)) = 0 then
        raise exception 'slot % of consumer "%" is not subscribed to queue "%"', slot, consumer_name, queue_name
            using errcode = 'undefined_object';
    end if;
    -- exact names of this consumer's slots (a pattern would match others)
    if not exists (select 1 from pg_catalog.generate_series(0, pn - 1) k
                     join pgque.consumer c on c.co_name = pgque._slot_name(consumer_name, k, pn)
                     join pgque.subscription s on s.sub_consumer = c.co_id
                    where s.sub_queue = q.queue_id) then
        delete from pgque.partition_consumer where queue_id = q.queue_id and co_name = consumer_name
        returning users || owner into usr;
        perform pgque._anchor_release(usr);     -- ADR 0079
        perform pgque._slot_forget(q.queue_id, consumer_name);
    end if;
end $$;

-- The checks of a claim (claim_slot, claim_any_slot), in this order: a
-- drained resize switches to the new layout (ADR 0030), the caller may use
-- the consumer, the slot is in range, the worker id and the ttl are valid.
-- -> the ttl in milliseconds, as _slot_claim takes it.
create function pgque._claim_check(q pgque.queue, i_consumer text, i_slot int4, i_worker text,
                                   i_ttl interval)
returns void language plpgsql as $$
begin
    -- a drained resize switches to the new layout here (ADR 0030)
    if (pgque._resize_of(q.queue_id, i_consumer)).to_n is not null then
        perform pgque._partitioned(q, i_consumer, null, 0);
        perform pgque._resize_complete(q.queue_id, i_consumer);
    end if;
    perform pgque._partitioned(q, i_consumer, null, i_slot);
    perform pgque._check_worker(i_worker);
    perform pgque._check_not_null('ttl', i_ttl);
    -- the ttl's bounds are checked in C (src/slot_sql.c), once
    perform pgque._lease_ttl_check(i_ttl);
end $$;

-- claim_slot: take a free or expired slot (new, larger epoch), renew one's
-- own (same epoch), or get NULL when another worker holds a live lease.
create function pgque.claim_slot(queue_name text, consumer_name text, slot int4, worker text,
                                 ttl interval default '30 seconds')
returns bigint language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    q pgque.queue;
begin
    q := pgque._queue(queue_name);
    perform pgque._claim_check(q, consumer_name, slot, worker, ttl);
    return pgque._slot_claim(q.queue_id, consumer_name, slot, worker, ttl);
end $$;

-- The slots claim_any_slot may take for i_worker, the most behind first:
-- free, expired or i_worker's own lease, whose cursor tick is older than
-- the queue's latest tick (than a draining resize's boundary, for the old
-- layout).  Any later tick counts, not only one that moved the event
-- sequence: a retried event (and a paused key's re-queued one) comes back
-- under its old ev_id.  The cursor tick orders them: a slot whose cursor
-- is older has its oldest pending event (if it has one of its own) no
-- later than one whose cursor is newer.  It reads the ticks, the
-- subscriptions and the leases, never an event table (ADR 0075).
create function pgque._slot_candidates(q pgque.queue, i_consumer text, i_n int4, i_worker text)
returns setof int4 language sql stable as $$
    select k.k
      from pg_catalog.generate_series(0, i_n - 1) k(k)
      join pgque.consumer c on c.co_name = pgque._slot_name(i_consumer, k.k, i_n)
      join pgque.subscription s on s.sub_queue = q.queue_id and s.sub_consumer = c.co_id
      left join pgque._slot_leases() l
        on l.queue_id = q.queue_id and l.consumer = i_consumer and l.slot = k.k
     where pgque._slot_cursor(s) < (select t.tick_id from pgque.tick t where t.tick_queue = s.sub_queue
                                       and t.tick_id <= coalesce(pgque._resize_cap(s.sub_id), t.tick_id)
                                     order by t.tick_id desc limit 1)
       and (l.owner is null or l.lease_until <= pg_catalog.clock_timestamp() or l.owner = i_worker)
     order by pgque._slot_cursor(s), k.k
$$;

-- claim_any_slot: claim, as claim_slot would, the free or expired slot
-- with the oldest pending event -> (slot, n, epoch), all NULL when no slot
-- has work that another worker does not hold.  A claim lost to a racing
-- worker tries the next candidate.
create function pgque.claim_any_slot(queue_name text, consumer_name text, worker text,
                                     ttl interval default '30 seconds',
                                     out slot int4, out n int4, out epoch bigint)
returns record language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    q   pgque.queue;
    pn  int4;
    k   int4;
    e   bigint;
begin
    q := pgque._queue(queue_name);
    perform pgque._claim_check(q, consumer_name, 0, worker, ttl);
    pn := pgque._partitioned(q, consumer_name, null, 0);
    for k in select c from pgque._slot_candidates(q, consumer_name, pn, worker) c loop
        e := pgque._slot_claim(q.queue_id, consumer_name, k, worker, ttl);
        if e is not null then
            slot := k;
            n := pn;
            epoch := e;
            return;
        end if;
    end loop;
end $$;

-- release_slot: owner only (false otherwise); the epoch is kept.  Release
-- between batches: the open batch goes to the next owner.
create function pgque.release_slot(queue_name text, consumer_name text, slot int4, worker text)
returns boolean language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    q pgque.queue;
begin
    q := pgque._queue(queue_name);
    perform pgque._partitioned(q, consumer_name, null, slot);
    perform pgque._check_worker(worker);
    return pgque._slot_release(q.queue_id, consumer_name, slot, worker);
end $$;

-- The lease check shared by the partitioned receive/ack/nack: validate, check
-- n and slot, check and renew the lease.  -> the slot's subscription name
-- and the caller's lease epoch (the row of pgque.slot_batch it works on).
create function pgque._slot_guard(q pgque.queue, i_consumer text, i_slot int4, i_n int4,
                                  i_worker text, i_is_ack boolean, out sub_name text, out epoch bigint)
language plpgsql as $$
begin
    perform pgque._check_not_null('n', i_n);
    perform pgque._partitioned(q, i_consumer, i_n, i_slot);
    perform pgque._check_worker(i_worker);
    epoch := pgque._slot_check(q.queue_id, i_consumer, i_slot, i_worker, i_is_ack, q.queue_name);
    sub_name := pgque._slot_name(i_consumer, i_slot, i_n);
end $$;

-- The fence after an ack's or nack's writes: the caller must still hold the
-- lease of the same epoch, else PQ002 / PQ001 and the writes roll back
-- with the statement.  A worker frozen between its lease check and its
-- writes cannot move the slot's cursor after a takeover (ADR 0023).
create function pgque._slot_recheck(i_queue_id int4, i_consumer text, i_slot int4, i_worker text,
                                    i_epoch bigint, i_queue_name text)
returns void language c strict as 'MODULE_PATHNAME', 'pgque_slot_recheck_sql';

-- The slot's cursor: the greatest of what any epoch acked and the folded
-- sub_last_tick (a fold skips a locked subscription row, see _slot_fold).
-- PL/pgSQL, as _resize_cap and _event_tables: a SQL function with a
-- subquery is not inlined, and each transaction that called it (every
-- slot receive and ack) parsed and planned its body again, where PL/pgSQL
-- keeps the plan for the session (ADR 0088).
create function pgque._slot_cursor(i_sub pgque.subscription)
returns bigint language plpgsql stable as $$
begin
    return greatest(i_sub.sub_last_tick,
                    (select pg_catalog.max(b.sb_last_tick) from pgque.slot_batch b
                      where b.sb_sub operator(pg_catalog.=) i_sub.sub_id));
end $$;

-- The caller's open batch on its slot, as a subscription row carrying it
-- (sub_batch is NULL: none open); its epoch's row locked.
create function pgque._slot_open(i_queue_name text, i_sub_name text, i_epoch bigint)
returns pgque.subscription language plpgsql as $$
declare
    s   pgque.subscription;
    r   pgque.slot_batch;
begin
    s := pgque._subscription(i_queue_name, i_sub_name);
    r := pgque._slot_batch_row(s, i_epoch);
    s.sub_last_tick := r.sb_last_tick;
    s.sub_batch := r.sb_batch;
    s.sub_next_tick := r.sb_next_tick;
    s.sub_batch_pos := r.sb_pos;
    s.sub_batch_last := r.sb_last;
    return s;
end $$;

-- The entry of a slot's receive and ack (issue #30): the rows every call
-- needs (queue, partitioned consumer, the slot's subscription) read in one
-- statement, then _slot_guard's checks on them in its order (with
-- _check_max_return after the queue's when i_check_max, as the receive's
-- first try) and the lease check.  When that statement finds nothing (an
-- unknown queue or consumer, a wrong n or slot, a slot not subscribed:
-- what the checks are for), the checks run one by one as before and raise
-- what is wrong, so every error and SQLSTATE stays the one of _slot_guard.
-- -> the rows, the caller's lease epoch and whether the consumer pauses.
create function pgque._slot_enter(i_queue_name text, i_consumer text, i_slot int4, i_n int4,
                                  i_worker text, i_is_ack boolean, i_max_return int4, i_check_max boolean,
                                  out q pgque.queue, out pc pgque.partition_consumer,
                                  out s pgque.subscription, out epoch bigint, out pause boolean)
language plpgsql as $$
declare
    x   record;
    g   record;
begin
    -- each row by its key (sub-selects: a join of these small tables
    -- was planned as a scan of every subscription)
    select qq as q, p as pc,
           (select sub from pgque.subscription sub
             where sub.sub_queue = qq.queue_id
               and sub.sub_consumer = (select c.co_id from pgque.consumer c
                                        where c.co_name = pgque._slot_name(i_consumer, i_slot, i_n))) as s
      into x
      from pgque.queue qq
      join pgque.partition_consumer p on p.queue_id = qq.queue_id and p.co_name = i_consumer
     where qq.queue_name = i_queue_name and p.n = i_n and i_slot >= 0 and i_slot < p.n;
    if (x.s).sub_id is null then
        q := pgque._queue(i_queue_name);
        if i_check_max then
            perform pgque._check_max_return(i_max_return);
        end if;
        g := pgque._slot_guard(q, i_consumer, i_slot, i_n, i_worker, i_is_ack);
        s := pgque._subscription(i_queue_name, g.sub_name);
        select * into pc from pgque.partition_consumer p where p.queue_id = q.queue_id and p.co_name = i_consumer;
        epoch := g.epoch;
    else
        q := x.q;
        pc := x.pc;
        s := x.s;
        if i_check_max then
            perform pgque._check_max_return(i_max_return);
        end if;
        -- _slot_guard's checks that the statement has not made (n and the
        -- slot's range it matched), on the rows in hand
        perform pgque._user_consumer_name(i_consumer);
        perform pgque._authorize(pc.owner, pc.users, q.queue_id, i_consumer);
        perform pgque._check_worker(i_worker);
        epoch := pgque._slot_check(q.queue_id, i_consumer, i_slot, i_worker, i_is_ack, q.queue_name);
    end if;
    pause := pgque._pauses(pc);
end $$;

-- The per-call steps of receive_partitioned (src/receive.c): the argument
-- checks and the lease check (_slot_enter), whether the slot's consumer
-- pauses, then the slot's open batch or the next one (batch_id NULL:
-- none) with where its events are (_slot_window), and the slot's
-- subscription and epoch, which the tries after an empty window pass to
-- _slot_receive_next.
create function pgque._slot_receive_open(i_queue_name text, i_consumer text, i_slot int4, i_n int4,
                                         i_worker text, i_max_return int4, i_check bool, i_want_source bool,
                                         out batch_id bigint, out pause boolean,
                                         out source text, out lo_xmax xid8, out hi_xmax xid8,
                                         out lo_xip xid8[], out hi pg_catalog.pg_snapshot,
                                         out sub_id int4, out pos bigint, out epoch bigint)
language plpgsql as $$
declare
    e   record;
    w   record;
begin
    e := pgque._slot_enter(i_queue_name, i_consumer, i_slot, i_n, i_worker, false, i_max_return, i_check);
    -- the slot subscription's own right, when it is not the consumer's
    -- (every slot subscription carries the consumer's owner and users,
    -- ADR 0058: the same check, not made twice)
    if ((e.s).sub_owner, (e.s).sub_users) is distinct from ((e.pc).owner, (e.pc).users) then
        perform pgque._authorize((e.s).sub_owner, (e.s).sub_users, (e.s).sub_queue,
                                 pgque._slot_name(i_consumer, i_slot, i_n));
    end if;
    -- an unlogged queue that lost its events and is not reset yet is
    -- refused (ADR 0068, 0089), once _slot_enter has authorized the caller
    perform pgque._unlogged_ready(e.q);
    -- a pausing slot reads its part in SQL (_receive_paused): no source
    w := pgque._slot_window(e.s, e.epoch, i_n, i_slot, i_max_return, i_want_source and not e.pause);
    select w.batch_id, e.pause, w.source, w.lo_xmax, w.hi_xmax, w.lo_xip, w.hi, (e.s).sub_id, w.pos, e.epoch
      into batch_id, pause, source, lo_xmax, hi_xmax, lo_xip, hi, sub_id, pos, epoch;
end $$;

-- The tries of receive_partitioned after an empty window (src/receive.c):
-- the next batch of the slot subscription and epoch that the first try's
-- checks returned, without checking again what that call checked.
create function pgque._slot_receive_next(i_sub_id int4, i_epoch bigint, i_slot int4, i_n int4,
                                         i_max_return int4, i_want_source bool,
                                         out batch_id bigint, out source text, out lo_xmax xid8,
                                         out hi_xmax xid8, out lo_xip xid8[], out hi pg_catalog.pg_snapshot,
                                         out sub_id int4, out pos bigint)
language plpgsql as $$
declare
    s   pgque.subscription;
begin
    select * into strict s from pgque.subscription where subscription.sub_id = i_sub_id;
    select w.batch_id, w.source, w.lo_xmax, w.hi_xmax, w.lo_xip, w.hi, s.sub_id, w.pos
      into batch_id, source, lo_xmax, hi_xmax, lo_xip, hi, sub_id, pos
      from pgque._slot_window(s, i_epoch, i_n, i_slot, i_max_return, i_want_source) w;
end $$;

-- receive_partitioned: only this slot's events, in ev_id order, read in C
-- as the plain receive (src/receive.c, ADR 0034).  It locks no
-- subscription row: a takeover never waits for the previous owner.
create function pgque.receive_partitioned(queue_name text, consumer_name text, slot int4, n int4,
                                          worker text, max_return int4 default 100)
returns setof pgque.message language c volatile security definer
set search_path = pgque, pg_catalog, pg_temp
as 'MODULE_PATHNAME', 'pgque_receive_slot';

-- ack_partitioned -> 1 acked / 0 no open batch.  A fenced worker raises,
-- also when the takeover came while it was acking (nothing it wrote stays).
create function pgque.ack_partitioned(queue_name text, consumer_name text, slot int4, n int4, worker text)
returns int4 language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    e   record;
    r   pgque.slot_batch;
    res int4 := 0;
begin
    e := pgque._slot_enter(queue_name, consumer_name, slot, n, worker, true, null, false);
    r := pgque._slot_batch_row(e.s, e.epoch);
    if r.sb_batch is not null then
        res := pgque._slot_finish_row(r);
        -- failure policy pause: release the keys whose head was done in
        -- it.  Only a pausing consumer has blocked keys (a switch to skip
        -- releases them all, ADR 0029), so the others' ack does not read
        -- pgque.blocked_key: a statement, and three relations' locks
        -- that 16 workers took in the shared lock table (ADR 0104).
        if e.pause then
            perform pgque._pause_after_ack((e.s).sub_id, r.sb_batch, e.epoch, n, slot);
        end if;
    end if;
    perform pgque._slot_recheck((e.q).queue_id, consumer_name, slot, worker, e.epoch, queue_name);
    return res;
end $$;

-- A slot's nack: _nack_event, waiting at most a second for another
-- transaction that scheduled the same retry or dead letter and is still
-- open (a fenced owner frozen after its nack, ADR 0023): whether that one
-- commits decides whether this one is needed, so the caller retries later.
create function pgque._slot_nack_event(s pgque.subscription, i_ev_id bigint, i_retry_after interval,
                                       i_reason text, i_n int4, i_slot int4)
returns int4 language plpgsql set lock_timeout = '1s' as $$
begin
    return pgque._nack_event(s, i_ev_id, i_retry_after, i_reason, i_n, i_slot);
exception when lock_not_available then
    raise exception 'event % of slot % is being nacked by another open transaction', i_ev_id, i_slot
        using errcode = 'lock_not_available',
              detail = 'A worker that held the slot before (now fenced) nacked it in a transaction that is still open.',
              hint = 'Roll back and receive the batch again later: it stays open until that transaction ends.';
end $$;

-- nack_partitioned: retry (on the same slot: same key) or dead letter.
create function pgque.nack_partitioned(queue_name text, consumer_name text, slot int4, n int4, worker text,
                                       msg pgque.message, retry_after interval default '60 seconds',
                                       reason text default null)
returns int4 language plpgsql security definer
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    q   pgque.queue;
    g   record;
    s   pgque.subscription;
    res int4;
begin
    q := pgque._queue(queue_name);
    perform pgque._check_not_null('msg.msg_id', msg.msg_id);
    perform pgque._check_interval('retry_after', retry_after, true);
    g := pgque._slot_guard(q, consumer_name, slot, n, worker, true);
    s := pgque._slot_open(queue_name, g.sub_name, g.epoch);
    if s.sub_batch is null then
        raise exception 'slot % of consumer "%" has no open batch', slot, consumer_name
            using errcode = 'object_not_in_prerequisite_state';
    end if;
    res := pgque._slot_nack_event(s, msg.msg_id, retry_after, reason, n, slot);
    if pgque._slot_pauses(q.queue_id, consumer_name) then
        perform pgque._pause_on_nack(s, msg.msg_id, n, slot);   -- block its key (ADR 0029)
    end if;
    perform pgque._slot_recheck(q.queue_id, consumer_name, slot, worker, g.epoch, queue_name);
    return res;
end $$;

-- How many pending events of a slot every reader counts at most (ADR 0096,
-- 0094): the watchdog's alerts, _consumer_state (get_consumer_info,
-- metrics, the observability set) and get_partition_slot_info pass it to
-- _slot_pending_all, so a call reads about this many rows per slot far
-- behind, whatever its backlog.  Defined here only.
create function pgque._slot_pending_cap() returns int8 language sql immutable as $$
    select 10000::int8
$$;

-- Every slot's share of the events after its cursor (up to the latest
-- tick), with one read of the window per
-- partitioned consumer instead of one per slot (ADR 0031), and none for a
-- consumer whose slots are all at the latest tick.  An event counts for its
-- slot when its own cursor's snapshot does not see it: the window read is
-- the oldest cursor's.  -> (sub_id, pending); pending NULL when the slot's
-- cursor tick is gone.  The queues in i_skip (the watchdog's: their DDL
-- lock is taken, ADR 0040) are not read: their slots are left out.
-- The window is the readers' (pgque._window_where, written once in C:
-- src/window.c).
-- i_cap (ADR 0096, 0094): a count that stops at i_cap.  A slot whose
-- cursor is more than i_cap events of the stream behind the latest tick
-- (tick_event_seq) is counted by a read that stops at i_cap rows: with own
-- buckets (_slot_own_buckets) its own read, from its own cursor, at the
-- i_cap-th row of its own (_event_source of its n and slot; pending =
-- i_cap); in a
-- layout without them (no buckets, or an n that does not divide them) at
-- the i_cap-th row of the stream, one read for all such slots of the
-- consumer, each counting its own among those rows (its share of them).
-- capped = the read stopped there: pending is then a lower bound ("at
-- least"; in the filtered layout it may be below i_cap, even 0).  The
-- exact group read covers the others only, so that a stopped slot's
-- backlog is not read again on every call.
-- NULL: every count exact (capped false).
create function pgque._slot_pending_all(i_skip int4[] default '{}', i_cap int8 default null,
                                        out sub_id int4, out pending bigint, out capped boolean)
returns setof record language plpgsql stable as $$
declare
    g      record;
    f      record;
    slots  int4[];
    subs   int4[];
    snaps  pg_catalog.pg_snapshot[];
    lo_tick bigint;
    lo_snap pg_catalog.pg_snapshot;
    own    boolean;
    far    boolean;
begin
    if i_cap < 1 then
        raise exception 'a cap of pending events must be at least 1, got %', i_cap
            using errcode = 'invalid_parameter_value';
    end if;
    for g in
        select qq as q, x.queue_id as qid, x.n, x.slots, x.subs, x.snaps, x.seqs, x.ticks, x.gone,
               lt.tick_id as hi_tick, lt.tick_snapshot as hi_snap, lt.tick_event_seq as hi_seq
          from (select pc.queue_id, pc.n,
                       pg_catalog.array_agg(pc.slot order by pc.slot) filter (where t1.tick_id is not null) as slots,
                       pg_catalog.array_agg(s.sub_id order by pc.slot) filter (where t1.tick_id is not null) as subs,
                       pg_catalog.array_agg(t1.tick_snapshot order by pc.slot) filter (where t1.tick_id is not null) as snaps,
                       pg_catalog.array_agg(t1.tick_event_seq order by pc.slot) filter (where t1.tick_id is not null) as seqs,
                       pg_catalog.array_agg(t1.tick_id order by pc.slot) filter (where t1.tick_id is not null) as ticks,
                       -- slots whose cursor tick is gone
                       pg_catalog.array_agg(s.sub_id) filter (where t1.tick_id is null) as gone
                  from pgque._slot_list() pc
                  join pgque.subscription s on s.sub_queue = pc.queue_id and s.sub_consumer = pc.co_id
                  left join pgque.tick t1 on t1.tick_queue = s.sub_queue and t1.tick_id = pgque._slot_cursor(s)
                 group by pc.queue_id, pc.consumer, pc.n) x
          join pgque.queue qq on qq.queue_id = x.queue_id
          join lateral (select t.tick_id, t.tick_snapshot, t.tick_event_seq from pgque.tick t where t.tick_queue = x.queue_id
                         order by t.tick_id desc limit 1) lt on true
    loop
        if g.gone is not null then
            return query select u, null::bigint, false from pg_catalog.unnest(g.gone) u;
        end if;
        if g.subs is null or g.qid = any (i_skip) then
            continue;
        end if;
        if (g.q).queue_unlogged and pg_catalog.pg_is_in_recovery() then
            -- a standby has no events of an unlogged queue (ADR 0068): unknown
            return query select u, null::bigint, false from pg_catalog.unnest(g.subs) u;
            continue;
        end if;
        own := pgque._slot_own_buckets((g.q).queue_partition_buckets, g.n);
        -- with own buckets, the slots far behind: each its own rows, up to
        -- i_cap of them (every row read is the slot's)
        for f in select u.slot, u.sub, u.snap
                   from rows from (pg_catalog.unnest(g.slots), pg_catalog.unnest(g.subs), pg_catalog.unnest(g.snaps),
                                   pg_catalog.unnest(g.seqs)) u(slot, sub, snap, seq)
                  where own and i_cap is not null and g.hi_seq - u.seq > i_cap loop
            return query execute pg_catalog.format(
                'select $3::int4, count(*), count(*) operator(pg_catalog.>=) $4 from (select from %s ev where %s'
                '   and (ev.ev_owner is null or ev.ev_owner operator(pg_catalog.=) $3) limit $4) x',
                pgque._event_source(g.q, f.snap, g.hi_snap, g.n, f.slot), pgque._window_where(1, 2, 5, 6))
            using pg_catalog.pg_snapshot_xmax(f.snap), pg_catalog.pg_snapshot_xmax(g.hi_snap), f.sub, i_cap,
                  array(select pg_catalog.pg_snapshot_xip(f.snap)), g.hi_snap;
        end loop;
        -- group reads (ADR 0031), from the oldest cursor of their slots: the
        -- slots near the latest tick (all without i_cap), exact; then,
        -- without own buckets, the slots far behind, in one read that stops
        -- at the i_cap-th row of the stream (a read per slot would read the
        -- stream n times; a limit on a slot's filtered rows, all of it)
        foreach far in array array[false, true] loop
            select pg_catalog.array_agg(u.slot order by u.slot), pg_catalog.array_agg(u.sub order by u.slot),
                   pg_catalog.array_agg(u.snap order by u.slot),
                   (pg_catalog.array_agg(u.tick order by u.tick))[1], (pg_catalog.array_agg(u.snap order by u.tick))[1]
              into slots, subs, snaps, lo_tick, lo_snap
              from rows from (pg_catalog.unnest(g.slots), pg_catalog.unnest(g.subs), pg_catalog.unnest(g.snaps),
                              pg_catalog.unnest(g.seqs), pg_catalog.unnest(g.ticks)) u(slot, sub, snap, seq, tick)
             where (i_cap is not null and g.hi_seq - u.seq > i_cap) = far;
            if subs is null or (far and own) then
                continue;
            end if;
            if lo_tick >= g.hi_tick then
                -- every slot is at the latest tick: nothing pending, nothing read
                return query select u, 0::bigint, false from pg_catalog.unnest(subs) u;
                continue;
            end if;
            return query execute pg_catalog.format(
                case when far then
                    'with r as materialized (select ev.ev_txid, ev.ev_owner, ev.ev_extra1 from %s ev where %s limit $9)'
                    'select x.sub, count(e.ev_txid), (select count(*) from r) operator(pg_catalog.>=) $9'
                    '  from rows from (pg_catalog.unnest($3::int4[]), pg_catalog.unnest($4::int4[]),'
                    '                  pg_catalog.unnest($5::pg_catalog.pg_snapshot[])) x(slot, sub, snap1)'
                    '  left join (select r.ev_txid, r.ev_owner, pgque._slot_of(r.ev_extra1, $8) as slot from r) e'
                else
                    'select x.sub, count(e.ev_txid), false'
                    '  from rows from (pg_catalog.unnest($3::int4[]), pg_catalog.unnest($4::int4[]),'
                    '                  pg_catalog.unnest($5::pg_catalog.pg_snapshot[])) x(slot, sub, snap1)'
                    '  left join (select ev.ev_txid, ev.ev_owner, pgque._slot_of(ev.ev_extra1, $8) as slot'
                    '               from %s ev'
                    '              where %s) e'
                end ||
                '    on e.slot = x.slot'
                '   and not pg_catalog.pg_visible_in_snapshot(e.ev_txid, x.snap1)'
                '   and (e.ev_owner is null or e.ev_owner = x.sub)'
                ' group by x.sub', pgque._event_source(g.q, lo_snap, g.hi_snap, null, null),
                pgque._window_where(1, 2, 6, 7))
            using pg_catalog.pg_snapshot_xmax(lo_snap), pg_catalog.pg_snapshot_xmax(g.hi_snap),
                  slots, subs, snaps, array(select pg_catalog.pg_snapshot_xip(lo_snap)),
                  g.hi_snap, g.n, i_cap;
        end loop;
    end loop;
end $$;

-- One row per slot of every partitioned consumer, leased or not.  Without
-- JIT: the planner sees generate_series() and never-analyzed catalog tables
-- as thousands of rows, and compiling the plan took seconds (measured 3.6 s
-- of a 4.2 s call on two slots), longer than a short lease.
--   pending_events       PgQue's figure: the queue's events between the
--                        slot's cursor tick and the latest tick, before
--                        the hash filter (every slot of a consumer that
--                        is behind shows the whole backlog; 0 = caught up)
--   slot_pending_events  the slot's own share of them, as the alerts count
--                        it (_slot_pending_all, ADR 0051), up to
--                        _slot_pending_cap() for a slot far behind (ADR 0094)
--   slot_pending_events_capped  true when that count stopped at the cap:
--                        slot_pending_events is then a lower bound
--   lease_ttl            the TTL of the live lease (pgque.partition_slot)
-- The two counts are NULL when the slot's cursor tick is gone (ADR 0022).
create function pgque.get_partition_slot_info(
    out queue_name text, out consumer text, out slot int4, out n int4,
    out lease_owner text, out lease_until timestamptz, out epoch bigint,
    out last_tick bigint, out pending_events bigint,
    out last_receive_at timestamptz, out last_ack_at timestamptz, out alert text,
    out slot_pending_events bigint, out lease_ttl interval, out slot_pending_events_capped boolean)
returns setof record language sql security definer
set search_path = pgque, pg_catalog, pg_temp set jit = off as $$
    select q.queue_name, pc.consumer, pc.slot, pc.n,
           case when l.lease_until > pg_catalog.clock_timestamp() then l.owner end,
           l.lease_until, coalesce(l.epoch, 0), pgque._slot_cursor(s),
           greatest(lt.tick_event_seq - ct.tick_event_seq, 0),
           l.last_receive, l.last_ack,
           (select pg_catalog.string_agg(a.kind, ',' order by a.kind) from pgque.alert a
             where a.cleared_at is null and a.queue_name = q.queue_name
               and a.consumer = pc.consumer and a.slot = pc.slot),
           p.pending,
           case when l.lease_until > pg_catalog.clock_timestamp() then l.ttl_ms * interval '1 millisecond' end,
           p.capped
      from pgque._slot_list() pc
      join pgque.queue q on q.queue_id = pc.queue_id
      left join pgque.subscription s on s.sub_queue = q.queue_id and s.sub_consumer = pc.co_id
      left join pgque.tick ct on ct.tick_queue = q.queue_id and ct.tick_id = pgque._slot_cursor(s)
      left join lateral (select t.tick_event_seq from pgque.tick t where t.tick_queue = q.queue_id
                          order by t.tick_id desc limit 1) lt on true
      left join pgque._slot_leases() l on l.queue_id = q.queue_id and l.consumer = pc.consumer and l.slot = pc.slot
      left join pgque._slot_pending_all('{}', pgque._slot_pending_cap()) p on p.sub_id = s.sub_id
     order by q.queue_name, pc.consumer, pc.slot
$$;

create view pgque.partition_slot_status as
    select * from pgque.get_partition_slot_info();

-- partition_slot: PgQue's lease table (queue_id, co_name, slot,
-- lease_owner, lease_until, lease_ttl, epoch), one row per subscribed slot,
-- here a view over the leases in shared memory (src/slots.c) as
-- get_partition_slot_info() shows them: owner and TTL of a live lease (an
-- expired one shows its lease_until only), epoch 0 for a slot never
-- claimed.  Read-only: slots are claimed with claim_slot().  Admins, as
-- PgQue (ADR 0058).
create view pgque.partition_slot as
    select q.queue_id, i.consumer as co_name, i.slot, i.lease_owner, i.lease_until, i.lease_ttl, i.epoch
      from pgque.get_partition_slot_info() i
      join pgque.queue q on q.queue_name = i.queue_name
     where i.last_tick is not null;
