# Scale-out on PL/Proxy (docs/scale-out.md): three shard nodes with
# pgque_bgw and a proxy node with pgque_proxy.  30,000 keyed events over
# 500 keys go through the proxy while slot workers (examples/partition_worker.sql,
# N = 4 slots per shard) consume on every shard.  Midway one shard is
# stopped with -m immediate: the producer's sends for its keys fail with
# the error naming it, the other shards go on, and after its restart the
# held-back events are resent.  In the end: nothing lost, nothing twice,
# every key on exactly one shard and in send order, slots balanced.
# Everything runs as the roles of docs/scale-out.md, none a superuser: the
# admin app_admin (pgque_admin on the shards) creates queues through the
# proxy, the consumer app_consumer (pgque_reader) subscribes through the
# proxy and serves its slots on the shards, the producer app_producer
# (pgque_writer) sends through the proxy; each proxy user has a user
# mapping to its own shard role, and there is no PUBLIC mapping.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;

my $N = 4;          # slots per shard
my $KEYS = 500;
my $BATCHES = 300;  # of 100 events
my $worker_sql = slurp_file("$ENV{PGQUE_SRC}/../examples/partition_worker.sql");

my @shards;
for my $s (0 .. 2)
{
    my $node = PgqueNode->new_preloaded("shard$s", conf => qq{
pgque_bgw.launcher_naptime = '1s'
});
    # docs/scale-out.md, step 1: the shard roles
    $node->safe_psql('postgres', q{
        create extension pgque_bgw;
        create role app_admin login in role pgque_admin;
        create role app_producer login in role pgque_writer;
        create role app_consumer login in role pgque_reader;
        create schema app_consumer authorization app_consumer;
    });
    # the consumer's own code on the shard, in its own schema (first on its
    # default search_path "$user", public)
    $node->safe_psql('postgres', $worker_sql, extra_params => [ '-U', 'app_consumer' ]);
    push @shards, $node;
}

my $proxy = PgqueNode->new('proxy');
$proxy->init;
$proxy->start;
my $conninfos = join(', ', map {
    "'host=" . $_->host . " port=" . $_->port . " dbname=postgres'" } @shards);
# docs/scale-out.md, step 3, as written there: each proxy user reaches the
# shards as its own shard role (trust here: no password in the mapping)
$proxy->safe_psql('postgres', qq{
    create extension pgque_proxy cascade;
    select pgque.set_shards(array[$conninfos]);
    create role app_admin login;
    create role app_producer login;
    create role app_consumer login;
    create user mapping for app_admin server pgque_shards options (user 'app_admin');
    create user mapping for app_producer server pgque_shards options (user 'app_producer');
    create user mapping for app_consumer server pgque_shards options (user 'app_consumer');
    grant usage on foreign server pgque_shards to app_admin, app_producer, app_consumer;
    grant usage on schema pgque to app_admin, app_producer, app_consumer;
});
is($proxy->safe_psql('postgres', q{select count(*) from pg_user_mappings where srvname = 'pgque_shards'
                                     and (usename = 'public' or usename in (select rolname from pg_roles where rolsuper))}),
   '0', 'no PUBLIC or superuser mapping: every call below runs as a non-superuser role');

# psql_as(role, sql[, db]) on the proxy: (rc, out, err); sql_as dies on an error
sub psql_as
{
    my ($role, $sql) = @_;
    return $proxy->psql('postgres', $sql, extra_params => [ '-U', $role ]);
}
sub sql_as
{
    my ($role, $sql) = @_;
    return $proxy->safe_psql('postgres', $sql, extra_params => [ '-U', $role ]);
}

# bad input: clear errors with their SQLSTATE, the shards' own errors as
# the shards raise them
# err_of(role, sql): "SQLSTATE message" of the first error, or 'no error'
sub err_of
{
    my ($role, $sql) = @_;
    my ($rc, $out, $err) = psql_as($role, "\\set VERBOSITY verbose\n$sql");
    return $rc == 0 ? 'no error' : ($err =~ /ERROR:  (\w{5}): ([^\n]*)/ ? "$1 $2" : $err);
}
like(err_of('postgres', q{select pgque.set_shards(null)}), qr/^22023 set_shards needs/, 'set_shards(NULL) refused');
like(err_of('postgres', q{select pgque.set_shards(array['dbname=a', 'dbname=a', 'dbname=b'])}),
     qr/^22023 set_shards: two shards have the same/, 'duplicate shards refused');
