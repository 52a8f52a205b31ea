#!/bin/bash
# benchmark/latency_steps.sh [SECONDS] [RATE]: where the end-to-end latency
# of benchmark/latency.sh's pgque row goes, step by step, per event (ADR
# 0108).  The same producer (pgbench, one send per transaction, at RATE
# ev/s, 100 by default) and the same consumer loop (receive_wait, ack,
# commit), with the workers on at their defaults, on a server with
# track_commit_timestamp on; each event's times are then read back:
#   send      the producer's transaction start (created_at) -> its commit
#   to tick   the send's commit -> the start of the transaction that wrote
#             the first tick whose snapshot sees the event (the ticker's
#             wake-up, its rate limit, the pass's first unit)
#   tick      that transaction's start -> its commit (the tick itself)
#   to hand   the tick's commit -> the consumer has the row (the wake-up of
#             receive_wait, its looks, the batch's open and window read)
# Commit times are pg_xact_commit_timestamp()'s, read after the run: the
# run itself reads no clock beyond the consumer's one per event.  Each
# step's p50/p99 depends less on the machine's load than the end-to-end
# figure (a step waits for a core once, not four times).
#   PGQUE_BENCH_PORT (default 56710), PGQUE_BENCH_NO_INSTALL=1 as the others;
#   STEPS_IDLE=1: beside 100 idle queues and 1,000 slots, as idle.sh's row.
set -euo pipefail
cd "$(dirname "$0")/.."
. benchmark/lib.sh

SECS=${1:-10}
RATE=${2:-100}
bench_install
bench_server steps 56710 "track_commit_timestamp = on"
"${PSQL[@]}" >/dev/null <<'SQL'
create extension pgque_bgw;
select pgque.create_queue('lat');
select pgque.subscribe('lat', 'c');
create table steps (msg_id bigint, batch_id bigint, created timestamptz, got timestamptz);
create procedure steps_consume(secs float8)
language plpgsql as $$
declare
    t_end timestamptz := clock_timestamp() + secs * interval '1 second';
    b bigint;
begin
    loop
        exit when clock_timestamp() > t_end;
        with m as materialized (select * from pgque.receive_wait('lat', 'c', 1000, '1 second')),
             ins as (insert into steps select m.msg_id, m.batch_id, m.created_at, clock_timestamp() from m)
        select max(m.batch_id) into b from m;
        if b is not null then perform pgque.ack(b); end if;
        commit;
    end loop;
end $$;
SQL
if [ "${STEPS_IDLE:-0}" = 1 ]; then
	"${PSQL[@]}" >/dev/null <<'SQL'
select count(pgque.create_queue('idle_' || i)) from generate_series(1, 100) i;
select pgque.create_queue('idle_keyed');
select count(pgque.subscribe_slot('idle_keyed', 'pc' || i, k, 100))
  from generate_series(1, 10) i, generate_series(0, 99) k;
SQL
fi
"${PSQL[@]}" >/dev/null -c "alter system set pgque_bgw.enabled = on" -c "select pg_reload_conf()"
for _ in $(seq 1 60); do
	"${PSQL[@]}" -c "select count(*) from pgque.status() where component = 'ticker' and status = 'running'" | grep -q 1 && break
	sleep 0.5
done
echo "select pgque.send('lat', 'payload-abcdefghij');" | as_pg tee "$WORK/send.sql" >/dev/null
"${PSQL[@]}" -c "call steps_consume($((SECS + 2)))" >/dev/null &
sleep 0.5
# the ticker's and the consumer's CPU time and run-queue wait (schedstat:
# nanoseconds on a CPU, nanoseconds runnable but waiting for one)
TICKER_PID=$("${PSQL[@]}" -c "select pid from pg_stat_activity where backend_type in ('pgque_bgw ticker', 'pgque_bgw worker') limit 1")
CONSUMER_PID=$("${PSQL[@]}" -c "select pid from pg_stat_activity where query like 'call steps_consume%' limit 1")
read -r t_cpu0 t_wait0 _ < "/proc/$TICKER_PID/schedstat"
read -r c_cpu0 c_wait0 _ < "/proc/$CONSUMER_PID/schedstat"
# every server process's voluntary context switches (its wake-ups) and,
# with perf, the ticker's and the consumer's instructions (ADR 0118)
ctxt() {
	local p
	for p in $(pgrep -P "$(head -1 "$WORK/data/postmaster.pid")"); do
		printf '%s %s %s\n' "$p" "$(tr '\0' ' ' < "/proc/$p/cmdline" | sed 's/ *$//; s/ /_/g')" \
			"$(awk '/^voluntary_ctxt_switches/ {print $2}' "/proc/$p/status" 2>/dev/null || echo 0)"
	done
}
ctxt > "$WORK/ctxt0"
PERF_PIDS=()
# perf counts instructions only where the CPU's counters are there (not in
# every VM): benchmark/latency_callgrind.sh counts them under valgrind
if command -v perf >/dev/null && perf stat -e instructions -x, true 2>&1 | grep -q '^[0-9]'; then
	perf stat -e instructions -x, -o "$WORK/perf_ticker" -p "$TICKER_PID" & PERF_PIDS+=($!)
	perf stat -e instructions -x, -o "$WORK/perf_consumer" -p "$CONSUMER_PID" & PERF_PIDS+=($!)
