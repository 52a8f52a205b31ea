# A ledger over partition slot workers (ADR 0128): the guard any change
# of the slot path's open, ack, epoch row or window must pass again.  A
# consumer of 4 slots with failure policy pause on a queue of 32 buckets;
# events sent in many small transactions with a tick after each, so that
# every window is cut by the span (max_return x n), not by the ticks there
# are; fsync on.  Round 1: a worker is held between a part's receive and
# its ack until its leases expire; a second worker takes its slots over
# and drains them; the first one is let go and must be fenced (a stale
# epoch racing a takeover: its ack refused, its record of the part rolled
# back).  Round 2: the slot count is resized 4 -> 8 while a worker drains,
# and the postmaster is stopped immediately mid-drain.  Round 3: some
# events are nacked (their keys pause until the retry is done) and the
# worker's backend is SIGKILLed (crash restart).  Each part is recorded
# and acked in one transaction: every event sent must be in the ledger
# once, at the slot of its key for the n it was read with, each key's
# events in the order they were sent, the nacked ones once each and
# delivered by their retry.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;

# quitting a psql whose backend was just killed may write to a closed pipe
$SIG{PIPE} = 'IGNORE';

my $node = PgqueNode->new_preloaded('slot_window_ledger', conf => q{
restart_after_crash = on
fsync = on
pgque_bgw.enabled = off
});
$node->safe_psql('postgres', q{
    create extension pgque_bgw;
    select pgque.create_queue('q153'), pgque.set_queue_config('q153', 'partition_buckets', '32');
    select pgque.maint_rotate_tables_step2();
    select pgque.subscribe_slot('q153', 'c', s, 4, 'pause') from generate_series(0, 3) s;
});
$node->slot_ledger('postgres', queue => 'q153', keys => 37, part => 20, lock => 153, nap => 0.05, release => 1);

sub got { return $node->safe_psql('postgres', 'select count(*) from got'); }

# round 1: a worker held between a part's receive and its ack (its
# recorded part not committed, its epoch row locked) until its leases
# expire; a second worker takes the slots over and drains them; the first
# one, let go, is fenced: its ack refused, its part's record rolled back
$node->safe_psql('postgres', 'call send_round(1, 40, 15)');
my $gate = $node->background_psql('postgres');
my $a = $node->background_psql('postgres', on_error_stop => 0);
my $apid = $a->query_safe('select pg_backend_pid()');
$a->query_until(qr/draining/, "\\echo draining\ncall drain('wA-gated', '1 second');\n");
ok(PgqueNode::poll_until(sub { got() >= 150 }, 120), 'round 1: worker A delivered 150 events');
$gate->query_safe('select pg_advisory_lock(153)');
ok(PgqueNode::poll_until(sub {
    $node->safe_psql('postgres', qq{
        select count(*) from pg_locks where pid = $apid and locktype = 'advisory' and not granted}) eq '1' }, 60),
   'round 1: A waits between a part and its ack');
ok(PgqueNode::poll_until(sub {
    $node->safe_psql('postgres', q{
        select count(*) from pgque._slot_leases() l where l.owner = 'wA-gated' and l.lease_until > now()}) eq '0' }, 60),
   "round 1: A's leases expired meanwhile");
$node->safe_psql('postgres', q{call drain('wB', '1 hour')});
is($node->safe_psql('postgres', q{
    select count(*) from sent s where s.payload like 'r1-%' and not exists (select from got g where g.payload = s.payload)}),
   '0', 'round 1: worker B took the slots over and drained them');
$gate->query_safe('select pg_advisory_unlock(153)');
$gate->quit;
eval { $a->quit; };
is($node->safe_psql('postgres', q{select count(*) from got where worker = 'wA-gated' and seq > (select min(seq) from got where worker = 'wB')}),
   '0', 'round 1: A, let go after the takeover, recorded nothing more (its ack fenced)');

# round 2: a resize 4 -> 8 during the drain, then an immediate stop
$node->safe_psql('postgres', 'call send_round(2, 40, 15)');
my $before = got();
my $c = $node->background_psql('postgres', on_error_stop => 0);
$c->query_until(qr/draining/, "\\echo draining\ncall drain('wC', '1 hour');\n");
ok(PgqueNode::poll_until(sub { got() >= $before + 100 }, 120), 'round 2: worker C delivered 100 events');
$node->safe_psql('postgres', q{call send_round(3, 10, 15)});
ok($node->safe_psql('postgres', q{select pgque.resize_partitioned('q153', 'c', 8) is not null}) eq 't',
   'round 2: resized 4 -> 8 while C drains');
$node->safe_psql('postgres', q{call send_round(4, 10, 15)});
ok(PgqueNode::poll_until(sub { got() >= $before + 300 }, 120), 'round 2: C delivered 300 events');
$node->stop('immediate');
eval { $c->quit; };
$node->start;
$node->safe_psql('postgres', q{call drain('wC', '1 hour')});
is($node->safe_psql('postgres', q{select n from pgque.partition_consumer where co_name = 'c'}), '8',
   'round 2: the drain switched to the new layout');

# round 3: nacks (keys paused until their retry) and a backend killed
$node->safe_psql('postgres', q{
    call send_round(5, 30, 15);
    insert into fail select payload from sent where payload like 'r5-%' and payload like '%-3';
});
$before = got();
my $d = $node->background_psql('postgres', on_error_stop => 0);
my $dpid = $d->query_safe('select pg_backend_pid()');
$d->query_until(qr/draining/, "\\echo draining\ncall drain('wD', '1 hour');\n");
ok(PgqueNode::poll_until(sub { got() >= $before + 120 }, 120), 'round 3: worker D delivered 120 events');
$node->kill9_and_wait($dpid);
eval { $d->quit; };
ok(PgqueNode::wait_back($node, 'postgres'), "round 3: back after the backend's kill");
$node->safe_psql('postgres', q{call drain('wD', '1 hour')});

# the ledger
my ($sent, $got, $uniq, $missing) = split /\|/, $node->safe_psql('postgres', q{
    select (select count(*) from sent), (select count(*) from got), (select count(distinct payload) from got),
           (select count(*) from sent s where not exists (select from got g where g.payload = s.payload))});
diag("figure: $sent events sent, $got delivered and acked");
is("$got:$uniq:$missing", "$sent:$sent:0", 'every event sent delivered and acked once, none missing');
is($node->safe_psql('postgres', q{select count(*) from got where slot <> pgque._slot_of(key, n_at)}), '0',
   'each delivered at the slot of its key for the n it was read with');
is($node->safe_psql('postgres', q{
    select count(*) from (select s.n, lag(s.n) over (partition by g.key order by g.seq) as prev
                            from got g join sent s using (payload)) x
     where prev > n}), '0', "each key's events in the order they were sent");
is($node->safe_psql('postgres', q{
    select count(*) || ':' || count(*) filter (where f.done) || ':'
           || count(*) filter (where (select g.retry from got g where g.payload = f.payload) > 0)
      from fail f}), '30:30:30', 'each nacked event nacked once and delivered by its retry');
is($node->safe_psql('postgres', q{select count(*) from pgque.blocked_key}), '0', 'no key left paused');
$node->stop('fast');
done_testing();