like(err_of('postgres', q{select pgque.set_shards(array['dbname=a', 'dbname=b'])}),
     qr/^55000 the shard set has 3 shards; changing it to 2/, 'changing the shard count refused');
is(err_of('app_producer', q{select pgque.send('nope', 'x', 'y', 'k1')}), '42704 queue not found: nope',
   'a shard\'s error comes back as the shard raised it');
like(err_of('app_admin', q{select * from pgque.create_queue(repeat('q', 80))}), qr/^42622 queue name too long: 80 bytes \(max 57\)/,
     'create_queue: the shard\'s name check');
is(sql_as('app_producer', q{select pgque.shard_of(null) is null}), 't', 'a NULL key has no shard');

# admin through the proxy: on every shard, one row each
is(sql_as('app_admin', q{select string_agg(shard || '=' || result, ',' order by shard)
                            from pgque.create_queue('orders')}),
   '0=1,1=1,2=1', 'create_queue runs on every shard');
# the consumer subscribes through the proxy as itself: its slots on the
# shards are its own (a consumer belongs to the role that subscribed it)
is(sql_as('app_consumer', q{select count(*) from pgque.subscribe_partitioned('orders', 'indexer', 4)}),
   3 * $N, 'subscribe_partitioned: 4 slots on each of 3 shards');
# a second partitioned consumer, served at the end by the example script
sql_as('app_consumer', q{select pgque.subscribe_partitioned('orders', 'replay', 4)});
for my $node (@shards)
{
    is($node->safe_psql('postgres', q{select string_agg(distinct owner::text, ',') from pgque.partition_consumer}),
       'app_consumer', 'the slots subscribed through the proxy are app_consumer\'s on ' . $node->name);
}
is(err_of('app_producer', q{select * from pgque.subscribe('orders', 'sneaky')}),
   '42501 permission denied for function subscribe', 'the producer may not subscribe on the shards');
# what the doc says: a consumer the admin subscribes is the admin's, and
# usable by every reader of the queue (PgQue's migration-role pattern, ADR
# 0058) until it is made private on the shard
sql_as('app_admin', q{select * from pgque.subscribe('orders', 'admins')});
my ($rc0, $out0, $err0) = $shards[0]->psql('postgres', q{select count(*) >= 0 from pgque.receive('orders', 'admins', 10)},
                                          extra_params => [ '-U', 'app_consumer' ]);
is("$rc0 $out0 $err0", '0 t ', 'a consumer subscribed through the proxy by app_admin is usable by app_consumer');
is($shards[0]->safe_psql('postgres', q{select pgque.revoke_consumer('orders', 'admins', 'pgque_reader')}), '1',
   'made private on shard 0');
($rc0, $out0, $err0) = $shards[0]->psql('postgres', q{select count(*) from pgque.receive('orders', 'admins', 10)},
                                       extra_params => [ '-U', 'app_consumer' ]);
like($err0, qr/permission denied for consumer "admins"/, 'then app_consumer is refused there');
is(sql_as('app_admin', q{select string_agg(shard || '=' || result, ',' order by shard)
                           from pgque.unsubscribe('orders', 'admins')}), '0=1,1=1,2=1', 'the admin unsubscribes it');
is(sql_as('app_admin', q{select string_agg(distinct shard::text, ',') from pgque.status()
                                    where component = 'pgque'}),
   '0,1,2', 'status() names every shard');

for my $node (@shards)
{
    ok($node->poll_query_until('postgres', q{
           select count(*) = 1 from pg_stat_activity where backend_type = 'pgque_bgw ticker'}),
       'ticker runs on ' . $node->name);
}

