# The second reader's faults on a pausing slot's read by its row's key
# (ADR 0139), with a ledger.  A consumer with failure policy pause on a
# queue of 8 buckets, fsync on, a crash restart after a backend's SIGKILL.
# Each part is recorded and acked in one transaction (a fenced or killed
# worker's record rolls back with its part); every event sent must be in
# the ledger once, at the slot of its key for the n it was read with,
# each key's events in the order they were sent, each nacked one
# delivered by its retry, no key left paused.
#
# Round 1: a frozen old owner.  Worker w1 has read the part that holds a
# blocked key's head (the head's retry: the read marks the key done in
# its batch, a row of pgque.blocked_key it holds until its transaction
# ends) and stops there; its lease expires and w2 takes the slot over.
# w2's receive reads the same head and marks the same row: it must not
# wait for w1 (a takeover never waits for the previous owner, ADR 0023 and
# the nack's own bound, _slot_nack_event): within a second and a bit it
# is told that another open transaction holds the key (55P03), and reads
# the part once w1 is gone.  w1, let go, is fenced.
#
# Round 2: nacks under a worker's SIGKILL between a part's receive (its
# head's key marked done) and its ack, a resize 1 -> 2 while keys are
# paused, and a SIGKILL of the postmaster mid-drain.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes ();

# quitting a psql whose backend was just killed may write to a closed pipe
$SIG{PIPE} = 'IGNORE';

my $node = PgqueNode->new_preloaded('attack11_paused_ledger', conf => q{
restart_after_crash = on
fsync = on
pgque_bgw.enabled = off
});
$node->safe_psql('postgres', q{
    create extension pgque_bgw;
    select pgque.create_queue('q169'), pgque.set_queue_config('q169', 'partition_buckets', '8');
    select pgque.maint_rotate_tables_step2();
    select pgque.subscribe_slot('q169', 'c', 0, 1, 'pause');
});
$node->slot_ledger('postgres', queue => 'q169', keys => 13, part => 7, lock => 169);

sub got { return $node->safe_psql('postgres', 'select count(*) from got'); }

# round 1: key k1 blocks on a1 (its nack); a1's retry is the head w1 reads
$node->safe_psql('postgres', q{
    insert into sent (payload, key) values ('a1', 'k1'), ('b1', 'k2'), ('a2', 'k1');
    insert into fail values ('a1');
    select count(pgque.send('q169', 'e', payload, key)) from (select * from sent order by n) s;
    select pgque.force_tick('q169'), pgque.ticker('q169');
    select pgque.claim_slot('q169', 'c', 0, 'w1', '1 hour');
});
$node->safe_psql('postgres', q{
    select take('w1', 0, 1, 10);
    select pgque.ack_partitioned('q169', 'c', 0, 1, 'w1');
    select pgque.maint_retry_events();
    select pgque.force_tick('q169'), pgque.ticker('q169');
});
is($node->safe_psql('postgres', q{select string_agg(bk_key, ',') from pgque.blocked_key}), 'k1',
   'round 1: key k1 paused on a1');

# w1 reads the part with a1's retry (the key's head: k1 marked done in its
# batch) and stops before its ack, its transaction open
my $w1 = $node->background_psql('postgres', on_error_stop => 0);
$w1->query_safe(q{select pgque.claim_slot('q169', 'c', 0, 'w1', '1 second')});
$w1->query_safe('begin');
is($w1->query_safe(q{select take('w1', 0, 1, 10)}), '1', 'round 1: w1 read the head a1 (its retry) alone');
ok(PgqueNode::poll_until(sub {
    $node->safe_psql('postgres', q{
        select count(*) from pgque._slot_leases() l where l.owner = 'w1' and l.lease_until > now()}) eq '0' }, 30),
   "round 1: w1's lease expired");
$node->safe_psql('postgres', q{select pgque.claim_slot('q169', 'c', 0, 'w2', '1 hour')});

# w2's receive reads the same head: it does not wait for the frozen w1
my $t0 = Time::HiRes::time();
my ($rc, $out, $err) = $node->psql('postgres', q{
    set statement_timeout = '10s';
    select count(*) from pgque.receive_partitioned('q169', 'c', 0, 1, 'w2', 10);
});
my $waited = Time::HiRes::time() - $t0;
diag(sprintf('round 1: w2\'s receive ended after %.1f s: %s', $waited, $err || $out));
ok($waited < 5, "round 1: w2's receive did not wait for the frozen w1 (ended within 5 s)");
like($err, qr/lock timeout/, "round 1: ... it was told another transaction holds the key (55P03)");

