# A postmaster SIGKILL during ALTER EXTENSION pgque_bgw UPDATE from 0.2.0
# (issue #26, ADR 0019, 0046), fsync on.  A 0.2.0 database under the new
# library, with the workers running and data in every state: a plain
# consumer with an open batch, one with retries owed, a partitioned consumer
# with a leased slot holding an open slot batch and a slot with acked work;
# a ledger of what was sent (in the send's transaction) and acked (in the
# ack's).  The update is started and the server killed while it runs,
# three times; after each restart the workers serve the database
# again and the extension is wholly at 0.2.0, object by object as before the
# update (the update rolled back: no half of it left), with its data intact
# (every cursor and open batch as it was, every sent event stored).  The
# update is held at one point (waiting for a lock on pgque.idem, after its
# checks, roles and owners) and killed there, then killed at random points
# of the rest of its run: twice with every process of the server (a power
# loss), once the postmaster alone, whose backends outlive it (PostgreSQL's
# behaviour: the update's backend may run on to its commit).  An update that
# committed must be wholly at the new version, equal to a copy updated
# without a kill.  Then an
# update completes and the ledger is drained on the new version: every
# event sent before is acked once by each consumer, nothing lost or twice.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use IPC::Run;
use Test::More;
use Time::HiRes qw(time sleep);

my $node = PgqueNode->new_preloaded('update_kill', conf => q{
fsync = on
restart_after_crash = on
max_worker_processes = 20
pgque_bgw.launcher_naptime = '1s'
pgque_bgw.maint_interval = '1s'
pgque_bgw.watchdog_interval = '1s'
});
my $psql = $node->config_data('--bindir') . '/psql';
my $new = $node->safe_psql('postgres',
    q{select default_version from pg_available_extensions where name = 'pgque_bgw'});
my $t0 = time;

# the set-up on 0.2.0, in 'up' and in the measuring copy 'probe'
my $setup = q{
    create extension pgque_bgw version '0.2.0';
    select pgque.create_queue('jobs');
    select pgque.create_queue('parts');
    -- more queues: a longer update, more points to be killed at
    select pgque.create_queue('x' || i) from generate_series(1, 30) i;
    select pgque.subscribe('jobs', c) from unnest(array['c', 'r']) c;
    select pgque.subscribe_slot('parts', 'pc', k, 2) from generate_series(0, 1) k;
    create table sent (q text, ev_id bigint, primary key (q, ev_id));
    create table acked (consumer text not null, ev_id bigint not null);
    -- how many of the events sent are stored in their queue's tables
    create function stored() returns bigint language plpgsql as $$
    declare
        n bigint := 0;
        m bigint;
        q record;
    begin
        for q in select queue_id, queue_name from pgque.queue loop
            execute format('select count(*) from sent s where s.q = %L
                              and exists (select from pgque.event_%s e where e.ev_id = s.ev_id)',
                           q.queue_name, q.queue_id) into m;
            n := n + m;
        end loop;
        return n;
    end $$;
};
# the extension's objects as text, OIDs left out: functions with their
# bodies, settings and grants, relations, columns, types, the members of
# the extension and its version
my $schema_sql = q{
    select string_agg(x, E'\n' order by x) from (
        select 'f ' || p.oid::regprocedure::text || ' ' || md5(p.prosrc) || ' ' || p.prosecdef
               || ' ' || coalesce(array_to_string(p.proconfig, ','), '') || ' ' || coalesce(p.proacl::text, '')
          from pg_proc p where p.pronamespace = 'pgque'::regnamespace
        union all
        select 'r ' || c.relname || ' ' || c.relkind::text || ' ' || c.relpersistence::text || ' ' || coalesce(c.relacl::text, '')
          from pg_class c where c.relnamespace = 'pgque'::regnamespace and c.relname !~ '^space_reserve_[0-9]+$'
        union all
        select 'a ' || c.relname || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod) || ' ' || a.attnotnull
          from pg_attribute a join pg_class c on c.oid = a.attrelid
         where c.relnamespace = 'pgque'::regnamespace and a.attnum > 0 and not a.attisdropped
           and c.relname !~ '^space_reserve_[0-9]+$'
        union all
        select 't ' || t.typname from pg_type t where t.typnamespace = 'pgque'::regnamespace
           and t.typname !~ '^_?space_reserve_[0-9]+$'
        union all
        select 'c ' || conname || ' ' || pg_get_constraintdef(oid) from pg_constraint where connamespace = 'pgque'::regnamespace
        union all
        select 'e ' || extversion || ' ' || (select count(*) from pg_depend d where d.refobjid = e.oid and d.deptype = 'e')
          from pg_extension e where e.extname = 'pgque_bgw') s (x)};
