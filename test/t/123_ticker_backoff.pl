# The ticker's retry storm (issue 30, ADR 0100): a queue whose visit fails
# (any error) was visited again at every poll, a WARNING each: with a 10 ms
# tick_interval ~100 a second, thousands of log lines a minute, a core
# burnt, and (its idle deadline passed for good) the ticker woke every
# tick_interval for it.  A failing queue now backs off (the poll doubled
# per failure in a row, up to 30 s), is visited alone (never in a chunk of
# the healthy ones), and from its third failure in a row is recorded as
# the failed step "tick" of the queue: the maint_failed alert, subject
# tick/queue, which clears at its next successful visit (also after a
# restart of the server, from the recorded row).
#   - beside it a healthy queue keeps its ticks: every send ticked within
#     a second, all along;
#   - the failing queue's "ticking queue" lines in the server log stay
#     bounded (fails before the fix: hundreds a second);
#   - the alert opens and clears; the ticker's memory is flat.
# The failure is made by a check constraint on pgque.tick that refuses the
# bad queue's ticks (a superuser's: what an owner who broke a table of the
# queue gets is the same error path of the unit).
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);

my $node = PgqueNode->new_fast_ticker('ticker_backoff', 'good', 'bad');
$node->safe_psql('postgres', q{
    select pgque.set_queue_config('good', 'ticker_max_lag', '10 ms');
    select pgque.set_queue_config('bad', 'ticker_max_lag', '10 ms');
});
my $bad = $node->safe_psql('postgres', q{select queue_id from pgque.queue where queue_name = 'bad'});
my $good_ticks = q{select count(*) from pgque.tick t join pgque.queue q on q.queue_id = t.tick_queue where q.queue_name = 'good'};
my $bad_ticks = q{select count(*) from pgque.tick t join pgque.queue q on q.queue_id = t.tick_queue where q.queue_name = 'bad'};
ok($node->poll_query_until('postgres', "select ($good_ticks) >= 1 and ($bad_ticks) >= 1"),
	'the ticker runs');

sub count_lines
{
	my ($from) = @_;
	my $log = slurp_file($node->logfile, $from);
	my @l = ($log =~ /ticking queue "bad"/g);
	return scalar @l;
}

# the healthy queue: a send, ticked within a second, each time
sub good_ticked
{
	my $before = $node->safe_psql('postgres', $good_ticks);
	$node->safe_psql('postgres', q{select pgque.send('good', 'x')});
	return PgqueNode::poll_until(sub { $node->safe_psql('postgres', $good_ticks) > $before }, 1, 0.02);
}

sub ticker_memory
{
	return $node->safe_psql('postgres', q{select bytes from pgque._worker_memory() where worker = 'ticker'}) || 0;
}

# break it: every tick of the bad queue fails
my $bad_before = $node->safe_psql('postgres', $bad_ticks);
$node->safe_psql('postgres', qq{
    alter table pgque.tick add constraint reliab2_refuse check (tick_queue <> $bad) not valid});
my $log_offset = -s $node->logfile;
$node->safe_psql('postgres', q{select pgque.send('bad', 'x')});

my ($late, $rounds) = (0, 0);
# the ticker's memory sampled every round after a 10 s warm-up; compared as
# TAP 050 does: the lowest figure of the first and of the last 8 s (a
# single sample can land on a pass's transient peak)
my (@mem_first, @mem_last);
my $t0 = time();
while (time() - $t0 < 40)
{
	$late++ unless good_ticked();
	$rounds++;
	my $at = time() - $t0;
	push @mem_first, ticker_memory() if $at >= 10 && $at < 18;
	push @mem_last, ticker_memory() if $at >= 32;
	# the bad queue is marked again and again (a commit each round)
	$node->safe_psql('postgres', q{select pgque.send('bad', 'x')}) if $rounds % 5 == 0;
	sleep(0.2);
}
diag('figure: the ticker\'s memory, first window ' . join(' ', @mem_first) . '; last window ' . join(' ', @mem_last));
my ($mem_from) = sort { $a <=> $b } @mem_first;
my ($mem_to) = sort { $a <=> $b } @mem_last;
$mem_from //= 0;
$mem_to //= -1;
is($late, 0, "the healthy queue is ticked within a second of each of $rounds sends");
my $lines = count_lines($log_offset);
cmp_ok($lines, '>=', 3, "the failing queue is visited again ($lines lines)");
# 10 ms doubled: 13 visits in the first 41 s (before the fix: thousands)
cmp_ok($lines, '<=', 16, "... and its log lines stay bounded over 40 s ($lines lines)");
is($node->safe_psql('postgres', $bad_ticks), $bad_before, 'the bad queue has no new tick');
ok($node->poll_query_until('postgres', q{
       select count(*) = 1 from pgque.alerts
        where kind = 'maint_failed' and queue_name = 'bad' and details->>'step' = 'tick'}),
   'the maint_failed alert is open for tick/bad');
is($node->safe_psql('postgres', q{select subject || ' ' || (details->>'sqlstate') from pgque.alert where kind = 'maint_failed'}),
	'tick/bad 23514', '... its subject and the error\'s SQLSTATE');
is($node->safe_psql('postgres', q{select count(*) from pgque.alerts where kind = 'maint_failed' and queue_name = 'good'}),
	'0', 'no alert for the healthy queue');
cmp_ok(scalar(@mem_first) * scalar(@mem_last), '>', 0, 'the ticker published its memory in both windows');
cmp_ok($mem_to - $mem_from, '<=', 32768, "the ticker's memory is flat (lowest $mem_from -> $mem_to bytes)");

# a restart while it fails: the new ticker knows the recorded failure
$node->restart;
$log_offset = -s $node->logfile;
$node->safe_psql('postgres', q{select pgque.send('bad', 'x')});
$t0 = time();
$late = 0;
$rounds = 0;
while (time() - $t0 < 10)
{
	$late++ unless good_ticked();
	$rounds++;
	sleep(0.2);
}
is($late, 0, "after a restart: the healthy queue still ticked within a second ($rounds sends)");
$lines = count_lines($log_offset);
cmp_ok($lines, '<=', 12, "... the failing queue's lines bounded over 10 s ($lines)");
is($node->safe_psql('postgres', q{select count(*) from pgque.alerts where kind = 'maint_failed' and queue_name = 'bad'}),
	'1', '... its alert still open');

# repaired: ticked at its next retry (30 s at most), the alert clears
$node->safe_psql('postgres', q{alter table pgque.tick drop constraint reliab2_refuse});
ok($node->poll_query_until('postgres', "select ($bad_ticks) > $bad_before"), 'repaired: the bad queue is ticked again');
ok($node->poll_query_until('postgres', q{
       select count(*) = 0 from pgque.alerts where kind = 'maint_failed'}),
   '... and its alert clears');
is($node->safe_psql('postgres', q{select count(*) from pgque.alert where kind = 'maint_failed' and cleared_at is not null}),
	'1', '... one alert, opened once and cleared once');

$node->stop('fast');
done_testing();
