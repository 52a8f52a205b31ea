-- pgque_proxy 0.2.0 -> 0.3.0, after the functions: only the administrator
-- chooses the shard role of a proxy user (issue #25 item 4).
create event trigger pgque_proxy_mappings on ddl_command_end
    when tag in ('CREATE USER MAPPING', 'ALTER USER MAPPING')
    execute function pgque._guard_shard_mappings();
create event trigger pgque_proxy_mappings_drop on sql_drop
    when tag in ('DROP USER MAPPING', 'DROP OWNED')
    execute function pgque._guard_shard_mappings();

-- PL/Proxy's compat-mode functions could choose the shard role while
-- server pgque_shards does not exist: hold schema plproxy (security issue
-- #25 item 4, _claim_plproxy_schema in sql/proxy/pgque_proxy.sql).
revoke all on function pgque._claim_plproxy_schema() from public;
select pgque._claim_plproxy_schema();

-- The alerts view is every proxy user's to read (the shards check their
-- grants), as in a fresh install: 0.2.0 left it its owner's alone.
grant select on pgque.alerts to public;
