# Idle queues cost the ticker nothing (ADR 0031): with 300 idle queues and
# one busy one, the busy queue's events are ticked and delivered, the idle
# ones get no tick but their idle tick, a queue created or dropped while the
# workers run is picked up or forgotten (the cached queue list is
# invalidated), and events the commit hook did not see (rows written into an
# event table directly, COMMIT PREPARED, events committed while no worker ran
# and the server restarted) are still ticked within the documented bound.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);

my $started = time();
# statements counted by pg_stat_statements where the server has it
my $pgss = -e (PgqueNode->pkglibdir . '/pg_stat_statements.so');
my $node = PgqueNode->new_preloaded('idle_queues',
    preload => $pgss ? "$PgqueNode::PRELOAD,pg_stat_statements" : $PgqueNode::PRELOAD,
    conf => qq{
max_prepared_transactions = 2
pgque_bgw.ticker_probe_interval = '2s'
pgque_bgw.watchdog_interval = '2s'
pgque_bgw.maint_interval = '5s'
} . ($pgss ? "pg_stat_statements.track = 'all'\n" : ''));

$node->install('postgres');
$node->safe_psql('postgres', 'create extension pg_stat_statements') if $pgss;
# 300 idle queues, 50 per transaction (a queue's tables take locks until commit)
for my $from (map { 1 + 50 * $_ } 0 .. 5)
{
    $node->safe_psql('postgres', qq{
        select count(pgque.create_queue('idle_' || i)) from generate_series($from, $from + 49) i});
}
# idle_21 .. idle_300 never reach their idle tick in this test
$node->safe_psql('postgres', q{
    select count(pgque.set_queue_config('idle_' || i, 'ticker_idle_period', '1 hour'))
      from generate_series(21, 300) i});
# got(queue, payload): receive a batch of consumer c, ack it; was payload in
# it?  received(queue): receive and ack until nothing is left (one tick
# window per batch, ADR 0057: a window per commit here), how many events
$node->safe_psql('postgres', q{
    create function got(q text, p text) returns boolean language plpgsql as $$
    declare
        hit boolean;
        b   bigint;
    begin
        select bool_or(m.payload = p), max(m.batch_id) into hit, b from pgque.receive(q, 'c', 1000) m;
        if b is not null then
            perform pgque.ack(b);
        end if;
        return coalesce(hit, false);
    end $$;
    create function received(q text) returns bigint language plpgsql as $$
    declare
        n bigint := 0;
        k bigint;
        b bigint;
    begin
        loop
            select count(*), max(m.batch_id) into k, b from pgque.receive(q, 'c', 1000) m;
            exit when b is null;
            perform pgque.ack(b);
            n := n + k;
        end loop;
        return n;
    end $$});
$node->safe_psql('postgres', q{
    select pgque.create_queue('busy');
    select pgque.subscribe('busy', 'c');
    select pgque.subscribe('idle_5', 'c');
    select pgque.subscribe('idle_6', 'c');
    select pgque.subscribe('idle_7', 'c');
});
ok($node->poll_query_until('postgres', q{
       select count(*) = 1 from pgque.status() where component = 'ticker' and detail like '%queues=301 %'}),
   'the ticker lists the 301 queues');

sub ticks_since
{
    my ($since, $pattern) = @_;
    return $node->safe_psql('postgres', qq{
        select count(*) || ' ' || coalesce(max(n), 0) from (
          select count(*) n from pgque.tick t join pgque.queue q on q.queue_id = t.tick_queue
           where q.queue_name like '$pattern' and t.tick_time > '$since' group by q.queue_id) x});
}

# Phase 1: the busy queue at about 20 commits a second for 8 s
my $since = $node->safe_psql('postgres', 'select now()');
$node->safe_psql('postgres', 'select pg_stat_statements_reset()') if $pgss;
my $sent = 0;
my $t_end = time() + 8;
while (time() < $t_end)
{
    $node->safe_psql('postgres', q{select pgque.send('busy', 'b')});
    $sent++;
    sleep(0.05);
}
my $got = 0;
my $deadline = time() + 10;
while ($got < $sent && time() < $deadline)
{
    $got += $node->safe_psql('postgres', q{select received('busy')});
    sleep(0.05) if $got < $sent;
}
is($got, $sent, "the busy queue's $sent events are ticked and received");
my ($idle_ticked) = split / /, ticks_since($since, 'idle\_%');
is($idle_ticked, '0', 'no idle queue ticked while the busy one worked (idle period 1 hour)');
if ($pgss)
{
    # the old ticker asked every queue on every pass: 301 ticker() calls per commit
    my $calls = $node->safe_psql('postgres', q{
        select coalesce(sum(calls), 0) from pg_stat_statements where query like 'select pgque.ticker($1)%'});
    cmp_ok($calls, '<=', $sent + 20, "ticker(queue) called $calls times for $sent commits, not per idle queue");
    diag("figure: $sent busy commits, $calls ticker(queue) calls, 300 idle queues");
}

