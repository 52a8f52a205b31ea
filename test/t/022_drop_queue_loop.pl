# drop_queue and the workers never deadlock (issue #12, ADR 0020):
# drop_queue used to lock the queue row and then drop the event tables and
# sequences, while the ticker reads the sequence and event tables and then
# locks the queue row; in a send-then-drop loop about 1 in 40 iterations
# deadlocked.  Now drop_queue takes the queue's DDL lock first and the
# workers skip a queue whose lock is taken.  1,000 iterations of create,
# send, drop with the workers at their fastest.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PgqueNode->new_preloaded('drop_loop', conf => qq{
pgque_bgw.launcher_naptime = '1s'
pgque_bgw.tick_interval = '1ms'
pgque_bgw.maint_interval = '1s'
pgque_bgw.watchdog_interval = '1s'
deadlock_timeout = '100ms'
});
$node->install('postgres');
ok($node->poll_query_until('postgres',
    q{select count(*) = 1 from pg_stat_activity where backend_type = 'pgque_bgw ticker'}),
   'the ticker runs');

# one session, 1,000 iterations, each its own transactions; an error ends
# the loop and is reported
my ($ret, $out, $err) = $node->psql('postgres', q{
do $$
declare
    i int;
begin
    for i in 1 .. 1000 loop
        perform pgque.create_queue('dl');
        perform pgque.subscribe('dl', 'c');
        perform pgque.send('dl', 'x' || i) from generate_series(1, 3);
        commit;
        perform pg_sleep(0.002);
        perform pgque.drop_queue('dl', true);
        commit;
    end loop;
end $$;
select 'iterations done';
});
is($ret, 0, 'create, send and drop 1,000 times beside the workers') or diag($err);
unlike($err, qr/deadlock detected/, 'no deadlock');
like($out, qr/iterations done/, 'every iteration ran');
my $log = slurp_file($node->logfile);
my $deadlocks = () = $log =~ /deadlock detected/g;
is($deadlocks, 0, 'no deadlock in the server log either (the workers\' side)');
is($node->safe_psql('postgres', q{select count(*) from pgque.queue}), '0', 'no queue left');

$node->stop('fast');
done_testing();
