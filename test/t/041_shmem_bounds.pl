# Shared-memory tables filled by a reader (issue #25 item 6, ADR 0041).
# 1. A pgque_reader registered and touched 17 x 256 cooperative members in a
#    transaction it rolled back: 4,095 heartbeat entries stayed, and members
#    of other databases were no longer heard (their windows taken over).
# 2. One reader claimed and released 1,024 leases in each of 4 databases; a
#    superuser's next claim in another database failed ("the slot lease
#    table is full").
# Now: entries made in an aborted transaction go with it, each role has a
# cap well below its database's, superusers keep a reserve, and released or
# orphaned entries are reclaimed (on a full claim, and by the watchdog).
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $t0 = time;
my $node = PgqueNode->new_preloaded('shmem_bounds', conf => qq{
pgque_bgw.enabled = off
pgque_bgw.watchdog_interval = 1
pgque_bgw.launcher_naptime = 1
});
my @dbs = ('d1', 'd2', 'd3', 'd4', 'other');
for my $db ('postgres', @dbs)
{
    $node->safe_psql('postgres', qq{create database $db}) if $db ne 'postgres';
    $node->safe_psql($db, q{create extension pgque_bgw; select pgque.create_queue('q');});
}
$node->safe_psql('postgres', q{
    create role app_reader login in role pgque_reader;
    create role other_reader login in role pgque_reader;
});

sub as
{
    my ($role, $db, $sql) = @_;
    my ($ret, $out, $err) = $node->psql($db, $sql, extra_params => [ '-U', $role ]);
    return ($ret, $out, $err);
}

sub slots_all { return $node->safe_psql('postgres', 'select pgque._slot_lease_count_all()'); }
sub coop_all { return $node->safe_psql('postgres', 'select pgque._coop_member_count_all()'); }

# --- attack 1: 17 x 256 members registered and touched, rolled back --------
# a member of another database, heard before the attack
$node->safe_psql('other', q{
    select pgque.register_subconsumer('q', 'g', 'm1');
    select pgque.touch_subconsumer('q', 'g', 'm1');});
is(coop_all(), '1', 'one heartbeat before the attack');

my ($ret, $out, $err) = as('app_reader', 'postgres', q{
    begin;
    select count(pgque.register_subconsumer('q', 'g' || g, 'm' || m))
      from generate_series(1, 17) g, generate_series(1, 256) m;
    select count(pgque.touch_subconsumer('q', 'g' || g, 'm' || m))
      from generate_series(1, 17) g, generate_series(1, 256) m;
    rollback;});
like($err, qr/ERROR:  role "app_reader" holds its maximum of cooperative members \(pgque_bgw.max_coop_members_per_role = 512\)/,
     'the attack stops at the per-role cap, naming it');
is(coop_all(), '1', 'after the rollback only the other database\'s member is left');

# within the cap: 2 x 256 members, entries while it runs, none after
my $reader = $node->background_psql('postgres', extra_params => [ '-U', 'app_reader' ]);
$reader->query_safe('begin');
$reader->query_safe(q{
    select count(pgque.register_subconsumer('q', 'g' || g, 'm' || m))
      from generate_series(1, 2) g, generate_series(1, 256) m;
    select count(pgque.touch_subconsumer('q', 'g' || g, 'm' || m))
      from generate_series(1, 2) g, generate_series(1, 256) m;});
is(coop_all(), '513', '512 heartbeats while the transaction runs');
$reader->query_safe('rollback');
is(coop_all(), '1', 'a rolled-back registration leaves no heartbeat entry');

# a savepoint rolled back takes its own entries only
$reader->query_safe(q{begin;
    select pgque.register_subconsumer('q', 'sv', 'kept'), pgque.touch_subconsumer('q', 'sv', 'kept');
    savepoint s;
    select pgque.register_subconsumer('q', 'sv', 'undone'), pgque.touch_subconsumer('q', 'sv', 'undone');
    rollback to savepoint s;
    commit;});
is($node->safe_psql('postgres', q{select string_agg(member, ',' order by member) from pgque._coop_members()}),
   'kept', 'a rolled-back savepoint removes its heartbeat, the outer one stays');

# the other database's member is still heard
$out = $node->safe_psql('other', q{select count(*) from pgque._coop_members() where member = 'm1'});
is($out, '1', 'the member of the other database keeps its heartbeat');