# Phase 2: 20 queues get a 3 s idle period (a change of pgque.queue: the
# ticker reads its list again); each ticks once per period, the 280 others
# (1 hour) never
$node->safe_psql('postgres', q{
    select count(pgque.set_queue_config('idle_' || i, 'ticker_idle_period', '3 seconds'))
      from generate_series(1, 20) i});
sleep(1);
$since = $node->safe_psql('postgres', 'select now()');
sleep(7);
my ($nq, $max) = split / /, ticks_since($since, 'idle\_%');
my ($nq20) = split / /, $node->safe_psql('postgres', qq{
    select count(distinct t.tick_queue) from pgque.tick t join pgque.queue q on q.queue_id = t.tick_queue
     where t.tick_time > '$since' and q.queue_name in (select 'idle_' || i from generate_series(1, 20) i)});
is($nq20, '20', 'each queue with a 3 s idle period got its idle tick within 7 s');
is($nq, '20', 'no other idle queue ticked');
cmp_ok($max, '<=', 3, "at most one tick per idle period and queue ($max in 7 s)");

# Phase 3: a queue created while the workers run is picked up, a dropped one
# forgotten
$node->safe_psql('postgres', q{
    select pgque.create_queue('late');
    select pgque.subscribe('late', 'c');
    select pgque.drop_queue('idle_300');
});
$node->safe_psql('postgres', q{select pgque.send('late', 'l')});
ok($node->poll_query_until('postgres', q{select got('late', 'l')}),
   'an event of a queue created while the workers run is ticked');
ok($node->poll_query_until('postgres', q{
       select count(*) = 1 from pgque.status() where component = 'ticker' and detail like '%queues=301 %'}),
   'the ticker has the new queue and forgot the dropped one');

# Phase 4: a row written into an event table directly (no commit hook) is
# ticked within ticker_probe_interval (2 s here)
my $t0 = time();
$node->safe_psql('postgres', q{
    do $$ begin
      execute format('insert into pgque.event_%s_%s (ev_type, ev_data) values (''bypass'', ''x'')',
                     (select queue_id from pgque.queue where queue_name = 'idle_5'),
                     (select queue_cur_table from pgque.queue where queue_name = 'idle_5'));
    end $$});
ok($node->poll_query_until('postgres', q{select got('idle_5', 'x')}),
   'a row inserted into an event table directly is ticked');
diag(sprintf('figure: direct insert ticked and received after %.1f s (probe interval 2 s)', time() - $t0));

# Phase 5: COMMIT PREPARED in another session than the PREPARE
$node->safe_psql('postgres', q{
    begin; select pgque.send('idle_6', 'p'); prepare transaction 'idle6';});
$node->safe_psql('postgres', q{commit prepared 'idle6'});
ok($node->poll_query_until('postgres', q{select got('idle_6', 'p')}),
   'an event committed by COMMIT PREPARED is ticked');

# Phase 6: events committed while no worker ran, then a restart (the dirty
# bits in shared memory are lost): the ticker's first pass probes every queue
$node->safe_psql('postgres', q{alter system set pgque_bgw.enabled = off; select pg_reload_conf()});
ok($node->poll_query_until('postgres', q{
       select count(*) = 0 from pg_stat_activity where backend_type in ('pgque_bgw ticker', 'pgque_bgw worker')}),
   'the workers are off');
$node->safe_psql('postgres', q{select pgque.send('idle_7', 'r')});
$node->safe_psql('postgres', q{alter system reset pgque_bgw.enabled});
$node->restart;
ok($node->poll_query_until('postgres', q{select got('idle_7', 'r')}),
   'an event committed before a restart and not ticked is ticked after it');

# Phase 7: a crash (immediate stop) with an unticked event
$node->safe_psql('postgres', q{alter system set pgque_bgw.enabled = off; select pg_reload_conf()});
ok($node->poll_query_until('postgres', q{
       select count(*) = 0 from pg_stat_activity where backend_type in ('pgque_bgw ticker', 'pgque_bgw worker')}),
   'the workers are off again');
$node->safe_psql('postgres', q{select pgque.send('idle_7', 'k'); alter system reset pgque_bgw.enabled;});
$node->stop('immediate');
$node->start;
ok($node->poll_query_until('postgres', q{select got('idle_7', 'k')}),
   'an event committed before a crash and not ticked is ticked after it');

$node->stop;
diag(sprintf('figure: the test took %.0f s', time() - $started));
done_testing();
