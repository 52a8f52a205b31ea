# A full disk heals (ADR 0025): a queue whose event tables live in a
# tablespace on a small tmpfs is filled by producers (a clean "no space"
# error, nothing lost); once the consumer has drained it, rotation reclaims
# the space by itself (its space reserve pays for the new files TRUNCATE
# makes), with a maint_failed alert naming the error meanwhile, cleared
# after; producers then send again.
#
# test/run.sh mounts the tmpfs when it runs as root (PGQUE_TMPFS); without
# root this test cannot run (docs/operations.md has the manual procedure).
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);

my $dir = $ENV{PGQUE_TMPFS} // '';
if (!$ENV{PGQUE_AS_ROOT} && !-d $dir)
{
    plan skip_all => 'needs a tmpfs mounted by test/run.sh as root (manual procedure: docs/operations.md)';
}
ok(-d $dir && -w $dir, "a writable tmpfs at '$dir'") or BAIL_OUT('no tmpfs: test/run.sh could not mount one');

my $node = PgqueNode->new_preloaded('full_disk', conf => qq{
pgque_bgw.launcher_naptime = '1s'
pgque_bgw.maint_interval = '1s'
pgque_bgw.watchdog_interval = '1s'
pgque_bgw.lag_alert_after = '1h'
autovacuum = off
});
$node->safe_psql('postgres', qq{create tablespace small location '$dir/ts'})
  if mkdir("$dir/ts");
$node->safe_psql('postgres', q{create extension pgque_bgw});
# the queue's tables belong to pgque_owner, which creates them and their
# space reserve there (ADR 0042, docs/operations.md)
$node->safe_psql('postgres', q{grant create on tablespace small to pgque_owner});
$node->poll_query_until('postgres', q{
    select count(*) = 3 from pg_stat_activity where backend_type like 'pgque_bgw %' and datname = 'postgres'});

# the queue's event tables in the small tablespace (docs/operations.md)
$node->safe_psql('postgres', q{
    set default_tablespace = small;
    select pgque.create_queue('fd');
    reset default_tablespace;
    select pgque.set_queue_config('fd', 'rotation_period', '1 second');
    select pgque.set_queue_config('fd', 'ticker_idle_period', '1 second');
    select pgque.subscribe('fd', 'c');
});
my $qid = $node->safe_psql('postgres', q{select queue_id from pgque.queue where queue_name = 'fd'});
is($node->safe_psql('postgres', qq{
       select count(*) from pg_class where relname ~ '^event_${qid}_' and reltablespace <> 0}),
   '6', 'the three event tables and their indexes live in the small tablespace');
ok($node->poll_query_until('postgres', qq{
       select pg_relation_size(c.oid) > 0 from pg_class c
        where c.oid = to_regclass('pgque.space_reserve_$qid')
          and c.reltablespace = (select oid from pg_tablespace where spcname = 'small')}),
   'maintenance keeps the queue\'s space reserve there');

# --- producers fill it ------------------------------------------------------------
my ($sent, $err) = (0, '');
my $t0 = time();
while (time() < $t0 + 300)
{
    my ($ret, $out, $e) = $node->psql('postgres', qq{
        select count(*) from unnest(pgque.send_batch('fd', 'fill',
               array(select string_agg(md5(random()::text || i), '')
                       from generate_series(1, 100) g, generate_series(1, 60) i group by g)))});
    if ($ret != 0)
    {
        $err = $e;
        last;
    }
    $sent += $out;
}
like($err, qr/could not extend file.*No space left on device/, 'a producer gets "no space left on device"');
# the last pages of the file system, as any other user of a full disk would
system("dd if=/dev/zero of=$dir/filler bs=4k 2>/dev/null");
# single sends fill what is left in the pages already there
my $e = '';
for (1 .. 1000)
{
    my ($ret, $out);
    ($ret, $out, $e) = $node->psql('postgres', q{
        \set VERBOSITY verbose
        select pgque.send('fd', repeat(md5(random()::text), 60))});
    last if $ret != 0;
    $sent++;
}
like($e, qr/53100/, 'with SQLSTATE 53100 (disk_full)');
diag("figure: $sent events of 2 kB filled the 8 MB tablespace");
sleep(3);    # some maintenance passes on the full disk, the consumer far behind

