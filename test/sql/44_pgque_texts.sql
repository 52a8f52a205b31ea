-- PgQue's words where its scripts and tests match them (issue #27 items 4
-- and 5), written from PgQue's reference and its documented behaviour.

-- 4. status(): PgQue's rows first, in its order and meaning, ours after
select component, status from pgque.status();
-- the pgque row is version(), as PgQue's; postgresql is PostgreSQL's version()
select detail = pgque.version() as pgque_row_is_version from pgque.status() where component = 'pgque';
select detail = pg_catalog.version() as postgresql_row from pgque.status() where component = 'postgresql';
-- without pg_cron (as here) its row says how to run without it
select detail like '%pgque.ticker()%pgque.maint()%' as pg_cron_row_names_manual_mode
  from pgque.status() where component = 'pg_cron' and status = 'unavailable';
-- the counts, in PgQue's words
select pgque.create_queue('texts_q');
select pgque.subscribe('texts_q', 'c');
select component, detail ~ '^[0-9]+ queues configured$' as queues_words,
       detail = (select count(*) from pgque.queue) || ' queues configured' as queues_count
  from pgque.status() where component = 'queues';
select component, detail ~ '^[0-9]+ active subscriptions$' as consumers_words,
       detail = (select count(*) from pgque.subscription) || ' active subscriptions' as consumers_count
  from pgque.status() where component = 'consumers';

-- 5. error texts: each contains PgQue's words; the SQLSTATE stays ours
create function pg_temp.err(i_sql text) returns text language plpgsql as $$
begin
    execute i_sql;
    return 'no error';
exception when others then
    return sqlstate || ': ' || sqlerrm;
end $$;
-- ticker() of an unknown queue: "no such queue" (PgQ's ticker), with the
-- text PgQue's clients classify
select pg_temp.err($$select pgque.ticker('texts_nope')$$);
-- receive(..., 0): "max_return must be >= 1"
select pg_temp.err($$select * from pgque.receive('texts_q', 'c', 0)$$);
select pg_temp.err($$select * from pgque.receive_coop('texts_q', 'c', 'm', 0)$$);
-- a 58-byte queue name: the limit in the message ("(max 57)"), from the
-- one limit of src/rules.h, in SQL and in the producer's C
select pg_temp.err($$select pgque.create_queue(repeat('q', 58))$$);
select pg_temp.err($$select pgque.send(repeat('q', 58), 'x')$$);
select pg_temp.err($$select pgque.subscribe(repeat('q', 58), 'c')$$);
select pgque.create_queue(repeat('q', 57)) as fits_at_57;
select pgque.drop_queue(repeat('q', 57));
-- max_retries -1: "max_retries must be >= 0"
select pg_temp.err($$select pgque.set_queue_config('texts_q', 'max_retries', '-1')$$);
-- nack with a NULL msg_id: PgQue's "msg_id <NULL> not found in batch N"
select pgque.send('texts_q', 'one') is not null as sent;
select pgque.ticker('texts_q') is not null as ticked;
select batch_id as texts_batch from pgque.receive('texts_q', 'c', 10) \gset
select pg_temp.err(format($$select pgque.nack(%s, row(null, %s, 'default', 'one', 0, now(), null, null, null, null)::pgque.message)$$,
                          :texts_batch, :texts_batch))
       like '22004: msg_id <NULL> not found in batch %' as nack_null_msg_id;
select pgque.ack(:texts_batch);
-- throughput with a zero bucket: "bucket size must be > 0"
select pg_temp.err($$select * from pgque.throughput('texts_q', '1 hour', '0 seconds')$$);
select pg_temp.err($$select * from pgque.error_rate('texts_q', '1 hour', '0 seconds')$$);
-- start() without pg_cron (here the workers are off): PgQue's sentence
select replace(pg_temp.err($$select pgque.start()$$), current_database(), 'DB') as start_without_pg_cron;

-- the partition-key guards PgQue's tests name
select pgque.subscribe_slot('texts_q', 'pk', 0, 2);
select pgque.subscribe_slot('texts_q', 'pk', 1, 2);
-- the wrong n names the pinned one: "n="
select pg_temp.err($$select pgque.subscribe_slot('texts_q', 'pk', 0, 3)$$);
-- a slot's consumer through the plain API: "receive_partitioned()"
select pg_temp.err($$select * from pgque.receive('texts_q', 'pk#0/2', 10)$$);
-- a slot's batch through plain ack/nack: "ack_partitioned()", "nack_partitioned()"
select pgque.claim_slot('texts_q', 'pk', 0, 'w') is not null as claimed;
select pgque.claim_slot('texts_q', 'pk', 1, 'w') is not null as claimed;
select pg_temp.err($$select * from pgque.receive_partitioned('texts_q', 'pk', 0, 3, 'w', 10)$$);
select pgque.send('texts_q', 'slot event') is not null as sent;
select pgque.ticker('texts_q') is not null as ticked;
select coalesce((select batch_id from pgque.receive_partitioned('texts_q', 'pk', 0, 2, 'w', 10) limit 1),
                (select batch_id from pgque.receive_partitioned('texts_q', 'pk', 1, 2, 'w', 10) limit 1)) as slot_batch \gset
select pg_temp.err(format('select pgque.ack(%s)', :slot_batch));
select pg_temp.err(format($$select pgque.nack(%s, row(1, %s, 'default', 'x', 0, now(), null, null, null, null)::pgque.message)$$,
                          :slot_batch, :slot_batch));
-- a consumer without slots: "not a partitioned consumer"
select pg_temp.err($$select pgque.claim_slot('texts_q', 'c', 0, 'w')$$);
select pg_temp.err($$select pgque.claim_slot('texts_q', 'never_subscribed', 0, 'w')$$);

select pgque.drop_queue('texts_q', true);
