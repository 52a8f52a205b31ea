# pg_dump -> pg_restore round trip (issue 16, ADR 0022): a database with
# queues, plain consumers (one with an open batch, one behind), retries,
# dead letters, idempotency keys, a partition (slot) consumer with a leased
# slot and an open slot batch, and a cooperative group with a member holding
# a window is dumped in the custom and the plain format and restored into
# new databases while the workers run.  (Not with pg_restore -j: PostgreSQL's
# parallel restore does not order the data of an extension's tables by
# their foreign keys, and the COPYs of pgque's own tables fail; ADR 0022.)  Each restore
# reports no error; afterwards every consumer goes on exactly as it goes on in
# the source from the moment of the dump: the same event ids, nothing lost
# and nothing extra; idempotency keys still dedupe; dead letters are still
# replayable; slot leases (shared memory, not dumped) are claimed again with
# a higher epoch.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);

my $node = PgqueNode->new_preloaded('roundtrip', conf => qq{
max_worker_processes = 32
pgque_bgw.launcher_naptime = '1s'
pgque_bgw.maint_interval = '1s'
pgque_bgw.watchdog_interval = '1s'
});
my $bindir = $node->config_data('--bindir');
my $tmp = PostgreSQL::Test::Utils::tempdir;
my @conn = ('-h', $node->host, '-p', $node->port);



# --- the source ------------------------------------------------------------
$node->safe_psql('postgres', 'create database src');
$node->safe_psql('src', q{
    create extension pgque_bgw;
    select pgque.create_queue('jobs');
    select pgque.create_queue('dlq');
    select pgque.create_queue('parts');
    select pgque.create_queue('coop');
    select pgque.set_queue_config('dlq', 'max_retries', '0');
    select pgque.set_tick_period_ms(50);
    select pgque.subscribe('jobs', c) from unnest(array['open', 'behind', 'flaky']) c;
    select pgque.subscribe('dlq', 'c');
    select pgque.subscribe_slot('parts', 'pc', k, 2) from generate_series(0, 1) k;
    select pgque.register_subconsumer('coop', 'g', m) from unnest(array['m1', 'm2']) m;
    -- consumer users (ADR 0058): an admin's consumers start with
    -- pgque_reader; one more role by name, restored by name
    create role rt_app;
    select pgque.grant_consumer('jobs', 'open', 'rt_app'), pgque.grant_consumer('parts', 'pc', 'rt_app');
});
ok($node->wait_for_workers('src'), 'the workers serve the source');
$node->safe_psql('src', q{
    select pgque.send('jobs', 'job', 'j' || i) from generate_series(1, 300) i;
    select pgque.send('dlq', 'd' || i) from generate_series(1, 2) i;
    select pgque.send('parts', 'p', 'p' || i, 'k' || (i % 7)) from generate_series(1, 100) i;
    select pgque.send('coop', 'c' || i) from generate_series(1, 100) i;
});
# an open batch of consumer 'open'
my $open_batch = $node->poll_value('src', q{select coalesce(max(batch_id), 0) from pgque.receive('jobs', 'open', 50)});
ok($open_batch > 0, 'consumer open holds an open batch');
# consumer flaky nacks 3 events of its batch (retries due in 5 s) and acks it
my $flaky = $node->poll_value('src', q{
    with m as (select * from pgque.receive('jobs', 'flaky', 20)),
         n as (select pgque.nack(x.batch_id, x::pgque.message, '5 seconds', 'later') as r
                 from (select * from m order by msg_id limit 3) x)
    select coalesce(max(m.batch_id), 0) || ':' || (select sum(r) from n) from m});
like($flaky, qr/^\d+:3$/, 'consumer flaky nacks three events');
$flaky =~ s/:.*//;
$node->safe_psql('src', "select pgque.ack($flaky)");
# two dead letters on queue dlq
ok($node->poll_value('src', q{
    with m as (select * from pgque.receive('dlq', 'c', 10))
    select count(pgque.nack(m.batch_id, m, '0', 'poison')) from m}) == 2, 'two events nacked on queue dlq');
$node->safe_psql('src', q{select pgque.ack(sub_batch) from pgque.subscription where sub_batch is not null
                           and sub_queue = (select queue_id from pgque.queue where queue_name = 'dlq')});
ok($node->poll_query_until('src', q{select count(*) = 2 from pgque.dead_letter}), 'and are dead letters');
# idempotency keys
is($node->safe_psql('src', q{select string_agg(deduped::text, ',') from pgque.send_idem('jobs', 'job', 'idem', 'key-1')}),
   'false', 'an idempotency key is recorded');
