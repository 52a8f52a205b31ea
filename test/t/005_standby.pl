# A streaming standby with the module preloaded runs no workers and writes
# nothing; after promotion its workers start and tick.  Events committed on
# the primary are all there after the failover.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;

my $primary = PgqueNode->new_preloaded('primary', init => { allows_streaming => 1 }, conf => qq{
pgque_bgw.launcher_naptime = '1s'
pgque_bgw.maint_interval = '1s'
});
$primary->safe_psql('postgres', q{
    create extension pgque_bgw;
    select pgque.create_queue('ha');
    select pgque.subscribe('ha', 'c');
});
$primary->safe_psql('postgres', q{select pgque.send('ha', 'before-' || i) from generate_series(1, 20) i});
ok($primary->poll_query_until('postgres', q{select count(*) = 20 from pgque.receive('ha', 'c', 100)}),
   'the primary ticks: 20 events are visible to the consumer');

$primary->backup('bk');
my $standby = PgqueNode->new('standby');
$standby->init_from_backup($primary, 'bk', has_streaming => 1);
$standby->start;
$primary->wait_for_catchup($standby);

sleep(3);
is($standby->safe_psql('postgres', q{
       select count(*) from pg_stat_activity where backend_type like 'pgque_bgw %'}),
   '0', 'the standby runs no pgque_bgw process');
my $ticks = $standby->safe_psql('postgres', q{select count(*) from pgque.tick});
is($standby->safe_psql('postgres', q{select status from pgque.status() where component = 'workers'}),
   'no launcher', 'status() on the standby says no launcher runs');
unlike(slurp_file($standby->logfile), qr/pgque_bgw.*(ERROR|FATAL)/, 'and its log has no pgque_bgw error');

# more events on the primary, acked batch left open: then fail over
$primary->safe_psql('postgres', q{select pgque.send('ha', 'late-' || i) from generate_series(1, 10) i});
ok($primary->poll_query_until('postgres', q{select max(tick_event_seq) >= 30 from pgque.tick}),
   'the primary ticked the late events');
$primary->wait_for_catchup($standby);
$primary->stop('immediate');
$standby->promote;

ok($standby->poll_query_until('postgres', q{
       select count(*) = 4 from pg_stat_activity where backend_type like 'pgque_bgw %'}),
   'after promotion the launcher and the three workers run');
$standby->safe_psql('postgres', q{select pgque.send('ha', 'after-promotion')});
ok($standby->poll_query_until('postgres', qq{select count(*) > $ticks from pgque.tick}),
   'the promoted server ticks');
# drain everything on the promoted server: the batch received but not
# acked on the old primary comes again, then the rest; nothing is lost
my %seen;
for my $round (1 .. 50)
{
    my $rows = $standby->safe_psql('postgres', q{
        with r as (select * from pgque.receive('ha', 'c', 1000))
        select coalesce(string_agg(payload, ','), '') || '|' || coalesce(max(batch_id)::text, '') from r});
    my ($payloads, $batch) = split /\|/, $rows, 2;
    $seen{$_}++ for grep { $_ ne '' } split /,/, $payloads;
    last if exists $seen{'after-promotion'};
    if ($batch ne '') { $standby->safe_psql('postgres', "select pgque.ack($batch)"); }
    else { sleep(0.2); }
}
is(scalar(grep { /^before-/ } keys %seen), 20, 'the 20 events of the unacked batch are delivered again after failover');
is(scalar(grep { /^late-/ } keys %seen), 10, 'the 10 events committed just before the failover are delivered');
ok(exists $seen{'after-promotion'}, 'and the event sent after promotion');
$standby->stop('fast');
done_testing();
