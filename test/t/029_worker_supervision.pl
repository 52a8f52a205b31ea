# Worker supervision (issue 12, ADR 0028): each SIGTERM of a worker used to
# double the launcher's back-off (up to 60 s), so a handful of restarts left
# a database without its ticker for half a minute, and only the ticker's
# outage could raise an alert (late).  Now the back-off is capped by
# pgque_bgw.worker_restart_max and reset by a healthy run, and every worker
# type down past pgque_bgw.worker_down_after opens one worker_down alert that
# clears when it is back.
# tap-lane: timed (bounds on durations: runs in the timed lane, test/README.md)
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);

my $cap = 3;          # s, pgque_bgw.worker_restart_max
my $threshold = 1;    # s, pgque_bgw.worker_down_after

my $node = PgqueNode->new_preloaded('supervision', conf => qq{
max_worker_processes = 16
pgque_bgw.launcher_naptime = '1s'
pgque_bgw.watchdog_interval = '1s'
pgque_bgw.worker_restart_max = '${cap}s'
pgque_bgw.worker_down_after = '${threshold}s'
pgque_bgw.databases = 'app'
});
$node->safe_psql('postgres', 'create database app');
$node->safe_psql('app', q{create extension pgque_bgw; select pgque.create_queue('q'); select pgque.subscribe('q', 'c')});

my @kinds = ('ticker', 'maintenance', 'watchdog');

# pid of each worker of app, from the launcher's view (0: not running)
sub pids
{
    my %p = map { $_ => 0 } @kinds;
    for my $line (split /\n/, $node->safe_psql('app', q{
            select worker || ' ' || coalesce(pid, 0) from pgque.launcher_workers() where datname = 'app'}))
    {
        my ($k, $pid) = split / /, $line;
        $p{$k} = $pid;
    }
    return \%p;
}

ok($node->poll_query_until('app', q{
       select count(*) = 3 from pgque.launcher_workers() where datname = 'app' and pid is not null}),
   'the three workers run');
is($node->safe_psql('app', q{select string_agg(distinct mode, ',') from pgque.launcher_workers() where datname = 'app'}),
   'split', 'three processes for one database');

