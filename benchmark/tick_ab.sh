#!/usr/bin/env bash
# benchmark/tick_ab.sh OLD_SO NEW_SO [ROUNDS=2] [SECS=12]: the latency from
# send to consumer and the tick rows per event of two builds of the
# library, alternated round by round on one server (the library file
# swapped and the server restarted between runs), so that both meet the
# same load.  Per round and build: pgbench at 100, 1,000 and 10,000 ev/s
# (one event per transaction; 1, 1 and 2 clients) for SECS seconds, a
# consumer polling every 0.5 ms as benchmark/latency.sh's; the server's
# settings are make bench's, the workers at their defaults.  Prints one
# line per run: build, rate asked and reached, p50/p99/max latency, ticks
# of the queue per event (ticks in the run / events it sent); at 100 ev/s
# also the ticker's part alone, from each event's transaction start to
# the first tick that sees it (tick_p50, tick_p99, ms).
# RATES="100": only those rates.
#   OLD_SO, NEW_SO: pgque_bgw.so files built from the two trees, same SQL.
set -euo pipefail
cd "$(dirname "$0")/.."
. benchmark/lib.sh
OLD=$1 NEW=$2 ROUNDS=${3:-2} SECS=${4:-12}
LIB="$("$PG_CONFIG" --pkglibdir)/pgque_bgw.so"
# benchmark/server.conf's settings, with the workers on; the installed
# library is put back at exit
bench_server tick_ab 56702 "pgque_bgw.enabled = on"
cp "$LIB" "$WORK/installed.so"
BENCH_AT_EXIT=('cp "$WORK/installed.so" "$LIB"')
P() { "${PSQL[@]}" "$@"; }
P >/dev/null <<'SQL'
create extension pgque_bgw;
select pgque.create_queue('lat');
select pgque.subscribe('lat', 'c');
create table lat (build text, rate int, ms float8);
-- every batch there is, acked: what an earlier run left
create function drain() returns void language plpgsql as $$
declare bid bigint;
begin
    loop
        select max(batch_id) into bid from pgque.receive('lat', 'c', 100000);
        exit when bid is null;
        perform pgque.ack(bid);
    end loop;
end $$;
-- events sent from now on: their latency, recorded as benchmark/latency.sh does
create procedure lat_consume(b text, r int, secs float8) language plpgsql as $$
declare
    t_start timestamptz := clock_timestamp();
    t_end timestamptz := clock_timestamp() + secs * interval '1 second';
    bid bigint;
begin
    loop
        exit when clock_timestamp() > t_end;
        with m as materialized (select * from pgque.receive('lat', 'c', 100000)),
             ins as (insert into lat select b, r, extract(epoch from clock_timestamp() - m.created_at) * 1000
                       from m where m.created_at >= t_start)
        select max(m.batch_id) into bid from m;
        if bid is not null then perform pgque.ack(bid); end if;
        commit;
        if bid is null then perform pg_sleep(0.0005); end if;
    end loop;
end $$;
SQL
echo "select pgque.send('lat', 'payload-abcdefghij');" | as_pg tee "$WORK/send.sql" >/dev/null
printf '%-4s %6s %8s %8s %8s %8s %10s %8s %8s\n' build rate ev/s p50_ms p99_ms max_ms ticks/ev tick_p50 tick_p99
for round in $(seq 1 "$ROUNDS"); do
	for build in old new; do
		stop_cluster "$WORK"
		if [ $build = old ]; then cp "$OLD" "$LIB"; else cp "$NEW" "$LIB"; fi
		as_pg pg_ctl -D "$WORK/data" -l "$WORK/server.log" -w start >/dev/null
		for _ in $(seq 1 100); do
			[ "$(P -c "select count(*) from pgque.status() where component = 'ticker' and status = 'running'")" = 1 ] && break
			sleep 0.2
		done
		sleep 1
		for rate in ${RATES:-100 1000 10000}; do
			clients=1; [ $rate = 10000 ] && clients=2
			P -c "select drain()" >/dev/null
			t0=$(P -c "select coalesce(max(tick_id), 0) from pgque.tick t join pgque.queue q on q.queue_id = t.tick_queue where q.queue_name = 'lat'")
			s0=$(P -c "select clock_timestamp()")
			P -c "call lat_consume('$build', $rate, $((SECS + 2)))" >/dev/null &
			sleep 0.5
			as_pg env PATH="$PGBIN:$PATH" pgbench -n -h "$WORK" -p "$PORT" -c $clients -j $clients -T "$SECS" \
				--rate=$rate -f "$WORK/send.sql" postgres >/dev/null 2>&1
			wait
			# the ticker's part alone: from the event's transaction start (one
			# statement: its commit) to the first tick that sees it, at 100 ev/s
			tk="- -"
			[ "$rate" = 100 ] && tk=$(P -F ' ' -c "
				with e as (select e.ev_time,
				                  (select min(t.tick_time) from pgque.tick t
				                    where t.tick_queue = q.queue_id and t.tick_id > $t0
				                      and pg_visible_in_snapshot(e.ev_txid, t.tick_snapshot)) as tick_time
				             from pgque.queue q, pgque.event_template e
				            where q.queue_name = 'lat' and e.tableoid::regclass::text like 'pgque.event\_' || q.queue_id || '%'
				              and e.ev_time >= '$s0'),
				     w as (select extract(epoch from tick_time - ev_time) * 1000 ms from e where tick_time is not null)
				select round(percentile_cont(0.5) within group (order by ms)::numeric, 2),
				       round(percentile_cont(0.99) within group (order by ms)::numeric, 2) from w")
			P -F ' ' -c "
				with l as (select ms from lat where build = '$build' and rate = $rate),
				     t as (select count(*) n from pgque.tick t join pgque.queue q on q.queue_id = t.tick_queue
				            where q.queue_name = 'lat' and t.tick_id > $t0)
				select '$build', $rate, round(count(*) / $SECS.0), round(percentile_cont(0.5) within group (order by ms)::numeric, 2),
				       round(percentile_cont(0.99) within group (order by ms)::numeric, 2), round(max(ms)::numeric, 1),
				       round((select n from t) / greatest(count(*), 1)::numeric, 4), '$tk'
				  from l" | awk '{printf "%-4s %6s %8s %8s %8s %8s %10s %8s %8s\n", $1, $2, $3, $4, $5, $6, $7, $8, $9}'
			P -c "delete from lat where build = '$build' and rate = $rate" >/dev/null
		done
	done
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
