# A takeover resumes at the last acked position of the window (issue 26,
# ADR 0039).  Three slot workers share a partitioned consumer of 3 slots;
# each tick window holds about 400 events per slot, handed out in parts of
# 20, and the workers release their slots after every part, so a slot
# changes hands all the time.  Three times a worker is frozen (SIGSTOP of
# its backend) in the middle of a window: parts of it acked, the next part
# received in an open transaction (its epoch's row locked).  Twice the
# frozen slot is the same, so the second takeover happens while two rows
# are locked.  Every delivery goes to a ledger kept here (in the order the
# calls returned) with whether its ack committed.  Asserted: the new owner's
# first part is exactly the part the frozen worker held (it starts at the
# acked position, not at the window's start); no delivery of an event that
# was acked before; no key is handed an event at or before its last acked
# one; the frozen workers' acks are refused (PQ002) and roll back; every
# event is acked exactly once, per key in ev_id order.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep time);

my $n = 3;
my $ttl = 2;                  # seconds: the lease TTL of every worker
my $part = 20;                # max_return
my $burst = 1200;             # events per transaction: one window

my $node = PgqueNode->new_preloaded('takeover', conf => qq{
pgque_bgw.launcher_naptime = '1s'
});
$node->safe_psql('postgres', qq{
    create extension pgque_bgw;
    select pgque.create_queue('tp');
    select pgque.subscribe_slot('tp', 'w', k, $n) from generate_series(0, $n - 1) k;
    -- what the workers processed, written with their acks
    create table acked (
        seq     bigserial primary key,
        worker  text not null,
        epoch   bigint not null,
        slot    int4 not null,
        ev_id   bigint not null,
        key     text);
    -- the deliveries, loaded from this script's ledger at the end
    create table delivered (
        seq     int4 primary key,
        worker  text not null,
        slot    int4 not null,
        ev_id   bigint not null,
        key     text not null,
        acked   boolean not null);
    -- one part of slot k for worker w: claim, receive, record, ack,
    -- release, in one transaction -> 'ev_id:key,...' ('' when the slot is
    -- held by another worker or empty)
    create function step(k int4, w text) returns text language plpgsql as \$\$
    declare
        e    bigint := pgque.claim_slot('tp', 'w', k, w, '$ttl seconds');
        got  text;
    begin
        if e is null then
            return '';
        end if;
        with m as (select * from pgque.receive_partitioned('tp', 'w', k, $n, w, $part)),
             i as (insert into acked (worker, epoch, slot, ev_id, key)
                   select w, e, k, m.msg_id, m.extra1 from m order by m.msg_id)
        select string_agg(m.msg_id || ':' || m.extra1, ',' order by m.msg_id) into got from m;
        if got is not null then
            perform pgque.ack_partitioned('tp', 'w', k, $n, w);
        end if;
        perform pgque.release_slot('tp', 'w', k, w);
        return coalesce(got, '');
    end \$\$;
    -- the frozen worker's part: received and recorded, not acked; the
    -- caller's transaction stays open -> 'batch_id|ev_id:key,...'
    create function hold(k int4, w text) returns text language sql as \$\$
        with m as (select * from pgque.receive_partitioned('tp', 'w', k, $n, w, $part)),
             i as (insert into acked (worker, epoch, slot, ev_id, key)
                   select w, -1, k, m.msg_id, m.extra1 from m order by m.msg_id)
        select max(m.batch_id) || '|' || string_agg(m.msg_id || ':' || m.extra1, ',' order by m.msg_id) from m
    \$\$;
    -- an ack that reports its SQLSTATE instead of failing the transaction
    create function try_ack(k int4, w text) returns text language plpgsql as \$\$
    begin
        return 'acked ' || pgque.ack_partitioned('tp', 'w', k, $n, w);
    exception when others then
        return 'refused: ' || sqlstate;
    end \$\$;
    -- a burst of keyed events in one transaction (40 keys)
    create function burst(i_from int4) returns int4 language sql as \$\$
        select cardinality(pgque.send_batch('tp', 'e',
                   array(select 'p' || i from generate_series(i_from, i_from + $burst - 1) i order by i),
                   array(select 'key-' || (i % 40) from generate_series(i_from, i_from + $burst - 1) i order by i)))
    \$\$;
});

