#!/usr/bin/env bash
# benchmark/tick_instructions.sh [N=40]: the instructions of one tick alone
# (ADR 0118's single-user count, ADR 0123), counted by valgrind's callgrind
# on a single-user backend: N rounds of a send and a tick of its queue,
# less N rounds of the send alone, over N.  The tick as the worker's visit
# of one woken queue ran it before ADR 0123 (_tick_many(array[id]): the
# kept plan of ticker.c) and as each caller reaches it:
#   tick_many      select pgque._tick_many(array[1])
#   tick_visit     select pgque._tick_visit(q, false) from pgque.queue q
#                  where q.queue_id = 1 (the C visit behind one statement)
#   ticker_name    select pgque.ticker('b') (the manual and pg_cron way)
# and the floor of any such statement (select_bigint).  Each workload has
# a cooperative group on a second queue too (coop), whose ticks sync its
# windows.  Uses the server of PGBIN with pgque_bgw installed (as
# instructions.sh); KEEP=dir keeps each callgrind file.
set -euo pipefail
cd "$(dirname "$0")/.."
. benchmark/lib.sh
N=${1:-40}
command -v valgrind >/dev/null || { echo "valgrind is needed" >&2; exit 1; }
bench_install
bench_server tickinstr 56702 "autovacuum = off" "pgque_bgw.enabled = off"
"${PSQL[@]}" >/dev/null <<'SQL'
create extension pgque_bgw;
select pgque.create_queue('b');
select pgque.create_queue('c');
select pgque.subscribe('b', 'x');
select pgque.register_subconsumer('c', 'g', 'm1');
select pgque.ticker('b');
select pgque.ticker('c');
SQL
stop_cluster "$WORK"

declare -A S=(
	[select_bigint]="select 1::bigint;"
	[tick_many]="select pgque._tick_many(array[1]);"
	[tick_visit]="select pgque._tick_visit(q, false) from pgque.queue q where q.queue_id = 1;"
	[ticker_name]="select pgque.ticker('b');"
	[tick_many_coop]="select pgque._tick_many(array[2]);"
)
declare -A Q=([tick_many_coop]=c)
CALLGRIND_KEEP=${KEEP:-${CALLGRIND_KEEP:-}}
count() { bench_callgrind "$(basename "$1" .sql)" < "$1"; }
rounds() { # rounds FILE QUEUE [TICK]: N sends, each followed by TICK
	{ for _ in $(seq 1 "$N"); do
		echo "select pgque.send('$2', 'payload-abcdefghij');"
		if [ -n "${3:-}" ]; then echo "$3"; fi
	  done; } > "$1"
}
printf '%-20s %14s\n' workload "instr/tick"
for q in b c; do
	rounds "$WORK/base_$q.sql" "$q"
	eval "base_$q=$(count "$WORK/base_$q.sql")"
done
for w in select_bigint tick_many tick_visit ticker_name tick_many_coop; do
	[[ -n ${ONLY:-} && " $ONLY " != *" $w "* ]] && continue
	q=${Q[$w]:-b}
	rounds "$WORK/$w.sql" "$q" "${S[$w]}"
	ir=$(count "$WORK/$w.sql")
	b=base_$q
	awk -v a="${!b}" -v b="$ir" -v n="$N" -v w="$w" \
		'BEGIN {printf "%-20s %14.0f\n", w, (b - a) / n}'
done
