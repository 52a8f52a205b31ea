#!/usr/bin/env bash
# make test: every test of pgque_bgw against real servers with the module
# preloaded.  Installs what is missing, builds with -Werror, then runs
#   pg_regress            test/sql/*.sql      vs test/expected/*.out
#   pg_isolation_regress  test/specs/*.spec   vs test/expected/*.out
#   pg_prove (pgTAP)      test/pgtap/*.sql    the privilege matrix
#   prove (TAP)           test/t/*.pl         PostgreSQL::Test::Cluster
#   make installcheck     pg_regress + isolation through the Makefile's
#                         REGRESS/ISOLATION, against a server started by hand
# and ends with one line "N passed, N failed".  Exit status: 0 only if all pass.
set -uo pipefail
cd "$(dirname "$0")/.."
. test/lib.sh
use_chroot && exec test/chroot.sh "$PG"

ensure_packages postgresql-$PG postgresql-server-dev-$PG libpq-dev libipc-run-perl \
	postgresql-$PG-pgtap pgtap postgresql-$PG-cron postgresql-$PG-plproxy postgresql-$PG-pgq3 \
	prometheus-postgres-exporter make gcc || exit 1
echo "== PostgreSQL $("$PG_CONFIG" --version | sed 's/^PostgreSQL //')"
build_and_install || { echo "build failed"; echo "0 passed, 1 failed"; exit 1; }

WORK=$(make_workdir pgque_test)
# the TAP tests read examples/, 023 the monitoring kit and its docs, 036
# the release files, 057 every link of the docs and the files they cite
# (src, benchmark)
cp -r test examples monitoring docs sql src benchmark debian README.md LICENSE CHANGELOG.md META.json pgque_bgw.control "$WORK/"
[ "$(id -u)" -eq 0 ] && chown -R postgres: "$WORK"
T="$WORK/test"
# The suite's own servers use ports PORT_BASE to PORT_BASE + PORT_SPAN - 1
# and no other (test/README.md): regress +0, isolation +1, pgTAP +2, the
# package's smoke test +4.  One range per major by default, so suites of
# different versions can run at once; PGQUE_TEST_PORT gives another base.
# A taken port is tried again PORT_STEP further on while that stays in the
# range (start_free): never in the range of a suite started with the next
# base.  The TAP files' servers take free ports of their own
# (PostgreSQL::Test::Cluster).
PORT_SPAN=20
PORT_STEP=5
PORT_BASE=${PGQUE_TEST_PORT:-$((56500 + (PG - 15) * PORT_SPAN))}

passed=0
failed=0
failures=()

# count_pg_regress LOG: add the tally of a pg_regress/isolation run
count_pg_regress() {
	local ok bad
	# "name ... ok" up to PostgreSQL 15, "ok 1 - name" (TAP) from 16 on
	ok=$(grep -cE '\.\.\. ok|^ok [0-9]+ +[-+] ' "$1")
	# a test whose expected file is missing aborts the run with "diff command failed"
	bad=$(grep -cE '\.\.\. FAILED|\.\.\. failed|^not ok [0-9]+ +[-+] |diff command failed' "$1")
	passed=$((passed + ok))
	failed=$((failed + bad))
}

# PGQUE_TAP_ONLY=pattern (development only): run just the matching TAP files
# PGQUE_SKIP_TAP=1 (development only): no TAP, no package
# PGQUE_SKIP_PACKAGE=1: no package test (it installs into the system's
# PostgreSQL, /usr/lib/postgresql: not for a private PGBIN)
run_others=1
[ -n "${PGQUE_TAP_ONLY:-}" ] && run_others=
run_package=
PKGDIR=
[ -n "$run_others" ] && [ -z "${PGQUE_SKIP_TAP:-}" ] && [ -z "${PGQUE_SKIP_PACKAGE:-}" ] && run_package=1

