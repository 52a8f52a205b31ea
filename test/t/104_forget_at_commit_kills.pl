# Forget-at-commit under kills (ADR 0089, kept in one sorted source by ADR
# 0091), with a ledger (tables outside pgque: what was sent, and what each
# consumer's slot acked, written in the ack's transaction), fsync on.
# Workers off: the test claims and drains, so each step is where it says.
#   1. A transaction unsubscribes eight consumers' last slots, four of them
#      in savepoints rolled back, two subscribed and claimed again (one in
#      a savepoint rolled back), and its backend is terminated before the
#      commit: every lease stays (is back) its owner's under the same epoch, another
#      worker is refused throughout, and the owners drain the rest of their
#      events: each once, none lost.
#   2. The same committed: the consumers unsubscribed for good have no
#      lease, the one claimed again after the forget keeps its new lease,
#      the one whose claim rolled back has none; another worker's claim is
#      refused until the commit.  Then an immediate stop: after the restart
#      epochs only grow, and nothing acked before the stop comes again.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PgqueNode->new_preloaded('forgetkill', conf => q{
pgque_bgw.enabled = off
fsync = on
restart_after_crash = on
});
sub q1 { return $node->safe_psql('postgres', $_[0]); }

q1(q{
    create extension pgque_bgw;
    select pgque.create_queue('fq');
    select pgque.subscribe_slot('fq', 'f' || i, 0, 1) from generate_series(1, 8) i;
    create table sent (ev_id bigint primary key);
    create table acked (consumer text, ev_id bigint, seq bigserial);
    create table epochs (consumer text primary key, epoch bigint);
    -- one consumer's batches until it has none, as worker w: receive,
    -- ledger and ack in one transaction per batch
    create function drain(i_c text, i_w text) returns int4 language plpgsql as $$
    declare
        n  int4;
        t  int4 := 0;
    begin
        loop
            insert into acked (consumer, ev_id)
            select i_c, m.msg_id from pgque.receive_partitioned('fq', i_c, 0, 1, i_w, 1000) m;
            get diagnostics n = row_count;
            perform pgque.ack_partitioned('fq', i_c, 0, 1, i_w);
            t := t + n;
            exit when n = 0;
        end loop;
        return t;
    end $$;
    create function leases() returns text language sql as $$
        select coalesce(string_agg(l.consumer || ':' || l.owner ||
                                   case when e.epoch = l.epoch then '' else '*' end, ' ' order by l.consumer), 'none')
          from pgque._slot_leases() l left join epochs e using (consumer)
         where l.consumer like 'f%' and l.owner is not null and l.owner <> ''
    $$;
});
q1(q{
    insert into epochs select 'f' || i, pgque.claim_slot('fq', 'f' || i, 0, 'old', '1 hour') from generate_series(1, 8) i;
    insert into sent select pgque.send('fq', 'ev', 'e' || i, 'k' || i) from generate_series(1, 40) i;
    select pgque.ticker('fq');
});
# half of each consumer's events acked before the kills: one drain each
is(q1(q{select sum(drain('f' || i, 'old')) from generate_series(1, 4) i}), '160',
   'before: f1..f4 drained (40 each)');
my $all_old = q1(q{select leases()});
is($all_old, 'f1:old f2:old f3:old f4:old f5:old f6:old f7:old f8:old', 'every slot is old\'s');

# the forgetting transaction: f1..f4 unsubscribed in savepoints rolled
# back, f5..f8 unsubscribed; f5 subscribed and claimed again (kept), f6 the
# same in a savepoint rolled back
my $forgets = q{
    begin;
    select pgque.unsubscribe_slot('fq', 'f8', 0);
    savepoint a;
    select pgque.unsubscribe_slot('fq', 'f' || i, 0) from generate_series(1, 4) i;
    rollback to savepoint a;
    select pgque.unsubscribe_slot('fq', 'f' || i, 0) from generate_series(5, 7) i;
    select pgque.subscribe_slot('fq', 'f5', 0, 1), pgque.subscribe_slot('fq', 'f6', 0, 1);
    select pgque.claim_slot('fq', 'f5', 0, 'new', '1 hour');
    savepoint b;
    select pgque.claim_slot('fq', 'f6', 0, 'new', '1 hour');
    rollback to savepoint b;
    savepoint c;
    select pgque.unsubscribe_slot('fq', 'f' || i, 0) from generate_series(1, 2) i;
    rollback to savepoint c;
};

