-- A fresh install only (not replayed on upgrade): say at CREATE EXTENSION
-- when the background workers will not serve this database (ADR 0026).
select pgque._warn_if_unserved();
