# The proxy's shard connections after what a hostile shard sends
# (ADR 0125, its second reading): libpq keeps its input buffer at the
# largest message it read, for as long as the C path keeps the connection
# (the session), so a connection that read a message past 1 MB is closed
# after its call, and the keyed send frees libpq's answer before it parses
# it.  Proves, with a shard whose pgque.send / send_batch answer as told:
#  - 300 keyed sends answered by a 100,000-digit number or 'abc' (refused
#    by int8 input each time): the proxy backend's memory stays flat (each
#    answer's PGresult leaked, 22 -> 53 -> 84 MB, before);
#  - a keyed batch answered by a 20 MB error: relayed, and the next batch
#    runs on a new connection (the shard's backend changes);
#  - a keyed send, and a keyed batch, whose shard raised a 20 MB NOTICE
#    before a usable answer: the next call runs on a new connection.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;

my $shard = PgqueNode->new_preloaded('bufs_shard', conf => "pgque_bgw.enabled = off\n");
$shard->safe_psql('postgres', q{create database odd;});
$shard->safe_psql('odd', q{
    create schema pgque;
    create table pgque.mode (m text);
    insert into pgque.mode values ('num');
    grant usage on schema pgque to public;
    grant select on pgque.mode to public;
    create function pgque.send(text, text, text, text) returns setof text language plpgsql as $$
    declare m text := (select m from pgque.mode);
    begin
        if m = 'long' then return next repeat('9', 100000);
        elsif m = 'abc' then return next 'abc';
        elsif m = 'hugenotice' then raise notice 'long notice: %', repeat('x', 20000000); return next '43';
        else return next '42';
        end if;
    end $$;
    create function pgque.send_batch(text, text, text[], text[]) returns bigint[] language plpgsql as $$
    declare m text := (select m from pgque.mode);
    begin
        if m = 'hugeerr' then raise exception 'long error: %', repeat('x', 20000000); end if;
        if m = 'hugenotice' then raise notice 'long notice: %', repeat('x', 20000000); end if;
        return (select array_agg(g::bigint) from generate_series(1, cardinality($3)) g);
    end $$;
});
my $proxy = PgqueNode->new('bufs_proxy');
$proxy->init;
$proxy->start;
my $base = "host=" . $shard->host . " port=" . $shard->port;
$proxy->safe_psql('postgres', q{create database proxy_odd;});
$proxy->safe_psql('proxy_odd', qq{
    set client_min_messages = warning;
    create extension pgque_proxy cascade;
    select pgque.set_shards(array['$base dbname=odd']);
    create user mapping for public server pgque_shards;
});
my $s = $proxy->background_psql('proxy_odd', on_error_stop => 0);
my $pid = $s->query_safe('select pg_backend_pid()');
chomp $pid;
sub rss_kb
{
    open my $f, '<', "/proc/$pid/status" or return 0;
    my ($kb) = join('', <$f>) =~ /VmRSS:\s+(\d+)/;
    return $kb // 0;
}
sub shard_pid
{
    return $shard->safe_psql('odd', q{select string_agg(pid::text, ',') from pg_stat_activity
                                        where datname = 'odd' and pid <> pg_backend_pid()
                                          and backend_type = 'client backend'});
}
sub mode { $shard->safe_psql('odd', "update pgque.mode set m = '$_[0]'"); }

