#!/usr/bin/env bash
# make demo: the whole flow of examples/demo.sql on a throwaway cluster.
set -euo pipefail
cd "$(dirname "$0")/.."
. test/lib.sh
ensure_packages postgresql-$PG postgresql-server-dev-$PG libpq-dev make gcc
build_and_install
WORK=$(make_workdir pgque_demo)
PORT=${PGQUE_DEMO_PORT:-56600}
trap 'stop_cluster "$WORK"; rm -rf "$WORK"' EXIT
echo "== starting a throwaway PostgreSQL $PG on 127.0.0.1:$PORT with shared_preload_libraries = 'pgque_bgw'"
# the first part ticks by hand (workers off); the last part turns them on
start_cluster "$WORK" "$PORT" "pgque_bgw.enabled = off" "pgque_bgw.launcher_naptime = '1s'"
cp examples/demo.sql "$WORK/demo.sql"
as_pg psql -X -h "$WORK" -p "$PORT" -d postgres -f "$WORK/demo.sql"
