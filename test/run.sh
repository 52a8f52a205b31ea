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

ensure_packages postgresql-$PG postgresql-server-dev-$PG libipc-run-perl \
	postgresql-$PG-pgtap pgtap postgresql-$PG-cron postgresql-$PG-plproxy \
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
# one port range per major, so suites of different versions can run at once
PORT_BASE=${PGQUE_TEST_PORT:-$((56500 + (PG - 15) * 10))}

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
if [ -n "${PGQUE_TAP_ONLY:-}" ]; then
	echo "== PGQUE_TAP_ONLY=$PGQUE_TAP_ONLY: pg_regress and isolation skipped (not a full run)"
else
regress_tests=$(cd test/sql && ls *.sql | sed 's/\.sql$//' | sort)
isolation_tests=$(cd test/specs && ls *.spec | sed 's/\.spec$//' | sort)
# pg_regress and isolation side by side, each on its own temporary server:
# one runs one session at a time, the other mostly waits on locks and
# timeouts (together about 30 s shorter than one after the other)
echo "== pg_regress and isolation, side by side (at ${SECONDS} s)"
( as_pg "$PGXS_TEST/regress/pg_regress" \
	--bindir="$PGBIN" --inputdir="$T" --outputdir="$WORK/regress" \
	--temp-instance="$WORK/regress/tmp" --temp-config="$T/pgque_test.conf" \
	--port=$PORT_BASE --dbname=contrib_regression \
	$regress_tests >"$WORK/regress.log" 2>&1; echo $? >"$WORK/regress.rc" ) &
( as_pg "$PGXS_TEST/isolation/pg_isolation_regress" \
	--bindir="$PGBIN" --inputdir="$T" --outputdir="$WORK/isolation" \
	--temp-instance="$WORK/isolation/tmp" --temp-config="$T/pgque_test.conf" \
	--port=$((PORT_BASE + 1)) --dbname=isolation_regression \
	$isolation_tests >"$WORK/isolation.log" 2>&1; echo $? >"$WORK/isolation.rc" ) &
wait
for part in regress isolation; do
	cat "$WORK/$part.log"
	count_pg_regress "$WORK/$part.log"
	if [ "$(cat "$WORK/$part.rc" 2>/dev/null || echo 1)" -ne 0 ]; then
		[ "$part" = regress ] && failures+=("pg_regress") || failures+=("isolation")
		[ -f "$WORK/$part/regression.diffs" ] && cat "$WORK/$part/regression.diffs"
		grep -qE '\.\.\. (ok|FAILED|failed)|^(not )?ok [0-9]+ +[-+] ' "$WORK/$part.log" || failed=$((failed + 1))
	fi
done

# make installcheck, as a user runs it: pg_regress and isolation through
# the Makefile's REGRESS/ISOLATION against a server started by hand with
# the test configuration (docs/install.md), from a copy postgres can write
# to.  Counted as one: its tests are the ones above.
# pgTAP: each file installs the extension itself (as a non-superuser) in a
# transaction it rolls back; the workers stay off.  Every "ok"/"not ok" line
# counts; a run that cannot start or ends badly without a "not ok" counts as
# one failure, never as a pass.
# The two run side by side, each against its own server.
echo "== make installcheck and pgTAP, side by side (at ${SECONDS} s)"
IC="$WORK/installcheck"
as_pg mkdir -p "$IC/src" "$WORK/pgtap"
cp -r Makefile pgque_bgw.control sql test "$IC/src/"
[ "$(id -u)" -eq 0 ] && chown -R postgres: "$IC/src"
( start_cluster "$IC" $((PORT_BASE + 3)) "include '$T/pgque_test.conf'"
  as_pg env PGHOST="$IC" PGPORT=$((PORT_BASE + 3)) PGUSER=postgres \
	make -C "$IC/src" installcheck TAP_TESTS= ${PG_CONFIG:+PG_CONFIG=$PG_CONFIG} >"$WORK/installcheck.log" 2>&1
  echo $? >"$WORK/installcheck.rc"
  stop_cluster "$IC" ) &
