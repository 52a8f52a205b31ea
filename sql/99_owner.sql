-- Ownership: everything belongs to the role that ran CREATE EXTENSION.  For a
-- trusted install by a non-superuser the script runs with superuser rights
-- and would otherwise leave the objects owned by the bootstrap superuser; the
-- SECURITY DEFINER API should run with the installing role's rights, not more.
do $owner$
declare
    r record;
begin
    if current_user = pg_catalog.quote_ident($q$@extowner@$q$)
       or current_user = $q$@extowner@$q$ then
        return;
    end if;
    execute pg_catalog.format('alter schema pgque owner to %s', $q$@extowner@$q$);
    for r in select p.oid::regprocedure::text as obj, case p.prokind when 'p' then 'procedure' else 'function' end as kind
               from pg_catalog.pg_proc p where p.pronamespace = 'pgque'::regnamespace loop
        execute pg_catalog.format('alter %s %s owner to %s', r.kind, r.obj, $q$@extowner@$q$);
    end loop;
    for r in select c.oid::regclass::text as obj, c.relkind
               from pg_catalog.pg_class c
              where c.relnamespace = 'pgque'::regnamespace and c.relkind in ('r', 'v', 'p')
                and not exists (select 1 from pg_catalog.pg_depend d
                                 where d.classid = 'pg_class'::regclass and d.objid = c.oid and d.deptype = 'a'
                                   and d.refclassid = 'pg_class'::regclass) loop
        execute pg_catalog.format('alter table %s owner to %s', r.obj, $q$@extowner@$q$);
    end loop;
    for r in select c.oid::regclass::text as obj from pg_catalog.pg_class c
              where c.relnamespace = 'pgque'::regnamespace and c.relkind = 'S'
                and not exists (select 1 from pg_catalog.pg_depend d
                                 where d.classid = 'pg_class'::regclass and d.objid = c.oid and d.deptype in ('a', 'i')) loop
        execute pg_catalog.format('alter sequence %s owner to %s', r.obj, $q$@extowner@$q$);
    end loop;
    for r in select t.oid::regtype::text as obj from pg_catalog.pg_type t
              where t.typnamespace = 'pgque'::regnamespace and t.typtype = 'c'
                and not exists (select 1 from pg_catalog.pg_class c where c.oid = t.typrelid and c.relkind <> 'c') loop
        execute pg_catalog.format('alter type %s owner to %s', r.obj, $q$@extowner@$q$);
    end loop;
end
$owner$;
