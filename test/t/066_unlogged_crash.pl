# Unlogged queues through a real crash and a failover (ADR 0068, issue #31
# item 4).  A primary with fsync on, its workers running, and a streaming
# standby.  Two queues side by side: "lq" logged, "uq" unlogged, each with a
# plain consumer; "uq" also has a cooperative group, a partitioned consumer
# with failure policy pause (one key blocked, its head waiting in the
# retry queue) and an idempotent producer.  The ledger (tables outside
# pgque): what was sent (the ids the sends returned), delivered (batches
# received and left open at the crash) and acked (in the ack's
# transaction).  Then:
#   - on the standby an unlogged queue's events are refused with a clear
#     error (0A000), while status() and metrics() still answer;
#   - pg_ctl -m immediate: "lq" loses nothing (every sent event acked);
#     "uq" is reset by the workers once the server is back: the
#     unlogged_reset alert names it and how many events at most were
#     dropped, no event from before the crash comes again, every consumer
#     kind gets exactly what is sent after, the blocked key stays blocked,
#     the idempotent producer may send its keys again, event ids go on;
#   - the standby promoted: its "uq" is reset too (alert) and usable.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;

my $primary = PgqueNode->new_preloaded('ul_primary', init => { allows_streaming => 1 }, conf => q{
fsync = on
pgque_bgw.launcher_naptime = '1s'
pgque_bgw.maint_interval = '1s'
pgque_bgw.watchdog_interval = '1s'
});
$primary->safe_psql('postgres', q{
    create extension pgque_bgw;
    select pgque.create_queue('lq');
    select pgque.create_queue('uq', '{"unlogged": true}');
    select pgque.subscribe('lq', 'c');
    select pgque.subscribe('uq', 'c');
    select pgque.register_subconsumer('uq', 'grp', 'm1');
    select pgque.subscribe_slot('uq', 'part', k, 2) from generate_series(0, 1) k;
    select pgque.set_failure_policy('uq', 'part', 'pause');

    create table sent (q text, ev_id bigint, payload text, key text);
    create table delivered (q text, kind text, ev_id bigint, payload text);
    create table acked (q text, kind text, ev_id bigint, payload text);

    -- one call: every batch there is now, each acked in this transaction
    -- with its ledger rows; kinds: plain, coop (member m1), slot0/slot1
    create function drain(i_q text, i_kind text) returns int4 language plpgsql as $$
    declare
        n  int4 := 0;
        b  bigint;
        k  int4;
    begin
        loop
            create temp table if not exists got (like pgque.message);
            truncate got;
            if i_kind = 'plain' then
                insert into got select * from pgque.receive(i_q, 'c', 1000);
            elsif i_kind = 'coop' then
                insert into got select * from pgque.receive_coop(i_q, 'grp', 'm1', 1000);
            else
                k := right(i_kind, 1)::int4;
                perform pgque.claim_slot(i_q, 'part', k, 'w' || k, '1 hour');
                insert into got select * from pgque.receive_partitioned(i_q, 'part', k, 2, 'w' || k, 1000);
            end if;
            b := (select max(batch_id) from got);
            exit when b is null;
            insert into acked select i_q, i_kind, msg_id, payload from got;
            if i_kind like 'slot%' then
                perform pgque.ack_partitioned(i_q, 'part', k, 2, 'w' || k);
            else
                perform pgque.ack(b);
            end if;
            n := n + (select count(*) from got);
        end loop;
        return n;
    end $$;
});

# the standby, streaming from the start
$primary->backup('bk');
my $standby = PgqueNode->new('ul_standby');
# (the backup carries the primary's settings: preloaded, fast workers)
$standby->init_from_backup($primary, 'bk', has_streaming => 1);
$standby->start;

# send: n events to queue q with keys k0..k4, recorded in the ledger
sub send_events
{
	my ($q, $tag, $n) = @_;
	$primary->safe_psql('postgres', qq{
        insert into sent
        select '$q', pgque.send('$q', 'ev', '$tag-' || i, 'k' || (i % 5)), '$tag-' || i, 'k' || (i % 5)
          from generate_series(1, $n) i});
}
# wait until every event sent to q is ticked (the workers tick)
sub wait_ticked
{
	my ($node, $q) = @_;
	return $node->poll_query_until('postgres', qq{
        select max(t.tick_event_seq) >= pgque._event_seq_pos(q)
          from pgque.queue q join pgque.tick t on t.tick_queue = q.queue_id
         where q.queue_name = '$q' group by q.queue_id, q});
}
# drain until kind has acked `want` events of q (or the deadline)
sub drain_until
{
	my ($node, $q, $kind, $want) = @_;
	return PgqueNode::poll_until(sub {
		$node->safe_psql('postgres', "select drain('$q', '$kind')");
		return $node->safe_psql('postgres',
			"select count(distinct ev_id) from acked where q = '$q' and kind = '$kind'") >= $want;
	}, 60, 0.2);
}