my $t_start = time;
my @worker;
my %pid;
for my $w (1 .. 3)
{
    my $bg = $node->background_psql('postgres', on_error_stop => 0);
    $pid{$w} = $bg->query_safe('select pg_backend_pid()');
    push @worker, $bg;
}
sub session { return $worker[ $_[0] - 1 ]; }

# the ledger: one entry per delivered event, in the order the calls returned
my @ledger;
my $produced = 0;

sub record_part
{
    my ($w, $k, $text, $acked) = @_;
    my @evs;
    for my $item (split /,/, $text)
    {
        my ($ev, $key) = split /:/, $item, 2;
        push @ledger, [ scalar(@ledger) + 1, "worker-$w", $k, $ev, $key, $acked ];
        push @evs, $ev;
    }
    return @evs;
}

# one part of slot k by worker w (normal step): the ev_ids it got
sub step
{
    my ($w, $k) = @_;
    my $got = session($w)->query_safe("select step($k, 'worker-$w')");
    return record_part($w, $k, $got, 1);
}

sub produce
{
    $node->safe_psql('postgres', "select burst($produced + 1)");
    $produced += $burst;
}

# whether slot k's newest lease epoch has acked a part of its open window
sub mid_window
{
    my ($k) = @_;
    return $node->safe_psql('postgres', qq{
        select coalesce((select b.sb_pos is not null
                           from pgque.slot_batch b
                           join pgque.subscription s on s.sub_id = b.sb_sub
                           join pgque.consumer c on c.co_id = s.sub_consumer
                          where c.co_name = pgque._slot_name('w', $k, $n)
                          order by b.sb_epoch desc limit 1), false)}) eq 't';
}

# the slot's pending events as the latest tick sees them
sub pending
{
    my ($k) = @_;
    return $node->safe_psql('postgres', qq{
        select coalesce(slot_pending_events, -1) from pgque.partition_slot_status
         where queue_name = 'tp' and slot = $k});
}

ok($node->poll_query_until('postgres', q{
       select count(*) = 1 from pg_stat_activity where backend_type = 'pgque_bgw ticker'}),
   'the ticker runs');
produce();
ok($node->poll_query_until('postgres', q{
       select count(*) = 3 from pgque.partition_slot_status where queue_name = 'tp' and slot_pending_events > 0}),
   'the first window is ticked');

