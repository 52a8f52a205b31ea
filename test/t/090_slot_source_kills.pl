# Slot workers read through sources that hold only their slot's rows
# (ADR 0088): their own buckets with no key test (n divides the buckets),
# or relations that the source filters by the slot's rule (no buckets, n
# not dividing the buckets, a child table's own rows from before its
# buckets).  A worker draining every slot of four such consumers in parts
# of 50 is killed at arbitrary points: its backend (SIGKILL, crash
# restart) and the postmaster (immediate stop), with fsync on.  Each part
# is recorded and acked in one transaction, so the ledger must end with
# every sent event delivered once to each consumer, to the slot of its
# key, and each key's events in the order they were sent.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;

# quitting a psql whose backend was just killed may write to a closed pipe
$SIG{PIPE} = 'IGNORE';

my $node = PgqueNode->new_preloaded('slot_source_kills', conf => q{
restart_after_crash = on
fsync = on
pgque_bgw.enabled = off
});
$node->safe_psql('postgres', q{
    create extension pgque_bgw;
    select pgque.create_queue('q_u'), pgque.set_queue_config('q_u', 'partition_buckets', '0');
    select pgque.create_queue('q_b'), pgque.set_queue_config('q_b', 'partition_buckets', '8');
    select pgque.create_queue('q_late'), pgque.set_queue_config('q_late', 'partition_buckets', '0');
    select pgque.maint_rotate_tables_step2();
    select pgque.subscribe_slot('q_u', 'c3', s, 3) from generate_series(0, 2) s;
    select pgque.subscribe_slot('q_b', 'c4', s, 4) from generate_series(0, 3) s;
    select pgque.subscribe_slot('q_b', 'c3', s, 3) from generate_series(0, 2) s;
    select pgque.subscribe_slot('q_late', 'c2', s, 2) from generate_series(0, 1) s;
    create table readers (q text, co text, n int4);
    insert into readers values ('q_u', 'c3', 3), ('q_b', 'c4', 4), ('q_b', 'c3', 3), ('q_late', 'c2', 2);
    create table sent (q text, payload text primary key, key text, n bigserial);
    create table got (q text, co text, slot int4, payload text, key text, batch_id bigint, seq bigserial);
    create procedure send_round(i_round int4, i_events int4,
                                i_queues text[] default array['q_u', 'q_b', 'q_late']) language plpgsql as $$
    declare
        qn text;
    begin
        foreach qn in array i_queues loop
            insert into sent (q, payload, key)
            select qn, qn || '-r' || i_round || '-' || i, 'k' || (i % 41) from generate_series(1, i_events) i;
            perform pgque.send_batch(qn, 'default',
                                     array(select s.payload from sent s where s.q = qn and s.payload like qn || '-r' || i_round || '-%' order by s.n),
                                     array(select s.key from sent s where s.q = qn and s.payload like qn || '-r' || i_round || '-%' order by s.n));
        end loop;
    end $$;
});
# rows written to q_late's child table itself, then its buckets
$node->safe_psql('postgres', q{call send_round(0, 300, array['q_late'])});
$node->safe_psql('postgres', q{select pgque.set_queue_config('q_late', 'partition_buckets', '4')});
like($node->safe_psql('postgres', q{
    select pgque._event_source(q, pg_catalog.pg_current_snapshot(), pg_catalog.pg_current_snapshot(), 2, 1)
      from pgque.queue q where q.queue_name = 'q_late'}),
     qr/from only pgque\.event_\d+_\d+ where pgque\._slot_of\(ev_extra1, 2\)/,
     "q_late's slot reads its child table's own rows through the slot's key test");

my $drain = q{
    do $$
    declare
        b bigint;
        c record;
    begin
        for c in select * from readers order by q, co loop
            for s in 0 .. c.n - 1 loop
                perform pgque.claim_slot(c.q, c.co, s, 'tap-worker', '1 hour');
                loop
                    with r as (insert into got (q, co, slot, payload, key, batch_id)
                               select c.q, c.co, s, m.payload, m.extra1, m.batch_id
                                 from pgque.receive_partitioned(c.q, c.co, s, c.n, 'tap-worker', 50) m
                               returning batch_id)
                    select max(batch_id) into b from r;
                    exit when b is null;
                    perform pgque.ack_partitioned(c.q, c.co, s, c.n, 'tap-worker');
                    commit;
                    perform pg_sleep(0.005);
                end loop;
            end loop;
        end loop;
    end $$;
};

my $rounds = 4;
my $per_round = 500;
for my $round (1 .. $rounds)
{
    $node->safe_psql('postgres', "call send_round($round, $per_round)");
    $node->safe_psql('postgres', q{select pgque.ticker(q) from unnest(array['q_u', 'q_b', 'q_late']) q});
    my $before = $node->safe_psql('postgres', 'select count(*) from got');

    # the worker drains every slot in parts of 50; killed once some are in
    my $worker = $node->background_psql('postgres', on_error_stop => 0);
    my $pid = $worker->query_safe('select pg_backend_pid()');
    $worker->query_until(qr/draining/, "\\echo draining\n$drain\n");
    my $target = $before + 100 + int(rand(1200));
    ok(PgqueNode::poll_until(sub {
        $node->safe_psql('postgres', 'select count(*) from got') >= $target }, 120),
       "round $round: the worker got past $target deliveries");
    if ($round % 2)
    {
        $node->kill9_and_wait($pid);
        eval { $worker->quit; };
        ok(PgqueNode::wait_back($node, 'postgres'), "round $round: back after the backend's kill");
    }
    else
    {
        $node->stop('immediate');
        eval { $worker->quit; };
        $node->start;
        ok(1, "round $round: restarted after an immediate stop");
    }

    # a drain without kills finishes every slot from its acked position
    $node->safe_psql('postgres', $drain);
}

# per reader: sent, delivered, distinct, missing, to another slot
is($node->safe_psql('postgres', q{
    select string_agg(r.q || '/' || r.co || ' ' || x.sent || ':' || x.got || ':' || x.uniq || ':' || x.missing || ':' || x.wrong,
                      ', ' order by r.q, r.co)
      from readers r,
           lateral (select (select count(*) from sent s where s.q = r.q) as sent,
                           (select count(*) from got g where g.q = r.q and g.co = r.co) as got,
                           (select count(distinct g.payload) from got g where g.q = r.q and g.co = r.co) as uniq,
                           (select count(*) from sent s where s.q = r.q
                               and not exists (select from got g where g.q = r.q and g.co = r.co and g.payload = s.payload)) as missing,
                           (select count(*) from got g where g.q = r.q and g.co = r.co
                               and g.slot <> pgque._slot_of(g.key, r.n)) as wrong) x}),
   join(', ', map { my $t = $_->[0] eq 'q_late' ? 300 + $rounds * $per_round : $rounds * $per_round;
                    "$_->[0]/$_->[1] $t:$t:$t:0:0" }
        (['q_b', 'c3'], ['q_b', 'c4'], ['q_late', 'c2'], ['q_u', 'c3'])),
   'each reader: every event sent delivered and acked once, to the slot of its key');
is($node->safe_psql('postgres', q{
    select count(*) from (select s.n, lag(s.n) over (partition by g.q, g.co, g.key order by g.seq) as prev
                            from got g join sent s using (payload)) x
     where prev > n}), '0', "each key's events arrive in the order they were sent");
$node->stop('fast');
done_testing();
