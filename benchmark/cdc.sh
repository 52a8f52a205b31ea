#!/usr/bin/env bash
# benchmark/cdc.sh: the change-data-capture triggers (issue #13) against the
# producer primitive.  ROWS row changes (default 100,000), one statement each
# workload, on a throwaway server:
#   - INSERT of ROWS rows into a 5-column table with a primary key, without
#     a trigger (the table's own cost), with logutriga, jsontriga, sqltriga
#     (AFTER ... FOR EACH ROW), and with PgQ's pgq.logutriga when Debian's
#     postgresql-15-pgq3 is installed;
#   - UPDATE and DELETE of the ROWS rows through logutriga;
#   - ROWS calls of pgque.insert_event with a payload of the same size
#     (what the trigger adds on top of the table's own cost).
# Each workload runs RUNS times (default 3) on an emptied table and queue;
# the best run is reported as rows/s and µs per row.  The background
# workers are off: the figures are the producer side only.
#   benchmark/cdc.sh                 build, install, run
#   ROWS=20000 RUNS=1 benchmark/cdc.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. benchmark/lib.sh

ROWS=${ROWS:-100000}
RUNS=${RUNS:-3}

bench_install postgresql-15 postgresql-server-dev-15 make gcc
# benchmark/server.conf's settings; autovacuum off
bench_server cdc_bench 56760 "autovacuum = off"

HAVE_PGQ=0
if "${PSQL[@]}" -c "select 1 from pg_available_extensions where name = 'pgq'" | grep -q 1; then
	HAVE_PGQ=1
fi
"${PSQL[@]}" >/dev/null <<SQL
create extension pgque_bgw;
select pgque.create_queue('cdc');
create table t (id int8 primary key, tenant text, name text, size int8, created timestamptz);
$([ $HAVE_PGQ = 1 ] && echo "create extension pgq; select pgq.create_queue('cdc');")
SQL

ROWS_SQL="insert into t select g, 'tenant-' || (g % 2000), 'file-' || g || '.txt', g * 17, '2026-01-01'::timestamptz + g * interval '1 s' from generate_series(1, $ROWS) g"

# reset: empty table and queue (rotation would cost nothing here, but a
# truncate keeps every run on the same heap size)
reset() {
	local pgq_tables=()
	[ $HAVE_PGQ = 1 ] && pgq_tables=(-c "truncate pgq.event_1_0, pgq.event_1_1, pgq.event_1_2")
	"${PSQL[@]}" >/dev/null -c "set client_min_messages = warning" -c "drop trigger if exists cdc on t" -c "truncate t" \
		-c "truncate pgque.event_1_0, pgque.event_1_1, pgque.event_1_2" "${pgq_tables[@]}" -c "checkpoint"
}

# timed SETUP SQL: milliseconds of SQL (one statement, its own transaction)
timed() {
	local setup=$1 sql=$2 t0 t1
	reset
	[ -n "$setup" ] && "${PSQL[@]}" >/dev/null -c "$setup"
	t0=$(date +%s%N)
	"${PSQL[@]}" >/dev/null -c "$sql"
	t1=$(date +%s%N)
	echo $(((t1 - t0) / 1000000))
}

RESULTS=()
# run NAME SETUP SQL [PRE]: best of RUNS; PRE runs before each run, untimed
run() {
	local name=$1 setup=$2 sql=$3 pre=${4:-} best=0 ms i
	for i in $(seq 1 "$RUNS"); do
		if [ -n "$pre" ]; then
			reset
			"${PSQL[@]}" >/dev/null -c "$pre"
			[ -n "$setup" ] && "${PSQL[@]}" >/dev/null -c "$setup"
			local t0 t1
			t0=$(date +%s%N); "${PSQL[@]}" >/dev/null -c "$sql"; t1=$(date +%s%N)
			ms=$(((t1 - t0) / 1000000))
		else
			ms=$(timed "$setup" "$sql")
		fi
		{ [ "$best" = 0 ] || [ "$ms" -lt "$best" ]; } && best=$ms
	done
	RESULTS+=("$name|$best")
	printf '%-48s %8d ms  %10.0f rows/s  %6.2f us/row\n' "$name" "$best" \
		"$(echo "$ROWS * 1000 / $best" | bc -l)" "$(echo "$best * 1000 / $ROWS" | bc -l)"
}

echo "== $ROWS row changes, best of $RUNS (server: fsync off, synchronous_commit off, workers off)"
run "INSERT, no trigger" "" "$ROWS_SQL"
run "INSERT + pgque.logutriga" "create trigger cdc after insert or update or delete on t for each row execute function pgque.logutriga('cdc')" "$ROWS_SQL"
run "INSERT + pgque.jsontriga" "create trigger cdc after insert or update or delete on t for each row execute function pgque.jsontriga('cdc')" "$ROWS_SQL"
run "INSERT + pgque.sqltriga" "create trigger cdc after insert or update or delete on t for each row execute function pgque.sqltriga('cdc')" "$ROWS_SQL"
run "INSERT + pgque.logutriga, when= and ev_extra2=" "create trigger cdc after insert or update or delete on t for each row execute function pgque.logutriga('cdc', 'when=size >= 0', 'ev_extra2=tenant')" "$ROWS_SQL"
if [ $HAVE_PGQ = 1 ]; then
	run "INSERT + PgQ pgq.logutriga" "create trigger cdc after insert or update or delete on t for each row execute function pgq.logutriga('cdc')" "$ROWS_SQL"
fi
run "UPDATE, no trigger" "" "update t set size = size + 1" "$ROWS_SQL"
run "UPDATE + pgque.logutriga" "create trigger cdc after insert or update or delete on t for each row execute function pgque.logutriga('cdc')" "update t set size = size + 1" "$ROWS_SQL"
run "DELETE + pgque.logutriga" "create trigger cdc after insert or update or delete on t for each row execute function pgque.logutriga('cdc')" "delete from t" "$ROWS_SQL"
run "pgque.insert_event x $ROWS (same payload)" "" "select count(pgque.insert_event('cdc', 'I:id', 'id=' || g || '&tenant=tenant-' || (g % 2000) || '&name=file-' || g || '.txt&size=' || g * 17 || '&created=2026-01-01+00%3a00%3a00%2b00', 'public.t', null, null, null)) from generate_series(1, $ROWS) g"
echo "== events in the queue after the last run: $("${PSQL[@]}" -c "select count(*) from pgque.event_1")"
