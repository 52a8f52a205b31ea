# tap-lane: timed
# The ticker's idle floor (ADR 0087): a commit that finds the ticker idle
# (no pass for tick_interval / 5, no commit waiting) is ticked at once; the
# cell-rate limit (one pass per tick_interval on average, bursts of 3) holds
# for commits that keep coming.  tick_interval is 3 s here, so that the
# bounds are far apart on a loaded machine: floor 600 ms, interval 3 s.
#   - commits a second apart: each ticked within 1 s, also after the
#     limit's credit of 3 is spent (the limit alone made the 4th and later
#     wait 2 s and more);
#   - a burst of back-to-back commits for 3 s: no more passes that tick
#     than the two limits allow (3 + one per interval begun, each);
#   - 40 idle queues get no tick meanwhile;
#   - faults with fsync on and a ledger (sent in the send's transaction,
#     acked in the ack's): the ticker SIGKILLed mid-burst (a crash restart
#     of the server), then the postmaster SIGKILLed mid-burst: no event
#     lost or delivered twice, and a commit is ticked within 1 s again
#     after each restart.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;

my $node = PgqueNode->new_preloaded('tick_floor', conf => q{
fsync = on
restart_after_crash = on
pgque_bgw.launcher_naptime = '1s'
pgque_bgw.tick_interval = '3s'
pgque_bgw.ticker_probe_interval = '3600s'
pgque_bgw.ticker_stalled_after = '3600s'
});
$node->install('postgres');
ok($node->wait_for_workers('postgres'), 'the workers run');

$node->make_ledger('q');
$node->safe_psql('postgres', q{
    select pgque.create_queue('q');
    select pgque.set_queue_config('q', 'ticker_idle_period', '1 hour');
    select pgque.subscribe('q', 'c');
    select pgque.create_queue('idle_' || i) from generate_series(1, 40) i;
    select pgque.set_queue_config('idle_' || i, 'ticker_idle_period', '1 hour')
      from generate_series(1, 40) i;

    -- one event per transaction, each with its ledger row, for secs seconds
    create procedure burst(secs float8) language plpgsql as $$
    declare
        t_end timestamptz := clock_timestamp() + secs * interval '1 second';
    begin
        while clock_timestamp() < t_end loop
            insert into sent values (pgque.send('q', 'burst'));
            commit;
        end loop;
    end $$;
});
my $qid = $node->safe_psql('postgres', q{select queue_id from pgque.queue where queue_name = 'q'});

# every queue new to the ticker is visited once: wait for the idle ones' first tick
ok(PgqueNode::poll_until(sub {
	$node->safe_psql('postgres', q{
	    select count(distinct tick_queue) from pgque.tick t join pgque.queue q on q.queue_id = t.tick_queue
	     where q.queue_name like 'idle_%'}) eq '40';
}), 'the idle queues had their first tick');
my $idle_ticks = sub {
	$node->safe_psql('postgres', q{
	    select count(*) from pgque.tick t join pgque.queue q on q.queue_id = t.tick_queue
	     where q.queue_name like 'idle_%'});
};
my $idle_before = $idle_ticks->();

