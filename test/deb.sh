#!/usr/bin/env bash
# The Debian package postgresql-NN-pgque-bgw (debian/, the PostgreSQL team's
# pg_buildext convention).
#   test/deb.sh build            make deb: dpkg-buildpackage into build/deb/
#   test/deb.sh builddir         print a new private directory (TAP 036)
#   test/deb.sh smoke WORK PORT [DIR]
#                                make test: build it from a copy of the tree,
#                                lintian, apt-get install it on this server,
#                                a smoke test on a throwaway cluster that
#                                has no build tree, remove it again; with
#                                DIR, the package build-check made there
#   test/deb.sh build-check DIR  make test, beside the other tests: build it
#                                in DIR (from builddir) and run lintian, the
#                                part of smoke that touches no server
# Both install what they need (apt-get, as root).  The package goes where
# Debian's server looks (/usr/lib/postgresql/NN, /usr/share/postgresql/NN),
# whatever PGBIN says.
set -uo pipefail
cd "$(dirname "$0")/.."
. test/lib.sh
SRC=$PWD
VERSION=$(sed -n "s/^default_version *= *'\([^']*\)'.*/\1/p" pgque_bgw.control)
PKG=postgresql-$PG-pgque-bgw

# builddir: a new directory only the caller may write to, for the package
# that smoke builds and installs as root.  Not under WORK: run.sh gives
# WORK to the postgres user, who could swap the copied tree (its Makefile
# and debian/rules run as root) or the .deb between the build and apt-get
# install (its maintainer scripts run as root).
builddir() {
	local d
	d=$(mktemp -d "${TMPDIR:-/tmp}/pgque_deb.XXXXXX") || return 1
	if [ ! -O "$d" ] || [ "$(stat -c %a "$d")" != 700 ]; then
		echo "package: $d is not private to $(id -un)" >&2; return 1
	fi
	echo "$d"
}
if [ "${1:-}" = builddir ]; then
	builddir; exit
fi

ensure_packages dpkg-dev debhelper build-essential postgresql-server-dev-all lintian postgresql-$PG \
	postgresql-server-dev-$PG libpq-dev make gcc perl || exit 1

# build DIR: a clean copy of the tree in DIR/src, dpkg-buildpackage there;
# the .deb ends in DIR
build() {
	local dir=$1
	rm -rf "$dir/src" && mkdir -p "$dir/src" || return 1
	# the tree without its build products and VCS data
	tar -C "$SRC" --exclude=.git --exclude='*.o' --exclude='*.so' --exclude='*.bc' --exclude='src/*.d' \
		--exclude='./pgque_bgw--*.sql' --exclude='./pgque_proxy--*.sql' --exclude=./build \
		-cf - . | tar -C "$dir/src" -xf - || return 1
	(cd "$dir/src" && pg_buildext updatecontrol >/dev/null &&
		DEB_BUILD_OPTIONS=nocheck dpkg-buildpackage -us -uc -b >"$dir/build.log" 2>&1) || {
		tail -n 40 "$dir/build.log"; return 1; }
	ls "$dir"/${PKG}_${VERSION}_*.deb >/dev/null 2>&1 || { echo "no ${PKG}_${VERSION} package in $dir"; return 1; }
}

