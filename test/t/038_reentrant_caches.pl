# Per-backend caches are not freed under a caller that still uses them
# (issue #25, items 2 and 3; ADR 0037).  Both attacks crashed the server
# (SIGSEGV; the postmaster restarted every backend):
#  - a CDC trigger whose when= calls the table owner's function, which
#    GRANTs on the table (a relcache invalidation of it) and inserts into
#    it again: the nested firing rebuilt the trigger's cache entry and
#    freed the plan the outer firing was still executing (src/cdc.c);
#  - a BEFORE INSERT trigger on an event table that switches the queue's
#    current table and calls pgque.send() again: the nested send dropped
#    the queue's insert plans, one of them still executing (src/insert_plan.c).
# Each is replayed as written, then with the nested use ending in an ERROR
# caught by a PL/pgSQL exception block (a subtransaction) mid-use.  Two more
# found while checking the other caches, reached by the extension's owner
# (a non-superuser may install it) through a forced row-level security
# policy on an event table: a window read that fills the window plan cache
# under itself (a use-after-free that happened not to crash here; it now
# runs the deferred free), and a receive nested in a receive, which handed
# out every event twice.  The server must not restart:
# pg_postmaster_start_time() unchanged, no "terminated by signal" in its log.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;

# no workers: the attacks need none, and the machine is shared
my $node = PgqueNode->new_preloaded('reentrant', conf => qq{
pgque_bgw.enabled = off
});
$node->install('postgres');
my $started = $node->safe_psql('postgres', 'select pg_postmaster_start_time()');

sub server_not_restarted
{
    my ($what) = @_;
    is($node->safe_psql('postgres', 'select pg_postmaster_start_time()'), $started,
       "$what: the server did not restart");
    unlike(slurp_file($node->logfile), qr/terminated by signal/,
           "$what: no backend was terminated by a signal");
}

# the events of a queue, in id order: ev_data up to its first '&'
sub events
{
    my ($queue) = @_;
    my $qid = $node->safe_psql('postgres', "select queue_id from pgque.queue where queue_name = '$queue'");
    return $node->safe_psql('postgres',
        "select string_agg(split_part(ev_data, '&', 1), ' ' order by ev_id) from pgque.event_$qid");
}

# --- item 2: the CDC trigger's cache, re-entered from its own when= ---------
$node->safe_psql('postgres', q{
    create role app login in role pgque_writer, pgque_admin;
    create schema app authorization app;
    select pgque.create_queue('cdcq');
    set role app;
    create table app.t (id int primary key);
    -- id 1: a grant (invalidates the table's relcache entry, so the trigger's
    -- cache entry), then a nested insert that fires the trigger again
    create function app.f(i int) returns boolean language plpgsql as $$
    begin
        if i = 1 then
            execute 'grant select on app.t to public';
            insert into app.t values (2);
        end if;
        return true;
    end $$;
    create trigger tr after insert on app.t
        for each row execute function pgque.logutriga('cdcq', 'when=app.f(r.id)');
});
my ($ret, $out, $err) = $node->psql('postgres', 'insert into app.t values (1)',
                                    extra_params => [ '-U', 'app' ]);
is($ret, 0, 'cdc: the insert whose when= grants and inserts again succeeds')
  or diag($err);
server_not_restarted('cdc');
is(events('cdcq'), 'id=2 id=1', 'cdc: both firings appended their event (the nested one first)');

# ... and with the nested firing failing after the grant, its ERROR caught by
# an exception block of the outer firing's expression (a subtransaction
# ends mid-use of the nested firing's parse)
$node->safe_psql('postgres', q{
    set role app;
    create or replace function app.f(i int) returns boolean language plpgsql as $$
    begin
        if i = 10 then
            execute 'grant select on app.t to public';
            begin
                insert into app.t values (11);
            exception when others then
                raise notice 'caught: %', sqlerrm;
            end;
            execute 'revoke select on app.t from public';
            insert into app.t values (12);
        elsif i = 11 then
            execute 'grant insert on app.t to public';
            raise exception 'nested firing fails';
        end if;
        return true;
    end $$;
});
($ret, $out, $err) = $node->psql('postgres', 'insert into app.t values (10)',
                                 extra_params => [ '-U', 'app' ]);
is($ret, 0, 'cdc: a nested firing failing inside an exception block leaves the outer one whole')
  or diag($err);
like($err, qr/caught: nested firing fails/, 'cdc: the nested ERROR was caught');
server_not_restarted('cdc, error caught mid-use');
is(events('cdcq'), 'id=2 id=1 id=12 id=10', 'cdc: the outer firings and the later nested one appended');
is($node->safe_psql('postgres', 'select string_agg(id::text, \' \' order by id) from app.t'),
   '1 2 10 12', 'cdc: the failed nested row is gone with its subtransaction');
