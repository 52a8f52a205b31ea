# A scrape beside a stopped slot (ADR 0094).  Issue #30's sustained load
# stops one slot for 3 minutes; every metrics() call (a Prometheus scrape,
# the bench's sampler every 5 s) counted that slot's pending events by
# reading the whole stream since the stop.  Every reader now counts a slot
# far behind up to _slot_pending_cap() (10,000) and says so.
#   - a primary with streaming, a queue of 32 buckets with 8 slots, 100,000
#     events, every slot drained but slot 3 (about 12,500 of its own left);
#   - five scrapes of metrics() read at most about the cap's rows each from
#     the queue's event tables (pg_stat_user_tables), where one exact count
#     reads the whole window (100,000 rows); slot 3's pending is 10,000,
#     pgque_consumer_pending_events_capped 1, the drained slots 0;
#   - on a streaming standby (read-only) metrics(), get_consumer_info() and
#     get_partition_slot_info() say the same and read as little.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;

my $primary = PgqueNode->new_preloaded('scrape_primary', init => { allows_streaming => 1 }, conf => q{
pgque_bgw.enabled = off
autovacuum = off
});
$primary->install('postgres');
my ($qid, $slot3) = $primary->stopped_slot_backlog('sc');
cmp_ok($slot3, '>', 10000, "slot 3 holds more than the cap ($slot3 events)");

# rows read from the queue's event tables, every session's.  A psql session
# flushes its counts as its backend exits, which may be after psql returned:
# wait until no other client backend is left (a backend leaves
# pg_stat_activity after its statistics are flushed) before reading.
my $rows_read = sub {
	my ($node) = @_;
	$node->poll_query_until('postgres', q{
	    select count(*) = 0 from pg_stat_activity
	     where backend_type = 'client backend' and pid <> pg_backend_pid()})
	  or die 'a client backend did not exit';
	return $node->safe_psql('postgres', qq{
	    select coalesce(sum(coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0)), 0)
	      from pg_stat_user_tables where schemaname = 'pgque' and relname like 'event\\_${qid}\\_%'});
};
my $scrape = q{
    select string_agg(m.labels->>'consumer' || '=' || m.value, ',' order by m.labels->>'consumer')
      from pgque.metrics() m
     where m.metric = '%s' and m.labels->>'queue' = 'sc'};

# the exact count, for comparison: one read of the whole window
my $r0 = $rows_read->($primary);
$primary->safe_psql('postgres', q{select count(*) from pgque._slot_pending_all()});
my $exact = $rows_read->($primary) - $r0;
cmp_ok($exact, '>=', 100000, "one exact count reads the whole window ($exact rows)");

# five scrapes, one session each
$r0 = $rows_read->($primary);
my ($pending, $capped);
for (1 .. 5)
{
	$pending = $primary->safe_psql('postgres', sprintf($scrape, 'pgque_consumer_pending_events'));
	$capped = $primary->safe_psql('postgres', sprintf($scrape, 'pgque_consumer_pending_events_capped'));
}
my $scraped = $rows_read->($primary) - $r0;
diag("figure: 10 metrics() calls read $scraped rows of the queue's event tables ("
	. int($scraped / 10) . ' a call; one exact count reads ' . $exact . ')');
cmp_ok($scraped, '<=', 10 * 10100, 'each scrape read at most about the cap of the stopped slot\'s rows');
cmp_ok($scraped, '>=', 10 * 10000, 'and counted the stopped slot up to the cap');
is($pending, 'w#0/8=0,w#1/8=0,w#2/8=0,w#3/8=10000,w#4/8=0,w#5/8=0,w#6/8=0,w#7/8=0',
	'pgque_consumer_pending_events: the stopped slot at the cap, the others exact');
is($capped, 'w#0/8=0,w#1/8=0,w#2/8=0,w#3/8=1,w#4/8=0,w#5/8=0,w#6/8=0,w#7/8=0',
	'pgque_consumer_pending_events_capped says which count stopped there');

# a streaming standby: the same figures, read-only, as cheap
$primary->backup('bk');
my $standby = PgqueNode->new('scrape_standby');
$standby->init_from_backup($primary, 'bk', has_streaming => 1);
$standby->start;
$primary->wait_for_catchup($standby);
is($standby->safe_psql('postgres', 'select pg_is_in_recovery()'), 't', 'the standby is in recovery');
$r0 = $rows_read->($standby);
is($standby->safe_psql('postgres', sprintf($scrape, 'pgque_consumer_pending_events_capped')),
	'w#0/8=0,w#1/8=0,w#2/8=0,w#3/8=1,w#4/8=0,w#5/8=0,w#6/8=0,w#7/8=0',
	'metrics() on the standby: the same capped flags');
is($standby->safe_psql('postgres', q{
    select pending_events from pgque.get_consumer_info('sc') where consumer_name = 'w#3/8'}),
	'10000', 'get_consumer_info() on the standby: the stopped slot at the cap');
is($standby->safe_psql('postgres', q{
    select slot_pending_events || ' ' || slot_pending_events_capped
      from pgque.get_partition_slot_info() where queue_name = 'sc' and slot = 3}),
	'10000 true', 'get_partition_slot_info() on the standby: at the cap, said capped');
my $standby_read = $rows_read->($standby) - $r0;
cmp_ok($standby_read, '<=', 3 * 10100, "the standby's three calls read at most about the cap each ($standby_read rows)");

# the slot's worker comes back: exact again, not capped
$primary->safe_psql('postgres', 'call drain(3)');
is($primary->safe_psql('postgres', sprintf($scrape, 'pgque_consumer_pending_events_capped')),
	'w#0/8=0,w#1/8=0,w#2/8=0,w#3/8=0,w#4/8=0,w#5/8=0,w#6/8=0,w#7/8=0', 'drained: no count capped');

$standby->stop('fast');
$primary->stop('fast');
done_testing();