# one slot worker per shard serving its 4 slots, until cancelled below (its
# idle exit is long: a shard's restart on a loaded machine can take 15 s)
sub start_worker
{
    my ($s) = @_;
    my ($out, $err) = ('', '');
    # a psql of its own rather than a background_psql, whose query timer
    # (180 s) a worker outlives on a loaded machine
    return IPC::Run::start(
        [ $shards[$s]->installed_command('psql'), '-X', '-q', '-d', $shards[$s]->connstr('postgres'), '-U', 'app_consumer',
          '-c', "call partition_worker('orders', 'indexer', $N, 'shard$s-worker', '10 minutes')" ],
        '>', \$out, '2>', \$err);
}
my @workers = map { start_worker($_) } 0 .. 2;

# batch $t: events g = $t*100 + i, key of event i = (i*7 + t) mod KEYS;
# the payload carries g, so per-key order can be checked against send order
sub batch_sql
{
    my ($t) = @_;
    return qq{select pgque.send_batch('orders', 'order',
                  array(select lpad(($t * 100 + i)::text, 8, '0') from generate_series(1, 100) i),
                  array(select 'key-' || ((i * 7 + $t) % $KEYS) from generate_series(1, 100) i))};
}

my $down = 2;
my @held;           # batches whose shard-$down part must be resent
my ($refused, $clear) = (0, 0);
# while every shard is up, 20 batches per psql call (one connection to the
# shards instead of 20: a call costs 0.2 s); each its own statement
my @pending;
sub flush_batches
{
    sql_as('app_producer', join(";\n", @pending)) if @pending;
    @pending = ();
}
for my $t (1 .. $BATCHES)
{
    if ($t == 101)
    {
        $shards[$down]->stop('immediate');
        eval { $workers[$down]->finish; };
    }
    if ($t == 201)
    {
        $shards[$down]->start;
        # the held-back events of the down shard's keys, in send order,
        # before anything newer for those keys
        for my $h (@held)
        {
            push @pending, qq{
                select pgque.send_batch('orders', 'order', array_agg(p order by i), array_agg(k order by i))
                  from (select i, lpad(($h * 100 + i)::text, 8, '0') p, 'key-' || ((i * 7 + $h) % $KEYS) k
                          from generate_series(1, 100) i) e
                 where pgque.shard_of(k) = $down};
            flush_batches() if @pending == 20;
        }
        flush_batches();
        $workers[$down] = start_worker($down);
    }
    if ($t > 100 && $t <= 200)
    {
        # one call per batch: each must fail on its own
        my ($rc, $out, $err) = psql_as('app_producer', batch_sql($t));
        push @held, $t;
        $refused++ if $rc != 0;
        $clear++ if $err =~ /shards \{$down\} are unavailable: their parts of the batch were not sent \(the parts for shards \{(0,1|1,0)\} were committed\)/;
    }
    else
    {
        push @pending, batch_sql($t);
        flush_batches() if @pending == 20 || $t == 100 || $t == $BATCHES;
    }
}
is($refused, 100, 'every batch sent while the shard was down failed');
is($clear, 100, 'each with the error naming the down shard and the committed ones');
my ($rc, $out, $err) = psql_as('app_producer', q{select pgque.send('orders', 'order', 'x', 'key-0')});
is($rc, 0, 'a send to a shard that is back works');

# the extra event above was key-0's: count it in
my $total = $BATCHES * 100 + 1;
my $processed = sub {
    my $n = 0;
    $n += $_->safe_psql('postgres', 'select count(*) from app_consumer.example_processed') for @shards;
    return $n;
};
my $deadline = time + 300;
sleep 1 while $processed->() < $total && time < $deadline;
is($processed->(), $total, "all $total events processed, on the three shards");
# done: stop the workers
$_->safe_psql('postgres', q{
    select pg_cancel_backend(pid) from pg_stat_activity
     where query like 'call partition_worker(%' and pid <> pg_backend_pid()}) for @shards;
eval { $_->finish } for @workers;

