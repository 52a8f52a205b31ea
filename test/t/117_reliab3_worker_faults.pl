# What a queue's owner breaks stays that queue's, and no worker crashes
# (issue 30, ADR 0105), with the workers running:
#   - one queue's event sequence renamed (then dropped): the ticker's
#     sequence probe, one statement over every queue, failed at each probe
#     interval for all of them (a WARNING each), so a row written into
#     another queue's event table directly (the probe's purpose) was never
#     ticked until that queue's idle tick.  Now that other queue is ticked
#     within the probe interval and no probe fails; the renamed queue's
#     producers are refused with 42P01 naming the sequence; renamed back,
#     it sends and ticks again.
#   - a column of pgque.coop_member retyped (cm_name to integer): the
#     watchdog's reclaim took its values as text (a pointer read from an
#     integer: the worker died of SIGSEGV and the postmaster restarted every
#     backend).  Now the reclaim step fails with 42804 naming the column
#     and the server goes on.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PgqueNode->new_fast_ticker('reliab3_worker_faults', 'renamed', 'other');
# only the probe ticks 'other' for what is written into it directly
$node->safe_psql('postgres', q{select pgque.set_queue_config('other', 'ticker_idle_period', '1 hour')});
ok($node->wait_for_workers('postgres'), 'the three workers run');
my ($rq, $oq) = split /\|/, $node->safe_psql('postgres', q{
    select (select queue_id from pgque.queue where queue_name = 'renamed') || '|' ||
           (select queue_id from pgque.queue where queue_name = 'other')});
my $start_time = $node->safe_psql('postgres', 'select pg_postmaster_start_time()');

# a row written into 'other' directly (no commit wakes the ticker for it):
# ticked by the sequence probe, or not at all within the idle hour
sub direct_row_ticked
{
	my ($payload) = @_;
	my $id = $node->safe_psql('postgres', qq{
        insert into pgque.event_${oq}_0 (ev_id, ev_type, ev_data)
        values (pg_catalog.nextval('pgque.event_${oq}_id_seq'), 'direct', '$payload') returning ev_id});
	return $node->poll_query_until('postgres', qq{
        select exists (select from pgque.tick where tick_queue = $oq and tick_event_seq >= $id)});
}
ok(direct_row_ticked('before'), 'a row written directly is ticked by the probe');

my $log_offset = -s $node->logfile;
$node->safe_psql('postgres', qq{alter sequence pgque.event_${rq}_id_seq rename to renamed_seq});
ok(direct_row_ticked('renamed'),
	"another queue's row written directly is ticked with one queue's sequence renamed");
ok(direct_row_ticked('renamed 2'), '... and again at the next probe');
my ($ret, $out, $err) = $node->psql('postgres', q{select pgque.send('renamed', 'x')});
like($err, qr/event sequence pgque\.event_${rq}_id_seq of queue "renamed" does not exist/,
	"the renamed queue's producers are told (42P01)");
is($node->safe_psql('postgres', q{select ev_new >= 0 from pgque.get_queue_info('renamed')}), 't',
	'get_queue_info reads the queue');

$node->safe_psql('postgres', qq{alter sequence pgque.renamed_seq rename to event_${rq}_id_seq});
my $before = $node->safe_psql('postgres', qq{select max(tick_id) from pgque.tick where tick_queue = $rq});
$node->safe_psql('postgres', q{select pgque.send('renamed', 'back')});
ok($node->poll_query_until('postgres', qq{select max(tick_id) > $before from pgque.tick where tick_queue = $rq}),
	'renamed back: it sends and is ticked');
my $log = slurp_file($node->logfile, $log_offset);
my @probe_failed = ($log =~ /probing event sequences/g);
is(scalar @probe_failed, 0, 'no sequence probe failed meanwhile');

# dropped (its defaults with it): the other queue is still ticked
$node->safe_psql('postgres', qq{
    create table keep_seq as select last_value from pgque.event_${rq}_id_seq;
    drop sequence pgque.event_${rq}_id_seq cascade});
ok(direct_row_ticked('dropped'), "another queue's row is ticked with one queue's sequence dropped");
$log = slurp_file($node->logfile, $log_offset);
@probe_failed = ($log =~ /probing event sequences/g);
is(scalar @probe_failed, 0, 'no sequence probe failed');

