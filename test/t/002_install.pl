# Installing: by a non-superuser database owner (the extension is trusted),
# without shared_preload_libraries, and removing it again.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PgqueNode->new('install');
$node->init;
$node->start;    # no shared_preload_libraries: the SQL engine still works

$node->safe_psql('postgres', q{
    create role app_owner login;
    create database appdb owner app_owner;
});

# a non-superuser that owns the database installs the extension
my ($ret, $out, $err) = $node->psql('appdb', 'create extension pgque_bgw',
    extra_params => [ '-U', 'app_owner' ]);
is($ret, 0, 'a non-superuser database owner can create the extension') or diag($err);
is($node->safe_psql('appdb', q{
    select count(*) from pg_proc p where p.pronamespace = 'pgque'::regnamespace
       and pg_get_userbyid(p.proowner) <> 'pgque_owner'}),
   '0', 'every function is owned by pgque_owner, not the installing role (ADR 0042)');
is($node->safe_psql('appdb', q{
    select count(*) from pg_class c where c.relnamespace = 'pgque'::regnamespace
       and pg_get_userbyid(c.relowner) <> 'pgque_owner'}),
   '0', 'and every table and sequence');
is($node->safe_psql('appdb', q{select pg_get_userbyid(extowner) from pg_extension where extname = 'pgque_bgw'}),
   'app_owner', 'the installing role owns the extension');
is($node->safe_psql('appdb', q{select string_agg(rolname, ',' order by rolname) from pg_roles where rolname like 'pgque\_%'}),
   'pgque_admin,pgque_owner,pgque_reader,pgque_writer', 'the four roles were created');
is($node->safe_psql('appdb', q{select rolsuper from pg_roles where rolname = 'app_owner'}), 'f',
   'and the owner is still not a superuser');

$node->safe_psql('postgres', q{
    create role app_admin login in role pgque_admin;
    create role app_producer login in role pgque_writer;
    create role app_consumer login in role pgque_reader;
});
$node->safe_psql('appdb', q{select pgque.create_queue('jobs')}, extra_params => [ '-U', 'app_admin' ]);
$node->safe_psql('appdb', q{select pgque.subscribe('jobs', 'w1')}, extra_params => [ '-U', 'app_consumer' ]);
$node->safe_psql('appdb', q{select pgque.send('jobs', 'job-' || i) from generate_series(1, 5) i},
    extra_params => [ '-U', 'app_producer' ]);
$node->safe_psql('appdb', q{select pgque.ticker()}, extra_params => [ '-U', 'app_admin' ]);
is($node->safe_psql('appdb', q{select count(*) from pgque.receive('jobs', 'w1')},
       extra_params => [ '-U', 'app_consumer' ]),
   '5', 'produce, tick and consume work under the owner\'s SECURITY DEFINER functions');
is($node->safe_psql('appdb', q{select status from pgque.status() where component = 'library'},
       extra_params => [ '-U', 'app_admin' ]),
   'not preloaded', 'status() says the library is not preloaded');

# dropping refuses while queues exist, cascade removes everything
($ret, $out, $err) = $node->psql('appdb', 'drop extension pgque_bgw', extra_params => [ '-U', 'app_owner' ]);
isnt($ret, 0, 'drop extension without cascade refuses while a queue exists');
like($err, qr/depend/, 'and says what depends on it');
($ret, $out, $err) = $node->psql('appdb', 'drop extension pgque_bgw cascade', extra_params => [ '-U', 'app_owner' ]);
is($ret, 0, 'drop extension cascade succeeds') or diag($err);
is($node->safe_psql('appdb', q{
    select (select count(*) from pg_class c join pg_namespace n on n.oid = c.relnamespace where n.nspname = 'pgque')
         + (select count(*) from pg_proc p join pg_namespace n on n.oid = p.pronamespace where n.nspname = 'pgque')}),
   '0', 'no table, sequence or function of pgque is left');

# and it can be installed again
($ret, $out, $err) = $node->psql('appdb', 'create extension pgque_bgw', extra_params => [ '-U', 'app_owner' ]);
is($ret, 0, 're-install after drop works') or diag($err);

# PgQue's uninstall(): the extension owner's (and a superuser's); drops
# everything, queues included; the roles stay, and for the installing role
# the empty schema pgque too (pgque_owner's: only a superuser drops it)
$node->safe_psql('appdb', q{
    select pgque.create_queue('gone');
    select pgque.subscribe('gone', 'c');
    select pgque.send('gone', 'x');
}, extra_params => [ '-U', 'app_owner' ]);
($ret, $out, $err) = $node->psql('appdb', 'select pgque.uninstall()', extra_params => [ '-U', 'app_admin' ]);
like($err, qr/permission denied for function uninstall/, 'pgque_admin may not uninstall');
($ret, $out, $err) = $node->psql('appdb', 'select pgque.uninstall()', extra_params => [ '-U', 'app_owner' ]);
is($ret, 0, 'the extension owner uninstalls with queues in place') or diag($err);
is($node->safe_psql('appdb', q{
    select (select count(*) from pg_extension where extname = 'pgque_bgw')
         + (select count(*) from pg_class c join pg_namespace n on n.oid = c.relnamespace where n.nspname = 'pgque')
         + (select count(*) from pg_proc p join pg_namespace n on n.oid = p.pronamespace where n.nspname = 'pgque')}),
   '0', 'uninstall() leaves no extension, no table, no function');
is($node->safe_psql('appdb', q{select pg_get_userbyid(nspowner) from pg_namespace where nspname = 'pgque'}),
   'pgque_owner', 'the empty schema stays, pgque_owner\'s');
is($node->safe_psql('appdb', q{select count(*) from pg_roles where rolname like 'pgque\_%'}),
   '4', 'the roles stay, as in PgQue');
($ret, $out, $err) = $node->psql('appdb', 'create extension pgque_bgw', extra_params => [ '-U', 'app_owner' ]);
is($ret, 0, 're-install after uninstall() works') or diag($err);
($ret, $out, $err) = $node->psql('appdb', 'select pgque.uninstall()');
is($ret, 0, 'a superuser uninstalls') or diag($err);
is($node->safe_psql('appdb', q{select count(*) from pg_namespace where nspname = 'pgque'}),
   '0', 'and the schema goes with it');

$node->stop('fast');
done_testing();
