# A dump and restore of a pausing consumer with blocked keys and of a
# cooperative group with members mid-window (issue #26, ADR 0022, 0029,
# 0017), drained through faults.  The source, fsync on: a partitioned
# consumer (4 slots, failure policy pause) with key K1 blocked (its head
# nacked and still failing, its later events withheld), key K2 draining
# (its head acked on a retry, its withheld events appended again and not
# yet re-delivered), a slot leased with an open slot batch; a cooperative
# group with two members each holding a window they have not acked.  It is
# dumped (pg_dump -Fc, while the workers run) and restored as
# docs/operations.md says (serially, by a superuser, into a new database of
# the same cluster), then drained there by two slot workers and two members
# (the third member, holding a window, never comes back), through a SIGKILL
# of a slot worker's backend and an immediate stop.  A ledger, restored with
# the queue state: sent (in the send's transaction), acked (in the ack's)
# and nacked.  Checked: the blocked keys and the open alert come through the
# restore as they were; K1 stays blocked (its later events, those sent after
# the restore too, withheld) until its head stops failing; then every event
# sent, before the dump or after the restore, is acked exactly once (those
# acked before the dump not again), in ev_id order per key, no key left
# blocked, no dead letter, and no alert that the engine lost track of state
# (key_state_orphaned).
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use IPC::Run;
use Test::More;
use Time::HiRes qw(time);

my $node = PgqueNode->new_preloaded('restore_pause_coop', conf => q{
fsync = on
restart_after_crash = on
max_worker_processes = 32
pgque_bgw.launcher_naptime = '1s'
pgque_bgw.maint_interval = '1s'
pgque_bgw.watchdog_interval = '1s'
pgque_bgw.key_blocked_after = '1s'
});
my $bindir = $node->config_data('--bindir');
my $tmp = PostgreSQL::Test::Utils::tempdir;
my @conn = ('-h', $node->host, '-p', $node->port);
my $t0 = time;

# --- the source ----------------------------------------------------------------
$node->safe_psql('postgres', 'create database src');
$node->safe_psql('src', q{
    create extension pgque_bgw;
    select pgque.create_queue('pq');
    select pgque.create_queue('cq');
    select pgque.set_queue_config('pq', 'max_retries', '1000');
    select pgque.subscribe_slot('pq', 'pc', k, 4, 'pause') from generate_series(0, 3) k;
    select pgque.register_subconsumer('cq', 'g', m) from unnest(array['m1', 'm2', 'm3']) m;
    -- the ledger, dumped and restored with the queue state
    create table sent (q text, ev_id bigint, key text, primary key (q, ev_id));
    create table acked (seq bigserial primary key, q text not null, ev_id bigint not null, key text,
                        who text, db text not null default current_database());
    create table nacked (ev_id bigint, db text not null default current_database());
    create table poison (ev_id bigint primary key);     -- the handler fails these
    create table done ();                                -- the workers stop once it has a row

    -- one batch of slot S: events in poison are nacked (and the rest of
    -- their key in the batch skipped, as the pause policy asks), the others
    -- acked in the ledger, in the ack's transaction
    create function slot_batch(w text, s int, n int) returns int language plpgsql as $$
    declare
        m       pgque.message;
        k       int := 0;
        skipped text[] := '{}';
    begin
        for m in select * from pgque.receive_partitioned('pq', 'pc', s, n, w, 20) loop
            k := k + 1;
            continue when m.extra1 = any(skipped);
            if exists (select from poison p where p.ev_id = m.msg_id) then
                perform pgque.nack_partitioned('pq', 'pc', s, n, w, m, '1 second', 'poisoned');
                insert into nacked (ev_id) values (m.msg_id);
                skipped := skipped || m.extra1;
            else
                insert into acked (q, ev_id, key, who) values ('pq', m.msg_id, m.extra1, w);
            end if;
        end loop;
        if k > 0 then
            perform pgque.ack_partitioned('pq', 'pc', s, n, w);
        end if;
        return k;
    end $$;

    -- one window of member M: acked (with its ledger rows) or left open
    create function coop_batch(m text, dead interval, do_ack boolean) returns int language plpgsql as $$
    declare
        ids bigint[];
        b   bigint;
    begin
        select array_agg(r.msg_id), max(r.batch_id) into ids, b
          from pgque.receive_coop('cq', 'g', m, 50, dead) r;
        if b is null then
            return 0;
        end if;
        if do_ack then
            insert into acked (q, ev_id, who) select 'cq', i, m from unnest(ids) i;
            perform pgque.ack(b);
        end if;
        return cardinality(ids);
    end $$;

    -- the workers of the drain (examples/partition_worker.sql, coop_worker.sql)
    create procedure slot_worker(w text) language plpgsql as $$
    declare c record;
    begin
        loop
            exit when exists (select from done);
            select * into c from pgque.claim_any_slot('pq', 'pc', w, '3 seconds');
            commit;
            if c.slot is null then
                perform pg_sleep(0.05);
                continue;
            end if;
            perform slot_batch(w, c.slot, c.n);
            perform pgque.release_slot('pq', 'pc', c.slot, w);
            commit;
        end loop;
    end $$;
    create procedure coop_worker(m text) language plpgsql as $$
    declare k int;
    begin
        loop
            exit when exists (select from done);
            begin
                k := coop_batch(m, '2 seconds', true);
            exception when sqlstate 'PQ003' then
                k := 0;     -- taken over: the ledger rows went with the ack
            end;
            commit;
            if k = 0 then
                perform pg_sleep(0.05);
            end if;
        end loop;
    end $$;
});
ok($node->wait_for_workers('src'), 'the workers serve the source');

