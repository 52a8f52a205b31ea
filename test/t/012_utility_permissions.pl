# The utility hook (issue 11): DROP DATABASE, ALTER DATABASE ... RENAME and
# CREATE DATABASE ... TEMPLATE pause the database's workers only when
# PostgreSQL's own permission checks will pass.  A role that is refused
# ("must be owner", "permission denied to create/copy database") used to
# stop the victim's workers first, and in a loop stalled its delivery.  A
# pause (or a refused command) never counts towards the restart back-off.
# tap-lane: timed (bounds on durations: runs in the timed lane, test/README.md)
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);

my $node = PgqueNode->new_preloaded('utility', conf => qq{
pgque_bgw.launcher_naptime = '1s'
pgque_bgw.maint_interval = '1s'
pgque_bgw.watchdog_interval = '1s'
max_worker_processes = 16
});
$node->safe_psql('postgres', q{
    create role victim_owner login createdb;
    create role mallory login;
    create role mallory_createdb login createdb;
    create database victim owner victim_owner;
});
$node->install('victim');

sub worker_pids
{
    my ($db) = @_;
    return $node->safe_psql('postgres', qq{
        select string_agg(backend_type || '=' || pid, ',' order by backend_type) from pg_stat_activity
         where backend_type like 'pgque_bgw %' and datname = '$db'});
}

ok($node->wait_for_workers('victim'), 'the victim database has its three workers');
my $before = worker_pids('victim');

# --- refused commands, in a loop, stop nothing ---------------------------------
my @attacks = (
    [ 'mallory',          'drop database victim',                        qr/must be owner of database victim/ ],
    [ 'mallory',          'alter database victim rename to stolen',      qr/must be owner of database victim/ ],
    [ 'mallory',          'create database copy1 template victim',       qr/permission denied to create database/ ],
    [ 'mallory_createdb', 'create database copy2 template victim',       qr/permission denied to copy database "victim"/ ],
    [ 'mallory_createdb', 'alter database victim rename to stolen',      qr/must be owner of database victim/ ],
    [ 'mallory_createdb', 'drop database if exists victim',              qr/must be owner of database victim/ ],
);
for my $a (@attacks)
{
    my ($role, $sql, $re) = @$a;
    my $t0 = time();
    my ($ret, $out, $err);
    for my $i (1 .. 10)
    {
        ($ret, $out, $err) = $node->psql('postgres', $sql, extra_params => [ '-U', $role ]);
    }
    isnt($ret, 0, "$role: '$sql' is refused");
    like($err, $re, "by PostgreSQL's own check");
    # against ten connections that do nothing, timed now: an absolute bound
    # failed on a loaded machine (3.2-3.8 s for ten refused commands, PG 17)
    my $elapsed = time() - $t0;
    my $t1 = time();
    $node->psql('postgres', 'select 1', extra_params => [ '-U', $role ]) for 1 .. 10;
    my $baseline = time() - $t1;
    cmp_ok($elapsed, '<', 2 * $baseline + 1,
           sprintf('at once (no pause and wait for workers): %.1f s, ten idle connections %.1f s', $elapsed, $baseline));
}
is(worker_pids('victim'), $before, 'after 60 refused commands the victim\'s workers are the same processes');
ok($node->poll_query_until('victim', q{select count(*) = 0 from pgque.status() where status = 'stopped'}),
   'and none of them is stopped');

# --- the owner's commands pause, and pausing costs no back-off ----------------------
$node->safe_psql('victim', q{select pgque.create_queue('q'); select pgque.subscribe('q', 'c')});
for my $i (1 .. 4)
{
    # each pause stops workers that ran for less than the "short run" time:
    # counted as failures, the fourth restart would wait 8 s
    $node->safe_psql('postgres', 'alter database victim rename to victim_tmp', extra_params => [ '-U', 'victim_owner' ]);
    $node->safe_psql('postgres', 'alter database victim_tmp rename to victim', extra_params => [ '-U', 'victim_owner' ]);
    my $t0 = time();
    ok($node->wait_for_workers('victim'), "rename round $i: the workers are back");
    my $back = time() - $t0;
    cmp_ok($back, '<', 4, sprintf('within a launcher pass, no back-off (%.1f s)', $back));
}
my $t0 = time();
$node->safe_psql('postgres', 'create database victim_copy template victim', extra_params => [ '-U', 'victim_owner' ]);
my $copy_took = time() - $t0;
cmp_ok($copy_took, '<', 8, sprintf('the owner copies the database promptly (%.1f s)', $copy_took));
$t0 = time();
ok($node->wait_for_workers('victim'), 'the workers are back after the copy');
my $back = time() - $t0;
cmp_ok($back, '<', 4, sprintf('within a launcher pass, no back-off after five pauses (%.1f s)', $back));
$node->safe_psql('victim', q{select pgque.send('q', 'after the pauses')});
ok($node->poll_query_until('victim', q{select count(*) = 1 from pgque.receive('q', 'c')}),
   'and deliver again');

# status(): the two timestamps of one line are not the same buffer printed twice
my $detail = $node->safe_psql('victim', q{select detail from pgque.status() where component = 'workers'});
my ($tick, $maint) = $detail =~ /(last tick [^;]*|no tick yet); (last maintenance [^;]*|no maintenance pass yet)/;
ok(defined $tick && defined $maint && $tick ne $maint, "status() prints two timestamps ($detail)");

# --- the owner's DROP DATABASE still works promptly --------------------------------
$node->safe_psql('postgres', 'create database victim2 owner victim_owner');
$node->install('victim2');
ok($node->wait_for_workers('victim2'), 'a second database with workers');
$t0 = time();
my ($ret, $out, $err) = $node->psql('postgres', 'drop database victim2', extra_params => [ '-U', 'victim_owner' ]);
my $took = time() - $t0;
is($ret, 0, 'the owner drops it') or diag($err);
cmp_ok($took, '<', 6, sprintf('promptly (%.1f s)', $took));
is(worker_pids('victim'), worker_pids('victim'), 'the other database is untouched');
ok($node->wait_for_workers('victim'), 'and keeps its three workers');

$node->stop('fast');
done_testing();
