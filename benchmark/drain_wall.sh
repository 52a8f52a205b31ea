#!/usr/bin/env bash
# benchmark/drain_wall.sh [WINDOWS] [WINDOW] [ROUNDS]: where a drain's wall
# time goes, beside its instructions (benchmark/drain_instructions.sh).
# The backlogs of `make bench`'s drain (WINDOWS tick windows of WINDOW
# events: pgque unbucketed, pgque with 32 partition buckets over 2,000
# tenants, PgQ 3 when installed), on a server with `make bench`'s settings;
# each round starts from the same copy of the data directory and drains the
# three one after the other, in an order that turns round by round.  Per
# drain: the wall time of the DO block (psql's \timing), its backend's
# counters from /proc (user + system CPU time, minor page faults, context
# switches), so the wall time splits into the backend's CPU and the time it
# waited (perf counts nothing in this VM: no cycles, no IPC), and how many
# autovacuum and autoanalyze runs ended during it.  AUTOVACUUM=on runs as
# `make bench` does: autovacuum on, no checkpoint after the backlog, the
# drains at once (the default turns it off and checkpoints).  Uses the
# server of PGBIN, with pgque_bgw installed there.
set -euo pipefail
cd "$(dirname "$0")/.."
. benchmark/lib.sh
WINDOWS=${1:-50}
WINDOW=${2:-10000}
DRAIN_WINDOW=$WINDOW	# pgque_window: receive hands out a whole window (benchmark/lib.sh)
ROUNDS=${3:-3}
# benchmark/server.conf's settings; autovacuum off unless AUTOVACUUM=on
bench_server drain_wall 56703 "autovacuum = ${AUTOVACUUM:-off}"
drain_backlog "$WINDOWS" "$WINDOW"
systems=("${DRAIN_SYSTEMS[@]}")
[ "${AUTOVACUUM:-off}" = on ] || "${PSQL[@]}" -c "checkpoint" >/dev/null
bench_snapshot

# the backend's counters: "utime stime (clock ticks) minor_faults autovacuums voluntary nonvoluntary switches"
COUNTERS="select pg_catalog.split_part(pg_catalog.split_part(pg_read_file('/proc/self/stat'), ') ', 2), ' ', 12)
       || ' ' || pg_catalog.split_part(pg_catalog.split_part(pg_read_file('/proc/self/stat'), ') ', 2), ' ', 13)
       || ' ' || pg_catalog.split_part(pg_catalog.split_part(pg_read_file('/proc/self/stat'), ') ', 2), ' ', 8)
       || ' ' || (select sum(autovacuum_count + autoanalyze_count) from pg_catalog.pg_stat_all_tables)
       || ' ' || (select string_agg(pg_catalog.split_part(l, ':', 2), ' ') from pg_catalog.regexp_split_to_table(pg_read_file('/proc/self/status'), '\n') l
                   where l like '%ctxt_switches%')"

# one drain: "wall_ms cpu_ms minor_faults context_switches autovacuums" (its backend's, from /proc)
measure() {
	local sys=$1 out
	out=$("${PSQL[@]}" -A -t <<SQL
$COUNTERS;
\timing on
$(drain_do "$sys")
\timing off
$COUNTERS;
SQL
)
	echo "$out" | awk -v hz="$(getconf CLK_TCK)" '
		/^Time:/ {wall = $2; next}
		NF == 6 && !seen {u = $1; s = $2; f = $3; a = $4; c = $5 + $6; seen = 1; next}
		NF == 6 {cpu = ($1 - u + $2 - s) * 1000 / hz; print wall, cpu, $3 - f, $5 + $6 - c, $4 - a}'
}

echo "drain of $WINDOWS windows of $WINDOW events; load average: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-6s %-18s %10s %10s %8s %10s %8s %8s %6s\n' round system "wall ms" "cpu ms" "cpu %" "ev/s" faults "ctx sw" "av"
for r in $(seq 1 "$ROUNDS"); do
	bench_restore
	as_pg pg_ctl -D "$WORK/data" -l "$WORK/log" -w start >/dev/null
	n=${#systems[@]}
	for i in $(seq 0 $((n - 1))); do
		sys=${systems[$(((i + r - 1) % n))]}
		read -r wall cpu pf cs av < <(measure "$sys")
		awk -v r="$r" -v s="$sys" -v w="$wall" -v c="$cpu" -v p="$pf" -v x="$cs" -v a="$av" -v e="$((WINDOWS * WINDOW))" \
			'BEGIN {printf "%-6s %-18s %10.0f %10.0f %7.0f%% %10.0f %8s %8s %6s\n", r, s, w, c, 100 * c / w, e / (w / 1000), p, x, a}'
	done
	stop_cluster "$WORK"
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