# sends in 8 transactions per queue, so that there are several tick windows
for my $t (0 .. 7)
{
    $node->safe_psql('src', qq{
        insert into sent select 'pq', pgque.send('pq', 'e', 'p' || i, 'k' || (i % 20)), 'k' || (i % 20)
          from generate_series($t * 50 + 1, $t * 50 + 50) i;
        insert into sent select 'cq', pgque.send('cq', 'e', 'c' || i), null
          from generate_series($t * 40 + 1, $t * 40 + 40) i;
    });
    $node->poll_query_until('src', q{
        select max(t.tick_event_seq) >= (select max(ev_id) from sent where q = 'pq')
          from pgque.tick t join pgque.queue q on q.queue_id = t.tick_queue where q.queue_name = 'pq'})
      or diag('no tick covers the sends of transaction ' . $t);
}

# K1 and K2 on two slots, the open slot batch on a third
my ($k1, $slot_a) = split /\|/, $node->safe_psql('src', q{select 'k1', pgque._slot_of('k1', 4)});
my ($k2, $slot_b) = split /\|/, $node->safe_psql('src', qq{
    select 'k' || i, pgque._slot_of('k' || i, 4) from generate_series(2, 19) i
     where pgque._slot_of('k' || i, 4) <> $slot_a order by i limit 1});
my ($slot_c) = grep { $_ != $slot_a && $_ != $slot_b } 0 .. 3;
my $f1 = $node->safe_psql('src', qq{select min(ev_id) from sent where q = 'pq' and key = '$k1'});
my $f2 = $node->safe_psql('src', qq{select min(ev_id) from sent where q = 'pq' and key = '$k2'});
note("K1 = $k1 on slot $slot_a (head $f1), K2 = $k2 on slot $slot_b (head $f2), open batch on slot $slot_c");
$node->safe_psql('src', qq{insert into poison values ($f1), ($f2)});

# a few batches of every slot, until K1 and K2 are blocked
$node->safe_psql('src', qq{select pgque.claim_slot('pq', 'pc', s, 'pre', '10 minutes') from generate_series(0, 3) s});
sub slot_pass { $node->safe_psql('src', "select slot_batch('pre', $_[0], 4)") }
for my $s (0 .. 3) { slot_pass($s) for 1 .. 2 }
ok(PgqueNode::poll_until(sub {
    slot_pass($slot_a); slot_pass($slot_b);
    $node->safe_psql('src', q{select count(*) from pgque.blocked_keys where state = 'failed'}) eq '2';
}, 60), 'source: K1 and K2 are blocked, their heads nacked');
# K2's head stops failing: acked on its retry, K2 is released (draining)
$node->safe_psql('src', qq{delete from poison where ev_id = $f2});
ok(PgqueNode::poll_until(sub {
    slot_pass($slot_b);
    $node->safe_psql('src', qq{select state from pgque.blocked_keys where partition_key = '$k2'}) eq 'draining';
}, 60), 'source: K2\'s head acked on a retry, K2 draining (its withheld events appended again)');
is($node->safe_psql('src', qq{select count(*) from acked where key = '$k2' and ev_id > $f2}), '0',
   'source: none of K2\'s later events acked yet');
