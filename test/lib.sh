# test/lib.sh: shared by test/run.sh, test/demo.sh and benchmark/: install
# what is missing, build and install the extension, start throwaway servers.
# Sourced, not run.

# PG: the PostgreSQL major to build and test against (make test PG=NN);
# 15 is the one of this project's machines (Debian bookworm).
PG=${PG:-15}

# use_chroot: true when PostgreSQL $PG must run in a Debian root of another
# release (test/chroot.sh): its pg_config is not installed here and it is not
# the major this machine's Debian release ships.  PGQUE_CHROOT=1/0 forces.
use_chroot() {
	case "${PGQUE_CHROOT:-auto}" in 1) return 0 ;; 0) return 1 ;; esac
	[ -x "/usr/lib/postgresql/$PG/bin/pg_config" ] && return 1
	local codename own
	codename=$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")
	case "$codename" in
		bookworm) own=15 ;;
		trixie) own=17 ;;
		*) own=18 ;;
	esac
	[ "$PG" != "$own" ]
}
PGBIN=${PGBIN:-/usr/lib/postgresql/$PG/bin}
PGXS_TEST=${PGXS_TEST:-/usr/lib/postgresql/$PG/lib/pgxs/src/test}
export PG_CONFIG=${PG_CONFIG:-$PGBIN/pg_config}

# ensure_packages pkg...: apt-get install what is not installed (root only).
ensure_packages() {
	local missing=() p
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	if [ "$(id -u)" -ne 0 ]; then
		echo "missing packages: ${missing[*]} (run as root, or install them)" >&2
		return 1
	fi
	echo "== installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >/dev/null
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# build_and_install: compile with -Werror and install into the server.
build_and_install() {
	echo "== building pgque_bgw"
	make -s clean >/dev/null
	make -s -j2 >/dev/null
	make -s install >/dev/null
}

# as_pg cmd...: run as the postgres OS user (the server refuses root), in
# /tmp: the clone may sit where postgres cannot enter (root's 0700 home),
# and psql, initdb and the TAP framework complain about a cwd they cannot
# change back to ("could not change directory").  Callers pass absolute paths.
as_pg() {
	if [ "$(id -u)" -eq 0 ]; then
		(cd /tmp && runuser -u postgres -- env PATH="$PGBIN:$PATH" "$@")
	else
		env PATH="$PGBIN:$PATH" "$@"
	fi
}

# make_workdir: a scratch directory the postgres user owns.
make_workdir() {
	local d
	d=$(mktemp -d "/tmp/${1:-pgque}.XXXXXX")
	[ "$(id -u)" -eq 0 ] && chown postgres: "$d"
	echo "$d"
}

# start_cluster DIR PORT [extra conf lines...]: initdb and start a server on
# a unix socket in DIR and on loopback, with pgque_bgw preloaded.
start_cluster() {
	local dir=$1 port=$2
	shift 2
	as_pg initdb -D "$dir/data" -A trust -U postgres >/dev/null
	{
		echo "shared_preload_libraries = 'pgque_bgw'"
		echo "listen_addresses = '127.0.0.1'"
		echo "port = $port"
		echo "unix_socket_directories = '$dir'"
		echo "fsync = off"
		for l in "$@"; do echo "$l"; done
	} | as_pg tee -a "$dir/data/postgresql.conf" >/dev/null
	as_pg pg_ctl -D "$dir/data" -l "$dir/server.log" -w start >/dev/null
}

stop_cluster() {
	as_pg pg_ctl -D "$1/data" -m fast -w stop >/dev/null 2>&1 || true
}
