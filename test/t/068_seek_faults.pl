# Replay by time under faults (issue #31 item 2, ADR 0067, 0070): seeks to
# 'earliest', 'latest', a time and a time before the retained span race
#  - a partitioned consumer over 4 slots (made by subscribe_partitioned
#    with start 'earliest') served by three workers that claim any slot
#    with 2 s leases: leases expire and are taken over (new epochs), a
#    worker sometimes freezes past its lease between receive and ack (its
#    ack is fenced), and the consumer is resized online from 4 to 6 slots;
#  - a cooperative group of three members, one of which dies with its
#    window open for good: the others take it over after dead_interval;
#  - SIGKILLs of the workers' backends and postmaster immediate stops, at
#    random points (the seed is printed; PGQUE_SEED repeats a run).
# A producer sends 2,000 events over 16 keys meanwhile.  Every consumer
# writes the events of a batch into a ledger in the transaction of its ack
# (the exactly-once pattern, ADR 0076), and every seek writes a marker with
# its tick in its own transaction, so the ledger is what was acked, in
# order.  Between two markers of a consumer, the acked events are:
#  - partitioned: per key, a prefix of the key's events the marker's tick
#    had not seen, in their original order with their original ids
#    (nothing before the seek point, nothing twice: no acked work replayed
#    by a takeover, a fencing or a restart); after the last marker all of
#    them (nothing lost);
#  - cooperative: a subset of the events the tick had not seen, none twice;
#    after the last marker all of them.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);

$SIG{PIPE} = 'IGNORE';
my $seed = $ENV{PGQUE_SEED} // int(rand(1_000_000));
srand($seed);
diag("random seed $seed (PGQUE_SEED=$seed repeats this run)");

my $node = PgqueNode->new_preloaded('seek_faults', conf => q{
pgque_bgw.launcher_naptime = '1s'
pgque_bgw.maint_interval = '1s'
pgque_bgw.watchdog_interval = '1s'
pgque_bgw.lag_alert_after = '1h'
restart_after_crash = on
});
$node->install('postgres');
ok($node->wait_for_workers('postgres'), 'the workers run');

my $total = 2000;
$node->safe_psql('postgres', q{
    select pgque.create_queue('sk', '{"retention": "1 hour"}');
    create table ledger (
        seq       bigserial primary key,
        consumer  text not null,
        kind      text not null default 'ack',   -- 'ack': an acked event; 'seek': a marker
        ev_id     bigint,
        key       text,
        tick      bigint,
        target    text,
        worker    text);
    create table worker_error (worker text, state text, message text, at timestamptz default clock_timestamp());
    -- the producer: batches of 10 events over 16 keys, until i_total are stored
    create procedure producer(i_total int4) language plpgsql as $$
    declare
        q int4 := (select queue_id from pgque.queue where queue_name = 'sk');
        n int8;
    begin
        loop
            execute format('select count(*) from pgque.event_%s', q) into n;
            exit when n >= i_total;
            perform pgque.send('sk', 'ev', 'p', 'k' || (random() * 15)::int) from generate_series(1, 10);
            commit;
            perform pg_sleep(0.07);      -- about 15 s of traffic
        end loop;
    end $$;
    -- a slot worker: claim any slot, receive (committed), then the ledger
    -- and the ack in one transaction; an ack that finishes nothing (a seek
    -- dropped the batch) or is fenced rolls the ledger back
    create procedure slot_worker(me text) language plpgsql as $$
    declare
        c    record;
        got  pgque.message[];
        r    int4;
    begin
        loop
            got := null;
            begin
                select * into c from pgque.claim_any_slot('sk', 'pc', me, '2 seconds');
                if c.slot is not null then
                    select array_agg(x) into got
                      from pgque.receive_partitioned('sk', 'pc', c.slot, c.n, me, 50) x;
                end if;
            exception when others then
                insert into worker_error values (me, sqlstate, sqlerrm);
            end;
            commit;
            if got is null then
                perform pg_sleep(0.05);
                continue;
            end if;
            if random() < 0.03 then
                perform pg_sleep(2.5);      -- frozen past its lease
            end if;
            begin
                insert into ledger (consumer, ev_id, key, worker)
                select 'pc', u.msg_id, u.extra1, me || '/' || c.slot || '/' || c.n || '/' || c.epoch
                  from unnest(got) u;
                r := pgque.ack_partitioned('sk', 'pc', c.slot, c.n, me);
                if r = 0 then
                    raise exception 'the batch went (a seek)' using errcode = 'P0001';
                end if;
            exception when others then
                insert into worker_error values (me, sqlstate, sqlerrm);
            end;
            commit;
            -- a lease is released after the commit of the ack (ADR 0075):
            -- released before, the next owner reads the old position
            if random() < 0.3 then
                perform pgque.release_slot('sk', 'pc', c.slot, me);
                commit;
            end if;
        end loop;
    end $$;
    -- a member of the cooperative group, the same way
    create procedure coop_member(me text) language plpgsql as $$
    declare
        got  pgque.message[];
        r    int4;
    begin
        loop
            got := null;
            begin
                select array_agg(x) into got from pgque.receive_coop('sk', 'grp', me, 50, '3 seconds') x;
            exception when others then
                insert into worker_error values (me, sqlstate, sqlerrm);
            end;
            commit;
            if got is null then
                perform pg_sleep(0.05);
                continue;
            end if;
            if me = 'm3' then
                perform pg_sleep(1);        -- the slow member: it holds its window a while
            end if;
            begin
                insert into ledger (consumer, ev_id, key, worker)
                select 'grp', u.msg_id, u.extra1, me from unnest(got) u;
                r := pgque.ack(got[1].batch_id);
                if r = 0 then
                    raise exception 'the batch went (a seek)' using errcode = 'P0001';
                end if;
            exception when others then
                insert into worker_error values (me, sqlstate, sqlerrm);
            end;
            commit;
        end loop;
    end $$;
});