fi
as_pg env PATH="$PGBIN:$PATH" pgbench -n -h "$WORK" -p "$PORT" -c 1 -j 1 -T "$SECS" --rate="$RATE" \
	-f "$WORK/send.sql" postgres >/dev/null 2>&1
read -r t_cpu1 t_wait1 _ < "/proc/$TICKER_PID/schedstat"
read -r c_cpu1 c_wait1 _ < "/proc/$CONSUMER_PID/schedstat"
ctxt > "$WORK/ctxt1"
for p in "${PERF_PIDS[@]}"; do kill -INT "$p"; done
wait
echo "load average $(cut -d' ' -f1-3 /proc/loadavg), ${SECS} s at ${RATE} ev/s$([ "${STEPS_IDLE:-0}" = 1 ] && echo ', beside 100 idle queues and 1,000 slots')"
"${PSQL[@]}" -F ' ' <<'SQL' | column -t
with e as (
    select s.msg_id, s.created, s.got,
           pg_xact_commit_timestamp((ev.ev_txid::text::bigint % 4294967296)::text::xid) as sent,
           t.tick_time, pg_xact_commit_timestamp(t.xmin) as ticked
      from steps s
      join pgque.event_template ev on ev.ev_id = s.msg_id
      cross join lateral (select t.tick_time, t.xmin from pgque.tick t
                           where t.tick_queue = (select queue_id from pgque.queue where queue_name = 'lat')
                             and pg_visible_in_snapshot(ev.ev_txid, t.tick_snapshot)
                           order by t.tick_id limit 1) t),
d as (
    select 'send' as step, 1 as o, extract(epoch from sent - created) * 1000 as ms from e
    union all select 'to_tick', 2, extract(epoch from tick_time - sent) * 1000 from e
    union all select 'tick', 3, extract(epoch from ticked - tick_time) * 1000 from e
    union all select 'to_hand', 4, extract(epoch from got - ticked) * 1000 from e
    union all select 'end_to_end', 5, extract(epoch from got - created) * 1000 from e)
select step, count(*) as events,
       round(percentile_cont(0.5) within group (order by ms)::numeric, 2) as p50_ms,
       round(percentile_cont(0.9) within group (order by ms)::numeric, 2) as p90_ms,
       round(percentile_cont(0.99) within group (order by ms)::numeric, 2) as p99_ms,
       round(max(ms)::numeric, 2) as max_ms
  from d group by step, o order by o;
SQL
N=$("${PSQL[@]}" -c "select count(*) from steps")
TICKS=$("${PSQL[@]}" -c "select count(*) from pgque.tick t join pgque.queue q on q.queue_id = t.tick_queue where q.queue_name = 'lat'")
echo "per event ($N events, $TICKS ticks of the queue): ticker CPU $(( (t_cpu1 - t_cpu0) / N )) ns, run-queue wait $(( (t_wait1 - t_wait0) / N )) ns;" \
	"consumer CPU $(( (c_cpu1 - c_cpu0) / N )) ns, run-queue wait $(( (c_wait1 - c_wait0) / N )) ns"
if [ ${#PERF_PIDS[@]} -gt 0 ]; then
	ti=$(awk -F, '/instructions/ {print $1}' "$WORK/perf_ticker")
	ci=$(awk -F, '/instructions/ {print $1}' "$WORK/perf_consumer")
	echo "instructions per event (perf stat, user and kernel): ticker $(( ti / N )), consumer $(( ci / N ))"
fi
# wake-ups per event by process (voluntary context switches; the producer's
# backend is new in the run and not counted)
echo "wake-ups per event:"
join <(sort "$WORK/ctxt0") <(sort "$WORK/ctxt1") |
	awk -v n="$N" '{ d = $5 - $3; if (d > 0) w[$2] += d } END { for (k in w) printf "  %-60s %.2f\n", k, w[k] / n }' | sort
