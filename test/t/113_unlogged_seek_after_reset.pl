# seek('earliest') after an unlogged queue's crash reset (issue #30, ADR
# 0100).  The reset recorded the queue as truncated up to its own
# transaction, so 'earliest' was the first tick after the reset: the events
# sent between the crash and that tick, which the consumers got when they
# resumed, were skipped by a seek back (and by subscribe(start =>
# 'earliest')): committed events a replay did not deliver.  The reset now
# puts the replay floor just under the last tick before the crash, where
# every consumer resumes: the window after it holds only events sent since
# the crash (the lost ones are gone), the windows before it none.
# With a ledger (tables outside pgque), fsync on, an immediate stop:
#   - before: acked events, then events sent and never ticked (lost);
#   - after the crash, before the reset: events sent (kept); the reset and
#     more events;
#   - the consumer gets exactly the events sent after the crash, once;
#   - a seek to 'earliest' replays exactly those, all of them (fails before
#     the fix: only those after the first tick after the reset), never one
#     from before the crash; a new subscriber from 'earliest' the same;
#   - the reset alert says the replay starts at the last tick.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PgqueNode->new_preloaded('ulseek', conf => q{
pgque_bgw.enabled = off
fsync = on
restart_after_crash = on
});
$node->safe_psql('postgres', q{
    create extension pgque_bgw;
    select pgque.create_queue('uq', '{"unlogged": true}');
    select pgque.subscribe('uq', 'c');
    create table sent (ev_id bigint primary key, phase int4);
    create table acked (c text, ev_id bigint, round int4, seq bigserial);
    -- one batch: received, ledgered and acked in one transaction
    create function drain_one(i_c text, i_round int4) returns int4 language plpgsql as $$
    declare
        n  int4 := 0;
        b  bigint;
        m  pgque.message;
    begin
        for m in select * from pgque.receive('uq', i_c, 1000) x order by x.msg_id loop
            insert into acked (c, ev_id, round) values (i_c, m.msg_id, i_round);
            b := m.batch_id;
            n := n + 1;
        end loop;
        if b is not null then
            perform pgque.ack(b);
        end if;
        return n;
    end $$;
    create function send_some(i_phase int4, i_count int4) returns void language sql as $$
        insert into sent select pgque.send('uq', 'ev', 'p' || i_phase || '-' || i), i_phase
          from generate_series(1, i_count) i
    $$;
});
sub q1 { return $node->safe_psql('postgres', $_[0]); }

sub drain
{
	my ($c, $round) = @_;
	my $total = 0;
	for (1 .. 50)
	{
		my $got = q1("select drain_one('$c', $round)");
		# an empty window finishes itself: go on while ticks are ahead
		my $more = q1(qq{select count(*) from pgque.get_consumer_info('uq', '$c') i
		                  where i.last_tick < (select max(t.tick_id) from pgque.tick t
		                                        join pgque.queue q on q.queue_id = t.tick_queue
		                                       where q.queue_name = 'uq')});
		$total += $got;
		last if $got == 0 && $more eq '0';
	}
	return $total;
}

# phase 1: sent, ticked, acked; phase 2: sent, never ticked (lost)
q1(q{select send_some(1, 30); select pgque.ticker('uq')});
is(drain('c', 1), 30, 'before the crash: 30 events acked');
q1(q{select send_some(2, 10)});
$node->stop('immediate');
$node->start;
ok($node->wait_back('postgres'), 'back after the immediate stop');

# phase 3: sent after the crash, before the reset; phase 4: after it
q1(q{select send_some(3, 7)});
q1(q{select pgque.ticker('uq')});
is(q1(q{select count(*) from pgque.alert where kind = 'unlogged_reset' and subject = 'uq'}), '1',
   'the ticker reset uq: one unlogged_reset alert');
is(q1(q{select details->>'replay_from_last_tick' from pgque.alert where kind = 'unlogged_reset' and subject = 'uq'}),
   'true', '... its details: the replay starts at the last tick before the crash');
q1(q{select send_some(4, 5); select pgque.ticker('uq')});

is(drain('c', 2), 12, 'the consumer gets the 12 events sent after the crash');
is(q1(q{select count(*) from acked a join sent s using (ev_id) where a.round = 2 and s.phase in (3, 4)}), '12',
   '... phases 3 and 4, all of them');
is(q1(q{select count(*) from (select ev_id from acked where c = 'c' group by ev_id having count(*) > 1) d}), '0',
   'ledger: no event acked twice');
is(q1(q{select count(*) from sent s where s.phase = 2 and exists (select from acked a where a.ev_id = s.ev_id)}), '0',
   'ledger: the events lost in the crash are not delivered');

# a seek back: every event sent since the crash again, none from before
my $clamped = q1(q{select clamped from pgque.seek('uq', 'c', 'earliest')});
is(drain('c', 3), 12, "a seek to 'earliest' after the reset replays the 12 events sent since the crash (clamped: $clamped)");
is(q1(q{select count(*) from acked a join sent s using (ev_id) where a.round = 3 and s.phase = 3}), '7',
   '... the 7 sent between the crash and the first tick after the reset among them (skipped before the fix)');
is(q1(q{select count(*) from acked a join sent s using (ev_id) where a.round = 3 and s.phase in (1, 2)}), '0',
   '... and none from before the crash');
is(q1(q{select count(*) from (select ev_id from acked where round = 3 group by ev_id having count(*) > 1) d}), '0',
   '... each once');

# a new subscriber from 'earliest': the same
q1(q{select pgque.subscribe('uq', 'd', start => 'earliest')});
is(drain('d', 4), 12, "a new subscriber from 'earliest' gets the 12 events sent since the crash");
is(q1(q{select count(*) from acked a join sent s using (ev_id) where a.c = 'd' and s.phase in (3, 4)}), '12',
   '... exactly those');

# a second crash before anything more is sent: the floor holds (nothing
# lost this time: the replay is still whole)
q1(q{select send_some(5, 4)});
$node->stop('immediate');
$node->start;
ok($node->wait_back('postgres'), 'back after the second immediate stop');
q1(q{select send_some(6, 3); select pgque.ticker('uq')});
q1(q{select pgque.seek('uq', 'c', 'earliest')});
is(drain('c', 5), 3, 'after a second crash: the replay holds the 3 events sent since it');
is(q1(q{select count(*) from acked a join sent s using (ev_id) where a.round = 5 and s.phase <> 6}), '0',
   '... and nothing from before it');

$node->stop('fast');
done_testing();
