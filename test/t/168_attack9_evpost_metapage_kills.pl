# The second reader of evpost.c (ADR 0138): the attacks on a batch's
# posting tuples that need a server of their own.
#   - pg_upgrade-like metapages: a queue's ev_txid index whose metapage says
#     version 3 (heap TID not a key: an index pg_upgraded from PostgreSQL
#     11), and one of version 4 without allequalimage (from 12), written
#     into the files while the server is stopped.  A batch must take
#     index_insert there (no posting tuple: neither is an index
#     deduplication may write), and amcheck pass.
#   - a producer's backend killed (SIGKILL: a crash restart) in the middle
#     of a statement sending batches, while others commit theirs under a
#     ledger, with wal_consistency_checking = btree (recovery compares each
#     replayed btree record with the page the primary wrote; a mismatch
#     stops the server), and an unlogged queue taking batches at the crash.
# At the end every event the ledger says was sent is received and acked
# once, nothing of the killed statement; the unlogged queue emptied by the
# crash takes posting tuples again; every btree of the event tables passes
# amcheck with its heap (heapallindexed; rootdescend where the version has
# heap TID keys).
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;

# quitting a psql whose backend was just killed may write to a closed pipe
$SIG{PIPE} = 'IGNORE';

my $node = PgqueNode->new_preloaded('attack9', conf => q{
pgque_bgw.enabled = off
restart_after_crash = on
fsync = on
autovacuum = off
wal_consistency_checking = 'btree'
});
$node->safe_psql('postgres', q{
    create extension pgque_bgw;
    create extension amcheck;
    create extension pageinspect;
    select pgque.create_queue('v3'), pgque.create_queue('v4noeq');
    select pgque.create_queue('kq'), pgque.subscribe('kq', 'c');
    select pgque.create_queue('ku', '{"unlogged": true}'), pgque.subscribe('ku', 'c');
    create function leaf(q text, out tuples bigint, out postings bigint, out tids bigint)
    language sql as $$
        with i as (select ('pgque.' || pgque._event_table(queue_id, queue_cur_table, null) || '_txid_idx')::regclass i
                     from pgque.queue where queue_name = q)
        select count(*), count(*) filter (where p.tids is not null), coalesce(sum(coalesce(cardinality(p.tids), 1)), 0)
          from i, generate_series(1, pg_relation_size(i.i) / 8192 - 1) b,
               bt_page_stats(i.i::text, b::int) s, bt_page_items(i.i::text, b::int) p
         where s.type = 'l' and (s.btpo_next = 0 or p.itemoffset > 1)
    $$;
});
$node->make_ledger('kq');

# --- pg_upgrade-like metapages ---------------------------------------------
my %file;
for my $q ('v3', 'v4noeq')
{
	$file{$q} = $node->data_dir . '/' . $node->safe_psql('postgres', qq{
	    select pg_relation_filepath(('pgque.' || pgque._event_table(queue_id, queue_cur_table, null) || '_txid_idx')::regclass)
	      from pgque.queue where queue_name = '$q'});
}
my $checksums = $node->safe_psql('postgres', 'show data_checksums');
$node->stop('fast');
# a page written by hand has no valid checksum (PostgreSQL 18's initdb turns them on)
PostgreSQL::Test::Utils::system_or_bail('pg_checksums', '--disable', '-D', $node->data_dir)
  if $checksums eq 'on';

# BTMetaPageData after the 24-byte page header: btm_version at +4,
# btm_allequalimage at +40 (after btm_last_cleanup_num_heap_tuples, a float8 at +32)
sub patch_meta
{
	my ($path, $version, $allequalimage) = @_;
	open my $fh, '+<:raw', $path or die "cannot open $path: $!";
	seek($fh, 24 + 4, 0);
	print $fh pack('V', $version);
	seek($fh, 24 + 40, 0);
	print $fh pack('C', $allequalimage);
	close $fh or die "cannot write $path: $!";
	return;
}
patch_meta($file{v3}, 3, 0);
patch_meta($file{v4noeq}, 4, 0);
$node->start;
is($node->safe_psql('postgres', q{
    select string_agg(queue_name || ':' || m.version || ':' || m.allequalimage, ' ' order by queue_name)
      from pgque.queue, bt_metap('pgque.' || pgque._event_table(queue_id, queue_cur_table, null) || '_txid_idx') m
     where queue_name in ('v3', 'v4noeq')}),
   'v3:3:false v4noeq:4:false', 'the metapages read as an index of PostgreSQL 11 and one of 12');
