# Workload 4, partition keys (sourced by benchmark/run.sh, which defines
# PSQL, WORK, PORT, RESULTS and QUICK).
#
# One stream of keyed events (zipfian over 2,000 tenants, 100 per
# transaction, a tick every 1,000 events as a running ticker would) goes to
# two queues: one with 32 partition buckets (ADR 0013) and one without
# (every slot scans the whole stream and filters: PgQue's design).  For N =
# 1, 4, 16, 32, a consumer with N slots drains the stream, slot after slot:
# shared buffers (hit + read) touched in the queue's relations per produced
# event, from pg_statio: all of schema pgque (events, subscriptions, ticks,
# with their indexes), and the event relations alone.  System catalogs are
# left out: they measure backend start-up, not the queue.  Then throughput: N = 16 slot workers in parallel against one plain
# consumer.

partition_workload() {
	local events=$1 q n t0 t1 blks ev_blks eps
	"${PSQL[@]}" >/dev/null <<'SQL'
select pgque.create_queue('pk_bucketed');
select pgque.set_queue_config('pk_bucketed', 'partition_buckets', '32');
select pgque.create_queue('pk_filtered');
select pgque.set_queue_config('pk_filtered', 'partition_buckets', '0');
select pgque.maint_rotate_tables_step2();
select pgque.force_tick(q), pgque.ticker(q) from unnest(array['pk_bucketed', 'pk_filtered']) q;
select pgque.subscribe_slot(q, 'n' || n, s, n)
  from unnest(array['pk_bucketed', 'pk_filtered']) q, unnest(array[1, 4, 16, 32]) n, generate_series(0, n - 1) s;
select pgque.subscribe_slot(q, 'tp16', s, 16)
  from unnest(array['pk_bucketed', 'pk_filtered']) q, generate_series(0, 15) s;
select pgque.subscribe(q, 'plain') from unnest(array['pk_bucketed', 'pk_filtered']) q;

-- the same keyed events to both queues, ticking every 1,000
create procedure bench_produce_keyed(i_events int) language plpgsql as $$
declare
    keys text[];
    payloads text[] := array_fill('payload-abcdefghij'::text, array[100]);
begin
    for i in 1 .. i_events / 100 loop
        keys := array(select 'tenant-' || floor(exp(random() * ln(2000)))::int from generate_series(1, 100));
        perform pgque.send_batch('pk_bucketed', 'default', payloads, keys);
        perform pgque.send_batch('pk_filtered', 'default', payloads, keys);
        commit;
        if i % 10 = 0 then
            perform pgque.ticker('pk_bucketed');
            perform pgque.ticker('pk_filtered');
            commit;
        end if;
    end loop;
    perform pgque.force_tick('pk_bucketed');
    perform pgque.force_tick('pk_filtered');
    perform pgque.ticker('pk_bucketed');
    perform pgque.ticker('pk_filtered');
end $$;

-- drain slots s0..s1 of consumer c (n slots): claim, receive/ack, commit per batch
create procedure bench_drain_slots(q text, c text, n int, s0 int, s1 int, inout got bigint default 0)
language plpgsql as $$
declare
    k int;
    w text;
begin
    got := 0;
    for s in s0 .. s1 loop
        w := 'bench-' || s;
        perform pgque.claim_slot(q, c, s, w, '1 hour');
        loop
            select count(*) into k from pgque.receive_partitioned(q, c, s, n, w, 1000);
            exit when k = 0;
            got := got + k;
            perform pgque.ack_partitioned(q, c, s, n, w);
            commit;
        end loop;
    end loop;
end $$;

create procedure bench_drain_plain(q text, c text, inout got bigint default 0)
language plpgsql as $$
declare
    b bigint;
    k int;
begin
    got := 0;
    loop
        select max(batch_id), count(*) into b, k from pgque.receive(q, c, 1000);
        exit when b is null;
        got := got + k;
        perform pgque.ack(b);
        commit;
    end loop;
end $$;
SQL
	"${PSQL[@]}" -c "call bench_produce_keyed($events)" >/dev/null

	echo "-- shared buffers per produced event, all slots drained one after another"
	printf '%-14s %4s %14s %14s %12s\n' queue N "pgque rel./ev" "event rel./ev" "events seen"
	for q in pk_bucketed pk_filtered; do
		for n in 1 4 16 32; do
			"${PSQL[@]}" -c "select pg_stat_reset()" >/dev/null
			got=$("${PSQL[@]}" -c "call bench_drain_slots('$q', 'n$n', $n, 0, $((n - 1)))")
			sleep 0.6	# let the drained session's statistics reach shared memory
			read -r blks ev_blks < <("${PSQL[@]}" -F ' ' -c "
				select sum(b), coalesce(sum(b) filter (where relname like 'event\_' || (select queue_id from pgque.queue where queue_name = '$q') || '\_%'), 0)
				  from (select relname, coalesce(heap_blks_hit, 0) + coalesce(heap_blks_read, 0)
				               + coalesce(idx_blks_hit, 0) + coalesce(idx_blks_read, 0) as b
				          from pg_statio_user_tables where schemaname = 'pgque') s")
			printf '%-14s %4s %14s %14s %12s\n' "$q" "$n" \
				"$(awk -v b="$blks" -v e="$events" 'BEGIN {printf "%.3f", b / e}')" \
				"$(awk -v b="$ev_blks" -v e="$events" 'BEGIN {printf "%.3f", b / e}')" "$got"
			echo "partition_buffers_per_event,$q N=$n,1,$(awk -v b="$blks" -v e="$events" 'BEGIN {printf "%.3f", b / e}'),$(awk -v b="$ev_blks" -v e="$events" 'BEGIN {printf "%.3f", b / e}')" >> "$RESULTS"
		done
	done

	echo "-- consumer throughput: 16 slot workers in parallel vs one plain consumer"
	for q in pk_bucketed pk_filtered; do
		t0=$(date +%s.%N)
		"${PSQL[@]}" -c "call bench_drain_plain('$q', 'plain')" >/dev/null
		t1=$(date +%s.%N)
		eps=$(awk -v n="$events" -v a="$t0" -v b="$t1" 'BEGIN {printf "%.0f", n / (b - a)}')
		printf '%-34s %-22s %2s client  %10s ev/s\n' partition_throughput "$q plain" 1 "$eps"
		echo "partition_throughput,$q plain,1,$eps," >> "$RESULTS"

		t0=$(date +%s.%N)
		for s in $(seq 0 15); do
			"${PSQL[@]}" -c "call bench_drain_slots('$q', 'tp16', 16, $s, $s)" >/dev/null &
		done
		wait
		t1=$(date +%s.%N)
		eps=$(awk -v n="$events" -v a="$t0" -v b="$t1" 'BEGIN {printf "%.0f", n / (b - a)}')
		printf '%-34s %-22s %2s clients %10s ev/s\n' partition_throughput "$q 16 slot workers" 16 "$eps"
		echo "partition_throughput,$q N=16,16,$eps," >> "$RESULTS"
	done
}
