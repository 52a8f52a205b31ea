# tap-lane: timed
# Second reader of receive_wait (ADR 0102, 0107): what a waiting call holds.
#   - A waiter woken by an idle tick (a window without events) finishes the
#     window, which locks its consumer's row and, the row updated twice in
#     the transaction, takes a key share of the queue's row.  Rotation's
#     step 1 takes that row FOR UPDATE: a waiter that went back to sleep
#     held rotation (and the maint worker with it) for up to its timeout at
#     each idle tick, and two consumers waiting in turn could hold it for
#     ever.  The call returns nothing instead (ADR 0107): rotation's lock is
#     taken at once while a consumer waits.
#   - A role with only LOGIN, in another database, ran PREPARE TRANSACTION
#     and COMMIT PREPARED in a loop: every COMMIT PREPARED woke every
#     waiter of every database for a look (ADR 0102 wakes all buckets: the
#     committing session does not know the prepared transaction's queues).
#     It wakes them only once a transaction that ticked was prepared (ADR
#     0107), which no pgque path can do (a tick notifies its channel, and a
#     transaction that notified cannot be prepared).
#   - A waiter whose consumer is unsubscribed while it waits (it holds no
#     lock: the unsubscribe does not wait) gets a clear error at its next
#     look, and the server is fine.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes qw(time);

my $node = PgqueNode->new_preloaded('attack3_wait_locks', conf => q{
pgque_bgw.launcher_naptime = '1s'
pgque_bgw.ticker_stalled_after = '3600s'
max_prepared_transactions = 5
track_functions = 'all'
});
$node->install('postgres');
ok($node->wait_for_workers('postgres'), 'the workers run');

$node->safe_psql('postgres', q{
    select pgque.create_queue('r');
    select pgque.set_queue_config('r', 'ticker_idle_period', '1 hour');
    select pgque.subscribe('r', 'c'), pgque.subscribe('r', 'd');
    select pgque.send('r', 'first');
    select pgque.ticker('r');
    select pgque.ack(batch_id) from pgque.receive('r', 'c', 10) limit 1;
    select pgque.ack(batch_id) from pgque.receive('r', 'd', 10) limit 1;
});

sub psql { return $node->safe_psql('postgres', $_[0]); }

# a receive_wait in a session of its own -> "events|seconds"
sub start_wait
{
	my ($c, $t) = @_;
	my %w = (out => '', err => '', t0 => time());
	$w{h} = IPC::Run::start(['psql', '-X', '-A', '-t', '-q', '-d', $node->connstr('postgres'),
	                         '-c', "select count(*) from pgque.receive_wait('r', '$c', 10, '$t')"],
	                        '>', \$w{out}, '2>', \$w{err});
	return \%w;
}

sub finish_wait
{
	my ($w) = @_;
	$w->{h}->finish;
	chomp(my $o = $w->{out});
	return ($o, time() - $w->{t0}, $w->{err});
}

sub waiters
{
	return psql(q{select count(*) from pg_stat_activity where wait_event_type = 'Extension'
	               and query like '%receive_wait%' and pid <> pg_backend_pid()});
}

# until n waiters sleep; when they do not, what every backend does and
# the locks waited for (PostgreSQL 18 under load once saw no waiter for
# 180 s, and the waiter outlived its 20 s timeout: say where it was)
sub wait_for_waiters
{
	my ($n, $name) = @_;
	return pass($name) if PgqueNode::poll_until(sub { waiters() == $n });
	fail($name);
	diag(psql(q{select pid, backend_type, state, wait_event_type, wait_event, backend_xid,
	                   left(regexp_replace(query, '\s+', ' ', 'g'), 80)
	              from pg_stat_activity where pid <> pg_backend_pid()}));
	diag(psql(q{select locktype, relation::regclass, transactionid, mode, pid,
	                   pg_blocking_pids(pid) from pg_locks where not granted}));
	return 0;
}

# an idle tick: a window without events; then until every waiter it woke
# has finished the window (it ended, or it wrote and sleeps again)
sub idle_tick
{
	psql(q{select pgque.force_tick('r')});
	psql(q{select pgque.ticker('r')});
	PgqueNode::poll_until(sub {
		psql(q{select count(*) from pg_stat_activity where query like '%receive_wait%'
		        and pid <> pg_backend_pid()
		        and not (backend_xid is not null and wait_event_type = 'Extension')}) == 0 });
}

