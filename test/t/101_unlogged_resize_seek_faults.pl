# Fault tests of ADR 0089 item 5, with a ledger (tables outside pgque: what
# was sent, and what each slot delivered, written in its ack's
# transaction), fsync on, real crashes (pg_ctl -m immediate) and backends
# terminated.  Workers off: the test ticks, so each step is where it says.
#   1. An unlogged queue crashes during a resize drain (2 -> 4, one old
#      slot drained, the other not): after the restart the ticker resets
#      it (alert), the resize switches at the first claim of the new layout,
#      and the new layout delivers what was sent after the crash exactly
#      once; nothing acked before the crash comes again; what was lost is at
#      most the alert's dropped_at_most.
#   2. It crashes right after a seek (to 'earliest', committed, nothing read
#      yet): after the restart the seek's replay is gone with the events, no
#      event from before the crash comes again, and a seek to 'earliest'
#      then replays only what was sent after it.
#   3. seek x pause under backend kills, on a logged queue: a pausing
#      partitioned consumer whose key k1 is blocked (its head nacked): the
#      seek is refused (55000), a worker backend terminated inside its
#      receive's transaction leaves k1 blocked, the head comes back and k1
#      drains; a seek is refused (55P03) while a worker is mid-call and
#      accepted once its backend is terminated; then every event is
#      delivered again from the start, each key never paused once and in
#      ev_id order, the paused key's too: the copies its release
#      re-inserted (ADR 0029) were acked before the seek and go with it
#      (ADR 0091), so each id comes once.  A seek whose backend is
#      terminated before its commit leaves the copies and the cursors; the
#      committed seek survives an immediate stop, and the slots are taken
#      over (new epochs) after the restart.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PgqueNode->new_preloaded('ulfault', conf => q{
pgque_bgw.enabled = off
fsync = on
restart_after_crash = on
});
$node->safe_psql('postgres', q{
    create extension pgque_bgw;
    select pgque.create_queue('uq', '{"unlogged": true}');
    select pgque.subscribe_partitioned('uq', 'pc', 2);
    create table sent (q text, ev_id bigint, key text, phase int4, primary key (q, ev_id));
    create table acked (q text, n int4, slot int4, ev_id bigint, key text, seq bigserial);
    -- one slot's batches until it has none: claim, receive, ledger and ack
    -- in one transaction per batch (the worker id names the layout)
    create function drain_slot(i_q text, i_c text, i_n int4, i_k int4) returns int4 language plpgsql as $$
    declare
        w  text := 'w' || i_k || '/' || i_n;
        n  int4;
    begin
        perform pgque.claim_slot(i_q, i_c, i_k, w, '1 hour');
        insert into acked (q, n, slot, ev_id, key)
        select i_q, i_n, i_k, m.msg_id, m.extra1
          from pgque.receive_partitioned(i_q, i_c, i_k, i_n, w, 1000) m order by m.msg_id;
        get diagnostics n = row_count;
        perform pgque.ack_partitioned(i_q, i_c, i_k, i_n, w);
        return n;
    end $$;
    create function try_seek(i_q text, i_c text) returns text language plpgsql as $$
    begin
        perform pgque.seek(i_q, i_c, 'earliest');
        return 'ok';
    exception when others then
        return sqlstate;
    end $$;
    create function send_some(i_q text, i_phase int4, i_count int4) returns void language sql as $$
        insert into sent select i_q, pgque.send(i_q, 'ev', 'p' || i_phase || '-' || i, 'k' || (i % 5)), 'k' || (i % 5), i_phase
          from generate_series(1, i_count) i
    $$;
});

# drain every slot of n until a whole pass gets nothing
sub drain
{
    my ($q, $c, $n) = @_;
    my $total = 0;
    for (1 .. 50)
    {
        my $got = $node->safe_psql('postgres',
            qq{select sum(drain_slot('$q', '$c', $n, k)) from generate_series(0, $n - 1) k});
        $total += $got;
        last if $got == 0;
    }
    return $total;
}
sub q1 { return $node->safe_psql('postgres', $_[0]); }

# --- 1. a crash during a resize drain ---------------------------------------
q1(q{select send_some('uq', 1, 40); select pgque.ticker('uq')});
is(drain('uq', 'pc', 2), 40, 'before the resize: 40 events delivered by the 2 slots');
q1(q{select send_some('uq', 2, 40); select pgque.ticker('uq')});
q1(q{select pgque.resize_partitioned('uq', 'pc', 4)});
q1(q{select send_some('uq', 3, 40); select pgque.ticker('uq')});
# the old slot 0 drains to the boundary, slot 1 does not
q1(q{select drain_slot('uq', 'pc', 2, 0)});
is(q1(q{select cardinality(draining_slots) from pgque.partition_resize_status where consumer = 'pc'}), '1',
   'the resize is draining: one old slot left');
$node->stop('immediate');
$node->start;
ok($node->wait_back('postgres'), 'back after the immediate stop');
q1(q{select pgque.ticker('uq')});
is(q1(q{select count(*) from pgque.alert where kind = 'unlogged_reset' and subject = 'uq'}), '1',
   'the ticker reset uq: one unlogged_reset alert');
