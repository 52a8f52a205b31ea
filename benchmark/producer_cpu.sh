#!/usr/bin/env bash
# benchmark/producer_cpu.sh [TXNS] [ROUNDS]: the server's CPU per event of
# the single-event producers, as pgbench drives them (-M prepared, one
# client), beside their wall-clock rate.  At one client every system's
# transaction is mostly the round trip (65-105 us here, 15-20 us of it the
# server's work), so the rates of make bench and make bench-outside swing
# from round to round (ADR 0140); the backend's CPU does not wait on the
# client.  Each run is TXNS transactions (100,000) of one system on its own
# connection; when it ends, its backend has exited and the postmaster has
# reaped it: the backend's user and system time is in the postmaster's
# cutime and cstime (/proc/PID/stat, 1/100 s), read before and after.
# autovacuum off (its workers would be reaped there too); the systems
# alternate, ROUNDS (3) rounds; the report gives each round's figures and
# the medians.  PIN=same / PIN=apart: pgbench and the server's backends on
# one vCPU / on two (a single-client round runs in one of these two modes,
# 3-6x apart in rate: ADR 0140).  Uses the server of PGBIN with pgque_bgw installed
# (PGQUE_BENCH_NO_INSTALL=1: as it is).
set -euo pipefail
cd "$(dirname "$0")/.."
. benchmark/lib.sh
TXNS=${1:-100000}
ROUNDS=${2:-3}
[[ $TXNS =~ ^[1-9][0-9]*$ && $ROUNDS =~ ^[1-9][0-9]*$ ]] || { echo "usage: $0 [TXNS] [ROUNDS]" >&2; exit 2; }
bench_install
bench_server pcpu 56705 "autovacuum = off"
"${PSQL[@]}" >/dev/null <<'SQL'
create extension pgque_bgw;
select pgque.create_queue('b');
create table plain (id bigserial, t timestamptz default now(), typ text, data text);
SQL
declare -A S=(
	[insert]="insert into plain (typ, data) values ('default', 'payload-abcdefghij');"
	[send]="select pgque.send('b', 'payload-abcdefghij');"
)
pm=$(head -1 "$WORK/data/postmaster.pid")
# PIN=same: the server's new backends and pgbench on vCPU 0; PIN=apart:
# the backends on vCPU 0, pgbench on vCPU 1 (default: where the scheduler
# puts them)
client=()
case ${PIN:-} in
same) taskset -p -c 0 "$pm" >/dev/null; client=(taskset -c 0) ;;
apart) taskset -p -c 0 "$pm" >/dev/null; client=(taskset -c 1) ;;
'') ;;
*) echo "$0: PIN=$PIN: same, apart or unset" >&2; exit 2 ;;
esac
# reaped: the postmaster's children's CPU, in 1/100 s (cutime + cstime)
reaped() { awk '{print $16 + $17}' "/proc/$pm/stat"; }
out=$WORK/cpu.csv
: >"$out"
for r in $(seq 1 "$ROUNDS"); do
	order="insert send"
	(( r % 2 == 0 )) && order="send insert"
	for w in $order; do
		echo "${S[$w]}" | as_pg tee "$WORK/$w.sql" >/dev/null
		"${PSQL[@]}" -c checkpoint
		c0=$(reaped)
		t0=$(date +%s.%N)
		as_pg env PATH="$PGBIN:$PATH" "${client[@]}" pgbench -n -M prepared -h "$WORK" -p "$PORT" -c 1 -t "$TXNS" \
			-f "$WORK/$w.sql" postgres >/dev/null 2>&1
		t1=$(date +%s.%N)
		# the backend exits after pgbench disconnects: wait for its reaping
		for _ in $(seq 1 100); do
			[ "$("${PSQL[@]}" -c "select count(*) from pg_stat_activity where application_name = 'pgbench'")" = 0 ] && break
			sleep 0.05
		done
		sleep 0.2
		c1=$(reaped)
		# a row as make bench's rounds write theirs (workload, system,
		# clients, events/s, and the CPU in ns an event where they put
		# WAL bytes: round_medians keeps whole numbers)
		echo "producer_cpu,$w,1,$(awk -v c=$((c1 - c0)) -v n="$TXNS" -v a="$t0" -v b="$t1" \
			'BEGIN {printf "%.0f,%.0f", n / (b - a), c * 1e7 / n}')" >> "$out"
	done
done
echo "workload,system,clients,events/s,server CPU ns an event (a row a round)"
cat "$out"
# the medians of the rounds, as make bench takes them (lib.sh)
round_medians "$out" | awk -F, '{eps[$2] = $4; cpu[$2] = $5 / 1000}
	END {printf "medians: INSERT %.2f us, send %.2f us an event: send / INSERT in server CPU %.2fx (rate ratio, inverse);",
	            cpu["insert"], cpu["send"], cpu["insert"] / cpu["send"]
	     printf " rates %.0f / %.0f ev/s: %.2fx\n", eps["send"], eps["insert"], eps["send"] / eps["insert"]}'
