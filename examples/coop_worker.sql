-- A cooperative member's loop, as a PgQue client writes it, in SQL: receive
-- a batch with receive_coop(), "process" it (here: record the events in
-- coop_processed, committed before the ack, so that a crash between the two
-- redelivers rather than loses), ack it, repeat.  A batch taken over while
-- this member was silent is dropped (PQ003).  Stops after `idle` without
-- work.  `slow` makes the member dawdle over each batch before its ack.
--
-- Run: as a role with pgque_reader, on an existing queue ('orders' here);
-- the first receive_coop() registers the group and the member
-- (docs/cooperative-consumers.md):
--
--   psql -d app -f examples/coop_worker.sql      (defines the table and the procedure)
--   psql -d app -c "call coop_worker('orders', 'billing', 'member-1', '1 minute')"
--
-- one psql per member, each with its own member name; coop_processed
-- lists what each one took.
create table if not exists coop_processed (
    ev_id     bigint not null,
    member    text not null,
    batch_id  bigint not null,
    at        timestamptz not null default clock_timestamp()
);

create or replace procedure coop_worker(q text, g text, m text, idle interval,
                                        slow interval default null,
                                        dead interval default '3 seconds')
language plpgsql as $$
declare
    last_work  timestamptz := clock_timestamp();
    b          bigint;
    n          int4;
begin
    loop
        with r as (select * from pgque.receive_coop(q, g, m, 50, dead)),
        ins as (insert into coop_processed (ev_id, member, batch_id)
                select msg_id, m, batch_id from r returning batch_id)
        select max(batch_id), count(*) into b, n from ins;
        commit;
        if n = 0 then
            exit when clock_timestamp() - last_work > idle;
            perform pg_sleep(0.02);
            continue;
        end if;
        if slow is not null then
            perform pg_sleep(extract(epoch from slow));
        end if;
        begin
            perform pgque.ack(b);
        exception when sqlstate 'PQ003' then
            null;   -- taken over: another member has the window now
        end;
        commit;
        last_work := clock_timestamp();
    end loop;
end $$;