my $dropped = q1(q{select details->>'dropped_at_most' from pgque.alert where kind = 'unlogged_reset' and subject = 'uq'});
q1(q{select send_some('uq', 4, 40); select pgque.ticker('uq')});
is(drain('uq', 'pc', 4), 40, 'the new layout (n = 4) delivers the 40 events sent after the crash');
is(q1(q{select count(*) from pgque.partition_resize_status where consumer = 'pc'}), '0', '... the resize is done');
is(q1(q{select n from pgque.partition_slot_status where consumer = 'pc' group by n}), '4', '... n is 4');
is(q1(q{select count(*) from (select q, ev_id from acked group by q, ev_id having count(*) > 1) d}), '0',
   'ledger: no event acked twice');
is(q1(q{select count(*) from sent s where s.phase = 4 and not exists (select from acked a where a.q = s.q and a.ev_id = s.ev_id)}),
   '0', 'ledger: every event sent after the crash acked');
my $lost = q1(q{select count(*) from sent s where s.q = 'uq' and not exists (select from acked a where a.q = s.q and a.ev_id = s.ev_id)});
ok($lost > 0 && $lost <= $dropped, "ledger: $lost events lost in the crash, at most the alert's dropped_at_most ($dropped)");

# --- 2. a crash right after a seek ------------------------------------------
q1(q{select send_some('uq', 5, 20); select pgque.ticker('uq')});
q1(q{select clamped from pgque.seek('uq', 'pc', 'earliest')});
$node->stop('immediate');
$node->start;
ok($node->wait_back('postgres'), 'back after the second immediate stop');
q1(q{select pgque.ticker('uq')});
ok(q1(q{select (details->>'reset_at')::timestamptz > now() - interval '5 minutes' from pgque.alert where kind = 'unlogged_reset' and subject = 'uq' and cleared_at is null}) eq 't',
   'reset again: the open alert\'s details updated');
q1(q{select send_some('uq', 6, 20); select pgque.ticker('uq')});
my $before = q1(q{select coalesce(max(seq), 0) from acked});
is(drain('uq', 'pc', 4), 20, 'after the crash the consumer gets only the 20 sent since');
is(q1(qq{select count(*) from acked a join sent s using (q, ev_id) where a.seq > $before and s.phase <> 6}), '0',
   '... none from before the crash (the seek\'s replay went with the events)')
  or diag(q1(qq{select string_agg(a.ev_id || ':' || s.phase || ':' || a.n || '/' || a.slot, ' ') from acked a join sent s using (q, ev_id) where a.seq > $before and s.phase <> 6}));
# a seek to 'earliest' never lands in the lost span (ADR 0067's replay
# marks): it replays none of it, and at most what was sent since
q1(q{select clamped from pgque.seek('uq', 'pc', 'earliest')});
q1(q{select send_some('uq', 6, 5); select pgque.ticker('uq')});
$before = q1(q{select coalesce(max(seq), 0) from acked});
my $replayed = drain('uq', 'pc', 4);
ok($replayed >= 5 && $replayed <= 25, "a seek to earliest after the reset: $replayed events, at most those sent since");
is(q1(qq{select count(*) from acked a join sent s using (q, ev_id) where a.seq > $before and s.phase <> 6}), '0',
   '... and nothing from before the crash');

# --- 3. seek x pause under backend kills --------------------------------------
q1(q{
    select pgque.create_queue('lq');
    select pgque.subscribe_partitioned('lq', 'pp', 2);
    select pgque.set_failure_policy('lq', 'pp', 'pause');
    select send_some('lq', 7, 30);
    select pgque.ticker('lq');
});
my $k1_slot = q1(q{select (hashtextextended('k1', 0) % 2 + 2) % 2});
# the slot of k1 nacks k1's first event: k1 blocked behind it
my $wk = "w$k1_slot/2";
q1(qq{
    select pgque.claim_slot('lq', 'pp', $k1_slot, '$wk', '1 hour');
    create temp table b as select * from pgque.receive_partitioned('lq', 'pp', $k1_slot, 2, '$wk', 1000);
    select pgque.nack_partitioned('lq', 'pp', $k1_slot, 2, '$wk',
             (m.msg_id, m.batch_id, m.type, m.payload, m.retry_count, m.created_at,
              m.extra1, m.extra2, m.extra3, m.extra4)::pgque.message, '1 second', 'fault test')
      from b m where m.extra1 = 'k1' order by m.msg_id limit 1;
    insert into acked (q, n, slot, ev_id, key) select 'lq', 2, $k1_slot, msg_id, extra1 from b where extra1 <> 'k1';
    select pgque.ack_partitioned('lq', 'pp', $k1_slot, 2, '$wk');
});
is(q1(q{select count(*) from pgque.blocked_key}), '1', 'k1 is blocked behind its nacked head');
is(q1(q{select try_seek('lq', 'pp')}), '55000', 'a seek of the consumer while k1 is blocked is refused (55000)');
# a worker of k1's slot mid-call, its backend terminated: the block holds
my $bg = $node->background_psql('postgres', on_error_stop => 1);
my $pid = $bg->query_safe(q{select pg_backend_pid()});
$bg->query_safe(qq{begin; select pgque.claim_slot('lq', 'pp', $k1_slot, '$wk', '1 hour');
                   select count(*) from pgque.receive_partitioned('lq', 'pp', $k1_slot, 2, '$wk', 1000)});
