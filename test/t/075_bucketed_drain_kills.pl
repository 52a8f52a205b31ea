# A consumer draining a 32-bucket queue in parts (the part cache, ADR 0082:
# later parts of a window come from memory, matched on the window's bounds)
# is killed at arbitrary points: its backend (SIGKILL, crash restart) and
# the postmaster (immediate stop), with fsync on.  Each part is recorded and
# acked in one transaction, so the ledger must end with every sent event
# delivered once, and each key's events in the order they were sent.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;

# quitting a psql whose backend was just killed may write to a closed pipe
$SIG{PIPE} = 'IGNORE';

my $node = PgqueNode->new_preloaded('bucket_kills', conf => q{
restart_after_crash = on
fsync = on
pgque_bgw.enabled = off
});
$node->safe_psql('postgres', q{
    create extension pgque_bgw;
    select pgque.create_queue('kq'), pgque.set_queue_config('kq', 'partition_buckets', '32');
    select pgque.subscribe('kq', 'w');
    create table sent (payload text primary key, key text, n int4);
    create table got (payload text, key text, batch_id bigint, seq bigserial);
});

my $rounds = 4;
my $per_round = 2000;
my $drain = q{
    do $$
    declare
        b bigint;
    begin
        loop
            with r as (insert into got (payload, key, batch_id)
                       select payload, extra1, batch_id from pgque.receive('kq', 'w', 50)
                       returning batch_id)
            select max(batch_id) into b from r;
            exit when b is null;
            perform pgque.ack(b);
            commit;
            perform pg_sleep(0.01);
        end loop;
    end $$;
};

for my $round (1 .. $rounds)
{
    # a window of keyed events over 97 keys, committed, then ticked
    $node->safe_psql('postgres', qq{
        insert into sent select 'r$round-' || i, 'k' || (i % 97), i from generate_series(1, $per_round) i;
        select count(pgque.send_batch('kq', 'default', array(select payload from sent where payload like 'r$round-%' order by n),
                                      array(select key from sent where payload like 'r$round-%' order by n)));
    });
    $node->safe_psql('postgres', q{select pgque.ticker('kq')});
    my $before = $node->safe_psql('postgres', 'select count(*) from got');

    # the consumer drains in parts of 50; killed once some parts are in
    my $consumer = $node->background_psql('postgres', on_error_stop => 0);
    my $pid = $consumer->query_safe('select pg_backend_pid()');
    $consumer->query_until(qr/draining/, "\\echo draining\n$drain\n");
    my $target = $before + 100 + int(rand(1500));
    ok(PgqueNode::poll_until(sub {
        $node->safe_psql('postgres', 'select count(*) from got') >= $target }, 60),
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

    # a second rotation-free drain finishes the window from the acked position
    $node->safe_psql('postgres', $drain);
}

my $ledger = $node->safe_psql('postgres', q{
    select (select count(*) from sent) || ':' || count(*) || ':' || count(distinct payload) || ':'
           || (select count(*) from sent s where not exists (select from got g where g.payload = s.payload))
      from got});
is($ledger, ($rounds * $per_round) . ':' . ($rounds * $per_round) . ':' . ($rounds * $per_round) . ':0',
   'sent, delivered and acked once each: none lost, none twice');
is($node->safe_psql('postgres', q{
    select count(*) from (select g.key, s.n, lag(s.n) over (partition by g.key, split_part(g.payload, '-', 1) order by g.seq) as prev
                            from got g join sent s using (payload)) x
     where prev > n}), '0', "each key's events arrive in the order they were sent");
$node->stop('fast');
done_testing();
