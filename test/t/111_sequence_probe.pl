# The ticker's sequence probe (ADR 0103): every ticker_probe_interval it
# reads each queue's event sequence by its OID against the position the
# queue's ticks are known to cover, and reads no tick row for a queue whose
# sequence did not move (ADR 0031's probe read the latest tick of every
# queue on every probe).  What it must still do: a row written into an event
# table directly is ticked within the probe interval, also while another
# queue's sequence is locked by a drop_queue left open (not waited for) or
# is gone under its name (the others are still probed).
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);

# the watchdog and maintenance an hour apart: in the measured window only
# the ticker's probes read the queues
my $node = PgqueNode->new_preloaded('sequence_probe', conf => q{
pgque_bgw.launcher_naptime = '1s'
pgque_bgw.ticker_probe_interval = '1s'
pgque_bgw.watchdog_interval = '3600s'
pgque_bgw.maint_interval = '3600s'
pgque_bgw.ticker_stalled_after = '7200s'
});
$node->install('postgres');
for my $from (1, 51)
{
    $node->safe_psql('postgres', qq{
        select count(pgque.create_queue('idle_' || i)) from generate_series($from, $from + 49) i;
        select count(pgque.set_queue_config('idle_' || i, 'ticker_idle_period', '1 hour'))
          from generate_series($from, $from + 49) i;
        select count(pgque.subscribe('idle_' || i, 'c')) from generate_series($from, $from + 49) i;});
}
ok($node->wait_for_workers('postgres'), 'the workers run');
# got(queue, payload): receive a batch of consumer c and ack it; was payload in it?
$node->create_got;
# the first passes of the three workers are over (the ticker's first pass
# visits every queue)
ok($node->poll_query_until('postgres', q{
       select count(*) = 1 from pgque.status() where component = 'ticker' and detail like '%queues=100 %'}),
   'the ticker lists the 100 queues');
sleep(3);

# tick rows read: the index scans of pgque.tick over 4 s (4 probes)
sub tick_scans
{
    return $node->safe_psql('postgres', q{
        select coalesce(sum(idx_scan), 0) + coalesce(sum(seq_scan), 0)
          from pg_stat_all_tables where relid = 'pgque.tick'::regclass});
}
my $s0 = tick_scans();
sleep(4);
my $s1 = tick_scans();
cmp_ok($s1 - $s0, '<', 100,
       'four probes of 100 idle queues read fewer than 100 tick rows (the SQL probe: 100 a probe)');
diag(sprintf('figure: %d scans of pgque.tick in 4 s of probes', $s1 - $s0));

# a row written into an event table directly
my $t0 = time();
$node->direct_insert('idle_5', 'x1');
ok($node->poll_query_until('postgres', q{select got('idle_5', 'x1')}),
   'a row inserted into an event table directly is ticked');
cmp_ok(time() - $t0, '<', 30, 'within the probe interval (1 s) and a poll, not the idle period (1 hour)');

# a drop_queue left open holds another queue's sequence: not waited for
my $dropper = $node->background_psql('postgres');
$dropper->query_safe('begin');
$dropper->query_safe(q{select pgque.drop_queue('idle_9', true)});
$node->direct_insert('idle_6', 'x2');
ok($node->poll_query_until('postgres', q{select got('idle_6', 'x2')}),
   'while a drop_queue holds another queue\'s sequence, a direct row is still ticked');
$dropper->query_safe('rollback');
$dropper->quit;
$node->direct_insert('idle_9', 'x3');
ok($node->poll_query_until('postgres', q{select got('idle_9', 'x3')}),
   'and that queue\'s own rows once the drop rolled back');

# a queue whose event sequence is gone under its name: the others are probed
my $qid = $node->safe_psql('postgres', q{select queue_id from pgque.queue where queue_name = 'idle_10'});
$node->safe_psql('postgres', qq{alter sequence pgque.event_${qid}_id_seq rename to renamed_seq});
# the ticker reads its list again (pgque.queue changed)
$node->safe_psql('postgres', q{select pgque.set_queue_config('idle_11', 'ticker_idle_period', '2 hours')});
$node->direct_insert('idle_7', 'x4');
ok($node->poll_query_until('postgres', q{select got('idle_7', 'x4')}),
   'with another queue\'s sequence renamed, a direct row is still ticked');
$node->safe_psql('postgres', qq{alter sequence pgque.renamed_seq rename to event_${qid}_id_seq});
$node->safe_psql('postgres', q{select pgque.set_queue_config('idle_11', 'ticker_idle_period', '1 hour')});
$node->direct_insert('idle_10', 'x5');
ok($node->poll_query_until('postgres', q{select got('idle_10', 'x5')}),
   'and that queue\'s own once its sequence is back');

# sends through pgque move the sequences: the probe after them reads the
# ticks once more (a visit), then not again
$node->safe_psql('postgres', q{select count(pgque.send('idle_' || i, 'y')) from generate_series(20, 60) i});
ok($node->poll_query_until('postgres', q{select got('idle_20', 'y') and got('idle_60', 'y')}),
   'sent events are ticked');
sleep(3);
$s0 = tick_scans();
sleep(4);
$s1 = tick_scans();
cmp_ok($s1 - $s0, '<', 100, 'after the sends the probes are back to reading no tick rows');

$node->stop;
done_testing();
