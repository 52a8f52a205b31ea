# Workload: failure policy pause (ADR 0029), sourced by benchmark/run.sh
# (which defines PSQL, WORK, PORT, RESULTS and QUICK).  Workers off: one
# client ticks and re-injects retries itself.
#
# 1. Throughput: one backlog of keyed events over 1,000 keys, 1% of them
#    failing once (on their first delivery), drained by a partitioned
#    consumer (N = 4, one client cycling over the slots) under skip and under
#    pause (same backlog, fan-out).  Events per second until every event was
#    processed.
# 2. Cost per blocked key: 10, 1,000 and 100,000 blocked keys on one slot
#    (their marker rows inserted as nacks make them); then 5,000 events of
#    other keys are received and acked 100 at a time: rows, table size and
#    time per receive, against the same with no blocked key.

pause_workload() {
	local events=$1 c t0 t1 eps k ms rows size base
	"${PSQL[@]}" >/dev/null <<'SQL'
select pgque.create_queue('pause_bench');
select pgque.subscribe_slot('pause_bench', 'skipc', k, 4, 'skip') from generate_series(0, 3) k;
select pgque.subscribe_slot('pause_bench', 'pausec', k, 4, 'pause') from generate_series(0, 3) k;
select pgque.claim_slot('pause_bench', c, k, 'bw', '1 day') from unnest(array['skipc', 'pausec']) c, generate_series(0, 3) k;

create table bench_pause_done (c text, ev_id bigint);

-- drain every slot of consumer c until all i_events are processed; a 'f'
-- event fails on its first delivery; under pause the rest of a nacked key's
-- events in the batch are skipped (they come back)
create procedure bench_pause_drain(q text, c text, i_events int) language plpgsql as $$
declare
    m      pgque.message;
    nacked text[];
    busy   boolean;
    pause  boolean := pgque.get_failure_policy(q, c) = 'pause';
begin
    loop
        busy := false;
        for k in 0 .. 3 loop
            loop
                nacked := '{}';
                for m in select * from pgque.receive_partitioned(q, c, k, 4, 'bw', 100) loop
                    busy := true;
                    continue when pause and m.extra1 = any(nacked);
                    if m.payload like 'f%' and m.retry_count is null then
                        perform pgque.nack_partitioned(q, c, k, 4, 'bw', m, '0 seconds');
                        nacked := nacked || m.extra1;
                    else
                        insert into bench_pause_done values (c, m.msg_id);
                    end if;
                end loop;
                exit when pgque.ack_partitioned(q, c, k, 4, 'bw') = 0;
                commit;
            end loop;
        end loop;
        exit when (select count(*) from bench_pause_done d where d.c = bench_pause_drain.c) >= i_events;
        -- what the maintenance worker and the ticker do meanwhile
        perform pgque.maint_retry_events();
        commit;
        if not busy then
            perform pgque.force_tick(q);
        end if;
        perform pgque.ticker(q);
        commit;
    end loop;
end $$;
SQL
	"${PSQL[@]}" >/dev/null -c "
		do \$\$ begin
		  for t in 0 .. $events / 1000 - 1 loop
		    perform pgque.send_batch('pause_bench', 'e',
		              array(select case when hashtext('f' || i) % 100 = 0 then 'f-' else 'ok-' end || i
		                      from generate_series(t * 1000 + 1, t * 1000 + 1000) i),
		              array(select 'key-' || (i % 1000) from generate_series(t * 1000 + 1, t * 1000 + 1000) i));
		    commit;
		    perform pgque.ticker('pause_bench');
		    commit;
		  end loop;
		end \$\$"
	echo "-- $events events over 1,000 keys, 1% failing once; one client, N = 4"
	for c in skipc pausec; do
		t0=$(date +%s.%N)
		"${PSQL[@]}" -c "call bench_pause_drain('pause_bench', '$c', $events)" >/dev/null
		t1=$(date +%s.%N)
		eps=$(awk -v n="$events" -v a="$t0" -v b="$t1" 'BEGIN {printf "%.0f", n / (b - a)}')
		printf '%-34s %-22s %2s client  %10s ev/s\n' pause_throughput "policy ${c%c}" 1 "$eps"
		echo "pause_throughput,policy ${c%c},1,$eps," >> "$RESULTS"
	done

	"${PSQL[@]}" >/dev/null <<'SQL'
select pgque.create_queue('pause_cost');
select pgque.subscribe_slot('pause_cost', 'pc', 0, 1, 'pause');
select pgque.claim_slot('pause_cost', 'pc', 0, 'bw', '1 day');
-- i_keys blocked keys: the rows nack_partitioned makes (a nack per key
-- would measure the nacks), head 0: every event of theirs is withheld
create procedure bench_pause_block(i_keys int) language plpgsql as $$
begin
    insert into pgque.blocked_key (bk_sub, bk_key, bk_head, bk_tick)
    select s.sub_id, 'blocked-' || i, 0, pgque._slot_cursor(s)
      from pgque.subscription s join pgque.consumer c on c.co_id = s.sub_consumer,
           generate_series(1, i_keys) i
     where c.co_name = 'pc#0/1';
end $$;
-- 5,000 events of other keys (and 1% of blocked ones: withheld); 20,000
-- before issue #30: the figure is per receive, 50 of them are enough
create procedure bench_pause_send() language plpgsql as $$
begin
    perform pgque.send_batch('pause_cost', 'e', array_fill('y'::text, array[5000]),
                             array(select case when i % 100 = 0 then 'blocked-' || (i / 100) else 'free-' || (i % 997) end
                                     from generate_series(1, 5000) i));
    commit;
    perform pgque.force_tick('pause_cost');
    perform pgque.ticker('pause_cost');
end $$;
SQL
	echo "-- cost per blocked key: one slot, 5,000 events of other keys received 100 at a time"
	for k in 0 10 1000 100000; do
		[ "$QUICK" = 1 ] && [ "$k" = 100000 ] && k=20000
		"${PSQL[@]}" >/dev/null -c "delete from pgque.blocked_key" -c "vacuum full pgque.blocked_key"
		[ "$k" -gt 0 ] && "${PSQL[@]}" >/dev/null -c "call bench_pause_block($k)"
		read -r rows size < <("${PSQL[@]}" -F ' ' -c "select count(*), pg_total_relation_size('pgque.blocked_key') from pgque.blocked_key")
		"${PSQL[@]}" >/dev/null -c "call bench_pause_send()"
		ms=$("${PSQL[@]}" -c "
			do \$\$
			declare t0 timestamptz := clock_timestamp(); n int := 0; got int;
			begin
			  loop
			    select count(*) into got from pgque.receive_partitioned('pause_cost', 'pc', 0, 1, 'bw', 100);
			    exit when pgque.ack_partitioned('pause_cost', 'pc', 0, 1, 'bw') = 0;
			    n := n + 1;
			  end loop;
			  raise notice 'ms %', round(extract(epoch from clock_timestamp() - t0) * 1000 / greatest(n, 1), 3);
			end \$\$" 2>&1 | sed -n 's/.*ms //p')
		printf '%-34s %-22s %8s rows %10s bytes  %8s ms per receive+ack of 100\n' pause_blocked_keys "$k blocked keys" "$rows" "$size" "$ms"
		echo "pause_blocked_keys,$k blocked keys,1,$ms ms/receive,$rows rows $size bytes" >> "$RESULTS"
	done
	# the 100,000 blocked keys and their leased slots would stay for the
	# workloads after this one (the watchdog reports them on every pass)
	"${PSQL[@]}" >/dev/null -c "select pgque.drop_queue(q, true) from unnest(array['pause_bench', 'pause_cost']) q"
}
