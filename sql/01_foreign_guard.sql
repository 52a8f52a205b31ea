-- pgque:first-on-upgrade (ALTER EXTENSION UPDATE runs this part before anything else, ADR 0042)
-- Nothing foreign in the way.  An update runs with the bootstrap
-- superuser's rights whoever starts it (the extension is trusted), on a
-- schema whose objects a non-superuser may have owned until 0.2.0: that
-- role could have added triggers, rules, policies, defaults, constraints
-- or indexes calling its own functions to the extension's tables, or put
-- functions, operators and casts in schema pgque that an unqualified name
-- of this script would resolve to.  Any of them would then run as
-- superuser.  So this guard refuses (55000, naming the object) while any
-- such thing exists.  On a fresh install the schema guard has just made
-- sure schema pgque is empty: nothing to find.  Everything here is
-- qualified, as it runs before anything is known to be safe.
do $foreign$
declare
    v_nsp  pg_catalog.oid := (select n.oid from pg_catalog.pg_namespace n
                               where n.nspname operator(pg_catalog.=) 'pgque'::pg_catalog.name);
    v_ext  pg_catalog.oid := (select e.oid from pg_catalog.pg_extension e
                               where e.extname operator(pg_catalog.=) 'pgque_bgw'::pg_catalog.name);
    v_what pg_catalog.text;
