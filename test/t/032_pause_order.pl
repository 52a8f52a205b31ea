# Failure policy pause (ADR 0029) under load: 10,000 keyed events over 200
# keys, 2% failing once and 0.2% always (-> dead letters), consumed at the
# same time by a pausing consumer and a skipping one (2 workers each,
# examples/partition_worker.sql, N = 4), through a SIGKILL of a worker's
# backend (a crash restart) and a server restart.  Under pause every key's
# processed events are in strictly ascending ev_id order, the dead letters
# are the only gaps, nothing is lost; keys without failures finish no later
# than under skip by more than one retry delay (plus slack for the load).
# The watchdog opens key_blocked while keys are blocked, and clears it.
# tap-lane: timed (keys finish within a retry delay: runs in the timed lane, test/README.md)
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use IPC::Run;
use Test::More;

my $retry_s = 0.5;
my $node = PgqueNode->new_preloaded('pause', conf => qq{
pgque_bgw.launcher_naptime = '1s'
pgque_bgw.maint_interval = '1s'
pgque_bgw.watchdog_interval = '1s'
pgque_bgw.key_blocked_after = '1s'
restart_after_crash = on
});
$node->safe_psql('postgres', q{
    create extension pgque_bgw;
    select pgque.create_queue('pq');
    select pgque.set_queue_config('pq', 'max_retries', '2');
    select pgque.subscribe_slot('pq', 'paused', k, 4, 'pause') from generate_series(0, 3) k;
    select pgque.subscribe_slot('pq', 'skipped', k, 4) from generate_series(0, 3) k;
});
$node->safe_psql('postgres', slurp_file("$ENV{PGQUE_SRC}/../examples/partition_worker.sql"));
# the handler: 'f1' events fail on their first delivery, 'fa' ones always
$node->safe_psql('postgres', q{
    create or replace function handle_event(i_worker text, i_epoch bigint, i_slot int4, m pgque.message)
    returns void language plpgsql as $$
    begin
        if m.payload like 'fa%' or (m.payload like 'f1%' and m.retry_count is null) then
            raise exception 'handler failed on %', m.payload;
        end if;
        insert into example_processed (worker, epoch, slot, ev_id, key, payload)
        values (i_worker, i_epoch, i_slot, m.msg_id, m.extra1, m.payload);
    end $$;
});
ok($node->poll_query_until('postgres', q{
       select count(*) = 1 from pg_stat_activity where backend_type = 'pgque_bgw ticker'}),
   'the ticker runs');

# the backlog: 100 transactions of 100 events over 200 keys
$node->safe_psql('postgres', q{
    do $$ begin
      for t in 0 .. 99 loop
        perform pgque.send_batch('pq', 'e',
                   array(select case when hashtext('a' || i) % 500 = 0 then 'fa-'
                                     when hashtext('o' || i) % 50 = 0 then 'f1-' else 'ok-' end || i
                           from generate_series(t * 100 + 1, t * 100 + 100) i),
                   array(select 'key-' || (hashtext('k' || i) & 1023) % 200
                           from generate_series(t * 100 + 1, t * 100 + 100) i));
        commit;
      end loop;
    end $$});

# workers: shell loops that call the worker procedure again after an error
# (a killed backend, a restart, a lost lease)
my $psql = $node->config_data('--bindir') . '/psql';
my ($host, $port) = ($node->host, $node->port);
my @loops;
my $t0 = time();
for my $c ('paused', 'skipped')
{
    for my $w (1 .. 2)
    {
        my $id = substr($c, 0, 1) . "-$w";
        my $script = qq{
            until PGAPPNAME=pause_worker_$id "$psql" -X -q -h "$host" -p $port -d postgres -v ON_ERROR_STOP=1 \\
                  -c "call partition_worker('pq', '$c', 4, '$id', '10 minutes', '5 seconds', '$retry_s seconds')"
            do sleep 0.3; done
        };
        push @loops, IPC::Run::start(['bash', '-c', $script], '>', '/dev/null', '2>', '/dev/null');
    }
}

