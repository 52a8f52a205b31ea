-- pgque:first-on-upgrade (ALTER EXTENSION UPDATE takes the objects back before its own steps, ADR 0042)
-- pgque:replay-on-upgrade (and again at its end, for what the update made)
-- Ownership: every object in schema pgque, and the schema, belong to
-- pgque_owner (sql/01_roles.sql), whoever installed: a role nobody is a
-- member of, so nobody can replace a function that other roles call, add a
-- trigger to a table the workers write, or run code with the rights of
-- whoever calls the extension (ADR 0042).  Until 0.2.0 a trusted install
-- handed everything to the installing role; an update takes it back here
-- before its hand-written steps (the guard of sql/01_foreign_guard.sql has
-- refused anything that role added) and again at its end.  The queues'
-- event tables and sequences (made by create_queue, not members) are in
-- schema pgque too and are taken as well.  Schema pgque keeps no right but
-- USAGE for the pgque roles and the installing role (sql/90_grants.sql):
-- a CREATE granted on it by its former owner would let that grantee put
-- functions where the SECURITY DEFINER API looks first.
-- It runs before sql/90_grants.sql: PostgreSQL before 17 does not follow
-- an ALTER ... OWNER in an extension's initial privileges (pg_init_privs,
-- what pg_dump compares the ACLs with), so the grants are made, and
-- recorded, by the final owner; a fresh install then dumps as an updated
-- one does (test/t/017_upgrade.pl).
-- Every name below goes through format('%I') or a reg* output; nothing is
-- spliced in by the extowner substitution (CVE-2023-39417); every operator
-- and function is qualified.
do $owner$
declare
    r    record;
    v_nsp pg_catalog.oid := (select n.oid from pg_catalog.pg_namespace n
                              where n.nspname operator(pg_catalog.=) 'pgque'::pg_catalog.name);
