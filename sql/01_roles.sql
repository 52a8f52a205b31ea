-- Roles: pgque_reader consumes, pgque_writer produces, pgque_admin runs the
-- queues and is a member of both.  Roles are cluster-wide and outlive the
-- extension; they are created only when missing.  A role that exists
-- already must look as this script would have made it (NOLOGIN, no other
-- attribute, a member of pgque_* roles only): a role with CREATEROLE could
-- otherwise pre-create them with attributes or memberships of its choosing,
-- which every later grant of pgque_* would hand on.
do $roles$
declare
    r      text;
    extra  text;
begin
    foreach r in array array['pgque_reader', 'pgque_writer', 'pgque_admin'] loop
        select pg_catalog.concat_ws(', ',
                   case when a.rolsuper then 'SUPERUSER' end,
                   case when a.rolcreatedb then 'CREATEDB' end,
                   case when a.rolcreaterole then 'CREATEROLE' end,
                   case when a.rolreplication then 'REPLICATION' end,
                   case when a.rolbypassrls then 'BYPASSRLS' end,
                   case when a.rolcanlogin then 'LOGIN' end,
                   (select pg_catalog.string_agg('member of ' || pg_catalog.quote_ident(g.rolname), ', '
                                                 order by g.rolname)
                      from pg_catalog.pg_auth_members m
                      join pg_catalog.pg_roles g on g.oid = m.roleid
                     where m.member = a.oid
                       and g.rolname not in ('pgque_reader', 'pgque_writer', 'pgque_admin')))
          into extra
          from pg_catalog.pg_roles a where a.rolname = r;
        if extra <> '' then
            raise exception 'role "%" exists with attributes the pgque_bgw install does not give it: %', r, extra
                using errcode = 'object_not_in_prerequisite_state',
                      detail = 'pgque_reader, pgque_writer and pgque_admin are NOLOGIN roles with no other attribute and no membership outside pgque_*; every role granted them inherits what they have.',
                      hint = pg_catalog.format('Check who made role %I; drop it, or remove the attributes (ALTER ROLE %I NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS NOLOGIN) and memberships (REVOKE ... FROM %I), then install again.', r, r, r);
        end if;
    end loop;
    foreach r in array array['pgque_reader', 'pgque_writer', 'pgque_admin'] loop
        if not exists (select 1 from pg_catalog.pg_roles where rolname = r) then
            begin
                execute pg_catalog.format('create role %I nologin', r);
            exception when insufficient_privilege then
                raise exception 'role "%" does not exist and cannot be created by the installing role', r
                    using errcode = 'insufficient_privilege',
                          hint = 'Create the roles pgque_reader, pgque_writer and pgque_admin (NOLOGIN) first, or install as a role with CREATEROLE.';
            end;
        end if;
    end loop;
    foreach r in array array['pgque_reader', 'pgque_writer'] loop
        if not pg_catalog.pg_has_role('pgque_admin', r, 'member') then
            execute pg_catalog.format('grant %I to pgque_admin', r);
        end if;
    end loop;
end
$roles$;
