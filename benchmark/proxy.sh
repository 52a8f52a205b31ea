# benchmark/proxy.sh, sourced by benchmark/run.sh (ONLY=proxy): scale-out
# on PL/Proxy (docs/scale-out.md).  Three shard databases and three proxy
# databases (S = 1, 2, 3 shards) in the bench server: the cost a proxy adds
# to a keyed send and a keyed batch of 100, against the same call on a shard
# directly, and the aggregate rate through the proxy with 1, 2, 3 shards.
# On one 2-core machine the shards share the cores with the proxy and the
# clients: the figures measure the proxy's overhead, not what S servers
# sustain (docs/benchmarks.md has that arithmetic).
proxy_workload() {
	local i s c conns
	for i in 0 1 2; do
		"${PSQL[@]}" -c "create database shard$i" >/dev/null
		"${PSQL[@]}" -d "shard$i" -c "create extension pgque_bgw" \
			-c "select pgque.create_queue('bench')" >/dev/null
	done
	for s in 1 2 3; do
		conns=$(for i in $(seq 0 $((s - 1))); do printf "'host=%s port=%s dbname=shard%s'," "$WORK" "$PORT" "$i"; done)
		"${PSQL[@]}" -c "create database proxy$s" >/dev/null
		"${PSQL[@]}" -d "proxy$s" -c "create extension pgque_proxy cascade" \
			-c "select pgque.set_shards(array[${conns%,}])" \
			-c "create user mapping for public server pgque_shards" >/dev/null
	done
	local one="\\set k random(1, 2000)
select pgque.send('bench', 'default', 'payload-abcdefghij', 'tenant-' || :k);"
	local hundred="\\set k random(1, 2000)
select pgque.send_batch('bench', 'default', array_fill('payload-abcdefghij'::text, array[100]),
                        array(select 'tenant-' || ((:k + i * 37) % 2000) from generate_series(1, 100) i));"
	# the targets' pairs (on the shard, through the proxy at S = 1, 1
	# client) alternate, two rounds of half the duration each, so that a
	# shared machine's load falls on both; the targets read their mean
	local half=$(( DUR / 2 > 0 ? DUR / 2 : 1 )) round
	for round in 1 2; do
		DUR=$half BENCH_DB=shard0 bench proxy_send_1 "send on a shard" 1 1 "$one"
		DUR=$half BENCH_DB=proxy1 bench proxy_send_1 "send via proxy S=1" 1 1 "$one"
		DUR=$half BENCH_DB=shard0 bench proxy_send_100 "send_batch on a shard" 1 100 "$hundred"
		DUR=$half BENCH_DB=proxy1 bench proxy_send_100 "send_batch via proxy S=1" 1 100 "$hundred"
	done
	# the curve (S = 2, 3; 2 clients), no target's figure: PROXY_CURVE_DUR
	# seconds a run (run.sh; half of DUR, ADR 0097)
	local cd=${PROXY_CURVE_DUR:-$DUR}
	for s in 2 3; do
		DUR=$cd BENCH_DB=proxy$s bench proxy_send_1 "send via proxy S=$s" 1 1 "$one"
	done
	DUR=$cd BENCH_DB=shard0 bench proxy_send_1 "send on a shard" 2 1 "$one"
	for s in 1 2 3; do
		DUR=$cd BENCH_DB=proxy$s bench proxy_send_1 "send via proxy S=$s" 2 1 "$one"
	done
	for s in 2 3; do
		DUR=$cd BENCH_DB=proxy$s bench proxy_send_100 "send_batch via proxy S=$s" 1 100 "$hundred"
	done
}
