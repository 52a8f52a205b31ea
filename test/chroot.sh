#!/usr/bin/env bash
# make test PG=NN for a PostgreSQL major that this machine's Debian release
# does not ship (17 from trixie, 18 from sid on a bookworm machine): build,
# once, a minimal Debian root with that server, its headers and what the
# suite needs, all from Debian's own packages; then copy this clone into it
# and run test/run.sh there.  See docs/adr/0018-postgresql-versions.md.
#
#   test/chroot.sh NN [test/run.sh ...]
#
# The root is cached in $PGQUE_CHROOT_CACHE (default /var/cache/pgque_bgw),
# one per major, rebuilt when its package list changes or on
# PGQUE_CHROOT_REFRESH=1.  A lock serializes runs of the same major: they
# install into the same server.  Root only (chroot, mount).
set -uo pipefail
cd "$(dirname "$0")/.."
. test/lib.sh

PG=${1:?usage: test/chroot.sh PG_MAJOR}
shift
case "$PG" in
	16 | 17) SUITE=trixie ;;
	18) SUITE=sid ;;
	*) echo "no Debian suite known for PostgreSQL $PG (16, 17: trixie; 18: sid)" >&2; exit 1 ;;
esac
SUITE=${PGQUE_CHROOT_SUITE:-$SUITE}
MIRROR=${PGQUE_CHROOT_MIRROR:-http://deb.debian.org/debian}
CACHE=${PGQUE_CHROOT_CACHE:-/var/cache/pgque_bgw}
ROOT="$CACHE/pg$PG-$SUITE"

if [ "$(id -u)" -ne 0 ]; then
	echo "make test PG=$PG builds and enters a Debian $SUITE chroot: run it as root" >&2
	exit 1
fi

# what the suite needs, the same list as test/run.sh's ensure_packages
PACKAGES="postgresql-$PG postgresql-server-dev-$PG libpq-dev postgresql-$PG-pgtap postgresql-$PG-cron postgresql-$PG-plproxy postgresql-$PG-pgq3"
PACKAGES="$PACKAGES pgtap libtap-parser-sourcehandler-pgtap-perl libipc-run-perl make gcc"
PACKAGES="$PACKAGES prometheus-postgres-exporter util-linux perl"
# the package test (test/deb.sh)
PACKAGES="$PACKAGES dpkg-dev debhelper build-essential postgresql-server-dev-all lintian"
STAMP="$SUITE $MIRROR $PACKAGES"

ensure_packages mmdebstrap || exit 1
mkdir -p "$CACHE"
exec 9>"$CACHE/pg$PG-$SUITE.lock"
if ! flock -n 9; then
	echo "== another make test PG=$PG is running; waiting for it"
	flock 9
fi

# build_root: mmdebstrap into a fresh directory, moved into place only when
# complete, so an interrupted build is never mistaken for a cached root.
build_root() {
	local tmp="$ROOT.new"
	# never delete through a mount left by a killed run (its /dev is the host's)
	if grep -qF " $ROOT" /proc/mounts; then
		echo "$ROOT still has mounts (a killed run?): umount them first" >&2
		grep -F " $ROOT" /proc/mounts >&2
		return 1
	fi
	rm -rf --one-file-system "$tmp" "$ROOT"
	echo "== building a Debian $SUITE root for PostgreSQL $PG in $ROOT (first run only)"
	# no "main" cluster: the tests make their own throwaway ones
	# sid's Release files carry a one-week Valid-Until that a mirror
	# frozen in time outlives; the packages are still checked by signature
	mmdebstrap --variant=minbase --quiet \
		--aptopt='Acquire::Check-Valid-Until "false"' \
		--include="$(echo $PACKAGES | tr ' ' ',')" \
		--essential-hook='mkdir -p "$1/etc/postgresql-common/createcluster.d" && echo "create_main_cluster = false" > "$1/etc/postgresql-common/createcluster.d/pgque_bgw.conf"' \
		--customize-hook='rm -rf "$1/var/cache/apt/archives/"*.deb' \
		"$SUITE" "$tmp" "$MIRROR" || return 1
	echo "$STAMP" >"$tmp/etc/pgque_bgw_chroot"
	mv "$tmp" "$ROOT"
}

if [ -n "${PGQUE_CHROOT_REFRESH:-}" ] || [ "$(cat "$ROOT/etc/pgque_bgw_chroot" 2>/dev/null)" != "$STAMP" ]; then
	t0=$SECONDS
	build_root || { echo "building the $SUITE root failed"; echo "0 passed, 1 failed"; exit 1; }
	echo "== root ready in $((SECONDS - t0)) s"
fi

# the clone, without its git history and build products, copied fresh
BUILD=$(mktemp -d "$ROOT/tmp/pgque_src.XXXXXX")
MOUNTS=()
cleanup() {
	local i
	for ((i = ${#MOUNTS[@]} - 1; i >= 0; i--)); do
		umount "${MOUNTS[i]}" 2>/dev/null || umount -l "${MOUNTS[i]}"
	done
	rm -rf "$BUILD"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

tar -c --exclude=.git --exclude='*.o' --exclude='*.so' --exclude='*.bc' . | tar -x -C "$BUILD"
chmod 755 "$BUILD"

# /proc for ps and pg_ctl, /dev for /dev/null and friends, and a private
# /dev/shm for the servers' POSIX shared memory
mount -t proc proc "$ROOT/proc" && MOUNTS+=("$ROOT/proc")
mount --bind /dev "$ROOT/dev" && MOUNTS+=("$ROOT/dev")
mount -t tmpfs -o mode=1777 shm "$ROOT/dev/shm" && MOUNTS+=("$ROOT/dev/shm")
if [ ${#MOUNTS[@]} -ne 3 ]; then
	echo "mounting /proc, /dev, /dev/shm in $ROOT failed"; echo "0 passed, 1 failed"; exit 1
fi

echo "== PostgreSQL $PG in the Debian $SUITE root $ROOT (paths below are inside it)"
# PGQUE_* settings of the caller (ports, TAP selection) go through
passthru=()
while IFS='=' read -r name _; do
	passthru+=("$name=${!name}")
done < <(env | grep -E '^PGQUE_(TEST_PORT|SKIP_TAP|SKIP_PACKAGE|TAP_ONLY|TAP_LANES)=')
chroot "$ROOT" /usr/bin/env -i PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin \
	HOME=/root LANG=C.UTF-8 TERM=dumb PG="$PG" PGQUE_CHROOT=0 "${passthru[@]}" \
	bash -c 'cd "$1" && shift && test/run.sh "$@"' chroot-run "/${BUILD#"$ROOT"/}" "$@"
