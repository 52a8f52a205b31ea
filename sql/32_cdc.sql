-- Change-data-capture triggers (PgQ's logutriga, jsontriga, sqltriga), in C
-- (src/cdc.c): one event per row change, appended in the changing
-- transaction through the producer hot path.  Attach with
--   create trigger t after insert or update or delete on tbl
--       for each row execute function pgque.logutriga('queue' [, arg ...]);
-- and, for TRUNCATE, a FOR EACH STATEMENT trigger.  Not SECURITY DEFINER:
-- the C code itself runs the append as the extension owner and the
-- expressions as the table's owner (ADR 0015).

-- ev_type 'I:pk1,pk2' / 'U:..' / 'D:..' / 'R', ev_data url-encoded row
create function pgque.logutriga() returns trigger
language c as 'MODULE_PATHNAME', 'pgque_logutriga';

-- ev_type {"op":"INSERT","table":["schema","table"],"pkey":["id"]}, ev_data JSON row
create function pgque.jsontriga() returns trigger
language c as 'MODULE_PATHNAME', 'pgque_jsontriga';

-- ev_type 'I' / 'U' / 'D' / 'R', ev_data a SQL fragment
create function pgque.sqltriga() returns trigger
language c as 'MODULE_PATHNAME', 'pgque_sqltriga';