# the cache still serves: a plain insert after all this
$node->safe_psql('postgres', 'insert into app.t values (20)');
is(events('cdcq'), 'id=2 id=1 id=12 id=10 id=20', 'cdc: the trigger fires normally afterwards');

# --- item 3: the producer's plan cache, re-entered from an event table ------
# The trigger is the extension owner's (here the superuser, who installed
# it): only it may add triggers to pgque's event tables.
my $qid_p;
$node->safe_psql('postgres', q{select pgque.create_queue('pq')});
$qid_p = $node->safe_psql('postgres', q{select queue_id from pgque.queue where queue_name = 'pq'});
$node->safe_psql('postgres', qq{
    create function public.switch_and_send() returns trigger language plpgsql as \$\$
    begin
        if new.ev_data = 'outer' then
            -- a table switch, as rotation's step 1 makes it: the queue's
            -- insert plans are stale for the nested send
            update pgque.queue set queue_cur_table = (queue_cur_table + 1) % 3
             where queue_name = 'pq';
            perform pgque.send('pq', 'nested');
        elsif new.ev_data = 'outer, nested fails' then
            update pgque.queue set queue_cur_table = (queue_cur_table + 1) % 3
             where queue_name = 'pq';
            begin
                perform pgque.send('pq', 'nested, fails');
            exception when others then
                raise notice 'caught: %', sqlerrm;
            end;
        elsif new.ev_data = 'nested, fails' then
            raise exception 'nested send fails';
        end if;
        return new;
    end \$\$;
    create trigger b before insert on pgque.event_${qid_p}_0
        for each row execute function public.switch_and_send();
    create trigger b before insert on pgque.event_${qid_p}_1
        for each row execute function public.switch_and_send();
    create trigger b before insert on pgque.event_${qid_p}_2
        for each row execute function public.switch_and_send();
});
($ret, $out, $err) = $node->psql('postgres', q{select pgque.send('pq', 'outer') > 0});
is($ret, 0, 'producer: a send whose event table trigger switches the table and sends again succeeds')
  or diag($err);
server_not_restarted('producer');
is($node->safe_psql('postgres', qq{
    select string_agg(tableoid::regclass || ':' || ev_data, ' ' order by ev_id) from pgque.event_$qid_p}),
   "pgque.event_${qid_p}_0:outer pgque.event_${qid_p}_1:nested",
   'producer: the outer event in the table it started on, the nested one in the new current table');

($ret, $out, $err) = $node->psql('postgres', q{
    select pgque.send('pq', 'outer, nested fails') > 0;
    select pgque.send('pq', 'after') > 0});
is($ret, 0, 'producer: a nested send failing inside an exception block leaves the outer send whole')
  or diag($err);
like($err, qr/caught: nested send fails/, 'producer: the nested ERROR was caught');
server_not_restarted('producer, error caught mid-use');
is($node->safe_psql('postgres', qq{
    select string_agg(tableoid::regclass || ':' || ev_data, ' ' order by ev_id) from pgque.event_$qid_p}),
   "pgque.event_${qid_p}_0:outer pgque.event_${qid_p}_1:nested pgque.event_${qid_p}_1:outer, nested fails "
   . "pgque.event_${qid_p}_2:after",
   'producer: the outer event in its table, the failed one gone, the next send in the new current table');

# send_batch, the other kind of plan: the same switch under a batch insert
$node->safe_psql('postgres', qq{
    create or replace function public.switch_and_batch() returns trigger language plpgsql as \$\$
    begin
        if new.ev_data = 'b1' then
            update pgque.queue set queue_cur_table = (queue_cur_table + 1) % 3
             where queue_name = 'pq';
            perform pgque.send_batch('pq', array['nested b']);
        end if;
        return new;
    end \$\$;
    create trigger c before insert on pgque.event_${qid_p}_2
        for each row execute function public.switch_and_batch();
});
($ret, $out, $err) = $node->psql('postgres', q{select cardinality(pgque.send_batch('pq', array['b1', 'b2']))});
is($ret, 0, 'producer: send_batch whose trigger switches the table and sends a batch again succeeds')
  or diag($err);
server_not_restarted('producer, batch');
is($node->safe_psql('postgres', qq{
    select string_agg(tableoid::regclass || ':' || ev_data, ' ' order by ev_id)
      from pgque.event_$qid_p where ev_data like '%b%'}),
   "pgque.event_${qid_p}_2:b1 pgque.event_${qid_p}_2:b2 pgque.event_${qid_p}_0:nested b",
   'producer: the batch in its table, the nested batch in the new current table');

