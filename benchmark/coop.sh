# Workload 7, cooperative consumers (sourced by benchmark/run.sh, which
# defines PSQL, WORK, PORT, RESULTS and QUICK).
#
# One stream of small batches (10 events per transaction, a tick every 50
# events: 50-event windows) is drained by one plain consumer (receive, 50 at
# a time) and by cooperative groups of 1, 4 and 8 members (receive_coop, 50
# at a time), each group on its own, from the same backlog (fan-out).
# Aggregate events per second for each, and lock waits between members:
# pg_stat_activity is sampled every 20 ms while a group drains, counting
# samples where a member waits on a heavyweight lock held by another member
# (pg_blocking_pids).  Target (issue #14): 8 members >= 0.8x one plain
# consumer, no lock waits between members.

coop_workload() {
	local events=$1 g m eps plain_eps t0 t1 samples waits ratio
	"${PSQL[@]}" >/dev/null <<'SQL'
select pgque.create_queue('coop_bench');
select pgque.subscribe('coop_bench', 'plain');
select pgque.register_subconsumer('coop_bench', 'g' || n, 'm' || i)
  from unnest(array[1, 4, 8]) n, generate_series(1, n) i;

create procedure bench_produce_small(i_events int) language plpgsql as $$
declare
    payloads text[] := array_fill('payload-abcdefghij'::text, array[10]);
begin
    for i in 1 .. i_events / 10 loop
        perform pgque.send_batch('coop_bench', 'default', payloads);
        commit;
        if i % 5 = 0 then
            perform pgque.ticker('coop_bench');
            commit;
        end if;
    end loop;
    perform pgque.force_tick('coop_bench');
    perform pgque.ticker('coop_bench');
end $$;

-- the plain consumer and each member: bench_drain_plain (benchmark/bench.sql),
-- 50 a batch
create table bench_lock_sample (at timestamptz default clock_timestamp(), member_waits int);
SQL
	"${PSQL[@]}" -c "call bench_produce_small($events)" >/dev/null
	echo "-- $events events in 50-event windows: one plain consumer vs cooperative groups"
	t0=$(date +%s.%N)
	"${PSQL[@]}" -c "call bench_drain_plain('coop_bench', 'plain', 50)" >/dev/null
	t1=$(date +%s.%N)
	plain_eps=$(awk -v n="$events" -v a="$t0" -v b="$t1" 'BEGIN {printf "%.0f", n / (b - a)}')
	printf '%-34s %-22s %2s client  %10s ev/s\n' coop_throughput "plain consumer" 1 "$plain_eps"
	echo "coop_throughput,plain consumer,1,$plain_eps," >> "$RESULTS"
	for g in 1 4 8; do
		"${PSQL[@]}" -c "truncate bench_lock_sample" >/dev/null
		# the sampler: a member waiting on a lock that another member holds
		"${PSQL[@]}" >/dev/null -c "
			do \$\$ begin
			  for i in 1 .. 100000 loop
			    insert into bench_lock_sample (member_waits)
			    select count(*) from pg_stat_activity a
			     where a.application_name like 'coop-g$g-%' and a.wait_event_type = 'Lock'
			       and exists (select 1 from pg_stat_activity b
			                    where b.pid = any (pg_blocking_pids(a.pid)) and b.application_name like 'coop-g$g-%');
			    commit;
			    exit when exists (select 1 from pg_stat_activity where application_name = 'coop-done-$g');
			    perform pg_sleep(0.02);
			  end loop;
			end \$\$" &
		local sampler=$!
		t0=$(date +%s.%N)
		for m in $(seq 1 "$g"); do
			as_pg env PGAPPNAME="coop-g$g-m$m" psql -X -q -A -t -h "$WORK" -p "$PORT" -d postgres \
				-c "call bench_drain_plain('coop_bench', 'g$g', 50, member => 'm$m')" >/dev/null &
		done
		wait $(jobs -p | grep -v "^$sampler\$")
		t1=$(date +%s.%N)
		as_pg env PGAPPNAME="coop-done-$g" psql -X -q -h "$WORK" -p "$PORT" -d postgres -c "select pg_sleep(0.2)" >/dev/null
		wait "$sampler"
		eps=$(awk -v n="$events" -v a="$t0" -v b="$t1" 'BEGIN {printf "%.0f", n / (b - a)}')
		read -r samples waits < <("${PSQL[@]}" -F ' ' -c "select count(*), coalesce(sum(member_waits), 0) from bench_lock_sample")
		ratio=$(awk -v a="$eps" -v b="$plain_eps" 'BEGIN {printf "%.2f", a / b}')
		printf '%-34s %-22s %2s clients %10s ev/s  %sx plain, lock waits between members: %s in %s samples\n' \
			coop_throughput "coop $g members" "$g" "$eps" "$ratio" "$waits" "$samples"
		echo "coop_throughput,coop $g members,$g,$eps,$waits/$samples lock-wait samples" >> "$RESULTS"
	done
	"${PSQL[@]}" -c "select count(*) from pgque.coop_window w join pgque.subscription s on s.sub_id = w.cw_sub" \
		| awk '{print "-- windows left in the groups: " $1}'
}
