-- The tick in C (ADR 0123): pgque._tick, _tick_visit and _tick_snapshot
-- are one C implementation, the ticker worker's and SQL's.  Its ticks
-- are those the PL/pgSQL tick of 0.3.0 before it wrote: the reference
-- below is that code (t96.ref_*), run beside it on a twin queue with the
-- same history, in the same transaction; the rows must be equal (the
-- snapshot, tick_event_seq, tick_time), and the decisions (due or not)
-- the same.  Then the rules one by one: a transaction ticking its own
-- events, the serialization check, the cooperative windows, a queue
-- being dropped, a locked row, bad input.
create schema t96;
-- the snapshot rule and the tick as PL/pgSQL had them (main before ADR 0123)
create function t96.ref_snapshot()
returns pg_catalog.pg_snapshot language plpgsql volatile as $$
declare
    s   pg_catalog.pg_snapshot := pg_catalog.pg_current_snapshot();
    me  xid8 := pg_catalog.pg_current_xact_id_if_assigned();
begin
    if me is null or me >= pg_catalog.pg_snapshot_xmax(s) then
        return s;
    end if;
    return (select pg_catalog.format('%s:%s:%s',
                       least(pg_catalog.pg_snapshot_xmin(s), me), pg_catalog.pg_snapshot_xmax(s),
                       pg_catalog.string_agg(x::text, ',' order by x))
              from (select pg_catalog.pg_snapshot_xip(s) as x union select me) xs)::pg_catalog.pg_snapshot;
end $$;
create function t96.ref_tick(q pgque.queue)
returns bigint language plpgsql as $$
declare
    tid   bigint;
    last  pgque.tick;
    snap  pg_catalog.pg_snapshot;
begin
    snap := t96.ref_snapshot();
    select * into last from pgque.tick where tick_queue = q.queue_id order by tick_id desc limit 1;
    if found and pg_catalog.pg_snapshot_xmax(snap) < pg_catalog.pg_snapshot_xmax(last.tick_snapshot) then
        raise exception 'cannot tick queue "%": this transaction''s snapshot is older than the last tick', q.queue_name
            using errcode = 'serialization_failure';
    end if;
    insert into pgque.tick (tick_queue, tick_id, tick_time, tick_snapshot, tick_event_seq)
    values (q.queue_id, pg_catalog.nextval(q.queue_tick_seq::regclass), now(), snap,
            greatest(pgque._event_seq_pos(q), coalesce(last.tick_event_seq, 0)))
    returning tick_id into tid;
    perform pgque._coop_sync(s.sub_id) from pgque.subscription s
      where s.sub_queue = q.queue_id and s.sub_role = 'coop_main';
    perform pg_catalog.pg_notify('pgque_' || q.queue_name, tid::text);
    perform pgque._tick_wakes_at_commit(q.queue_id);
    return tid;
end $$;
create function t96.ref_due(q pgque.queue)
returns boolean language plpgsql as $$
declare
    last pgque.tick;
begin
    select * into last from pgque.tick where tick_queue = q.queue_id order by tick_id desc limit 1;
    return not found
        or pgque._event_seq_pos(q) > last.tick_event_seq
        or last.tick_time + q.queue_ticker_idle_period <= now()
        or pgque._has_unticked_events(q, last);
end $$;
create function t96.q(i_name text) returns pgque.queue language sql as $$
    select q from pgque.queue q where q.queue_name = i_name
$$;
-- the C tick's and the reference's rows, side by side: equal or not
create function t96.same() returns table (ticks bigint, snapshots_equal boolean, seqs_equal boolean,
                                          times_equal boolean) language sql as $$
    select count(*), bool_and(a.tick_snapshot::text = b.tick_snapshot::text),
           bool_and(a.tick_event_seq = b.tick_event_seq), bool_and(a.tick_time = b.tick_time)
      from (select t.*, row_number() over (order by t.tick_id) n from pgque.tick t
             where t.tick_queue = (t96.q('c96')).queue_id) a
      full join (select t.*, row_number() over (order by t.tick_id) n from pgque.tick t
                  where t.tick_queue = (t96.q('r96')).queue_id) b using (n)
