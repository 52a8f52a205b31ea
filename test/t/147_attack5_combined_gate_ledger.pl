# The second reader's attacks on a ticker pass in one transaction (ADR
# 0118; ADR 0119) where TAP 144 does not go: the combined worker (one
# process running the ticker, maintenance and watchdog loops, whose ticker
# passes also run between the units of the other loops' passes), with a
# state check that is now folded into the pass's first unit:
#  - the state held (the seal missing): maintenance and watchdog passes
#    run every second with the ticker's passes between their units, and no
#    tick is written; sealed again, the events are ticked and delivered once;
#  - a ledger (fsync on) across what a tick's snapshot must keep apart: a
#    long transaction open over many ticks, a prepared transaction that
#    outlives a crash restart, subtransactions rolled back, rotations every
#    second, and the combined worker SIGKILLed twice mid-storm: every
#    committed send acked once, nothing rolled back delivered.
# tap-lane: timed
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);
use IPC::Run;

my $node = PgqueNode->new_preloaded('a5_combined', conf => q{
fsync = on
restart_after_crash = on
max_prepared_transactions = 4
pgque_bgw.enabled = off
pgque_bgw.worker_mode = 'combined'
pgque_bgw.launcher_naptime = '1s'
pgque_bgw.tick_interval = '10ms'
pgque_bgw.ticker_probe_interval = '1s'
pgque_bgw.maint_interval = '1s'
pgque_bgw.watchdog_interval = '1s'
});
$node->install('postgres');
$node->safe_psql('postgres', q{
    select pgque.create_queue('q');
    select pgque.set_queue_config('q', 'ticker_idle_period', '1 hour');
    select pgque.subscribe('q', 'c');
    delete from pgque.state_seal;
});
my $ticks_q = q{select count(*) from pgque.tick t join pgque.queue x on x.queue_id = t.tick_queue
                 where x.queue_name = 'q'};
my $before = $node->safe_psql('postgres', $ticks_q);
$node->safe_psql('postgres', q{alter system set pgque_bgw.enabled = on; select pg_reload_conf();});
ok($node->wait_for_workers('postgres', 1), 'the worker runs');
is($node->safe_psql('postgres', q{
    select string_agg(backend_type, ',') from pg_stat_activity where backend_type like 'pgque_bgw %'
       and backend_type <> 'pgque_bgw launcher'}), 'pgque_bgw worker', 'one combined worker');

# ---- 1. held: no tick from any of the combined worker's passes ----
ok(PgqueNode::poll_until(sub {
	$node->safe_psql('postgres', q{select detail from pgque.status() where component = 'ticker'})
	  =~ /holding: /;
}), 'the ticker holds: status() says why');
for my $i (1 .. 5)
{
	$node->safe_psql('postgres', qq{select pgque.send('q', 'held-$i')});
	sleep 0.5;
}
sleep 1.5;     # a maintenance and a watchdog pass at least, ticker passes between their units
is($node->safe_psql('postgres', $ticks_q), $before, 'held: five commits over 4 s of passes, no tick written');
$node->safe_psql('postgres', q{insert into pgque.state_seal default values});
$node->safe_psql('postgres', q{select pgque.send('q', 'after-seal')});
ok(PgqueNode::poll_until(sub { $node->safe_psql('postgres', $ticks_q) > $before }), 'sealed: ticked');
is($node->safe_psql('postgres', q{
    select string_agg(payload, ',' order by msg_id) from pgque.receive('q', 'c', 100)}),
   'held-1,held-2,held-3,held-4,held-5,after-seal', 'the events sent while held are delivered, once, in order');
$node->safe_psql('postgres', q{select pgque.ack(max(batch_id)) from pgque.receive('q', 'c', 100)});