# --- the consumer drains everything; rotation recovers by itself ---------------
# one receive and ack of the consumer: the number of events
sub consume
{
    my $r = $node->safe_psql('postgres', q{
        select batch_id || ' ' || count(*) from pgque.receive('fd', 'c', 10000) group by batch_id});
    my ($batch, $n) = $r eq '' ? (undef, 0) : split(/ /, $r);
    $node->safe_psql('postgres', "select pgque.ack($batch)") if defined $batch;
    return $n;
}

# the consumer keeps polling, as a live one does, until the query is true
sub consume_until
{
    my ($sql, $secs) = @_;
    my $deadline = time() + $secs;
    while (time() < $deadline)
    {
        consume();
        return 1 if $node->safe_psql('postgres', $sql) eq 't';
        sleep(0.2);
    }
    return 0;
}

my $got = 0;
$t0 = time();
while (time() < $t0 + 120)
{
    my $n = consume();
    $got += $n;
    last if $got >= $sent && $n == 0;
    sleep(0.2) if $n == 0;
}
is($got, $sent, 'the consumer receives every committed event');
my $full = $node->safe_psql('postgres', q{select pg_tablespace_size('small')});

my $t1 = time();
ok(consume_until(q{select count(*) > 0 from pgque.alert where kind = 'maint_failed' and queue_name = 'fd'}, 120),
   'maint_failed opens meanwhile');
like($node->safe_psql('postgres', q{
         select format('%s|%s|%s', details->>'step', details->>'sqlstate', details->>'error')
           from pgque.alert where kind = 'maint_failed' and queue_name = 'fd' order by alert_id limit 1}),
     qr/^rotation step 1\|53100\|.*No space left on device/, 'naming the step and the error');
ok(consume_until(qq{select pg_tablespace_size('small') < $full / 4}, 120),
   'rotation reclaims the space by itself');
diag(sprintf('figure: space reclaimed %.1f s after the drain; tablespace %d kB full, %d kB after',
             time() - $t1, $full / 1024,
             $node->safe_psql('postgres', q{select pg_tablespace_size('small')}) / 1024));
ok(consume_until(q{select count(*) = 0 from pgque.alerts where kind = 'maint_failed'}, 120),
   'and the alert clears');
is($node->safe_psql('postgres', q{
       select count(*) from pgque.alert where kind = 'maint_failed' and cleared_at is null}),
   '0', 'no maint_failed stays open');
like(slurp_file($node->logfile), qr/space reserve is freed for the next attempt/,
     'the server log says the space reserve was used');

# --- producers send again; the reserve is back -------------------------------------
$node->safe_psql('postgres', q{select pgque.send('fd', 'after')});
my $back;
$t0 = time();
while (time() < $t0 + 60)
{
    $back = $node->safe_psql('postgres', q{select string_agg(payload, ',') from pgque.receive('fd', 'c', 100)});
    last if defined $back && $back ne '';
    sleep(0.2);
}
is($back, 'after', 'a send after the recovery is delivered');
ok($node->poll_query_until('postgres', qq{
       select pg_relation_size('pgque.space_reserve_$qid') >= 16 * 8192}),
   'maintenance filled the space reserve again');

$node->safe_psql('postgres', q{select pgque.drop_queue('fd', true)});
is($node->safe_psql('postgres', qq{select to_regclass('pgque.space_reserve_$qid') is null}), 't',
   'drop_queue drops the reserve');
unlink("$dir/filler");
$node->safe_psql('postgres', q{drop tablespace small});
$node->stop;
done_testing();
