# Any-slot claiming (issue #31 item 3, ADR 0075): claim_any_slot picks the
# free or expired slot whose cursor is the most behind, skips live leases of
# other workers, renews the caller's own; and a pool of 3 workers running
# examples/partition_worker.sql (which uses it) serves all 16 slots of a
# skewed stream: every event delivered exactly once (a ledger), no slot's
# event waits longer than a bound, and the watchdog opens no slot_unpolled.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);

my $node = PostgreSQL::Test::Cluster->new('anyslot');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'pgque_bgw'
pgque_bgw.launcher_naptime = '1s'
pgque_bgw.watchdog_interval = '1s'
pgque_bgw.slot_unpolled_after = '10s'
});
$node->start;
$node->safe_psql('postgres', q{create extension pgque_bgw});

# --- the choice, step by step (ticks taken by hand right after each send;
# a slot is a candidate while its cursor tick is older than the latest)
$node->safe_psql('postgres', q{
    select pgque.create_queue('pick');
    -- no idle tick during the test: a later tick puts every slot behind
    select pgque.set_queue_config('pick', 'ticker_idle_period', '1 hour');
    select pgque.subscribe_slot('pick', 'p', k, 4) from generate_series(0, 3) k;
    create function any_slot(w text) returns text language sql as $$
        select coalesce(c.slot::text, 'none') || '/' || coalesce(c.n::text, 'none')
          from pgque.claim_any_slot('pick', 'p', w, '1 hour') c $$;
    create function tick() returns void language sql as $$ select pgque.ticker('pick') $$;
    -- slot k's batches through, as a worker would, until none is left
    create function drain(k int4) returns int8 language plpgsql as $$
    declare cnt int8; total int8 := 0;
    begin
        perform pgque.claim_slot('pick', 'p', k, 'drainer');
        loop
            select count(*) into cnt from pgque.receive_partitioned('pick', 'p', k, 4, 'drainer', 1000);
            exit when cnt = 0;
            total := total + cnt;
            perform pgque.ack_partitioned('pick', 'p', k, 4, 'drainer');
        end loop;
        perform pgque.release_slot('pick', 'p', k, 'drainer');
        return total;
    end $$;
});
is($node->safe_psql('postgres', q{select any_slot('w1')}), 'none/none',
   'no events: claim_any_slot returns NULLs and claims nothing');
is($node->safe_psql('postgres', q{select count(*) from pgque._slot_leases() where owner = 'w1'}), '0',
   'no lease taken when there is nothing to do');

# every slot but 3 passes the first events; slot 3 stays behind
$node->safe_psql('postgres', q{
    select pgque.send('pick', 't', 'e' || i, 'key-' || i) from generate_series(1, 40) i;
    select tick();
    select drain(k) from generate_series(0, 2) k;
    select pgque.send('pick', 't', 'f' || i, 'key-' || i) from generate_series(1, 40) i;
    select tick();
});
is($node->safe_psql('postgres', q{select any_slot('w1')}), '3/4',
   'the slot whose cursor is the most behind is claimed first');
is($node->safe_psql('postgres', q{select any_slot('w2')}), '0/4',
   'a slot held by a live lease of another worker is skipped: the next one');
my ($e1) = $node->safe_psql('postgres', q{select epoch from pgque.partition_slot where slot = 3});
is($node->safe_psql('postgres', q{select any_slot('w1')}), '3/4',
   'the caller\'s own lease is renewed');
is($node->safe_psql('postgres', q{select epoch from pgque.partition_slot where slot = 3}), $e1,
   'renewal keeps the epoch');
$node->safe_psql('postgres', q{
    select pgque.release_slot('pick', 'p', 3, 'w1'), pgque.release_slot('pick', 'p', 0, 'w2');
    select drain(k) from generate_series(0, 3) k;});
is($node->safe_psql('postgres', q{select any_slot('w1')}), 'none/none',
   'every slot at the latest tick: NULLs again');
# a slot held by a live lease is never handed out, even when it is the only one with work
$node->safe_psql('postgres', q{
    select pgque.send('pick', 't', 'g', 'key-1'); select tick();
    select pgque.claim_slot('pick', 'p', k, 'holder') from generate_series(0, 3) k;});
is($node->safe_psql('postgres', q{select any_slot('w1')}), 'none/none',
   'all slots leased by another worker: NULLs');
# rights: as claim_slot's.  A role with only LOGIN cannot call it; a
# reader may use the consumer while pgque_reader is among its users (an
# admin's consumer), and is refused once that is revoked
$node->safe_psql('postgres', q{
    select pgque.release_slot('pick', 'p', k, 'holder') from generate_series(0, 3) k;
    create role outsider login; create role rdr login in role pgque_reader});
my ($rc, $out, $err) = $node->psql('postgres', q{select * from pgque.claim_any_slot('pick', 'p', 'x')},
                                   extra_params => [ '-U', 'outsider' ]);
