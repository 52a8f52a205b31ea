# The background workers: a launcher per server, a ticker, a maintenance
# worker and a watchdog per database with the extension; restarts, reload,
# DROP EXTENSION, DROP DATABASE, end-to-end delivery with no manual tick,
# rotation by itself, idle queues, clean shutdown.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);

my $node = PgqueNode->new_preloaded('workers', conf => qq{
max_worker_processes = 20
pgque_bgw.launcher_naptime = '1s'
pgque_bgw.maint_interval = '1s'
pgque_bgw.watchdog_interval = '1s'
});

my $all_three = 'pgque_bgw maintenance,pgque_bgw ticker,pgque_bgw watchdog';

ok($node->poll_query_until('postgres',
    q{select count(*) = 1 from pg_stat_activity where backend_type = 'pgque_bgw launcher' and datname is null}),
   'one launcher runs, connected to no database');

$node->safe_psql('postgres', 'create database db1');
$node->safe_psql('postgres', 'create database plain');
$node->safe_psql('db1', q{
    create extension pgque_bgw;
    select pgque.create_queue('idle');
    select pgque.set_queue_config('idle', 'ticker_idle_period', '10 seconds');
});
my $idle_start = time();

ok($node->poll_query_until('postgres', qq{
       select string_agg(backend_type, ',' order by backend_type) = '$all_three'
         from pg_stat_activity where backend_type like 'pgque_bgw %' and datname = 'db1'}),
   'db1 gets a ticker, a maintenance worker and a watchdog');
sleep(3);
is($node->workers_in('plain'), '', 'a database without the extension has no workers');

# a second database, without a restart
$node->safe_psql('postgres', 'create database db2');
$node->install('db2');
my $t0 = time();
ok($node->poll_query_until('postgres', qq{
       select string_agg(backend_type, ',' order by backend_type) = '$all_three'
         from pg_stat_activity where backend_type like 'pgque_bgw %' and datname = 'db2'}),
   'db2 gets its workers without a restart');
diag(sprintf('figure: db2 workers up %.1f s after CREATE EXTENSION', time() - $t0));

# each worker comes back after pg_terminate_backend
for my $kind ('ticker', 'maintenance', 'watchdog')
{
    my $pid = $node->safe_psql('postgres', qq{
        select pid from pg_stat_activity where backend_type = 'pgque_bgw $kind' and datname = 'db1'});
    $node->safe_psql('postgres', "select pg_terminate_backend($pid)");
    ok($node->poll_query_until('postgres', qq{
           select count(*) = 1 from pg_stat_activity
            where backend_type = 'pgque_bgw $kind' and datname = 'db1' and pid <> $pid}),
       "the $kind comes back after pg_terminate_backend");
}

# status() shows the workers
like($node->safe_psql('db1', q{select status || ': ' || detail from pgque.status() where component = 'ticker'}),
     qr/^running: pid \d+/, 'status() reports the ticker running with its pid');
is($node->safe_psql('db1', q{select status from pgque.status() where component = 'scheduler'}),
   'workers', 'status() says the workers schedule this database');

# SIGHUP: a new tick_interval reaches the ticker
$node->safe_psql('postgres', q{alter system set pgque_bgw.tick_interval = '250ms'});
$node->reload;
ok($node->poll_query_until('db1', q{
       select detail like '%tick_interval=250ms%' from pgque.status() where component = 'ticker'}),
   'after reload the ticker runs with tick_interval = 250ms');
$node->safe_psql('postgres', q{alter system reset pgque_bgw.tick_interval});
$node->reload;
ok($node->poll_query_until('db1', q{
       select detail like '%tick_interval=10ms%' from pgque.status() where component = 'ticker'}),
   'and back at the default 10ms after reset');

# end to end, no manual ticker() call: send, then poll receive
$node->safe_psql('db1', q{
    select pgque.create_queue('e2e');
    select pgque.subscribe('e2e', 'c');
    create table lat (i int, ms float8);
});
$node->safe_psql('db1', q{
    do $$
    declare
        t0 timestamptz;
        got bigint;
    begin
        for i in 1 .. 50 loop
            -- 100 events a second: one every 10 ms
            perform pg_sleep(greatest(0, 0.010 - extract(epoch from clock_timestamp() - coalesce(t0, clock_timestamp() - interval '1 second'))));
            perform pgque.send('e2e', 'event ' || i);
            commit;
            t0 := clock_timestamp();
            loop
                select max(batch_id) into got from pgque.receive('e2e', 'c');
                exit when got is not null;
                commit;
                perform pg_sleep(0.0005);
                if clock_timestamp() > t0 + interval '30 seconds' then
                    raise exception 'event % not delivered in 30 s', i;
                end if;
            end loop;
            insert into lat values (i, extract(epoch from clock_timestamp() - t0) * 1000);
            perform pgque.ack(got);
            commit;
        end loop;
    end $$;
});
is($node->safe_psql('db1', q{select count(*) from lat}), '50',
   'all 50 events reached the polling consumer without a manual tick');
my $lat = $node->safe_psql('db1', q{
    select round(percentile_cont(0.5) within group (order by ms)::numeric, 2) || ' ms median, '
        || round(percentile_cont(0.99) within group (order by ms)::numeric, 2) || ' ms p99, '
        || round(max(ms)::numeric, 2) || ' ms max' from lat});
