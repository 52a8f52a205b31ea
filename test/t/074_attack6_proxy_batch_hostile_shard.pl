# The second reader's attacks on the keyed batch's C path
# (pgque._send_batch_keyed in pgque_proxy.so, ADR 0122; ADR 0125), with a
# shard that is hostile or broken: its database holds a superuser's own
# schema pgque whose send_batch answers what an attacker on that server
# would (the two other shards are real pgque_bgw databases).  Proved:
#  - the ids come back in input order, each event on its key's shard; a
#    proxy user calling _send_batch_keyed itself reaches the keys' shards
#    as its mapping's role, as through send_batch;
#  - answers of the wrong shape (fewer or more ids, two rows, none, a
#    NULL, a NULL id, two dimensions, an empty array): 08P01 naming the
#    parts committed, which are exactly the ones on the real shards (the
#    ledger); no crash;
#  - answers too large (2,000,000 rows, 3,000,000 ids): refused, and the
#    connection closed after, so libpq's grown input buffer does not stay
#    with the backend for the session
#    (ADR 0125: a fix; each connection kept a buffer of the largest
#    answer; the RSS figures are printed, not asserted: malloc keeps freed
#    memory as it likes);
#  - 20,000 notices during the call: relayed, the ids right;
#  - a shard that never answers: statement_timeout and pg_cancel_backend
#    end the call (57014) saying which parts were in flight; the next call
#    of the same session returns its own ids, never a pending answer; the
#    real shards' in-flight parts did commit (said "may have");
#  - the shard's backend killed mid-call: 08006 naming it and the parts
#    committed; its own error: relayed with its SQLSTATE, detail and hint;
#    each time the next call reconnects and sends.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

my $shard = PgqueNode->new_preloaded('a6_shard', conf => q{
pgque_bgw.enabled = off
});
$shard->safe_psql('postgres', q{
    create database s0;
    create database s1;
    create database odd;
    create role shard_w login;
    create role shard_r login;
});
for my $db ('s0', 's1')
{
    $shard->safe_psql($db, q{
        create extension pgque_bgw;
        grant pgque_writer to shard_w, shard_r;
        select pgque.create_queue('orders');
    });
}
# the hostile shard: i_type says how it answers; every call is noted
# (type, the role it runs as, the events it was given)
$shard->safe_psql('odd', q{
    create schema pgque;
    grant usage on schema pgque to public;
    create table pgque.calls (t text, who text, n int4);
    grant insert on pgque.calls to public;
    create function pgque.send(q text, t text, p text, k text) returns bigint language sql as 'select 7::bigint';
    create function pgque.send_batch(q text, t text, p text[], k text[]) returns setof bigint[]
    language plpgsql as $$
    declare
        n int4 := pg_catalog.cardinality(p);
    begin
        insert into pgque.calls values (t, current_user, n);
        case t
        when 'few' then return next '{1}'; return;
        when 'many' then return next array(select 7::int8 from generate_series(1, n + 1)); return;
        when 'two' then return next '{1}'; return next '{2}'; return;
        when 'none' then return;
        when 'null' then return next null; return;
        when 'nullid' then return next array(select case when i = 1 then null else 7::int8 end
                                                from generate_series(1, n) i); return;
        when 'twod' then return next '{{1},{2}}'; return;
        when 'empty' then return next '{}'; return;
        when 'rows' then return query select '{7}'::int8[] from generate_series(1, 2000000); return;
        when 'big' then return next array(select 1::int8 from generate_series(1, 3000000)); return;
        when 'notices' then
            for i in 1 .. 20000 loop raise notice 'n%', i; end loop;
        when 'sleep', 'sleep2' then perform pg_sleep(3600);
        when 'err' then raise exception 'odd refuses' using errcode = '22023', detail = 'det', hint = 'hnt';
        when 'fatal' then perform pg_terminate_backend(pg_backend_pid());
        else null;
        end case;
        return next array(select 7::int8 from generate_series(1, n));
    end $$;
});