# ---- 2. the ledger ----
$node->make_ledger('q');
$node->safe_psql('postgres', q{
    select pgque.set_queue_config('q', 'rotation_period', '1 second');
    create procedure storm(n int, tag text) language plpgsql as $$
    begin
        for i in 1 .. n loop
            insert into sent values (pgque.send('q', tag || i));
            if i % 7 = 0 then
                begin       -- a subtransaction rolled back: its event never delivered
                    perform pgque.send('q', 'rolledback-' || tag || i);
                    raise exception 'roll back';
                exception when raise_exception then null;
                end;
            end if;
            commit;
        end loop;
    end $$;
});
my $switch0 = $node->safe_psql('postgres', q{select queue_switch_time from pgque.queue where queue_name = 'q'});
# a long transaction, open across the storm, and a prepared one
my $long = $node->background_psql('postgres');
$long->query_safe(q{begin; insert into sent select pgque.send('q', 'long-' || g) from generate_series(1, 50) g});
$node->safe_psql('postgres', q{
    begin;
    insert into sent select pgque.send('q', 'prepared-' || g) from generate_series(1, 20) g;
    prepare transaction 'a5_p';
});
my $consumer_done = 0;
my $round = sub {
	my ($tag) = @_;
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start(
		[ 'psql', '-X', '-q', '-d', $node->connstr('postgres'), '-c', "call storm(100000, '$tag')" ],
		'>', \$out, '2>', \$err);
	ok(PgqueNode::poll_until(sub {
		$node->safe_psql('postgres', qq{select count(*) from sent}) > 300 * ($consumer_done + 1) }),
	   "storm $tag runs");
	$node->safe_psql('postgres', 'select drain()');
	my $pid = $node->safe_psql('postgres', q{
	    select pid from pg_stat_activity where backend_type = 'pgque_bgw worker'});
	ok($pid =~ /^\d+$/, "the combined worker has a pid ($tag)");
	$node->kill9_and_wait($pid);
	$h->finish;
	ok(PgqueNode::wait_back($node, 'postgres'), "the server is back after the worker's kill ($tag)");
	ok($node->wait_for_workers('postgres', 1), "the worker runs again ($tag)");
	$consumer_done++;
};
$round->('a-');
# the long transaction's session ended with the crash restart: its events were never committed
$long->{run}->kill_kill;
$node->safe_psql('postgres', 'select drain()');
$round->('b-');
is($node->safe_psql('postgres', q{select count(*) from pg_prepared_xacts where gid = 'a5_p'}), '1',
   'the prepared transaction outlived two crash restarts');
$node->safe_psql('postgres', 'select drain()');
# a second long transaction, committed this time, after ticks went past its start
my $long2 = $node->background_psql('postgres');
$long2->query_safe(q{begin; insert into sent select pgque.send('q', 'long2-' || g) from generate_series(1, 30) g});
$node->safe_psql('postgres', q{call storm(200, 'c-')});
$node->safe_psql('postgres', 'select drain()');
$long2->query_safe('commit');
$long2->quit;
$node->safe_psql('postgres', q{commit prepared 'a5_p'});
$node->safe_psql('postgres', q{call storm(50, 'd-')});
my $n_sent = $node->safe_psql('postgres', q{select count(*) from sent});
note "sent (committed) $n_sent, of them long " . $node->safe_psql('postgres', q{
    select count(*) from sent s join pgque.event_template e using (ev_id) where e.ev_data like 'long%'})
  . ", prepared " . $node->safe_psql('postgres', q{
    select count(*) from sent s join pgque.event_template e using (ev_id) where e.ev_data like 'prepared%'});
ok(PgqueNode::poll_until(sub {
	$node->safe_psql('postgres', 'select drain()');
	$node->safe_psql('postgres', 'select count(*) from acked') >= $n_sent;
}), "every sent event acked ($n_sent)");
is($node->safe_psql('postgres', q{
    select count(*) from sent s where not exists (select from acked a where a.ev_id = s.ev_id)}),
   '0', 'nothing sent was lost: the long, the prepared and the storm\'s events all delivered');
is($node->safe_psql('postgres', q{select count(*) - count(distinct ev_id) from acked}), '0',
   'nothing was delivered twice');
is($node->safe_psql('postgres', q{
    select count(*) from acked a where not exists (select from sent s where s.ev_id = a.ev_id)}),
   '0', 'nothing acked that was not committed (rolled-back subtransactions, the crashed long transaction)');
isnt($node->safe_psql('postgres', q{select queue_switch_time from pgque.queue where queue_name = 'q'}),
     $switch0, 'the queue rotated during the run');

$node->stop;
done_testing();
