-- Rotation on a full disk (ADR 0025).  TRUNCATE gives the table and each of
-- its indexes (the ev_txid index, the TOAST index; of the partition buckets
-- too) a new file, and an index's new file gets its metapage at once: on a
-- full tablespace that write fails, and the old files, which hold the space
-- to reclaim, are freed only at commit.  So each queue keeps a space
-- reserve in its event tables' tablespace: a table pgque.space_reserve_<id>
-- of a few pages and neither index nor TOAST table, whose own TRUNCATE
-- needs no space at all.  When step 1 fails for lack of space, the reserve
-- is emptied (freed at commit) and step 1 runs again in the next
-- transaction; maintenance fills the reserve again once there is room.

-- The queues' reserves inherit from it (empty itself), so that DROP
-- EXTENSION ... CASCADE drops them as it drops the event tables.  A bounded
-- char needs no TOAST table, nor is a 400-byte row compressed.
create table pgque.space_reserve_template (r pg_catalog.bpchar(400));

-- Rotation's TRUNCATE of an event table (step 1 holds its ACCESS EXCLUSIVE
-- lock, which covers its buckets).  A table whose heaps have no page at all
-- is left as it is: it is what TRUNCATE would make, and on a full disk the
-- new files TRUNCATE makes cannot be written, so the empty tables of a full
-- queue still rotate and the reserve is kept for the one that holds data.
create function pgque._truncate_event_table(i_table regclass)
returns void language plpgsql
set search_path = pgque, pg_catalog, pg_temp as $$
begin
    if exists (select 1 from pg_catalog.pg_class c
                where (c.oid = i_table
                       or c.oid in (select i.inhrelid from pg_catalog.pg_inherits i where i.inhparent = i_table))
                  and pg_catalog.pg_relation_size(c.oid) > 0) then
        execute 'truncate ' || i_table::text;
    end if;
end $$;

-- The reserve's name, qualified and quoted.  Stable, as format() and the
-- cast of the id are: an immutable one was not inlined, and cost the
-- maintenance worker's listing (_maint_queue_steps) a call per queue and
-- pass (ADR 0103).
create function pgque._space_reserve_name(q pgque.queue)
returns text language sql stable as $$
    select pg_catalog.format('pgque.%I', 'space_reserve_' operator(pg_catalog.||) q.queue_id)
$$;

-- Pages one TRUNCATE of an event table needs: one metapage per index of the
-- table, of its buckets and of their TOAST tables; twice that (and 16
-- more) as a margin for producers that may take freed pages first.
create function pgque._space_reserve_pages(i_table regclass)
returns int8 language sql stable
set search_path = pgque, pg_catalog, pg_temp as $$
    -- index probes only (pg_inherits by parent, pg_class by oid, pg_index
    -- by indrelid): a seq scan of pg_class per queue cost ~10 ms with
    -- 1,000 queues (ADR 0031)
    with rels as (
        select i_table::oid as oid
        union all
        select i.inhrelid from pg_catalog.pg_inherits i where i.inhparent = i_table
    ), withtoast as (
        select r.oid from rels r
        union all
        select c.reltoastrelid from pg_catalog.pg_class c join rels r on c.oid = r.oid
         where c.reltoastrelid <> 0
    )
    select 16 + 2 * pg_catalog.count(*)
      from withtoast w join pg_catalog.pg_index x on x.indrelid = w.oid
$$;

-- Keep the queue's reserve: created where the queue's next table to
-- truncate lives (moved with it when an operator moves the event tables),
-- filled up to _space_reserve_pages.  Writes nothing when it is full.
-- -> pages added.
create function pgque._space_reserve_keep(i_queue_name text)
returns int8 language plpgsql
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    q       pgque.queue;
    nxt     regclass;
    res     regclass;
    spc     oid;
    want    int8;
    have    int8;
    bs      int8 := pg_catalog.current_setting('block_size')::int8;
    msg     text;
