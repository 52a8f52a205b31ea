# The proxy's keyed hot path (issue #30 item 6, ADR 0084): the routing
# hash, shard_of and shards() are inlined (no SET clause) and written fully
# qualified, keyed sends and batches reach the shard as one plain call, and
# a batch at S = 1 is sent as it came.  What this proves:
#  - the three helpers are inlined (EXPLAIN shows their bodies, not a call)
#    and still give the shard PL/Proxy's RUN ON uses;
#  - a session whose search_path puts a schema of an attacker's before
#    pg_catalog, holding look-alike functions and operators for every name
#    in those bodies, routes to the same shards and runs none of them;
#  - at S = 1 a keyed batch with NULL keys keeps its input order, its ids
#    come back in that order, and a shard that refuses the connection gives
#    the same 08006 error as before; at S = 2 a split batch still does;
#  - bad calls of the new remote functions are errors, not crashes.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PgqueNode->new_preloaded('proxyhot', conf => qq{
pgque_bgw.enabled = off
});
my $base = "host=" . $node->host . " port=" . $node->port;
$node->safe_psql('postgres', q{
    create database shard0;
    create database shard1;
    create database proxy1;
    create database proxy2;
    create database proxy_down;
    create role app_producer login;
    create role attacker login;
    grant create on database proxy1 to attacker;
});
for my $db ('shard0', 'shard1')
{
    $node->safe_psql($db, q{
        create extension pgque_bgw;
        grant pgque_writer to app_producer;
        select pgque.create_queue('orders');
    });
}
sub proxy_db
{
    my ($db, @shards) = @_;
    my $arr = join(', ', map { "'$base dbname=$_'" } @shards);
    $node->safe_psql($db, qq{
        set client_min_messages = warning;
        create extension pgque_proxy cascade;
        select pgque.set_shards(array[$arr]);
        create user mapping for public server pgque_shards;
        grant usage on foreign server pgque_shards to app_producer, attacker;
        grant usage on schema pgque to app_producer, attacker;
    });
}
proxy_db('proxy1', 'shard0');
proxy_db('proxy2', 'shard0', 'shard1');
# a shard that refuses connections: nothing listens on that port
$node->safe_psql('proxy_down', qq{
    set client_min_messages = warning;
    create extension pgque_proxy cascade;
    select pgque.set_shards(array['host=127.0.0.1 port=1 dbname=nowhere connect_timeout=2']);
    create user mapping for public server pgque_shards;
});
$node->safe_psql('proxy1', q{
    create schema evil authorization attacker;
    grant usage on schema evil to app_producer;
});

sub as_user
{
    my ($db, $user, $sql) = @_;
    return $node->safe_psql($db, $sql, extra_params => [ '-U', $user ]);
}
sub err_of
{
    my ($db, $user, $sql) = @_;
    my ($rc, $out, $err) = $node->psql($db, "\\set VERBOSITY verbose\n$sql",
        extra_params => [ '-U', $user ]);
    return $rc == 0 ? 'no error' : ($err =~ /ERROR:  (\w{5}): ([^\n]*)/ ? "$1 $2" : $err);
}

# ---- inlined, and still the same routing
for my $f ('pgque._key_hash(text)', 'pgque.shard_of(text, int4)', 'pgque.shards()')
{
    is($node->safe_psql('proxy2', qq{select proconfig is null from pg_proc where oid = '$f'::regprocedure}),
       't', "$f has no SET clause (so that it is inlined)");
}
my $plan = $node->safe_psql('proxy2', q{
    explain (verbose, costs off) select pgque.shard_of('tenant-' || i, 2) from generate_series(1, 3) i});
like($plan, qr/hashtextextended/, 'shard_of and _key_hash are inlined into their caller');
unlike($plan, qr/shard_of|_key_hash/, 'no call of either is left in the plan');
$plan = $node->safe_psql('proxy2', q{explain (verbose, costs off) select count(*) from pgque.shards()});
like($plan, qr/pg_foreign_server/, 'shards() is inlined (its scan of pg_foreign_server is in the plan)');
is($node->safe_psql('proxy2', q{
    select bool_and(pgque.shard_of('tenant-' || i, 2)
                    = ((hashtextextended('tenant-' || i, 1886483829) & 2147483647) % 2)::int4)
      from generate_series(1, 200) i}),
   't', 'shard_of is still the 31-bit hashtextextended with the routing seed, mod S');

