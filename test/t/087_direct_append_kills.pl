# The producer's append without the executor (ADR 0085) under kills, with
# fsync on and a ledger (sent, delivered, acked):
#   - a backend killed (SIGKILL) in the middle of a send_batch of 300,000
#     events (autocommit), while another session commits batches: none of
#     the killed batch is ever visible or delivered, every committed batch
#     is delivered once;
#   - the postmaster stopped immediately (a crash) in the middle of a
#     keyed send_batch that splits across partition buckets: the same;
#   - a streaming standby refuses send and send_batch (read-only) and holds
#     exactly the committed events.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PgqueNode->new_preloaded('primary', init => { allows_streaming => 1 }, conf => q{
pgque_bgw.enabled = off
fsync = on
restart_after_crash = on
});
$node->safe_psql('postgres', q{
    create extension pgque_bgw;
    select pgque.create_queue('dk');
    select pgque.subscribe('dk', 'c');
    select pgque.create_queue('dkb');
    select pgque.set_queue_config('dkb', 'partition_buckets', '4');
    select pgque.subscribe('dkb', 'c');
});

my (%sent, %delivered, %acked);
# a committed batch of n events named prefix-1..n: in the ledger once send_batch returned
sub send_committed
{
    my ($q, $prefix, $n) = @_;
    $node->safe_psql('postgres', qq{
        select pgque.send_batch('$q', 't', array(select '$prefix-' || i from generate_series(1, $n) i),
                                array(select 'k' || i from generate_series(1, $n) i))});
    $sent{$q}{"$prefix-$_"} = 1 for 1 .. $n;
}
# tick, receive and ack every window of consumer c
sub drain
{
    my ($q) = @_;
    $node->safe_psql('postgres', qq{select pgque.ticker('$q')});
    for (1 .. 1000)
    {
        my $r = $node->safe_psql('postgres', qq{
            with r as (select * from pgque.receive('$q', 'c', 100000))
            select coalesce(max(batch_id)::text, '') || '|' || coalesce(string_agg(payload, ','), '') from r});
        my ($b, $p) = split /\|/, $r, 2;
        last if $b eq '';
        $delivered{$q}{$_}++ for grep { $_ ne '' } split /,/, $p;
        $node->safe_psql('postgres', "select pgque.ack($b)");
        $acked{$q}{$_} = 1 for grep { $_ ne '' } split /,/, $p;
    }
}
# the ledger of queue q: every committed event delivered and acked once, nothing else
sub ledger_ok
{
    my ($q, $what) = @_;
    my @missing = grep { !$delivered{$q}{$_} } keys %{ $sent{$q} };
    my @extra = grep { !$sent{$q}{$_} } keys %{ $delivered{$q} };
    my @twice = grep { $delivered{$q}{$_} > 1 } keys %{ $delivered{$q} };
    my @unacked = grep { !$acked{$q}{$_} } keys %{ $sent{$q} };
    is(scalar(@missing) . ' missing, ' . scalar(@extra) . ' never sent, ' . scalar(@twice) . ' twice, '
       . scalar(@unacked) . ' unacked',
       '0 missing, 0 never sent, 0 twice, 0 unacked', "$what: the ledger of $q ("
       . scalar(keys %{ $sent{$q} }) . ' sent)');
}
# start a send_batch of n events named prefix-i in a session of its own,
# in a transaction that it never commits: a batch that ends before the
# kill or the crash reaches it is still uncommitted then (with the posting
# tuples of ADR 0137 a batch of 300,000 could end between the check that it
# runs and the SIGKILL, and commit: .ci/run, once); returns (session, pid)
sub start_batch
{
    my ($q, $prefix, $n) = @_;
    my $s = $node->background_psql('postgres', on_error_stop => 0);
    my $pid = $s->query_safe('select pg_backend_pid()');
    die "no backend pid: '$pid'" unless $pid =~ /^\d+$/ && $pid > 1;
    $s->query_until(qr/appending/, qq{
        begin;
        \\echo appending
        select pgque.send_batch('$q', 't', array(select '$prefix-' || i from generate_series(1, $n) i),
                                array(select 'k' || i from generate_series(1, $n) i));
    });
    return ($s, $pid);
}
# the size of queue q's current tables, in bytes
sub cur_size
{
    my ($q) = @_;
    return $node->safe_psql('postgres', qq{
        select coalesce(sum(pg_relation_size(c.oid)), 0) from pg_class c, pgque.queue q
         where q.queue_name = '$q' and c.relnamespace = 'pgque'::regnamespace
           and c.relname ~ ('^event_' || q.queue_id || '_' || q.queue_cur_table || '(_b[0-9]+)?\$')});
}

