#!/usr/bin/env bash
# examples/sharded_partition_worker.sh: serve a partitioned consumer's S x N
# slots (docs/scale-out.md).  Consumers read shards directly: one
# partition_worker loop (examples/partition_worker.sql) per shard, each
# claiming that shard's N slots with leases there.  Start as many copies of
# this script as you want workers per shard, each with its own name.
#
# Run (psql on PATH, examples/partition_worker.sql beside this script):
#
#   examples/sharded_partition_worker.sh QUEUE CONSUMER N WORKER_NAME \
#       'host=db1 dbname=app' 'host=db2 dbname=app' 'host=db3 dbname=app'
#
# The shard list is the proxy's: psql -Atc "select conninfo from pgque.shards()",
# each with user= the consuming role added (the role that subscribed the
# consumer, docs/scale-out.md step 6).
# IDLE_EXIT (an interval, default '1 year'): leave after that long idle.
set -euo pipefail
[ $# -ge 5 ] || { sed -n '2,14p' "$0"; exit 2; }
queue=$1 consumer=$2 n=$3 worker=$4
shift 4
here=$(cd "$(dirname "$0")" && pwd)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT INT TERM
i=0
for conninfo in "$@"; do
	# the procedure is defined on each shard, then loops until idle
	# (names go in as psql variables, quoted by psql)
	{ cat "$here/partition_worker.sql"
	  echo "call partition_worker(:'queue', :'consumer', :'n', :'worker', :'idle');"
	} | psql "$conninfo" -v ON_ERROR_STOP=1 -q -v queue="$queue" -v consumer="$consumer" \
		-v n="$n" -v worker="$worker-shard$i" -v idle="${IDLE_EXIT:-1 year}" &
	pids+=($!)
	i=$((i + 1))
done
# a worker that fails (its shard went away) fails the script
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
exit $rc
