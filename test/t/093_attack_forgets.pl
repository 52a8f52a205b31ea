# The second reader's attack on the slot forgets applied at commit (ADR
# 0089, src/slots.c): is the pending list bounded, and what does its commit
# cost the other sessions?
#
# On reliab 8165e97..ebf4563 a forget was recorded per call of
# pgque._slot_forget (unsubscribe_slot of a consumer's last slot,
# drop_queue, a resize's switch), in an array doubling in TopMemoryContext,
# with no merge of a forget already pending for the same consumer, and the
# commit (forget_commit) took every slot partition lock LW_EXCLUSIVE and
# tested every entry of the shared lease table (every database's) against
# every pending forget: 5.8 MB and 719 ms below.  reliab 40eee65 merges
# them and looks them up sorted (0 bytes, 76 ms).  A pgque_reader reaches it with
# subscribe_slot / unsubscribe_slot in a loop inside one transaction (about
# 16 ms a pair on the loaded 2-core machine); here the internal function is
# called directly to build the same list quickly.
#   - 50,000 forgets of the same consumer in one transaction: the backend's
#     TopMemoryContext must grow by less than 1 MB (one pending forget per
#     consumer does).  Failed before 40eee65 (5.8 MB).
#   - the forgets of a consumer with no lease leave another consumer's 512
#     leases alone (holds).
#   - figure only (no bound asserted, a timing): the COMMIT of 50,000
#     forgets of distinct consumers beside those 512 leases, which holds
#     every slot partition lock for its whole duration.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes;

my $node = PgqueNode->new_preloaded('attack_forgets', conf => q{
pgque_bgw.enabled = off
});
$node->install('postgres');
my $qid = $node->safe_psql('postgres', q{
    select pgque.create_queue('fq');
    select pgque.subscribe_partitioned('fq', 'big', 512);
    select count(pgque.claim_slot('fq', 'big', k, 'w' || k, '1 hour')) from generate_series(0, 511) k;
    create function top_bytes() returns int8 language sql as $$
        select total_bytes from pg_catalog.pg_backend_memory_contexts where name = 'TopMemoryContext'
    $$;
    select queue_id from pgque.queue where queue_name = 'fq';
});
$qid = (split /\n/, $qid)[-1];
is($node->safe_psql('postgres', q{select count(*) from pgque._slot_leases() where consumer = 'big'}),
	'512', 'the consumer "big" holds 512 leases');

# the same consumer forgotten 50,000 times in one transaction
my $grown = $node->safe_psql('postgres', qq{
    begin;
    create temp table m0 as select top_bytes() as b;
    select count(pgque._slot_forget($qid, 'x')) from generate_series(1, 50000);
    select top_bytes() - (select b from m0);
    commit;
});
$grown = (split /\n/, $grown)[-1];
diag("figure: TopMemoryContext grown by $grown bytes for 50,000 pending forgets of one consumer");
cmp_ok($grown, '<', 1024 * 1024,
	'50,000 forgets of one consumer in one transaction keep the pending list bounded (< 1 MB)');

is($node->safe_psql('postgres', q{select count(*) from pgque._slot_leases() where consumer = 'big'}),
	'512', 'the forgets of another consumer left the 512 leases of "big" alone');

# the commit's cost with distinct consumers: a figure, not a bound
my $psql = $node->background_psql('postgres');
$psql->query_safe(qq{begin});
$psql->query_safe(qq{select count(pgque._slot_forget($qid, 'x' || g)) from generate_series(1, 50000) g});
my $t0 = Time::HiRes::time();
$psql->query_safe('commit');
my $ms = (Time::HiRes::time() - $t0) * 1000;
$psql->quit;
diag(sprintf('figure: COMMIT of 50,000 pending forgets of distinct consumers beside 512 leases: %.0f ms '
		. '(every slot partition lock held exclusively; loaded machine)', $ms));
is($node->safe_psql('postgres', q{select count(*) from pgque._slot_leases() where consumer = 'big'}),
	'512', 'and so did 50,000 forgets of distinct consumers');

$node->stop('fast');
done_testing();
