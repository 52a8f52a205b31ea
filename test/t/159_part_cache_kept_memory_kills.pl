# The part cache keeps its rows' memory from one window to the next (ADR
# 0131: a first block as large as the largest window's rows, the arrays
# apart and as long as the last window's).  A consumer drains, in parts of
# 500, windows whose sizes change from one to the next (2,000, 10, 4,000
# events) of a 32-bucket queue and of a queue given its buckets in the
# middle of the drain, across a rotation of the tables; the consumer is
# killed at arbitrary points (its backend, SIGKILL: a crash restart; the
# postmaster, immediate stop), fsync on.  Each part is recorded and acked
# in one transaction, so the ledger must end with every sent event
# delivered once, each key's events in the order sent.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;

# quitting a psql whose backend was just killed may write to a closed pipe
$SIG{PIPE} = 'IGNORE';

my $node = PgqueNode->new_preloaded('kept_memory', conf => q{
restart_after_crash = on
fsync = on
pgque_bgw.enabled = off
});
$node->safe_psql('postgres', q{
    create extension pgque_bgw;
    select pgque.create_queue('mb'), pgque.set_queue_config('mb', 'partition_buckets', '32');
    select pgque.create_queue('mq'), pgque.set_queue_config('mq', 'partition_buckets', '0');
    select pgque.subscribe(q, 'w') from unnest(array['mb', 'mq']) q;
    create table sent (q text, payload text, key text, n int4, primary key (q, payload));
    create table got (q text, payload text, key text, batch_id bigint, seq bigserial);
});

my @sizes = (2000, 10, 4000);
my $rounds = 4;
my $drain = q{
    do $$
    declare
        b bigint;
        q text;
        more boolean := true;
    begin
        while more loop
            more := false;
            foreach q in array array['mb', 'mq'] loop
                with r as (insert into got (q, payload, key, batch_id)
                           select q, payload, extra1, batch_id from pgque.receive(q, 'w', 500)
                           returning batch_id)
                select max(batch_id) into b from r;
                if b is not null then
                    perform pgque.ack(b);
                    more := true;
                end if;
                commit;
            end loop;
            perform pg_sleep(0.005);
        end loop;
    end $$;
};

my $total = 0;
for my $round (1 .. $rounds)
{
    # round 2: mq gets its buckets with its windows in flight; round 3: a
    # rotation of both queues' tables in the middle of the backlog
    if ($round == 2)
    {
        $node->safe_psql('postgres', q{select pgque.set_queue_config('mq', 'partition_buckets', '32')});
    }
    my $w = 0;
    for my $size (@sizes)
    {
        $w++;
        for my $q ('mb', 'mq')
        {
            $node->safe_psql('postgres', qq{
                insert into sent select '$q', 'r$round-w$w-' || i, 'k' || (i % 97), i from generate_series(1, $size) i;
                select count(pgque.send_batch('$q', 'default',
                                              array(select payload from sent where q = '$q' and payload like 'r$round-w$w-%' order by n),
                                              array(select key from sent where q = '$q' and payload like 'r$round-w$w-%' order by n)));
            });
        }
        $node->safe_psql('postgres', q{select pgque.ticker('mb'), pgque.ticker('mq')});
        $total += 2 * $size;
        if ($round == 3 && $w == 1)
        {
            $node->safe_psql('postgres', q{
                select pgque.set_queue_config(q, 'rotation_period', '1 millisecond') from unnest(array['mb', 'mq']) q;
                select pg_sleep(0.01);
            });
            is($node->safe_psql('postgres', q{select sum(pgque.maint_rotate_tables_step1(q)) from unnest(array['mb', 'mq']) q}),
               '2', 'round 3: both queues switched tables with their windows undrained');
        }
    }
    my $before = $node->safe_psql('postgres', 'select count(*) from got');

    # the consumer drains the round's windows; killed once some parts are in
    my $consumer = $node->background_psql('postgres', on_error_stop => 0);
    my $pid = $consumer->query_safe('select pg_backend_pid()');
    $consumer->query_until(qr/draining/, "\\echo draining\n$drain\n");
    my $target = $before + 500 + int(rand(8000));
    ok(PgqueNode::poll_until(sub {
        $node->safe_psql('postgres', 'select count(*) from got') >= $target }, 90),
       "round $round: the consumer got past $target events");
    if ($round % 2)
    {
        $node->kill9_and_wait($pid);
        eval { $consumer->quit; };
        ok(PgqueNode::wait_back($node, 'postgres'), "round $round: back after the backend's kill");
    }
    else
    {
        $node->stop('immediate');
        eval { $consumer->quit; };
        $node->start;
        ok(1, "round $round: restarted after an immediate stop");
    }

    # a second drain, one backend across every window left, finishes them
    $node->safe_psql('postgres', $drain);
    $node->safe_psql('postgres', q{select pgque.maint_rotate_tables_step2()}) if $round == 3;
}

is($node->safe_psql('postgres', q{
    select count(*) from pgque.queue where queue_name = 'mq' and queue_partition_buckets = 32}),
   '1', 'mq was given its buckets during the drain');
my $ledger = $node->safe_psql('postgres', q{
    select (select count(*) from sent) || ':' || count(*) || ':' || count(distinct (q, payload)) || ':'
           || (select count(*) from sent s where not exists (select from got g where g.q = s.q and g.payload = s.payload))
      from got});
is($ledger, "$total:$total:$total:0", 'sent, delivered and acked once each: none lost, none twice');
is($node->safe_psql('postgres', q{
    select count(*) from (select s.n, lag(s.n) over (partition by g.q, g.key, split_part(g.payload, '-', 1) || split_part(g.payload, '-', 2)
                                                     order by g.seq) as prev
                            from got g join sent s using (q, payload)) x
     where prev > n}), '0', "each key's events arrive in the order they were sent");
$node->stop('fast');
done_testing();
