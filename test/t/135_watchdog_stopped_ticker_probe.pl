# With the ticker stopped, the watchdog's ticker_stalled asks whether
# committed events wait past each idle queue's latest tick (ADR 0005's late
# committer) once, for all such queues, with one read of their tables (ADR
# 0113), instead of a window read per queue (_has_unticked_events: a plan
# per queue, about 0.9 ms of CPU each, 900 ms a pass at 1,000 queues):
#   - 40 idle queues and a late committer on queue 'late' (its event drew
#     its id before a tick and committed after it, with the ticker
#     stopped): ticker_stalled opens for 'late', before its latency reaches
#     ticker_stalled_after, and for no idle queue;
#   - the watchdog's passes meanwhile call _has_unticked_events 0 times
#     (track_functions; they called it for every idle queue on every pass);
#   - the read is nobody's to call but the owner's, and skips what is not a
#     pgque event table.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);

# lead = 8 s - 1 s = 7 s; idle ticks every 2 s while the ticker runs
my $node = PgqueNode->new_preloaded('watchdog_stopped_ticker_probe', conf => q{
pgque_bgw.launcher_naptime = '1s'
pgque_bgw.watchdog_interval = '1s'
pgque_bgw.ticker_probe_interval = '1s'
pgque_bgw.ticker_stalled_after = '8s'
track_functions = 'all'
});
$node->safe_psql('postgres', q{create extension pgque_bgw});
$node->safe_psql('postgres', q{
    select count(pgque.create_queue('idle_' || i)) from generate_series(1, 40) i;
    select pgque.create_queue('late');
    select count(pgque.set_queue_config(queue_name, 'ticker_idle_period', '2 seconds')) from pgque.queue;
    select count(pgque.subscribe(queue_name, 'c')) from pgque.queue;});
ok($node->wait_for_workers('postgres'), 'the workers run');
sub q1 { return $node->safe_psql('postgres', $_[0]); }
sub stalled { return q1(qq{select count(*) from pgque.alerts where kind = 'ticker_stalled' and queue_name = '$_[0]'}); }

# --- a late committer, and the ticker stopped before its commit -----------------
my $bg = $node->background_psql('postgres', on_error_stop => 1);
$bg->query_safe(q{begin});
my $id = $bg->query_safe(q{select pgque.send('late', 'ev', 'late-one')});
# a tick whose snapshot has the sender in progress and whose sequence
# position covers its id
ok(q1(q{select pgque.ticker('late') is not null}), 'a tick while the sender is open');
is(q1(qq{select tick_event_seq >= $id from pgque.tick t join pgque.queue q on q.queue_id = t.tick_queue
          where q.queue_name = 'late' order by tick_id desc limit 1}), 't',
   "its position covers the event's id ($id)");
my $ticker = q1(q{select pid from pg_stat_activity where backend_type = 'pgque_bgw ticker' and datname = 'postgres'});
ok($ticker, 'the ticker runs');
kill 'STOP', $ticker;
# the watchdog's backend counts from here
my $wd = q1(q{select pid from pg_stat_activity where backend_type = 'pgque_bgw watchdog' and datname = 'postgres'});
ok($wd, 'the watchdog runs');
$bg->query_safe(q{commit});
$bg->quit;
my $t0 = time();
my $opened;
while (time() - $t0 < 60)
{
    if (stalled('late') eq '1') { $opened = time() - $t0; last; }
    sleep(0.2);
}
ok(defined $opened, 'with the ticker stopped, ticker_stalled opens for the late committer\'s queue');
cmp_ok($opened // 99, '<', 8 + 2, 'before its latency reaches ticker_stalled_after (8 s) and a pass');
diag(sprintf('figure: opened %.1f s after the commit', $opened // -1));
is(q1(q{select (details->>'new_events')::int8 from pgque.alerts
         where kind = 'ticker_stalled' and queue_name = 'late'}), '0',
   'the sequence did not move past the tick: the late committers\' read found it');
# the watchdog's passes over 5 s, every idle queue's idle tick overdue:
# the function counts of the database (the workers flush theirs after each
# unit; the ticker is stopped and nobody receives meanwhile)
sub calls
{
    my ($fn) = @_;
    return q1(qq{select coalesce(sum(calls), 0) from pg_stat_user_functions
                  where schemaname = 'pgque' and funcname = '$fn'});
}
sleep(2);
my ($es0, $qu0) = (calls('_event_source'), calls('_queues_unticked'));
sleep(5);
my ($es1, $qu1) = (calls('_event_source'), calls('_queues_unticked'));
is(q1(q{select count(*) from pgque.alerts where kind = 'ticker_stalled' and queue_name like 'idle%'}), '0',
   'no ticker_stalled for the idle queues');
cmp_ok($qu1 - $qu0, '>=', 2, 'the passes read the late committers of all the idle queues at once, once a pass');
# each window read (_has_unticked_events) built its source: 41 a pass
cmp_ok($es1 - $es0, '<', 41, 'and read no window per queue (event sources built: ' . ($es1 - $es0) . ')');
diag("figure: over 5 s, $es0 -> $es1 event sources built, _queues_unticked $qu0 -> $qu1");
kill 'CONT', $ticker;
ok($node->poll_query_until('postgres', q{
       select count(*) = 1 from pgque.receive('late', 'c', 10) where payload = 'late-one'}),
   'the ticker goes on: the late event is delivered');
ok($node->poll_query_until('postgres', q{
       select count(*) = 0 from pgque.alerts where kind = 'ticker_stalled'}),
   'and ticker_stalled clears');

# --- the read's surface --------------------------------------------------------------
is(q1(q{begin;
         select cardinality(pgque._queues_unticked(array(select queue_id from pgque.queue))) >= 0;
         select count(*) from pg_locks l join pg_class c on c.oid = l.relation
          where l.pid = pg_backend_pid() and c.relnamespace = 'pgque'::regnamespace
            and c.relname ~ '^event_';
         commit;}), "t\n0", 'the read holds no lock of an event table once it is done (41 queues read)');
is(q1(q{select pgque._queues_unticked_read('{1}', '{pg_catalog.pg_class}',
                                           array[pg_catalog.pg_current_snapshot()], pg_catalog.pg_current_snapshot())}),
   '{}', 'a relation that is not a pgque event table is skipped');
q1(q{create role lo_admin login; grant pgque_admin to lo_admin});
my ($rc, $out, $err) = $node->psql('postgres', q{select pgque._queues_unticked('{1}')}, extra_params => ['-U', 'lo_admin']);
like($err, qr/permission denied/, 'pgque_admin may not call the read');
($rc, $out, $err) = $node->psql('postgres', q{select pgque._queues_unticked_read('{1}', '{pg_catalog.pg_authid}',
                                           array[pg_catalog.pg_current_snapshot()], pg_catalog.pg_current_snapshot())},
                                extra_params => ['-U', 'lo_admin']);
like($err, qr/permission denied/, '... nor its C part');

$node->stop;
done_testing();
