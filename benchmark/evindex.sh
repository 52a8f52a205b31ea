#!/usr/bin/env bash
# benchmark/evindex.sh [N]: the event tables' ev_txid index and its
# alternatives (issue #30 item 1, ADR 0073), producer side.  For each
# layout of a queue's child tables - the btree of today, a BRIN minmax on
# ev_txid (pages_per_range 4 and 32, the tail left unsummarised as a
# producer finds it), no index at all - it counts:
#   - instructions per event (callgrind on a single-user backend, as
#     benchmark/instructions.sh: load-independent), with the inclusive
#     share of the index insert, the heap insert, WAL insertion and the
#     commit, from callgrind_annotate;
#   - WAL bytes per event (pg_current_wal_lsn around N statements on a
#     running server, after a checkpoint).
# Workloads: send(q, payload), one event per transaction, and send_batch
# of 100 (N/10 statements).  brin4t is brin4 in its steady state: every 50
# statements (as a tick would) the ranges completed since are summarised
# (brin_summarize_range on complete ranges only: a summarised partial range
# would make every later insert into it update its summary), the
# summarisation counted in the figure.  The layouts are made by replacing the child
# tables' index of a queue (the producer's kept plan follows: relcache
# invalidation), so the producer code is the one of this build.
set -euo pipefail
cd "$(dirname "$0")/.."
. benchmark/lib.sh
N=${1:-500}
NB=$((N / 10))
command -v valgrind >/dev/null || { echo "valgrind is needed" >&2; exit 1; }
# full_page_writes off: WAL is counted as records, without the page images
# a checkpoint's first touch adds (the btree's pages get them too)
# (benchmark/server.conf's settings; autovacuum off: the counts repeat)
bench_server evindex 56711 "autovacuum = off" "full_page_writes = off"
psql_() { "${PSQL[@]}" "$@"; }
psql_ >/dev/null -c "$BENCH_XID8_BRIN_OPCLASS"
psql_ >/dev/null <<'SQL'
create extension pgque_bgw;
create function public.relayout(q text, how text) returns void language plpgsql as $$
declare t text; qid int4 := (select queue_id from pgque.queue where queue_name = q);
begin
    for i in 0 .. 2 loop
        t := 'event_' || qid || '_' || i;
        execute format('drop index pgque.%I', t || '_txid_idx');
        if how like 'brin%' then
            execute format('create index %I on pgque.%I using brin (ev_txid public.xid8_minmax_ops)'
                           ' with (pages_per_range = %s, autosummarize = off)',
                           t || '_txid_idx', t, substr(how, 5));
        end if;
    end loop;
end $$;
select pgque.create_queue('btree'), pgque.create_queue('brin4'), pgque.create_queue('brin32'),
       pgque.create_queue('none'), pgque.create_queue('brin4t');
select public.relayout('brin4', 'brin4'), public.relayout('brin32', 'brin32'),
       public.relayout('none', 'none'), public.relayout('brin4t', 'brin4');
-- summarise the complete ranges of the last 64 of queue q's current table
create function public.summarise(q text) returns void language plpgsql as $$
declare t text := 'event_' || (select queue_id from pgque.queue where queue_name = q) || '_0';
        nr int8 := pg_relation_size(format('pgque.%I', t)) / 8192 / 4;
begin
    perform brin_summarize_range(format('pgque.%I', t || '_txid_idx')::regclass, r * 4)
       from generate_series(greatest(0, nr - 64), nr - 1) r;
end $$;
create table plain (id bigserial, t timestamptz default now(), typ text, data text);
create role w in role pgque_writer;
SQL
stop_cluster "$WORK"

FUNCS='btinsert|brininsert|brin_summarize_range|heap_insert|heap_multi_insert|XLogInsert|CommitTransaction|ExecInsertIndexTuples|pgque_wake_ticker'
# count FILE N: instructions of a single-user session running FILE, minus
# the empty session's, per event; then the inclusive figures of FUNCS
count() { bench_callgrind < "$1"; }
echo "set role w;" > "$WORK/empty.sql"
base=$(count "$WORK/empty.sql")
printf '%-28s %12s   %s\n' workload instr/event "inclusive per event: $FUNCS"
# stmt Q W: sets n, per and stmt for queue Q (or the table plain), workload W
stmt_for() {
	if [ "$1" = plain ]; then
		if [ "$2" = send ]; then n=$N per=1 stmt="insert into plain (typ, data) values ('default', 'payload-abcdefghij');"
		else n=$NB per=100 stmt="insert into plain (typ, data) select 'default', 'payload-abcdefghij' from generate_series(1, 100);"; fi
	elif [ "$2" = send ]; then
		n=$N per=1 stmt="select pgque.send('$1', 'payload-abcdefghij');"
	else
		n=$NB per=100 stmt="select pgque.send_batch('$1', 'default', array_fill('payload-abcdefghij'::text, array[100]));"
	fi
}
for q in plain btree brin4 brin4t brin32 none; do
	for w in send send_batch_100; do
		stmt_for $q $w
		{ [ $q = plain ] || echo "set role w;"
		  for i in $(seq 1 "$n"); do
			echo "$stmt"
			if [ $q = brin4t ] && [ $((i % 50)) = 0 ]; then
				echo "reset role; select public.summarise('$q'); set role w;"
			fi
		  done; } > "$WORK/w.sql"
		ir=$(count "$WORK/w.sql")
		parts=$(callgrind_annotate --inclusive=yes --threshold=100 "$WORK/cg.out" 2>/dev/null |
			awk -v n="$n" -v p="$per" -v re="^($FUNCS)\$" '
				{ f = $0; sub(/ \[.*$/, "", f); sub(/^.*:/, "", f); v = $1; gsub(",", "", v) }
				f ~ re && !(f in seen) { seen[f] = 1; out = out sprintf(" %s=%.0f", f, v / (n * p)) }
				END { print out }')
		awk -v a="$base" -v b="$ir" -v n="$n" -v p="$per" -v w="$q/$w" -v x="$parts" \
			'BEGIN {printf "%-28s %12.0f  %s\n", w, (b - a) / (n * p), x}'
	done
done

# WAL bytes per event, on a running server
start_cluster_again() { as_pg pg_ctl -D "$WORK/data" -l "$WORK/server.log" -w start >/dev/null; }
start_cluster_again
echo
printf '%-28s %12s\n' workload "WAL B/event"
for q in plain btree brin4 brin4t brin32 none; do
	for w in send send_batch_100; do
		stmt_for $q $w
		{ [ $q = plain ] || echo "set role w;"
		  for i in $(seq 1 "$n"); do
			echo "$stmt"
			if [ $q = brin4t ] && [ $((i % 50)) = 0 ]; then
				echo "reset role; select public.summarise('$q'); set role w;"
			fi
		  done; } > "$WORK/w.sql"
		a=$(psql_ -Atc "select pg_current_wal_insert_lsn()")
		psql_ -f "$WORK/w.sql" >/dev/null
		b=$(psql_ -Atc "select pg_current_wal_insert_lsn()")
		psql_ -Atc "select format('%-28s %12s', '$q/$w', round(pg_wal_lsn_diff('$b', '$a') / ($n * $per), 1))"
	done
done
