# Workload 3, end-to-end latency (sourced by benchmark/run.sh, which defines
# PSQL, WORK, PORT, RESULTS, QUICK, as_pg and workers_on/off).
#
# Latency = the moment a consumer has the event in hand minus the producer's
# transaction start (ev_time / created: one-statement transactions, so the
# commit follows within microseconds).  Producer: pgbench, one event per
# transaction, at 100 ev/s and unthrottled (saturation, 1 client).
# Consumers record every event they get; pgque's waits on the server for the
# next batch (receive_wait, ADR 0102), the others poll every 0.5 ms:
#   pgque        background workers on, every setting at its default,
#                receive_wait(..., '1 second') in a loop
#   pgque poll   the same with receive() polled every 0.5 ms, as before
#                ADR 0102 (at 100 ev/s only: the comparison, not a target)
#   PgQ/pgqd     pgqd and queue at their defaults (pgqd ticks every second;
#                a queue ticks after 500 events or 3 s)
#   PgQ tuned    queue ticker_max_count 1, ticker_max_lag 0, pgqd every 10 ms
#   SKIP LOCKED  DELETE ... FOR UPDATE SKIP LOCKED, up to 100 per poll
# Raw latencies go to latency_<system>_<load>.csv for the plots.

latency_setup() {
	"${PSQL[@]}" >/dev/null <<'SQL'
create table lat (system text, load text, ms float8);
create table lat_jobs (id bigserial primary key, payload text, created timestamptz default now());
select pgque.create_queue('lat');
select pgque.subscribe('lat', 'c');
select pgq.create_queue('lat_default');
select pgq.register_consumer('lat_default', 'c');
select pgq.create_queue('lat_tuned');
select pgq.set_queue_config('lat_tuned', 'ticker_max_count', '1');
select pgq.set_queue_config('lat_tuned', 'ticker_max_lag', '0');
select pgq.register_consumer('lat_tuned', 'c');

-- consume for secs seconds, waiting on the server ('pgque') or polling
-- every 0.5 ms (the others); record each event's latency
create procedure lat_consume(sys text, ld text, q text, secs float8)
language plpgsql as $$
declare
    t_end timestamptz := clock_timestamp() + secs * interval '1 second';
    b bigint;
begin
    loop
        exit when clock_timestamp() > t_end;
        b := null;
        if sys = 'pgque' then
            with m as materialized (select * from pgque.receive_wait(q, 'c', 1000, '1 second')),
                 ins as (insert into lat select sys, ld, extract(epoch from clock_timestamp() - m.created_at) * 1000 from m)
            select max(m.batch_id) into b from m;
            if b is not null then perform pgque.ack(b); end if;
            -- it waited on the server: no sleep below
            b := coalesce(b, 0);
        elsif sys = 'pgque poll' then
            with m as materialized (select * from pgque.receive(q, 'c', 1000)),
                 ins as (insert into lat select sys, ld, extract(epoch from clock_timestamp() - m.created_at) * 1000 from m)
            select max(m.batch_id) into b from m;
            if b is not null then perform pgque.ack(b); end if;
        elsif sys like 'PgQ%' then
            b := pgq.next_batch(q, 'c');
            if b is not null then
                insert into lat select sys, ld, extract(epoch from clock_timestamp() - e.ev_time) * 1000
                  from pgq.get_batch_events(b) e;
                perform pgq.finish_batch(b);
            end if;
        else
            -- the ids locked once (an InitPlan): "id in (select ...)" may
            -- plan as a semi join that runs the locking scan again for
            -- every row of the table (quadratic: at saturation the
            -- consumer fell 100 s behind and the bench ran 100 s longer)
            with d as (delete from lat_jobs where id = any (array(select id from lat_jobs order by id
                                                                  for update skip locked limit 100))
                       returning created)
            insert into lat select sys, ld, extract(epoch from clock_timestamp() - d.created) * 1000 from d;
            if found then b := 1; end if;
        end if;
        commit;
        if b is null then
            perform pg_sleep(0.0005);
        end if;
    end loop;
end $$;

-- empty a system's queue before a run: a consumer that fell behind at
-- saturation left a backlog, which the next row would count as its latency
create procedure lat_drain(sys text, q text)
language plpgsql as $$
declare
    b bigint;
begin
    if sys like 'pgque%' then
        loop
            perform pgque.ticker(q);
            select max(m.batch_id) into b from pgque.receive(q, 'c', 100000) m;
            exit when b is null;
            perform pgque.ack(b);
            commit;
        end loop;
    elsif sys like 'PgQ%' then
        -- one tick covers the backlog (pgq.ticker(queue) always ticks)
        perform pgq.ticker(q);
        loop
            b := pgq.next_batch(q, 'c');
            exit when b is null;
            perform pgq.finish_batch(b);
            commit;
        end loop;
    else
        delete from lat_jobs;
    end if;
    commit;
end $$;
SQL
}