# ---- a fresh session: the keyed send, 300 x 100,000-digit answers, then 300 x 'abc'
{
    my $f = $proxy->background_psql('proxy_odd', on_error_stop => 0);
    my $fpid = $f->query_safe('select pg_backend_pid()'); chomp $fpid;
    my $rss = sub { open my $h, '<', "/proc/$fpid/status" or return 0; my ($kb) = join('', <$h>) =~ /VmRSS:\s+(\d+)/; return $kb // 0; };
    mode('num');
    $f->query_safe(q{select pgque.send('q', 't', 'p', 'k')});
    for my $m ('long', 'abc', 'long')
    {
        mode($m);
        my $b = $rss->();
        $f->query_safe(q{do $$ begin for i in 1 .. 300 loop begin perform pgque.send('q', 't', 'p', 'k'); exception when others then null; end; end loop; end $$;});
        my $a = $rss->();
        note "fresh session, 300 x '$m': proxy RSS $b kB -> $a kB";
        cmp_ok($a - $b, '<', 8192, "RSS flat over 300 x '$m' (each answer 100 kB: a leak is 30 MB)");
    }
    mode('num');
    $f->quit;
}
# ---- 1. the keyed batch: a 20 MB error of the shard
mode('num');
is($s->query_safe(q{select pgque.send_batch('q', 't', array['a','b'], array['k1','k2'])}), '{1,2}', 'batch answered');
my $p1 = shard_pid();
my $r0 = rss_kb();
mode('hugeerr');
$s->{stderr} = '';
$s->query(q{select pgque.send_batch('q', 't', array['a','b'], array['k1','k2'])});
like($s->{stderr}, qr/long error/, 'the shard error relayed');
$s->{stderr} = '';
mode('num');
is($s->query_safe(q{select pgque.send_batch('q', 't', array['a','b'], array['k1','k2'])}), '{1,2}', 'batch answered again');
my $p2 = shard_pid();
my $r1 = rss_kb();
note "batch: shard backend before $p1, after $p2; proxy RSS $r0 kB -> $r1 kB";
isnt($p2, $p1, 'after a 20 MB error the batch connection is replaced (as the single send does)');

# ---- 2. the keyed send: a 100,000-digit answer, 300 times
mode('num');
$s->query_safe(q{select pgque.send('q', 't', 'p', 'k')});
mode('long');
my $before = rss_kb();
$s->query_safe(q{
    do $$ begin
        for i in 1 .. 300 loop
            begin
                perform pgque.send('q', 't', 'p', 'k');
            exception when others then null;
            end;
        end loop;
    end $$;
});
my $after = rss_kb();
note "single send, 300 x 100,000-digit answers: proxy RSS $before kB -> $after kB";
cmp_ok($after - $before, '<', 8192, 'RSS flat over 300 unusable answers (PGresult freed)');

# ---- 3. the keyed send: a 20 MB notice, then a usable answer
mode('num');
$s->query_safe(q{select pgque.send('q', 't', 'p', 'k')});
my $q1 = shard_pid();
my $n0 = rss_kb();
mode('hugenotice');
$s->query(q{select pgque.send('q', 't', 'p', 'k')});
$s->{stderr} = '';
mode('num');
$s->query_safe(q{select pgque.send('q', 't', 'p', 'k')});
my $q2 = shard_pid();
my $n1 = rss_kb();
note "send after a 20 MB notice: shard backend $q1 -> $q2; proxy RSS $n0 kB -> $n1 kB";
isnt($q2, $q1, 'after a 20 MB notice the connection is replaced');
is($s->query_safe(q{select pgque.send('q', 't', 'p', 'k')}), '42', '... and the next send on it answers');

# ---- 4. the keyed batch: a 20 MB notice, then a usable answer
is($s->query_safe(q{select pgque.send_batch('q', 't', array['a','b'], array['k1','k2'])}), '{1,2}', 'batch answered');
my $b1 = shard_pid();
mode('hugenotice');
# the notice reaches the caller (stderr): query, not query_safe
is($s->query(q{select pgque.send_batch('q', 't', array['a','b'], array['k1','k2'])}), '{1,2}',
   'a batch whose shard raised a 20 MB notice is answered');
$s->{stderr} = '';
mode('num');
is($s->query_safe(q{select pgque.send_batch('q', 't', array['a','b'], array['k1','k2'])}), '{1,2}', 'batch answered again');
isnt(shard_pid(), $b1, '... on a new connection');
$s->quit;
done_testing();
