#!/usr/bin/env bash
# benchmark/drain_instructions.sh [WINDOWS] [WINDOW]: instructions per event
# of a consumer's drain, counted by valgrind's callgrind on a single-user
# backend, so a loaded machine gives the same figures as a quiet one.
# Backlogs of WINDOWS tick windows of WINDOW events each (default 12 of
# 10,000, as `make bench`'s drain): pgque unbucketed, pgque with 32
# partition buckets (keys over 2,000 tenants), and PgQ 3 when installed
# (postgresql-15-pgq3, its files copied into PGBIN's tree).  Each system is
# counted twice from the same copy of the data directory: draining the first
# two windows (warm-up: planning, caches), and draining every window; the
# difference over the events of the later windows is the warm per-event
# cost (receive(1000) + ack, one transaction per part; PgQ: next_batch +
# get_batch_events + finish_batch per window, as `make bench`).  Uses the
# server of PGBIN, with pgque_bgw installed there.  CALLGRIND_KEEP=dir keeps
# the callgrind files for callgrind_annotate: NAME.cg of the full drains,
# NAME.warm.cg of the warm-ups (a function's warm cost per event is the
# difference of its inclusive counts over the later windows' events).
# XIP=1 holds a transaction with an xid open in another session while the
# backlog is produced (bench_hold_xid), as `make bench`'s three concurrent
# producers do: every window's old tick then lists a transaction in
# progress, and each relation of the read is a BitmapOr of the ev_txid
# range and `= any(xip)` (ADR 0093).  XIP=2 is make bench's case itself:
# every tick lists a transaction in progress that commits before the next
# tick and writes nothing to these queues (drain_xip_window, ADR 0106);
# XIP=1's rolls back after the backlog.  TOOL=cpu ROUNDS=n (default 5): no
# valgrind; the same single-user drains timed (bench_cputime: the
# backend's user + system CPU time from its rusage, and its system time
# apart), ROUNDS rounds whose order of the systems turns round by round,
# ns per event of the later windows in each round (a loaded machine slows
# each instruction: read the ratios within a round, not the absolute
# figures).  TOOL=sim: callgrind with its cache and branch simulation
# (bench_callgrind's BENCH_CALLGRIND_SIM): per event of the later windows,
# instructions, first-level instruction and data cache misses, last-level
# misses and mispredicted branches (conditional + indirect): what sets an
# instruction's cost where this VM counts no cycles (ADR 0116).  Each
# system also runs as pgque_window: the unbucketed queue drained a tick
# window a batch, as PgQ is (benchmark/lib.sh; ADR 0116).
set -euo pipefail
cd "$(dirname "$0")/.."
. benchmark/lib.sh
WINDOWS=${1:-12}
WINDOW=${2:-10000}
DRAIN_WINDOW=$WINDOW	# pgque_window: receive hands out a whole window (benchmark/lib.sh)
WARM=$((2 * WINDOW))
ALL=$((WINDOWS * WINDOW))
TOOL=${TOOL:-callgrind}
ROUNDS=${ROUNDS:-5}
case $TOOL in callgrind|cpu|sim) ;; *) echo "TOOL is callgrind, cpu or sim, not $TOOL" >&2; exit 2 ;; esac
case ${XIP:-0} in 0|1|2) ;; *) echo "XIP is 0, 1 or 2, not $XIP" >&2; exit 2 ;; esac
[ "$WINDOWS" -gt 2 ] || { echo "WINDOWS must be more than the 2 of the warm-up" >&2; exit 2; }
# benchmark/server.conf's settings; autovacuum off: the counts repeat
bench_server drain_instr 56702 "autovacuum = off" "max_prepared_transactions = 4"
if [ "${XIP:-0}" = 1 ]; then bench_hold_xid; fi
DRAIN_XIP_COMMIT=$([ "${XIP:-0}" = 2 ] && echo 1 || echo 0) drain_backlog "$WINDOWS" "$WINDOW"
if [ "${XIP:-0}" = 1 ]; then bench_release_xid; fi
systems=("${DRAIN_SYSTEMS[@]}")
"${PSQL[@]}" -c "checkpoint" >/dev/null
bench_snapshot

# the cost of a single-user session draining up to $2 events of system
# $1, from the clean copy: instructions (kept as $3.cg for a full drain,
# $3.warm.cg for the warm-up), or with TOOL=cpu "USER SYSTEM" ns
count() {
	bench_restore
	if [ "$TOOL" = cpu ]; then
		drain_do "$1" "$2" | bench_cputime
	else
		drain_do "$1" "$2" | BENCH_CALLGRIND_SIM=$([ "$TOOL" = sim ] && echo 1 || echo 0) \
			bench_callgrind "$3$([ "$2" = "$ALL" ] || echo .warm)"
	fi
}
if [ "$TOOL" = sim ]; then
	printf '%-18s %9s %8s %8s %8s %10s\n' "drain ($WINDOWS x $WINDOW$([ "${XIP:-0}" != 0 ] && echo ", XIP=$XIP"))" \
		"instr/ev" "I1 miss" "D1 miss" "LL miss" "mispredict"
	for sys in "${systems[@]}"; do
		warm=$(count "$sys" "$WARM" "$sys")
		all=$(count "$sys" "$ALL" "$sys")
		# fields: Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw Bc Bcm Bi Bim
		awk -v w="$warm" -v a="$all" -v n="$((ALL - WARM))" -v s="$sys" 'BEGIN {
			split(w, x, " "); split(a, y, " "); for (i = 1; i <= 13; i++) d[i] = (y[i] - x[i]) / n
			printf "%-18s %9.0f %8.1f %8.1f %8.1f %10.1f\n", s, d[1], d[4], d[5] + d[6], d[7] + d[8] + d[9], d[11] + d[13]}'
	done
	exit 0
fi
if [ "$TOOL" = cpu ]; then
	echo "drain ($WINDOWS windows of $WINDOW$([ "${XIP:-0}" != 0 ] && echo ", XIP=$XIP")): CPU ns per event (user + system, and system), rounds in turned order; load average: $(cut -d' ' -f1-3 /proc/loadavg)"
	printf '%-6s' round; printf ' %18s' "${systems[@]}"; echo
	for r in $(seq 1 "$ROUNDS"); do
		declare -A ns=()
		n=${#systems[@]}
		for i in $(seq 0 $((n - 1))); do
			sys=${systems[$(((i + r - 1) % n))]}
			warm=$(count "$sys" "$WARM" "$sys")
			all=$(count "$sys" "$ALL" "$sys")
			ns[$sys]=$(echo "$warm $all" | awk -v n="$((ALL - WARM))" '{printf "%.0f (sys %.0f)", ($3 + $4 - $1 - $2) / n, ($4 - $2) / n}')
		done
		printf '%-6s' "$r"; for sys in "${systems[@]}"; do printf ' %18s' "${ns[$sys]}"; done; echo
		unset ns
	done
	echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
	exit 0
fi
printf '%-32s %14s\n' "drain ($WINDOWS windows of $WINDOW$([ "${XIP:-0}" != 0 ] && echo ", XIP=$XIP"))" "instr/event"
for sys in "${systems[@]}"; do
	warm=$(count "$sys" "$WARM" "$sys")
	all=$(count "$sys" "$ALL" "$sys")
	awk -v a="$warm" -v b="$all" -v n="$((ALL - WARM))" -v w="$sys" \
		'BEGIN {printf "%-32s %14.0f\n", w, (b - a) / n}'
done
