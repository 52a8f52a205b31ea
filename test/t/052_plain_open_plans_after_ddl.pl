# The plain open's kept plans (ADR 0121) across the extension's DDL in one
# session: a session that received through 0.2.0's SQL (its receive is
# pgque_receive with _receive_open) updates the extension and receives
# again (0.3.0's _plain_receive_open); then the extension dropped and made
# again twice, receive() and receive_wait() after each.  A kept plan must
# never act on an object that went (the plan cache re-plans it by name): each
# call returns the batch of the extension there now, or nothing, and the
# backend lives on.  The workers are off: the session ticks.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PgqueNode->new_preloaded('plain_open_plans_after_ddl', conf => q{
pgque_bgw.enabled = off
});

my ($rc, $out, $err) = $node->psql('postgres', q{
\set ON_ERROR_STOP 1
create extension pgque_bgw version '0.2.0';
select pgque.create_queue('iq'), pgque.subscribe('iq', 'c');
select pgque.send('iq', 'a');
select pgque.ticker('iq');
select 'old:' || count(*) from pgque.receive('iq', 'c', 10);
alter extension pgque_bgw update;
select 'updated:' || count(*) || ':' || min(payload) from pgque.receive('iq', 'c', 10);
select 'updated_wait:' || count(*) from pgque.receive_wait('iq', 'c', 10, '0');
select pgque.ack(batch_id) from pgque.receive('iq', 'c', 10) limit 1;
drop extension pgque_bgw cascade;
create extension pgque_bgw;
select pgque.create_queue('iq'), pgque.subscribe('iq', 'c');
select 'empty:' || count(*) from pgque.receive('iq', 'c', 10);
select pgque.send('iq', 'b');
select pgque.ticker('iq');
select 'again:' || count(*) || ':' || min(payload) from pgque.receive('iq', 'c', 10);
select 'again_wait:' || count(*) from pgque.receive_wait('iq', 'c', 10, '0');
drop extension pgque_bgw cascade;
create extension pgque_bgw;
select pgque.create_queue('iq'), pgque.subscribe('iq', 'c');
select pgque.send('iq', 'c');
select pgque.ticker('iq');
select 'third_wait:' || count(*) || ':' || min(payload) from pgque.receive_wait('iq', 'c', 10, '0');
select 'third:' || count(*) from pgque.receive('iq', 'c', 10);
select 'pid:' || pg_backend_pid();
}, extra_params => ['-A', '-t']);
is($rc, 0, 'the session ran every step') or diag($err);
like($out, qr/^old:1$/m, "0.2.0's receive hands out the batch");
like($out, qr/^updated:1:a$/m, 'after the update, the same batch through the new open');
like($out, qr/^updated_wait:1$/m, '... and through receive_wait');
like($out, qr/^empty:0$/m, 'the extension made again: nothing yet');
like($out, qr/^again:1:b$/m, "then the new extension's batch");
like($out, qr/^again_wait:1$/m, '... and through receive_wait');
like($out, qr/^third_wait:1:c$/m, 'made again once more: receive_wait first');
like($out, qr/^third:1$/m, '... and receive');
unlike($node->safe_psql('postgres', 'select 1'), qr/error/i, 'the server lives');
my $log = slurp_file($node->logfile);
unlike($log, qr/server process .* was terminated|TRAP|Assert/, 'no backend crashed');

$node->stop('fast');
done_testing();
