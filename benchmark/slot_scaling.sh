#!/usr/bin/env bash
# benchmark/slot_scaling.sh [EVENTS] [ROUNDS]: where the CPU of 16 slot
# workers goes as the sessions that run at once grow (issue #30 item 3,
# ADR 0104).  Not a throughput figure: CPU nanoseconds per event, summed
# over the sessions, which a loaded machine disturbs far less than a wall
# clock (compare the rows of one run, whose configurations are alternated
# round by round).
#
# The stream of benchmark/partition.sh (EVENTS keyed events, default
# 200,000, zipfian over 2,000 tenants, a tick every 1,000) in a queue of 32
# partition buckets, drained by 16 slots (receive_partitioned(1000),
# ack_partitioned, a commit per batch) split over W sessions that start
# together (SESSIONS, default "1 2 16": W = 1 is the 16 slots one after
# another in one session, W = 16 is make bench's 16 workers), and by one
# plain consumer (receive(1000), ack).  Each session is warm first (its
# first calls compile and plan, on a queue of the same layout, as
# partition.sh's workers; WARM=same: then one batch of its own slots of
# the measured queue too) and reads, in the server, its own CPU ns, ns
# waited for a core (/proc/self/schedstat) and voluntary and involuntary
# context switches (/proc/self/status) before and after its drain.  Then
# the machine itself:
# bench_spin_ns (no shared page, no lock) in 1 session and in each of 2
# at once: on two real cores the 2 take what the 1 takes; on two
# hyperthreads of one core (a VM's vCPUs may be) they take more each, and
# no N sessions can reach N times one session's rate.  It also prints the
# pages slot_batch and subscription grew by in each configuration.
#
#   PG_CONFIG=... bash benchmark/slot_scaling.sh 200000 3
set -euo pipefail
cd "$(dirname "$0")/.."
. benchmark/lib.sh
EVENTS=${1:-200000}
ROUNDS=${2:-3}
read -r -a CONFIGS <<<"${SESSIONS:-1 2 16}"
CONFIGS=(plain plain2 "${CONFIGS[@]}")
for w in "${CONFIGS[@]}"; do
	case $w in plain|plain2|1|2|4|8|16) ;; *) echo "SESSIONS: each of 1 2 4 8 16" >&2; exit 1 ;; esac
done
bench_install
# benchmark/server.conf's settings; autovacuum off: nothing but the drains runs
bench_server slot_scaling 56712 "autovacuum = off" "max_connections = 60"
"${PSQL[@]}" -c "create extension pgque_bgw" >/dev/null
bench_sql

# a consumer per configuration and round, on the queue and its warm-up
# twin, subscribed before the stream: each drains the same events
"${PSQL[@]}" >/dev/null <<SQL
select pgque.create_queue(q), pgque.set_queue_config(q, 'partition_buckets', '32')
  from unnest(array['sc', 'sc_warm']) q;
select pgque.maint_rotate_tables_step2();
select pgque.force_tick(q), pgque.ticker(q) from unnest(array['sc', 'sc_warm']) q;
select pgque.subscribe_slot(q, 'r' || r || 'w' || w, s, 16)
  from unnest(array['sc', 'sc_warm']) q, generate_series(1, $ROUNDS) r,
       unnest(string_to_array('${CONFIGS[*]:2}', ' ')::int[]) w, generate_series(0, 15) s;
select pgque.subscribe(q, 'r' || r || c)
  from unnest(array['sc', 'sc_warm']) q, generate_series(1, $ROUNDS) r,
       unnest(array['plain', 'plain2a', 'plain2b']) c;
create table scale_run (cfg text, round int, worker int, events bigint,
                        t_start timestamptz, t_end timestamptz,
                        cpu_ns bigint, wait_ns bigint, vol bigint, invol bigint);
create table scale_go (cfg text, round int);
-- a session's drain: warm on sc_warm, wait for the go, then its share of
-- sc between two reads of its own /proc files
create procedure scale_worker(i_cfg text, i_round int, i_worker int, i_w int, i_warm_same bool)
language plpgsql as \$\$
declare
    -- plain2: two plain consumers of the queue at once, each its own
    -- (the same stream twice): the workload's own two-session ceiling
    c    text := 'r' || i_round || case when i_w = 0 and i_cfg = 'plain2' then 'plain2' || chr(97 + i_worker)
                                         when i_w = 0 then 'plain' else 'w' || i_w end;
    per  int := case when i_w = 0 then 0 else 16 / i_w end;
    n    bigint;
    b    int;
    p0   record;
    p1   record;
    t0   timestamptz;
