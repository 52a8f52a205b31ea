-- Every public object of the extension has a COMMENT (issue #28), so that
-- \dx+, \df+ and \d+ say what the docs say: the schema, and every function,
-- view, table and composite type in schema pgque that belongs to the
-- extension and whose name does not start with "_".  Lists those without.
create temp table public_objects as
with members as (
    select d.classid, d.objid
      from pg_depend d join pg_extension e on e.oid = d.refobjid
     where d.refclassid = 'pg_extension'::regclass and e.extname = 'pgque_bgw' and d.deptype = 'e'
)
select kind, name, oid, cls from (
    select 'function' as kind, p.oid::regprocedure::text as name, p.oid, 'pg_proc'::regclass as cls
      from pg_proc p join members m on m.classid = 'pg_proc'::regclass and m.objid = p.oid
     where p.proname !~ '^_'
    union all
    select case c.relkind when 'v' then 'view' else 'table' end, c.oid::regclass::text, c.oid, 'pg_class'::regclass
      from pg_class c join members m on m.classid = 'pg_class'::regclass and m.objid = c.oid
     where c.relname !~ '^_' and c.relkind in ('r', 'p', 'v')
    union all
    select 'type', t.oid::regtype::text, t.oid, 'pg_type'::regclass
      from pg_type t join members m on m.classid = 'pg_type'::regclass and m.objid = t.oid
     where t.typname !~ '^_' and t.typtype = 'c'
       and not exists (select 1 from pg_class c where c.oid = t.typrelid and c.relkind <> 'c')
    union all
    select 'schema', n.nspname::text, n.oid, 'pg_namespace'::regclass
      from pg_namespace n where n.nspname = 'pgque'
) o;
select count(*) > 100 as objects_checked, count(*) filter (where kind = 'schema') as schema
  from public_objects;
select kind, name from public_objects
 where obj_description(oid, cls::text) is null
 order by 1, 2;

-- the words are the reference's (docs/sql-reference.md, sql/gen_comments.pl)
select obj_description('pgque.send(text,text,text,text)'::regprocedure, 'pg_proc') as send_keyed;
select obj_description('pgque.event_retry(bigint,bigint,integer)'::regprocedure, 'pg_proc') as event_retry_seconds;
select obj_description('pgque.event_retry(bigint,bigint,timestamp with time zone)'::regprocedure, 'pg_proc') as event_retry_time;
