# Reliability leftovers of ADR 0089 on a real server (fsync on, workers
# off: the test ticks):
#   - a hot standby reads a batch the primary opened (get_batch_events,
#     batch_event_sql): a plain consumer's (next_batch), a cooperative
#     member's and a partition slot's, the same events as the primary.
#     _open_batch locked the subscription row FOR UPDATE, which a standby
#     refuses (25006); PgQ's readers take no lock.
#   - a slot forget takes effect at commit, also when the backend dies: an
#     unsubscribe of a consumer's last slot whose backend is terminated
#     before the commit keeps the leases (the owner renews under the same
#     epoch); one terminated right after its commit leaves none, and a
#     claim after it takes a larger epoch.
#   - the attack on the standby read: a pgque_reader that may not use the
#     consumer is refused there as on the primary.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PgqueNode->new_preloaded('rl_primary', init => { allows_streaming => 1 }, conf => q{
pgque_bgw.enabled = off
fsync = on
});
$node->safe_psql('postgres', q{
    create extension pgque_bgw;
    select pgque.create_queue('rq');
    select pgque.subscribe('rq', 'plain');
    select pgque.register_subconsumer('rq', 'grp', 'm1');
    select pgque.subscribe_slot('rq', 'part', 0, 1);
    select pgque.claim_slot('rq', 'part', 0, 'w0', '1 hour');
    select pgque.send('rq', 'ev', 'e' || i, 'k' || i) from generate_series(1, 5) i;
    create role rl_mallory login;
    create role rl_alice login;
    grant pgque_reader to rl_mallory, rl_alice;
    set role rl_alice;
    select pgque.subscribe('rq', 'alice_c');
    reset role;
    select pgque.send('rq', 'ev', 'e' || i, 'k' || i) from generate_series(1, 5) i;
    select pgque.ticker('rq');
});

# --- a standby reads batches the primary opened -------------------------------
$node->backup('bk');
my $standby = PgqueNode->new('rl_standby');
$standby->init_from_backup($node, 'bk', has_streaming => 1);
$standby->start;

my %batch;
$batch{plain} = $node->safe_psql('postgres', q{select pgque.next_batch('rq', 'plain')});
$batch{member} = $node->safe_psql('postgres',
    q{select max(batch_id) from pgque.receive_coop('rq', 'grp', 'm1', 100)});
$batch{slot} = $node->safe_psql('postgres',
    q{select max(batch_id) from pgque.receive_partitioned('rq', 'part', 0, 1, 'w0', 100)});
$batch{alice} = $node->safe_psql('postgres', q{select pgque.next_batch('rq', 'alice_c')},
                                 extra_params => ['-U', 'rl_alice']);
$node->wait_for_catchup($standby);
for my $kind (qw(plain member slot))
{
    my $b = $batch{$kind};
    like($b, qr/^\d+$/, "the primary opened a $kind batch");
    my $sql = qq{select coalesce(string_agg(ev_data, ',' order by ev_id), '') from pgque.get_batch_events($b)};
    my $on_primary = $node->safe_psql('postgres', $sql);
    my ($rc, $on_standby, $err) = $standby->psql('postgres', $sql);
    is($rc, 0, "get_batch_events of the $kind batch runs on the standby") or diag($err);
    is($on_standby, $on_primary, "... and returns the primary's events ($on_primary)");
    ($rc, my $via_sql, $err) = $standby->psql('postgres', qq{
        do \$\$ begin execute pgque.batch_event_sql($b); end \$\$; select 'ok'});
    is("$rc $via_sql", '0 ok', "batch_event_sql of the $kind batch runs on the standby") or diag($err);
}
# the attack: a reader that may not use the consumer reads its batch on the
# standby, where no row lock guards the read; the same authorization refuses it
like($batch{alice}, qr/^\d+$/, 'rl_alice opened a batch of her own consumer on the primary');
my ($rc, $out, $err) = $standby->psql('postgres', qq{select count(*) from pgque.get_batch_events($batch{alice})},
                                      extra_params => ['-U', 'rl_mallory']);
like($err, qr/permission denied|may not|42501/i, 'on the standby a reader without the consumer\'s rights is refused')
  or diag("rc $rc out $out");
($rc, $out, $err) = $standby->psql('postgres', qq{select count(*) from pgque.get_batch_events($batch{alice})},
                                   extra_params => ['-U', 'rl_alice']);
is($out, '10', '... and its owner reads it there');
($rc, $out, $err) = $standby->psql('postgres', q{select * from pgque.get_batch_events(999999)});
like($err, qr/batch not found: 999999/, 'an unknown batch on the standby: batch not found, as on the primary');
# the primary still locks and finishes them
$node->safe_psql('postgres', qq{select pgque.finish_batch($batch{plain})});
$node->safe_psql('postgres', q{select pgque.ack_partitioned('rq', 'part', 0, 1, 'w0')});
$standby->stop('fast');

# --- a forget at commit, the backend killed ---------------------------------
my $epoch = $node->safe_psql('postgres',
    q{select epoch from pgque._slot_leases() where consumer = 'part' and slot = 0});
like($epoch, qr/^\d+$/, 'w0 holds slot 0 under an epoch');
my $bg = $node->background_psql('postgres', on_error_stop => 1);
my $pid = $bg->query_safe(q{select pg_backend_pid()});
$bg->query_safe(q{begin; select pgque.unsubscribe_slot('rq', 'part', 0)});
is($node->safe_psql('postgres', q{select owner || ' ' || epoch from pgque._slot_leases() where consumer = 'part'}),
   "w0 $epoch", 'while the unsubscribe is open, the lease is w0\'s for everybody else');
$node->safe_psql('postgres', qq{select pg_terminate_backend($pid, 30000)});
$bg->quit;
is($node->safe_psql('postgres', q{select owner || ' ' || epoch from pgque._slot_leases() where consumer = 'part'}),
   "w0 $epoch", 'its backend terminated before the commit: the lease stays, same epoch');
is($node->safe_psql('postgres', q{select pgque.claim_slot('rq', 'part', 0, 'w0', '1 hour')}), $epoch,
   '... and w0 renews it under that epoch');

$bg = $node->background_psql('postgres', on_error_stop => 1);
$pid = $bg->query_safe(q{select pg_backend_pid()});
$bg->query_safe(q{select pgque.unsubscribe_slot('rq', 'part', 0)});
$node->safe_psql('postgres', qq{select pg_terminate_backend($pid, 30000)});
$bg->quit;
is($node->safe_psql('postgres', q{select count(*) from pgque._slot_leases() where consumer = 'part'}),
   '0', 'an unsubscribe committed, its backend terminated right after: no lease is left');
$node->safe_psql('postgres', q{select pgque.subscribe_slot('rq', 'part', 0, 1)});
ok($node->safe_psql('postgres', q{select pgque.claim_slot('rq', 'part', 0, 'w1', '1 hour')}) > $epoch,
   'subscribed again, the next claim takes a larger epoch');

# an immediate stop after the commit: nothing comes back, epochs go on
$node->safe_psql('postgres', q{select pgque.unsubscribe_slot('rq', 'part', 0)});
$node->stop('immediate');
$node->start;
is($node->safe_psql('postgres', q{select count(*) from pgque._slot_leases()}), '0',
   'after an immediate stop and a restart no lease is left');
$node->safe_psql('postgres', q{select pgque.subscribe_slot('rq', 'part', 0, 1)});
ok($node->safe_psql('postgres', q{select pgque.claim_slot('rq', 'part', 0, 'w1', '1 hour')}) > $epoch,
   '... and a new claim\'s epoch is still larger');

$node->stop('fast');
done_testing();
