# Online resize (ADR 0030): a partitioned consumer goes 4 -> 8 -> 3 slots
# while a producer sends keyed events and three workers consume them.  Each
# worker reads n (pgque.partition_n) at the top of every cycle over its
# slots, so it serves the old layout while a resize drains and the new one
# after the switch.  Every processed event is recorded with its worker,
# layout, slot and the time it was held (from receive to just before the
# ack's commit).  Checked: nothing lost, per key in ev_id order across both
# resizes, and no key's events ever held by two slots at once.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $node = PgqueNode->new_preloaded('resize', conf => qq{
pgque_bgw.launcher_naptime = '1s'
pgque_bgw.watchdog_interval = '1s'
});
$node->safe_psql('postgres', q{
    create extension pgque_bgw;
    select pgque.create_queue('rq');
    select pgque.subscribe_slot('rq', 'c', k, 4) from generate_series(0, 3) k;
    create unlogged table processed (
        seq      bigserial primary key,
        worker   text not null,
        n        int4 not null,
        slot     int4 not null,
        batch    bigint not null,
        ev_id    bigint not null,
        key      text not null,
        held_from timestamptz not null,
        held_to   timestamptz
    );
    create table stop_flag (stop boolean not null);
    insert into stop_flag values (false);
    -- one batch per slot per transaction; errors of a layout change (55000
    -- the new n is not served yet, 22023 n changed) end the slot's turn
    create procedure rz_worker(me text) language plpgsql as $$
    declare
        n     int4;
        k     int4;
        m     pgque.message;
        cnt   int4;
        t0    timestamptz;
        busy  boolean;
    begin
        loop
            exit when (select stop from stop_flag);
            n := pgque.partition_n('rq', 'c');
            commit;
            busy := false;
            for k in 0 .. n - 1 loop
                begin
                    if pgque.claim_slot('rq', 'c', k, me, '10 seconds') is not null then
                        cnt := 0;
                        t0 := clock_timestamp();
                        for m in select * from pgque.receive_partitioned('rq', 'c', k, n, me, 50) loop
                            insert into processed (worker, n, slot, batch, ev_id, key, held_from)
                            values (me, n, k, m.batch_id, m.msg_id, m.extra1, t0);
                            cnt := cnt + 1;
                        end loop;
                        if cnt > 0 then
                            perform pg_sleep(0.002);     -- the handler
                            update processed set held_to = clock_timestamp()
                             where worker = me and held_to is null;
                            perform pgque.ack_partitioned('rq', 'c', k, n, me);
                            busy := true;
                        end if;
                    end if;
                exception when invalid_parameter_value or object_not_in_prerequisite_state then
                    exit;   -- the layout changed: read n again
                end;
                commit;     -- the handler's effects and the ack, then release
                begin
                    perform pgque.release_slot('rq', 'c', k, me);
                exception when invalid_parameter_value then
                    null;   -- slot k is gone: the consumer shrank meanwhile
                end;
                commit;
            end loop;
            commit;
            if not busy then
                perform pg_sleep(0.02);
            end if;
        end loop;
    end $$;
});

ok($node->poll_query_until('postgres', q{
       select count(*) = 1 from pg_stat_activity where backend_type = 'pgque_bgw ticker'}),
   'the ticker runs');

my $t_start = time;
my @workers;
for my $w (1 .. 3)
{
    my $bg = $node->background_psql('postgres', on_error_stop => 1);
    $bg->query_until(qr/started/, qq{
        \\echo started
        call rz_worker('worker-$w');
        \\echo finished
    });
    push @workers, $bg;
}

