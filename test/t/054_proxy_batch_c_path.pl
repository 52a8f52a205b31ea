# The keyed send_batch through pgque_proxy.so's C path
# (pgque._send_batch_keyed, ADR 0122), over three shards: s0 and s1 on
# one server, s2 on a second one that is stopped and restarted.
#  - routing: every event on the shard its key maps to (pgque.shard_of),
#    NULL keys with the first keyed event's shard, the ids in input order;
#    a batch whose keys all map to one shard, and a large one;
#  - a shard's own error (its queue dropped) relayed with its SQLSTATE,
#    naming the shards whose parts were committed, and those committed;
#  - a shard that answers with another number of ids, a malformed array
#    or NULL (a pgque.send_batch of its own): 08P01 naming the shard, the
#    connection still sends after it;
#  - pgque._key_hash replaced while a session has sent batches: the session
#    routes by the new one (one definition of the hash), a negative hash
#    is a clear error with nothing sent;
#  - a role's USAGE through a membership revoked while the connections are
#    cached: the next batch is refused (42501) before anything is sent
#    (ADR 0119, as the single send);
#  - a part held on its shard (a lock) and the proxy backend cancelled: the
#    error says which parts were in flight, and the next batch of the
#    session gets its own ids; a shard that never answers the connect:
#    statement_timeout ends it, nothing sent;
#  - a shard whose backend stops reading (SIGSTOP) a 20 MB part:
#    statement_timeout ends the write (the latch loop), the next batch of
#    the session sends;
#  - the shard server restarted between two batches of a session: the
#    next batch reconnects and sends;
#  - the second server killed (-m immediate, fsync on) under a producer's
#    ledger of batches: every batch that returned ids has each event on its
#    shard with that id, every failed batch was 08006 naming shard 2 and
#    the committed shards, whose parts are there; nothing twice, nothing
#    not sent.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use IO::Socket::INET;
use Time::HiRes qw(time usleep);

my $sa = PgqueNode->new_preloaded('pb_sa', conf => qq{
pgque_bgw.enabled = off
fsync = on
});
my $sb = PgqueNode->new_preloaded('pb_sb', conf => qq{
pgque_bgw.enabled = off
fsync = on
});
$sa->safe_psql('postgres', q{
    create database s0;
    create database s1;
    create database odd;
});
$sb->safe_psql('postgres', q{create database s2;});
for my $n ([ $sa, 's0' ], [ $sa, 's1' ], [ $sb, 's2' ])
{
    $n->[0]->safe_psql($n->[1], q{
        create extension pgque_bgw;
        select pgque.create_queue('orders');
    });
}
my $proxy = PgqueNode->new('pb_proxy');
$proxy->init;
$proxy->start;
my $ci_a = "host=" . $sa->host . " port=" . $sa->port;
my $ci_b = "host=" . $sb->host . " port=" . $sb->port;
$proxy->safe_psql('postgres', qq{
    set client_min_messages = warning;
    create extension pgque_proxy cascade;
    select pgque.set_shards(array['$ci_a dbname=s0', '$ci_a dbname=s1', '$ci_b dbname=s2']);
    create user mapping for public server pgque_shards;
});

# run sql in background session s: (its output, its stderr)
sub q_both
{
    my ($s, $sql) = @_;
    $s->{stderr} = '';
    my $out = $s->query($sql);
    my $err = $s->{stderr};
    $s->{stderr} = '';
    return ($out, $err);
}

# the events of a type on every shard: "shard:payload" => [ev_id, ...]
sub events_of
{
    my ($type) = @_;
    my %ev;
    for my $n ([ $sa, 's0', 0 ], [ $sa, 's1', 1 ], [ $sb, 's2', 2 ])
    {
        for my $row (split /\n/, $n->[0]->safe_psql($n->[1], qq{
            select ev_data, ev_id, coalesce(ev_extra1, '') from pgque.event_template where ev_type = '$type'}))
        {
            my ($d, $id, $k) = split /\|/, $row;
            push @{ $ev{$d} }, "$n->[2]:$id:$k";
        }
    }
    return \%ev;
}

# ---- routing and input order over three shards
my $ids = $proxy->safe_psql('postgres', q{
    select pgque.send_batch('orders', 'route', array(select 'r' || i from generate_series(1, 60) i),
                            array(select case when i % 10 = 3 then null else 'key-' || i end
                                    from generate_series(1, 60) i))});
