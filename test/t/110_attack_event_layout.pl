# The second reader's round-two attack on the window read (ADR 0082, 0086:
# src/window.c, src/receive.c): an event table whose columns an owner
# altered.  The readers took the window read's rows as pgque.event_template's
# and checked only their number: with ev_data (or ev_type, or any text
# column) altered to bigint, receive() formed a message whose text column
# held the bigint by value and the backend died of SIGSEGV reading it as a
# pointer (every receive of the queue, whoever called it; the postmaster
# restarts every backend), and _window_rows() handed the same rows, typed as
# event_template, to get_batch_events() and the pausing slot's SQL reads.
# Who: a queue table's owner (pgque_owner) or a superuser; every reader then
# crashes the server.  The fix: a window read whose columns are not
# event_template's types is refused with 42804 (datatype_mismatch), in one
# place (pgque_window_check_desc), before any row is formed.
#   - a plain receive (the unordered read into the part cache), one larger
#     than the cache (the ordered read), get_batch_events, a partitioned
#     consumer's receive: 42804, never a crash (fails before the fix: the
#     first receive kills the backend);
#   - the probes, which read for no reader (the ticker's, the watchdog's,
#     queue_health's), get a row of NULLs per event and no error: the queue
#     is still ticked (an error there made the ticker retry it at every
#     poll, a WARNING each, ~100 a second on a dev server);
#   - the server log has no "terminated by signal".
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PgqueNode->new_preloaded('attack_event_layout', conf => q{
pgque_bgw.enabled = off
});
$node->install('postgres');
$node->safe_psql('postgres', q{
    select pgque.create_queue('lq');
    select pgque.subscribe('lq', 'c');
    select pgque.subscribe('lq', 'pgq');
    select pgque.subscribe_partitioned('lq', 'pc', 2);
    select pgque.claim_slot('lq', 'pc', 0, 'w0', '1 hour');
    select pgque.send('lq', 't', 'payload-' || i, 'key-' || i) from generate_series(1, 20) i;
    select pgque.ticker();
});
my $qid = $node->safe_psql('postgres', q{select queue_id from pgque.queue where queue_name = 'lq'});

# the owner's change: every child table of the queue, so that a window over
# two of them is still one UNION of the same types
$node->safe_psql('postgres', join('', map {
	qq{alter table pgque.event_${qid}_$_ no inherit pgque.event_${qid};
	   alter table pgque.event_${qid}_$_ alter column ev_data type bigint using 42;}
} 0 .. 2));

my $log_offset = -s $node->logfile;
my %calls = (
	'receive' => q{select count(*) from pgque.receive('lq', 'c', 10)},
	'receive larger than the part cache' => q{select count(*) from pgque.receive('lq', 'c', 100000)},
	'get_batch_events' => q{select count(*) from pgque.get_batch_events(pgque.next_batch('lq', 'pgq'))},
	'receive_partitioned' => q{select count(*) from pgque.receive_partitioned('lq', 'pc', 0, 2, 'w0', 10)},
);
for my $what (sort keys %calls)
{
	# psql: 3 for an error the server reported, 2 for a lost connection
	my ($rc, $out, $err) = $node->psql('postgres', qq{\\set VERBOSITY verbose\n$calls{$what}});
	is($rc, 3, "$what: an error, the backend answers (it crashed before the fix)")
	  or diag($err);
	like($err, qr/ERROR:  42804: event table column ev_data is bigint, not text/,
		"$what: refused with 42804, naming the column");
}
# the probes read the window for no reader (whether events are there): they
# get a row of NULLs per event, not an error, so that the ticker still ticks
# the queue (an error there retried it at every poll, a WARNING each) and
# only its consumers are refused; a row written into the table directly is
# what only the probe sees (the sequence did not move)
$node->safe_psql('postgres', qq{
    insert into pgque.event_${qid}_0 (ev_id, ev_txid, ev_type, ev_data)
    select coalesce(max(ev_id), 0) + 1000, pg_catalog.pg_current_xact_id(), 't', 7 from pgque.event_${qid}_0});
my ($rc, $out, $err) = $node->psql('postgres', q{
    select pgque._has_unticked_events(q, t)
      from pgque.queue q,
           lateral (select * from pgque.tick where tick_queue = q.queue_id order by tick_id desc limit 1) t
     where q.queue_name = 'lq'});
is($rc, 0, 'the probe of a table of another shape: no error') or diag($err);
is($out, 't', '... and it sees the event written directly');
my $ticks = $node->safe_psql('postgres', q{select count(*) from pgque.tick t join pgque.queue q on q.queue_id = t.tick_queue where q.queue_name = 'lq'});
($rc, $out, $err) = $node->psql('postgres', q{select pgque.ticker()});
is($rc, 0, 'the ticker ticks the queue without an error') or diag($err);
cmp_ok($node->safe_psql('postgres', q{select count(*) from pgque.tick t join pgque.queue q on q.queue_id = t.tick_queue where q.queue_name = 'lq'}),
	'>', $ticks, '... a new tick');

my $log = slurp_file($node->logfile, $log_offset);
unlike($log, qr/terminated by signal/, 'no backend died');

$node->stop('fast');
done_testing();
