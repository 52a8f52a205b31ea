-- examples/partition_worker.sql: a partition-slot worker, in plain SQL.
--
-- It implements the worker loop of docs/partition-keys.md: claim the slot
-- that needs it most (pgque.claim_any_slot: the free or expired slot with
-- the oldest pending event), take one batch from it (receive_partitioned ->
-- process -> ack_partitioned, one transaction), release it so another
-- worker may take it, and claim again.  A pool of M workers serves N slots
-- (M < N too) without starving any slot.  Run as many as you like, each
-- with its own worker id.
--
-- Run: as the role that subscribed the partitioned consumer
-- (pgque.subscribe_partitioned; here 'indexer' on queue 'files', 8 slots):
--
--   psql -f examples/partition_worker.sql            (defines the procedure)
--   psql -c "call partition_worker('files', 'indexer', 8, 'worker-' || pg_backend_pid())"
--
-- i_n is kept for the callers of 0.2.0's loop and not used: the worker
-- reads and acks with the n that claim_any_slot returns (the serving
-- layout, also while a resize drains).
--
-- The handler here records what it processed in example_processed; put your
-- own in handle_event().  The lease epoch returned by claim_any_slot is passed
-- to the handler: stamp it on side effects to fence a worker that lost its
-- lease (a zombie's ack raises SQLSTATE PQ002; PQ001 means the lease is gone,
-- e.g. after a server restart: just claim again).
--
-- A handler that raises makes the worker nack the event (retry after
-- i_retry_after, dead letter after the queue's max_retries).  Under the
-- consumer's failure policy 'pause' (pgque.set_failure_policy, ADR 0029)
-- the server then withholds the key's later events until the failed one is
-- acked on a retry or dead-lettered; the worker's part is to skip the rest
-- of that key's events in the batch it holds (they were handed out before
-- the nack; they come back, in order, after the failed one).  Under 'skip'
-- it processes them (the failed one comes back later, out of order).

create table if not exists example_processed (
    seq       bigserial primary key,
    worker    text not null,
    epoch     bigint not null,
    slot      int4 not null,
    ev_id     bigint not null,
    key       text,
    payload   text,
    at        timestamptz not null default clock_timestamp()
);

create or replace function handle_event(i_worker text, i_epoch bigint, i_slot int4, m pgque.message)
returns void language sql as $$
    insert into example_processed (worker, epoch, slot, ev_id, key, payload)
    values (i_worker, i_epoch, i_slot, m.msg_id, m.extra1, m.payload)
$$;

create or replace procedure partition_worker(i_queue text, i_consumer text, i_n int4, i_worker text,
                                             i_idle_exit interval default '5 seconds',
                                             i_ttl interval default '30 seconds',
                                             i_retry_after interval default '10 seconds')
language plpgsql as $$
declare
    c          record;
    m          pgque.message;
    rows       int4;
    idle_since timestamptz := clock_timestamp();
    pause      boolean := pgque.get_failure_policy(i_queue, i_consumer) = 'pause';
    nacked     text[];
begin
    loop
        select * into c from pgque.claim_any_slot(i_queue, i_consumer, i_worker, i_ttl);
        commit;
        rows := 0;
        if c.slot is not null then
            nacked := '{}';
            for m in select * from pgque.receive_partitioned(i_queue, i_consumer, c.slot, c.n, i_worker, 100) loop
                rows := rows + 1;
                -- pause: a key nacked in this batch waits for its failed event
                continue when pause and m.extra1 = any(nacked);
                begin
                    perform handle_event(i_worker, c.epoch, c.slot, m);
                exception when others then
                    perform pgque.nack_partitioned(i_queue, i_consumer, c.slot, c.n, i_worker, m,
                                                   i_retry_after, sqlerrm);
                    nacked := nacked || m.extra1;
                end;
            end loop;
            if rows > 0 then
                perform pgque.ack_partitioned(i_queue, i_consumer, c.slot, c.n, i_worker);
            end if;
            -- a release takes effect when its transaction commits (ADR
            -- 0071): handler effects, ack and release together; no other
            -- worker claims the slot before the ack is committed
            perform pgque.release_slot(i_queue, i_consumer, c.slot, i_worker);
            commit;
        end if;
        if rows > 0 then
            idle_since := clock_timestamp();
        else
            -- no slot has work (or it had only empty windows, now passed)
            exit when clock_timestamp() - idle_since > i_idle_exit;
            if c.slot is null then
                perform pg_sleep(0.05);
            end if;
        end if;
    end loop;
end $$;