# 48 transactions of 60 events over 200 keys; resize 4 -> 8 after 16 of
# them, 8 -> 3 after 32 (once the first resize has completed)
my $resized = sub {
    my ($to) = @_;
    return $node->safe_psql('postgres', qq{select pgque.resize_partitioned('rq', 'c', $to)});
};
my %boundary;
for my $t (1 .. 48)
{
    $node->safe_psql('postgres', qq{
        select pgque.send_batch('rq', 'e',
                   array(select 'tx$t-' || i from generate_series(1, 60) i),
                   array(select 'key-' || ((i * 13 + $t * 7) % 200) from generate_series(1, 60) i))});
    if ($t == 16)
    {
        $boundary{8} = $resized->(8);
    }
    if ($t == 32)
    {
        ok($node->poll_query_until('postgres', q{select count(*) = 0 from pgque.partition_resize_status}),
           'the resize 4 -> 8 completed while events kept coming');
        $boundary{3} = $resized->(3);
    }
    select(undef, undef, undef, 0.02);
}
ok($node->poll_query_until('postgres', q{select count(*) = 0 from pgque.partition_resize_status}),
   'the resize 8 -> 3 completed');
ok($node->poll_query_until('postgres', q{select count(distinct ev_id) = 2880 from processed}),
   'every event was processed');
$node->safe_psql('postgres', q{update stop_flag set stop = true});
for my $bg (@workers)
{
    $bg->query_until(qr/finished/, '');
    $bg->quit;
}

is($node->safe_psql('postgres', q{select n from pgque.partition_consumer where co_name = 'c'}), '3',
   'the consumer serves n = 3');
is($node->safe_psql('postgres', q{select count(*), count(distinct ev_id) from processed}), '2880|2880',
   'each event exactly once: none lost, none repeated');
is($node->safe_psql('postgres', q{
       select string_agg(n || ':' || events, ' ' order by n)
         from (select n, count(*) as events from processed group by n) x}) =~ /^3:\d+ 4:\d+ 8:\d+$/ ? 1 : 0,
   1, 'all three layouts processed events');
is($node->safe_psql('postgres', q{select count(*) from processed where slot <> pgque._slot_of(key, n)}),
   '0', 'every event on its key\'s slot of the layout that processed it');
is($node->safe_psql('postgres', q{
       select count(*) from (select ev_id < lag(ev_id) over (partition by key order by seq) as back
                               from processed) x where back}),
   '0', 'per key in ev_id order, across both resizes');
# the layouts split at the boundaries: an event of layout 4 is older than
# every event of layout 8 of its key, and so on
is($node->safe_psql('postgres', q{
       select count(*) from processed a join processed b on a.key = b.key
        where (a.n, b.n) in ((4, 8), (8, 3), (4, 3)) and a.ev_id > b.ev_id}),
   '0', 'per key, every old-layout event precedes every new-layout event');
is($node->safe_psql('postgres', q{
       with g as (select key, worker, n, slot, batch, min(held_from) as a, max(held_to) as b
                    from processed group by key, worker, n, slot, batch)
       select count(*) from g x join g y
           on x.key = y.key and (x.n, x.slot, x.worker) <> (y.n, y.slot, y.worker)
          and x.a < y.b and y.a < x.b}),
   '0', 'no key\'s events were ever held by two slots (or two workers) at once');
is($node->safe_psql('postgres', q{select count(*) from pgque.subscription s join pgque.consumer c on c.co_id = s.sub_consumer
                                   where c.co_name like 'c#%'}),
   '3', 'only the three slot subscriptions of n = 3 are left');
my $elapsed = time - $t_start;
# how long each resize drained: from the call to the (last) switch, in the
# server log (a switch that rolled back with its caller's call is retried)
my $log = slurp_file($node->logfile);
my %drained;
for my $to (8, 3)
{
    my ($t0) = $log =~ /^(\S+ \S+) UTC .*statement: select pgque\.resize_partitioned\('rq', 'c', $to\)/m;
    my @t1 = $log =~ /^(\S+ \S+) UTC .*resized from n = \d+ to n = $to at tick/mg;
    my $secs = sub { my ($d, $h, $m, $sec) = $_[0] =~ /^(\S+) (\d+):(\d+):([\d.]+)/; $h * 3600 + $m * 60 + $sec };
    $drained{$to} = ($t0 && @t1) ? sprintf('%.2f s', $secs->($t1[-1]) - $secs->($t0)) : '?';
}
note(sprintf('4 -> 8 at tick %s drained in %s; 8 -> 3 at tick %s drained in %s; %.0f s in all',
             $boundary{8}, $drained{8}, $boundary{3}, $drained{3}, $elapsed));
$node->stop('fast');
done_testing();