# another role registers while app_reader is at its cap
($ret, $out, $err) = as('app_reader', 'postgres', q{
    select count(pgque.touch_subconsumer('q', 'f' || g, 'm' || m))
      from (select g, m, pgque.register_subconsumer('q', 'f' || g, 'm' || m)
              from generate_series(1, 2) g, generate_series(1, 256) m) x});
like($err, qr/max_coop_members_per_role = 512/, 'app_reader cannot go past its cap in committed work either');
($ret, $out, $err) = as('app_reader', 'postgres', q{
    select count(pgque.touch_subconsumer('q', 'f' || g, 'm' || m))
      from (select g, m, pgque.register_subconsumer('q', 'f' || g, 'm' || m)
              from generate_series(1, 2) g, generate_series(1, 256) m where (g, m) <> (2, 256)) x});
is($out, '511', 'app_reader commits members up to its cap (512 with sv/kept)') or diag($err);
($ret, $out, $err) = as('other_reader', 'postgres', q{
    select pgque.register_subconsumer('q', 'h', 'm1'), pgque.touch_subconsumer('q', 'h', 'm1')});
is($out, '1|1', 'another role is not starved by app_reader') or diag($err);
($ret, $out, $err) = as('app_reader', 'postgres', q{\set VERBOSITY verbose
    select pgque.register_subconsumer('q', 'f3', 'one_more'), pgque.touch_subconsumer('q', 'f3', 'one_more')});
like($err, qr/ERROR:  53400: role "app_reader" holds its maximum of cooperative members/, 'app_reader at its cap: 53400');
($ret, $out, $err) = as('app_reader', 'postgres', q{set role pgque_reader;
    select pgque.register_subconsumer('q', 'sr', 'm1'), pgque.touch_subconsumer('q', 'sr', 'm1')});
like($err, qr/role "app_reader" holds its maximum of cooperative members/,
     'SET ROLE pgque_reader opens no second quota: the login role is charged');

# a role with LOGIN only (or CREATE on the database) cannot reach the
# tables behind the API
$node->safe_psql('postgres', q{create role nobody login; grant create on database postgres to nobody});
for my $call (q{select pgque._coop_touch(1, 'x', null)}, q{select pgque._slot_claim(1, 'c', 0, 'w', 1000)})
{
    ($ret, $out, $err) = as('nobody', 'postgres', $call);
    like($err, qr/ERROR:  permission denied/, "a LOGIN-only role is refused: $call");
}

# --- attack 2: 1,024 claim+release in each of 4 databases by one reader ----
for my $db ('d1', 'd2', 'd3', 'd4')
{
    ($ret, $out, $err) = as('app_reader', $db, q{
        select count(pgque.subscribe_slot('q', 'c', k, 1024)) from generate_series(0, 1023) k});
    is($out, '1024', "$db: the reader subscribes 1,024 slots") or diag($err);
    # one transaction per slot: a release takes effect at its commit
    # (ADR 0071), so only a committed release is reclaimable
    ($ret, $out, $err) = as('app_reader', $db, join('', map {
        "select (pgque.claim_slot('q', 'c', $_, 'w') is not null and pgque.release_slot('q', 'c', $_, 'w'))::int;\n"
    } 0 .. 1023));
    my $done = 0;
    $done += $_ for grep { /^\d+$/ } split /\n/, $out;
    is($done, 1024, "$db: claims and releases all 1,024 (released entries are reclaimed at its cap)") or diag($err);
}
cmp_ok(slots_all(), '<=', 512, 'the reader never holds more entries than max_slots_per_role');
$node->safe_psql('other', q{select pgque.subscribe_slot('q', 'admin', 0, 1)});
is($node->safe_psql('other', q{select pgque.claim_slot('q', 'admin', 0, 'w') is not null}), 't',
   "a superuser's claim in another database succeeds");

# another role's claims are not starved by one role holding its cap
($ret, $out, $err) = as('app_reader', 'd1', q{
    select count(pgque.claim_slot('q', 'c', k, 'w')) from generate_series(0, 511) k});
is($out, '512', 'app_reader holds 512 live leases') or diag($err);
($ret, $out, $err) = as('app_reader', 'd2', q{\set VERBOSITY verbose
    select pgque.claim_slot('q', 'c', 0, 'w')});
