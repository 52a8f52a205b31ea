# The second reader's ledger over this session's three C paths at once
# (ADR 0125): the ticker worker's C visit (src/tick.c, ADR 0123), a plain
# consumer's C open by receive_wait() in parts (_plain_receive_open, ADR
# 0121) and its C ack (src/ack.c, ADR 0120), beside a cooperative group on
# the same queue (its acks go the SQL way) - under what a production
# server meets, fsync on:
#  - a producer committing one event a transaction, subtransactions
#    rolled back among them, rotation every second;
#  - the queue paused (no tick) and resumed mid-run;
#  - the server crash-restarted (a backend SIGKILLed) between a receive
#    and its ack: the part is handed out again, the same events;
#  - a backend SIGKILLed inside an ack's transaction (the ack and the
#    ledger's note of it undone together);
#  - the ticker worker SIGKILLed, the postmaster stopped immediately;
#  - the extension dropped and made again in one session of a second
#    database whose ticker worker holds its kept plans (stale OIDs: no
#    crash, the new queue ticked and read);
#  - a part handed out by 0.2.0's receive, ALTER EXTENSION UPDATE in that
#    session, then the C open and the C ack: the same part, acked once,
#    the rest once, the worker ticking the database by its SQL path
#    before and its C visit after.
# Proved: every committed event acked by the plain consumer exactly once
# and by the group exactly once, nothing rolled back delivered, and no
# event handed out again after its ack committed.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;

my $node = PgqueNode->new_preloaded('a6_ledger', conf => q{
fsync = on
restart_after_crash = on
pgque_bgw.launcher_naptime = '1s'
pgque_bgw.tick_interval = '10ms'
pgque_bgw.maint_interval = '1s'
});
$node->install('postgres');
ok($node->wait_for_workers('postgres'), 'the workers run');
$node->safe_psql('postgres', q{
    select pgque.create_queue('q');
    select pgque.set_queue_config('q', 'rotation_period', '1 second');
    select pgque.subscribe('q', 'c');
    select pgque.subscribe_subconsumer('q', 'grp', 'm1');
    select pgque.subscribe_subconsumer('q', 'grp', 'm2');
    create table sent (ev_id bigint primary key);
    create table delivered (ev_id bigint, at timestamptz default clock_timestamp());
    create table acked (ev_id bigint);
    create table again (ev_id bigint);
    create table coop_acked (ev_id bigint, who text);
    create table open_part (batch_id bigint, ev_id bigint);
    create procedure storm(n int, tag text) language plpgsql as $$
    begin
        for i in 1 .. n loop
            insert into sent values (pgque.send('q', tag || i));
            if i % 5 = 0 then
                begin
                    perform pgque.send('q', 'rolledback-' || tag || i);
                    raise exception 'roll back';
                exception when raise_exception then null;
                end;
            end if;
            commit;
        end loop;
    end $$;
    -- the plain consumer's receive, committed on its own: what it handed
    -- out is noted (and whether any of it was acked before)
    create function rx() returns int8 language plpgsql as $$
    declare n int8;
    begin
        delete from open_part;
        insert into open_part select batch_id, msg_id from pgque.receive_wait('q', 'c', 7, '200 ms');
        insert into again select ev_id from open_part where ev_id in (select ev_id from acked);
        insert into delivered (ev_id) select ev_id from open_part;
        get diagnostics n = row_count;
        return n;
    end $$;
    -- its ack, and the ledger's note of it, in one transaction
    create function ackit() returns int4 language plpgsql as $$
    declare b bigint := (select max(batch_id) from open_part);
    begin
        if b is null then return 0; end if;
        insert into acked select ev_id from open_part;
        delete from open_part;
        if pgque.ack(b) operator(pg_catalog.<>) 1 then
            raise exception 'the ack of an open part returned 0';
        end if;
        return 1;
    end $$;
    create function coop_drain() returns int8 language plpgsql as $$
    declare
        n  int8 := 0;
        b  bigint;
        m  text;
    begin
        foreach m in array array['m1', 'm2'] loop
            loop
                create temp table if not exists cg (like pgque.message);
                truncate cg;
                insert into cg select * from pgque.receive_coop('q', 'grp', m, 5);
                b := (select max(batch_id) from cg);
                exit when b is null;
                insert into coop_acked select msg_id, m from cg;
                perform pgque.ack(b);
                n := n + (select count(*) from cg);
            end loop;
        end loop;
        return n;
    end $$;
});

