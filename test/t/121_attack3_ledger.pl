# Second reader of the session's branches (ADR 0107): a ledger (sent in the
# producer's transaction, received and acked in the consumer's) around the
# new read shapes of ADR 0106 (the old tick's in-progress list trimmed to
# the xids that can add rows, the tables of before a switch only for such
# an xid older than the step)
# and ADR 0105 (repeated ids at a part's end), consumed with receive_wait
# (ADR 0102), the workers on, fsync on.  A 32-bucket queue against an
# unbucketed twin fed the same events:
#   - L1 takes its xid before the old ticks and writes into both queues only
#     after several ticks and a rotation ran (its rows land in the new
#     table, its xid is older than the switch's step 2), with a savepoint
#     rolled back in the middle;
#   - L2 writes before the rotation and commits after it (its rows are in
#     the table of before the switch);
#   - H holds an xid across every tick and writes nothing (the trim leaves
#     it out of every window);
#   - prepared transactions: one committed after ticks and a rotation, one
#     rolled back, one still prepared across a crash restart (a waiter
#     SIGKILLed) and committed after it;
#   - repeated ids (insert_event_raw with an id the queue handed out) read in
#     parts of 7, so that a part ends at the repeated id;
#   - a waiter terminated while it waits.
# Every committed event is received and acked exactly once in each queue,
# no rolled-back one ever, and the two queues got the same events.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;

$SIG{PIPE} = 'IGNORE';

my $node = PgqueNode->new_preloaded('attack3_ledger', conf => q{
fsync = on
restart_after_crash = on
max_prepared_transactions = 10
pgque_bgw.launcher_naptime = '1s'
pgque_bgw.ticker_stalled_after = '3600s'
});
$node->install('postgres');
ok($node->wait_for_workers('postgres'), 'the workers run');

$node->safe_psql('postgres', q{
    select pgque.create_queue('lb'), pgque.set_queue_config('lb', 'partition_buckets', '32');
    select pgque.create_queue('lp');
    select pgque.subscribe('lb', 'c'), pgque.subscribe('lp', 'c');
    create table sent (q text, payload text);
    create table got (q text, payload text, msg_id bigint, batch_id bigint,
                      at timestamptz default clock_timestamp());

    -- n events tag-1..n into both queues (keys over 37), in the ledger in
    -- the same transaction
    create function put(tag text, n int4) returns void language plpgsql as $$
    declare
        q text;
    begin
        foreach q in array array['lb', 'lp'] loop
            perform pgque.send_batch(q, 'default',
                                     array(select tag || '-' || i from generate_series(1, n) i),
                                     array(select 'k' || (i % 37) from generate_series(1, n) i));
            insert into sent select q, tag || '-' || i from generate_series(1, n) i;
        end loop;
    end $$;

    -- one receive_wait of consumer c in parts of 7, its events in the
    -- ledger and acked in one transaction -> the events
    create function take(qn text, t interval) returns int language plpgsql as $$
    declare
        b bigint;
        n int;
    begin
        create temp table if not exists cur (like pgque.message);
        truncate cur;
        insert into cur select * from pgque.receive_wait(qn, 'c', 7, t);
        insert into got (q, payload, msg_id, batch_id) select qn, payload, msg_id, batch_id from cur;
        select max(batch_id), count(*) into b, n from cur;
        if b is not null then
            perform pgque.ack(b);
        end if;
        return n;
    end $$;

    -- the ticks of a queue so far
    create function ticks(qn text) returns bigint language sql as $$
        select count(*) from pgque.tick t join pgque.queue q on q.queue_id = t.tick_queue
         where q.queue_name = qn
    $$;
});

sub psql { return $node->safe_psql('postgres', $_[0]); }

