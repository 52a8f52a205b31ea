# A default server serves every database (issue #26 item 4, ADR 0036).  At
# the default max_worker_processes = 8 the launcher planned with 8 - 1 slots
# while PostgreSQL's logical replication launcher (and pg_cron's, when
# loaded) held some of them: a third database stayed "starting" with nothing
# ticked, with pg_cron the second database's watchdog never started, and
# every start with 3 databases logged "no free background worker slot".  A
# database listed again in pgque_bgw.databases before a scan forgot it
# stayed paused until a restart.  Now the launcher counts the slots other
# workers hold, turns combined before a database would go unserved, warns
# once (naming max_worker_processes) only when the server is really short,
# and lifts its own pause when the database is listed again.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);

# max_worker_processes left at its default; a long naptime, so the only
# scans are the ones a reload or CREATE EXTENSION asks for
my $node = PgqueNode->new_preloaded('default_slots', preload => 'pg_cron,pgque_bgw', conf => qq{
cron.database_name = 'postgres'
pgque_bgw.launcher_naptime = '300s'
});
is($node->safe_psql('postgres', 'show max_worker_processes'), '8', 'max_worker_processes is the default, 8');

# each check of "served": an event sent is ticked and received within 30 s
my $n = 0;
sub ticks_within
{
    my ($db, $secs) = @_;
    my $payload = 'ev' . ++$n;
    $node->safe_psql($db, qq{select pgque.send('q', '$payload')});
    my $deadline = time() + $secs;
    while (time() < $deadline)
    {
        # a batch is handed out again until acked: ack what came, then look
        my @rows = split /\n/, $node->safe_psql($db, q{select batch_id || ' ' || payload from pgque.receive('q', 'c')});
        my $got = grep { / \Q$payload\E$/ } @rows;
        $node->safe_psql($db, "select pgque.ack($1)") if @rows && $rows[0] =~ /^(\d+) /;
        return 1 if $got;
        sleep(0.1);
    }
    return 0;
}

sub make_db
{
    my ($db) = @_;
    $node->safe_psql('postgres', "create database $db");
    $node->safe_psql($db, q{create extension pgque_bgw; select pgque.create_queue('q'); select pgque.subscribe('q', 'c')});
}

my $slot_warning = qr/WARNING:  pgque_bgw: (?:could not start|too few background worker slots|worker budget)/;

# pg_cron and PostgreSQL's logical replication launcher hold 2 of the 8
# slots, the launcher 1: 5 left, not 6 for two databases split
$node->safe_psql('postgres', 'create extension pg_cron');
make_db($_) for qw(d1 d2);
for my $db (qw(d1 d2))
{
    ok($node->poll_query_until($db, q{
           select string_agg(worker, ',' order by worker) = 'maintenance,ticker,watchdog'
             from pgque.launcher_workers()
            where datname = pg_catalog.current_database() and db_state = 'running' and pid is not null}),
       "pg_cron loaded, 2 databases: $db has its ticker, maintenance and watchdog running")
      or diag($node->safe_psql($db, 'select * from pgque.launcher_workers()'));
    ok(ticks_within($db, 30), "pg_cron loaded: $db ticks within 30 s");
    ok($node->poll_query_until($db, q{
           select count(*) = 2 from pgque.status()
            where component in ('ticker', 'watchdog') and status = 'running' and detail not like '%no pass yet%'}),
       "pg_cron loaded: $db's ticker and watchdog have each completed a pass")
      or diag($node->safe_psql($db, 'select * from pgque.status()'));
}
ok($node->poll_query_until('d1', q{select string_agg(distinct mode, ',') from pgque.launcher_workers()
                                      where datname in ('d1', 'd2')}, 'combined'),
   'they run combined: 6 split workers do not fit the 5 slots left');
is($node->safe_psql('d1', q{select count(*) from pg_stat_activity where backend_type = 'pg_cron launcher'}),
   '1', "pg_cron's launcher runs beside them");

# a start with 3 databases, pg_cron not loaded: 6 slots, 3 databases combined
make_db('d3');
$node->append_conf('postgresql.conf', "shared_preload_libraries = '$PgqueNode::PRELOAD'\n");
$node->stop('fast');
my $log_from = -s $node->logfile;
$node->start;
for my $db (qw(d1 d2 d3))
{
    ok(ticks_within($db, 30), "3 databases at the default: $db ticks within 30 s of the start");
}
ok($node->poll_query_until('d1', q{
       select count(*) = 9 from pgque.launcher_workers()
        where datname in ('d1', 'd2', 'd3') and db_state = 'running' and mode = 'combined'
          and pid is not null and not_served_because is null}),
   'all three are served, combined, each with its three loops')
  or diag($node->safe_psql('d1', 'select * from pgque.launcher_workers()'));
my $startlog = substr(slurp_file($node->logfile), $log_from);
unlike($startlog, qr/no free background worker slot/, 'the start logs no "no free background worker slot"');
unlike($startlog, $slot_warning, 'and no other warning about worker slots or budget');

# listed again before a scan forgot it: d1 leaves pgque_bgw.databases, the
# launcher pauses it (its workers stop), and it is listed again at once
$node->safe_psql('postgres', q{alter system set pgque_bgw.databases = 'd2, d3'; select pg_reload_conf()});
ok($node->poll_query_until('d2', q{
       select count(*) = 3 from pgque.launcher_workers() where datname = 'd1' and db_state = 'paused'}),
   'd1 no longer listed: the launcher pauses it')
  or diag($node->safe_psql('d2', 'select * from pgque.launcher_workers()'));