# phase 1: 50 events each, consumed by every consumer; one event of key k1
# nacked on the pausing slot for an hour: k1 is blocked, its head in the
# retry queue
send_events('lq', 'one', 50);
send_events('uq', 'one', 50);
$primary->safe_psql('postgres', q{
    insert into sent select 'uq', event_id, 'idem-' || i, null
      from generate_series(1, 5) i, pgque.send_idem('uq', 'ev', 'idem-' || i, 'key-' || i)});
ok(wait_ticked($primary, 'lq') && wait_ticked($primary, 'uq'), 'phase 1 ticked on both queues');
ok(drain_until($primary, 'lq', 'plain', 50), 'lq: 50 acked');
ok(drain_until($primary, 'uq', 'plain', 55), 'uq: the plain consumer acked 55');
ok(drain_until($primary, 'uq', 'coop', 55), 'uq: the cooperative member acked 55');
my $k1_slot = $primary->safe_psql('postgres', q{select pgque._slot_of('k1', 2)});
$primary->safe_psql('postgres', qq{
    select pgque.claim_slot('uq', 'part', $k1_slot, 'w$k1_slot', '1 hour');
    create temp table m as select * from pgque.receive_partitioned('uq', 'part', $k1_slot, 2, 'w$k1_slot', 1000);
    insert into acked select 'uq', 'slot$k1_slot', msg_id, payload from m
     where not (extra1 = 'k1' and msg_id >= (select min(msg_id) from m where extra1 = 'k1'));
    select pgque.nack_partitioned('uq', 'part', $k1_slot, 2, 'w$k1_slot',
             (m.msg_id, m.batch_id, m.type, m.payload, m.retry_count, m.created_at,
              m.extra1, m.extra2, m.extra3, m.extra4)::pgque.message, '1 hour', 'fails for the test')
      from m where extra1 = 'k1' order by msg_id limit 1;
    select pgque.ack_partitioned('uq', 'part', $k1_slot, 2, 'w$k1_slot');
});
is($primary->safe_psql('postgres', q{select count(*) from pgque.blocked_key}), '1', 'k1 is blocked on its slot');
my $other = 1 - $k1_slot;
$primary->safe_psql('postgres', "select drain('uq', 'slot$other')");

# phase 2: 30 more each, ticked, nobody reads them; the plain consumers of
# both queues hold an open batch of them (delivered, not acked)
send_events('lq', 'two', 30);
send_events('uq', 'two', 30);
ok(wait_ticked($primary, 'lq') && wait_ticked($primary, 'uq'), 'phase 2 ticked');
$primary->safe_psql('postgres', q{
    insert into delivered select 'lq', 'plain', msg_id, payload from pgque.receive('lq', 'c', 10);
    insert into delivered select 'uq', 'plain', msg_id, payload from pgque.receive('uq', 'c', 10);
});
my $max_before = $primary->safe_psql('postgres', q{select max(ev_id) from sent where q = 'uq'});
$primary->wait_for_catchup($standby);

# the standby: an unlogged queue's events are refused clearly
my ($rc, $out, $err) = $standby->psql('postgres', qq{\\set VERBOSITY verbose\nselect * from pgque.receive('uq', 'c', 10)});
like($err, qr/ERROR:  0A000: queue "uq" is unlogged: its events are not on a standby/,
     'standby: a receive on the unlogged queue says why, SQLSTATE 0A000');
like($err, qr/HINT:  Read the queue on the primary/, '... and what to do');
like($standby->safe_psql('postgres', q{select detail from pgque.status() where component = 'unlogged'}),
     qr/^queue "uq": unlogged/, 'standby: status() answers and names the unlogged queue');
is($standby->safe_psql('postgres', q{select value from pgque.metrics()
                                      where metric = 'pgque_queue_unlogged' and labels->>'queue' = 'uq'}),
   '1', 'standby: metrics() answers, pgque_queue_unlogged 1');
($rc, $out, $err) = $standby->psql('postgres', q{select count(*) from pgque.partition_slot_status});
is($err, '', 'standby: partition_slot_status answers');
($rc, $out, $err) = $standby->psql('postgres', q{select count(*) from pgque.get_consumer_info()});
is($err, '', 'standby: get_consumer_info() answers');

# the crash
$primary->stop('immediate');
$primary->start;
ok($primary->poll_query_until('postgres', q{select count(*) = 1 from pgque.alert where kind = 'unlogged_reset'}),
   'after the crash the workers reset uq: one unlogged_reset alert');
