# Upgrading in place (ADR 0019): a database with extension pgque_bgw 0.1.0
# and data in every state (events, open batches, retries, dead letters,
# idempotency keys, leased partition slots) runs under the new library
# before ALTER EXTENSION UPDATE (workers, send, receive), is updated, goes on
# with nothing lost, and ends equal, object by object, to a fresh install of
# the current version.  When an addition to the SQL parts is missing from
# the upgrade, the comparison names the objects.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);

my $src = $ENV{PGQUE_SRC} or die "PGQUE_SRC (the test directory) is not set";
my $catalog_sql = slurp_file("$src/upgrade/catalog.sql");

my $node = PgqueNode->new_preloaded('upgrade', conf => qq{
max_worker_processes = 20
pgque_bgw.launcher_naptime = '1s'
pgque_bgw.maint_interval = '1s'
pgque_bgw.watchdog_interval = '1s'
});

my $new = $node->safe_psql('postgres',
    q{select default_version from pg_available_extensions where name = 'pgque_bgw'});
# the release before it: the chain from 0.1.0 ends with the generated step
my ($prev) = $node->safe_psql('postgres',
    qq{select path from pg_extension_update_paths('pgque_bgw') where source = '0.1.0' and target = '$new'})
    =~ /([0-9.]+)--\Q$new\E$/;
ok(defined $prev, "an update path leads from 0.1.0 to $new")
  or BAIL_OUT("no update path from 0.1.0 to $new");
ok($node->safe_psql('postgres',
    q{select count(*) from pg_available_extension_versions where name = 'pgque_bgw' and version = '0.1.0'}) eq '1',
   "version 0.1.0 is installable beside $new");

# ADR 0113: a 0.2.0 database holds no event addressed to a consumer for the
# update to mark in pgque.addressed_event (ADR 0105): 0.2.0 has no
# insert_event_raw, and nothing that writes an event's owner is granted to
# a pgque role, PUBLIC or a LOGIN role that may create in the database (the
# internal _insert_event, whose only callers with an owner are the
# extension's copy paths, and the event tables' INSERT)
$node->safe_psql('postgres', 'create database v020');
$node->safe_psql('v020', q{
    create extension pgque_bgw version '0.2.0';
    select pgque.create_queue('q');
    create role v020_app login;
    grant create on database v020 to v020_app;
});
is($node->safe_psql('v020', q{select pg_catalog.to_regproc('pgque.insert_event_raw') is null}), 't',
   '0.2.0 has no insert_event_raw');
is($node->safe_psql('v020', q{
    select pg_catalog.string_agg(p.oid::regprocedure::text || ' ' || r.rolname, ', ')
      from pg_catalog.pg_proc p
      join pg_catalog.pg_roles r on r.rolname in ('pgque_reader', 'pgque_writer', 'pgque_admin', 'v020_app')
     where p.pronamespace = 'pgque'::regnamespace
       and exists (select from pg_catalog.unnest(p.proargnames) a where a like '%owner%')
       and (pg_catalog.has_function_privilege(r.oid, p.oid, 'execute')
            or exists (select from pg_catalog.aclexplode(p.proacl) x where x.grantee = 0))
       and p.proname <> 'get_partition_slot_info'}), '',
   '... no function that takes an owner is any role\'s to call (get_partition_slot_info only reads)');
is($node->safe_psql('v020', q{
    select count(*) from pg_catalog.pg_class c
      join pg_catalog.pg_roles r on r.rolname in ('pgque_reader', 'pgque_writer', 'pgque_admin', 'v020_app')
     where c.relnamespace = 'pgque'::regnamespace and c.relname ~ '^event_'
       and pg_catalog.has_table_privilege(r.oid, c.oid, 'insert')}), '0',
   '... nor an INSERT into an event table');
$node->safe_psql('v020', q{alter extension pgque_bgw update});
is($node->safe_psql('v020', q{
    select e.extversion = (select default_version from pg_available_extensions where name = 'pgque_bgw')
           and (select count(*) from pgque.addressed_event) = 0
      from pg_extension e where e.extname = 'pgque_bgw'}), 't',
   'updated from 0.2.0, with no addressed event to mark');
