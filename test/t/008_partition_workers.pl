# The counting test of partition keys: 10,000 keyed events over N = 8 slots,
# consumed by 3 concurrent workers running examples/partition_worker.sql,
# are each processed exactly once, per key in order, none lost.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PgqueNode->new_preloaded('partition', conf => qq{
pgque_bgw.launcher_naptime = '1s'
});
$node->safe_psql('postgres', q{
    create extension pgque_bgw;
    select pgque.create_queue('files');
    select pgque.subscribe_slot('files', 'indexer', k, 8) from generate_series(0, 7) k;
});
$node->safe_psql('postgres', slurp_file("$ENV{PGQUE_SRC}/../examples/partition_worker.sql"));
ok($node->poll_query_until('postgres', q{
       select count(*) = 1 from pg_stat_activity where backend_type = 'pgque_bgw ticker'}),
   'the ticker runs');

# three workers start first, then the producer sends 10,000 events over 500
# tenants in 100 transactions while they consume
my @workers;
for my $w (1 .. 3)
{
    my $bg = $node->background_psql('postgres', on_error_stop => 1);
    $bg->query_until(qr/started/, qq{
        \\echo started
        call partition_worker('files', 'indexer', 8, 'worker-$w', '8 seconds');
        \\echo finished
    });
    push @workers, $bg;
}
for my $t (1 .. 100)
{
    $node->safe_psql('postgres', qq{
        select pgque.send_batch('files', 'file.event',
                   array(select 'tx$t-' || i from generate_series(1, 100) i),
                   array(select 'tenant-' || ((i * 7 + $t) % 500) from generate_series(1, 100) i))});
}
for my $bg (@workers)
{
    $bg->query_until(qr/finished/, '');
    $bg->quit;
}

is($node->safe_psql('postgres', q{select count(*) from example_processed}), '10000',
   '10,000 events processed');
is($node->safe_psql('postgres', q{select count(distinct ev_id) from example_processed}), '10000',
   'each exactly once: no duplicates, none lost');
is($node->safe_psql('postgres', q{
       select count(*) from (select ev_id < lag(ev_id) over (partition by key order by seq) as back
                               from example_processed) x where back}),
   '0', 'per key in ev_id order');
is($node->safe_psql('postgres', q{
       select count(*) from example_processed where slot <> pgque._slot_of(key, 8)}),
   '0', 'every event on its key\'s slot');
my $spread = $node->safe_psql('postgres', q{
    select count(distinct worker) || ' workers, ' || count(distinct slot) || ' slots' from example_processed});
is($spread, '3 workers, 8 slots', 'all three workers and all eight slots took part');
$node->stop('fast');
done_testing();