# slot 0 leased with an open slot batch
my $epoch = $node->safe_psql('src', q{select pgque.claim_slot('parts', 'pc', 0, 'w0', '10 minutes')});
ok($epoch > 0, 'slot 0 is leased');
ok($node->poll_value('src', q{select count(*) from pgque.receive_partitioned('parts', 'pc', 0, 2, 'w0', 1000)}) > 0,
   'and has an open slot batch');
# member m1 holds a window of the cooperative group
my $coop_batch = $node->poll_value('src', q{select coalesce(max(batch_id), 0) from pgque.receive_coop('coop', 'g', 'm1', 30)});
ok($coop_batch > 0, 'member m1 holds a window');
$node->safe_psql('src', q{select pgque.send('jobs', 'job', 'late' || i) from generate_series(1, 20) i});

# --- the dumps -----------------------------------------------------------------
command_ok([ "$bindir/pg_dump", @conn, '-Fc', '-f', "$tmp/src.dump", 'src' ], 'pg_dump -Fc');
command_ok([ "$bindir/pg_dump", @conn, '-f', "$tmp/src.sql", 'src' ], 'pg_dump (plain)');
$node->safe_psql('src', q{select pgque.claim_slot('parts', 'pc', 1, 'w0', '10 minutes')});

# --- how consumers go on, the same in the source and in every restore ----------
# drain a plain consumer; returns its event ids, sorted
sub drain
{
    my ($db, $queue, $consumer, $want) = @_;
    my @ids;
    my $deadline = time + 60;
    my $idle = 0;
    while (time < $deadline)
    {
        my $r = $node->safe_psql($db, qq{
            with m as (select * from pgque.receive('$queue', '$consumer', 1000))
            select coalesce(max(batch_id), 0) || ':' || coalesce(string_agg(msg_id::text, ','), '') from m});
        my ($batch, $list) = split /:/, $r, 2;
        if ($batch ne '0')
        {
            $node->safe_psql($db, "select pgque.ack($batch)");
            push @ids, split /,/, $list if $list ne '';
            $idle = 0;
            next;
        }
        last if @ids >= $want && ++$idle >= 5;
        sleep 0.2;
    }
    return sort { $a <=> $b } @ids;
}

sub drain_slot
{
    my ($db, $slot, $want) = @_;
    my @ids;
    my $deadline = time + 60;
    my $idle = 0;
    while (time < $deadline)
    {
        my $list = $node->safe_psql($db, qq{
            select coalesce(string_agg(msg_id::text, ','), '')
              from pgque.receive_partitioned('parts', 'pc', $slot, 2, 'w0', 1000)});
        if ($list ne '')
        {
            $node->safe_psql($db, qq{select pgque.ack_partitioned('parts', 'pc', $slot, 2, 'w0')});
            push @ids, split /,/, $list;
            $idle = 0;
            next;
        }
        last if @ids >= $want && ++$idle >= 5;
        sleep 0.2;
    }
    return sort { $a <=> $b } @ids;
}

sub drain_coop
{
    my ($db, $member, $want) = @_;
    my @ids;
    my $deadline = time + 60;
    my $idle = 0;
    while (time < $deadline)
    {
        my $r = $node->safe_psql($db, qq{
            with m as (select * from pgque.receive_coop('coop', 'g', '$member', 1000))
            select coalesce(max(batch_id), 0) || ':' || coalesce(string_agg(msg_id::text, ','), '') from m});
        my ($batch, $list) = split /:/, $r, 2;
        if ($batch ne '0')
        {
            $node->safe_psql($db, "select pgque.ack($batch)");
            push @ids, split /,/, $list if $list ne '';
            $idle = 0;
            next;
        }
        last if @ids >= $want && ++$idle >= 5;
        sleep 0.2;
    }
    return sort { $a <=> $b } @ids;
}

