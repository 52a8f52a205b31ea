# make bench's drain compares like with like (issue #30 item 2, ADR 0116):
# against PgQ, whose next_batch hands out a whole tick window, pgque's
# consumer is drained a window a batch too (benchmark/lib.sh's
# pgque_window: receive with max_return the backlog's window), so both
# sides take as many batches and commit as often; the rows of 1,000 a
# batch (pgque, pgque_32_buckets) take a batch per 1,000 events.  The
# drains are lib.sh's own statements (drain_backlog, drain_do) on a real
# server started by lib.sh; batches are counted by the server
# (track_functions: calls of pgque.ack and pgq.finish_batch) and commits by
# pg_stat_database.  Without PgQ installed its half is left out (said so),
# the rest still runs.  Nothing timed.
use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Test::More;
use PgqueNode;

my ($out, $rc) = PgqueNode::bench_probe(<<'SH');
bench_server drain_like 1 "autovacuum = off" "track_functions = all" "max_prepared_transactions = 4"
DRAIN_WINDOW=2000
# make bench's case: producers' transactions in progress at every tick;
# with the keyed unbucketed queue of ADR 0131
DRAIN_KEYED=1 DRAIN_XIP_COMMIT=1 drain_backlog 3 2000
echo "systems=${DRAIN_SYSTEMS[*]}"
counts() {
	"${PSQL[@]}" -F ' ' -c "select coalesce((select calls from pg_stat_user_functions where schemaname = 'pgque' and funcname = 'ack'), 0),
		coalesce((select calls from pg_stat_user_functions where schemaname = 'pgq' and funcname = 'finish_batch'), 0),
		(select xact_commit from pg_stat_database where datname = current_database())"
}
for sys in "${DRAIN_SYSTEMS[@]}"; do
	read -r a0 f0 c0 < <(counts)
	"${PSQL[@]}" -c "$(drain_do "$sys")" >/dev/null
	# a backend's counters reach the server's when it exits, after psql
	for _ in $(seq 1 100); do
		read -r a1 f1 c1 < <(counts)
		[ "$a1$f1" = "$a0$f0" ] || break
		sleep 0.1
	done
	sleep 0.3
	read -r a1 f1 c1 < <(counts)
	echo "batches_$sys=$((a1 - a0 + f1 - f0))"
	echo "commits_$sys=$((c1 - c0))"
done
# every event handed out once: nothing left for any consumer
for q in drain drain_b drain_w drain_k; do
	echo "left_$q=$("${PSQL[@]}" -c "select count(*) from pgque.receive('$q', 'c', 100000)")"
done
if have_pgq; then
	echo "left_pgq=$("${PSQL[@]}" -c "select pgq.next_batch('drain', 'c') is null")"
fi
# a drain with a limit stops at a whole window (drain_instructions.sh's warm-up)
echo "limited=$(unset DRAIN_WINDOW; drain_do pgque_window 4000)"
echo "keyed_sent=$("${PSQL[@]}" -c "select count(*) filter (where ev_extra1 like 'tenant-%') || '/' || count(*) from pgque.event_$("${PSQL[@]}" -c "select queue_id from pgque.queue where queue_name = 'drain_k'")")"
SH
is($rc, 0, 'the probe ran') or diag($out);
my %v = $out =~ /^(\w+)=(.*)$/mg;
my $pgq = ($v{systems} // '') =~ /\bpgq\b/;
like($v{systems}, qr/^pgque pgque_32_buckets pgque_window\b/,
	'drain_backlog makes the window-a-batch queue beside the two of 1,000 a batch');
is($v{batches_pgque}, 6, 'the drain of 1,000 a batch: 3 windows of 2,000 in 6 batches');
is($v{batches_pgque_32_buckets}, 6, 'the 32-bucket queue\'s: the same');
is($v{batches_pgque_window}, 3, 'the window-a-batch drain: one batch a window');
is($v{batches_pgque_keyed}, 6, 'DRAIN_KEYED=1: the keyed unbucketed queue drained as the 32-bucket one, 1,000 a batch');
is($v{keyed_sent}, '6000/6000', '... its events keyed as the 32-bucket queue\'s');
# the commits a drain makes: one a batch, and one of the psql session that
# reads the counters (the same in every row)
is($v{commits_pgque} - $v{commits_pgque_window}, 3, 'it commits a window\'s worth less often: 3 commits fewer');
is($v{"left_$_"}, 0, "every event of queue $_ handed out") for qw(drain drain_b drain_w drain_k);
like($v{limited}, qr/pgque\.receive\('drain_w', 'c', 10000\).*exit when t >= 4000;/,
	'drain_do of pgque_window asks for the backlog window of make bench (10,000) by default');
SKIP:
{
	skip 'PgQ is not installed in this server (postgresql-15-pgq3): the comparison with it is not run', 3 unless $pgq;
	is($v{batches_pgq}, 3, 'PgQ\'s drain: one batch a window');
	is($v{commits_pgq}, $v{commits_pgque_window}, 'PgQ and the window-a-batch drain commit as often: like with like');
	is($v{left_pgq}, 't', 'PgQ handed out every event: no batch left');
}

done_testing();
