-- receive() forms each message straight from the event row's bytes (ADR
-- 0086): every column of every kind of stored value must come out as the
-- executor's own read of the same events (get_batch_events, through
-- _window_rows) gives it: nulls in each column, short and long text (a
-- 4-byte header), text compressed in line and text stored out of line
-- (TOAST), multibyte text, a retried event (its owner and retry count), on
-- an unbucketed queue and on a bucketed one, in parts and whole.
select pgque.create_queue('mr'), pgque.subscribe('mr', 'c'), pgque.subscribe('mr', 'peek');
select pgque.create_queue('mrb'), pgque.set_queue_config('mrb', 'partition_buckets', '4');
select pgque.subscribe('mrb', 'c'), pgque.subscribe('mrb', 'peek');
create temp table sent (q text, type text, payload text, e1 text, e2 text, e3 text, e4 text);
insert into sent
select q, t.type, t.payload, t.e1, t.e2, t.e3, t.e4
  from unnest(array['mr', 'mrb']) q,
       (values ('t', 'short', null, null, null, null),
               (null, 'no type', 'k1', null, null, null),
               ('t', null, 'k2', 'x2', null, null),
               ('t', 'all extras', 'k3', 'x2', 'x3', 'x4'),
               (null, null, null, null, null, null),
               ('long', repeat('a', 126), 'k4', null, 'x3', null),
               ('long', repeat('b', 127), null, repeat('e', 200), null, 'x4'),
               ('long', repeat('c', 1000), 'k5', null, null, null),
               ('compressed', repeat('abcdefgh', 4000), 'k6', repeat('z', 300), null, null),
               ('external', (select string_agg(md5(i::text), '') from generate_series(1, 400) i), 'k7', null, null, 'x4'),
               ('utf8', 'Grüße, 日本語, émoji 🎉', 'clé', 'ß', null, null),
               ('', '', '', '', '', '')) t(type, payload, e1, e2, e3, e4);
select count(pgque.insert_event(q, type, payload, e1, e2, e3, e4)) as sent from sent;
-- the stored forms the test means to cover, per queue: a value compressed
-- in line, one out of line (compressed, still past the 2 kB threshold)
select ev_type, pg_column_size(ev_data) < 2000 as in_line, pg_column_size(ev_data) < octet_length(ev_data) as compressed,
       count(*) as n
  from pgque.event_template where ev_type in ('compressed', 'external') group by 1, 2, 3 order by 1;
select pgque.ticker('mr') is not null and pgque.ticker('mrb') is not null as ticked;

-- what the executor reads for each queue's window (peek), then receive()
-- in parts of 5 (c): the same rows, column by column
create temp table expected as
select q, ev.ev_id, ev.ev_type, ev.ev_data, ev.ev_retry, ev.ev_time, ev.ev_extra1, ev.ev_extra2, ev.ev_extra3, ev.ev_extra4
  from unnest(array['mr', 'mrb']) q, pgque.get_batch_events(pgque.next_batch(q, 'peek')) ev;
create temp table got (q text, m pgque.message);
create temp table taken (b bigint);
create function pg_temp.take(i_q text, i_max int4) returns int4 language plpgsql as $$
declare
    b bigint;
    n int4 := 0;
begin
    loop
        b := null;
        insert into got select i_q, m from pgque.receive(i_q, 'c', i_max) m;
        select max((m).batch_id) into b from got where q = i_q and not exists (select from taken t where t.b = (m).batch_id);
        exit when b is null;
        insert into taken values (b);
        n := n + 1;
        perform pgque.ack(b);
    end loop;
    return n;
end $$;
select pg_temp.take('mr', 5) as parts_mr, pg_temp.take('mrb', 5) as parts_mrb;
select e.q, count(*) as rows,
       count(*) filter (where (g.m).msg_id is null) as missing,
       count(*) filter (where (g.m).type is distinct from e.ev_type
                           or (g.m).payload is distinct from e.ev_data
                           or (g.m).retry_count is distinct from e.ev_retry
                           or (g.m).created_at is distinct from e.ev_time
                           or (g.m).extra1 is distinct from e.ev_extra1
                           or (g.m).extra2 is distinct from e.ev_extra2
                           or (g.m).extra3 is distinct from e.ev_extra3
                           or (g.m).extra4 is distinct from e.ev_extra4) as differ
  from expected e left join got g on g.q = e.q and (g.m).msg_id = e.ev_id
 group by e.q order by e.q;
-- and what was sent, in the order sent
select q, bool_and(x.same) as all_as_sent, count(*) as n
  from (select g.q, (g.m).type is not distinct from s.type and (g.m).payload is not distinct from s.payload
                    and (g.m).extra1 is not distinct from s.e1 and (g.m).extra2 is not distinct from s.e2
                    and (g.m).extra3 is not distinct from s.e3 and (g.m).extra4 is not distinct from s.e4 as same
          from (select q, m, row_number() over (partition by q order by (m).msg_id) rn from got) g
          join (select *, row_number() over (partition by q order by ctid) rn from sent) s using (q, rn)) x
 group by q order by q;
select pgque.finish_batch(b) from (select pgque.next_batch(q, 'peek') b from unnest(array['mr', 'mrb']) q) x;

-- a retried event (its owner set, retry count 1), the window in one part;
-- with every extra set, its message has no null at all (no null bitmap)
truncate got;
select pgque.insert_event(q, 'retry', 'retry me ' || repeat('r', 300), 'a', 'b', 'c', 'd') > 0 as sent
  from unnest(array['mr', 'mrb']) q;
select pgque.ticker(q) is not null as ticked from unnest(array['mr', 'mrb']) q;
select pgque.nack(m.batch_id, m, '0 seconds') as nacked
  from unnest(array['mr', 'mrb']) q, pgque.receive(q, 'c', 100) m;
select pgque.ack(b) as acked from (select distinct (m).batch_id b from unnest(array['mr', 'mrb']) q, pgque.receive(q, 'c', 100) m) x;
select pgque.maint_retry_events() as moved;
select pgque.ticker(q) is not null as ticked from unnest(array['mr', 'mrb']) q;
select pg_temp.take('mr', 100) as parts_mr, pg_temp.take('mrb', 100) as parts_mrb;
select q, (m).retry_count, (m).payload = 'retry me ' || repeat('r', 300) as payload_kept, (m).type,
       (m).extra1, (m).extra2, (m).extra3, (m).extra4, (m).created_at is not null as has_time
  from got order by q;
