# Workload 5, sustained mixed load (sourced by benchmark/run.sh, which
# defines PSQL, WORK, PORT, RESULTS, QUICK, as_pg and workers_on/off).
#
# The background workers run (ticker, maintenance, watchdog).  Two producer
# clients send keyed events at a fixed rate (issue #30: 20,000 a second, in
# batches of 10) to a queue whose rotation period is short enough to rotate
# several times; N = 8 slot workers consume; the worker of slot 3 stops for
# a while and comes back.  Every few seconds: the largest consumer lag, the
# same for the seven slots that never stopped (the "healthy" lag of the
# target), the events pending, the current child table, dead tuples and
# size of the event tables, open alerts, and slot 3's lag.  At the end: the
# rate reached, the alerts raised, with when they opened and cleared, and
# how long slot 3 took after its restart to be back within 2 s (the target
# allows CATCH_UP seconds: sustained_workload's 8th argument, by default
# all the run has left after the restart).

# CPU ticks so far of every process of the server (the postmaster's
# children) and of pgbench, one "pid ticks" a line, into $1
sus_cpu_snap() {
	local pm p
	pm=$(head -1 "$WORK/data/postmaster.pid")
	for p in $pm $(ps -o pid= --ppid "$pm") $(cat "$WORK/sus_pgbench_pid" 2>/dev/null); do
		[ -r "/proc/$p/stat" ] && awk -v p="$p" '{sub(/^.*\) /, ""); print p, $12 + $13}' "/proc/$p/stat" 2>/dev/null
	done > "$1" || true
}

