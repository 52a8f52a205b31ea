# benchmark/lib.sh: the start-up every benchmark script shares (ADR 0097),
# sourced after `cd` to the repository's root.  One source for each
# setting: the server's settings are benchmark/server.conf's, a script adds
# only what its measurement needs on top (a later line wins in
# postgresql.conf); the port is PGQUE_BENCH_PORT or the script's default;
# the build is skipped with PGQUE_BENCH_NO_INSTALL=1; the SQL the scripts
# share (keyed producer, slot and plain drains, the drain backlog) is
# benchmark/bench.sql and the functions below.  benchmark/outside.sh
# sources none of this on purpose (ADR 0090: a second opinion shares only
# server.conf and the extension).
. test/lib.sh

# bench_settings: benchmark/server.conf's settings, one a line
bench_settings() { grep -v '^#' benchmark/server.conf | grep .; }

# bench_install PACKAGE...: the packages (as root) and a fresh build of
# pgque_bgw installed into PG_CONFIG's server, unless
# PGQUE_BENCH_NO_INSTALL=1 (use that server as it is)
bench_install() {
	[ "${PGQUE_BENCH_NO_INSTALL:-0}" = 1 ] && return 0
	[ $# -eq 0 ] || ensure_packages "$@"
	build_and_install
}

# bench_server NAME DEFAULT_PORT [CONF_LINE...]: a throwaway server in a
# new WORK directory, on PORT (PGQUE_BENCH_PORT, or DEFAULT_PORT), with
# server.conf's settings and then CONF_LINEs; SETTINGS holds what it was
# given (for a report), PSQL a psql into its postgres database (unaligned,
# tuples only).  At exit, the commands of BENCH_AT_EXIT run (eval), then the
# server stops and WORK goes.
BENCH_AT_EXIT=()
bench_server() {
	local name=$1
	PORT=${PGQUE_BENCH_PORT:-$2}
	shift 2
	WORK=$(make_workdir "pgque_$name")
	trap bench_exit EXIT
	mapfile -t SETTINGS < <(bench_settings)
	SETTINGS+=("$@")
	start_cluster "$WORK" "$PORT" "${SETTINGS[@]}"
	PSQL=(as_pg psql -X -q -A -t -h "$WORK" -p "$PORT" -d postgres -v ON_ERROR_STOP=1)
}
bench_exit() {
	local c
	for c in "${BENCH_AT_EXIT[@]}"; do eval "$c" || true; done
	stop_cluster "$WORK"
	rm -rf "$WORK"
}

# bench_sql: benchmark/bench.sql into the server (create or replace: loading
# it twice is harmless)
bench_sql() { "${PSQL[@]}" >/dev/null < benchmark/bench.sql; }

# bench_snapshot: stop the server and keep its data directory as WORK/clean
# (bench_restore puts it back, for a count that starts from the same state)
bench_snapshot() {
	stop_cluster "$WORK"
	as_pg cp -a "$WORK/data" "$WORK/clean"
}
bench_restore() {
	as_pg rm -rf "$WORK/data"
	as_pg cp -a "$WORK/clean" "$WORK/data"
}

# bench_callgrind [KEEP_AS]: instructions of a single-user backend on
# WORK/data running the statements on stdin (one a line), by valgrind's
# callgrind; an ERROR in its output stops the script.  With CALLGRIND_KEEP
# set and KEEP_AS given, the callgrind file is kept as
# $CALLGRIND_KEEP/KEEP_AS.cg.  With BENCH_CALLGRIND_SIM=1, callgrind also
# simulates the caches and the branch predictor (--cache-sim --branch-sim:
# what an instruction costs where the machine has no hardware counters,
# ADR 0116) and the output is every event's total, in callgrind's order:
# Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw Bc Bcm Bi Bim.
bench_callgrind() {
	command -v valgrind >/dev/null || { echo "valgrind is needed" >&2; exit 1; }
	local sim=()
	[ "${BENCH_CALLGRIND_SIM:-0}" = 1 ] && sim=(--cache-sim=yes --branch-sim=yes)
	cat > "$WORK/run.sql"
	as_pg valgrind --tool=callgrind "${sim[@]}" --callgrind-out-file="$WORK/cg.out" \
		"$PGBIN/postgres" --single -D "$WORK/data" postgres < "$WORK/run.sql" > "$WORK/single.log" 2>&1
	bench_single_ok
	if [ -n "${CALLGRIND_KEEP:-}" ] && [ -n "${1:-}" ]; then cp "$WORK/cg.out" "$CALLGRIND_KEEP/$1.cg"; fi
	if [ ${#sim[@]} -gt 0 ]; then
		awk '/^(summary|totals):/ {$1 = ""; print substr($0, 2); exit}' "$WORK/cg.out"
	else
		awk '/^(summary|totals):/ {print $2; exit}' "$WORK/cg.out"
	fi
}
# bench_cputime: "USER SYSTEM", the CPU time in nanoseconds of a
# single-user backend on WORK/data running the statements on stdin (one a
# line), from its rusage (no valgrind; a loaded machine slows each
# instruction, so compare runs taken in alternated order, not absolute
# figures); an ERROR in its output stops the script
bench_cputime() {
	cat > "$WORK/run.sql"
	as_pg /usr/bin/python3 -c 'import resource, subprocess, sys
with open(sys.argv[2]) as i, open(sys.argv[3], "w") as o:
    subprocess.run([sys.argv[1], "--single", "-D", sys.argv[4], "postgres"], stdin=i, stdout=o, stderr=subprocess.STDOUT, check=True)
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print(round(r.ru_utime * 1e9), round(r.ru_stime * 1e9))' "$PGBIN/postgres" "$WORK/run.sql" "$WORK/single.log" "$WORK/data" \
		|| { cat "$WORK/single.log" >&2; exit 1; }
	bench_single_ok
}
# bench_single_ok: stop the script, showing the log, when the single-user
# backend's output has an ERROR
bench_single_ok() {
	if grep -q ERROR "$WORK/single.log"; then cat "$WORK/single.log" >&2; exit 1; fi
}

# bench_hold_xid: a session that holds a transaction with an xid open,
# as make bench's concurrent producers do (every tick taken meanwhile lists
# it in progress, and each relation of a window's read becomes a BitmapOr
# of the ev_txid range and `= any(xip)`, ADR 0086, 0093), until
# bench_release_xid or the exit (its transaction rolls back: it writes
# nothing).  Returns once the server shows its xid.
bench_hold_xid() {
	local i
	[ -z "${BENCH_XID_PID:-}" ] || { echo "bench_hold_xid: already held" >&2; exit 1; }
	[ -p "$WORK/xid.fifo" ] || as_pg mkfifo "$WORK/xid.fifo"
	"${PSQL[@]}" < "$WORK/xid.fifo" >/dev/null &
	BENCH_XID_PID=$!
	exec 9> "$WORK/xid.fifo"
	[[ " ${BENCH_AT_EXIT[*]} " == *" bench_release_xid "* ]] || BENCH_AT_EXIT+=(bench_release_xid)
	echo "set application_name = 'bench_hold_xid'; begin; select pg_catalog.pg_current_xact_id();" >&9
	for i in $(seq 1 300); do
		[ "$("${PSQL[@]}" -c "select count(*) from pg_catalog.pg_stat_activity
			where application_name = 'bench_hold_xid' and backend_xid is not null")" = 1 ] && return 0
		kill -0 "$BENCH_XID_PID" 2>/dev/null || break
		sleep 0.1
	done
	echo "bench_hold_xid: the session holding an xid did not start" >&2
	exit 1
}
bench_release_xid() {
	local i
	[ -n "${BENCH_XID_PID:-}" ] || return 0
	exec 9>&-	# the end of its input: the session ends, its transaction rolled back
	wait "$BENCH_XID_PID" || true
	BENCH_XID_PID=
	# psql may exit before its backend has: wait until the backend has left
	# pg_stat_activity (its transaction ended before, at its exit's abort)
	local n
	for i in $(seq 1 300); do
		n=$("${PSQL[@]}" -c "select count(*) from pg_catalog.pg_stat_activity
			where application_name = 'bench_hold_xid'" 2>/dev/null) || return 0	# no server
		[ "$n" = 0 ] && return 0
		sleep 0.1
	done
}

# have_pgq: PgQ 3 is installed in PG_CONFIG's server
have_pgq() { [ -f "$("$PG_CONFIG" --sharedir)/extension/pgq.control" ]; }

# The drain backlog of make bench (run.sh), drain_wall.sh and
# drain_instructions.sh: queue "drain" (pgque, unbucketed), "drain_b"
# (pgque, 32 partition buckets, keys over 2,000 tenants), "drain_w" (pgque,
# unbucketed, drained a tick window a batch as PgQ is: ADR 0116) and
# "drain" of PgQ, each with consumer "c"; with DRAIN_KEYED=1 also "drain_k"
# (system pgque_keyed: unbucketed, its events keyed as drain_b's, the
# 32-bucket drain's like with like, ADR 0131).
# drain_queues [pgq]: make them (PgQ's only when asked)
drain_queues() {
	"${PSQL[@]}" >/dev/null <<'SQL'
create extension if not exists pgque_bgw;
select pgque.create_queue('drain');
select pgque.subscribe('drain', 'c');
select pgque.create_queue('drain_b'), pgque.set_queue_config('drain_b', 'partition_buckets', '32');
select pgque.subscribe('drain_b', 'c');
select pgque.create_queue('drain_w');
select pgque.subscribe('drain_w', 'c');
SQL
	if [ "${DRAIN_KEYED:-0}" = 1 ]; then
		"${PSQL[@]}" >/dev/null -c "select pgque.create_queue('drain_k')" -c "select pgque.subscribe('drain_k', 'c')"
	fi
	if [ "${1:-}" = pgq ]; then
		"${PSQL[@]}" >/dev/null -c "create extension if not exists pgq" -c "select pgq.create_queue('drain')" \
			-c "select pgq.register_consumer('drain', 'c')"
	fi
}
# drain_window SYSTEM EVENTS: the statements of one tick window of EVENTS
# events for SYSTEM (pgque, pgque_32_buckets, pgque_window, pgq), one a
# line
drain_window() {
	case $1 in
	pgque|pgque_window) local q=drain
	       [ "$1" = pgque_window ] && q=drain_w
	       echo "select count(pgque.send_batch('$q', 'default', array_fill('payload-abcdefghij'::text, array[$2])));"
	       echo "select pgque.ticker('$q');" ;;
	pgque_32_buckets|pgque_keyed) local q=drain_b
	       [ "$1" = pgque_keyed ] && q=drain_k
	       echo "select count(pgque.send_batch('$q', 'default', array_fill('payload-abcdefghij'::text, array[$2]), array(select 'tenant-' || (g % 2000) from generate_series(1, $2) g)));"
	       echo "select pgque.ticker('$q');" ;;
	pgq) echo "select count(pgq.insert_event('drain', 'default', 'payload-abcdefghij')) from generate_series(1, $2);"
	     echo "select pgq.ticker('drain');" ;;
	esac
}
# drain_do SYSTEM [LIMIT]: the DO block (one line) that drains SYSTEM's
# queue, one transaction per batch: pgque and pgque_32_buckets 1,000 events
# a batch (a tick window handed out in parts), pgque_window and PgQ a tick
# window a batch (receive's max_return DRAIN_WINDOW, default 10,000: the
# backlog's window, so that each receive hands out one whole window as
# PgQ's next_batch does, and both commit as often; ADR 0116); with LIMIT,
# it stops once LIMIT events were handed out.  At its end it says, as a
# NOTICE, "drained N events in S s": the events it was handed and the
# server's clock around its loop, for a figure without psql's start
# (drain_notice_eps; ADR 0124)
drain_do() {
	local q=drain stop="" max=1000 end
	[ "$1" = pgque_32_buckets ] && q=drain_b
	[ "$1" = pgque_keyed ] && q=drain_k
	[ "$1" = pgque_window ] && q=drain_w max=${DRAIN_WINDOW:-10000}
	[ -n "${2:-}" ] && stop=" exit when t >= $2;"
	end=" end loop; raise notice 'drained % events in % s', t, extract(epoch from clock_timestamp() - t0); end \$\$;"
	case $1 in
	pgque|pgque_32_buckets|pgque_keyed|pgque_window) echo "do \$\$ declare b bigint; n bigint; t bigint := 0; t0 timestamptz := clock_timestamp(); begin loop select max(batch_id), count(*) into b, n from pgque.receive('$q', 'c', $max); exit when b is null; perform pgque.ack(b); commit; t := t + n;$stop$end" ;;
	pgq) echo "do \$\$ declare b bigint; n bigint; t bigint := 0; t0 timestamptz := clock_timestamp(); begin loop b := pgq.next_batch('drain', 'c'); exit when b is null; select count(*) into n from pgq.get_batch_events(b); perform pgq.finish_batch(b); commit; t := t + n;$stop$end" ;;
	esac
}
# drain_notice_eps: reads drain_do's NOTICE on stdin -> "EVENTS EV/S"
# (nothing when there is no such line, or no time passed)
drain_notice_eps() {
	sed -n 's/.*drained \([0-9]*\) events in \([0-9.e-]*\) s.*/\1 \2/p' |
		awk '$2 > 0 {printf "%d %.0f\n", $1, $1 / $2}'
}
# BRIN has no xid8 operator class in core: minmax over xid8's btree
# operators (the statement evindex.sh, evindex-read.sh, evindex_wall.sh and
# bench_evindex run when they need one)
BENCH_XID8_BRIN_OPCLASS='create operator class public.xid8_minmax_ops for type xid8 using brin as
    operator 1 pg_catalog.< (xid8, xid8), operator 2 pg_catalog.<= (xid8, xid8),
    operator 3 pg_catalog.= (xid8, xid8), operator 4 pg_catalog.>= (xid8, xid8),
    operator 5 pg_catalog.> (xid8, xid8),
    function 1 pg_catalog.brin_minmax_opcinfo(internal),
    function 2 pg_catalog.brin_minmax_add_value(internal, internal, internal, internal),
    function 3 pg_catalog.brin_minmax_consistent(internal, internal, internal),
    function 4 pg_catalog.brin_minmax_union(internal, internal, internal)'
