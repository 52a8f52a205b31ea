-- Bounds of the slot lease table (issue 11): claims undone by an abort,
-- caps per consumer and per database, lease and idempotency TTL limits.
select pgque.create_queue('lim');
select count(*) as subscribed from (
    select pgque.subscribe_slot('lim', c, k, 8) from generate_series(0, 7) k, (values ('c'), ('d')) v(c)) s;

-- error_hint_of(sql): 'SQLSTATE: message / hint' of the error raised
create function pgque_test.error_hint_of(i_sql text) returns text
language plpgsql as $$
declare
    st   text;
    msg  text;
    h    text;
begin
    execute i_sql;
    return 'no error';
exception when others then
    get stacked diagnostics st = returned_sqlstate, msg = message_text, h = pg_exception_hint;
    return st || ': ' || msg || ' / ' || coalesce(h, '(no hint)');
end $$;

select pgque._slot_lease_count_all() as count_before \gset

-- the attack: claims in a transaction that rolls back used to stay
begin;
select count(pgque.claim_slot('lim', 'c', k, 'w')) as claimed from generate_series(0, 7) k;
select pgque._slot_lease_count_all() - :count_before as entries_during;
rollback;
select pgque._slot_lease_count_all() - :count_before as entries_after_rollback;

-- a savepoint rolled back takes its own claims only
begin;
select pgque.claim_slot('lim', 'c', 0, 'w') is not null as outer_claim;
savepoint s;
select pgque.claim_slot('lim', 'c', 1, 'w') is not null as inner_claim;
rollback to savepoint s;
savepoint s2;
select pgque.claim_slot('lim', 'c', 2, 'w') is not null as inner_kept;
release savepoint s2;
commit;
select consumer, slot, owner from pgque._slot_leases() where consumer in ('c', 'd') order by consumer, slot;

-- a takeover rolled back gives the lease back to its previous owner
select pgque.claim_slot('lim', 'd', 0, 'old', '1 second') as old_epoch \gset
select pg_sleep(1.2);
begin;
select pgque.claim_slot('lim', 'd', 0, 'new') > :old_epoch as taken_over;
rollback;
select owner, epoch = :old_epoch as same_epoch from pgque._slot_leases() where consumer = 'd' and slot = 0;

-- a claim and a release in one rolled-back transaction leave nothing
begin;
select pgque.claim_slot('lim', 'd', 1, 'w') is not null as claimed;
select pgque.release_slot('lim', 'd', 1, 'w') as released;
rollback;
select count(*) as d1_entries from pgque._slot_leases() where consumer = 'd' and slot = 1;

-- per-consumer cap: the claim past it fails naming the cap, and the
-- statement's other new entries go with it
select pgque._slot_lease_count_all() as count_before \gset
set pgque_bgw.max_slots_per_consumer = 4;
select pgque_test.error_hint_of($$select pgque.claim_slot('lim', 'c', k, 'w') from generate_series(0, 7) k$$) as consumer_cap;
select pgque._slot_lease_count_all() - :count_before as entries_added;
select count(pgque.claim_slot('lim', 'c', k, 'w')) as up_to_the_cap from generate_series(0, 3) k;
reset pgque_bgw.max_slots_per_consumer;

-- per-database cap
set pgque_bgw.max_slots_per_database = 6;
select pgque_test.error_hint_of($$select pgque.claim_slot('lim', 'd', k, 'w') from generate_series(0, 7) k$$) as database_cap;
select count(*) as entries_of_lim from pgque._slot_leases() where consumer in ('c', 'd');
reset pgque_bgw.max_slots_per_database;

-- the caps are a superuser's: a session cannot raise its own
set role pgque_reader;
set pgque_bgw.max_slots_per_database = 1000000;
reset role;

-- lease TTL: 1 second to 1 day, checked once, in C (no overflow), also
-- for a direct call
select v.what, pgque_test.error_of(v.sql) as error from (values
 ('1000000 years', $$select pgque.claim_slot('lim', 'c', 5, 'w', '1000000 years')$$),
 ('1 day 1 s',     $$select pgque.claim_slot('lim', 'c', 5, 'w', '1 day 1 second')$$),
 ('C: huge',       $$select pgque._slot_claim((select queue_id from pgque.queue where queue_name = 'lim'), 'c', 5, 'w', '178000000 years')$$),
 ('C: zero',       $$select pgque._slot_claim((select queue_id from pgque.queue where queue_name = 'lim'), 'c', 5, 'w', '0')$$),
 ('0.5 s',         $$select pgque.claim_slot('lim', 'c', 5, 'w', '0.5 seconds')$$),
 ('-1 month',      $$select pgque.claim_slot('lim', 'c', 5, 'w', '-1 month 40 days')$$)) v(what, sql);
select pgque.claim_slot('lim', 'c', 5, 'w', '1 day') is not null as one_day_ok;
select count(*) > 0 as status_readable from pgque.partition_slot_status;

-- send_idem TTL: at most 30 days
select pgque_test.error_hint_of($$select * from pgque.send_idem('lim', 't', 'p', 'k', '100000 years')$$) as idem_huge_ttl;
select deduped from pgque.send_idem('lim', 't', 'p', 'k', '30 days');

-- DROP EXTENSION rolled back to a savepoint: the leases stay (the flag
-- that forgets them at commit follows the savepoint)
select count(*) as leases_before from pgque._slot_leases() \gset
select :leases_before > 0 as there_are_leases_to_lose;
set client_min_messages = warning;
begin;
savepoint s;
drop extension pgque_bgw cascade;
rollback to savepoint s;
commit;
select count(*) - :leases_before as leases_lost_to_rolled_back_drop from pgque._slot_leases();
-- the same from a PL/pgSQL exception block (a subtransaction that aborts)
do $$
begin
    drop extension pgque_bgw cascade;
    raise exception 'undo';
exception when raise_exception then
    null;
end $$;
select count(*) - :leases_before as leases_lost_to_aborted_block from pgque._slot_leases();
-- a DROP EXTENSION cannot be prepared (COMMIT PREPARED elsewhere would not
-- forget the leases)
begin;
drop extension pgque_bgw cascade;
prepare transaction 'drop_pgque';
select count(*) as extension_still_there from pg_extension where extname = 'pgque_bgw';
select count(*) - :leases_before as leases_lost_to_prepare from pgque._slot_leases();
reset client_min_messages;

select pgque.drop_queue('lim', true);
select count(*) as leases_after_drop from pgque._slot_leases() where consumer in ('c', 'd');
