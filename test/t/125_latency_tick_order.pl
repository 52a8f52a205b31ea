# tap-lane: timed
# The busy queue's tick does not wait behind a pass over idle queues
# (ADR 0108).  The ticker visits the queues a commit marked first, each
# in its own transaction, before the sequence probe and the idle ticks;
# a round over idle queues stops between two units when a commit waits,
# and the next pass goes on with it after that commit's queues.
#   - 200 idle queues whose idle ticks fall due together every second
#     (64 a transaction), the busy queue created last (the highest id: the
#     last chunk) and sent to every few milliseconds: no tick of the busy
#     queue is written in a transaction with an idle queue's (before: the
#     busy queue rode in the last chunk of the idle pass), and each of its
#     commits is ticked within a bound;
#   - a commit storm (back-to-back commits for 4 s, tick_interval 200 ms):
#     ADR 0087's bound holds (at most two passes per interval, bursts of
#     3 each) and the idle queues still get their idle ticks (a writer's
#     storm does not starve them), 200 in chunks or 3 visited one by one;
#   - receive_wait remembers its queue's id for the next call: a queue
#     dropped and created again under the same name is waited for by its
#     new id (the look corrects the hint), woken by the new queue's tick;
#   - a woken queue's visit owed past its pass (ADR 0136): the busy
#     queue's row held locked by another transaction when its commit wakes
#     the ticker, beside 16 queues whose idle ticks fall due at every pass
#     (more than 8: a chunk, their ids below the busy queue's).  Once the
#     row is free the busy queue's tick is written in a transaction of its
#     own (round 1 of a later pass; before, it rode in the idle chunk of
#     the next pass), within ticker_max_lag (3 s, the poll) of the release;
#   - faults with fsync on and a ledger: the ticker SIGKILLed in the
#     middle of a storm beside the idle queues: nothing lost or delivered
#     twice, and a commit is ticked within the bound again after.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes;

my $node = PgqueNode->new_preloaded('tick_order', conf => q{
fsync = on
restart_after_crash = on
track_commit_timestamp = on
pgque_bgw.launcher_naptime = '1s'
pgque_bgw.tick_interval = '200ms'
pgque_bgw.ticker_probe_interval = '3600s'
pgque_bgw.ticker_stalled_after = '3600s'
});
$node->install('postgres');
ok($node->wait_for_workers('postgres'), 'the workers run');

$node->make_ledger('busy');
$node->safe_psql('postgres', q{
    select count(pgque.create_queue('idle_' || i)) from generate_series(1, 200) i;
    select count(pgque.set_queue_config('idle_' || i, 'ticker_idle_period', '1 second'))
      from generate_series(1, 200) i;
    select pgque.create_queue('busy');
    select pgque.set_queue_config('busy', 'ticker_idle_period', '1 hour');
    select pgque.subscribe('busy', 'c');

    -- one event per transaction, each with its ledger row, for secs
    -- seconds, a pause of pause_s seconds after each
    create procedure send_for(secs float8, pause_s float8) language plpgsql as $$
    declare
        t_end timestamptz := clock_timestamp() + secs * interval '1 second';
    begin
        while clock_timestamp() < t_end loop
            insert into sent values (pgque.send('busy', 'e'));
            commit;
            if pause_s > 0 then
                perform pg_sleep(pause_s);
            end if;
        end loop;
    end $$;
});
my $qid = $node->safe_psql('postgres', q{select queue_id from pgque.queue where queue_name = 'busy'});
ok(PgqueNode::poll_until(sub {
	$node->safe_psql('postgres', q{
	    select count(distinct tick_queue) from pgque.tick t join pgque.queue q on q.queue_id = t.tick_queue
	     where q.queue_name like 'idle_%'}) eq '200';
}), 'the 200 idle queues had their first tick');

# the busy queue's ticks written in a transaction that also ticked an idle
# queue, since tick id $from
sub shared_ticks
{
	my ($from) = @_;
	return $node->safe_psql('postgres', qq{
	    select count(*) from pgque.tick b
	     where b.tick_queue = $qid and b.tick_id > $from
	       and exists (select from pgque.tick i
	                    where i.tick_queue <> $qid and i.xmin = b.xmin)});
}