# same_objects(GOT, WANT, NAME): the two lists of objects are equal; else
# the lines that differ
sub same_objects
{
    my ($got, $want, $name) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    return 1 if ok($got eq $want, $name);
    my %g = map { $_ => 1 } split /\n/, $got;
    my %w = map { $_ => 1 } split /\n/, $want;
    my @d = ((map { "only got: $_" } grep { !$w{$_} } sort keys %g), (map { "only wanted: $_" } grep { !$g{$_} } sort keys %w));
    diag(join("\n", grep { defined } @d[0 .. 19]));
    return 0;
}

# the data: every consumer's cursor and open batch, and how many of the
# events sent are stored in their queue's tables
my $data_sql = q{
    select string_agg(concat_ws(':', co.co_name, s.sub_last_tick, s.sub_batch, s.sub_next_tick), ' ' order by co.co_name)
           || ' stored=' || stored()
      from pgque.subscription s join pgque.consumer co on co.co_id = s.sub_consumer};

# The update is held at a point of its own: a session holds pgque.idem
# (ACCESS SHARE), so the update waits at its first ALTER TABLE of it, after
# its checks, roles and owners (sql/upgrade/0.2.0--0.3.0.pre.sql); it goes on when that
# session ends.  hold_update(DB): the update started and waiting there; its
# harness, the blocker's pid
sub hold_update
{
    my ($db) = @_;
    my %r = (out => '', err => '');
    $r{blocker} = IPC::Run::start([ $psql, '-X', '-d', $node->connstr($db) . ' application_name=r171_blocker',
                                     '-c', 'begin', '-c', 'lock table pgque.idem in access share mode',
                                     '-c', 'select pg_sleep(600)' ], '>', \my $bo, '2>', \my $be);
    ok($node->poll_query_until($db, q{
        select count(*) = 1 from pg_stat_activity where application_name = 'r171_blocker' and query like '%pg_sleep%'}),
       "$db: a session holds pgque.idem");
    $r{h} = IPC::Run::start([ $psql, '-X', '-d', $node->connstr($db) . ' application_name=r171_update',
                               '-c', 'alter extension pgque_bgw update' ], '>', \$r{out}, '2>', \$r{err});
    ok($node->poll_query_until($db, q{
        select count(*) = 1 from pg_locks l join pg_stat_activity a on a.pid = l.pid
         where a.application_name = 'r171_update' and not l.granted and l.relation = 'pgque.idem'::regclass}),
       "$db: the update waits for it");
    return \%r;
}
# release(UPDATE): the blocker ends, the update goes on; the time
sub release
{
    my ($u) = @_;
    $node->safe_psql('postgres', q{
        select pg_terminate_backend(pid) from pg_stat_activity where application_name = 'r171_blocker'});
    my $t = time;
    $u->{blocker}->finish;
    return $t;
}

# the rest of the update's run, measured on a copy of the set-up
$node->safe_psql('postgres', 'create database probe');
$node->safe_psql('probe', $setup);
my $schema_020 = $node->safe_psql('probe', $schema_sql);
my $probe = hold_update('probe');
my $released = release($probe);
$probe->{h}->finish;
my $length = time - $released;
is($node->safe_psql('probe', q{select extversion from pg_extension where extname = 'pgque_bgw'}), $new,
   "probe: updated to $new");
my $schema_new = $node->safe_psql('probe', $schema_sql);
isnt($schema_new, $schema_020, 'the update changes the extension\'s objects');
diag(sprintf('figure: the update ran %.2f s on the copy', $length));

