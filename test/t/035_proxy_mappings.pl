# A proxy user cannot choose its shard role (security issue #25 item 4,
# docs/scale-out.md).  USAGE on server pgque_shards, which PL/Proxy needs,
# also lets a role alter, drop or create its own user mapping: with trust
# (as here), peer, a .pgpass or a certificate on the shards, "set user
# 'postgres'" would make it a superuser there.  pgque_proxy's event
# triggers refuse such changes by anyone but a superuser or the server's
# owner, set_shards keeps passwords, key files and the role out of the
# world-readable server options, and an update from 0.2.0 gets the same
# guard.  One server holds the shard database and two proxy databases.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PgqueNode->new_preloaded('proxymap');

my $conninfo = "host=" . $node->host . " port=" . $node->port . " dbname=shard";
$node->safe_psql('postgres', q{
    create database shard;
    create database proxy;
    create database proxy_old;
    create role app_producer login;
    create role app_other login;
});
$node->safe_psql('shard', q{
    create extension pgque_bgw;
    grant pgque_writer to app_producer;
    select pgque.create_queue('orders');
});
$node->safe_psql('proxy', qq{
    create extension pgque_proxy cascade;
    select pgque.set_shards(array['$conninfo']);
    create user mapping for app_producer server pgque_shards options (user 'app_producer');
    grant usage on foreign server pgque_shards to app_producer, app_other;
    grant usage on schema pgque to app_producer, app_other;
});

# err_of(db, user, sql): "SQLSTATE message" of the first error, or 'no error'
sub err_of
{
    my ($db, $user, $sql) = @_;
    my ($rc, $out, $err) = $node->psql($db, "\\set VERBOSITY verbose\n$sql",
        extra_params => [ '-U', $user ]);
    return $rc == 0 ? 'no error' : ($err =~ /ERROR:  (\w{5}): ([^\n]*)/ ? "$1 $2" : $err);
}

is(err_of('proxy', 'app_producer', q{select pgque.send('orders', 't', 'as myself', 'k1')}), 'no error',
   'the proxy user sends through its mapping');
is(err_of('proxy', 'app_producer', q{select * from pgque.create_queue('mine')}),
   "42501 permission denied for function create_queue",
   'as its mapped role (a writer) it may not create queues on the shards')
  or diag('got: ' . err_of('proxy', 'app_producer', q{select * from pgque.create_queue('mine')}));

# the attack as written: set user 'postgres', drop the password
for my $case (
    [ 'alter its mapping to the shard superuser',
      q{alter user mapping for app_producer server pgque_shards options (set user 'postgres')} ],
    [ 'alter its mapping through CURRENT_USER',
      q{alter user mapping for current_user server pgque_shards options (set user 'postgres')} ],
    [ 'drop its mapping (falls back to a PUBLIC one)',
      q{drop user mapping for app_producer server pgque_shards} ],
    [ 'drop it with DROP OWNED', q{drop owned by app_producer} ])
{
    like(err_of('proxy', 'app_producer', $case->[1]),
         qr/^42501 permission denied to change a user mapping of server pgque_shards/, "refused: $case->[0]");
}
like(err_of('proxy', 'app_other',
            q{create user mapping for current_user server pgque_shards options (user 'postgres')}),
     qr/^42501 permission denied to change a user mapping/, 'refused: a role without a mapping creates one');
is($node->safe_psql('proxy', q{select umoptions::text from pg_user_mappings
                                where srvname = 'pgque_shards' and usename = 'app_producer'}),
   '{user=app_producer}', 'the mapping is the administrator\'s still');
is(err_of('proxy', 'app_producer', q{select * from pgque.drop_queue('orders', true)}),
   "42501 permission denied for function drop_queue",
   'so drop_queue(force) on every shard stays refused');
is($node->safe_psql('shard', q{select count(*) from pgque.queue where queue_name = 'orders'}), '1',
   'the queue is still there');
is(err_of('proxy', 'postgres', q{alter user mapping for app_other server pgque_shards options (add user 'app_other')}),
   "42704 user mapping for \"app_other\" does not exist for server \"pgque_shards\"",
   'a superuser is not stopped by the guard (here: PostgreSQL\'s own error)');
is(err_of('proxy', 'postgres', q{create user mapping for app_other server pgque_shards options (user 'app_other');
                                  alter user mapping for app_other server pgque_shards options (set user 'app_other')}),
   'no error', 'a superuser creates and alters mappings');
is(err_of('proxy', 'postgres', q{drop user mapping for app_other server pgque_shards}),
   'no error', 'and drops them');
# the alerts view is PUBLIC's to read (as every function here is to call):
# a role gets nothing through it that its mapping's shard role may not read
is(err_of('proxy', 'app_producer', q{select * from pgque.alerts}),
   '42501 permission denied for view alerts', 'a producer mapped to a writer reads no alerts (the shard refuses)');
