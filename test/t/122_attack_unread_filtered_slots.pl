# The attack ADR 0096 left open, with the real watchdog (ADR 0094): a
# pgque_reader subscribes a partitioned consumer whose n does not divide the
# queue's buckets (3 of 32: no own buckets, every slot's rows filtered from
# the stream) and never reads it.  Every watchdog pass counted its slots'
# pending events with the exact group read: the whole stream since it
# subscribed, on every pass.  Now one read for its slots far behind, which
# stops at the cap (10,000 rows).
#   - real workers (watchdog every second, slot_unpolled after 1 s), 100,000
#     events after the subscription;
#   - the watchdog's passes read at most about the cap's rows each from the
#     queue's event tables, where one exact count reads 100,000;
#   - slot_unpolled opens for the attacker's three slots, said capped, their
#     counts lower bounds of their shares;
#   - a scrape (metrics(), as the reader) reads as little.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PgqueNode->new_preloaded('attack_unread_filtered', conf => q{
pgque_bgw.launcher_naptime = '1s'
pgque_bgw.watchdog_interval = '1s'
pgque_bgw.slot_unpolled_after = '1s'
track_functions = 'all'
});
$node->install('postgres');
ok($node->wait_for_workers('postgres'), 'the workers run');

$node->safe_psql('postgres', q{
    create role mallory login in role pgque_reader;
    select pgque.create_queue('fa');
    select pgque.set_queue_config('fa', 'partition_buckets', '32');
    select pgque.maint_rotate_tables_step2();
});
# the attacker: subscribes 3 slots (3 does not divide 32) and never reads
$node->safe_psql('postgres', q{
    set role mallory;
    select pgque.subscribe_slot('fa', 'm', s, 3) from generate_series(0, 2) s;
});
$node->safe_psql('postgres', q{
    select count(*) from unnest(pgque.send_batch('fa', 'ev', array_fill('p'::text, array[100000]),
                                                 array(select 'key-' || (g % 1000) from generate_series(1, 100000) g)));
    select pgque.force_tick('fa');
});
my $qid = $node->safe_psql('postgres', q{select queue_id from pgque.queue where queue_name = 'fa'});

ok(PgqueNode::poll_until(sub {
	$node->safe_psql('postgres', q{
	    select count(*) from pgque.alert where kind = 'slot_unpolled' and cleared_at is null and subject like 'fa/m/%'}) eq '3';
}), "slot_unpolled opens for the attacker's three slots");
is($node->safe_psql('postgres', q{
    select string_agg((a.details->>'pending_events_capped') || ':'
                      || ((a.details->>'pending_events')::bigint
                          <= (select count(*) from generate_series(1, 100000) g
                               where pgque._slot_of('key-' || (g % 1000), 3) = a.slot))::text, ',' order by a.slot)
      from pgque.alert a where a.kind = 'slot_unpolled' and a.cleared_at is null and a.subject like 'fa/m/%'}),
	'true:true,true:true,true:true', 'each said capped, a lower bound of its share');

# rows read from the queue's event tables by every process, and the passes
my $sample = sub {
	return split /\|/, $node->safe_psql('postgres', qq{
	    select coalesce(sum(coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0)), 0),
	           coalesce((select calls from pg_stat_user_functions
	                      where schemaname = 'pgque' and funcname = '_alert_conditions'), 0)
	      from pg_stat_user_tables where schemaname = 'pgque' and relname like 'event\\_${qid}\\_%'});
};
my ($r0, $p0) = $sample->();
sleep 6;
my ($r1, $p1) = $sample->();
my ($rows, $passes) = ($r1 - $r0, $p1 - $p0);
diag("figure: $passes watchdog passes read $rows rows of the queue's event tables ("
	. ($passes ? int($rows / $passes) : 'n/a') . ' a pass; one exact count reads 100,000)');
cmp_ok($passes, '>=', 2, "the watchdog passed ($passes)");
cmp_ok($rows, '<=', $passes * 10100, 'each pass read at most about the cap');

# the exact count, for comparison
($r0) = $sample->();
$node->safe_psql('postgres', q{select count(*) from pgque._slot_pending_all()});
($r1) = $sample->();
cmp_ok($r1 - $r0, '>=', 100000, 'one exact count reads the whole stream (' . ($r1 - $r0) . ' rows, with a pass or so)');

# the attacker's own scrape reads as little, and says capped
($r0, $p0) = $sample->();
is($node->safe_psql('postgres', q{
    set role mallory;
    select string_agg(m.value::text, ',' order by m.labels->>'consumer') from pgque.metrics() m
     where m.metric = 'pgque_consumer_pending_events_capped' and m.labels->>'queue' = 'fa'}),
	'1,1,1', "the reader's metrics(): its three slots capped");
($r1, $p1) = $sample->();
cmp_ok($r1 - $r0, '<=', ($p1 - $p0 + 1) * 10100, 'and that scrape read at most about the cap (beside the passes)');

$node->stop('fast');
done_testing();
