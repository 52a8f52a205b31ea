# Misconfiguration says so (issue #28 item 6):
#  - CREATE EXTENSION without the library in shared_preload_libraries warns
#    that nothing ticks, with the fix; status() says the same, and so does
#    the first receive() of a session that finds no batch;
#  - settings that are each valid but wrong together (guc.c:
#    pgque_warn_inconsistent_settings) log one WARNING per broken rule when
#    the launcher starts and after each reload, and none once fixed;
#  - an alert's WARNING in the server log carries no internal CONTEXT (the
#    PL/pgSQL line, the "SQL statement" the worker sent);
#  - status() details read as sentences (no "never");
#  - CREATE EXTENSION's budget warning counts databases still starting.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $t0 = time();

# --- not preloaded ----------------------------------------------------------
my $bare = PostgreSQL::Test::Cluster->new('bare');
$bare->init;
$bare->start;
my ($ret, $out, $err) = $bare->psql('postgres', 'create extension pgque_bgw');
is($ret, 0, 'the extension installs without the preload');
like($err, qr/WARNING:  pgque_bgw is not in shared_preload_libraries: nothing ticks or maintains the queues of database "postgres"/,
     'CREATE EXTENSION warns that nothing ticks');
like($err, qr/HINT:  Add pgque_bgw to shared_preload_libraries in postgresql\.conf and restart the server/,
     'with the fix as its hint');
is($bare->safe_psql('postgres', q{
       select string_agg(component || '=' || status, ',' order by component) from pgque.status()
        where component in ('library', 'workers', 'scheduler')}),
   'library=not preloaded,scheduler=manual,workers=not preloaded',
   'status() says the library is not preloaded and nothing schedules ticks');
# an empty receive() says why, once per session
$bare->safe_psql('postgres', q{
    select pgque.create_queue('q');
    select pgque.subscribe('q', 'c');
    select pgque.send('q', 'waits for a tick');
});
($ret, $out, $err) = $bare->psql('postgres', q{
    select count(*) from pgque.receive('q', 'c');
    select count(*) from pgque.receive('q', 'c');
});
is($out, "0\n0", 'receive() finds no batch: nothing ticked');
my @notices = $err =~ /NOTICE:  no new batch: pgque_bgw is not in shared_preload_libraries, so no background worker ticks this database/g;
is(scalar(@notices), 1, 'the empty receive() says that nothing ticks, once in the session');
like($err, qr/HINT:  Call pgque\.ticker\(\)/, 'with what to do');
($ret, $out, $err) = $bare->psql('postgres', q{
    select pgque.ticker();
    select payload from pgque.receive('q', 'c');
});
like($out, qr/waits for a tick$/, 'after pgque.ticker() the event is received');
unlike($err, qr/no new batch/, 'and a receive that finds a batch says nothing');
$bare->stop('fast');

# --- inconsistent settings, at start and at reload ---------------------------
my $node = PostgreSQL::Test::Cluster->new('misconf');
$node->init;
$node->append_conf('postgresql.conf', q{
shared_preload_libraries = 'pgque_bgw'
pgque_bgw.launcher_naptime = '1s'
pgque_bgw.watchdog_interval = '10s'
pgque_bgw.ticker_stalled_after = '4s'
pgque_bgw.ticker_probe_interval = '2s'
pgque_bgw.lag_alert_after = '1s'
pgque_bgw.max_workers = 2
pgque_bgw.worker_mode = 'combined'
});
$node->start;

# poll the log with a deadline until $re has matched $n times
sub log_count
{
	my ($re) = @_;
	my @m = slurp_file($node->logfile) =~ /$re/g;
	return scalar @m;
}
sub wait_log
{
	my ($re, $n) = @_;
	my $until = time() + 60;
	while (time() < $until)
	{
		return 1 if log_count($re) >= $n;
		select(undef, undef, undef, 0.1);
	}
	return 0;
}
my $wd = qr/WARNING:  pgque_bgw\.watchdog_interval \(10 s\) is more than half of pgque_bgw\.ticker_stalled_after \(4 s\)/;
my $down = qr/WARNING:  pgque_bgw\.worker_down_after \(2 s\) is not above pgque_bgw\.worker_restart_max \(5000 ms\)/;
ok(wait_log($wd, 1), 'the launcher warns at start: watchdog_interval above half of ticker_stalled_after');
like(slurp_file($node->logfile), qr/$wd[^\n]*\n[^\n]*DETAIL:[^\n]*\n[^\n]*HINT:  Set pgque_bgw\.watchdog_interval to at most half/,
     'with a hint saying what to set');
