# pg_upgrade, as docs/install.md ("pg_upgrade") tells it (issue #28 item 7):
# a 15 -> 15 upgrade into a new cluster with the same preload and the same
# pgque_bgw, with queues, a consumer's cursor, an open batch, an event not
# yet received and a non-superuser owner's install.  Afterwards the events
# are there, the cursor and the batch are where they were, the roles and the
# ownership model came over (but the extension's owner: the superuser that
# ran pg_upgrade owns it, as with any dump), and the new server's workers
# tick.
use strict;
use warnings;
use Cwd;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $t0 = time();
my $conf = q{
shared_preload_libraries = 'pgque_bgw'
pgque_bgw.launcher_naptime = '1s'
};
my $old = PostgreSQL::Test::Cluster->new('old');
$old->init;
$old->append_conf('postgresql.conf', $conf);
$old->start;
$old->safe_psql('postgres', q{
    create role app_owner login;
    create role app_consumer login;
    create database app owner app_owner;
});
$old->safe_psql('app', q{
    create extension pgque_bgw;
    select pgque.create_queue('orders');
}, extra_params => [ '-U', 'app_owner' ]);
$old->safe_psql('postgres', 'grant pgque_reader to app_consumer');
$old->safe_psql('app', q{select pgque.subscribe('orders', 'billing')}, extra_params => [ '-U', 'app_consumer' ]);
$old->safe_psql('app', q{select pgque.send('orders', 'in the open batch')});
# polls as the superuser, which may act on any consumer
ok($old->poll_query_until('app', q{select count(*) = 1 from pgque.receive('orders', 'billing')}),
   'before: the workers tick; the consumer holds an open batch');
my $batch = $old->safe_psql('app', q{select batch_id from pgque.receive('orders', 'billing')},
                            extra_params => [ '-U', 'app_consumer' ]);
$old->safe_psql('app', q{select pgque.send('orders', 'not received yet')});
ok($old->poll_query_until('app', q{select ev_new = 0 from pgque.get_queue_info() where queue_name = 'orders'}),
   'before: the second event is ticked');
$old->stop;

my $new = PostgreSQL::Test::Cluster->new('new');
$new->init;
$new->append_conf('postgresql.conf', $conf);
my $bindir = $old->config_data('--bindir');
my $cwd = getcwd();
my $dir = PostgreSQL::Test::Utils::tempdir();
chdir $dir;	# pg_upgrade writes its logs where it runs
command_ok([ 'pg_upgrade', '--no-sync', '-d', $old->data_dir, '-D', $new->data_dir,
             '-b', $bindir, '-B', $bindir, '-s', $new->host, '-p', $old->port, '-P', $new->port ],
           'pg_upgrade runs (the library does nothing in its binary-upgrade servers)');
chdir $cwd;

$new->start;
is($new->safe_psql('app', q{select pgque.version()}), $new->safe_psql('app',
       q{select extversion from pg_extension where extname = 'pgque_bgw'}), 'after: the extension is there');
is($new->safe_psql('app', q{
       select count(*) from pg_class c where c.relnamespace = 'pgque'::regnamespace
          and pg_get_userbyid(c.relowner) <> 'pgque_owner'}),
   '0', 'pgque_owner still owns every table (ADR 0042)');
# PostgreSQL keeps no extension's owner across pg_upgrade (or a dump): the
# superuser that ran it owns the extension now, as docs/install.md says;
# the installing role keeps its by-name grants, so the API still serves it
is($new->safe_psql('app', q{select pg_get_userbyid(extowner) = current_user from pg_extension where extname = 'pgque_bgw'}),
   't', 'the extension belongs to the superuser that ran pg_upgrade');
is($new->safe_psql('app', q{select count(*) from pgque.get_queue_info() where queue_name = 'orders'},
                   extra_params => [ '-U', 'app_owner' ]),
   '1', 'the former owner still uses the API through its grants');
is($new->safe_psql('app', q{select batch_id || ' ' || payload from pgque.receive('orders', 'billing')},
                   extra_params => [ '-U', 'app_consumer' ]),
   "$batch in the open batch", 'the open batch is where it was, for the consumer that held it');
$new->safe_psql('app', qq{select pgque.ack($batch)}, extra_params => [ '-U', 'app_consumer' ]);
is($new->safe_psql('app', q{select string_agg(payload, ',') from pgque.receive('orders', 'billing')},
                   extra_params => [ '-U', 'app_consumer' ]),
   'not received yet', 'the event sent before the upgrade is received after it');
$new->safe_psql('app', q{select pgque.ack(batch_id) from pgque.receive('orders', 'billing') limit 1},
                extra_params => [ '-U', 'app_consumer' ]);
ok($new->poll_query_until('app', q{select count(*) = 3 from pgque.status() where component in ('ticker', 'maintenance', 'watchdog') and status = 'running'}),
   'the new server\'s workers run');
$new->safe_psql('app', q{select pgque.send('orders', 'after the upgrade')});
ok($new->poll_query_until('app', q{select string_agg(payload, ',') = 'after the upgrade' from pgque.receive('orders', 'billing')}),
   'and tick a new event');

$new->stop('fast');
note(sprintf('058 took %.1f s', time() - $t0));
done_testing();