# --- 'up': the data on 0.2.0 -------------------------------------------------------
$node->safe_psql('postgres', 'create database up');
$node->safe_psql('up', $setup);
same_objects($node->safe_psql('up', $schema_sql), $schema_020, 'up holds the 0.2.0 objects the copy held');
ok($node->wait_for_workers('up'), 'the workers serve the 0.2.0 database');
for my $t (0 .. 3)
{
    $node->safe_psql('up', qq{
        insert into sent select 'jobs', pgque.send('jobs', 'j', 'j' || i) from generate_series($t * 50 + 1, $t * 50 + 50) i;
        insert into sent select 'parts', pgque.send('parts', 'p', 'p' || i, 'k' || (i % 13))
          from generate_series($t * 50 + 1, $t * 50 + 50) i;
    });
}
# consumer c: an open batch
ok($node->poll_value('up', q{select coalesce(max(batch_id), 0) from pgque.receive('jobs', 'c', 30)}) > 0,
   'consumer c holds an open batch');
# consumer r: a batch acked with 5 of its events nacked (retries due in 5 s)
my $r = $node->poll_value('up', q{
    with m as (select * from pgque.receive('jobs', 'r', 40)),
         n as (select pgque.nack(x.batch_id, x::pgque.message, '5 seconds', 'later') as k
                 from (select * from m order by msg_id limit 5) x),
         a as (insert into acked select 'r', msg_id from m where msg_id not in (select msg_id from m order by msg_id limit 5))
    select coalesce(max(m.batch_id), 0) || ':' || (select sum(k) from n) from m});
like($r, qr/^\d+:5$/, 'consumer r nacks 5 events of its batch');
$r =~ s/:.*//;
$node->safe_psql('up', "select pgque.ack($r)");
# slot 1: a batch acked; slot 0: leased with an open slot batch
$node->safe_psql('up', q{
    select pgque.claim_slot('parts', 'pc', 1, 'w0', '10 minutes');
    insert into acked select 'pc', msg_id from pgque.receive_partitioned('parts', 'pc', 1, 2, 'w0', 20);
    select pgque.ack_partitioned('parts', 'pc', 1, 2, 'w0');
});
ok($node->safe_psql('up', q{select pgque.claim_slot('parts', 'pc', 0, 'w0', '10 minutes')}) > 0, 'slot 0 is leased');
cmp_ok($node->safe_psql('up', q{select count(*) from pgque.receive_partitioned('parts', 'pc', 0, 2, 'w0', 20)}),
       '>', 0, 'and holds an open slot batch');
my $data = $node->safe_psql('up', $data_sql);
like($data, qr/ stored=400$/, 'the 400 events sent are stored');

# --- the kills ------------------------------------------------------------------------
# 1: the update held at pgque.idem, every process of the server killed at
# once (a power loss); 2: the same at a random point of the rest of its run;
# 3: the postmaster alone at such a point (its backends are not killed with
# it: the update's goes on alone until it ends or notices, PostgreSQL's
# own behaviour)
my $rolled_back = 0;
my $first_rolled_back;
for my $round ([ 'all', undef ], [ 'all', [ 0.05, 0.8 ] ], [ undef, [ 0.05, 0.8 ] ])
{
    my ($all, $range) = @$round;
    my $u = hold_update('up');
    my $what = 'killed at pgque.idem';
    if ($range)
    {
        my $delay = $length * ($range->[0] + rand($range->[1] - $range->[0]));
        my $t = release($u);
        sleep($delay - (time - $t)) if $delay > time - $t;
        $what = sprintf('killed %.2f s after the update went on', $delay);
    }
    $what .= $all ? ' (every process)' : ' (the postmaster)';
    $node->kill9_and_wait($all);
    $u->{h}->finish;
    $u->{blocker}->finish;
    my $reported = $u->{out} =~ /ALTER EXTENSION/;
    $node->start;
    ok(PgqueNode::wait_back($node, 'up'), "$what: the server is back");
    ok($node->wait_for_workers('up'), "$what: the workers serve the database again");
    my $version = $node->safe_psql('up', q{select extversion from pg_extension where extname = 'pgque_bgw'});
    $first_rolled_back //= ($version eq '0.2.0' && !$reported) ? 1 : 0;
    if ($version eq '0.2.0' && !$reported)
    {
        $rolled_back++;
        same_objects($node->safe_psql('up', $schema_sql), $schema_020, "$what: the update rolled back, wholly 0.2.0");
        is($node->safe_psql('up', $data_sql), $data, "$what: cursors, open batches and events intact");
        next;
    }
    # the update committed: before the kill, or its backend, outliving the
    # postmaster, went on to the end (a commit it reported must be there)
    is($version, $new, "$what: the update committed" . ($reported ? ' (and said so)' : '') . ", wholly at $new");
    same_objects($node->safe_psql('up', $schema_sql), $schema_new, "$what: wholly $new, as the copy updated without a kill");
    last;
}
# the kill while the update waits at pgque.idem lands before its commit
# whatever the load; one at a random point may come after it (the update
# ends within the SIGKILLs of the postmaster and then of its backends:
# .ci/run, once), and then the update is wholly at the new version, as
# checked above
is($first_rolled_back, 1, 'the kill while the update waited at pgque.idem rolled it back');
diag("$rolled_back of the 3 kills rolled the update back");

