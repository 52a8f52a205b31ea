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
# XIP=1 holds a transaction with an xid open (another session) while the
# backlog is produced, as `make bench`'s three concurrent producers do: every
# window's old tick then lists a transaction in progress, and each relation
# of the read is a BitmapOr of the ev_txid range and `= any(xip)` (ADR 0093).
# TOOL=cpu ROUNDS=n: no valgrind; the same single-user drains timed, the
# backend's user + system CPU time (getrusage) and its system time apart,
# ROUNDS rounds whose order of the systems turns round by round, per event
# of each round in nanoseconds (a loaded machine slows each instruction:
# read the ratios within a round, not the absolute figures).
set -euo pipefail
cd "$(dirname "$0")/.."
. test/lib.sh
WINDOWS=${1:-12}
WINDOW=${2:-10000}
WARM=$((2 * WINDOW))
ALL=$((WINDOWS * WINDOW))
TOOL=${TOOL:-callgrind}
ROUNDS=${ROUNDS:-5}
[ "$TOOL" = cpu ] || command -v valgrind >/dev/null || { echo "valgrind is needed" >&2; exit 1; }
WORK=$(make_workdir pgque_drain_instr)
trap 'stop_cluster "$WORK"; rm -rf "$WORK"' EXIT
PORT=${PGQUE_BENCH_PORT:-56702}
start_cluster "$WORK" "$PORT" "pgque_bgw.enabled = off" "autovacuum = off"
PSQL=(as_pg psql -X -q -h "$WORK" -p "$PORT" -d postgres -v ON_ERROR_STOP=1)
HAVE_PGQ=0
[ -f "$("$PG_CONFIG" --sharedir)/extension/pgq.control" ] && HAVE_PGQ=1
"${PSQL[@]}" >/dev/null <<'SQL'
create extension pgque_bgw;
select pgque.create_queue('drain');
select pgque.subscribe('drain', 'c');
select pgque.create_queue('drain_b'), pgque.set_queue_config('drain_b', 'partition_buckets', '32');
select pgque.subscribe('drain_b', 'c');
SQL
if [ "$HAVE_PGQ" = 1 ]; then
	"${PSQL[@]}" >/dev/null <<'SQL'
create extension pgq;
select pgq.create_queue('drain');
select pgq.register_consumer('drain', 'c');
SQL
fi
if [ "${XIP:-0}" = 1 ]; then
	as_pg mkfifo "$WORK/xip.fifo"
	"${PSQL[@]}" < "$WORK/xip.fifo" >/dev/null &
	XIP_PID=$!
	exec 9> "$WORK/xip.fifo"
	echo "begin; select pg_catalog.pg_current_xact_id();" >&9
	until [ "$("${PSQL[@]}" -A -t -c "select count(*) from pg_catalog.pg_stat_activity where backend_xid is not null and pid <> pg_catalog.pg_backend_pid()")" -gt 0 ]; do sleep 0.1; done
fi
for _ in $(seq 1 "$WINDOWS"); do
	"${PSQL[@]}" -c "select count(pgque.send_batch('drain', 'default', array_fill('payload-abcdefghij'::text, array[$WINDOW])))" >/dev/null
	"${PSQL[@]}" -c "select count(pgque.send_batch('drain_b', 'default', array_fill('payload-abcdefghij'::text, array[$WINDOW]), array(select 'tenant-' || (g % 2000) from generate_series(1, $WINDOW) g)))" >/dev/null
	"${PSQL[@]}" -c "select pgque.ticker('drain')" >/dev/null
	"${PSQL[@]}" -c "select pgque.ticker('drain_b')" >/dev/null
	if [ "$HAVE_PGQ" = 1 ]; then
		"${PSQL[@]}" -c "select count(pgq.insert_event('drain', 'default', 'payload-abcdefghij')) from generate_series(1, $WINDOW)" >/dev/null
		"${PSQL[@]}" -c "select pgq.ticker('drain')" >/dev/null
	fi
done
if [ "${XIP:-0}" = 1 ]; then
	exec 9>&-	# end of its input: the session ends, its transaction rolled back
	wait "$XIP_PID" || true
fi
"${PSQL[@]}" -c "checkpoint" >/dev/null
stop_cluster "$WORK"
as_pg cp -a "$WORK/data" "$WORK/clean"

