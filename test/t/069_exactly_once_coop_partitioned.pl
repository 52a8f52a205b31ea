# Exactly-once pipelines, the cooperative and the partitioned forms (issue
# #31 item 5, docs/exactly-once.md, ADR 0076; TAP 064 has the plain form):
#  - two members of a cooperative group of queue a receive a batch, send
#    one derived event per input to queue bc and ack, in one transaction;
#  - two workers of a partitioned consumer of queue a (4 slots, claimed
#    with claim_any_slot and 2 s leases, so slots change hands) do the
#    same into queue bp, keeping each input's partition key.
# 4,000 inputs over 32 keys; the pipelines' backends are killed with
# SIGKILL and the postmaster stopped with -m immediate at random points
# (the seed is printed; PGQUE_SEED repeats a run).  Afterwards every input
# has exactly one output in bc and one in bp: 0 missing, 0 duplicated; and
# bp holds each key's outputs in the order of its inputs.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

$SIG{PIPE} = 'IGNORE';
my $seed = $ENV{PGQUE_SEED} // int(rand(1_000_000));
srand($seed);
diag("random seed $seed (PGQUE_SEED=$seed repeats this run)");

my $inputs = 4000;
my $node = PgqueNode->new_preloaded('exactly_once_forms', conf => q{
pgque_bgw.launcher_naptime = '1s'
restart_after_crash = on
});
$node->install('postgres');
$node->safe_psql('postgres', qq{
    select pgque.create_queue('a'), pgque.create_queue('bc'), pgque.create_queue('bp');
    select pgque.register_subconsumer('a', 'xc', 'm' || i) from generate_series(1, 2) i;
    select pgque.subscribe_partitioned('a', 'xp', 4);
    select pgque.subscribe('bc', 'audit'), pgque.subscribe('bp', 'audit');
    select pgque.send_batch('a', 'input', array(select 'in-' || i from generate_series(t * 500 + 1, t * 500 + 500) i),
                            array(select 'k' || (i % 32) from generate_series(t * 500 + 1, t * 500 + 500) i))
      from generate_series(0, $inputs / 500 - 1) t;
    -- the cooperative pipeline: one transaction per batch
    create procedure coop_pipeline(me text) language plpgsql as \$\$
    declare
        m pgque.message;
        b bigint;
    begin
        loop
            b := null;
            for m in select * from pgque.receive_coop('a', 'xc', me, 50) loop
                perform pgque.send('bc', 'derived', 'out:' || m.payload);
                b := m.batch_id;
            end loop;
            if b is not null then
                perform pg_sleep(0.02);
                perform pgque.ack(b);
            else
                perform pg_sleep(0.05);
            end if;
            commit;
        end loop;
    end \$\$;
    -- the partitioned pipeline: claim any slot, one transaction per batch,
    -- the output keeps the input's key; the lease goes after the commit
    create procedure slot_pipeline(me text) language plpgsql as \$\$
    declare
        c record;
        m pgque.message;
        b bool;
    begin
        loop
            b := false;
            select * into c from pgque.claim_any_slot('a', 'xp', me, '2 seconds');
            if c.slot is not null then
                for m in select * from pgque.receive_partitioned('a', 'xp', c.slot, c.n, me, 50) loop
                    perform pgque.send('bp', 'derived', 'out:' || m.payload, m.extra1);
                    b := true;
                end loop;
            end if;
            if b then
                perform pg_sleep(0.02);
                perform pgque.ack_partitioned('a', 'xp', c.slot, c.n, me);
            else
                perform pg_sleep(0.05);
            end if;
            commit;
            if c.slot is not null then
                perform pgque.release_slot('a', 'xp', c.slot, me);
                commit;
            end if;
        end loop;
    end \$\$;
    create function out_count(q text) returns bigint language sql as \$\$
        select count(*) from pgque.event_template e
         where e.tableoid::regclass::text like 'pgque.event_' || (select queue_id from pgque.queue where queue_name = q) || '%'
           and ev_type = 'derived' \$\$;
});

my $psql = $node->config_data('--bindir') . '/psql';
my ($host, $port) = ($node->host, $node->port);
my @loops;
my @apps = ('m1', 'm2', 'w1', 'w2');
for my $app (@apps)
{
    my $call = $app =~ /^m/ ? "call coop_pipeline('$app')" : "call slot_pipeline('$app')";
    push @loops, IPC::Run::start(['bash', '-c', qq{
        while :; do
            PGAPPNAME=$app "$psql" -X -q -h "$host" -p $port -d postgres -c "$call"
            sleep 0.2
        done}], '>', '/dev/null', '2>', '/dev/null');
}