# every keyed send lands on shard_of's shard
as_user('proxy2', 'app_producer', q{
    select count(pgque.send('orders', 'o', 'e' || i, 'tenant-' || i)) from generate_series(1, 40) i});
my %count;
for my $s (0, 1)
{
    $node->safe_psql("shard$s", q{select pgque.ticker('orders')});
    $count{$s} = $node->safe_psql("shard$s", q{
        select string_agg(ev_extra1, ',' order by ev_id) from pgque.event_template
         where ev_type = 'o'});
}
my $want = $node->safe_psql('proxy2', q{
    select string_agg(case when pgque.shard_of('tenant-' || i) = 0 then 'tenant-' || i end, ',' order by i)
      from generate_series(1, 40) i});
is($count{0}, $want, 'keyed sends reach the shard of their key, in order');

# ---- a search_path that puts an attacker's schema first
as_user('proxy1', 'attacker', q{
    create table evil.hits (what text);
    grant insert on evil.hits to public;
    create function evil.hashtextextended(text, bigint) returns bigint language sql
        as $$ insert into evil.hits values ('hashtextextended') returning 0::bigint $$;
    create function evil.strpos(text, text) returns int language sql
        as $$ insert into evil.hits values ('strpos') returning 1 $$;
    create function evil.substr(text, int) returns text language sql
        as $$ insert into evil.hits values ('substr') returning 'x' $$;
    create function evil.mod_hit(int4, int4) returns int4 language sql
        as $$ insert into evil.hits values ('%') returning 0 $$;
    create operator evil.% (function = evil.mod_hit, leftarg = int4, rightarg = int4);
    create function evil.and_hit(bigint, int) returns bigint language sql
        as $$ insert into evil.hits values ('&') returning 0::bigint $$;
    create operator evil.& (function = evil.and_hit, leftarg = bigint, rightarg = int);
});
my $ids = as_user('proxy1', 'app_producer', q{
    set search_path = evil, pg_catalog, public;
    select pgque.send('orders', 'x', 'p1', 'tenant-1');
    select pgque.send_batch('orders', 'x', array['a', 'b'], array['tenant-2', 'tenant-3']);
    select pgque.shard_of('tenant-4'), pgque.shard_of('tenant-4', 7), (select count(*) from pgque.shards());});
like($ids, qr/^\d+\n\{\d+,\d+\}\n0\|\d\|1$/, 'sends, batches and shard_of work with the attacker\'s schema first');
is($node->safe_psql('proxy1', q{select count(*) from evil.hits}), '0',
   'and none of the attacker\'s look-alike functions or operators ran');
is($node->safe_psql('proxy1', q{select pgque.shard_of('tenant-4', 7)}),
   (split /\|/, (split /\n/, $ids)[2])[1], 'shard_of gives the same shard with a clean path');

# the jsonb forms cast their payloads to text: a type named text in the
# attacker's schema (a domain whose check is the attacker's function) was
# what payload::text and payloads::text[] meant on this search_path, and the
# check ran as the producer (the second reader's round two; now
# payload::pg_catalog.text)
as_user('proxy1', 'attacker', q{
    create function evil.text_hit(pg_catalog.text) returns boolean language sql
        as $$ insert into evil.hits values ('text') returning true $$;
    create domain evil.text as pg_catalog.text check (evil.text_hit(value));
});
my $jids = as_user('proxy1', 'app_producer', q{
    set search_path = evil, pg_catalog, public;
    select pgque.send('orders', '{"a": 1}'::pg_catalog.jsonb);
    select pgque.send('orders', 'x', '{"a": 2}'::pg_catalog.jsonb);
    select pgque.send('orders', 'x', '{"a": 3}'::pg_catalog.jsonb, 'tenant-5');
    select pgque.send_batch('orders', array['{"b": 1}'::pg_catalog.jsonb]);
    select pgque.send_batch('orders', 'x', array['{"b": 2}'::pg_catalog.jsonb]);
    select pgque.send_batch('orders', 'x', array['{"b": 3}'::pg_catalog.jsonb], array['tenant-6']);});
like($jids, qr/^\d+\n\d+\n\d+\n\{\d+\}\n\{\d+\}\n\{\d+\}$/,
     'the jsonb sends and batches work with the attacker\'s schema first');
is($node->safe_psql('proxy1', q{select string_agg(what, ',') from evil.hits}), '',
   'and the attacker\'s type named text was not what their payloads were cast to');