$node->safe_psql('postgres', 'drop database v020');
$node->safe_psql('postgres', 'drop role v020_app');

$node->safe_psql('postgres', 'create database up');
$node->safe_psql('up', q{
    create extension pgque_bgw version '0.1.0';
    create table public.seen (consumer text, payload text);
});
is($node->safe_psql('up', q{select extversion from pg_extension where extname = 'pgque_bgw'}),
   '0.1.0', 'the old version is installed');

# the queues, consumers and slot consumers both databases get (fresh gets
# the same calls, so both hold the same per-queue tables)
my $setup = q{
    select pgque.create_queue('jobs');
    select pgque.create_queue('dlq');
    select pgque.create_queue('parts');
    select pgque.set_queue_config('jobs', 'max_retries', '5');
    select pgque.set_queue_config('dlq', 'max_retries', '0');
    select pgque.subscribe('jobs', 'all');
    select pgque.subscribe('jobs', 'slow');
    select pgque.subscribe('jobs', 'flaky');
    select pgque.subscribe('dlq', 'c');
    select pgque.subscribe_slot('parts', 'pc', 0, 2);
    select pgque.subscribe_slot('parts', 'pc', 1, 2);
};
$node->safe_psql('up', $setup);

my $sent = 0;
sub send_jobs
{
    my ($n) = @_;
    $node->safe_psql('up', qq{select pgque.send('jobs', 'job', 'j' || (i + $sent)::text) from generate_series(1, $n) i});
    $sent += $n;
}

# drain CONSUMER of queue jobs into public.seen until it has seen WANT
sub drain
{
    my ($consumer, $want) = @_;
    my $deadline = time + 60;
    my $have;
    while (time < $deadline)
    {
        my $batch = $node->safe_psql('up', qq{
            with m as (select * from pgque.receive('jobs', '$consumer', 1000)),
                 s as (insert into public.seen select '$consumer', payload from m)
            select coalesce(max(batch_id), 0) from m});
        $node->safe_psql('up', "select pgque.ack($batch)") if $batch ne '0';
        $have = $node->safe_psql('up', "select count(*) from public.seen where consumer = '$consumer'");
        return $have if $have >= $want;
        sleep 0.2;
    }
    return $have;
}

ok($node->poll_query_until('postgres', q{
    select count(*) = 3 from pg_stat_activity where datname = 'up' and backend_type like 'pgque_bgw %'}),
   'the workers serve the 0.1.0 database');
send_jobs(100);
is(drain('all', 100), 100, 'produced and consumed on 0.1.0 with the workers ticking');

# --- restart: the new library with the 0.1.0 SQL still installed
my $log_offset = -s $node->logfile;
$node->restart;
ok($node->poll_query_until('postgres', q{
    select count(*) = 3 from pg_stat_activity where datname = 'up' and backend_type like 'pgque_bgw %'}),
   'after a restart the workers serve the 0.1.0 database again');
send_jobs(50);
is(drain('all', 150), 150, 'the ticker ticks and receive works with the 0.1.0 SQL');
my $deadline = time + 30;
my $log = '';
while (time < $deadline)
{
    $log = slurp_file($node->logfile, $log_offset);
    last if $log =~ /has extension pgque_bgw version 0\.1\.0/;
    sleep 0.2;
}
like($log, qr/WARNING:  pgque_bgw: database "up" has extension pgque_bgw version 0\.1\.0, the library is version \Q$new\E/,
     'a worker says the SQL is older than the library');
like($log, qr/HINT:  Run ALTER EXTENSION pgque_bgw UPDATE in database "up"/, 'and what to run');
is(scalar(() = $log =~ /has extension pgque_bgw version 0\.1\.0/g), 1, 'once, not by every worker or pass');
sleep 2;    # a few maintenance passes
$log = slurp_file($node->logfile, $log_offset);
unlike($log, qr/pgque_bgw maintenance: .* failed/, 'no maintenance step fails on the 0.1.0 SQL');

