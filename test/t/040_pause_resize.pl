# Failure policy pause through an online resize (ADR 0029, 0030, 0038;
# issue #26 item 1): a pausing consumer goes 4 -> 8 slots while a producer
# sends keyed events and three workers consume them, every 50th event
# failing on its first delivery (nack, retried at once).  Twice: once
# without a crash, once with an immediate stop of the postmaster (and a
# start) during the drain.  The ledger: what was sent (the ids that
# committed sends returned, kept here in perl), what was handed out and what
# was processed (tables outside pgque, written in the transaction of the
# ack).  Checked each time: nothing lost and nothing twice, per key in ev_id
# order across the resize, no key left blocked, the switch moved what it
# had to, and the watchdog found no orphaned state.  fsync is on: the
# immediate stop must not lose what committed.
# tap-lane: timed (the stop must come while the old layout drains: runs in the timed lane, test/README.md)
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use IPC::Run;
use Test::More;
use Time::HiRes qw(time);

my $node = PgqueNode->new_preloaded('pause_resize', conf => qq{
fsync = on
pgque_bgw.launcher_naptime = '1s'
pgque_bgw.maint_interval = '1s'
pgque_bgw.watchdog_interval = '1s'
});
$node->safe_psql('postgres', q{
    create extension pgque_bgw;
    -- the ledger, outside pgque: what was handed out and what was processed
    create table delivered (q text, ev_id bigint, key text, n int4, slot int4, worker text);
    create table processed (seq bigserial primary key, q text, ev_id bigint, key text, n int4, slot int4,
                            worker text);
    -- events nacked on their first delivery
    create table failed_once (q text, ev_id bigint, primary key (q, ev_id));
    create table stop_flag (stop boolean not null);
    insert into stop_flag values (false);
    -- a worker: n read at the top of every cycle (the old n while the
    -- resize drains); per slot one batch, one transaction: every 50th event
    -- fails on its first delivery (nack), the rest of a nacked key's events
    -- in the batch are skipped (the pause contract), the others processed;
    -- a layout change (55000 / 22023) ends the cycle
    create procedure pr_worker(i_q text, me text) language plpgsql as $$
    declare
        n        int4;
        m        pgque.message;
        got      int4;
        busy     boolean;
        changed  boolean;
        nacked   text[];
    begin
        loop
            exit when (select stop from stop_flag);
            n := pgque.partition_n(i_q, 'c');
            commit;
            busy := false;
            changed := false;
            for k in 0 .. n - 1 loop
                got := 0;
                begin
                    if pgque.claim_slot(i_q, 'c', k, me, '10 seconds') is not null then
                        nacked := '{}';
                        for m in select * from pgque.receive_partitioned(i_q, 'c', k, n, me, 50) loop
                            got := got + 1;
                            insert into delivered values (i_q, m.msg_id, m.extra1, n, k, me);
                            continue when m.extra1 = any(nacked);
                            if m.msg_id % 50 = 0
                               and not exists (select from failed_once f where f.q = i_q and f.ev_id = m.msg_id) then
                                insert into failed_once values (i_q, m.msg_id);
                                perform pgque.nack_partitioned(i_q, 'c', k, n, me, m, '0 seconds', 'first delivery');
                                nacked := nacked || m.extra1;
                                continue;
                            end if;
                            insert into processed (q, ev_id, key, n, slot, worker)
                            values (i_q, m.msg_id, m.extra1, n, k, me);
                        end loop;
                        if got > 0 then
                            perform pgque.ack_partitioned(i_q, 'c', k, n, me);
                        end if;
                    end if;
                exception when invalid_parameter_value or object_not_in_prerequisite_state then
                    changed := true;    -- the layout changed: read n again
                end;
                commit;                 -- the handler's effects and the ack together
                -- the crash round's handler takes 0.2 s a batch: its old
                -- layout's 750 events then drain over seconds, and the
                -- immediate stop lands while they do (a drain of 750 fast
                -- events ended before a loaded machine's poll came back)
                if got > 0 and i_q = 'pr_crash' then
                    perform pg_sleep(0.2);
                end if;
                begin
                    perform pgque.release_slot(i_q, 'c', k, me);
                exception when invalid_parameter_value or object_not_in_prerequisite_state then
                    changed := true;
                end;
                commit;
                busy := busy or got > 0;
                exit when changed;
            end loop;
            if not busy and not changed then
                perform pg_sleep(0.02);
            end if;
        end loop;
    end $$;
});
ok($node->poll_query_until('postgres', q{
       select count(*) = 1 from pg_stat_activity where backend_type = 'pgque_bgw ticker'}),
   'the ticker runs');

# workers: shell loops that call the procedure again after an error (the
# server's immediate stop, a lost lease)
my $psql = $node->config_data('--bindir') . '/psql';
my ($host, $port) = ($node->host, $node->port);
sub start_workers
{
    my ($q) = @_;
    my @loops;
    for my $w (1 .. 3)
    {
        my $script = qq{
            until PGAPPNAME=pr_worker "$psql" -X -q -h "$host" -p $port -d postgres -v ON_ERROR_STOP=1 \\
                  -c "call pr_worker('$q', 'w$w')"
            do sleep 0.2; done
        };
        push @loops, IPC::Run::start(['bash', '-c', $script], '>', '/dev/null', '2>', '/dev/null');
    }
    return @loops;
}

my $moved_total = 0;

# one round: 40 transactions of 50 events over 120 keys, the resize 4 -> 8
# after 15 of them; $crash: the workers start after the resize (a backlog of
# 750 events to drain), an immediate stop and a start once they processed
# 50 events, while the old layout still drains
sub round
{
    my ($q, $crash) = @_;
    my $t0 = time;
    $node->safe_psql('postgres', qq{
        update stop_flag set stop = false;
        select pgque.create_queue('$q');
        select pgque.subscribe_slot('$q', 'c', k, 4, 'pause') from generate_series(0, 3) k;});
    # the crash round builds a backlog first, so that the old layout has
    # more to drain than the workers do in the time of the poll below
    my @loops = $crash ? () : start_workers($q);
    my %sent;
    my $killed_draining = '';
    for my $t (1 .. 40)
    {
        # the ids that committed sends returned (a failed send is tried again)
        my $ids;
        for my $try (1 .. 50)
        {
            $ids = eval {
                $node->safe_psql('postgres', qq{
                    select string_agg(pgque.send('$q', 'e', 'tx$t-' || i, 'key-' || ((i * 7 + $t * 13) % 120))::text
                                      || ':' || ((i * 7 + $t * 13) % 120), ',')
                      from generate_series(1, 50) i});
            };
            last if defined $ids;
            select(undef, undef, undef, 0.2);
        }
        die "round $q: could not send transaction $t" unless defined $ids;
        for (split /,/, $ids)
        {
            my ($id, $key) = split /:/;
            $sent{$id} = "key-$key";
        }
        if ($t == 15)
        {
            $node->safe_psql('postgres', qq{select pgque.resize_partitioned('$q', 'c', 8)});
            if ($crash)
            {
                @loops = start_workers($q);
                # the first processed event, not the fiftieth: the old
                # layout's 750 events drained before a loaded machine's poll
                # saw 50 once the drain got faster (ADR 0082)
                $node->poll_query_until('postgres', qq{
                    select count(*) >= 1
                        or not exists (select from pgque.partition_resize_status where queue_name = '$q')
                      from processed where q = '$q'});
                $killed_draining = $node->safe_psql('postgres', qq{
                    select count(*) from pgque.partition_resize_status where queue_name = '$q'});
                $node->stop('immediate');
                $node->start;
            }
        }
        select(undef, undef, undef, 0.02);
    }
    ok($killed_draining eq '1', "$q: the server was stopped (immediate) and started while the old layout drained")
        if $crash;
    my $total = scalar(keys %sent);
    ok($node->poll_query_until('postgres', qq{
           select (select count(distinct ev_id) from processed where q = '$q') >= $total
              and not exists (select from pgque.partition_resize_status where queue_name = '$q')
              and not exists (select from pgque.blocked_keys where queue_name = '$q')}),
       "$q: every event processed, the resize switched, no key left blocked");
    $node->safe_psql('postgres', q{update stop_flag set stop = true});
    $_->finish for @loops;
    my $secs = time - $t0;

    # the ledger against what was sent
    $node->safe_psql('postgres', qq{
        create table sent_$q (ev_id bigint primary key, key text);
        insert into sent_$q values } . join(',', map { "($_, '$sent{$_}')" } sort { $a <=> $b } keys %sent));
    is($node->safe_psql('postgres', qq{
           select (select count(*) from sent_$q) || ' sent, '
               || (select count(*) from sent_$q s where not exists (select from processed p where p.q = '$q' and p.ev_id = s.ev_id)) || ' lost, '
               || (select count(*) - count(distinct ev_id) from processed where q = '$q') || ' twice, '
               || (select count(*) from processed p where p.q = '$q' and not exists (select from sent_$q s where s.ev_id = p.ev_id and s.key = p.key)) || ' unknown'}),
       "$total sent, 0 lost, 0 twice, 0 unknown", "$q: the ledger: nothing lost, nothing twice");
    is($node->safe_psql('postgres', qq{
           select count(*) from (select ev_id <= lag(ev_id) over (partition by key order by seq) as back
                                   from processed where q = '$q') x where back}),
       '0', "$q: per key in strictly ascending ev_id order, across the resize");
    is($node->safe_psql('postgres', qq{
           select count(*) from processed a join processed b on a.q = b.q and a.key = b.key
            where a.q = '$q' and a.n = 4 and b.n = 8 and a.seq > b.seq}),
       '0', "$q: per key, the old layout's events before the new layout's");
    my $failed = $node->safe_psql('postgres', qq{
        select count(*) || ' nacks over ' || count(distinct d.key) || ' keys, '
            || count(*) filter (where d.n = 4) || ' on the old layout'
          from failed_once f
          join lateral (select * from delivered d where d.q = f.q and d.ev_id = f.ev_id limit 1) d on true
         where f.q = '$q'});
    my ($moved) = slurp_file($node->logfile) =~ /resized from n = 4 to n = 8 at tick \d+ \((\d+) blocked keys moved\)(?![\s\S]*resized from n = 4 to n = 8)/;
    $moved_total += $moved // 0;
    note(sprintf("figure: %s: %d events, %s; the switch moved %s blocked keys; %.1f s", $q, $total, $failed,
                 $moved // '?', $secs));
}

round('pr_plain', 0);
round('pr_crash', 1);
# the issue's paths ran: keys were blocked on the old layout at the switch
ok($moved_total > 0, "the switches moved blocked keys ($moved_total)");

is($node->safe_psql('postgres', q{select count(*) from pgque.alert where kind = 'key_state_orphaned'}),
   '0', 'the watchdog never found orphaned state');
unlike(slurp_file($node->logfile), qr/cannot switch/, 'no switch refused to drop state');
$node->stop('fast');
done_testing();
