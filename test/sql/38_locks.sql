-- The extension's own locks (ADR 0040): object locks on (a pgque table,
-- key), taken only by pgque._lock, which no role but the owner may execute.
-- They are transaction-level: released at commit, at abort and at the
-- rollback of the subtransaction that took them, handed to a prepared
-- transaction; shared and exclusive conflict.
create role pgque_t35_login login;
create role pgque_t35_admin in role pgque_admin;
select pgque.create_queue('t35');
create temp view t35_locks as
    select classid::regclass as class, objid, objsubid, mode, granted, pid is null as prepared
      from pg_locks
     where locktype = 'object' and classid in ('pgque.queue'::regclass, 'pgque.coop_member'::regclass)
     order by 1, 2, 4;
select queue_id as qid from pgque.queue where queue_name = 't35' \gset

-- nobody else may take them
set role pgque_t35_login;
select pgque._lock('pgque.queue', 1, true, true);
reset role;
set role pgque_t35_admin;
select pgque._lock('pgque.queue', 1, true, true);
reset role;
-- nor the queue's DDL lock, whose rule (class pgque.queue, key the queue's
-- id) is written once in C for SQL and the ticker (pgque._queue_lock)
set role pgque_t35_login;
select pgque._queue_lock(1, true, true);
reset role;
set role pgque_t35_admin;
select pgque._queue_lock(1, false, false);
reset role;
select pgque._queue_lock(:qid, null, true) is null as strict;
-- its lock, as pg_locks shows it: the queue's id under class pgque.queue
-- (the ticker's try meets a drop's hold: isolation lock_squat)
begin;
select pgque._queue_lock(:qid, true, true) as held;
select class, objid = :qid as is_queue, objsubid, mode from t35_locks;
commit;

-- bad input (the owner's): a class outside pgque, a key outside 48 bits
select pgque._lock('pg_catalog.pg_class', 1, true, true);
select pgque._lock(0, 1, true, true);
select pgque._lock('pgque.queue', -1, true, true);
select pgque._lock('pgque.queue', 281474976710656, true, true);
select pgque._lock('pgque.queue', null, true, true) is null as strict;

-- a drop's lock, as pg_locks shows it; gone at commit
begin;
select pgque._queue_ddl_lock(:qid);
select class, objid = :qid as is_queue, objsubid, mode, granted from t35_locks;
commit;
select count(*) as after_commit from t35_locks;

-- gone at abort
begin;
select pgque._queue_ddl_lock(:qid);
select 1 / 0;
rollback;
select count(*) as after_abort from t35_locks;

-- gone at the rollback of the subtransaction that took it
begin;
savepoint s;
select pgque._queue_try_share(:qid) as shared;
rollback to savepoint s;
select count(*) as after_rollback_to_savepoint from t35_locks;
commit;

-- a member's lock: 48 bits of the hash in objid and objsubid
begin;
select pgque._coop_member_lock(7, 'm1');
select class, (objsubid::int8 << 32) + objid::int8
              = hashtextextended('pgque coop member 7/m1', 0) & 281474976710655 as same_key, mode
  from t35_locks;
commit;

-- handed to a prepared transaction, which holds the queue against the
-- workers' try until it commits
begin;
select pgque._queue_ddl_lock(:qid);
prepare transaction 't35';
select class, mode, prepared from t35_locks;
select pgque._queue_try_share(:qid) as worker_gets_it;
commit prepared 't35';
select pgque._queue_try_share(:qid) as worker_gets_it;

-- the 0.2.0 advisory key of the queue, held by this session: nothing cares
select pg_advisory_lock(1885827445, :qid);
select pgque.drop_queue('t35') as dropped;
select pg_advisory_unlock_all();

drop view t35_locks;
drop role pgque_t35_login;
drop role pgque_t35_admin;