# SIGTERM each worker type 6 times, every 5 s (staggered by 2 s): enough
# quick deaths in a row for the back-off to reach its cap; and measure every
# outage from the launcher's view
my $KILLS = 6;
my %kills = map { $_ => 0 } @kinds;
my %down_at;                       # kind -> time it was first seen down
my %killed;                        # kind -> pid last sent SIGTERM (down while still listed)
my %outages = map { $_ => [] } @kinds;
my $t0 = time();
my %next_kill = (ticker => $t0, maintenance => $t0 + 2, watchdog => $t0 + 4);
while (1)
{
    my $now = time();
    my $p = pids();
    for my $k (@kinds)
    {
        if ($p->{$k} == 0 || $p->{$k} == ($killed{$k} // -1))
        {
            $down_at{$k} //= $now;
        }
        elsif (defined $down_at{$k})
        {
            push @{ $outages{$k} }, $now - $down_at{$k};
            delete $down_at{$k};
        }
        if ($kills{$k} < $KILLS && $p->{$k} != 0 && $p->{$k} != ($killed{$k} // -1) && $now >= $next_kill{$k})
        {
            $node->safe_psql('postgres', "select pg_terminate_backend($p->{$k})");
            $killed{$k} = $p->{$k};
            $kills{$k}++;
            $next_kill{$k} = $now + 5;
            $down_at{$k} //= $now;
        }
    }
    last if !grep({ $kills{$_} < $KILLS || defined $down_at{$_} } @kinds);
    last if time() - $t0 > 150;    # a worker that never came back: fail below
    sleep(0.05);
}
diag(sprintf('figure: %d SIGTERMs in %.0f s', 3 * $KILLS, time() - $t0));
for my $k (@kinds)
{
    my @o = @{ $outages{$k} };
    my ($max) = sort { $b <=> $a } @o;
    $max //= 0;
    is(scalar(@o), $KILLS, "$k: $KILLS outages, each ended");
    diag(sprintf('figure: %s outages (s): %s', $k, join(' ', map { sprintf('%.1f', $_) } @o)));
    # the cap plus the start of a process and the polling step, under load
    cmp_ok($max, '<=', $cap + 3, "$k: no outage longer than the restart cap ($cap s) and a start");
}

# every outage past the threshold opened one alert that cleared
ok($node->poll_query_until('app', q{
       select count(*) = 0 from pgque.alert where kind = 'worker_down' and cleared_at is null}),
   'no worker_down alert stays open once the workers are back');
ok($node->poll_query_until('app', q{
       select bool_and(a.n = w.outages)
         from pgque.launcher_workers() w
         cross join lateral (select count(*) n from pgque.alert a
                              where a.kind = 'worker_down' and a.subject = w.worker) a
        where w.datname = 'app'}),
   'one worker_down alert per outage past the threshold, of every worker type')
  or diag($node->safe_psql('app', q{select worker, outages from pgque.launcher_workers() where datname = 'app'}),
          "\n", $node->safe_psql('app', q{select subject, count(*) from pgque.alert where kind = 'worker_down' group by 1}));
for my $k (@kinds)
{
    # the outages of the SIGTERMs: a slow first start under load (the probe
    # attaching over worker_down_after after CREATE EXTENSION) is an outage
    # too, opened before the first SIGTERM
    my $n = $node->safe_psql('app', "select count(*) from pgque.alert where kind = 'worker_down' and subject = '$k'
                                       and opened_at >= pg_catalog.to_timestamp($t0)");
    my $longer = grep { $_ > $threshold } @{ $outages{$k} };
    cmp_ok($n, '>=', $longer, "$k: at least one alert per outage measured longer than the threshold ($n, $longer)");
    cmp_ok($n, '<=', $KILLS, "$k: at most one alert per outage");
    diag("figure: $k worker_down alerts: $n for $KILLS outages, $longer measured longer than ${threshold} s");
}
is($node->safe_psql('app', q{
       select count(*) from pgque.alert
        where kind = 'worker_down' and (cleared_at is null or cleared_at < opened_at
                                        or details->>'worker' is distinct from subject)}),
   '0', 'each alert names its worker and cleared after it opened');

# a healthy run (10 s or more) resets the back-off: the next restart is quick
sleep(11);
my $p = pids();
my $t1 = time();
$node->safe_psql('postgres', "select pg_terminate_backend($p->{ticker})");
ok($node->poll_query_until('app', qq{
       select pid is not null and pid <> $p->{ticker} from pgque.launcher_workers()
        where datname = 'app' and worker = 'ticker'}), 'the ticker is back');
my $back = time() - $t1;
diag(sprintf('figure: ticker back %.1f s after a SIGTERM that followed a healthy run', $back));
cmp_ok($back, '<', $cap, 'after a healthy run the back-off starts again from 0.5 s');

# events still flow
$node->safe_psql('app', q{select pgque.send('q', 'after')});
ok($node->poll_query_until('app', q{select count(*) = 1 from pgque.receive('q', 'c')}), 'events are delivered');

# status() prints each timestamp of a row as itself (it used a static
# buffer twice: "started" showed "last pass", "last tick" "last maintenance")
ok($node->poll_query_until('app', q{
       select detail ~ 'last tick 2' and detail ~ 'last maintenance 2' from pgque.status() where component = 'workers'}),
   'status() has a last tick and a last maintenance');
my $w = $node->safe_psql('app', q{select detail from pgque.status() where component = 'workers'});
my ($tick, $maint) = $w =~ /last tick ([^;]+); last maintenance ([^;]+)/;
isnt($tick, $maint, "status(): last tick and last maintenance are two timestamps ($tick, $maint)");
sleep(1);
my $d = $node->safe_psql('app', q{select detail from pgque.status() where component = 'maintenance'});
my ($started, $pass) = $d =~ /started ([^,]+), last pass ([^;]+)/;
ok(defined $started && $started ne $pass, "status(): started and last pass are two timestamps ($started, $pass)");

$node->stop;
done_testing();
