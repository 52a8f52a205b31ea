# A ledger over 16 slot workers at once (ADR 0130): the epoch's row of
# pgque.slot_batch is updated HOT and found by its key, so this guards
# every way the row is reached while 16 sessions write it at once.  A
# consumer of 16 slots with failure policy pause on a queue of 32 buckets,
# fsync on; 16 workers, each a session of its own serving the slots s with
# s % 16 = its number (leases of 2 s), each part recorded and acked in one
# transaction.  Meanwhile: a worker's backend is terminated and a new
# worker takes its slot over once the lease has expired; some events are
# nacked (their keys pause until the retry is delivered, then resume); the
# slot count is resized 16 -> 32 while they drain; then the postmaster is
# stopped immediately, restarted and the rest drained.  Every event sent
# must be in the ledger once (nothing lost, nothing acked delivered
# again), at the slot of its key for the n it was read with, each key's
# events in the order they were sent, each nacked one delivered by its
# retry, no key left paused.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;

# quitting a psql whose backend was just killed may write to a closed pipe
$SIG{PIPE} = 'IGNORE';

my $node = PgqueNode->new_preloaded('slot_batch_hot_ledger', conf => q{
fsync = on
max_connections = 40
pgque_bgw.enabled = off
});
$node->safe_psql('postgres', q{
    create extension pgque_bgw;
    select pgque.create_queue('q157'), pgque.set_queue_config('q157', 'partition_buckets', '32');
    select pgque.maint_rotate_tables_step2();
    select pgque.subscribe_slot('q157', 'c', s, 16, 'pause') from generate_series(0, 15) s;
    create table stop (at timestamptz);
    -- the retries due and a tick: what the workers of a running server do
    create procedure pump() language plpgsql as $$
    begin
        perform pgque.maint_retry_events();
        commit;
        perform pgque.force_tick('q157'), pgque.ticker('q157');
    end $$;
    -- worker w, number i: the slots s of the consumer's current n with
    -- s % 16 = i, parts of 20, each part recorded and acked in one
    -- transaction; a nacked key's later events in the part are left (the
    -- pause contract); a slot whose call fails (another worker's lease, a
    -- resize that switched n) is left for this pass.  Ends, once the test
    -- says stop, after two passes in a row found nothing and failed
    -- nowhere.
    create procedure work(w text, i int4) language plpgsql as $$
    declare
        pn     int4;
        k      int4;
        cnt    int4;
        failed boolean;
        idle   int4 := 0;
    begin
        loop
            select p.n into pn from pgque.partition_consumer p where p.co_name = 'c';
            cnt := 0;
            failed := false;
            for s in 0 .. pn - 1 loop
                continue when s % 16 <> i;
                -- the claim in a transaction of its own: one that finds
                -- a resize drained switches the layout (ADR 0030)
                begin
                    perform pgque.claim_slot('q157', 'c', s, w, '2 seconds');
                exception when others then
                    failed := true;
                end;
                commit;
                if (select p.n from pgque.partition_consumer p where p.co_name = 'c') <> pn then
                    failed := true;
                    exit;
                end if;
                loop
                    k := 0;
                    begin
                        k := take(w, s, pn, 20);
                        if k > 0 then
                            perform pgque.ack_partitioned('q157', 'c', s, pn, w);
                        end if;
                    exception when others then
                        k := 0;
                        failed := failed or sqlstate <> 'PQ002';
                    end;
                    exit when k = 0;
                    cnt := cnt + k;
                    commit;
                end loop;
            end loop;
            commit;
            if cnt = 0 and not failed and exists (select from stop) then
                idle := idle + 1;
            else
                idle := 0;
            end if;
            exit when idle >= 2;
            perform pg_sleep(0.05);
        end loop;
    end $$;
});
$node->slot_ledger('postgres', queue => 'q157', keys => 61);

sub got { return $node->safe_psql('postgres', 'select count(*) from got'); }
sub pump { $node->safe_psql('postgres', 'call pump()'); }

# the 16 workers, each in a session of its own
my %worker;
sub start_worker
{
    my ($name, $i) = @_;
    my $h = $node->background_psql('postgres', on_error_stop => 0);
    my $pid = $h->query_safe('select pg_backend_pid()');
    $h->query_until(qr/working/, "\\echo working\ncall work('$name', $i);\n");
    $worker{$name} = [$h, $pid];
    return $pid;
}

$node->safe_psql('postgres', 'call send_round(1, 30, 20)');
start_worker("w$_", $_) for 0 .. 15;
ok(PgqueNode::poll_until(sub { got() >= 300 }, 120), 'the 16 workers delivered 300 events');

