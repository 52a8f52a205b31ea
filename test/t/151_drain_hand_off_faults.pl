# The drain's read and hand-off of ADR 0127 under faults, fsync on, with
# a ledger: window_direct.c reads a window's heap pages in block order and
# receive hands a part straight into its result while the rows come in
# ev_id order (the rest into the part cache).  Two producers send at once
# (a few events a transaction, the ledger row "sent" in the send's
# transaction: their rows interleave in the heap, so windows come both in
# and out of ev_id order), a consumer drains by receive in parts of 7, of
# 1,000 and of a whole window (max_return 20,000: the part streamed), each
# part acked in the transaction of its ledger rows "acked".  A consumer
# that holds a streamed part is ended between its receive and its ack by a
# SIGKILL (a crash restart), and another by a SIGKILL of the postmaster;
# after each, the part it held is handed out again.  At the end every event
# sent was acked exactly once (nothing lost, nothing acked handed out
# again) and nothing else was.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;

$SIG{PIPE} = 'IGNORE';

# the holder faults' server, shared with TAP 051 (PgqueNode)
my $node = PgqueNode->new_holder_faults('drain_hand_off_faults');
ok($node->wait_for_workers('postgres'), 'the workers run');

$node->safe_psql('postgres', q{
    select pgque.create_queue('ho');
    select pgque.subscribe('ho', 'c');
    create table sent (payload text primary key);
    create table acked (payload text, batch_id bigint, max_return int4);

    -- n events in one transaction, in the ledger in the send's transaction
    create function put(tag text, n int4) returns void language sql as $$
        insert into sent select tag || '-' || i from generate_series(1, n) i;
        select pgque.send_batch('ho', array(select tag || '-' || i from generate_series(1, n) i));
    $$;

    -- one part of up to n events, acked in the transaction of their ledger rows
    create function take(n int4) returns int8 language plpgsql as $$
    declare
        b  bigint;
    begin
        create temp table if not exists got (like pgque.message);
        truncate got;
        insert into got select * from pgque.receive('ho', 'c', n);
        insert into acked select payload, batch_id, n from got;
        b := (select max(batch_id) from got);
        if b is not null then
            perform pgque.ack(b);
        end if;
        return (select count(*) from got);
    end $$;
});

# a producer in a session of its own: 3 events a transaction
sub start_producer
{
	my ($tag, $n) = @_;
	my %p = (out => '', err => '');
	$p{h} = IPC::Run::start(['psql', '-X', '-q', '-d', $node->connstr('postgres'), '-c',
		"do \$\$ begin for i in 1..$n loop perform put('$tag' || i, 3); commit; perform pg_sleep(0.002); end loop; end \$\$"],
		'>', \$p{out}, '2>', \$p{err});
	return \%p;
}

# a consumer that takes a whole window (a streamed part) and then sleeps
# before its ack: the part's payloads are printed first
sub start_holder
{
	return $node->start_holder(
		q{select 'held:' || coalesce(string_agg(payload, ',' order by msg_id), '') from pgque.receive('ho', 'c', 20000)});
}

# a backlog of at least n events sent and not acked, for a holder's part
# to be more than a tick's few (the producers go on meanwhile)
sub backlog
{
	my ($n) = @_;
	return PgqueNode::poll_until(sub {
		$node->safe_psql('postgres', q{select (select count(*) from sent) - (select count(*) from acked)}) >= $n;
	}, 60);
}

sub take
{
	my ($n) = @_;
	return $node->safe_psql('postgres', "select take($n)");
}

# every event sent so far acked, in parts of each size in turn
sub drain
{
	my ($name) = @_;
	my @sizes = (7, 1000, 20000);
	my $i = 0;
	ok(PgqueNode::poll_until(sub {
		take($sizes[$i++ % 3]);
		$node->safe_psql('postgres', q{select count(*) from sent s where not exists (select from acked a where a.payload = s.payload)}) == 0;
	}, 120), "$name: every event sent is acked");
}

# ---- two producers at once, parts of every size while they send ----
my $p1 = start_producer('a', 300);
my $p2 = start_producer('b', 300);
take($_) for (7, 1000, 20000, 7, 20000, 1000, 7);

# ---- SIGKILL of a consumer holding a streamed part: a crash restart ----
ok(backlog(200), 'a backlog of 200 events for the holder');
my $w = start_holder();
my $pid = $node->holder_pid();
ok($pid, 'a holder of a whole window to SIGKILL');
# back once the postmaster has reaped it: the crash restart has begun
$node->kill9_and_wait($pid);
$w->{h}->finish;
my @held = PgqueNode::held($w);
$p1->{h}->finish;
$p2->{h}->finish;
ok(PgqueNode::wait_back($node, 'postgres'), 'the server is back after the crash restart');
ok($node->wait_for_workers('postgres'), 'the workers run after it');
drain('crash');
$node->check_handed_again('crash', @held);

# ---- SIGKILL of the postmaster while a holder holds its part ----
$p1 = start_producer('c', 300);
$p2 = start_producer('d', 300);
take($_) for (20000, 7, 1000);
ok(backlog(200), 'a backlog of 200 events for the next holder');
$w = start_holder();
$node->kill9_holder_server;
$w->{h}->finish;
$p1->{h}->finish;
$p2->{h}->finish;
@held = PgqueNode::held($w);
$node->start;
ok($node->wait_for_workers('postgres'), 'the server and its workers are back');
drain('postmaster');
$node->check_handed_again('postmaster', @held);

# ---- the ledger ----
is($node->safe_psql('postgres', q{
    select count(*) from sent s where (select count(*) from acked a where a.payload = s.payload) <> 1}),
   0, 'every event sent was acked exactly once');
is($node->safe_psql('postgres', q{select count(*) from acked a where not exists (select from sent s where s.payload = a.payload)}),
   0, '... and nothing that was not sent');
# (the crash restart ends the producers' sessions too: not every loop ran out)
cmp_ok($node->safe_psql('postgres', q{select count(*) from sent}), '>', 400, 'the producers sent events');
is($node->safe_psql('postgres', q{select count(distinct max_return) from acked}), 3,
   'parts of 7, of 1,000 and of a whole window were acked');

$node->stop('fast');
done_testing();
