# A restore loses nothing and flaps no alert (issue 12, ADR 0022): a
# database whose queue is due for rotation and pinned by a lagging consumer
# is dumped (pg_dump -Fc and plain) and restored, without -1, into new
# databases of the same cluster while the workers run at their fastest
# intervals.  The restores are also cut in two right before pgque.tick's data
# (the moment the issue's rotation struck: queues, subscriptions and events
# loaded, the ticks the cursors point at not yet) and held there for several
# maintenance and watchdog passes.
# Every event the source had pending for the lagging consumer is delivered
# after each restore, and every alert open in the source is still the same
# open row, never cleared and reopened.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);

my $node = PgqueNode->new_preloaded('restore_rotation', conf => qq{
max_worker_processes = 32
pgque_bgw.launcher_naptime = '1s'
pgque_bgw.tick_interval = '1ms'
pgque_bgw.maint_interval = '1s'
pgque_bgw.watchdog_interval = '1s'
pgque_bgw.lag_alert_after = '2s'
});
my $bindir = $node->config_data('--bindir');
my $tmp = PostgreSQL::Test::Utils::tempdir;


# --- the source: a queue due for rotation every second, pinned by 'lag' ---
$node->safe_psql('postgres', 'create database src');
$node->safe_psql('src', q{
    create extension pgque_bgw;
    select pgque.create_queue('q');
    select pgque.set_queue_config('q', 'rotation_period', '1 second');
    select pgque.subscribe('q', 'lag');
    select pgque.subscribe('q', 'fast');
});
ok($node->wait_for_workers('src'), 'the workers serve the source');
my $nevents = 0;
for my $b (1 .. 10)
{
    $node->safe_psql('src', qq{
        select pgque.send('q', 'e', 'b$b-' || i) from generate_series(1, 2000) i});
    $nevents += 2000;
}

# drain CONSUMER of queue q in DB; returns the received event ids, in order
sub drain
{
    my ($db, $consumer, $want) = @_;
    my @ids;
    my $deadline = time + 90;
    my $idle = 0;
    while (time < $deadline)
    {
        my $r = $node->safe_psql($db, qq{
            with m as (select * from pgque.receive('q', '$consumer', 5000))
            select coalesce(max(batch_id), 0) || ':' || coalesce(string_agg(msg_id::text, ',' order by msg_id), '')
              from m});
        my ($batch, $list) = split /:/, $r, 2;
        if ($batch ne '0')
        {
            $node->safe_psql($db, "select pgque.ack($batch)");
            push @ids, split /,/, $list if $list ne '';
            $idle = 0;
            next;
        }
        # a few empty polls after the expected count: nothing extra comes
        last if @ids >= $want && ++$idle >= 5;
        sleep 0.2;
    }
    return @ids;
}

is(scalar(drain('src', 'fast', $nevents)), $nevents, 'the fast consumer is caught up');
ok($node->poll_query_until('src', q{
    select count(*) = 2 from pgque.alerts
     where (kind, consumer) in (('consumer_lagging', 'lag'), ('rotation_pinned', 'lag'))}),
   'the source has consumer_lagging and rotation_pinned open for the lagging consumer');
is($node->safe_psql('src', q{select count(*) from pgque.queue where queue_switch_time + queue_rotation_period < now()}),
   '1', 'rotation is due in the source');
# the dumps, taken while rotation is due and pinned
command_ok([ "$bindir/pg_dump", '-Fc', '-h', $node->host, '-p', $node->port, '-f', "$tmp/src.dump", 'src' ],
           'pg_dump -Fc of the source');
command_ok([ "$bindir/pg_dump", '-h', $node->host, '-p', $node->port, '-f', "$tmp/src.sql", 'src' ],
           'pg_dump (plain) of the source');
# what the lagging consumer has pending in the source (read after the dumps)
$node->safe_psql('src', 'select pgque.set_queue_config(\'q\', \'rotation_period\', \'2 hours\')');
my @want = drain('src', 'lag', $nevents);
is(scalar(@want), $nevents, "the lagging consumer had $nevents events pending in the source");