# the consumers: made before the first event, each with a marker.  The
# ticker's tick of sk gives the group its new window in the tick's
# transaction (_coop_sync holds the group's row until it commits), and a
# seek never waits for that row (busy, 55P03: under load a tick met the
# seek here): the group's row is taken first, waiting for such a tick to
# commit, then the seek finds it held by its own transaction.
$node->safe_psql('postgres', q{
    select pgque.register_subconsumer('sk', 'grp', 'm' || i) from generate_series(1, 3) i;
    begin;
    select from pgque.subscription s join pgque.consumer c on c.co_id = s.sub_consumer
     where c.co_name = 'grp' for no key update of s;
    insert into ledger (consumer, kind, tick, target)
    select 'grp', 'seek', tick_id, 'earliest' from pgque.seek('sk', 'grp', 'earliest');
    select pgque.subscribe_partitioned('sk', 'pc', 4, start => 'earliest');
    insert into ledger (consumer, kind, tick, target)
    select 'pc', 'seek', max(s.sub_last_tick), 'subscribe earliest'
      from pgque.subscription s join pgque.consumer c on c.co_id = s.sub_consumer
     where c.co_name like 'pc#%';
    commit;
});
is($node->safe_psql('postgres', q{
    select count(distinct s.sub_last_tick) || ' ' || count(*)
      from pgque.subscription s join pgque.consumer c on c.co_id = s.sub_consumer where c.co_name like 'pc#%'}),
   '1 4', 'subscribe_partitioned made 4 slots at one tick');

# the loops: each calls its procedure again after its backend died or the
# server went away; m3 until the test kills it for good
my $psql = $node->config_data('--bindir') . '/psql';
my ($host, $port) = ($node->host, $node->port);
my %loops;
my $m3_dead = $node->basedir . '/m3_dead';
sub start_loop
{
    my ($name, $call, $until) = @_;
    my $body = qq{PGAPPNAME=$name "$psql" -X -q -h "$host" -p $port -d postgres -c "$call"};
    my $cond = $until ? qq{[ ! -e "$until" ]} : ':';
    $loops{$name} = IPC::Run::start(['bash', '-c', qq{while $cond; do $body; sleep 0.2; done}],
                                    '>', '/dev/null', '2>', '/dev/null');
}
start_loop('producer', "call producer($total)");
start_loop("w$_", "call slot_worker('w$_')") for 1 .. 3;
start_loop("m$_", "call coop_member('m$_')") for 1 .. 2;
start_loop('m3', "call coop_member('m3')", $m3_dead);

