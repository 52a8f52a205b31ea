-- pgque_bgw.error_codes (issue #27 item 6, ADR 0059): PL/pgSQL written for
-- PgQue catches pgque's errors with `exception when raise_exception`
-- (P0001, the code of every error PgQue raises).  'native' (the default)
-- keeps pgque_bgw's meaningful SQLSTATEs; 'pgque' makes every error pgque
-- raises leave its functions as P0001, its own SQLSTATE named in the DETAIL.
\set VERBOSITY terse
select pgque.create_queue('codes_q');
select pgque.subscribe('codes_q', 'c');

-- what a PgQue caller writes: catch raise_exception, report what it caught
create function pg_temp.pgque_style(i_sql text) returns text language plpgsql as $$
declare
    d text;
begin
    execute i_sql;
    return 'no error';
exception when raise_exception then
    get stacked diagnostics d = pg_exception_detail;
    return 'caught ' || sqlstate || ': ' || sqlerrm || ' / ' || d;
end $$;

-- the default: native codes, so the PgQue-style handler does not catch ...
show pgque_bgw.error_codes;
select pg_temp.pgque_style($$select pgque.ticker('codes_nope')$$);
-- ... and a handler for the condition does
do $$
begin
    perform pgque.ticker('codes_nope');
exception when undefined_object then
    raise notice 'native: caught undefined_object (%)', sqlstate;
end $$;

-- 'pgque': the PgQue-style handler catches each of these, raised in
-- PL/pgSQL or in C, with our SQLSTATE in the DETAIL
set pgque_bgw.error_codes = 'pgque';
select pg_temp.pgque_style($$select pgque.ticker('codes_nope')$$);
select pg_temp.pgque_style($$select pgque.send('codes_nope', 'x')$$);
select pg_temp.pgque_style($$select pgque.send(repeat('q', 58), 'x')$$);
select pg_temp.pgque_style($$select pgque.create_queue(repeat('q', 58))$$);
select pg_temp.pgque_style($$select * from pgque.receive('codes_q', 'c', 0)$$);
select pg_temp.pgque_style($$select pgque.set_queue_config('codes_q', 'max_retries', '-1')$$);
select pg_temp.pgque_style($$select * from pgque.get_batch_events(-1)$$);
select pg_temp.pgque_style($$select * from pgque.throughput('codes_q', '1 hour', '0 seconds')$$);
select pg_temp.pgque_style($$select pgque.claim_slot('codes_q', 'c', 0, 'w')$$);
-- a PgQue-style DO block, as PgQue's own tests write them
do $$
begin
    perform pgque.ticker('codes_nope');
    raise exception 'not reached';
exception when raise_exception then
    assert sqlerrm like '%no such queue%', 'unexpected: ' || sqlerrm;
    raise notice 'pgque: caught % (%)', sqlerrm, sqlstate;
end $$;
-- the error a client sees: P0001, the message unchanged
\set VERBOSITY default
select pgque.ticker('codes_nope');
\set VERBOSITY terse
-- PostgreSQL's own errors keep their codes (a division by zero in the
-- caller's SQL, not pgque's)
select pg_temp.pgque_style($$select 1 / 0$$);
-- and so does a privilege error (PgQue's are PostgreSQL's, 42501): a
-- reader that may not use the consumer (a superuser subscribed it, so it
-- was shared with pgque_reader, ADR 0058: made private first)
create role codes_other;
grant pgque_reader to codes_other;
select pgque.revoke_consumer('codes_q', 'c', 'pgque_reader');
set role codes_other;
select pg_temp.pgque_style($$select * from pgque.receive('codes_q', 'c', 10)$$);
do $$
begin
    perform * from pgque.receive('codes_q', 'c', 10);
exception when insufficient_privilege then
    raise notice 'pgque: a privilege error stays %', sqlstate;
end $$;
reset role;

-- a setting per role or database, as for any user setting; a bad value is refused
alter role codes_other set pgque_bgw.error_codes = 'pgque';
select setconfig from pg_db_role_setting where setrole = 'codes_other'::regrole;
set pgque_bgw.error_codes = 'postgres';
reset pgque_bgw.error_codes;
show pgque_bgw.error_codes;
select pg_temp.pgque_style($$select pgque.ticker('codes_nope')$$);

drop owned by codes_other;
drop role codes_other;
select pgque.drop_queue('codes_q', true);
