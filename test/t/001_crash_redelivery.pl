# A backend killed with SIGKILL in the middle of a batch makes the postmaster
# restart the server (crash recovery).  Afterwards the batch is delivered
# again and no committed event is lost.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;

# quitting a psql whose backend was just killed may write to a closed pipe
$SIG{PIPE} = 'IGNORE';

my $node = PgqueNode->new_preloaded('crash', conf => qq{
restart_after_crash = on
});

$node->safe_psql('postgres', q{
    create extension pgque_bgw;
    select pgque.create_queue('crashq');
    select pgque.subscribe('crashq', 'worker');
    select pgque.send('crashq', 'ev-' || i) from generate_series(1, 100) i;
    select pgque.ticker('crashq');
});

# Case 1: the batch was opened and committed; the consumer dies while
# "processing" it, before ack.
my $first = $node->safe_psql('postgres',
    q{select batch_id || ':' || count(*) || ':' || min(msg_id) || ':' || max(msg_id)
        from pgque.receive('crashq', 'worker', 1000) group by batch_id});
like($first, qr/^\d+:100:1:100$/, 'receive opens a batch of 100 events');
my ($batch1) = split /:/, $first;

my $victim = $node->background_psql('postgres');
my $pid = $victim->query_safe('select pg_backend_pid()');
$victim->query_until(qr/processing/, q{
    \echo processing
    select pg_sleep(600);
});
$node->kill9_and_wait($pid);
# its backend is gone: quitting may fail on the closed pipe, which is expected
eval { $victim->quit; };
ok(PgqueNode::wait_back($node, 'postgres'), 'server is back after the crash restart');
like(slurp_file($node->logfile), qr/terminated by signal 9/, 'the postmaster saw the backend die');

my $again = $node->safe_psql('postgres',
    q{select batch_id || ':' || count(*) from pgque.receive('crashq', 'worker', 1000) group by batch_id});
is($again, "$batch1:100", 'the same batch with the same 100 events is delivered again');

# Case 2: the backend dies inside the transaction that opens the batch and
# sends more events: the open is rolled back, the uncommitted events vanish,
# committed ones stay.
$node->safe_psql('postgres', qq{select pgque.ack($batch1)});
$node->safe_psql('postgres', q{
    select pgque.send('crashq', 'late-' || i) from generate_series(1, 10) i;
    select pgque.ticker('crashq');
});
$victim = $node->background_psql('postgres');
$pid = $victim->query_safe('select pg_backend_pid()');
$victim->query_until(qr/inside/, q{
    begin;
    select count(*) from pgque.receive('crashq', 'worker', 1000);
    select pgque.send('crashq', 'never-committed');
    \echo inside
    select pg_sleep(600);
});
$node->kill9_and_wait($pid);
# its backend is gone: quitting may fail on the closed pipe, which is expected
eval { $victim->quit; };
ok(PgqueNode::wait_back($node, 'postgres'), 'server is back after the second crash');

$node->safe_psql('postgres', q{select pgque.ticker('crashq')});
my $rest = $node->safe_psql('postgres', q{
    with r as (select * from pgque.receive('crashq', 'worker', 1000))
    select count(*) || ':' || string_agg(payload, ',' order by msg_id) from r});
is($rest, '10:' . join(',', map { "late-$_" } 1 .. 10),
   'the 10 committed events are delivered after the crash, the uncommitted one never');

# Nothing is lost overall: every committed event id was received.
$node->safe_psql('postgres', q{
    select pgque.ack(batch_id) from (select distinct batch_id from pgque.receive('crashq', 'worker', 1000)) b});
$node->safe_psql('postgres', q{
    select pgque.send('crashq', 'after');
    select pgque.ticker('crashq');
});
is($node->safe_psql('postgres', q{select string_agg(payload, ',') from pgque.receive('crashq', 'worker')}),
   'after', 'the queue keeps working after two crash restarts');

$node->stop('fast');
my ($controldata) = run_command([ 'pg_controldata', $node->data_dir ]);
like($controldata, qr/Database cluster state:\s+shut down/, 'fast shutdown is clean');
done_testing();
