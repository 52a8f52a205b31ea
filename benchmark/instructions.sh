#!/usr/bin/env bash
# benchmark/instructions.sh [N]: instructions per event of the producer
# workloads, counted by valgrind's callgrind on a single-user backend, so a
# loaded or shared machine gives the same figures as a quiet one (pgbench
# throughput does not).  Uses the server of PGBIN (default: PG's), with
# pgque_bgw installed there.  Each workload is N statements (N/10 of 100
# events), one transaction each, as a pgque_writer for pgque's calls; the
# cost of a run with no statement is subtracted.  Single-user mode parses
# and plans every statement and has no client round trip: read the ratios
# as server work, not as pgbench's.
# KEEP=dir keeps each workload's callgrind file there (callgrind_annotate
# --inclusive=yes dir/<workload>.cg: the per-function profile);
# ONLY='send send_batch_100' runs only those workloads (and the base).
# PREPARED=1: each workload's statement prepared once and EXECUTEd N times,
# as pgbench -M prepared (and drivers) run it: no parse or plan per
# statement, which otherwise adds some 50k instructions to every workload
# alike and hides the ratios pgbench measures (ADR 0092).  select_bigint
# (select 1::bigint) is the floor of any statement that returns one row:
# single-user mode prints it (debugtup), which a client's row costs less.
# insert_returning (the unindexed INSERT returning its id) is send's
# like-for-like floor there: both print one row (ADR 0140).
set -euo pipefail
cd "$(dirname "$0")/.."
. benchmark/lib.sh
N=${1:-500}
NB=$((N / 10))
command -v valgrind >/dev/null || { echo "valgrind is needed" >&2; exit 1; }
# benchmark/server.conf's settings; autovacuum off: the counts repeat
bench_server instr 56701 "autovacuum = off"
"${PSQL[@]}" >/dev/null <<'SQL'
create extension pgque_bgw;
select pgque.create_queue('b');
select pgque.create_queue('bk'), pgque.set_queue_config('bk', 'partition_buckets', '32');
create table plain (id bigserial, t timestamptz default now(), typ text, data text);
-- the event tables' ev_txid column and btree
create table plain_idx (id bigserial, t timestamptz default now(),
                        x xid8 not null default pg_current_xact_id(), typ text, data text);
create index on plain_idx (x);
create role w in role pgque_writer;
SQL
stop_cluster "$WORK"

declare -A S=(
	[select_bigint]="select 1::bigint;"
	[insert]="insert into plain (typ, data) values ('default', 'payload-abcdefghij');"
	[insert_indexed]="insert into plain_idx (typ, data) values ('default', 'payload-abcdefghij');"
	[insert_returning]="insert into plain (typ, data) values ('default', 'payload-abcdefghij') returning id;"
	[send]="select pgque.send('b', 'payload-abcdefghij');"
	[send_typed]="select pgque.send('b', 'default', 'payload-abcdefghij');"
	[send_keyed]="select pgque.send('b', 'default', 'payload-abcdefghij', 'tenant-42');"
	[send_keyed_32_buckets]="select pgque.send('bk', 'default', 'payload-abcdefghij', 'tenant-42');"
	[send_jsonb]="select pgque.send('b', '{\"a\": 1}'::jsonb);"
	[send_batch_100]="select pgque.send_batch('b', 'default', array_fill('payload-abcdefghij'::text, array[100]));"
	[multi_row_insert_100]="insert into plain (typ, data) select 'default', 'payload-abcdefghij' from generate_series(1, 100);"
	[multi_row_insert_100_indexed]="insert into plain_idx (typ, data) select 'default', 'payload-abcdefghij' from generate_series(1, 100);"
)
# instructions of one single-user session running the file $1
CALLGRIND_KEEP=${KEEP:-${CALLGRIND_KEEP:-}}
count() { bench_callgrind "$(basename "$1" .sql)" < "$1"; }
echo "set role w;" > "$WORK/empty.sql"
base=$(count "$WORK/empty.sql")
printf '%-32s %14s\n' workload "instr/event"
for w in select_bigint insert insert_returning insert_indexed send send_typed send_keyed send_keyed_32_buckets send_jsonb \
         send_batch_100 multi_row_insert_100 multi_row_insert_100_indexed; do
	[[ -n ${ONLY:-} && " $ONLY " != *" $w "* ]] && continue
	n=$N per=1
	[[ $w == *_100* ]] && n=$NB per=100
	{ echo "set role w;"; [[ $w == *insert* ]] && echo "reset role;"
	  if [[ ${PREPARED:-0} == 1 ]]; then
		echo "prepare p as ${S[$w]}"
		for _ in $(seq 1 "$n"); do echo "execute p;"; done
	  else
		for _ in $(seq 1 "$n"); do echo "${S[$w]}"; done
	  fi; } > "$WORK/$w.sql"
	ir=$(count "$WORK/$w.sql")
	awk -v a="$base" -v b="$ir" -v n="$n" -v p="$per" -v w="$w" \
		'BEGIN {printf "%-32s %14.0f\n", w, (b - a) / (n * p)}'
done