# Both dumps cut right before pgque.tick's data: the custom dump's list and
# the plain dump's text.
my @list = split /\n/, `"$bindir/pg_restore" -l "$tmp/src.dump"`;
my ($cut) = grep { $list[$_] =~ /TABLE DATA pgque tick / } 0 .. $#list;
ok(defined $cut, 'the custom dump holds pgque.tick\'s data');
PostgreSQL::Test::Utils::append_to_file("$tmp/part1.list", join("\n", @list[0 .. $cut - 1]) . "\n");
PostgreSQL::Test::Utils::append_to_file("$tmp/part2.list", join("\n", @list[$cut .. $#list]) . "\n");
my $plain = slurp_file("$tmp/src.sql");
my $at = index($plain, "\nCOPY pgque.tick ");
ok($at >= 0, 'the plain dump holds pgque.tick\'s data');
PostgreSQL::Test::Utils::append_to_file("$tmp/part1.sql", substr($plain, 0, $at + 1));
PostgreSQL::Test::Utils::append_to_file("$tmp/part2.sql", substr($plain, $at + 1));

my @conn = ('-h', $node->host, '-p', $node->port);

# The alert rows a dump holds ("id|kind|subject" of the open ones, and the
# ids of the cleared ones), read from the dump's own COPY data: the source's
# watchdog goes on after the dump.
sub dumped_alerts
{
    my ($format) = @_;
    my $text = $format eq 'plain' ? $plain
      : `"$bindir/pg_restore" --data-only --table=alert -f - "$tmp/src.dump"`;
    my ($data) = $text =~ /^COPY pgque\.alert [^\n]*\n(.*?)^\\\.$/ms;
    my (@open, @cleared);
    for my $row (split /\n/, $data // '')
    {
        my @f = split /\t/, $row;
        if ($f[7] eq '\\N') { push @open, "$f[0]|$f[1]|$f[2]"; }
        else { push @cleared, $f[0]; }
    }
    # COPY writes rows in their physical order, which an update changes
    @open = sort { ($a =~ /^(\d+)/)[0] <=> ($b =~ /^(\d+)/)[0] } @open;
    return (join("\n", @open), join(',', sort { $a <=> $b } @cleared));
}

my %restore = (
    custom => sub {
        my ($db, $part) = @_;
        my @l = $part ? ('-L', "$tmp/part$part.list") : ();
        return ([ "$bindir/pg_restore", @conn, '-d', $db, @l, "$tmp/src.dump" ]);
    },
    plain => sub {
        my ($db, $part) = @_;
        my $f = $part ? "$tmp/part$part.sql" : "$tmp/src.sql";
        return ([ "$bindir/psql", @conn, '-X', '-q', '-v', 'ON_ERROR_STOP=0', '-d', $db, '-f', $f ]);
    },
);

sub run_restore
{
    my ($cmd, $what) = @_;
    my ($stdout, $stderr);
    my $ok = IPC::Run::run($cmd, '>', \$stdout, '2>', \$stderr);
    ok($ok, "$what exits with 0");
    unlike($stderr, qr/ERROR/, "$what reports no error") or diag($stderr);
}

for my $format ('custom', 'plain')
{
    for my $held (0, 1)
    {
        my $db = "r_${format}_" . ($held ? 'held' : 'whole');
        my ($open, $cleared) = dumped_alerts($format);
        like($open, qr/\|consumer_lagging\|q\/lag\n?/, "$format dump: consumer_lagging is open for the lagging consumer");
        my $started = $node->safe_psql('postgres', 'select now()');
        my $what = "$format restore" . ($held ? ' held before pgque.tick' : '');
        $node->safe_psql('postgres', "create database $db");
        if ($held)
        {
            run_restore($restore{$format}->($db, 1), "$what (first part)");
            ok($node->wait_for_workers($db), "$what: the workers serve the half-restored database");
            # rotation needs three maintenance passes to reach the oldest
            # table; the watchdog gets as many passes to clear alerts
            sleep 6;
            is($node->safe_psql($db, q{select count(*) from pgque.subscription}), '2',
               "$what: the subscriptions are loaded");
            is($node->safe_psql($db, q{select count(*) from pgque.event_1}), $nevents,
               "$what: no event table was truncated while held");
            like($node->safe_psql($db, q{select detail from pgque.status() where component = 'maintenance'}),
                 qr/holding: the queue state is being loaded/, "$what: status() says why the workers hold");
            run_restore($restore{$format}->($db, 2), "$what (second part)");
        }
        else
        {
            run_restore($restore{$format}->($db, 0), $what);
        }
        ok($node->wait_for_workers($db), "$what: the workers serve the restored database");
        # several watchdog passes on the restored state
        sleep 3;
        is($node->safe_psql($db, q{
            select string_agg(alert_id || '|' || kind || '|' || subject, E'\n' order by alert_id)
              from pgque.alert where cleared_at is null}),
           $open, "$what: the dump's open alerts are the same rows, still open");
        is($node->safe_psql($db, q{select coalesce(string_agg(alert_id::text, ',' order by alert_id), '')
                                     from pgque.alert where cleared_at is not null}),
           $cleared, "$what: no alert was cleared");
        is($node->safe_psql($db, qq{select count(*) from pgque.alert where opened_at >= '$started'}), '0',
           "$what: none was opened (or reopened) since the restore began");
        my @got = drain($db, 'lag', $nevents);
        is(scalar(@got), $nevents, "$what: the lagging consumer receives all $nevents events");
        ok(join(',', @got) eq join(',', @want), "$what: the same event ids as in the source, none extra")
          or diag(sprintf('got %d ids (%s .. %s)', scalar(@got), $got[0] // '-', $got[-1] // '-'));
    }
}

$node->stop;
done_testing();