$node->safe_psql('postgres', q{
    select cardinality(pgque.send_batch(q, 't', array_fill('a'::text, array[3000]))) from unnest(array['v3', 'v4noeq']) q;
    select cardinality(pgque.send_batch(q, 't', array_fill('b'::text, array[3000]))) from unnest(array['v3', 'v4noeq']) q;
});
is($node->safe_psql('postgres', q{select string_agg(q || ':' || l::text, ' ' order by q) from unnest(array['v3', 'v4noeq']) q, leaf(q) l}),
   'v3:(6000,0,6000) v4noeq:(6000,0,6000)', 'batches into them took index_insert: one plain entry per row');

# --- a producer's backend killed mid-statement ------------------------------
my $batch = $node->basedir . '/batch.sql';
PostgreSQL::Test::Utils::append_to_file($batch, q{
\set n random(2, 1500)
insert into sent select unnest(pgque.send_batch('kq', 't', array_fill('b'::text, array[:n])));
select cardinality(pgque.send_batch('ku', 't', array_fill('u'::text, array[:n])));
});
# pgbench for SECS seconds beside the rest; -> the harness
sub producers
{
	my ($secs) = @_;
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start(
		[ 'pgbench', '-n', '-c', '3', '-j', '1', '-T', $secs, '-f', $batch, '-h', $node->host, '-p', $node->port,
		  'postgres' ],
		'>', \$out, '2>', \$err);
	return ($h, \$out, \$err);
}

my ($h, $out, $err) = producers(30);
my $victim = $node->background_psql('postgres', on_error_stop => 0);
my $pid = $victim->query_safe('select pg_backend_pid()');
# batches of 1,000 (2,000,000 rows at most), then a wait: it never commits
$victim->query_until(qr/sending/, "\\echo sending\n"
	  . "do \$\$ begin for i in 1 .. 2000 loop perform pgque.send_batch('kq', 't', array_fill('killed'::text, array[1000])); "
	  . "end loop; perform pg_sleep(600); end \$\$;\n");
ok(PgqueNode::poll_until(sub {
	$node->safe_psql('postgres', q{select count(*) from sent}) > 5000 }, 60),
   'the producers committed batches beside the statement to be killed');
$node->kill9_and_wait($pid);
eval { $victim->quit; };
ok(PgqueNode::wait_back($node, 'postgres'), 'the server is back after the backend\'s kill (recovery replayed with consistency checks)');
$h->finish;

# the unlogged queue lost its events in the crash: reset, then batches again
$node->safe_psql('postgres', q{select pgque.maint()});
($h, $out, $err) = producers(2);
$h->finish;
like($$out, qr/number of failed transactions: 0 /, 'the producers ran without error after the crash')
  or diag($$out . $$err);
$node->safe_psql('postgres', q{select pgque.ticker('kq'), pgque.ticker('ku')});
$node->safe_psql('postgres', q{select drain()});

$node->check_ledger('a producer SIGKILLed mid-batch');
cmp_ok($node->safe_psql('postgres', q{select postings from leaf('kq')}), '>', 50, 'the batches wrote posting tuples');
cmp_ok($node->safe_psql('postgres', q{select postings from leaf('ku')}), '>', 0,
	   'the unlogged queue, emptied by the crash, took posting tuples again');
my $ku_rows = $node->safe_psql('postgres', q{
    select (xpath('/row/c/text()', query_to_xml(format('select count(*) as c from pgque.%I', 'event_' || queue_id), false, true, '')))[1]::text
      from pgque.queue where queue_name = 'ku'});
cmp_ok($ku_rows, '>', 0, 'the unlogged queue holds what was sent after the crash');
is($node->safe_psql('postgres', q{select count(*) from pgque.receive('ku', 'c', 1000000)}), $ku_rows,
   'and delivers all of it in the batch after the reset');

is($node->safe_psql('postgres', q{
       select count(*) filter (where bt_index_parent_check(i.indexrelid, true, m.version = 4) is null)
            || ' of ' || count(*)
         from pg_index i join pg_class t on t.oid = i.indrelid, bt_metap(i.indexrelid::regclass::text) m
        where t.relnamespace = 'pgque'::regnamespace and t.relname like 'event\_%' and t.relkind = 'r'}),
   '0 of ' . $node->safe_psql('postgres', q{
       select count(*) from pg_index i join pg_class t on t.oid = i.indrelid
        where t.relnamespace = 'pgque'::regnamespace and t.relname like 'event\_%' and t.relkind = 'r'}),
   'every btree of the event tables is sound and holds every row');

$node->stop('fast');
done_testing();
