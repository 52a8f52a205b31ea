#!/usr/bin/env bash
# benchmark/proxy_instructions.sh [N]: instructions per call of a keyed send
# and of a keyed send_batch of 100, on a shard directly and through a
# pgque_proxy database (S = 1), counted by valgrind's callgrind in every
# backend: the proxy's and the shard's, so that each side's cost is its own
# figure, the same on a loaded machine as on a quiet one (ADR 0084).
#
# One throwaway server runs under valgrind --trace-children (one callgrind
# file per backend).  Each workload is pgbench with prepared statements, as
# drivers use them, run twice, for 50 and for 50 + N transactions; the
# difference divided by N leaves connection start-up out.  A backend is
# told apart by what it ran: the proxy's calls plproxy or the keyed send's
# C path (pgque_proxy_send_keyed itself: the backend that created the
# extension ran only its pg_finfo_ function, ADR 0115), the shard's and
# the direct one run pgque_bgw's send, pgbench's first connection neither.
set -euo pipefail
cd "$(dirname "$0")/.."
. benchmark/lib.sh
N=${1:-500}
command -v valgrind >/dev/null || { echo "valgrind is needed" >&2; exit 1; }
# benchmark/server.conf's settings; autovacuum off: the counts repeat.
# The server under valgrind is stopped at once at exit (its callgrind
# files are written by then)
bench_server proxy_instr 56702 "autovacuum = off"
BENCH_AT_EXIT=('as_pg pg_ctl -D "$WORK/data" -m immediate -w stop >/dev/null 2>&1')
CG="$WORK/cg"
as_pg mkdir "$CG"
as_pg pg_ctl -D "$WORK/data" -m fast -w stop >/dev/null
(cd /tmp && runuser -u postgres -- setsid valgrind --tool=callgrind --trace-children=yes \
	--callgrind-out-file="$CG/cg.%p" "$PGBIN/postgres" -D "$WORK/data" >"$WORK/valgrind.log" 2>&1 &)
for _ in $(seq 1 120); do as_pg pg_isready -q -h "$WORK" -p "$PORT" && break; sleep 1; done
P() { as_pg psql -X -q -A -t -h "$WORK" -p "$PORT" -v ON_ERROR_STOP=1 "$@"; }
P -d postgres -c "create database shard0" -c "create database proxy1"
P -d shard0 -c "create extension pgque_bgw" -c "select pgque.create_queue('bench')" >/dev/null
P -d proxy1 -c "set client_min_messages = warning" -c "create extension pgque_proxy cascade" \
	-c "select pgque.set_shards(array['host=$WORK port=$PORT dbname=shard0'])" \
	-c "create user mapping for public server pgque_shards" >/dev/null
as_pg tee "$WORK/one.sql" >/dev/null <<'EOF'
\set k random(1, 2000)
select pgque.send('bench', 'default', 'payload-abcdefghij', 'tenant-' || :k);
EOF
as_pg tee "$WORK/hundred.sql" >/dev/null <<'EOF'
\set k random(1, 2000)
select pgque.send_batch('bench', 'default', array_fill('payload-abcdefghij'::text, array[100]),
                        array(select 'tenant-' || ((:k + i * 37) % 2000) from generate_series(1, 100) i));
EOF

# run DB SCRIPT T: pgbench for T transactions; prints "proxy shard" totals
# of the backends it started (proxy 0 on a direct run)
run() {
	local before f proxy=0 shard=0 ir
	before=$(ls "$CG")
	as_pg pgbench -n -M prepared -h "$WORK" -p "$PORT" -t "$3" -f "$WORK/$2.sql" "$1" >/dev/null 2>&1
	# the backends write their files when they exit, the shard's when the
	# proxy's connection to it closes
	sleep 5
	for f in $(ls "$CG"); do
		grep -qx "$f" <<<"$before" && continue
		ir=$(awk '/^(summary|totals):/ {print $2; exit}' "$CG/$f")
		if grep -qE 'plproxy_exec|[ =)]pgque_proxy_send_(batch_)?keyed$' "$CG/$f"; then proxy=$ir
		elif grep -q 'pgque_send' "$CG/$f"; then shard=$ir; fi
	done
	echo "$proxy $shard"
}

printf '%-28s %14s %14s %14s\n' "workload" "proxy/call" "shard/call" "total/call"
for w in "shard0 one|send on the shard" "proxy1 one|send via proxy S=1" \
         "shard0 hundred|send_batch 100 on the shard" "proxy1 hundred|send_batch 100 via proxy S=1"; do
	IFS='|' read -r args name <<<"$w"
	read -r p0 s0 < <(run $args 50)
	read -r p1 s1 < <(run $args $((50 + N)))
	awk -v n="$N" -v name="$name" -v p0="$p0" -v p1="$p1" -v s0="$s0" -v s1="$s1" \
		'BEGIN {p = (p1 - p0) / n; s = (s1 - s0) / n; printf "%-28s %14.0f %14.0f %14.0f\n", name, p, s, p + s}'
done