# --- leave state of every kind open across the update
# an open batch (received, not acked)
my $slow_batch = $node->safe_psql('up', q{
    with m as (select * from pgque.receive('jobs', 'slow', 30)),
         s as (insert into public.seen select 'slow', payload from m)
    select max(batch_id) from m});
ok($slow_batch > 0, 'consumer slow holds an open batch');
# retries: flaky nacks three events of its batch, due after the update
my $flaky_batch = $node->safe_psql('up', q{
    with m as (select * from pgque.receive('jobs', 'flaky', 10)),
         s as (insert into public.seen select 'flaky', payload from m),
         n as (select pgque.nack(x.batch_id, x::pgque.message, '15 seconds', 'try again') as r
                 from (select * from m order by msg_id limit 3) x)
    select max(m.batch_id) || ':' || (select sum(r) from n) from m});
like($flaky_batch, qr/^\d+:3$/, 'consumer flaky nacks three events');
$flaky_batch =~ s/:.*//;
$node->safe_psql('up', "select pgque.ack($flaky_batch)");
is($node->safe_psql('up', q{select count(*) from pgque.retry_queue}), '3', 'three retries are pending');
# dead letters: queue dlq takes no retry
$node->safe_psql('up', q{select pgque.send('dlq', 'd' || i) from generate_series(1, 2) i});
ok($node->poll_query_until('up', q{
    with m as (select * from pgque.receive('dlq', 'c', 10))
    select count(pgque.nack(m.batch_id, m, '0', 'poison')) = 2 from m}), 'two events nacked on queue dlq');
$node->safe_psql('up', q{select pgque.ack(max(sub_batch)) from pgque.subscription where sub_batch is not null
                          and sub_queue = (select queue_id from pgque.queue where queue_name = 'dlq')});
ok($node->poll_query_until('up', q{select count(*) = 2 from pgque.dead_letter}), 'and become dead letters');
# idempotency keys
is($node->safe_psql('up', q{select deduped from pgque.send_idem('jobs', 'job', 'idem-1', 'key-1')}), 'f',
   'an idempotency key is recorded');
$sent++;
# leased partition slots with an open slot batch
$node->safe_psql('up', q{select pgque.send('parts', 'p', 'p' || i, 'k' || i) from generate_series(1, 20) i});
my $epoch = $node->safe_psql('up', q{select pgque.claim_slot('parts', 'pc', 0, 'w0', '10 minutes')});
ok($epoch > 0, 'slot 0 is leased');
my $slot_rows = 0;
$deadline = time + 30;
while ($slot_rows == 0 && time < $deadline)
{
    $slot_rows = $node->safe_psql('up', q{select count(*) from pgque.receive_partitioned('parts', 'pc', 0, 2, 'w0', 100)});
    sleep 0.2 if $slot_rows == 0;
}
ok($slot_rows > 0, "and has an open batch ($slot_rows events)");
send_jobs(10);    # pending, unconsumed events

# --- the update
$log_offset = -s $node->logfile;
my ($ret, $out, $err) = $node->psql('up', 'alter extension pgque_bgw update');
is($ret, 0, "ALTER EXTENSION pgque_bgw UPDATE from 0.1.0 to $new succeeds")
  or diag("$err\nA function whose signature, return type, argument names or defaults changed "
        . "needs a DROP step in sql/upgrade/$prev--$new.pre.sql (ADR 0019)");
is($node->safe_psql('up', q{select extversion || ' ' || pgque.version() from pg_extension where extname = 'pgque_bgw'}),
   "$new $new", 'the new version is installed and version() says so');
$deadline = time + 30;
while (time < $deadline)
{
    $log = slurp_file($node->logfile, $log_offset);
    last if $log =~ /now has extension pgque_bgw version/;
    sleep 0.2;
}
like($log, qr/LOG:  pgque_bgw: database "up" now has extension pgque_bgw version \Q$new\E/,
     'the workers notice the update');

