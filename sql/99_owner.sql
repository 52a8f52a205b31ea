-- pgque:replay-on-upgrade (idempotent: ALTER EXTENSION UPDATE runs this part again, ADR 0019)
-- Ownership: everything belongs to the role that ran CREATE EXTENSION.  For a
-- trusted install by a non-superuser the script runs with superuser rights
-- and would otherwise leave the objects owned by the bootstrap superuser; the
-- SECURITY DEFINER API should run with the installing role's rights, not more.
--
-- The owner is read from pg_extension, not spliced in by the extowner
-- substitution: that is a quoted identifier pasted into the script text,
-- and a role name holding the closing dollar quote of a literal around it
-- would end the literal and run the rest of its name as code with the
-- installing superuser's rights (PostgreSQL 15.4+ refuses such names,
-- CVE-2023-39417, so there the install failed instead).  Every name below
-- goes through format('%I').
do $owner$
declare
    r record;
    v_owner name;
begin
    select pg_catalog.pg_get_userbyid(e.extowner) into strict v_owner
      from pg_catalog.pg_extension e where e.extname = 'pgque_bgw';
    if current_user = v_owner then
        return;
    end if;
    execute pg_catalog.format('alter schema pgque owner to %I', v_owner);
    for r in select p.oid::regprocedure::text as obj, case p.prokind when 'p' then 'procedure' else 'function' end as kind
               from pg_catalog.pg_proc p where p.pronamespace = 'pgque'::regnamespace loop
        execute pg_catalog.format('alter %s %s owner to %I', r.kind, r.obj, v_owner);
    end loop;
    for r in select c.oid::regclass::text as obj, c.relkind
               from pg_catalog.pg_class c
              where c.relnamespace = 'pgque'::regnamespace and c.relkind in ('r', 'v', 'p')
                and not exists (select 1 from pg_catalog.pg_depend d
                                 where d.classid = 'pg_class'::regclass and d.objid = c.oid and d.deptype = 'a'
                                   and d.refclassid = 'pg_class'::regclass) loop
        execute pg_catalog.format('alter table %s owner to %I', r.obj, v_owner);
    end loop;
    for r in select c.oid::regclass::text as obj from pg_catalog.pg_class c
              where c.relnamespace = 'pgque'::regnamespace and c.relkind = 'S'
                and not exists (select 1 from pg_catalog.pg_depend d
                                 where d.classid = 'pg_class'::regclass and d.objid = c.oid and d.deptype in ('a', 'i')) loop
        execute pg_catalog.format('alter sequence %s owner to %I', r.obj, v_owner);
    end loop;
    for r in select t.oid::regtype::text as obj from pg_catalog.pg_type t
              where t.typnamespace = 'pgque'::regnamespace and t.typtype = 'c'
                and not exists (select 1 from pg_catalog.pg_class c where c.oid = t.typrelid and c.relkind <> 'c') loop
        execute pg_catalog.format('alter type %s owner to %I', r.obj, v_owner);
    end loop;
end
$owner$;