begin
    if i_w = 0 then
        call bench_drain_plain('sc_warm', c, 1000, n, b);
    else
        call bench_drain_slots('sc_warm', c, 16, i_worker * per, i_worker * per + per - 1, n);
    end if;
    if i_warm_same then
        -- and one batch of each of its slots (or of the consumer) of sc
        -- itself: its relations opened, their plans made, as a worker that
        -- has run for a while has them
        if i_w = 0 then
            perform pgque.ack(max(m.batch_id)) from pgque.receive('sc', c, 1000) m;
        else
            for s in i_worker * per .. i_worker * per + per - 1 loop
                perform pgque.claim_slot('sc', c, s, 'bench-' || s, '1 hour');
                perform count(*) from pgque.receive_partitioned('sc', c, s, 16, 'bench-' || s, 1000);
                perform pgque.ack_partitioned('sc', c, s, 16, 'bench-' || s);
            end loop;
        end if;
    end if;
    insert into scale_run (cfg, round, worker) values (i_cfg, i_round, i_worker);
    commit;
    loop
        exit when exists (select from scale_go g where g.cfg = i_cfg and g.round = i_round);
        perform pg_sleep(0.002);
    end loop;
    p0 := bench_proc_self();
    t0 := clock_timestamp();
    if i_w = 0 then
        call bench_drain_plain('sc', c, 1000, n, b);
    else
        call bench_drain_slots('sc', c, 16, i_worker * per, i_worker * per + per - 1, n);
    end if;
    p1 := bench_proc_self();
    update scale_run
       set events = n, t_start = t0, t_end = clock_timestamp(), cpu_ns = p1.cpu_ns - p0.cpu_ns,
           wait_ns = p1.wait_ns - p0.wait_ns, vol = p1.vol - p0.vol, invol = p1.invol - p0.invol
     where cfg = i_cfg and round = i_round and worker = i_worker;
end \$\$;
-- the slot path's shared rows meanwhile: pages of slot_batch and
-- subscription with their indexes, updates and HOT updates (the
-- statistics of the sessions that ended are flushed at their exit)
create table scale_rel (cfg text, round int, after int, pages bigint, upd bigint, hot bigint);
create function scale_rel_now(out pages bigint, out upd bigint, out hot bigint)
language sql as \$\$
    select (select sum(pg_relation_size(c.oid)) / 8192 from pg_class c
             where c.relname in ('slot_batch', 'subscription')
                or c.oid in (select indexrelid from pg_index where indrelid in ('pgque.slot_batch'::regclass,
                                                                              'pgque.subscription'::regclass)))::bigint,
           sum(n_tup_upd)::bigint, sum(n_tup_hot_upd)::bigint
      from pg_stat_user_tables where schemaname = 'pgque' and relname in ('slot_batch', 'subscription')
\$\$;
-- the machine: bench_spin_ns (benchmark/bench.sql) once the go is given
create table scale_cpu (cfg text, round int, worker int, ns bigint);
create procedure scale_spin(i_cfg text, i_round int, i_worker int)
language plpgsql as \$\$
begin
    loop
        exit when exists (select from scale_go g where g.cfg = i_cfg and g.round = i_round);
        perform pg_sleep(0.002);
    end loop;
    insert into scale_cpu values (i_cfg, i_round, i_worker, bench_spin_ns());
end \$\$;
SQL
"${PSQL[@]}" -c "call bench_produce_keyed(array['sc'], $EVENTS, 0.5)" >/dev/null
"${PSQL[@]}" -c "call bench_produce_keyed(array['sc_warm'], 3200, 0.5)" >/dev/null
"${PSQL[@]}" -c "vacuum analyze" -c "checkpoint" >/dev/null

# go CFG ROUND: start what waits for (CFG, ROUND) once N sessions are ready
go() {
	local n=$3 table=$4
	for _ in $(seq 1 1200); do
		[ "$("${PSQL[@]}" -c "select count(*) from $table where cfg = '$1' and round = $2")" -ge "$n" ] && break
		sleep 0.1
	done
	"${PSQL[@]}" -c "insert into scale_go values ('$1', $2)" >/dev/null
}

