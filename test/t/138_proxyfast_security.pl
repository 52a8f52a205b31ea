# The keyed send's C path (pgque._send_keyed in pgque_proxy.so, ADR 0115)
# reaches a shard with nothing PL/Proxy would not use for the same call.
# Attacks and changes, each checked against the shard's own log of who
# connected (log_connections) and, where PL/Proxy decides the same thing,
# against PL/Proxy's path (pgque._on_send_keyed) side by side:
#  - a LOGIN role with EXECUTE and no mapping: 42704, no connection; without
#    USAGE on the server: 42501, no connection;
#  - SET ROLE and a SECURITY DEFINER function owned by another proxy user:
#    the shard is reached as the current user's mapping, as PL/Proxy 2.x does
#    (its default_user unset): both paths side by side, the same user;
#  - ALTER USER MAPPING and ALTER SERVER by the admin take effect at the
#    next call of an open session (the cached connection is dropped);
#  - a connection string with options= (or user=) put in by ALTER SERVER
#    past set_shards is refused at connect, nothing connects;
#  - a PUBLIC mapping without user: each user reaches the shard as
#    its own name (PL/Proxy's rule), on a connection of its own;
#  - a shard's own error keeps its SQLSTATE, and the connection stays.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PgqueNode->new_preloaded('proxyfast_sec', conf => qq{
pgque_bgw.enabled = off
log_connections = on
});
my $base = "host=" . $node->host . " port=" . $node->port;
$node->safe_psql('postgres', q{
    create database shard0;
    create database shard1;
    create database proxy;
    create role shard_w login;          -- a pgque_writer on the shards
    create role shard_n login;          -- no pgque right on the shards
    create role app_producer login;     -- proxy users
    create role app_other login;
    create role app_nomap login;
    create role app_nousage login;
    grant app_other to app_producer;    -- app_producer may SET ROLE app_other
});
for my $db ('shard0', 'shard1')
{
    $node->safe_psql($db, q{
        create extension pgque_bgw;
        grant pgque_writer to shard_w;
        select pgque.create_queue('orders');
    });
}
$node->safe_psql('proxy', qq{
    set client_min_messages = warning;
    create extension pgque_proxy cascade;
    select pgque.set_shards(array['$base dbname=shard0']);
    create user mapping for app_producer server pgque_shards options (user 'shard_w');
    create user mapping for app_other server pgque_shards options (user 'shard_n');
    create user mapping for app_nousage server pgque_shards options (user 'shard_w');
    grant usage on foreign server pgque_shards to app_producer, app_other, app_nomap;
    grant usage on schema pgque to app_producer, app_other, app_nomap, app_nousage;
});

sub err_of
{
    my ($user, $sql) = @_;
    my ($rc, $out, $err) = $node->psql('proxy', "\\set VERBOSITY verbose\n$sql",
        extra_params => [ '-U', $user ]);
    return $rc == 0 ? "no error: $out" : ($err =~ /ERROR:  (\w{5}): ([^\n]*)/ ? "$1 $2" : $err);
}
# the shard connections authorized since the log offset $from, as "user/db"
sub shard_logins
{
    my ($from) = @_;
    my $log = slurp_file($node->logfile, $from);
    my @l;
    push @l, "$1/$2" while $log =~ /connection authorized: user=(\w+) database=(shard\d)/g;
    return join(',', @l);
}
sub log_at { return -s $node->logfile; }