# --- the update, then the drain on the new version ------------------------------------
$node->safe_psql('up', 'alter extension pgque_bgw update')
  if $node->safe_psql('up', q{select extversion from pg_extension where extname = 'pgque_bgw'}) ne $new;
same_objects($node->safe_psql('up', $schema_sql), $schema_new, "updated to $new: equal to the copy updated without a kill");
ok($node->wait_for_workers('up'), 'the workers serve the updated database');
$node->safe_psql('up', q{
    create procedure drain() language plpgsql as $$
    declare
        c text;
        b bigint;
        s int;
        k int;
    begin
        foreach c in array array['c', 'r'] loop
            loop
                insert into acked select c, msg_id from pgque.receive('jobs', c, 1000);
                get diagnostics k = row_count;
                b := (select sub_batch from pgque.subscription s join pgque.consumer co on co.co_id = s.sub_consumer
                       where co.co_name = c);
                exit when b is null;
                perform pgque.ack(b);
                commit;
            end loop;
        end loop;
        for s in 0 .. 1 loop
            perform pgque.claim_slot('parts', 'pc', s, 'w1', '1 minute');
            loop
                insert into acked select 'pc', msg_id from pgque.receive_partitioned('parts', 'pc', s, 2, 'w1', 100);
                get diagnostics k = row_count;
                exit when k = 0;
                perform pgque.ack_partitioned('parts', 'pc', s, 2, 'w1');
                commit;
            end loop;
            perform pgque.release_slot('parts', 'pc', s, 'w1');
            commit;
        end loop;
    end $$});
my $want = q{(select count(*) from sent where q = 'jobs') * 2 + (select count(*) from sent where q = 'parts')};
ok(PgqueNode::poll_until(sub {
    $node->safe_psql('up', 'call drain()');
    $node->safe_psql('up', qq{select count(distinct (consumer, ev_id)) = $want from acked}) eq 't';
}, 60, 0.5), 'the ledger drained on the new version (the retries come when due)');
for my $c ([ 'c', 'jobs' ], [ 'r', 'jobs' ], [ 'pc', 'parts' ])
{
    my ($consumer, $q) = @$c;
    is($node->safe_psql('up', qq{
        select (select count(*) from sent s where s.q = '$q'
                   and not exists (select from acked a where a.consumer = '$consumer' and a.ev_id = s.ev_id))
               || ' lost, ' ||
               (select count(*) from (select from acked where consumer = '$consumer' group by ev_id having count(*) > 1) d)
               || ' twice, ' ||
               (select count(*) from acked a where a.consumer = '$consumer'
                   and not exists (select from sent s where s.q = '$q' and s.ev_id = a.ev_id)) || ' extra'}),
       '0 lost, 0 twice, 0 extra', "consumer $consumer: every event sent before the update acked once");
}
diag(sprintf('figure: %d kills of the postmaster during the update, %d rolled back; %.0f s in all',
             3, $rolled_back, time - $t0));

$node->stop;
done_testing();
