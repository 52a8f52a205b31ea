# Workload 4, partition keys (sourced by benchmark/run.sh, which defines
# PSQL, WORK, PORT, RESULTS and QUICK).
#
# One stream of keyed events (zipfian over 2,000 tenants, 100 per
# transaction, a tick every 1,000 events as a running ticker would) goes to
# two queues: one with 32 partition buckets (ADR 0013) and one without
# (every slot scans the whole stream and filters: PgQue's design).  For N =
# 1, 4, 16, 32, a consumer with N slots drains the stream, slot after slot:
# shared buffers (hit + read) touched in the queue's relations per produced
# event, from pg_statio: all of schema pgque (events, subscriptions, ticks,
# with their indexes), and the event relations alone.  System catalogs are
# left out: they measure backend start-up, not the queue.  Then throughput: N = 16 slot workers in parallel against one plain
# consumer, each connected and warmed up first on a queue of its own (as a
# long-running worker is), the 16 started together and timed in the server
# from the first start to the last end.

partition_workload() {
	local events=$1 q n t0 t1 blks ev_blks eps
	"${PSQL[@]}" >/dev/null <<'SQL'
select pgque.create_queue('pk_bucketed');
select pgque.set_queue_config('pk_bucketed', 'partition_buckets', '32');
select pgque.create_queue('pk_filtered');
select pgque.set_queue_config('pk_filtered', 'partition_buckets', '0');
select pgque.maint_rotate_tables_step2();
select pgque.force_tick(q), pgque.ticker(q) from unnest(array['pk_bucketed', 'pk_filtered']) q;
select pgque.subscribe_slot(q, 'n' || n, s, n)
  from unnest(array['pk_bucketed', 'pk_filtered']) q, unnest(array[1, 4, 16, 32]) n, generate_series(0, n - 1) s;
select pgque.subscribe_slot(q, 'tp16', s, 16)
  from unnest(array['pk_bucketed', 'pk_filtered']) q, generate_series(0, 15) s;
select pgque.subscribe(q, 'plain') from unnest(array['pk_bucketed', 'pk_filtered']) q;
-- the warm-up queues of the throughput runs: the same layout, 3,200 events
select pgque.create_queue(q || '_warm'), pgque.set_queue_config(q || '_warm', 'partition_buckets', b)
  from (values ('pk_bucketed', '32'), ('pk_filtered', '0')) v(q, b);
select pgque.subscribe_slot(q, 'tp16', s, 16) from unnest(array['pk_bucketed_warm', 'pk_filtered_warm']) q, generate_series(0, 15) s;
select pgque.subscribe(q, 'plain') from unnest(array['pk_bucketed_warm', 'pk_filtered_warm']) q;
select count(pgque.send_batch(q, 'default', array_fill('payload-abcdefghij'::text, array[3200]),
                              array(select 'tenant-' || g from generate_series(1, 3200) g)))
  from unnest(array['pk_bucketed_warm', 'pk_filtered_warm']) q;
select pgque.force_tick(q), pgque.ticker(q) from unnest(array['pk_bucketed_warm', 'pk_filtered_warm']) q;

-- the stream (bench_produce_keyed) and the drains (bench_drain_slots,
-- bench_drain_plain): benchmark/bench.sql, loaded by run.sh

-- a worker as a service runs it: connected and warm (its first calls
-- compile the functions and make the plans, on a queue of its own: <q>_warm),
-- then started with the others (bench_go), timed inside the server
create table bench_go (go bool);
create table bench_run (worker int, t_start timestamptz, t_end timestamptz, got bigint,
                        cpu_ns bigint, vol bigint, invol bigint);
-- what the 16 sessions wait on: pg_stat_activity sampled every 10 ms while
-- they run (a session that is on a core or queued for one shows no wait)
create table bench_wait (what text, other bool);
-- the sampler's own CPU from the go to its end (ADR 0109): it shares the
-- cores the workers are timed on, and the plain consumer's run has none
create table bench_sampler_cpu (cpu_ns bigint);
create procedure bench_sample_waits() language plpgsql as $$
declare
    c0 bigint;
begin
    loop
        exit when exists (select from bench_go);
        perform pg_sleep(0.002);
    end loop;
    c0 := (bench_proc_self()).cpu_ns;
    loop
        insert into bench_wait
        select coalesce(wait_event_type || ':' || wait_event, 'on cpu'), false
          from pg_stat_activity where query like 'call bench_slot_worker(%' and state = 'active'
        -- what else of the server runs meanwhile (autovacuum is on in
        -- server.conf), apart: it shares the cores the workers are timed on
        union all
        select backend_type, true
          from pg_stat_activity
         where pid <> pg_backend_pid()
           and (backend_type = 'autovacuum worker'
                or (backend_type = 'client backend' and state = 'active'
                    and query not like 'call bench_slot_worker(%'));
        commit;
        exit when (select count(*) from bench_run where t_end is not null) >= 16;
        perform pg_sleep(0.01);
    end loop;
    insert into bench_sampler_cpu values ((bench_proc_self()).cpu_ns - c0);
end $$;
create procedure bench_slot_worker(q text, c text, n int, s int)
language plpgsql as $$
declare
    t0 timestamptz;
    n_got bigint;
    p0 record;
    p1 record;
begin
    call bench_drain_slots(q || '_warm', c, n, s, s, n_got);
    insert into bench_run (worker) values (s);
    commit;
    loop
        exit when exists (select from bench_go);
        perform pg_sleep(0.002);
    end loop;
    p0 := bench_proc_self();
    t0 := clock_timestamp();
    call bench_drain_slots(q, c, n, s, s, n_got);
    p1 := bench_proc_self();
    update bench_run set t_start = t0, t_end = clock_timestamp(), got = n_got,
                         cpu_ns = p1.cpu_ns - p0.cpu_ns, vol = p1.vol - p0.vol, invol = p1.invol - p0.invol
     where worker = s;
end $$;
create procedure bench_plain_worker(q text)
language plpgsql as $$
declare
    t0 timestamptz;
    n_got bigint;
    n_batches int;
    p0 record;
    p1 record;
begin
    call bench_drain_plain(q || '_warm', 'plain', 1000, n_got, n_batches);
    p0 := bench_proc_self();
    t0 := clock_timestamp();
    call bench_drain_plain(q, 'plain', 1000, n_got, n_batches);
    p1 := bench_proc_self();
    insert into bench_run values (-1, t0, clock_timestamp(), n_got,
                                  p1.cpu_ns - p0.cpu_ns, p1.vol - p0.vol, p1.invol - p0.invol);
end $$;
SQL
	"${PSQL[@]}" -c "call bench_produce_keyed(array['pk_bucketed', 'pk_filtered'], $events)" >/dev/null

	echo "-- shared buffers per produced event, all slots drained one after another"
	printf '%-14s %4s %14s %14s %12s\n' queue N "pgque rel./ev" "event rel./ev" "events seen"
	for q in pk_bucketed pk_filtered; do
		for n in 1 4 16 32; do
			"${PSQL[@]}" -c "select pg_stat_reset()" >/dev/null
			got=$("${PSQL[@]}" -c "call bench_drain_slots('$q', 'n$n', $n, 0, $((n - 1)))")
			sleep 0.6	# let the drained session's statistics reach shared memory
			read -r blks ev_blks < <("${PSQL[@]}" -F ' ' -c "
				select sum(b), coalesce(sum(b) filter (where relname like 'event\_' || (select queue_id from pgque.queue where queue_name = '$q') || '\_%'), 0)
				  from (select relname, coalesce(heap_blks_hit, 0) + coalesce(heap_blks_read, 0)
				               + coalesce(idx_blks_hit, 0) + coalesce(idx_blks_read, 0) as b
				          from pg_statio_user_tables where schemaname = 'pgque') s")
			printf '%-14s %4s %14s %14s %12s\n' "$q" "$n" \
				"$(awk -v b="$blks" -v e="$events" 'BEGIN {printf "%.3f", b / e}')" \
				"$(awk -v b="$ev_blks" -v e="$events" 'BEGIN {printf "%.3f", b / e}')" "$got"
			echo "partition_buffers_per_event,$q N=$n,1,$(awk -v b="$blks" -v e="$events" 'BEGIN {printf "%.3f", b / e}'),$(awk -v b="$ev_blks" -v e="$events" 'BEGIN {printf "%.3f", b / e}')" >> "$RESULTS"
		done
	done

	# the ceiling of the throughput below (ADR 0104): how many sessions'
	# worth of work the machine's cores do at once, from a fixed loop's CPU
	# ns (bench_spin_ns) in one session and in each of 2 at once, two
	# rounds; N workers against one plain consumer cannot pass it, however
	# cheap their events (read on a quiet machine: a loaded one's sessions
	# alone share their cores too)
	local spin1=0 spin2=0 cap
	for _ in 1 2; do
		spin1=$((spin1 + $("${PSQL[@]}" -c "select bench_spin_ns()")))
		spin2=$((spin2 + $( { "${PSQL[@]}" -c "select bench_spin_ns()" & "${PSQL[@]}" -c "select bench_spin_ns()"; wait; } |
			awk '{t += $1} END {print t}')))
	done
	cap=$(awk -v a="$spin1" -v b="$spin2" 'BEGIN {printf "%.2f", 2 * (a / 2) / (b / 4)}')
	printf '%-34s %-22s %2s clients %10s x one session (a fixed loop: %s ms alone, %s ms each of 2 at once)\n' \
		partition_capacity "2 sessions at once" 2 "$cap" \
		"$(awk -v a="$spin1" 'BEGIN {printf "%.0f", a / 2e6}')" "$(awk -v b="$spin2" 'BEGIN {printf "%.0f", b / 4e6}')"
	echo "partition_capacity,2 sessions,2,$cap," >> "$RESULTS"

	# the slot path's shared rows as the drains above left them (ADR 0104)
	"${PSQL[@]}" -F ' ' -c "
		select 'slot_batch: ' || pg_relation_size('pgque.slot_batch') / 8192 || ' pages, its indexes '
		       || (select (sum(pg_relation_size(indexrelid)) / 8192)::bigint from pg_index where indrelid = 'pgque.slot_batch'::regclass)
		       || ', ' || n_live_tup || ' rows live, ' || n_dead_tup || ' dead; updates ' || n_tup_upd || ', HOT ' || n_tup_hot_upd
		  from pg_stat_user_tables where relid = 'pgque.slot_batch'::regclass"
	echo "-- consumer throughput: 16 slot workers in parallel vs one plain consumer (each warm, timed in the server)"
	for q in pk_bucketed pk_filtered; do
		"${PSQL[@]}" -c "truncate bench_go, bench_run" >/dev/null
		"${PSQL[@]}" -c "call bench_plain_worker('$q')" >/dev/null
		read -r eps pcpu < <("${PSQL[@]}" -F ' ' -c "select round(got / extract(epoch from t_end - t_start)),
			round(cpu_ns::numeric / got) from bench_run where worker = -1")
		printf '%-34s %-22s %2s client  %10s ev/s (CPU %s ns an event)\n' partition_throughput "$q plain" 1 "$eps" "$pcpu"
		echo "partition_throughput,$q plain,1,$eps," >> "$RESULTS"
		echo "partition_cpu_ns_per_event,$q plain,1,$pcpu," >> "$RESULTS"

		"${PSQL[@]}" -c "truncate bench_go, bench_run, bench_wait, bench_sampler_cpu" >/dev/null
		"${PSQL[@]}" -c "call bench_sample_waits()" >/dev/null &
		for s in $(seq 0 15); do
			"${PSQL[@]}" -c "call bench_slot_worker('$q', 'tp16', 16, $s)" >/dev/null &
		done
		# all 16 connected and warm (or 2 minutes), then go
		for _ in $(seq 1 1200); do
			[ "$("${PSQL[@]}" -c "select count(*) from bench_run")" -ge 16 ] && break
			sleep 0.1
		done
		"${PSQL[@]}" -c "set client_min_messages = warning; drop table if exists bench_srv0;
			create table bench_srv0 as select * from bench_server_cpu()" >/dev/null
		read -r cpu0 < <(awk '/^cpu / {print $2 + $3 + $4 + $7 + $8, $5 + $6}' /proc/stat)
		"${PSQL[@]}" -c "insert into bench_go values (true)" >/dev/null
		wait
		read -r cpu1 < <(awk '/^cpu / {print $2 + $3 + $4 + $7 + $8, $5 + $6}' /proc/stat)
		read -r b0 i0 <<<"$cpu0"; read -r b1 i1 <<<"$cpu1"
		# what else of the server spent the busy cores meanwhile (ADR
		# 0109): the sampler (its own count), and every process
		# pg_stat_activity lists still (the workers' sessions have ended:
		# their CPU is bench_run's), its CPU since the go; one started
		# meanwhile counts from its start
		"${PSQL[@]}" -F ' ' -c "
			select '  the server''s other processes: ' || round(100.0 * sum(d) / nullif(($b1 - $b0) * 1e7, 0), 1)
			       || '% of the busy cores (' || string_agg(what || ' ' || round(100.0 * d / nullif(($b1 - $b0) * 1e7, 0), 1) || '%', ', ' order by d desc) || ')'
			  from (select n.what, sum(n.cpu_ns - coalesce(o.cpu_ns, 0)) as d
			          from bench_server_cpu() n left join bench_srv0 o on o.pid = n.pid
			         where n.cpu_ns is not null and n.pid <> pg_backend_pid() and n.what <> 'bench sampler'
			         group by n.what
			        union all
			        select 'bench sampler', sum(cpu_ns) from bench_sampler_cpu) x
			 where d > 0"
		# where the time went: the machine's busy share of the run (all
		# processes: on a shared machine not the bench's alone), how much
		# longer the slowest worker ran than the median (keys are zipfian:
		# one slot holds the hottest tenant), and the waits sampled
		"${PSQL[@]}" -F ' ' -c "
			select 'busy ' || round(100.0 * ($b1 - $b0) / nullif($b1 - $b0 + $i1 - $i0, 0)) || '% of the cores;',
			       'events of the busiest slot ' || round(100.0 * max(got) / sum(got), 1) || '% (1/16: 6.3%);',
			       'slowest / median worker time ' || round((max(extract(epoch from t_end - t_start))
			           / percentile_cont(0.5) within group (order by extract(epoch from t_end - t_start)))::numeric, 2)
			  from bench_run"
		"${PSQL[@]}" -F ' ' -c "
			select '  ' || what || ' ' || round(100.0 * count(*) / sum(count(*)) over (), 1) || '%'
			  from bench_wait where not other group by what order by count(*) desc limit 8"
		# the workers' own CPU (ADR 0104): per event, summed over the 16
		# (against the plain consumer's above), their share of the busy
		# cores (/proc/stat counts in 1/100 s), context switches per 1,000
		# events, and whatever else of the server was sampled running
		read -r wcpu < <("${PSQL[@]}" -c "select round(sum(cpu_ns)::numeric / sum(got)) from bench_run")
		"${PSQL[@]}" -F ' ' -c "
			select 'workers'' CPU ' || round(sum(cpu_ns)::numeric / sum(got)) || ' ns an event ('
			       || round(sum(cpu_ns)::numeric / sum(got) / nullif($pcpu, 0), 2) || 'x the plain consumer''s),',
			       round(100.0 * sum(cpu_ns) / nullif(($b1 - $b0) * 1e7, 0)) || '% of the busy cores;',
			       'switches per 1,000 events: ' || round(1000.0 * sum(vol) / sum(got), 1) || ' voluntary, '
			       || round(1000.0 * sum(invol) / sum(got), 1) || ' involuntary'
			  from bench_run"
		"${PSQL[@]}" -F ' ' -c "
			select '  others sampled: ' || string_agg(what || ' ' || n, ', ' order by n desc)
			  from (select what, count(*) as n from bench_wait where other group by what) o having count(*) > 0"
		echo "partition_cpu_ns_per_event,$q N=16,16,$wcpu," >> "$RESULTS"
		echo "partition_busy,$q N=16,16,$(awk -v b=$((b1 - b0)) -v i=$((i1 - i0)) 'BEGIN {printf "%.3f", b / (b + i)}')," >> "$RESULTS"
		read -r eps got < <("${PSQL[@]}" -F ' ' -c "
			select round(sum(got) / extract(epoch from max(t_end) - min(t_start))), sum(got) from bench_run")
		printf '%-34s %-22s %2s clients %10s ev/s (%s events)\n' partition_throughput "$q 16 slot workers" 16 "$eps" "$got"
		echo "partition_throughput,$q N=16,16,$eps," >> "$RESULTS"
	done
}
