# The fallback without workers: start() schedules ticker_loop() and maint()
# with pg_cron and stop() removes them; without pg_cron, start() says so and
# the manual mode (ticker_loop, ticker, maint) works.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('cron');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'pgque_bgw,pg_cron'
pgque_bgw.enabled = off
cron.database_name = 'postgres'
});
$node->start;
$node->safe_psql('postgres', q{
    create extension pg_cron;
    create extension pgque_bgw;
    select pgque.create_queue('cq');
    select pgque.subscribe('cq', 'c');
});
is($node->safe_psql('postgres', q{
       select count(*) from pg_stat_activity where backend_type like 'pgque_bgw %' and backend_type <> 'pgque_bgw launcher'}),
   '0', 'with pgque_bgw.enabled = off no per-database worker runs');
is($node->safe_psql('postgres', q{select status from pgque.status() where component = 'scheduler'}),
   'manual', 'status() says manual before start()');

$node->safe_psql('postgres', 'select pgque.start()');
is($node->safe_psql('postgres', q{
       select string_agg(jobname || ' ' || schedule || ' ' || command, '; ' order by jobname) from cron.job}),
   'pgque_maint_postgres * * * * * select pgque.maint(); pgque_ticker_postgres * * * * * call pgque.ticker_loop()',
   'start() schedules ticker_loop() and maint() with pg_cron');
$node->safe_psql('postgres', 'select pgque.start()');
is($node->safe_psql('postgres', q{select count(*) from cron.job}), '2', 'start() again does not duplicate jobs');
like($node->safe_psql('postgres', q{select status || ': ' || detail from pgque.status() where component = 'scheduler'}),
     qr/^pg_cron: pgque_ticker_postgres \(job \d+/, 'status() lists the pg_cron jobs');

# what the ticker job runs works: a short ticker_loop delivers
$node->safe_psql('postgres', q{select pgque.send('cq', 'via ticker_loop')});
$node->safe_psql('postgres', q{call pgque.ticker_loop('1 second', '100 milliseconds')});
is($node->safe_psql('postgres', q{select payload from pgque.receive('cq', 'c')}), 'via ticker_loop',
   'CALL pgque.ticker_loop() ticks: the event is delivered');

$node->safe_psql('postgres', 'select pgque.stop()');
is($node->safe_psql('postgres', q{select count(*) from cron.job}), '0', 'stop() removes the jobs');
is($node->safe_psql('postgres', q{select status from pgque.status() where component = 'scheduler'}),
   'manual', 'and status() says manual again');

# a database without pg_cron: a clear error, and manual mode
$node->safe_psql('postgres', 'create database nocron');
$node->safe_psql('nocron', 'create extension pgque_bgw');
my ($ret, $out, $err) = $node->psql('nocron', 'select pgque.start()');
isnt($ret, 0, 'start() without pg_cron fails');
like($err, qr/pg_cron is not installed in database "nocron"/, 'with a clear message');
like($err, qr/HINT:.*pgque\.ticker\(\)/, 'and a hint to the manual mode');
($ret, $out, $err) = $node->psql('nocron', 'select pgque.stop()');
is($ret, 0, 'stop() without pg_cron is harmless');

$node->stop('fast');
done_testing();
