-- 0.2.0 -> 0.3.0, hand-written steps: what "create or replace" of the
-- parts cannot do (ADR 0019).  Runs before every function of 0.3.0 is
-- replayed, so the functions find the columns and tables they use.  Each
-- step leaves the object exactly as a fresh 0.3.0 install makes it
-- (test/t/017_upgrade.pl compares them).  The released scripts of 0.1.0,
-- 0.2.0 and the 0.1.0 -> 0.2.0 step are frozen in sql/released/.

-- The queue's DDL lock is the extension's own lock now, not an advisory
-- lock on (this class constant, queue id) that any role could take
-- (ADR 0040): the constant goes.
drop function pgque._queue_lock_class();

-- The watchdog's reads leave out the queues whose DDL lock it could not
-- take (ADR 0040): both take the list as a new last argument.
drop function pgque._slot_pending_all();
drop function pgque._alert_conditions(interval, interval, interval, interval, interval);
