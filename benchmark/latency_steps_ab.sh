#!/usr/bin/env bash
# benchmark/latency_steps_ab.sh OLD_TREE NEW_TREE [ROUNDS=3] [SECS=10]: the
# per-step latency (benchmark/latency_steps.sh) of two source trees,
# alternated round by round so that both meet the same load: each round
# installs OLD_TREE's build into PG_CONFIG's server and runs the steps
# plain and beside 100 idle queues and 1,000 slots (STEPS_IDLE=1), then
# the same for NEW_TREE; NEW_TREE's build stays installed at the end.
# Each tree must have been built (make) with the same PG_CONFIG.
# PGQUE_BENCH_PORT as latency_steps.sh (default 56710).
set -euo pipefail
cd "$(dirname "$0")/.."
# PG_CONFIG found as every bench script finds it (TAP 109)
. benchmark/lib.sh
OLD=$1 NEW=$2 ROUNDS=${3:-3} SECS=${4:-10}
for r in $(seq 1 "$ROUNDS"); do
	for tree in "$OLD" "$NEW"; do
		make -s -C "$tree" install PG_CONFIG="$PG_CONFIG" >/dev/null
		for idle in 0 1; do
			echo "== round $r tree $tree idle=$idle $(date -u +%T)"
			STEPS_IDLE=$idle PGQUE_BENCH_NO_INSTALL=1 benchmark/latency_steps.sh "$SECS" | sed -n '/^load average/,$p'
		done
	done
done
