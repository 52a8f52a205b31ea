# A ticker pass is one transaction, and still gated by the state check
# (ADR 0118).  The check of ADR 0022 (is the queue state whole?) runs in the
# pass's first unit, before that unit's work and in its transaction, not in
# a transaction of its own before it:
#   - the state held (the seal missing, as in a restore that has not
#     finished): commits wake the ticker, and its passes write no tick and
#     say why in status(); sealed again, the next commit's pass ticks;
#   - a pass that ticks one woken queue runs one transaction (counted from
#     the server log at DEBUG5: the ticker's StartTransaction lines); two
#     before (the check, then the visit);
#   - the ticks of a plain, a bucketed and a slot queue, one event per tick
#     (the visit on generic plans now): each tick covers exactly its one
#     event, and each consumer gets every event once, in order;
#   - faults, fsync on, a ledger: the ticker SIGKILLed in the middle of a
#     storm of one-event transactions: nothing lost, nothing twice.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);
use IPC::Run;

my $node = PgqueNode->new_preloaded('pass_one_xact', conf => q{
fsync = on
restart_after_crash = on
log_line_prefix = '%p '
pgque_bgw.enabled = off
pgque_bgw.launcher_naptime = '1s'
pgque_bgw.tick_interval = '10ms'
pgque_bgw.ticker_probe_interval = '3600s'
pgque_bgw.ticker_stalled_after = '3600s'
pgque_bgw.maint_interval = '3600s'
pgque_bgw.watchdog_interval = '3600s'
});
$node->install('postgres');
$node->safe_psql('postgres', q{
    select pgque.create_queue('q');
    select pgque.set_queue_config('q', 'ticker_idle_period', '1 hour');
    select pgque.subscribe('q', 'c');
    -- the seal gone: the state reads as a restore still loading (ADR 0022)
    delete from pgque.state_seal;
});
my $ticks_q = q{select count(*) from pgque.tick t join pgque.queue x on x.queue_id = t.tick_queue
                 where x.queue_name = 'q'};
my $before = $node->safe_psql('postgres', $ticks_q);
$node->safe_psql('postgres', q{alter system set pgque_bgw.enabled = on; select pg_reload_conf();});
ok($node->wait_for_workers('postgres'), 'the workers run');

# ---- 1. held: woken passes write nothing and say why ----
ok(PgqueNode::poll_until(sub {
	$node->safe_psql('postgres', q{select detail from pgque.status() where component = 'ticker'})
	  =~ /holding: the queue state is being loaded/;
}), 'the ticker holds: status() says why');
for my $i (1 .. 3)
{
	$node->safe_psql('postgres', qq{select pgque.send('q', 'held-$i')});
	sleep 0.3;
}
sleep 1;
is($node->safe_psql('postgres', $ticks_q), $before, 'held: three commits woke the ticker, no tick was written');
like($node->safe_psql('postgres', q{select detail from pgque.status() where component = 'ticker'}),
	qr/holding: the queue state is being loaded/, 'held: the woken passes still say why');
$node->safe_psql('postgres', q{insert into pgque.state_seal default values});
$node->safe_psql('postgres', q{select pgque.send('q', 'after-seal')});
ok(PgqueNode::poll_until(sub { $node->safe_psql('postgres', $ticks_q) > $before }),
	'sealed: the next commit is ticked');
# the first tick after the seal may come from a pass the seal's own
# commit woke, before 'after-seal' commits: its event is then in the next
# batch (PostgreSQL 17 under load), so the batches are read until it came
my @got;
PgqueNode::poll_until(sub {
	my ($p, $b) = split /\|/, $node->safe_psql('postgres', q{
	    with m as materialized (select * from pgque.receive('q', 'c', 100))
	    select coalesce(string_agg(payload, ',' order by msg_id), '') || '|' || coalesce(max(batch_id)::text, '')
	      from m}), 2;
	push @got, split(/,/, $p) if $p ne '';
	$node->safe_psql('postgres', "select pgque.ack($b)") if defined $b && $b ne '';
	return grep { $_ eq 'after-seal' } @got;
});
is(join(',', @got), 'held-1,held-2,held-3,after-seal', 'sealed: the events sent while held are delivered, once');