begin
    q := pgque._queue(i_queue_name);
    nxt := pg_catalog.to_regclass(pg_catalog.format('pgque.%I',
               pgque._event_table(q.queue_id, (q.queue_cur_table + 1) % q.queue_ntables, null)));
    if nxt is null then
        return 0;
    end if;
    spc := (select c.reltablespace from pg_catalog.pg_class c where c.oid = nxt);
    res := pg_catalog.to_regclass(pgque._space_reserve_name(q));
    if res is not null and (select c.reltablespace from pg_catalog.pg_class c where c.oid = res) <> spc then
        execute 'drop table ' || pgque._space_reserve_name(q);
        res := null;
    end if;
    if res is null then
        -- a row of 400 bytes in 10% of a page: a page per row
        execute pg_catalog.format(
            'create table %s () inherits (pgque.space_reserve_template) '
            'with (fillfactor = 10, autovacuum_enabled = off) tablespace %I',
            pgque._space_reserve_name(q),
            case when spc = 0 then 'pg_default'
                 else (select t.spcname from pg_catalog.pg_tablespace t where t.oid = spc) end);
        res := pg_catalog.to_regclass(pgque._space_reserve_name(q));
    end if;
    want := pgque._space_reserve_pages(nxt);
    have := pg_catalog.pg_relation_size(res) / bs;
    if have >= want then
        return 0;
    end if;
    begin
        execute pg_catalog.format('insert into %s select %L from pg_catalog.generate_series(1, $1)', res::text, '')
          using (want - have)::int4;
    exception when disk_full then
        -- still full: said by the maint_failed alert until there is room
        get stacked diagnostics msg = message_text;
        perform pgque._maint_failed('space reserve', i_queue_name, msg, '53100');
        return 0;
    end;
    perform pgque._maint_ok('space reserve', i_queue_name);
    return pg_catalog.pg_relation_size(res) / bs - have;
end $$;

-- Rotation step 1, with the disk-full path: on "no space left" the failure
-- is recorded (the maint_failed alert), the reserve is emptied and -1 is
-- returned: the caller commits (which frees the reserve's pages) and runs
-- step 1 again.  -> 1 switched / 0 not now / -1 reserve freed, run again.
create function pgque._maint_rotate_step1(i_queue_name text)
returns int4 language plpgsql
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    msg  text;
    res  text;
    n    int4;
begin
    n := pgque.maint_rotate_tables_step1(i_queue_name);
    perform pgque._maint_ok('rotation step 1', i_queue_name);
    return n;
exception when disk_full then
    get stacked diagnostics msg = message_text;
    perform pgque._maint_failed('rotation step 1', i_queue_name, msg, '53100');
    res := pgque._space_reserve_name(pgque._queue(i_queue_name));
    if pg_catalog.to_regclass(res) is null
       or pg_catalog.pg_relation_size(pg_catalog.to_regclass(res)) = 0 then
        raise warning 'rotation step 1 of queue "%" failed: %', i_queue_name, msg
            using detail = 'The space reserve of the queue is empty.',
                  hint = 'Free or add space in the tablespace of the queue''s event tables.';
        return 0;
    end if;
    execute 'truncate ' || res;
    raise warning 'rotation step 1 of queue "%" failed: %', i_queue_name, msg
        using detail = 'The queue''s space reserve is freed for the next attempt.';
    return -1;
end $$;

-- The queues with a per-queue maintenance step to run (maint.c), in one
-- statement of index probes instead of two transactions per queue and
-- pass (ADR 0031):
--   rotate:  rotation is due (_rotation_due);
--   reserve: _space_reserve_keep has work: the next table to truncate
--            exists and its reserve is missing or in another tablespace.
--            maint.c also keeps the reserve of every queue it switched
--            (the next table, and with it the pages wanted, changed) or
--            whose reserve step 1 emptied; a reserve short of pages
--            otherwise (partition buckets added since) is topped up at the
--            queue's next switch.  No relation is opened: with 1,000
--            queues a size per queue cost more than the rest of the pass;
--   either while a failure of it is recorded (its success marks the
--   failure recovered: the maint_failed alert clears).
create function pgque._maint_queue_steps(out queue_name text, out rotate boolean, out reserve boolean)
returns setof record language sql stable
set search_path = pgque, pg_catalog, pg_temp as $$
    select x.queue_name, x.rotate, x.reserve from (
        select q.queue_id, q.queue_name,
               pgque._rotation_due(q) or coalesce(f.rotate_failing, false) as rotate,
               (r.nxt is not null
                and (r.res is null
                     -- the two in another tablespace each: one probe of pg_class for both
                     or (select pg_catalog.count(distinct c.reltablespace) from pg_catalog.pg_class c
                          where c.oid in (r.res, r.nxt)) > 1))
               or coalesce(f.reserve_failing, false) as reserve
          from pgque.queue q
         cross join lateral (
               select pg_catalog.to_regclass(pg_catalog.format('pgque.%I',
                          pgque._event_table(q.queue_id, (q.queue_cur_table + 1) % q.queue_ntables, null))) as nxt,
                      pg_catalog.to_regclass(pgque._space_reserve_name(q)) as res) r
          left join (select mf.mf_queue,
                            pg_catalog.bool_or(mf.mf_step = 'rotation step 1') as rotate_failing,
                            pg_catalog.bool_or(mf.mf_step = 'space reserve') as reserve_failing
                       from pgque.maint_failure mf
                      where mf.mf_recovered_at is null
                      group by mf.mf_queue) f on f.mf_queue = q.queue_name) x
     where x.rotate or x.reserve
     order by x.queue_id
$$;
