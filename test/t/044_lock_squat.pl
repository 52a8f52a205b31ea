# The extension's locks and the workers (issue #25 item 5, ADR 0040).
# A role with only LOGIN holds, session-level, every advisory key pgque_bgw
# 0.2.0 used for the first 100 queue and subscription ids (queue DDL lock,
# cooperative member lock, create_queue's lock): the ticker worker still
# ticks, a member still receives, create_queue still works and the
# watchdog still opens alerts.  Then a queue whose ticking is genuinely
# blocked (a drop_queue holding its DDL lock while it waits for a reader of
# the event tables): the watchdog leaves it out of its passes without
# waiting, keeps inspecting the other queues, and opens ticker_stalled for
# it once it was left out longer than the stall bound; the alert clears
# when the drop is cancelled and the queue ticks again.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $started = time();
my $node = PgqueNode->new_preloaded('lock_squat', conf => qq{
pgque_bgw.launcher_naptime = '1s'
pgque_bgw.watchdog_interval = '1s'
pgque_bgw.ticker_stalled_after = '4s'
pgque_bgw.lag_alert_after = '1h'
pgque_bgw.ticker_probe_interval = '1h'
autovacuum = off
});
$node->safe_psql('postgres', q{create extension pgque_bgw});
$node->poll_query_until('postgres', q{
    select count(*) = 3 from pg_stat_activity where backend_type like 'pgque_bgw %' and datname = 'postgres'})
  or die 'the workers did not start';

$node->safe_psql('postgres', q{
    create role squatter login;
    create role app_reader login in role pgque_reader;
    select pgque.create_queue(q) from unnest(array['live', 'paused', 'paused2', 'stuck', 'busy']) q;
    select pgque.subscribe(q, 'c') from unnest(array['live', 'stuck', 'busy']) q;
    select pgque.set_queue_config('busy', 'ticker_idle_period', '1 hour');
    select pgque.register_subconsumer('live', 'g', 'm1');
    select pgque.set_queue_config(q, 'ticker_paused', 'true') from unnest(array['paused', 'paused2']) q;
    -- got(queue, consumer, payload): receive and ack one batch; was payload in it?
    create function got(q text, c text, p text) returns boolean language plpgsql as $$
    declare
        hit boolean;
        b   bigint;
    begin
        select bool_or(m.payload = p), max(m.batch_id) into hit, b from pgque.receive(q, c, 1000) m;
        if b is not null then
            perform pgque.ack(b);
        end if;
        return coalesce(hit, false);
    end $$;
});

sub alert_open
{
    my ($queue) = @_;
    return $node->poll_query_until('postgres', qq{
        select count(*) = 1 from pgque.alerts where kind = 'ticker_stalled' and queue_name = '$queue'});
}

# --- the squatter holds every old key, session-level ----------------------------
my $squatter = $node->background_psql('postgres', extra_params => [ '-U', 'squatter' ]);
is($squatter->query_safe(q{
    select count(pg_advisory_lock(1885827445, i))
         + count(pg_advisory_lock(hashtextextended('pgque coop member ' || i || '/m1', 0)))
         + count(pg_advisory_lock(hashtext('pgque.create_queue'), hashtext('late')))
      from generate_series(1, 100) i}),
   '300', 'a LOGIN-only role holds the 0.2.0 keys of 100 queues, 100 members and create_queue');

$node->safe_psql('postgres', q{select pgque.send('live', 'e1')});
ok($node->poll_query_until('postgres', q{select got('live', 'c', 'e1')}),
   'the ticker worker still ticks the queue: its consumer receives the event');
ok($node->poll_query_until('postgres', q{
        select count(*) > 0 from pgque.receive_coop('live', 'g', 'm1', 10)}),
   'the cooperative member still receives');
is($node->safe_psql('postgres', q{
        set statement_timeout = '10s';
        select pgque.create_queue('late')}),
   '1', 'create_queue still creates a queue');

$node->safe_psql('postgres', q{select pgque.send('paused', 'x')});
ok(alert_open('paused'), 'the watchdog still opens ticker_stalled for a paused queue with events');