$node->safe_psql('postgres', q{alter system reset pgque_bgw.databases; select pg_reload_conf()});
ok($node->poll_query_until('d2', q{
       select count(*) = 3 from pgque.launcher_workers()
        where datname = 'd1' and db_state = 'running' and pid is not null}),
   'listed again: d1 runs again without a restart')
  or diag($node->safe_psql('d2', 'select * from pgque.launcher_workers()'));
ok(ticks_within('d1', 30), 'and d1 ticks within 30 s');

# an unprivileged role's parallel query holds every free slot (3: 8 less the
# launcher, the logical replication launcher and 3 combined workers) while a
# fourth database gets the extension.  Parallel query is not counted against
# the plan: no warning, nothing changes mode; the refused registration is
# retried, and the database is served once the query ends.
$node->safe_psql('postgres', q{
    create role hogger login;
    create table hog (x int, pad text) with (parallel_workers = 3, fillfactor = 10);
    insert into hog select i, repeat('x', 1500) from generate_series(1, 2000) i;
    grant select on hog to hogger;
    analyze hog;
});
# the plan settled first: one combined process for each of d1..d3 and
# nothing else of ours, so that exactly 3 slots are free (on a loaded
# machine the re-listing above may still be switching modes)
ok($node->poll_query_until('d1', q{
       select count(distinct pid) = 3 and bool_and(mode = 'combined')
         from pgque.launcher_workers() where pid is not null}),
   'the plan has settled: three combined processes')
  or diag($node->safe_psql('d1', 'select * from pgque.launcher_workers()'));
$log_from = -s $node->logfile;
my $hog = $node->background_psql('postgres', extra_params => [ '-U', 'hogger' ], on_error_stop => 0);
$hog->query_until(qr/hogging/, q{
    set max_parallel_workers_per_gather = 3;
    set parallel_setup_cost = 0;
    set parallel_tuple_cost = 0;
    set min_parallel_table_scan_size = 0;
    \echo hogging
    select count(*) from hog where pg_sleep(0.5)::text = '';
});
ok($node->poll_query_until('postgres', q{
       select count(*) = 3 from pg_stat_activity where backend_type = 'parallel worker' and usename = 'hogger'}),
   "a LOGIN-only role's parallel query holds the 3 free slots");
make_db('d4');
ok($node->poll_query_until('d1', q{
       select count(*) = 3 from pgque.launcher_workers()
        where datname = 'd4' and pid is null and not_served_because like 'no free background worker slot now (%3 held by parallel query%'}),
   'the fourth database waits for a slot, and says parallel query holds them')
  or diag($node->safe_psql('d1', 'select * from pgque.launcher_workers()'));
is($node->safe_psql('d1', q{select string_agg(distinct mode, ',') from pgque.launcher_workers()
                              where datname in ('d1', 'd2', 'd3') and pid is not null}),
   'combined', 'the others keep running as they were');
$node->safe_psql('postgres', q{select pg_cancel_backend(pid) from pg_stat_activity
                                where usename = 'hogger' and backend_type = 'client backend'});
eval { $hog->quit; };
ok(ticks_within('d4', 30), 'the query over, the fourth database ticks within 30 s');
my $hoglog = substr(slurp_file($node->logfile), $log_from);
like($hoglog, qr/LOG:  pgque_bgw: could not register the (?:ticker|worker) for database "d4" now; retrying/,
     'the refused registration is logged as a retry');
unlike($hoglog, $slot_warning, 'and not warned about: the server has the slots');

# really too few slots: 7 databases, 6 slots.  One WARNING naming
# max_worker_processes; the database left out says why.
$log_from = -s $node->logfile;
make_db($_) for qw(d5 d6);
$node->safe_psql('postgres', 'create database d7');
my $err;
$node->psql('d7', q{create extension pgque_bgw; select pgque.create_queue('q'); select pgque.subscribe('q', 'c')},
            stderr => \$err);
like($err, qr/WARNING:  pgque_bgw: the background workers cannot serve database "d7" now/,
     'CREATE EXTENSION in the seventh database warns that it cannot be served');
ok($node->poll_query_until('d1', q{
       select count(distinct datname) = 1 from pgque.launcher_workers()
        where pid is null and not_served_because like 'too few background worker slots (max_worker_processes = 8: 1 held by other%'}),
   "the launcher's view names the database left out and why")
  or diag($node->safe_psql('d1', 'select * from pgque.launcher_workers()'));
ok($node->poll_query_until('d1', q{
       select count(distinct datname) = 6 from pgque.launcher_workers()
        where datname like 'd_' and pid is not null}),
   'the six others are served');
my $shortlog = substr(slurp_file($node->logfile), $log_from);
my @warned = $shortlog =~ /(WARNING:  pgque_bgw: too few background worker slots[^\n]*\n(?:[^\n]*\n){0,3})/g;
is(scalar(@warned), 1, 'the launcher warns once that the server has too few slots');
like($warned[0] // '', qr/HINT:  Raise max_worker_processes \(restart needed\) to at least 9/,
     'with a hint naming max_worker_processes and the value that serves them all');

$node->stop('fast');
done_testing();