# ---- an idle tick does not leave a waiter holding rotation's lock ----
my $w = start_wait('c', '20 s');
wait_for_waiters(1, 'a consumer waits');
is(psql(q{set lock_timeout = '2s'; select 1 from pgque.queue where queue_name = 'r' for update}), '1',
   'while it waits and nothing came, rotation\'s lock of the queue row is taken at once');
idle_tick();
my $r = $node->psql('postgres', q{set lock_timeout = '3s'; select pgque.maint_rotate_tables_step1('r') >= 0});
is($r, 0, 'rotation step 1 takes the queue row after the idle tick woke the waiter');
my ($n, $secs, $err) = finish_wait($w);
is($n, '0', 'woken by the idle tick, it returns nothing');
cmp_ok($secs, '<', 15, "and returns it at once, not at its timeout ($secs s)");

# two consumers waiting at once, woken by one idle tick: neither keeps the
# queue row once the tick woke them
psql(q{select count(*) from pgque.receive('r', 'd', 10)});
my $wc = start_wait('c', '20 s');
my $wd = start_wait('d', '20 s');
wait_for_waiters(2, 'two consumers wait');
idle_tick();
$r = $node->psql('postgres', q{set lock_timeout = '3s'; select 1 from pgque.queue where queue_name = 'r' for update});
is($r, 0, 'the queue row is free for rotation after the idle tick woke both');
my ($nc, $sc) = finish_wait($wc);
my ($nd, $sd) = finish_wait($wd);
is("$nc,$nd", '0,0', 'both return nothing');
cmp_ok($sc > $sd ? $sc : $sd, '<', 15, 'both at once, not at their timeout');

# ---- two-phase commits of a role with only LOGIN wake no waiter ----
$node->safe_psql('postgres', q{create role outsider login; create database elsewhere});
# the looks of the waiters' calls, counted when their backends exit
sub looks
{
	return psql(q{select coalesce(sum(calls), 0) from pg_stat_user_functions where funcname = '_plain_receive_open'});
}
my $before = looks();
$wc = start_wait('c', '8 s');
$wd = start_wait('d', '8 s');
wait_for_waiters(2, 'two consumers wait');
my $loop = join('', map { "begin; prepare transaction 'x'; commit prepared 'x';\n" } 1 .. 100);
my ($out, $errs) = ('', '');
IPC::Run::run(['psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('elsewhere'), '-U', 'outsider'],
              '<', \$loop, '>', \$out, '2>', \$errs);
is($errs, '', '100 two-phase commits of the outsider in another database');
($nc, $sc) = finish_wait($wc);
($nd, $sd) = finish_wait($wd);
is("$nc,$nd", '0,0', 'the waiters return nothing at their timeout');
my $looks;
PgqueNode::poll_until(sub { $looks = looks() - $before; $looks >= 4 });
cmp_ok($looks, '<=', 8, "they looked $looks times, not once per two-phase commit");

# a tick is never prepared: the tick notifies its channel, and PostgreSQL
# refuses to PREPARE a transaction that did (so no COMMIT PREPARED needs
# to wake anyone today; PREPARED_TICKS stays 0); the waiter is woken by the
# next committed tick
$w = start_wait('c', '20 s');
wait_for_waiters(1, 'c waits');
my ($rc, $o2, $e2) = $node->psql('postgres',
	q{begin; select pgque.force_tick('r'); select pgque.ticker('r'); prepare transaction 'tick';});
like($e2, qr/cannot PREPARE a transaction that has executed LISTEN, UNLISTEN, or NOTIFY/,
     'a transaction that ticked cannot be prepared');
is(waiters(), '1', 'the waiter still waits');
idle_tick();
($n, $secs, $err) = finish_wait($w);
cmp_ok($secs, '<', 15, "a committed tick wakes it ($secs s)");

# ---- a waiter whose consumer is unsubscribed while it waits ----
$w = start_wait('c', '20 s');
wait_for_waiters(1, 'c waits');
$r = $node->psql('postgres', q{set lock_timeout = '3s'; select pgque.unsubscribe('r', 'c')});
is($r, 0, 'its unsubscribe does not wait for it');
psql(q{select pgque.send('r', 'second')});
psql(q{select pgque.ticker('r')});
($n, $secs, $err) = finish_wait($w);
like($err, qr/not subscriber/i, "the waiter ends with a clear error at its next look ($err)");
cmp_ok($secs, '<', 15, 'at the tick, not at its timeout');
is(psql(q{select count(*) from pgque.receive('r', 'd', 10)}), '1', 'the other consumer reads on');

done_testing();