# both queues ticked at least n more times (by hand: the worker's ticks
# come too, and are fine)
sub tick_both
{
	my ($n) = @_;
	for (1 .. $n)
	{
		psql(q{select pgque.send('lp', 'default', 'filler', 'kf'), pgque.send('lb', 'default', 'filler', 'kf')});
		psql(q{select pgque.ticker('lb'), pgque.ticker('lp')});
	}
}

# a rotation of both queues: a switch (step 1), then its step 2
sub rotate_both
{
	psql(q{select pgque.set_queue_config(q, 'rotation_period', '1 millisecond') from unnest(array['lb', 'lp']) q});
	psql(q{select pg_sleep(0.01)});
	psql(q{select pgque.maint()});
	tick_both(1);
	psql(q{select pgque.maint()});
	psql(q{select pgque.set_queue_config(q, 'rotation_period', '2 hours') from unnest(array['lb', 'lp']) q});
}

sub cur_tables
{
	return psql(q{select string_agg(queue_cur_table::text, ',' order by queue_name) from pgque.queue
	               where queue_name in ('lb', 'lp')});
}

# drain both queues until every tick is passed and no batch is open
sub drain
{
	for my $q ('lb', 'lp')
	{
		PgqueNode::poll_until(sub {
			my $k = psql("select take('$q', '0')");
			return 0 if $k > 0;
			return psql(qq{select s.sub_batch is null and s.sub_last_tick = (select max(tick_id) from pgque.tick t where t.tick_queue = s.sub_queue)
			                 from pgque.subscription s join pgque.queue q on q.queue_id = s.sub_queue
			                where q.queue_name = '$q'}) eq 't';
		});
	}
}

psql(q{select put('r0', 40)});
tick_both(1);
drain();

# the long sessions: L1 takes its xid now and writes later, L2 writes now,
# H holds an xid and writes nothing
my $l1 = $node->background_psql('postgres', on_error_stop => 1);
$l1->query_safe(q{begin});
$l1->query_safe(q{select pg_current_xact_id()});
my $l2 = $node->background_psql('postgres', on_error_stop => 1);
$l2->query_safe(q{begin});
$l2->query_safe(q{select put('l2', 30)});
my $h = $node->background_psql('postgres', on_error_stop => 1);
$h->query_safe(q{begin});
$h->query_safe(q{select pg_current_xact_id()});

# prepared: pa commits after the rotation, pb rolls back, pc spans a crash
psql(q{begin; select put('pa', 25); prepare transaction 'a3_pa';});
psql(q{begin; select put('pb', 25); prepare transaction 'a3_pb';});

psql(q{select put('r1', 50)});
tick_both(3);
psql(q{select put('r2', 10)});
drain();

my $before = cur_tables();
rotate_both();
my $after = cur_tables();
isnt($after, $before, "both queues switched tables ($before -> $after)");

# L1 writes now, after the old ticks and the switch; a savepoint of it
# rolls back
$l1->query_safe(q{select put('l1', 20)});
$l1->query_safe(q{savepoint s; select put('l1x', 9); rollback to savepoint s;});
$l1->query_safe(q{select put('l1y', 11)});
psql(q{select put('r3', 30)});
tick_both(2);
drain();
$l1->query_safe(q{commit});
$l2->query_safe(q{commit});
psql(q{commit prepared 'a3_pa'});
psql(q{rollback prepared 'a3_pb'});
psql(q{select put('r4', 15)});
tick_both(2);

# repeated ids: an admin repeats an id the queue handed out, in the middle
# of a window read in parts of 7
psql(q{select put('r5', 13)});
psql(q{
    insert into sent select q, 'rep-' || q || '-' || i
      from unnest(array['lb', 'lp']) q, generate_series(1, 3) i;
    select pgque.insert_event_raw(q, pgque._event_seq_pos(x) - 5, now(), null, null, 'default',
                                  'rep-' || q || '-' || i, 'k' || i, null, null, null)
      from unnest(array['lb', 'lp']) q, generate_series(1, 3) i, pgque.queue x
     where x.queue_name = q;
});
psql(q{select put('r6', 13)});
tick_both(1);
drain();

