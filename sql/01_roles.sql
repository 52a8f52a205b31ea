-- pgque:first-on-upgrade (ALTER EXTENSION UPDATE runs this part right after the guard, ADR 0042)
-- Roles: pgque_reader consumes, pgque_writer produces, pgque_admin runs the
-- queues and is a member of both; pgque_owner owns every object of the
-- extension and is what the SECURITY DEFINER API, the workers and the
-- producer run as (ADR 0042): a NOLOGIN role nobody is a member of, which
-- is a member of pg_read_all_stats only.  Roles are cluster-wide and outlive the
-- extension; they are created only when missing.  A role that exists
-- already must look as this script would have made it (NOLOGIN, no other
-- attribute; pgque_reader/writer/admin a member of pgque_* roles only,
-- pgque_owner a member of pg_read_all_stats only and with no member): a role
-- with CREATEROLE could otherwise pre-create them with attributes or
-- memberships of its choosing (on PostgreSQL 16+ its creator holds ADMIN
-- on it, a pg_auth_members row), which every later grant of pgque_* would
-- hand on, or through which it would become pgque_owner.  Written fully
-- qualified: an update runs it before schema pgque is known to be ours.
do $roles$
declare
    r      pg_catalog.text;
    extra  pg_catalog.text;
begin
    foreach r in array array['pgque_reader', 'pgque_writer', 'pgque_admin', 'pgque_owner']::pg_catalog.text[] loop
        select pg_catalog.concat_ws(', ',
                   case when a.rolsuper then 'SUPERUSER' end,
                   case when a.rolcreatedb then 'CREATEDB' end,
                   case when a.rolcreaterole then 'CREATEROLE' end,
                   case when a.rolreplication then 'REPLICATION' end,
                   case when a.rolbypassrls then 'BYPASSRLS' end,
                   case when a.rolcanlogin then 'LOGIN' end,
                   (select pg_catalog.string_agg(pg_catalog.format('member of %I', g.rolname), ', ' order by g.rolname)
                      from pg_catalog.pg_auth_members m
                      join pg_catalog.pg_roles g on g.oid operator(pg_catalog.=) m.roleid
                     where m.member operator(pg_catalog.=) a.oid
                       and case when r operator(pg_catalog.=) 'pgque_owner'
                                then g.rolname operator(pg_catalog.<>) 'pg_read_all_stats'::pg_catalog.name
                                else not (g.rolname operator(pg_catalog.=) any ('{pgque_reader,pgque_writer,pgque_admin}'::pg_catalog.name[])) end),
                   case when r operator(pg_catalog.=) 'pgque_owner' then
                       (select pg_catalog.string_agg(pg_catalog.format('role %I is a member of it', g.rolname), ', ' order by g.rolname)
                          from pg_catalog.pg_auth_members m
                          join pg_catalog.pg_roles g on g.oid operator(pg_catalog.=) m.member
                         where m.roleid operator(pg_catalog.=) a.oid) end)
          into extra
          from pg_catalog.pg_roles a where a.rolname operator(pg_catalog.=) r;
        if extra operator(pg_catalog.<>) '' then
            raise exception 'role "%" exists with attributes the pgque_bgw install does not give it: %', r, extra
                using errcode = 'object_not_in_prerequisite_state',
                      detail = 'pgque_reader, pgque_writer and pgque_admin are NOLOGIN roles with no other attribute and no membership outside pgque_*; pgque_owner, which owns the extension''s objects, has no member and is a member of pg_read_all_stats only.  Every role granted one of them has what it has.',
                      hint = pg_catalog.format('Check who made role %I; drop it, or remove the attributes (ALTER ROLE %I NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS NOLOGIN) and memberships (REVOKE ...), then run the command again.', r, r);
        end if;
    end loop;
    foreach r in array array['pgque_reader', 'pgque_writer', 'pgque_admin', 'pgque_owner']::pg_catalog.text[] loop
        if not exists (select from pg_catalog.pg_roles a where a.rolname operator(pg_catalog.=) r) then
            begin
                execute pg_catalog.format('create role %I nologin', r);
            exception when insufficient_privilege then
                raise exception 'role "%" does not exist and cannot be created by the installing role', r
                    using errcode = 'insufficient_privilege',
                          hint = 'Create the roles pgque_reader, pgque_writer, pgque_admin and pgque_owner (NOLOGIN) first, or install as a role with CREATEROLE.';
            end;
        end if;
    end loop;
    -- PostgreSQL 16+ records the creator of a role as its ADMIN when the
    -- creator is not a superuser; a superuser ran the lines above, so none
    -- is recorded.  Checked after the creation so that nothing slipped in.
    if exists (select from pg_catalog.pg_auth_members m, pg_catalog.pg_roles o
                where o.rolname operator(pg_catalog.=) 'pgque_owner'
                  and (m.roleid operator(pg_catalog.=) o.oid
                       or (m.member operator(pg_catalog.=) o.oid
                           and m.roleid operator(pg_catalog.<>) 'pg_read_all_stats'::pg_catalog.regrole))) then
        raise exception 'role "pgque_owner" is in a membership'
            using errcode = 'object_not_in_prerequisite_state',
                  detail = 'No role may be a member of pgque_owner, which owns the extension''s objects, and it is a member of pg_read_all_stats only.',
                  hint = 'REVOKE pgque_owner FROM every role, then run the command again.';
    end if;
    -- pgque_owner's one membership: pg_read_all_stats, so that the watchdog
    -- can name the session that pins rotation (its pid, state and times,
    -- never its query; alert long_transaction, ADR 0024, 0042)
    if not pg_catalog.pg_has_role('pgque_owner', 'pg_read_all_stats', 'member') then
        grant pg_read_all_stats to pgque_owner;
    end if;
    foreach r in array array['pgque_reader', 'pgque_writer']::pg_catalog.text[] loop
        if not pg_catalog.pg_has_role('pgque_admin', r, 'member') then
            execute pg_catalog.format('grant %I to pgque_admin', r);
        end if;
    end loop;
end
$roles$;
