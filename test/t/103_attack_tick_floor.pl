# tap-lane: timed
# The second reader's attack on the ticker's idle floor (ADR 0087,
# src/ticker.c): can a role with only pgque_writer make the ticker pass
# without bound?  A commit that finds the ticker idle for tick_interval / 5
# is ticked at once; on ticklat 1af3324..ee1abe4 it was not charged to any
# limit, so a writer committing just past the floor got a pass per commit
# (20 tick rows below); since 6c49e7b those passes have a cell-rate limit of
# their own (15: at most twice tick_interval's rate, plus the bursts).
#   - tick_interval 1 s (floor 200 ms): 20 commits of a pgque_writer 300 ms
#     apart.  Bounded (holds): no more tick rows than commits (+1), no more
#     than one pass per floor (+ the burst of 3), and no more than the two
#     cell-rate limits allow together (2 x (3 + one per second)).
#   - figure: the tick rows against what tick_interval alone would allow
#     (3 + one per second); src/guc.c still describes tick_interval as the
#     "minimum spacing between two passes" (docs/gucs.md says the new rule).
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes;

my $node = PgqueNode->new_preloaded('attack_tick_floor', conf => q{
pgque_bgw.launcher_naptime = '1s'
pgque_bgw.tick_interval = '1s'
pgque_bgw.ticker_probe_interval = '3600s'
pgque_bgw.ticker_stalled_after = '3600s'
});
$node->install('postgres');
ok($node->wait_for_workers('postgres'), 'the workers run');

$node->safe_psql('postgres', q{
    create role writer login in role pgque_writer;
    select pgque.create_queue('q');
    select pgque.set_queue_config('q', 'ticker_idle_period', '1 hour');
    select pgque.subscribe('q', 'c');
    -- one event per transaction, gap seconds apart
    create procedure paced(n int, gap float8) language plpgsql as $$
    begin
        for i in 1 .. n loop
            perform pgque.send('q', 'paced');
            commit;
            perform pg_sleep(gap);
        end loop;
    end $$;
    grant execute on procedure paced(int, float8) to writer;
});
my $qid = $node->safe_psql('postgres', q{select queue_id from pgque.queue where queue_name = 'q'});
ok(PgqueNode::poll_until(sub {
	$node->safe_psql('postgres', "select count(*) > 0 from pgque.tick where tick_queue = $qid") eq 't';
}), 'the queue had its first tick');

Time::HiRes::sleep(3.5);		# a window with no commit: the limit's credit back
my $from = $node->safe_psql('postgres', "select max(tick_id) from pgque.tick where tick_queue = $qid");
my $t0 = Time::HiRes::time();
$node->safe_psql('postgres', 'set role writer; call paced(20, 0.3)');
my $secs = Time::HiRes::time() - $t0;
ok(PgqueNode::poll_until(sub {
	$node->safe_psql('postgres', qq{
	    select t.tick_event_seq >= (select max(ev_id) from pgque.event_template
	                                  where tableoid::regclass::text like 'pgque.event_${qid}_%')
	      from pgque.tick t where t.tick_queue = $qid order by t.tick_id desc limit 1}) eq 't';
}), 'the last commit is ticked');
my $ticks = $node->safe_psql('postgres', "select count(*) from pgque.tick where tick_queue = $qid and tick_id > $from");
my $by_floor = 3 + int($secs / 0.2) + 1;
my $by_interval = 3 + int($secs / 1) + 1;
diag(sprintf('figure: 20 commits 300 ms apart in %.1f s, tick_interval 1 s: %d tick rows '
		. '(tick_interval alone: %d; the floor: %d)', $secs, $ticks, $by_interval, $by_floor));
cmp_ok($ticks, '<=', 21, "no more tick rows than commits, + 1 ($ticks)");
cmp_ok($ticks, '<=', $by_floor, "no more than one pass per floor, + the burst ($ticks <= $by_floor)");
cmp_ok($ticks, '<=', 2 * $by_interval,
	"no more than the two limits together allow: the busy passes' and the idle passes' own ($ticks <= " . 2 * $by_interval . ')');
cmp_ok($ticks, '>=', 2, 'and more than one');

$node->stop('fast');
done_testing();
