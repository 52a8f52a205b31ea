#!/usr/bin/env bash
# benchmark/slot_instructions.sh [EVENTS]: instructions per event of N = 16
# partition slot workers' drain against one plain consumer's of the same
# queue, counted by valgrind's callgrind on a single-user backend, so a
# loaded machine gives the same figures as a quiet one (issue #30 item 3).
#
# The stream of benchmark/partition.sh: EVENTS keyed events (default
# 50,000; zipfian over 2,000 tenants, 100 per transaction, a tick every
# 1,000) in a queue with 32 partition buckets (PART=bucketed) or without
# (PART=filtered: every slot reads the whole window).  The sixteen slots
# are drained one after another in one session (receive_partitioned(1000),
# ack_partitioned, one transaction per batch): their sum is the CPU that 16
# workers spend together, the figure that decides how far they scale on
# few cores.  Each run first drains a warm-up queue of the same layout (its
# first calls plan and compile, as a long-running worker has done); a run
# of the warm-up alone is subtracted.  The ratio slots / plain is the
# per-event cost of the slot path against the plain one (16 workers reach
# 1.6x one plain consumer on 2 cores only when it is <= ~1.25).
# CALLGRIND_KEEP=dir keeps the callgrind files for callgrind_annotate (the
# warm-up's too, to subtract); PARTS=bucketed counts one layout only.
#
#   PG_CONFIG=... bash benchmark/slot_instructions.sh 50000
set -euo pipefail
cd "$(dirname "$0")/.."
. test/lib.sh
EVENTS=${1:-50000}
command -v valgrind >/dev/null || { echo "valgrind is needed" >&2; exit 1; }
WORK=$(make_workdir pgque_slot_instr)
trap 'stop_cluster "$WORK"; rm -rf "$WORK"' EXIT
PORT=${PGQUE_BENCH_PORT:-56703}
start_cluster "$WORK" "$PORT" "pgque_bgw.enabled = off" "autovacuum = off" \
	"shared_preload_libraries = 'pgque_bgw'"
PSQL=(as_pg psql -X -q -h "$WORK" -p "$PORT" -d postgres -v ON_ERROR_STOP=1)
"${PSQL[@]}" >/dev/null <<'SQL'
create extension pgque_bgw;
create procedure produce(q text, i_events int) language plpgsql as $$
declare
    keys text[];
    payloads text[] := array_fill('payload-abcdefghij'::text, array[100]);
begin
    perform setseed(0.5);
    for i in 1 .. i_events / 100 loop
        keys := array(select 'tenant-' || floor(exp(random() * ln(2000)))::int from generate_series(1, 100));
        perform pgque.send_batch(q, 'default', payloads, keys);
        commit;
        if i % 10 = 0 then
            perform pgque.ticker(q);
            commit;
        end if;
    end loop;
    perform pgque.force_tick(q);
    perform pgque.ticker(q);
end $$;
create procedure drain_slots(q text, n int) language plpgsql as $$
declare
    k int;
begin
    for s in 0 .. n - 1 loop
        perform pgque.claim_slot(q, 'tp', s, 'w' || s, '1 day');
        loop
            select count(*) into k from pgque.receive_partitioned(q, 'tp', s, n, 'w' || s, 1000);
            exit when k = 0;
            perform pgque.ack_partitioned(q, 'tp', s, n, 'w' || s);
            commit;
        end loop;
    end loop;
end $$;
create procedure drain_plain(q text) language plpgsql as $$
declare
    b bigint;
begin
    loop
        select max(batch_id) into b from pgque.receive(q, 'plain', 1000);
        exit when b is null;
        perform pgque.ack(b);
        commit;
    end loop;
end $$;
SQL
for part in bucketed filtered; do
	b=32; [ $part = filtered ] && b=0
	for q in "$part" "${part}_warm"; do
		"${PSQL[@]}" >/dev/null -c "select pgque.create_queue('$q')" \
			-c "select pgque.set_queue_config('$q', 'partition_buckets', '$b')" \
			-c "select pgque.maint_rotate_tables_step2()" \
			-c "select pgque.force_tick('$q'), pgque.ticker('$q')" \
			-c "select pgque.subscribe_slot('$q', 'tp', s, 16) from generate_series(0, 15) s" \
			-c "select pgque.subscribe('$q', 'plain')"
	done
	"${PSQL[@]}" -c "call produce('$part', $EVENTS)" >/dev/null
	"${PSQL[@]}" -c "call produce('${part}_warm', 3200)" >/dev/null
done
"${PSQL[@]}" -c "vacuum analyze" -c "checkpoint" >/dev/null
stop_cluster "$WORK"
as_pg cp -a "$WORK/data" "$WORK/clean"

# instructions of a single-user session running the statements on stdin,
# from the clean copy
count() {
	as_pg rm -rf "$WORK/data"
	as_pg cp -a "$WORK/clean" "$WORK/data"
	cat > "$WORK/run.sql"
	as_pg valgrind --tool=callgrind --callgrind-out-file="$WORK/cg.out" \
		"$PGBIN/postgres" --single -D "$WORK/data" postgres < "$WORK/run.sql" > "$WORK/single.log" 2>&1
	if grep -q ERROR "$WORK/single.log"; then cat "$WORK/single.log" >&2; exit 1; fi
	[ -n "${CALLGRIND_KEEP:-}" ] && [ -n "${1:-}" ] && cp "$WORK/cg.out" "$CALLGRIND_KEEP/$1.cg"
	awk '/^(summary|totals):/ {print $2; exit}' "$WORK/cg.out"
}
printf '%-26s %14s %10s\n' "drain of $EVENTS events" "instr/event" "vs plain"
for part in bucketed filtered; do
	# one statement a line: single-user mode runs a line as one statement
	w="call drain_plain('${part}_warm');"$'\n'"call drain_slots('${part}_warm', 16);"
	warm=$(echo "$w" | count "$part-warm")
	plain=$(printf '%s\n%s\n' "$w" "call drain_plain('$part');" | count "$part-plain")
	slots=$(printf '%s\n%s\n' "$w" "call drain_slots('$part', 16);" | count "$part-slots")
	awk -v w="$warm" -v p="$plain" -v s="$slots" -v n="$EVENTS" -v q="$part" 'BEGIN {
		printf "%-26s %14.0f\n", q " plain", (p - w) / n;
		printf "%-26s %14.0f %9.2fx\n", q " 16 slots (sum)", (s - w) / n, (s - w) / (p - w) }'
done
