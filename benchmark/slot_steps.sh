#!/usr/bin/env bash
# benchmark/slot_steps.sh [ROUNDS] [TICKS]: instructions of one partition
# slot's batch round and of the steps inside it, counted by valgrind's
# callgrind on a single-user backend (ADR 0128): figures a loaded machine
# does not change.
#
# One queue with 32 partition buckets and a 16-slot consumer; slot 0's keys
# only, two events a tick, TICKS ticks (default 300: a backlog of that many
# ticks ahead of the slot).  A round is receive_partitioned(q, c, 0, 16, w,
# 1) and ack_partitioned, then COMMIT (as a worker commits each batch: in
# one transaction every update of the epoch row would stay unpruned and the
# next lookups walk its versions): the round's fixed cost, which 16 slots
# pay 16 times as often per event as one plain consumer.  Each step runs
# ROUNDS times (default 200), one transaction each, in a backend warmed up
# by 20 rounds and 20 of the step (its plans made, generic as receive makes
# them, its functions compiled); the same run with an empty step is
# subtracted.  Printed: instructions a call.
#
#   PG_CONFIG=... bash benchmark/slot_steps.sh 200 300
set -euo pipefail
cd "$(dirname "$0")/.."
. benchmark/lib.sh
ROUNDS=${1:-200}
TICKS=${2:-300}
bench_install
bench_server slot_steps 56704 "autovacuum = off"
"${PSQL[@]}" >/dev/null <<SQL
create extension pgque_bgw;
select pgque.create_queue('st');
select pgque.set_queue_config('st', 'partition_buckets', '32');
select pgque.maint_rotate_tables_step2();
select pgque.force_tick('st'), pgque.ticker('st');
select pgque.subscribe_slot('st', 'c', s, 16) from generate_series(0, 15) s;
-- a key of slot 0
create table k0 as select 'k' || i as k from generate_series(1, 1000) i
 where pgque._slot_of('k' || i, 16) = 0 limit 1;
SQL
for i in $(seq 1 "$TICKS"); do
	echo "select pgque.send('st', 'e', 'p', (select k from k0)), pgque.send('st', 'e', 'p', (select k from k0));"
	echo "select pgque.force_tick('st'), pgque.ticker('st');"
done | "${PSQL[@]}" >/dev/null
"${PSQL[@]}" -c "vacuum analyze" -c "checkpoint" >/dev/null
bench_snapshot

# the steps: a statement of PL/pgSQL run in a loop, with s the slot's
# subscription, q the queue, t1 and t2 two ticks 8 apart (a window of 16
# events, what the round's span of 1 x 16 events picks)
steps=(
	"round|perform count(*) from pgque.receive_partitioned('st', 'c', 0, 16, 'w', 1); perform pgque.ack_partitioned('st', 'c', 0, 16, 'w');"
	"receive|perform count(*) from pgque.receive_partitioned('st', 'c', 0, 16, 'w', 1);"
	"ack_none|perform pgque.ack_partitioned('st', 'c', 0, 16, 'w');"
	"_slot_enter|perform pgque._slot_enter('st', 'c', 0, 16, 'w', false, 1, true);"
	"_slot_batch_row|perform pgque._slot_batch_row(s, 1);"
	"_pick_tick|perform pgque._pick_tick(1, t1, null, null, null, 16);"
	"_event_source|perform pgque._event_source(q, t1.tick_snapshot, t2.tick_snapshot, 16, 0);"
	"_slot_window|perform * from pgque._slot_window(s, 1, 16, 0, 1, true);"
)
run() {
	local body=$1
	cat <<SQL
set plan_cache_mode = force_generic_plan;
create procedure pg_temp.r(k int) language plpgsql as \$\$ begin for i in 1..k loop perform count(*) from pgque.receive_partitioned('st', 'c', 0, 16, 'w', 1); perform pgque.ack_partitioned('st', 'c', 0, 16, 'w'); commit; end loop; end \$\$;
create procedure pg_temp.p(k int) language plpgsql as \$\$ declare s pgque.subscription; q pgque.queue; t1 pgque.tick; t2 pgque.tick; begin select * into s from pgque.subscription where sub_id = 1; select * into q from pgque.queue where queue_id = 1; select * into t1 from pgque.tick where tick_queue = 1 and tick_id = 30; select * into t2 from pgque.tick where tick_queue = 1 and tick_id = 38; for i in 1..k loop $body commit; end loop; end \$\$;
select pgque.claim_slot('st', 'c', 0, 'w', '1 hour');
call pg_temp.r(20);
call pg_temp.p(20);
call pg_temp.p($ROUNDS);
SQL
}
count() {
	bench_restore
	bench_callgrind "$@"
}
base=$(run "perform 1;" | count)
printf '%-16s %14s\n' step "instr/call"
for s in "${steps[@]}"; do
	name=${s%%|*}
	c=$(run "${s#*|}" | count "$name")
	awk -v c="$c" -v b="$base" -v n="$ROUNDS" -v s="$name" 'BEGIN { printf "%-16s %14.0f\n", s, (c - b) / n }'
done
