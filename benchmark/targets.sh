# The targets of issues #15 and #30, read from this run's results (sourced by
# benchmark/run.sh, which defines RESULTS and WORK).  Each target is
# reported met, not met, or not run (its workload was left out by ONLY), with
# the figures it was read from; the table also goes to
# benchmark/results/<stamp>-targets.md for docs/benchmarks.md.

# result WORKLOAD SYSTEM CLIENTS: the figure (column 4) of that row, the
# mean when a workload ran it in rounds (proxy.sh), or empty
result() {
	awk -F, -v w="$1" -v s="$2" -v c="$3" '$1 == w && $2 == s && $3 == c && $4 != "" {t += $4; n++; one = $4}
		END {if (n == 1) print one; else if (n) printf (t / n >= 100 ? "%.0f\n" : "%.3f\n"), t / n; else print ""}' "$RESULTS"
}

# target_row ISSUE WHAT TARGET MEASURED VERDICT: one line of the report
target_row() {
	printf '%-7s %-66s %-16s %-34s %s\n' "$1" "$2" "$3" "$4" "$5"
	echo "| $1 | $2 | $3 | $4 | $5 |" >> "$WORK/targets.md"
}

# ratio_target ISSUE WHAT MIN NUM_ROW DEN_ROW: NUM / DEN >= MIN (a row is
# "workload|system|clients"); with MIN written "<=X", NUM / DEN <= X
ratio_target() {
	local issue=$1 what=$2 min=$3 a b op=">="
	if [[ $min == "<="* ]]; then op="<="; min=${min#<=}; fi
	IFS='|' read -r -a n <<<"$4"
	IFS='|' read -r -a d <<<"$5"
	a=$(result "${n[0]}" "${n[1]}" "${n[2]}")
	b=$(result "${d[0]}" "${d[1]}" "${d[2]}")
	if [ -z "$a" ] || [ -z "$b" ]; then
		target_row "$issue" "$what" "$op ${min}x" "" "not run"
		return
	fi
	awk -v a="$a" -v b="$b" -v m="$min" -v op="$op" 'BEGIN {r = (b != 0 ? a / b : 0); ok = (op == ">=" ? r >= m : (b != 0 && r <= m));
		printf "%.2fx (%s / %s)|%s\n", r, a, b, (ok ? "met" : "not met")}' |
		{ IFS='|' read -r fig verdict; target_row "$issue" "$what" "$op ${min}x" "$fig" "$verdict"; }
}

# max_target ISSUE WHAT MAX ROW UNIT [RAN_ROW]: the figure <= MAX; without
# the figure the target is not run, or not met when RAN_ROW (a row the
# workload always writes) shows that it ran
max_target() {
	local issue=$1 what=$2 max=$3 unit=$5 v
	IFS='|' read -r -a r <<<"$4"
	v=$(result "${r[0]}" "${r[1]}" "${r[2]}")
	if [ -z "$v" ]; then
		local ran=""
		if [ -n "${6:-}" ]; then IFS='|' read -r -a q <<<"$6"; ran=$(result "${q[0]}" "${q[1]}" "${q[2]}"); fi
		target_row "$issue" "$what" "<= $max $unit" "" "$([ -n "$ran" ] && echo "not met" || echo "not run")"
		return
	fi
	target_row "$issue" "$what" "<= $max $unit" "$v $unit" "$(awk -v v="$v" -v m="$max" 'BEGIN {print (v <= m ? "met" : "not met")}')"
}

# min_target ISSUE WHAT MIN ROW UNIT: the figure >= MIN
min_target() {
	local issue=$1 what=$2 min=$3 unit=$5 v
	IFS='|' read -r -a r <<<"$4"
	v=$(result "${r[0]}" "${r[1]}" "${r[2]}")
	if [ -z "$v" ]; then
		target_row "$issue" "$what" ">= $min $unit" "" "not run"
		return
	fi
	target_row "$issue" "$what" ">= $min $unit" "$v $unit" "$(awk -v v="$v" -v m="$min" 'BEGIN {print (v >= m ? "met" : "not met")}')"
}

