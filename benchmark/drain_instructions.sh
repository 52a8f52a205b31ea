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
set -euo pipefail
cd "$(dirname "$0")/.."
. benchmark/lib.sh
WINDOWS=${1:-12}
WINDOW=${2:-10000}
WARM=$((2 * WINDOW))
ALL=$((WINDOWS * WINDOW))
# benchmark/server.conf's settings; autovacuum off: the counts repeat
bench_server drain_instr 56702 "autovacuum = off"
drain_backlog "$WINDOWS" "$WINDOW"
systems=("${DRAIN_SYSTEMS[@]}")
"${PSQL[@]}" -c "checkpoint" >/dev/null
bench_snapshot

# instructions of a single-user session draining up to $2 events of system
# $1, from the clean copy; kept as $3.cg (full drain) or $3.warm.cg
count() {
	bench_restore
	drain_do "$1" "$2" | bench_callgrind "$3$([ "$2" = "$ALL" ] || echo .warm)"
}
printf '%-32s %14s\n' "drain ($WINDOWS windows of $WINDOW)" "instr/event"
for sys in "${systems[@]}"; do
	warm=$(count "$sys" "$WARM" "$sys")
	all=$(count "$sys" "$ALL" "$sys")
	awk -v a="$warm" -v b="$all" -v n="$((ALL - WARM))" -v w="$sys" \
		'BEGIN {printf "%-32s %14.0f\n", w, (b - a) / n}'
done