my ($prod_out, $prod_err) = ('', '');
my $producer;
sub produce
{
	my ($n, $tag) = @_;
	$producer = IPC::Run::start(
		[ 'psql', '-X', '-q', '-d', $node->connstr('postgres'), '-c', "call storm($n, '$tag')" ],
		'>', \$prod_out, '2>', \$prod_err);
}
sub consume
{
	my ($rounds) = @_;
	for (1 .. $rounds)
	{
		$node->safe_psql('postgres', 'select rx()');
		$node->safe_psql('postgres', 'select ackit()');
	}
}
sub crash
{
	my ($why) = @_;
	my $victim = $node->background_psql('postgres');
	my $pid = $victim->query_safe('select pg_backend_pid()');
	chomp $pid;
	$node->kill9_and_wait($pid);
	ok(PgqueNode::wait_back($node, 'postgres'), "the server is back after a SIGKILL ($why)");
	$victim->{run}->kill_kill;
	ok($node->wait_for_workers('postgres'), "the workers run again ($why)");
}

# ---- 1. a storm, consumed in parts, the queue paused and resumed
produce(400, 'a-');
ok(PgqueNode::poll_until(sub { $node->safe_psql('postgres', 'select count(*) from sent') >= 100 }), 'storm a runs');
consume(10);
$node->safe_psql('postgres', q{select pgque.pause_queue('q')});
my $ticks_q = q{select max(tick_id) from pgque.tick t join pgque.queue x on x.queue_id = t.tick_queue
                 where x.queue_name = 'q'};
my $t0 = $node->safe_psql('postgres', $ticks_q);
consume(10);
$node->safe_psql('postgres', q{select pgque.resume_queue('q')});
consume(10);
$producer->finish;

# ---- 2. a crash between a receive and its ack: the same part again
produce(300, 'b-');
ok(PgqueNode::poll_until(sub { $node->safe_psql('postgres', 'select count(*) from sent') >= 500 }), 'storm b runs');
my $n_rx = 0;
ok(PgqueNode::poll_until(sub { $n_rx = $node->safe_psql('postgres', 'select rx()'); $n_rx > 0 }),
   'a part handed out');
my $part = $node->safe_psql('postgres', 'select string_agg(ev_id::text, \',\' order by ev_id) from open_part');
crash('between receive and ack');
$producer->finish;
$node->safe_psql('postgres', 'select rx()');
is($node->safe_psql('postgres', 'select string_agg(ev_id::text, \',\' order by ev_id) from open_part'), $part,
   'after the crash the unacked part is handed out again, the same events');
$node->safe_psql('postgres', 'select ackit()');

# ---- 3. a SIGKILL inside an ack's transaction
$node->safe_psql('postgres', q{call storm(50, 'c-')});
ok(PgqueNode::poll_until(sub { $node->safe_psql('postgres', 'select rx()') > 0 }), 'a part handed out');
$part = $node->safe_psql('postgres', 'select string_agg(ev_id::text, \',\' order by ev_id) from open_part');
my $acker = $node->background_psql('postgres');
my $apid = $acker->query_safe('select pg_backend_pid()');
chomp $apid;
$acker->query_safe('begin; select ackit();');
$node->kill9_and_wait($apid);
ok(PgqueNode::wait_back($node, 'postgres'), 'the server is back after the acker\'s SIGKILL');
$acker->{run}->kill_kill;
ok($node->wait_for_workers('postgres'), 'the workers run again');
$node->safe_psql('postgres', 'select rx()');
is($node->safe_psql('postgres', 'select string_agg(ev_id::text, \',\' order by ev_id) from open_part'), $part,
   'the ack died with its transaction: the same part again');
$node->safe_psql('postgres', 'select ackit()');

