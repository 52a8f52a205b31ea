-- Name resolution (ADR 0014): no function of the extension resolves a name
-- through a search_path that someone other than the owner controls.

-- Every function someone other than the owner may execute, and every one
-- the background workers or ticker_loop call directly, pins its search_path.  Internal
-- helpers ("_" names, executable by the owner only) run under the path of
-- their pinned caller; pinning each of them costs a GUC save/restore per
-- call and made the ticker 5x slower.  The exceptions are written fully
-- qualified: ticker_loop (a procedure that commits cannot carry SET).
select p.oid::regprocedure as unpinned, l.lanname, p.prokind
  from pg_proc p join pg_language l on l.oid = p.prolang
 where p.pronamespace = 'pgque'::regnamespace and l.lanname <> 'c'
   and (p.proname not like '\_%' or p.proname in ('_watchdog_pass', '_maint_idem_batch', '_check_interval'))
   and not coalesce(p.proconfig @> array['search_path=pgque, pg_catalog, pg_temp'], false)
 order by 1::text;

-- internal helpers are executable by their owner only: nobody can call one
-- from a session whose search_path the owner does not control by accident;
-- the exceptions, granted to pgque_admin, are the three that entry points
-- running as their caller call: _check_interval (ticker_loop), _preloaded
-- and _cron_jobs (start, stop; ADR 0042), each pinned
select p.oid::regprocedure as internal_granted_to_others
  from pg_proc p
 where p.pronamespace = 'pgque'::regnamespace and p.proname like '\_%'
   and exists (select 1 from aclexplode(p.proacl) a
                where a.privilege_type = 'EXECUTE' and a.grantee <> p.proowner)
 order by 1::text;
-- (PUBLIC: proacl is NULL only before the REVOKE; none is left NULL)
select count(*) as internal_with_default_acl
  from pg_proc p
 where p.pronamespace = 'pgque'::regnamespace and p.proname like '\_%' and p.proacl is null;

-- SECURITY DEFINER functions all carry it
select count(*) as secdef_without_pinned_path
  from pg_proc p
 where p.pronamespace = 'pgque'::regnamespace and p.prosecdef
   and not coalesce(p.proconfig @> array['search_path=pgque, pg_catalog, pg_temp'], false);

-- The attack: a schema that comes first in the caller's search_path, with
-- exact-match operators and functions that the engine's SQL would pick if it
-- resolved names through that path.  Each records that it was called.
create schema evil;
create table evil.calls (what text);
create function evil.hit(i_what text) returns void language sql as
  $$ insert into evil.calls values (i_what) $$;
create function evil.mul(numeric, int4) returns numeric language sql as
  $$ select evil.hit('*(numeric,int4)'); select $1 * $2::numeric $$;
create operator evil.* (leftarg = numeric, rightarg = int4, function = evil.mul);
create function evil.mod(int8, int4) returns int8 language sql as
  $$ select evil.hit('%(int8,int4)'); select $1 % $2::int8 $$;
create operator evil.% (leftarg = int8, rightarg = int4, function = evil.mod);
create function evil.ts_plus(timestamptz, interval) returns timestamptz language sql as
  $$ select evil.hit('+(timestamptz,interval)'); select $1 operator(pg_catalog.+) $2 $$;
create operator evil.+ (leftarg = timestamptz, rightarg = interval, function = evil.ts_plus);
create function evil.iv_gt(interval, interval) returns boolean language sql as
  $$ select evil.hit('>(interval,interval)'); select $1 operator(pg_catalog.>) $2 $$;
create operator evil.> (leftarg = interval, rightarg = interval, function = evil.iv_gt);
create function evil.cat(text, int4) returns text language sql as
  $$ select evil.hit('||(text,int4)'); select $1 operator(pg_catalog.||) $2::text $$;
create operator evil.|| (leftarg = text, rightarg = int4, function = evil.cat);
create function evil.make_interval(secs int4) returns interval language sql as
  $$ select evil.hit('make_interval(int4)'); select pg_catalog.make_interval(secs => $1) $$;
create function evil.now() returns timestamptz language sql as
  $$ select evil.hit('now()'); select pg_catalog.now() $$;

select pgque.create_queue('sp');
select pgque.subscribe('sp', 'c');
select pgque.subscribe_slot('sp', 'pc', 0, 2);
select pgque.subscribe_slot('sp', 'pc', 1, 2);
select pgque.claim_slot('sp', 'pc', 0, 'w0') is not null as claimed;

-- the same calls a background worker, a pg_cron job or a careless superuser
-- session makes, under the hostile path
set search_path = evil, pg_catalog, public;
select pgque.send('sp', 't', 'k1', 'key-a') is not null as sent;
select pgque.send_batch('sp', 't', array['a', 'b'], array['key-b', 'key-c']) is not null as sent_batch;
select pgque.ticker('sp') is not null as ticked;
select count(*) as received from pgque.receive('sp', 'c', 10);
select count(*) >= 0 as slot_received from pgque.receive_partitioned('sp', 'pc', 0, 2, 'w0', 10);
select count(*) > 0 as slot_status from pgque.partition_slot_status;
select pgque.maint() >= 0 as maint_ran;
set client_min_messages = error;  -- alerts it opens are not what this checks
select count(*) >= 0 as watchdog_pass from pgque._watchdog_pass('1 s', '1 s', '1 h', '1 h', '1 h');
reset client_min_messages;
call pgque.ticker_loop('200 milliseconds', '100 milliseconds');
reset search_path;

select count(*) as hostile_calls, string_agg(distinct what, ', ') as which from evil.calls;

-- the helpers still compute what they did
select pgque._slot_name('pc', 1, 2) as slot_name, pgque._slot_of('key-a', 2) = (
         (hashtextextended('key-a', 0) % 2 + 2) % 2)::int4 as slot_of_unchanged;

drop schema evil cascade;
select pgque.unsubscribe_slot('sp', 'pc', 0);
select pgque.unsubscribe_slot('sp', 'pc', 1);
select pgque.drop_queue('sp', true);
