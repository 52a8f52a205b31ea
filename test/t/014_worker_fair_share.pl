# Fair share of pgque_bgw.max_workers (issue 11): a database with the
# extension used to keep every worker it had started, so with a small
# budget the first database took it all and the next got no ticker.  Now
# each database gets max_workers / databases (at least its ticker), and a
# database above its share gives up its last worker kind for one below it;
# such a stop costs no restart back-off.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PgqueNode->new_preloaded('fair_share', conf => qq{
pgque_bgw.launcher_naptime = '1s'
pgque_bgw.max_workers = 3
pgque_bgw.databases = 'db1, db2'
# the fair share of split workers; auto would run one combined process per
# database here (tested at the end)
pgque_bgw.worker_mode = split
});
$node->safe_psql('postgres', 'create database db1; create database db2');

sub kinds
{
    my ($db) = @_;
    return $node->safe_psql('postgres', qq{
        select coalesce(string_agg(backend_type, ',' order by backend_type), '') from pg_stat_activity
         where backend_type like 'pgque_bgw %' and backend_type <> 'pgque_bgw launcher' and datname = '$db'});
}

# db1 alone: the whole budget
$node->safe_psql('db1', q{create extension pgque_bgw; select pgque.create_queue('q'); select pgque.subscribe('q', 'c')});
ok($node->poll_query_until('postgres', q{
       select count(*) = 3 from pg_stat_activity where backend_type like 'pgque_bgw %' and datname = 'db1'}),
   'a database alone gets all three workers of the budget of 3');

# db2 arrives: the budget is spent; db1 is above its share (3 / 2 = 1)
$node->safe_psql('db2', q{create extension pgque_bgw; select pgque.create_queue('q'); select pgque.subscribe('q', 'c')});
ok($node->poll_query_until('postgres', q{
       select count(*) = 1 from pg_stat_activity where backend_type = 'pgque_bgw ticker' and datname = 'db2'}),
   'the second database gets its ticker');
sleep(3);    # several launcher passes: the split is stable
is(kinds('db1'), 'pgque_bgw maintenance,pgque_bgw ticker', 'the first keeps its ticker and maintenance');
is(kinds('db2'), 'pgque_bgw ticker', 'the second runs its ticker');
is($node->safe_psql('postgres', q{
       select count(*) from pg_stat_activity where backend_type like 'pgque_bgw %' and backend_type <> 'pgque_bgw launcher'}),
   '3', 'never more than the budget');

# both deliver
for my $db ('db1', 'db2')
{
    $node->safe_psql($db, q{select pgque.send('q', 'x')});
    ok($node->poll_query_until($db, q{select count(*) = 1 from pgque.receive('q', 'c')}),
       "$db: events are ticked and delivered");
}

# the watchdog stopped to make room was stopped on purpose: no back-off recorded
like($node->safe_psql('db1', q{select detail from pgque.status() where component = 'watchdog'}),
     qr/\(0 short runs in a row\)/, 'the stopped watchdog counts no failure');

# auto: three per database do not fit the budget, so each database runs
# one process with the three loops (ADR 0026)
$node->safe_psql('postgres', q{alter system set pgque_bgw.worker_mode = 'auto'; select pg_reload_conf()});
for my $db ('db1', 'db2')
{
    ok($node->poll_query_until('postgres', qq{
           select string_agg(backend_type, ',') = 'pgque_bgw worker' from pg_stat_activity
            where backend_type like 'pgque_bgw %' and datname = '$db'}),
       "auto: $db runs one combined worker");
    ok($node->poll_query_until($db, q{
           select count(*) = 3 from pgque.status() where component in ('ticker', 'maintenance', 'watchdog')
              and status = 'running'}),
       "auto: $db's status() shows the three loops running");
    $node->safe_psql($db, q{select pgque.ack(max(batch_id)) from pgque.receive('q', 'c'); select pgque.send('q', 'y')});
    ok($node->poll_query_until($db, q{select count(*) = 1 from pgque.receive('q', 'c') where payload = 'y'}),
       "auto: $db's events are ticked and delivered");
}

# db2 leaves: db1 gets its watchdog back
$node->safe_psql('db2', 'drop extension pgque_bgw cascade');
ok($node->poll_query_until('postgres', q{
       select count(*) = 3 from pg_stat_activity where backend_type like 'pgque_bgw %' and datname = 'db1'}),
   'when the other database leaves, the first gets its three workers back');

$node->stop('fast');
done_testing();
