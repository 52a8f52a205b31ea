#!/usr/bin/env bash
# benchmark/evindex_wall.sh [ROUNDS] [DUR]: the producer's wall clock with
# the ev_txid btree against a BRIN minmax (pages_per_range 4, unsummarised
# tail as a producer finds it), against the plain INSERT of make bench's
# producer rows (benchmark/run.sh), the systems alternated round by round
# (the order turned each round), each row the median of its rounds
# (round_medians).  Workloads: send (1 and 2 clients) and send_batch of
# 100 (1 client).  EVINDEX=brin: the queue 'bq' is what this build makes;
# the other layout is made by hand (public.relayout).  Wall clock follows
# the machine's load: read the ratios within the run.
set -euo pipefail
cd "$(dirname "$0")/.."
. benchmark/lib.sh
ROUNDS=${1:-3}
DUR=${2:-5}
bench_server evwall 56713
psql_() { "${PSQL[@]}" "$@"; }
psql_ >/dev/null <<'SQL'
create extension pgque_bgw;
create table plain (id bigserial, t timestamptz default now(), typ text, data text);
select pgque.create_queue('btree'), pgque.create_queue('brin');
SQL
# each queue's child tables get the layout its name says, whatever this
# build makes (the other layout by hand)
for q in btree brin; do
	psql_ >/dev/null <<SQL
do \$\$ declare r record; begin
  if not exists (select from pg_catalog.pg_opclass where opcname = 'xid8_minmax_ops') then
    $BENCH_XID8_BRIN_OPCLASS;
  end if;
  for r in select i.indexrelid::regclass as idx, i.indrelid::regclass as tbl, c.relname
             from pg_catalog.pg_index i join pg_catalog.pg_class c on c.oid = i.indexrelid
             join pg_catalog.pg_class t on t.oid = i.indrelid
            where t.relname like 'event\_' || (select queue_id from pgque.queue where queue_name = '$q') || '\_%' loop
    execute 'drop index ' || r.idx;
    if '$q' = 'brin' then
      execute format('create index %I on %s using brin (ev_txid %s) with (pages_per_range = 4, autosummarize = off)',
                     r.relname, r.tbl, (select format('%I.%I', n.nspname, o.opcname) from pg_catalog.pg_opclass o
                     join pg_catalog.pg_namespace n on n.oid = o.opcnamespace where o.opcname = 'xid8_minmax_ops' limit 1));
    else
      execute format('create index %I on %s (ev_txid)', r.relname, r.tbl);
    end if;
  end loop;
end \$\$;
SQL
done
psql_ -c "select t.relname, am.amname from pg_class t join pg_index i on i.indrelid = t.oid join pg_class c on c.oid = i.indexrelid join pg_am am on am.oid = c.relam where t.relname ~ '^event_[0-9]+_[0-9]$' order by 1" | tr '\n' ' '; echo
RESULTS=$WORK/rounds.csv
: > "$RESULTS"
bench() {
	local name=$1 system=$2 clients=$3 per=$4 sql=$5 out tps
	echo "$sql" | as_pg tee "$WORK/script.sql" >/dev/null
	out=$(as_pg env PATH="$PGBIN:$PATH" pgbench -n -M prepared -h "$WORK" -p "$PORT" -c "$clients" -j "$clients" \
		-T "$DUR" -f "$WORK/script.sql" postgres 2>&1)
	tps=$(echo "$out" | awk '/^tps/ {print $3}')
	echo "$name,$system,$clients,$(awk -v t="$tps" -v p="$per" 'BEGIN {printf "%.0f", t * p}')," >> "$RESULTS"
}
W=(
 "produce_1|plain INSERT|1|1|insert into plain (typ, data) values ('default', 'payload-abcdefghij');"
 "produce_1|send btree|1|1|select pgque.send('btree', 'payload-abcdefghij');"
 "produce_1|send brin|1|1|select pgque.send('brin', 'payload-abcdefghij');"
 "produce_1|plain INSERT|2|1|insert into plain (typ, data) values ('default', 'payload-abcdefghij');"
 "produce_1|send btree|2|1|select pgque.send('btree', 'payload-abcdefghij');"
 "produce_1|send brin|2|1|select pgque.send('brin', 'payload-abcdefghij');"
 "produce_100|plain multi-row INSERT|1|100|insert into plain (typ, data) select 'default', 'payload-abcdefghij' from generate_series(1, 100);"
 "produce_100|send_batch btree|1|100|select pgque.send_batch('btree', 'default', array_fill('payload-abcdefghij'::text, array[100]));"
 "produce_100|send_batch brin|1|100|select pgque.send_batch('brin', 'default', array_fill('payload-abcdefghij'::text, array[100]));"
)
n=${#W[@]}
for r in $(seq 1 "$ROUNDS"); do
	for i in $(seq 0 $((n - 1))); do
		IFS='|' read -r a b c d e <<< "${W[$(((i + r - 1) % n))]}"
		bench "$a" "$b" "$c" "$d" "$e"
	done
	echo "round $r done (load $(cut -d' ' -f1 /proc/loadavg))" >&2
done
echo "== rounds"; cat "$RESULTS"
echo "== medians of $ROUNDS rounds of $DUR s, and the ratio to the plain INSERT of the same clients"
round_medians "$RESULTS" | sort -t, -k1,1 -k3,3 -k2,2 | awk -F, '
	{ k = $1 FS $3; v[NR] = $0; if ($2 ~ /^plain/) base[k] = $4 }
	END { for (i = 1; i <= NR; i++) { split(v[i], f, ","); k = f[1] FS f[3]
		printf "%-12s %-24s %s clients %8s ev/s  %.2fx\n", f[1], f[2], f[3], f[4], f[4] / base[k] } }'
