# Alerts name causes (ADR 0024): a transaction that holds a queue's rotation
# back opens long_transaction naming its pid, and no rotation_pinned blames
# the healthy, caught-up consumers; when it ends the alert clears and the
# queue rotates again.  A snapshot without an xid does not hold rotation.
# (A lagging consumer still gets rotation_pinned: test/t/009_alerts.pl.)
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);

my $node = PgqueNode->new_preloaded('long_xact', conf => qq{
pgque_bgw.launcher_naptime = '1s'
pgque_bgw.maint_interval = '1s'
pgque_bgw.watchdog_interval = '1s'
pgque_bgw.lag_alert_after = '1h'
pgque_bgw.long_transaction_after = '3s'
autovacuum = off
max_prepared_transactions = 2
});
$node->safe_psql('postgres', q{create extension pgque_bgw});
$node->poll_query_until('postgres', q{
    select count(*) = 3 from pg_stat_activity where backend_type like 'pgque_bgw %' and datname = 'postgres'});

$node->safe_psql('postgres', q{
    select pgque.create_queue('lx');
    select pgque.set_queue_config('lx', 'rotation_period', '1 second');
    select pgque.subscribe('lx', c) from unnest(array['c1', 'c2', 'c3']) c;
});

# one round of healthy traffic: an event, and every consumer drains
my $n = 0;
sub round
{
    $n++;
    $node->safe_psql('postgres', qq{select pgque.send('lx', 'e$n')});
    sleep(0.3);
    $node->safe_psql('postgres', q{
        select pgque.ack(b.batch_id)
          from unnest(array['c1', 'c2', 'c3']) c,
               lateral (select distinct batch_id from pgque.receive('lx', c, 1000)) b});
}

# traffic until the query is true (or the deadline): true if it became true
sub rounds_until
{
    my ($sql, $secs) = @_;
    my $deadline = time() + $secs;
    while (time() < $deadline)
    {
        round();
        return 1 if $node->safe_psql('postgres', $sql) eq 't';
    }
    return 0;
}

sub switches
{
    return $node->safe_psql('postgres', q{select queue_switch_time from pgque.queue where queue_name = 'lx'});
}

ok(rounds_until(q{select queue_cur_table <> 0 from pgque.queue where queue_name = 'lx'}, 60),
   'healthy consumers: the queue rotates');

# --- a snapshot without an xid does not hold rotation -------------------------
my $reader = $node->background_psql('postgres');
$reader->query_safe('begin isolation level repeatable read');
$reader->query_safe('select count(*) from pgque.queue');
my $before = switches();
ok(rounds_until(qq{select queue_switch_time > '$before' from pgque.queue where queue_name = 'lx'}, 60),
   'a repeatable-read snapshot without an xid: the queue still rotates');
# older than long_transaction_after; the consumers keep polling meanwhile:
# an idle queue now gets a tick past the switch from rotation step 1 (ADR
# 0060), and a consumer that polled nothing for longer than the grace would
# rightly be rotation_pinned
my $until = time() + 4;
round() while time() < $until;
is($node->safe_psql('postgres', q{select count(*) from pgque.alert where kind = 'long_transaction'}),
   '0', 'and no long_transaction alert for it');
$reader->query_safe('commit');

# --- a transaction with an xid, idle in transaction -----------------------------
my $holder = $node->background_psql('postgres');
$holder->query_safe('begin isolation level repeatable read');
my $xid = $holder->query_safe('select pg_current_xact_id()');
my $pid = $holder->query_safe('select pg_backend_pid()');
chomp($xid);
chomp($pid);
my $t0 = time();
ok(rounds_until(qq{select count(*) = 1 from pgque.alerts where kind = 'long_transaction'
                      and queue_name = 'lx' and (details->>'pid')::int = $pid}, 120),
   'long_transaction opens, naming the pid of the idle transaction');
diag(sprintf('figure: long_transaction opened %.1f s after the transaction took its xid', time() - $t0));
my $d = $node->safe_psql('postgres', q{
    select format('%s|%s|%s|%s', details->>'holds', details->>'xid', details->>'state',
                  (details->>'age_seconds')::numeric >= 3)
      from pgque.alerts where kind = 'long_transaction'});
is($d, "xid|$xid|idle in transaction|t", 'with its xid, state and age');
like(slurp_file($node->logfile), qr/alert long_transaction opened: queue "lx".*"pid": $pid/,
     'one WARNING names it in the server log');

# caught-up consumers are not blamed, however long it lasts
for (1 .. 8) { round(); }
is($node->safe_psql('postgres', q{select count(*) from pgque.alert where kind = 'rotation_pinned'}),
   '0', 'no rotation_pinned for the caught-up consumers');
is($node->safe_psql('postgres', q{
       select count(*) from pgque.alert where kind = 'long_transaction' and cleared_at is null}),
   '1', 'the alert opened once');

$holder->query_safe('commit');
ok($node->poll_query_until('postgres', q{select count(*) = 0 from pgque.alerts where kind = 'long_transaction'}),
   'it clears when the transaction ends');
is($node->safe_psql('postgres', q{select count(*) from pgque.alert where kind = 'long_transaction'}),
   '1', 'one history row in all');
$before = switches();
ok(rounds_until(qq{select queue_switch_time > '$before' from pgque.queue where queue_name = 'lx'}, 60),
   'and the queue rotates again');

# --- a prepared transaction holds rotation too: named by its gid -----------------
$node->safe_psql('postgres', q{begin; select pg_current_xact_id(); prepare transaction 'lx_gid'});
ok(rounds_until(q{select count(*) = 1 from pgque.alerts where kind = 'long_transaction'
                     and details->>'prepared_gid' = 'lx_gid'}, 120),
   'a prepared transaction that holds rotation is named by its gid');
$node->safe_psql('postgres', q{rollback prepared 'lx_gid'});
ok($node->poll_query_until('postgres', q{select count(*) = 0 from pgque.alerts where kind = 'long_transaction'}),
   'and clears when it is rolled back');
is($node->safe_psql('postgres', q{select count(*) from pgque.alert where kind = 'rotation_pinned'}),
   '0', 'no consumer was blamed in all this');

$reader->quit;
$holder->quit;
$node->stop;
done_testing();
