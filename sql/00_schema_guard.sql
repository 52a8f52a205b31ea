-- Schema guard.  The control file names schema pgque; CREATE EXTENSION
-- creates it, or uses it as it is when it exists already.  A role with
-- CREATE on the database may create schema pgque before anyone installs,
-- put functions or operators in it (pgque.format(text, text), pgque.now()),
-- and wait: this script runs with superuser rights and search_path = pgque,
-- pg_temp, so an unqualified call would run that role's code as superuser;
-- and the SECURITY DEFINER API, which puts pgque first in its path, would
-- run it as pgque_owner for ever after.  So the schema must be empty and
-- belong to the installing role or to pgque_owner (DROP EXTENSION leaves it
-- so, ADR 0042).  Everything below is qualified: it runs before the check
-- has passed.  pgque_proxy runs the same guard (the Makefile puts its name
-- for @PGQUE_EXTENSION@).
do $guard$
declare
    v_nsp    pg_catalog.oid;
    v_owner  pg_catalog.oid;
    v_ext    pg_catalog.oid;
    v_what   pg_catalog.text;
begin
    select e.extnamespace, e.extowner into strict v_nsp, v_ext
      from pg_catalog.pg_extension e where e.extname operator(pg_catalog.=) '@PGQUE_EXTENSION@'::pg_catalog.name;
    select n.nspowner into strict v_owner
      from pg_catalog.pg_namespace n where n.oid operator(pg_catalog.=) v_nsp;
    if v_owner operator(pg_catalog.<>) v_ext
       and v_owner operator(pg_catalog.<>) coalesce(pg_catalog.to_regrole('pgque_owner')::pg_catalog.oid, 0::pg_catalog.oid) then
        raise exception 'schema pgque exists and belongs to role %, not to the installing role %',
              pg_catalog.pg_get_userbyid(v_owner), pg_catalog.pg_get_userbyid(v_ext)
            using errcode = 'object_not_in_prerequisite_state',
                  detail = 'The owner of schema pgque may create objects in it that the extension would call with its owner''s rights.',
                  hint = 'Drop schema pgque, or have its owner install the extension.';
    end if;
    select pg_catalog.concat_ws(', ',
               (select 'relation ' operator(pg_catalog.||) pg_catalog.min(c.relname::pg_catalog.text)
                  from pg_catalog.pg_class c where c.relnamespace operator(pg_catalog.=) v_nsp),
               (select 'function ' operator(pg_catalog.||) pg_catalog.min(p.proname::pg_catalog.text)
                  from pg_catalog.pg_proc p where p.pronamespace operator(pg_catalog.=) v_nsp),
               (select 'type ' operator(pg_catalog.||) pg_catalog.min(t.typname::pg_catalog.text)
                  from pg_catalog.pg_type t where t.typnamespace operator(pg_catalog.=) v_nsp),
               (select 'operator ' operator(pg_catalog.||) pg_catalog.min(o.oprname::pg_catalog.text)
                  from pg_catalog.pg_operator o where o.oprnamespace operator(pg_catalog.=) v_nsp),
               (select 'collation ' operator(pg_catalog.||) pg_catalog.min(o.collname::pg_catalog.text)
                  from pg_catalog.pg_collation o where o.collnamespace operator(pg_catalog.=) v_nsp),
               (select 'conversion ' operator(pg_catalog.||) pg_catalog.min(o.conname::pg_catalog.text)
                  from pg_catalog.pg_conversion o where o.connamespace operator(pg_catalog.=) v_nsp),
               (select 'operator family ' operator(pg_catalog.||) pg_catalog.min(o.opfname::pg_catalog.text)
                  from pg_catalog.pg_opfamily o where o.opfnamespace operator(pg_catalog.=) v_nsp),
               (select 'text search configuration ' operator(pg_catalog.||) pg_catalog.min(o.cfgname::pg_catalog.text)
                  from pg_catalog.pg_ts_config o where o.cfgnamespace operator(pg_catalog.=) v_nsp),
               (select 'text search dictionary ' operator(pg_catalog.||) pg_catalog.min(o.dictname::pg_catalog.text)
                  from pg_catalog.pg_ts_dict o where o.dictnamespace operator(pg_catalog.=) v_nsp),
               (select 'text search parser ' operator(pg_catalog.||) pg_catalog.min(o.prsname::pg_catalog.text)
                  from pg_catalog.pg_ts_parser o where o.prsnamespace operator(pg_catalog.=) v_nsp),
               (select 'text search template ' operator(pg_catalog.||) pg_catalog.min(o.tmplname::pg_catalog.text)
                  from pg_catalog.pg_ts_template o where o.tmplnamespace operator(pg_catalog.=) v_nsp),
               (select 'statistics object ' operator(pg_catalog.||) pg_catalog.min(o.stxname::pg_catalog.text)
                  from pg_catalog.pg_statistic_ext o where o.stxnamespace operator(pg_catalog.=) v_nsp),
               (select 'extension ' operator(pg_catalog.||) pg_catalog.min(o.extname::pg_catalog.text)
                  from pg_catalog.pg_extension o where o.extnamespace operator(pg_catalog.=) v_nsp
                   and o.extname operator(pg_catalog.<>) '@PGQUE_EXTENSION@'::pg_catalog.name))
      into v_what;
    if v_what operator(pg_catalog.<>) '' then
        raise exception 'schema pgque is not empty: %', v_what
            using errcode = 'object_not_in_prerequisite_state',
                  detail = 'Objects already in schema pgque would shadow the functions and operators the extension calls.',
                  hint = 'Drop or move the objects in schema pgque (or the schema), then install again.';
    end if;
end
$guard$;
