#!/usr/bin/env bash
# make bench-outside: a second opinion on the headline ratios of make bench
# (issue #30's acceptance: "an independent harness ... agrees within its
# noise").  Written apart from benchmark/run.sh: none of its functions or
# SQL, a server started here; the same server settings
# (benchmark/server.conf), workers off, explicit ticks.
#
# ROUNDS rounds (3).  In each, every figure's systems run one after the
# other, in the opposite order every other round (so that a drift of the
# machine's load falls on both sides), each into a queue or table made
# afresh just before, after a CHECKPOINT:
#   send (type, payload), 1 event/txn, 1 and 2 clients / an INSERT into a
#     table without an index, and / PgQ insert_event
#   send_batch of 100 payloads / an INSERT of 100 rows (a VALUES list);
#     pgbench -M prepared, SECS s each (10)
#   drain of DRAIN events (1,000,000), one consumer / PgQ: a queue filled
#     in transactions of 1,000 events with a tick after each, drained by a
#     DO loop that commits per batch of 1,000 (pgque receive / ack, PgQ
#     next_batch / get_batch_events / finish_batch) and reads every payload;
#     timed inside the server; the loop must hand out exactly DRAIN events.
# The figure of a round is the ratio of its two rates; the report gives the
# median of the rounds' ratios and their min..max, and, against the latest
# make bench (benchmark/results/*-targets.md, preferring a full run to a
# QUICK one, and the CSV beside it), whether the main run's ratio agrees:
# it lies inside min..max widened by NOISE (0.10: 10%) each side.
# Writes benchmark/results/<stamp>-outside.csv and -outside.md (the table).
#
#   benchmark/outside.sh                      the run (as root it installs
#       what it needs: postgresql-15, -server-dev-15, -pgq3; then builds and
#       installs pgque_bgw into PG_CONFIG's server)
#   benchmark/outside.sh --report CSV [MAIN]  the report of a run's CSV,
#       against MAIN (a make bench CSV; none: no comparison)
#   benchmark/outside.sh --main DIR           the make bench CSV the report
#       compares with: the newest *-targets.md of DIR, full runs first
# Knobs: OUTSIDE_ROUNDS, OUTSIDE_SECS, OUTSIDE_DRAIN, OUTSIDE_NOISE,
# OUTSIDE_PORT (56780), OUTSIDE_NO_INSTALL=1 (use PG_CONFIG's server as it is).
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${OUTSIDE_ROUNDS:-3}
SECS=${OUTSIDE_SECS:-10}
DRAIN=${OUTSIDE_DRAIN:-1000000}
NOISE=${OUTSIDE_NOISE:-0.10}
PORT=${OUTSIDE_PORT:-56780}
# bad_knob NAME VALUE WHAT: say which knob is wrong, and stop
bad_knob() { echo "$0: $1=$2: $3" >&2; exit 2; }
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || bad_knob OUTSIDE_ROUNDS "$ROUNDS" "a number of rounds, 1 or more"
[[ $SECS =~ ^[1-9][0-9]*$ ]] || bad_knob OUTSIDE_SECS "$SECS" "whole seconds per pgbench run, 1 or more"
[[ $DRAIN =~ ^[1-9][0-9]*000$ ]] || bad_knob OUTSIDE_DRAIN "$DRAIN" "events to drain, a multiple of 1,000 (one tick per 1,000)"
[[ $NOISE =~ ^0?\.[0-9]+$|^0$ ]] || bad_knob OUTSIDE_NOISE "$NOISE" "a fraction below 1 (0.10: 10%)"
[[ $PORT =~ ^[1-9][0-9]*$ ]] && [ "$PORT" -le 65535 ] || bad_knob OUTSIDE_PORT "$PORT" "a TCP port number"