# the busy queue's events since event $ev: ms from the send's commit to
# the commit of the first tick that sees it (p99, max)
sub commit_to_tick
{
	my ($ev) = @_;
	return split /\|/, $node->safe_psql('postgres', qq{
	    with e as (
	        select extract(epoch from pg_xact_commit_timestamp(t.xmin)
	                                  - pg_xact_commit_timestamp((ev.ev_txid::text::bigint % 4294967296)::text::xid)) * 1000 as ms
	          from pgque.event_template ev
	          cross join lateral (select t.xmin from pgque.tick t
	                               where t.tick_queue = $qid and pg_visible_in_snapshot(ev.ev_txid, t.tick_snapshot)
	                               order by t.tick_id limit 1) t
	         where ev.ev_id > $ev and ev.ev_id in (select ev_id from sent))
	    select round(percentile_cont(0.99) within group (order by ms)::numeric, 1), round(max(ms)::numeric, 1),
	           count(*) from e});
}

sub busy_ticks_to_end
{
	return PgqueNode::poll_until(sub {
		$node->safe_psql('postgres', qq{
		    select coalesce(max(t.tick_event_seq), 0) >= (select max(ev_id) from sent)
		      from pgque.tick t where t.tick_queue = $qid}) eq 't';
	});
}

# 1. a send every 5 ms for 6 s beside the idle passes (one a second)
my $from = $node->safe_psql('postgres', "select coalesce(max(tick_id), 0) from pgque.tick where tick_queue = $qid");
my $idle_from = $node->safe_psql('postgres', 'select clock_timestamp()');
$node->safe_psql('postgres', 'call send_for(6, 0.005)');
ok(busy_ticks_to_end(), 'the sends are ticked to their end');
my $idle_passes = $node->safe_psql('postgres', qq{
    select count(distinct xmin::text) from pgque.tick where tick_queue <> $qid and tick_time > '$idle_from'});
my $busy_ticks = $node->safe_psql('postgres', "select count(*) from pgque.tick where tick_queue = $qid and tick_id > $from");
my ($p99, $max, $n) = commit_to_tick(0);
diag("figure: 6 s of sends every 5 ms beside 200 idle queues ticking every second: $busy_ticks ticks of the busy queue, "
	  . "$idle_passes idle-tick transactions; commit to tick p99 $p99 ms, max $max ms over $n events");
cmp_ok($idle_passes, '>=', 8, 'the idle queues were ticked meanwhile, in several transactions');
is(shared_ticks($from), '0', 'no tick of the busy queue was written in a transaction of idle ticks');
cmp_ok($max, '<', 2000, 'each commit is ticked within 2 s');

# 2. a commit storm: ADR 0087's bound, and the idle ticks go on
Time::HiRes::sleep(2);			# the limits' credit back
$from = $node->safe_psql('postgres', "select coalesce(max(tick_id), 0) from pgque.tick where tick_queue = $qid");
$idle_from = $node->safe_psql('postgres', 'select clock_timestamp()');
my $t0 = Time::HiRes::time();
$node->safe_psql('postgres', 'call send_for(4, 0)');
my $secs = Time::HiRes::time() - $t0;
ok(busy_ticks_to_end(), 'the storm is ticked to its end');
my $ticks = $node->safe_psql('postgres', "select count(*) from pgque.tick where tick_queue = $qid and tick_id > $from");
my $allowed = 2 * (3 + int($secs / 0.2 + 1));
my $idle_ticked = $node->safe_psql('postgres', qq{
    select count(distinct tick_queue) from pgque.tick where tick_queue <> $qid and tick_time > '$idle_from'});
diag(sprintf('figure: storm of %.1f s, tick_interval 200 ms: %d ticks of the busy queue (the rule allows %d); %d of 200 idle queues ticked',
		$secs, $ticks, $allowed, $idle_ticked));
cmp_ok($ticks, '<=', $allowed, "the storm ticks at most 3 + one per interval begun, on each limit ($ticks)");
cmp_ok($ticks, '>=', 2, 'and more than once');
is($idle_ticked, '200', 'every idle queue had its idle tick during the storm');
is(shared_ticks($from), '0', 'no tick of the storm shared a transaction with idle ticks');
is($node->safe_psql('postgres', 'select drain() > 0'), 't', 'the consumer drains');

# 2b. the same with few idle queues due (visited one by one, not in
# chunks): the round over them runs its first unit whatever the storm
$node->safe_psql('postgres', q{
    select count(pgque.set_queue_config('idle_' || i, 'ticker_idle_period', '1 hour'))
      from generate_series(1, 200) i;
    select count(pgque.create_queue('few_' || i)) from generate_series(1, 3) i;
    select count(pgque.set_queue_config('few_' || i, 'ticker_idle_period', '1 second'))
      from generate_series(1, 3) i;});
