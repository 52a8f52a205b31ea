# Many databases (issue 12, ADR 0026): with three processes per database the
# launcher served 8 databases at the default budget and left the ninth
# silently without ticker, maintenance or watchdog.  Now, when the budget
# does not allow three per database, each database runs one process with the
# three loops (pgque_bgw.worker_mode = auto), and a database that cannot be
# served says so: a WARNING at CREATE EXTENSION, status() in it, and the
# launcher's view pgque.launcher_workers().
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);
use POSIX ();

my $ndb = 50;
# as docs/operations.md says: max_worker_processes = 1 + databases + room
# for parallel query; pgque_bgw.max_workers = 50 here so that one more
# database is over the budget
my $node = PgqueNode->new_preloaded('many_dbs', conf => qq{
max_worker_processes = 60
pgque_bgw.launcher_naptime = '1s'
pgque_bgw.max_workers = $ndb
});

# a template with the extension, a queue and a subscription; as a template
# it is not served itself
$node->safe_psql('postgres', 'create database tpl');
$node->safe_psql('tpl', q{create extension pgque_bgw; select pgque.create_queue('q'); select pgque.subscribe('q', 'c');
    create table lat (db text, ms float8)});
$node->safe_psql('postgres', q{alter database tpl is_template true});
my $t0 = time();
$node->safe_psql('postgres', join('', map { "create database d$_ template tpl;\n" } 1 .. $ndb));
diag(sprintf('figure: %d databases created in %.0f s', $ndb, time() - $t0));

ok($node->poll_query_until('d1', qq{
       select count(distinct datname) = $ndb from pgque.launcher_workers()
        where datname like 'd%' and db_state = 'running' and pid is not null}, 't'),
   "the launcher's view lists all $ndb databases, each served")
  or diag($node->safe_psql('d1', q{select datname, db_state, mode, worker, pid, not_served_because
                                          from pgque.launcher_workers() where pid is null}));
# the launcher's view is the same from any database with the extension
ok($node->poll_query_until("d$ndb", qq{
       select count(*) = $ndb from pgque.launcher_workers()
        where datname like 'd%' and worker = 'ticker' and mode = 'combined' and pid is not null}),
   'every database runs one combined process');
my $procs = $node->safe_psql('postgres', q{
    select count(*) from pg_stat_activity where backend_type like 'pgque_bgw%'});
diag("figure: pgque_bgw processes in use for $ndb databases: $procs (launcher included)");
cmp_ok($procs, '<=', $ndb + 1, 'one process per database and the launcher');
my $bad = 0;
for my $i (1 .. $ndb)
{
    $bad++ unless $node->safe_psql("d$i", q{
        select count(*) = 3 from pgque.status() where component in ('ticker', 'maintenance', 'watchdog')
           and status = 'running'}) eq 't';
}
is($bad, 0, "status() in each of the $ndb databases shows its three loops running");

# idle CPU of the workers over 10 s, from /proc/<pid>/stat
my @pids = split /\n/, $node->safe_psql('postgres', q{
    select pid from pg_stat_activity where backend_type like 'pgque_bgw%'});
sub cpu_ticks
{
    my $sum = 0;
    for my $pid (@pids)
    {
        open my $fh, '<', "/proc/$pid/stat" or next;
        my @f = split / /, (split /\) /, scalar(<$fh>))[1];
        close $fh;
        $sum += $f[11] + $f[12];    # utime, stime
    }
    return $sum;
}
sleep(3);                        # the first passes of the new workers are done
my ($c0, $w0) = (cpu_ticks(), time());
sleep(10);
my ($c1, $w1) = (cpu_ticks(), time());
my $hz = POSIX::sysconf(POSIX::_SC_CLK_TCK()) || 100;
diag(sprintf('figure: idle CPU of the %d pgque_bgw processes over %.0f s: %.2f%% of one core',
             scalar(@pids), $w1 - $w0, 100 * ($c1 - $c0) / $hz / ($w1 - $w0)));

# an event sent to every database is delivered (no manual tick)
$node->safe_psql("d$_", q{select pgque.send('q', 'one')}) for 1 .. $ndb;
my $undelivered = 0;
for my $i (1 .. $ndb)
{
    $undelivered++ unless $node->poll_query_until("d$i", q{
        select count(*) = 1 from pgque.receive('q', 'c') where payload = 'one'});
    $node->safe_psql("d$i", q{select pgque.ack(max(batch_id)) from pgque.receive('q', 'c')});
}
is($undelivered, 0, "an event sent to each of the $ndb databases is delivered");

# commit-to-receive latency: 3 events in each database, polled in-database
for my $i (1 .. $ndb)
{
    $node->safe_psql("d$i", q{
        do $$
        declare
            t0 timestamptz;
            got bigint;
        begin
            for i in 1 .. 3 loop
                perform pgque.send('q', 'lat');
                commit;
                t0 := clock_timestamp();
                loop
                    select max(batch_id) into got from pgque.receive('q', 'c');
                    exit when got is not null;
                    commit;
                    perform pg_sleep(0.0005);
                    if clock_timestamp() > t0 + interval '60 seconds' then
                        raise exception 'event % not delivered in 60 s', i;
                    end if;
                end loop;
                insert into lat values (pg_catalog.current_database(), extract(epoch from clock_timestamp() - t0) * 1000);
                perform pgque.ack(got);
                commit;
            end loop;
        end $$});
}
my @ms = sort { $a <=> $b } map { split /\n/, $node->safe_psql("d$_", 'select ms from lat') } 1 .. $ndb;
is(scalar(@ms), 3 * $ndb, 'every latency event was delivered');
my $median = $ms[int(@ms / 2)];
diag(sprintf('figure: commit-to-receive over %d databases: %.1f ms median, %.1f ms p90, %.1f ms max',
             $ndb, $median, $ms[int(@ms * 0.9)], $ms[-1]));
# generous: a liveness bound, not the figure (which is printed above)
cmp_ok($median, '<', 1000, 'median commit-to-receive well under a second');

# one more database is over the budget: never silent
$node->safe_psql('postgres', 'create database extra');
my ($ret, $out, $err) = $node->psql('extra', q{create extension pgque_bgw; select pgque.create_queue('q')});
is($ret, 0, 'CREATE EXTENSION succeeds over the budget');
like($err, qr/WARNING:  pgque_bgw: the background workers cannot serve database "extra" now/,
     'CREATE EXTENSION warns that the workers cannot serve the database');
ok($node->poll_query_until('extra', q{
       select detail like '%not fully served: worker budget of 50 reached%' from pgque.status() where component = 'workers'}),
   'status() in it says it is not served, and why')
  or diag($node->safe_psql('extra', 'select * from pgque.status()'));
ok($node->poll_query_until('d1', q{
       select count(*) = 3 from pgque.launcher_workers()
        where datname = 'extra' and pid is null and not_served_because like 'worker budget%'}),
   "the launcher's view lists it with the reason");

$node->stop('fast');
done_testing();