# every payload exactly once over all shards; each key on one shard, the
# one the proxy routes it to, and in send order there
my (%seen, %key_shard);
my $dups = 0;
my $order_breaks = 0;
for my $s (0 .. 2)
{
    for my $row (split /\n/, $shards[$s]->safe_psql('postgres', q{
            select key || ' ' || payload || ' ' ||
                   coalesce((payload < lag(payload) over (partition by key order by seq))::text, 'false')
              from app_consumer.example_processed where payload <> 'x'}))
    {
        my ($key, $payload, $back) = split / /, $row;
        $dups++ if $seen{$payload}++;
        $order_breaks++ if $back eq 'true';
        $key_shard{$key}{$s} = 1;
    }
}
is($dups, 0, 'no event processed twice');
is(scalar(keys %seen), $BATCHES * 100, 'no event lost');
is($order_breaks, 0, 'per key, processed in send order');
is(scalar(grep { keys %{ $key_shard{$_} } != 1 } keys %key_shard), 0, 'every key on exactly one shard');
my $routing = sql_as('app_producer', qq{
    select string_agg(k || ':' || pgque.shard_of(k), ',' order by k)
      from (select 'key-' || i k from generate_series(0, $KEYS - 1) i) x});
is($routing, join(',', map { my $k = $_; "$k:" . (keys %{ $key_shard{$k} })[0] } sort keys %key_shard),
   'each on the shard the proxy routes it to');

# slot usage within each shard: every slot within 40% of the shard's mean
for my $s (0 .. 2)
{
    my $spread = $shards[$s]->safe_psql('postgres', q{
        select min(c) || ' ' || max(c) || ' ' || round(avg(c)) || ' ' || count(*)
          from (select slot, count(*) c from app_consumer.example_processed group by slot) x});
    my ($min, $max, $avg, $slots) = split / /, $spread;
    diag("figure: shard $s events per slot: min $min max $max mean $avg");
    ok($slots == $N && $min > 0.6 * $avg && $max < 1.4 * $avg, "shard $s: slot usage balanced");
}

# examples/sharded_partition_worker.sh serves the second consumer's S x N
# slots from the start: every event again, per key in order
my @conninfos = map { "host=" . $_->host . " port=" . $_->port . " dbname=postgres user=app_consumer" } @shards;
local $ENV{IDLE_EXIT} = '5 seconds';
is(system("$ENV{PGQUE_SRC}/../examples/sharded_partition_worker.sh", 'orders', 'replay', $N, 'replay',
          @conninfos), 0, 'the sharded worker example runs to idle');
my ($replayed, $replay_breaks) = (0, 0);
for my $node (@shards)
{
    my ($n, $b) = split /\|/, $node->safe_psql('postgres', q{
        select count(*), count(*) filter (where back) from (
            select payload < lag(payload) over (partition by key order by seq) back
              from app_consumer.example_processed where worker like 'replay-shard%' and payload <> 'x') x});
    $replayed += $n;
    $replay_breaks += $b;
}
is($replayed, $BATCHES * 100, 'the example processed every event once');
is($replay_breaks, 0, 'per key in send order');

# monitoring through the proxy names shards; a stopped shard shows
$shards[1]->stop('immediate');
is(sql_as('app_consumer', q{
       select string_agg((labels->>'shard') || '=' || value, ',' order by labels->>'shard') from pgque.metrics()
        where metric = 'pgque_shard_up'}),
   '0=1,1=0,2=1', 'pgque_shard_up per shard');
is(sql_as('app_consumer', q{select shard || ' ' || kind from pgque.alerts where kind = 'shard_unavailable'}),
   '1 shard_unavailable', 'alerts name the unavailable shard');
($rc, $out, $err) = psql_as('app_producer', q{
    select pgque.send('orders', 'order', 'y', k) from (select 'key-' || i k from generate_series(0, 50) i) x
     where pgque.shard_of(k) = 1 limit 1});
like($err, qr/shard 1 is unavailable/, 'a keyed send to the down shard fails naming it');
($rc, $out, $err) = psql_as('app_producer', q{
    select count(pgque.send('orders', 'keyless')) from generate_series(1, 20)});
is($out, '20', 'keyless sends go to the live shards');
$shards[1]->start;

$_->stop('fast') for @shards;
$proxy->stop('fast');
done_testing();
