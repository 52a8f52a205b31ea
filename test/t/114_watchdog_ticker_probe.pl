# The watchdog's ticker_stalled reads no event sequence of a queue that
# the ticker's last probe, within the bound, found covered by its latest
# tick or ticked (ADR 0103); it reads them again once the ticker stops
# probing.  In a database updated from 0.2.0 (the probe's publication is
# the library's, the rule the updated SQL's):
#   - with the ticker running, rows written into idle queues' event tables
#     directly are ticked by the probe and open no ticker_stalled (ADR
#     0031's watchdog read the moved sequence first and could open it);
#   - with the ticker stopped (SIGSTOP), such a row on a database that was
#     idle opens ticker_stalled before its latency reaches
#     ticker_stalled_after, and it clears once the ticker goes on.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);

# lead (the bound the watchdog opens at): 12 s - 1 s = 11 s; the probe
# every 2 s is well within it
my $node = PgqueNode->new_preloaded('watchdog_ticker_probe', conf => q{
pgque_bgw.launcher_naptime = '1s'
pgque_bgw.watchdog_interval = '1s'
pgque_bgw.ticker_probe_interval = '2s'
pgque_bgw.ticker_stalled_after = '12s'
});
$node->safe_psql('postgres', q{create extension pgque_bgw version '0.2.0'});
$node->safe_psql('postgres', q{
    select count(pgque.create_queue('idle_' || i)) from generate_series(1, 20) i;
    select count(pgque.set_queue_config('idle_' || i, 'ticker_idle_period', '1 hour')) from generate_series(1, 20) i;
    select count(pgque.subscribe('idle_' || i, 'c')) from generate_series(1, 20) i;});
$node->safe_psql('postgres', q{alter extension pgque_bgw update});
is($node->safe_psql('postgres', q{select extversion from pg_extension where extname = 'pgque_bgw'}),
   '0.3.0', 'updated from 0.2.0');
ok($node->wait_for_workers('postgres'), 'the workers run');
$node->create_got;
sub stalled_rows
{
    my ($queue) = @_;
    return $node->safe_psql('postgres', qq{
        select count(*) from pgque.alert where kind = 'ticker_stalled' and queue_name = '$queue'});
}
sub stalled_open
{
    my ($queue) = @_;
    return $node->safe_psql('postgres', qq{
        select count(*) = 1 from pgque.alerts where kind = 'ticker_stalled' and queue_name = '$queue'}) eq 't';
}
# every queue's last tick older than the lead: the state in which ADR
# 0031's watchdog read each sequence on every pass
sleep(13);

# --- the ticker running: rows written directly are its probe's ----------------
for my $i (1 .. 4)
{
    $node->direct_insert("idle_$i", "d$i");
    sleep(1.5);
}
for my $i (1 .. 4)
{
    ok($node->poll_query_until('postgres', qq{select got('idle_$i', 'd$i')}),
       "a row written directly into idle_$i is ticked by the probe");
}
sleep(2);
is(stalled_rows("idle_$_"), '0', "no ticker_stalled was opened for idle_$_ meanwhile") for 1 .. 4;

# --- the ticker stopped on the idle database -------------------------------------
my $ticker = $node->safe_psql('postgres', q{
    select pid from pg_stat_activity where backend_type = 'pgque_bgw ticker' and datname = 'postgres'});
ok($ticker, 'the ticker runs');
kill 'STOP', $ticker;
my $t0 = time();
$node->direct_insert('idle_10', 'z');
my $opened;
while (time() - $t0 < 60)
{
    if (stalled_open('idle_10')) { $opened = time() - $t0; last; }
    sleep(0.2);
}
ok(defined $opened, 'with the ticker stopped, ticker_stalled opens for the row written directly');
cmp_ok($opened // 99, '<', 12 + 2,
       'before its latency reaches ticker_stalled_after (12 s) and a pass');
diag(sprintf('figure: opened %.1f s after the row (lead 11 s)', $opened // -1));
is($node->safe_psql('postgres', q{
       select (details->>'new_events')::int8 > 0 from pgque.alerts
        where kind = 'ticker_stalled' and queue_name = 'idle_10'}), 't', 'naming the new events');
kill 'CONT', $ticker;
ok($node->poll_query_until('postgres', q{select got('idle_10', 'z')}), 'the ticker goes on and ticks it');
ok($node->poll_query_until('postgres', q{
       select count(*) = 0 from pgque.alerts where kind = 'ticker_stalled'}),
   'and ticker_stalled clears');
is(stalled_rows('idle_10'), '1', 'opened once, cleared once');

$node->stop;
done_testing();
