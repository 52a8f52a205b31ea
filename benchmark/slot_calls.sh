#!/usr/bin/env bash
# benchmark/slot_calls.sh [EVENTS]: what one partition slot's call costs,
# in shared buffers and statements, not in time (a figure a loaded machine
# does not change; issue #30 item 3, ADR 0078).
#
# A throwaway server with pg_stat_statements (track = all) and the workers
# off; one queue with 32 partition buckets gets EVENTS keyed events
# (default 500,000; zipfian over 2,000 tenants, 100 per transaction, a tick
# every 1,000, as benchmark/partition.sh sends them); consumers of N = 1 and
# N = 32 slots drain it, slot after slot (receive_partitioned(1000),
# ack_partitioned, commit).  It prints the statements and shared buffers of
# one receive and one ack (slot 0 of 32, first batch), then for each N the
# shared buffers per event in pgque's relations (all of them, and the event
# tables alone, from pg_statio) and per receive and ack call.
#
#   PG_CONFIG=... bash benchmark/slot_calls.sh 500000
set -euo pipefail
cd "$(dirname "$0")/.."
. benchmark/lib.sh

EVENTS=${1:-500000}
bench_install
# benchmark/server.conf's settings, autovacuum off and pg_stat_statements
bench_server slot_calls 56790 "autovacuum = off" \
	"shared_preload_libraries = 'pgque_bgw,pg_stat_statements'" "pg_stat_statements.track = all" \
	"pg_stat_statements.max = 10000"

"${PSQL[@]}" >/dev/null <<'SQL'
create extension pgque_bgw;
create extension pg_stat_statements;
select pgque.create_queue('pk');
select pgque.set_queue_config('pk', 'partition_buckets', '32');
select pgque.maint_rotate_tables_step2();
select pgque.force_tick('pk'), pgque.ticker('pk');
select pgque.subscribe_slot('pk', 'n' || n, s, n) from unnest(array[1, 32]) n, generate_series(0, n - 1) s;
SQL
# the stream and the drain: benchmark/bench.sql (bench_produce_keyed,
# bench_drain_slots), as make bench's partition workload
bench_sql
"${PSQL[@]}" -c "call bench_produce_keyed(array['pk'], $EVENTS)" >/dev/null
# what the drains run is what is counted: statistics from here on
"${PSQL[@]}" -c "vacuum analyze" >/dev/null

# statements one call runs (every statement the executor ran, nested ones
# included, counted once) and its shared buffers, in a warm session (its
# first calls read the catalogs and compile): slot 0 of a 32-slot consumer
# of its own, its first receive and ack, each alone between two resets,
# after the same calls on slot 1
"${PSQL[@]}" >/dev/null -c "select pgque.subscribe_slot('pk', 'probe', s, 32) from generate_series(0, 31) s" \
	-c "select pgque.claim_slot('pk', 'probe', s, 'w', '1 hour') from generate_series(0, 1) s"
"${PSQL[@]}" -F ' ' <<'SQL' > "$WORK/probe.out"
select count(*) from pgque.receive_partitioned('pk', 'probe', 1, 32, 'w', 1000);
select pgque.ack_partitioned('pk', 'probe', 1, 32, 'w');
select pg_stat_statements_reset();
select count(*) from pgque.receive_partitioned('pk', 'probe', 0, 32, 'w', 1000);
select 'receive', sum(calls) - 1, sum(shared_blks_hit + shared_blks_read) filter (where toplevel)
  from pg_stat_statements where query not like '%pg_stat_statements%';
select pg_stat_statements_reset();
select pgque.ack_partitioned('pk', 'probe', 0, 32, 'w');
select 'ack', sum(calls) - 1, sum(shared_blks_hit + shared_blks_read) filter (where toplevel)
  from pg_stat_statements where query not like '%pg_stat_statements%';
SQL
read -r _ rs rsb < <(grep '^receive ' "$WORK/probe.out")
read -r _ as asb < <(grep '^ack ' "$WORK/probe.out")
echo "-- one call of slot 0 of 32 (its first batch), warm session: statements run, shared buffers"
printf 'receive_partitioned(1000): %s statements, %s buffers\n' "$rs" "$rsb"
printf 'ack_partitioned:           %s statements, %s buffers\n' "$as" "$asb"

echo "-- drains, slot after slot: shared buffers per event (pg_statio) and per call (pg_stat_statements)"
printf '%4s %10s %10s | %7s %9s | %7s %9s\n' N "pgque/ev" "events/ev" "recv" "buf/recv" "acks" "buf/ack"
for n in 1 32; do
	"${PSQL[@]}" -c "select pg_stat_reset(), pg_stat_statements_reset()" >/dev/null
	"${PSQL[@]}" -c "call bench_drain_slots('pk', 'n$n', $n, 0, $((n - 1)))" >/dev/null
	sleep 0.7	# the drained session's statistics reach shared memory
	read -r all ev < <("${PSQL[@]}" -F ' ' -c "
		select round(sum(b) / $EVENTS.0, 4), round(coalesce(sum(b) filter (where relname like 'event\_%'), 0) / $EVENTS.0, 4)
		  from (select relname, coalesce(heap_blks_hit, 0) + coalesce(heap_blks_read, 0)
		               + coalesce(idx_blks_hit, 0) + coalesce(idx_blks_read, 0) as b
		          from pg_statio_user_tables where schemaname = 'pgque') s")
	read -r rc rb ac ab < <("${PSQL[@]}" -F ' ' -c "
		select sum(calls) filter (where query like '%pgque.receive_partitioned(%'),
		       round(sum(shared_blks_hit + shared_blks_read) filter (where query like '%pgque.receive_partitioned(%')
		             / sum(calls) filter (where query like '%pgque.receive_partitioned(%'), 1),
		       sum(calls) filter (where query like '%pgque.ack_partitioned(%'),
		       round(sum(shared_blks_hit + shared_blks_read) filter (where query like '%pgque.ack_partitioned(%')
		             / sum(calls) filter (where query like '%pgque.ack_partitioned(%'), 1)
		  from pg_stat_statements where toplevel is false")
	printf '%4s %10s %10s | %7s %9s | %7s %9s\n' "$n" "$all" "$ev" "$rc" "$rb" "$ac" "$ab"
done
