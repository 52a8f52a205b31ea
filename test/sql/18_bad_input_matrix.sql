-- Bad input matrix (issue #11): every public function and procedure of
-- schema pgque, found in the catalog (a new one is covered without editing
-- this file), is called by each role (the extension owner, pgque_admin,
-- pgque_writer, pgque_reader) with: all arguments NULL; each argument NULL,
-- empty, huge, negative, zero, extreme, infinite or malformed while the
-- others hold real values (an existing queue, consumer, open batch, message,
-- lease).  Each call runs in a subtransaction that is always rolled back, so
-- every call sees the same fixture.  A call is an offender when:
--   - it fails with XX000 or another class 58/XX SQLSTATE, or a message that
--     leaks internals (cache lookups, "out of range" from arithmetic,
--     constraint names, "value too long", ...);
--   - it accepts a value the argument must refuse (NULL queue, empty worker,
--     negative slot, 1,000,000-year interval, infinite timestamp ...), or
--     refuses it with another SQLSTATE than the convention of
--     docs/sql-reference.md (22004 NULL, 22023 out of range, 42622 too long;
--     42501 is always accepted: the role may not call the function);
--   - it leaves residue: the shared-memory slot leases or cooperative
--     heartbeats differ from before the call.  Only state outside the
--     transaction survives the rollback of a call's subtransaction: rows
--     and relations cannot (the workers are off and the call is alone),
--     so the pgque tables' row counts and relation count are compared once
--     around all of a role's calls, as a net, not around each call.
-- The output is the number of calls per role and the offenders (none).
set client_min_messages = error;

create role bim_admin login in role pgque_admin;
create role bim_writer login in role pgque_writer;
create role bim_reader login in role pgque_reader;

-- Fixture: a queue with a plain consumer (open batch, one dead letter) and
-- a partitioned one (slot 0 of 1, leased by worker bim_w, open batch), and
-- an externally ticked queue.
select pgque.create_queue('bim'), pgque.create_queue('bim_ext');
select pgque.set_queue_config('bim_ext', 'external_ticker', 'true');
select pgque.subscribe('bim', 'bim_c');
select pgque.subscribe_slot('bim', 'bim_p', 0, 1);
select pgque.register_subconsumer('bim', 'bim_g', 'bim_m');
select pgque.claim_slot('bim', 'bim_p', 0, 'bim_w', '1 hour') > 0 as leased;
select pgque.set_queue_config('bim', 'max_retries', '0');
select pgque.send('bim', 'bim_t', 'dead');
select pgque.ticker('bim') is not null as ticked;
select pgque.nack(m.batch_id, m, '0 s', 'fixture') from pgque.receive('bim', 'bim_c') m;
select pgque.ack(batch_id) from (select distinct batch_id from pgque.receive('bim', 'bim_c')) b;
select count(*) from pgque.receive_partitioned('bim', 'bim_p', 0, 1, 'bim_w');
select pgque.ack_partitioned('bim', 'bim_p', 0, 1, 'bim_w');
select pgque.set_queue_config('bim', 'max_retries', null);
select pgque.send('bim', 'bim_t', 'live ' || i) from generate_series(1, 2) i;
select pgque.ticker('bim') is not null as ticked;
create table pgque_test.bim_msg as select * from pgque.receive('bim', 'bim_c');
select count(*) from pgque.receive_partitioned('bim', 'bim_p', 0, 1, 'bim_w');
select count(*) as open_batch_events, count(distinct batch_id) as open_batches from pgque_test.bim_msg;
select count(*) as dead_letters from pgque.dead_letter;

-- The arguments, by name (without the i_/x_ prefix): a valid value (SQL),
-- and the variants of the matrix that the argument must refuse.  A row
-- with "when_arg" applies to functions that also take that argument (or
-- are named so), in place of the row without.
create table pgque_test.bim_arg (
    arg       text not null,
    when_arg  text,
    valid     text not null,
    refuse    text[] not null
);
-- (In an array literal a bare null is a NULL element, not the variant
-- 'null': array_replace names it, or no NULL variant would have to be
-- refused.)
insert into pgque_test.bim_arg
select a, w, v, array_replace(r::text[], null, 'null') from (values
    ('queue_name',     null,      quote_literal('bim'),     '{null,empty,huge,unknown,odd_chars}'),
    ('queue_name',     'tick_id', quote_literal('bim_ext'), '{null,empty,huge,unknown,odd_chars}'),
    ('queue_name',     'create_queue', quote_literal('bim'), '{null,empty,huge,control}'),
    ('consumer_name',  null,      quote_literal('bim_c'),   '{null,empty,huge}'),
    -- cooperative consumers (PgQue's names: queue, consumer, subconsumer)
    ('queue',          null,      quote_literal('bim'),     '{null,empty,huge,unknown,odd_chars}'),
    ('consumer',       null,      quote_literal('bim_g'),   '{null,empty,huge}'),
    ('subconsumer',    null,      quote_literal('bim_m'),   '{null,empty,huge}'),
    -- the calls that register a new member refuse control characters (ADR 0071)
    ('subconsumer',    'register_subconsumer', quote_literal('bim_m'), '{null,empty,huge,control}'),
    ('subconsumer',    'subscribe_subconsumer', quote_literal('bim_m'), '{null,empty,huge,control}'),
    ('subconsumer',    'receive_coop', quote_literal('bim_m'), '{null,empty,huge,control}'),
    ('convert_normal', null,      'false',                  '{null}'),
    ('batch_handling', null,      '1',                      '{null,negative,max}'),
    ('dead_interval',  null,      quote_literal('1 hour'),  '{negative,zero,far}'),
    ('consumer_name',  'slot',    quote_literal('bim_p'),   '{null,empty,huge}'),
    ('consumer_name',  'claim_any_slot', quote_literal('bim_p'), '{null,empty,huge}'),
    -- online resize (ADR 0030): the partitioned consumer, resized to n = 2
    ('consumer_name',  'new_n',   quote_literal('bim_p'),   '{null,empty,huge}'),
    ('consumer_name',  'partition_n', quote_literal('bim_p'), '{null,empty,huge}'),
    ('new_n',          null,      '2',                      '{null,negative,zero,max}'),
    ('consumer_name',  'get_failure_policy', quote_literal('bim_p'), '{null,empty,huge}'),
    ('consumer_name',  'set_failure_policy', quote_literal('bim_p'), '{null,empty,huge}'),
    ('consumer_id',    null,      quote_literal('bim_c'),   '{null,empty,huge}'),
    ('worker',         null,      quote_literal('bim_w'),   '{null,empty,huge,control}'),
    ('failure_policy', null,      quote_literal('pause'),   '{null,empty,huge}'),
    ('failure_policy', 'slot',    quote_literal('pause'),   '{empty,huge}'),
    ('idem_key',       null,      quote_literal('bim_k'),   '{null,empty,huge}'),
    ('param_name',     null,      quote_literal('max_retries'), '{null,empty,huge}'),
    ('param_value',    null,      quote_literal('3'),       '{}'),
    -- per-consumer options (ADR 0057)
    ('param_name',     'set_consumer_config', quote_literal('merge_windows'), '{null,empty,huge}'),
    ('param_name',     'get_consumer_config', quote_literal('merge_windows'), '{null,empty,huge}'),
    ('param_value',    'set_consumer_config', quote_literal('true'), '{}'),
    -- per-queue rights (ADR 0047)
    ('role',           null,      quote_literal('pgque_reader'), '{null}'),
    ('right',          null,      quote_literal('subscribe'), '{null,empty,huge}'),
    -- per-consumer users (ADR 0058): a role not among bim_c's users
    ('role_name',      null,      quote_literal('pgque_writer'), '{null}'),
    ('type_name',      null,      quote_literal('bim_t'),   '{null}'),
    ('ev_type',        null,      quote_literal('bim_t'),   '{}'),
    ('ev_data',        null,      quote_literal('d'),       '{}'),
    ('ev_extra1',      null,      quote_literal('e1'),      '{}'),
    ('ev_extra2',      null,      quote_literal('e2'),      '{}'),
    ('ev_extra3',      null,      quote_literal('e3'),      '{}'),
    ('ev_extra4',      null,      quote_literal('e4'),      '{}'),
    ('payload',        null,      quote_literal('{"p": 1}'), '{}'),
    ('payloads',       null,      quote_literal('{"{}","[]"}'), '{null,two_dim}'),
    ('partition_key',  null,      quote_literal('k1'),      '{}'),
    ('partition_keys', null,      quote_literal('{k1,k2}'), '{null,two_dim}'),
    ('reason',         null,      quote_literal('bim'),     '{}'),
    ('options',        null,      quote_literal('{}'),      '{null}'),
    ('ev_time',        null,      'now()',                  '{null}'),
    ('ev_txid',        null,      'null',                   '{}'),
    ('ev_retry',       null,      '0',                      '{}'),
    -- PgQ's low-level functions (issue #27 item 7)
    ('ev_id',          null,      'null',                   '{negative,zero}'),
    ('ev_owner',       null,      'null',                   '{negative,zero}'),
    ('retry_after',    'event_retry_raw', 'now() + interval ''1 minute''', '{null,infinity,-infinity,far}'),
    ('name',           null,      quote_literal('pgque.queue'), '{null,empty,huge}'),
    ('seq_name',       null,      (select quote_literal(queue_event_seq) from pgque.queue where queue_name = 'bim'),
                                                            '{null,empty,huge,unknown,odd_chars}'),
    ('new_value',      null,      '1',                      '{null,max}'),
    ('queue_id',       null,      (select queue_id from pgque.queue where queue_name = 'bim')::text, '{null}'),
    ('prev_tick_id',   null,      (select min(tick_id) from pgque.tick t join pgque.queue q on q.queue_id = t.tick_queue
                                    where q.queue_name = 'bim')::text, '{null}'),
    ('prev_tick_time', null,      'now()',                  '{null}'),
    ('prev_tick_seq',  null,      '0',                      '{null,negative,max}'),
    ('ev_data_list',   null,      quote_literal('{a,b}'),   '{null,two_dim}'),
    ('cursor_name',    null,      quote_literal('bim_cur'), '{null,empty,huge}'),
    ('quick_limit',    null,      '1',                      '{null,negative}'),
    ('extra_where',    null,      quote_literal('true'),    '{empty}'),
    ('p_period_ms',    null,      '100',                    '{null,negative,zero,max}'),
    ('slot',           null,      '0',                      '{null,negative,max}'),
    ('n',              null,      '1',                      '{null,negative,zero,max}'),
    ('max_return',     null,      '10',                     '{null,negative,zero}'),
    ('limit_count',    null,      '10',                     '{null,negative,zero}'),
    ('min_count',      null,      '1',                      '{negative,zero}'),
    ('retry_seconds',  null,      '60',                     '{null,negative}'),
    ('force',          null,      'true',                   '{null}'),
    ('ttl',            null,      quote_literal('1 minute'), '{null,negative,zero,far}'),
    ('retry_after',    null,      quote_literal('10 seconds'), '{null,negative,far}'),
    ('older_than',     null,      quote_literal('30 days'), '{null,negative,far}'),
    ('retention',      null,      quote_literal('7 days'),  '{null,negative,far}'),
    -- replay by time (ADR 0067): 'earliest' | 'latest' | a point in time,
    -- as text or timestamptz ('now' is both); an infinite, far or past time
    -- is the latest or the earliest tick
    ('target',         null,      quote_literal('now'),     '{null,empty,huge}'),
    ('start',          null,      quote_literal('now'),     '{null,empty,huge}'),
    ('min_lag',        null,      quote_literal('0 seconds'), '{negative,far}'),
    ('min_interval',   null,      quote_literal('1 second'), '{negative,zero,far}'),
    ('duration',       null,      quote_literal('1 second'), '{null,negative,zero,far}'),
    ('period',         null,      quote_literal('100 milliseconds'), '{null,negative,zero,far}'),
    ('period',         'bucket_size', quote_literal('1 hour'), '{null,negative,zero,far}'),
    ('bucket_size',    null,      quote_literal('10 minutes'), '{null,negative,zero,far}'),
    ('threshold',      null,      quote_literal('1 hour'),  '{null,negative,far}'),
    -- receive_wait (ADR 0102): 0 looks once and does not wait
    ('timeout',        null,      quote_literal('0'),       '{null,negative,far}'),
    ('deliver_at',     null,      'now() + interval ''1 hour''', '{null,infinity,-infinity,far}'),
    ('retry_time',     null,      'now() + interval ''1 minute''', '{null,infinity,-infinity,far}'),
    ('orig_timestamp', null,      'now()',                  '{null,infinity,-infinity,far}'),
    ('event_seq',      null,      '0',                      '{null}'),
    ('tick_id',        null,      (select max(tick_id) + 1 from pgque.tick t join pgque.queue q on q.queue_id = t.tick_queue
                                    where q.queue_name = 'bim_ext')::text, '{null}'),
    ('tick_pos',       null,      (select max(tick_id) from pgque.tick t join pgque.queue q on q.queue_id = t.tick_queue
                                    where q.queue_name = 'bim')::text, '{null}'),
    ('batch_id',       null,      (select min(batch_id) from pgque_test.bim_msg)::text, '{null}'),
    ('event_id',       null,      (select min(msg_id) from pgque_test.bim_msg)::text, '{null}'),
    ('dead_letter_id', null,      (select min(dl_id) from pgque.dead_letter)::text, '{null}'),
    ('msg',            null,      (select format('row(%s, %s, %L, %L, 0, now(), null, null, null, null)::pgque.message',
                                                 msg_id, batch_id, type, payload)
                                     from pgque_test.bim_msg order by msg_id limit 1), '{null,null_fields,unknown}')
) v(a, w, v, r);

-- The variants of each argument type: name, SQL, the SQLSTATEs of a refusal.
create table pgque_test.bim_variant (typ text, variant text, expr text, want text[]);
insert into pgque_test.bim_variant values
    ('text',    'null',     'null',                           '{22004}'),
    ('text',    'empty',    '''''',                           '{22023}'),
    ('text',    'huge',     'repeat(''x'', 100000)',          '{42622,22023}'),
    ('text',    'unknown',  '''bim_nope''',                   '{42704}'),
    -- quotes, LIKE wildcards, a backslash and a newline: never SQL, never a pattern
    ('text',    'odd_chars', 'E''b''''i"m%_\\\n''',              '{42704}'),
    -- a new name with a newline, which would start a server log line (ADR 0071)
    ('text',    'control',  'E''bim_nope\n''',                 '{22023}'),
    ('integer', 'null',     'null',                           '{22004}'),
    ('integer', 'negative', '-1',                             '{22023}'),
    ('integer', 'zero',     '0',                              '{22023}'),
    ('integer', 'max',      '2147483647',                     '{22023}'),
    ('bigint',  'null',     'null',                           '{22004}'),
    ('bigint',  'negative', '-1',                             '{22023}'),
    ('bigint',  'zero',     '0',                              '{22023}'),
    ('bigint',  'max',      '9223372036854775807',            '{22023}'),
    ('boolean', 'null',     'null',                           '{22004}'),
    ('interval', 'null',    'null',                           '{22004}'),
    ('interval', 'negative', '''-1 second''',                 '{22023}'),
    ('interval', 'zero',    '''0''',                          '{22023}'),
    -- PG15 has no infinite interval: a huge one
    ('interval', 'far',     '''1000000 years''',              '{22023}'),
    ('timestamp with time zone', 'null',      'null',         '{22004}'),
    ('timestamp with time zone', 'infinity',  '''infinity''', '{22023}'),
    ('timestamp with time zone', '-infinity', '''-infinity''', '{22023}'),
    ('timestamp with time zone', 'far',       '''200000-01-01''', '{22023}'),
    ('timestamp with time zone', 'past',      '''1970-01-01''', '{22023}'),
    ('jsonb',   'null',     'null',                           '{22004}'),
    ('jsonb',   'huge',     'to_jsonb(repeat(''x'', 100000))', '{22023}'),
    ('text[]',  'null',     'null',                           '{22004}'),
    ('text[]',  'empty',    '''{}''',                         '{22023}'),
    ('text[]',  'null_element', 'array[null]::text[]',        '{22004}'),
    ('text[]',  'two_dim',  '''{{a,b},{c,d}}''',              '{2202E}'),
    -- 10,000 elements: huge for one call, cheap enough for the matrix
    ('text[]',  'huge',     'array(select ''x'' || g from generate_series(1, 10000) g)', '{22023}'),
    ('jsonb[]', 'null',     'null',                           '{22004}'),
    ('jsonb[]', 'empty',    '''{}''',                         '{22023}'),
    ('jsonb[]', 'null_element', 'array[null]::jsonb[]',       '{22004}'),
    ('jsonb[]', 'two_dim',  '''{{1,2},{3,4}}''',              '{2202E}'),
    ('jsonb[]', 'huge',     'array(select to_jsonb(g) from generate_series(1, 10000) g)', '{22023}'),
    ('xid8',    'null',     'null',                           '{22004}'),
    ('regrole', 'null',     'null',                           '{22004}'),
    ('pgque.message', 'null', 'null',                         '{22004}'),
    ('pgque.message', 'null_fields', 'row(null, null, null, null, null, null, null, null, null, null)', '{22004}'),
    ('pgque.message', 'unknown',
        (select format('row(-1, %s, %L, %L, 0, now(), null, null, null, null)', batch_id, type, payload)
           from pgque_test.bim_msg order by msg_id limit 1), '{22023}');

-- Every input argument of every public function and procedure (not the
-- trigger functions: they take no arguments and only the trigger manager
-- can call them; test/sql/21_cdc.sql covers their bad arguments).
create table pgque_test.bim_fn_arg as
select p.oid as fn, p.prokind, p.proname::text as func_name,
       regexp_replace(p.oid::regprocedure::text, '^pgque\.', '') as func,
       a.pos, regexp_replace(a.name, '^[ix]_', '') as arg, format_type(a.typ, null) as typ
  from pg_proc p
  left join lateral (
        select row_number() over (order by o) as pos, n as name, t as typ
          from unnest(coalesce(p.proallargtypes, p.proargtypes::oid[]), p.proargnames,
                      coalesce(p.proargmodes, array_fill('i'::"char", array[cardinality(coalesce(p.proallargtypes, p.proargtypes::oid[]))])))
               with ordinality u(t, n, m, o)
         where m in ('i', 'b', 'v')) a on true
 where p.pronamespace = 'pgque'::regnamespace and p.proname !~ '^_'
   and p.prorettype <> 'pg_catalog.trigger'::pg_catalog.regtype;

-- the valid value of each argument (the when_arg row wins)
create table pgque_test.bim_fn_valid as
select fa.*, v.valid, coalesce(v.refuse, '{}') as refuse
  from pgque_test.bim_fn_arg fa
  left join lateral (select ba.valid, ba.refuse from pgque_test.bim_arg ba
                      where ba.arg = fa.arg
                        and (ba.when_arg is null or ba.when_arg = fa.func_name
                             or exists (select 1 from pgque_test.bim_fn_arg o where o.fn = fa.fn and o.arg = ba.when_arg))
                      order by ba.when_arg nulls last limit 1) v on true;

-- arguments with no valid value above: add them to bim_arg (none)
select func, arg, typ from pgque_test.bim_fn_valid
 where pos is not null and (valid is null or typ not in (select typ from pgque_test.bim_variant))
 order by 1, 2;

-- The calls: the valid one, all arguments NULL, and each variant of each
-- argument with the others valid.
create function pgque_test.bim_sql(i_fn oid, i_pos int8, i_expr text) returns text
language sql as $$
    select case when p.prokind = 'p' then 'call ' else 'select * from ' end
           || 'pgque.' || quote_ident(p.proname) || '('
           || coalesce((select string_agg('(' || case when v.pos = i_pos or i_pos = 0 then i_expr else v.valid end
                                          || ')::' || v.typ, ', ' order by v.pos)
                          from pgque_test.bim_fn_valid v where v.fn = p.oid and v.pos is not null), '')
           || ')'
      from pg_proc p where p.oid = i_fn
$$;

create table pgque_test.bim_call as
select fn, func, '-'::text as arg, 0 as pos, 'valid'::text as variant, false as must_refuse, '{}'::text[] as want,
       pgque_test.bim_sql(fn, -1, null) as sql
  from (select distinct fn, func from pgque_test.bim_fn_valid) f
union all
select fn, func, '*', 0, 'all_null', bool_or('null' = any(refuse)), '{22004}',
       pgque_test.bim_sql(fn, 0, 'null')
  from pgque_test.bim_fn_valid where pos is not null group by fn, func
union all
select v.fn, v.func, v.arg, v.pos::int4, x.variant, x.variant = any(v.refuse), x.want,
       pgque_test.bim_sql(v.fn, v.pos, x.expr)
  from pgque_test.bim_fn_valid v join pgque_test.bim_variant x on x.typ = v.typ;

-- set_queue_config: every queue parameter (the list its own hint gives, so
-- a new parameter is covered too) with values that no parameter takes, and
-- with limits ('0', 2^31) that some take.
create function pgque_test.bim_queue_params() returns setof text
language plpgsql as $$
declare
    h text;
begin
    perform pgque.set_queue_config('bim', 'bim_no_such_parameter', null);
exception when invalid_parameter_value then
    get stacked diagnostics h = pg_exception_hint;
    return query select btrim(p)
                   from regexp_split_to_table(regexp_replace(h, '^Known parameters: |\.$', '', 'g'), ',') p;
end $$;
select count(*) as queue_parameters from pgque_test.bim_queue_params();

insert into pgque_test.bim_call
select 'pgque.set_queue_config(text,text,text)'::regprocedure, 'set_queue_config(text,text,text)',
       'param_value:' || p, 3, v.variant, v.refuse, '{22023,22P02,22007,22003}',
       format('select * from pgque.set_queue_config(%L, %L, %s)', 'bim', p, v.expr)
  from pgque_test.bim_queue_params() p,
       (values ('empty', '''''', true), ('garbage', '''garbage''', true), ('negative', '''-1''', true),
               ('far', '''1000000 years''', true), ('infinity', '''infinity''', true),
               ('huge', 'repeat(''9'', 300)', true), ('zero', '''0''', false),
               ('max', '''2147483648''', false)) v(variant, expr, refuse);

-- What a call could leave behind.  Each call runs in a subtransaction
-- that is always rolled back, and nothing else runs meanwhile (the workers
-- are off), so only state outside the transaction can survive it: the
-- shared-memory slot leases (bim_lease_state) and cooperative heartbeats
-- (_coop_member_count_all), compared around each call.  Nothing of pgque
-- holds a session-level lock (src/locks.c), and a sequence's nextval, the
-- one other survivor, leaves a gap that PgQ's model allows.  Row counts of
-- every pgque catalog table (a parent's count covers its inheritance
-- children; not the event tables: rolled-back sends leave thousands of
-- dead rows there, which every count would scan) and the number of pgque
-- relations cannot change: they are compared once around all of a role's
-- calls (each comparison costs as much as ten calls).
create function pgque_test.bim_catalog_state() returns text
language plpgsql as $$
declare
    q  text;
    r  text;
begin
    select string_agg(format('select %L || '':'' || count(*) from %s', c.oid::regclass, c.oid::regclass),
                      ' union all ' order by c.oid::regclass::text)
      into q
      from pg_class c
     where c.relnamespace = 'pgque'::regnamespace and c.relkind in ('r', 'p')
       and c.oid <> 'pgque.event_template'::regclass
       and not exists (select 1 from pg_inherits i where i.inhrelid = c.oid);
    execute 'select string_agg(x, '','') from (' || q || ') s(x)' into r;
    return r || ',relations:' || (select count(*) from pg_class where relnamespace = 'pgque'::regnamespace);
end $$;

create function pgque_test.bim_lease_state() returns text
language sql as $$
    select pgque._slot_lease_count_all() || ':'
           || coalesce(string_agg(format('%s/%s/%s/%s/%s/%s', queue_id, consumer, slot, owner, epoch, ttl_ms), ','
                                  order by queue_id, consumer, slot), '')
      from pgque._slot_leases()
$$;

create table pgque_test.bim_result (
    role text, func text, arg text, pos int4, variant text, must_refuse boolean, want text[],
    failed boolean, state text, message text, residue text);

-- Run every call as one role (login NULL: the test's superuser, the
-- extension owner).  The sentinel error Z9999 rolls back a call that
-- succeeded.  A successful call may change the leases (release_slot,
-- drop_queue, a renewal with another TTL): the fixture lease is restored.
-- A commit every 100 calls keeps the transaction small; a commit after
-- each call cost a quarter of the run (a rolled-back subtransaction leaves
-- the backend's subtransaction cache at its abort, so the calls between
-- two commits do not slow the snapshots down).  Catalog rows
-- changed across the role's calls are one more offender row, "(all calls)".
create procedure pgque_test.bim_run(i_role text, i_login text)
language plpgsql as $$
declare
    c          record;
    cat0       text := pgque_test.bim_catalog_state();
    lease0     text;
    coop0      int4;
    lease1     text;
    ok         boolean;
    st         text;
    msg        text;
    residue    text;
    calls      int4 := 0;
begin
    for c in select * from pgque_test.bim_call order by func, pos, variant loop
        lease0 := pgque_test.bim_lease_state();
        coop0 := pgque._coop_member_count_all();
        ok := false;
        st := null;
        msg := null;
        begin
            if i_login is not null then
                execute format('set role %I', i_login);
            end if;
            execute c.sql;
            ok := true;
            raise exception 'roll the call back' using errcode = 'Z9999';
        exception when others then
            if not ok then
                st := sqlstate;
                msg := sqlerrm;
            end if;
        end;
        lease1 := pgque_test.bim_lease_state();
        residue := concat_ws(', ',
            case when lease1 <> lease0 then 'slot leases' end,
            -- a call rolled back leaves no heartbeat either (ADR 0041)
            case when pgque._coop_member_count_all() <> coop0 then 'coop heartbeats' end);
        if lease1 <> lease0 then
            perform pgque._slot_forget((select queue_id from pgque.queue where queue_name = 'bim'), null);
            perform pgque.claim_slot('bim', 'bim_p', 0, 'bim_w', '1 hour');
        end if;
        insert into pgque_test.bim_result
        values (i_role, c.func, c.arg, c.pos, c.variant, c.must_refuse, c.want,
                not ok, st, msg, nullif(residue, ''));
        calls := calls + 1;
        if calls % 100 = 0 then
            commit;
        end if;
    end loop;
    commit;
    if pgque_test.bim_catalog_state() <> cat0 then
        insert into pgque_test.bim_result
        values (i_role, '(all calls)', '-', 0, '-', false, '{}', true, null, null, 'catalog rows');
    end if;
end $$;

call pgque_test.bim_run('1 owner', null);
call pgque_test.bim_run('2 pgque_admin', 'bim_admin');
call pgque_test.bim_run('3 pgque_writer', 'bim_writer');
call pgque_test.bim_run('4 pgque_reader', 'bim_reader');

-- Calls made, per role (every role makes every call).
select role, count(*) as calls, count(distinct func) as functions, count(*) filter (where failed) > 0 as some_refused
  from pgque_test.bim_result group by role order by role;

-- The valid calls the owner cannot make (they test less: explained in the
-- fixture or by the function's contract).
select func, state from pgque_test.bim_result
 where role = '1 owner' and variant = 'valid' and failed order by func;

-- Offenders: every call the matrix finds wrong (none expected).
create table pgque_test.bim_offender as
select r.*,
       case
           when r.state = 'XX000' or left(r.state, 2) in ('58', 'XX') then 'internal error'
           when r.message ~* '(cache lookup|unrecognized|could not (find|open|read)|^(smallint|integer|bigint|numeric|timestamp|interval|date) out of range|field value out of range|value too long|index row|violates|null value in column|syntax error|^(relation|function|operator|type|column|schema) .* does not exist|division by zero|permission denied for (table|sequence|relation|schema|view))'
               then 'internal message'
           when length(r.message) > 1000 then 'message echoes the huge input'
           when r.failed and r.residue is not null then 'residue: ' || r.residue
           when r.must_refuse and not r.failed then 'accepted'
           when r.must_refuse and r.state <> all (r.want || '{42501}'::text[])
                and r.state is distinct from b.state then 'sqlstate ' || r.state || ', expected ' || array_to_string(r.want, '/')
       end as offence
  from pgque_test.bim_result r
  left join pgque_test.bim_result b on b.role = r.role and b.func = r.func and b.variant = 'valid';

select o.role, o.func, o.arg, o.variant, o.offence, o.state, left(o.message, 100) as message
  from pgque_test.bim_offender o
 where o.offence is not null
 order by o.func, o.pos, o.variant, o.role;

-- What the matrix found, one by one (each was an offender before the fix).
select what, pgque_test.error_of(sql) as error from (values
 ('01 max_return 2147483647 (was: integer out of range)',
  $$select count(*) from pgque.receive('bim', 'bim_c', 2147483647)$$),
 ('02 retry_after 1000000 years (was: timestamp out of range)',
  $$select pgque.nack(m.batch_id, row(m.*)::pgque.message, '1000000 years') from pgque_test.bim_msg m limit 1$$),
 ('03 dlq_purge older_than 1000000 years (was: timestamp out of range)',
  $$select pgque.dlq_purge('bim', '1000000 years')$$),
 ('04 maint_alerts retention 1000000 years (was: timestamp out of range)',
  $$select pgque.maint_alerts('1000000 years')$$),
 ('05 ticker_loop duration 1000000 years (was: timestamp out of range)',
  $$call pgque.ticker_loop('1000000 years', '1 second')$$),
 ('06 send_idem ttl 1000000 years (was: timestamp out of range)',
  $$select * from pgque.send_idem('bim', 't', 'p', 'k', '1000000 years')$$),
 ('07 next_batch_custom min_lag 1000000 years (was: accepted)',
  $$select batch_id from pgque.next_batch_custom('bim', 'bim_c', '1000000 years', null, null)$$),
 ('08 next_batch_custom min_interval 1000000 years (was: accepted)',
  $$select batch_id from pgque.next_batch_custom('bim', 'bim_c', null, null, '1000000 years')$$),
 ('09 send_at infinity (was: accepted, never delivered)',
  $$select pgque.send_at('bim', 't', 'p', 'infinity')$$),
 ('10 send_at in year 200000 (was: accepted)',
  $$select pgque.send_at('bim', 't', 'p', '200000-01-01')$$),
 ('11 event_retry at -infinity (was: accepted)',
  $$select pgque.event_retry(m.batch_id, m.msg_id, '-infinity'::timestamptz) from pgque_test.bim_msg m limit 1$$),
 ('12 external tick at infinity (was: accepted)',
  $$select pgque.ticker('bim_ext', 1000, 'infinity', 0)$$),
 ('13 idem_key of 100,000 bytes (was: accepted)',
  $$select * from pgque.send_idem('bim', 't', 'p', repeat('k', 100000))$$),
 ('14 parameter name of 100,000 bytes (was: echoed in the error)',
  $$select pgque.set_queue_config('bim', repeat('p', 100000), '1')$$),
 ('15 parameter value of 100,000 bytes (was: echoed in the error)',
  $$select pgque.set_queue_config('bim', 'max_retries', repeat('9', 100000))$$),
 ('16 send_batch of a two-dimensional jsonb[] (was: flattened; text[] was refused)',
  $$select pgque.send_batch('bim', '{{1,2},{3,4}}'::jsonb[])$$),
 ('17 claim_slot ttl 1000000 years (was: accepted, lease_until overflowed)',
  $$select pgque.claim_slot('bim', 'bim_p', 0, 'w', '1000000 years')$$),
 ('18 find_tick_helper at event position 2^63-1 (was: bigint out of range)',
  $$select pgque.find_tick_helper(1, 1, now(), 9223372036854775807, 1, null)$$)) v(what, sql)
 order by what collate "C";
-- the limits themselves are accepted
select count(*) >= 0 as max_return_max_ok from pgque.receive('bim', 'bim_c', 2147483647);
select pgque.dlq_purge('bim', '100 years') >= 0 as hundred_years_ok;
select pgque_test.error_of($$select pgque.send_at('bim', 't', 'p', now() + interval '99 years')$$) ~ '^no error' as send_at_99_years_ok;

-- Nothing of the matrix is left: the fixture is still as it was.
select count(*) as open_batch_events from pgque.get_batch_events((select min(batch_id) from pgque_test.bim_msg));
select slot, lease_owner from pgque.get_partition_slot_info() where queue_name = 'bim';
select pgque.drop_queue('bim', true), pgque.drop_queue('bim_ext', true);
select count(*) as leases_left from pgque._slot_leases() where consumer = 'bim_p';
drop role bim_admin, bim_writer, bim_reader;
reset client_min_messages;
