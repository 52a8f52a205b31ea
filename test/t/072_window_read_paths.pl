# The window read (src/window.c: events whose ev_txid is past the earlier
# tick's xmax or in progress at it, and that the later tick sees committed)
# in every case the event tables' ev_txid index must serve (issue #30 item 1,
# ADR 0073): whatever index or scan reads the window, each case below
# delivers every committed event exactly once, in the first batch whose
# closing tick sees it committed, and nothing of what rolled back.
#   - a transaction open across several ticks;
#   - subtransactions: a released and a rolled-back savepoint, and more
#     subtransactions than a snapshot's subxip cache holds (64), across a
#     tick;
#   - a prepared transaction across ticks, committed after a crash restart
#     of the postmaster; another rolled back;
#   - a producer backend killed (SIGKILL) with its transaction open across
#     a tick;
#   - a rotation (step 1 and step 2) while a transaction that wrote before
#     the switch and after it is open;
#   - a streaming standby reading the windows of batches opened on the
#     primary (get_batch_events), the same events as the primary.
# A ledger (sent, delivered) is checked at the end: each committed payload
# delivered once, none of the rolled-back ones.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PgqueNode->new_preloaded('primary', init => { allows_streaming => 1 }, conf => q{
pgque_bgw.enabled = off
max_prepared_transactions = 4
fsync = on
restart_after_crash = on
});
$node->safe_psql('postgres', q{
    create extension pgque_bgw;
    select pgque.create_queue('rp');
    select pgque.subscribe('rp', 'c');
});

my (%sent, %gone, %delivered);
sub tick { $node->safe_psql('postgres', q{select pgque.ticker('rp')}); }
sub send_now
{
    my ($p) = @_;
    $node->safe_psql('postgres', qq{select pgque.send('rp', '$p')});
    $sent{$p} = 1;
}
# receive and ack every open window of consumer c: -> [ [payloads of batch 1], ... ]
sub drain
{
    my @batches;
    for (1 .. 100)
    {
        my $r = $node->safe_psql('postgres', q{
            with r as (select * from pgque.receive('rp', 'c', 10000))
            select coalesce(max(batch_id)::text, '') || '|' || coalesce(string_agg(payload, ',' order by payload), '') from r});
        my ($b, $p) = split /\|/, $r, 2;
        last if $b eq '';
        $node->safe_psql('postgres', "select pgque.ack($b)");
        my @p = grep { $_ ne '' } split /,/, $p;
        $delivered{$_}++ for @p;
        push @batches, \@p if @p;
    }
    return \@batches;
}
sub flat { return join ',', sort map { @$_ } @{ $_[0] }; }

# --- a transaction open across ticks --------------------------------------
my $long = $node->background_psql('postgres', on_error_stop => 1);
$long->query_safe(q{begin; select pgque.send('rp', 'long-1')});
tick();
send_now('other-1');
tick();
is(flat(drain()), 'other-1', 'open across a tick: only the committed event is delivered');
$long->query_safe(q{select pgque.send('rp', 'long-2')});
tick();
is(flat(drain()), '', 'still open after another tick: nothing of it is delivered');
$long->query_safe('commit');
$sent{$_} = 1 for qw(long-1 long-2);
tick();
my $b = drain();
is(scalar(@$b) . ':' . flat($b), '1:long-1,long-2', 'after its commit: both events, in one batch');

# --- subtransactions --------------------------------------------------------
$long->query_safe(q{
    begin;
    savepoint a; select pgque.send('rp', 'sub-kept'); release savepoint a;
    savepoint b; select pgque.send('rp', 'sub-gone'); rollback to savepoint b;
});
tick();
# 70 subtransactions that each write: more than the 64 a snapshot's subxip
# cache holds (the snapshot overflows); xid8 windows see the top-level xid
$long->query_safe(join "\n",
    map { "savepoint s$_; select pgque.send('rp', 'sub-$_'); release savepoint s$_;" } 1 .. 70);
