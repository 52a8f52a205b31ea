# A frozen slot owner blocks no one (issue 12, ADR 0023).  Three slot
# workers share a partitioned consumer of 6 slots while a producer sends
# keyed events.  One worker is frozen with SIGSTOP in the middle of a batch:
# after its receive, before its ack, its transaction open.  The backend
# itself is stopped, the harder case: it cannot even be terminated, so the
# others must not need anything its transaction holds.  For 3 x the lease
# TTL the other two keep processing (rate over the frozen window against
# the healthy rate before it), they take the frozen slot over, and after
# SIGCONT the frozen worker's ack is refused with PQ002.  Every produced
# event is processed, per key in order, each on its key's slot.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep);

my $n = 6;
my $ttl = 3;                  # seconds: the lease TTL of every worker
my $frozen_for = 3 * $ttl;

my $node = PgqueNode->new_preloaded('frozen', conf => qq{
pgque_bgw.launcher_naptime = '1s'
});
# example_processed (the example worker's table) is made here first, with
# the time each event was processed
$node->safe_psql('postgres', qq{
    create extension pgque_bgw;
    select pgque.create_queue('fz');
    select pgque.subscribe_slot('fz', 'w', k, $n) from generate_series(0, $n - 1) k;
    create table example_processed (
        seq       bigserial primary key,
        worker    text not null,
        epoch     bigint not null,
        slot      int4 not null,
        ev_id     bigint not null,
        key       text,
        payload   text,
        at        timestamptz not null default clock_timestamp());
    create table produced (payload text primary key, key text not null);
    create table produce_stop (at timestamptz);
    -- sends 10 keyed events every 50 ms until told to stop (at most i_secs)
    create procedure produce(i_secs float8) language plpgsql as \$\$
    declare
        t0 timestamptz := clock_timestamp();
        i  int := 0;
    begin
        while clock_timestamp() < t0 + make_interval(secs => i_secs)
              and not exists (select 1 from produce_stop) loop
            insert into produced
            select 'p' || (i * 10 + j), 'key-' || ((i * 10 + j) % 97) from generate_series(1, 10) j;
            perform pgque.send_batch('fz', 'e',
                        array(select 'p' || (i * 10 + j) from generate_series(1, 10) j order by j),
                        array(select 'key-' || ((i * 10 + j) % 97) from generate_series(1, 10) j order by j));
            commit;
            i := i + 1;
            perform pg_sleep(0.05);
        end loop;
    end \$\$;
    -- the Perl-driven worker's step on slot k when it is not to freeze: claim,
    -- drain one batch (receive, process, ack in one transaction), release
    create function step(k int4) returns int4 language plpgsql as \$\$
    declare
        e    bigint := pgque.claim_slot('fz', 'w', k, 'worker-3', '$ttl seconds');
        got  int4;
    begin
        if e is null then
            return -1;
        end if;
        insert into example_processed (worker, epoch, slot, ev_id, key, payload)
        select 'worker-3', e, k, msg_id, extra1, payload
          from pgque.receive_partitioned('fz', 'w', k, $n, 'worker-3', 100);
        get diagnostics got = row_count;
        if got > 0 then
            perform pgque.ack_partitioned('fz', 'w', k, $n, 'worker-3');
        end if;
        perform pgque.release_slot('fz', 'w', k, 'worker-3');
        return got;
    end \$\$;
    -- an ack that reports its SQLSTATE instead of failing the transaction
    create function try_ack(k int4, w text) returns text language plpgsql as \$\$
    begin
        return 'acked ' || pgque.ack_partitioned('fz', 'w', k, $n, w);
    exception when others then
        return 'refused: ' || sqlstate;
    end \$\$;
});
$node->safe_psql('postgres', slurp_file("$ENV{PGQUE_SRC}/../examples/partition_worker.sql"));
ok($node->poll_query_until('postgres', q{
       select count(*) = 1 from pg_stat_activity where backend_type = 'pgque_bgw ticker'}),
   'the ticker runs');

# the producer sends until the frozen window is over (a cap of 300 s
# only); two workers run the example loop
my $produce_secs = 300;
my $producer = $node->background_psql('postgres', on_error_stop => 1);
$producer->query_until(qr/started/, qq{
    \\echo started
    call produce($produce_secs);
    \\echo finished
});
my @workers;
for my $w (1 .. 2)
{
    my $bg = $node->background_psql('postgres', on_error_stop => 1);
    $bg->query_until(qr/started/, qq{
        \\echo started
        call partition_worker('fz', 'w', $n, 'worker-$w', '10 seconds', '$ttl seconds');
        \\echo finished
    });
    push @workers, $bg;
}

# the third worker, driven from here, works normally for about 6 s ...
my $victim = $node->background_psql('postgres', on_error_stop => 0);
my $victim_pid = $victim->query_safe('select pg_backend_pid()');
my $healthy_until = time + 6;
my $victim_rows = 0;
while (time < $healthy_until)
{
    for my $k (0 .. $n - 1)
    {
        my $got = $victim->query_safe("select step($k)");
        $victim_rows += $got if $got > 0;
    }
    sleep 0.05;
}
cmp_ok($victim_rows, '>', 0, "the third worker processed events while healthy ($victim_rows)");