# a third of the way: SIGKILL of a pausing worker's backend (the postmaster
# restarts); two thirds: a server restart
$node->poll_query_until('postgres', q{select count(*) >= 3000 from example_processed where worker like 'p-%'});
ok($node->kill9_backend_of('pause_worker_p-%'), 'a pausing worker\'s backend killed with SIGKILL');
PgqueNode::wait_back($node, 'postgres');
$node->poll_query_until('postgres', q{select count(*) >= 6500 from example_processed where worker like 'p-%'});
$node->restart;
note('killed and restarted after ' . (time() - $t0) . ' s');
my $failing = $node->safe_psql('postgres', q{
    select count(*) filter (where ev_data like 'f1%') || ' ' || count(*) filter (where ev_data like 'fa%')
      from pgque.event_1 where ev_owner is null});
note("fail-once, always-failing events: $failing");

ok($node->poll_query_until('postgres', q{
       select (select count(distinct ev_id) from example_processed where worker like 'p-%')
            + (select count(*) from pgque.dead_letter d join pgque.consumer c on c.co_id = d.dl_consumer_id
                where c.co_name like 'paused#%') = 10000
          and (select count(distinct ev_id) from example_processed where worker like 's-%')
            + (select count(*) from pgque.dead_letter d join pgque.consumer c on c.co_id = d.dl_consumer_id
                where c.co_name like 'skipped#%') = 10000
          and not exists (select from pgque.blocked_key)}),
   'both consumers processed or dead-lettered all 10,000 events, no key blocked');
note('took ' . (time() - $t0) . ' s; ' . $node->safe_psql('postgres', q{
    select string_agg(left(worker, 1) || ': ' || n || ' events, ' || s || ' s', '; ')
      from (select left(worker, 1) as worker, count(*) as n,
                   round(extract(epoch from max(at) - min(at))::numeric, 1) as s
              from example_processed group by 1) x}));
# the workers never exit on their own (long idle exit): stop the loops, then their sessions
$_->kill_kill for @loops;
$node->safe_psql('postgres', q{
    select count(pg_terminate_backend(pid)) from pg_stat_activity where application_name like 'pause_worker_%'});

# pause: per key strictly ascending ev_id, each event processed once
is($node->safe_psql('postgres', q{
       select count(*) from (select ev_id <= lag(ev_id) over (partition by key order by seq) as back
                               from example_processed where worker like 'p-%') x where back}),
   '0', 'pause: every key\'s processed events in strictly ascending ev_id order');
# the dead letters are the only gaps: processed + dead = every event of the key, disjoint
is($node->safe_psql('postgres', q{
       with ev as (select ev_id, ev_extra1 as key from pgque.event_1 where ev_owner is null),
            done as (select ev_id from example_processed where worker like 'p-%'
                     union all
                     select d.ev_id from pgque.dead_letter d join pgque.consumer c on c.co_id = d.dl_consumer_id
                      where c.co_name like 'paused#%')
       select (select count(*) from ev) || ' events, ' ||
              (select count(*) from ev where ev_id not in (select ev_id from done)) || ' lost, ' ||
              (select count(*) - count(distinct ev_id) from done) || ' twice'}),
   '10000 events, 0 lost, 0 twice', 'pause: nothing lost, the dead letters the only gaps');
is($node->safe_psql('postgres', q{
       select count(*) from pgque.dead_letter d join pgque.consumer c on c.co_id = d.dl_consumer_id
        where c.co_name like 'paused#%' and d.ev_data not like 'fa%'}),
   '0', 'pause: only the always-failing events are dead letters');

# keys without failures: under pause they finish no later than under skip
# by more than one retry delay (plus 3 s of slack: a shared, loaded machine)
my $late = $node->safe_psql('postgres', qq{
    with clean as (select ev_extra1 as key from pgque.event_1 where ev_owner is null
                    group by ev_extra1 having bool_and(ev_data like 'ok%')),
         fin as (select key, max(at) filter (where worker like 'p-%') as p, max(at) filter (where worker like 's-%') as s
                   from example_processed where key in (select key from clean) group by key)
    select count(*) || ' clean keys, ' ||
           count(*) filter (where p > s + interval '$retry_s seconds' + interval '3 seconds') || ' late'
      from fin});
like($late, qr/^[1-9][0-9]* clean keys, 0 late$/, "pause: keys without failures are not delayed ($late)");

# key_blocked opened while keys were blocked (threshold 1 s), and cleared
ok($node->poll_query_until('postgres', q{
       select count(*) > 0 and count(*) filter (where cleared_at is null) = 0
         from pgque.alert where kind = 'key_blocked'}),
   'key_blocked alerts opened and cleared');

$node->stop('fast');
done_testing();
