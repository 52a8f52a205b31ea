# The second reader's attacks on the keyed send's C path (pgque._send_keyed
# in pgque_proxy.so, ADR 0115; ADR 0119), beside TAP 138 and 139:
#  - routing: a key's events sent one by one (the C path) and in a batch
#    (PL/Proxy's RUN ON) land on one shard, pgque.shard_of's;
#  - a role renamed while its connection is cached: the next call reaches
#    the shard as the new name, as PL/Proxy's does (it keys its users by
#    name), not on the old name's connection (ADR 0119: a fix);
#  - USAGE on the server held through a role and that membership revoked
#    while the connection is cached: the next call is refused (42501), not
#    sent on the cached connection (ADR 0119: a fix);
#  - SET SESSION AUTHORIZATION and back: each user its own mapping;
#  - a statement_timeout that fires mid-call and is caught by an exception
#    block of the caller's PL/pgSQL: the next call of the same transaction
#    returns its own id, never the pending result of the first;
#  - a shard that answers with a result of another shape (two rows, none,
#    not a number, NULL, an overflow, a notice, an error of class 08):
#    clear errors, no crash, and the connection still sends after each;
#  - the prepared statement gone on the shard (DEALLOCATE there, as a
#    pooler between would lose it): the next call prepares again on a new
#    connection and succeeds, not 26000 at every later call (ADR 0119);
#  - a shard's notice and warning: relayed to the caller as PL/Proxy
#    does, not printed raw to the proxy's stderr (ADR 0119: a fix);
#  - sslkey, sslpassword, service, an upper-case PASSFILE and a URI as
#    dbname put into a shard's string past set_shards: refused at connect,
#    or a database name (expand_dbname = 0), nothing connects as another;
#  - connection strings injected through a key and a queue name: data;
#  - connections never closed: none left on the shards after sessions end,
#    none kept by a session for a server dropped and made again;
#  - a user's mapping dropped while its connection is cached: the next
#    call goes by the PUBLIC mapping, never on the cached connection;
#  - memory per call flat over thousands of sends and of shard errors.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;

my $shard = PgqueNode->new_preloaded('a5_shard', conf => qq{
pgque_bgw.enabled = off
log_connections = on
});
$shard->safe_psql('postgres', q{
    create database s0;
    create database s1;
    create database odd;
    create role shard_w login;
    create role ren_a login;
    create role ren_b login;
});
for my $db ('s0', 's1')
{
    $shard->safe_psql($db, q{
        create extension pgque_bgw;
        grant pgque_writer to shard_w, ren_a;
        select pgque.create_queue('orders');
    });
}
my $proxy = PgqueNode->new('a5_proxy');
$proxy->init;
$proxy->start;
my $base = "host=" . $shard->host . " port=" . $shard->port;
$proxy->safe_psql('postgres', qq{
    create role ren_a login;            -- a PUBLIC mapping without user: its own name
    create role grp_usage nologin;      -- USAGE on the server through this role
    create role mem_u login;
    grant grp_usage to mem_u;
    create role direct_u login;         -- USAGE of its own
    create database proxy;
    create database proxy_odd;
});
# the shard set of database proxy (dropped first with $drop): PUBLIC's
# mapping without user, and each of @users mapped to shard_w
sub shard_set
{
    my ($drop, @users) = @_;
    $proxy->safe_psql('proxy', join("\n", 'set client_min_messages = warning;',
        $drop ? 'drop server pgque_shards cascade;' : (),
        "select pgque.set_shards(array['$base dbname=s0', '$base dbname=s1']);",
        'create user mapping for public server pgque_shards;',
        map { "create user mapping for $_ server pgque_shards options (user 'shard_w');" } @users));
}
$proxy->safe_psql('proxy', q{
    set client_min_messages = warning;
    create extension pgque_proxy cascade;
});
shard_set(0, 'mem_u', 'direct_u');
$proxy->safe_psql('proxy', q{
    grant usage on foreign server pgque_shards to ren_a, grp_usage, direct_u;
    grant usage on schema pgque to public;
    grant select on pg_backend_memory_contexts to direct_u;
    grant execute on function pg_get_backend_memory_contexts() to direct_u;
});

