-- Setup shared by the pg_regress files that follow (they run in order, in
-- one database): the extension and two test helpers.
create extension pgque_bgw;

create schema pgque_test;

-- error_of(sql): 'SQLSTATE: message' of the error the statement raises, or
-- 'no error'.  Lets a test assert the SQLSTATE of every rejection.
create function pgque_test.error_of(i_sql text) returns text
language plpgsql as $$
begin
    execute i_sql;
    return 'no error';
exception when others then
    return sqlstate || ': ' || sqlerrm;
end $$;

-- events(queue): what is stored in the queue's event tables.
create function pgque_test.events(i_queue text)
returns table (ev_id bigint, ev_owner int4, ev_retry int4, ev_type text, ev_data text,
               ev_extra1 text, ev_extra2 text, ev_extra3 text, ev_extra4 text)
language plpgsql as $$
begin
    return query execute format(
        'select ev_id, ev_owner, ev_retry, ev_type, ev_data, ev_extra1, ev_extra2, ev_extra3, ev_extra4'
        '  from pgque.%I order by ev_id, ev_owner nulls first',
        'event_' || (select queue_id from pgque.queue where queue_name = i_queue));
end $$;

-- drain(queue, consumer): tick, then receive and ack until nothing is left;
-- returns what was received, one row per message, in delivery order.
create function pgque_test.drain(i_queue text, i_consumer text, i_max int4 default 100)
returns table (batch_no int4, msg_id bigint, type text, payload text, retry_count int4, extra1 text)
language plpgsql as $$
declare
    m   pgque.message;
    b   bigint;
    n   int4 := 0;
begin
    perform pgque.ticker(i_queue);
    loop
        b := null;
        for m in select * from pgque.receive(i_queue, i_consumer, i_max) loop
            b := m.batch_id;
            batch_no := n + 1; msg_id := m.msg_id; type := m.type; payload := m.payload;
            retry_count := m.retry_count; extra1 := m.extra1;
            return next;
        end loop;
        exit when b is null;
        perform pgque.ack(b);
        n := n + 1;
    end loop;
end $$;

-- the installed version is the control file's, and version() says it
select extname, extversion = default_version as default_version_installed
  from pg_extension join pg_available_extensions on name = extname where extname = 'pgque_bgw';
select pgque.version() = (select extversion from pg_extension where extname = 'pgque_bgw') as version_matches;
select component, status from pgque.status() where component in ('pgque', 'library');