tick();
is(flat(drain()), '', 'subtransactions of an open transaction: nothing delivered yet');
$long->query_safe('commit');
$sent{$_} = 1 for ('sub-kept', map { "sub-$_" } 1 .. 70);
$gone{'sub-gone'} = 1;
tick();
$b = drain();
is(scalar(@$b), 1, 'after its commit: one batch');
is(scalar(@{ $b->[0] }), 71, '... with the released savepoint\'s event and the 70 subtransactions\' events');
ok(!grep({ $_ eq 'sub-gone' } @{ $b->[0] }), '... and not the rolled-back savepoint\'s event');

# --- prepared transactions across ticks and a crash restart ----------------
$node->safe_psql('postgres', q{begin; select pgque.send('rp', 'prep-1'); select pgque.send('rp', 'prep-2');
                               prepare transaction 'rp_p1'});
$node->safe_psql('postgres', q{begin; select pgque.send('rp', 'prep-gone'); prepare transaction 'rp_p2'});
tick();
send_now('other-2');
tick();
is(flat(drain()), 'other-2', 'prepared, not committed, across two ticks: not delivered');
$long->quit;
$node->stop('immediate');
$node->start;
tick();
is(flat(drain()), '', 'after a crash restart the prepared transactions are still in progress');
$node->safe_psql('postgres', q{commit prepared 'rp_p1'});
$node->safe_psql('postgres', q{rollback prepared 'rp_p2'});
$sent{$_} = 1 for qw(prep-1 prep-2);
$gone{'prep-gone'} = 1;
tick();
$b = drain();
is(scalar(@$b) . ':' . flat($b), '1:prep-1,prep-2',
   'COMMIT PREPARED after the restart: its events in one batch; the rolled-back one never');

# --- a producer backend killed with its transaction open across a tick ----
my $victim = $node->background_psql('postgres', on_error_stop => 1);
my $vpid = $victim->query_safe(q{select pg_backend_pid()});
die "no backend pid: '$vpid'" unless $vpid =~ /^\d+$/ && $vpid > 1;
$victim->query_safe(q{begin; select pgque.send('rp', 'killed-1')});
tick();
send_now('other-3');
$node->kill9_and_wait($vpid);
# its pipe is closed: quitting may fail, which is expected
eval { $victim->quit; };
ok(PgqueNode::wait_back($node, 'postgres'), 'the server is back after the SIGKILL of a producer');
$gone{'killed-1'} = 1;
tick();
is(flat(drain()), 'other-3', 'the killed transaction\'s event is never delivered, the committed one is');

# --- a rotation while a window's transaction is open -----------------------
# the queue's first switch is complete (step 2 stamped), every cursor past it
$node->safe_psql('postgres', q{select pgque.set_queue_config('rp', 'rotation_period', '1 second')});
$node->safe_psql('postgres', q{select pgque.maint_rotate_tables_step2()});
tick();
drain();
$long = $node->background_psql('postgres', on_error_stop => 1);
$long->query_safe(q{begin; select pgque.send('rp', 'rot-1')});
send_now('rot-other-1');
tick();
is(flat(drain()), 'rot-other-1', 'before the switch: the committed event');
my $cur = $node->safe_psql('postgres', q{select queue_cur_table from pgque.queue where queue_name = 'rp'});
# due once a second has passed since the queue's creation
ok($node->poll_query_until('postgres', q{select pgque.maint_rotate_tables_step1('rp') = 1}),
   'rotation step 1 switches tables while the transaction is open');
isnt($node->safe_psql('postgres', q{select queue_cur_table from pgque.queue where queue_name = 'rp'}), $cur,
     '... to another child table');
$long->query_safe(q{select pgque.send('rp', 'rot-2')});
send_now('rot-other-2');
tick();
is(flat(drain()), 'rot-other-2', 'after the switch: the committed event of the new table');
$node->safe_psql('postgres', q{select pgque.maint_rotate_tables_step2()});
$long->query_safe('commit');
$long->quit;
$sent{$_} = 1 for qw(rot-1 rot-2);
tick();
$b = drain();
is(scalar(@$b) . ':' . flat($b), '1:rot-1,rot-2',
   'the transaction that wrote before and after the switch: both events, in one batch');

