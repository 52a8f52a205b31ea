#!/usr/bin/env bash
# benchmark/idle_statements.sh [QUEUES=1000] [K=10]: what the statements of
# the idle passes cost with QUEUES idle queues (a subscriber each, every
# queue ticked once), in CPU milliseconds of one backend per call: utime +
# stime of /proc/<pid>/stat around K calls after one warm call (ADR 0095).
# CPU time, not wall time: a loaded machine stretches it far less than the
# seconds of benchmark/idle.sh (still: alternate A and B within one run to
# compare them, as ADR 0095 did).  Workers off: the passes are called here,
# as the workers call them.  ONLY='watchdog_pass' runs that one.
set -euo pipefail
cd "$(dirname "$0")/.."
. benchmark/lib.sh
Q=${1:-1000}
K=${2:-10}
# benchmark/server.conf's settings (workers off); autovacuum and JIT off:
# the figures repeat
bench_server idle_stmts 56703 "autovacuum = off" "jit = off"
P() { "${PSQL[@]}" "$@"; }
P -c "create extension pgque_bgw" >/dev/null
# 100 per transaction: each creation locks its tables until commit
for ((b = 0; b < Q; b += 100)); do
	P -c "select count(pgque.create_queue('idle_' || i)) from generate_series($b + 1, least($b + 100, $Q)) i" >/dev/null
	P -c "select count(pgque.subscribe('idle_' || i, 'c')) from generate_series($b + 1, least($b + 100, $Q)) i" >/dev/null
done
P -c "select count(pgque.ticker(queue_name)) from pgque.queue" >/dev/null
# the last tick older than the stall lead, as most idle queues' between
# their idle ticks (the watchdog then reads their sequences)
sleep 11

declare -A S=(
	[maint_stale_roles]="select pgque._maint_stale_roles();"
	[maint_queue_steps]="select count(*) from pgque._maint_queue_steps();"
	[maint_db_steps]="select pgque.maint_rotate_tables_step2(), pgque.maint_retry_events(), pgque._coop_maint(), pgque.maint_tick_cleanup(), pgque._maint_extra(), pgque._maint_idem_batch(10000), pgque._unlogged_reset_all();"
	[watchdog_pass]="select * from pgque._watchdog_pass();"
	[ticker_seq_probe]="select count(*) from pgque._ticks_seq_moved();"
)
CPU="select (pg_catalog.split_part(pg_catalog.split_part(s, ') ', 2), ' ', 12)::int
           + pg_catalog.split_part(pg_catalog.split_part(s, ') ', 2), ' ', 13)::int)
           * 1000 / $(getconf CLK_TCK) as c
      from pg_catalog.pg_read_file('/proc/' || pg_catalog.pg_backend_pid() || '/stat') s"
# ms of CPU per call of the statement $1
per_call() {
	local c0 c1
	{
		echo "$1"
		echo "$CPU \\gset c0_"
		for ((i = 0; i < K; i++)); do echo "$1"; done
		echo "$CPU \\gset c1_"
		echo "\\echo :c0_c :c1_c"
	} > "$WORK/stmt.sql"
	chmod a+r "$WORK/stmt.sql"
	read -r c0 c1 < <(P -f "$WORK/stmt.sql" -o /dev/null)
	awk -v a="$c0" -v b="$c1" -v k="$K" 'BEGIN { printf "%.1f", (b - a) / k }'
}
printf '%-20s %12s\n' statement "CPU ms/call"
for w in maint_stale_roles maint_queue_steps maint_db_steps watchdog_pass ticker_seq_probe; do
	[[ -n ${ONLY:-} && " $ONLY " != *" $w "* ]] && continue
	printf '%-20s %12s\n' "$w" "$(per_call "${S[$w]}")"
done