my $proxy = PgqueNode->new('a6_proxy');
$proxy->init;
$proxy->start;
my $base = "host=" . $shard->host . " port=" . $shard->port;
$proxy->safe_psql('postgres', q{
    create role pu login;
    create role pr login;
    create database proxy;
});
$proxy->safe_psql('proxy', qq{
    set client_min_messages = warning;
    create extension pgque_proxy cascade;
    select pgque.set_shards(array['$base dbname=s0', '$base dbname=s1', '$base dbname=odd']);
    create user mapping for public server pgque_shards options (user 'shard_w');
    create user mapping for pr server pgque_shards options (user 'shard_r');
    grant usage on foreign server pgque_shards to pu, pr;
    grant usage on schema pgque to public;
});

# eight keys, the shard of each
my @keys = map { "k$_" } 1 .. 8;
my %shard_of = map { split /\|/ } split /\n/, $proxy->safe_psql('proxy', q{
    select 'k' || i || '|' || pgque.shard_of('k' || i) from generate_series(1, 8) i});
ok((grep { $shard_of{$_} == 2 } @keys) && (grep { $shard_of{$_} == 0 } @keys) && (grep { $shard_of{$_} == 1 } @keys),
   'the keys spread over the three shards');
my $keys_sql = "array['" . join("','", @keys) . "']";
sub payloads { my ($t) = @_; return "array['" . join("','", map { "$t-$_" } 1 .. 8) . "']"; }
sub batch { my ($t) = @_; return "select pgque.send_batch('orders', '$t', " . payloads($t) . ", $keys_sql);"; }
# where each event of type $t is: "k1=s1:12,..." ("-" when on no real shard)
sub ledger
{
    my ($t) = @_;
    my %at;
    for my $db ('s0', 's1')
    {
        for my $row (split /\n/, $shard->safe_psql($db, qq{
            select ev_extra1 || '|' || ev_id from pgque.event_template where ev_type = '$t'}))
        {
            my ($k, $id) = split /\|/, $row;
            push @{ $at{$k} }, "$db:$id";
        }
    }
    return join(',', map { "$_=" . join('+', @{ $at{$_} // ['-'] }) } @keys);
}
# what a committed part of each real shard puts in the ledger (no ids)
sub ledger_shape
{
    my ($t, @committed) = @_;
    my $l = ledger($t);
    $l =~ s/:\d+//g;
    return $l;
}
my $expect_real = join(',', map { $shard_of{$_} == 2 ? "$_=-" : "$_=s$shard_of{$_}" } @keys);

# ---- one session of user pu, fed statement by statement
my ($in, $o, $e) = ('', '', '');
my $h = IPC::Run::start([ 'psql', '-X', '-A', '-t', '-v', 'VERBOSITY=verbose', '-d', $proxy->connstr('proxy'),
                          '-U', 'pu' ], '<', \$in, '>', \$o, '2>', \$e);
sub feed_nowait { my ($sql) = @_; $in .= "$sql\n\\echo DONE\n"; $h->pump_nb; }
sub wait_done
{
    my $deadline = time + 120;
    $h->pump_nb while $o !~ /DONE\n/ && time < $deadline && usleep(20000) >= 0;
    my $got = $o;
    $got =~ s/DONE\n//;
    $o = '';
    return $got;
}
sub feed { feed_nowait(@_); return wait_done(); }
# the error of the last statement ("SQLSTATE message"), cleared
sub err_of
{
    my $err = $e =~ /ERROR:  (\w{5}): ([^\n]*)/ ? "$1 $2" : 'none';
    return $err;
}
sub detail_of { return $e =~ /DETAIL:  ([^\n]*)/ ? $1 : ''; }
my $pid = feed(q{select pg_backend_pid();});
chomp $pid;
sub rss_kb
{
    open(my $f, '<', "/proc/$pid/status") or return 0;
    my ($kb) = map { /^VmRSS:\s+(\d+)/ ? $1 : () } <$f>;
    close $f;
    return $kb // 0;
}

# ---- ids in input order, each event on its key's shard
my $ids = feed(batch('ok'));
is(err_of(), 'none', 'a batch over three shards is sent');
chomp $ids;
is(ledger_shape('ok'), $expect_real, 'each event of the real shards on its key\'s shard, once');
my %id_of = map { my ($k, $w) = split /=/; ($k => $w =~ /:(\d+)$/ ? $1 : 7) } split /,/, ledger('ok');
is($ids, '{' . join(',', map { $id_of{$_} } @keys) . '}', 'the ids in input order, the odd shard\'s too');

# ---- the C path called directly: the keys' shards (the hash is the
# C path's own, from pgque._key_hash's body), the mapping's role
$e = '';
feed(qq{select pgque._send_batch_keyed('orders', 'pick', } . payloads('pick') . qq{, $keys_sql);});
is(err_of(), 'none', '_send_batch_keyed called directly sends');
is(ledger_shape('pick'), $expect_real, 'each event on its key\'s shard: the caller chooses no hash');
my $on_odd = scalar(grep { $shard_of{$_} == 2 } @keys);
is($shard->safe_psql('odd', q{select string_agg(who || ':' || n, ',') from pgque.calls where t = 'pick'}),
   "shard_w:$on_odd", 'the odd shard\'s part run as the role of pu\'s mapping (PUBLIC\'s)');
$proxy->safe_psql('proxy', qq{select pgque._send_batch_keyed('orders', 'pick_r', array['x'], array['k$_'])},
                  extra_params => [ '-U', 'pr' ]) for grep { $shard_of{"k$_"} == 2 } 1 .. 8;
like($shard->safe_psql('odd', q{select string_agg(distinct who, ',') from pgque.calls where t = 'pick_r'}),
   qr/^shard_r$/, 'another user reaches it as its own mapping\'s role');

# ---- answers of the wrong shape
my %why = (few => 'fewer ids than events', many => 'more ids than events', two => '2 rows of 1 columns',
           none => '0 rows of 1 columns', null => 'NULL', nullid => 'an array with NULL ids',
           twod => 'an array of another shape', empty => 'no ids');
for my $t (sort keys %why)
{
    $e = '';
    feed(batch($t));
    like(err_of(), qr/^08P01 shard 2 answered its part of a batch \($on_odd events\) with \Q$why{$t}\E$/,
         "answer '$t': 08P01 saying what was wrong");
    like(detail_of(), qr/^The parts for shards \{[012],[012],[012]\} were committed, this shard's included\.$/,
         '... naming every part committed');
    is(ledger_shape($t), $expect_real, '... which the real shards hold, each event once');
}

# ---- answers too large: no crash, and the connection that read one closed
# (libpq keeps its input buffer at the largest message read)
sub odd_conn
{
    return $shard->safe_psql('postgres', q{
        select string_agg(pid::text, ',') from pg_stat_activity where datname = 'odd' and usename = 'shard_w'});
}
$e = '';
feed(batch('ok2'));
my $conn0 = odd_conn();
feed(batch('ok3'));
is(odd_conn(), $conn0, 'a usable answer keeps the connection (the control)');
my $rss0 = rss_kb();
for my $t ('rows', 'big')
{
    $e = '';
    feed(batch($t));
    diag("figure: RSS of the proxy backend after answer '$t': " . sprintf('%+d', rss_kb() - $rss0) . ' kB');
    like(err_of(), qr/^08P01 shard 2 answered its part/, "answer '$t': refused (08P01)");
    $e = '';
    like(feed(batch("after-$t")), qr/^\{\d+(,\d+){7}\}$/, '... the next call sends');
    my $conn = odd_conn();
    isnt($conn, $conn0, '... on a new connection: the one that read the answer was closed');
    $conn0 = $conn;
}

# ---- a flood of notices
$e = '';
like(feed(batch('notices')), qr/^\{\d+(,\d+){7}\}$/, '20,000 notices during the call: the ids come back');
# psql writes them to its stderr, read here as it comes
my $relayed = 0;
PgqueNode::poll_until(sub { $h->pump_nb; $relayed = () = $e =~ /NOTICE:  00000: shard 2: n\d+/g;
                            return $relayed >= 20000; });
is($relayed, 20000, 'every notice relayed to the caller, naming the shard');
is(ledger_shape('notices'), $expect_real, 'the ledger right');

# ---- a shard that never answers: statement_timeout
$e = '';
feed(q{set statement_timeout = '2s';} . batch('sleep') . q{reset statement_timeout;});
like(err_of(), qr/^57014 canceling statement due to statement timeout/, 'a shard that never answers: 57014');
like(detail_of(), qr/^The parts of the batch for shards \{[012,]+\} were in flight: they may have committed there/,
     'saying which parts were in flight');
is(ledger_shape('sleep'), $expect_real, 'the real shards\' parts in flight did commit (so "may have")');
$e = '';
my $after = feed(batch('after-sleep'));
chomp $after;
is(err_of(), 'none', 'the next call of the session sends');
%id_of = map { my ($k, $w) = split /=/; ($k => $w =~ /:(\d+)$/ ? $1 : 7) } split /,/, ledger('after-sleep');
is($after, '{' . join(',', map { $id_of{$_} } @keys) . '}', 'its ids its own events\', no answer left pending');
$shard->safe_psql('postgres', q{select pg_terminate_backend(pid) from pg_stat_activity
                                 where datname = 'odd' and wait_event = 'PgSleep'});

# ---- the same, ended by pg_cancel_backend
$e = '';
feed_nowait(batch('sleep2'));
ok($shard->poll_value('postgres', q{select count(*) from pg_stat_activity where datname = 'odd'
                                      and wait_event = 'PgSleep'}), 'a call held on the odd shard');
ok($proxy->poll_value('postgres', qq{select count(*) from pg_stat_activity where pid = $pid
                                      and wait_event_type = 'Extension'}), 'the proxy backend waits on it');
$proxy->safe_psql('postgres', "select pg_cancel_backend($pid)");
wait_done();
like(err_of(), qr/^57014 canceling statement due to user request/, 'pg_cancel_backend ends it (57014)');
$e = '';
like(feed(batch('after-cancel')), qr/^\{\d+(,\d+){7}\}$/, 'the next call sends');
is(ledger_shape('after-cancel'), $expect_real, 'its events where they belong');
$shard->safe_psql('postgres', q{select pg_terminate_backend(pid) from pg_stat_activity
                                 where datname = 'odd' and wait_event = 'PgSleep'});

# ---- the shard's backend dies mid-call; its own error
$e = '';
feed(batch('fatal'));
like(err_of(), qr/^08006 shards \{2\} are unavailable: their parts of the batch were not sent \(the parts for shards \{[01],[01]\} were committed\)/,
     'the odd shard\'s backend killed mid-call: 08006 naming it and the committed parts');
is(ledger_shape('fatal'), $expect_real, 'which the real shards hold');
$e = '';
like(feed(batch('after-fatal')), qr/^\{\d+(,\d+){7}\}$/, 'the next call reconnects and sends');
$e = '';
feed(batch('err'));
like(err_of(), qr/^22023 odd refuses \(the batch parts for shards \{[01],[01]\} were committed\)/,
     'the shard\'s own error relayed with its SQLSTATE and the parts committed');
like($e, qr/DETAIL:  det\n.*HINT:  hnt/s, 'with its detail and hint');
$e = '';
like(feed(batch('after-err')), qr/^\{\d+(,\d+){7}\}$/, 'the next call sends');

$in .= "\\q\n";
$h->finish;
is($proxy->safe_psql('postgres', q{select count(*) from pg_stat_activity where backend_type = 'client backend'
                                    and datname = 'proxy'}), '0', 'the session ended');
$proxy->stop;
$shard->stop;
done_testing();
