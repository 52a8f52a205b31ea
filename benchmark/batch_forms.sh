#!/usr/bin/env bash
# benchmark/batch_forms.sh [N] [GROWN]: why make bench and make
# bench-outside disagreed on send_batch of 100 / multi-row INSERT (issue
# #30, ADR 0097), in instructions per event, counted by valgrind's
# callgrind on a single-user backend (a loaded machine gives the same
# figures as a quiet one).
#
# The two harnesses write the batch in different forms and into targets of
# different ages:
#   make bench (run.sh):  send_batch(..., array_fill(payload, array[100]))
#                         INSERT ... SELECT ... FROM generate_series(1, 100)
#                         into the queue and table that every earlier
#                         producer run filled ("grown": GROWN rows, 1,000,000)
#   outside.sh:           send_batch(..., '{p,p,...}'::text[]) (a literal)
#                         INSERT ... VALUES (...), ... (100 rows)
#                         into a queue or table made just before ("fresh")
# Each form is PREPAREd once and EXECUTEd (pgbench -M prepared does the
# same: the statement is parsed and planned once per connection); a count
# is the difference between N + 10 and 10 executions, so the preparing and
# the first executions are not in it.  Prints instructions per event of
# each form into each target, and the ratios send_batch / INSERT of the two
# harnesses' combinations.
#
#   PGQUE_BENCH_PORT=57301 bash benchmark/batch_forms.sh 200
set -euo pipefail
cd "$(dirname "$0")/.."
. benchmark/lib.sh
N=${1:-200}
GROWN=${2:-1000000}
# benchmark/server.conf's settings; autovacuum off: the counts repeat
bench_server batch_forms 56704 "autovacuum = off"
P='payload-abcdefghij'	# 18 bytes, as both harnesses' payloads
"${PSQL[@]}" >/dev/null <<SQL
create extension pgque_bgw;
select pgque.create_queue(q) from unnest(array['fresh', 'grown']) q;
create table plain_fresh (id bigserial, t timestamptz default now(), typ text, data text);
create table plain_grown (id bigserial, t timestamptz default now(), typ text, data text);
select count(pgque.send_batch('grown', 'default', array_fill('$P'::text, array[10000])))
  from generate_series(1, $GROWN / 10000);
insert into plain_grown (typ, data) select 'default', '$P' from generate_series(1, $GROWN);
checkpoint;
SQL
bench_snapshot

ARR="'{$(printf "$P,%.0s" $(seq 99))$P}'::text[]"
VALUES=$(printf "('default', '$P'), %.0s" $(seq 99))"('default', '$P')"
# form_sql FORM TARGET: the statement of FORM into TARGET (fresh, grown)
form_sql() {
	case $1 in
	send_batch_array_fill) echo "select pgque.send_batch('$2', 'default', array_fill('$P'::text, array[100]))" ;;
	send_batch_literal) echo "select pgque.send_batch('$2', 'default', $ARR)" ;;
	insert_generate_series) echo "insert into plain_$2 (typ, data) select 'default', '$P' from generate_series(1, 100)" ;;
	insert_values) echo "insert into plain_$2 (typ, data) values $VALUES" ;;
	esac
}
# count FORM TARGET EXECUTIONS: instructions of a single-user session that
# prepares the form and executes it EXECUTIONS times, one transaction each
count() {
	bench_restore
	{ echo "prepare s as $(form_sql "$1" "$2");"; for _ in $(seq 1 "$3"); do echo "execute s;"; done; } |
		bench_callgrind "$1-$2-$3"
}
declare -A IPE
printf '%-26s %-6s %12s\n' form target instr/event
for form in send_batch_array_fill send_batch_literal insert_generate_series insert_values; do
	for target in fresh grown; do
		a=$(count "$form" "$target" 10)
		b=$(count "$form" "$target" $((N + 10)))
		IPE[$form.$target]=$(awk -v a="$a" -v b="$b" -v n="$N" 'BEGIN {printf "%.0f", (b - a) / (n * 100)}')
		printf '%-26s %-6s %12s\n' "$form" "$target" "${IPE[$form.$target]}"
	done
done
# ratio NUM DEN: instructions DEN / NUM (events per second go as the inverse)
ratio() { awk -v n="${IPE[$1]}" -v d="${IPE[$2]}" 'BEGIN {printf "%.2fx", d / n}'; }
echo "-- send_batch / INSERT in server work (the inverse ratio of instructions per event)"
echo "make bench's forms, grown targets:  $(ratio send_batch_array_fill.grown insert_generate_series.grown)"
echo "make bench's forms, fresh targets:  $(ratio send_batch_array_fill.fresh insert_generate_series.fresh)"
echo "outside's forms, fresh targets:     $(ratio send_batch_literal.fresh insert_values.fresh)"
echo "outside's forms, grown targets:     $(ratio send_batch_literal.grown insert_values.grown)"
