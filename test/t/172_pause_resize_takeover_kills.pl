# Pause x resize x takeover in one run, with kills and a ledger (ADR
# 0029, 0030, 0038, 0023, 0141).  A partitioned consumer with failure
# policy pause on a queue of 16 buckets, 2 slots, fsync on; several keys
# fail (heads nacked once, some twice, one three times: dead-lettered by
# max_retries 2); parts of 2 and 3, so heads are handed out mid-window and
# their done marks carried from part to part (_pause_after_ack,
# _pause_finish).  Two workers with 2 s leases drain at once, each slot
# claimed, drained and released in turn:
# - worker A freezes between a part that read a head's retry (its key
#   marked done in A's batch) and its ack, past its lease; B takes the
#   slot over while A holds the mark (its receive is told 55P03 until A
#   is gone, _pause_follow);
# - meanwhile the consumer is resized 2 -> 3, and more events, more of
#   them failing, are sent;
# - A, let go, is fenced (PQ002): its record rolls back with its part;
# - B's backend is SIGKILLed between a part's receive and its ack (crash
#   restart); two new workers drain, one freezing again; the postmaster is
#   SIGKILLed mid-drain; a last worker drains the rest.
# Each part is recorded and acked in one transaction (a killed or fenced
# worker's record rolls back with its part).  Every event sent must be in
# the ledger once, but the dead-lettered one, which is in the dead-letter
# queue; at the slot of its key for the n it was read with; each key's
# events in the order sent; each failing event delivered by its retry with
# the retry count of its nacks; no key left blocked, no lease left; and
# done marks were carried or followed to another batch during the run.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;

# quitting a psql whose backend was just killed may write to a closed pipe
$SIG{PIPE} = 'IGNORE';