$$;
-- the consumer's batches, each one's payloads, acked
create function t96.drain(i_queue text) returns text language plpgsql as $$
declare
    b    bigint;
    p    text;
    r    text := '';
begin
    for i in 1 .. 10 loop
        select max(m.batch_id), string_agg(m.payload, ',' order by m.msg_id) into b, p
          from pgque.receive(i_queue, 'x', 100) m;
        exit when b is null;
        r := r || '[' || p || ']';
        perform pgque.ack(b);
    end loop;
    return r;
end $$;
-- the SQLSTATE of a statement (or ok)
create function t96.try(sql text) returns text language plpgsql as $$
begin
    execute sql;
    return 'ok';
exception when others then
    return sqlstate || ': ' || sqlerrm;
end $$;

select pgque.create_queue('c96'), pgque.create_queue('r96');
-- queues of this test only: the twins' idle ticks never fall due in it
select pgque.set_queue_config(n, 'ticker_idle_period', '1 hour') from unnest(array['c96', 'r96']) n;
select pgque.subscribe('c96', 'x'), pgque.subscribe('r96', 'x');

-- 1. create_queue's tick is there: nothing due; the unconditional tick
-- (_tick, the caller holding the row) both ways in one transaction
select pgque._tick_due(t96.q('c96')) as c_due, t96.ref_due(t96.q('r96')) as ref_due;
begin;
select pgque._tick(t96.q('c96')) > 0 as c_ticked, t96.ref_tick(t96.q('r96')) > 0 as ref_ticked;
select (select tick_time from pgque.tick where tick_queue = (t96.q('c96')).queue_id
         order by tick_id desc limit 1) = now() as tick_time_is_now;
commit;
select * from t96.same();

-- 2. nothing new: neither is due, ticker() writes nothing
select pgque._tick_due(t96.q('c96')) as c_due, t96.ref_due(t96.q('r96')) as ref_due;
select pgque.ticker('c96') as c_tick;

-- 3. events: the sequence moved, both due; tick_event_seq the position
select pgque.send('c96', 'e1'), pgque.send('r96', 'e1'), pgque.send('c96', 'e2'), pgque.send('r96', 'e2');
select pgque._tick_due(t96.q('c96')) as c_due, t96.ref_due(t96.q('r96')) as ref_due;
begin;
select pgque._tick(t96.q('c96')) > 0 as c_ticked, t96.ref_tick(t96.q('r96')) > 0 as ref_ticked;
commit;
select * from t96.same();
select tick_event_seq from pgque.tick where tick_queue = (t96.q('c96')).queue_id order by tick_id;