# ---- S = 1: a keyed batch as it came
my $got = as_user('proxy1', 'app_producer', q{
    select pgque.send_batch('orders', 'b1', array['a', 'b', 'c', 'd'], array['k1', null, 'k2', null])});
my @ids = ($got =~ /(\d+)/g);
is(scalar(@ids), 4, 'a keyed batch with NULL keys at S = 1 gives one id per event');
is(join(',', @ids), join(',', sort { $a <=> $b } @ids), 'in input order');
$node->safe_psql('shard0', q{select pgque.ticker('orders')});
is($node->safe_psql('shard0', q{
    select string_agg(ev_data || ':' || coalesce(ev_extra1, '-'), ',' order by ev_id)
      from pgque.event_template where ev_type = 'b1'}),
   'a:k1,b:-,c:k2,d:-', 'the shard holds the events in input order, keys as sent');
is($node->safe_psql('shard0', q{
    select string_agg(ev_id::text, ',' order by ev_id) from pgque.event_template where ev_type = 'b1'}),
   join(',', @ids), 'with the ids the proxy returned');

# a refused shard: the same error as the split path gives
like(err_of('proxy_down', 'postgres', q{
    select pgque.send_batch('orders', 't', array['a', 'b'], array['k1', 'k2'])}),
     qr/^08006 shards \{0\} are unavailable: their parts of the batch were not sent$/,
     'a keyed batch to a shard that refuses the connection: 08006 naming it');
like(err_of('proxy_down', 'postgres', q{select pgque.send('orders', 't', 'a', 'k1')}),
     qr/^08006 shard 0 is unavailable$/, 'a keyed send to it: 08006 naming the shard');

# ---- S = 2: a split batch keeps its input order
$got = as_user('proxy2', 'app_producer', q{
    select pgque.send_batch('orders', 'b2', array(select 'e' || i from generate_series(1, 20) i),
                            array(select 'tenant-' || i from generate_series(1, 20) i))});
@ids = ($got =~ /(\d+)/g);
is(scalar(@ids), 20, 'a split batch at S = 2 gives one id per event');
my %by_shard;
for my $s (0, 1)
{
    $node->safe_psql("shard$s", q{select pgque.ticker('orders')});
    $by_shard{$s} = $node->safe_psql("shard$s", q{
        select string_agg(ev_data || '=' || ev_id, ',' order by ev_id)
          from pgque.event_template where ev_type = 'b2'});
}
my $want_order = $node->safe_psql('proxy2', q{
    select string_agg(pgque.shard_of('tenant-' || i)::text, ',' order by i) from generate_series(1, 20) i});
my @shard_of = split /,/, $want_order;
my @expect;
for my $i (1 .. 20)
{
    push @expect, "e$i=" . $ids[$i - 1];
}
my @on0 = grep { my ($n) = /^e(\d+)=/; $shard_of[$n - 1] == 0 } @expect;
my @on1 = grep { my ($n) = /^e(\d+)=/; $shard_of[$n - 1] == 1 } @expect;
is($by_shard{0}, join(',', @on0), 'shard 0 holds its part in input order, with the ids returned');
is($by_shard{1}, join(',', @on1), 'shard 1 too');

# ---- bad calls of the remote functions
like(err_of('proxy2', 'app_producer', q{select pgque._on_send_keyed(null, 'orders', 't', 'p', 'k')}),
     qr/^\w{5} /, '_on_send_keyed with a NULL shard is an error');
like(err_of('proxy2', 'app_producer', q{select pgque._on_send_keyed(-7, 'orders', 't', 'p', 'k')}),
     qr/^(no error|\w{5} )/, '_on_send_keyed with a negative shard answers');
like(err_of('proxy2', 'app_producer', q{select pgque._on_send_batch_keyed(0, 'orders', 't', array['a'], array['k1', 'k2'])}),
     qr/^2202E .*partition_keys has 2 elements but payloads has 1/, '_on_send_batch_keyed with arrays of two lengths: the shard\'s 2202E');
like(err_of('proxy2', 'app_producer', q{select pgque._on_send_keyed(0, 'nosuch', 't', 'p', 'k')}),
     qr/^\w{5} .*nosuch/, 'an unknown queue: the shard\'s error, naming it');
is($node->safe_psql('proxy2', q{select 1}), '1', 'and the proxy is still up');
ok($node->safe_psql('postgres', q{select count(*) from pg_stat_activity}) > 0, 'the server too');

done_testing();
