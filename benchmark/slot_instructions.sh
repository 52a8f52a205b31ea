#!/usr/bin/env bash
# benchmark/slot_instructions.sh [EVENTS]: instructions per event of N = 16
# partition slot workers' drain against one plain consumer's of the same
# queue, counted by valgrind's callgrind on a single-user backend, so a
# loaded machine gives the same figures as a quiet one (issue #30 item 3).
#
# The stream of benchmark/partition.sh: EVENTS keyed events (default
# 50,000; zipfian over 2,000 tenants, 100 per transaction, a tick every
# 1,000) in a queue with 32 partition buckets (PART=bucketed) or without
# (PART=filtered: every slot reads the whole window).  The sixteen slots
# are drained one after another in one session (receive_partitioned(1000),
# ack_partitioned, one transaction per batch): their sum is the CPU that 16
# workers spend together, the figure that decides how far they scale on
# few cores.  Each run first drains a warm-up queue of the same layout (its
# first calls plan and compile, as a long-running worker has done); a run
# of the warm-up alone is subtracted.  The ratio slots / plain is the
# per-event cost of the slot path against the plain one (16 workers reach
# 1.6x one plain consumer on 2 cores only when it is <= ~1.25).
# CALLGRIND_KEEP=dir keeps the callgrind files for callgrind_annotate (the
# warm-up's too, to subtract); PARTS=bucketed counts one layout only.
#
#   PG_CONFIG=... bash benchmark/slot_instructions.sh 50000
set -euo pipefail
cd "$(dirname "$0")/.."
. benchmark/lib.sh
EVENTS=${1:-50000}
# benchmark/server.conf's settings; autovacuum off: the counts repeat
bench_server slot_instr 56703 "autovacuum = off"
# the stream and the drains: benchmark/bench.sql (bench_produce_keyed,
# bench_drain_slots, bench_drain_plain), as make bench's partition workload
"${PSQL[@]}" -c "create extension pgque_bgw" >/dev/null
bench_sql
for part in ${PARTS:-bucketed filtered}; do
	b=32; [ $part = filtered ] && b=0
	for q in "$part" "${part}_warm"; do
		"${PSQL[@]}" >/dev/null -c "select pgque.create_queue('$q')" \
			-c "select pgque.set_queue_config('$q', 'partition_buckets', '$b')" \
			-c "select pgque.maint_rotate_tables_step2()" \
			-c "select pgque.force_tick('$q'), pgque.ticker('$q')" \
			-c "select pgque.subscribe_slot('$q', 'tp', s, 16) from generate_series(0, 15) s" \
			-c "select pgque.subscribe('$q', 'plain')"
	done
	"${PSQL[@]}" -c "call bench_produce_keyed(array['$part'], $EVENTS, 0.5)" >/dev/null
	"${PSQL[@]}" -c "call bench_produce_keyed(array['${part}_warm'], 3200, 0.5)" >/dev/null
done
"${PSQL[@]}" -c "vacuum analyze" -c "checkpoint" >/dev/null
bench_snapshot

# instructions of a single-user session running the statements on stdin,
# from the clean copy
count() {
	bench_restore
	bench_callgrind "$@"
}
printf '%-26s %14s %10s\n' "drain of $EVENTS events" "instr/event" "vs plain"
for part in ${PARTS:-bucketed filtered}; do
	# one statement a line: single-user mode runs a line as one statement
	w="call bench_drain_plain('${part}_warm', 'plain');"$'\n'"call bench_drain_slots('${part}_warm', 'tp', 16, 0, 15);"
	warm=$(echo "$w" | count "$part-warm")
	plain=$(printf '%s\n%s\n' "$w" "call bench_drain_plain('$part', 'plain');" | count "$part-plain")
	slots=$(printf '%s\n%s\n' "$w" "call bench_drain_slots('$part', 'tp', 16, 0, 15);" | count "$part-slots")
	awk -v w="$warm" -v p="$plain" -v s="$slots" -v n="$EVENTS" -v q="$part" 'BEGIN {
		printf "%-26s %14.0f\n", q " plain", (p - w) / n;
		printf "%-26s %14.0f %9.2fx\n", q " 16 slots (sum)", (s - w) / n, (s - w) / (p - w) }'
done
