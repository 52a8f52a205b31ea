# The bench's own arithmetic (issue #30 item 8): benchmark/targets.sh reads
# a results CSV into met / not met / not run, and benchmark/outside.sh's
# report takes the medians, min..max and agreement with a make bench run
# that it should, from synthetic CSVs.  No server, nothing timed.
use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Test::More;

my $root = "$ENV{PGQUE_SRC}/..";
my $dir = PostgreSQL::Test::Utils::tempdir;

sub write_file
{
	my ($path, $text) = @_;
	open my $fh, '>', $path or die "$path: $!";
	print $fh $text;
	close $fh;
}

# the rows of a markdown table, by their first column that is not an issue
# number: { label => [columns] }
sub table_rows
{
	my ($text, $key_col) = @_;
	my %rows;
	for my $line (split /\n/, $text)
	{
		next unless $line =~ /^\| / && $line !~ /^\|---/;
		my @c = map { s/^\s+|\s+$//gr } split /\|/, $line;
		shift @c;    # before the first |
		$rows{ $c[$key_col] } = \@c;
	}
	return \%rows;
}

# ---- benchmark/targets.sh -------------------------------------------------
write_file("$dir/results.csv", <<'CSV');
workload,system,clients,events_per_sec,wal_bytes_per_event
produce_1,pgque send,1,950,1
produce_1,plain INSERT,1,1000,1
produce_1,pgque send,2,900,1
produce_1,plain INSERT,2,1000,1
drain,pgque receive/ack,1,300,
drain,pgque receive/ack per window,1,250,
drain,PgQ next/get/finish,1,100,
drain,pgque receive/ack 32 buckets,1,94,
partition_buffers_per_event,pk_bucketed N=32,1,0.24,
partition_buffers_per_event,pk_bucketed N=1,1,0.2,
partition_capacity,2 sessions,2,1.31,
latency_p50_ms,pgque 100/s,1,2.0,
latency_p99_ms,pgque 100/s,1,5.1,
proxy_send_1,send via proxy S=1,1,60,
proxy_send_1,send via proxy S=1,1,70,
proxy_send_1,send on a shard,1,100,
proxy_send_1,send on a shard,1,100,
sustained_rate,pgque,8,20000,
sustained_rate_asked,pgque,8,20000,
sustained_catch_up_allowed_s,pgque,8,90,
CSV
my $out = `WORK='$dir' RESULTS='$dir/results.csv' bash -c '. "$root/benchmark/targets.sh" && targets_report' 2>&1`;
is($?, 0, 'targets_report runs on a synthetic CSV') or diag($out);
my $md = slurp_file("$dir/targets.md");
my %t;
for my $line (split /\n/, $md)
{
	next unless $line =~ /^\| #/;
	my @c = map { s/^\s+|\s+$//gr } split /\|/, $line;
	$t{"$c[1] $c[2]"} = [ $c[4], $c[5] ];
}
sub target_is
{
	my ($key, $measured, $verdict, $what) = @_;
	my $row = $t{$key};
	ok($row, "targets.md has the row '$key'") or return;
	is($row->[0], $measured, "$what: measured");
	is($row->[1], $verdict, "$what: $verdict");
}
target_is('#30 send, 1 event/txn, 1 client(s), vs unindexed INSERT', '0.95x (950 / 1000)', 'met',
	'a ratio exactly at its >= goal');
target_is('#30 send, 1 event/txn, 2 client(s), vs unindexed INSERT', '0.90x (900 / 1000)', 'not met',
	'a ratio under its goal');
target_is('#15 send, 1 event/txn, 2 client(s), vs plain INSERT', '0.90x (900 / 1000)', 'met',
	'the same ratio against the lower goal of #15');
target_is('#30 send_batch of 100 vs multi-row INSERT', '', 'not run', 'a pair without rows');
target_is('#30 drain of the backlog, one consumer, vs PgQ, a window a batch', '2.50x (250 / 100)', 'met',
	'drain vs PgQ: the row drained a window a batch as PgQ is, not the one of 1,000 a batch (ADR 0116)');
target_is('#15 drain of the backlog, one consumer, vs PgQ, a window a batch', '2.50x (250 / 100)', 'met',
	'the same pair for #15');
target_is('#15/#30 plain consumer of a 32-bucket queue vs unbucketed', '0.31x (94 / 300)', 'not met',
	'buckets vs unbucketed');
target_is('#30 buffers per event, N = 32 slots vs N = 1', '1.20x (0.24 / 0.2)', 'met',
	'a ratio exactly at its <= goal');
target_is("#30 the cores' ceiling for it: 2 sessions at once vs one session", '1.31x', 'measured',
	'the machine\'s ceiling beside the slot target (ADR 0104)');
target_is('#30 latency p50, 100 ev/s', '2.0 ms', 'met', 'a figure exactly at its maximum');
target_is('#30 latency p99, 100 ev/s', '5.1 ms', 'not met', 'a figure over its maximum');
target_is('#15 latency p99, the same', '', 'not run', 'a figure without its row');
target_is('#30 keyed send through the proxy (S = 1) vs on the shard', '0.65x (65.000 / 100)', 'met',
	'rows of rounds are averaged (60, 70 / 100, 100)');
target_is('#30 sustained: keyed events/s reached, batches of 10', '20000 ev/s', 'met',
	'a figure at its minimum');
target_is('#30 sustained: the stopped slot back within 2 s of lag after', '', 'not met',
	'a workload that ran without its figure is not met, not "not run"');
is(scalar(grep { $_->[1] eq '' } values %t), 0, 'every row has a verdict');

# ---- benchmark/outside.sh --report ----------------------------------------
# per-round rates chosen so that each figure's ratios are round numbers
write_file("$dir/outside.csv", <<'CSV');
# a note the report skips
round,system,clients,events_per_sec
1,pgque send,1,800
1,unindexed INSERT,1,1000
1,PgQ insert_event,1,1000
1,pgque send,2,2000
1,unindexed INSERT,2,2000
1,pgque send_batch,1,50000
1,multi-row INSERT,1,100000
1,pgque receive/ack,1,2000
1,PgQ next/get/finish,1,1000
2,pgque send,1,900
2,unindexed INSERT,1,1000
2,pgque send,2,2400
2,unindexed INSERT,2,2000
2,pgque send_batch,1,46000
2,multi-row INSERT,1,100000
2,pgque receive/ack,1,4000
2,PgQ next/get/finish,1,1000
3,pgque send,1,850
3,unindexed INSERT,1,1000
3,PgQ insert_event,1,850
3,pgque send,2,2200
3,unindexed INSERT,2,2000
3,pgque send_batch,1,56000
3,multi-row INSERT,1,100000
3,pgque receive/ack,1,1000
3,PgQ next/get/finish,1,1000
CSV
write_file("$dir/main.csv", <<'CSV');
workload,system,clients,events_per_sec,wal_bytes_per_event
produce_1,pgque send,1,760,1
produce_1,plain INSERT,1,1000,1
produce_1,pgque send,2,700,1
produce_1,plain INSERT,2,1000,1
produce_100,pgque send_batch,1,40000,1
produce_100,pgque send_batch,1,60000,1
produce_100,plain multi-row INSERT,1,100000,1
drain,pgque receive/ack,1,150,
drain,pgque receive/ack per window,1,450,
drain,PgQ next/get/finish,1,100,
time,producer,1,100,
CSV
$out = `OUTSIDE_NOISE=0.10 bash "$root/benchmark/outside.sh" --report "$dir/outside.csv" "$dir/main.csv" 2>&1`;
is($?, 0, 'outside.sh --report runs on a synthetic CSV') or diag($out);
my $r = table_rows($out, 0);
is_deeply($r->{figure}, [ 'figure', 'median', 'min..max', 'round 1', 'round 2', 'round 3', 'make bench', '' ],
	'a column per round');
is_deeply($r->{'send, 1 ev/txn, 1 client / unindexed INSERT'},
	[ 'send, 1 ev/txn, 1 client / unindexed INSERT', '0.85x', '0.80x..0.90x', '0.80x', '0.90x', '0.85x',
	  '0.76x', 'agrees within noise (0.72x..0.99x with 10% noise)' ],
	'median of three, min..max, and a main ratio inside the widened range agrees');
is_deeply($r->{'send, 1 ev/txn, 2 clients / unindexed INSERT'},
	[ 'send, 1 ev/txn, 2 clients / unindexed INSERT', '1.10x', '1.00x..1.20x', '1.00x', '1.20x', '1.10x',
	  '0.70x', 'disagrees (0.90x..1.32x with 10% noise)' ],
	'a main ratio below the widened range disagrees');
is_deeply($r->{'send / PgQ insert_event, 1 client'},
	[ 'send / PgQ insert_event, 1 client', '0.90x', '0.80x..1.00x', '0.80x', '', '1.00x',
	  '', 'not in the make bench run' ],
	'a round without a rate does not count; the median of two is their mean; no main rows, no comparison');
is_deeply($r->{'send / PgQ insert_event, 2 clients'},
	[ 'send / PgQ insert_event, 2 clients', '', '', '', '', '', '', 'not run' ],
	'a figure without any round is not run');
is_deeply($r->{'send_batch of 100 / multi-row INSERT'},
	[ 'send_batch of 100 / multi-row INSERT', '0.50x', '0.46x..0.56x', '0.50x', '0.46x', '0.56x',
	  '0.50x', 'agrees within noise (0.41x..0.62x with 10% noise)' ],
	'the main run\'s repeated rows are averaged (40000, 60000)');
is_deeply($r->{'drain, one consumer / PgQ'},
	[ 'drain, one consumer / PgQ', '2.00x', '1.00x..4.00x', '2.00x', '4.00x', '1.00x',
	  '4.50x', 'disagrees (0.90x..4.40x with 10% noise)' ],
	'the median is the middle value of the sorted rounds (not the mean, 2.33x); a main ratio above the widened range disagrees');

$out = `OUTSIDE_NOISE=0.5 bash "$root/benchmark/outside.sh" --report "$dir/outside.csv" "$dir/main.csv" 2>&1`;
$r = table_rows($out, 0);
is($r->{'send, 1 ev/txn, 2 clients / unindexed INSERT'}[7], 'agrees within noise (0.50x..1.80x with 50% noise)',
	'the noise margin is OUTSIDE_NOISE');
$out = `bash "$root/benchmark/outside.sh" --report "$dir/outside.csv" 2>&1`;
$r = table_rows($out, 0);
is($r->{'drain, one consumer / PgQ'}[7], 'no make bench run to compare', 'without a make bench run: no comparison');

# ---- benchmark/outside.sh --main: which make bench it compares with --------
mkdir "$dir/res" or die;
write_file("$dir/res/$_", "x\n")
  for qw(20261201T000000Z-targets.md 20261201T000000Z.csv 20261202T000000Z-quick-targets.md
  20261202T000000Z-quick.csv 20261203T000000Z-outside.csv 20261130T000000Z.csv);
is(`bash "$root/benchmark/outside.sh" --main "$dir/res"`, "$dir/res/20261201T000000Z.csv\n",
	'the newest full run, before a newer QUICK one');
unlink "$dir/res/20261201T000000Z-targets.md";
is(`bash "$root/benchmark/outside.sh" --main "$dir/res"`, "$dir/res/20261202T000000Z-quick.csv\n",
	'a QUICK run when there is no full one');
unlink "$dir/res/20261202T000000Z-quick-targets.md";
is(`bash "$root/benchmark/outside.sh" --main "$dir/res"`, '', 'nothing without a targets file');

# ---- bad input: a clear message and exit status 2, before anything runs ---
for my $bad ([ 'OUTSIDE_ROUNDS=0', 'OUTSIDE_ROUNDS=0: a number of rounds' ],
	[ 'OUTSIDE_SECS=1.5', 'OUTSIDE_SECS=1.5: whole seconds' ],
	[ 'OUTSIDE_DRAIN=1500', 'OUTSIDE_DRAIN=1500: events to drain, a multiple of 1,000' ],
	[ 'OUTSIDE_DRAIN=-1000', 'OUTSIDE_DRAIN=-1000: events to drain' ],
	[ 'OUTSIDE_NOISE=10%', 'OUTSIDE_NOISE=10%: a fraction below 1' ],
	[ 'OUTSIDE_NOISE=1.5', 'OUTSIDE_NOISE=1.5: a fraction below 1' ],
	[ 'OUTSIDE_PORT=70000', 'OUTSIDE_PORT=70000: a TCP port number' ])
{
	$out = `env $bad->[0] bash "$root/benchmark/outside.sh" --report "$dir/outside.csv" 2>&1`;
	is($? >> 8, 2, "$bad->[0] is refused");
	like($out, qr/\Q$bad->[1]\E/, "... saying so");
}
$out = `bash "$root/benchmark/outside.sh" --report "$dir/nothing.csv" 2>&1`;
is($? >> 8, 2, '--report of a missing CSV is refused');
like($out, qr/--report needs a readable CSV/, '... saying so');
$out = `bash "$root/benchmark/outside.sh" --report "$dir/outside.csv" "$dir/nothing.csv" 2>&1`;
like($out, qr/no such make bench CSV/, 'a missing make bench CSV is refused, not read as no run');
$out = `bash "$root/benchmark/outside.sh" --bogus 2>&1`;
is($? >> 8, 2, 'an unknown option is refused');
like($out, qr/usage:/, '... with the usage');

# ---- the producer's rounds: a row each, the median of its rounds ----------
# (benchmark/lib.sh round_medians; ADR 0124) rows of distinct values, so
# a mean, the first or the last round gives another figure
write_file("$dir/rounds.csv", join('', map { "$_\n" }
	'produce_1,plain INSERT,1,100,5', 'produce_1,pgque send,1,90,7',
	'produce_1,plain INSERT,1,400,6', 'produce_1,pgque send,1,10,9',
	'produce_1,plain INSERT,1,200,4', 'produce_1,pgque send,1,95,8',
	'produce_100,pgque send_batch,1,1000,3', 'produce_100,pgque send_batch,1,3000,5',
	'drain,PgQ next/get/finish,1,700,', 'drain,PgQ next/get/finish,1,500,', 'drain,PgQ next/get/finish,1,900,'));
$out = `cd '$root' && bash -c '. benchmark/lib.sh && round_medians "$dir/rounds.csv"' 2>&1`;
is($out, "produce_1,plain INSERT,1,200,5\nproduce_1,pgque send,1,90,8\nproduce_100,pgque send_batch,1,2000,4\ndrain,PgQ next/get/finish,1,700,\n",
	'round_medians: each row the median of its rounds (odd and even counts), in the order first seen, an empty WAL field kept empty');

# ---- one source for the server's settings ---------------------------------
my $conf = slurp_file("$root/benchmark/server.conf");
like($conf, qr/^fsync = off$/m, 'benchmark/server.conf holds the bench server\'s settings');
for my $script ('run.sh', 'outside.sh')
{
	my $text = slurp_file("$root/benchmark/$script");
	like($text, qr{benchmark/server\.conf}, "$script reads benchmark/server.conf");
	unlike($text, qr/shared_buffers|max_wal_size|checkpoint_timeout/,
		"$script writes none of its settings itself");
}

done_testing();