-- 4. a transaction ticking its own events: they are not in that tick, in
-- the next (SPEC §2); its snapshot lists the transaction's xid in progress
-- whenever a later xid completed before it (a rolled-back savepoint's)
begin;
select pgque.send('c96', 'own'), pgque.send('r96', 'own');
savepoint s;
select pgque.send('c96', 'rolled back'), pgque.send('r96', 'rolled back');
rollback to savepoint s;
select pgque._tick(t96.q('c96')) > 0 as c_ticked, t96.ref_tick(t96.q('r96')) > 0 as ref_ticked;
select pgque._tick_snapshot()::text = t96.ref_snapshot()::text as snapshot_rule_equal,
       pg_catalog.pg_visible_in_snapshot(pg_catalog.pg_current_xact_id(), pgque._tick_snapshot()) as own_xid_visible,
       pg_catalog.pg_current_xact_id() in (select pg_catalog.pg_snapshot_xip(pgque._tick_snapshot())) as own_xid_listed;
commit;
select * from t96.same();
-- committed after its tick, not covered by it: due, through the probe of
-- the event tables (the sequence did not move since)
select pgque._tick_due(t96.q('c96')) as c_due, t96.ref_due(t96.q('r96')) as ref_due;
select pgque.ticker('c96') > 0 as c_ticked, t96.ref_tick(t96.q('r96')) > 0 as ref_ticked;
select * from t96.same();
-- the consumer gets e1, e2, then "own" in a batch of its own
select t96.drain('c96') as c_batches, t96.drain('r96') as ref_batches;

-- 5. the snapshot rule with another transaction in progress (prepared),
-- older than the caller's: C and PL/pgSQL agree
begin;
select pgque.send('c96', 'prepared') is not null and pgque.send('r96', 'prepared') is not null as sent;
prepare transaction 't96';
begin;
select pgque.send('c96', 'late') is not null and pgque.send('r96', 'late') is not null as sent;
savepoint s;
select pgque.send('c96', 'rolled back') is not null and pgque.send('r96', 'rolled back') is not null as sent;
rollback to savepoint s;
select pgque._tick_snapshot()::text = t96.ref_snapshot()::text as snapshot_rule_equal,
       pg_catalog.pg_snapshot_xmin(pgque._tick_snapshot()) < pg_catalog.pg_current_xact_id() as xmin_older;
commit;
commit prepared 't96';

-- 6. the serialization check: a last tick whose snapshot is newer than
-- the caller's (here, a row written by hand) -> 40001, nothing written
select max(tick_id) + 1 as fake from pgque.tick where tick_queue = (t96.q('c96')).queue_id \gset
insert into pgque.tick (tick_queue, tick_id, tick_time, tick_snapshot, tick_event_seq)
select (t96.q('c96')).queue_id, :fake, now(), '99999999:99999999:', 0;
select t96.try($$select pgque._tick(t96.q('c96'))$$) as c_tick;
select t96.try($$select pgque.ticker('c96')$$) as ticker;
delete from pgque.tick where tick_queue = (t96.q('c96')).queue_id and tick_id = :fake;

-- 7. cooperative groups get their windows at each tick, as the reference's
select pgque.register_subconsumer('c96', 'g', 'm1'), pgque.register_subconsumer('r96', 'g', 'm1');
select pgque.send('c96', 'coop'), pgque.send('r96', 'coop');
begin;
select pgque._tick(t96.q('c96')) > 0 as c_ticked, t96.ref_tick(t96.q('r96')) > 0 as ref_ticked;
commit;
select pgque.send('c96', 'coop2'), pgque.send('r96', 'coop2');
begin;
select pgque._tick(t96.q('c96')) > 0 as c_ticked, t96.ref_tick(t96.q('r96')) > 0 as ref_ticked;
commit;
select q.queue_name, count(w.*) as windows,
       s.sub_coop_hw = (select max(tick_id) from pgque.tick t where t.tick_queue = q.queue_id) as hw_at_last_tick
  from pgque.queue q join pgque.subscription s on s.sub_queue = q.queue_id and s.sub_role = 'coop_main'
  left join pgque.coop_window w on w.cw_sub = s.sub_id
 where q.queue_name in ('c96', 'r96') group by q.queue_name, s.sub_coop_hw, q.queue_id order by 1;
select * from t96.same();

-- 8. the visit: a queue being dropped (its DDL lock held by another
-- transaction, here a prepared one) is skipped (NULL); a row another
-- transaction holds locked is not waited for (0); then it ticks, and
-- then nothing is due (NULL)
select pgque.send('c96', 'v') is not null as sent;
begin;
select pgque._queue_ddl_lock((t96.q('c96')).queue_id);
prepare transaction 't96_ddl';
select pgque._tick_visit(t96.q('c96'), false) is null as visit_while_dropping_is_null;
rollback prepared 't96_ddl';
begin;
select from pgque.queue where queue_name = 'c96' for no key update;
prepare transaction 't96_row';
select pgque._tick_visit(t96.q('c96'), false) as visit_of_a_locked_row;
select pgque._tick_many(array[(t96.q('c96')).queue_id]) = -(t96.q('c96')).queue_id as tick_many_says_busy;
rollback prepared 't96_row';
select pgque._tick_visit(t96.q('c96'), false) > 0 as visit_ticks;
select pgque._tick_visit(t96.q('c96'), false) is null as not_due_is_null;
-- a paused queue is not the worker's: no tick from its visit
select pgque.send('c96', 'paused');
select pgque.set_queue_config('c96', 'ticker_paused', 'true');
select pgque._tick_visit(t96.q('c96'), false) is null as paused_is_null;
select pgque.set_queue_config('c96', 'ticker_paused', 'false');
select pgque._tick_many(array[(t96.q('c96')).queue_id]) > 0 as tick_many_ticks;

-- 9. bad input: NULL in, NULL out (strict); a queue id that does not exist
select pgque._tick_visit(null, false) is null as null_queue,
       pgque._tick_visit(t96.q('c96'), null) is null as null_wait;
select t96.try($q$do $d$ declare q pgque.queue := t96.q('c96');
                 begin q.queue_id := -1; perform pgque._tick(q); end $d$ $q$) as unknown_queue;
select t96.try($q$do $d$ declare q pgque.queue := t96.q('c96');
                 begin q.queue_id := null; perform pgque._tick(q); end $d$ $q$) as null_queue_id;
select t96.try($q$do $d$ declare q pgque.queue := t96.q('c96');
                 begin q.queue_id := -1; perform pgque._tick_visit(q, true); end $d$ $q$) as visit_unknown_queue;

-- 9b. the tick sequence belongs to pgque_owner, a role nobody is (ADR
-- 0042): no queue owner alters or drops it.  Renamed by a superuser, the
-- tick fails with 42P01 and writes nothing; named back, it ticks again
select pg_catalog.pg_get_userbyid(c.relowner) as tick_seq_owner
  from pg_catalog.pg_class c where c.oid = (t96.q('c96')).queue_tick_seq::regclass;
select (t96.q('c96')).queue_tick_seq as tseq,
       pg_catalog.split_part((t96.q('c96')).queue_tick_seq, '.', 2) as tname \gset
alter sequence :tseq rename to t96_moved;
select pgque.send('c96', 'seq') is not null as sent;
select pg_catalog.left(t96.try($$select pgque.ticker('c96')$$), 5) as ticker_without_its_sequence;
alter sequence pgque.t96_moved rename to :tname;
select pgque.ticker('c96') > 0 as ticks_again;

-- 10. attacks (ADR 0123): the tick's statements resolve no name through
-- the caller's search_path.  A role of the API puts an operator = on int4
-- and > on int8 that would raise in a schema of its own first on its path,
-- and ticks: the tick is written, the planted operators never run; and a
-- trigger on pgque.tick is not its to add (42501)
create role pgque_t96_admin in role pgque_admin;
grant usage on schema t96 to pgque_t96_admin;
grant execute on function t96.try(text) to pgque_t96_admin;
create schema t96evil authorization pgque_t96_admin;
set role pgque_t96_admin;
create function t96evil.planted(int4, int4) returns boolean language plpgsql as $$
begin raise exception 'planted operator ran'; end $$;
create function t96evil.planted8(int8, int8) returns boolean language plpgsql as $$
begin raise exception 'planted operator ran'; end $$;
create operator t96evil.= (function = t96evil.planted, leftarg = int4, rightarg = int4);
create operator t96evil.> (function = t96evil.planted8, leftarg = int8, rightarg = int8);
create function t96evil.trg() returns trigger language plpgsql as $$ begin return new; end $$;
set search_path = t96evil, pg_catalog, public;
select 1::int4 = 1::int4;
select pgque.send('c96', 'attack') is not null as sent;
select pgque.ticker('c96') > 0 as ticked_past_the_planted_operators;
select t96.try($q$create trigger t96 before insert on pgque.tick for each row execute function t96evil.trg()$q$)
       as trigger_on_tick;
reset search_path;
reset role;
drop schema t96evil cascade;
drop owned by pgque_t96_admin;
drop role pgque_t96_admin;

select pgque.drop_queue(n, true) from unnest(array['c96', 'r96']) n;
drop schema t96 cascade;