ok(PgqueNode::poll_until(sub {
	$node->safe_psql('postgres', q{
	    select count(distinct tick_queue) from pgque.tick t join pgque.queue q on q.queue_id = t.tick_queue
	     where q.queue_name like 'few_%'}) eq '3';
}), 'the 3 few queues had their first tick');
Time::HiRes::sleep(2);
$idle_from = $node->safe_psql('postgres', 'select clock_timestamp()');
$node->safe_psql('postgres', 'call send_for(4, 0)');
# ticks per queue, fewest first
my $few = $node->safe_psql('postgres', qq{
    select string_agg(n::text, ' ' order by n) from (
        select count(t.tick_id) as n from pgque.queue q
          left join pgque.tick t on t.tick_queue = q.queue_id and t.tick_time > '$idle_from'
         where q.queue_name like 'few_%' group by q.queue_id) x});
diag("figure: storm of 4 s beside 3 queues idle-ticking every second: ticks per queue $few (without the first unit of a round: 4 ticks of the 3 together)");
my ($fewest) = split / /, $few;
cmp_ok($fewest, '>=', 2, 'each of the 3 few idle queues had its idle ticks during the storm, 2 or more in 4 s (visited one by one: the first unit of a round runs)');
is($node->safe_psql('postgres', 'select drain() > 0'), 't', 'the consumer drains again');

# 3. receive_wait's remembered queue id, the queue dropped and created again
{
	my ($out, $err) = ('', '');
	$node->safe_psql('postgres', q{
	    select pgque.create_queue('rq');
	    select pgque.set_queue_config('rq', 'ticker_idle_period', '1 hour');
	    select pgque.subscribe('rq', 'c');});
	# the first call waits 1 s (and remembers the queue's id), the second
	# starts after the queue was made again
	my $in = q{select count(*) from pgque.receive_wait('rq', 'c', 10, '1 second');
\! sleep 4
select extract(epoch from clock_timestamp()) as t0 \gset
select count(*) from pgque.receive_wait('rq', 'c', 10, '30 seconds');
select round((extract(epoch from clock_timestamp()) - :t0)::numeric, 1) as waited;
};
	# a file: IPC::Run feeds a scalar's input only when pumped
	my $file = $node->basedir . '/wait_again.sql';
	PostgreSQL::Test::Utils::append_to_file($file, $in);
	my $h = IPC::Run::start([ 'psql', '-X', '-q', '-A', '-t', '-d', $node->connstr('postgres'), '-f', $file ],
		'>', \$out, '2>', \$err);
	Time::HiRes::sleep(2.5);
	# the first call remembered the old id; the queue is made again
	$node->safe_psql('postgres', q{
	    select pgque.unsubscribe('rq', 'c');
	    select pgque.drop_queue('rq');
	    select pgque.create_queue('rq');
	    select pgque.set_queue_config('rq', 'ticker_idle_period', '1 hour');
	    select pgque.subscribe('rq', 'c');});
	Time::HiRes::sleep(5);			# the second call waits by now
	$node->safe_psql('postgres', q{select pgque.send('rq', 'x')});
	$h->finish;
	my @l = split /\n/, $out;
	diag("figure: receive_wait on the queue made again: got $l[-2] event(s) after $l[-1] s (psql: " . join(" ", @l) . ") $err");
	is($l[-2], '1', 'receive_wait on a queue dropped and created again gets its event');
	cmp_ok($l[-1], '<', 20, 'woken by the new queue\'s tick, not at its 30 s timeout');
}