# worker w freezes on slot k in the middle of its window: it claims, has the
# part received in an open transaction, and its backend is stopped.
# -> the ev_ids of the part it holds
my %frozen;
sub freeze
{
    my ($w, $k) = @_;
    my $s = session($w);
    # parts of slot k's current window acked (its newest epoch's row, as
    # committed, has a position inside it): one more part if not yet
    my $deadline = time + 30;
    until (mid_window($k) || time > $deadline)
    {
        step($w, $k);
        sleep 0.05;
    }
    my $e = $s->query_safe("select pgque.claim_slot('tp', 'w', $k, 'worker-$w', '$ttl seconds')");
    die "worker-$w could not claim slot $k" if $e eq '';
    $s->query_safe('begin');
    my ($batch, $text) = split /\|/, $s->query_safe("select hold($k, 'worker-$w')"), 2;
    my @evs = record_part($w, $k, $text // '', 0);
    cmp_ok(scalar(@evs), ">", 0, "worker-$w holds a part of slot $k");
    # the premise: parts of this window were acked before (read as committed)
    is($node->safe_psql('postgres', "select sb_pos is not null from pgque.slot_batch where sb_batch = $batch"),
       't', "the part worker-$w holds on slot $k is in the middle of its window");
    kill 'STOP', $pid{$w};
    $frozen{$w} = [ $k, $e ];
    note "worker-$w (backend $pid{$w}) frozen on slot $k, epoch $e, holding $evs[0]..$evs[-1]";
    return @evs;
}

# the other workers go on over every slot until one of them hands out a
# part of slot k: that part must be the frozen one's
sub take_over
{
    my ($k, $held, @live) = @_;
    my $deadline = time + 30;
    while (time < $deadline)
    {
        for my $w (@live)
        {
            for my $j (0 .. $n - 1)
            {
                my @evs = step($w, $j);
                if ($j == $k && @evs)
                {
                    is(join(',', @evs), join(',', @$held),
                       "worker-$w took slot $k over at the acked position: the held part, not the window's start");
                    return $w;
                }
            }
        }
        sleep 0.05;
    }
    fail("slot $k was taken over within 30 s");
    return undef;
}

# the thawed worker's ack is refused and its transaction rolls back: PQ002
# (fenced) when it is the worker the slot was last taken over from, PQ001
# (no lease) when the slot is free (released after every part) and was
# taken over from another worker since (the lease remembers only the last)
sub thaw
{
    my ($w, $code) = @_;
    kill 'CONT', $pid{$w};
    my ($k) = @{ $frozen{$w} };
    is(session($w)->query_safe("select try_ack($k, 'worker-$w')"), "refused: $code",
       "worker-${w}'s ack after SIGCONT is refused with $code");
    session($w)->query_safe('rollback');
    delete $frozen{$w};
}

# the three workers take turns over the slots, each slot changing hands
# after every part (a release and a claim: a takeover of an ended owner)
for my $round (1 .. 2)
{
    for my $w (1 .. 3)
    {
        step($w, ($round + $w) % $n);
    }
}

# freeze 1: worker-1 on slot 0; worker-2 or worker-3 takes over
my @held = freeze(1, 0);
my $next = take_over(0, \@held, 2, 3);
# the new owner freezes on slot 0 too, holding its next part: slot 0 has
# two locked rows now, and the last worker takes over
@held = freeze($next, 0);
my ($last) = grep { $_ != 1 && $_ != $next } (2, 3);
take_over(0, \@held, $last);
produce();
thaw(1, 'PQ001');
# freeze 3: the last worker on slot 1 (in the second window), worker-1
# takes over
@held = freeze($last, 1);
take_over(1, \@held, 1);
thaw($next, 'PQ002');
thaw($last, 'PQ002');

# all three drain what is left
my $deadline = time + 60;
my $idle = 0;
while (time < $deadline && $idle < 3)
{
    my $any = 0;
    for my $w (1 .. 3)
    {
        for my $k (0 .. $n - 1)
        {
            $any += scalar(step($w, $k));
        }
    }
    if ($any)
    {
        $idle = 0;
    }
    else
    {
        # nothing handed out: done once the latest tick leaves nothing pending
        $idle++ if join(',', map { pending($_) } 0 .. $n - 1) eq join(',', (0) x $n);
        sleep 0.1;
    }
}
cmp_ok($idle, '>=', 3, 'the slots were drained');
$_->quit for @worker;

# the ledger into the database
while (my @chunk = splice(@ledger, 0, 500))
{
    $node->safe_psql('postgres', 'insert into delivered values '
          . join(',', map { "($_->[0], '$_->[1]', $_->[2], $_->[3], '$_->[4]', " . ($_->[5] ? 'true' : 'false') . ')' } @chunk));
}

my ($deliveries, $again) = split /\|/, $node->safe_psql('postgres', q{
    select count(*), count(*) - count(distinct ev_id) from delivered});
diag "figure: $deliveries deliveries of $produced events, $again delivered again (the 3 held parts of $part)";
is($again, 3 * $part, 'only the frozen workers\' parts were delivered again');
is($node->safe_psql('postgres', q{
       select count(*) from delivered d
        where exists (select from delivered a where a.acked and a.ev_id = d.ev_id and a.seq < d.seq)}),
   '0', 'no acked event was delivered again');
is($node->safe_psql('postgres', q{
       select count(*) from delivered d
        where d.ev_id <= (select max(a.ev_id) from delivered a
                           where a.acked and a.key = d.key and a.seq < d.seq)}),
   '0', 'no key was handed an event at or before its last acked one');
is($node->safe_psql('postgres', 'select count(*) from acked where epoch = -1'),
   '0', 'nothing the frozen workers did in their held parts was kept');
is($node->safe_psql('postgres', 'select count(*), count(distinct ev_id) from acked'),
   "$produced|$produced", "every produced event ($produced) was acked exactly once");
is($node->safe_psql('postgres', q{
       select count(*) from (select ev_id <= lag(ev_id) over (partition by key order by seq) as back
                               from acked) x where back}),
   '0', 'per key, the acked events are in ascending ev_id order');
is($node->safe_psql('postgres', qq{select count(*) from acked where slot <> pgque._slot_of(key, $n)}),
   '0', 'every event on its key\'s slot');
diag sprintf('figure: %.1f s from the first worker to the last check', time - $t_start);
$node->stop('fast');
done_testing();
