# A database's owner, holding no pgque role and no right on schema pgque,
# holds SHARE UPDATE EXCLUSIVE on every event table of its database for as
# long as it likes: PostgreSQL (15 to 18) lets a database owner ANALYZE
# every table of its database, and an ANALYZE without a table list in a
# transaction block keeps its locks to the transaction's end (ADR 0129).
# What that may cost the queue is bounded here: while the lock is held,
# windows go on being ticked, every event sent is received once, and the
# read of a window touches about as many blocks as before the hold (at
# most 3x a window read before it); after the holder ends, the same.
#
# With the event index a btree (0.2.0's, ADR 0073) the lock stops no
# read.  With the BRIN summarised by the tick (ADR 0126, branch brin) the
# summariser cannot lock the tables, leaves their new ranges unsummarised
# and every read reads them whole: 20 windows of 2,000 events into the
# hold, a window's read touched 376 blocks against 22 before (by hand,
# 2026-12-03); the third assertion below fails there.
#
# The blocks a window's read touches are the plan's (EXPLAIN (ANALYZE,
# BUFFERS) of the window's ev_txid range, sequential scans off): the index
# chooses the same blocks for the C reader (window_direct.c).
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PgqueNode->new_preloaded('dbowner', conf => q{
pgque_bgw.enabled = off
});
$node->safe_psql('postgres', q{
    create role dbo login;
    create database d owner dbo;
});
$node->safe_psql('d', q{
    create extension pgque_bgw;
    select pgque.create_queue('v');
    select pgque.subscribe('v', 'c');
    create table sent (payload text primary key);
    create table got (payload text, batch_id bigint);
    -- the blocks the read of the last window touches (the plan's, as the
    -- index selects them: sequential scans off)
    create function window_blocks() returns int language plpgsql as $$
    declare
        lo xid8;
        hi xid8;
        tbl text;
        j json;
    begin
        select pg_snapshot_xmax(p.tick_snapshot), pg_snapshot_xmax(t.tick_snapshot) into lo, hi
          from pgque.tick t join pgque.tick p on p.tick_queue = t.tick_queue and p.tick_id = t.tick_id - 1
         where t.tick_queue = (select queue_id from pgque.queue where queue_name = 'v')
         order by t.tick_id desc limit 1;
        select 'event_' || queue_id || '_' || queue_cur_table into tbl from pgque.queue where queue_name = 'v';
        set local enable_seqscan = off;
        execute format('explain (analyze, buffers, costs off, timing off, format json)'
                       ' select count(*) from pgque.%I where ev_txid >= %L and ev_txid < %L', tbl, lo, hi) into j;
        return coalesce((j->0->'Plan'->>'Shared Hit Blocks')::int, 0)
             + coalesce((j->0->'Plan'->>'Shared Read Blocks')::int, 0);
    end $$;
});

my $n = 0;
# one window: 2,000 events sent (and recorded), ticked, received, acked
sub window
{
	my $from = $n + 1;
	$n += 2000;
	$node->safe_psql('d', qq{
		insert into sent select 'p' || g from generate_series($from, $n) g;
		select pgque.send_batch('v', array(select 'p' || g from generate_series($from, $n) g));
	});
	$node->safe_psql('d', q{select pgque.ticker('v')});
	$node->safe_psql('d', q{
		insert into got select payload, batch_id from pgque.receive('v', 'c', 100000);
		select pgque.ack((select max(batch_id) from got));
	});
}

window() for 1 .. 5;
my $before = $node->safe_psql('d', 'select window_blocks()');
diag("figure: a window of 2,000 events read $before blocks before the hold");

# the database owner, with nothing of pgque's, takes the lock on every table
my $holder = $node->background_psql('d', extra_params => [ '-U', 'dbo' ]);
$holder->query_safe('set client_min_messages = error');
$holder->query_safe('begin');
$holder->query_safe('analyze');
is($node->safe_psql('d', q{
	select count(*) from pg_locks l join pg_class c on c.oid = l.relation
	 where c.relnamespace = 'pgque'::regnamespace and c.relname ~ '^event_[0-9]+_[0-9]+$'
	   and l.mode = 'ShareUpdateExclusiveLock' and l.granted
	   and l.pid = (select pid from pg_stat_activity where usename = 'dbo' and datname = 'd')}),
   '3', 'the database owner holds SHARE UPDATE EXCLUSIVE on the queue\'s three tables');

window() for 1 .. 20;
my $held = $node->safe_psql('d', 'select window_blocks()');
diag("figure: a window of 2,000 events read $held blocks after 20 windows under the hold");
is($node->safe_psql('d', q{select count(*) from pgque.tick t join pgque.queue q on q.queue_id = t.tick_queue
                            where q.queue_name = 'v'}) >= 26 ? 'ticked' : 'stalled',
   'ticked', 'windows are ticked while the lock is held');
cmp_ok($held, '<=', 3 * $before,
	'a window\'s read under the hold touches at most 3x the blocks of one before it');

$holder->query_safe('commit');
$holder->quit;
window() for 1 .. 2;
my $after = $node->safe_psql('d', 'select window_blocks()');
diag("figure: a window of 2,000 events read $after blocks after the hold ended");
cmp_ok($after, '<=', 3 * $before, 'and after the hold, as before it');

is($node->safe_psql('d', q{
	select (select count(*) from sent) || ' sent, ' ||
	       (select count(*) from got) || ' received, ' ||
	       (select count(*) from sent s where not exists (select from got g where g.payload = s.payload)) || ' lost, ' ||
	       (select count(*) - count(distinct payload) from got) || ' twice'}),
   '54000 sent, 54000 received, 0 lost, 0 twice', 'every event sent was received once');

$node->stop('fast');
done_testing();
