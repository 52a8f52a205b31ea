#!/usr/bin/env bash
# benchmark/idle_statements.sh [QUEUES=1000] [K=10]: what the statements of
# the idle passes cost with QUEUES idle queues (a subscriber each, every
# queue ticked once), in CPU milliseconds of one backend per call: utime +
# stime of /proc/<pid>/stat around K calls after one warm call (ADR 0095).
# CPU time, not wall time: a loaded machine stretches it far less than the
# seconds of benchmark/idle.sh (still: alternate A and B within one run to
# compare them, as ADR 0095 did).  Workers off: the passes are called here,
# as the workers call them.  ONLY='watchdog_pass' runs that one; ONLY
# may also name the parts below (ADR 0103: wd_conditions, wd_seq_reads,
# wd_holders, wd_pause, wd_observe, tk_tick64, m_reserve, ...).  SUBS=0:
# the queues without a subscriber (issue #15's shape, benchmark/idle.sh).
# TICK64=1: queues 1..64 with an idle period of 0, for tk_tick64 (then
# every queue's idle tick is overdue for the watchdog: run it alone).
# STOPPED=1: every queue's idle period 1 s, so that every queue's idle tick
# is overdue, as with the ticker stopped for longer than its idle period
# (the workers are off: no probe covers a queue; ADR 0113).
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
	[ "${SUBS:-1}" = 0 ] || P -c "select count(pgque.subscribe('idle_' || i, 'c')) from generate_series($b + 1, least($b + 100, $Q)) i" >/dev/null
done
P -c "select count(pgque.ticker(queue_name)) from pgque.queue" >/dev/null
P -c "select count(pgque._space_reserve_keep(queue_name)) from pgque.queue" >/dev/null
[ -z "${TICK64:-}" ] || P -c "update pgque.queue set queue_ticker_idle_period = '0' where queue_id <= 64" >/dev/null
[ -z "${STOPPED:-}" ] || P -c "update pgque.queue set queue_ticker_idle_period = '1s'" >/dev/null
# the last tick older than the stall lead, as most idle queues' between
# their idle ticks (the watchdog then reads their sequences)
sleep 11

declare -A S=(
	[maint_stale_roles]="select pgque._maint_stale_roles();"
	[maint_queue_steps]="select count(*) from pgque._maint_queue_steps();"
	[maint_db_steps]="select pgque.maint_rotate_tables_step2(), pgque.maint_retry_events(), pgque._coop_maint(), pgque.maint_tick_cleanup(), pgque._maint_extra(), pgque._maint_idem_batch(10000), pgque._unlogged_reset_all();"
	[watchdog_pass]="select * from pgque._watchdog_pass();"
	[ticker_seq_probe]="select count(*) from pgque._ticks_seq_moved();"
	# the parts (ADR 0103)
	[wd_conditions]="select count(*) from pgque._alert_conditions(pgque._guc_interval('pgque_bgw.slot_unpolled_after'), pgque._guc_interval('pgque_bgw.slot_stale_after'), pgque._guc_interval('pgque_bgw.lag_alert_after'), pgque._ticker_stalled_lead(), pgque._rotation_grace(), '{}');"
	[wd_seq_reads]="select count(*) from pgque.queue q where pgque._event_seq_pos(q) >= 0;"
	[wd_seq_cast]="select count(q.queue_event_seq::regclass) from pgque.queue q;"
	[wd_latest]="select count(*) from pgque.queue q join lateral (select * from pgque.tick t where t.tick_queue = q.queue_id order by t.tick_id desc limit 1) lt on true;"
	[wd_holders]="select count(*) from pgque._rotation_holders(pgque._rotation_grace());"
	[wd_pause]="select (select count(*) from pgque._pause_alert_conditions()), (select count(*) from pgque._pause_orphan_conditions());"
	[wd_skip]="select count(*) from pgque.queue q where not pgque._queue_try_share(q.queue_id);"
	[wd_observe]="select (select pg_catalog.max(tick_time) lt from pgque.tick group by tick_queue order by 1 limit 1), (select count(*) from pgque.subscription);"
	[tk_tick64]="select count(*) from pgque._tick_many(array(select generate_series(1, 64)));"
	[m_reserve]="select count(pg_catalog.to_regclass(pgque._space_reserve_name(q))) from pgque.queue q;"
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
for w in ${ONLY:-maint_stale_roles maint_queue_steps maint_db_steps watchdog_pass ticker_seq_probe}; do
	printf '%-20s %12s\n' "$w" "$(per_call "${S[$w]}")"
done
