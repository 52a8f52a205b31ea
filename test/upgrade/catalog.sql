-- One line per object (and per column, index, constraint, trigger) of
-- schema pgque and of the extension, with everything that makes it what it
-- is and no OID: two databases hold the same objects exactly when these
-- lines are equal.  Used by test/t/017_upgrade.pl (upgraded vs fresh).
with acl(oid, cls, txt) as (
    select o.oid, o.cls, coalesce((select string_agg(pg_get_userbyid(a.grantee) || '=' || a.privilege_type
                                                     || case when a.is_grantable then '*' else '' end
                                                     || '/' || pg_get_userbyid(a.grantor), ',' order by pg_get_userbyid(a.grantee), a.privilege_type)
                                     from aclexplode(o.acl) a), 'default')
      from (select p.oid, 'pg_proc'::regclass cls, p.proacl acl from pg_proc p
            union all select c.oid, 'pg_class'::regclass, c.relacl from pg_class c
            union all select t.oid, 'pg_type'::regclass, t.typacl from pg_type t
            union all select n.oid, 'pg_namespace'::regclass, n.nspacl from pg_namespace n) o
)
select line from (
  select 'schema ' || n.nspname || ' owner=' || pg_get_userbyid(n.nspowner) || ' acl=' || a.txt as line
    from pg_namespace n join acl a on a.oid = n.oid and a.cls = 'pg_namespace'::regclass
   where n.nspname = 'pgque'
  union all
  select format('%s %s returns %s: args=(%s) lang=%s kind=%s vol=%s par=%s strict=%s secdef=%s leak=%s cost=%s rows=%s config=%s owner=%s acl=%s body=%s',
                case p.prokind when 'p' then 'procedure' else 'function' end,
                p.oid::regprocedure, pg_get_function_result(p.oid), pg_get_function_arguments(p.oid),
                l.lanname, p.prokind, p.provolatile, p.proparallel, p.proisstrict, p.prosecdef, p.proleakproof,
                p.procost, p.prorows, p.proconfig, pg_get_userbyid(p.proowner), a.txt,
                md5(coalesce(p.prosrc, '') || '|' || coalesce(p.probin, '')))
    from pg_proc p join pg_language l on l.oid = p.prolang
    join acl a on a.oid = p.oid and a.cls = 'pg_proc'::regclass
   where p.pronamespace = 'pgque'::regnamespace
  union all
  select format('relation %s kind=%s persistence=%s owner=%s options=%s inherits=%s acl=%s',
                c.oid::regclass, c.relkind, c.relpersistence, pg_get_userbyid(c.relowner), c.reloptions,
                (select string_agg(i.inhparent::regclass::text, ',' order by i.inhseqno) from pg_inherits i where i.inhrelid = c.oid),
                a.txt)
    from pg_class c join acl a on a.oid = c.oid and a.cls = 'pg_class'::regclass
   where c.relnamespace = 'pgque'::regnamespace and c.relkind <> 'i'
  union all
  select format('column %s.%s #%s %s notnull=%s default=%s identity=%s generated=%s local=%s inhcount=%s collation=%s',
                c.oid::regclass, t.attname, t.attnum, format_type(t.atttypid, t.atttypmod), t.attnotnull,
                pg_get_expr(d.adbin, d.adrelid), t.attidentity, t.attgenerated, t.attislocal, t.attinhcount,
                t.attcollation::regcollation)
    from pg_class c join pg_attribute t on t.attrelid = c.oid and t.attnum > 0 and not t.attisdropped
    left join pg_attrdef d on d.adrelid = c.oid and d.adnum = t.attnum
   where c.relnamespace = 'pgque'::regnamespace and c.relkind <> 'i'
  union all
  select 'index ' || pg_get_indexdef(i.indexrelid)
    from pg_index i join pg_class c on c.oid = i.indrelid
   where c.relnamespace = 'pgque'::regnamespace
  union all
  select format('constraint %s on %s: %s', o.conname, o.conrelid::regclass, pg_get_constraintdef(o.oid))
    from pg_constraint o where o.connamespace = 'pgque'::regnamespace
  union all
  select 'trigger ' || pg_get_triggerdef(g.oid) || ' enabled=' || g.tgenabled::text
    from pg_trigger g join pg_class c on c.oid = g.tgrelid
   where c.relnamespace = 'pgque'::regnamespace and not g.tgisinternal
  union all
  select format('view %s: %s', c.oid::regclass, md5(pg_get_viewdef(c.oid)))
    from pg_class c where c.relnamespace = 'pgque'::regnamespace and c.relkind in ('v', 'm')
  union all
  select format('sequence %s: type=%s start=%s inc=%s min=%s max=%s cache=%s cycle=%s owned_by=%s',
                s.seqrelid::regclass, s.seqtypid::regtype, s.seqstart, s.seqincrement, s.seqmin, s.seqmax,
                s.seqcache, s.seqcycle,
                (select pg_describe_object(d.refclassid, d.refobjid, d.refobjsubid) from pg_depend d
                  where d.classid = 'pg_class'::regclass and d.objid = s.seqrelid and d.deptype in ('a', 'i')))
    from pg_sequence s join pg_class c on c.oid = s.seqrelid where c.relnamespace = 'pgque'::regnamespace
  union all
  select format('type %s typtype=%s owner=%s acl=%s', t.oid::regtype, t.typtype, pg_get_userbyid(t.typowner), a.txt)
    from pg_type t join acl a on a.oid = t.oid and a.cls = 'pg_type'::regclass
   where t.typnamespace = 'pgque'::regnamespace and t.typtype not in ('b') and t.typrelid = 0
      or (t.typnamespace = 'pgque'::regnamespace and t.typtype = 'c'
          and exists (select 1 from pg_class c where c.oid = t.typrelid and c.relkind = 'c'))
  union all
  select 'extension member ' || pg_describe_object(d.classid, d.objid, d.objsubid)
    from pg_depend d join pg_extension e on e.oid = d.refobjid
   where d.refclassid = 'pg_extension'::regclass and d.deptype = 'e' and e.extname = 'pgque_bgw'
  union all
  select format('extension pgque_bgw version=%s owner=%s schema=%s relocatable=%s', e.extversion,
                pg_get_userbyid(e.extowner), e.extnamespace::regnamespace, e.extrelocatable)
    from pg_extension e where e.extname = 'pgque_bgw'
  union all
  select format('extension config %s condition=%L', c.oid::regclass, x.cond)
    from pg_extension e, unnest(e.extconfig, e.extcondition) x(rel, cond)
    join pg_class c on c.oid = x.rel
   where e.extname = 'pgque_bgw'
) s
order by line collate "C";
