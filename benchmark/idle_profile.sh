#!/usr/bin/env bash
# benchmark/idle_profile.sh [SECS=30] [QUEUES=1000]: the workers' CPU with
# QUEUES idle queues (ticker_idle_period at its default), each worker's
# share from /proc/<pid>/stat over SECS, the transactions and tick rows
# meanwhile; with PERF=1, a perf profile of the ticker, maintenance and
# watchdog over the same window (perf report -i WORK/perf_<kind>.data; the
# files are kept in $PERF_DIR, default /tmp).  The queues are created, then
# a minute passes, so that their idle ticks fall as in a running server.
set -euo pipefail
cd "$(dirname "$0")/.."
. benchmark/lib.sh
SECS=${1:-30} QUEUES=${2:-1000}
# benchmark/server.conf's settings, with the workers on
bench_server idle_profile 56711 "autovacuum = off" "pgque_bgw.enabled = on" "pgque_bgw.launcher_naptime = '1s'"
P() { "${PSQL[@]}" "$@"; }
P -c "create extension pgque_bgw" >/dev/null
# 100 per transaction: each creation locks its tables until commit
for ((b = 0; b < QUEUES; b += 100)); do
	P -c "select count(pgque.create_queue('idle_' || i)) from generate_series($b + 1, least($b + 100, $QUEUES)) i" >/dev/null
done
sleep 70
kinds="ticker maintenance watchdog launcher"
pid_of() { P -c "select pid from pg_stat_activity where backend_type = 'pgque_bgw $1'"; }
declare -A pid c0
for k in $kinds; do pid[$k]=$(pid_of "$k"); c0[$k]=$(awk '{print $14 + $15}' "/proc/${pid[$k]}/stat"); done
x0=$(P -c "select xact_commit + xact_rollback from pg_stat_database where datname = 'postgres'")
k0=$(P -c "select count(*) from pgque.tick")
if [ "${PERF:-0}" = 1 ]; then
	for k in ticker maintenance watchdog; do
		perf record -q -o "${PERF_DIR:-/tmp}/perf_$k.data" -p "${pid[$k]}" -- sleep "$SECS" &
	done
	wait
else
	sleep "$SECS"
fi
x1=$(P -c "select xact_commit + xact_rollback from pg_stat_database where datname = 'postgres'")
k1=$(P -c "select count(*) from pgque.tick")
total=0
for k in $kinds; do
	c=$(( $(awk '{print $14 + $15}' "/proc/${pid[$k]}/stat") - c0[$k] ))
	total=$((total + c))
	awk -v k="$k" -v c="$c" -v s="$SECS" 'BEGIN {printf "%-12s %6.2f %% of a core\n", k, c / s}'
done
awk -v c="$total" -v s="$SECS" -v q="$QUEUES" 'BEGIN {printf "%-12s %6.2f %% of a core (%d idle queues)\n", "all", c / s, q}'
echo "transactions: $((x1 - x0)) in $SECS s, tick rows: $((k1 - k0))"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
