# The ticker's visit in C (ADR 0123) under faults, with a ledger.  Four
# producers send keyed events, one per transaction, each recorded in the
# transaction of its send (sent), into a plain, a bucketed (4 buckets), a
# partitioned (2 slots) and a cooperative queue (two members), while the
# worker ticks them with the C visit (tick_interval 10 ms: about a tick per
# event).  Meanwhile the ticker is SIGKILLed twice and the postmaster once
# (fsync on, restart_after_crash on), and the consumers drain between the
# kills, each batch's rows recorded in the transaction of its ack (acked).
# Afterwards: every event sent is acked exactly once (nothing lost,
# nothing twice, nothing acked that no committed send wrote), and each
# key's events came in the order they were sent.  The worker's visits wrote
# the ticks: no pgque.ticker() call here.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use IPC::Run;

$SIG{PIPE} = 'IGNORE';
my $node = PgqueNode->new_preloaded('tick_in_c_ledger', conf => q{
fsync = on
restart_after_crash = on
pgque_bgw.launcher_naptime = '1s'
pgque_bgw.tick_interval = '10ms'
pgque_bgw.maint_interval = '3600s'
pgque_bgw.ticker_stalled_after = '3600s'
});
$node->install('postgres');
$node->safe_psql('postgres', q{
    select pgque.create_queue('pl');
    select pgque.subscribe('pl', 'c');
    select pgque.create_queue('bk');
    select pgque.set_queue_config('bk', 'partition_buckets', '4');
    select pgque.subscribe('bk', 'c');
    select pgque.create_queue('sl');
    select pgque.subscribe_partitioned('sl', 'pc', 2);
    select pgque.create_queue('co');
    select pgque.register_subconsumer('co', 'g', 'm' || i) from generate_series(1, 2) i;
    create table sent (q text, ev_id bigint, key text, n int, primary key (q, ev_id));
    create table acked (seq bigserial, q text, ev_id bigint, key text);
    -- a producer: keys k0..k7 in turn, each event its own transaction
    create procedure produce(i_q text, i_n int) language plpgsql as $$
    declare
        k text;
    begin
        for i in 1 .. i_n loop
            k := 'k' || (i % 8);
            insert into sent values (i_q, pgque.send(i_q, 'e', i_q || '-' || i, k), k, i);
            commit;
        end loop;
    end $$;
    -- a consumer's pass: every ready batch, its rows and its ack in one transaction
    create function drain() returns int8 language plpgsql as $$
    declare
        n   int8 := 0;
        b   bigint;
        k   int8;
        s   int4;
        qn  text;
    begin
        foreach qn in array array['pl', 'bk'] loop
            loop
                with r as (select * from pgque.receive(qn, 'c', 1000)),
                     ins as (insert into acked (q, ev_id, key) select qn, r.msg_id, r.extra1 from r)
                select max(r.batch_id), count(*) into b, k from r;
                exit when b is null;
                perform pgque.ack(b);
                n := n + k;
            end loop;
        end loop;
        for s in 0 .. 1 loop
            perform pgque.claim_slot('sl', 'pc', s, 'w', '1 hour');
            loop
                with r as (select * from pgque.receive_partitioned('sl', 'pc', s, 2, 'w', 1000)),
                     ins as (insert into acked (q, ev_id, key) select 'sl', r.msg_id, r.extra1 from r)
                select count(*) into k from r;
                exit when k = 0;
                perform pgque.ack_partitioned('sl', 'pc', s, 2, 'w');
                n := n + k;
            end loop;
        end loop;
        for i in 1 .. 2 loop
            loop
                with r as (select * from pgque.receive_coop('co', 'g', 'm' || i, 1000)),
                     ins as (insert into acked (q, ev_id, key) select 'co', r.msg_id, r.extra1 from r)
                select max(r.batch_id), count(*) into b, k from r;
                exit when b is null;
                perform pgque.ack(b);
                n := n + k;
            end loop;
        end loop;
        return n;
    end $$;
});
ok($node->wait_for_workers('postgres'), 'the workers run');

my $psql = $node->config_data('--bindir') . '/psql';
my ($host, $port) = ($node->host, $node->port);
my @queues = ('pl', 'bk', 'sl', 'co');
# the producers: restarted after the crash restart ends their sessions
sub producers
{
	my ($n) = @_;
	return map {
		IPC::Run::start([ $psql, '-X', '-q', '-h', $host, '-p', $port, '-d', 'postgres',
						  '-c', "call produce('$_', $n)" ], '>', '/dev/null', '2>', '/dev/null')
	} @queues;
}
sub sent_count { return $node->safe_psql('postgres', 'select count(*) from sent'); }
sub ticker_pid
{
	return $node->safe_psql('postgres',
		q{select pid from pg_stat_activity where backend_type = 'pgque_bgw ticker' and datname = 'postgres'});
}

my $t0 = time;
my @p = producers(100000);
my $ticks_by_worker = q{select count(*) from pgque.tick t join pgque.queue q on q.queue_id = t.tick_queue
                         where q.queue_name in ('pl', 'bk', 'sl', 'co')};