# 4. a woken queue whose row another transaction holds (ADR 0136)
{
	$node->safe_psql('postgres', q{
	    select count(pgque.set_queue_config('idle_' || i, 'ticker_idle_period', '100 milliseconds'))
	      from generate_series(1, 16) i;});
	my $idle1 = $node->safe_psql('postgres', q{select queue_id from pgque.queue where queue_name = 'idle_1'});
	ok(PgqueNode::poll_until(sub {
		$node->safe_psql('postgres', qq{
		    select count(*) >= 2 from pgque.tick where tick_queue = $idle1
		       and tick_time > clock_timestamp() - interval '1 second'}) eq 't';
	}), 'the 16 queues idle-tick at every pass');

	my ($in, $out, $err) = ('', '', '');
	my $locker = IPC::Run::start(
		[ 'psql', '-X', '-q', '-A', '-t', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('postgres') ],
		'<', \$in, '>', \$out, '2>', \$err);
	$in .= "begin;
select 'locked' from pgque.queue where queue_name = 'busy' for no key update;
";
	ok(PgqueNode::poll_until(sub { $locker->pump_nb; $out =~ /locked/ }),
		'another transaction holds the busy queue\'s row');

	my $from = $node->safe_psql('postgres', "select coalesce(max(tick_id), 0) from pgque.tick where tick_queue = $qid");
	my $ev = $node->safe_psql('postgres', q{insert into sent values (pgque.send('busy', 'row locked')) returning ev_id});
	my $sent_at = $node->safe_psql('postgres', 'select clock_timestamp()');
	# two idle ticks of one queue after the commit: a pass began after it
	# (the second one's pass started one idle period after the first tick),
	# so the commit's bit was taken while the row was locked
	ok(PgqueNode::poll_until(sub {
		$node->safe_psql('postgres', qq{
		    select count(*) >= 2 from pgque.tick where tick_queue = $idle1 and tick_time > '$sent_at'}) eq 't';
	}), 'a pass visited the woken queue while its row was locked');
	is($node->safe_psql('postgres', "select count(*) from pgque.tick where tick_queue = $qid and tick_event_seq >= $ev"),
		'0', 'no tick of the busy queue while its row is locked (not waited for)');

	my $released_at = $node->safe_psql('postgres', 'select clock_timestamp()');
	$in .= "commit;
select 'released';
";
	ok(PgqueNode::poll_until(sub { $locker->pump_nb; $out =~ /released/ }), 'the row is released');
	$in .= "\\q\n";
	$locker->finish;
	ok(PgqueNode::poll_until(sub {
		$node->safe_psql('postgres', "select count(*) > 0 from pgque.tick where tick_queue = $qid and tick_event_seq >= $ev") eq 't';
	}), 'the event sent while the row was locked is ticked');
	my $lag = $node->safe_psql('postgres', qq{
	    select round((extract(epoch from pg_xact_commit_timestamp(t.xmin) - '$released_at'::timestamptz) * 1000)::numeric)
	      from pgque.tick t where t.tick_queue = $qid and t.tick_event_seq >= $ev order by t.tick_id limit 1});
	my $with = $node->safe_psql('postgres', qq{
	    select count(*) from pgque.tick i
	     where i.tick_queue <> $qid
	       and i.xmin = (select t.xmin from pgque.tick t where t.tick_queue = $qid and t.tick_event_seq >= $ev
	                      order by t.tick_id limit 1)});
	diag("figure: the row locked, then released: the busy queue ticked $lag ms after the release, with $with idle tick(s) in its transaction");
	is($with, '0', 'its tick is written in a transaction of its own, not in the chunk of idle ticks');
	is(shared_ticks($from), '0', 'no tick of the busy queue shared a transaction with idle ticks');
	cmp_ok($lag, '<', 3000, 'ticked within ticker_max_lag (3 s) of the release');

	$node->safe_psql('postgres', q{
	    select count(pgque.set_queue_config('idle_' || i, 'ticker_idle_period', '1 hour'))
	      from generate_series(1, 16) i;});
	is($node->safe_psql('postgres', 'select drain() > 0'), 't', 'the consumer drains the event');
}

# 5. the ticker SIGKILLed in the middle of a storm beside the idle queues
{
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start(
		[ 'psql', '-X', '-q', '-d', $node->connstr('postgres'), '-c', 'call send_for(20, 0)' ],
		'>', \$out, '2>', \$err);
	my $n0 = $node->safe_psql('postgres', 'select count(*) from sent');
	ok(PgqueNode::poll_until(sub {
		$node->safe_psql('postgres', 'select count(*) from sent') > $n0 + 200;
	}), 'the storm runs');
	my $pid = $node->safe_psql('postgres',
		q{select pid from pg_stat_activity where backend_type = 'pgque_bgw ticker' and datname = 'postgres'});
	ok($pid =~ /^\d+$/, 'the ticker has a pid');
	# back once the postmaster has reaped it: the crash restart has begun
	$node->kill9_and_wait($pid);
	$h->finish;
	ok(PgqueNode::wait_back($node), 'the server is back');
	ok($node->wait_for_workers('postgres'), 'the workers run again');
	ok(busy_ticks_to_end(), 'what was sent before the kill is ticked');
	my $ev = $node->safe_psql('postgres', 'select max(ev_id) from sent');
	$node->safe_psql('postgres', 'call send_for(3, 0.01)');
	ok(busy_ticks_to_end(), 'the sends after the restart are ticked');
	($p99, $max, $n) = commit_to_tick($ev);
	diag("figure: after the restart: commit to tick p99 $p99 ms, max $max ms over $n events");
	cmp_ok($max, '<', 2000, 'a commit is ticked within 2 s again');
	$node->safe_psql('postgres', 'select drain()');
	is($node->safe_psql('postgres', 'select count(*) from sent s where not exists (select from acked a where a.ev_id = s.ev_id)'),
		'0', 'every event sent was delivered and acked');
	is($node->safe_psql('postgres', 'select count(*) - count(distinct ev_id) from acked'),
		'0', 'none twice');
}

done_testing();
