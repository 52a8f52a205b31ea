# A migration storm: 8 sessions x 2,500 send_idem calls over 50 keys append
# exactly 50 events, one per key.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PgqueNode->new_preloaded('storm', conf => qq{
max_connections = 30
});
$node->safe_psql('postgres', q{
    create extension pgque_bgw;
    select pgque.create_queue('storm');
});

$node->pgbench(
    '--no-vacuum --client=8 --jobs=2 --transactions=2500',
    0,
    [qr{processed: 20000/20000}],
    [qr{^$}],
    'a storm of 20,000 send_idem over 50 keys runs without error',
    {
        'storm_send' => q{
            \set k random(1, 50)
            select * from pgque.send_idem('storm', 'migrate', 'tenant :k to v2', 'migrate:t' || :k || ':v2');
        }
    });

is($node->safe_psql('postgres', q{select count(*) from pgque.event_template}), '50',
   'exactly 50 events were appended');
is($node->safe_psql('postgres', q{select count(distinct ev_extra2) from pgque.event_template}), '50',
   'one per key');
is($node->safe_psql('postgres', q{
       select count(*) from pgque.idem i join pgque.event_template e on e.ev_id = i.event_id}), '50',
   'every claim points at its event');
$node->stop('fast');
done_testing();