sub shard_logins
{
    my ($from) = @_;
    my $log = slurp_file($shard->logfile, $from);
    my @l;
    push @l, "$1/$2" while $log =~ /connection authorized: user=(\w+) database=(s\d|odd)/g;
    return join(',', @l);
}
sub log_at { return -s $shard->logfile; }
# a session of the proxy that stays open; its errors verbose
sub session
{
    my ($db, $user) = @_;
    return $proxy->background_psql($db, on_error_stop => 0,
        extra_params => [ (defined $user ? ('-U', $user) : ()), '-v', 'VERBOSITY=verbose' ]);
}
sub q_err
{
    my ($s, $sql) = @_;
    $s->{stderr} = '';
    my $out = $s->query($sql);
    my $err = $s->{stderr};
    $s->{stderr} = '';
    return $err =~ /ERROR:  (\w{5}): ([^\n]*)/ ? "$1 $2" : "ok $out";
}

# ---- routing: the C path and PL/Proxy's RUN ON agree, key by key
$proxy->safe_psql('proxy', q{
    select pgque.send('orders', 'route', 'one-' || i, 'key' || i) from generate_series(1, 40) i;
    select pgque.send_batch('orders', 'route', array(select 'batch-' || i from generate_series(1, 40) i),
                            array(select 'key' || i from generate_series(1, 40) i));
}, extra_params => [ '-U', 'direct_u' ]);
my %where;
for my $db ('s0', 's1')
{
    for my $row (split /\n/, $shard->safe_psql($db, q{
        select ev_extra1, string_agg(ev_data, ',' order by ev_data) from pgque.event_template
         where ev_type = 'route' group by 1}))
    {
        my ($k, $d) = split /\|/, $row;
        push @{ $where{$k} }, "$db:$d";
    }
}
my $expected = $proxy->safe_psql('proxy', q{
    select string_agg('key' || i || '=s' || pgque.shard_of('key' || i), ',' order by i) from generate_series(1, 40) i});