( start_cluster "$WORK/pgtap" $((PORT_BASE + 2)) "pgque_bgw.enabled = off" "autovacuum = off"
  as_pg pg_prove -v -h "$WORK/pgtap" -p $((PORT_BASE + 2)) -U postgres -d postgres "$T"/pgtap/*.sql \
	>"$WORK/pgtap.log" 2>&1
  echo $? >"$WORK/pgtap.rc"
  stop_cluster "$WORK/pgtap" ) &
wait

rc=$(cat "$WORK/installcheck.rc" 2>/dev/null || echo 1)
ok=$(grep -cE '\.\.\. ok|^ok [0-9]+ +[-+] ' "$WORK/installcheck.log")
if [ "$rc" -eq 0 ] && [ "$ok" -gt 0 ]; then
	passed=$((passed + 1))
	echo "make installcheck ... ok ($ok tests)"
else
	failed=$((failed + 1))
	failures+=("installcheck")
	echo "make installcheck ... FAILED"
	tail -n 60 "$WORK/installcheck.log"
	find "$IC/src" -name regression.diffs -exec cat {} \;
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

# PGQUE_SKIP_TAP=1 (development only): pg_regress and isolation alone
if [ -n "${PGQUE_SKIP_TAP:-}" ]; then
	echo "== PGQUE_SKIP_TAP: TAP skipped (not a full run)"
	failures+=("TAP skipped")
fi
echo "== TAP (at ${SECONDS} s)"
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
	# one port lock directory for every lane (PostgreSQL::Test::Cluster)
	as_pg env TESTDIR="$WORK/tap/$name" PG_REGRESS="$PGXS_TEST/regress/pg_regress" \
		TESTDATADIR="$WORK/tap/$name/tmp_check" TESTLOGDIR="$WORK/tap/$name/tmp_check/log" \
		PG_TEST_PORT_DIR="$WORK/portlock" \
		PGQUE_SRC="$T" PGQUE_TMPFS="$TMPFS" PGQUE_AS_ROOT="$([ "$(id -u)" -eq 0 ] && echo 1)" \
		prove -I "$PGXS_TEST/perl" -I "$T/t" -v "$T/t/$name" >"$WORK/tap_$name.log" 2>&1
	echo "$? $((SECONDS - t0))" >"$WORK/tap_$name.rc"
}

# The TAP files run in PGQUE_TAP_LANES lanes (default 3): most of their
# time is spent waiting for workers' intervals, leases and timeouts, not
# on the CPU.  The files with the higher numbers are the longer ones, so
# they start first; the results are tallied in name order below.
tap_files=$(cd test/t && ls *${PGQUE_TAP_ONLY:-}*.pl | sort -r)
[ -n "${PGQUE_SKIP_TAP:-}" ] && tap_files=
as_pg mkdir -p "$WORK/portlock"
lanes=${PGQUE_TAP_LANES:-3}
running=0
for name in $tap_files; do
	if [ "$running" -ge "$lanes" ]; then
		wait -n
		running=$((running - 1))
	fi
	tap_one "$name" &
	running=$((running + 1))
done
wait

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

# The Debian package (make deb): built from a copy of the tree, lintian,
# installed with apt-get, a smoke test, removed (test/deb.sh).  After TAP:
# it replaces the server's pgque files while it is installed.
if [ -z "${PGQUE_TAP_ONLY:-}" ] && [ -z "${PGQUE_SKIP_TAP:-}" ]; then
	if test/deb.sh smoke "$WORK" $((PORT_BASE + 4)); then
		passed=$((passed + 1))
	else
		failed=$((failed + 1))
		failures+=("package")
	fi
fi
[ ${#failures[@]} -gt 0 ] && echo "failing: ${failures[*]} (work files in $WORK)"
[ ${#failures[@]} -eq 0 ] && rm -rf "$WORK"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ ${#failures[@]} -eq 0 ]