case "${1:-}" in
build)
	mkdir -p build/deb
	build "$SRC/build/deb" || exit 1
	ls "$SRC"/build/deb/*.deb
	;;
build-check)
	D=$2
	[ -d "$D" ] && [ -O "$D" ] && [ "$(stat -c %a "$D")" = 700 ] || {
		echo "package ... FAILED ($D is not a private build directory)"; exit 1; }
	echo "== package: building $PKG $VERSION in $D"
	build "$D" || { echo "package ... FAILED (build)"; exit 1; }
	deb=$(ls "$D"/${PKG}_${VERSION}_*.deb)
	# lintian: errors fail, warnings are shown
	lintian --tag-display-limit 0 "$deb" >"$D/lintian.log" 2>&1
	grep -E '^W: ' "$D/lintian.log" | sed 's/^/    lintian /'
	if grep -qE '^E: ' "$D/lintian.log"; then
		cat "$D/lintian.log"; echo "package ... FAILED (lintian errors)"; exit 1
	fi
	;;
smoke)
	WORK=$2 PORT=$3 D=${4:-}
	if [ -n "$D" ]; then
		# built by build-check: the directory must still be private
		[ -d "$D" ] && [ -O "$D" ] && [ "$(stat -c %a "$D")" = 700 ] || {
			echo "package ... FAILED ($D is not a private build directory)"; exit 1; }
		deb=$(ls "$D"/${PKG}_${VERSION}_*.deb 2>/dev/null) || { echo "package ... FAILED (no package in $D)"; exit 1; }
	else
		D=$(builddir) || { echo "package ... FAILED (no private build directory)"; exit 1; }
		echo "== package: in $D"
		"$0" build-check "$D" || exit 1
		deb=$(ls "$D"/${PKG}_${VERSION}_*.deb)
	fi
	# files installed by make install stay as they were after the removal
	had_files=
	[ -f "/usr/share/postgresql/$PG/extension/pgque_bgw.control" ] && had_files=1
	if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$deb" >"$D/apt.log" 2>&1; then
		cat "$D/apt.log"; echo "package ... FAILED (apt-get install)"; exit 1
	fi
	rc=0
	owner=$(dpkg -S "/usr/lib/postgresql/$PG/lib/pgque_bgw.so" 2>/dev/null | cut -d: -f1)
	[ "$owner" = "$PKG" ] || { echo "pgque_bgw.so belongs to '$owner', not $PKG"; rc=1; }
	# a throwaway cluster of Debian's server, away from the build tree
	C=$(make_workdir pgque_deb)
	PGBIN=/usr/lib/postgresql/$PG/bin
	start_cluster "$C" "$PORT" "pgque_bgw.launcher_naptime = '1s'"
	out=$(as_pg psql -X -q -At -h "$C" -p "$PORT" -d postgres -v ON_ERROR_STOP=1 -c "
		create extension pgque_bgw;
		select count(*) from pg_available_extensions where name = 'pgque_proxy';
		select pgque.create_queue('smoke');
		select pgque.subscribe('smoke', 'c');
		select pgque.send('smoke', 'hello from the package') > 0;" -c "
		select pgque.force_next_tick('smoke') >= 0, pgque.ticker('smoke') is not null;" -c "
		select string_agg(payload, ',') from pgque.receive('smoke', 'c', 10);
		select pgque.version() = '$VERSION', obj_description('pgque.send(text,text)'::regprocedure, 'pg_proc') is not null;" 2>&1)
	expected=$(printf '1\n1\n1\nt\nt|t\nhello from the package\nt|t')
	if [ "$out" != "$expected" ]; then
		echo "smoke test output:"; echo "$out"; rc=1
	fi
	stop_cluster "$C"
	rm -rf "$C"
	DEBIAN_FRONTEND=noninteractive apt-get remove -y -qq "$PKG" >>"$D/apt.log" 2>&1 || rc=1
	if [ -n "$had_files" ]; then
		make -s PG_CONFIG=/usr/lib/postgresql/$PG/bin/pg_config install >/dev/null || rc=1
	fi
	[ "$rc" -eq 0 ] && rm -rf "$D"
	if [ "$rc" -eq 0 ]; then
		echo "package ... ok ($(basename "$deb"): lintian without errors, installed with apt-get, create extension, send, tick, receive)"
	else
		echo "package ... FAILED"
	fi
	exit $rc
	;;
*)
	echo "usage: $0 build | builddir | build-check DIR | smoke WORK PORT [DIR]" >&2
	exit 2
	;;
esac
