# A batch's ev_txid entries written as posting tuples into the rightmost
# leaf (src/evpost.c, ADR 0137), under load and faults, with a ledger:
#   - four producers sending batches of 2 to 1,200 events (a chunk of 1,000
#     and the rest for the largest), single events, batches in a savepoint
#     rolled back, batches of transactions rolled back, and ticks, all at
#     once; a transaction open across ticks sending three batches under one
#     key; a prepared transaction's batch committed at the end;
#   - the primary stopped immediately (a crash) while they send, and
#     restarted: recovery replays the posting tuples' WAL;
#   - wal_consistency_checking = btree: every btree record's replay, on the
#     standby and in the primary's recovery, is compared with the page the
#     primary wrote (a mismatch stops the server);
#   - a streaming standby, its indexes checked after it caught up.
# At the end: every event the ledger says was sent (committed with it) is
# received and acked once, nothing that rolled back; every index of the
# queue's tables passes amcheck with its heap on the primary
# (bt_index_parent_check, heapallindexed) and on the standby (bt_index_check);
# and posting tuples were written (the path was taken, not its fallback).
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;

my $node = PgqueNode->new_preloaded('primary', init => { allows_streaming => 1 }, conf => q{
pgque_bgw.enabled = off
max_prepared_transactions = 4
fsync = on
restart_after_crash = on
autovacuum = off
wal_consistency_checking = 'btree'
max_connections = 40
});
$node->safe_psql('postgres', q{
    create extension pgque_bgw;
    create extension amcheck;
    create extension pageinspect;
    select pgque.create_queue('ep');
    select pgque.subscribe('ep', 'c');
});
$node->make_ledger('ep');

# the standby keeps its WAL through a slot (consistency checking writes a
# full page image with every btree record)
$node->safe_psql('postgres', q{select pg_create_physical_replication_slot('sb')});
$node->backup('bk');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($node, 'bk', has_streaming => 1);
$standby->append_conf('postgresql.conf', "primary_slot_name = 'sb'");
$standby->start;

my %scripts = (
    'batch@6' => q{
\set n random(2, 1200)
insert into sent select unnest(pgque.send_batch('ep', 't', array_fill('b'::text, array[:n])));
},
    'one@2' => q{
insert into sent select pgque.send('ep', 't', 'one');
},
    'savepoint@2' => q{
begin;
insert into sent select unnest(pgque.send_batch('ep', 't', array_fill('s1'::text, array[40])));
savepoint a;
insert into sent select unnest(pgque.send_batch('ep', 't', array_fill('gone'::text, array[60])));
rollback to savepoint a;
insert into sent select unnest(pgque.send_batch('ep', 't', array_fill('s2'::text, array[30])));
commit;
},
    'aborted@1' => q{
begin;
insert into sent select unnest(pgque.send_batch('ep', 't', array_fill('gone'::text, array[80])));
rollback;
},
    'tick@1' => q{
select pgque.ticker('ep');
},
);
my @files;
for my $name (sort keys %scripts)
{
    my ($base, $weight) = split /@/, $name;
    my $f = $node->basedir . "/$base.sql";
    PostgreSQL::Test::Utils::append_to_file($f, $scripts{$name});
    push @files, '-f', "$f\@$weight";
}

# pgbench in the background for SECS seconds, at 25 transactions a second
# (about 7,000 events a second); -> the harness
sub producers
{
    my ($secs) = @_;
    my ($out, $err) = ('', '');
    my $h = IPC::Run::start(
        [ 'pgbench', '-n', '-c', '4', '-j', '2', '-R', '25', '-T', $secs, @files, '-h', $node->host, '-p', $node->port,
          'postgres' ],
        '>', \$out, '2>', \$err);
    return ($h, \$out, \$err);
}

# a transaction open across ticks sending three batches under one key, and
# a prepared one, beside the producers
my $long = $node->background_psql('postgres', on_error_stop => 1);
$long->query_safe(q{begin});
$long->query_safe(q{insert into sent select unnest(pgque.send_batch('ep', 't', array_fill('long'::text, array[300])))});
my ($h, $out, $err) = producers(6);
sleep 2;
$long->query_safe(q{insert into sent select unnest(pgque.send_batch('ep', 't', array_fill('long'::text, array[500])))});
sleep 2;
$long->query_safe(q{insert into sent select unnest(pgque.send_batch('ep', 't', array_fill('long'::text, array[700])))});
$long->query_safe(q{commit});
$long->quit;
$h->finish;
like($$out, qr/number of failed transactions: 0 /, 'the producers ran without error')
  or diag($$out . $$err);
$node->safe_psql('postgres', q{
    begin;
    insert into sent select unnest(pgque.send_batch('ep', 't', array_fill('prep'::text, array[250])));
    prepare transaction 'ep_prep';
});

# the crash: an immediate stop while the producers send
($h, $out, $err) = producers(8);
sleep 3;
$node->stop('immediate');
$h->finish;
$node->start;
ok($node->poll_query_until('postgres', 'select true'), 'the primary is back after its crash');
$node->safe_psql('postgres', q{commit prepared 'ep_prep'});

# one more round after recovery, then the drain
($h, $out, $err) = producers(3);
$h->finish;
like($$out, qr/number of failed transactions: 0 /, 'the producers ran without error after recovery')
  or diag($$out . $$err);
$node->safe_psql('postgres', q{select pgque.ticker('ep')});
$node->safe_psql('postgres', q{select drain()});

my $sent = $node->check_ledger('posting tuples under load and a crash');
cmp_ok($sent, '>', 20000, "the producers sent $sent events");

my $indexes = q{
    select i.indexrelid from pg_index i join pg_class t on t.oid = i.indrelid
     where t.relnamespace = 'pgque'::regnamespace and t.relname like 'event\_' ||
           (select queue_id from pgque.queue where queue_name = 'ep') || '\_%'};
is($node->safe_psql('postgres', qq{
       select count(*) filter (where bt_index_parent_check(indexrelid, true, true) is null) from ($indexes) i}),
   '0', 'every index of the queue is sound and holds every row (primary)');
cmp_ok($node->safe_psql('postgres', qq{
       select count(*) from ($indexes) i,
              generate_series(1, pg_relation_size(indexrelid) / 8192 - 1) b,
              bt_page_items(indexrelid::regclass::text, b::int) p
        where p.tids is not null}),
       '>', 100, 'the batches wrote posting tuples');

$node->wait_for_catchup($standby);
is($standby->safe_psql('postgres', qq{
       select count(*) filter (where bt_index_check(indexrelid, true) is null) from ($indexes) i}),
   '0', 'every index of the queue is sound and holds every row (standby, replayed with consistency checks)');
is($standby->safe_psql('postgres', q{select count(*) from sent}), $sent, 'the standby has the ledger');

$standby->stop('fast');
$node->stop('fast');
done_testing();