# the drain of queue $2 by system $1 up to $3 events, as one line (single-user)
drain_sql() {
	case $1 in
	pgque) echo "do \$\$ declare b bigint; n bigint; t bigint := 0; begin loop select max(batch_id), count(*) into b, n from pgque.receive('$2', 'c', 1000); exit when b is null; perform pgque.ack(b); commit; t := t + n; exit when t >= $3; end loop; end \$\$;" ;;
	pgq) echo "do \$\$ declare b bigint; n bigint; t bigint := 0; begin loop b := pgq.next_batch('$2', 'c'); exit when b is null; select count(*) into n from pgq.get_batch_events(b); perform pgq.finish_batch(b); commit; t := t + n; exit when t >= $3; end loop; end \$\$;" ;;
	esac
}
# instructions of a single-user session draining $3 events, from the clean copy
count() {
	as_pg rm -rf "$WORK/data"
	as_pg cp -a "$WORK/clean" "$WORK/data"
	drain_sql "$1" "$2" "$3" > "$WORK/drain.sql"
	if [ "$TOOL" = cpu ]; then
		# the backend's user and system CPU time in nanoseconds (the child's rusage)
		as_pg python3 -c 'import resource, subprocess, sys
with open(sys.argv[2]) as i, open(sys.argv[3], "w") as o:
    subprocess.run([sys.argv[1], "--single", "-D", sys.argv[4], "postgres"], stdin=i, stdout=o, stderr=subprocess.STDOUT, check=True)
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print(int(r.ru_utime * 1e9), int(r.ru_stime * 1e9))' "$PGBIN/postgres" "$WORK/drain.sql" "$WORK/single.log" "$WORK/data"
		if grep -q ERROR "$WORK/single.log"; then cat "$WORK/single.log" >&2; exit 1; fi
		return
	fi
	as_pg valgrind --tool=callgrind --callgrind-out-file="$WORK/cg.out" \
		"$PGBIN/postgres" --single -D "$WORK/data" postgres < "$WORK/drain.sql" > "$WORK/single.log" 2>&1
	if grep -q ERROR "$WORK/single.log"; then cat "$WORK/single.log" >&2; exit 1; fi
	if [ -n "${CALLGRIND_KEEP:-}" ]; then
		if [ "$3" = "$ALL" ]; then cp "$WORK/cg.out" "$CALLGRIND_KEEP/$4.cg"; else cp "$WORK/cg.out" "$CALLGRIND_KEEP/$4.warm.cg"; fi
	fi
	awk '/^(summary|totals):/ {print $2; exit}' "$WORK/cg.out"
}
runs=("pgque drain" "pgque_32_buckets drain_b")
[ "$HAVE_PGQ" = 1 ] && runs+=("pgq drain")
if [ "$TOOL" = cpu ]; then
	echo "drain ($WINDOWS windows of $WINDOW): CPU ns per event (user + system, and system), rounds in turned order; load average: $(cut -d' ' -f1-3 /proc/loadavg)"
	printf '%-6s' round; for run in "${runs[@]}"; do set -- $run; printf ' %18s' "$1"; done; echo
	for r in $(seq 1 "$ROUNDS"); do
		declare -A ns=()
		n=${#runs[@]}
		for i in $(seq 0 $((n - 1))); do
			set -- ${runs[$(((i + r - 1) % n))]}
			sys=${1%%_*}
			warm=$(count "$sys" "$2" "$WARM" "$1")
			all=$(count "$sys" "$2" "$ALL" "$1")
			ns[$1]=$(echo "$warm $all" | awk -v n="$((ALL - WARM))" '{printf "%.0f (sys %.0f)", ($3 + $4 - $1 - $2) / n, ($4 - $2) / n}')
		done
		printf '%-6s' "$r"; for run in "${runs[@]}"; do set -- $run; printf ' %18s' "${ns[$1]}"; done; echo
		unset ns
	done
	echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
	exit 0
fi
printf '%-32s %14s\n' "drain ($WINDOWS windows of $WINDOW)" "instr/event"
for run in "${runs[@]}"; do
	set -- $run
	sys=${1%%_*}
	warm=$(count "$sys" "$2" "$WARM" "$1")
	all=$(count "$sys" "$2" "$ALL" "$1")
	awk -v a="$warm" -v b="$all" -v n="$((ALL - WARM))" -v w="$1" \
		'BEGIN {printf "%-32s %14.0f\n", w, (b - a) / n}'
done