# ---- the path is the C one
like($node->safe_psql('proxy', q{
    select pg_get_functiondef('pgque.send(text,text,text,text)'::regprocedure)}),
     qr/pgque\._send_keyed\(pgque\._key_hash\(partition_key\)/,
     'the keyed send calls the C path with the routing hash of pgque._key_hash');
is($node->safe_psql('proxy', q{select probin from pg_proc where oid = 'pgque._send_keyed'::regproc}),
   '$libdir/pgque_proxy', 'from pgque_proxy.so, not pgque_bgw.so');
my $at = log_at();
like(err_of('app_producer', q{select pgque.send('orders', 't', 'first', 'k1')}), qr/^no error: \d+$/,
     'a keyed send of a mapped writer succeeds');
is(shard_logins($at), 'shard_w/shard0', 'as its mapping\'s user, on its shard');

# ---- no mapping, no USAGE: the checks before any connection
$at = log_at();
like(err_of('app_nomap', q{select pgque.send('orders', 't', 'x', 'k1')}),
     qr/^42704 user mapping not found for (?:user )?"app_nomap"/,
     'a LOGIN role with EXECUTE and no mapping (no PUBLIC one): 42704');
like(err_of('app_nomap', q{select pgque._on_send_keyed(0, 'orders', 't', 'x', 'k1')}),
     qr/^42704 /, 'as through PL/Proxy');
like(err_of('app_nousage', q{select pgque.send('orders', 't', 'x', 'k1')}),
     qr/^42501 permission denied for foreign server pgque_shards/,
     'a mapped role without USAGE on the server: 42501');
like(err_of('app_nousage', q{select pgque._on_send_keyed(0, 'orders', 't', 'x', 'k1')}),
     qr/^42501 /, 'as through PL/Proxy');
is(shard_logins($at), '', 'and none of them connected to a shard');

# ---- SET ROLE and SECURITY DEFINER: the current user's mapping, as PL/Proxy
# (2.x, its default_user unset: current_user) takes it
$node->safe_psql('proxy', q{
    create function public.other_sends(k text) returns bigint language sql security definer
        as $$ select pgque.send('orders', 't', 'definer', k) $$;
    alter function public.other_sends(text) owner to app_other;
    create function public.other_sends_pl(k text) returns bigint language sql security definer
        as $$ select pgque._on_send_keyed(0, 'orders', 't', 'definer', k) $$;
    alter function public.other_sends_pl(text) owner to app_other;
    create function public.producer_sends(k text) returns bigint language sql security definer
        as $$ select pgque.send('orders', 't', 'definer', k) $$;
    alter function public.producer_sends(text) owner to app_producer;
    create function public.producer_sends_pl(k text) returns bigint language sql security definer
        as $$ select pgque._on_send_keyed(0, 'orders', 't', 'definer', k) $$;
    alter function public.producer_sends_pl(text) owner to app_producer;
    grant execute on function public.other_sends(text), public.other_sends_pl(text),
        public.producer_sends(text), public.producer_sends_pl(text) to public;
});
$at = log_at();
like(err_of('app_producer', q{set role app_other; select pgque.send('orders', 't', 'setrole', 'k2')}),
     qr/^42501 permission denied/, 'after SET ROLE to a role mapped to a shard role without rights: that role\'s mapping, the shard refuses');
like(err_of('app_producer', q{set role app_other; select pgque._on_send_keyed(0, 'orders', 't', 'setrole', 'k2')}),
     qr/^42501 .*permission denied/, 'as through PL/Proxy');
like(err_of('app_producer', q{select public.other_sends('k3')}), qr/^42501 permission denied/,
     'inside a SECURITY DEFINER function of that role: its owner\'s mapping');
like(err_of('app_producer', q{select public.other_sends_pl('k3')}), qr/^42501 .*permission denied/,
     'as through PL/Proxy');
like(err_of('app_other', q{select public.producer_sends('k3')}), qr/^no error: \d+$/,
     'and the other way round: app_other through a SECURITY DEFINER function of app_producer sends');
like(err_of('app_other', q{select public.producer_sends_pl('k3')}), qr/^no error: \d+$/,
     'as through PL/Proxy');
is(shard_logins($at), 'shard_n/shard0,shard_n/shard0,shard_n/shard0,shard_n/shard0,shard_w/shard0,shard_w/shard0',
   'each reached the shard as the current user\'s mapping, the same user as PL/Proxy\'s');
$at = log_at();
like(err_of('app_other', q{select pgque.send('orders', 't', 'x', 'k4')}),
     qr/^42501 permission denied/, 'the other role\'s own session reaches the shard as shard_n: the shard refuses');
like(err_of('app_other', q{select pgque._on_send_keyed(0, 'orders', 't', 'x', 'k4')}),
     qr/^42501 .*permission denied/, 'as through PL/Proxy');
is(shard_logins($at), 'shard_n/shard0,shard_n/shard0', 'as shard_n both times');
# a SECURITY DEFINER function's user and its caller's keep connections apart
my $two = $node->background_psql('proxy', on_error_stop => 0, extra_params => [ '-U', 'app_other' ]);
$two->query(q{select public.producer_sends('k3')});
$two->query(q{select pgque.send('orders', 't', 'x', 'k4')});
like($two->{stderr}, qr/permission denied/, 'in one session: the definer\'s call succeeds, the caller\'s own is refused');
$two->{stderr} = '';
$two->query(q{select public.producer_sends('k3')});
is($two->{stderr}, '', 'and the definer\'s again: one connection each, never crossed');
$two->quit;

# ---- a session that stays open: the admin's changes take effect at the next call
my $s = $node->background_psql('proxy', on_error_stop => 0, extra_params => [ '-U', 'app_producer' ]);
like($s->query_safe(q{select pgque.send('orders', 't', 'open1', 'k5')}), qr/^\d+$/, 'an open session sends');
$at = log_at();
like($s->query_safe(q{select pgque.send('orders', 't', 'open2', 'k5')}), qr/^\d+$/, 'and again');
is(shard_logins($at), '', 'on its cached connection (no new login)');
is($node->safe_psql('shard0', q{select count(*) from pg_stat_activity where usename = 'shard_w'}), '1',
   'one connection per (server, user, shard)');

$node->safe_psql('proxy', q{alter user mapping for app_producer server pgque_shards options (set user 'shard_n')});
$at = log_at();
my ($out, $bad) = $s->query(q{\set VERBOSITY verbose
select pgque.send('orders', 't', 'open3', 'k5')});
like($s->{stderr}, qr/42501: permission denied/, 'after ALTER USER MAPPING the next call reaches the shard as the new user');
is(shard_logins($at), 'shard_n/shard0', 'on a new connection as shard_n');
$node->safe_psql('proxy', q{alter user mapping for app_producer server pgque_shards options (set user 'shard_w')});
$s->{stderr} = '';
like($s->query_safe(q{select pgque.send('orders', 't', 'open4', 'k5')}), qr/^\d+$/, 'and back');

# ALTER SERVER: the shard moves (same count), the next call goes there
$node->safe_psql('proxy', qq{alter server pgque_shards options (set p0 '$base dbname=shard1')});
$at = log_at();
like($s->query_safe(q{select pgque.send('orders', 't', 'moved', 'k5')}), qr/^\d+$/, 'after ALTER SERVER the open session sends');
is(shard_logins($at), 'shard_w/shard1', 'to the shard\'s new place');
ok(PgqueNode::poll_until(sub {
        $node->safe_psql('shard0', q{select count(*) from pg_stat_activity
                                      where usename = 'shard_w' and datname = 'shard0'}) eq '0' }, 30),
   'and the connection to its old place was closed (at that call, not left open)');
is($node->safe_psql('shard1', q{select count(*) from pgque.event_template where ev_data = 'moved'}), '1',
   'the event is there');

# options= or user= smuggled past set_shards by ALTER SERVER: refused at connect
for my $smuggled ("options=''-c role=pg_read_all_data''", "application_name=user=x", "passfile=/tmp/x")
{
    $node->safe_psql('proxy', qq{alter server pgque_shards options (set p0 '$base dbname=shard0 $smuggled')});
    $at = log_at();
    my ($o, $e) = $s->query(qq{\\set VERBOSITY verbose
select pgque.send('orders', 't', 'smuggled', 'k5')});
    like($s->{stderr}, qr/22023: set_shards: (connection option "\w+" is not allowed|a shard's connection string must not contain "user=")/,
         "a connection string with $smuggled is refused at connect (22023)");
    $s->{stderr} = '';
    is(shard_logins($at), '', 'and nothing connected');
}
$node->safe_psql('proxy', qq{alter server pgque_shards options (set p0 '$base dbname=shard0')});

# a shard's own error: its SQLSTATE and words, and the connection stays
like($s->query_safe(q{select pgque.send('orders', 't', 'back', 'k5')}), qr/^\d+$/, 'back on shard0');
$at = log_at();
($out, $bad) = $s->query(q{\set VERBOSITY verbose
select pgque.send('nosuch', 't', 'x', 'k5')});
like($s->{stderr}, qr/ERROR:  (\w{5}): [^\n]*nosuch/, 'a shard\'s own error names what it named');
my ($state_c) = $s->{stderr} =~ /ERROR:  (\w{5}):/;
$s->{stderr} = '';
my ($rc_pl, $o_pl, $err_pl) = $node->psql('shard0', "\\set VERBOSITY verbose\nselect pgque.send('nosuch', 't', 'x', 'k5')",
    extra_params => [ '-U', 'shard_w' ]);
my ($state_direct) = $err_pl =~ /ERROR:  (\w{5}):/;
is($state_c, $state_direct, "with the shard's SQLSTATE ($state_direct)");
$at = log_at();
like($s->query_safe(q{select pgque.send('orders', 't', 'after-error', 'k5')}), qr/^\d+$/, 'the next call succeeds');
is(shard_logins($at), '', 'on the same connection');
$s->quit;

# ---- a PUBLIC mapping without user: each user as its own name
$node->safe_psql('postgres', q{
    create database proxy_pub;
    create role shard_w2 login;
});
$node->safe_psql('shard0', q{grant pgque_writer to shard_w2});
$node->safe_psql('proxy_pub', qq{
    set client_min_messages = warning;
    create extension pgque_proxy cascade;
    select pgque.set_shards(array['$base dbname=shard0']);
    create user mapping for public server pgque_shards;
    grant usage on foreign server pgque_shards to public;
    grant usage on schema pgque to public;
});
$at = log_at();
like($node->safe_psql('proxy_pub', q{select pgque.send('orders', 't', 'pub', 'k6')},
                      extra_params => [ '-U', 'shard_w2' ]), qr/^\d+$/, 'a PUBLIC mapping without user');
like(err_of_db('proxy_pub', 'shard_n', q{select pgque.send('orders', 't', 'pub', 'k6')}),
     qr/^42501 permission denied/, 'another user with it');
is(shard_logins($at), 'shard_w2/shard0,shard_n/shard0', 'each reached the shard as its own name');
sub err_of_db
{
    my ($db, $user, $sql) = @_;
    my ($rc, $o, $err) = $node->psql($db, "\\set VERBOSITY verbose\n$sql", extra_params => [ '-U', $user ]);
    return $rc == 0 ? "no error: $o" : ($err =~ /ERROR:  (\w{5}): ([^\n]*)/ ? "$1 $2" : $err);
}

# ---- bad calls of the C function itself: errors, not crashes
like(err_of('app_producer', q{select pgque._send_keyed(null, 'orders', 't', 'p', 'k')}), qr/^22004 /,
     'a NULL hash: 22004');
like(err_of('app_producer', q{select pgque._send_keyed(-1, 'orders', 't', 'p', 'k')}), qr/^22023 /,
     'a negative hash: 22023');
like(err_of('app_producer', q{select pgque._send_keyed(5, 'orders', 't', null, null)}), qr/^(no error|\w{5} )/,
     'NULL payload and key: the shard decides');
is($node->safe_psql('proxy', q{select 1}), '1', 'the server is up');

done_testing();