# --- 1. the backend terminated before the commit ------------------------------
q1(q{insert into sent select pgque.send('fq', 'ev', 'late' || i, 'k' || i) from generate_series(1, 8) i;
     select pgque.ticker('fq')});
my $bg = $node->background_psql('postgres', on_error_stop => 1);
my $pid = $bg->query_safe(q{select pg_backend_pid()});
$bg->query_safe($forgets);
# a claim takes effect at once (its abort undoes it), a forget at commit
is(q1(q{select leases()}), 'f1:old f2:old f3:old f4:old f5:new* f6:old f7:old f8:old',
   'while it is open, every other session sees old\'s leases (and f5 claimed again in it)');
is(q1(q{select count(*) from generate_series(1, 8) i
         where pgque.claim_slot('fq', 'f' || i, 0, 'thief', '1 hour') is not null}), '0',
   '... and another worker is refused every slot');
$node->safe_psql('postgres', qq{select pg_terminate_backend($pid, 30000)});
eval { $bg->quit };
is(q1(q{select leases()}), $all_old, 'terminated before its commit: every lease old\'s, same epochs');
is(q1(q{select count(*) from generate_series(1, 8) i
         where pgque.claim_slot('fq', 'f' || i, 0, 'old', '1 hour') = (select epoch from epochs where consumer = 'f' || i)}),
   '8', '... old renews each under its epoch');
my $rest = q1(q{select sum(drain('f' || i, 'old')) from generate_series(1, 8) i});
is($rest, 4 * 48 + 4 * 8, "the owners drain the rest ($rest)");
is(q1(q{select count(*) from sent s cross join generate_series(1, 8) i
         where not exists (select from acked a where a.consumer = 'f' || i and a.ev_id = s.ev_id)}), '0',
   'ledger: every event acked by every consumer');
is(q1(q{select count(*) from (select consumer, ev_id from acked group by 1, 2 having count(*) > 1) d}), '0',
   'ledger: none twice');

# --- 2. committed, then an immediate stop -------------------------------------
$bg = $node->background_psql('postgres', on_error_stop => 1);
$bg->query_safe($forgets);
is(q1(q{select count(*) from generate_series(5, 8) i
         where pgque.claim_slot('fq', 'f' || i, 0, 'thief', '1 hour') is not null}), '0',
   'until the commit another worker is refused the forgotten slots');
$bg->query_safe(q{commit});
$bg->quit;
is(q1(q{select leases()}), 'f1:old f2:old f3:old f4:old f5:new*',
   'committed: f1..f4 kept (rolled back), f5 the new claim\'s, f6 (claim rolled back), f7, f8 none');
my $max_epoch = q1(q{select max(epoch) from pgque._slot_leases()});
q1(q{insert into sent select pgque.send('fq', 'ev', 'post' || i, 'k' || i) from generate_series(1, 4) i;
     select pgque.ticker('fq')});
my $mark = q1(q{select coalesce(max(seq), 0) from acked});
$node->stop('immediate');
$node->start;
ok($node->wait_back('postgres'), 'back after the immediate stop');
is(q1(qq{select count(*) from generate_series(1, 6) i
          where pgque.claim_slot('fq', 'f' || i, 0, 'after', '1 hour') > $max_epoch}), '6',
   'after the restart every claim takes a larger epoch than any before the stop');
my $after = q1(q{select sum(drain('f' || i, 'after')) from generate_series(1, 6) i});
is($after, 6 * 4, "after the restart the slots deliver what was sent since ($after)");
is(q1(qq{select count(*) from acked a join sent s using (ev_id) where a.seq > $mark
          and exists (select from acked b where b.seq <= $mark and b.consumer = a.consumer and b.ev_id = a.ev_id)}), '0',
   'ledger: nothing acked before the stop comes again');

$node->stop('fast');
done_testing();