like($err, qr/ERROR:  53400: role "app_reader" holds its maximum of slot leases \(pgque_bgw.max_slots_per_role = 512\)/,
     'its next live lease is refused, naming the per-role cap (live leases are never reclaimed)');
($ret, $out, $err) = as('app_reader', 'd2', q{set role pgque_reader;
    select pgque.subscribe_slot('q', 'sr', 0, 1);
    select pgque.claim_slot('q', 'sr', 0, 'w')});
like($err, qr/role "app_reader" holds its maximum of slot leases/,
     'SET ROLE pgque_reader opens no second slot quota either');
as('other_reader', 'd2', q{select pgque.subscribe_slot('q', 'o', k, 4) from generate_series(0, 3) k});
($ret, $out, $err) = as('other_reader', 'd2', q{
    select count(pgque.claim_slot('q', 'o', k, 'w')) from generate_series(0, 3) k});
is($out, '4', 'other_reader claims beside it') or diag($err);
is($node->safe_psql('d1', q{select count(*) from pgque._slot_leases() where owner = 'w'}), '512',
   'app_reader\'s live leases are all still there');

# --- orphans: a dropped database, rows gone -----------------------------------
# a dropped database's heartbeats are reclaimed when a bound is hit
$node->safe_psql('postgres', q{alter role app_reader set pgque_bgw.max_coop_members_per_role = 515});
($ret, $out, $err) = as('app_reader', 'd4', q{
    select count(pgque.touch_subconsumer('q', 'z', 'm' || m))
      from (select m, pgque.register_subconsumer('q', 'z', 'm' || m) from generate_series(1, 3) m) x});
is($out, '3', 'app_reader has 3 more members in d4') or diag($err);
my $before = coop_all();
# (the launcher, when it notices first, forgets them itself)
$node->safe_psql('postgres', q{drop database d4 with (force)});
($ret, $out, $err) = as('app_reader', 'd3', q{
    select count(pgque.touch_subconsumer('q', 'z', 'm' || m))
      from (select m, pgque.register_subconsumer('q', 'z', 'm' || m) from generate_series(1, 3) m) x});
is($out, '3', 'at its cap, the dropped database\'s entries make room') or diag($err);
is(coop_all(), $before, 'three entries of d4 went, three were made in d3');
$node->safe_psql('postgres', q{alter role app_reader reset pgque_bgw.max_coop_members_per_role});

# rows gone behind the API's back (a restore, a manual delete): the watchdog
# reclaims their entries; live ones stay
is($node->safe_psql('d3', q{select count(pgque.claim_slot('q', 'c', k, 'su')) from generate_series(0, 3) k}),
   '4', 'a superuser holds 4 leases of consumer c in d3');
$node->safe_psql('d3', q{
    delete from pgque.coop_member where cm_name in ('m1', 'm2');
    delete from pgque.partition_consumer where co_name = 'c';});
my $d3_members = $node->safe_psql('d3', q{select count(*) from pgque._coop_members()});
is($d3_members, '3', 'd3 has three heartbeats, two of them orphaned');
$node->append_conf('postgresql.conf', qq{
pgque_bgw.enabled = on
pgque_bgw.databases = 'd3'
});
$node->reload;
ok($node->poll_query_until('d3', q{select count(*) = 1 from pgque._coop_members()}),
   'the watchdog reclaims the heartbeats whose member row is gone');
ok($node->poll_query_until('d3', q{select count(*) = 0 from pgque._slot_leases() where consumer = 'c'}),
   'and the slot entries whose partitioned consumer is gone');
is($node->safe_psql('d3', q{select member from pgque._coop_members()}), 'm3', 'the live member keeps its heartbeat');
is($node->safe_psql('d1', q{select count(*) from pgque._slot_leases() where owner = 'w'}), '512',
   'live leases of another database are untouched');

# DROP EXTENSION takes the member rows, and at its commit the heartbeats
is($node->safe_psql('other', q{select count(*) from pgque._coop_members()}), '1', 'other has one heartbeat');
$before = coop_all();
$node->safe_psql('other', q{drop extension pgque_bgw cascade});
is(coop_all(), $before - 1, 'DROP EXTENSION forgets the database\'s heartbeats');

$node->stop('fast');
diag(sprintf('041_shmem_bounds took %.1f s', time - $t0));
done_testing();