targets_report() {
	echo "| issue | target | goal | measured | |" > "$WORK/targets.md"
	echo "|---|---|---|---|---|" >> "$WORK/targets.md"
	printf '%-7s %-66s %-16s %-34s %s\n' issue target goal measured ""
	local c
	# producers
	for c in 1 2; do
		ratio_target "#15" "send, 1 event/txn, $c client(s), vs plain INSERT" 0.8 \
			"produce_1|pgque send|$c" "produce_1|plain INSERT|$c"
		ratio_target "#30" "send, 1 event/txn, $c client(s), vs unindexed INSERT" 0.95 \
			"produce_1|pgque send|$c" "produce_1|plain INSERT|$c"
		ratio_target "#15" "keyed send vs unkeyed, $c client(s)" 0.9 \
			"produce_1|pgque send keyed|$c" "produce_1|pgque send|$c"
	done
	ratio_target "#15" "send_batch of 100 vs multi-row INSERT" 0.8 \
		"produce_100|pgque send_batch|1" "produce_100|plain multi-row INSERT|1"
	ratio_target "#30" "send_batch of 100 vs multi-row INSERT" 0.9 \
		"produce_100|pgque send_batch|1" "produce_100|plain multi-row INSERT|1"
	# consumers
	# against PgQ like with like: a tick window a batch on both sides, as
	# many commits (ADR 0116; the row of 1,000 a batch is make bench's
	# table, and the 32-bucket target's)
	ratio_target "#15" "drain of the backlog, one consumer, vs PgQ, a window a batch" 1.5 \
		"drain|pgque receive/ack per window|1" "drain|PgQ next/get/finish|1"
	ratio_target "#30" "drain of the backlog, one consumer, vs PgQ, a window a batch" 2 \
		"drain|pgque receive/ack per window|1" "drain|PgQ next/get/finish|1"
	ratio_target "#15/#30" "plain consumer of a 32-bucket queue vs unbucketed" 0.95 \
		"drain|pgque receive/ack 32 buckets|1" "drain|pgque receive/ack|1"
	ratio_target "#15" "16 slot workers vs one plain consumer, same queue" 1.3 \
		"partition_throughput|pk_bucketed N=16|16" "partition_throughput|pk_bucketed plain|1"
	ratio_target "#30" "16 slot workers vs one plain consumer, same queue" 1.6 \
		"partition_throughput|pk_bucketed N=16|16" "partition_throughput|pk_bucketed plain|1"
	# not a target: the most any N workers can do against one session on
	# this machine's cores (partition.sh, ADR 0104), read beside the two above
	local cap
	cap=$(result partition_capacity "2 sessions" 2)
	target_row "#30" "  the cores' ceiling for it: 2 sessions at once vs one session" "(the machine)" \
		"${cap:+${cap}x}" "$([ -n "$cap" ] && echo "measured" || echo "not run")"
	ratio_target "#30" "buffers per event, N = 32 slots vs N = 1" "<=1.2" \
		"partition_buffers_per_event|pk_bucketed N=32|1" "partition_buffers_per_event|pk_bucketed N=1|1"
	# latency and idle
	max_target "#30" "latency p50, 100 ev/s" 2 "latency_p50_ms|pgque 100/s|1" ms
	max_target "#30" "latency p99, 100 ev/s" 5 "latency_p99_ms|pgque 100/s|1" ms
	max_target "#15" "latency p50, 100 ev/s, beside 100 idle queues + 1,000 slots" 5 "latency_p50_ms|pgque 100/s idle|1" ms
	max_target "#15" "latency p99, the same" 20 "latency_p99_ms|pgque 100/s idle|1" ms
	max_target "#15" "idle: all workers' CPU with 1,000 idle queues" 1 "idle_cpu_pct|pgque workers|1000" "% of a core"
	max_target "#15" "idle: ticks per idle queue in the measured time" "$(result idle_ticks_allowed pgque 1000)" \
		"idle_ticks_per_queue_max|pgque|1000" ticks
	# scale-out
	ratio_target "#30" "keyed send through the proxy (S = 1) vs on the shard" 0.6 \
		"proxy_send_1|send via proxy S=1|1" "proxy_send_1|send on a shard|1"
	ratio_target "#30" "keyed send_batch of 100 through the proxy (S = 1) vs on the shard" 0.5 \
		"proxy_send_100|send_batch via proxy S=1|1" "proxy_send_100|send_batch on a shard|1"
	# sustained
	ratio_target "#15/#30" "sustained: keyed events/s reached vs $(result sustained_rate_asked pgque 8) asked" 0.99 \
		"sustained_rate|pgque|8" "sustained_rate_asked|pgque|8"
	min_target "#15" "sustained: keyed events/s reached" 5000 "sustained_rate|pgque|8" "ev/s"
	min_target "#30" "sustained: keyed events/s reached, batches of 10" 20000 "sustained_rate|pgque|8" "ev/s"
	max_target "#15/#30" "sustained: largest lag of the healthy slots" 2 "sustained_max_lag_healthy_s|pgque|8" s
	max_target "#30" "sustained: the stopped slot back within 2 s of lag after" \
		"$(result sustained_catch_up_allowed_s pgque 8)" "sustained_catch_up_s|pgque|8" s "sustained_rate|pgque|8"
}