# --- a backend killed in the middle of a send_batch -------------------------
send_committed('dk', 'before', 1000);
my $base = cur_size('dk');
my ($victim, $vpid) = start_batch('dk', 'killed', 300000);
# the batch is being appended (its table grows); others commit meanwhile
ok(PgqueNode::poll_until(sub { cur_size('dk') > $base + 2_000_000 }),
   'the killed batch is being appended (2 MB written)');
send_committed('dk', 'beside', 100);
my $active = $node->safe_psql('postgres', qq{select state in ('active', 'idle in transaction') from pg_stat_activity where pid = $vpid});
is($active, 't', 'the send_batch\'s transaction is still open when it is killed');
$node->kill9_and_wait($vpid);
# its backend is gone: quitting may fail on the closed pipe, which is expected
eval { $victim->quit; };
ok(PgqueNode::wait_back($node, 'postgres'), 'the server is back after the SIGKILL of a producer');
like(slurp_file($node->logfile), qr/terminated by signal 9/, 'the postmaster saw the backend die');
is($node->safe_psql('postgres', q{select count(*) from pgque.event_template where ev_data like 'killed-%'}), '0',
   'no row of the killed batch is visible');
send_committed('dk', 'after', 1000);
drain('dk');
ledger_ok('dk', 'SIGKILL mid-send_batch');

# --- the postmaster crashes in the middle of a bucketed send_batch ----------
send_committed('dkb', 'before', 1000);
$base = cur_size('dkb');
($victim, $vpid) = start_batch('dkb', 'crashed', 300000);
ok(PgqueNode::poll_until(sub { cur_size('dkb') > $base + 2_000_000 }),
   'the bucketed batch is being appended (2 MB written)');
send_committed('dkb', 'beside', 100);
$node->stop('immediate');
eval { $victim->quit; };
$node->start;
is($node->safe_psql('postgres', q{select count(*) from pgque.event_template where ev_data like 'crashed-%'}), '0',
   'after an immediate stop and recovery, no row of the interrupted batch is visible');
send_committed('dkb', 'after', 1000);
drain('dkb');
ledger_ok('dkb', 'immediate stop mid-send_batch');
# every bucket table received events of the committed batches
is($node->safe_psql('postgres', q{
    select count(distinct tableoid) from pgque.event_template
     where tableoid::regclass::text ~ ('^pgque\.event_' || (select queue_id from pgque.queue where queue_name = 'dkb') || '_[0-9]+_b[0-9]+$')}),
   '4', 'the committed bucketed batches reached the four bucket tables');

# --- a streaming standby ----------------------------------------------------
$node->backup('bk');
my $standby = PgqueNode->new('standby');
$standby->init_from_backup($node, 'bk', has_streaming => 1);
$standby->start;
send_committed('dk', 'late', 10);
$node->wait_for_catchup($standby);
my ($ret, $out, $err) = $standby->psql('postgres', q{select pgque.send('dk', 'on-standby')});
like($err, qr/cannot execute pgque send in a read-only transaction/, 'send on a standby: refused, read-only');
($ret, $out, $err) = $standby->psql('postgres', q{select pgque.send_batch('dk', 't', array['a', 'b'])});
like($err, qr/cannot execute pgque send in a read-only transaction/, 'send_batch on a standby: refused, read-only');
is($standby->safe_psql('postgres', q{
    select count(*) filter (where ev_data like 'killed-%') || ',' || count(*) filter (where ev_data like 'late-%')
      from pgque.event_template}),
   '0,10', 'the standby holds the committed events and none of the killed batch');
$standby->stop('fast');

$node->stop('fast');
done_testing();
