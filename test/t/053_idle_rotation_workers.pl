# An idle queue rotates under the workers (issue #27 item 3, ADR 0060): a
# queue nobody reads, whose idle tick is an hour away, keeps switching its
# tables by the maintenance worker alone (rotation step 1 ticks it when its
# latest tick predates the previous switch) and never loses its last tick;
# a consumer that subscribes afterwards receives what is sent next; a
# caught-up consumer of an idle queue lets it rotate too.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);

my $started = time();
my $node = PostgreSQL::Test::Cluster->new('idle_rotation');
$node->init;
$node->append_conf('postgresql.conf', q{
shared_preload_libraries = 'pgque_bgw'
pgque_bgw.maint_interval = '1s'
pgque_bgw.watchdog_interval = '2s'
});
$node->start;
$node->safe_psql('postgres', q{
    create extension pgque_bgw;
    select pgque.create_queue('idle');
    select pgque.set_queue_config('idle', 'ticker_idle_period', '1 hour');
    select pgque.create_queue('idle_sub');
    select pgque.set_queue_config('idle_sub', 'ticker_idle_period', '1 hour');
    select pgque.subscribe('idle_sub', 'c');
});
$node->safe_psql('postgres', q{select pgque.send('idle', 'before'), pgque.send('idle_sub', 'first')});
ok($node->poll_query_until('postgres', q{
       select count(*) >= 1 from pgque.tick t join pgque.queue q on q.queue_id = t.tick_queue
        where q.queue_name = 'idle' and t.tick_event_seq > 0}),
   'the workers tick the event sent');
ok($node->poll_query_until('postgres', q{select count(*) = 1 from pgque.receive('idle_sub', 'c', 10)}),
   'the consumer of idle_sub receives its event');
$node->safe_psql('postgres', q{select pgque.ack(batch_id) from pgque.receive('idle_sub', 'c', 10) limit 1});

# from here on nothing is sent: rotation every second
my $last_tick = $node->safe_psql('postgres', q{
    select max(t.tick_id) from pgque.tick t join pgque.queue q on q.queue_id = t.tick_queue
     where q.queue_name = 'idle'});
$node->safe_psql('postgres', q{
    select pgque.set_queue_config('idle', 'rotation_period', '1 second');
    select pgque.set_queue_config('idle_sub', 'rotation_period', '1 second');
    create table seen (at timestamptz default clock_timestamp(), cur int4, ticks int8);
});
# a poll that records the current table and the tick count each time
$node->safe_psql('postgres', q{
    create function switches() returns bigint language plpgsql as $$
    begin
        insert into seen (cur, ticks)
        select q.queue_cur_table, (select count(*) from pgque.tick t where t.tick_queue = q.queue_id)
          from pgque.queue q where q.queue_name = 'idle';
        return (select count(*) from (select cur, lag(cur) over (order by at) as prev from seen) x
                 where x.prev is distinct from x.cur and x.prev is not null);
    end $$;
});
ok($node->poll_query_until('postgres', 'select switches() >= 4'),
   'the idle queue without consumers switches tables again and again (four switches seen)')
  or diag($node->safe_psql('postgres', 'select * from seen order by at'));
is($node->safe_psql('postgres', 'select min(ticks) >= 1 from seen'), 't',
   'it always kept a tick');
is($node->safe_psql('postgres', qq{
       select count(*) > 0 from pgque.tick t join pgque.queue q on q.queue_id = t.tick_queue
        where q.queue_name = 'idle' and t.tick_id > $last_tick}), 't',
   'the ticks that let it switch were made by rotation (nothing was sent, the idle period is an hour)');

# a consumer that subscribes now receives what is sent after it
$node->safe_psql('postgres', q{select pgque.subscribe('idle', 'late')});
$node->safe_psql('postgres', q{select pgque.send('idle', 'after')});
ok($node->poll_query_until('postgres', q{select count(*) = 1 from pgque.receive('idle', 'late', 10) where payload = 'after'}),
   'a consumer subscribing after the rotations receives the next event');

# the caught-up consumer's queue: the consumer polls (an empty receive
# finishes the empty window), and the queue rotates
my $cur0 = $node->safe_psql('postgres', q{select queue_cur_table from pgque.queue where queue_name = 'idle_sub'});
my $moved = 0;
my $deadline = time() + 60;
my %tables;
while (time() < $deadline)
{
    $node->safe_psql('postgres', q{select count(*) from pgque.receive('idle_sub', 'c', 10)});
    my $cur = $node->safe_psql('postgres', q{select queue_cur_table from pgque.queue where queue_name = 'idle_sub'});
    $tables{$cur} = 1;
    last if keys(%tables) == 3;
    sleep(0.2);
}
is(scalar(keys %tables), 3, "a caught-up consumer's idle queue rotates through its three tables (from $cur0)");

$node->stop;
diag(sprintf('figure: the test took %.0f s', time() - $started));
done_testing();
