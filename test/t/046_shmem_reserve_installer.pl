# The reserve of the shared-memory tables and the installing role (ADR 0041,
# ADR 0042).  The last 1/16 of the slot lease table and of the cooperative
# member table is kept so that "no role, in however many databases, can
# take the table from the administrator".  It was kept for superusers and
# for the installing role of the database (pg_extension.extowner), which
# was also free of the per-role cap.  But the installing role of a trusted
# install is any role with CREATE on a database: one with CREATE on four
# databases (here: the owner of four, which needs nothing else) installed
# the extension in each and filled the whole table, reserve included, with
# its database caps (4 x 1,024 members = 4,096; 4 x 16 slots = 64 with
# pgque_bgw.max_slots = 64): a superuser's claim or heartbeat in another
# database was then refused.  The reserve is now for superusers only; the
# installing role stays free of the per-role cap in its database.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $t0 = time;
my $node = PgqueNode->new_preloaded('shmem_reserve', conf => q{
pgque_bgw.enabled = off
pgque_bgw.max_slots = 64
pgque_bgw.max_slots_per_database = 16
});
$node->safe_psql('postgres', q{create role tenant login});
my @dbs = ('t1', 't2', 't3', 't4');
$node->safe_psql('postgres', qq{create database $_ owner tenant}) for @dbs;
$node->safe_psql('postgres', q{create database other});
$node->safe_psql('other', q{create extension pgque_bgw; select pgque.create_queue('q');
                            select pgque.subscribe_slot('q', 'admin', 0, 1);});

sub as_tenant
{
    my ($db, $sql) = @_;
    my ($ret, $out, $err) = $node->psql($db, $sql, extra_params => [ '-U', 'tenant' ]);
    return ($out, $err);
}

my ($out, $err);
my $slots = 0;
my $members = 0;
my @slot_err;
my @coop_err;
for my $db (@dbs)
{
    # a trusted install: tenant owns the database, nothing more
    ($out, $err) = as_tenant($db, q{create extension pgque_bgw; select pgque.create_queue('q');
        select count(pgque.subscribe_slot('q', 'c', k, 16)) from generate_series(0, 15) k;});
    is((split /\n/, $out)[-1], '16', "$db: the owner of the database installs and subscribes 16 slots") or diag($err);
    # one claim or heartbeat per statement, so each refusal ends only itself
    my $claims = join('', map { "select pgque.claim_slot('q', 'c', $_, 'w') is not null;\n" } 0 .. 15);
    ($out, $err) = as_tenant($db, $claims);
    my $n = () = $out =~ /^t$/mg;
    $slots += $n;
    push @slot_err, $err if $err;
    ($out, $err) = as_tenant($db, q{
        select count(pgque.touch_subconsumer('q', 'g' || g, 'm' || m))
          from (select g, m, pgque.register_subconsumer('q', 'g' || g, 'm' || m)
                  from generate_series(1, 4) g, generate_series(1, 256) m) x});
    $members += ($out || 0);
    $members += 0;
    push @coop_err, $err if $err;
}
is($slots, 60, 'the installing role of four databases holds 60 of the 64 slot entries, not the reserve')
    or diag(join("\n", @slot_err));
like(join("\n", @slot_err), qr/the slot lease table is full but for its reserve/, '... its next claim is refused naming the reserve');
is($members, 3 * 1024, 'it registers 1,024 members in each of three databases');
like(join("\n", @coop_err), qr/the cooperative member table is full but for its reserve/,
     '... and is refused the reserve in the fourth');

is($node->safe_psql('other', q{select pgque.claim_slot('q', 'admin', 0, 'w') is not null}), 't',
   "a superuser's claim in another database succeeds");
is($node->safe_psql('other', q{select pgque.register_subconsumer('q', 'g', 'su'), pgque.touch_subconsumer('q', 'g', 'su')}),
   '1|1', "and so does a superuser's heartbeat");

# the installing role is still free of the per-role cap in its database
$node->safe_psql('postgres', q{alter role tenant set pgque_bgw.max_slots_per_role = 1});
$node->safe_psql('t1', q{select pgque.release_slot('q', 'c', k, 'w') from generate_series(0, 15) k});
($out, $err) = as_tenant('t1', q{select count(pgque.claim_slot('q', 'c', k, 'w')) from generate_series(0, 3) k});
is($out, '4', 'the installing role is not held to max_slots_per_role in its own database') or diag($err);

note(sprintf('046 took %.1f s', time - $t0));
$node->stop;
done_testing();