# ---- 2. a pass that ticks one woken queue is one transaction ----
my $ticker_pid = $node->safe_psql('postgres', q{
    select pid from pg_stat_activity where backend_type in ('pgque_bgw ticker', 'pgque_bgw worker')});
$node->safe_psql('postgres', q{alter system set log_min_messages = debug5; select pg_reload_conf();});
sleep 1;
my $offset = -s $node->logfile;
my $t0 = $node->safe_psql('postgres', $ticks_q);
my $started = time;
for my $i (1 .. 10)
{
	my $n = $node->safe_psql('postgres', $ticks_q);
	$node->safe_psql('postgres', qq{select pgque.send('q', 'one-$i')});
	PgqueNode::poll_until(sub { $node->safe_psql('postgres', $ticks_q) > $n });
}
my $ticks = $node->safe_psql('postgres', $ticks_q) - $t0;
my $secs = time - $started;
$node->safe_psql('postgres', q{alter system reset log_min_messages; select pg_reload_conf();});
my $log = substr(slurp_file($node->logfile), $offset);
my $xacts = () = $log =~ /^$ticker_pid DEBUG:  StartTransaction\(/mg;
note "$ticks ticks in $secs s, the ticker's transactions: $xacts";
is($ticks, 10, 'ten commits, ten ticks (one per pass)');
# one per pass, and the exit check's once a second (ADR 0026); two a pass before
cmp_ok($xacts, '<=', $ticks + int($secs) + 2, 'a pass that ticks one queue is one transaction');
cmp_ok($xacts, '>=', $ticks, '... and every tick had its transaction');
# their events consumed (the ledger of part 4 starts from an empty queue)
for (1 .. 20)
{
	last if $node->safe_psql('postgres', q{
	    select count(pgque.ack(b)) from (select max(batch_id) as b from pgque.receive('q', 'c', 1000)) x
	     where b is not null}) eq '0';
}

# ---- 3. the ticks of a plain, a bucketed and a slot queue ----
$node->safe_psql('postgres', q{
    select pgque.create_queue('plain');
    select pgque.subscribe('plain', 'c');
    select pgque.create_queue('bucketed');
    select pgque.set_queue_config('bucketed', 'partition_buckets', '4');
    select pgque.subscribe('bucketed', 'c');
    select pgque.create_queue('slotted');
    select pgque.subscribe_slot('slotted', 'pc', 0, 1);
    select pgque.claim_slot('slotted', 'pc', 0, 'w1', '1 hour');
    create table sent3 (queue text, ev_id bigint);
});
for my $q ('plain', 'bucketed', 'slotted')
{
	my $tq = qq{select count(*) from pgque.tick t join pgque.queue x on x.queue_id = t.tick_queue
	             where x.queue_name = '$q'};
	for my $i (1 .. 5)
	{
		my $n = $node->safe_psql('postgres', $tq);
		$node->safe_psql('postgres', qq{
		    insert into sent3 select '$q', pgque.send('$q', 'e', 'p$i', 'key-$i')});
		ok(PgqueNode::poll_until(sub { $node->safe_psql('postgres', $tq) > $n }), "$q: event $i ticked");
	}
	my $events = $node->safe_psql('postgres', qq{select queue_data_pfx from pgque.queue where queue_name = '$q'});
	# each tick after the first covers exactly one more event: its
	# position is its event's id, and its snapshot sees it, the one
	# before does not
	is($node->safe_psql('postgres', qq{
	    with t as (select t.tick_id, t.tick_event_seq, t.tick_snapshot,
	                      lag(t.tick_snapshot) over (order by t.tick_id) as prev
	                 from pgque.tick t join pgque.queue x on x.queue_id = t.tick_queue
	                where x.queue_name = '$q')
	    select count(*) from t join $events e on e.ev_id = t.tick_event_seq
	     where t.prev is not null
	       and pg_visible_in_snapshot(e.ev_txid, t.tick_snapshot)
	       and not pg_visible_in_snapshot(e.ev_txid, t.prev)
	       and e.ev_id in (select ev_id from sent3 where queue = '$q')}),
		'5', "$q: each tick covers its one event, the tick before it does not");
	my $recv = $q eq 'slotted'
	  ? q{pgque.receive_partitioned('slotted', 'pc', 0, 1, 'w1', 100)}
	  : qq{pgque.receive('$q', 'c', 100)};
	my $ack = $q eq 'slotted'
	  ? q{select pgque.ack_partitioned('slotted', 'pc', 0, 1, 'w1')}
	  : q{select pgque.ack(max(batch_id)) from pgque.receive('} . $q . q{', 'c', 100)};
	my @got;
	for (1 .. 20)
	{
		my $r = $node->safe_psql('postgres', "select coalesce(string_agg(msg_id::text, ',' order by msg_id), '') from $recv");
		last if $r eq '';
		push @got, $r;
		$node->safe_psql('postgres', $ack);
	}
	is(join(',', @got), $node->safe_psql('postgres', qq{
	    select string_agg(ev_id::text, ',' order by ev_id) from sent3 where queue = '$q'}),
		"$q: every event once, in order");
}

# ---- 4. the ticker SIGKILLed mid-storm: nothing lost, nothing twice ----
$node->make_ledger('q');
$node->safe_psql('postgres', q{
    create procedure storm(n int) language plpgsql as $$
    begin
        for i in 1 .. n loop
            insert into sent values (pgque.send('q', 'storm'));
            commit;
        end loop;
    end $$;
});
my ($out, $err) = ('', '');
my $h = IPC::Run::start(
	[ 'psql', '-X', '-q', '-d', $node->connstr('postgres'), '-c', 'call storm(100000)' ],
	'>', \$out, '2>', \$err);
ok(PgqueNode::poll_until(sub { $node->safe_psql('postgres', 'select count(*) from sent') > 300 }),
	'the storm runs');
$ticker_pid = $node->safe_psql('postgres', q{
    select pid from pg_stat_activity where backend_type in ('pgque_bgw ticker', 'pgque_bgw worker')});
ok($ticker_pid =~ /^\d+$/, 'the ticker has a pid');
$node->kill9_and_wait($ticker_pid);
$h->finish;
ok(PgqueNode::wait_back($node, 'postgres'), 'the server is back after the ticker\'s kill');
ok($node->wait_for_workers('postgres'), 'the workers run again');
# the storm's session was ended by the crash restart: what it committed is in sent
$node->safe_psql('postgres', q{call storm(50)});
my $n_sent = $node->safe_psql('postgres', q{select count(*) from sent});
cmp_ok($n_sent, '>', 50, "the storm committed $n_sent events around the kill");
ok(PgqueNode::poll_until(sub {
	$node->safe_psql('postgres', 'select drain()');
	$node->safe_psql('postgres', 'select count(*) from acked') >= $n_sent;
}), 'every sent event is acked after the restart');
is($node->safe_psql('postgres', q{
    select count(*) from sent s where not exists (select from acked a where a.ev_id = s.ev_id)}),
	'0', 'nothing sent was lost');
is($node->safe_psql('postgres', q{select count(*) - count(distinct ev_id) from acked}), '0',
	'nothing was delivered twice');
is($node->safe_psql('postgres', q{
    select count(*) from acked a where not exists (select from sent s where s.ev_id = a.ev_id)}),
	'0', 'nothing acked that was not sent (rolled back by the crash)');

$node->stop;
done_testing();