$node->safe_psql('postgres', qq{select pg_terminate_backend($pid, 30000)});
eval { $bg->quit };
is(q1(q{select count(*) from pgque.blocked_key}), '1', 'its backend terminated mid-call: k1 is still blocked');
# the head comes back (maint moves the due retry) and k1 drains in order
ok(PgqueNode::poll_until(sub {
    q1(q{select pgque.maint(); select pgque.ticker('lq')});
    drain('lq', 'pp', 2);
    q1(q{select count(*) from pgque.blocked_key}) eq '0';
}, 60), 'the nacked head came back and was acked: k1 is free');
is(q1(q{select count(*) from sent s where s.q = 'lq' and not exists (select from acked a where a.q = s.q and a.ev_id = s.ev_id)}),
   '0', 'ledger: every event of lq acked once the head came back');
# a worker of the other slot mid-call: the seek is refused at once; once
# its backend is terminated the seek goes through
my $other = 1 - $k1_slot;
q1(q{select send_some('lq', 8, 10); select pgque.ticker('lq')});
$bg = $node->background_psql('postgres', on_error_stop => 1);
$pid = $bg->query_safe(q{select pg_backend_pid()});
$bg->query_safe(qq{begin; select pgque.claim_slot('lq', 'pp', $other, 'w$other/2', '1 hour');
                   select count(*) from pgque.receive_partitioned('lq', 'pp', $other, 2, 'w$other/2', 1000)});
is(q1(q{select try_seek('lq', 'pp')}), '55P03', 'a seek while a worker is mid-call is refused at once (55P03)');
$node->safe_psql('postgres', qq{select pg_terminate_backend($pid, 30000)});
eval { $bg->quit };
# a seek whose backend is terminated before its commit: the copies and
# the cursors stay (nothing is replayed)
my $lq_id = q1(q{select queue_id from pgque.queue where queue_name = 'lq'});
my $owned = qq{select count(*) from pgque.event_$lq_id where ev_owner is not null};
my $copies_before = q1($owned);
ok($copies_before > 0, "the release of k1 re-inserted copies under their ids ($copies_before rows)");
$bg = $node->background_psql('postgres', on_error_stop => 1);
$pid = $bg->query_safe(q{select pg_backend_pid()});
$bg->query_safe(q{begin; select pgque.seek('lq', 'pp', 'earliest')});
$node->safe_psql('postgres', qq{select pg_terminate_backend($pid, 30000)});
eval { $bg->quit };
is(q1($owned), $copies_before, 'a seek terminated before its commit leaves the copies');
my $mark = q1(q{select coalesce(max(seq), 0) from acked});
is(drain('lq', 'pp', 2), 10, '... and the cursors: the slots go on with the 10 events sent last');
is(q1(qq{select count(*) from acked a join sent s using (q, ev_id) where a.seq > $mark and s.phase <> 8}), '0',
   '... nothing from before is replayed');
my $before3 = q1(q{select coalesce(max(seq), 0) from acked});
is(q1(q{select try_seek('lq', 'pp')}), 'ok', 'the seek goes through once the worker\'s backend is terminated');
is(q1($owned), '0', 'the committed seek removed the copies the slots had acked');
# the seek is durable: an immediate stop, and the slots' leases are gone
# (the drain after the restart takes them over under new epochs)
$node->stop('immediate');
$node->start;
ok($node->wait_back('postgres'), 'back after the immediate stop that followed the seek');
q1(q{select pgque.ticker('lq')});
drain('lq', 'pp', 2);
is(q1(qq{select count(distinct a.ev_id) from acked a where a.q = 'lq' and a.seq > $before3}), '40',
   'after the seek every one of the 40 events of lq is delivered again');
is(q1(qq{select count(*) from acked a where a.q = 'lq' and a.seq > $before3}), '40',
   '... each once, the paused key k1 included (ADR 0091)');
is(q1(qq{select count(*) from acked a where a.q = 'lq' and a.seq > $before3 and a.key = 'k1'}),
   q1(q{select count(*) from sent where q = 'lq' and key = 'k1'}), '... k1 once per id');
is(q1(qq{
    select count(*) from (
        select a.key, a.ev_id, lag(a.ev_id) over (partition by a.key order by a.seq) as prev
          from acked a where a.q = 'lq' and a.seq > $before3) x
     where x.prev is not null and x.prev >= x.ev_id}), '0',
   'ledger: after the seek each key, k1 included, is delivered in ev_id order');

$node->stop('fast');
done_testing();
