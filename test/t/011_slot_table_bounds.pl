# The slot lease table is bounded (issue 11): a pgque_reader used to fill it
# past pgque_bgw.max_slots inside a transaction it rolled back, the entries
# stayed, and other databases got "lease table is full".  Now: claims of an
# aborted transaction are undone, each database and each consumer has a
# cap, the last 1/16 of the table is kept for superusers (ADR 0041), and the
# table never holds more than max_slots entries.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PgqueNode->new_preloaded('slot_bounds', conf => qq{
pgque_bgw.enabled = off
pgque_bgw.max_slots = 64
pgque_bgw.max_slots_per_database = 40
pgque_bgw.max_slots_per_consumer = 16
});
$node->safe_psql('postgres', q{create database other});
for my $db ('postgres', 'other')
{
    $node->safe_psql($db, q{
        create extension pgque_bgw;
        select pgque.create_queue('q');
    });
}
$node->safe_psql('postgres', q{
    create role app_reader login in role pgque_reader;
    create role other_reader login in role pgque_reader;
});

sub as_reader
{
    my ($db, $sql) = @_;
    my $role = $db eq 'postgres' ? 'app_reader' : 'other_reader';
    my ($ret, $out, $err) = $node->psql($db, $sql, extra_params => [ '-U', $role ]);
    return ($ret, $out, $err);
}

# subscribe as the reader: a consumer belongs to the role that subscribed it
sub subscribe_as_reader
{
    my ($db, $sql) = @_;
    my ($ret, $out, $err) = as_reader($db, $sql);
    die "subscribe as reader failed: $err" if $ret != 0;
    return;
}

sub count_all
{
    return $node->safe_psql('postgres', 'select pgque._slot_lease_count_all()');
}

# --- the attack: fill in a transaction, roll back, again and again ----------
my $reader = $node->background_psql('postgres', extra_params => [ '-U', 'app_reader' ]);
for my $round (1 .. 3)
{
    $reader->query_safe('begin');
    my $got = $reader->query_safe(qq{
        select count(*) from (select pgque.subscribe_slot('q', 'r${round}_' || c, k, 8)
                                from generate_series(1, 5) c, generate_series(0, 7) k) s;
        select count(pgque.claim_slot('q', 'r${round}_' || c, k, 'w'))
          from generate_series(1, 5) c, generate_series(0, 7) k;});
    like($got, qr/^40\n40$/, "round $round: a reader claims 40 slots in a transaction");
    is(count_all(), '40', "round $round: 40 entries while it runs");
    $reader->query_safe('rollback');
}
$reader->quit;
is(count_all(), '0', 'after three rolled-back rounds the table is empty again');

# --- per-database cap ----------------------------------------------------------
subscribe_as_reader('postgres', q{
    select pgque.subscribe_slot('q', 'c' || c, k, 8) from generate_series(1, 6) c, generate_series(0, 7) k});
my ($ret, $out, $err) = as_reader('postgres', q{
    select count(pgque.claim_slot('q', 'c' || c, k, 'w')) from generate_series(1, 5) c, generate_series(0, 7) k});
is($out, '40', 'a reader claims up to the per-database cap') or diag($err);
($ret, $out, $err) = as_reader('postgres', q{select pgque.claim_slot('q', 'c6', 0, 'w')});
isnt($ret, 0, 'the next new entry is refused');
like($err, qr/ERROR:  this database holds its maximum of slot leases \(pgque_bgw.max_slots_per_database = 40\)/,
     'naming the per-database cap');
like($err, qr/HINT:  Unsubscribe unused slot consumers/, 'with a hint');
($ret, $out, $err) = as_reader('postgres', q{\set VERBOSITY verbose
select pgque.claim_slot('q', 'c6', 0, 'w')});
like($err, qr/ERROR:  53400/, 'SQLSTATE 53400');
($ret, $out, $err) = as_reader('postgres', q{select pgque.claim_slot('q', 'c1', 0, 'w') is not null});
is($out, 't', 'renewing an existing lease still works at the cap') or diag($err);
is(count_all(), '40', 'the refused claims left nothing');

# --- another database still claims; the whole table is a hard limit ----------
subscribe_as_reader('other', q{
    select pgque.subscribe_slot('q', 'o' || c, k, 16) from generate_series(1, 3) c, generate_series(0, 15) k});
($ret, $out, $err) = as_reader('other', q{
    select count(pgque.claim_slot('q', 'o' || c, k, 'w')) from generate_series(1, 1) c, generate_series(0, 15) k});
is($out, '16', 'another database claims while the first is at its cap') or diag($err);
($ret, $out, $err) = as_reader('other', q{
    select count(pgque.claim_slot('q', 'o2', k, 'w')) from generate_series(0, 3) k});
is($out, '4', 'and fills the table up to its reserve') or diag($err);
is(count_all(), '60', 'the table holds max_slots less the reserve (1/16)');
($ret, $out, $err) = as_reader('other', q{select pgque.claim_slot('q', 'o2', 4, 'w')});
like($err, qr/ERROR:  the slot lease table is full but for its reserve \(4 of pgque_bgw.max_slots = 64\)/,
     'the reader cannot take the reserve, naming it');
is($node->safe_psql('other', q{select count(pgque.claim_slot('q', 'o2', k, 'su')) from generate_series(4, 7) k}),
   '4', 'a superuser claims the reserve (ADR 0041)');
is(count_all(), '64', 'the table holds max_slots entries');
($ret, $out, $err) = $node->psql('other', q{select pgque.claim_slot('q', 'o3', 0, 'su')});
like($err, qr/ERROR:  the slot lease table is full \(pgque_bgw.max_slots = 64\)/,
     'one more is refused, naming max_slots');
is(count_all(), '64', 'never past max_slots (no growth into shared-memory slack)');

# --- per-consumer cap ----------------------------------------------------------
$node->safe_psql('postgres', q{select pgque.unsubscribe_slot('q', 'c' || c, k) from generate_series(1, 5) c, generate_series(0, 7) k});
is(count_all(), '24', 'unsubscribing frees the first database\'s entries');
subscribe_as_reader('postgres', q{
    select pgque.subscribe_slot('q', 'big', k, 32) from generate_series(0, 31) k});
($ret, $out, $err) = as_reader('postgres', q{
    select count(pgque.claim_slot('q', 'big', k, 'w')) from generate_series(0, 31) k});
like($err, qr/ERROR:  consumer "big" holds its maximum of slot leases \(pgque_bgw.max_slots_per_consumer = 16\)/,
     'a consumer with more slots than its cap is refused past it, naming the cap');
is(count_all(), '24', 'the refused statement took its other new entries with it');
($ret, $out, $err) = as_reader('postgres', q{
    select count(pgque.claim_slot('q', 'big', k, 'w')) from generate_series(0, 15) k});
is($out, '16', 'up to the cap it claims') or diag($err);

# --- a lease of 1,000,000 years is refused; the status view keeps working ------
($ret, $out, $err) = as_reader('postgres', q{select pgque.claim_slot('q', 'big', 0, 'w', '1000000 years')});
like($err, qr/ERROR:  ttl must be between 1 second and 1 day/, 'a TTL past 1 day is refused');
is($node->safe_psql('postgres', q{select count(*) from pgque.partition_slot_status where consumer = 'big'}),
   '32', 'partition_slot_status reads fine');

$node->stop('fast');
done_testing();
