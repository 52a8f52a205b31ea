-- Failure policy pause (ADR 0029): the policy, its rejections, and the
-- blocked-key lifecycle, deterministically (workers off, explicit ticks).
select pgque.create_queue('pz');
select pgque.set_queue_config('pz', 'max_retries', '2');

-- bad input
select pgque_test.error_of($$select pgque.subscribe_slot('pz', 'pc', 0, 1, 'never')$$) as bad_policy;
select count(*) as nothing_subscribed from pgque.partition_consumer where co_name = 'pc';
select pgque.subscribe_slot('pz', 'pc', 0, 1);
select pgque_test.error_of($$select pgque.set_failure_policy('pz', 'pc', null)$$) as null_policy,
       pgque_test.error_of($$select pgque.set_failure_policy('pz', 'pc', 'PAUSE')$$) as wrong_case,
       pgque_test.error_of($$select pgque.set_failure_policy('nope', 'pc', 'pause')$$) as no_queue,
       pgque_test.error_of($$select pgque.set_failure_policy('pz', 'nobody', 'pause')$$) as no_consumer,
       pgque_test.error_of($$select pgque.set_failure_policy('pz', null, 'pause')$$) as null_consumer,
       pgque_test.error_of($$select pgque.get_failure_policy('pz', 'nobody')$$) as get_no_consumer;

-- policy set/get: skip by default; set returns the previous one; the
-- five-argument subscribe_slot sets it too
select pgque.get_failure_policy('pz', 'pc') as default_policy;
select pgque.set_failure_policy('pz', 'pc', 'pause') as previous;
select pgque.get_failure_policy('pz', 'pc') as now_policy;
select pgque.subscribe_slot('pz', 'pc', 0, 1, null);
select pgque.get_failure_policy('pz', 'pc') as null_keeps_it;
select pgque.subscribe_slot('pz', 'pz2', 0, 2, 'pause'), pgque.subscribe_slot('pz', 'pz2', 1, 2);
select pgque.get_failure_policy('pz', 'pz2') as at_subscribe;
select pgque.unsubscribe_slot('pz', 'pz2', k) from generate_series(0, 1) k;

-- a worker: receive (recording what it got), nack the payloads listed in
-- i_fail, skip the rest of a nacked key's events in the batch (the pause
-- worker contract), ack
create temp table got (seq serial, msg_id bigint, payload text, key text, retry int4);
create function pz_step(i_fail text[] default '{}') returns text language plpgsql as $$
declare
    m      pgque.message;
    nacked text[] := '{}';
    res    text[] := '{}';
begin
    for m in select * from pgque.receive_partitioned('pz', 'pc', 0, 1, 'w', 100) loop
        if m.extra1 = any(nacked) then
            res := res || ('(' || m.payload || ')');
            continue;
        end if;
        if m.payload = any(i_fail) then
            perform pgque.nack_partitioned('pz', 'pc', 0, 1, 'w', m, '0 seconds', 'test');
            nacked := nacked || m.extra1;
            res := res || ('!' || m.payload);
            continue;
        end if;
        insert into got (msg_id, payload, key, retry) values (m.msg_id, m.payload, m.extra1, m.retry_count);
        res := res || m.payload;
    end loop;
    perform pgque.ack_partitioned('pz', 'pc', 0, 1, 'w');
    return array_to_string(res, ' ');
end $$;
-- due retries in, then a tick (in a later transaction: it must see them)
create procedure pz_tick() language plpgsql as $$
begin
    perform pgque.maint_retry_events();
    commit;
    perform pgque.ticker('pz');
end $$;
select pgque.claim_slot('pz', 'pc', 0, 'w') > 0 as claimed;

-- A1 fails: key A is blocked on it; A2 (same batch) is skipped by the worker
select pgque.send('pz', 'e', 'A1', 'A'), pgque.send('pz', 'e', 'B1', 'B'), pgque.send('pz', 'e', 'A2', 'A'),
       pgque.send('pz', 'e', 'N1', null);
call pz_tick();
select pz_step(array['A1']) as step1;
select partition_key, state, head_ev_id = (select min(ev_id) from pgque_test.events('pz') where ev_data = 'A1') as head_is_a1
  from pgque.blocked_keys;
-- one row per blocked key, whatever the number of its events
select count(*) as marker_rows from pgque.blocked_key;

-- later events of A are withheld, B flows (same slot); nothing counts as a retry
select pgque.send('pz', 'e', 'A3', 'A'), pgque.send('pz', 'e', 'B2', 'B'), pgque.send('pz', 'e', 'A4', 'A');
select pgque.ticker('pz');
select pz_step() as step2_only_b;
select count(*) as blocked_still from pgque.blocked_keys where partition_key = 'A';

-- the retry of A1 comes back alone (A3/A4 still withheld); it fails again
call pz_tick();
select pz_step(array['A1']) as step3_a1_fails_again;
call pz_tick();
-- now it succeeds: its ack releases A; the withheld A2, A3, A4 come back
-- in ev_id order with their retry count unchanged, A5 (sent meanwhile)
-- waits for them
select pz_step() as step4_a1_ok;
select partition_key, state from pgque.blocked_keys;
select pgque.send('pz', 'e', 'A5', 'A'), pgque.send('pz', 'e', 'B3', 'B');
select pgque.ticker('pz');
select pz_step() as step5;
select partition_key, state from pgque.blocked_keys;
select pgque.ticker('pz');
select pz_step() as step6_a5;
select count(*) as unblocked from pgque.blocked_keys;
call pz_tick();
select pz_step() as step7_empty;

