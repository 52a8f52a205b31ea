-- One rule for the ev_txid index both C readers of a window trust
-- (pgque_event_txid_index, src/window_direct.c): the direct window read
-- (ADR 0110) and the watchdog's stopped-ticker probe
-- (pgque._queues_unticked, ADR 0113) read a table through a btree on
-- ev_txid alone in xid8's default operator family, valid, without a
-- predicate; any other table is read otherwise (the plan, a scan).  The
-- probe once took any valid btree led by ev_txid: one of another operator
-- family (here, xid8 in reverse order) answered its ">= the tick's xmin"
-- key in that family's order, found nothing, and the watchdog would not
-- have said that committed events wait for a stopped ticker.
create schema tx93;
create function tx93.rev_cmp(a xid8, b xid8) returns int4 language sql immutable strict
    as 'select pg_catalog.xid8cmp(b, a)';
create operator class tx93.xid8_rev_ops for type xid8 using btree as
    operator 1 pg_catalog.> (xid8, xid8),
    operator 2 pg_catalog.>= (xid8, xid8),
    operator 3 pg_catalog.= (xid8, xid8),
    operator 4 pg_catalog.<= (xid8, xid8),
    operator 5 pg_catalog.< (xid8, xid8),
    function 1 tx93.rev_cmp(xid8, xid8);
select pgque.create_queue('tx93');
select pgque.subscribe('tx93', 'c');
select pgque.ticker('tx93') is not null as ticked;

-- every table of the queue: its ev_txid index made by sql (%1$s the
-- table, %2$s the index's name), or none (null)
create function tx93.reindex(sql text) returns void language plpgsql called on null input as $$
declare
    t text;
begin
    for t in select 'event_' || q.queue_id || '_' || i
               from pgque.queue q, generate_series(0, q.queue_ntables - 1) i
              where q.queue_name = 'tx93' loop
        -- dropped only where it is (no NOTICE naming the queue's id, which
        -- depends on the tests run before)
        if pg_catalog.to_regclass(pg_catalog.format('pgque.%I', t || '_txid_idx')) is not null then
            execute pg_catalog.format('drop index pgque.%I', t || '_txid_idx');
        end if;
        continue when sql is null;
        execute pg_catalog.format(sql, 'pgque.' || pg_catalog.quote_ident(t), pg_catalog.quote_ident(t || '_txid_idx'));
    end loop;
end $$;
-- the probe (the C read) and the window read (the plan, in SQL) asked the
-- same question: committed events past the latest tick?
create function tx93.unticked(out by_c boolean, out by_window boolean) language sql as $$
    select qu.queue_id = any (pgque._queues_unticked(array[qu.queue_id])),
           pgque._has_unticked_events(qu, (select t from pgque.tick t where t.tick_queue = qu.queue_id
                                             order by t.tick_id desc limit 1))
      from pgque.queue qu where qu.queue_name = 'tx93'
$$;
-- a round, each step its own transaction: five events sent (committed,
-- they wait), the two readers asked, a tick, asked again as the consumer
-- receives and acks them all
create function tx93.take(out unticked text, out received bigint, out distinct_received bigint)
language plpgsql as $$
declare
    b bigint;
begin
    select u.by_c || '/' || u.by_window into unticked from tx93.unticked() u;
    select count(*), count(distinct m.payload), max(m.batch_id)
      into received, distinct_received, b
      from pgque.receive('tx93', 'c', 1000) m;
    if b is not null then
        perform pgque.ack(b);
    end if;
end $$;
create function tx93.send(tag text) returns boolean language sql as $$
    select pgque.send_batch('tx93', 'default', array(select tag || i from generate_series(1, 5) i)) is not null
$$;
select pgque.ticker('tx93') is not null as ticked;
-- the index create_queue makes: both readers go through it
select tx93.send('plain-');
select * from tx93.unticked();
select pgque.ticker('tx93') is not null as ticked;
select * from tx93.take();
-- the reverse-order family: neither reader trusts it (before, the probe
-- said false/true after the send)
select tx93.reindex('create index %2$s on %1$s (ev_txid tx93.xid8_rev_ops)');
select tx93.send('reverse-');
select * from tx93.unticked();
select pgque.ticker('tx93') is not null as ticked;
select * from tx93.take();
-- ev_txid first of two columns, a partial index, an expression: not the rule's
select tx93.reindex('create index %2$s on %1$s (ev_txid, ev_id)');
select tx93.send('two-');
select * from tx93.unticked();
select pgque.ticker('tx93') is not null as ticked;
select * from tx93.take();
select tx93.reindex('create index %2$s on %1$s (ev_txid) where ev_id > 0');
select tx93.send('partial-');
select * from tx93.unticked();
select pgque.ticker('tx93') is not null as ticked;
select * from tx93.take();
select tx93.reindex('create index %2$s on %1$s ((ev_txid::text))');
select tx93.send('expr-');
select * from tx93.unticked();
select pgque.ticker('tx93') is not null as ticked;
select * from tx93.take();
-- no index at all, and the rotation over tables without one
select tx93.reindex(null);
select tx93.send('none-');
select * from tx93.unticked();
select pgque.ticker('tx93') is not null as ticked;
select * from tx93.take();
select queue_cur_table as table_before from pgque.queue where queue_name = 'tx93' \gset
select pgque.set_queue_config('tx93', 'rotation_period', '1 millisecond');
select pg_catalog.pg_sleep(0.01);
select pgque.maint() >= 0 as maint_ran;
select pgque.maint() >= 0 as maint_ran;
select queue_cur_table <> :table_before as rotated from pgque.queue where queue_name = 'tx93';
select tx93.send('rotated-');
select * from tx93.unticked();
select pgque.ticker('tx93') is not null as ticked;
select * from tx93.take();
select tx93.reindex('create index %2$s on %1$s (ev_txid)');
select tx93.send('again-');
select * from tx93.unticked();
select pgque.ticker('tx93') is not null as ticked;
select * from tx93.take();

drop schema tx93 cascade;
select pgque.drop_queue('tx93', true);