# --- a streaming standby reads the windows ----------------------------------
$node->backup('bk');
my $standby = PgqueNode->new('standby');
$standby->init_from_backup($node, 'bk', has_streaming => 1);
$standby->append_conf('postgresql.conf', "max_prepared_transactions = 4\n");
$standby->start;
# consumer sb (subscribed now, not to hold the rotation above back) reads
# windows with a prepared transaction in progress at a tick and committed
# inside the next window, and an open transaction across two ticks
$node->safe_psql('postgres', q{select pgque.subscribe('rp', 'sb')});
$node->safe_psql('postgres', q{begin; select pgque.send('rp', 'sb-prep'); prepare transaction 'rp_p3'});
$long = $node->background_psql('postgres', on_error_stop => 1);
$long->query_safe(q{begin; select pgque.send('rp', 'sb-long')});
tick();
send_now('sb-1');
tick();
$node->safe_psql('postgres', q{commit prepared 'rp_p3'});
tick();
$long->query_safe('commit');
$long->quit;
send_now('sb-2');
tick();
$sent{$_} = 1 for qw(sb-prep sb-long);
my ($n_windows, $same, @on_standby) = (0, 0);
for (1 .. 100)
{
    my $batch = $node->safe_psql('postgres', q{select pgque.next_batch('rp', 'sb')});
    last if $batch eq '';
    my $on_primary = $node->safe_psql('postgres',
        qq{select coalesce(string_agg(ev_data, ',' order by ev_id), '') from pgque.get_batch_events($batch)});
    $node->wait_for_catchup($standby);
    # get_batch_events locks the subscription row (not on a standby): the
    # window reader itself, as every reader calls it
    my $on_standby = $standby->safe_psql('postgres', qq{
        select coalesce(string_agg(e.ev_data, ',' order by e.ev_id), '')
          from pgque.subscription s
          join pgque.queue q on q.queue_id = s.sub_queue
          join pgque.tick lo on lo.tick_queue = q.queue_id and lo.tick_id = s.sub_last_tick
          join pgque.tick hi on hi.tick_queue = q.queue_id and hi.tick_id = s.sub_next_tick,
               lateral pgque._window_rows(pgque._event_source(q, lo.tick_snapshot, hi.tick_snapshot, null, null),
                   pg_snapshot_xmax(lo.tick_snapshot), pg_snapshot_xmax(hi.tick_snapshot),
                   array(select pg_snapshot_xip(lo.tick_snapshot)), hi.tick_snapshot,
                   null, null, null, null, null, null) e
         where s.sub_batch = $batch});
    $n_windows++;
    $same++ if $on_standby eq $on_primary;
    push @on_standby, grep { $_ ne '' } split /,/, $on_standby;
    $node->safe_psql('postgres', "select pgque.finish_batch($batch)");
}
ok($n_windows >= 3, "the standby read $n_windows windows of consumer sb");
is($same, $n_windows, 'each with the same events as the primary');
is(join(',', sort @on_standby), 'sb-1,sb-2,sb-long,sb-prep',
   '... together the events of the prepared, the open and the plain transactions, once each');

# --- the ledger ---------------------------------------------------------------
drain();
my @twice = grep { $delivered{$_} > 1 } keys %delivered;
my @lost = grep { !$delivered{$_} } keys %sent;
my @ghost = grep { $gone{$_} && $delivered{$_} } keys %delivered;
is(scalar(@lost), 0, 'ledger: every committed event was delivered to c') or diag("lost: @lost");
is(scalar(@twice), 0, 'ledger: none twice') or diag("twice: @twice");
is(scalar(@ghost), 0, 'ledger: none of the rolled-back ones') or diag("ghosts: @ghost");
is(scalar(keys %delivered), scalar(keys %sent), 'ledger: delivered = sent (' . scalar(keys %sent) . ')');

$standby->stop('fast');
$node->stop('fast');
done_testing();
