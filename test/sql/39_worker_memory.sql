-- The worker_memory measure and alert (ADR 0035), workers off: the limit's
-- default and units, the condition's rule against published figures, and
-- that no role below superuser can read the figures directly or silence the
-- alert by changing the limit (it is SIGHUP: postgresql.conf or ALTER
-- SYSTEM only).
create role pgque_t35_login login;
create role pgque_t35_admin in role pgque_admin;
create role pgque_t35_reader in role pgque_reader;
grant usage on schema pgque_test to public;

-- the limit: 64MB by default, read by SQL in bytes
show pgque_bgw.worker_memory_limit;
select pgque._worker_memory_limit() as limit_bytes;

-- the rule: a figure above a positive limit opens, none at 0 or NULL
-- (the library not loaded); the launcher publishes even with the workers off
select count(*) > 0 as launcher_published from pgque._worker_memory() where worker = 'launcher';
select kind, subject, details ? 'bytes' and details ? 'pid' and details ? 'measured_at' as has_figures,
       (details->>'limit_bytes')::int8 as limit_bytes
  from pgque._worker_memory_conditions(1) where subject = 'launcher';
select count(*) as over_a_huge_limit from pgque._worker_memory_conditions(pg_catalog.pg_size_bytes('1TB'));
select count(*) as none_when_off from pgque._worker_memory_conditions(0);
select count(*) as none_when_null from pgque._worker_memory_conditions(null);

-- metrics(): the kind is listed with nothing open
select value from pgque.metrics() where metric = 'pgque_alerts_open' and labels->>'kind' = 'worker_memory';

-- nobody but the owner reads the figures through the internal function
set role pgque_t35_login;
select pgque_test.error_of('select * from pgque._worker_memory()');
select pgque_test.error_of('select * from pgque._worker_memory_conditions(1)');
reset role;
set role pgque_t35_admin;
select pgque_test.error_of('select * from pgque._worker_memory()');
reset role;
-- a reader sees them in metrics()
set role pgque_t35_reader;
select count(*) > 0 as reader_sees_launcher_memory
  from pgque.metrics() where metric = 'pgque_worker_memory_bytes' and labels->>'worker' = 'launcher';
reset role;

-- the limit cannot be silenced from a session, a role or a database
set role pgque_t35_admin;
select pgque_test.error_of('set pgque_bgw.worker_memory_limit = 0');
select pgque_test.error_of($$select pg_catalog.set_config('pgque_bgw.worker_memory_limit', '0', false)$$);
select pgque_test.error_of('alter role pgque_t35_admin set pgque_bgw.worker_memory_limit = 0');
reset role;
select pgque_test.error_of('set pgque_bgw.worker_memory_limit = 0');
select pgque_test.error_of('alter role pgque_t35_login set pgque_bgw.worker_memory_limit = 0');
select pgque_test.error_of(format('alter database %I set pgque_bgw.worker_memory_limit = 0', current_database()));
show pgque_bgw.worker_memory_limit;

revoke usage on schema pgque_test from public;
drop role pgque_t35_login, pgque_t35_admin, pgque_t35_reader;