my ($subject, $dropped, $open) = split /\|/, $primary->safe_psql('postgres', q{
    select subject, details->>'dropped_at_most', cleared_at is null from pgque.alert where kind = 'unlogged_reset'});
is($subject, 'uq', 'the alert names the unlogged queue');
cmp_ok($dropped, '>=', 30, "it says at most $dropped events were dropped (30 were unread)");
is($open, 't', 'and it is open');
like(slurp_file($primary->logfile), qr/WARNING:  pgque_bgw alert unlogged_reset opened: queue "uq"/,
     'the server log has the WARNING');

# lq lost nothing: its open batch comes again, then the rest
ok(drain_until($primary, 'lq', 'plain', 80), 'lq: every event sent (80) acked across the crash');
is($primary->safe_psql('postgres', q{
    select count(*) from sent s where s.q = 'lq'
       and not exists (select from acked a where a.q = 'lq' and a.ev_id = s.ev_id)}), '0', 'lq: none lost');

# uq after the crash: the idempotent producer sends its keys again, new ids
is($primary->safe_psql('postgres', q{
    select string_agg(deduped::text, ',') from generate_series(1, 5) i,
           pgque.send_idem('uq', 'ev', 'idem-' || i, 'key-' || i)}),
   'false,false,false,false,false', 'uq: the idempotency keys of the lost events are free again');
send_events('uq', 'three', 20);
cmp_ok($primary->safe_psql('postgres', q{select min(ev_id) from sent where q = 'uq' and payload like 'three-%'}),
       '>', $max_before, 'uq: event ids go on past every id before the crash');
ok(wait_ticked($primary, 'uq'), 'uq ticked after the crash');
ok(drain_until($primary, 'uq', 'plain', 55 + 25), 'uq plain: the 25 events sent after the crash acked');
ok(drain_until($primary, 'uq', 'coop', 55 + 25), 'uq coop member: the same 25');
# the slots: every key but the blocked k1 (20 'three' events, 4 of k1; the
# idem events have no key: slot 0)
$primary->safe_psql('postgres', "select drain('uq', 'slot0'); select drain('uq', 'slot1')");
ok(PgqueNode::poll_until(sub {
	$primary->safe_psql('postgres', "select drain('uq', 'slot0'); select drain('uq', 'slot1')");
	$primary->safe_psql('postgres', q{select count(*) from acked where q = 'uq' and kind like 'slot%'
	                                    and ev_id > } . $max_before) == 21;
}, 60, 0.2), 'uq slots: the 21 events after the crash of keys other than k1 acked');
is($primary->safe_psql('postgres', q{select count(*) from acked where q = 'uq' and kind like 'slot%'
                                      and ev_id > } . $max_before . q{ and payload in
                                      (select payload from sent where key = 'k1')}), '0',
   'uq slots: k1 stays blocked behind its head');
is($primary->safe_psql('postgres', q{select count(*) from pgque.blocked_key b
    join pgque.retry_queue r on r.ev_owner = b.bk_sub and r.ev_id = b.bk_head}), '1',
   'uq: the blocked key is kept, its head waiting in the retry queue');
is($primary->safe_psql('postgres', qq{select count(*) from acked a where a.q = 'uq' and a.ev_id <= $max_before
    and exists (select from acked b where b.q = 'uq' and b.kind = a.kind and b.ev_id = a.ev_id
                 and b.ctid <> a.ctid)}), '0', 'uq: no event from before the crash delivered again');
is($primary->safe_psql('postgres', q{select count(*) from acked where q = 'uq' and payload like 'two-%'}), '0',
   'uq: none of the 30 lost events delivered');

# the promoted standby: its copy of uq has no events and no seal
$primary->wait_for_catchup($standby);
my $first_reset = $primary->safe_psql('postgres', q{select details->>'reset_at' from pgque.alert where kind = 'unlogged_reset'});
$primary->stop('fast');
$standby->promote;
ok($standby->poll_query_until('postgres', qq{select count(*) = 1 from pgque.alert where kind = 'unlogged_reset'
    and cleared_at is null and details->>'reset_at' <> '$first_reset'}),
   'the promoted standby resets uq: its open unlogged_reset alert says the new reset');
$standby->safe_psql('postgres', q{insert into sent select 'uq', pgque.send('uq', 'ev', 'promoted-' || i), 'promoted-' || i, null
                                  from generate_series(1, 5) i});
ok(wait_ticked($standby, 'uq'), 'the promoted server ticks uq');
ok(drain_until($standby, 'uq', 'plain', 55 + 25 + 5), 'the promoted server delivers what is sent to uq after promotion');
ok(drain_until($standby, 'lq', 'plain', 80), 'lq on the promoted server: nothing left to deliver, nothing lost');

$standby->stop('fast');
done_testing();