# a waiter terminated while it waits: nothing taken, nothing acked
my %w = (out => '', err => '');
$w{h} = IPC::Run::start(['psql', '-X', '-A', '-t', '-q', '-d', $node->connstr('postgres'),
                         '-c', q{select take('lp', '30 s')}], '>', \$w{out}, '2>', \$w{err});
ok(PgqueNode::poll_until(sub {
	psql(q{select count(*) from pg_stat_activity where wait_event_type = 'Extension'
	        and query like '%take(%' and pid <> pg_backend_pid()}) == 1 }), 'a waiter waits');
psql(q{select pg_terminate_backend(pid) from pg_stat_activity where query like '%take(''lp''%'
        and pid <> pg_backend_pid()});
$w{h}->finish;
like($w{err}, qr/terminat/, 'the waiter was terminated');

# pc prepared, then a waiter SIGKILLed: a crash restart while pc is prepared
# and H (writing nothing) dies with the server
psql(q{begin; select put('pc', 17); prepare transaction 'a3_pc';});
psql(q{select put('r7', 21)});
tick_both(1);
drain();
%w = (out => '', err => '');
$w{h} = IPC::Run::start(['psql', '-X', '-A', '-t', '-q', '-d', $node->connstr('postgres'),
                         '-c', q{select take('lb', '30 s')}], '>', \$w{out}, '2>', \$w{err});
ok(PgqueNode::poll_until(sub {
	psql(q{select count(*) from pg_stat_activity where wait_event_type = 'Extension'
	        and query like '%take(''lb''%' and pid <> pg_backend_pid()}) == 1 }), 'a waiter waits again');
my $pid = psql(q{select pid from pg_stat_activity where query like '%take(''lb''%' and pid <> pg_backend_pid()});
$node->kill9_and_wait($pid);
$w{h}->finish;
eval { $h->quit; };
ok(PgqueNode::wait_back($node, 'postgres'), 'the server is back after the crash restart');
ok($node->wait_for_workers('postgres'), 'the workers run again');
psql(q{commit prepared 'a3_pc'});
psql(q{select put('r8', 9)});
tick_both(2);
drain();
eval { $l1->quit; $l2->quit; };

# the ledger
psql(q{delete from got where payload = 'filler'});
is(psql(q{select count(*) from (select q, payload from got group by 1, 2 having count(*) > 1) d}), '0',
   'no event received and acked twice');
is(psql(q{select count(*) from (select q, payload from sent except select q, payload from got) m}), '0',
   'every committed event received and acked');
is(psql(q{select count(*) from (select q, payload from got except select q, payload from sent) x}), '0',
   'nothing received that was not committed (the rolled-back savepoint, pb)');
is(psql(q{select count(*) from got where payload like 'l1x-%' or payload like 'pb-%'}), '0',
   'no rolled-back event');
is(psql(q{select count(*) from sent}), psql(q{select count(*) from got}), 'as many received as sent');
is(psql(q{select count(*) from ((select payload from got where q = 'lb' except select payload from got where q = 'lp')
                                 union all
                                 (select payload from got where q = 'lp' except select payload from got where q = 'lb')) d}),
   '6', 'the 32-bucket queue and its unbucketed twin got the same events (but their repeated ids\' names)');
is(psql(q{select count(*) from got where payload like 'rep-%'}), '6', 'the repeated ids all came');
is(psql(q{select string_agg(payload || ':' || n, ',' order by payload)
            from (select split_part(payload, '-', 1) as payload, count(*) / 2 as n from got
                   where payload not like 'rep-%' group by 1) t}),
   'l1:20,l1y:11,l2:30,pa:25,pc:17,r0:40,r1:50,r2:10,r3:30,r4:15,r5:13,r6:13,r7:21,r8:9',
   'each producer\'s events, per queue');

done_testing();
