# Faults of the keyed send's C path (pgque._send_keyed, ADR 0115): every
# state it keeps (one libpq connection per shard and session user, a call
# in flight on it) against the ways it can break.
#  - a shard that accepts the connection and never answers (a listener on a
#    loopback port the kernel picks): statement_timeout ends the connect and the
#    call, and so do pg_cancel_backend and pg_terminate_backend;
#  - a shard backend killed mid-call: 08006 naming the shard (the call may
#    have committed), and the next call of the same session reconnects;
#  - a cancel mid-call: the connection is closed, and the next call's id is
#    its own (never the earlier call's result, read late);
#  - the shard's postmaster killed (-m immediate, fsync on) under a
#    producer's ledger: every send that returned an id is on the shard with
#    its payload, every other one was reported as an error, none is twice.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use IO::Socket::INET;
use Time::HiRes qw(time usleep);

my $shard = PgqueNode->new_preloaded('pf_shard', conf => qq{
pgque_bgw.enabled = off
fsync = on
});
$shard->safe_psql('postgres', q{
    create extension pgque_bgw;
    select pgque.create_queue('orders');
});
my $proxy = PgqueNode->new('pf_proxy');
$proxy->init;
$proxy->start;
my $shard_ci = "host=" . $shard->host . " port=" . $shard->port . " dbname=postgres";
$proxy->safe_psql('postgres', qq{
    set client_min_messages = warning;
    create extension pgque_proxy cascade;
    select pgque.set_shards(array['$shard_ci']);
    create user mapping for public server pgque_shards;
});

# ---- a listener that accepts and never answers, on a port the kernel
# picks (a fixed one could be another run's)
my $listener = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => 0,
                                     Listen => 16, Proto => 'tcp');
my $lport = $listener ? $listener->sockport : 0;
ok($listener, "a listener that never answers on 127.0.0.1:$lport");
$proxy->safe_psql('postgres', qq{
    create database hang;
});
$proxy->safe_psql('hang', qq{
    set client_min_messages = warning;
    create extension pgque_proxy cascade;
    select pgque.set_shards(array['host=127.0.0.1 port=$lport dbname=postgres']);
    create user mapping for public server pgque_shards;
});
my $t0 = time;
my ($rc, $out, $err) = $proxy->psql('hang', q{\set VERBOSITY verbose
set statement_timeout = '2s';
select pgque.send('orders', 't', 'p', 'k')});
my $took = time - $t0;
like($err, qr/ERROR:  57014: canceling statement due to statement timeout/,
     'statement_timeout ends a connect that the shard never answers (57014)');
ok($took < 30, sprintf('after %.1f s, not at the kernel\'s or libpq\'s timeouts', $took));

# pg_cancel_backend and pg_terminate_backend end it too
for my $how ('cancel', 'terminate')
{
    my ($in, $o, $e) = ('', '', '');
    my $h = IPC::Run::start([ 'psql', '-X', '-v', 'VERBOSITY=verbose', '-d', $proxy->connstr('hang'),
                              '-c', "select pgque.send('orders', 't', '$how', 'k')" ],
                            '<', \$in, '>', \$o, '2>', \$e);
    my $pid = $proxy->poll_value('postgres', q{
        select pid from pg_stat_activity where datname = 'hang' and query like '%pgque.send%'
           and wait_event_type = 'Extension'});
    ok($pid, "the call waits on the listener (wait event Extension), backend $pid");
    my $t1 = time;
    $proxy->safe_psql('postgres', "select pg_${how}_backend($pid)");
    $h->finish;
    if ($how eq 'cancel')
    {
        like($e, qr/ERROR:  57014: canceling statement due to user request/, 'pg_cancel_backend ends it (57014)');
    }
    else
    {
        like($e, qr/FATAL:  57P01: terminating connection due to administrator command/,
             'pg_terminate_backend ends it (57P01)');
    }
    ok(time - $t1 < 15, 'at once');
}
close($listener);

# ---- a session of the proxy that stays open, fed statement by statement
my ($in, $o, $e) = ('', '', '');
my $h = IPC::Run::start([ 'psql', '-X', '-A', '-t', '-v', 'VERBOSITY=verbose', '-d', $proxy->connstr('postgres') ],
                        '<', \$in, '>', \$o, '2>', \$e);
# feed(SQL): run it in that session and return its output;
# feed_nowait(SQL) and wait_done(): the same in two steps
sub feed
{
    my ($sql) = @_;
    feed_nowait($sql);
    return wait_done();
}
sub feed_nowait
{
    my ($sql) = @_;
    $in .= "$sql\n\\echo DONE\n";
    $h->pump_nb;
}
sub wait_done
{
    my $deadline = time + 60;
    $h->pump_nb while $o !~ /DONE\n/ && time < $deadline && usleep(20000) >= 0;
    my $got = $o;
    $got =~ s/DONE\n//;
    $o = '';
    return $got;
}
like(feed(q{select pgque.send('orders', 't', 'warm', 'k1');}), qr/^\d+\n$/, 'an open session sends');

# a lock on the shard's event tables holds the shard's insert mid-call
my $locker = $shard->background_psql('postgres');
sub lock_events
{
    $locker->query_safe(q{begin; do $$ declare r record; begin
        for r in select i.inhrelid::regclass t from pg_inherits i
                  where i.inhparent = 'pgque.event_template'::regclass loop
            execute format('lock table %s in access exclusive mode', r.t);
        end loop; end $$;});
}
sub shard_call_pid
{
    return $shard->poll_value('postgres', q{
        select pid from pg_stat_activity where query like '%pgque.send($1%' and wait_event_type = 'Lock'});
}