# The figures: label | numerator system | clients | denominator system |
# clients | the same two rows in a make bench CSV (workload,system,clients).
# The drain here is like with like (a tick every 1,000 events, batches of
# 1,000 on both sides): its make bench row is the one drained a window a
# batch as PgQ is, not the one of 1,000 a batch against PgQ's windows of
# 10,000 (ADR 0116)
FIGURES='send, 1 ev/txn, 1 client / unindexed INSERT|pgque send|1|unindexed INSERT|1|produce_1,pgque send,1|produce_1,plain INSERT,1
send, 1 ev/txn, 2 clients / unindexed INSERT|pgque send|2|unindexed INSERT|2|produce_1,pgque send,2|produce_1,plain INSERT,2
send / PgQ insert_event, 1 client|pgque send|1|PgQ insert_event|1|produce_1,pgque send,1|produce_1,PgQ insert_event,1
send / PgQ insert_event, 2 clients|pgque send|2|PgQ insert_event|2|produce_1,pgque send,2|produce_1,PgQ insert_event,2
send_batch of 100 / multi-row INSERT|pgque send_batch|1|multi-row INSERT|1|produce_100,pgque send_batch,1|produce_100,plain multi-row INSERT,1
drain, one consumer / PgQ|pgque receive/ack|1|PgQ next/get/finish|1|drain,pgque receive/ack per window,1|drain,PgQ next/get/finish,1'

# report CSV MAIN: the markdown table of the figures.  CSV rows:
# round,system,clients,events_per_sec (lines starting with # are notes);
# MAIN: a make bench CSV (workload,system,clients,events_per_sec,...) or
# empty.  A figure's round counts when both its rates are there and the
# denominator is not 0; the median of an even count is the mean of the two
# middle ones; a main-run figure that appears in several rows is their mean.
report() {
	awk -F, -v noise="$NOISE" -v figures="$FIGURES" -v main="${2:-}" '
	function fmt(x) { return sprintf("%.2fx", x) }
	function median(v, n,   i, j, t, s) {
		for (i = 1; i <= n; i++) s[i] = v[i]
		for (i = 2; i <= n; i++) for (j = i; j > 1 && s[j - 1] > s[j]; j--) { t = s[j]; s[j] = s[j - 1]; s[j - 1] = t }
		return n % 2 ? s[(n + 1) / 2] : (s[n / 2] + s[n / 2 + 1]) / 2
	}
	FNR == 1 && FILENAME == main { inmain = 1 }
	/^#/ || /^round,/ || /^workload,/ { next }
	inmain { if ($4 != "") { msum[$1 "," $2 "," $3] += $4; mn[$1 "," $2 "," $3]++ } next }
	{ rate[$1 "|" $2 "|" $3] = $4; if ($1 > rounds) rounds = $1 }
	END {
		nf = split(figures, f, "\n")
		head = "| figure | median | min..max |"
		rule = "|---|---|---|"
		for (r = 1; r <= rounds; r++) { head = head " round " r " |"; rule = rule "---|" }
		print head " make bench | |"
		print rule "---|---|"
		for (i = 1; i <= nf; i++) {
			split(f[i], d, "|")
			n = 0; line = ""
			for (r = 1; r <= rounds; r++) {
				a = rate[r "|" d[2] "|" d[3]]; b = rate[r "|" d[4] "|" d[5]]
				if (a != "" && b != "" && b + 0 != 0) { v[++n] = a / b; line = line " " fmt(a / b) " |" }
				else line = line " |"
			}
			if (n == 0) { print "| " d[1] " | | |" line " | not run |"; continue }
			lo = v[1]; hi = v[1]
			for (k = 2; k <= n; k++) { if (v[k] < lo) lo = v[k]; if (v[k] > hi) hi = v[k] }
			m = median(v, n)
			wlo = lo * (1 - noise); whi = hi * (1 + noise)
			if (main == "") verdict = " | no make bench run to compare |"
			else if (mn[d[6]] == 0 || mn[d[7]] == 0 || msum[d[7]] == 0) verdict = " | not in the make bench run |"
			else {
				mr = (msum[d[6]] / mn[d[6]]) / (msum[d[7]] / mn[d[7]])
				verdict = " " fmt(mr) " | " (mr >= wlo && mr <= whi ? "agrees within noise" : "disagrees") \
					sprintf(" (%.2fx..%.2fx with %d%% noise) |", wlo, whi, noise * 100 + 0.5)
			}
			print "| " d[1] " | " fmt(m) " | " fmt(lo) ".." fmt(hi) " |" line verdict
		}
	}' "$1" ${2:+"$2"}
}