# ---- 4. the ticker worker SIGKILLed, then the postmaster stopped at once
produce(300, 'd-');
ok(PgqueNode::poll_until(sub { $node->safe_psql('postgres', 'select count(*) from sent') >= 700 }), 'storm d runs');
consume(5);
my $tpid = $node->safe_psql('postgres', q{select pid from pg_stat_activity where backend_type = 'pgque_bgw ticker'});
ok($tpid =~ /^\d+$/, "the ticker worker's pid ($tpid)");
$node->kill9_and_wait($tpid);
ok(PgqueNode::wait_back($node, 'postgres'), 'the server is back after the ticker\'s SIGKILL');
ok($node->wait_for_workers('postgres'), 'the workers run again');
$producer->finish;
produce(200, 'e-');
ok(PgqueNode::poll_until(sub { $node->safe_psql('postgres', 'select count(*) from sent') >= 850 }), 'storm e runs');
consume(3);
$node->stop('immediate');
$producer->finish;
$node->start;
ok($node->wait_for_workers('postgres'), 'after an immediate stop the workers run again');
$node->safe_psql('postgres', q{call storm(20, 'f-')});

# ---- the ledger
my $n_sent = $node->safe_psql('postgres', 'select count(*) from sent');
ok(PgqueNode::poll_until(sub {
	consume(20);
	$node->safe_psql('postgres', 'select coop_drain()');
	$node->safe_psql('postgres', 'select count(distinct ev_id) from acked') >= $n_sent
	  && $node->safe_psql('postgres', 'select count(distinct ev_id) from coop_acked') >= $n_sent;
}), "every sent event acked by the plain consumer and by the group ($n_sent)");
is($node->safe_psql('postgres', q{select count(*) from sent s where not exists (select from acked a where a.ev_id = s.ev_id)}),
   '0', 'plain consumer: nothing lost');
is($node->safe_psql('postgres', q{select count(*) - count(distinct ev_id) from acked}), '0',
   'plain consumer: nothing acked twice');
is($node->safe_psql('postgres', q{select count(*) from again}), '0',
   'plain consumer: no event handed out again after its ack committed');
is($node->safe_psql('postgres', q{select count(*) from acked a where not exists (select from sent s where s.ev_id = a.ev_id)}),
   '0', 'plain consumer: nothing rolled back delivered');
is($node->safe_psql('postgres', q{select count(*) from sent s where not exists (select from coop_acked a where a.ev_id = s.ev_id)}),
   '0', 'group: nothing lost');
is($node->safe_psql('postgres', q{select count(*) - count(distinct ev_id) from coop_acked}), '0',
   'group: nothing acked twice (by one member or two)');
is($node->safe_psql('postgres', q{select count(*) from coop_acked a where not exists (select from sent s where s.ev_id = a.ev_id)}),
   '0', 'group: nothing rolled back delivered');
my $redelivered = $node->safe_psql('postgres', q{select count(*) - count(distinct ev_id) from delivered});
diag("figure: $n_sent events sent and acked; $redelivered deliveries again after a crash before an ack");
ok($redelivered > 0, 'the crashes did hand parts out again (the ledger saw redeliveries)');
ok($node->safe_psql('postgres', $ticks_q) > $t0, 'the queue ticked after its pause');

# ---- 5. the extension dropped and made again in one session, its ticker running
$node->safe_psql('postgres', 'create database re');
$node->install('re');
ok($node->wait_for_workers('re'), 'the workers of database re run');
my $s = $node->background_psql('re', on_error_stop => 0);
my $cycle = q{
    select pgque.create_queue('rq') > 0;
    select pgque.subscribe('rq', 'rc') > 0;
    select count(pgque.send('rq', 'r' || g)) from generate_series(1, 5) g;
};
$s->query_safe($cycle);
ok(PgqueNode::poll_until(sub {
	$s->query_safe(q{select count(*) from pgque.receive_wait('rq', 'rc', 100, '200 ms')}) =~ /^5$/m }),
   'the worker ticks rq; receive_wait reads it');