# the open slot batch of slot c
cmp_ok($node->safe_psql('src', qq{select count(*) from pgque.receive_partitioned('pq', 'pc', $slot_c, 4, 'pre', 20)}),
       '>', 0, "source: slot $slot_c holds an open batch (leased, not acked)");
# the group: m2 and m3 acked windows, m1 and m2 each hold one
$node->safe_psql('src', q{select coop_batch('m2', null, true), coop_batch('m3', null, true)});
cmp_ok($node->safe_psql('src', q{select coop_batch('m1', null, false)}), '>', 0, 'source: member m1 holds a window');
cmp_ok($node->safe_psql('src', q{select coop_batch('m2', null, false)}), '>', 0, 'source: member m2 holds a window');
ok($node->poll_query_until('src', qq{
    select count(*) = 1 from pgque.alerts where kind = 'key_blocked' and slot = $slot_a}),
   'source: key_blocked is open for K1\'s slot');

# the state the dump holds: nothing acts on the source meanwhile but its workers
my $blocked_sql = q{select string_agg(concat_ws('|', queue_name, consumer, slot, partition_key, head_ev_id, state), E'\n'
                                      order by slot, partition_key) from pgque.blocked_keys};
my $blocked = $node->safe_psql('src', $blocked_sql);
my $alert_id = $node->safe_psql('src', qq{select alert_id from pgque.alerts where kind = 'key_blocked' and slot = $slot_a});
my $pre_acked = $node->safe_psql('src', q{select count(*) from acked});
cmp_ok($pre_acked, '>', 0, "source: $pre_acked events acked before the dump");
command_ok([ "$bindir/pg_dump", @conn, '-Fc', '-f', "$tmp/src.dump", 'src' ], 'pg_dump -Fc of the source');
is($node->safe_psql('src', $blocked_sql), $blocked, 'source: the blocked keys did not change during the dump');

# --- the restore (docs/operations.md: serially, as a superuser, a new database) --
$node->safe_psql('postgres', 'create database dst');
my ($out, $err) = ('', '');
ok(IPC::Run::run([ "$bindir/pg_restore", @conn, '-d', 'dst', "$tmp/src.dump" ], '>', \$out, '2>', \$err),
   'pg_restore exits with 0');
unlike($err, qr/ERROR|error:/, 'pg_restore reports no error') or diag($err);
ok($node->wait_for_workers('dst'), 'the workers serve the restored database');
is($node->safe_psql('dst', $blocked_sql), $blocked, 'restored: K1 blocked (failed) and K2 draining, as in the dump');
is($node->safe_psql('dst', q{select count(*) from acked}), $pre_acked, 'restored: the ledger of the acks before the dump');
is($node->safe_psql('dst', qq{select count(*) from pgque.alerts where alert_id = $alert_id}), '1',
   'restored: the key_blocked alert is the same open row');
is($node->safe_psql('dst', q{select count(*) from pgque.get_partition_slot_info() where lease_owner is not null}), '0',
   'restored: no slot is leased');

# --- the drain: two slot workers, members m2 and m3 (m1 never comes back) -------
my $psql = "$bindir/psql";
my ($host, $port) = ($node->host, $node->port);
my @loops;
for my $w (['slot', 'slot_worker', 'w1'], ['slot', 'slot_worker', 'w2'], ['coop', 'coop_worker', 'm2'], ['coop', 'coop_worker', 'm3'])
{
    my ($kind, $proc, $id) = @$w;
    my $script = qq{
        until PGAPPNAME=r170_${kind}_$id "$psql" -X -q -h "$host" -p $port -d dst -v ON_ERROR_STOP=1 \\
              -c "call $proc('$id')"
        do sleep 0.3; done
    };
    push @loops, IPC::Run::start(['bash', '-c', $script], '>', '/dev/null', '2>', '/dev/null');
}
# more events after the restore, K1's among them: they wait behind its head
$node->safe_psql('dst', q{
    insert into sent select 'pq', pgque.send('pq', 'e', 'n' || i, 'k' || (i % 20)), 'k' || (i % 20)
      from generate_series(1, 100) i;
    insert into sent select 'cq', pgque.send('cq', 'e', 'n' || i), null from generate_series(1, 100) i;
});
my $total = $node->safe_psql('dst', q{select count(*) from sent});
my $acked_sql = q{(select count(distinct (q, ev_id)) from acked)};

ok($node->poll_query_until('dst', qq{select $acked_sql >= $pre_acked + ($total - $pre_acked) / 3}),
   'a third of the rest acked in the restored database');
