#!/bin/bash
# benchmark/latency_callgrind.sh [EVENTS=100] [GAP_MS=200]: the instructions
# per event of the processes on the latency path (ADR 0118), counted by
# callgrind on a live server: the whole server runs under valgrind
# (--trace-children), a producer sends EVENTS events one per transaction
# GAP_MS apart (each one its own tick at that rate), a consumer waits for
# them with receive_wait and acks each batch.  The server runs twice from
# the same data directory, once for EVENTS events and once for twice as
# many; per process kind (the ticker, the consumer, the producer, the
# other workers) the difference of the two runs' counts (each process's
# whole life, written at its exit) over EVENTS is printed, with the
# wake-ups (voluntary context switches) per event: what a process costs
# to start and stop cancels out.  (callgrind_control's zero and dump
# reach the processes through vgdb, which crashed a backend here.)
# Load-independent: the count of a process does not depend on how long it
# waited for a core.
#   PGQUE_BENCH_PORT (default 56711), PGQUE_BENCH_NO_INSTALL=1 as the others;
#   CALLGRIND_KEEP=DIR keeps the ticker's and the consumer's dumps there.
set -euo pipefail
cd "$(dirname "$0")/.."
. benchmark/lib.sh
command -v valgrind >/dev/null || { echo "valgrind is needed" >&2; exit 1; }

EVENTS=${1:-100}
GAP_MS=${2:-200}
bench_install
bench_server latcg 56711
"${PSQL[@]}" >/dev/null <<'SQL'
create extension pgque_bgw;
select pgque.create_queue('lat');
select pgque.subscribe('lat', 'c');
create procedure cg_consume(n int) language plpgsql as $$
declare
    got int := 0;
    b bigint;
    k int;
begin
    while got < n loop
        select max(m.batch_id), count(*) into b, k from pgque.receive_wait('lat', 'c', 1000, '5 seconds') m;
        if b is not null then perform pgque.ack(b); end if;
        got := got + k;
        commit;
    end loop;
end $$;
create procedure cg_produce(n int, gap_ms int) language plpgsql as $$
begin
    for i in 1 .. n loop
        perform pgque.send('lat', 'payload-abcdefghij');
        commit;
        perform pg_sleep(gap_ms / 1000.0);
    end loop;
end $$;
SQL
stop_cluster "$WORK"
echo "pgque_bgw.enabled = on" | as_pg tee -a "$WORK/data/postgresql.conf" >/dev/null
as_pg cp -a "$WORK/data" "$WORK/clean"

# ctxt: "pid wake-ups" of each process of WORK/kinds (voluntary context switches)
ctxt() {
	local p
	for p in $(awk '{print $1}' "$WORK/kinds"); do
		printf '%s %s\n' "$p" "$(awk '/^voluntary_ctxt_switches/ {print $2}' "/proc/$p/status" 2>/dev/null || echo 0)"
	done
}

# one_run N OUT: the server under callgrind for N events; OUT gets a line
# "kind instructions wakeups" per process kind
one_run() {
	local n=$1 out=$2 pid kind f ir w0 w1
	as_pg rm -rf "$WORK/data" "$WORK"/cg.*
	as_pg cp -a "$WORK/clean" "$WORK/data"
	as_pg valgrind --tool=callgrind --trace-children=yes --callgrind-out-file="$WORK/cg.%p" \
		"$PGBIN/postgres" -D "$WORK/data" > "$WORK/valgrind.log" 2>&1 &
	for _ in $(seq 1 240); do
		"${PSQL[@]}" -c "select count(*) from pgque.status() where component = 'ticker' and status = 'running'" 2>/dev/null | grep -q 1 && break
		sleep 0.5
	done
	# a first event and its tick: the workers' first passes are behind them
	"${PSQL[@]}" -c "call cg_produce(1, 0)" -c "call cg_consume(1)" >/dev/null
	sleep 3
	"${PSQL[@]}" -c "call cg_consume($n)" >/dev/null &
	local consumer=$!
	"${PSQL[@]}" > "$WORK/producer.pid" -c "select pg_backend_pid()" -c "select pg_sleep(3)" -c "call cg_produce($n, $GAP_MS)" &
	local producer=$!
	sleep 2
	"${PSQL[@]}" > "$WORK/kinds" -F ' ' -c "select pid, case when backend_type like 'pgque_bgw%' then replace(backend_type, ' ', '_')
	                                          when query like 'call cg_consume%' then 'consumer'
	                                          when query like 'select pg_sleep%' then 'producer'
	                                          else replace(backend_type, ' ', '_') end
	                                   from pg_stat_activity where pid <> pg_backend_pid()"
	ctxt > "$WORK/ctxt0"
	wait "$producer"
	wait "$consumer"
	ctxt > "$WORK/ctxt1"
	echo "load average $(cut -d' ' -f1-3 /proc/loadavg) (run of $n events)" >&2
	stop_cluster "$WORK"
	: > "$out"
	while read -r pid kind; do
		ir=0
		for f in "$WORK"/cg."$pid"; do
			[ -f "$f" ] || continue
			ir=$(( ir + $(awk '/^totals:/ {print $2; exit}' "$f") ))
		done
		w0=$(awk -v p="$pid" '$1 == p {print $2}' "$WORK/ctxt0")
		w1=$(awk -v p="$pid" '$1 == p {print $2}' "$WORK/ctxt1")
		echo "$kind $ir $(( ${w1:-0} - ${w0:-0} ))" >> "$out"
		if [ -n "${CALLGRIND_KEEP:-}" ]; then cp "$WORK/cg.$pid" "$CALLGRIND_KEEP/$kind.$n.cg" 2>/dev/null || true; fi
	done < "$WORK/kinds"
}
one_run "$EVENTS" "$WORK/run1"
one_run $(( EVENTS * 2 )) "$WORK/run2"
echo "$EVENTS events ${GAP_MS} ms apart; per event, the run of $(( EVENTS * 2 )) less the run of $EVENTS:"
printf '%-28s %14s %10s\n' process instructions wakeups
# (the watchdog's and the maintenance worker's counts follow the run's
# length, their passes come every few seconds: not per event)
# the wake-ups: those of the longer run over its events (they count from
# the producer's first send, no start to cancel)
join <(sort "$WORK/run1") <(sort "$WORK/run2") |
	awk -v n="$EVENTS" '{ printf "%-28s %14d %10.2f\n", $1, ($4 - $2) / n, $5 / (2 * n) }'