# everything the consumers get from the dumped state on: event ids per consumer
sub go_on
{
    my ($db) = @_;
    my %got;
    # the open batch comes again (at least once) and is acked
    $node->safe_psql($db, "select pgque.ack($open_batch)");
    $got{open} = [ drain($db, 'jobs', 'open', 271) ];
    $got{behind} = [ drain($db, 'jobs', 'behind', 321) ];
    # the three retries come back after their 5 s
    $got{flaky} = [ drain($db, 'jobs', 'flaky', 304) ];
    # m1 acks its window; m1 and m2 take the rest
    $node->safe_psql($db, "select pgque.ack($coop_batch)");
    $got{coop} = [ sort { $a <=> $b } drain_coop($db, 'm1', 1), drain_coop($db, 'm2', 0) ];
    $got{slot0} = [ drain_slot($db, 0, 1) ];
    $got{slot1} = [ drain_slot($db, 1, 1) ];
    # the dead letters go back into queue dlq and reach consumer c again
    $got{dead_letters} = [ split /,/, $node->safe_psql($db, q{select string_agg(ev_id::text, ',' order by ev_id) from pgque.dead_letter}) ];
    $node->safe_psql($db, q{select pgque.dlq_replay_all('dlq')});
    $got{dlq} = [ drain($db, 'dlq', 'c', 2) ];
    return \%got;
}

my $want = go_on('src');
ok(@{ $want->{behind} } == 321, 'in the source, consumer behind gets all 321 events');
ok(@{ $want->{flaky} } >= 304, 'in the source, consumer flaky gets its retries');
ok(@{ $want->{dlq} } == 2, 'in the source, the replayed dead letters are received');

# --- the restores --------------------------------------------------------------
my %restore = (
    'custom' => [ "$bindir/pg_restore", @conn, "$tmp/src.dump", '-d' ],
    'plain' => [ "$bindir/psql", @conn, '-X', '-q', '-f', "$tmp/src.sql", '-d' ],
);
my $i = 0;
for my $format ('custom', 'plain')
{
    my $db = 'r' . $i++;
    $node->safe_psql('postgres', "create database $db");
    my ($stdout, $stderr) = ('', '');
    my $ok = IPC::Run::run([ @{ $restore{$format} }, $db ], '>', \$stdout, '2>', \$stderr);
    ok($ok, "$format restore exits with 0");
    unlike($stderr, qr/ERROR|error:/, "$format restore reports no error") or diag($stderr);
    ok($node->wait_for_workers($db), "$format: the workers serve the restored database");
    is($node->safe_psql($db, q{select tick_period_ms from pgque.config}), '50',
       "$format: the settings row is the source's");
    is($node->safe_psql($db, q{select string_agg(deduped::text, ',') from pgque.send_idem('jobs', 'job', 'idem', 'key-1')}),
       'true', "$format: the idempotency key still dedupes");
    is($node->safe_psql($db, q{select string_agg(deduped::text, ',') from pgque.send_idem('jobs', 'job', 'idem', 'key-new')}),
       'false', "$format: a new key does not");
    # the event key-new sent is in every consumer's stream here, not in the
    # source's: take it out again before comparing
    my $new_id = $node->safe_psql($db, q{select event_id from pgque.idem where idem_key = 'key-new'});
    is($node->safe_psql($db, q{
        select string_agg(consumer_name || '=' || users::text, ' ' order by consumer_name)
          from pgque.consumer_rights where consumer_name in ('open', 'pc')
        union all
        select count(*)::text from pgque.subscription where 'rt_app'::regrole = any (sub_users)}),
       "open={pgque_reader,rt_app} pc={pgque_reader,rt_app}\n3",
       "$format: the consumers' users are restored by name, the slots' copies too");
    # ADR 0079: the anchor grant that keeps rt_app counted is restored by name
    is($node->safe_psql($db, q{select pgque._role_anchored('rt_app')}), 't',
       "$format: the users' anchor grant is restored with them");
    is($node->safe_psql($db, q{select count(*) from pgque.get_partition_slot_info()
                                where queue_name = 'parts' and lease_owner is not null}), '0',
       "$format: no slot is leased after the restore (leases live in shared memory)");
    cmp_ok($node->safe_psql($db, q{select pgque.claim_slot('parts', 'pc', 0, 'w0', '10 minutes')}), '>', $epoch,
           "$format: a new lease's epoch is above every epoch the source had handed out at the dump");
    $node->safe_psql($db, q{select pgque.claim_slot('parts', 'pc', 1, 'w0', '10 minutes')});
    my $got = go_on($db);
    for my $c (sort keys %$want)
    {
        my @g = grep { $_ ne $new_id } @{ $got->{$c} };
        ok(join(',', @g) eq join(',', @{ $want->{$c} }),
           "$format: $c goes on as in the source (" . scalar(@{ $want->{$c} }) . ' ids)')
          or diag(sprintf('got %d ids, want %d', scalar(@g), scalar(@{ $want->{$c} })));
    }
}

$node->stop;
done_testing();