# bench_evindex LAYOUT: every event table's and bucket's ev_txid index
# made LAYOUT (btree, or brin: BRIN minmax pages_per_range 4 through the
# xid8_minmax_ops operator class, public's when the build has none), by
# hand, whatever this build makes (ADR 0073, 0126: the other layout
# measured beside the build's)
bench_evindex() {
	"${PSQL[@]}" >/dev/null <<SQL
do \$\$ declare r record; opc text; begin
  select pg_catalog.format('%I.%I', n.nspname, o.opcname) into opc from pg_catalog.pg_opclass o
    join pg_catalog.pg_namespace n on n.oid = o.opcnamespace join pg_catalog.pg_am a on a.oid = o.opcmethod
   where o.opcname = 'xid8_minmax_ops' and a.amname = 'brin' order by n.nspname = 'pgque' desc limit 1;
  if opc is null and '$1' = 'brin' then
    $BENCH_XID8_BRIN_OPCLASS;
    opc := 'public.xid8_minmax_ops';
  end if;
  for r in select i.indexrelid::regclass as idx, i.indrelid::regclass as tbl, c.relname
             from pg_catalog.pg_index i join pg_catalog.pg_class c on c.oid = i.indexrelid
             join pg_catalog.pg_class t on t.oid = i.indrelid
             join pg_catalog.pg_namespace n on n.oid = t.relnamespace
            where n.nspname = 'pgque' and t.relname ~ '^event_[0-9]+_[0-9]+(_b[0-9]+)?\$' loop
    execute 'drop index ' || r.idx;
    if '$1' = 'brin' then
      execute pg_catalog.format('create index %I on %s using brin (ev_txid %s) with (pages_per_range = 4, autosummarize = off)',
                                r.relname, r.tbl, opc);
    else
      execute pg_catalog.format('create index %I on %s (ev_txid)', r.relname, r.tbl);
    end if;
  end loop;
end \$\$;
SQL
}
# bench_evindex_summarise: every BRIN of the event tables summarised (the
# ticker's duty, ADR 0126, done at once)
bench_evindex_summarise() {
	"${PSQL[@]}" >/dev/null -c "select pg_catalog.brin_summarize_new_values(c.oid) from pg_catalog.pg_class c
		join pg_catalog.pg_am a on a.oid = c.relam join pg_catalog.pg_namespace n on n.oid = c.relnamespace
		where a.amname = 'brin' and n.nspname = 'pgque' and c.relname ~ '^event_'"
}
# drain_backlog WINDOWS WINDOW: the queues (PgQ's too when installed) and
# WINDOWS tick windows of WINDOW events in each, the systems' windows
# interleaved in one session; DRAIN_SYSTEMS: the systems made
drain_backlog() {
	DRAIN_SYSTEMS=(pgque pgque_32_buckets pgque_window)
	[ "${DRAIN_KEYED:-0}" != 1 ] || DRAIN_SYSTEMS+=(pgque_keyed)
	have_pgq && DRAIN_SYSTEMS+=(pgq)
	drain_queues "$(have_pgq && echo pgq)"
	# EVINDEX=btree|brin: the queues' ev_txid index made so by hand
	[ -z "${EVINDEX:-}" ] || bench_evindex "$EVINDEX"
	local sys n=0
	for _ in $(seq 1 "$1"); do
		for sys in "${DRAIN_SYSTEMS[@]}"; do
			if [ "${DRAIN_XIP_COMMIT:-0}" = 1 ]; then
				drain_xip_window "$sys" "$2" "$n"
				n=$((n + 1))
			else
				drain_window "$sys" "$2"
			fi
		done
	done | "${PSQL[@]}" >/dev/null
	if [ "${DRAIN_XIP_COMMIT:-0}" = 1 ]; then
		"${PSQL[@]}" -c "commit prepared 'drain_xip_$(($1 * ${#DRAIN_SYSTEMS[@]}))'" >/dev/null
	fi
	[ "${EVINDEX:-}" != brin ] || bench_evindex_summarise
}
# drain_xip_window SYSTEM EVENTS N: drain_window with make bench's other
# producers as one transaction (prepared, so no session has to stay open):
# it takes an xid before the tick and commits before the next tick, writing
# nothing to the queues, so every window's old tick lists a transaction in
# progress that the new tick sees committed (XIP=2 of drain_instructions.sh,
# ADR 0106)
drain_xip_window() {
	drain_window "$1" "$2" | sed -n 1p
	if [ "$3" -gt 0 ]; then echo "commit prepared 'drain_xip_$3';"; fi
	echo "begin; select pg_catalog.pg_current_xact_id(); prepare transaction 'drain_xip_$(($3 + 1))';"
	# a later xid that completes: a snapshot lists only the in-progress
	# xids below its xmax (the newest completed xid + 1)
	echo "select pg_catalog.pg_current_xact_id();"
	drain_window "$1" "$2" | sed -n '2,$p'
}

# round_medians FILE: FILE's rows "workload,system,clients,ev/s,WAL B/ev"
# (a row a round; the WAL field may be empty) as one row each (workload,
# system, clients), in the order first seen, with the median of its
# rounds' ev/s and WAL bytes (the mean of the two middle ones for an even
# count; an empty WAL field stays empty)
round_medians() {
	awk -F, '
		function med(list,   a, n, i, j, t) {
			n = split(list, a, " ")
			for (i = 2; i <= n; i++) { t = a[i] + 0; for (j = i - 1; j >= 1 && a[j] + 0 > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
			return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
		}
		{ k = $1 FS $2 FS $3; if (!(k in eps)) order[++n] = k; eps[k] = eps[k] " " $4; if ($5 != "") wal[k] = wal[k] " " $5 }
		END {
			for (i = 1; i <= n; i++) {
				k = order[i]
				printf "%s,%.0f,%s\n", k, med(eps[k]), (k in wal) ? sprintf("%.0f", med(wal[k])) : ""
			}
		}
	' "$1"
}