begin
    with member as (
        select d.classid, d.objid from pg_catalog.pg_depend d
         where d.refclassid operator(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
           and d.refobjid operator(pg_catalog.=) v_ext
           and d.deptype operator(pg_catalog.=) 'e'::pg_catalog."char"),
    rel as (
        select c.oid from pg_catalog.pg_class c where c.relnamespace operator(pg_catalog.=) v_nsp),
    -- a function an attachment (default, constraint, index, partition key) may call: a
    -- built-in one, or one of the extension's C functions (which no
    -- non-superuser can redefine in C)
    safe_fn as (
        select p.oid from pg_catalog.pg_proc p
         where p.pronamespace operator(pg_catalog.=) 'pg_catalog'::pg_catalog.regnamespace
        union all
        select p.oid from pg_catalog.pg_proc p join member m on m.objid operator(pg_catalog.=) p.oid
                and m.classid operator(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
         where p.prolang operator(pg_catalog.=) (select l.oid from pg_catalog.pg_language l
                                                  where l.lanname operator(pg_catalog.=) 'c'::pg_catalog.name)
           and p.probin operator(pg_catalog.=) '$libdir/pgque_bgw'::pg_catalog.text),
    attachment as (
        select 'pg_catalog.pg_attrdef'::pg_catalog.regclass as classid, a.oid as objid,
               pg_catalog.format('default of %s.%s', a.adrelid::pg_catalog.regclass,
                                 (select t.attname from pg_catalog.pg_attribute t
                                   where t.attrelid operator(pg_catalog.=) a.adrelid
                                     and t.attnum operator(pg_catalog.=) a.adnum)) as what
          from pg_catalog.pg_attrdef a where a.adrelid operator(pg_catalog.=) any (select oid from rel)
        union all
        select 'pg_catalog.pg_constraint'::pg_catalog.regclass, k.oid,
               pg_catalog.format('constraint %I', k.conname)
          from pg_catalog.pg_constraint k
         where k.connamespace operator(pg_catalog.=) v_nsp
            or k.conrelid operator(pg_catalog.=) any (select oid from rel)
        union all
        -- a relation's own expressions (a partition key)
        select 'pg_catalog.pg_class'::pg_catalog.regclass, r.oid,
               pg_catalog.format('relation %s', r.oid::pg_catalog.regclass)
          from rel r
        union all
        select 'pg_catalog.pg_class'::pg_catalog.regclass, i.indexrelid,
               pg_catalog.format('index %s', i.indexrelid::pg_catalog.regclass)
          from pg_catalog.pg_index i where i.indrelid operator(pg_catalog.=) any (select oid from rel)),
    found as (
        -- objects in schema pgque that are not the extension's; the
        -- queues' tables, sequences and indexes (made by create_queue) are
        -- plain ones and pass, their attachments are checked below
        select 1 as ord, pg_catalog.format('function %s', p.oid::pg_catalog.regprocedure) as what
          from pg_catalog.pg_proc p
         where p.pronamespace operator(pg_catalog.=) v_nsp
           and not exists (select from member m where m.objid operator(pg_catalog.=) p.oid
                              and m.classid operator(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass)
        union all
        select 2, pg_catalog.format('relation %s', c.oid::pg_catalog.regclass)
          from pg_catalog.pg_class c
         where c.relnamespace operator(pg_catalog.=) v_nsp
           and not (c.relkind operator(pg_catalog.=) any ('{r,p,S,i,I}'::pg_catalog."char"[]))
           and not exists (select from member m where m.objid operator(pg_catalog.=) c.oid
                              and m.classid operator(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass)
           -- a composite type's membership is its pg_type row's
           and not exists (select from member m where m.objid operator(pg_catalog.=) c.reltype
                              and m.classid operator(pg_catalog.=) 'pg_catalog.pg_type'::pg_catalog.regclass)
        union all
        select 3, pg_catalog.format('type %s', t.oid::pg_catalog.regtype)
          from pg_catalog.pg_type t
         where t.typnamespace operator(pg_catalog.=) v_nsp
           and t.typrelid operator(pg_catalog.=) 0::pg_catalog.oid
           and not exists (select from pg_catalog.pg_type e
                            where e.oid operator(pg_catalog.=) t.typelem
                              and e.typnamespace operator(pg_catalog.=) v_nsp)
           and not exists (select from member m where m.objid operator(pg_catalog.=) t.oid
                              and m.classid operator(pg_catalog.=) 'pg_catalog.pg_type'::pg_catalog.regclass)
        union all
        select 4, pg_catalog.format('operator %s', o.oid::pg_catalog.regoperator)
          from pg_catalog.pg_operator o where o.oprnamespace operator(pg_catalog.=) v_nsp
        union all
        select 4, pg_catalog.format('operator class %I', o.opcname)
          from pg_catalog.pg_opclass o where o.opcnamespace operator(pg_catalog.=) v_nsp
        union all
        select 4, pg_catalog.format('operator family %I', o.opfname)
          from pg_catalog.pg_opfamily o where o.opfnamespace operator(pg_catalog.=) v_nsp
        union all
        select 4, pg_catalog.format('collation %I', o.collname)
          from pg_catalog.pg_collation o where o.collnamespace operator(pg_catalog.=) v_nsp
        union all
        select 4, pg_catalog.format('conversion %I', o.conname)
          from pg_catalog.pg_conversion o where o.connamespace operator(pg_catalog.=) v_nsp
        union all
        select 4, pg_catalog.format('text search configuration %I', o.cfgname)
          from pg_catalog.pg_ts_config o where o.cfgnamespace operator(pg_catalog.=) v_nsp
        union all
        select 4, pg_catalog.format('text search dictionary %I', o.dictname)
          from pg_catalog.pg_ts_dict o where o.dictnamespace operator(pg_catalog.=) v_nsp
        union all
        -- wherever it lives: one on a pgque table computes its expressions
        -- in every ANALYZE as the table's owner
        select 4, pg_catalog.format('statistics object %I on %s', o.stxname, o.stxrelid::pg_catalog.regclass)
          from pg_catalog.pg_statistic_ext o where o.stxnamespace operator(pg_catalog.=) v_nsp
            or o.stxrelid operator(pg_catalog.=) any (select oid from rel)
        union all
        select 4, pg_catalog.format('extension %I', o.extname)
          from pg_catalog.pg_extension o where o.extnamespace operator(pg_catalog.=) v_nsp
           and o.oid operator(pg_catalog.<>) v_ext
        union all
        select 5, pg_catalog.format('cast (%s as %s)', k.castsource::pg_catalog.regtype, k.casttarget::pg_catalog.regtype)
          from pg_catalog.pg_cast k
         where exists (select from pg_catalog.pg_type t
                        where t.oid operator(pg_catalog.=) any (array[k.castsource, k.casttarget])
                          and t.typnamespace operator(pg_catalog.=) v_nsp)
           and not exists (select from member m where m.objid operator(pg_catalog.=) k.oid
                              and m.classid operator(pg_catalog.=) 'pg_catalog.pg_cast'::pg_catalog.regclass)
        -- what fires on the extension's relations (and the queues'): the
        -- extension's own triggers are listed here by table, name and
        -- function; a part that adds one adds it to this list
        union all
        select 6, pg_catalog.format('trigger %I on %s', g.tgname, g.tgrelid::pg_catalog.regclass)
          from pg_catalog.pg_trigger g
          join pg_catalog.pg_class c on c.oid operator(pg_catalog.=) g.tgrelid
         where c.relnamespace operator(pg_catalog.=) v_nsp and not g.tgisinternal
           and not (   (c.relname operator(pg_catalog.=) 'config'::pg_catalog.name
                        and g.tgname operator(pg_catalog.=) 'config_one_row'::pg_catalog.name
                        and g.tgfoid operator(pg_catalog.=) pg_catalog.to_regprocedure('pgque._config_one_row()'))
                    or (c.relname operator(pg_catalog.=) 'queue'::pg_catalog.name
                        and g.tgname operator(pg_catalog.=) 'queue_changed'::pg_catalog.name
                        and g.tgfoid operator(pg_catalog.=) pg_catalog.to_regprocedure('pgque._queue_changed()')))
        union all
        -- a table of another schema inheriting from (or a partition of) a
        -- pgque relation: a statement of this script on the parent reaches
        -- its rows and fires its triggers, which the trigger test above
        -- (schema pgque only) does not see
        select 6, pg_catalog.format('relation %s, a child of %s', i.inhrelid::pg_catalog.regclass,
                                    i.inhparent::pg_catalog.regclass)
          from pg_catalog.pg_inherits i
          join pg_catalog.pg_class c on c.oid operator(pg_catalog.=) i.inhrelid
         where i.inhparent operator(pg_catalog.=) any (select oid from rel)
           and c.relnamespace operator(pg_catalog.<>) v_nsp
        union all
        select 6, pg_catalog.format('rule %I on %s', r.rulename, r.ev_class::pg_catalog.regclass)
          from pg_catalog.pg_rewrite r
         where r.ev_class operator(pg_catalog.=) any (select oid from rel)
           and r.rulename operator(pg_catalog.<>) '_RETURN'::pg_catalog.name
        union all
        select 6, pg_catalog.format('policy %I on %s', p.polname, p.polrelid::pg_catalog.regclass)
          from pg_catalog.pg_policy p where p.polrelid operator(pg_catalog.=) any (select oid from rel)
        union all
        select 6, pg_catalog.format('row level security on %s', c.oid::pg_catalog.regclass)
          from pg_catalog.pg_class c
         where c.relnamespace operator(pg_catalog.=) v_nsp and (c.relrowsecurity or c.relforcerowsecurity)
        union all
        select 7, pg_catalog.format('%s, which calls %s', a.what,
                                    case when d.refclassid operator(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
                                         then pg_catalog.format('function %s', d.refobjid::pg_catalog.regprocedure)
                                         when d.refclassid operator(pg_catalog.=) 'pg_catalog.pg_operator'::pg_catalog.regclass
                                         then pg_catalog.format('operator %s', d.refobjid::pg_catalog.regoperator)
                                         else pg_catalog.format('operator class %s', d.refobjid) end)
          from attachment a
          join pg_catalog.pg_depend d on d.classid operator(pg_catalog.=) a.classid
                                     and d.objid operator(pg_catalog.=) a.objid
         where (d.refclassid operator(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
                and not (d.refobjid operator(pg_catalog.=) any (select oid from safe_fn)))
            or (d.refclassid operator(pg_catalog.=) 'pg_catalog.pg_operator'::pg_catalog.regclass
                and not exists (select from pg_catalog.pg_operator o
                                 where o.oid operator(pg_catalog.=) d.refobjid
                                   and o.oprnamespace operator(pg_catalog.=) 'pg_catalog'::pg_catalog.regnamespace))
            or (d.refclassid operator(pg_catalog.=) 'pg_catalog.pg_opclass'::pg_catalog.regclass
                and not exists (select from pg_catalog.pg_opclass o
                                 where o.oid operator(pg_catalog.=) d.refobjid
                                   and o.opcnamespace operator(pg_catalog.=) 'pg_catalog'::pg_catalog.regnamespace))
        union all
        -- a column of a type with code of its own (a domain's check, a
        -- range's functions) from elsewhere
        select 7, pg_catalog.format('column %s.%I of type %s', t.attrelid::pg_catalog.regclass, t.attname,
                                    t.atttypid::pg_catalog.regtype)
          from pg_catalog.pg_attribute t join pg_catalog.pg_type y on y.oid operator(pg_catalog.=) t.atttypid
         where t.attrelid operator(pg_catalog.=) any (select oid from rel) and t.attnum operator(pg_catalog.>) 0
           and not t.attisdropped
           and not (y.typnamespace operator(pg_catalog.=) any (array['pg_catalog'::pg_catalog.regnamespace::pg_catalog.oid, v_nsp])))
    select pg_catalog.string_agg(f.what, ', ' order by f.ord, f.what)
      into v_what
      from (select * from found order by ord, what limit 10) f;
    if v_what is not null then
        raise exception 'schema pgque holds objects the extension did not make: %', v_what
            using errcode = 'object_not_in_prerequisite_state',
                  detail = 'This script runs with superuser rights; what another role attached to the extension''s tables or put in schema pgque would run with them.',
                  hint = 'Drop these objects (as their owner or a superuser), then run ALTER EXTENSION pgque_bgw UPDATE again (docs/security.md).';
    end if;
end
$foreign$;