$ids =~ s/[{}]//g;
my @ids = split /,/, $ids;
is(scalar(@ids), 60, 'a keyed batch of 60 over three shards: 60 ids');
my @want = split /\n/, $proxy->safe_psql('postgres', q{
    select coalesce(pgque.shard_of(case when i % 10 = 3 then null else 'key-' || i end), pgque.shard_of('key-1'))
      from generate_series(1, 60) i order by i});
my $ev = events_of('route');
my @wrong = grep {
    my $i = $_;
    my $at = $ev->{"r$i"} // [];
    !(scalar(@$at) == 1 && $at->[0] =~ /^(\d):(\d+):/ && $1 == $want[ $i - 1 ] && $2 == $ids[ $i - 1 ])
} 1 .. 60;
is("@wrong", '', 'each event once, on its key\'s shard (shard_of; a NULL key: the first key\'s), with the id at its place');
my %shards = map { $_ => 1 } @want;
is(scalar(keys %shards), 3, 'and the batch spread over the three shards');

# keys of one shard: the batch as it came, to that shard
my @one = split /\n/, $proxy->safe_psql('postgres', q{
    select 'key-' || i from generate_series(1, 400) i where pgque.shard_of('key-' || i) = 1 limit 5});
my $arr = join(',', map { "'$_'" } @one);
$ids = $proxy->safe_psql('postgres', qq{
    select pgque.send_batch('orders', 'one', array['o1', 'o2', 'o3', 'o4', 'o5'], array[$arr])});