my $got = join(',', map { my $k = "key$_"; my @w = @{ $where{$k} // [] };
    scalar(@w) == 1 && $w[0] =~ /^(s\d):batch-$_,one-$_$/ ? "$k=$1" : "$k=@w" } 1 .. 40);
is($got, $expected, 'each key\'s send (C path) and batch event (PL/Proxy) are on one shard, shard_of\'s');
isnt(scalar(grep { $where{$_}[0] =~ /^s0/ } keys %where), 40, 'and the keys spread over both shards');

# ---- a role renamed while its connection is cached
my $r = session('proxy', 'ren_a');
like(q_err($r, q{select pgque.send('orders', 't', 'ren-1', 'k1')}), qr/^ok \d+/, 'ren_a sends (PUBLIC mapping, its own name)');
$proxy->safe_psql('postgres', q{alter role ren_a rename to ren_b});
my $at = log_at();
like(q_err($r, q{select pgque.send('orders', 't', 'ren-2', 'k1')}), qr/^42501 .*permission denied/,
     'renamed to ren_b, its next call reaches the shard as ren_b, who may not send (42501)');
like(q_err($r, q{select pgque._on_send_keyed(0, 'orders', 't', 'ren-pl', 'k1')}), qr/^42501 .*permission denied/,
     'as PL/Proxy\'s call does');
like(shard_logins($at), qr/^ren_b\/s\d,ren_b\/s\d$/, 'both on new connections as ren_b');
is($shard->safe_psql('s0', q{select count(*) from pgque.event_template where ev_data = 'ren-2'})
   + $shard->safe_psql('s1', q{select count(*) from pgque.event_template where ev_data = 'ren-2'}), 0,
   'the renamed role\'s call was not sent as ren_a');
$r->quit;
$proxy->safe_psql('postgres', q{alter role ren_b rename to ren_a});

# ---- USAGE through a role, the membership revoked while the connection is cached
my $m = session('proxy', 'mem_u');
like(q_err($m, q{select pgque.send('orders', 't', 'mem-1', 'k1')}), qr/^ok \d+/, 'mem_u sends (USAGE through grp_usage)');
like(q_err($m, q{select pgque._on_send_keyed(0, 'orders', 't', 'mem-pl0', 'k1')}), qr/^ok \d+/, 'and through PL/Proxy');
$proxy->safe_psql('postgres', q{revoke grp_usage from mem_u});
like(q_err($m, q{select pgque.send('orders', 't', 'mem-2', 'k1')}),
     qr/^42501 permission denied for foreign server pgque_shards/,
     'the membership revoked: the next call is refused (42501), not sent on the cached connection');
is($shard->safe_psql('s0', q{select count(*) from pgque.event_template where ev_data = 'mem-2'})
   + $shard->safe_psql('s1', q{select count(*) from pgque.event_template where ev_data = 'mem-2'}), 0,
   'nothing of it on a shard');
# PL/Proxy's own cache (its USAGE check runs when it reloads a user): said, not asserted
note 'PL/Proxy\'s call after the revoke: ' . q_err($m, q{select pgque._on_send_keyed(0, 'orders', 't', 'mem-pl', 'k1')});
$proxy->safe_psql('postgres', q{grant grp_usage to mem_u});
like(q_err($m, q{select pgque.send('orders', 't', 'mem-3', 'k1')}), qr/^ok \d+/, 'granted again: it sends');
$m->quit;

# ---- SET SESSION AUTHORIZATION and back (a superuser's session)
my $su = session('proxy', undef);
$at = log_at();
like(q_err($su, q{set session authorization direct_u; select pgque.send('orders', 't', 'ssa', 'k1')}), qr/^ok \d+/,
     'as direct_u after SET SESSION AUTHORIZATION: direct_u\'s mapping');
like(shard_logins($at), qr/^shard_w\/s\d$/, 'reached as shard_w');
$at = log_at();
like(q_err($su, q{reset session authorization; select pgque.send('orders', 't', 'ssa2', 'k1')}), qr/^ok \d+/,
     'back to the superuser: the PUBLIC mapping (its own name)');
unlike(shard_logins($at), qr/shard_w/, 'not on direct_u\'s connection');
$su->quit;

# ---- a timeout mid-call caught by the caller's exception block
my $locker = $shard->background_psql('s0');
my $k0 = $proxy->safe_psql('proxy', q{
    select k from (select 'k' || i k from generate_series(1, 100) i) x where pgque.shard_of(k) = 0 limit 1});
# the event tables of s0 locked for 3 s: the first call waits on the shard
$locker->query_until(qr/locked/, q{
    begin;
    do $$ declare r record; begin
        for r in select i.inhrelid::regclass t from pg_inherits i
                  where i.inhparent = 'pgque.event_template'::regclass loop
            execute format('lock table %s in access exclusive mode', r.t);
        end loop; end $$;
    \echo locked
    select pg_sleep(3);
    commit;
});
my $ids = $proxy->safe_psql('proxy', qq{
    set statement_timeout = '500ms';
    do \$\$
    declare
        id2 bigint;
        caught text := 'no';
    begin
        begin
            perform pgque.send('orders', 't', 'timed-out', '$k0');
        exception when query_canceled then
            caught := 'yes';
        end;
        -- the timer has fired: the rest of the statement runs without it
        id2 := pgque.send('orders', 't', 'second', '$k0');
        raise notice 'caught=% id2=%', caught, id2;
        create temp table a5_ids as select caught, id2;
    end \$\$;
    select caught || ' ' || id2 from a5_ids;
}, extra_params => [ '-U', 'direct_u' ]);
$locker->quit;
my ($caught, $id2) = split / /, $ids;
is($caught, 'yes', 'the first call\'s timeout was caught by the caller\'s exception block');
is($shard->safe_psql('s0', "select string_agg(ev_data, ',') from pgque.event_template where ev_id = $id2"),
   'second', 'the second call of the same transaction returned its own id, not the first call\'s pending one');
my $first = $shard->poll_value('s0', q{select count(*) from pgque.event_template where ev_data = 'timed-out'}, 5);
ok($first eq '0' || $first eq '1', "the timed-out call is on the shard at most once ($first)");

# ---- a shard that answers with a result of another shape
$shard->safe_psql('odd', q{
    create schema pgque;
    create table pgque.mode (m text);
    insert into pgque.mode values ('num');
    grant usage on schema pgque to public;
    grant select on pgque.mode to public;
    create function pgque.send(text, text, text, text) returns setof text language plpgsql as $$
    declare m text := (select m from pgque.mode);
    begin
        if m = 'num' then return next '42';
        elsif m = 'two' then return next '1'; return next '2';
        elsif m = 'zero' then return;
        elsif m = 'abc' then return next 'abc';
        elsif m = 'null' then return next null;
        elsif m = 'big' then return next '99999999999999999999';
        elsif m = 'notice' then raise notice 'a notice from the shard'; return next '43';
        elsif m = 'warn' then raise warning 'a warning from the shard' using hint = 'its hint'; return next '44';
        elsif m = 'w57' then raise warning 'the shard is going away' using errcode = '57P01'; return next '45';
        elsif m = 'err08' then raise exception 'the shard''s own 08001' using errcode = '08001';
        elsif m = 'long' then return next repeat('9', 100000);
        elsif m = 'dealloc' then execute 'deallocate pgque_proxy_send'; return next '46';
        elsif m = 'pid' then return next pg_catalog.pg_backend_pid()::text;
        elsif m = 'hugeerr' then raise exception 'the shard''s long error: %', repeat('x', 2000000);
        end if;
    end $$;
});
$proxy->safe_psql('proxy_odd', qq{
    set client_min_messages = warning;
    create extension pgque_proxy cascade;
    select pgque.set_shards(array['$base dbname=odd']);
    create user mapping for public server pgque_shards;
});
my $o = session('proxy_odd', undef);
like(q_err($o, q{select pgque.send('q', 't', 'p', 'k')}), qr/^ok 42$/, 'the odd shard answers 42');
my %odd = (two => qr/^08P01 shard 0 answered a send with 2 rows of 1 columns/,
           zero => qr/^08P01 shard 0 answered a send with 0 rows/,
           abc => qr/^22P02 /, null => qr/^ok $/, big => qr/^22003 /,
           notice => qr/^ok 43$/, err08 => qr/^08001 |^\w{5} .*shard 0/, long => qr/^22003 /,
           dealloc => qr/^ok 46$/);
for my $mode (sort keys %odd)
{
    $shard->safe_psql('odd', "update pgque.mode set m = '$mode'");
    like(q_err($o, q{select pgque.send('q', 't', 'p', 'k')}), $odd{$mode}, "a shard answering '$mode': " . $odd{$mode});
    $shard->safe_psql('odd', "update pgque.mode set m = 'num'");
    like(q_err($o, q{select pgque.send('q', 't', 'p', 'k')}), qr/^ok 42$/, "and the next call gets its own answer");
}
# an unusable answer (not one int8) or a large error closes the connection
# that read it (libpq keeps its input buffer at the largest message read,
# for the session: ADR 0125 found it with the keyed batch); a usable answer
# or a small error keeps it
sub shard_pid
{
	$shard->safe_psql('odd', "update pgque.mode set m = 'pid'");
	my $r = q_err($o, q{select pgque.send('q', 't', 'p', 'k')});
	$shard->safe_psql('odd', "update pgque.mode set m = 'num'");
	return $r;
}
my $pid = shard_pid();
like($pid, qr/^ok \d+$/, 'the odd shard says its backend');
is(shard_pid(), $pid, 'a usable answer keeps the connection');
for my $mode ('abc', 'err08')
{
	$shard->safe_psql('odd', "update pgque.mode set m = '$mode'");
	q_err($o, q{select pgque.send('q', 't', 'p', 'k')});
	is(shard_pid(), $pid, "a small unusable answer or error ('$mode') keeps it");
}
for my $mode ('long', 'two', 'hugeerr')
{
	$shard->safe_psql('odd', "update pgque.mode set m = '$mode'");
	like(q_err($o, q{select pgque.send('q', 't', 'p', 'k')}), qr/^(22003|08P01|P0001) /, "a shard answering '$mode' is refused");
	my $now = shard_pid();
	isnt($now, $pid, "... and the connection that read it is replaced");
	$pid = $now;
}
# a shard's notice and warning reach the caller, as PL/Proxy relays them,
# not this server's stderr raw (ADR 0119)
my $plog = -s $proxy->logfile;
for my $mode ('notice', 'warn', 'w57')
{
    $shard->safe_psql('odd', "update pgque.mode set m = '$mode'");
    $o->{stderr} = '';
    $o->query(q{select pgque.send('q', 't', 'p', 'k')});
    if ($mode eq 'notice')
    {
        like($o->{stderr}, qr/NOTICE:  00000: shard 0: a notice from the shard/, 'a shard\'s notice reaches the caller, naming the shard');
    }
    elsif ($mode eq 'warn')
    {
        like($o->{stderr}, qr/WARNING:  01000: shard 0: a warning from the shard\n(.*\n)*HINT:  its hint/,
             'a shard\'s warning too, with its hint');
    }
    else
    {
        unlike($o->{stderr}, qr/going away/, 'a shard\'s message that its connection ends (57P) does not go to the caller');
    }
}
$shard->safe_psql('odd', "update pgque.mode set m = 'num'");
my $plogtext = slurp_file($proxy->logfile, $plog);
unlike($plogtext, qr/^NOTICE:  a notice from the shard/m, 'the notice is not printed raw to the proxy\'s stderr');
like($plogtext, qr/WARNING:  shard 0: a warning from the shard/, 'the warning is logged as the proxy\'s own (log_min_messages)');
like($plogtext, qr/LOG:  shard 0: the shard is going away/, 'it goes to the proxy\'s log');
$o->quit;
is($proxy->safe_psql('proxy', 'select 1'), '1', 'the proxy is up');

# ---- what TAP 138 does not try past set_shards: sslkey, sslpassword, service, passfile
# in another case, a URI in dbname (never expanded: expand_dbname = 0)
for my $smuggled ("sslkey=/etc/ssl/private/x.key", "sslpassword=x", "service=other", "PASSFILE=/tmp/x",
                  "dbname=postgresql://postgres@/postgres")
{
    $proxy->safe_psql('proxy_odd', qq{alter server pgque_shards options (set p0 '$base dbname=odd $smuggled')});
    my $s = session('proxy_odd', undef);
    $at = log_at();
    my $r = q_err($s, q{select pgque.send('q', 't', 'p', 'k')});
    $s->quit;
    if ($smuggled =~ /^dbname/)
    {
        like($r, qr/^08006 shard 0 is unavailable/, "a URI as dbname is a database name, not a connection string: refused by the shard");
        like(slurp_file($shard->logfile, $at), qr{database "postgresql://postgres\@/postgres" does not exist},
             'the shard was asked for a database of that name (never expanded)');
    }
    else
    {
        like($r, qr/^22023 set_shards: (connection option "\w+" is not allowed|cannot read)/, "a string with $smuggled is refused at connect (22023)");
        is(shard_logins($at), '', 'and nothing connected');
    }
}
$proxy->safe_psql('proxy_odd', qq{alter server pgque_shards options (set p0 '$base dbname=odd')});

# ---- connection strings through a key and a queue name: data
my $inj = q{k' host=/tmp user=postgres dbname=postgres options='-c role=pg_read_all_data};
my $id = $proxy->safe_psql('proxy', qq{select pgque.send('orders', 't', 'inj', \$k\$$inj\$k\$)},
                           extra_params => [ '-U', 'direct_u' ]);
my $sh = $proxy->safe_psql('proxy', qq{select pgque.shard_of(\$k\$$inj\$k\$)});
is($shard->safe_psql("s$sh", "select ev_extra1 from pgque.event_template where ev_id = $id"), $inj,
   'a key holding a connection string is stored as the key, on its shard');
my ($rc, $out, $err) = $proxy->psql('proxy', q{select pgque.send($q$orders' host=/tmp user=postgres$q$, 't', 'inj', 'k')},
                                    extra_params => [ '-U', 'direct_u' ]);
like($err, qr/orders' host=\/tmp user=postgres/, 'a queue name holding one is a queue the shard does not know');

# ---- connections never closed
$at = log_at();
for my $i (1 .. 12)
{
    $proxy->safe_psql('proxy', qq{select pgque.send('orders', 't', 's$i', 'k' || g) from generate_series(1, 4) g},
                      extra_params => [ '-U', $i % 2 ? 'direct_u' : 'mem_u' ]);
}
ok(PgqueNode::poll_until(sub {
    $shard->safe_psql('postgres', q{
        select count(*) from pg_stat_activity where datname in ('s0', 's1') and usename = 'shard_w'}) eq '0' }, 30),
   'twelve sessions, each on both shards: no connection left on the shards once they ended');
my $long = session('proxy', 'direct_u');
like(q_err($long, q{select pgque.send('orders', 't', 'long-0', 'k1')}), qr/^ok \d+/, 'a session that stays sends');
for my $i (1 .. 3)
{
    shard_set(1, 'direct_u');
    $proxy->safe_psql('proxy', q{grant usage on foreign server pgque_shards to direct_u});
    like(q_err($long, "select pgque.send('orders', 't', 'long-$i', 'k1')"), qr/^ok \d+/,
         "server dropped and made again ($i): the session sends");
}
my $per_shard = $shard->safe_psql('postgres', q{
    select string_agg(n::text, ',' order by datname) from (
        select datname, count(*) n from pg_stat_activity
         where datname in ('s0', 's1') and usename = 'shard_w' group by 1) x});
unlike($per_shard, qr/[2-9]|\d\d/, "no shard holds more than one connection of the session ($per_shard)");
# its mapping dropped while its connection is cached: PUBLIC's (no user) is
# taken, as its own name, which the shard does not know
$proxy->safe_psql('proxy', q{drop user mapping for direct_u server pgque_shards});
$at = log_at();
like(q_err($long, q{select pgque.send('orders', 't', 'unmapped', 'k1')}), qr/^08006 shard \d is unavailable/,
     'its mapping dropped: the next call goes by the PUBLIC mapping, as direct_u, whom the shard refuses');
unlike(shard_logins($at), qr/shard_w/, 'not on the cached shard_w connection');
$proxy->safe_psql('proxy', q{create user mapping for direct_u server pgque_shards options (user 'shard_w')});
like(q_err($long, q{select pgque.send('orders', 't', 'mapped-again', 'k1')}), qr/^ok \d+/, 'mapped again: it sends');
$long->quit;

# ---- memory per call flat: thousands of sends, thousands of shard errors
my $mem = session('proxy', 'direct_u');
$mem->query_safe(q{
    create temp table a5_mem (at int, ctx bigint, rss bigint);
});
my $pid = $mem->query_safe('select pg_backend_pid()');
chomp $pid;
sub rss_kb
{
    open my $f, '<', "/proc/$pid/status" or return 0;
    my ($kb) = join('', <$f>) =~ /VmRSS:\s+(\d+)/;
    return $kb // 0;
}
my $loop = q{
    do $$ begin
        for i in 1 .. %d loop
            perform pgque.send('orders', 't', 'mem', 'k' || (i %% 64));
        end loop;
        insert into a5_mem select %d, sum(total_bytes), 0 from pg_backend_memory_contexts;
    end $$;
};
$mem->query_safe(sprintf($loop, 300, 300));
my $rss1 = rss_kb();
$mem->query_safe(sprintf($loop, 3000, 3000));
my $rss2 = rss_kb();
my ($c1, $c2) = split /\n/, $mem->query_safe('select ctx from a5_mem order by at');
note "contexts after 300 sends $c1, after 3,000 more $c2; RSS $rss1 kB, then $rss2 kB";
cmp_ok($c2 - $c1, '<', 256 * 1024, 'the backend\'s memory contexts, in the transaction, stay flat over 3,000 sends');
cmp_ok($rss2 - $rss1, '<', 2048, 'and so does its RSS (libpq\'s results freed)') if $rss1;
my $errloop = q{
    do $$ begin
        for i in 1 .. %d loop
            begin
                perform pgque.send('nosuch', 't', 'mem', 'k' || (i %% 64));
            exception when others then null;
            end;
        end loop;
        insert into a5_mem select %d, sum(total_bytes), 0 from pg_backend_memory_contexts;
    end $$;
};
$mem->query_safe(sprintf($errloop, 300, 300300));
$rss1 = rss_kb();
$mem->query_safe(sprintf($errloop, 3000, 303000));
$rss2 = rss_kb();
($c1, $c2) = split /\n/, $mem->query_safe('select ctx from a5_mem where at > 300000 order by at');
note "contexts after 300 shard errors $c1, after 3,000 more $c2; RSS $rss1 kB, then $rss2 kB";
cmp_ok($c2 - $c1, '<', 256 * 1024, 'flat over 3,000 shard errors caught by the caller');
cmp_ok($rss2 - $rss1, '<', 2048, 'RSS too') if $rss1;
is($shard->safe_psql('postgres', q{
    select count(*) from pg_stat_activity where datname in ('s0', 's1') and usename = 'shard_w'}) <= 2 ? 'yes' : 'no',
   'yes', 'and the session holds at most one connection per shard after them');
$mem->quit;

done_testing();
