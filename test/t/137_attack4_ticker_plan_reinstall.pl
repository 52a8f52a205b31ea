# Second reader of the session's branches (ADR 0114): the ticker keeps the
# plan of its one-queue visit for its process (ADR 0108).  The extension
# dropped (CASCADE) and created again in its database while the same
# ticker process runs (by hand: it did; under the launcher's restart it
# may be a new one): the plan names functions that are gone, and the plan
# cache must find the new ones; the new queue's first events are ticked,
# and each is received once.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PgqueNode->new_fast_ticker('attack4_reinstall', 'rq');
ok($node->wait_for_workers('postgres'), 'the workers run');

my $ticker_pid = sub {
	return $node->safe_psql('postgres', q{
        select coalesce(max(pid), 0) from pg_stat_activity
         where backend_type = 'pgque_bgw ticker' and datname = 'postgres'});
};

# a send in its own transaction; then receive (in parts of 100) until a
# batch hands it out: its payloads, the batch acked
my $delivered = sub {
	my ($q, $payload) = @_;
	$node->safe_psql('postgres', "select pgque.send('$q', '$payload')");
	my $got = '';
	PgqueNode::poll_until(sub {
		$got = $node->safe_psql('postgres', qq{
            with m as (select * from pgque.receive('$q', 'c', 100))
            select coalesce(string_agg(payload, ',' order by msg_id), '') || coalesce('|' || max(batch_id), '')
              from m});
		return $got =~ /\|/;
	}, 10);
	my ($payloads, $batch) = split /\|/, $got;
	$node->safe_psql('postgres', "select pgque.ack($batch)") if $batch;
	return $payloads // '';
};

is($delivered->('rq', 'before'), 'before', 'the first install: the event is ticked and received');
my $pid = $ticker_pid->();
ok($pid > 0, 'the ticker runs');
# the visit plan is made by now: one more tick of the queue
is($delivered->('rq', 'before2'), 'before2', 'and again');

$node->safe_psql('postgres', 'drop extension pgque_bgw cascade');
$node->safe_psql('postgres', 'create extension pgque_bgw');
$node->safe_psql('postgres', q{select pgque.create_queue('rq2'), pgque.subscribe('rq2', 'c')});
is($delivered->('rq2', 'after'), 'after', 'after DROP and CREATE EXTENSION: the new queue\'s event is ticked and received');
# the launcher may restart the database's workers when the extension is
# gone (then a new process makes a new plan) or not (then the kept plan
# must find the new functions): both are served, which one is timing
my $pid2 = $ticker_pid->();
ok($pid2 > 0, 'a ticker runs');
diag($pid2 == $pid ? 'the same ticker process (its kept plan re-planned)' : 'a new ticker process');
is($delivered->('rq2', 'after2'), 'after2', 'and again, once');
is($node->safe_psql('postgres', q{select count(*) from pgque.receive('rq2', 'c', 100)}), '0',
   'nothing more (each event once)');
my $log = slurp_file($node->logfile);
unlike($log, qr/cache lookup failed|could not find function|unrecognized/, 'no stale plan error in the log');

done_testing();