ok($node->kill9_backend_of('r170_slot_%'), 'a slot worker\'s backend killed with SIGKILL mid-drain');
ok(PgqueNode::wait_back($node, 'dst'), 'the server is back after the crash restart');
ok($node->poll_query_until('dst', qq{select $acked_sql >= $pre_acked + 2 * ($total - $pre_acked) / 3}),
   'two thirds acked');
$node->stop('immediate');
$node->start;
ok($node->wait_for_workers('dst'), 'after an immediate stop the workers serve the restored database again');

# everything but K1's events from its head on, and K1 still blocked
my $k1_rest = $node->safe_psql('dst', qq{select count(*) from sent where q = 'pq' and key = '$k1' and ev_id >= $f1});
ok($node->poll_query_until('dst', qq{
    select $acked_sql = $total - $k1_rest
       and (select count(*) from nacked where db = 'dst' and ev_id = $f1) >= 2}),
   "everything but K1's $k1_rest events acked; K1's head delivered again after the restore and still failing");
is($node->safe_psql('dst', qq{select state || '|' || head_ev_id from pgque.blocked_keys where partition_key = '$k1'}),
   "failed|$f1", 'K1 is still blocked on its head');
is($node->safe_psql('dst', qq{select count(*) from acked where key = '$k1' and ev_id >= $f1}), '0',
   'none of K1\'s withheld events (those sent after the restore too) was acked');
is($node->safe_psql('dst', q{select count(*) from pgque.blocked_keys}), '1', 'K2 drained and is no longer blocked');
is($node->safe_psql('dst', qq{select count(*) from pgque.alerts where alert_id = $alert_id}), '1',
   'key_blocked for K1\'s slot is still the restored open row');

# K1's head stops failing
$node->safe_psql('dst', 'delete from poison');
ok($node->poll_query_until('dst', qq{select $acked_sql = $total}), "all $total events acked");
$node->safe_psql('dst', 'insert into done default values');
ok(PgqueNode::poll_until(sub { !grep { $_->pumpable } @loops }, 60), 'the workers stop');
$_->kill_kill for @loops;

# --- the ledger -------------------------------------------------------------------
is($node->safe_psql('dst', q{
    select count(*) from sent s where not exists (select from acked a where (a.q, a.ev_id) = (s.q, s.ev_id))}),
   '0', "every one of the $total events sent (before the dump and after the restore) acked");
is($node->safe_psql('dst', q{select count(*) from (select from acked group by q, ev_id having count(*) > 1) d}),
   '0', 'none acked twice (those acked before the dump not again after the restore)');
is($node->safe_psql('dst', q{
    select count(*) from acked a where not exists (select from sent s where (s.q, s.ev_id) = (a.q, a.ev_id))}),
   '0', 'nothing acked that was not sent');
is($node->safe_psql('dst', q{
    select count(*) from (select ev_id <= lag(ev_id) over (partition by key order by seq) as back
                            from acked where q = 'pq') x where back}),
   '0', 'per key, the events acked in ascending ev_id order, across the dump');
is($node->safe_psql('dst', qq{
    select count(*) from acked a where a.key = '$k1' and a.ev_id > $f1
       and a.seq < (select seq from acked where ev_id = $f1 and q = 'pq')}),
   '0', 'K1\'s later events acked only after its head');
is($node->safe_psql('dst', q{select count(*) from pgque.blocked_keys}), '0', 'no key is left blocked');
is($node->safe_psql('dst', q{select count(*) from pgque.dead_letter}), '0', 'no dead letter');
ok($node->poll_query_until('dst', qq{select cleared_at is not null from pgque.alert where alert_id = $alert_id}),
   'the restored key_blocked alert clears');
is($node->safe_psql('dst', q{select count(*) from pgque.alert where kind = 'key_state_orphaned'}), '0',
   'no key_state_orphaned alert: no pause state was left unread');
note('alerts opened in the restored database: ' . $node->safe_psql('dst', q{
    select coalesce(string_agg(kind || ' ' || coalesce(consumer, '') || ' ' || coalesce(slot::text, ''), ', '), 'none')
      from pgque.alert where alert_id <> } . $alert_id));
diag(sprintf('figure: %d events (%d acked before the dump), restored and drained through a SIGKILL and an immediate stop in %.0f s',
             $total, $pre_acked, time - $t0));

$node->stop;
done_testing();
