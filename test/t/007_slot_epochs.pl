# Slot lease epochs only grow: across a server restart and across a standby
# promotion.  No lease survives a restart as live (the old owner gets PQ001
# and claims again); DROP EXTENSION leaves nothing in the lease table.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;

my $primary = PgqueNode->new_preloaded('epochs', init => { allows_streaming => 1 });
$primary->safe_psql('postgres', q{
    create extension pgque_bgw;
    select pgque.create_queue('eq');
    select pgque.subscribe_slot('eq', 'c', k, 4) from generate_series(0, 3) k;
});

my $e1 = $primary->safe_psql('postgres', q{select pgque.claim_slot('eq', 'c', 0, 'w1')});
# many takeovers, so the sequence's cached-ahead values matter
$primary->safe_psql('postgres', q{
    select pgque.release_slot('eq', 'c', 1, 'x'), pgque.claim_slot('eq', 'c', 1, 'x' || i),
           pgque.release_slot('eq', 'c', 1, 'x' || i)
      from generate_series(1, 40) i});
my $e_before = $primary->safe_psql('postgres', q{select max(epoch) from pgque.partition_slot_status});
cmp_ok($e_before, '>', $e1, "epochs grow with takeovers ($e1 -> $e_before)");

$primary->restart;
is($primary->safe_psql('postgres', q{select count(*) from pgque.partition_slot_status where lease_owner is not null}),
   '0', 'no lease survives a restart as live');
my ($ret, $out, $err) = $primary->psql('postgres',
    q{select * from pgque.receive_partitioned('eq', 'c', 0, 4, 'w1')},
    extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($err, qr/PQ001/, 'the old owner gets SQLSTATE PQ001 (lease lost) ...');
my $e2 = $primary->safe_psql('postgres', q{select pgque.claim_slot('eq', 'c', 0, 'w1')});
cmp_ok($e2, '>', $e_before, "... and claims again with a larger epoch ($e2 > $e_before)");

# failover: the promoted standby's epochs are larger still
$primary->backup('bk');
my $standby = PgqueNode->new('epochs_standby');
$standby->init_from_backup($primary, 'bk', has_streaming => 1);
$standby->start;
my $e3 = $primary->safe_psql('postgres', q{
    select pgque.release_slot('eq', 'c', 2, 'y'), pgque.claim_slot('eq', 'c', 2, 'y1')});
$e3 = $primary->safe_psql('postgres', q{select epoch from pgque.partition_slot_status where slot = 2});
$primary->wait_for_catchup($standby);
$primary->stop('immediate');
$standby->promote;
$standby->poll_query_until('postgres', 'select not pg_is_in_recovery()');
my $e4 = $standby->safe_psql('postgres', q{select pgque.claim_slot('eq', 'c', 2, 'y2')});
cmp_ok($e4, '>', $e3, "after promotion a claim gets a larger epoch ($e4 > $e3)");

# DROP EXTENSION leaves nothing in the lease table
$standby->safe_psql('postgres', 'create database other');
$standby->safe_psql('other', q{
    create extension pgque_bgw;
    select pgque.create_queue('o');
    select pgque.subscribe_slot('o', 'c', 0, 1);
    select pgque.claim_slot('o', 'c', 0, 'z');
});
my $all = $standby->safe_psql('other', q{select pgque._slot_lease_count_all()});
cmp_ok($all, '>=', 2, "both databases have leases ($all entries)");
$standby->safe_psql('postgres', 'drop extension pgque_bgw cascade');
is($standby->safe_psql('other', q{select pgque._slot_lease_count_all()}), '1',
   'after DROP EXTENSION in one database only the other database\'s lease is left');
$standby->safe_psql('other', 'drop extension pgque_bgw cascade');
$standby->install('postgres');
is($standby->safe_psql('postgres', q{select pgque._slot_lease_count_all()}), '0',
   'and none after it is dropped there too');
$standby->stop('fast');
done_testing();