$ev = events_of('one');
is(join(',', map { $ev->{"o$_"}[0] =~ s/:[^:]*$//r } 1 .. 5), join(',', map { "1:$_" } split /,/, $ids =~ s/[{}]//gr),
   'a batch whose keys all map to shard 1: there, in input order');

# a large batch: 30,000 events (parts past 1 MB of text are sent in the
# latch loop and their connections closed after the call)
my $big = $proxy->safe_psql('postgres', q{
    with b as (select pgque.send_batch('orders', 'big',
                   array(select 'big-' || i || '-' || repeat('x', 100) from generate_series(1, 30000) i),
                   array(select 'key-' || i from generate_series(1, 30000) i)) ids)
    select pg_catalog.cardinality(ids), (select count(x) from unnest(ids) x) from b});
is($big, '30000|30000', 'a keyed batch of 30,000 events: 30,000 ids, none NULL');
my $big_on = join('|', map { $_->[0]->safe_psql($_->[1], q{select count(*) from pgque.event_template where ev_type = 'big'}) }
                  [ $sa, 's0' ], [ $sa, 's1' ], [ $sb, 's2' ]);
is($big_on, $proxy->safe_psql('postgres', q{
    select string_agg(c::text, '|' order by s) from (
      select s, (select count(*) from generate_series(1, 30000) i where pgque.shard_of('key-' || i) = s) c
        from generate_series(0, 2) s) x}), '... each shard holding its keys\' events');

# ---- a shard's own error relayed: its queue dropped
$sa->safe_psql('s1', q{select pgque.drop_queue('orders')});
my ($rc, $out, $err) = $proxy->psql('postgres', q{\set VERBOSITY verbose
select pgque.send_batch('orders', 'own', array(select 'w' || i from generate_series(1, 30) i),
                        array(select 'key-' || i from generate_series(1, 30) i))});
my $first = $proxy->safe_psql('postgres', q{
    select string_agg(s::text, ',' order by f) from (
      select pgque.shard_of('key-' || i) s, min(i) f from generate_series(1, 30) i group by 1) x where s <> 1});
like($err, qr/ERROR:  42704: queue not found: orders \(the batch parts for shards \{\Q$first\E\} were committed\)/,
     "a shard's own error: its SQLSTATE and message, with the committed shards ({$first})");
$ev = events_of('own');
my @own = map { @{ $ev->{$_} } } keys %$ev;
is(scalar(grep { !/^[02]:/ } @own), 0, 'nothing on the failing shard');
is(scalar(@own), $proxy->safe_psql('postgres', q{
    select count(*) from generate_series(1, 30) i where pgque.shard_of('key-' || i) <> 1}),
   'every event of the other shards committed, once');
$sa->safe_psql('s1', q{select pgque.create_queue('orders')});

# ---- a shard that answers with something else than its part's ids
$sa->safe_psql('odd', q{
    create schema pgque;
    create table mode (m text);
    insert into mode values ('count');
    create function pgque.send(q text, t text, p text, k text) returns bigint
    language sql as $$ select 1::bigint $$;
    create function pgque.send_batch(q text, t text, p text[], k text[]) returns bigint[]
    language sql as $$
        select case (select m from mode)
               when 'count' then array[1, 2, 3]::bigint[]
               when 'null' then null::bigint[]
               else '{1,2}'::bigint[] end $$;
});
$proxy->safe_psql('postgres', qq{
    create database oddp;
});
$proxy->safe_psql('oddp', qq{
    set client_min_messages = warning;
    create extension pgque_proxy cascade;
    select pgque.set_shards(array['$ci_a dbname=s0', '$ci_a dbname=odd']);
    create user mapping for public server pgque_shards;
});
my @two = split /\n/, $proxy->safe_psql('oddp', q{
    select (select 'key-' || i from generate_series(1, 400) i where pgque.shard_of('key-' || i) = 0 limit 1),
           (select 'key-' || i from generate_series(1, 400) i where pgque.shard_of('key-' || i) = 1 limit 1)});
my ($k0, $k1) = split /\|/, $two[0];
my $odd_sess = $proxy->background_psql('oddp', on_error_stop => 0, extra_params => [ '-v', 'VERBOSITY=verbose' ]);
for my $m ('count', 'null')
{
    $sa->safe_psql('odd', "update mode set m = '$m'");
    my (undef, $e) = q_both($odd_sess, "select pgque.send_batch('orders', 'odd', array['a', 'b'], array['$k0', '$k1'])");
    like($e, qr/ERROR:  08P01: shard 1 answered its part of a batch \(1 events\) with /,
         "a shard answering $m: 08P01 naming it");
    like($e, qr/DETAIL:  The parts for shards \{0,1\} were committed, this shard's included/, '... and the committed parts');
}
my $again = $odd_sess->query_safe("select pgque.send_batch('orders', 'odd', array['a'], array['$k0'])");
like($again, qr/^\{\d+\}$/, 'the session sends after them');
$odd_sess->quit;

# ---- the routing hash is pgque._key_hash's, whatever it is now: replaced
# (as an update of the extension would), a session that already sent
# batches follows it (its inlined expression planned again)
my $key_hash_def = $proxy->safe_psql('postgres', q{select pg_get_functiondef('pgque._key_hash(text)'::regprocedure)});
my $hs = $proxy->background_psql('postgres', on_error_stop => 0, extra_params => [ '-v', 'VERBOSITY=verbose' ]);
my ($hout, $herr) = q_both($hs, q{select pgque.send_batch('orders', 'h1', array['a', 'b'], array['key-1', 'key-2'])});
like($hout, qr/^\{\d+,\d+\}$/, 'a session sends a batch');
$proxy->safe_psql('postgres', q{
    create or replace function pgque._key_hash(i_key text) returns int4 language sql immutable parallel safe
    as $$ select 2::pg_catalog.int4 $$;});
($hout, $herr) = q_both($hs, q{select pgque.send_batch('orders', 'h2', array['a', 'b', 'c'], array['key-1', 'key-2', 'key-3'])});
$ev = events_of('h2');
is(join(',', map { $ev->{$_}[0] =~ s/:.*//r } qw(a b c)), '2,2,2', '_key_hash replaced: the same session routes by the new one');
$proxy->safe_psql('postgres', q{
    create or replace function pgque._key_hash(i_key text) returns int4 language sql immutable parallel safe
    as $$ select -5::pg_catalog.int4 $$;});
($hout, $herr) = q_both($hs, q{select pgque.send_batch('orders', 'h3', array['a'], array['key-1'])});
like($herr, qr/ERROR:  22000: pgque._key_hash gave a negative hash for a key of a batch/,
     'a hash out of range (negative): a clear error, nothing sent');
$proxy->safe_psql('postgres', $key_hash_def);
($hout, $herr) = q_both($hs, q{
    select pgque.send_batch('orders', 'h4', array(select 'h' || i from generate_series(1, 20) i),
                            array(select 'key-' || i from generate_series(1, 20) i))});
$hs->quit;
$ev = events_of('h4');
is(join(',', map { $ev->{"h$_"}[0] =~ s/:.*//r } 1 .. 20), join(',', split /\n/, $proxy->safe_psql('postgres', q{
    select pgque.shard_of('key-' || i) from generate_series(1, 20) i order by i})),
   '_key_hash put back: routing is shard_of\'s again');
is(scalar(grep { /^h3/ } keys %{ events_of('h3') }), 0, 'and the refused batch sent nothing');

# ---- USAGE through a membership revoked while the connections are cached
$proxy->safe_psql('postgres', q{
    create role grp_usage nologin;
    create role mem_u login;
    grant grp_usage to mem_u;
    grant usage on foreign server pgque_shards to grp_usage;
    grant usage on schema pgque to public;
});
# the PUBLIC mapping names no user: mem_u reaches the shards as mem_u
$_->safe_psql('postgres', q{create role mem_u login; grant pgque_writer to mem_u;}) for $sa, $sb;
my $mem = $proxy->background_psql('postgres', on_error_stop => 0,
    extra_params => [ '-U', 'mem_u', '-v', 'VERBOSITY=verbose' ]);
my ($sent, $serr) = q_both($mem, "select pgque.send_batch('orders', 'mem', array['m1', 'm2', 'm3'], array['key-1', 'key-2', 'key-3'])");
like($sent, qr/^\{\d+,\d+,\d+\}$/, 'a member of a role with USAGE sends a batch') or diag($serr);
$proxy->safe_psql('postgres', q{revoke grp_usage from mem_u});
(undef, $serr) = q_both($mem, "select pgque.send_batch('orders', 'mem', array['m4', 'm5', 'm6'], array['key-1', 'key-2', 'key-3'])");
like($serr, qr/ERROR:  42501: permission denied for foreign server pgque_shards/,
     'the membership revoked: the next batch of the session is refused (42501)');
$mem->quit;
$ev = events_of('mem');
is(join(',', sort grep { $ev->{$_} } keys %$ev), 'm1,m2,m3', '... and nothing of it was sent');

# ---- a part held on its shard and the proxy backend cancelled
my ($in, $o, $e) = ('', '', '');
my $h = IPC::Run::start([ 'psql', '-X', '-A', '-t', '-v', 'VERBOSITY=verbose', '-d', $proxy->connstr('postgres') ],
                        '<', \$in, '>', \$o, '2>', \$e);
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
sub feed { feed_nowait($_[0]); return wait_done(); }
my $batch3 = sub {
    my ($tag) = @_;
    return "select pgque.send_batch('orders', 'held', array(select '$tag' || i from generate_series(1, 30) i),
                                   array(select 'key-' || i from generate_series(1, 30) i));";
};
like(feed($batch3->('warm')), qr/^\{[\d,]+\}\n$/, 'an open session sends a batch');
my $proxy_pid = feed(q{select pg_backend_pid();});
chomp $proxy_pid;
my $locker = $sa->background_psql('s1');
$locker->query_safe(q{begin; do $$ declare r record; begin
    for r in select i.inhrelid::regclass t from pg_inherits i
              where i.inhparent = 'pgque.event_template'::regclass loop
        execute format('lock table %s in access exclusive mode', r.t);
    end loop; end $$;});
feed_nowait($batch3->('cancelled'));
my $spid = $sa->poll_value('s1', q{
    select pid from pg_stat_activity where query like '%pgque.send_batch($1%' and wait_event_type = 'Lock'});
ok($spid, "shard 1's part is held there (backend $spid)");
$proxy->safe_psql('postgres', "select pg_cancel_backend($proxy_pid)");
wait_done();
like($e, qr/ERROR:  57014: canceling statement due to user request/, 'cancelled while reading the parts: 57014');
like($e, qr/DETAIL:  The parts of the batch for shards \{[\d,]*1[\d,]*\} were in flight: they may have committed there/,
     '... naming the parts in flight');
$e = '';
$locker->query_safe('rollback');
my $next = feed($batch3->('own'));
chomp $next;
like($next, qr/^\{[\d,]+\}$/, 'the next batch of the session sends');
$ev = events_of('held');
my @mine = split /,/, $next =~ s/[{}]//gr;
my @bad = grep { my $at = $ev->{"own$_"} // []; !(scalar(@$at) == 1 && (split /:/, $at->[0])[1] == $mine[ $_ - 1 ]) } 1 .. 30;
is("@bad", '', '... with its own ids, never an answer of the cancelled batch read late');
my $cancelled_on = $sa->poll_value('s1', q{select count(*) from pgque.event_template where ev_data like 'cancelled%'}, 5);
ok($cancelled_on == 0 || $cancelled_on == $proxy->safe_psql('postgres', q{
    select count(*) from generate_series(1, 30) i where pgque.shard_of('key-' || i) = 1}),
   "the cancelled part on shard 1 committed whole or not at all ($cancelled_on)");

# ---- a shard that stops reading a large part (its backend stopped with
# SIGSTOP): the write waits in the latch loop, statement_timeout ends it
my $k0s = $proxy->safe_psql('postgres', q{
    select 'key-' || i from generate_series(1, 400) i where pgque.shard_of('key-' || i) = 0 limit 1});
my $st = $proxy->background_psql('postgres', on_error_stop => 0, extra_params => [ '-v', 'VERBOSITY=verbose' ]);
my ($sout) = q_both($st, "select pgque.send_batch('orders', 'stall0', array['w'], array['$k0s'])");
like($sout, qr/^\{\d+\}$/, 'a session sends a batch to shard 0 (its connection made)');
my $stall_pid = $sa->safe_psql('s0', q{
    select pid from pg_stat_activity where datname = 's0' and query like '%pgque.send_batch($1%'
       and pid <> pg_backend_pid() order by backend_start desc limit 1});
ok($stall_pid && kill('STOP', $stall_pid), "shard 0's backend $stall_pid stopped");
my $t_stall = time;
my (undef, $serr2) = q_both($st, qq{set statement_timeout = '3s';
select pgque.send_batch('orders', 'stall', array(select repeat('s', 100) || i from generate_series(1, 200000) i),
                        array_fill('$k0s'::text, array[200000]));
reset statement_timeout;});
kill('CONT', $stall_pid);
like($serr2, qr/ERROR:  57014: canceling statement due to statement timeout/,
     'a 20 MB part to a shard that stopped reading: statement_timeout ends the write (57014)');
like($serr2, qr/The parts of the batch for shards \{0\} were in flight/, '... naming the part in flight');
ok(time - $t_stall < 60, 'at once, not when the shard reads again');
($sout) = q_both($st, "select pgque.send_batch('orders', 'stall1', array['w'], array['$k0s'])");
like($sout, qr/^\{\d+\}$/, 'the next batch of the session sends (a new connection)');
$st->quit;
my $stalled = $sa->safe_psql('s0', q{select count(*) from pgque.event_template where ev_type = 'stall'});
ok($stalled == 0 || $stalled == 200000, "the stopped part committed whole or not at all ($stalled)");

# ---- the second server restarted between two batches of the session
$sb->restart;
like(feed($batch3->('restart')), qr/^\{[\d,]+\}\n$/, 'after a shard server\'s restart the next batch reconnects and sends');
is($e, '', 'without an error');
$in .= "\\q\n";
$h->finish;
$locker->quit;

# ---- a shard that never answers the connect: statement_timeout, nothing sent
my $listener = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => 0, Listen => 16, Proto => 'tcp');
my $lport = $listener ? $listener->sockport : 0;
$proxy->safe_psql('postgres', q{create database hang});
$proxy->safe_psql('hang', qq{
    set client_min_messages = warning;
    create extension pgque_proxy cascade;
    select pgque.set_shards(array['$ci_a dbname=s0', 'host=127.0.0.1 port=$lport dbname=postgres']);
    create user mapping for public server pgque_shards;
});
my $t0 = time;
($rc, $out, $err) = $proxy->psql('hang', q{\set VERBOSITY verbose
set statement_timeout = '2s';
select pgque.send_batch('orders', 'hang', array(select 'h' || i from generate_series(1, 20) i),
                        array(select 'key-' || i from generate_series(1, 20) i))});
like($err, qr/ERROR:  57014: canceling statement due to statement timeout/,
     'a shard that never answers the connect: statement_timeout ends the batch (57014)');
ok(time - $t0 < 30, 'at once');
is($sa->safe_psql('s0', q{select count(*) from pgque.event_template where ev_type = 'hang'}), '0',
   'nothing sent: every connection is made before any part goes');
close($listener);

# ---- the second server killed under a producer's ledger of batches
$proxy->safe_psql('postgres', q{
    create table ledger (t int, i int, ev_id bigint, primary key (t, i));
    create table failed (t int primary key, state text not null, msg text not null, detail text);
    create function try_batch(t int) returns void language plpgsql as $$
    declare st text; m text; d text; got bigint[];
    begin
        got := pgque.send_batch('orders', 'L', array(select 'L' || t || '-' || i from generate_series(1, 20) i),
                                array(select 'key-' || ((t * 7 + i) % 50) from generate_series(1, 20) i));
        insert into ledger select t, o, x from unnest(got) with ordinality u(x, o);
    exception when others then
        get stacked diagnostics st = returned_sqlstate, m = message_text, d = pg_exception_detail;
        insert into failed values (t, st, m, d);
    end $$;
    create procedure produce(n int) language plpgsql as $$
    begin
        for t in 1 .. n loop
            perform try_batch(t);
            commit;
            perform pg_sleep(0.005);
        end loop;
    end $$;
});
my $N = 400;
my ($pin, $pout, $perr) = ('', '', '');
my $ph = IPC::Run::start([ 'psql', '-X', '-d', $proxy->connstr('postgres'), '-c', "call produce($N)" ],
                         '<', \$pin, '>', \$pout, '2>', \$perr);
$proxy->poll_value('postgres', q{select count(distinct t) >= 60 from ledger});
$sb->stop('immediate');
# the server stays down while the producer goes on (a window, not a wait)
usleep(1_500_000);
$sb->start;
$ph->finish;
is($perr, '', 'the producer ran to its end');
my ($nok, $nfail) = split /\|/, $proxy->safe_psql('postgres', q{
    select (select count(distinct t) from ledger), (select count(*) from failed)});
note "batches acked $nok, failed $nfail";
is($nok + $nfail, $N, 'every batch either returned its ids or was reported as an error');
ok($nfail > 0, 'some batches failed while shard 2 was down');
ok($proxy->safe_psql('postgres', "select count(*) from ledger where t > (select max(t) from failed)") > 0,
   'and batches went through again after it came back');
my @msgs = split /\n/, $proxy->safe_psql('postgres', q{select distinct state || ' ' || msg from failed});
is(scalar(grep { !/^08006 shards \{2\} are unavailable: their parts of the batch were not sent \(the parts for shards \{[01],[01]\} were committed\)$/ } @msgs),
   0, 'each failure: 08006 naming shard 2 and the committed shards 0 and 1') or diag(join("\n", @msgs));
my %shard_key = map { split /\|/ } split /\n/, $proxy->safe_psql('postgres', q{
    select 'key-' || k || '|' || pgque.shard_of('key-' || k) from generate_series(0, 49) k});
my %ok_id = map { my ($t, $i, $id) = split /\|/; ("$t-$i" => $id) } split /\n/,
    $proxy->safe_psql('postgres', q{select t, i, ev_id from ledger});
my %failed_lost = map { split /\|/ } split /\n/, $proxy->safe_psql('postgres', q{
    select t, (detail like 'lost the connection%' or detail like 'could not send%')::int from failed});
$ev = events_of('L');
my (@missing, @twice, @misplaced, @extra);
for my $t (1 .. $N)
{
    for my $i (1 .. 20)
    {
        my $want_shard = $shard_key{ 'key-' . (($t * 7 + $i) % 50) };
        my $at = $ev->{"L$t-$i"} // [];
        push @twice, "$t-$i" if @$at > 1;
        push @misplaced, "$t-$i" if grep { !/^$want_shard:/ } @$at;
        if (defined $ok_id{"$t-$i"})
        {
            push @missing, "$t-$i" unless @$at == 1 && (split /:/, $at->[0])[1] == $ok_id{"$t-$i"};
        }
        elsif (defined $failed_lost{$t})
        {
            # a committed shard's part is there; shard 2's only if its link
            # broke during the call (it may have committed)
            push @missing, "$t-$i" if $want_shard != 2 && @$at != 1;
            push @extra, "$t-$i" if $want_shard == 2 && @$at && !$failed_lost{$t};
        }
    }
}
is("@missing", '', 'every acked event is on its shard with its id, every committed part of a failed batch is there (fsync on, server killed)');
is("@twice", '', 'none twice');
is("@misplaced", '', 'none on another shard than its key\'s');
is("@extra", '', 'no part refused at connect is on its shard');
my $sent_total = scalar(grep { /^L\d+-\d+$/ } keys %$ev);
is(scalar(grep { !/^L(\d+)-(\d+)$/ || $1 > $N || $2 > 20 } keys %$ev), 0, 'every event on the shards was sent by the producer');
note "events on the shards: $sent_total";

done_testing();
