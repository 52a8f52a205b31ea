-- Start this database's workers as soon as CREATE EXTENSION commits.
create function pgque._wake_launcher_at_commit()
returns void language c
as 'MODULE_PATHNAME', 'pgque_wake_launcher_at_commit';
select pgque._wake_launcher_at_commit();

-- Leases left in shared memory by an earlier install in this database are
-- forgotten (DROP EXTENSION also clears them at commit).
select pgque._slot_forget(null, null);
