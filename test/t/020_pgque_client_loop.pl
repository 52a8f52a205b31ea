# A consumer written the way PgQue's client libraries write it (issue #13):
# LISTEN pgque_<queue>, receive(queue, consumer, 2147483647) (the whole
# batch, their default), handle each message, nack the ones that fail,
# ack the batch, and wait for the next notification when there is nothing.
# Against pgque_bgw with its workers (no manual tick, no manual maint):
# every event is handled once, the failed ones once more after their retry,
# and the loop is woken by the ticker's NOTIFY.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);

my $node = PgqueNode->new_preloaded('client_loop', conf => qq{
pgque_bgw.launcher_naptime = '1s'
pgque_bgw.maint_interval = '1s'
});
$node->safe_psql('postgres', q{
    create extension pgque_bgw;
    create role app_consumer login in role pgque_reader;
    create role app_producer login in role pgque_writer;
    select pgque.create_queue('jobs');
});
$node->safe_psql('postgres', q{select pgque.subscribe('jobs', 'worker')},
    extra_params => [ '-U', 'app_consumer' ]);

my $consumer = $node->background_psql('postgres', extra_params => [ '-U', 'app_consumer' ]);
$consumer->query_safe('listen pgque_jobs');

# 30 jobs in 3 transactions; every fifth one fails on its first delivery
for my $t (0 .. 2)
{
    $node->safe_psql('postgres', qq{
        select pgque.send('jobs', 'job', case when g % 5 = 0 then 'fail ' else 'ok ' end || g)
          from generate_series($t * 10 + 1, $t * 10 + 10) g},
        extra_params => [ '-U', 'app_producer' ]);
}

my (%handled, %nacked, $batches, $notifications, $max_batch);
$batches = $notifications = $max_batch = 0;
my $deadline = time() + 60;
while (time() < $deadline && scalar(keys %handled) < 30)
{
    # one receive: the whole batch, as PgQue's clients ask for it
    my $rows = $consumer->query_safe(q{
        select msg_id || '|' || batch_id || '|' || payload || '|' || coalesce(retry_count, 0)
          from pgque.receive('jobs', 'worker', 2147483647)});
    $notifications += () = $rows =~ /Asynchronous notification "pgque_jobs"/g;
    my @msgs = grep { /^\d+\|/ } split /\n/, $rows;
    if (!@msgs)
    {
        # nothing: wait for the ticker's NOTIFY (psql shows it after a query)
        my $out = $consumer->query_safe('select pg_sleep(0.2)');
        $notifications += () = $out =~ /Asynchronous notification "pgque_jobs"/g;
        next;
    }
    $batches++;
    $max_batch = scalar(@msgs) if @msgs > $max_batch;
    my $batch_id;
    for my $m (@msgs)
    {
        my ($id, $bid, $payload, $retry) = split /\|/, $m;
        $batch_id = $bid;
        if ($payload =~ /^fail/ && $retry == 0)
        {
            # the handler failed: nack, retry at once
            # (nack honours msg_id only, as PgQue's: the client sends back
            # the message it got)
            $consumer->query_safe(qq{
                select pgque.nack($bid, row($id, $bid, 'job', '$payload', null, now(), null, null, null, null)::pgque.message,
                                  '0 seconds', 'handler failed')});
            $nacked{$payload}++;
            next;
        }
        $handled{$payload}++;
    }
    $consumer->query_safe("select pgque.ack($batch_id)");
}
$consumer->quit;

is(scalar(keys %handled), 30, 'every job was handled') or diag(join(',', sort keys %handled));
is(scalar(grep { $_ != 1 } values %handled), 0, 'each exactly once');
is(scalar(keys %nacked), 6, 'the six failing jobs were nacked on their first delivery');
is(scalar(grep { /^ok/ } keys %nacked), 0, 'and only those');
cmp_ok($notifications, '>=', 1, 'the loop was woken by the ticker\'s NOTIFY pgque_jobs');
cmp_ok($max_batch, '>', 1, 'receive(..., 2147483647) handed out a whole batch at once');
is($node->safe_psql('postgres', q{
    select count(*) from pgque.retry_queue}), '0', 'no retry is left behind');
is($node->safe_psql('postgres', q{
    select count(*) from pgque.dead_letter}), '0', 'and nothing was dead-lettered');
note("batches: $batches, notifications: $notifications, largest batch: $max_batch");

$node->stop('fast');
done_testing();