# Everything below runs at once (ADR 0064): most of it waits on workers'
# intervals, leases, timeouts and fsyncs, not on the CPU.
#  - pg_regress and isolation once, as a user runs them: make installcheck
#    (the Makefile's REGRESS and ISOLATION) against servers started by hand
#    with the test configuration (docs/install.md), regress and isolation
#    each on its own server.  Each test counts, and the installcheck as a
#    whole counts one.
#  - pgTAP: each file installs the extension itself (as a non-superuser) in
#    a transaction it rolls back; the workers stay off.  Every "ok"/"not ok"
#    line counts; a run that cannot start or ends badly without a "not ok"
#    counts as one failure, never as a pass.
#  - the package is built and checked by lintian (test/deb.sh build-check);
#    installing it waits for the TAP files (it replaces the server's files).
#  - the TAP files, in lanes (below).
IC="$WORK/installcheck"
# start_free DIR PORT [conf...]: start_cluster, and when PORT is taken (by
# a server of another run, say) the ports PORT_STEP apart after it that are
# still in this suite's range; the port goes to DIR/port.  None free: a
# line that says so, and no DIR/port (the part fails).
start_free() {
	local dir=$1 port=$2 tried
	shift 2
	if start_cluster "$dir" "$port" "$@"; then
		echo "$port" >"$dir/port"
		return 0
	fi
	tried=$port
	while [ $((port + PORT_STEP)) -lt $((PORT_BASE + PORT_SPAN)) ]; do
		port=$((port + PORT_STEP))
		tried="$tried $port"
		echo "port = $port" | as_pg tee -a "$dir/data/postgresql.conf" >/dev/null
		if as_pg pg_ctl -D "$dir/data" -l "$dir/server.log" -w start >/dev/null; then
			echo "== $dir: on port $port"
			echo "$port" >"$dir/port"
			return 0
		fi
	done
	echo "== $dir: no free port in this suite's range $PORT_BASE-$((PORT_BASE + PORT_SPAN - 1)) (tried $tried):" \
		"another run holds them; give this one another base (PGQUE_TEST_PORT)"
	return 1
}
# installcheck_start NAME PORT: a server for one half of make installcheck,
# and its copy of the tree postgres can write to
installcheck_start() {
	as_pg mkdir -p "$IC/$1/src"
	cp -r Makefile pgque_bgw.control sql test "$IC/$1/src/"
	[ "$(id -u)" -eq 0 ] && chown -R postgres: "$IC/$1/src"
	start_free "$IC/$1" "$2" "include '$T/pgque_test.conf'"
}
# installcheck_run NAME REGRESS=... ISOLATION=...: that half
installcheck_run() {
	local name=$1 port
	shift
	port=$(cat "$IC/$name/port" 2>/dev/null || echo 0)
	as_pg env PGHOST="$IC/$name" PGPORT="$port" PGUSER=postgres \
		make -C "$IC/$name/src" installcheck TAP_TESTS= "$@" ${PG_CONFIG:+PG_CONFIG=$PG_CONFIG} \
		>"$WORK/installcheck_$name.log" 2>&1
	echo $? >"$WORK/installcheck_$name.rc"
	stop_cluster "$IC/$name"
}
if [ -n "$run_others" ]; then
	echo "== make installcheck (regress, isolation), pgTAP$([ -n "$run_package" ] && echo ", the package build") beside the TAP files (at ${SECONDS} s)"
	# the three servers are up before the TAP files pick their ports: a TAP
	# server or an exporter takes no port that is bound
	installcheck_start regress $PORT_BASE &
	installcheck_start isolation $((PORT_BASE + 1)) &
	( as_pg mkdir -p "$WORK/pgtap"
	  start_free "$WORK/pgtap" $((PORT_BASE + 2)) "pgque_bgw.enabled = off" "autovacuum = off" ) &
	wait
	installcheck_run regress ISOLATION= &
	installcheck_run isolation REGRESS= &
	( as_pg pg_prove -v -h "$WORK/pgtap" -p "$(cat "$WORK/pgtap/port" 2>/dev/null || echo 0)" -U postgres -d postgres "$T"/pgtap/*.sql \
		>"$WORK/pgtap.log" 2>&1
	  echo $? >"$WORK/pgtap.rc"
	  stop_cluster "$WORK/pgtap" ) &
	if [ -n "$run_package" ]; then
		# root's private directory, not WORK (test/deb.sh builddir)
		PKGDIR=$(test/deb.sh builddir) || PKGDIR=
		[ -n "$PKGDIR" ] && ( test/deb.sh build-check "$PKGDIR" >"$PKGDIR/check.log" 2>&1; echo $? >"$PKGDIR/check.rc" ) &
	fi
else
	echo "== PGQUE_TAP_ONLY=$PGQUE_TAP_ONLY: pg_regress, isolation, pgTAP and the package skipped (not a full run)"
fi

# PGQUE_SKIP_TAP=1 (development only): pg_regress and isolation alone
if [ -n "${PGQUE_SKIP_TAP:-}" ]; then
	echo "== PGQUE_SKIP_TAP: TAP skipped (not a full run)"
	failures+=("TAP skipped")
fi
# 028_full_disk fills a small file system: a tmpfs, which only root can
# mount.  As root, one is mounted here for it (the test fails when this did
# not work); not as root, the test skips itself (the manual procedure is in
# docs/operations.md).  The mount point is root's own (mktemp), not a path
# in WORK: WORK is the postgres user's, who could make WORK/tmpfs a
# symbolic link to any directory for root to mount over.
TMPFS=
if [ "$(id -u)" -eq 0 ] && [ -z "${PGQUE_SKIP_TAP:-}" ] && ls test/t/*${PGQUE_TAP_ONLY:-}*.pl | grep -q full_disk; then
	TMPFS=$(mktemp -d /tmp/pgque_tmpfs.XXXXXX)
	if mount -t tmpfs -o size=8m,mode=0700 pgque_test_tmpfs "$TMPFS"; then
		chown postgres: "$TMPFS"
		trap 'umount "$TMPFS" 2>/dev/null; rmdir "$TMPFS" 2>/dev/null' EXIT
	else
		echo "mounting a tmpfs at $TMPFS failed"
	fi
fi
# tap_one NAME: run one TAP file; its log and exit status go to $WORK
tap_one() {
	local name=$1 t0=$SECONDS
	as_pg mkdir -p "$WORK/tap/$name"
	# TESTDIR for PostgreSQL 15-16, TESTDATADIR/TESTLOGDIR for 17 on;
	# one port lock directory for every lane (PostgreSQL::Test::Cluster);
	# one initdb template for every file (test/t/PgqueNode.pm, ADR 0064)
	as_pg env TESTDIR="$WORK/tap/$name" PG_REGRESS="$PGXS_TEST/regress/pg_regress" \
		TESTDATADIR="$WORK/tap/$name/tmp_check" TESTLOGDIR="$WORK/tap/$name/tmp_check/log" \
		PG_TEST_PORT_DIR="$WORK/portlock" PGQUE_INITDB_TEMPLATE="$WORK/initdb_template" \
		PGQUE_SRC="$T" PGQUE_TMPFS="$TMPFS" PGQUE_AS_ROOT="$([ "$(id -u)" -eq 0 ] && echo 1)" \
		prove --timer -I "$PGXS_TEST/perl" -I "$T/t" -v "$T/t/$name" >"$WORK/tap_$name.log" 2>&1
	echo "$? $((SECONDS - t0))" >"$WORK/tap_$name.rc"
}
# tap_lane NAME...: run, one after another, each file of the list that no
# other lane has claimed yet (mkdir is the atomic claim)
tap_lane() {
	local name
	for name in "$@"; do
		as_pg mkdir "$WORK/claim/$name" 2>/dev/null && tap_one "$name"
	done
	return 0
}

# The TAP files run in lanes beside the other parts: most of their time is
# spent waiting for workers' intervals, leases and timeouts, not on the
# CPU.  A file that times something (a line "# tap-lane: timed": a bound on
# a duration, a window in which something must or must not happen) runs in
# the timed lane, one at a time; the others run in PGQUE_TAP_LANES more
# lanes (default 4), and the timed lane takes them too once its own are
# done.  The longest files start first (test/t/tap-order: the files in
# order of their last measured duration, longest first; a file not listed
# starts after them); the results are tallied in name order below.
tap_files=$(cd test/t && ls *${PGQUE_TAP_ONLY:-}*.pl | sort)
[ -n "${PGQUE_SKIP_TAP:-}" ] && tap_files=
ordered=$( { grep -v '^#' test/t/tap-order 2>/dev/null; echo "$tap_files"; } |
	awk 'NF && !seen[$1]++ { print $1 }' | grep -Fxf <(echo "$tap_files"))
timed=
untimed=
for name in $ordered; do
	if grep -q '^# tap-lane: timed' "test/t/$name"; then timed="$timed $name"; else untimed="$untimed $name"; fi
done
as_pg mkdir -p "$WORK/portlock" "$WORK/claim"
lanes=${PGQUE_TAP_LANES:-4}
if [ -n "$tap_files" ]; then
	echo "== TAP: $(echo $timed | wc -w) timed files in a lane of their own, $(echo $untimed | wc -w) in $lanes lanes (at ${SECONDS} s)"
	tap_lane $timed $untimed &
	for _ in $(seq "$lanes"); do
		tap_lane $untimed &
	done
fi
wait
echo "== all parts done (at ${SECONDS} s)"

# tallies: installcheck, pgTAP, then the TAP files
if [ -n "$run_others" ]; then
	for part in regress isolation; do
		cat "$WORK/installcheck_$part.log"
		count_pg_regress "$WORK/installcheck_$part.log"
	done
	rc_r=$(cat "$WORK/installcheck_regress.rc" 2>/dev/null || echo 1)
	rc_i=$(cat "$WORK/installcheck_isolation.rc" 2>/dev/null || echo 1)
	ok_r=$(grep -cE '\.\.\. ok|^ok [0-9]+ +[-+] ' "$WORK/installcheck_regress.log")
	ok_i=$(grep -cE '\.\.\. ok|^ok [0-9]+ +[-+] ' "$WORK/installcheck_isolation.log")
	if [ "$rc_r" -eq 0 ] && [ "$rc_i" -eq 0 ] && [ "$ok_r" -gt 0 ] && [ "$ok_i" -gt 0 ]; then
		passed=$((passed + 1))
		echo "make installcheck ... ok ($ok_r regress, $ok_i isolation tests)"
	else
		failed=$((failed + 1))
		failures+=("installcheck")
		echo "make installcheck ... FAILED"
		for part in regress isolation; do
			tail -n 60 "$WORK/installcheck_$part.log"
			find "$IC/$part/src" -name regression.diffs -exec cat {} \;
		done
	fi

	rc=$(cat "$WORK/pgtap.rc" 2>/dev/null || echo 1)
	ok=$(grep -cE '^ok [0-9]+' "$WORK/pgtap.log")
	bad=$(grep -cE '^not ok [0-9]+' "$WORK/pgtap.log")
	passed=$((passed + ok))
	failed=$((failed + bad))
	if [ "$rc" -ne 0 ] || [ "$bad" -ne 0 ] || [ "$ok" -eq 0 ]; then
		[ "$bad" -eq 0 ] && failed=$((failed + 1))
		failures+=("pgTAP")
		echo "pgTAP ... FAILED ($ok ok, $bad not ok)"
		cat "$WORK/pgtap.log"
		tail -n 40 "$WORK/pgtap/server.log"
	else
		echo "pgTAP ... ok ($ok assertions)"
	fi
fi

for name in $(echo "$tap_files" | sort); do
	read -r rc secs <"$WORK/tap_$name.rc" 2>/dev/null || { rc=1; secs=0; }
	ok=$(grep -cE '^ok [0-9]+' "$WORK/tap_$name.log")
	skip=$(grep -cE '^ok [0-9]+.*# [Ss][Kk][Ii][Pp]' "$WORK/tap_$name.log")
	bad=$(grep -cE '^not ok [0-9]+' "$WORK/tap_$name.log")
	passed=$((passed + ok - skip))
	failed=$((failed + bad + skip))
	if [ "$rc" -ne 0 ] || [ "$bad" -ne 0 ] || [ "$skip" -ne 0 ]; then
		[ "$bad" -eq 0 ] && [ "$skip" -eq 0 ] && failed=$((failed + 1))
		failures+=("$name")
		echo "$name ... FAILED ($ok ok, $bad not ok, $skip skipped, $secs s)"
		cat "$WORK/tap_$name.log"
		ls "$WORK/tap/$name/tmp_check/log/" 2>/dev/null | while read -r f; do
			echo "---- $f (tail)"; tail -n 40 "$WORK/tap/$name/tmp_check/log/$f"
		done
	else
		echo "$name ... ok ($ok assertions, $secs s)"
		# figures the tests print (diag lines marked "figure:")
		grep -E '^# figure:' "$WORK/tap_$name.log" | sed 's/^# /    /'
	fi
done
echo "== TAP done (at ${SECONDS} s, $lanes lanes)"

[ -n "$TMPFS" ] && { umount "$TMPFS" 2>/dev/null; rmdir "$TMPFS" 2>/dev/null; }

# The Debian package (make deb): built from a copy of the tree and checked
# by lintian beside the tests above (test/deb.sh build-check); installed
# with apt-get, a smoke test, removed (test/deb.sh smoke) after TAP: it
# replaces the server's pgque files while it is installed.
if [ -n "$run_package" ]; then
	[ -n "$PKGDIR" ] && cat "$PKGDIR/check.log"
	if [ -n "$PKGDIR" ] && [ "$(cat "$PKGDIR/check.rc" 2>/dev/null || echo 1)" -eq 0 ] &&
		test/deb.sh smoke "$WORK" $((PORT_BASE + 4)) "$PKGDIR"; then
		passed=$((passed + 1))
	else
		failed=$((failed + 1))
		failures+=("package")
	fi
fi
[ ${#failures[@]} -gt 0 ] && echo "failing: ${failures[*]} (work files in $WORK)"
[ ${#failures[@]} -eq 0 ] && rm -rf "$WORK"
echo "== total time: $((SECONDS / 60)) min $((SECONDS % 60)) s"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ ${#failures[@]} -eq 0 ]
