# pgque.ack of a plain consumer in C (ADR 0120) under kills, with a
# ledger: a producer sends windows of 90 events, a consumer reads them in
# parts of 20 and acks each part, and between a receive and its ack the
# consumer's backend is ended by pg_terminate_backend or SIGKILL (a crash
# restart, fsync on), or killed inside the open transaction of its ack, or
# killed just after the ack committed.  Every event sent is delivered,
# none is lost, the events of a part whose ack committed are never handed
# out again, and a part whose ack did not commit is handed out again
# whole.  Then an ack on a hot standby (the SQL path, refused at its
# UPDATE), the kept plans across DROP/CREATE EXTENSION and ALTER EXTENSION
# UPDATE in one session, and an ack where the extension is not.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;

# quitting a psql whose backend was just killed may write to a closed pipe
$SIG{PIPE} = 'IGNORE';

my $node = PgqueNode->new_preloaded('ackc', init => { allows_streaming => 1 }, conf => q{
fsync = on
restart_after_crash = on
pgque_bgw.enabled = off
});
$node->safe_psql('postgres', q{
    create extension pgque_bgw;
    select pgque.create_queue('aq');
    select pgque.subscribe('aq', 'c');
});

my %sent;          # msg id -> payload
my %acked;         # msg id -> 1: in a part whose ack committed
my %delivered;     # msg id -> times handed out
my $after_ack = 0; # events of an acked part handed out again
my $serial = 0;

sub produce
{
	my $ids = $node->safe_psql('postgres', q{
	    select string_agg(id::text || '=' || p, ',')
	      from (select pgque.send('aq', 'ev', p) as id, p
	              from (select 'e' || g as p from generate_series(1, 90) g) x) y;});
	for my $kv (split /,/, $ids)
	{
		my ($id, $p) = split /=/, $kv;
		$sent{$id} = $p;
	}
	$node->safe_psql('postgres', q{select pgque.ticker('aq')});
	return;
}