# --- the window reads' plan cache, re-entered from a policy -----------------
# Found while checking the other caches: a window read's kept plan was freed
# when the cache filled (256 sources) under a read still executing it.  A
# forced row-level security policy on an event table, whose function reads
# 300 other windows, does it (a superuser's here: since ADR 0042 the event
# tables belong to pgque_owner, so the installing role can no longer put
# one there; the cache must be safe all the same).
$node->safe_psql('postgres', q{
    create role extowner login;
    create database wdb owner extowner;
});
$node->safe_psql('wdb', 'set role extowner; create extension pgque_bgw');
my $qid_w = $node->safe_psql('wdb', q{
    select pgque.create_queue('wq'); select pgque.send('wq', 'w1') > 0;
    select queue_id from pgque.queue where queue_name = 'wq'});
($qid_w) = $qid_w =~ /(\d+)\s*\z/;
$node->safe_psql('wdb', qq{
    create function public.many_windows() returns boolean language plpgsql as \$\$
    begin
        if pg_catalog.current_setting('t35.inside', true) = 'yes' then
            return true;
        end if;
        perform pg_catalog.set_config('t35.inside', 'yes', true);
        perform count(*) from pg_catalog.generate_series(1, 300) i,
            lateral pgque._window_rows(pg_catalog.format('pgque.event_${qid_w}_0 /* %s */', i), '0'::xid8,
                                       pg_catalog.pg_snapshot_xmax(pg_catalog.pg_current_snapshot()), '{}',
                                       pg_catalog.pg_current_snapshot(),
                                       null, null, null, 1, null, null);
        perform pg_catalog.set_config('t35.inside', '', true);
        return true;
    end \$\$;
    alter table pgque.event_${qid_w}_0 enable row level security;
    alter table pgque.event_${qid_w}_0 force row level security;
    create policy p on pgque.event_${qid_w}_0 using (public.many_windows());
});
($ret, $out, $err) = $node->psql('wdb', qq{
    select count(*) from pgque._window_rows('pgque.event_${qid_w}_0', '0'::xid8,
                                            pg_catalog.pg_snapshot_xmax(pg_catalog.pg_current_snapshot()), '{}',
                                            pg_catalog.pg_current_snapshot(), null, null, null, 10, null, null)});
is($ret, 0, 'window: a read whose policy fills the plan cache under it succeeds') or diag($err);
is($out, '1', 'window: and returns the event');
server_not_restarted('window');

# --- the plain receive's part cache, re-entered from a policy ---------------
# A receive forms its window into a per-backend part cache while the window
# read runs; a policy on the event table that receives again (here the same
# consumer, a second time) used to reset that cache under the outer read,
# which then mixed its rows into the nested read's.  Each read must hand out
# the batch's events once.
$node->safe_psql('wdb', qq{
    select pgque.create_queue('rq');
    select pgque.subscribe('rq', 'c');
    select pgque.send('rq', 'r' || i) > 0 from pg_catalog.generate_series(1, 5) i;
    select pgque.ticker('rq');
});
my $qid_r = $node->safe_psql('wdb', q{select queue_id from pgque.queue where queue_name = 'rq'});
$node->safe_psql('wdb', qq{
    create table public.nested_got (ev text);
    -- the policy runs as the role the read runs as (pgque_owner)
    grant insert on public.nested_got to public;
    create function public.receive_again() returns boolean language plpgsql as \$\$
    begin
        if pg_catalog.current_setting('t35.inside', true) = 'yes' then
            return true;
        end if;
        -- once per transaction
        perform pg_catalog.set_config('t35.inside', 'yes', true);
        insert into public.nested_got select m.payload from pgque.receive('rq', 'c', 100) m;
        return true;
    end \$\$;
    alter table pgque.event_${qid_r}_0 enable row level security;
    alter table pgque.event_${qid_r}_0 force row level security;
    create policy p on pgque.event_${qid_r}_0 using (public.receive_again());
});
($ret, $out, $err) = $node->psql('wdb', q{
    select string_agg(payload, ' ' order by msg_id) from pgque.receive('rq', 'c', 100)});
is($ret, 0, 'receive: a receive whose policy receives again succeeds') or diag($err);
is($out, 'r1 r2 r3 r4 r5', 'receive: the outer receive hands out the batch once');
is($node->safe_psql('wdb', q{select string_agg(ev, ' ' order by ev) from public.nested_got}),
   'r1 r2 r3 r4 r5', 'receive: so does the nested one');
server_not_restarted('receive');

done_testing();