for r in $(seq 1 "$ROUNDS"); do
	# the order rotates round by round
	k=${#CONFIGS[@]}
	for i in $(seq 0 $((k - 1))); do
		cfg=${CONFIGS[$(((i + r - 1) % k))]}
		w=$cfg; n=$cfg
		[ "$cfg" = plain ] && { w=0; n=1; }
		[ "$cfg" = plain2 ] && { w=0; n=2; }
		for s in $(seq 0 $((n - 1))); do
			"${PSQL[@]}" -c "call scale_worker('$cfg', $r, $s, $w, $([ "${WARM:-twin}" = same ] && echo true || echo false))" >/dev/null &
		done
		"${PSQL[@]}" -c "insert into scale_rel select '$cfg', $r, 0, * from scale_rel_now()" >/dev/null
		go "$cfg" "$r" "$n" scale_run
		wait
		"${PSQL[@]}" -c "insert into scale_rel select '$cfg', $r, 1, * from scale_rel_now()" >/dev/null
	done
	# the machine: 1 session, 2 and 16 at once (the order rotated)
	for cfg in $(case $((r % 3)) in 1) echo "1 2 16" ;; 2) echo "2 16 1" ;; *) echo "16 1 2" ;; esac); do
		for s in $(seq 1 "$cfg"); do
			"${PSQL[@]}" -c "call scale_spin('spin$cfg', $r, $s)" >/dev/null &
		done
		sleep 0.5
		"${PSQL[@]}" -c "insert into scale_go values ('spin$cfg', $r)" >/dev/null
		wait
	done
done

echo "-- $EVENTS keyed events, 32 buckets, warm on ${WARM:-twin}; $ROUNDS rounds, configurations alternated; load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "-- medians over the rounds: CPU ns per event summed over the sessions, ns waited for a core per event, context switches per 1,000 events, events/s from the first start to the last end and the cores the sessions' CPU time filled meanwhile (wall clock: read them on a quiet machine only), each round's CPU ns per event"
{ echo "config sessions cpu_ns/ev runq_ns/ev vol_sw/1k_ev invol_sw/1k_ev ev/s(wall) cores_used rounds"
"${PSQL[@]}" -F ' ' <<'SQL'
with r as (
  select cfg, round, sum(events) as ev, sum(cpu_ns) as cpu, sum(wait_ns) as wq,
         sum(vol) as vol, sum(invol) as invol,
         extract(epoch from max(t_end) - min(t_start)) as wall
    from scale_run group by cfg, round)
select case when cfg like 'plain%' then 'plain' else 'slots' end,
       case cfg when 'plain' then '1' when 'plain2' then '2' else cfg end,
       round(percentile_cont(0.5) within group (order by cpu::float8 / ev))::text,
       round(percentile_cont(0.5) within group (order by wq::float8 / ev))::text,
       round(percentile_cont(0.5) within group (order by vol * 1000.0 / ev)::numeric, 1)::text,
       round(percentile_cont(0.5) within group (order by invol * 1000.0 / ev)::numeric, 1)::text,
       round(percentile_cont(0.5) within group (order by ev / wall))::text,
       round((percentile_cont(0.5) within group (order by cpu / 1e9 / wall))::numeric, 2)::text,
       string_agg(round(cpu::numeric / ev)::text, '/' order by round)
  from r group by cfg
 order by cfg not like 'plain%', cfg <> 'plain', case when cfg not like 'plain%' then cfg::int end
SQL
} | column -t
echo "-- slot_batch and subscription (with their indexes) during each configuration, medians: pages added, updates, of which HOT"
"${PSQL[@]}" -F ' ' -c "
	select cfg, percentile_cont(0.5) within group (order by d.pages) || ' pages',
	       percentile_cont(0.5) within group (order by d.upd) || ' updates',
	       percentile_cont(0.5) within group (order by d.hot) || ' HOT'
	  from (select cfg, round, max(pages) filter (where after = 1) - max(pages) filter (where after = 0) as pages,
	               max(upd) filter (where after = 1) - max(upd) filter (where after = 0) as upd,
	               max(hot) filter (where after = 1) - max(hot) filter (where after = 0) as hot
	          from scale_rel group by cfg, round) d
	 group by cfg order by cfg not like 'plain%', cfg <> 'plain', case when cfg not like 'plain%' then cfg::int end"
echo "-- the machine: CPU ns of one pure-CPU statement, alone and 2 at once (median over rounds)"
"${PSQL[@]}" -F ' ' -c "
	select cfg, round((percentile_cont(0.5) within group (order by ns) / 1e6)::numeric, 1) || ' ms',
	       string_agg(round(ns / 1e6, 1)::text, '/' order by round, worker)
	  from scale_cpu where ns is not null group by cfg order by length(cfg), cfg"
"${PSQL[@]}" -c "
	select 'sessions'' worth of work the cores do at once: ' ||
	       round((2 * percentile_cont(0.5) within group (order by ns) filter (where cfg = 'spin1')
	              / percentile_cont(0.5) within group (order by ns) filter (where cfg = 'spin2'))::numeric, 2)
	       || '; CPU of one of 16 at once / one of 2 at once: ' ||
	       round((percentile_cont(0.5) within group (order by ns) filter (where cfg = 'spin16')
	              / percentile_cont(0.5) within group (order by ns) filter (where cfg = 'spin2'))::numeric, 2)
	  from scale_cpu"
