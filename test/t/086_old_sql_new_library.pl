# A database still on 0.2.0's SQL, served by this library (ADR 0019: the
# library is installed before ALTER EXTENSION UPDATE runs).  0.2.0 has no
# per-kind window functions (ADR 0082) and its _slot_receive_open opens
# the old way (ADR 0078, slot_kind_020), and its pausing slot's read takes
# the batch id alone (ADR 0139: 0.3.0's takes the row's key): each receive
# kind hands out the parts of a window in one backend, the second from the
# part cache, as 0.2.0 did, and every event once; then the update, and the
# same in the same backend with the new SQL.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PgqueNode->new_preloaded('old_sql', conf => q{
pgque_bgw.enabled = off
});
$node->safe_psql('postgres', q{create database up});
$node->safe_psql('up', q{create extension pgque_bgw version '0.2.0'});

# one backend: five events, parts of two, each part acked (plain, slot,
# coop), then the update and five more, read the same way
my $script = q{
select pgque.create_queue('q');
select pgque.register_consumer('q', 'c');
select pgque.subscribe_slot('q', 's', 0, 1);
select pgque.claim_slot('q', 's', 0, 'w') is not null;
select pgque.subscribe_slot('q', 'p', 0, 1, 'pause');
select pgque.claim_slot('q', 'p', 0, 'w') is not null;
select pgque.register_subconsumer('q', 'g', 'm');
select pgque.ticker('q');
select pgque.send('q', 'a' || g) from generate_series(1, 5) g;
select pgque.ticker('q');
};
my $read = q{
create temp table if not exists got(kind text, payload text);
do $$
declare
    b bigint;
begin
    for i in 1 .. 4 loop
        -- each part twice: the second is the first again, from the cache
        perform from pgque.receive('q', 'c', 2);
        with r as (select * from pgque.receive('q', 'c', 2)), i as (insert into got select 'plain', payload from r)
        select max(batch_id) into b from r;
        if b is not null then perform pgque.ack(b); end if;
        perform from pgque.receive_partitioned('q', 's', 0, 1, 'w', 2);
        with r as (select * from pgque.receive_partitioned('q', 's', 0, 1, 'w', 2))
        insert into got select 'slot', payload from r;
        perform pgque.ack_partitioned('q', 's', 0, 1, 'w');
        perform from pgque.receive_partitioned('q', 'p', 0, 1, 'w', 2);
        with r as (select * from pgque.receive_partitioned('q', 'p', 0, 1, 'w', 2))
        insert into got select 'slot_paused', payload from r;
        perform pgque.ack_partitioned('q', 'p', 0, 1, 'w');
        perform from pgque.receive_coop('q', 'g', 'm', 2);
        with r as (select * from pgque.receive_coop('q', 'g', 'm', 2)), i as (insert into got select 'coop', payload from r)
        select max(batch_id) into b from r;
        if b is not null then perform pgque.ack(b); end if;
    end loop;
end $$;
select kind, count(*), count(distinct payload) from got group by kind order by kind;
};
my $update = q{
truncate got;
alter extension pgque_bgw update;
select pgque.send('q', 'b' || g) from generate_series(1, 5) g;
select pgque.ticker('q');
};
my ($rc, $out, $err) = $node->psql('up', $script . $read . $update . $read,
    extra_params => ['-v', 'ON_ERROR_STOP=1']);
is($rc, 0, 'the old SQL and the new, in one backend, without error') or diag($err);
like($out, qr/coop\|5\|5\nplain\|5\|5\nslot\|5\|5\n.*coop\|5\|5\nplain\|5\|5\nslot\|5\|5/s,
     'every kind reads each of five events once, before and after the update');
like($out, qr/slot\|5\|5\nslot_paused\|5\|5\n.*slot\|5\|5\nslot_paused\|5\|5/s,
     'a pausing slot too: 0.2.0\'s read by the batch id, then 0.3.0\'s by the key');
is($node->safe_psql('up', q{select extversion from pg_extension where extname = 'pgque_bgw'}),
   '0.3.0', 'updated');

$node->stop;
done_testing();
