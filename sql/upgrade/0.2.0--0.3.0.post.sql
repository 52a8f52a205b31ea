-- 0.2.0 -> 0.3.0, hand-written steps that need the 0.3.0 functions or
-- change rows: they run after every function was replayed (ADR 0019, 0042).

-- Idempotency keys belong to the sending role (the column came in the pre
-- step): the claims of 0.2.0 had no owner and keep role 0, which every
-- role still matches until the claim expires (at most 30 days), so an
-- update never lets a duplicate through.
update pgque.idem set idem_role = 0::pg_catalog.oid::pg_catalog.regrole;
alter table pgque.idem alter column idem_role set not null;
alter table pgque.idem add constraint idem_pkey primary key (queue_id, idem_role, idem_key);