like($err, qr/permission denied/, 'a LOGIN-only role may not call it');
is($node->safe_psql('postgres', q{select slot from pgque.claim_any_slot('pick', 'p', 'r1')},
                    extra_params => [ '-U', 'rdr' ]), '0',
   'a reader among the consumer\'s users claims as with claim_slot');
$node->safe_psql('postgres', q{select pgque.release_slot('pick', 'p', 0, 'r1');
                               select pgque.revoke_consumer('pick', 'p', 'pgque_reader')});
for my $call (q{select * from pgque.claim_any_slot('pick', 'p', 'x')},
              q{select pgque.claim_slot('pick', 'p', 0, 'x')})
{
    ($rc, $out, $err) = $node->psql('postgres', "\\set VERBOSITY verbose\n$call", extra_params => [ '-U', 'rdr' ]);
    like($err, qr/42501/, "a reader no longer among its users is refused (42501): $call");
}
is($node->safe_psql('postgres', q{select count(*) from pgque._slot_leases() where owner = 'x'}), '0',
   'a refused call leaves no lease');

# --- the pool: 3 workers over 16 slots, a skewed stream
$node->safe_psql('postgres', q{
    select pgque.create_queue('pool');
    select pgque.subscribe_slot('pool', 'ix', k, 16) from generate_series(0, 15) k;
});
$node->safe_psql('postgres', slurp_file("$ENV{PGQUE_SRC}/../examples/partition_worker.sql"));
# the ledger: what each worker processed, with when it was sent
$node->safe_psql('postgres', q{
    create table ledger (ev_id bigint, slot int4, worker text, key text, created_at timestamptz,
                         done_at timestamptz default clock_timestamp());
    create or replace function handle_event(i_worker text, i_epoch bigint, i_slot int4, m pgque.message)
    returns void language sql as $$
        insert into ledger (ev_id, slot, worker, key, created_at)
        values (m.msg_id, i_slot, i_worker, m.extra1, m.created_at) $$;
});
ok($node->poll_query_until('postgres', q{
       select count(*) = 1 from pg_stat_activity where backend_type = 'pgque_bgw ticker'}),
   'the ticker runs');

my @workers;
for my $w (1 .. 3)
{
    my $bg = $node->background_psql('postgres', on_error_stop => 1);
    $bg->query_until(qr/started/, qq{
        \\echo started
        call partition_worker('pool', 'ix', 16, 'pool-$w', '6 seconds', '10 seconds');
        \\echo finished
    });
    push @workers, $bg;
}
# skew: 90% of each batch on 4 hot keys, the rest spread over 200 keys, so
# some slots get a trickle; 40 transactions of 100 over about 8 s
my $t0 = time;
for my $t (1 .. 40)
{
    $node->safe_psql('postgres', qq{
        select pgque.send_batch('pool', 'ev',
                   array(select 'tx$t-' || i from generate_series(1, 100) i),
                   array(select case when i <= 90 then 'hot-' || (i % 4)
                                     else 'cold-' || ((i * 13 + $t) % 200) end
                           from generate_series(1, 100) i))});
    sleep(0.2);
}
for my $bg (@workers)
{
    $bg->query_until(qr/finished/, '');
    $bg->quit;
}
note sprintf('pool run: %.1f s', time - $t0);

is($node->safe_psql('postgres', q{select count(*) from ledger}), '4000', '4,000 events processed');
is($node->safe_psql('postgres', q{select count(distinct ev_id) from ledger}), '4000',
   'each exactly once: no duplicates, none lost');
is($node->safe_psql('postgres', q{select count(*) from ledger where slot <> pgque._slot_of(key, 16)}), '0',
   'every event on its key\'s slot');
is($node->safe_psql('postgres', q{select count(distinct slot) || ' slots, ' || count(distinct worker) || ' workers' from ledger}),
   '16 slots, 3 workers', 'all 16 slots were served, by all 3 workers');
my $worst = $node->safe_psql('postgres', q{
    select slot || ': ' || round(extract(epoch from max(done_at - created_at))::numeric, 1)
      from ledger group by slot order by max(done_at - created_at) desc limit 1});
note "the slowest slot's oldest event waited (slot: seconds) $worst";
is($node->safe_psql('postgres', q{select count(*) from ledger where done_at - created_at > interval '8 seconds'}),
   '0', 'no slot\'s event waited more than 8 s (none starved)');
is($node->safe_psql('postgres', q{select count(*) from pgque.alert where kind = 'slot_unpolled' and queue_name = 'pool'}),
   '0', 'the watchdog opened no slot_unpolled alert for the pool');
is($node->safe_psql('postgres', q{select count(*) from pgque.get_partition_slot_info()
                                   where queue_name = 'pool' and slot_pending_events <> 0}),
   '0', 'nothing pending on any slot at the end');
$node->stop('fast');
done_testing();
