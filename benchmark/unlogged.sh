# Workload: unlogged queues (ADR 0068), sourced by benchmark/run.sh (which
# defines PSQL, RESULTS and QUICK); ONLY=unlogged runs it alone, and it runs
# with the drain workload.  Workers off: one client ticks itself.
#
# A logged and an unlogged queue, each with one plain consumer, measured
# alternately in the same run (three rounds each, so the machine's load
# falls on both alike): send (one event per transaction, from a procedure
# that commits after each send) and drain (tick, receive 1,000, ack, one
# transaction per batch).  Per side: events per second and WAL bytes per
# event (pg_current_wal_lsn() around each step).  The drain is
# benchmark/bench.sql's bench_drain_plain, after a tick.

unlogged_workload() {
	local n r kind opt t0 t1 l0 l1 eps wal
	n=$([ "$QUICK" = 1 ] && echo 10000 || echo 200000)
	"${PSQL[@]}" >/dev/null <<'SQL'
create procedure bench_unlogged_send(q text, n int) language plpgsql as $$
begin
    for i in 1 .. n loop
        perform pgque.send(q, 'e', 'payload-' || i);
        commit;
    end loop;
end $$;
SQL
	echo "-- $n events, one per transaction, then drained 1,000 per batch; logged and unlogged alternately, 3 rounds"
	for r in 1 2 3; do
		for kind in logged unlogged; do
			opt=$([ "$kind" = unlogged ] && echo '{"unlogged": true}' || echo '{}')
			"${PSQL[@]}" >/dev/null -c "select pgque.create_queue('ul_bench', '$opt')" -c "select pgque.subscribe('ul_bench', 'c')"
			for step in send drain; do
				l0=$("${PSQL[@]}" -c "select pg_current_wal_lsn()")
				t0=$(date +%s.%N)
				if [ "$step" = send ]; then
					"${PSQL[@]}" >/dev/null -c "call bench_unlogged_send('ul_bench', $n)"
				else
					"${PSQL[@]}" >/dev/null -c "select pgque.force_tick('ul_bench'), pgque.ticker('ul_bench')" \
						-c "call bench_drain_plain('ul_bench', 'c')"
				fi
				t1=$(date +%s.%N)
				l1=$("${PSQL[@]}" -c "select pg_current_wal_lsn()")
				eps=$(awk -v n="$n" -v a="$t0" -v b="$t1" 'BEGIN {printf "%.0f", n / (b - a)}')
				wal=$("${PSQL[@]}" -c "select round(pg_wal_lsn_diff('$l1', '$l0') / $n, 1)")
				printf '%-34s %-22s round %s  %10s ev/s  %8s WAL bytes/event\n' "unlogged_$step" "$kind queue" "$r" "$eps" "$wal"
				echo "unlogged_$step,$kind queue,1,$eps,$wal WAL bytes/event" >> "$RESULTS"
			done
			"${PSQL[@]}" >/dev/null -c "select pgque.drop_queue('ul_bench', true)"
		done
	done
}
