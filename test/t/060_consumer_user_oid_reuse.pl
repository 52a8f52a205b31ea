# A consumer granted to a role that is later dropped, dumped and restored
# into another cluster (ADR 0058, found attacking consumer users): the
# dropped role's OID stays in the consumer's users and, having no name,
# pg_dump writes it as a bare number, which regrole reads back as that OID
# in the new cluster, whoever holds it there.  A role created in the new
# cluster with that OID ("mallory", which a DBA creating roles cannot
# see coming) must not be able to use the consumer that another
# application subscribed privately; a reader without a grant ("bob") is
# refused, and so must mallory be.
#
# Both clusters run without the preload (manual mode: nothing here needs a
# worker), so the file takes a few seconds.
#
# The queue rights (ADR 0047) are regrole[] too and go the same way: ghost
# alone was granted "send" on the queue, and mallory must not inherit it.
#
# The fix (ADR 0079): a granted role holds SELECT on pgque.grantee_anchor,
# so DROP ROLE refuses it; the DBA's way round, DROP OWNED BY, takes the
# anchor and leaves the OID in the lists until maintenance removes it, and
# a listed role counts only while it holds its own anchor grant: the
# OID dumped in that window grants mallory nothing.  After maintenance
# the dump no longer carries the OID at all.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $src = PostgreSQL::Test::Cluster->new('oid_src');
$src->init;
$src->start;
my $dst = PostgreSQL::Test::Cluster->new('oid_dst');
$dst->init;
$dst->start;
my $bindir = $src->config_data('--bindir');
my $tmp = PostgreSQL::Test::Utils::tempdir;

# --- the source: app_owner's private consumer, granted to ghost, who goes --
$src->safe_psql('postgres', q{
    create extension pgque_bgw;
    create role app_owner login;
    create role ghost login;
    grant pgque_reader to app_owner, ghost;
    select pgque.create_queue('orders');
});
$src->safe_psql('postgres', q{
    set role app_owner;
    select pgque.subscribe('orders', 'private');
    select pgque.grant_consumer('orders', 'private', 'ghost');
});
$src->safe_psql('postgres', q{
    select pgque.revoke_queue('orders', 'pgque_writer', 'send');
    select pgque.grant_queue('orders', 'ghost', 'send');
});
my $ghost_oid = $src->safe_psql('postgres', q{select oid from pg_roles where rolname = 'ghost'});
my ($rc, $out, $err) = $src->psql('postgres', 'drop role ghost');
like($err, qr/role "ghost" cannot be dropped.*privileges for table pgque\.grantee_anchor/s,
     'DROP ROLE refuses a role the consumer and the queue are granted to');
# the DBA's way round: DROP OWNED revokes the anchor, then the role goes
$src->safe_psql('postgres', 'drop owned by ghost; drop role ghost');
is($src->safe_psql('postgres', q{
        select users::oid[]::text from pgque.consumer_rights where consumer_name = 'private'}),
   "{$ghost_oid}", 'the dropped role stays in the users as a bare OID');
$src->safe_psql('postgres', q{select pgque.send('orders', 'secret'); select pgque.ticker();});

my $dump = "$tmp/src.dump";
command_ok([ "$bindir/pg_dump", '-h', $src->host, '-p', $src->port, '-Fc', '-f', $dump, 'postgres' ],
           'pg_dump of the source');
my $plain = `"$bindir/pg_restore" -f - --data-only -t subscription "$dump" 2>&1`;
like($plain, qr/\{\Q$ghost_oid\E\}/, 'the dump carries the dropped role as a bare number');

# --- the destination: roles by name (as pg_dumpall -g would make them),
# then one that happens to get the OID
$dst->safe_psql('postgres', q{
    create role pgque_reader nologin;
    create role pgque_writer nologin;
    create role pgque_admin nologin;
    create role pgque_owner nologin;
    create role app_owner login;
    create role bob login;
});
# OIDs come from one counter: the first roles a DBA creates in a fresh
# cluster take the numbers the source's roles and objects had
my $got = $dst->safe_psql('postgres', qq{
    do \$\$
    declare o oid;
    begin
        loop
            create role mallory login;
            select oid into o from pg_catalog.pg_roles where rolname = 'mallory';
            exit when o >= $ghost_oid;
            drop role mallory;
        end loop;
    end \$\$;
    select oid from pg_roles where rolname = 'mallory';
});
is($got, $ghost_oid, 'a new role of the destination holds the dropped role\'s OID');

command_ok([ "$bindir/pg_restore", '-h', $dst->host, '-p', $dst->port, '-d', 'postgres',
             '--exit-on-error', $dump ], 'pg_restore into the destination');
$dst->safe_psql('postgres', q{grant pgque_reader, pgque_writer to bob, mallory});

($rc, $out, $err) = $dst->psql('postgres', q{
    set role bob; select count(*) from pgque.receive('orders', 'private')});
like($err, qr/permission denied for consumer "private"/, 'bob, a reader without a grant, is refused');
($rc, $out, $err) = $dst->psql('postgres', q{set role bob; select pgque.send('orders', 'forged')});
like($err, qr/permission denied to send to queue "orders"/, 'bob, a writer without the queue\'s "send", may not send');

{
    # the dump was taken before maintenance: the OID is there, and is
    # mallory's now, but she holds no anchor grant of her own
    is($dst->safe_psql('postgres', q{
            select 'mallory'::regrole = any (users) and not pgque._role_anchored('mallory')
              from pgque.consumer_rights where consumer_name = 'private'}),
       't', 'the restored users name mallory\'s OID, which holds no anchor');
    ($rc, $out, $err) = $dst->psql('postgres', q{
        set role mallory; select count(*) from pgque.receive('orders', 'private')});
    like($err, qr/permission denied for consumer "private"/,
         'mallory, who never was granted the consumer, is refused as bob is');
    ($rc, $out, $err) = $dst->psql('postgres', q{
        set role mallory; select pgque.send('orders', 'forged')});
    like($err, qr/permission denied to send to queue "orders"/,
         'mallory, who never was granted "send" on the queue, may not send');
}

# maintenance takes the dropped role's OID out of every list: a dump taken
# after it carries no bare number
is($src->safe_psql('postgres', q{
        select pgque.maint() >= 1;
        select (select users::text from pgque.consumer_rights where consumer_name = 'private'),
               (select queue_senders::text from pgque.queue where queue_name = 'orders')}),
   "t\n{}|{}", 'maintenance removes the dropped role\'s OID from the users and the senders');
my $dump2 = "$tmp/src2.dump";
command_ok([ "$bindir/pg_dump", '-h', $src->host, '-p', $src->port, '-Fc', '-f', $dump2, 'postgres' ],
           'pg_dump after maintenance');
my $plain2 = `"$bindir/pg_restore" -f - --data-only -t subscription -t queue "$dump2" 2>&1`;
unlike($plain2, qr/\b\Q$ghost_oid\E\b/, 'the dump after maintenance carries no bare OID');

$src->stop;
$dst->stop;
done_testing();