# the reclaim with a retyped column of pgque.coop_member: a member's row there
$node->safe_psql('postgres', q{
    select pgque.create_queue('coop');
    select pgque.register_subconsumer('coop', 'g', 'm1');
});
$log_offset = -s $node->logfile;
$node->safe_psql('postgres', q{
    alter table pgque.coop_member alter column cm_name type integer using pg_catalog.length(cm_name)});
ok(PgqueNode::poll_until(sub {
		slurp_file($node->logfile, $log_offset) =~ /pgque\.coop_member column cm_name is integer, not text/ }, 30),
	"the watchdog's reclaim refuses the retyped column (42804)");
is($node->safe_psql('postgres', 'select pg_postmaster_start_time()'), $start_time,
	'no backend crashed: the postmaster never restarted');
unlike(slurp_file($node->logfile, $log_offset), qr/terminated by signal/, '... no process was killed by a signal');
$node->safe_psql('postgres', q{
    alter table pgque.coop_member alter column cm_name type text using cm_name::text});
is($node->safe_psql('postgres', q{select pgque.send('other', 'x') > 0}), 't', 'the server serves on');

# the marks of addressed events (ADR 0105) under faults, fsync on: an
# insert_event_raw whose backend is killed before its commit leaves neither
# event nor mark; committed ones survive an immediate stop, and a seek
# after the restart replays the addressed event once, its retry copy not
$node->safe_psql('postgres', q{
    select pgque.create_queue('addr');
    select pgque.subscribe('addr', 'c');
    select pgque.set_queue_config('addr', 'ticker_max_lag', '10 ms');
});
my $sub = $node->safe_psql('postgres', q{
    select s.sub_id from pgque.subscription s join pgque.consumer c on c.co_id = s.sub_consumer
     where s.sub_queue = (select queue_id from pgque.queue where queue_name = 'addr') and c.co_name = 'c'});
my $open = $node->background_psql('postgres');
$open->query_safe(qq{begin; select pgque.insert_event_raw('addr', null, now(), $sub, null, 't', 'killed', null, null, null, null)});
my $pid = $open->query_safe('select pg_backend_pid()');
$node->safe_psql('postgres', "select pg_terminate_backend($pid)");
eval { $open->quit; };
# one transaction, one window; the id of the addressed event (the last line)
my ($aid) = reverse split /\n/, $node->safe_psql('postgres', qq{
    begin;
    select pgque.send('addr', 't', 'e1');
    select pgque.insert_event_raw('addr', null, now(), $sub, null, 't', 'addressed', null, null, null, null);
    commit;
});
ok($node->poll_query_until('postgres', qq{
    select exists (select from pgque.tick where tick_queue = (select queue_id from pgque.queue where queue_name = 'addr')
                                              and tick_event_seq >= $aid)}),
	'the send and the addressed event are ticked');
is($node->safe_psql('postgres', q{select string_agg(payload, ' ' order by msg_id) from pgque.receive('addr', 'c', 10)}),
	'e1 addressed', 'both delivered, the killed one is not there');
is($node->safe_psql('postgres', qq{select count(*) from pgque.addressed_event where ae_sub = $sub}), '1',
	'one mark: the killed transaction left none');
# the addressed event is received, nacked and its retry acked: a copy
$node->safe_psql('postgres', q{select pgque.nack(r.batch_id, r, '0 seconds') from pgque.receive('addr', 'c', 10) r where r.payload = 'addressed'});
$node->safe_psql('postgres', q{select pgque.ack(b) from pgque.next_batch('addr', 'c') b});
$node->safe_psql('postgres', q{select pgque.maint_retry_events()});
ok($node->poll_query_until('postgres', q{
    select exists (select from pgque.receive('addr', 'c', 10) r where r.payload = 'addressed' and r.retry_count = 1)}),
	'the retry copy comes');
$node->safe_psql('postgres', q{select pgque.ack(b) from pgque.next_batch('addr', 'c') b});
$node->stop('immediate');
$node->start;
is($node->safe_psql('postgres', qq{select count(*) from pgque.addressed_event where ae_sub = $sub}), '1',
	'the mark survives an immediate stop');
$node->safe_psql('postgres', q{select pgque.seek('addr', 'c', 'earliest')});
is($node->safe_psql('postgres', q{
    select string_agg(payload || coalesce('(' || retry_count || ')', ''), ' ' order by msg_id, retry_count)
      from pgque.receive('addr', 'c', 100)}),
	'e1 addressed', 'the replay after the restart: the addressed event once, no retry copy');
$node->stop('fast');
done_testing();