# a worker's backend terminated (its open part rolled back, its lease left
# to expire); a new worker takes slot 3 over once it has
my $w3 = $worker{w3}[1];
is($node->safe_psql('postgres', "select pg_terminate_backend($w3)"), 't', "worker 3's backend terminated");
eval { $worker{w3}[0]->quit; };
ok(PgqueNode::poll_until(sub {
    $node->safe_psql('postgres', "select count(*) from pg_stat_activity where pid = $w3") eq '0' }, 60),
   'worker 3 gone');
start_worker('w3b', 3);

# nacks: keys pause until their retry is delivered, then resume
# (the events named before they are sent: the workers read them at once)
$node->safe_psql('postgres', q{
    insert into fail select 'r2-' || t || '-5' from generate_series(1, 20) t;
    call send_round(2, 20, 20);
});
ok(PgqueNode::poll_until(sub {
    pump();
    $node->safe_psql('postgres', q{
        select count(*) from got g join fail f using (payload) where g.retry > 0}) eq '20' }, 120),
   'the 20 nacked events were delivered by their retries (their keys paused and resumed)');
ok(PgqueNode::poll_until(sub {
    $node->safe_psql('postgres', q{select count(*) from got where worker = 'w3b'}) > 0 }, 60),
   'worker w3b took slot 3 over');

# a resize 16 -> 32 while the workers drain
$node->safe_psql('postgres', 'call send_round(3, 10, 20)');
is($node->safe_psql('postgres', q{select pgque.resize_partitioned('q157', 'c', 32) is not null}), 't',
   'resized 16 -> 32 while the workers drain');
$node->safe_psql('postgres', 'call send_round(4, 20, 20)');
ok(PgqueNode::poll_until(sub {
    pump();
    $node->safe_psql('postgres', q{select count(*) from got where n_at = 32}) > 100 }, 120),
   'the workers read the new layout (100 events at n = 32)');

# the postmaster stopped immediately while the workers drain
my $before = got();
$node->safe_psql('postgres', 'call send_round(5, 10, 20)');
ok(PgqueNode::poll_until(sub { got() >= $before + 50 }, 120), 'the workers drain round 5');
$node->stop('immediate');
eval { $_->[0]->quit; } for values %worker;
$node->start;

# the rest, after the restart: one session serves every worker's slots
$node->safe_psql('postgres', q{insert into stop values (now())});
my $done = PgqueNode::poll_until(sub {
    pump();
    $node->safe_psql('postgres', "call work('wz', $_)") for 0 .. 15;
    $node->safe_psql('postgres', q{
        select count(*) from sent s where not exists (select from got g where g.payload = s.payload)}) eq '0' }, 120);
ok($done, 'the rest drained after the restart');

# the ledger
my ($sent, $got, $uniq, $missing) = split /\|/, $node->safe_psql('postgres', q{
    select (select count(*) from sent), (select count(*) from got), (select count(distinct payload) from got),
           (select count(*) from sent s where not exists (select from got g where g.payload = s.payload))});
diag("figure: $sent events sent, $got delivered and acked, by "
     . $node->safe_psql('postgres', 'select count(distinct worker) from got') . ' workers');
is("$got:$uniq:$missing", "$sent:$sent:0", 'every event sent delivered and acked once: none lost, none acked delivered again');
is($node->safe_psql('postgres', q{select count(*) from got where slot <> pgque._slot_of(key, n_at)}), '0',
   'each delivered at the slot of its key for the n it was read with');
is($node->safe_psql('postgres', q{
    select count(*) from (select s.n, lag(s.n) over (partition by g.key order by g.seq) as prev
                            from got g join sent s using (payload)) x
     where prev > n}), '0', "each key's events in the order they were sent");
is($node->safe_psql('postgres', q{
    select count(*) || ':' || count(*) filter (where f.done) || ':'
           || count(*) filter (where (select g.retry from got g where g.payload = f.payload) > 0)
      from fail f}), '20:20:20', 'each nacked event nacked once and delivered by its retry');
is($node->safe_psql('postgres', q{select count(*) from pgque.blocked_key}), '0', 'no key left paused');
is($node->safe_psql('postgres', q{select n from pgque.partition_consumer where co_name = 'c'}), '32',
   'the consumer ends at the new layout');
is($node->safe_psql('postgres', q{select count(sb_batch) = count(distinct sb_batch) from pgque.slot_batch}), 't',
   'batch ids unique over the epochs\' rows');
$node->stop('fast');
done_testing();