# w1 let go: fenced, its record rolls back with its part
$w1->query(q{select pgque.ack_partitioned('q169', 'c', 0, 1, 'w1')});
like($w1->{stderr}, qr/held by worker "w2"/, 'round 1: w1, let go, is fenced (PQ002)');
$w1->query('rollback');
$w1->quit;
$node->safe_psql('postgres', q{call drain('w2', '1 hour'); select pgque.release_slot('q169', 'c', 0, 'w2')});
is($node->safe_psql('postgres', q{select string_agg(payload || ':' || worker, ' ' order by seq) from got}),
   'b1:w1 a1:w2 a2:w2', 'round 1: w2 delivered a1 by its retry, then a2; w1 recorded nothing of its part');
is($node->safe_psql('postgres', q{select count(*) from pgque.blocked_key}), '0', 'round 1: k1 released');

# round 2: nacks, a worker's SIGKILL between a part and its ack
$node->safe_psql('postgres', q{
    call send_round(2, 20, 10);
    insert into fail select payload from sent where payload like 'r2-%' and payload like '%-4';
});
my $before = got();
my $gate = $node->background_psql('postgres');
my $k = $node->background_psql('postgres', on_error_stop => 0);
my $kpid = $k->query_safe('select pg_backend_pid()');
$k->query_until(qr/draining/, "\\echo draining\ncall drain('wK-gated', '2 seconds');\n");
ok(PgqueNode::poll_until(sub { got() >= $before + 60 }, 60), 'round 2: worker K delivered 60 events');
$gate->query_safe('select pg_advisory_lock(169)');
ok(PgqueNode::poll_until(sub {
    $node->safe_psql('postgres', qq{
        select count(*) from pg_locks where pid = $kpid and locktype = 'advisory' and not granted}) eq '1' }, 60),
   'round 2: K waits between a part and its ack');
$node->kill9_and_wait($kpid);
eval { $k->quit; };
eval { $gate->quit; };
ok(PgqueNode::wait_back($node, 'postgres'), "round 2: back after K's SIGKILL");

# a resize 1 -> 2 while keys are paused, then the postmaster's SIGKILL
$node->safe_psql('postgres', q{
    call send_round(3, 10, 10);
    insert into fail select payload from sent where payload like 'r3-%' and payload like '%-2';
});
is($node->safe_psql('postgres', q{select pgque.resize_partitioned('q169', 'c', 2) is not null}), 't',
   'round 2: resized 1 -> 2');
$node->safe_psql('postgres', q{call send_round(4, 10, 10)});
$before = got();
my $l = $node->background_psql('postgres', on_error_stop => 0);
$l->query_until(qr/draining/, "\\echo draining\ncall drain('wL', '1 hour');\n");
ok(PgqueNode::poll_until(sub { got() >= $before + 80 }, 60), 'round 2: worker L delivered 80 events');
$node->kill9_and_wait();
eval { $l->quit; };
$node->start;
$node->safe_psql('postgres', q{call drain('wL', '1 hour')});
is($node->safe_psql('postgres', q{select n from pgque.partition_consumer where co_name = 'c'}), '2',
   'round 2: the drain switched to the new layout');

# the ledger
my ($sent, $got, $uniq, $missing) = split /\|/, $node->safe_psql('postgres', q{
    select (select count(*) from sent), (select count(*) from got), (select count(distinct payload) from got),
           (select count(*) from sent s where not exists (select from got g where g.payload = s.payload))});
diag("figure: $sent events sent, $got delivered and acked");
is("$got:$uniq:$missing", "$sent:$sent:0", 'every event sent delivered and acked once, none missing');
is($node->safe_psql('postgres', q{select count(*) from got where slot <> pgque._slot_of(key, n_at)}), '0',
   'each delivered at the slot of its key for the n it was read with');
# After the resize 1 -> 2 moved 10 blocked keys, their heads' retries and
# the withheld events the switch appended again met in one window of the
# new slot: a release at the head's part's ack let the window's later
# parts hand out the key's copies ahead of the ones it had just appended
# again (k9's r3-2-8 after r3-10-4, every run, before ADR 0141).
my $late = $node->safe_psql('postgres', q{
    select string_agg(payload || ' after ' || prevp, ', ')
      from (select g.payload, s.n, lag(s.n) over (partition by g.key order by g.seq) as prev,
                   lag(g.payload) over (partition by g.key order by g.seq) as prevp
              from got g join sent s using (payload)) x
     where prev > n});
diag("out of its key's order: $late") if $late ne '';
is($late, '', "each key's events in the order they were sent");
my $nf = $node->safe_psql('postgres', q{select count(*) from fail});
is($node->safe_psql('postgres', q{
    select count(*) filter (where f.done) || ':'
           || count(*) filter (where (select g.retry from got g where g.payload = f.payload) > 0)
      from fail f}), "$nf:$nf", "each of the $nf nacked events nacked and delivered by its retry");
is($node->safe_psql('postgres', q{select count(*) from pgque.blocked_key}), '0', 'no key left paused');
$node->stop('fast');
done_testing();
