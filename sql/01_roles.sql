-- Roles: pgque_reader consumes, pgque_writer produces, pgque_admin runs the
-- queues and is a member of both.  Roles are cluster-wide and outlive the
-- extension; they are created only when missing.
do $roles$
declare
    r text;
begin
    foreach r in array array['pgque_reader', 'pgque_writer', 'pgque_admin'] loop
        if not exists (select 1 from pg_catalog.pg_roles where rolname = r) then
            begin
                execute format('create role %I nologin', r);
            exception when insufficient_privilege then
                raise exception 'role "%" does not exist and cannot be created by the installing role', r
                    using errcode = 'insufficient_privilege',
                          hint = 'Create the roles pgque_reader, pgque_writer and pgque_admin (NOLOGIN) first, or install as a role with CREATEROLE.';
            end;
        end if;
    end loop;
    foreach r in array array['pgque_reader', 'pgque_writer'] loop
        if not pg_catalog.pg_has_role('pgque_admin', r, 'member') then
            execute format('grant %I to pgque_admin', r);
        end if;
    end loop;
end
$roles$;
