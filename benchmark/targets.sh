# The targets of issue #15, read from this run's results (sourced by
# benchmark/run.sh, which defines RESULTS and WORK).  Each target is
# reported met, not met, or not run (its workload was left out by ONLY), with
# the figures it was read from; the table also goes to
# benchmark/results/<stamp>-targets.md for docs/benchmarks.md.

# result WORKLOAD SYSTEM CLIENTS: the figure (column 4) of that row, or empty
result() {
	awk -F, -v w="$1" -v s="$2" -v c="$3" '$1 == w && $2 == s && $3 == c {v = $4} END {print v}' "$RESULTS"
}

# target_row WHAT TARGET MEASURED VERDICT: one line of the report
target_row() {
	printf '%-58s %-16s %-34s %s\n' "$1" "$2" "$3" "$4"
	echo "| $1 | $2 | $3 | $4 |" >> "$WORK/targets.md"
}

# ratio_target WHAT MIN NUM_ROW DEN_ROW: NUM / DEN >= MIN (a row is
# "workload|system|clients")
ratio_target() {
	local what=$1 min=$2 a b
	IFS='|' read -r -a n <<<"$3"
	IFS='|' read -r -a d <<<"$4"
	a=$(result "${n[0]}" "${n[1]}" "${n[2]}")
	b=$(result "${d[0]}" "${d[1]}" "${d[2]}")
	if [ -z "$a" ] || [ -z "$b" ]; then
		target_row "$what" ">= ${min}x" "" "not run"
		return
	fi
	awk -v a="$a" -v b="$b" -v m="$min" 'BEGIN {r = a / b; printf "%.2fx (%s / %s)|%s\n", r, a, b, (r >= m ? "met" : "not met")}' |
		{ IFS='|' read -r fig verdict; target_row "$what" ">= ${min}x" "$fig" "$verdict"; }
}

# max_target WHAT MAX ROW UNIT: the figure <= MAX
max_target() {
	local what=$1 max=$2 v
	IFS='|' read -r -a r <<<"$3"
	v=$(result "${r[0]}" "${r[1]}" "${r[2]}")
	if [ -z "$v" ]; then
		target_row "$what" "<= $max $4" "" "not run"
		return
	fi
	target_row "$what" "<= $max $4" "$v $4" "$(awk -v v="$v" -v m="$max" 'BEGIN {print (v <= m ? "met" : "not met")}')"
}

targets_report() {
	echo "| target (issue #15) | goal | measured | |" > "$WORK/targets.md"
	echo "|---|---|---|---|" >> "$WORK/targets.md"
	printf '%-58s %-16s %-34s %s\n' target goal measured ""
	ratio_target "drain of the backlog, one consumer, vs PgQ" 1.5 \
		"drain|pgque receive/ack|1" "drain|PgQ next/get/finish|1"
	local c
	for c in 1 2; do
		ratio_target "send, 1 event/txn, $c client(s), vs plain INSERT" 0.8 \
			"produce_1|pgque send|$c" "produce_1|plain INSERT|$c"
		ratio_target "keyed send vs unkeyed, $c client(s)" 0.9 \
			"produce_1|pgque send keyed|$c" "produce_1|pgque send|$c"
	done
	ratio_target "send_batch of 100 vs multi-row INSERT" 0.8 \
		"produce_100|pgque send_batch|1" "produce_100|plain multi-row INSERT|1"
	max_target "latency p50, 100 ev/s, beside 100 idle queues + 1,000 slots" 5 "latency_p50_ms|pgque 100/s idle|1" ms
	max_target "latency p99, the same" 20 "latency_p99_ms|pgque 100/s idle|1" ms
	max_target "idle: all workers' CPU with 1,000 idle queues" 1 "idle_cpu_pct|pgque workers|1000" "% of a core"
	max_target "idle: ticks per idle queue in the measured time" "$(result idle_ticks_allowed pgque 1000)" \
		"idle_ticks_per_queue_max|pgque|1000" ticks
	ratio_target "plain consumer of a 32-bucket queue vs unbucketed" 0.95 \
		"drain|pgque receive/ack 32 buckets|1" "drain|pgque receive/ack|1"
	ratio_target "16 slot workers vs one plain consumer, same queue" 1.3 \
		"partition_throughput|pk_bucketed N=16|16" "partition_throughput|pk_bucketed plain|1"
	ratio_target "sustained: keyed events/s reached vs 5,000 asked" 0.99 \
		"sustained_rate|pgque|8" "sustained_rate_asked|pgque|8"
	max_target "sustained: largest lag of the healthy slots" 2 "sustained_max_lag_healthy_s|pgque|8" s
}