begin
    if (select n.nspowner from pg_catalog.pg_namespace n where n.oid operator(pg_catalog.=) v_nsp)
       operator(pg_catalog.<>) 'pgque_owner'::pg_catalog.regrole then
        alter schema pgque owner to pgque_owner;
    end if;
    for r in select pg_catalog.format('alter %s %s owner to pgque_owner',
                                      case when p.prokind operator(pg_catalog.=) 'p'::pg_catalog."char" then 'procedure'
                                           when p.prokind operator(pg_catalog.=) 'a'::pg_catalog."char" then 'aggregate'
                                           else 'function' end,
                                      p.oid::pg_catalog.regprocedure) as cmd
               from pg_catalog.pg_proc p
              where p.pronamespace operator(pg_catalog.=) v_nsp
                and p.proowner operator(pg_catalog.<>) 'pgque_owner'::pg_catalog.regrole
             union all
             select pg_catalog.format('alter table %s owner to pgque_owner', c.oid::pg_catalog.regclass)
               from pg_catalog.pg_class c
              where c.relnamespace operator(pg_catalog.=) v_nsp
                and c.relkind operator(pg_catalog.=) any ('{r,v,p,m,f}'::pg_catalog."char"[])
                and c.relowner operator(pg_catalog.<>) 'pgque_owner'::pg_catalog.regrole
             union all
             select pg_catalog.format('alter sequence %s owner to pgque_owner', c.oid::pg_catalog.regclass)
               from pg_catalog.pg_class c
              where c.relnamespace operator(pg_catalog.=) v_nsp
                and c.relkind operator(pg_catalog.=) 'S'::pg_catalog."char"
                and c.relowner operator(pg_catalog.<>) 'pgque_owner'::pg_catalog.regrole
                and not exists (select from pg_catalog.pg_depend d
                                 where d.classid operator(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
                                   and d.objid operator(pg_catalog.=) c.oid
                                   and d.deptype operator(pg_catalog.=) any ('{a,i}'::pg_catalog."char"[]))
             union all
             select pg_catalog.format('alter type %s owner to pgque_owner', t.oid::pg_catalog.regtype)
               from pg_catalog.pg_type t
              where t.typnamespace operator(pg_catalog.=) v_nsp
                and t.typtype operator(pg_catalog.=) any ('{c,d,e,r,m}'::pg_catalog."char"[])
                and t.typowner operator(pg_catalog.<>) 'pgque_owner'::pg_catalog.regrole
                and not exists (select from pg_catalog.pg_class c
                                 where c.oid operator(pg_catalog.=) t.typrelid
                                   and c.relkind operator(pg_catalog.<>) 'c'::pg_catalog."char") loop
        execute r.cmd;
    end loop;
    -- the schema: CREATE for nobody but its owner, USAGE for the pgque roles
    -- and the installing role only
    for r in select pg_catalog.format('revoke %s on schema pgque from %s',
                                      case when a.grantee operator(pg_catalog.=) any (array[
                                               'pgque_reader'::pg_catalog.regrole, 'pgque_writer'::pg_catalog.regrole,
                                               'pgque_admin'::pg_catalog.regrole,
                                               (select e.extowner::pg_catalog.regrole from pg_catalog.pg_extension e
                                                 where e.extname operator(pg_catalog.=) 'pgque_bgw'::pg_catalog.name)]::pg_catalog.oid[])
                                           then 'create' else 'all' end,
                                      case when a.grantee operator(pg_catalog.=) 0::pg_catalog.oid then 'public'
                                           else pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(a.grantee)) end) as cmd
               from pg_catalog.pg_namespace n, pg_catalog.aclexplode(n.nspacl) a
              where n.oid operator(pg_catalog.=) v_nsp
                and a.grantee operator(pg_catalog.<>) 'pgque_owner'::pg_catalog.regrole
              group by a.grantee loop
        execute r.cmd;
    end loop;
    -- the tables, sequences and internal functions: no right for a role
    -- outside the pgque roles and the installing role.  Until 0.2.0 the
    -- installing role owned them and could grant rights on them to a role
    -- of its choosing, which the ownership change above keeps (with
    -- pgque_owner as the grantor); such a role could write what the
    -- SECURITY DEFINER code trusts.  A fresh install has none to revoke.
    for r in select pg_catalog.format('revoke all on %s %s from %s',
                                      case when x.kind operator(pg_catalog.=) 'S'::pg_catalog."char" then 'sequence'
                                           when x.kind operator(pg_catalog.=) 'f'::pg_catalog."char" then 'routine'
                                           else 'table' end,
                                      x.obj,
                                      case when a.grantee operator(pg_catalog.=) 0::pg_catalog.oid then 'public'
                                           else pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(a.grantee)) end) as cmd
               from (select c.relkind as kind, c.oid::pg_catalog.regclass::pg_catalog.text as obj, c.relacl as acl
                       from pg_catalog.pg_class c
                      where c.relnamespace operator(pg_catalog.=) v_nsp
                        and c.relkind operator(pg_catalog.=) any ('{r,p,S}'::pg_catalog."char"[])
                     union all
                     select 'f'::pg_catalog."char", p.oid::pg_catalog.regprocedure::pg_catalog.text, p.proacl
                       from pg_catalog.pg_proc p
                      where p.pronamespace operator(pg_catalog.=) v_nsp
                        and pg_catalog.starts_with(p.proname::pg_catalog.text, '_')) x,
                    pg_catalog.aclexplode(x.acl) a
              where not (a.grantee operator(pg_catalog.=) any (array[
                             'pgque_owner'::pg_catalog.regrole, 'pgque_reader'::pg_catalog.regrole,
                             'pgque_writer'::pg_catalog.regrole, 'pgque_admin'::pg_catalog.regrole,
                             (select e.extowner::pg_catalog.regrole from pg_catalog.pg_extension e
                               where e.extname operator(pg_catalog.=) 'pgque_bgw'::pg_catalog.name)]::pg_catalog.oid[]))
              group by x.kind, x.obj, a.grantee loop
        execute r.cmd;
    end loop;
    -- USAGE for the installing role (the pgque roles' is sql/90_grants.sql's;
    -- a grant made while the installing role owned the schema went with the
    -- ownership)
    if not (select a.rolsuper from pg_catalog.pg_extension e
              join pg_catalog.pg_roles a on a.oid operator(pg_catalog.=) e.extowner
             where e.extname operator(pg_catalog.=) 'pgque_bgw'::pg_catalog.name) then
        execute (select pg_catalog.format('grant usage on schema pgque to %I', pg_catalog.pg_get_userbyid(e.extowner))
                   from pg_catalog.pg_extension e where e.extname operator(pg_catalog.=) 'pgque_bgw'::pg_catalog.name);
    end if;
end
$owner$;