diag("figure: send -> receive latency at defaults, 100 ev/s (commit to visible, polling every 0.5 ms): $lat");

# rotation by itself; a slow consumer holds it back and loses nothing
$node->safe_psql('db1', q{
    select pgque.create_queue('rot');
    select pgque.set_queue_config('rot', 'rotation_period', '1 second');
    select pgque.subscribe('rot', 'fast');
});
my $cur0 = $node->safe_psql('db1', q{select queue_cur_table from pgque.queue where queue_name = 'rot'});
my $rotated = 0;
for my $i (1 .. 30)
{
    $node->safe_psql('db1', qq{select pgque.send('rot', 'r$i')});
    sleep(0.3);
    $node->safe_psql('db1', q{
        select pgque.ack(batch_id) from (select distinct batch_id from pgque.receive('rot', 'fast', 1000)) b});
    my $cur = $node->safe_psql('db1', q{select queue_cur_table from pgque.queue where queue_name = 'rot'});
    if ($cur ne $cur0) { $rotated++; $cur0 = $cur; }
}
cmp_ok($rotated, '>=', 2, "the maintenance worker rotated the queue by itself ($rotated switches)");

$node->safe_psql('db1', q{select pgque.subscribe('rot', 'slow')});
my $cur_at_slow = $node->safe_psql('db1', q{select queue_cur_table from pgque.queue where queue_name = 'rot'});
my $switches = 0;
for my $i (1 .. 20)
{
    $node->safe_psql('db1', qq{select pgque.send('rot', 's$i')});
    sleep(0.3);
    $node->safe_psql('db1', q{
        select pgque.ack(batch_id) from (select distinct batch_id from pgque.receive('rot', 'fast', 1000)) b});
    my $cur = $node->safe_psql('db1', q{select queue_cur_table from pgque.queue where queue_name = 'rot'});
    if ($cur ne $cur_at_slow) { $switches++; $cur_at_slow = $cur; }
}
cmp_ok($switches, '<=', 1, "a consumer that does not consume holds rotation back ($switches switch)");
# one tick window per batch (ADR 0057): the slow consumer drains its windows
my $slow_got = 0;
for my $try (1 .. 100)
{
    my $r = $node->safe_psql('db1', q{
        select count(*) filter (where payload like 's%') || ' ' || coalesce(max(batch_id), 0)
          from pgque.receive('rot', 'slow', 1000)});
    my ($n, $batch) = split / /, $r;
    last if $batch == 0;
    $slow_got += $n;
    $node->safe_psql('db1', "select pgque.ack($batch)");
}
is($slow_got, 20, 'the slow consumer still gets all 20 events sent since it subscribed');

# the maintenance worker reaps expired idempotency keys
$node->safe_psql('db1', q{
    select pgque.create_queue('idemq');
    select count(*) from generate_series(1, 25) i,
           lateral pgque.send_idem('idemq', 'm', 'p', 'key:' || i, '1 second');
});
is($node->safe_psql('db1', q{select count(*) from pgque.idem}), '25', '25 idempotency claims');
ok($node->poll_query_until('db1', q{select count(*) = 0 from pgque.idem}),
   'the maintenance worker reaps them after their TTL, with no maint() call');
like($node->safe_psql('db1', q{select detail from pgque.status() where component = 'maintenance'}),
     qr/idem_reaped=/, 'status() shows the maintenance pass');

# an idle queue ticks once per idle period (10 s here), no more, no less
my $wait = 32 - (time() - $idle_start);
sleep($wait) if $wait > 0;
my $idle_ticks = $node->safe_psql('db1', q{
    select count(*) - 1 from pgque.tick t join pgque.queue q on q.queue_id = t.tick_queue where q.queue_name = 'idle'});
my $idle_secs = time() - $idle_start;
my $periods = int($idle_secs / 10);
ok($idle_ticks >= $periods - 1 && $idle_ticks <= $periods + 1,
   sprintf('an idle queue wrote %d tick(s) in %.0f s with a 10 s idle period', $idle_ticks, $idle_secs));

# DROP EXTENSION stops that database's workers
$node->safe_psql('db2', 'drop extension pgque_bgw cascade');
ok($node->poll_query_until('postgres', q{
       select count(*) = 0 from pg_stat_activity where backend_type like 'pgque_bgw %' and datname = 'db2'}),
   'DROP EXTENSION stops the workers of that database');

# DROP DATABASE of a database with workers succeeds within seconds
$node->safe_psql('postgres', 'create database db3');
$node->install('db3');
ok($node->poll_query_until('postgres', q{
       select count(*) = 3 from pg_stat_activity where backend_type like 'pgque_bgw %' and datname = 'db3'}),
   'db3 has its workers');
$t0 = time();
my ($ret, $out, $err) = $node->psql('postgres', 'drop database db3');
is($ret, 0, 'DROP DATABASE of a database with running workers succeeds') or diag($err);
cmp_ok(time() - $t0, '<', 10, sprintf('and takes %.1f s', time() - $t0));
ok($node->poll_query_until('postgres', q{
       select count(*) = 3 from pg_stat_activity where backend_type like 'pgque_bgw %' and datname = 'db1'}),
   'db1 keeps its workers');

# fast shutdown is clean
$node->stop('fast');
my ($controldata) = run_command([ 'pg_controldata', $node->data_dir ]);
like($controldata, qr/Database cluster state:\s+shut down/, 'fast shutdown with the workers running is clean');
done_testing();