# main_csv DIR: the CSV of the newest make bench targets file in DIR (a full
# run before a QUICK one), or nothing
main_csv() {
	local t
	t=$(ls "$1"/*-targets.md 2>/dev/null | grep -v -- '-quick-targets\.md$' | sort | tail -1 || true)
	[ -n "$t" ] || t=$(ls "$1"/*-targets.md 2>/dev/null | sort | tail -1 || true)
	[ -n "$t" ] && [ -f "${t%-targets.md}.csv" ] && echo "${t%-targets.md}.csv"
	return 0
}

case "${1:-}" in
	--report)
		[ -r "${2:-}" ] || { echo "$0: --report needs a readable CSV" >&2; exit 2; }
		[ -z "${3:-}" ] || [ -r "$3" ] || { echo "$0: $3: no such make bench CSV" >&2; exit 2; }
		report "$2" "${3:-}"; exit 0 ;;
	--main)
		[ -d "${2:-}" ] || { echo "$0: --main needs a directory" >&2; exit 2; }
		main_csv "$2"; exit 0 ;;
	"") ;;
	*) echo "usage: $0 [--report CSV [MAIN] | --main DIR]" >&2; exit 2 ;;
esac

# ---- the run --------------------------------------------------------------
PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
if [ "${OUTSIDE_NO_INSTALL:-0}" != 1 ] && [ "$(id -u)" -eq 0 ]; then
	missing=()
	for p in postgresql-15 postgresql-server-dev-15 postgresql-15-pgq3 make gcc; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
	done
	if [ ${#missing[@]} -gt 0 ]; then
		echo "== installing ${missing[*]}"
		DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
	fi
fi
if [ "${OUTSIDE_NO_INSTALL:-0}" != 1 ]; then
	echo "== building and installing pgque_bgw ($PG_CONFIG)"
	# from clean: objects built for another server must not be installed
	make -s clean PG_CONFIG="$PG_CONFIG" >/dev/null
	make -s -j2 PG_CONFIG="$PG_CONFIG" >/dev/null
	make -s install PG_CONFIG="$PG_CONFIG" >/dev/null
fi
BIN=$("$PG_CONFIG" --bindir)
HAVE_PGQ=0
[ -f "$("$PG_CONFIG" --sharedir)/extension/pgq.control" ] && HAVE_PGQ=1

# pg CMD...: as the postgres OS user when root (the server refuses root),
# from /tmp (postgres may not enter this tree)
pg() {
	if [ "$(id -u)" -eq 0 ]; then
		(cd /tmp && runuser -u postgres -- env PATH="$BIN:$PATH" "$@")
	else
		env PATH="$BIN:$PATH" "$@"
	fi
}
DIR=$(mktemp -d /tmp/pgque_outside.XXXXXX)
[ "$(id -u)" -eq 0 ] && chown postgres: "$DIR"
cleanup() {
	pg pg_ctl -D "$DIR/data" -m fast -w stop >/dev/null 2>&1 || true
	rm -rf "$DIR"
}
trap cleanup EXIT
pg initdb -N -D "$DIR/data" -A trust -U postgres >/dev/null
{
	echo "shared_preload_libraries = 'pgque_bgw'"
	echo "listen_addresses = ''"
	echo "unix_socket_directories = '$DIR'"
	echo "port = $PORT"
	grep -v '^#' benchmark/server.conf | grep .
} | pg tee -a "$DIR/data/postgresql.conf" >/dev/null
pg pg_ctl -D "$DIR/data" -l "$DIR/log" -w start >/dev/null
q() { pg psql -X -q -A -t -v ON_ERROR_STOP=1 -h "$DIR" -p "$PORT" -d postgres "$@"; }
q -c "create extension pgque_bgw" >/dev/null
[ "$HAVE_PGQ" = 1 ] && q -c "create extension pgq" >/dev/null

stamp=$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p benchmark/results
CSV="benchmark/results/$stamp-outside.csv"
load0=$(cut -d' ' -f1-3 /proc/loadavg)
{
	echo "# benchmark/outside.sh, $ROUNDS rounds, pgbench $SECS s, drain $DRAIN events; $(nproc) cores, $("$BIN/postgres" --version)"
	echo "# load average at the start: $load0"
	echo "round,system,clients,events_per_sec"
} > "$CSV"

P='outside-0123456789'	# 18 bytes of payload
n_obj=0
# fresh KIND: a new queue (pgque, pgq) or unindexed table (table) for one
# measurement, named in OBJ; the previous ones are dropped first
fresh() {
	n_obj=$((n_obj + 1))
	OBJ="o_$n_obj"
	q -c "select pgque.drop_queue(queue_name, true) from pgque.queue where queue_name like 'o\_%'" >/dev/null
	[ "$HAVE_PGQ" = 1 ] && q -c "select pgq.drop_queue(queue_name, true) from pgq.queue where queue_name like 'o\_%'" >/dev/null
	q -c "select format('drop table %I', tablename) from pg_tables where schemaname = 'public' and tablename like 'o\_%'" |
		while read -r s; do q -c "$s"; done
	case $1 in
		pgque) q -c "select pgque.create_queue('$OBJ')" >/dev/null ;;
		pgq) q -c "select pgq.create_queue('$OBJ')" >/dev/null ;;
		table) q -c "create table $OBJ (ev_id bigserial, ev_time timestamptz not null default now(), ev_type text, ev_data text)" ;;
	esac
}

# rate ROUND SYSTEM CLIENTS PER SCRIPT: pgbench for SECS s; events/s
rate() {
	local round=$1 system=$2 clients=$3 per=$4 out tps failed eps
	echo "$5" | pg tee "$DIR/script.sql" >/dev/null
	q -c checkpoint
	out=$(pg pgbench -n -M prepared -h "$DIR" -p "$PORT" -c "$clients" -j "$clients" -T "$SECS" \
		-f "$DIR/script.sql" postgres 2>&1) || { echo "$out" >&2; exit 1; }
	tps=$(echo "$out" | awk '/^tps = / {print $3}')
	failed=$(echo "$out" | awk '/number of failed transactions/ {print $5}')
	if [ -z "$tps" ] || [ "${failed:-0}" != 0 ]; then echo "$out" >&2; exit 1; fi
	eps=$(awk -v t="$tps" -v p="$per" 'BEGIN {printf "%.0f", t * p}')
	echo "$round,$system,$clients,$eps" >> "$CSV"
	printf '  %-22s %s client(s) %10s ev/s\n' "$system" "$clients" "$eps"
}

send_one() { fresh pgque; rate "$1" "pgque send" "$2" 1 "select pgque.send('$OBJ', 'default', '$P');"; }
insert_one() { fresh table; rate "$1" "unindexed INSERT" "$2" 1 "insert into $OBJ (ev_type, ev_data) values ('default', '$P');"; }
pgq_one() { [ "$HAVE_PGQ" = 1 ] || return 0; fresh pgq; rate "$1" "PgQ insert_event" "$2" 1 "select pgq.insert_event('$OBJ', 'default', '$P');"; }
# a client's batch of 100: an array literal, a VALUES list
ARR="'{$(printf "$P,%.0s" $(seq 99))$P}'::text[]"
VALUES=$(printf "('default', '$P'), %.0s" $(seq 99))"('default', '$P')"
send_100() { fresh pgque; rate "$1" "pgque send_batch" 1 100 "select pgque.send_batch('$OBJ', 'default', $ARR);"; }
insert_100() { fresh table; rate "$1" "multi-row INSERT" 1 100 "insert into $OBJ (ev_type, ev_data) values $VALUES;"; }

# drain ROUND pgque|pgq: fill a fresh queue with DRAIN events (1,000 a
# transaction, a tick after each: every tick must happen), then drain it in
# one DO loop timed in the server; the loop counts the events and payload
# bytes it was handed, and both must be all of them
drain() {
	local round=$1 system fill loop got bytes secs eps
	if [ "$2" = pgque ]; then
		fresh pgque
		system="pgque receive/ack"
		q -c "select pgque.subscribe('$OBJ', 'c')" >/dev/null
		fill="perform pgque.send_batch('$OBJ', 'default', array_fill('$P'::text, array[1000]));
		      commit;
		      if pgque.ticker('$OBJ') is null then raise exception 'no tick after % events', i * 1000; end if;"
		loop="select max(batch_id), count(*), sum(length(payload)) into b, n, len
		        from pgque.receive('$OBJ', 'c', 1000);
		      exit when n = 0;
		      perform pgque.ack(b);"
	else
		[ "$HAVE_PGQ" = 1 ] || return 0
		fresh pgq
		system="PgQ next/get/finish"
		q -c "select pgq.register_consumer('$OBJ', 'c')" >/dev/null
		fill="perform pgq.insert_event('$OBJ', 'default', '$P') from generate_series(1, 1000);
		      commit;
		      if pgq.ticker('$OBJ') is null then raise exception 'no tick after % events', i * 1000; end if;"
		loop="b := pgq.next_batch('$OBJ', 'c');
		      exit when b is null;
		      select count(*), coalesce(sum(length(ev_data)), 0) into n, len from pgq.get_batch_events(b);
		      perform pgq.finish_batch(b);"
	fi
	q -c "do \$\$ begin for i in 1..$((DRAIN / 1000)) loop $fill commit; end loop; end \$\$"
	q -c checkpoint
	read -r got bytes secs < <(q -F ' ' -c "do \$\$
		declare b bigint; n bigint; len bigint; total bigint := 0; total_len bigint := 0;
		        t0 timestamptz := clock_timestamp();
		begin
		  loop
		    $loop
		    total := total + n;
		    total_len := total_len + len;
		    commit;
		  end loop;
		  perform set_config('outside.n', total::text, false), set_config('outside.len', total_len::text, false),
		          set_config('outside.s', extract(epoch from clock_timestamp() - t0)::text, false);
		end \$\$" -c "select current_setting('outside.n'), current_setting('outside.len'), current_setting('outside.s')")
	if [ "$got" != "$DRAIN" ] || [ "$bytes" != "$((DRAIN * ${#P}))" ]; then
		echo "$system handed out $got events ($bytes payload bytes) of $DRAIN" >&2
		exit 1
	fi
	eps=$(awk -v n="$got" -v s="$secs" 'BEGIN {printf "%.0f", n / s}')
	echo "$round,$system,1,$eps" >> "$CSV"
	printf '  %-22s 1 client    %10s ev/s (%s events in %.2f s)\n' "$system" "$eps" "$got" "$secs"
}

# in_order ROUND F...: the functions F in this order in odd rounds, in the
# opposite order in even ones
in_order() {
	local round=$1 i
	shift
	local fs=("$@")
	if [ $((round % 2)) = 1 ]; then
		for ((i = 0; i < ${#fs[@]}; i++)); do ${fs[i]}; done
	else
		for ((i = ${#fs[@]} - 1; i >= 0; i--)); do ${fs[i]}; done
	fi
}

echo "== outside harness: $ROUNDS rounds, pgbench $SECS s, drain of $DRAIN events (load average $load0)"
[ "$HAVE_PGQ" = 1 ] || echo "   (no PgQ in $("$PG_CONFIG" --sharedir)/extension: its figures are not run)"
# a warm-up, not recorded: the server's first sessions, catalogs and
# buffers are not the first round's
fresh pgque
echo "select pgque.send('$OBJ', 'default', '$P');" | pg tee "$DIR/script.sql" >/dev/null
pg pgbench -n -M prepared -h "$DIR" -p "$PORT" -c 2 -j 2 -T 2 -f "$DIR/script.sql" postgres >/dev/null 2>&1
for round in $(seq "$ROUNDS"); do
	echo "== round $round ($([ $((round % 2)) = 1 ] && echo "pgque first" || echo "pgque last"))"
	for c in 1 2; do
		in_order "$round" "send_one $round $c" "insert_one $round $c" "pgq_one $round $c"
	done
	in_order "$round" "send_100 $round" "insert_100 $round"
	in_order "$round" "drain $round pgque" "drain $round pgq"
done
fresh none
load1=$(cut -d' ' -f1-3 /proc/loadavg)
echo "# load average at the end: $load1" >> "$CSV"

MAIN=$(main_csv benchmark/results)
MD="benchmark/results/$stamp-outside.md"
{
	echo "Medians of the per-round ratios ($ROUNDS rounds, pgbench $SECS s, drain of $DRAIN events), each round's ratio, and the make bench run ${MAIN:+$MAIN }against min..max widened by $(awk -v n="$NOISE" 'BEGIN {printf "%.0f", n * 100}')% each side; load average $load0 at the start, $load1 at the end."
	echo
	report "$CSV" "$MAIN"
} > "$MD"
echo "== the figures"
cat "$MD"
echo "== results: $CSV $MD"
