# The producer's rightmost-leaf hint on a small ev_txid btree (ADR 0092)
# under kills, with fsync on and a ledger (sent, delivered, acked): single
# sends, one transaction each, into a queue whose index has two levels (the
# hint's range), beside a transaction that took its xid before them and
# appends after them (keys that do not go to the rightmost leaf);
#   - the producer's backend killed (SIGKILL) in the middle of its loop;
#   - the postmaster stopped immediately (a crash) in the middle of it.
# After each: every index of the queue is sound (amcheck, every heap row
# in it), every committed send is delivered once, nothing else is.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PgqueNode->new_preloaded('primary', conf => q{
pgque_bgw.enabled = off
fsync = on
restart_after_crash = on
});
$node->safe_psql('postgres', q{
    create extension pgque_bgw;
    create extension amcheck;
    select pgque.create_queue('hk');
    select pgque.subscribe('hk', 'c');
    -- what committed: each send writes its row here in its own transaction
    create table ledger (payload text primary key);
    insert into ledger select 'fill-' || g from generate_series(1, 2000) g;
    select count(pgque.send('hk', 'fill-' || g)) from generate_series(1, 2000) g;
});

my (%delivered, %acked);
sub drain
{
    $node->safe_psql('postgres', q{select pgque.ticker('hk')});
    for (1 .. 1000)
    {
        my $r = $node->safe_psql('postgres', q{
            with r as (select * from pgque.receive('hk', 'c', 100000))
            select coalesce(max(batch_id)::text, '') || '|' || coalesce(string_agg(payload, ','), '') from r});
        my ($b, $p) = split /\|/, $r, 2;
        last if $b eq '';
        $delivered{$_}++ for grep { $_ ne '' } split /,/, $p;
        $node->safe_psql('postgres', "select pgque.ack($b)");
        $acked{$_} = 1 for grep { $_ ne '' } split /,/, $p;
    }
}
sub ledger_ok
{
    my ($what) = @_;
    my %sent = map { $_ => 1 } split /\n/, $node->safe_psql('postgres', 'select payload from ledger');
    my @missing = grep { !$delivered{$_} } keys %sent;
    my @extra = grep { !$sent{$_} } keys %delivered;
    my @twice = grep { $delivered{$_} > 1 } keys %delivered;
    my @unacked = grep { !$acked{$_} } keys %sent;
    is(scalar(@missing) . ' missing, ' . scalar(@extra) . ' never sent, ' . scalar(@twice) . ' twice, '
       . scalar(@unacked) . ' unacked',
       '0 missing, 0 never sent, 0 twice, 0 unacked', "$what: the ledger (" . scalar(keys %sent) . ' sent)');
}
sub indexes_sound
{
    my ($what) = @_;
    is($node->safe_psql('postgres', q{
        select count(*) from pg_index i join pg_class t on t.oid = i.indrelid
         where t.relnamespace = 'pgque'::regnamespace
           and t.relname like 'event\_' || (select queue_id from pgque.queue where queue_name = 'hk') || '\_%'
           and bt_index_parent_check(i.indexrelid, true) is not null}),
       '3', "$what: every index of the queue is sound and holds every row");
}
sub ledger_count { return $node->safe_psql('postgres', 'select count(*) from ledger'); }

# an old transaction (its xid before the loop's) and a loop of single sends;
# returns (old session, producer session, producer pid)
sub start_round
{
    my ($tag) = @_;
    my $old = $node->background_psql('postgres', on_error_stop => 0);
    $old->query_safe('begin');
    $old->query_safe(qq{insert into ledger values ('$tag-old-0')});
    $old->query_safe(qq{select pgque.send('hk', '$tag-old-0')});
    my $p = $node->background_psql('postgres', on_error_stop => 0);
    my $pid = $p->query_safe('select pg_backend_pid()');
    die "no backend pid: '$pid'" unless $pid =~ /^\d+$/ && $pid > 1;
    $p->query_until(qr/looping/, qq{
        \\echo looping
        do \$\$
        begin
            for i in 1..1000000 loop
                insert into ledger values ('$tag-' || i);
                perform pgque.send('hk', '$tag-' || i);
                commit;
            end loop;
        end \$\$;
    });
    my $n0 = ledger_count();
    ok(PgqueNode::poll_until(sub { ledger_count() > $n0 + 1500 }), "$tag: the loop committed 1,500 sends");
    # the old transaction appends after them: keys far left of the rightmost leaf
    $old->query_safe(qq{select count(pgque.send('hk', '$tag-old-' || g)) from generate_series(1, 200) g});
    my $n1 = ledger_count();
    ok(PgqueNode::poll_until(sub { ledger_count() > $n1 + 500 }), "$tag: and 500 more after the old transaction's");
    return ($old, $p, $pid);
}

# --- the producer's backend killed in the middle of its loop -----------------
my ($old, $p, $pid) = start_round('k');
$node->kill9_and_wait($pid);
eval { $p->quit; };
eval { $old->quit; };
ok(PgqueNode::wait_back($node, 'postgres'), 'the server is back after the SIGKILL of the producer');
like(slurp_file($node->logfile), qr/terminated by signal 9/, 'the postmaster saw the backend die');
is($node->safe_psql('postgres', q{select count(*) from pgque.event_template where ev_data like 'k-old-%'}), '0',
   'the old transaction, never committed, left no event');
indexes_sound('SIGKILL mid-loop');
drain();
ledger_ok('SIGKILL mid-loop');

# --- the postmaster stopped immediately in the middle of the loop ------------
($old, $p, $pid) = start_round('c');
$node->stop('immediate');
eval { $p->quit; };
eval { $old->quit; };
$node->start;
is($node->safe_psql('postgres', q{select count(*) from pgque.event_template where ev_data like 'c-old-%'}), '0',
   'after an immediate stop and recovery, the old transaction left no event');
indexes_sound('immediate stop mid-loop');
# the hint again after recovery: sends commit and are delivered
$node->safe_psql('postgres', q{
    do $$
    begin
        for i in 1..300 loop
            insert into ledger values ('after-' || i);
            perform pgque.send('hk', 'after-' || i);
            commit;
        end loop;
    end $$;
});
indexes_sound('after recovery');
drain();
ledger_ok('immediate stop mid-loop, and after');

$node->stop('fast');
done_testing();
