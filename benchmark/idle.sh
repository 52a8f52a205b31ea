# Workload: what idle queues cost the workers (sourced by benchmark/run.sh,
# which defines PSQL, WORK, PORT, RESULTS, QUICK, as_pg and workers_on/off;
# ONLY=idle).  Issue 15's targets:
#   - 1,000 idle queues in one database: the workers use <= 1% of one core
#     (utime + stime from /proc/<pid>/stat over IDLE_SECS: 20 s, QUICK 5 s)
#     and write no tick beyond one per ticker_idle_period per queue;
#   - end-to-end latency at defaults, 100 ev/s, with 100 idle queues and
#     1,000 slot subscriptions in the same database: p50 <= 5 ms, p99 <= 20 ms;
#   - the growth curve: ticker + watchdog CPU against 10, 100, 1,000 queues
#     (idle_cpu.dat, plotted by plot.sh).

# the pids of this database's workers whose backend_type matches $1 (a
# LIKE pattern: 'pgque_bgw %' for all, 'pgque_bgw ticker', ...)
idle_worker_pids() {
	"${PSQL[@]}" -c "select pid from pg_stat_activity
	                  where backend_type like '$1' and backend_type <> 'pgque_bgw launcher'
	                    and datname = current_database()"
}

# clock ticks (utime + stime) of the given pids
idle_ticks() {
	local p sum=0 f
	for p in "$@"; do
		[ -r "/proc/$p/stat" ] || continue
		# fields 14 and 15, after the command name in parentheses
		f=$(sed 's/^.*) //' "/proc/$p/stat")
		set -- $f
		sum=$((sum + ${12} + ${13}))
	done
	echo "$sum"
}

# idle_queues_to N: queues idle_1..idle_N exist (plus any others); 50 per
# transaction (a queue's tables take locks until its transaction ends)
idle_queues_to() {
	local from
	for ((from = 1; from <= $1; from += 50)); do
		"${PSQL[@]}" -c "select count(pgque.create_queue('idle_' || i))
		                   from generate_series($from, least($from + 49, $1)) i
		                  where not exists (select 1 from pgque.queue where queue_name = 'idle_' || i)" >/dev/null
	done
}

# idle_measure N SECS: the workers' CPU (% of one core) and the ticks written
# over SECS with N idle queues; appends to RESULTS and idle_cpu.dat
idle_measure() {
	local n=$1 secs=$2 pids tw tm tt t0 w0 m0 k0 t1 w1 m1 k1 hz pct tw_pct m_pct t_pct ticks maxq since
	idle_queues_to "$n"
	# settle: the first passes after queues are created visit each new one
	# (maintenance sets up its tables, the watchdog reads its sequences);
	# two maintenance and watchdog intervals (10 s each) in the full run
	sleep $([ "$QUICK" = 1 ] && echo 3 || echo 20)
	pids=$(idle_worker_pids 'pgque_bgw %')
	tw=$(idle_worker_pids 'pgque_bgw ticker'; idle_worker_pids 'pgque_bgw watchdog')
	tm=$(idle_worker_pids 'pgque_bgw maintenance')
	tt=$(idle_worker_pids 'pgque_bgw ticker')
	hz=$(getconf CLK_TCK)
	since=$("${PSQL[@]}" -c "select now()")
	t0=$(idle_ticks $pids); w0=$(idle_ticks $tw); m0=$(idle_ticks $tm); k0=$(idle_ticks $tt)
	sleep "$secs"
	t1=$(idle_ticks $pids); w1=$(idle_ticks $tw); m1=$(idle_ticks $tm); k1=$(idle_ticks $tt)
	pct=$(awk -v d=$((t1 - t0)) -v hz="$hz" -v s="$secs" 'BEGIN { printf "%.2f", 100 * d / hz / s }')
	tw_pct=$(awk -v d=$((w1 - w0)) -v hz="$hz" -v s="$secs" 'BEGIN { printf "%.2f", 100 * d / hz / s }')
	m_pct=$(awk -v d=$((m1 - m0)) -v hz="$hz" -v s="$secs" 'BEGIN { printf "%.2f", 100 * d / hz / s }')
	t_pct=$(awk -v d=$((k1 - k0)) -v hz="$hz" -v s="$secs" 'BEGIN { printf "%.2f", 100 * d / hz / s }')
	read -r ticks maxq <<<"$("${PSQL[@]}" -F ' ' -c "
		select count(*), coalesce(max(c), 0) from (
		  select count(*) c from pgque.tick t join pgque.queue q on q.queue_id = t.tick_queue
		   where q.queue_name like 'idle\_%' and t.tick_time > '$since' group by t.tick_queue) x")"
	printf 'idle %5d queues: workers %6s%% of one core (ticker+watchdog %s%% of which ticker %s%%, maintenance %s%%) over %ss, %s ticks (at most %s per queue; idle period 60 s)\n' \
		"$n" "$pct" "$tw_pct" "$t_pct" "$m_pct" "$secs" "$ticks" "$maxq"
	echo "idle_cpu_pct,pgque workers,$n,$pct," >> "$RESULTS"
	echo "idle_cpu_pct,pgque ticker+watchdog,$n,$tw_pct," >> "$RESULTS"
	echo "idle_cpu_pct,pgque maintenance,$n,$m_pct," >> "$RESULTS"
	echo "idle_ticks,pgque,$n,$ticks," >> "$RESULTS"
	echo "idle_ticks_per_queue_max,pgque,$n,$maxq," >> "$RESULTS"
	# one tick per idle period (60 s) per queue; a period that ends just
	# inside the measured time may add one
	echo "idle_ticks_allowed,pgque,$n,$((secs / 60 + 1))," >> "$RESULTS"
	echo "$n $pct $tw_pct $m_pct" >> "$WORK/idle_cpu.dat"
}

idle_workload() {
	local secs=$1 n
	# a database of its own: the other workloads leave queues, slots and
	# blocked keys behind that the workers of their database keep visiting
	"${PSQL[@]}" -c "create database pgque_idle" >/dev/null
	local BENCH_DB=pgque_idle
	"${PSQL[@]}" -c "create extension pgque_bgw" >/dev/null
	pgq && "${PSQL[@]}" -c "create extension pgq" >/dev/null
	: > "$WORK/idle_cpu.dat"
	workers_on ticker
	# the curve's points before 1,000 queues: IDLE_POINTS (run.sh; 100,
	# which the latency below needs: the 10-queue point was left out for
	# issue #30's time budget, ADR 0090 and 0097)
	for n in ${IDLE_POINTS:-10 100}; do
		idle_measure "$n" "$secs"
	done
	# latency: 100 idle queues and 1,000 slot subscriptions (10 partitioned
	# consumers of 100 slots), measured before the queues grow to 1,000 (it
	# dropped 900 queues afterwards, the longest step of the workload)
	workers_off
	"${PSQL[@]}" >/dev/null <<'SQL'
select pgque.create_queue('idle_keyed');
select count(pgque.subscribe_slot('idle_keyed', 'pc' || i, k, 100))
  from generate_series(1, 10) i, generate_series(0, 99) k;
SQL
	"${PSQL[@]}" -c "select to_regclass('lat') is not null" | grep -q t || latency_setup
	workers_on ticker
	latency_run pgque "100/s idle" lat "$secs" "select pgque.send('lat', 'payload-abcdefghij');" 100
	# the slots gone again: 1,000 idle queues, as issue #15 measures them
	"${PSQL[@]}" -c "select pgque.drop_queue('idle_keyed', true)" >/dev/null
	idle_measure 1000 "$secs"
	workers_off
}
