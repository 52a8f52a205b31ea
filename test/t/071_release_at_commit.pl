# A slot's release takes effect at commit (ADR 0071): the ledger.  Three
# workers loop claim_any_slot -> receive -> ledger row -> ack -> release in
# ONE transaction over 8 slots; one transaction in five raises after its
# release and rolls back (ledger row, ack and release with it), and the
# workers' backends are terminated (SIGTERM) and restarted mid-run, and
# the postmaster is stopped with -m immediate once.  fsync on.  Before the
# fix a release was visible at once: another worker claimed the slot,
# read the cursor the ack had not committed and delivered the batch again
# (TAP 059 counted 28 duplicates in 4,000 when the release came before
# the commit).  The ledger (sent, delivered = committed rows, acked = the
# cursor) must show every event exactly once.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);

my $node = PgqueNode->new_preloaded('relcommit', conf => q{
fsync = on
pgque_bgw.launcher_naptime = '1s'
pgque_bgw.tick_interval = '100ms'
});
$node->install('postgres');
$node->safe_psql('postgres', q{
    select pgque.create_queue('rel');
    select pgque.subscribe_slot('rel', 'w', k, 8) from generate_series(0, 7) k;
    create table ledger (ev_id bigint, worker text, slot int4, at timestamptz default clock_timestamp());
    create table sent (ev_id bigint primary key);
    -- one batch per transaction: claim, receive, ledger, ack, release,
    -- and one in five rolls all of it back after the release
    create procedure rel_worker(i_worker text, i_idle interval) language plpgsql as $$
    declare
        c     record;
        rows  int4;
        idle  timestamptz := clock_timestamp();
    begin
        loop
            select * into c from pgque.claim_any_slot('rel', 'w', i_worker, '2 seconds');
            commit;
            rows := 0;
            if c.slot is not null then
                begin
                    insert into ledger (ev_id, worker, slot)
                    select m.msg_id, i_worker, c.slot
                      from pgque.receive_partitioned('rel', 'w', c.slot, c.n, i_worker, 20) m;
                    get diagnostics rows = row_count;
                    if rows > 0 then
                        perform pgque.ack_partitioned('rel', 'w', c.slot, c.n, i_worker);
                    end if;
                    perform pgque.release_slot('rel', 'w', c.slot, i_worker);
                    -- let another worker try to claim while this one is open
                    perform pg_sleep(0.01);
                    if random() < 0.2 then
                        raise exception 'roll back after the release';
                    end if;
                exception when raise_exception then
                    rows := 1;      -- work is left: not idle
                when sqlstate 'PQ001' or sqlstate 'PQ002' then
                    rows := 1;      -- lease lost (expired, taken over): claim again
                end;
                commit;
            end if;
            if rows > 0 then
                idle := clock_timestamp();
            else
                exit when clock_timestamp() - idle > i_idle;
                perform pg_sleep(0.02);
            end if;
        end loop;
    end $$;
});

my %bg;
sub start_worker
{
    my ($name) = @_;
    my $bg = $node->background_psql('postgres', on_error_stop => 0);
    $bg->query_until(qr/started/, qq{
        \\echo started
        call rel_worker('$name', '4 seconds');
        \\echo finished
    });
    $bg{$name} = $bg;
}
sub send_some
{
    my ($n) = @_;
    $node->safe_psql('postgres', qq{
        insert into sent
        select pgque.send('rel', 'ev', 'p' || i, 'k' || (i % 37)) from generate_series(1, $n) i});
}

start_worker("w$_") for 1 .. 3;
send_some(300) for 1 .. 4;
# terminate the workers' backends mid-run; they start again
my $killed = $node->safe_psql('postgres', q{
    select count(pg_terminate_backend(pid)) from pg_stat_activity where query like 'call rel_worker%'});
diag("figure: worker backends terminated: $killed");
for my $name (keys %bg) { eval { $bg{$name}->quit }; }
%bg = ();
start_worker("w$_") for 4 .. 6;
send_some(300) for 1 .. 2;
# the postmaster stopped hard: leases (shared memory) are lost, the
# committed ledger and cursors stay
for my $name (keys %bg) { eval { $bg{$name}->quit }; }
%bg = ();
$node->stop('immediate');
$node->start;
start_worker("w$_") for 7 .. 9;
send_some(300) for 1 .. 2;
ok(PgqueNode::poll_until(sub {
       $node->safe_psql('postgres', q{select count(distinct ev_id) = (select count(*) from sent) from ledger}) eq 't'
   }, 120), 'every sent event reached the ledger');
for my $name (keys %bg) { $bg{$name}->query_until(qr/finished/, ''); $bg{$name}->quit; }

my $sent = $node->safe_psql('postgres', 'select count(*) from sent');
is($sent, '2400', '2,400 events sent');
is($node->safe_psql('postgres', 'select count(*) from ledger'), $sent,
   'delivered (committed ledger rows) = sent: no duplicate');
is($node->safe_psql('postgres', 'select count(*) from sent s where not exists (select from ledger l where l.ev_id = s.ev_id)'),
   '0', 'none missing');
is($node->safe_psql('postgres', q{select count(*) from pgque.get_partition_slot_info()
                                   where queue_name = 'rel' and slot_pending_events <> 0}),
   '0', 'acked: nothing pending on any slot');
$node->stop('fast');
done_testing();