# -- the shard backend killed mid-call
lock_events();
feed_nowait(q{select pgque.send('orders', 't', 'killed', 'k1');});
my $spid = shard_call_pid();
ok($spid, "the call is held on the shard (backend $spid)");
$shard->safe_psql('postgres', "select pg_terminate_backend($spid)");
my $got = wait_done();
like($e, qr/ERROR:  08006: shard 0 is unavailable/, 'a shard backend killed mid-call: 08006 naming the shard');
like($e, qr/may have committed/, 'saying the call may have committed');
$e = '';
$locker->query_safe('rollback');
like(feed(q{select pgque.send('orders', 't', 'after-kill', 'k1');}), qr/^\d+\n$/, 'the next call reconnects and sends');
is($e, '', 'without an error');

# -- a cancel mid-call: the next call's id is its own
my $proxy_pid = feed(q{select pg_backend_pid();});
chomp $proxy_pid;
lock_events();
feed_nowait(q{select pgque.send('orders', 't', 'cancelled', 'k1');});
$spid = shard_call_pid();
ok($spid, 'a second call is held on the shard');
$proxy->safe_psql('postgres', "select pg_cancel_backend($proxy_pid)");
wait_done();
like($e, qr/ERROR:  57014: canceling statement due to user request/, 'cancelled mid-call: 57014');
like($e, qr/DETAIL:  The call to shard 0 was in flight: it may have committed there/, 'saying it may have committed');
$e = '';
$locker->query_safe('rollback');    # the held call goes on on the shard, alone
my $id = feed(q{select pgque.send('orders', 't', 'own', 'k1');});
chomp $id;
like($id, qr/^\d+$/, 'the next call sends');
is($shard->safe_psql('postgres', "select string_agg(ev_data, ',') from pgque.event_template where ev_id = $id"),
   'own', 'and its id is its own event\'s, not the cancelled call\'s');
my $cancelled = $shard->poll_value('postgres', q{
    select count(*) from pgque.event_template where ev_data = 'cancelled'}, 5);
note "the cancelled call committed on the shard: $cancelled time(s)";
ok($cancelled eq '0' || $cancelled eq '1', 'the cancelled call is on the shard at most once');
$in .= "\\q\n";
$h->finish;
$locker->quit;

# ---- the shard's postmaster killed under a producer's ledger
$proxy->safe_psql('postgres', q{
    create table ledger (i int primary key, ev_id bigint not null);
    create table failed (i int primary key, state text not null, msg text not null);
    create function try_send(i int) returns void language plpgsql as $$
    declare st text; m text;
    begin
        insert into ledger values (i, pgque.send('orders', 't', 'L' || i, 'key-' || (i % 50)));
    exception when others then
        get stacked diagnostics st = returned_sqlstate, m = message_text;
        insert into failed values (i, st, m);
    end $$;
    create procedure produce(n int) language plpgsql as $$
    begin
        for i in 1 .. n loop
            perform try_send(i);
            commit;
            perform pg_sleep(0.003);
        end loop;
    end $$;
});
my $N = 2000;
my ($pin, $pout, $perr) = ('', '', '');
my $ph = IPC::Run::start([ 'psql', '-X', '-d', $proxy->connstr('postgres'), '-c', "call produce($N)" ],
                         '<', \$pin, '>', \$pout, '2>', \$perr);
$proxy->poll_value('postgres', q{select count(*) >= 300 from ledger}) ;
$shard->stop('immediate');
usleep(1_500_000);
$shard->start;
$ph->finish;
is($perr, '', 'the producer ran to its end');
my ($acked, $nfailed) = split /\|/, $proxy->safe_psql('postgres', q{select (select count(*) from ledger), (select count(*) from failed)});
note "acked $acked, failed $nfailed";
is($acked + $nfailed, $N, 'every send either returned an id or was reported as an error');
ok($nfailed > 0, 'some sends failed while the shard was down');
is($proxy->safe_psql('postgres', q{select string_agg(distinct state || ' ' || msg, '; ') from failed}),
   'shard 0 is unavailable' =~ s/^/08006 /r, 'each failure: 08006 naming the shard');
my $ledger = $proxy->safe_psql('postgres', q{select string_agg(i || ':' || ev_id, ',' order by i) from ledger});
my $on_shard = $shard->safe_psql('postgres', q{
    select string_agg(substr(ev_data, 2) || ':' || ev_id, ',' order by substr(ev_data, 2)::int)
      from pgque.event_template where ev_data like 'L%'});
my %shard_of = map { split /:/ } split /,/, $on_shard;
my %count;
$count{ (split /:/)[0] }++ for split /,/, $on_shard;
my @lost = grep { my ($i, $ev) = split /:/; !defined $shard_of{$i} || $shard_of{$i} ne $ev } split /,/, $ledger;
is(scalar(@lost), 0, 'every acked send is on the shard with its id (fsync on, postmaster killed)');
is(scalar(grep { $_ > 1 } values %count), 0, 'none twice');
my %failed = map { $_ => 1 } split /,/, $proxy->safe_psql('postgres', q{select string_agg(i::text, ',') from failed});
my %acked = map { (split /:/)[0] => 1 } split /,/, $ledger;
my @extra = grep { !$acked{$_} && !$failed{$_} } keys %shard_of;
is(scalar(@extra), 0, 'every event on the shard was sent by the producer');
note 'failed calls that committed anyway: ' . scalar(grep { $failed{$_} } keys %shard_of);

done_testing();
