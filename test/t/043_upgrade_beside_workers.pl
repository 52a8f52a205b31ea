# Updates while the workers run (issue #26 item 5, ADR 0046).  The owner's
# ALTER EXTENSION pgque_bgw UPDATE and DROP EXTENSION quiesce the
# database's workers: each unit of work waits for them and runs on the new
# SQL, they wait only for the units under way.  Before, the maintenance
# worker's rotation and the update deadlocked (4 of 8 runs).  Here 20
# updates from 0.2.0 by a non-superuser owner (the state a trusted 0.2.0
# install left) and 3 from 0.1.0 by a superuser run beside the maintenance
# worker at 1 s with queues due for rotation: none fails, no deadlock.  A
# database left on 0.2.0 logs its WARNING once, and the workers call
# nothing 0.2.0 lacks (no "does not exist" in the log).
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);

my $node = PgqueNode->new_preloaded('upgbeside', conf => qq{
max_worker_processes = 20
pgque_bgw.launcher_naptime = '1s'
pgque_bgw.maint_interval = '1s'
pgque_bgw.watchdog_interval = '1s'
deadlock_timeout = '100ms'
});
my $new = $node->safe_psql('postgres',
    q{select default_version from pg_available_extensions where name = 'pgque_bgw'});

$node->safe_psql('postgres', q{
    create role dbo login;
    create database up owner dbo;
    create database old;
});

# the queues, due for rotation every second, with traffic
my $traffic = q{
    select pgque.create_queue('q' || i) from generate_series(1, 3) i;
    select pgque.set_queue_config('q' || i, 'rotation_period', '1 second') from generate_series(1, 3) i;
    select pgque.subscribe('q' || i, 'c') from generate_series(1, 3) i;
    select pgque.send('q' || i, 'before') from generate_series(1, 3) i, generate_series(1, 20) j;
};

# a 0.2.0 install owned by dbo: installed while dbo was a superuser, as a
# trusted install by dbo left it (0.2.0 is no longer trusted)
sub install_020
{
    $node->safe_psql('postgres', 'alter role dbo superuser');
    $node->safe_psql('up', q{drop extension if exists pgque_bgw cascade; drop schema if exists pgque cascade;
                             create extension pgque_bgw version '0.2.0'}, extra_params => [ '-U', 'dbo' ]);
    $node->safe_psql('postgres', 'alter role dbo nosuperuser');
    $node->safe_psql('up', $traffic, extra_params => [ '-U', 'dbo' ]);
}

# a database left on 0.1.0 for the whole run: one WARNING, nothing 0.1.0
# lacks (the watchdog's worker alerts came with 0.2.0: a worker outage to
# report makes it try)
my $log_start = -s $node->logfile;
my $old_since = time;
$node->safe_psql('old', q{create extension pgque_bgw version '0.1.0'});
$node->safe_psql('old', q{
    select pgque.create_queue('q' || i) from generate_series(1, 3) i;
    select pgque.subscribe('q' || i, 'c') from generate_series(1, 3) i;
    select pgque.send('q' || i, 'on 0.1.0') from generate_series(1, 3) i;
});
ok($node->poll_query_until('old', q{select count(distinct tick_queue) = 3 from pgque.tick where tick_id > 1}),
   'the workers tick the database left on 0.1.0');
my $maint_pid = $node->safe_psql('old', q{select pid from pg_stat_activity
                                          where datname = 'old' and application_name like 'pgque_bgw maint%'});
ok($maint_pid =~ /^\d+$/, 'its maintenance worker runs') and kill 'TERM', $maint_pid;

my ($ok, $failed) = (0, 0);
my $t0 = time;
for my $round (1 .. 20)
{
    install_020();
    # let the maintenance worker start rotating: step 1 is due each second
    sleep(0.3 + rand(0.9));
    my ($rc, $out, $err) = $node->psql('up', 'alter extension pgque_bgw update',
        extra_params => [ '-U', 'dbo' ]);
    if ($rc == 0) { $ok++; } else { $failed++; diag("round $round: $err"); }
}
is($failed, 0, "20 updates from 0.2.0 by the non-superuser owner beside the workers: none failed ($ok ok)");
diag(sprintf('figure: 20 installs and updates beside the workers in %.1f s', time - $t0));
is($node->safe_psql('up', q{select extversion from pg_extension where extname = 'pgque_bgw'}), $new,
   "the last one is at $new");

# from 0.1.0, by a superuser (the 0.1.0 -> 0.2.0 step needs one)
my $failed_010 = 0;
for my $round (1 .. 3)
{
    $node->safe_psql('up', q{drop extension if exists pgque_bgw cascade; drop schema if exists pgque cascade;
                             create extension pgque_bgw version '0.1.0'});
    $node->safe_psql('up', q{
        select pgque.create_queue('q' || i) from generate_series(1, 3) i;
        select pgque.set_queue_config('q' || i, 'rotation_period', '1 second') from generate_series(1, 3) i;
        select pgque.subscribe('q' || i, 'c') from generate_series(1, 3) i;
        select pgque.send('q' || i, 'before') from generate_series(1, 3) i, generate_series(1, 20) j;
    });
    sleep(0.3 + rand(0.9));
    my ($rc, $out, $err) = $node->psql('up', 'alter extension pgque_bgw update');
    if ($rc != 0) { $failed_010++; diag("0.1.0 round $round: $err"); }
}
is($failed_010, 0, '3 updates from 0.1.0 by a superuser beside the workers: none failed');

# the workers go on with the new SQL: a tick and a receive
$node->safe_psql('up', q{select pgque.send('q1', 'after')});
# (one tick window per batch, ADR 0057: each poll acks a window of the
# events sent before, until the window with 'after' comes)
ok($node->poll_query_until('up', q{
    select case when bool_or(payload = 'after') then true
                when max(batch_id) is null then false
                else pgque.ack(max(batch_id)) < 0 end
      from pgque.receive('q1', 'c', 1000)}),
   'after the updates the workers tick the database again');

my $log = slurp_file($node->logfile, $log_start);
unlike($log, qr/deadlock detected/, 'no deadlock in the log');
unlike($log, qr/pgque_bgw maintenance: .* failed/, 'no maintenance step failed');

# the database left on 0.1.0, over at least 60 s of this run
my $left = 60 - (time - $old_since);
sleep($left) if $left > 0;
$log = slurp_file($node->logfile, $log_start);
my $warnings = () = $log =~ /WARNING:  pgque_bgw: database "old" has extension pgque_bgw version 0\.1\.0/g;
is($warnings, 1, 'the database left on 0.1.0 logs its WARNING once in 60 s');
unlike($log, qr/does not exist/, 'the workers call nothing an older SQL lacks (no "does not exist")');
unlike($log, qr/evaluating worker alerts failed/, 'no failed evaluation of worker alerts');

$node->stop;
done_testing();