# four kills at points of the run (by the outputs of both pipelines): two
# SIGKILLs of a random pipeline backend, two immediate stops, in random order
my @at = sort { $a <=> $b } map { 300 + int(rand(2 * $inputs - 1000)) } 1 .. 4;
my @how = (('backend') x 2, ('postmaster') x 2);
@how = map { $_->[1] } sort { $a->[0] <=> $b->[0] } map { [ rand(), $_ ] } @how;
my $t0 = time;
my @before;
for my $i (0 .. 3)
{
    $node->poll_query_until('postgres', "select out_count('bc') + out_count('bp') >= $at[$i]")
      or die "no progress to $at[$i] outputs";
    push @before, $node->safe_psql('postgres', q{select out_count('bc') || '+' || out_count('bp')});
    if ($how[$i] eq 'backend')
    {
        my $app = $apps[ int(rand(@apps)) ];
        # until a SIGKILL found $app's backend (its loop connects again
        # 0.2 s after the last kill or restart); then the crash restart has
        # begun, and wait_back cannot be answered by the old server
        PgqueNode::poll_until(sub { $node->kill9_backend_of($app) })
          or die "$app is not connected";
        PgqueNode::wait_back($node, 'postgres');
        $how[$i] = "backend of $app";
    }
    else
    {
        $node->stop('immediate');
        $node->start;
    }
    note(sprintf('%s killed at %s outputs (%.1f s)', $how[$i], $before[$i], time - $t0));
}
diag('kills: ' . join(', ', map { "$how[$_] at $before[$_]" } 0 .. 3));
like(slurp_file($node->logfile), qr/terminated by signal 9/, 'the postmaster saw a backend die of SIGKILL');

ok($node->poll_query_until('postgres', qq{
       select out_count('bc') >= $inputs and out_count('bp') >= $inputs
          and (select pending_events = 0 and current_batch is null from pgque.get_consumer_info('a', 'xc'))}),
   'both pipelines drained queue a');
$_->kill_kill for @loops;
$node->safe_psql('postgres', q{
    select pg_terminate_backend(pid) from pg_stat_activity where application_name in ('m1', 'm2', 'w1', 'w2')});
diag(sprintf('figure: pipelines ran %.1f s for %d inputs each', time - $t0, $inputs));

# what downstream receives from bc and bp through their consumers
$node->safe_psql('postgres', q{
    create table seen (q text, msg_id bigint, payload text, key text);
    select pgque.ticker('bc'), pgque.ticker('bp');
    do $$
    declare
        b bigint;
        n int4;
        q text;
    begin
        foreach q in array array['bc', 'bp'] loop
            for i in 1 .. 1000 loop
                with r as (select * from pgque.receive(q, 'audit', 1000)),
                     ins as (insert into seen select q, r.msg_id, r.payload, r.extra1 from r)
                select max(r.batch_id), count(*) into b, n from r;
                exit when n = 0;
                perform pgque.ack(b);
            end loop;
        end loop;
    end $$});
for my $q ('bc', 'bp')
{
    my $form = $q eq 'bc' ? 'cooperative' : 'partitioned';
    is($node->safe_psql('postgres', qq{select count(*) from seen where q = '$q'}), $inputs,
       "$form: $inputs outputs received");
    is($node->safe_psql('postgres', qq{
           select count(*) from generate_series(1, $inputs) i
            where not exists (select from seen s where s.q = '$q' and s.payload = 'out:in-' || i)}),
       '0', "$form: 0 missing, every input has an output");
    is($node->safe_psql('postgres', qq{
           select coalesce(sum(n - 1), 0) from (select count(*) as n from seen where q = '$q' group by payload) x}),
       '0', "$form: 0 duplicated, no input has two outputs");
}
is($node->safe_psql('postgres', q{
       select count(*) from (
           select key, msg_id, substr(payload, 8)::int as input,
                  lag(substr(payload, 8)::int) over (partition by key order by msg_id) as prev
             from seen where q = 'bp') x
        where input < prev}),
   '0', 'partitioned: each key\'s outputs are in the order of its inputs');
$node->stop('fast');
done_testing();