like(err_of('proxy', 'app_other', q{select * from pgque.alerts}),
     qr/^42704 user mapping not found for (user )?"app_other"/, 'a role without a mapping reads no alerts (PL/Proxy finds no mapping)');
$node->safe_psql('postgres', q{create role app_login login});
is(err_of('proxy', 'app_login', q{select * from pgque.alerts}),
   '42501 permission denied for schema pgque', 'a LOGIN-only role reads no alerts');
is(err_of('proxy', 'app_other', q{create temp table t (a int); drop table t}), 'no error',
   'other DDL of the proxy user is not touched');

# set_shards keeps secrets and the role out of the server's options
for my $bad (
    [ 'password', "$conninfo password=secret" ],
    [ 'passfile', "$conninfo passfile=/tmp/x" ],
    [ 'sslkey', "$conninfo sslkey=/tmp/k" ],
    [ 'sslpassword', "$conninfo sslpassword=p" ],
    [ 'user', "$conninfo user=postgres" ],
    [ 'options', "$conninfo options=-crole=postgres" ],
    [ 'service', "service=shard0" ])
{
    like(err_of('proxy', 'postgres', "select pgque.set_shards(array['$bad->[1]'])"),
         qr/^22023 set_shards: connection option "$bad->[0]" is not allowed/, "set_shards refuses $bad->[0]");
}
like(err_of('proxy', 'postgres', q{select pgque.set_shards(array['postgresql://postgres:secret@localhost/shard'])}),
     qr/^22023 set_shards: a shard's connection string must be keyword=value pairs, not a URI/,
     'set_shards refuses a URI');
like(err_of('proxy', 'postgres', q{select pgque.set_shards(array['host=a port'])}),
     qr/^22023 set_shards: cannot read the connection string near "port"/, 'set_shards refuses an unreadable string');
is(err_of('proxy', 'postgres', "select pgque.set_shards(array['$conninfo application_name=''proxy a'' connect_timeout=5'])"),
   'no error', 'a quoted value and allowed options are accepted');
is(err_of('proxy', 'app_producer', q{select pgque.send('orders', 't', 'after the move', 'k1')}), 'no error',
   'the proxy user still sends after set_shards moved the shard');

# an update from 0.2.0 gets the same guard
$node->safe_psql('proxy_old', qq{
    create extension pgque_proxy version '0.2.0' cascade;
    select pgque.set_shards(array['$conninfo']);
    create user mapping for app_producer server pgque_shards options (user 'app_producer');
    grant usage on foreign server pgque_shards to app_producer;
    grant usage on schema pgque to app_producer;
});
is(err_of('proxy_old', 'app_producer', q{alter user mapping for app_producer server pgque_shards options (set user 'postgres');
                                          alter user mapping for app_producer server pgque_shards options (set user 'app_producer')}),
   'no error', '0.2.0 let the proxy user alter its own mapping (the finding)');
$node->safe_psql('proxy_old', q{alter extension pgque_proxy update});
is($node->safe_psql('proxy_old', q{select extversion from pg_extension where extname = 'pgque_proxy'}),
   $node->safe_psql('proxy', q{select extversion from pg_extension where extname = 'pgque_proxy'}),
   'pgque_proxy updated to the current version');
like(err_of('proxy_old', 'app_producer', q{alter user mapping for app_producer server pgque_shards options (set user 'postgres')}),
     qr/^42501 permission denied to change a user mapping/, 'after the update the change is refused');
is($node->safe_psql('proxy_old', q{
    select string_agg(p.proname || ':' || md5(p.prosrc), ',' order by p.oid::regprocedure::text)
      from pg_proc p where p.pronamespace = 'pgque'::regnamespace}),
   $node->safe_psql('proxy', q{
    select string_agg(p.proname || ':' || md5(p.prosrc), ',' order by p.oid::regprocedure::text)
      from pg_proc p where p.pronamespace = 'pgque'::regnamespace}),
   'the updated functions are the fresh install\'s');
is($node->safe_psql('proxy_old', q{select string_agg(evtname || ' ' || evtevent || ' ' || array_to_string(evttags, '/'), ', ' order by evtname)
                                     from pg_event_trigger}),
   $node->safe_psql('proxy', q{select string_agg(evtname || ' ' || evtevent || ' ' || array_to_string(evttags, '/'), ', ' order by evtname)
                                 from pg_event_trigger}),
   'and the event triggers too');
is($node->safe_psql('proxy_old', q{select relacl::text from pg_class where oid = 'pgque.alerts'::regclass}),
   $node->safe_psql('proxy', q{select relacl::text from pg_class where oid = 'pgque.alerts'::regclass}),
   'and the alerts view\'s grants');
like($node->safe_psql('proxy', q{select relacl::text from pg_class where oid = 'pgque.alerts'::regclass}),
     qr/=r\//, 'which let every proxy user read it (the shards check their own grants)');

$node->stop;
done_testing();
