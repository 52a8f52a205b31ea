# Watchdog alerts with real workers and short thresholds: each alert opens
# once (one WARNING, one NOTIFY, one history row) and clears once (LOG,
# NOTIFY, cleared_at); a healthy system writes no alert row.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);

my $node = PgqueNode->new_preloaded('alerts', conf => qq{
pgque_bgw.launcher_naptime = '1s'
pgque_bgw.maint_interval = '1s'
pgque_bgw.watchdog_interval = '1s'
pgque_bgw.slot_unpolled_after = '2s'
pgque_bgw.slot_stale_after = '2s'
pgque_bgw.lag_alert_after = '3s'
pgque_bgw.ticker_stalled_after = '2s'
});
$node->safe_psql('postgres', q{create extension pgque_bgw});
$node->poll_query_until('postgres', q{
    select count(*) = 3 from pg_stat_activity where backend_type like 'pgque_bgw %' and datname = 'postgres'});

sub log_count
{
    my ($re) = @_;
    my @m = (slurp_file($node->logfile) =~ /$re/g);
    return scalar(@m);
}

# a listener for NOTIFY pgque_alert, and one by a role with no pgque rights
# (LISTEN has no access control: the payload must not carry the details)
$node->safe_psql('postgres', q{create role outsider login});
my $listener = $node->background_psql('postgres');
$listener->query_safe('listen pgque_alert');
my $outsider = $node->background_psql('postgres', extra_params => [ '-U', 'outsider' ]);
$outsider->query_safe('listen pgque_alert');
sub notifications
{
    my ($session) = @_;
    my $out = ($session // $listener)->query_safe('select 1');
    my @n = ($out =~ /Asynchronous notification "pgque_alert" with payload "([^\n]*)" received/g);
    return @n;
}

# --- a healthy system: many watchdog intervals, no alert row ---------------
$node->safe_psql('postgres', q{
    select pgque.create_queue('healthy');
    select pgque.subscribe('healthy', 'c');
});
for my $i (1 .. 8)
{
    $node->safe_psql('postgres', qq{select pgque.send('healthy', 'h$i')});
    sleep(0.5);
    $node->safe_psql('postgres', q{
        select pgque.ack(batch_id) from (select distinct batch_id from pgque.receive('healthy', 'c')) b});
}
is($node->safe_psql('postgres', q{select count(*) from pgque.alert}), '0',
   'a healthy system over 8 watchdog intervals writes no alert row');

# --- slot_unpolled -----------------------------------------------------------
$node->safe_psql('postgres', q{
    select pgque.create_queue('pq');
    select pgque.subscribe_slot('pq', 'w', k, 2) from generate_series(0, 1) k;
});
my $slot = $node->safe_psql('postgres', q{select pgque._slot_of('tenant-x', 2)});
$node->safe_psql('postgres', qq{select pgque.claim_slot('pq', 'w', $slot, 'worker-1')});
$node->safe_psql('postgres', qq{select count(*) from pgque.receive_partitioned('pq', 'w', $slot, 2, 'worker-1')});
# the worker stops polling while events for its slot arrive
$node->safe_psql('postgres', q{select pgque.send('pq', 'e', 'x' || i, 'tenant-x') from generate_series(1, 5) i});
my $t0 = time();
ok($node->poll_query_until('postgres', qq{
       select count(*) = 1 from pgque.alerts where kind = 'slot_unpolled' and slot = $slot}),
   'slot_unpolled opens for the slot nobody polls');
my $took = time() - $t0;
cmp_ok($took, '<', 2 + 1 + 2, sprintf('within threshold + one watchdog interval (%.1f s)', $took));
sleep(3);    # several more watchdog passes: no repeat
is($node->safe_psql('postgres', q{select count(*) from pgque.alert where kind = 'slot_unpolled'}), '1',
   'one history row, no repeat while open');
is(log_count(qr/WARNING:  pgque_bgw alert slot_unpolled opened: queue "pq", consumer "w", slot $slot/), 1,
   'one WARNING naming queue, consumer and slot');
my @n = grep { /"kind": "slot_unpolled"/ && /"event": "opened"/ } notifications();
is(scalar(@n), 1, 'one NOTIFY pgque_alert, received by a LISTEN session');
like($n[0] // '', qr/^\{"kind": "slot_unpolled", "event": "opened", "alert_id": \d+\}$/,
     'its JSON payload carries the event, the alert id and the kind only');
my ($alert_id) = ($n[0] // '') =~ /"alert_id": (\d+)/;
is($node->safe_psql('postgres', qq{select details->>'pending_events' from pgque.alerts where alert_id = $alert_id}),
   '5', 'the figures are in pgque.alerts under that id');
my @o = notifications($outsider);
is(scalar(grep { /"kind": "slot_unpolled"/ } @o), 1, 'a role with no pgque rights receives the notification too');
is(scalar(grep { !/^\{"kind": "[a-z_]+", "event": "(opened|cleared)", "alert_id": \d+\}$/ } @o), 0,
   'but every payload it gets has the kind, event and alert id only');
unlike(join(' ', @o), qr/"pq"|worker-1|pending|details|lease_owner/,
       'no queue name, lease owner or figures');
my ($rc, $out, $err) = $node->psql('postgres', 'select count(*) from pgque.alerts',
                                   extra_params => [ '-U', 'outsider' ]);
like($err, qr/permission denied/, 'and cannot read pgque.alerts');
is($node->safe_psql('postgres', qq{select alert from pgque.partition_slot_status where slot = $slot}),
   'slot_unpolled', 'partition_slot_status shows the alert');
like($node->safe_psql('postgres', q{select status || ': ' || detail from pgque.status() where component = 'alerts'}),
     qr/^open: slot_unpolled/, 'status() shows it');

# the worker polls again: the alert clears, once
$node->safe_psql('postgres', qq{
    select count(*) from pgque.receive_partitioned('pq', 'w', $slot, 2, 'worker-1');
    select pgque.ack_partitioned('pq', 'w', $slot, 2, 'worker-1')});
ok($node->poll_query_until('postgres', q{
       select count(*) = 0 from pgque.alerts where kind = 'slot_unpolled'}),
   'slot_unpolled clears when the slot is polled again');
sleep(2);
is($node->safe_psql('postgres', q{
       select count(*) from pgque.alert where kind = 'slot_unpolled' and cleared_at is not null}),
   '1', 'cleared once (cleared_at set on the one row)');
ok($node->poll_query_until('postgres', "select 1", '1') && log_count(qr/LOG:  pgque_bgw alert slot_unpolled cleared/) == 1,
   'one LOG line for the clearing');
@n = grep { /"kind": "slot_unpolled"/ && /"event": "cleared"/ } notifications();
is(scalar(@n), 1, 'one NOTIFY for the clearing');

# --- slot_stale --------------------------------------------------------------
my $other = 1 - $slot;
$node->safe_psql('postgres', qq{select pgque.claim_slot('pq', 'w', $other, 'worker-2', '1 second')});
ok($node->poll_query_until('postgres', qq{
       select count(*) = 1 from pgque.alerts where kind = 'slot_stale' and slot = $other}),
   'slot_stale opens when a lease expired and nobody took over');
like($node->safe_psql('postgres', qq{select details->>'lease_owner' from pgque.alerts where kind = 'slot_stale'}),
     qr/^worker-2$/, 'naming the worker that held it');
$node->safe_psql('postgres', qq{select pgque.claim_slot('pq', 'w', $other, 'worker-3')});
ok($node->poll_query_until('postgres', q{select count(*) = 0 from pgque.alerts where kind = 'slot_stale'}),
   'and clears when another worker takes the slot over');

# --- ticker_stalled (ticking paused while events arrive) ----------------------
$node->safe_psql('postgres', q{
    select pgque.create_queue('tq');
    select pgque.set_queue_config('tq', 'ticker_paused', 'true');
    select pgque.send('tq', 'stuck');
});
ok($node->poll_query_until('postgres', q{select count(*) = 1 from pgque.alerts where kind = 'ticker_stalled' and queue_name = 'tq'}),
   'ticker_stalled opens for a queue with new events and no tick');
$node->safe_psql('postgres', q{select pgque.set_queue_config('tq', 'ticker_paused', 'false')});
ok($node->poll_query_until('postgres', q{select count(*) = 0 from pgque.alerts where kind = 'ticker_stalled'}),
   'and clears once the queue ticks again');

# --- consumer_lagging ----------------------------------------------------------
$node->safe_psql('postgres', q{
    select pgque.create_queue('lq');
    select pgque.subscribe('lq', 'slowpoke');
    select pgque.send('lq', 'waiting');
});
ok($node->poll_query_until('postgres', q{select count(*) = 1 from pgque.alerts where kind = 'consumer_lagging' and consumer = 'slowpoke'}),
   'consumer_lagging opens when the oldest unconsumed event is older than lag_alert_after');
$node->safe_psql('postgres', q{
    select pgque.ack(batch_id) from (select distinct batch_id from pgque.receive('lq', 'slowpoke')) b});
ok($node->poll_query_until('postgres', q{select count(*) = 0 from pgque.alerts where kind = 'consumer_lagging' and consumer = 'slowpoke'}),
   'and clears when it catches up');

# --- rotation_pinned (a forgotten subscription) --------------------------------
$node->safe_psql('postgres', q{
    select pgque.create_queue('rq');
    select pgque.set_queue_config('rq', 'rotation_period', '1 second');
    select pgque.subscribe('rq', 'active');
    select pgque.subscribe('rq', 'forgotten');
});
for my $i (1 .. 16)
{
    $node->safe_psql('postgres', qq{select pgque.send('rq', 'r$i')});
    sleep(0.5);
    $node->safe_psql('postgres', q{
        select pgque.ack(batch_id) from (select distinct batch_id from pgque.receive('rq', 'active', 1000)) b});
}
ok($node->poll_query_until('postgres', q{
       select count(*) = 1 from pgque.alerts where kind = 'rotation_pinned' and consumer = 'forgotten'}),
   'rotation_pinned opens, naming the forgotten subscription');
is($node->safe_psql('postgres', q{select count(*) from pgque.alerts where kind = 'rotation_pinned' and consumer = 'active'}),
   '0', 'not the active one');
$node->safe_psql('postgres', q{select pgque.unsubscribe('rq', 'forgotten')});
ok($node->poll_query_until('postgres', q{select count(*) = 0 from pgque.alerts where kind = 'rotation_pinned'}),
   'and clears when the subscription is removed');

# --- the watchdog keeps working while the ticker fails on a queue -----------------
$node->safe_psql('postgres', q{
    select pgque.create_queue('broken');
    select pgque.send('broken', 'cannot be ticked');
});
my $qid = $node->safe_psql('postgres', q{select queue_id from pgque.queue where queue_name = 'broken'});
# every tick of this queue now fails (its tick sequence is gone)
$node->safe_psql('postgres', qq{alter sequence pgque.event_${qid}_tick_seq rename to broken_seq});
$node->safe_psql('postgres', q{select pgque.send('broken', 'more')});
ok($node->poll_query_until('postgres', q{
       select count(*) = 1 from pgque.alerts where kind = 'ticker_stalled' and queue_name = 'broken'}),
   'ticker_stalled opens while the ticker fails on that queue');
like(slurp_file($node->logfile), qr/WARNING:  pgque_bgw ticker: ticking queue "broken" failed/,
     'the ticker logs its error with the queue named and goes on');
like($node->safe_psql('postgres', q{select detail from pgque.status() where component = 'ticker'}),
     qr/last error at .*ticking queue "broken"/, 'status() shows the ticker\'s last error');
$node->safe_psql('postgres', qq{alter sequence pgque.broken_seq rename to event_${qid}_tick_seq});
ok($node->poll_query_until('postgres', q{
       select count(*) = 0 from pgque.alerts where queue_name = 'broken'}),
   'the queue ticks again once repaired, and the alert clears');

# --- the alert rules without any worker ------------------------------------------
$node->safe_psql('postgres', q{alter system set pgque_bgw.enabled = off});
$node->reload;
$node->poll_query_until('postgres', q{
    select count(*) = 0 from pg_stat_activity where backend_type like 'pgque_bgw %' and datname = 'postgres'});
$node->safe_psql('postgres', q{
    select pgque.create_queue('nt');
    select pgque.send('nt', 'no ticker');
    select pgque._watchdog_pass('2 s', '2 s', '3 s', '1 s', '3 s');
});
sleep(1.5);
$node->safe_psql('postgres', q{select pgque._watchdog_pass('2 s', '2 s', '3 s', '1 s', '3 s')});
is($node->safe_psql('postgres', q{
       select count(*) from pgque.alerts where kind = 'ticker_stalled' and queue_name = 'nt'}),
   '1', 'the alert rules run without any worker (ticker_stalled for the unticked queue)');
$node->safe_psql('postgres', q{alter system reset pgque_bgw.enabled});
$node->reload;
ok($node->poll_query_until('postgres', q{
       select count(*) = 3 from pg_stat_activity where backend_type like 'pgque_bgw %' and datname = 'postgres'}),
   'with the workers back on');
ok($node->poll_query_until('postgres', q{select count(*) = 0 from pgque.alerts where queue_name = 'nt'}),
   'the ticker ticks the queue and the watchdog clears its alert');

$listener->quit;
$outsider->quit;
$node->stop('fast');
done_testing();
