# A plain consumer's part opened in one statement (ADR 0121), under
# faults, fsync on, with a ledger: producers send one event a transaction
# (the ledger row "sent" in the send's transaction), a consumer takes
# parts of 7 with receive_wait() and receive() (the ledger row "acked" in
# the ack's transaction).  A consumer's backend is ended between the open
# of its part and the ack three ways: pg_terminate_backend, SIGKILL (a
# crash restart) and a SIGKILL of the postmaster (a restart).  After each,
# the part it held is handed out again; at the end every event sent was
# acked exactly once (nothing lost, nothing acked handed out again) and
# nothing else was.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;

$SIG{PIPE} = 'IGNORE';

# the holder faults' server, shared with TAP 151 (PgqueNode)
my $node = PgqueNode->new_holder_faults('plain_open_faults');
ok($node->wait_for_workers('postgres'), 'the workers run');

$node->safe_psql('postgres', q{
    select pgque.create_queue('po');
    select pgque.subscribe('po', 'c');
    create table sent (payload text primary key);
    create table acked (payload text, batch_id bigint, how text);

    -- one event, in the ledger in the send's transaction
    create function put(p text) returns void language sql as $$
        insert into sent values (p);
        select pgque.send('po', p);
    $$;

    -- one part of up to n events, acked in the transaction of their ledger
    -- rows; how: receive_wait or receive
    create function take(n int4, how text) returns int8 language plpgsql as $$
    declare
        b  bigint;
    begin
        create temp table if not exists got (like pgque.message);
        truncate got;
        if how = 'wait' then
            insert into got select * from pgque.receive_wait('po', 'c', n, '1 s');
        else
            insert into got select * from pgque.receive('po', 'c', n);
        end if;
        insert into acked select payload, batch_id, how from got;
        b := (select max(batch_id) from got);
        if b is not null then
            perform pgque.ack(b);
        end if;
        return (select count(*) from got);
    end $$;
});

# a producer in a session of its own: one event a transaction
sub start_producer
{
	my ($tag, $n) = @_;
	my %p = (out => '', err => '');
	$p{h} = IPC::Run::start(['psql', '-X', '-q', '-d', $node->connstr('postgres'), '-c',
		"do \$\$ begin for i in 1..$n loop perform put('$tag-' || i); commit; perform pg_sleep(0.005); end loop; end \$\$"],
		'>', \$p{out}, '2>', \$p{err});
	return \%p;
}

# a consumer that opens a part of 7 (receive_wait) and then sleeps before
# its ack: the part's payloads are printed first
sub start_holder
{
	return $node->start_holder(
		q{select 'held:' || coalesce(string_agg(payload, ',' order by msg_id), '') from pgque.receive_wait('po', 'c', 7, '10 s')});
}

sub take
{
	my ($n, $how) = @_;
	return $node->safe_psql('postgres', "select take($n, '$how')");
}

# every event sent so far acked: parts taken until then, both ways
sub drain
{
	my ($name) = @_;
	my $i = 0;
	ok(PgqueNode::poll_until(sub {
		take(7, $i++ % 2 ? 'wait' : 'plain');
		$node->safe_psql('postgres', q{select count(*) from sent s where not exists (select from acked a where a.payload = s.payload)}) == 0;
	}, 120), "$name: every event sent is acked");
}

my $p = start_producer('a', 300);
take(7, 'wait') for 1 .. 5;

# ---- ended by pg_terminate_backend between open and ack ----
my $w = start_holder();
my $pid = $node->holder_pid();
ok($pid, 'a holder between its open and its ack');
$node->safe_psql('postgres', "select pg_terminate_backend($pid)");
$w->{h}->finish;
my @held = PgqueNode::held($w);
take(7, 'wait') for 1 .. 3;
$p->{h}->finish;
drain('terminated');
$node->check_handed_again('terminated', @held);

# ---- SIGKILL of the holder: a crash restart ----
$p = start_producer('b', 300);
take(7, 'plain') for 1 .. 3;
$w = start_holder();
$pid = $node->holder_pid();
ok($pid, 'a holder to SIGKILL');
# back once the postmaster has reaped it: the crash restart has begun
$node->kill9_and_wait($pid);
$w->{h}->finish;
@held = PgqueNode::held($w);
$p->{h}->finish;
ok(PgqueNode::wait_back($node, 'postgres'), 'the server is back after the crash restart');
ok($node->wait_for_workers('postgres'), 'the workers run after it');
drain('crash');
$node->check_handed_again('crash', @held);

# ---- SIGKILL of the postmaster while the holder holds its part ----
$p = start_producer('c', 300);
take(7, 'wait') for 1 .. 3;
$w = start_holder();
$node->kill9_holder_server;
$w->{h}->finish;
$p->{h}->finish;
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
cmp_ok($node->safe_psql('postgres', q{select count(*) from sent}), '>', 100, 'the producers sent events');
is($node->safe_psql('postgres', q{select count(distinct how) from acked}), 2, 'parts taken by both receive and receive_wait');

$node->stop('fast');
done_testing();