# --- the figures of the updated database: the slot's open batch (kept in
# pgque.slot_batch, ADR 0023) shows in get_consumer_info (issue #28 item 5)
is($node->safe_psql('up', q{
    select i.current_batch = b.sb_batch and i.next_tick = b.sb_next_tick
      from pgque.get_consumer_info('parts', 'pc#0/2') i
      join pgque.consumer c on c.co_name = 'pc#0/2'
      join pgque.subscription s on s.sub_consumer = c.co_id
      join pgque.slot_batch b on b.sb_sub = s.sub_id and b.sb_batch is not null}),
   't', "get_consumer_info shows slot 0's open batch after the update");

# --- continue: nothing lost
is($node->safe_psql('up', "select pgque.ack($slow_batch)"), '1', 'the open batch is acked after the update');
is($node->safe_psql('up', q{select deduped from pgque.send_idem('jobs', 'job', 'idem-1', 'key-1')}), 't',
   'the idempotency key still dedupes');
is($node->safe_psql('up', q{select count(*) from pgque.receive_partitioned('parts', 'pc', 0, 2, 'w0', 100)}),
   $slot_rows, 'the slot lease survived: the same open slot batch');
is($node->safe_psql('up', q{select pgque.ack_partitioned('parts', 'pc', 0, 2, 'w0')}), '1', 'and is acked');
is($node->safe_psql('up', q{select pgque.claim_slot('parts', 'pc', 0, 'w0', '10 minutes')}), $epoch,
   'renewing the lease keeps its epoch');
is($node->safe_psql('up', q{select count(*) from pgque.dlq_inspect('dlq')}), '2', 'the dead letters are there');
send_jobs(40);
is(drain('all', $sent), $sent, "consumer all saw every event sent ($sent)");
is($node->safe_psql('up', q{select count(*) - count(distinct payload) from public.seen where consumer = 'all'}), '0',
   'each once');
is(drain('slow', $sent), $sent, 'consumer slow goes on after its acked batch and sees every event');
is(drain('flaky', $sent + 3), $sent + 3, 'consumer flaky sees every event and its three retries');
is($node->safe_psql('up', q{select count(distinct payload) from public.seen where consumer = 'flaky'}), $sent,
   'the retries are the nacked events again');
is($node->safe_psql('up', q{
    select (select count(*) from pgque.subscription where sub_owner = 'pgque_reader'::regrole)
           || ' ' || (select count(*) from pgque.partition_consumer where owner = 'pgque_reader'::regrole)}),
   '6 1', '0.1.0 consumers and slot consumers belong to pgque_reader, so every reader may still use them');
# per-consumer users (ADR 0058): an update never widens who may use a consumer
is($node->safe_psql('up', q{
    select (select count(*) from pgque.subscription where sub_users <> '{}')
           || ' ' || (select count(*) from pgque.partition_consumer where users <> '{}')}),
   '0 0', 'the old consumers have no users after the update: private to their owner, as they were');

# per-queue rights (ADR 0047): the update grants every old queue to the
# documented roles, so their members keep sending, subscribing, receiving
is($node->safe_psql('up', q{
    select count(*) from pgque.queue
     where queue_senders = '{pgque_writer}'::regrole[] and queue_subscribers = '{pgque_reader}'::regrole[]}),
   $node->safe_psql('up', 'select count(*) from pgque.queue'),
   'every 0.1.0 queue grants send to pgque_writer and subscribe to pgque_reader after the update');
$node->safe_psql('up', q{create role up_writer login in role pgque_writer;
                         create role up_reader login in role pgque_reader});
is($node->safe_psql('up', q{set role up_writer; select cardinality(pgque.send_batch('jobs', array['r1', 'r2']))}),
   '2', 'a pgque_writer sends to an old queue after the update');
is($node->safe_psql('up', q{set role up_reader; select pgque.subscribe('jobs', 'up_c')}), '1',
   'a pgque_reader subscribes to it');
my ($rc_recv, $out_recv, $err_recv) = $node->psql('up', q{set role up_reader; select count(*) >= 0 from pgque.receive('jobs', 'all', 10)});
is("$rc_recv $err_recv", '0 ', 'and receives from an old consumer of pgque_reader without being refused');
$node->safe_psql('up', q{select pgque.unsubscribe('jobs', 'up_c'); drop role up_writer; drop role up_reader});

