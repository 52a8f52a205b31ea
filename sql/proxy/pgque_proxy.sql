-- pgque_proxy @PGQUE_VERSION@: the producer and admin API of pgque_bgw in a
-- PL/Proxy database in front of S shards, each a database with pgque_bgw
-- and the same queues (docs/scale-out.md, ADR 0027).
--
-- Producers call the same functions as on a shard: a keyed event goes to
-- the one shard its key hashes to, a keyless one to any live shard.
-- Consumers read the shards directly: a batch never spans servers.  Admin
-- and monitoring calls run on every shard and name the shard in each row.
--
-- Nothing here is SECURITY DEFINER: a call runs as its caller, and the
-- caller's user mapping for the server pgque_shards decides as which role
-- each shard sees it, so the shards' own grants (pgque_writer, ...) decide.
\echo Use "CREATE EXTENSION pgque_proxy" to load this file. \quit

-- The shard set is PL/Proxy's cluster pgque_shards: a SQL/MED server with
-- one partition per shard, p0 .. p(S-1), and modular_mapping, so that
-- RUN ON h sends to partition h mod S for any S (without it PL/Proxy wants
-- a power of two and masks).  The server is the one source of S.
create function pgque.set_shards(i_conninfos text[])
returns int4 language plpgsql
set search_path = pg_catalog, pg_temp as $$
declare
    s      int4 := pg_catalog.cardinality(i_conninfos);
    opts   text[] := '{}';
    old_s  int4;
    i      int4;
begin
    if i_conninfos is null or s = 0 or pg_catalog.array_ndims(i_conninfos) > 1
       or pg_catalog.array_position(i_conninfos, null) is not null then
        raise exception 'set_shards needs a one-dimensional array of connection strings, without NULLs'
            using errcode = 'invalid_parameter_value';
    end if;
    if (select pg_catalog.count(distinct c) from pg_catalog.unnest(i_conninfos) c) <> s then
        raise exception 'set_shards: two shards have the same connection string'
            using errcode = 'invalid_parameter_value';
    end if;
    old_s := pgque._shard_count(false);
    if old_s is not null and old_s <> s then
        -- moving keys between shards is designed (ADR 0027) but not built
        raise exception 'the shard set has % shards; changing it to % would move keys between shards', old_s, s
            using errcode = 'object_not_in_prerequisite_state',
                  hint = 'Shards can be moved (same count, new connection strings); adding or removing one is not supported yet (docs/scale-out.md).';
    end if;
    for i in 0 .. s - 1 loop
        perform pgque._check_shard_conninfo(i_conninfos[i + 1]);
        opts := opts || pg_catalog.format('p%s %L', i, i_conninfos[i + 1]);
    end loop;
    if old_s is null then
        execute 'create server pgque_shards foreign data wrapper plproxy options (modular_mapping ''1'', '
                || pg_catalog.array_to_string(opts, ', ') || ')';
    else            -- same count: the shards move, the user mappings stay
        execute 'alter server pgque_shards options (set '
                || pg_catalog.array_to_string(opts, ', set ') || ')';
    end if;
    return s;
end $$;