# a seek with its marker in one transaction; busy (55P03) or resizing
# (55000) is tried again
my %seek_outcome;
my @pc_kinds = ('latest', 'earliest', 'time', 'latest', 'before', 'time', 'latest', 'time');
my $pc_seeks = 0;
sub seek_once
{
    my ($consumer) = @_;
    my @t = ('earliest', 'latest', 'time', 'time', 'before');
    my $what = $t[ int(rand(@t)) ];
    # the partitioned consumer's eight seeks, in time order, go to each
    # kind of target and to 'latest' three times apart: a run that drew
    # its kinds at random (PostgreSQL 17 under load) moved it to fewer
    # than three distinct ticks, and the file asks for three
    $what = $pc_kinds[ $pc_seeks++ % @pc_kinds ] if $consumer eq 'pc';
    my $target = $what eq 'before' ? '2000-01-01 00:00:00+00' : $what;
    if ($what eq 'time')
    {
        # a point in time between the first tick and now
        $target = $node->safe_psql('postgres', q{
            select (t0 + (clock_timestamp() - t0) * random())::text
              from (select min(tick_time) as t0 from pgque.tick t join pgque.queue q on q.queue_id = t.tick_queue
                     where q.queue_name = 'sk') x});
    }
    for my $try (1 .. 50)
    {
        my ($rc, $out, $err) = $node->psql('postgres', qq{
            \\set VERBOSITY verbose
            set client_min_messages = warning;
            begin;
            insert into ledger (consumer, kind, tick, target)
            select '$consumer', 'seek', tick_id, '$what $target' from pgque.seek('sk', '$consumer', '$target');
            commit;});
        if ($rc == 0 && $err !~ /ERROR/)
        {
            $seek_outcome{"$consumer $what"}++;
            return 1;
        }
        my ($state) = $err =~ /(55P03|55000|57P01|57P03|08006|could not connect|terminat|shut)/;
        $seek_outcome{'retried ' . ($state // 'other')}++;
        unless ($state)
        {
            diag("seek of $consumer: $err");
            return 0;
        }
        sleep(0.1);
    }
    return 0;
}

# the faults, at random points of about 20 s: seeks of both consumers,
# SIGKILLs of the workers' backends, two postmaster immediate stops, the
# resize, m3's death with its window open
my @plan;
push @plan, [ 1 + rand(19), 'seek pc' ] for 1 .. 8;
push @plan, [ 1 + rand(19), 'seek grp' ] for 1 .. 6;
push @plan, [ 1 + rand(19), 'kill worker' ] for 1 .. 5;
push @plan, [ 3 + rand(16), 'restart' ] for 1 .. 2;
push @plan, [ 2 + rand(8), 'resize' ];
push @plan, [ 2 + rand(8), 'kill m3' ];
@plan = sort { $a->[0] <=> $b->[0] } @plan;
my $t0 = time;
my %done;
my $seeks_failed = 0;
for my $step (@plan)
{
    my ($at, $what) = @$step;
    sleep($at - (time - $t0)) if $at > time - $t0;
    if ($what =~ /^seek (\w+)/)
    {
        $seeks_failed++ unless seek_once($1);
    }
    elsif ($what eq 'kill worker')
    {
        my @w = ('w1', 'w2', 'w3', 'm1', 'm2');
        # none when its loop has not connected again since a restart step
        $done{'backend SIGKILL'}++ if $node->kill9_backend_of($w[ int(rand(@w)) ]);
        PgqueNode::wait_back($node, 'postgres');
    }
    elsif ($what eq 'kill m3')
    {
        # m3 dies holding a window: wait until it has one and a backend (a
        # window outlives its member's backend: after a restart step m3's
        # loop may not have connected again yet, and killing nothing left
        # the file without its m3 SIGKILL)
        PgqueNode::poll_until(sub {
            $node->safe_psql('postgres', q{
                select count(*) > 0 from pgque.coop_window w where w.cw_member = 'm3'
                   and exists (select 1 from pg_stat_activity where application_name = 'm3')}) eq 't' }, 15)
          or diag('m3 took no window');
        append_to_file($m3_dead, 'dead');
        $done{'m3 SIGKILL'}++ if $node->kill9_backend_of('m3');
        PgqueNode::wait_back($node, 'postgres');
    }
    elsif ($what eq 'restart')
    {
        $node->stop('immediate');
        $node->start;
        $done{'postmaster immediate stop'}++;
    }
    elsif ($what eq 'resize')
    {
        my ($rc, $out, $err) = $node->psql('postgres', q{select pgque.resize_partitioned('sk', 'pc', 6)});
        $done{'resize 4 -> 6'}++ if $rc == 0;
        diag("resize: $err") if $rc != 0;
    }
}
diag(sprintf('faults in %.1f s: %s', time - $t0, join(', ', map { "$_ $done{$_}" } sort keys %done)));
diag('seeks: ' . join(', ', map { "$_ $seek_outcome{$_}" } sort keys %seek_outcome));
is($seeks_failed, 0, 'every seek went through (retried while busy or resizing)');
ok($done{'postmaster immediate stop'} && $done{'backend SIGKILL'} && $done{'m3 SIGKILL'},
   'backends were killed and the postmaster stopped -m immediate');
ok($done{'resize 4 -> 6'}, 'the partitioned consumer was resized online');

my $q = $node->safe_psql('postgres', q{select queue_id from pgque.queue where queue_name = 'sk'});
ok($node->poll_query_until('postgres', qq{select count(*) >= $total from pgque.event_$q}),
   "the producer stored $total events");
# drained: after each consumer's last marker, every event its tick had not
# seen is in the ledger
sub last_segment_missing
{
    my ($consumer) = @_;
    return qq{
        select count(*) from pgque.event_$q e, pgque.tick t,
               (select tick, seq from ledger where consumer = '$consumer' and kind = 'seek' order by seq desc limit 1) m
         where t.tick_queue = $q and t.tick_id = m.tick
           and not pg_visible_in_snapshot(e.ev_txid, t.tick_snapshot)
           and not exists (select from ledger l where l.consumer = '$consumer' and l.kind = 'ack'
                                                   and l.seq > m.seq and l.ev_id = e.ev_id)};
}
ok($node->poll_query_until('postgres', last_segment_missing('pc'), '0'),
   'the partitioned consumer drained the queue from its last seek');
ok($node->poll_query_until('postgres', last_segment_missing('grp'), '0'),
   'the cooperative group drained the queue from its last seek');
$_->kill_kill for values %loops;
$node->safe_psql('postgres', q{
    select pg_terminate_backend(pid) from pg_stat_activity
     where application_name in ('producer', 'w1', 'w2', 'w3', 'm1', 'm2', 'm3')});
diag(sprintf('run: %.1f s', time - $t0));

# the ledger, segment by segment (a segment: the acks after a marker and
# before the consumer's next one)
my $segments = qq{
    with m as (select consumer, seq, tick, lead(seq) over (partition by consumer order by seq) as next_seq
                 from ledger where kind = 'seek'),
    want as (select m.consumer, m.seq as seg, e.ev_extra1 as key, array_agg(e.ev_id order by e.ev_id) as ids
               from m join pgque.tick t on t.tick_queue = $q and t.tick_id = m.tick
               join pgque.event_$q e on not pg_visible_in_snapshot(e.ev_txid, t.tick_snapshot)
              group by 1, 2, 3),
    got as (select m.consumer, m.seq as seg, l.key, array_agg(l.ev_id order by l.seq) as ids,
                   m.next_seq is null as last
              from m join ledger l on l.consumer = m.consumer and l.kind = 'ack'
                                  and l.seq > m.seq and (m.next_seq is null or l.seq < m.next_seq)
             group by 1, 2, 3, m.next_seq)};
is($node->safe_psql('postgres', qq{select count(*) from ledger where kind = 'seek' and tick is null}), '0',
   'every marker has its tick');
my $markers = $node->safe_psql('postgres', q{
    select string_agg(consumer || ' ' || n, ', ' order by consumer)
      from (select consumer, count(*) as n from ledger where kind = 'seek' group by 1) x});
my $acks = $node->safe_psql('postgres', q{select count(*) from ledger where kind = 'ack'});
diag("figure: markers $markers; $acks acked deliveries");
ok($node->safe_psql('postgres', q{select count(distinct tick) from ledger where kind = 'seek' and consumer = 'pc'}) >= 3,
   'the partitioned consumer was moved to at least three positions');

is($node->safe_psql('postgres', qq{$segments
    select count(*) from got left join want using (consumer, seg, key)
     where got.consumer = 'pc' and (want.ids is null or got.ids <> want.ids[1:cardinality(got.ids)])}),
   '0', 'partitioned: per key, the acks after each seek are the events from its point on, in their order, with their ids, none twice');
is($node->safe_psql('postgres', qq{$segments
    select count(*) from want left join got using (consumer, seg, key)
     where want.consumer = 'pc' and want.seg = (select max(seq) from ledger where consumer = 'pc' and kind = 'seek')
       and got.ids is distinct from want.ids}),
   '0', 'partitioned: after the last seek every event from its point on was acked: nothing lost');
is($node->safe_psql('postgres', qq{$segments
    select count(*) from got left join want using (consumer, seg, key)
     where got.consumer = 'grp'
       and (want.ids is null or not got.ids <@ want.ids
            or cardinality(got.ids) <> (select count(distinct i) from unnest(got.ids) i))}),
   '0', 'cooperative: the acks after each seek are events from its point on, with their ids, none twice');
is($node->safe_psql('postgres', qq{$segments
    select count(*) from want left join got using (consumer, seg, key)
     where want.consumer = 'grp' and want.seg = (select max(seq) from ledger where consumer = 'grp' and kind = 'seek')
       and (got.ids is null or not want.ids <@ got.ids)}),
   '0', 'cooperative: after the last seek every event from its point on was acked: nothing lost');

my $errors = $node->safe_psql('postgres', q{
    select string_agg(state || ' x' || n, ', ' order by n desc)
      from (select state, count(*) as n from worker_error group by 1) x});
diag("figure: the workers' errors (retried): " . ($errors || 'none'));
is($node->safe_psql('postgres', q{
    select count(*) from worker_error where state like 'XX%' or state like '58%'}), '0',
   'no internal error in any worker');
like(slurp_file($node->logfile), qr/terminated by signal 9/, 'the postmaster saw a backend die of SIGKILL');
unlike(slurp_file($node->logfile), qr/terminated by signal (6|11)/, 'no backend crashed');
$node->stop('fast');
done_testing();