# pgqd SECONDS_BETWEEN_TICKS: (re)start the PgQ ticker daemon
start_pgqd() {
	stop_pgqd
	as_pg tee "$WORK/pgqd.ini" >/dev/null <<EOF
[pgqd]
logfile = $WORK/pgqd.log
pidfile = $WORK/pgqd.pid
base_connstr = host=$WORK port=$PORT
initial_database = postgres
database_list = postgres
ticker_period = $1
EOF
	as_pg pgqd -q -d "$WORK/pgqd.ini"
	sleep 1
}

stop_pgqd() {
	[ -f "$WORK/pgqd.pid" ] && as_pg pgqd -s "$WORK/pgqd.ini" >/dev/null 2>&1 || true
	sleep 0.5
}

# latency_run SYSTEM LOAD QUEUE SECONDS PRODUCER_SQL [RATE]
latency_run() {
	local sys=$1 ld=$2 q=$3 secs=$4 sql=$5 rate=${6:-} row
	echo "$sql" | as_pg tee "$WORK/lat.sql" >/dev/null
	# from an empty queue: nothing an earlier run left behind is counted
	"${PSQL[@]}" -c "call lat_drain('$sys', '$q')" >/dev/null
	"${PSQL[@]}" -c "call lat_consume('$sys', '$ld', '$q', $((secs + 2)))" >/dev/null &
	sleep 0.5
	as_pg env PATH="$PGBIN:$PATH" pgbench -n -h "$WORK" -p "$PORT" -c 1 -j 1 -T "$secs" \
		${rate:+--rate=$rate} -f "$WORK/lat.sql" "$BENCH_DB" >/dev/null 2>&1
	wait
	row=$("${PSQL[@]}" -F ' ' -c "
		select count(*), round(percentile_cont(0.5) within group (order by ms)::numeric, 1),
		       round(percentile_cont(0.99) within group (order by ms)::numeric, 1), round(max(ms)::numeric, 1)
		  from lat where system = '$sys' and load = '$ld'")
	read -r n p50 p99 mx <<<"$row"
	printf '%-12s %-12s %9s events  p50 %8s ms  p99 %8s ms  max %8s ms\n' "$sys" "$ld" "$n" "$p50" "$p99" "$mx"
	echo "latency_p50_ms,$sys $ld,1,$p50," >> "$RESULTS"
	echo "latency_p99_ms,$sys $ld,1,$p99," >> "$RESULTS"
	echo "latency_max_ms,$sys $ld,1,$mx," >> "$RESULTS"
	"${PSQL[@]}" -c "copy (select ms from lat where system = '$sys' and load = '$ld' order by ms) to stdout" \
		> "$WORK/latency_${sys// /_}_${ld//\//per}.csv"
}

latency_workload() {
	local secs=$1 sys ld rate ls loads="100/s saturation"
	# the saturation runs last LAT_SAT_SECS (run.sh; 0: left out, as QUICK)
	[ "${LAT_SAT_SECS:-$secs}" -gt 0 ] || loads="100/s"
	latency_setup
	# pgque: the background workers, at their defaults
	workers_on ticker
	for ld in $loads; do
		rate=100 ls=$secs; [ "$ld" = saturation ] && rate= ls=${LAT_SAT_SECS:-$secs}
		latency_run pgque "$ld" lat "$ls" "select pgque.send('lat', 'payload-abcdefghij');" $rate
	done
	latency_run "pgque poll" 100/s lat "$secs" "select pgque.send('lat', 'payload-abcdefghij');" 100
	workers_off

	start_pgqd 1
	for ld in $loads; do
		rate=100 ls=$secs; [ "$ld" = saturation ] && rate= ls=${LAT_SAT_SECS:-$secs}
		latency_run "PgQ pgqd" "$ld" lat_default "$ls" "select pgq.insert_event('lat_default', 'default', 'payload-abcdefghij');" $rate
	done
	start_pgqd 0.01
	for ld in $loads; do
		rate=100 ls=$secs; [ "$ld" = saturation ] && rate= ls=${LAT_SAT_SECS:-$secs}
		latency_run "PgQ tuned" "$ld" lat_tuned "$ls" "select pgq.insert_event('lat_tuned', 'default', 'payload-abcdefghij');" $rate
	done
	stop_pgqd

	for ld in $loads; do
		rate=100 ls=$secs; [ "$ld" = saturation ] && rate= ls=${LAT_SAT_SECS:-$secs}
		latency_run "SKIP LOCKED" "$ld" x "$ls" "insert into lat_jobs (payload) values ('payload-abcdefghij');" $rate
	done
}