is(log_count(qr/is not above|is not below/), 0, 'and nothing about the settings that agree');

# fix that one and break another: one reload each
$node->safe_psql('postgres', q{alter system set pgque_bgw.watchdog_interval = '1s'; select pg_reload_conf()});
$node->safe_psql('postgres', q{alter system set pgque_bgw.worker_down_after = '2s'; select pg_reload_conf()});
ok(wait_log($down, 1), 'at reload: worker_down_after not above worker_restart_max');
# the second reload ran every rule again: the fixed one stayed quiet
is(log_count($wd), 1, 'the fixed rule does not warn again after the reloads');
$node->safe_psql('postgres', q{alter system reset pgque_bgw.worker_down_after; select pg_reload_conf()});

# --- an alert in the log, without internal CONTEXT ---------------------------
$node->safe_psql('postgres', q{
    create extension pgque_bgw;
    select pgque.create_queue('q');
    select pgque.subscribe('q', 'idle');
    select pgque.send('q', 'nobody reads me');
});
ok($node->poll_query_until('postgres',
       q{select count(*) > 0 from pgque.alert where kind = 'consumer_lagging' and cleared_at is null}),
   'the watchdog opened consumer_lagging');
my $alert = qr/WARNING:  pgque_bgw alert consumer_lagging opened/;
ok(wait_log($alert, 1), 'its WARNING is in the server log');
my $log = slurp_file($node->logfile);
my ($lines) = $log =~ /($alert[^\n]*\n(?:[^\n]*(?:DETAIL|HINT|CONTEXT|STATEMENT):[^\n]*\n)*)/;
like($lines, qr/HINT:  The consumer is behind/, 'the WARNING keeps its HINT');
unlike($lines, qr/CONTEXT:|SQL statement/, 'and carries no CONTEXT line (no PL/pgSQL line, no SQL statement)');

# --- status() details read as sentences --------------------------------------
is($node->safe_psql('postgres', q{select count(*) from pgque.status() where detail ~ '\mnever\M'}), '0',
   'no status() detail says "never"');
like($node->safe_psql('postgres', q{select detail from pgque.status() where component = 'workers'}),
     qr/; last tick \d{4}-[^;]+; (last maintenance \d{4}-|no maintenance pass yet)/,
     'the workers row names its last tick as a time');

# --- the budget warning counts a database still starting ----------------------
# Budget 2 (max_workers), one process per database (combined): "postgres"
# is served, database b is starting (its ticker probe waits on a lock on
# pg_extension that a session of b holds), so a third database cannot be
# served and its CREATE EXTENSION says so, counting b.
$node->safe_psql('postgres', 'create database b; create database c');
ok($node->poll_query_until('postgres', q{
       select count(*) = 2 from pgque.launcher_workers()
        where datname in ('b', 'c') and worker = 'ticker' and db_state = 'no extension' and pid is null}),
   'databases b and c are probed: no extension');
my $s1 = $node->background_psql('b');
$s1->query_safe('begin; create extension pgque_bgw;');
my $s2 = $node->background_psql('b');
# queued behind s1's install; granted when it commits, before b's probe asks
$s2->query_until(qr/queued/, q{begin;
\echo queued
lock table pg_catalog.pg_extension in access exclusive mode;
});
ok($node->poll_query_until('b', q{select count(*) = 1 from pg_locks where relation = 'pg_extension'::regclass and not granted}),
   'a session of b waits to lock pg_extension');
$s1->query_safe('commit');
ok($node->poll_query_until('postgres', q{
       select count(*) = 1 from pgque.launcher_workers()
        where datname = 'b' and worker = 'ticker' and db_state = 'starting' and pid is not null}),
   'b is starting: its ticker runs and waits to see the extension');
($ret, $out, $err) = $node->psql('c', 'create extension pgque_bgw');
like($err, qr/WARNING:  pgque_bgw: the background workers cannot serve database "c" now\n.*DETAIL:  1 databases are served, 1 more are starting, and the worker budget is 2/s,
     'CREATE EXTENSION in c counts the starting database against the budget');
$s2->query_safe('rollback');
$s1->quit;
$s2->quit;
ok($node->poll_query_until('postgres', q{
       select count(*) = 1 from pgque.launcher_workers() where datname = 'b' and worker = 'ticker' and db_state = 'running'}),
   'b runs once the lock is gone');

$node->stop('fast');
note(sprintf('056 took %.1f s', time() - $t0));
done_testing();