# ... then receives a batch in an open transaction and is frozen there
my ($frozen_slot, $frozen_rows, $frozen_epoch);
my $freeze_deadline = time + 60;
while (!defined $frozen_slot && time < $freeze_deadline)
{
    for my $k (0 .. $n - 1)
    {
        my $e = $victim->query_safe("select pgque.claim_slot('fz', 'w', $k, 'worker-3', '$ttl seconds')");
        next if $e eq '';
        $victim->query_safe('begin');
        my $got = $victim->query_safe(qq{
            with p as (insert into example_processed (worker, epoch, slot, ev_id, key, payload)
                       select 'worker-3', $e, $k, msg_id, extra1, payload
                         from pgque.receive_partitioned('fz', 'w', $k, $n, 'worker-3', 100)
                       returning 1)
            select count(*) from p});
        if ($got > 0)
        {
            ($frozen_slot, $frozen_rows, $frozen_epoch) = ($k, $got, $e);
            last;
        }
        $victim->query_safe('rollback');
        $victim->query_safe("select pgque.release_slot('fz', 'w', $k, 'worker-3')");
    }
}
ok(defined $frozen_slot, 'the third worker holds a received batch in an open transaction');
is($node->safe_psql('postgres', "select state from pg_stat_activity where pid = $victim_pid"),
   'idle in transaction', 'its session is idle in transaction');
kill 'STOP', $victim_pid;
my $t_freeze = $node->safe_psql('postgres', 'select extract(epoch from clock_timestamp())');
note "worker-3 (backend $victim_pid) frozen on slot $frozen_slot with $frozen_rows events";
sleep $frozen_for;
my $t_thaw = $node->safe_psql('postgres', 'select extract(epoch from clock_timestamp())');
kill 'CONT', $victim_pid;

# after SIGCONT its ack is refused (fenced), and its work rolls back
is($victim->query_safe("select try_ack($frozen_slot, 'worker-3')"), 'refused: PQ002',
   'the frozen worker\'s ack is refused after SIGCONT with SQLSTATE PQ002');
$victim->query_safe('rollback');
$victim->quit;

sleep 2;
$node->safe_psql('postgres', 'insert into produce_stop values (now())');
$producer->query_until(qr/finished/, '');
$producer->quit;
for my $bg (@workers)
{
    $bg->query_until(qr/finished/, '');
    $bg->quit;
}

# throughput: events processed per second over the frozen window against
# the healthy 5 s before it (the producer's rate bounds both)
my ($healthy_rate, $frozen_rate) = split /\|/, $node->safe_psql('postgres', qq{
    select round(count(*) filter (where at >= to_timestamp($t_freeze) - interval '5 s'
                                    and at < to_timestamp($t_freeze)) / 5.0, 1),
           round(count(*) filter (where at >= to_timestamp($t_freeze) and at < to_timestamp($t_thaw))
                 / ($t_thaw - $t_freeze)::numeric, 1)
      from example_processed});
diag "figure: healthy rate $healthy_rate events/s (3 workers, 5 s before the freeze)";
diag "figure: rate while one worker was frozen $frozen_rate events/s (${frozen_for} s = 3 x TTL)";
cmp_ok($healthy_rate, '>', 0, 'events were processed before the freeze');
cmp_ok($frozen_rate, '>', $healthy_rate / 2, 'while one worker is frozen the others keep more than half the rate');

# the frozen slot was taken over within the window
my $stall = $node->safe_psql('postgres', qq{
    select round(extract(epoch from min(at) - to_timestamp($t_freeze))::numeric, 1)
      from example_processed where slot = $frozen_slot and at >= to_timestamp($t_freeze)});
diag "figure: the frozen slot was processed again ${stall} s after the freeze (lease TTL $ttl s)";
ok($stall ne '' && $stall < $frozen_for, 'another worker took the frozen slot over while it was frozen');

# nothing lost, nothing of the rolled-back batch kept, order per key
my $total = $node->safe_psql('postgres', 'select count(*) from produced');
is($node->safe_psql('postgres', q{
       select count(*) from produced p where not exists (select 1 from example_processed e where e.payload = p.payload)}),
   '0', "every produced event ($total) was processed");
is($node->safe_psql('postgres', q{
       select count(*) from example_processed e where not exists (select 1 from produced p where p.payload = e.payload)}),
   '0', 'nothing else was processed');
my $dups = $node->safe_psql('postgres', 'select count(*) - count(distinct ev_id) from example_processed');
diag "figure: $dups events processed twice (at-least-once) out of $total";
is($node->safe_psql('postgres', q{
       select count(*) from (
           select ev_id < lag(ev_id) over (partition by key order by seq) as back
             from (select distinct on (ev_id) * from example_processed order by ev_id, seq) first) x
        where back}),
   '0', 'per key in ev_id order');
is($node->safe_psql('postgres', qq{
       select count(*) from example_processed where slot <> pgque._slot_of(key, $n)}),
   '0', 'every event on its key\'s slot');
is($node->safe_psql('postgres', qq{select count(*) from example_processed where epoch = $frozen_epoch}),
   '0', 'nothing the frozen worker did in its batch was kept');
$node->stop('fast');
done_testing();