for my $round (1 .. 2)
{
	my $at = sent_count() + 300;
	ok($node->poll_query_until('postgres', "select count(*) >= $at from sent"), "round $round: the producers run");
	$node->safe_psql('postgres', 'select drain()');
	my $pid = ticker_pid();
	ok($pid =~ /^\d+$/, "round $round: the ticker has a pid");
	$node->kill9_and_wait($pid);
	ok(PgqueNode::wait_back($node, 'postgres'), "round $round: the server is back after the ticker's SIGKILL");
	$_->finish for @p;    # the crash restart ended their sessions
	ok($node->wait_for_workers('postgres'), "round $round: the workers run again");
	@p = producers(100000);
}

# the postmaster and its children SIGKILLed (fsync on): what committed survives
my $at = sent_count() + 300;
ok($node->poll_query_until('postgres', "select count(*) >= $at from sent"), 'the producers run before the postmaster\'s kill');
$node->safe_psql('postgres', 'select drain()');
my @pids = ($node->{_pid}, split /\n/, $node->safe_psql('postgres',
	'select pid from pg_stat_activity where pid <> pg_backend_pid()'));
# the postmaster first, then every process it left (a producer's backend
# in its loop of commits never looks whether the postmaster lives): what
# a power loss leaves; back once they exited and the postmaster was reaped
my $gone = $node->kill9_and_wait('all');
ok(!grep({ PgqueNode::running($_) } @pids) && $gone->{exited} < 60, 'the postmaster and its children are gone');
$_->kill_kill for @p;
$node->start;
ok($node->wait_for_workers('postgres'), 'the workers run after the restart');
# a last round to the end, after the restart
$_->finish for producers(200);

my $n_sent = sent_count();
ok(PgqueNode::poll_until(sub {
	$node->safe_psql('postgres', 'select drain()');
	$node->safe_psql('postgres', 'select count(*) from acked') >= $n_sent;
}), "the consumers got the $n_sent events sent");
diag(sprintf('figure: %d events sent over %.1f s, %d ticks written by the worker',
	$n_sent, time - $t0, $node->safe_psql('postgres', $ticks_by_worker)));
for my $q (@queues)
{
	my $n = $node->safe_psql('postgres', "select count(*) from sent where q = '$q'");
	cmp_ok($n, '>', 200, "$q: $n events sent");
	is($node->safe_psql('postgres', qq{
	    select count(*) from sent s where s.q = '$q'
	       and not exists (select from acked a where a.q = s.q and a.ev_id = s.ev_id)}),
		'0', "$q: nothing sent was lost");
	is($node->safe_psql('postgres', qq{
	    select count(*) - count(distinct ev_id) from acked where q = '$q'}),
		'0', "$q: nothing was delivered twice");
	is($node->safe_psql('postgres', qq{
	    select count(*) from acked a where a.q = '$q'
	       and not exists (select from sent s where s.q = a.q and s.ev_id = a.ev_id)}),
		'0', "$q: nothing acked that no committed send wrote");
	is($node->safe_psql('postgres', qq{
	    select count(*) from (select a.ev_id, lag(a.ev_id) over (partition by a.key order by a.seq) as prev
	                            from acked a where a.q = '$q') x
	     where x.ev_id < x.prev}),
		'0', "$q: each key's events in the order they were sent");
}
like(slurp_file($node->logfile), qr/terminated by signal 9/, 'the postmaster saw the ticker die of SIGKILL');

# the kept plans of the tick across DROP and CREATE EXTENSION, in one
# session (its plans were made for the objects dropped; the workers off,
# so that its ticks are its own) and in the worker (which quiesces for the
# DDL, ADR 0046, and goes on with the new extension)
$node->safe_psql('postgres', q{alter system set pgque_bgw.enabled = off; select pg_reload_conf();});
ok($node->poll_query_until('postgres', q{
    select count(*) = 0 from pg_stat_activity where backend_type = 'pgque_bgw ticker'}), 'the workers stop');
is($node->safe_psql('postgres', q{
    select pgque.send('pl', 'before the drop') is not null;
    select pgque.ticker('pl') is null or true;
    drop extension pgque_bgw cascade;
    create extension pgque_bgw;
    select pgque.create_queue('again');
    select pgque.subscribe('again', 'c');
    select pgque.send('again', 'x') is not null;
    select pgque.ticker('again') > 0;
    select count(*) >= 2 from pgque.tick t join pgque.queue q on q.queue_id = t.tick_queue
     where q.queue_name = 'again';
}), "t\nt\n1\n1\nt\nt\nt", 'a session that ticked before DROP and CREATE EXTENSION ticks after them');
$node->safe_psql('postgres', q{alter system set pgque_bgw.enabled = on; select pg_reload_conf();});
ok($node->wait_for_workers('postgres'), 'the workers run on the new extension');
$node->safe_psql('postgres', q{select pgque.send('again', 'by the worker')});
ok($node->poll_query_until('postgres', q{
    select count(*) >= 3 from pgque.tick t join pgque.queue q on q.queue_id = t.tick_queue
     where q.queue_name = 'again'}), 'the worker ticks the new extension\'s queue');

$node->stop('fast');
done_testing();
