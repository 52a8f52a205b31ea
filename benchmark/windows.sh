#!/usr/bin/env bash
# benchmark/windows.sh: does merging waiting tick windows help a lagging
# plain consumer drain (ADR 0057)?  One tick window per batch (the default,
# as PgQue) against merge_windows on (set_consumer_config), same backlog.
#
#   PG_CONFIG=... [PGQUE_BENCH_NO_INSTALL=1] [EVENTS=100000] [ROUNDS=2] bash benchmark/windows.sh
#
# For each window size W (10, 50, 500 events: a tick every W events; 500 is
# the default ticker_max_count) a backlog of EVENTS events waits for two
# consumers of one queue, "one" (one window per batch) and "merged"
# (merge_windows on); each drains it with receive(queue, consumer, 1000)
# and ack, one transaction per batch, timed from the client.  Rounds
# alternate which consumer drains first (a fresh backlog each round).
# Prints events per second and batches per drain, one line each.
set -euo pipefail
cd "$(dirname "$0")/.."
. benchmark/lib.sh

EVENTS=${EVENTS:-100000}
ROUNDS=${ROUNDS:-2}
MAX_RETURN=${MAX_RETURN:-1000}

bench_install
# benchmark/server.conf's settings
bench_server windows 56790

"${PSQL[@]}" >/dev/null <<'SQL'
create extension pgque_bgw;

-- a backlog of i_events events, a tick every i_window events
create procedure wb_produce(q text, i_events int, i_window int) language plpgsql as $$
declare
    payloads text[] := array_fill('payload-abcdefghij'::text, array[i_window]);
begin
    for i in 1 .. i_events / i_window loop
        perform pgque.send_batch(q, 'default', payloads);
        commit;
        perform pgque.ticker(q);
        commit;
    end loop;
end $$;
SQL
# the drain: bench_drain_plain (benchmark/bench.sql): events and batches
bench_sql

drain() {
	local q=$1 c=$2 w=$3 round=$4 t0 t1 out got batches
	t0=$(date +%s.%N)
	out=$("${PSQL[@]}" -F ' ' -c "call bench_drain_plain('$q', '$c', $MAX_RETURN)")
	t1=$(date +%s.%N)
	read -r got batches <<<"$out"
	awk -v c="$c" -v w="$w" -v r="$round" -v n="$got" -v b="$batches" -v a="$t0" -v z="$t1" \
		'BEGIN {printf "windows W=%-4s round %s  %-7s %8d events %6d batches %8.0f ev/s\n", w, r, c, n, b, n / (z - a)}'
}

echo "-- $EVENTS events per backlog, receive(..., $MAX_RETURN)/ack, $ROUNDS rounds"
for w in 10 50 500; do
	for round in $(seq 1 "$ROUNDS"); do
		q="wb_${w}_${round}"
		"${PSQL[@]}" >/dev/null -c "select pgque.create_queue('$q')" \
			-c "select pgque.subscribe('$q', 'one'), pgque.subscribe('$q', 'merged')" \
			-c "select pgque.set_consumer_config('$q', 'merged', 'merge_windows', 'true')"
		"${PSQL[@]}" >/dev/null -c "call wb_produce('$q', $EVENTS, $w)"
		if [ $((round % 2)) -eq 1 ]; then
			drain "$q" one "$w" "$round"
			drain "$q" merged "$w" "$round"
		else
			drain "$q" merged "$w" "$round"
			drain "$q" one "$w" "$round"
		fi
		"${PSQL[@]}" >/dev/null -c "select pgque.drop_queue('$q', true)"
	done
done
