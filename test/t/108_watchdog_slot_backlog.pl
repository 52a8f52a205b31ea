# The watchdog beside a stopped slot (ADR 0096).  Issue #30's sustained
# load stops one slot for 3 minutes: its backlog grew to millions of events,
# and every watchdog pass counted that slot's pending events by reading the
# whole backlog (_slot_pending_all's exact group read, from the oldest
# cursor), seconds of CPU a pass on the 2 cores the healthy slots drain
# with.  The watchdog now counts up to a cap (10,000): a slot that reads its
# own buckets and whose cursor is further behind reads its own rows alone
# and stops there.
#   - real workers (watchdog every second, slot_unpolled after 1 s), a queue
#     of 32 buckets with 8 slots, 100,000 events, every slot drained but
#     slot 3 (about 12,500 of its own left);
#   - the watchdog's passes over a few seconds read at most the cap's rows
#     (and a margin) per pass from the queue's event tables, where one exact
#     read is the whole window (100,000 rows);
#   - slot_unpolled opens for slot 3 with pending_events 10,000, said
#     capped, and none for the drained slots; get_consumer_info counts it
#     up to the same cap (ADR 0094), the uncapped count exactly.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PgqueNode->new_preloaded('watchdog_slot_backlog', conf => q{
pgque_bgw.launcher_naptime = '1s'
pgque_bgw.watchdog_interval = '1s'
pgque_bgw.slot_unpolled_after = '1s'
track_functions = 'all'
});
$node->install('postgres');
ok($node->wait_for_workers('postgres'), 'the workers run');

my ($qid, $slot3) = $node->stopped_slot_backlog('wb', force_tick => 1);
cmp_ok($slot3, '>', 10000, "slot 3 holds more than the cap ($slot3 events)");

ok(PgqueNode::poll_until(sub {
	$node->safe_psql('postgres', q{
	    select count(*) from pgque.alert where kind = 'slot_unpolled' and cleared_at is null and subject = 'wb/w/3'}) eq '1';
}), 'slot_unpolled opens for the stopped slot');
is($node->safe_psql('postgres', q{
    select details->>'pending_events' || ' ' || (details->>'pending_events_capped')
      from pgque.alert where kind = 'slot_unpolled' and cleared_at is null and subject = 'wb/w/3'}),
	'10000 true', "its details: the watchdog's cap, said capped");
# a slot that waited for its drain longer than slot_unpolled_after opened
# one meanwhile (the drains run one after another, seconds each on a loaded
# machine); drained, each clears at the next pass
ok(PgqueNode::poll_until(sub {
	$node->safe_psql('postgres', q{
	    select count(*) from pgque.alert where kind = 'slot_unpolled' and cleared_at is null
	       and subject like 'wb/w/%' and subject <> 'wb/w/3'}) eq '0';
}), 'no alert stays open for the drained slots');

# rows read from the queue's event tables by the watchdog's passes (every
# process's, and nothing else reads the queue now), and how many passes
my $sample = sub {
	return split /\|/, $node->safe_psql('postgres', qq{
	    select coalesce(sum(coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0)), 0),
	           coalesce((select calls from pg_stat_user_functions
	                      where schemaname = 'pgque' and funcname = '_alert_conditions'), 0)
	      from pg_stat_user_tables where schemaname = 'pgque' and relname like 'event\\_${qid}\\_%'});
};
$node->safe_psql('postgres', 'select pg_stat_clear_snapshot()');
my ($r0, $p0) = $sample->();
sleep 6;
my ($r1, $p1) = $sample->();
my ($rows, $passes) = ($r1 - $r0, $p1 - $p0);
diag("figure: $passes watchdog passes read $rows rows of the queue's event tables ("
	. ($passes ? int($rows / $passes) : 'n/a') . ' a pass; one exact count reads 100,000)');
cmp_ok($passes, '>=', 2, "the watchdog passed ($passes)");
cmp_ok($rows, '<=', $passes * 12000, 'each pass read at most about the cap of the stopped slot\'s rows');

# get_consumer_info counts with the same cap (ADR 0094); the exact count
# is still _slot_pending_all without one
is($node->safe_psql('postgres', q{
    select pending_events from pgque.get_consumer_info('wb') where consumer_name = 'w#3/8'}),
	'10000', "get_consumer_info counts slot 3's share up to the same cap (ADR 0094)");
is($node->safe_psql('postgres', q{
    select p.pending from pgque._slot_pending_all() p
      join pgque.subscription s on s.sub_id = p.sub_id
      join pgque.consumer c on c.co_id = s.sub_consumer
     where c.co_name = 'w#3/8'}),
	$slot3, "the uncapped count is slot 3's share exactly ($slot3)");

# the slot's worker comes back: the alert clears once it is drained
$node->safe_psql('postgres', 'call drain(3)');
ok(PgqueNode::poll_until(sub {
	$node->safe_psql('postgres', q{
	    select count(*) from pgque.alert where kind = 'slot_unpolled' and cleared_at is null and subject like 'wb/%'}) eq '0';
}), 'slot_unpolled clears once the slot is drained');

$node->stop('fast');
done_testing();
