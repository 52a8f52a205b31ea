# Exactly-once pipelines (issue #31 item 5, docs/exactly-once.md): a
# worker receives a batch from queue A, sends one derived event per input to
# queue B and acks A's batch in the same transaction.  10,000 inputs; the
# worker's backend is killed with SIGKILL and the postmaster stopped with
# -m immediate at random points; afterwards every input has exactly one
# output in B: 0 missing, 0 duplicated.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

$SIG{PIPE} = 'IGNORE';
my $seed = $ENV{PGQUE_SEED} // int(rand(1_000_000));
srand($seed);
note("random seed $seed (PGQUE_SEED=$seed repeats this run)");

my $node = PgqueNode->new('exactly_once');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'pgque_bgw'
pgque_bgw.launcher_naptime = '1s'
restart_after_crash = on
});
$node->start;
$node->safe_psql('postgres', q{
    create extension pgque_bgw;
    select pgque.create_queue('a'), pgque.create_queue('b');
    select pgque.subscribe('a', 'xf');      -- the pipeline
    select pgque.subscribe('b', 'audit');   -- what downstream sees
    select pgque.send_batch('a', 'input', array(select 'in-' || i from generate_series(t * 1000 + 1, t * 1000 + 1000) i))
      from generate_series(0, 9) t;
    -- the pipeline: receive from a, send to b, ack a, one transaction per
    -- batch (docs/exactly-once.md); a short nap per batch stands for work
    create procedure pipeline() language plpgsql as $$
    declare
        m pgque.message;
        b bigint;
    begin
        loop
            b := null;
            for m in select * from pgque.receive('a', 'xf', 50) loop
                perform pgque.send('b', 'derived', 'out:' || m.payload);
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
    end $$;
    -- committed outputs so far (the event tables of both queues)
    create function out_count() returns bigint language sql as $$
        select count(*) from pgque.event_template where ev_type = 'derived' $$;
});

# the worker: a shell loop that calls the pipeline again after its backend
# died or the server went away
my $psql = $node->config_data('--bindir') . '/psql';
my ($host, $port) = ($node->host, $node->port);
my $loop = IPC::Run::start(['bash', '-c', qq{
    while :; do
        PGAPPNAME=pipeline "$psql" -X -q -h "$host" -p $port -d postgres -c "call pipeline()"
        sleep 0.2
    done}], '>', '/dev/null', '2>', '/dev/null');

# four kills at random points of the run: SIGKILL of the pipeline's backend
# and an immediate stop of the postmaster, in random order
# one kill in each of four spans and none after 7,000 outputs: a loaded
# machine's poll can lag the pipeline by a second or more, and the run must
# not end between the poll that sees a threshold and the kill (PG 18 once
# ran from 9,750 to 10,000 outputs after a restart)
my @at = map { 500 + $_ * 1700 + int(rand(1400)) } 0 .. 3;
my @how = (('backend') x 2, ('postmaster') x 2);
@how = map { $_->[1] } sort { $a->[0] <=> $b->[0] } map { [ rand(), $_ ] } @how;
my $t0 = time;
my $restarts = 0;
my @before;
for my $i (0 .. 3)
{
    $node->poll_query_until('postgres', "select out_count() >= $at[$i]")
      or die "no progress to $at[$i] outputs";
    push @before, $node->safe_psql('postgres', 'select out_count()');
    if ($how[$i] eq 'backend')
    {
        # until a SIGKILL found the pipeline's backend (its loop connects
        # again 0.2 s after the last kill or restart)
        PgqueNode::poll_until(sub { $node->kill9_backend_of('pipeline') })
          or die 'the pipeline is not connected';
        PgqueNode::wait_back($node, 'postgres');
        $restarts++;
    }
    else
    {
        $node->stop('immediate');
        $node->start;
        $restarts++;
    }
    note(sprintf('%s killed at %d outputs (%.1f s)', $how[$i], $before[$i], time - $t0));
}
is(scalar(grep { $_ < 10000 } @before), 4,
   'every kill came while the pipeline was running (outputs before each: ' . join(', ', @before) . ')');
ok($restarts == 4, "the pipeline was interrupted $restarts times");
like(slurp_file($node->logfile), qr/terminated by signal 9/, 'the postmaster saw a backend die of SIGKILL');

# done when a's consumer is at a's latest tick with nothing pending
ok($node->poll_query_until('postgres', q{
       select pending_events = 0 and current_batch is null and out_count() >= 10000
         from pgque.get_consumer_info('a', 'xf')}),
   'the pipeline drained queue a');
$loop->kill_kill;
$node->safe_psql('postgres', q{
    select pg_terminate_backend(pid) from pg_stat_activity where application_name = 'pipeline'});
note(sprintf('pipeline run: %.1f s', time - $t0));

# what downstream receives from b, through its consumer: a tick over every
# output, then batches until none is left
$node->safe_psql('postgres', q{
    create table seen (payload text);
    select pgque.ticker('b');
});
$node->safe_psql('postgres', q{
    do $$
    declare
        b bigint;
        n int4;
    begin
        for i in 1 .. 1000 loop
            with r as (select * from pgque.receive('b', 'audit', 1000)),
                 ins as (insert into seen select r.payload from r)
            select max(r.batch_id), count(*) into b, n from r;
            exit when n = 0;
            perform pgque.ack(b);
        end loop;
    end $$});
is($node->safe_psql('postgres', q{select count(*) from seen}), '10000', '10,000 outputs received from b');
is($node->safe_psql('postgres', q{
       select count(*) from generate_series(1, 10000) i
        where not exists (select from seen s where s.payload = 'out:in-' || i)}),
   '0', '0 missing: every input has an output');
is($node->safe_psql('postgres', q{
       select coalesce(sum(n - 1), 0) from (select count(*) as n from seen group by payload) x}),
   '0', '0 duplicated: no input has two outputs');
$node->stop('fast');
done_testing();
