# Retention and replay by time (ADR 0067), with the workers ticking and
# maintaining:
#  1. a queue with retention keeps its events past every cursor for the
#     retention (rotation goes on meanwhile), then drops them; the
#     retention_size alert opens over pgque_bgw.retention_size_limit and
#     clears under it;
#  2. a seek under a backend kill (SIGKILL: the postmaster restarts the
#     server), with a ledger of what was sent, delivered and acked: a seek
#     killed before its commit moves nothing; one killed after it, with a
#     batch delivered and not acked, delivers that batch again and then
#     the rest, exactly the events ticked at or after the position, in
#     order, with their ids.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);

# quitting a psql whose backend was just killed may write to a closed pipe
$SIG{PIPE} = 'IGNORE';

my $node = PgqueNode->new('retention');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'pgque_bgw'
pgque_bgw.launcher_naptime = '1s'
pgque_bgw.maint_interval = '1s'
pgque_bgw.watchdog_interval = '1s'
pgque_bgw.lag_alert_after = '1h'
restart_after_crash = on
autovacuum = off
});
$node->start;
$node->safe_psql('postgres', q{create extension pgque_bgw});
$node->poll_query_until('postgres', q{
    select count(*) = 3 from pg_stat_activity where backend_type like 'pgque_bgw %' and datname = 'postgres'})
  or die 'the workers did not start';

# --- 1. retention ---------------------------------------------------------------
my $retention = 6;    # seconds: a slow machine takes a few for the first rounds
$node->safe_psql('postgres', qq{
    select pgque.create_queue('ret', '{"retention": "$retention seconds", "rotation_period": "200 milliseconds"}');
    select pgque.subscribe('ret', 'c');
});

# one round: an event, and the consumer acks what the ticker made of the
# earlier ones
my $n = 0;
my %acked_ret;
sub round
{
    $n++;
    $node->safe_psql('postgres', qq{select pgque.send('ret', 'e$n')});
    sleep(0.2);
    my $rows = $node->safe_psql('postgres', q{select batch_id, msg_id from pgque.receive('ret', 'c', 1000)});
    return if $rows eq '';
    my $batch;
    for (split /\n/, $rows) { my ($b, $id) = split /\|/; $batch = $b; $acked_ret{$id} = 1; }
    $node->safe_psql('postgres', qq{select pgque.ack($batch)});
}

sub stored
{
    my ($ev) = @_;
    return $node->safe_psql('postgres', qq{
        select count(*) from pgque.event_1 where ev_id = $ev});
}

# the first event, consumed
my $deadline = time() + 60;
round() until $acked_ret{1} || time() > $deadline;
ok($acked_ret{1}, 'the consumer acked the first event');
my $first_tick_age = q{
    select extract(epoch from clock_timestamp() - min(t.tick_time))
      from pgque.tick t
     where t.tick_queue = 1
       and t.tick_event_seq >= 1};
my $switches0 = $node->safe_psql('postgres', q{select queue_switch_step1 from pgque.queue where queue_name = 'ret'});

# at once, while the first event is young: a replay from the earliest
# retained tick starts at it; then the consumer goes back to the latest
$node->safe_psql('postgres', q{select pgque.seek('ret', 'c', 'earliest')});
is($node->safe_psql('postgres', q{select min(msg_id) from pgque.receive('ret', 'c', 1000)}), '1',
   'a replay from the earliest retained tick starts at the first event');
$node->safe_psql('postgres', q{select pgque.seek('ret', 'c', 'latest')});

# while the first event's tick is younger than the retention, it stays,
# although the consumer passed it and rotation goes on around it
my ($kept_while_young, $rounds_young) = (1, 0);
$deadline = time() + 60;
while (time() < $deadline)
{
    my $age = $node->safe_psql('postgres', $first_tick_age);
    last if $age eq '' || $age >= $retention - 1;
    round();
    $rounds_young++;
    # read the age again after the check: a read that began when the tick
    # was younger than the retention must find the event
    my $still = stored(1);
    my $age_after = $node->safe_psql('postgres', $first_tick_age);
    $kept_while_young = 0 if $still ne '1' && $age_after < $retention;
}
ok($rounds_young >= 1, "traffic ran while the first event was younger than the retention ($rounds_young rounds)");
ok($kept_while_young, 'the first event stayed stored while younger than the retention, its consumer long past it');
isnt($node->safe_psql('postgres', q{select queue_switch_step1 from pgque.queue where queue_name = 'ret'}),
     $switches0, 'rotation went on meanwhile (retention held only the table with the first event)');

# after the retention, rotation truncates it
my $dropped = 0;
$deadline = time() + 60;
while (time() < $deadline)
{
    round();
    if (stored(1) eq '0') { $dropped = 1; last; }
}
ok($dropped, 'once older than the retention, the first event is truncated');
ok($node->safe_psql('postgres', q{
    select (select tick_id from pgque.seek('ret', 'c', 'earliest')) > 1}) eq 't',
   'the earliest retained tick moved past it');