# a part in a session of its own: its batch id and msg ids (receive commits)
sub receive_part
{
	my ($session) = @_;
	my $out = $session->query_safe(
		q{select coalesce(max(batch_id)::text, '') || ':' || coalesce(string_agg(msg_id::text, ',' order by msg_id), '')
		    from pgque.receive('aq', 'c', 20)});
	my ($batch, $ids) = split /:/, $out, 2;
	my @ids = grep { length } split /,/, ($ids // '');
	for (@ids)
	{
		$delivered{$_}++;
		$after_ack++ if $acked{$_};
	}
	return ($batch, @ids);
}

sub kill_session
{
	my ($session, $pid, $how) = @_;
	if ($how eq 'terminate')
	{
		$node->safe_psql('postgres', "select pg_terminate_backend($pid)");
		ok(PgqueNode::poll_until(sub { !kill(0, $pid) }), "backend $pid ended by pg_terminate_backend");
	}
	else
	{
		$node->kill9_and_wait($pid);
		ok(PgqueNode::wait_back($node, 'postgres'), "server back after SIGKILL of $pid");
	}
	eval { $session->quit; };
	return;
}

produce() for 1 .. 3;
my @ways = ('ack', 'terminate', 'ack', 'kill', 'ack', 'kill_in_ack', 'ack', 'kill_after_ack');
my $parts = 0;
my $guard = 0;
while (1)
{
	last if ++$guard > 200;
	my $way = $ways[$serial++ % @ways];
	my $s = $node->background_psql('postgres', on_error_stop => 0);
	my $pid = $s->query_safe('select pg_backend_pid()');
	my ($batch, @ids) = receive_part($s);
	if (!length $batch)
	{
		$s->quit;
		last;
	}
	$parts++;
	if ($way eq 'ack')
	{
		my $r = $s->query_safe("select pgque.ack($batch)");
		is($r, '1', "part $parts (batch of " . scalar(@ids) . ") acked");
		$acked{$_} = 1 for @ids;
		$s->quit;
	}
	elsif ($way eq 'terminate' || $way eq 'kill')
	{
		# between the receive and the ack: the part is not acked
		kill_session($s, $pid, $way);
	}
	elsif ($way eq 'kill_in_ack')
	{
		# the ack ran, its transaction is open: killed, it never commits
		$s->query_safe('begin');
		is($s->query_safe("select pgque.ack($batch)"), '1', "part $parts acked in an open transaction");
		kill_session($s, $pid, 'kill');
	}
	else
	{
		# the ack committed (fsync on), then the backend dies
		is($s->query_safe("select pgque.ack($batch)"), '1', "part $parts acked, then killed");
		$acked{$_} = 1 for @ids;
		kill_session($s, $pid, 'kill');
	}
	produce() if $parts == 12;
}

ok($parts > 20, "the consumer read $parts parts");
is($after_ack, 0, 'no event of a part whose ack committed was handed out again');
my @lost = grep { !$delivered{$_} } keys %sent;
is(scalar(@lost), 0, 'every event sent was delivered (' . scalar(keys %sent) . ' sent)');
my @unacked = grep { !$acked{$_} } keys %sent;
is(scalar(@unacked), 0, 'every event sent was acked in the end');
ok((grep { $delivered{$_} > 1 } keys %delivered) > 0,
	'parts whose ack did not commit were handed out again');
is($node->safe_psql('postgres', q{
    select s.sub_batch is null and s.sub_last_tick = (select max(tick_id) from pgque.tick t where t.tick_queue = s.sub_queue)
      from pgque.subscription s join pgque.consumer c on c.co_id = s.sub_consumer where c.co_name = 'c'}),
	't', 'the cursor is at the last tick, no batch open');

# a hot standby: ack takes the SQL path, which reads the batch without a
# lock (ADR 0089) and is refused at its UPDATE, as the PL/pgSQL ack was;
# an unknown id is 0 there too, and the primary's batch stays open
$node->safe_psql('postgres', q{select pgque.send('aq', 'ev', 'st' || g) from generate_series(1, 3) g});
$node->safe_psql('postgres', q{select pgque.ticker('aq')});
my $sb = $node->safe_psql('postgres', q{select max(batch_id) from pgque.receive('aq', 'c', 2)});
$node->backup('bk');
my $standby = PgqueNode->new('ackc_standby');
$standby->init_from_backup($node, 'bk', has_streaming => 1);
$standby->start;
$node->wait_for_catchup($standby);
my ($sret, $sout, $serr) = $standby->psql('postgres', "select pgque.ack($sb)",
	extra_params => ['-v', 'VERBOSITY=verbose']);
like($serr, qr/25006: cannot execute UPDATE in a read-only transaction/,
	'on the standby an open batch\'s ack is refused at its UPDATE (25006)');
is($standby->safe_psql('postgres', 'select pgque.ack(-1)'), '0', 'on the standby an unknown id is 0');
$standby->stop('fast');
is($node->safe_psql('postgres', qq{select count(*) from pgque.subscription where sub_batch = $sb}), '1',
	'the batch is still open on the primary');
is($node->safe_psql('postgres', "select pgque.ack($sb)"), '1', '... and acked there');
is($node->safe_psql('postgres', q{select count(*) from pgque.receive('aq', 'c', 10)}), '1', '... its rest follows');
$node->safe_psql('postgres', q{select pgque.ack(max(batch_id)) from pgque.receive('aq', 'c', 10)});

# kept plans in one session across DROP/CREATE EXTENSION: the ack after
# it acts on the new tables (the plan cache re-analyses the statements)
my $s = $node->background_psql('postgres');
$s->query_safe(q{set client_min_messages = warning});
$s->query_safe(q{select pgque.send('aq', 'ev', 'x')});
$s->query_safe(q{select pgque.ticker('aq')});
is($s->query_safe(q{select pgque.ack(max(batch_id)) from pgque.receive('aq', 'c', 1)}), '1',
	'an ack in the session (plans kept)');
$s->query_safe(q{drop extension pgque_bgw cascade});
is($s->query_safe(q{select count(*) || ':' || (to_regclass('pgque.subscription') is null)
                      from pg_extension where extname = 'pgque_bgw'}), '0:true', 'extension dropped, its tables too');
$s->query_safe(q{create extension pgque_bgw});
$s->query_safe(q{select pgque.create_queue('aq2')});
$s->query_safe(q{select pgque.subscribe('aq2', 'c2')});
$s->query_safe(q{select pgque.send('aq2', 'ev', 'y' || g) from generate_series(1, 3) g});
$s->query_safe(q{select pgque.ticker('aq2')});
is($s->query_safe(q{select pgque.ack(max(batch_id)) from pgque.receive('aq2', 'c2', 2)}), '1',
	'the same session acks a part after CREATE EXTENSION');
is($s->query_safe(q{select count(*) || ':' || min(payload) from pgque.receive('aq2', 'c2', 10)}), '1:y3',
	'... the new consumer\'s rest follows the acked part');
is($s->query_safe(q{select pgque.ack(max(batch_id)) from pgque.receive('aq2', 'c2', 10)}), '1',
	'... and the window is finished');
is($s->query_safe(q{select pgque.ack(-1)}), '0', '... an unknown id is 0');
$s->quit;

# ALTER EXTENSION UPDATE from 0.2.0 (its ack PL/pgSQL) to this version's
# (C) in one session: acks before and after the update
$node->safe_psql('postgres', 'create database upd');
$s = $node->background_psql('upd');
$s->query_safe(q{set client_min_messages = warning});
$s->query_safe(q{create extension pgque_bgw version '0.2.0'});
$s->query_safe(q{select pgque.create_queue('uq')});
$s->query_safe(q{select pgque.subscribe('uq', 'c')});
$s->query_safe(q{select pgque.send('uq', 'ev', 'u' || g) from generate_series(1, 4) g});
$s->query_safe(q{select pgque.ticker('uq')});
is($s->query_safe(q{select pgque.ack(max(batch_id)) from pgque.receive('uq', 'c', 2)}), '1',
	'0.2.0: a part acked');
$s->query_safe(q{alter extension pgque_bgw update});
is($s->query_safe(q{select l.lanname from pg_proc p join pg_language l on l.oid = p.prolang
                      where p.oid = 'pgque.ack(bigint)'::regprocedure}), 'c', 'after the update ack is C');
is($s->query_safe(q{select count(*) || ':' || min(payload) || ':' || pgque.ack(max(batch_id))
                      from pgque.receive('uq', 'c', 10)}), '2:u3:1',
	'the same session acks the rest after the update');
$s->quit;

# a database without the extension: no pgque.ack to call
$node->safe_psql('postgres', 'create database plain');
my ($ret, $out, $err) = $node->psql('plain', 'select pgque.ack(1)');
like($err, qr/schema "pgque" does not exist/, 'no ack where the extension is not installed');

$node->stop('fast');
done_testing();