# --- row locks on a queue hold the ticker worker no longer ----------------------
# a reader's subscribe left open holds a key-share lock on the queue row
my $app = $node->background_psql('postgres', extra_params => [ '-U', 'app_reader' ]);
$app->query_safe('begin');
$app->query_safe(q{select pgque.subscribe('live', 'app')});
$node->safe_psql('postgres', q{select pgque.send('live', 'e3')});
ok($node->poll_query_until('postgres', q{select got('live', 'c', 'e3')}),
   'a pgque_reader\'s open subscribe does not hold the ticker');
$app->query_safe('rollback');
# an admin's set_queue_config left open holds the row of queue busy
my $admin = $node->background_psql('postgres');
$admin->query_safe('begin');
$admin->query_safe(q{select pgque.set_queue_config('busy', 'ticker_max_lag', '5 seconds')});
$node->safe_psql('postgres', q{select pgque.send('busy', 'b1')});
$node->safe_psql('postgres', q{select pgque.send('live', 'e4')});
ok($node->poll_query_until('postgres', q{select got('live', 'c', 'e4')}),
   'an open set_queue_config on one queue: the ticker still ticks the others');
is($node->safe_psql('postgres', q{select got('busy', 'c', 'b1')}), 'f', 'but not that queue meanwhile');
$admin->query_safe('commit');
my $freed = time();
ok($node->poll_query_until('postgres', q{select got('busy', 'c', 'b1')}),
   'once the row is free the queue is ticked');
cmp_ok(time() - $freed, '<', 30, 'at the ticker\'s poll (idle tick and probe are an hour away)');

# --- a queue whose ticking is genuinely blocked ---------------------------------
my $stuck_id = $node->safe_psql('postgres', q{select queue_id from pgque.queue where queue_name = 'stuck'});
my $reader = $node->background_psql('postgres');
$reader->query_safe('begin');
$reader->query_safe("select count(*) from pgque.event_$stuck_id");
my $dropper = $node->background_psql('postgres', on_error_stop => 0);
my $dropper_pid = $dropper->query_safe('select pg_backend_pid()');
$dropper->query_until(qr/dropping/, q{
    \echo dropping
    select pgque.drop_queue('stuck', true);
});
ok($node->poll_query_until('postgres', qq{
        select count(*) > 0 from pg_locks where pid = $dropper_pid and not granted}),
   'drop_queue holds the queue\'s DDL lock and waits for the reader');
my $blocked_at = time();

$node->safe_psql('postgres', q{select pgque.send('paused2', 'y')});
ok(alert_open('paused2'), 'meanwhile the other queues are inspected: ticker_stalled for another paused queue');
$node->safe_psql('postgres', q{select pgque.send('live', 'e2')});
ok($node->poll_query_until('postgres', q{select got('live', 'c', 'e2')}),
   'and the other queues tick');
ok(alert_open('stuck'), 'ticker_stalled opens for the queue the watchdog could not inspect');
is($node->safe_psql('postgres', q{
        select details->>'inspected' from pgque.alerts where kind = 'ticker_stalled' and queue_name = 'stuck'}),
   'false', 'saying it was not inspected');
cmp_ok(time() - $blocked_at, '>=', 2, 'not before the queue was left out for longer than the stall bound (lead 3 s)');

# the drop is cancelled and the reader ends: the queue ticks, the alert clears
$node->safe_psql('postgres', qq{select pg_cancel_backend($dropper_pid)});
$reader->query_safe('commit');
$node->safe_psql('postgres', q{select pgque.send('stuck', 'z')});
ok($node->poll_query_until('postgres', q{select got('stuck', 'c', 'z')}), 'the queue ticks again');
ok($node->poll_query_until('postgres', q{
        select count(*) = 0 from pgque.alerts where kind = 'ticker_stalled' and queue_name = 'stuck'}),
   'and its ticker_stalled clears');

$squatter->quit;
$app->quit;
$admin->quit;
$reader->quit;
eval { $dropper->quit; };
$node->stop('fast');
ok(1, 'the server shuts down cleanly');
note(sprintf('044_lock_squat took %.1f s', time() - $started));
done_testing();