is($s->query_safe(q{select pgque.ack(max(batch_id)) from pgque.receive('rq', 'rc', 100)}) =~ /^1$/m ? 1 : 0, 1,
   'the C ack acks it');
for my $i (1 .. 2)
{
	$s->query_safe(q{set client_min_messages = warning; drop extension pgque_bgw cascade; drop schema pgque cascade;});
	$s->query_safe(q{create extension pgque_bgw; reset client_min_messages;});
	$s->query_safe($cycle);
	ok(PgqueNode::poll_until(sub {
		$s->query_safe(q{select count(*) from pgque.receive_wait('rq', 'rc', 100, '200 ms')}) =~ /^5$/m }),
	   "reinstall $i in the same session: the worker ticks the new rq, receive_wait reads it");
	is($s->query_safe(q{select pgque.ack(max(batch_id)) from pgque.receive('rq', 'rc', 100)}) =~ /^1$/m ? 1 : 0, 1,
	   "... and the C ack acks it (reinstall $i)");
}
$s->quit;

# ---- 6. a part handed out by 0.2.0's receive, the update, then the C paths
$node->safe_psql('postgres', 'create database up');
$node->safe_psql('up', q{create extension pgque_bgw version '0.2.0'});
my $u = $node->background_psql('up', on_error_stop => 0);
$u->query_safe(q{
    select pgque.create_queue('uq') > 0;
    select pgque.subscribe('uq', 'uc') > 0;
    select count(pgque.send('uq', 'u' || g)) from generate_series(1, 5) g;
});
ok(PgqueNode::poll_until(sub { $u->query_safe(q{select count(*) from pgque.tick t join pgque.queue q
                                                 on q.queue_id = t.tick_queue where q.queue_name = 'uq'}) =~ /^[2-9]/m }),
   'the worker ticks a 0.2.0 database (its SQL path)');
my $p020 = $u->query_safe(q{select string_agg(payload, ',' order by msg_id) from pgque.receive('uq', 'uc', 2)});
chomp $p020;
is($p020, 'u1,u2', '0.2.0\'s receive hands out a part');
$u->query_safe(q{set client_min_messages = warning; alter extension pgque_bgw update; reset client_min_messages;});
is($u->query_safe(q{select pgque.version()}) =~ /0\.3\.0/ ? 1 : 0, 1, 'updated in the same session');
my $again = $u->query_safe(q{
    create temp table up1 as select * from pgque.receive_wait('uq', 'uc', 2, '0');
    select string_agg(payload, ',' order by msg_id) from up1;});
chomp $again;
is($again, 'u1,u2', 'after the update the C open hands out the same part');
is($u->query_safe(q{select pgque.ack((select max(batch_id) from up1))}) =~ /^1$/m ? 1 : 0, 1, 'the C ack acks the part');
my $rest = $u->query_safe(q{
    create temp table up2 as select * from pgque.receive('uq', 'uc', 100);
    select string_agg(payload, ',' order by msg_id) from up2;});
chomp $rest;
is($rest, 'u3,u4,u5', 'the rest of the window, once');
is($u->query_safe(q{select pgque.ack((select max(batch_id) from up2))}) =~ /^1$/m ? 1 : 0, 1, 'acked');
$u->query_safe(q{select count(pgque.send('uq', 'v' || g)) from generate_series(1, 3) g});
ok(PgqueNode::poll_until(sub {
	$u->query_safe(q{select count(*) from pgque.receive_wait('uq', 'uc', 100, '200 ms')}) =~ /^3$/m }),
   'the worker ticks the updated database by the C visit; nothing acked comes again');
$u->quit;

# (with three databases the launcher may run combined workers: either kind)
ok(PgqueNode::poll_until(sub { $node->safe_psql('postgres', q{
    select count(distinct datname) from pg_stat_activity
     where backend_type in ('pgque_bgw ticker', 'pgque_bgw worker')}) == 3 }),
   'a ticker runs in each of the three databases (none crashed on stale plans)');
unlike(slurp_file($node->logfile), qr/server process .* was terminated by signal (11|6)/,
       'no process died of a signal but the ones this file sent');

$node->stop;
done_testing();