-- the DLQ path: C1 fails until dead-lettered (max_retries 2); C2 waits,
-- and comes back once C1 is in the dead-letter queue
select pgque.send('pz', 'e', 'C1', 'C'), pgque.send('pz', 'e', 'C2', 'C'), pgque.send('pz', 'e', 'D1', 'D');
call pz_tick();
select pz_step(array['C1']) as dlq1;
call pz_tick();
select pz_step(array['C1']) as dlq2;
call pz_tick();
select pz_step(array['C1']) as dlq3_dead;
select ev_data, dl_reason from pgque.dead_letter where ev_data = 'C1';
select pgque.send('pz', 'e', 'C3', 'C');
call pz_tick();
select pz_step() as dlq4_c2_c3;
call pz_tick();
select pz_step() as dlq5;
select count(*) as unblocked from pgque.blocked_keys;

-- what was processed, per key, in order: ascending ev_id, the dead letter the only gap
select key, string_agg(payload || coalesce(':' || retry, ''), ' ' order by seq) as processed
  from got group by key order by key nulls last;
select count(*) as out_of_order
  from (select msg_id < lag(msg_id) over (partition by key order by seq) as back from got) x where back;

-- a NULL key never blocks (skip semantics)
select pgque.send('pz', 'e', 'N2', null), pgque.send('pz', 'e', 'N3', null);
call pz_tick();
select pz_step(array['N2']) as null_key;
select count(*) as no_marker from pgque.blocked_keys;
call pz_tick();
select pz_step() as null_retry;

-- the PgQ primitives that bypass the markers are refused on a pausing slot's batch
select pgque.send('pz', 'e', 'E1', 'E');
select pgque.ticker('pz');
select count(*) from pgque.receive_partitioned('pz', 'pc', 0, 1, 'w', 100);
select pgque_test.error_of(format($$select pgque.event_retry(%s, %s, 0)$$, sb_batch,
                                  (select max(ev_id) from pgque_test.events('pz')))) as event_retry,
       pgque_test.error_of(format($$select pgque.batch_retry(%s, 0)$$, sb_batch)) as batch_retry
  from pgque.slot_batch where sb_batch is not null;

-- switching to skip releases every blocked key first: nothing is lost
select pgque.nack_partitioned('pz', 'pc', 0, 1, 'w', m, '1 hour') from pgque.receive_partitioned('pz', 'pc', 0, 1, 'w', 100) m;
select pgque.ack_partitioned('pz', 'pc', 0, 1, 'w');
select pgque.send('pz', 'e', 'E2', 'E');
select pgque.ticker('pz');
select pz_step() as e2_withheld;
select partition_key, state from pgque.blocked_keys;
select pgque.set_failure_policy('pz', 'pc', 'skip') as previous;
select count(*) as markers_left from pgque.blocked_key;
select pgque.ticker('pz');
select pz_step() as e2_back;

-- the key_blocked condition: one per slot while a key is blocked longer
-- than the threshold (the watchdog opens and clears the alert: TAP 032)
select pgque.set_failure_policy('pz', 'pc', 'pause');
select pgque.send('pz', 'e', 'F1', 'F'), pgque.send('pz', 'e', 'G1', 'G');
select pgque.ticker('pz');
select pz_step(array['F1', 'G1']) as fg_fail;
select kind, subject, queue_name, consumer, slot, details->>'keys_blocked' as keys,
       details->>'oldest_key' in ('F', 'G') as oldest_named
  from pgque._pause_alert_conditions('0 seconds');
select count(*) as not_yet from pgque._pause_alert_conditions('1 hour');
select count(*) as no_threshold_no_alert from pgque._pause_alert_conditions(null);
call pz_tick();
select pz_step() as fg_ok;
select count(*) as released from pgque._pause_alert_conditions('0 seconds');

-- rotation waits for a blocked key's withheld events: R2 is passed by the
-- slot's cursor while R is blocked, then many rotation rounds run; R2
-- still comes back when R1 is done
select pgque.set_queue_config('pz', 'rotation_period', '1 millisecond');
select pgque.send('pz', 'e', 'R1', 'R'), pgque.send('pz', 'e', 'R2', 'R');
select pgque.ticker('pz');
select pgque.nack_partitioned('pz', 'pc', 0, 1, 'w', m, '1 hour')
  from pgque.receive_partitioned('pz', 'pc', 0, 1, 'w', 100) m where m.payload = 'R1';
select pgque.ack_partitioned('pz', 'pc', 0, 1, 'w');
create procedure pz_rounds(i_rounds int4) language plpgsql as $$
begin
    for r in 1 .. i_rounds loop
        perform pgque.send('pz', 'e', 'S' || r, 'S');
        commit;
        perform pgque.ticker('pz');
        commit;
        perform pz_step();
        commit;
        perform pg_sleep(0.01);
        perform pgque.maint();
        commit;
    end loop;
end $$;
call pz_rounds(6);
select count(*) as s_processed from got where key = 'S';
select count(*) as r2_kept from pgque_test.events('pz') where ev_data = 'R2';
update pgque.retry_queue set ev_retry_after = now() where ev_data = 'R1';
call pz_tick();
select pz_step() as r1_ok;
select pgque.ticker('pz');
select pz_step() as r2_back;
select count(*) as unblocked from pgque.blocked_keys;

select pgque.drop_queue('pz', true);