-- A shard's connection string says where the shard is and how to reach
-- it, nothing more.  The server's options are readable by every role
-- (pg_foreign_server.srvoptions), so a password, a password file, a key
-- or its passphrase there would be every role's; and the role a proxy
-- user becomes on the shards is its user mapping's, which the
-- administrator chooses (security issue #25 item 4): so user, service
-- (a service file may name any of them) and options (-c role=...) are
-- refused too.  Keywords are libpq's, case-sensitive; a URI is refused
-- (its user:password@ part).  And "user=" anywhere, in a value too:
-- PL/Proxy appends the session user's name (user=...) to a shard's string
-- only when the string holds no "user=" at all (a plain substring test,
-- get_connstr in its src/execute.c), so application_name=app_user=1 would
-- make every proxy user whose mapping names no user (a PUBLIC mapping
-- without options, PL/Proxy's usual one) connect as the server's OS user,
-- the shards' superuser under trust or peer.
create function pgque._check_shard_conninfo(i_conninfo text)
returns void language plpgsql immutable
set search_path = pg_catalog, pg_temp as $$
declare
    allowed constant text[] := array['host', 'hostaddr', 'port', 'dbname', 'connect_timeout',
        'client_encoding', 'application_name', 'fallback_application_name', 'keepalives',
        'keepalives_idle', 'keepalives_interval', 'keepalives_count', 'tcp_user_timeout',
        'sslmode', 'sslcompression', 'sslrootcert', 'sslcrl', 'sslcrldir', 'sslsni',
        'requirepeer', 'ssl_min_protocol_version', 'ssl_max_protocol_version', 'gssencmode',
        'krbsrvname', 'gsslib', 'channel_binding', 'target_session_attrs', 'load_balance_hosts'];
    rest text := i_conninfo;
    m    text[];
begin
    if rest operator(pg_catalog.~) '^\s*[A-Za-z][A-Za-z0-9+.-]*://' then
        raise exception 'set_shards: a shard''s connection string must be keyword=value pairs, not a URI'
            using errcode = 'invalid_parameter_value',
                  detail = 'A URI may carry a user and a password, and the server''s options are readable by every role.',
                  hint = 'Write it as ''host=... port=... dbname=...''; the user and password go in the user mapping (docs/scale-out.md).';
    end if;
    loop
        m := pg_catalog.regexp_match(rest,
               '^\s*([A-Za-z_]+)\s*=\s*(''(?:[^''\\]|\\.)*''|(?:[^\s''\\]|\\.)+)(.*)$');
        exit when m is null;
        if not (m[1] operator(pg_catalog.=) any (allowed)) then
            raise exception 'set_shards: connection option "%" is not allowed in a shard''s connection string', m[1]
                using errcode = 'invalid_parameter_value',
                      detail = 'The server''s options are readable by every role, and the role a proxy user connects as is its user mapping''s.',
                      hint = 'Put user and password in the user mapping the administrator creates: CREATE USER MAPPING FOR role SERVER pgque_shards OPTIONS (user ..., password ...) (docs/scale-out.md).';
        end if;
        rest := m[3];
    end loop;
    if rest operator(pg_catalog.!~) '^\s*$' then
        raise exception 'set_shards: cannot read the connection string near "%"', pg_catalog.left(pg_catalog.btrim(rest), 40)
            using errcode = 'invalid_parameter_value',
                  hint = 'Write keyword=value pairs separated by spaces; quote a value with spaces in single quotes.';
    end if;
    if pg_catalog.strpos(i_conninfo, 'user=') operator(pg_catalog.>) 0 then
        raise exception 'set_shards: a shard''s connection string must not contain "user="'
            using errcode = 'invalid_parameter_value',
                  detail = 'PL/Proxy adds the proxy user''s name to a connection string only when it holds no "user=", even inside a value; without it the shards would be reached as the server''s operating-system user.',
                  hint = 'Choose values without "user=" (application_name, dbname, ...); the role goes in the user mapping (docs/scale-out.md).';
    end if;
end $$;

-- Only the administrator chooses as whom a proxy user reaches the shards.
-- USAGE on the server, which PL/Proxy needs, also lets a role create,
-- alter and drop its own user mapping: set user 'postgres' and no
-- password, and with trust, peer, a .pgpass or a certificate on the
-- shards it would run as any shard role (or, dropping it, fall back to a
-- PUBLIC mapping).  These event triggers refuse any change to a mapping
-- of server pgque_shards by a role that is neither a superuser nor the
-- server's owner.
create function pgque._guard_shard_mappings()
returns event_trigger language plpgsql
set search_path = pg_catalog, pg_temp as $$
declare
    v_server oid;
    v_hit    boolean;
begin
    select s.oid into v_server from pg_catalog.pg_foreign_server s where s.srvname operator(pg_catalog.=) 'pgque_shards';
    if v_server is null
       or pg_catalog.pg_has_role(current_user,
              (select s.srvowner from pg_catalog.pg_foreign_server s where s.oid operator(pg_catalog.=) v_server), 'usage')
       or (select r.rolsuper from pg_catalog.pg_roles r where r.rolname operator(pg_catalog.=) current_user) then
        return;
    end if;
    if tg_event operator(pg_catalog.=) 'sql_drop' then
        select pg_catalog.bool_or(d.address_args[1] operator(pg_catalog.=) 'pgque_shards') into v_hit
          from pg_catalog.pg_event_trigger_dropped_objects() d
         where d.object_type operator(pg_catalog.=) 'user mapping';
    else
        -- pg_user_mappings: the catalog itself is the superuser's (passwords)
        select pg_catalog.bool_or(u.srvid operator(pg_catalog.=) v_server) into v_hit
          from pg_catalog.pg_event_trigger_ddl_commands() c
          join pg_catalog.pg_user_mappings u on u.umid operator(pg_catalog.=) c.objid
         where c.classid operator(pg_catalog.=) 'pg_catalog.pg_user_mapping'::pg_catalog.regclass;
    end if;
    if v_hit then
        raise exception 'permission denied to change a user mapping of server pgque_shards'
            using errcode = 'insufficient_privilege',
                  detail = 'The user mapping decides as which role a proxy user reaches the shards; only the server''s owner or a superuser chooses it.',
                  hint = 'Ask the administrator to create or change the mapping (docs/scale-out.md).';
    end if;
end $$;

create event trigger pgque_proxy_mappings on ddl_command_end
    when tag in ('CREATE USER MAPPING', 'ALTER USER MAPPING')
    execute function pgque._guard_shard_mappings();
create event trigger pgque_proxy_mappings_drop on sql_drop
    when tag in ('DROP USER MAPPING', 'DROP OWNED')
    execute function pgque._guard_shard_mappings();

-- PL/Proxy reads a cluster that has no SQL/MED server from the functions
-- plproxy.get_cluster_version/_config/_partitions(text) ("compat mode"),
-- running them as the caller: whoever defines them chooses every shard's
-- connection string, user=postgres included.  Until set_shards has made
-- pgque_shards, and whenever it is gone, a role with CREATE on this
-- database could create schema plproxy and those three functions, then
-- call pgque._on_admin(0, 'drop_queue', ...) and reach any database of
-- the proxy's host as any role trust or peer lets it be.  So schema
-- plproxy is held here: made (empty, the installing superuser's) when it
-- is missing, and refused when a role that is not a superuser owns it or
-- a function in it, or may create in it.
create function pgque._claim_plproxy_schema()
returns void language plpgsql
set search_path = pg_catalog, pg_temp as $$
declare
    v_nsp  oid;
    v_who  text;
begin
    select n.oid into v_nsp from pg_catalog.pg_namespace n where n.nspname operator(pg_catalog.=) 'plproxy';
    if v_nsp is null then
        execute 'create schema plproxy';
        execute 'comment on schema plproxy is ''held by pgque_proxy: PL/Proxy''''s compat-mode cluster functions would live here (docs/scale-out.md)''';
        return;
    end if;
    select pg_catalog.min(r.rolname::pg_catalog.text) into v_who
      from pg_catalog.pg_roles r
     where not r.rolsuper
       and (r.oid operator(pg_catalog.=) (select n.nspowner from pg_catalog.pg_namespace n
                                           where n.oid operator(pg_catalog.=) v_nsp)
            or r.oid operator(pg_catalog.=) any (select p.proowner from pg_catalog.pg_proc p
                                                  where p.pronamespace operator(pg_catalog.=) v_nsp)
            or pg_catalog.has_schema_privilege(r.oid, v_nsp, 'CREATE'));
    if v_who is not null then
        raise exception 'schema plproxy is not safe: role % owns it or a function in it, or may create in it', v_who
            using errcode = 'object_not_in_prerequisite_state',
                  detail = 'PL/Proxy takes the shards'' connection strings, their user included, from plproxy.get_cluster_partitions() while server pgque_shards does not exist; that role would choose as whom pgque_proxy reaches the shards.',
                  hint = 'Drop schema plproxy (or give it and its functions to a superuser and revoke CREATE on it), then retry (docs/scale-out.md).';
    end if;
end $$;
revoke all on function pgque._claim_plproxy_schema() from public;
select pgque._claim_plproxy_schema();

-- S: the shards of shards() (NULL when there is no shard set and
-- i_required is false).
create function pgque._shard_count(i_required boolean default true)
returns int4 language plpgsql stable
set search_path = pg_catalog, pg_temp as $$
declare
    n int4;
begin
    select pg_catalog.count(*) into n from pgque.shards();
    if n = 0 then
        if i_required then
            raise exception 'no shard set: the server pgque_shards does not exist or has no partitions'
                using errcode = 'object_not_in_prerequisite_state',
                      hint = 'Run pgque.set_shards(array[''host=... dbname=...'', ...]) and create a user mapping (docs/scale-out.md).';
        end if;
        return null;
    end if;
    return n;
end $$;

-- shards() -> one row per shard: its number and connection string, read
-- from the server's partition options (the one place that parses them).
-- Inlined into its callers (no SET clause, every name qualified): a keyed
-- batch counts the shards at every call.
create function pgque.shards(out shard int4, out conninfo text)
returns setof record language sql stable as $$
    select pg_catalog.substr(o, 2, pg_catalog.strpos(o, '=') operator(pg_catalog.-) 2)::pg_catalog.int4,
           pg_catalog.substr(o, pg_catalog.strpos(o, '=') operator(pg_catalog.+) 1)
      from pg_catalog.pg_foreign_server s, pg_catalog.unnest(s.srvoptions) o
     where s.srvname operator(pg_catalog.=) 'pgque_shards' and o operator(pg_catalog.~) '^p[0-9]+='
     order by 1
$$;

-- The routing hash of a partition key, non-negative: PL/Proxy's RUN ON
-- takes it modulo S.  Inside a shard the slot of a key is
-- hashtextextended(key, 0) mod N (pgque._slot_of); the shard takes the
-- same hash with another seed, so that the keys of one shard still spread
-- over all of its slots.  No SET clause, so that the planner inlines it
-- (written fully qualified, like the producer calls below): a SQL function
-- with one is planned again at every call from plpgsql, which was half of
-- the proxy's work per keyed send (docs/benchmarks.md, scale-out).
create function pgque._key_hash(i_key text)
returns int4 language sql immutable parallel safe as $$
    select (pg_catalog.hashtextextended(i_key, 1886483829) operator(pg_catalog.&) 2147483647)::pg_catalog.int4
$$;

-- The shard of a partition key (NULL for a NULL key: keyless, any shard).
-- Inlined too (no SET clause, fully qualified).  The C paths (_send_keyed,
-- _send_batch_keyed) take _key_hash's body and the same modulus.
create function pgque.shard_of(i_key text, i_shards int4 default null)
returns int4 language sql stable as $$
    select pgque._key_hash(i_key) operator(pg_catalog.%) coalesce(i_shards, pgque._shard_count())
$$;

-- Why a call to a shard failed: 'refused' (no connection: nothing was
-- sent), 'lost' (the link broke or the shard shut down during the call: it
-- may have committed), NULL (the shard answered with an error of its own).
-- PL/Proxy reports a failed or a lost connection as XX000; the keyed send's
-- C path (pgque._send_keyed, ADR 0115) a failed connection as 08001 and a
-- lost one as 08006; a shard shutting down answers 57P01..57P03, a broken
-- link is class 08.
create function pgque._unreachable(i_state text, i_msg text)
returns text language sql immutable
set search_path = pg_catalog, pg_temp as $$
    select case when (i_state = 'XX000' and i_msg like '%PQconnect%') or i_state = '08001' then 'refused'
                when i_state = 'XX000' or i_state like '08%' or i_state like '57P%' then 'lost' end
$$;

-- A call to a shard failed; i_state .. i_hint are what the handler got.
-- Returns true when the shard could not be reached, nothing was sent and
-- the caller may try another shard (i_retry: a keyless send).  Raises
-- otherwise: SQLSTATE 08006 naming the shard when it is unavailable, or
-- the shard's own error as the shard raised it (PL/Proxy's "REMOTE ERROR"
-- wrapping taken off, so that clients see what a shard would say).
-- i_committed: the shards a split batch has already been committed on.
create function pgque._shard_failed(i_shard int4, i_state text, i_msg text, i_detail text, i_hint text,
                                    i_retry boolean default false, i_committed int4[] default '{}')
returns boolean language plpgsql
set search_path = pg_catalog, pg_temp as $$
declare
    why     text := pgque._unreachable(i_state, i_msg);
    msg     text;
    dt      text;
    ht      text;
    partial text := case when pg_catalog.cardinality(i_committed) > 0
                         then pg_catalog.format(' (the batch parts for shards %s were committed)', i_committed)
                         else '' end;
begin
    if why is null then
        msg := coalesce(pg_catalog.substring(i_msg, 'REMOTE ERROR: (.*)$'), i_msg) || partial;
        dt := coalesce(pg_catalog.substring(i_detail, '^Remote detail: (.*)$'), nullif(i_detail, ''));
        ht := coalesce(pg_catalog.substring(i_hint, '^Remote hint: (.*)$'), nullif(i_hint, ''));
        -- RAISE takes no NULL option: one form for each that is there
        if dt is null and ht is null then
            raise exception using errcode = i_state, message = msg;
        elsif dt is null then
            raise exception using errcode = i_state, message = msg, hint = ht;
        elsif ht is null then
            raise exception using errcode = i_state, message = msg, detail = dt;
        end if;
        raise exception using errcode = i_state, message = msg, detail = dt, hint = ht;
    end if;
    if why = 'refused' and i_retry and partial = '' then
        return true;
    end if;
    raise exception 'shard % is unavailable%', i_shard, partial
        using errcode = 'connection_failure',
              detail = i_msg,
              hint = case when why = 'refused'
                          then 'Nothing was sent to it. Its keys stay on it: retry when it is back.'
                          else 'The call may have committed on the shard before the link broke: retry with send_idem to avoid a duplicate.' end;
end $$;

-- The remote calls, one PL/Proxy function per shape.  Each runs on
-- partition i_shard and commits there when it returns, whatever the
-- proxy's own transaction does later.
create function pgque._on_send(i_shard int4, i_queue text, i_type text, i_payload text,
                               i_key text, i_typed boolean)
returns bigint language plproxy as $$
    cluster 'pgque_shards';
    run on i_shard;
    select case when i_typed then pgque.send(i_queue, i_type, i_payload, i_key)
                else pgque.send(i_queue, i_payload) end;
$$;

-- i_shape: which form of send_batch the producer called ('untyped':
-- queue and payloads, 'typed': with a type, 'keyed': with keys too).
create function pgque._on_send_batch(i_shard int4, i_queue text, i_type text, i_payloads text[],
                                     i_keys text[], i_shape text)
returns bigint[] language plproxy as $$
    cluster 'pgque_shards';
    run on i_shard;
    select case i_shape when 'untyped' then pgque.send_batch(i_queue, i_payloads)
                        when 'typed' then pgque.send_batch(i_queue, i_type, i_payloads)
                        else pgque.send_batch(i_queue, i_type, i_payloads, i_keys) end;
$$;

-- The keyed sends, the producers' hot path, have a remote call of their
-- own: PL/Proxy sends its statement unprepared, so the shard parses and
-- plans it at every call, and a CASE over two overloads cost it a fifth
-- more than one plain call (docs/benchmarks.md, scale-out).
create function pgque._on_send_keyed(i_shard int4, i_queue text, i_type text, i_payload text, i_key text)
returns bigint language plproxy as $$
    cluster 'pgque_shards';
    run on i_shard;
    select pgque.send(i_queue, i_type, i_payload, i_key);
$$;

create function pgque._on_send_batch_keyed(i_shard int4, i_queue text, i_type text, i_payloads text[],
                                           i_keys text[])
returns bigint[] language plproxy as $$
    cluster 'pgque_shards';
    run on i_shard;
    select pgque.send_batch(i_queue, i_type, i_payloads, i_keys);
$$;

create function pgque._on_send_idem(i_shard int4, i_queue text, i_type text, i_payload text,
                                    i_idem_key text, i_ttl interval, i_key text,
                                    out event_id bigint, out deduped boolean)
returns setof record language plproxy as $$
    cluster 'pgque_shards';
    run on i_shard;
    select event_id, deduped from pgque.send_idem(i_queue, i_type, i_payload, i_idem_key, i_ttl, i_key);
$$;

-- Admin calls that answer an int4 (void ones answer 1).  CASE evaluates
-- only the branch taken.
create function pgque._on_admin(i_shard int4, i_verb text, i_queue text, i_consumer text,
                                i_options jsonb, i_slot int4, i_n int4, i_force boolean)
returns int4 language plproxy as $$
    cluster 'pgque_shards';
    run on i_shard;
    select case i_verb
           when 'create_queue' then pgque.create_queue(i_queue)
           when 'create_queue_options' then pgque.create_queue(i_queue, i_options)
           when 'drop_queue' then pgque.drop_queue(i_queue, i_force)
           when 'subscribe' then pgque.subscribe(i_queue, i_consumer)
           when 'unsubscribe' then pgque.unsubscribe(i_queue, i_consumer)
           when 'subscribe_slot' then (select 1 from pgque.subscribe_slot(i_queue, i_consumer, i_slot, i_n))
           when 'unsubscribe_slot' then (select 1 from pgque.unsubscribe_slot(i_queue, i_consumer, i_slot))
           end;
$$;

-- Monitoring rows of a shard as JSON objects; only the branch asked for
-- runs (a one-time filter on i_what).
create function pgque._on_rows(i_shard int4, i_what text)
returns setof jsonb language plproxy as $$
    cluster 'pgque_shards';
    run on i_shard;
    select pg_catalog.to_jsonb(r) from pgque.status() r where i_what = 'status'
    union all
    select pg_catalog.to_jsonb(r) from pgque.metrics() r where i_what = 'metrics'
    union all
    select pg_catalog.to_jsonb(r) from pgque.alerts r where i_what = 'alerts';
$$;

-- The keyed send through pgque_proxy.so (ADR 0115): pgque.send(i_queue,
-- i_type, i_payload, i_key) on shard i_hash mod S over a libpq connection
-- the backend keeps per shard and user, with the statement prepared once
-- per connection; committed on the shard when it returns, as PL/Proxy's
-- call.  The shard is reached exactly as PL/Proxy reaches it: the current
-- user's user mapping (PL/Proxy's default user; PUBLIC's as fallback),
-- USAGE on the server, only the mapping's user and password, the
-- partition's string checked again by _check_shard_conninfo at every
-- connect.  A failure goes
-- through _shard_failed as PL/Proxy's does (08001: refused, 08006: lost).
-- i_hash is pgque._key_hash(key), the one definition of the routing hash;
-- a NULL key (with its NULL hash) is a typed keyless send (_route_send).
create function pgque._send_keyed(i_hash int4, i_queue text, i_type text, i_payload text, i_key text)
returns bigint language c
as 'MODULE_PATHNAME', 'pgque_proxy_send_keyed';

-- ---------------------------------------------------------------- producers

-- One event.  Keyed: to the key's shard (RUN ON its hash: no catalog read
-- on this path), or an error naming it.  Keyless: to a random shard, the
-- next ones in turn while they refuse the connection.
create function pgque._route_send(i_queue text, i_type text, i_payload text, i_key text,
                                  i_typed boolean)
returns bigint language plpgsql
set search_path = pg_catalog, pg_temp as $$
declare
    h      int4 := coalesce(pgque._key_hash(i_key), (pg_catalog.random() * 2147483646)::int4);
    s      int4 := h;       -- RUN ON takes it modulo S
    n      int4;
    st     text;
    msg    text;
    dt     text;
    ht     text;
begin
    if i_key is not null then       -- the C path raises through _shard_failed itself
        return pgque._send_keyed(h, i_queue, i_type, i_payload, i_key);
    end if;
    for i in 0 .. 2147483646 loop
        begin
            return pgque._on_send(s, i_queue, i_type, i_payload, i_key, i_typed);
        exception when others then
            get stacked diagnostics st = returned_sqlstate, msg = message_text,
                                    dt = pg_exception_detail, ht = pg_exception_hint;
            n := coalesce(n, pgque._shard_count());
            perform pgque._shard_failed(s % n, st, msg, dt, ht, i_key is null);
        end;
        exit when i + 1 >= n;
        s := (h % n + i + 1) % n;
    end loop;
    raise exception 'no shard is available (% tried)', n
        using errcode = 'connection_failure', detail = msg;
end $$;

-- The producer calls: thin SQL functions, fully qualified and without a
-- SET clause so that the planner inlines them (nothing here is SECURITY
-- DEFINER: they run with the caller's rights either way).
create function pgque.send(queue_name text, payload text)
returns bigint language sql as $$
    select pgque._route_send(queue_name, null, payload, null, false)
$$;

create function pgque.send(queue_name text, type_name text, payload text)
returns bigint language sql as $$
    select pgque._route_send(queue_name, type_name, payload, null, true)
$$;

-- A keyed send goes straight to the C path (no plpgsql, no subtransaction:
-- ADR 0115); a NULL key is a keyless send, which the C path hands to
-- _route_send (no CASE here: the executor built both of its branches at
-- every call, ADR 0122).
create function pgque.send(queue_name text, type_name text, payload text, partition_key text)
returns bigint language sql as $$
    select pgque._send_keyed(pgque._key_hash(partition_key), queue_name, type_name, payload, partition_key)
$$;

create function pgque.send(queue_name text, payload jsonb)
returns bigint language sql as $$
    select pgque._route_send(queue_name, null, payload::pg_catalog.text, null, false)
$$;

create function pgque.send(queue_name text, type_name text, payload jsonb)
returns bigint language sql as $$
    select pgque._route_send(queue_name, type_name, payload::pg_catalog.text, null, true)
$$;

create function pgque.send(queue_name text, type_name text, payload jsonb, partition_key text)
returns bigint language sql as $$
    select pgque._send_keyed(pgque._key_hash(partition_key), queue_name, type_name,
                             payload::pg_catalog.text, partition_key)
$$;

-- A keyed batch through pgque_proxy.so (ADR 0122): the ids in input order.
-- Split by shard (event i to shard pgque._key_hash(i_keys[i]) mod S, the
-- hash evaluated in C from _key_hash's own body as the planner inlines it;
-- a NULL key with the first keyed event's shard), one prepared
-- pgque.send_batch per shard's part over the connections of
-- pgque._send_keyed (the same user, mapping and checks), every part sent
-- before any answer is read.  Not atomic across shards: each reachable
-- shard's part commits there, and then an error names the shards whose
-- parts were not (pgque._batch_parts_failed) or relays a shard's own
-- (pgque._shard_failed), with the shards whose parts were committed.  Not
-- splittable (NULL or multi-dimensional arrays, two lengths, no key):
-- whole to one shard by _route_send_batch_on, the shard saying what is
-- wrong.  One shard: the batch as it came.
create function pgque._send_batch_keyed(i_queue text, i_type text, i_payloads text[], i_keys text[])
returns bigint[] language c
as 'MODULE_PATHNAME', 'pgque_proxy_send_batch_keyed';

-- The parts of a keyed batch for shards i_down were not sent (or their
-- link broke during the call); those for i_done were committed.
create function pgque._batch_parts_failed(i_down int4[], i_done int4[], i_msg text)
returns void language plpgsql
set search_path = pg_catalog, pg_temp as $$
begin
    raise exception 'shards % are unavailable: their parts of the batch were not sent%', i_down,
                    case when pg_catalog.cardinality(i_done) > 0
                         then pg_catalog.format(' (the parts for shards %s were committed)', i_done) else '' end
        using errcode = 'connection_failure',
              detail = i_msg,
              hint = 'Resend the events whose keys map to these shards (pgque.shard_of) when they are back; a part whose link broke during the call may have committed: send_idem avoids duplicates.';
end $$;

-- A keyed batch: the C path (inlined: no SET clause, fully qualified).
create function pgque._route_send_batch(i_queue text, i_type text, i_payloads text[], i_keys text[])
returns bigint[] language sql as $$
    select pgque._send_batch_keyed(i_queue, i_type, i_payloads, i_keys)
$$;

-- The whole batch to any live shard.
create function pgque._route_send_batch_on(i_queue text, i_type text, i_payloads text[],
                                           i_keys text[], i_shape text)
returns bigint[] language plpgsql
set search_path = pg_catalog, pg_temp as $$
declare
    n      int4 := pgque._shard_count();
    first  int4 := (pg_catalog.random() * n)::int4 % n;
    s      int4;
    st     text;
    msg    text;
    dt     text;
    ht     text;
begin
    for i in 0 .. n - 1 loop
        s := (first + i) % n;
        begin
            return pgque._on_send_batch(s, i_queue, i_type, i_payloads, i_keys, i_shape);
        exception when others then
            get stacked diagnostics st = returned_sqlstate, msg = message_text,
                                    dt = pg_exception_detail, ht = pg_exception_hint;
            perform pgque._shard_failed(s, st, msg, dt, ht, true);
        end;
    end loop;
    raise exception 'no shard is available (% tried)', n
        using errcode = 'connection_failure', detail = msg;
end $$;

create function pgque.send_batch(queue_name text, type_name text, payloads text[])
returns bigint[] language sql as $$
    select pgque._route_send_batch_on(queue_name, type_name, payloads, null, 'typed')
$$;

create function pgque.send_batch(queue_name text, type_name text, payloads text[], partition_keys text[])
returns bigint[] language sql as $$
    select pgque._route_send_batch(queue_name, type_name, payloads, partition_keys)
$$;

create function pgque.send_batch(queue_name text, payloads text[])
returns bigint[] language sql as $$
    select pgque._route_send_batch_on(queue_name, null, payloads, null, 'untyped')
$$;

-- jsonb[] to text[] keeps the dimensions: the shard still refuses a
-- multi-dimensional array itself
create function pgque.send_batch(queue_name text, payloads jsonb[])
returns bigint[] language sql as $$
    select pgque._route_send_batch_on(queue_name, null, payloads::pg_catalog.text[], null, 'untyped')
$$;

create function pgque.send_batch(queue_name text, type_name text, payloads jsonb[])
returns bigint[] language sql as $$
    select pgque._route_send_batch_on(queue_name, type_name, payloads::pg_catalog.text[], null, 'typed')
$$;

create function pgque.send_batch(queue_name text, type_name text, payloads jsonb[], partition_keys text[])
returns bigint[] language sql as $$
    select pgque._route_send_batch(queue_name, type_name, payloads::pg_catalog.text[], partition_keys)
$$;

-- Idempotent send: routed by the partition key, else by the idempotency
-- key, so that every retry of a send meets its first attempt on one shard.
-- The signature (and its defaults) is the shard's.
create function pgque.send_idem(queue_name text, type_name text, payload text, idem_key text,
                                ttl interval default '1 hour', partition_key text default null)
returns table (event_id bigint, deduped boolean) language plpgsql
set search_path = pg_catalog, pg_temp as $$
declare
    s    int4 := pgque.shard_of(coalesce(partition_key, idem_key));
    st   text;
    msg  text;
    dt   text;
    ht   text;
begin
    if s is null then       -- no key at all: the shard refuses it
        s := 0;
    end if;
    return query select * from pgque._on_send_idem(s, queue_name, type_name, payload, idem_key, ttl, partition_key);
exception when others then
    get stacked diagnostics st = returned_sqlstate, msg = message_text,
                            dt = pg_exception_detail, ht = pg_exception_hint;
    perform pgque._shard_failed(s, st, msg, dt, ht);
end $$;

create function pgque.send_idem(queue_name text, type_name text, payload jsonb, idem_key text,
                                ttl interval default '1 hour', partition_key text default null)
returns table (event_id bigint, deduped boolean) language sql
set search_path = pg_catalog, pg_temp as $$
    select * from pgque.send_idem(queue_name, type_name, payload::pg_catalog.text, idem_key, ttl, partition_key)
$$;

-- ---------------------------------------------------------------- admin

-- An admin call on every shard, in shard order; one row per shard with the
-- shard's answer.  A shard that cannot be reached does not stop the others:
-- the call goes on, and raises at the end naming the shards to run it on
-- again (every one of these calls may be repeated: create_queue and
-- subscribe answer 0 for what exists).
create function pgque._on_all(i_verb text, i_queue text, i_consumer text default null,
                              i_options jsonb default null, i_slot int4 default null,
                              i_n int4 default null, i_force boolean default false)
returns table (shard int4, result int4) language plpgsql
set search_path = pg_catalog, pg_temp as $$
declare
    down  int4[] := '{}';
    st    text;
    msg   text;
    dt    text;
    ht    text;
begin
    for s in 0 .. pgque._shard_count() - 1 loop
        begin
            shard := s;
            result := pgque._on_admin(s, i_verb, i_queue, i_consumer, i_options, i_slot, i_n, i_force);
            return next;
        exception when others then
            get stacked diagnostics st = returned_sqlstate, msg = message_text,
                                    dt = pg_exception_detail, ht = pg_exception_hint;
            perform pgque._shard_failed(s, st, msg, dt, ht, true);
            down := down || s;
        end;
    end loop;
    if pg_catalog.cardinality(down) > 0 then
        raise exception '% did not reach shards %', i_verb, down
            using errcode = 'connection_failure',
                  detail = msg,
                  hint = 'It was done on the other shards; run it again when they are back.';
    end if;
end $$;

create function pgque.create_queue(queue_name text)
returns table (shard int4, result int4) language sql
set search_path = pg_catalog, pg_temp as $$
    select * from pgque._on_all('create_queue', queue_name)
$$;

create function pgque.create_queue(queue_name text, options jsonb)
returns table (shard int4, result int4) language sql
set search_path = pg_catalog, pg_temp as $$
    select * from pgque._on_all('create_queue_options', queue_name, i_options => options)
$$;

create function pgque.drop_queue(queue_name text, force boolean default false)
returns table (shard int4, result int4) language sql
set search_path = pg_catalog, pg_temp as $$
    select * from pgque._on_all('drop_queue', queue_name, i_force => force)
$$;

create function pgque.subscribe(queue_name text, consumer_name text)
returns table (shard int4, result int4) language sql
set search_path = pg_catalog, pg_temp as $$
    select * from pgque._on_all('subscribe', queue_name, consumer_name)
$$;

create function pgque.unsubscribe(queue_name text, consumer_name text)
returns table (shard int4, result int4) language sql
set search_path = pg_catalog, pg_temp as $$
    select * from pgque._on_all('unsubscribe', queue_name, consumer_name)
$$;

-- subscribe_partitioned: every slot 0 .. n-1 of a partitioned consumer, on
-- every shard (n slots per shard).
create function pgque.subscribe_partitioned(queue_name text, consumer_name text, n int4)
returns table (shard int4, result int4) language plpgsql
set search_path = pg_catalog, pg_temp as $$
begin
    if n is null or n < 1 then
        raise exception 'n must be at least 1' using errcode = 'invalid_parameter_value';
    end if;
    for k in 0 .. n - 1 loop
        return query select * from pgque._on_all('subscribe_slot', queue_name, consumer_name,
                                                 i_slot => k, i_n => n);
    end loop;
end $$;

-- ---------------------------------------------------------------- monitoring

-- The rows of i_what ('status', 'metrics', 'alerts') of every shard, in
-- shard order; a shard that cannot be reached gives one NULL row.
create function pgque._rows_all(i_what text)
returns table (shard int4, r jsonb, err text) language plpgsql
set search_path = pg_catalog, pg_temp as $$
declare
    st  text;
    dt  text;
    ht  text;
begin
    for s in 0 .. pgque._shard_count() - 1 loop
        begin
            return query select s, x, null::text from pgque._on_rows(s, i_what) x;
        exception when others then
            get stacked diagnostics st = returned_sqlstate, err = message_text,
                                    dt = pg_exception_detail, ht = pg_exception_hint;
            perform pgque._shard_failed(s, st, err, dt, ht, true);
            shard := s;
            r := null;
            return next;
        end;
    end loop;
end $$;

create function pgque.status(out shard int4, out component text, out status text, out detail text)
returns setof record language sql
set search_path = pg_catalog, pg_temp as $$
    select a.shard,
           coalesce(a.r operator(pg_catalog.->>) 'component', 'shard'),
           coalesce(a.r operator(pg_catalog.->>) 'status', 'unavailable'),
           coalesce(a.r operator(pg_catalog.->>) 'detail', a.err)
      from pgque._rows_all('status') a
$$;

-- metrics: each shard's metrics with a "shard" label, and pgque_shard_up
-- (1 or 0) per shard.
create function pgque.metrics(out metric text, out labels jsonb, out value float8)
returns setof record language sql
set search_path = pg_catalog, pg_temp as $$
    with a as materialized (select * from pgque._rows_all('metrics'))
    select a.r operator(pg_catalog.->>) 'metric',
           (a.r operator(pg_catalog.->) 'labels') operator(pg_catalog.||) pg_catalog.jsonb_build_object('shard', a.shard),
           (a.r operator(pg_catalog.->>) 'value')::float8
      from a where a.r is not null
    union all
    select 'pgque_shard_up', pg_catalog.jsonb_build_object('shard', s),
           case when exists (select from a where a.shard = s and a.r is null) then 0 else 1 end
      from pg_catalog.generate_series(0, pgque._shard_count() - 1) s
$$;

-- alerts: each shard's open alerts, and a shard_unavailable row for a
-- shard that cannot be reached; a view, as on a shard.
create function pgque._alerts_all(out shard int4, out alert_id bigint, out kind text, out queue_name text,
                             out consumer text, out slot int4, out opened_at timestamptz, out details jsonb)
returns setof record language sql
set search_path = pg_catalog, pg_temp as $$
    select a.shard, (a.r operator(pg_catalog.->>) 'alert_id')::int8,
           coalesce(a.r operator(pg_catalog.->>) 'kind', 'shard_unavailable'),
           a.r operator(pg_catalog.->>) 'queue_name', a.r operator(pg_catalog.->>) 'consumer',
           (a.r operator(pg_catalog.->>) 'slot')::int4,
           (a.r operator(pg_catalog.->>) 'opened_at')::timestamptz,
           coalesce(a.r operator(pg_catalog.->) 'details', pg_catalog.jsonb_build_object('error', a.err))
      from pgque._rows_all('alerts') a
$$;

create view pgque.alerts as select * from pgque._alerts_all();
-- Every proxy user may read it, as it may call every function here: each
-- shard checks its own grants (pgque_reader) as the user's mapped role.
-- Without this grant a view is its owner's alone, and the monitoring role
-- of docs/scale-out.md got "permission denied for view alerts".
grant select on pgque.alerts to public;

create function pgque.version()
returns text language sql immutable
set search_path = pg_catalog, pg_temp as $$
    select '@PGQUE_VERSION@'::text
$$;