sustained_workload() {
	local secs=$1 stop_at=$2 stop_for=$3 rate=$4 every=$5 rotation=$6 per=${7:-1} catch_up=${8:-$(($1 - $2 - $3))} t0 t start pids=() s i
	"${PSQL[@]}" >/dev/null <<SQL
select pgque.create_queue('sus');
select pgque.set_queue_config('sus', 'rotation_period', '$rotation');
select pgque.subscribe_slot('sus', 'w', s, 8) from generate_series(0, 7) s;

create procedure sus_worker(slot int, secs float8)
language plpgsql as \$\$
declare
    t_end timestamptz := clock_timestamp() + secs * interval '1 second';
    w text := 'worker-' || slot;
    k int;
    claimed timestamptz;
begin
    loop
        exit when clock_timestamp() > t_end;
        -- receive and ack renew the lease; a worker claims when it starts
        -- (and, as a safety net, every 10 s), not before every receive:
        -- a warm claim took a third of a receive and ack's time (ADR 0088)
        if claimed is null or clock_timestamp() > claimed + interval '10 seconds' then
            perform pgque.claim_slot('sus', 'w', slot, w, '30 seconds');
            claimed := clock_timestamp();
        end if;
        select count(*) into k from pgque.receive_partitioned('sus', 'w', slot, 8, w, 500);
        if k > 0 then
            perform pgque.ack_partitioned('sus', 'w', slot, 8, w);
        end if;
        commit;
        if k = 0 then
            perform pg_sleep(0.01);
        end if;
    end loop;
    perform pgque.release_slot('sus', 'w', slot, w);
end \$\$;
SQL
	# the workers on; the watchdog's thresholds scaled to a short run
	workers_on watchdog "watchdog_interval=$((every < 10 ? 1 : 10))s" \
		"slot_unpolled_after=$((stop_for / 3))s" "slot_stale_after=$((stop_for / 3))s" >/dev/null
	t0=$("${PSQL[@]}" -c "select now()")

	for s in 0 1 2 3 4 5 6 7; do
		if [ "$s" = 3 ]; then
			"${PSQL[@]}" -c "call sus_worker($s, $stop_at)" >/dev/null &
		else
			"${PSQL[@]}" -c "call sus_worker($s, $secs)" >/dev/null &
		fi
		pids+=($!)
	done
	# PER events per transaction, each with its own zipfian key
	{
		for i in $(seq 1 "$per"); do echo "\\set k$i random_zipfian(1, 2000, 1.1)"; done
		if [ "$per" = 1 ]; then
			echo "select pgque.send('sus', 'default', 'payload-abcdefghij', 'tenant-' || :k1);"
		else
			echo "select pgque.send_batch('sus', 'default', array_fill('payload-abcdefghij'::text, array[$per]), array[$(for i in $(seq 1 "$per"); do printf "'tenant-' || :k%s%s" "$i" "$([ "$i" = "$per" ] || echo ', ')"; done)]);"
		fi
	} | as_pg tee "$WORK/sus.sql" >/dev/null
	as_pg env PATH="$PGBIN:$PATH" pgbench -n -M prepared -h "$WORK" -p "$PORT" -c 2 -j 2 -T "$secs" --rate="$((rate / per))" \
		-f "$WORK/sus.sql" "$BENCH_DB" >"$WORK/sus_pgbench.log" 2>&1 &
	pids+=($!)
	sleep 0.5
	# this run's pgbench (other pgbench processes may share the machine)
	pgrep -f "^pgbench .*$WORK/sus.sql" | head -1 | as_pg tee "$WORK/sus_pgbench_pid" >/dev/null || true

	echo "t_s,max_lag_s,pending_events,cur_table,dead_tuples,event_bytes,alerts_open,healthy_lag_s,stopped_slot_lag_s" > "$WORK/sustained.csv"
	printf '%6s %10s %10s %6s %6s %12s %7s %10s %10s\n' t max_lag_s pending table dead event_bytes alerts healthy_lag slot3_lag
	start=$(date +%s)
	while :; do
		t=$(($(date +%s) - start))
		[ "$t" -gt "$secs" ] && break
		if [ "$t" -ge "$((stop_at + stop_for))" ] && [ ! -f "$WORK/sus_restarted" ]; then
			"${PSQL[@]}" -c "call sus_worker(3, $((secs - t)))" >/dev/null &
			pids+=($!)
			touch "$WORK/sus_restarted"
		fi
		# where the cores go: CPU of each process from the first sample to
		# the last before the end, by role (below)
		[ "$t" -ge 2 ] && [ ! -f "$WORK/sus_cpu0" ] && { sus_cpu_snap "$WORK/sus_cpu0"; date +%s.%N > "$WORK/sus_cpu0_t"; }
		if [ "$t" -le "$((secs - every - 2))" ] || [ ! -f "$WORK/sus_cpu1" ]; then
			sus_cpu_snap "$WORK/sus_cpu1"; date +%s.%N > "$WORK/sus_cpu1_t"
			"${PSQL[@]}" -F ' ' -c "
				select pid, case when backend_type <> 'client backend' then replace(backend_type, ' ', '_')
				                 when query like 'call sus_worker(%' then 'slot_workers'
				                 when query like '%pgque.send%' then 'producer_backends'
				                 else 'other_backends' end
				  from pg_stat_activity" >> "$WORK/sus_roles"
		fi
		"${PSQL[@]}" -F ',' -c "
			with m as materialized (
			    -- one pass of pgque.metrics() per sample: it reads every
			    -- queue and consumer, a second or two under this load
			    select metric, labels->>'consumer' as consumer, value from pgque.metrics()
			     where metric in ('pgque_consumer_lag_seconds', 'pgque_consumer_pending_events')
			       and labels->>'queue' = 'sus')
			select $t,
			       coalesce((select round(max(value)::numeric, 1) from m
			                  where metric = 'pgque_consumer_lag_seconds'), 0),
			       coalesce((select sum(value)::bigint from m
			                  where metric = 'pgque_consumer_pending_events'), 0),
			       (select queue_cur_table from pgque.queue where queue_name = 'sus'),
			       (select coalesce(sum(n_dead_tup), 0) from pg_stat_user_tables
			         where schemaname = 'pgque' and relname like 'event\_' || (select queue_id from pgque.queue where queue_name = 'sus') || '\_%'),
			       (select sum(pg_total_relation_size(c.oid)) from pg_class c
			         where c.relnamespace = 'pgque'::regnamespace and c.relkind = 'r'
			           and c.relname like 'event\_' || (select queue_id from pgque.queue where queue_name = 'sus') || '\_%'),
			       (select count(*) from pgque.alert where cleared_at is null),
			       coalesce((select round(max(value)::numeric, 1) from m
			                  where metric = 'pgque_consumer_lag_seconds' and consumer <> 'w#3/8'), 0),
			       coalesce((select round(max(value)::numeric, 1) from m
			                  where metric = 'pgque_consumer_lag_seconds' and consumer = 'w#3/8'), 0)" | tee -a "$WORK/sustained.csv" |
			awk -F, '{printf "%6s %10s %10s %6s %6s %12s %7s %10s %10s\n", $1, $2, $3, $4, $5, $6, $7, $8, $9}'
		sleep "$every"
	done
	wait "${pids[@]}" 2>/dev/null || true

	echo "-- where the cores went from ${every} s into the run to its last samples (CPU seconds; % of the 2 cores)"
	# a pid's role: the last one the samples saw (pgbench and the
	# postmaster's own are known by pid)
	awk -v pgb="$(cat "$WORK/sus_pgbench_pid")" -v pm="$(head -1 "$WORK/data/postmaster.pid")" \
		-v dt="$(awk -v a="$(cat "$WORK/sus_cpu0_t")" -v b="$(cat "$WORK/sus_cpu1_t")" 'BEGIN {print b - a}')" \
		-v hz="$(getconf CLK_TCK)" -v ncpu="$(nproc)" -v res="$RESULTS" '
		FILENAME ~ /sus_roles$/ {role[$1] = $2; next}
		FILENAME ~ /sus_cpu0$/ {t0[$1] = $2; next}
		{ r = ($1 == pgb) ? "pgbench_clients" : ($1 == pm) ? "postmaster" : ($1 in role) ? role[$1] : "other_processes"
		  c[r] += ($2 - ($1 in t0 ? t0[$1] : 0)) / hz; tot += ($2 - ($1 in t0 ? t0[$1] : 0)) / hz }
		END { for (r in c) printf "   %-28s %8.1f s %6.1f%%\n", r, c[r], 100 * c[r] / (dt * ncpu) | "sort -k2 -n -r";
		      close("sort -k2 -n -r");
		      printf "   %-28s %8.1f s %6.1f%% (of %.0f s x %d cores)\n", "all of them", tot, 100 * tot / (dt * ncpu), dt, ncpu;
		      for (r in c) print "sustained_cpu_share," r ",8," c[r] / (dt * ncpu) "," >> res }' \
		"$WORK/sus_roles" "$WORK/sus_cpu0" "$WORK/sus_cpu1"
	echo "-- alerts raised during the run (seconds from its start)"
	"${PSQL[@]}" -F ' ' -c "
		select kind, subject, round(extract(epoch from opened_at - '$t0'::timestamptz)::numeric, 1),
		       coalesce(round(extract(epoch from cleared_at - '$t0'::timestamptz)::numeric, 1)::text, 'open')
		  from pgque.alert where opened_at >= '$t0'::timestamptz order by opened_at" |
		awk '{printf "   %-18s %-22s opened %7s s  cleared %7s s\n", $1, $2, $3, $4; print "sustained_alert," $1 " " $2 ",1," $3 "," $4 >> "'"$RESULTS"'"}'
	awk -F, 'NR > 1 {if ($2 > lag) lag = $2; if ($8 > hl) hl = $8; if ($5 > dead) dead = $5; if (NR > 2 && $4 != prev) rot++; prev = $4}
		END {printf "   max lag %s s (healthy slots %s s), rotations seen %d, dead tuples in event tables at most %d\n", lag, hl + 0, rot, dead;
		     print "sustained_max_lag_s,pgque,8," lag "," >> "'"$RESULTS"'";
		     print "sustained_max_lag_healthy_s,pgque,8," hl + 0 "," >> "'"$RESULTS"'";
		     print "sustained_rotations,pgque,8," rot "," >> "'"$RESULTS"'";
		     print "sustained_max_dead_tuples,pgque,8," dead "," >> "'"$RESULTS"'"}' "$WORK/sustained.csv"
	# slot 3 caught up: the first sample after its restart with its lag
	# within 2 s (no row when it never was: the target says not met)
	awk -F, -v back=$((stop_at + stop_for)) -v res="$RESULTS" \
		'NR > 1 && $1 >= back && $9 <= 2 && !done {done = 1; printf "   stopped slot back within 2 s of lag %s s after its restart\n", $1 - back;
		  print "sustained_catch_up_s,pgque,8," $1 - back "," >> res}
		 END {if (!done) print "   stopped slot not back within 2 s of lag by the end of the run"}' "$WORK/sustained.csv"
	echo "sustained_catch_up_allowed_s,pgque,8,$catch_up," >> "$RESULTS"
	grep -E "^tps|number of transactions actually" "$WORK/sus_pgbench.log" | sed 's/^/   producer: /'
	echo "sustained_rate,pgque,8,$(awk -v per="$per" '/^tps/ {printf "%.0f", $3 * per}' "$WORK/sus_pgbench.log")," >> "$RESULTS"
	echo "sustained_rate_asked,pgque,8,$rate," >> "$RESULTS"

	workers_off watchdog_interval slot_unpolled_after slot_stale_after
}