# the retention_size alert: over the limit it opens, under it it clears
$node->safe_psql('postgres', q{
    alter system set pgque_bgw.retention_size_limit = '8kB';
    select pg_reload_conf();
});
ok($node->poll_query_until('postgres', q{
    select count(*) = 1 from pgque.alert where kind = 'retention_size' and subject = 'ret' and cleared_at is null}),
   'retention_size opens for the queue over pgque_bgw.retention_size_limit');
is($node->safe_psql('postgres', q{
    select (details->>'bytes')::int8 > 8192 and details->>'limit_bytes' = '8192'
      from pgque.alert where kind = 'retention_size' and cleared_at is null}), 't',
   'its details carry the bytes and the limit');
$node->safe_psql('postgres', q{
    alter system reset pgque_bgw.retention_size_limit;
    select pg_reload_conf();
});
ok($node->poll_query_until('postgres', q{
    select count(*) = 0 from pgque.alert where kind = 'retention_size' and cleared_at is null}),
   'and clears when the limit is off');

# --- 2. seek under a backend kill, with a ledger -------------------------------
$node->safe_psql('postgres', q{
    select pgque.create_queue('led', '{"retention": "1 hour"}');
    select pgque.subscribe('led', 'c');
});
my %sent;        # id -> 'a' | 'b' | 'c'
my @delivered;   # ids, in delivery order, after the seek
my @acked;       # ids acked after the seek
sub send_part
{
    my ($label, $count) = @_;
    my @ids = split /\n/, $node->safe_psql('postgres', qq{
        select pgque.send('led', '$label' || i) from generate_series(1, $count) i});
    $sent{$_} = $label for @ids;
    # a tick of its own: the worker may tick too, never across the boundary
    $node->safe_psql('postgres', q{select pgque.ticker('led')});
}
send_part('a', 50);
my $t1 = $node->safe_psql('postgres', q{select clock_timestamp()});
sleep(0.05);
send_part('b', 50);
send_part('c', 50);

# drain: receive and ack until nothing is left, recording both
sub drain
{
    my ($record) = @_;
    for (1 .. 100)
    {
        my $rows = $node->safe_psql('postgres', q{select batch_id, msg_id from pgque.receive('led', 'c', 40)});
        last if $rows eq '';
        my ($batch, @ids);
        for (split /\n/, $rows) { my ($b, $id) = split /\|/; $batch = $b; push @ids, $id; }
        push @delivered, @ids if $record;
        $node->safe_psql('postgres', qq{select pgque.ack($batch)});
        push @acked, @ids if $record;
    }
}
drain(0);
is($node->safe_psql('postgres', q{select pending_events from pgque.get_consumer_info('led', 'c')}), '0',
   'the consumer passed all 150 events');

sub kill_backend_after
{
    my ($sql, $label) = @_;
    my $victim = $node->background_psql('postgres');
    my $pid = $victim->query_safe('select pg_backend_pid()');
    my $out = $victim->query_safe($sql);
    $node->kill9_and_wait($pid);
    eval { $victim->quit; };
    ok(PgqueNode::wait_back($node, 'postgres'), "$label: the server is back after the crash restart");
    return $out;
}

# killed inside the seek's transaction: nothing moved (the cursor's tick
# is the same, and nothing is delivered)
my $cursor = $node->safe_psql('postgres', q{select last_tick from pgque.get_consumer_info('led', 'c')});
kill_backend_after(qq{begin; select pgque.seek('led', 'c', '$t1');}, 'seek before its commit');
is($node->safe_psql('postgres', q{select last_tick from pgque.get_consumer_info('led', 'c')}), $cursor,
   'a seek killed before its commit moved nothing');
is($node->safe_psql('postgres', q{select count(*) from pgque.receive('led', 'c', 1000)}), '0',
   'and nothing is delivered again');

# killed after the seek committed and a batch was delivered, before its ack
my $got = kill_backend_after(qq{
    select clamped from pgque.seek('led', 'c', '$t1');
    select string_agg(msg_id::text, ',' order by msg_id) from pgque.receive('led', 'c', 40);},
  'seek committed, batch delivered');
my @first_batch = split /,/, (split /\n/, $got)[-1];
push @delivered, @first_batch;
is(scalar(@first_batch), 40, 'the seek delivered a batch of 40 before the kill');
drain(1);

# the ledger: after the seek, exactly the events of b and c were acked, each
# once, in id order; the killed batch came again first
my @expect = sort { $a <=> $b } grep { $sent{$_} ne 'a' } keys %sent;
is(join(',', @acked), join(',', @expect), 'acked after the seek: every event of b and c, once each, in order');
is(join(',', @delivered[40 .. 79]), join(',', @first_batch), 'the batch delivered before the kill came again, same ids');
is(scalar(grep { $sent{$_} eq 'a' } @delivered), 0, 'nothing ticked before the position was delivered');
$node->safe_psql('postgres', q{select pgque.ticker('led')});
is($node->safe_psql('postgres', q{select count(*) from pgque.receive('led', 'c', 1000)}), '0',
   'nothing left behind');

$node->stop('fast');
done_testing();