my $node = PgqueNode->new_preloaded('pause_resize_takeover_kills', conf => q{
restart_after_crash = on
fsync = on
pgque_bgw.enabled = off
});
$node->safe_psql('postgres', q{
    create extension pgque_bgw;
    select pgque.create_queue('q172'), pgque.set_queue_config('q172', 'partition_buckets', '16'),
           pgque.set_queue_config('q172', 'max_retries', '2');
    select pgque.maint_rotate_tables_step2();
    select pgque.subscribe_slot('q172', 'c', s, 2, 'pause') from generate_series(0, 1) s;
    create table sent (payload text primary key, key text, n bigserial);
    create table got (payload text, key text, slot int4, n_at int4, worker text, retry int4, seq bigserial);
    -- fails: how many times the event is nacked; nacks: how many were
    create table fail (payload text primary key, fails int4 not null, nacks int4 not null default 0);
    -- errors the workers caught (a lease held, fenced, a key held)
    create table errs (worker text, state text, msg text, at timestamptz default clock_timestamp());
    -- done marks moved from one batch to another (carried to a window's
    -- next part, or following a takeover's new row): committed ones only
    create table mark_moves (key text, from_batch bigint, to_batch bigint);
    create function log_mark_move() returns trigger language plpgsql security definer
    set search_path = public, pg_catalog, pg_temp as $$
    begin
        insert into public.mark_moves values (new.bk_key, old.bk_done_batch, new.bk_done_batch);
        return null;
    end $$;
    create trigger t172_mark_moves after update on pgque.blocked_key for each row
      when (old.bk_done_batch is not null and new.bk_done_batch is not null
            and old.bk_done_batch <> new.bk_done_batch)
      execute function log_mark_move();
    -- i_txns transactions of i_per events over 11 keys, a tick after each
    create procedure send_round(i_round int4, i_txns int4, i_per int4) language plpgsql as $$
    begin
        for t in 1 .. i_txns loop
            insert into sent (payload, key)
            select 'r' || i_round || '-' || t || '-' || i, 'k' || ((t * 5 + i) % 11) from generate_series(1, i_per) i;
            perform pgque.send_batch('q172', 'default',
                                     array(select s.payload from sent s where s.payload like 'r' || i_round || '-' || t || '-%' order by s.n),
                                     array(select s.key from sent s where s.payload like 'r' || i_round || '-' || t || '-%' order by s.n));
            commit;
            perform pgque.force_tick('q172'), pgque.ticker('q172');
            commit;
        end loop;
    end $$;
    -- a worker: every slot of the consumer's current n, each claimed,
    -- drained in parts of mx and released; each part recorded and acked
    -- in one transaction; a failing event nacked, its key's later events
    -- in the part left (the pause contract).  A worker named '...-frz'
    -- waits, after a part in which it read a retry (a head's: its key
    -- marked done in the part's batch) and before its ack, while the test
    -- holds lock 1721; one named '...-kil' after any part while the test
    -- holds lock 1722.  Ends after two passes in a row found nothing and
    -- failed nowhere, unless told to run on (the kills end those).
    create procedure drain(w text, ttl interval, mx int4, forever boolean) language plpgsql as $$
    declare
        pn     int4;
        k      int4;
        rt     boolean;
        cnt    int4;
        failed boolean;
        idle   int4 := 0;
        m      pgque.message;
        nk     text[];
    begin
        loop
            select p.n into pn from pgque.partition_consumer p where p.co_name = 'c';
            cnt := 0;
            failed := false;
            for s in 0 .. pn - 1 loop
                -- the claim in a transaction of its own: one that finds
                -- a resize drained switches the layout (ADR 0030)
                begin
                    perform pgque.claim_slot('q172', 'c', s, w, ttl);
                exception when others then
                    failed := true;
                    insert into errs (worker, state, msg) values (w, sqlstate, sqlerrm);
                    commit;
                    continue;
                end;
                commit;
                if (select p.n from pgque.partition_consumer p where p.co_name = 'c') <> pn then
                    failed := true;
                    exit;
                end if;
                loop
                    k := 0;
                    rt := false;
                    begin
                        nk := '{}';
                        for m in select * from pgque.receive_partitioned('q172', 'c', s, pn, w, mx) loop
                            k := k + 1;
                            rt := rt or m.retry_count > 0;
                            continue when m.extra1 = any(nk);
                            if exists (select from fail f where f.payload = m.payload and f.nacks < f.fails) then
                                update fail set nacks = nacks + 1 where payload = m.payload;
                                perform pgque.nack_partitioned('q172', 'c', s, pn, w, m, '0 seconds', 'tap');
                                nk := nk || m.extra1;
                                continue;
                            end if;
                            insert into got (payload, key, slot, n_at, worker, retry)
                            values (m.payload, m.extra1, s, pn, w, m.retry_count);
                        end loop;
                        if k > 0 and w like '%-frz' and rt then
                            perform pg_advisory_xact_lock_shared(1721);
                        end if;
                        if k > 0 and w like '%-kil' then
                            perform pg_advisory_xact_lock_shared(1722);
                        end if;
                        if k > 0 then
                            perform pgque.ack_partitioned('q172', 'c', s, pn, w);
                        end if;
                    exception when others then
                        k := 0;
                        failed := true;
                        insert into errs (worker, state, msg) values (w, sqlstate, sqlerrm);
                    end;
                    commit;
                    exit when k = 0;
                    cnt := cnt + k;
                end loop;
                begin
                    perform pgque.release_slot('q172', 'c', s, w);
                exception when others then
                    null;
                end;
                commit;
            end loop;
            begin
                perform pgque.maint_retry_events();
                perform pgque.force_tick('q172'), pgque.ticker('q172');
            exception when others then
                failed := true;
                insert into errs (worker, state, msg) values (w, sqlstate, sqlerrm);
            end;
            commit;
            if cnt = 0 and not failed then
                idle := idle + 1;
            else
                idle := 0;
            end if;
            exit when idle >= 2 and not forever;
            perform pg_sleep(0.02);
        end loop;
    end $$;
});

sub got { return $node->safe_psql('postgres', 'select count(*) from got'); }

sub waits_on
{
	my ($pid, $lock) = @_;
	return PgqueNode::poll_until(sub {
		$node->safe_psql('postgres', qq{
            select count(*) from pg_locks where pid = $pid and locktype = 'advisory'
               and objid = $lock and not granted}) eq '1' }, 60);
}

sub worker
{
	my ($call) = @_;
	my $s = $node->background_psql('postgres', on_error_stop => 0);
	my $pid = $s->query_safe('select pg_backend_pid()');
	$s->query_until(qr/draining/, "\\echo draining\n$call\n");
	return ($s, $pid);
}

# round 1: heads failing once, twice; one three times (dead-lettered)
$node->safe_psql('postgres', q{
    call send_round(1, 24, 6);
    insert into fail (payload, fails)
    select payload, 1 + (substring(payload from '-(\d+)-')::int4 % 2) from sent where payload like 'r1-%-3';
    update fail set fails = 3 where payload = 'r1-5-3';
});

# A freezes at its first part that read a head's retry, its lease past
my $gate = $node->background_psql('postgres');
$gate->query_safe('select pg_advisory_lock(1721)');
my ($a, $apid) = worker(q{call drain('wA-frz', '2 seconds', 2, true);});
my ($b, $bpid) = worker(q{call drain('wB-kil', '2 seconds', 3, true);});
ok(waits_on($apid, 1721), 'round 1: A holds a part with a head read again, not acked');
my $aslot = $node->safe_psql('postgres', q{
    select slot from pgque._slot_leases() where consumer = 'c' and owner = 'wA-frz'});
diag("figure: A froze on slot $aslot at " . got() . " events acked");
ok($node->safe_psql('postgres', q{select count(*) from pgque.blocked_key}) > 0,
   'round 1: keys blocked meanwhile');
ok(PgqueNode::poll_until(sub {
    $node->safe_psql('postgres', qq{
        select count(*) from pgque._slot_leases() where consumer = 'c' and slot = $aslot
           and owner = 'wB-kil'}) eq '1' }, 60),
   "round 1: B took A's slot over past A's lease");
ok(PgqueNode::poll_until(sub {
    $node->safe_psql('postgres', q{
        select count(*) from errs where worker = 'wB-kil' and state = '55P03'}) ne '0' }, 60),
   "round 1: ... and was told the frozen A holds a key's mark (55P03)");

# the resize started while A is frozen, keys are blocked and B drains;
# more events.  It does not wait for A: A's open part holds the queue's
# row FOR KEY SHARE (its dead letter's foreign key), which the resize's FOR
# NO KEY UPDATE does not wait for; before, it waited with the queue's DDL
# lock held and the queue was not ticked until A was let go.
my ($rret, $rout, $rerr) = $node->psql('postgres', q{
    set statement_timeout = '20s';
    select pgque.resize_partitioned('q172', 'c', 3) is not null;});
is("$rret:$rout:$rerr", '0:t:', 'round 1: resized 2 -> 3 while A is frozen and keys are blocked (not waiting for A)');
my $tick0 = $node->safe_psql('postgres', q{select max(tick_id) from pgque.tick t join pgque.queue q on q.queue_id = t.tick_queue where q.queue_name = 'q172'});
$node->safe_psql('postgres', q{
    call send_round(2, 16, 6);
    insert into fail (payload, fails)
    select payload, 1 + (substring(payload from '-(\d+)-')::int4 % 2) from sent where payload like 'r2-%-2';
});
cmp_ok($node->safe_psql('postgres', q{select max(tick_id) from pgque.tick t join pgque.queue q on q.queue_id = t.tick_queue where q.queue_name = 'q172'}),
       '>', $tick0, 'round 1: the queue is ticked while A is frozen');

# A let go: fenced
$gate->query_safe('select pg_advisory_unlock(1721)');
ok(PgqueNode::poll_until(sub {
    $node->safe_psql('postgres', q{
        select count(*) from errs where worker = 'wA-frz' and state = 'PQ002'}) ne '0' }, 60),
   'round 1: A, let go, is fenced (PQ002)');

# B's backend SIGKILLed between a part's receive and its ack
my $before = got();
ok(PgqueNode::poll_until(sub { got() >= $before + 40 }, 60), 'round 2: the workers acked 40 events more');
$gate->query_safe('select pg_advisory_lock(1722)');
ok(waits_on($bpid, 1722), 'round 2: B waits between a part and its ack');
$node->kill9_and_wait($bpid);
eval { $a->quit; };
eval { $b->quit; };
eval { $gate->quit; };
ok(PgqueNode::wait_back($node, 'postgres'), "round 2: back after B's SIGKILL");

# two new workers, one freezing again, then the postmaster's SIGKILL
$node->safe_psql('postgres', q{
    call send_round(3, 12, 6);
    insert into fail (payload, fails)
    select payload, 1 + (substring(payload from '-(\d+)-')::int4 % 2) from sent where payload like 'r3-%-4';
});
$before = got();
$gate = $node->background_psql('postgres');
$gate->query_safe('select pg_advisory_lock(1721)');
my ($c, $cpid) = worker(q{call drain('wC-frz', '1 second', 2, true);});
my ($d, $dpid) = worker(q{call drain('wD', '1 second', 3, true);});
ok(PgqueNode::poll_until(sub { got() >= $before + 30 }, 60), 'round 3: the workers acked 30 events');
$node->kill9_and_wait();
eval { $c->quit; };
eval { $d->quit; };
eval { $gate->quit; };
$node->start;
$node->safe_psql('postgres', q{call drain('wE', '1 hour', 3, false)});
is($node->safe_psql('postgres', q{select n from pgque.partition_consumer where co_name = 'c'}), '3',
   'the drain switched to the new layout');

# the ledger
diag('figure: caught: ' . $node->safe_psql('postgres', q{
    select string_agg(worker || ' ' || state || ' x' || c, ', ' order by worker, state)
      from (select worker, state, count(*) c from errs group by 1, 2) x}));
my $moves = $node->safe_psql('postgres', q{select count(*) from mark_moves});
diag("figure: done marks moved to another batch: $moves");
ok($moves > 0, 'done marks were carried or followed to another batch');
my ($sent, $got, $uniq, $missing) = split /\|/, $node->safe_psql('postgres', q{
    select (select count(*) from sent), (select count(*) from got), (select count(distinct payload) from got),
           (select string_agg(payload, ',' order by n) from sent s where not exists (select from got g where g.payload = s.payload))});
diag("figure: $sent events sent, $got delivered and acked");
is("$got:$uniq:$missing", ($sent - 1) . ':' . ($sent - 1) . ':r1-5-3',
   'every event sent delivered and acked once, but the dead-lettered r1-5-3');
is($node->safe_psql('postgres', q{
    select string_agg(ev_data || ':' || dl_reason || ':' || ev_retry, ',') from pgque.dead_letter}),
   'r1-5-3:tap:2', '... which is in the dead-letter queue, once, after its 2 retries');
is($node->safe_psql('postgres', q{select count(*) from got where slot <> pgque._slot_of(key, n_at)}), '0',
   'each delivered at the slot of its key for the n it was read with');
my $late = $node->safe_psql('postgres', q{
    select string_agg(payload || ' after ' || prevp, ', ')
      from (select g.payload, s.n, lag(s.n) over (partition by g.key order by g.seq) as prev,
                   lag(g.payload) over (partition by g.key order by g.seq) as prevp
              from got g join sent s using (payload)) x
     where prev > n});
diag("out of its key's order: $late") if $late ne '';
is($late, '', "each key's events in the order they were sent");
my $nf = $node->safe_psql('postgres', q{select count(*) from fail where fails < 3});
is($node->safe_psql('postgres', q{
    select count(*) from fail f join got g using (payload) where f.nacks = f.fails and g.retry = f.fails}),
   $nf, "each of the $nf failing events nacked its times and delivered by its retry");
is($node->safe_psql('postgres', q{select count(*) from pgque.blocked_key}), '0', 'no key left blocked');
is($node->safe_psql('postgres', q{select count(*) from pgque._slot_leases() where owner is not null}), '0',
   'no lease left');
$node->stop('fast');
done_testing();