# send one event and commit; -> the seconds from the commit to the first
# tick whose snapshot sees it
sub tick_wait
{
	my ($t0, $xid) = split /\|/, $node->safe_psql('postgres',
		q{insert into sent values (pgque.send('q', 'single'))
		  returning extract(epoch from clock_timestamp()), pg_current_xact_id()});
	my $t1 = '';
	PgqueNode::poll_until(sub {
		$t1 = $node->safe_psql('postgres',
			"select extract(epoch from min(tick_time)) from pgque.tick
			  where tick_queue = $qid and pg_visible_in_snapshot('$xid'::xid8, tick_snapshot)");
		return $t1 ne '';
	}, 30, 0.01);
	return $t1 eq '' ? 999 : $t1 - $t0;
}

# tick_time is the ticker's transaction start, a little before its commit:
# the wait is measured to it, on the server's clock
Time::HiRes::sleep(3.5);		# a window with no commit: the limit's credit back
my @waits;
my $next = Time::HiRes::time();
for my $i (1 .. 8)
{
	push @waits, tick_wait();
	# one commit a second: past the floor (600 ms), within the interval (3 s)
	$next += 1;
	Time::HiRes::sleep($next - Time::HiRes::time()) if $next > Time::HiRes::time();
}
diag(sprintf('figure: commit to tick, one commit a second, tick_interval 3 s: %s s',
		join(' ', map { sprintf('%.3f', $_) } @waits)));
my @late = grep { $_ >= 1 } @waits;
is(scalar(@late), 0, 'each of 8 commits a second apart is ticked within 1 s, the 4th to 8th too (the limit alone: 2 s and more)');

# a burst: commits back to back for 3 s; passes that ticked the queue
Time::HiRes::sleep(9.5);		# the credit back
my $from = $node->safe_psql('postgres', "select coalesce(max(tick_id), 0) from pgque.tick where tick_queue = $qid");
my $t0 = Time::HiRes::time();
$node->safe_psql('postgres', 'call burst(3)');
my $secs = Time::HiRes::time() - $t0;
my $last_tick_id;
ok(PgqueNode::poll_until(sub {
	# the burst's last commit is ticked too
	$node->safe_psql('postgres', qq{
	    select t.tick_event_seq >= (select max(ev_id) from sent)
	      from pgque.tick t where t.tick_queue = $qid order by t.tick_id desc limit 1}) eq 't';
}), 'the burst is ticked to its end');
my $ticks = $node->safe_psql('postgres', "select count(*) from pgque.tick where tick_queue = $qid and tick_id > $from");
# each of the two limits: a burst of 3, then one pass per interval begun;
# back-to-back commits use the idle commits' limit only when the loop
# stalls for the floor (the first commit, or a loaded machine)
my $allowed = 2 * (3 + int($secs / 3 + 1));
diag(sprintf('figure: burst of %.1f s, tick_interval 3 s: %d ticks (the rule allows %d)', $secs, $ticks, $allowed));
cmp_ok($ticks, '<=', $allowed, "a 3 s burst ticks at most 3 + one per interval begun, on each limit ($ticks)");
cmp_ok($ticks, '>=', 2, 'and more than once');
is($idle_ticks->(), $idle_before, 'the 40 idle queues got no tick');

# the ledger: everything sent so far is delivered once
is($node->safe_psql('postgres', 'select drain() > 0'), 't', 'the consumer drains');

# a fault in the middle of a burst; then the ledger and the wake-up
sub fault
{
	my ($name, $kill) = @_;
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start(
		[ 'psql', '-X', '-q', '-d', $node->connstr('postgres'), '-c', 'call burst(20)' ],
		'>', \$out, '2>', \$err);
	my $n0 = $node->safe_psql('postgres', 'select count(*) from sent');
	ok(PgqueNode::poll_until(sub {
		$node->safe_psql('postgres', 'select count(*) from sent') > $n0 + 200;
	}), "$name: the burst runs");
	$kill->();
	$h->finish;
	ok(PgqueNode::wait_back($node), "$name: the server is back");
	ok($node->wait_for_workers('postgres'), "$name: the workers run again");
	# the restarted ticker's first pass probes every queue: it ticks what
	# the burst committed before the kill
	ok(PgqueNode::poll_until(sub {
		$node->safe_psql('postgres', qq{
		    select coalesce(max(t.tick_event_seq), 0) >= (select max(ev_id) from sent)
		      from pgque.tick t where t.tick_queue = $qid}) eq 't';
	}), "$name: what was sent before is ticked");
	my $w = tick_wait();
	diag(sprintf('figure: %s: commit to tick after the restart: %.3f s', $name, $w));
	cmp_ok($w, '<', 1, "$name: a commit is ticked within 1 s again");
	$node->safe_psql('postgres', 'select drain()');
	is($node->safe_psql('postgres', 'select count(*) from sent s where not exists (select from acked a where a.ev_id = s.ev_id)'),
		'0', "$name: every event sent was delivered and acked");
	is($node->safe_psql('postgres', 'select count(*) - count(distinct ev_id) from acked'),
		'0', "$name: none twice");
}

fault('ticker SIGKILLed', sub {
	my $pid = $node->safe_psql('postgres',
		q{select pid from pg_stat_activity where backend_type = 'pgque_bgw ticker' and datname = 'postgres'});
	ok($pid =~ /^\d+$/, 'the ticker has a pid');
	$node->kill9_and_wait($pid);
});

fault('postmaster SIGKILLed', sub {
	# the server's processes: its children outlive it a moment, holding
	# its shared memory and lock file; back once they exited and the
	# postmaster was reaped
	my @pids = ($node->{_pid}, split /\n/, $node->safe_psql('postgres',
		'select pid from pg_stat_activity where pid <> pg_backend_pid()'));
	my $gone = $node->kill9_and_wait;
	ok(!grep({ PgqueNode::running($_) } @pids) && $gone->{exited} < 60,
		'the postmaster and its children are gone');
	$node->start;
});

is($node->safe_psql('postgres', 'select count(*) from sent'),
	$node->safe_psql('postgres', 'select count(*) from acked'), 'the ledger: sent = acked');

$node->stop('fast');
done_testing();
