# Two more ways a proxy-side role chose the shard role (security issue #25
# item 4, second reading; docs/scale-out.md).  Both let a role that the
# administrator mapped to nothing, or to a writer, run on the shards as the
# server's OS user, the shards' superuser under trust or peer (as here):
#  - PL/Proxy's compat mode: while server pgque_shards does not exist, it
#    takes the shards' connection strings from plproxy.get_cluster_*(),
#    which a role with CREATE on the proxy database could define;
#    pgque_proxy now holds schema plproxy.
#  - PL/Proxy appends user=<session user> to a shard's connection string
#    only when "user=" is nowhere in it (a substring test), so a value
#    such as application_name=app_user=1 dropped the user: set_shards now
#    refuses "user=" anywhere.
# And what did not work, kept so: a SECURITY DEFINER function of the proxy
# user, CREATE USER MAPPING IF NOT EXISTS, session_replication_role, a
# plproxy function of its own.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PgqueNode->new_preloaded('proxyrole', conf => qq{
pgque_bgw.enabled = off
});

my $conninfo = "host=" . $node->host . " port=" . $node->port . " dbname=shard";
$node->safe_psql('postgres', q{
    create database shard;
    create database proxy;
    create database proxy_old;
    create role app_producer login;
    create role attacker login;
    grant create on database proxy to attacker;
});
$node->safe_psql('shard', q{
    create extension pgque_bgw;
    grant pgque_writer to app_producer, attacker;
    select pgque.create_queue('orders');
});
# installed, granted, no shard set yet: the window of compat mode
$node->safe_psql('proxy', q{
    create extension pgque_proxy cascade;
    grant usage on schema pgque to app_producer, attacker;
});

sub err_of
{
    my ($db, $user, $sql) = @_;
    my ($rc, $out, $err) = $node->psql($db, "\\set VERBOSITY verbose\n$sql",
        extra_params => [ '-U', $user ]);
    return $rc == 0 ? 'no error' : ($err =~ /ERROR:  (\w{5}): ([^\n]*)/ ? "$1 $2" : $err);
}
sub queues
{
    return $node->safe_psql('shard', q{select count(*) from pgque.queue where queue_name = 'orders'});
}

# compat mode: the attacker's own cluster functions, user=postgres
is($node->safe_psql('proxy', q{select pg_get_userbyid(nspowner) from pg_namespace where nspname = 'plproxy'}),
   'postgres', 'pgque_proxy holds schema plproxy, the installing superuser\'s');
like(err_of('proxy', 'attacker', q{create schema plproxy}), qr/^42P06 schema "plproxy" already exists/,
     'a role with CREATE on the proxy database cannot make it');
like(err_of('proxy', 'attacker', q{create schema p2; alter schema p2 rename to plproxy}), qr/^42P06 /,
     'nor rename one of its own to it');
# the whole attack, each statement tried whatever the one before did
my ($rc, $out, $err) = $node->psql('proxy', qq{
    create schema plproxy;
    create function plproxy.get_cluster_version(text) returns int4 language sql as 'select 1';
    create function plproxy.get_cluster_config(in text, out key text, out val text) returns setof record
        language sql as \$\$ select ''::text, ''::text where false \$\$;
    create function plproxy.get_cluster_partitions(text) returns setof text
        language sql as \$\$ select '$conninfo user=postgres' \$\$;
    select pgque._on_admin(0, 'drop_queue', 'orders', null, null, null, null, true);
}, extra_params => [ '-U', 'attacker' ], on_error_stop => 0);
like($err, qr/permission denied for schema plproxy/, 'nor define cluster functions in it');
like($err, qr/cluster not found: pgque_shards/, 'so a remote call before set_shards finds no cluster');
is(queues(), '1', 'and the shard\'s queue is still there');

# a schema plproxy someone else made first is refused at install
$node->safe_psql('proxy_old', q{create schema plproxy authorization attacker});
like(err_of('proxy_old', 'postgres', q{create extension pgque_proxy cascade}),
     qr/^55000 schema plproxy is not safe: role attacker owns it/, 'an install next to a role\'s schema plproxy is refused');
$node->safe_psql('proxy_old', q{drop schema plproxy});
# an update from 0.2.0 takes the schema too
$node->safe_psql('proxy_old', q{create extension pgque_proxy version '0.2.0' cascade; alter extension pgque_proxy update});
is($node->safe_psql('proxy_old', q{select pg_get_userbyid(nspowner) from pg_namespace where nspname = 'plproxy'}),
   'postgres', 'an update from 0.2.0 holds schema plproxy too');

# "user=" inside a value: PL/Proxy would not add the proxy user's name
$node->safe_psql('proxy', qq{
    select pgque.set_shards(array['$conninfo']);
    create user mapping for public server pgque_shards;   -- PL/Proxy's usual one: the session user's name
    grant usage on foreign server pgque_shards to app_producer, attacker;
});
for my $bad ('application_name=app_user=1', "application_name=''my user=x''", 'dbname=shard_user=1')
{
    like(err_of('proxy', 'postgres', "select pgque.set_shards(array['$conninfo $bad'])"),
         qr/^22023 set_shards: a shard's connection string must not contain "user="/, "set_shards refuses $bad");
}
is(err_of('proxy', 'postgres', "select pgque.set_shards(array['$conninfo application_name=app tcp_user_timeout=1000'])"),
   'no error', 'tcp_user_timeout and other values without "user=" are accepted');
is(err_of('proxy', 'app_producer', q{select pgque.send('orders', 't', 'as myself', 'k1')}), 'no error',
   'the proxy user sends as itself (the PUBLIC mapping)');
is(err_of('proxy', 'app_producer', q{select * from pgque.drop_queue('orders', true)}),
   '42501 permission denied for function drop_queue', 'and stays a writer on the shard');
is(queues(), '1', 'the queue is still there');

# what did not work
like(err_of('proxy', 'attacker', q{create function p2.f() returns void language plpgsql security definer as $$
                                     begin create user mapping for attacker server pgque_shards options (user 'postgres'); end $$;
                                   select p2.f()}),
     qr/^42501 permission denied to change a user mapping/, 'a SECURITY DEFINER function of the proxy user is refused');
like(err_of('proxy', 'attacker', q{create user mapping if not exists for current_user server pgque_shards options (user 'postgres')}),
     qr/^42501 permission denied to change a user mapping/, 'CREATE USER MAPPING IF NOT EXISTS is refused');
like(err_of('proxy', 'attacker', q{set session_replication_role = replica}),
     qr/^42501 permission denied to set parameter/, 'session_replication_role (which would skip the event triggers) is a superuser\'s');
like(err_of('proxy', 'attacker', q{create function p2.g() returns int language plproxy as $$ connect 'dbname=shard user=postgres'; select 1; $$}),
     qr/^42501 permission denied for language plproxy/, 'a plproxy function with CONNECT of its own is refused');

$node->stop;
done_testing();