# --- every object equal to a fresh install of the current version
$node->safe_psql('postgres', 'create database fresh');
$node->safe_psql('fresh', q{create extension pgque_bgw; create table public.seen (consumer text, payload text);});
$node->safe_psql('fresh', $setup);
my %cat;
for my $db ('up', 'fresh')
{
    # maintenance makes each queue's space reserve (ADR 0025): in both
    $node->poll_query_until($db, q{
        select count(*) = (select count(*) from pgque.queue) from pg_class
         where relnamespace = 'pgque'::regnamespace and relname ~ '^space_reserve_[0-9]+$'});
    $cat{$db} = [ split /\n/, $node->safe_psql($db, $catalog_sql) ];
}
my %in_fresh = map { $_ => 1 } @{ $cat{fresh} };
my %in_up = map { $_ => 1 } @{ $cat{up} };
my @missing = grep { !$in_up{$_} } @{ $cat{fresh} };
my @extra = grep { !$in_fresh{$_} } @{ $cat{up} };
ok(@{ $cat{fresh} } > 500, 'the catalog listing covers the install (' . scalar(@{ $cat{fresh} }) . ' lines)');
is(scalar(@missing), 0, 'nothing of a fresh install is missing or different after the upgrade')
  or diag("in a fresh $new install only (add it to the upgrade: a step in sql/upgrade/$prev--$new.pre.sql, "
        . "or a part that is not replayed):\n  " . join("\n  ", @missing));
is(scalar(@extra), 0, 'the upgrade leaves nothing a fresh install does not have')
  or diag("after the upgrade only (drop or change it in sql/upgrade/$prev--$new.pre.sql):\n  "
        . join("\n  ", @extra));

# the same by pg_dump: --binary-upgrade is the mode that writes extension
# members out (ALTER EXTENSION ... ADD), normalised for OIDs and xids
sub schema_dump
{
    my ($db) = @_;
    my ($stdout, $stderr);
    IPC::Run::run([ 'pg_dump', '--schema-only', '--binary-upgrade', '--no-comments', '-d', $node->connstr($db) ],
        '>', \$stdout, '2>', \$stderr)
      or die "pg_dump $db: $stderr";
    my @lines;
    for (split /\n/, $stdout)
    {
        next if /^\\(un)?restrict /;
        next if /binary_upgrade_set_next_|binary_upgrade_set_missing_value/;
        next if /^SELECT pg_catalog\.setval\(/;
        s/relfrozenxid = '\d+', relminmxid = '\d+'/relfrozenxid = X/;
        s/WHERE oid = '\d+'/WHERE oid = X/;
        s/'\{[\d,]*\}'/'{oids}'/g if /binary_upgrade_create_empty_extension/;
        push @lines, $_;
    }
    return join("\n", @lines) . "\n";
}
my $dump_up = schema_dump('up');
my $dump_fresh = schema_dump('fresh');
my ($d1, $d2) = ("${PostgreSQL::Test::Utils::tmp_check}/dump_up.sql", "${PostgreSQL::Test::Utils::tmp_check}/dump_fresh.sql");
PostgreSQL::Test::Utils::append_to_file($d1, $dump_up);
PostgreSQL::Test::Utils::append_to_file($d2, $dump_fresh);
ok(length($dump_fresh) > 10000, 'the schema dump holds the extension\'s objects');
my ($diff_out, $diff_err) = ('', '');
IPC::Run::run([ 'diff', '-u', $d2, $d1 ], '>', \$diff_out, '2>', \$diff_err);
is($diff_out, '', 'schema dump of the upgraded database equals that of a fresh install')
  or diag("diff fresh -> upgraded:\n" . substr($diff_out, 0, 20000));

# the shutdown is still clean after all that
$node->stop('fast');
like(slurp_file($node->logfile), qr/database system is shut down/, 'the server shuts down cleanly');

done_testing();
