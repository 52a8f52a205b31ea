#!/usr/bin/env bash
# benchmark/evindex-read.sh [BATCHES]: the read side of the ev_txid index
# alternatives (issue #30 item 1, ADR 0073).  For each layout of a queue's
# child tables (btree, BRIN minmax pages_per_range 4 and 32, none) it
# produces BATCHES (default 100) send_batch calls of 10,000 events with a
# tick after each (1M events), the BRIN queues summarised by
# brin_summarize_new_values() after each tick (the "summarise at tick"
# design); from the middle batch on, one long transaction in another
# session sends one event after every batch and commits before the last
# tick (it widens the BRIN ranges it touches: the bad case).  Then it reads
# four windows with the window reader's predicate (src/window.c,
# enable_seqscan off as there) under EXPLAIN (ANALYZE, BUFFERS):
#   old      batch 5 (a cursor moved back by seek / a retained window)
#   lagging  batch 40 (before the long transaction began)
#   during   batch 60 (the long transaction open, in the window's xip)
#   fresh    the last batch (the tail, with the long transaction's rows)
# and prints shared buffers (hit + read) per window and rows returned.
# Then the probes rotation and retention make of a table (sql/70_maint.sql,
# sql/21_retention.sql): its newest ev_txid (order by ev_txid desc limit 1,
# a backward btree scan today) and the form a BRIN can serve, whether any
# event is at or past a horizon (here the last tick's xmin); and
# the summarisation's WAL and time per event.  Buffers do not depend on
# the load; times do.
set -euo pipefail
cd "$(dirname "$0")/.."
. benchmark/lib.sh
B=${1:-100}
# benchmark/server.conf's settings; autovacuum off: the counts repeat
bench_server evread 56712 "autovacuum = off"
psql_() { "${PSQL[@]}" "$@"; }
psql_ >/dev/null -c "$BENCH_XID8_BRIN_OPCLASS"
psql_ >/dev/null <<'SQL'
create extension pgque_bgw;
create function public.relayout(q text, how text) returns void language plpgsql as $$
declare t text; qid int4 := (select queue_id from pgque.queue where queue_name = q);
begin
    for i in 0 .. 2 loop
        t := 'event_' || qid || '_' || i;
        execute format('drop index pgque.%I', t || '_txid_idx');
        if how like 'brin%' then
            execute format('create index %I on pgque.%I using brin (ev_txid public.xid8_minmax_ops)'
                           ' with (pages_per_range = %s, autosummarize = off)',
                           t || '_txid_idx', t, substr(how, 5));
        end if;
    end loop;
end $$;
create table public.summ (q text, wal numeric, ms float8);
-- summarise the current table's BRIN at tick, recording its WAL and time
create function public.summarise(q text) returns void language plpgsql as $$
declare a pg_lsn := pg_current_wal_insert_lsn(); t timestamptz := clock_timestamp();
        qid int4 := (select queue_id from pgque.queue where queue_name = q);
begin
    perform brin_summarize_new_values(format('pgque.%I', 'event_' || qid || '_0_txid_idx')::regclass);
    insert into public.summ values (q, pg_wal_lsn_diff(pg_current_wal_insert_lsn(), a),
                                    extract(epoch from clock_timestamp() - t) * 1000);
end $$;
-- the window (tick k, tick k+1) read as src/window.c reads it
create function public.read_window(q text, k int8) returns table (buffers int8, nrows int8) language plpgsql as $$
declare
    qid int4 := (select queue_id from pgque.queue where queue_name = q);
    lo pg_snapshot := (select tick_snapshot from pgque.tick where tick_queue = qid and tick_id = k);
    hi pg_snapshot := (select tick_snapshot from pgque.tick where tick_queue = qid and tick_id = k + 1);
    plan json;
begin
    set local enable_seqscan = off;
    execute format('explain (analyze, buffers, format json) select * from pgque.%I ev where '
                   || '((ev.ev_txid >= %L and ev.ev_txid < %L) or ev.ev_txid = any(%L::xid8[]))'
                   || ' and pg_visible_in_snapshot(ev.ev_txid, %L)',
                   'event_' || qid || '_0', pg_snapshot_xmax(lo), pg_snapshot_xmax(hi),
                   array(select pg_snapshot_xip(lo)), hi) into plan;
    buffers := (plan -> 0 -> 'Plan' ->> 'Shared Hit Blocks')::int8 + (plan -> 0 -> 'Plan' ->> 'Shared Read Blocks')::int8;
    nrows := (plan -> 0 -> 'Plan' ->> 'Actual Rows')::int8;
    return next;
end $$;
-- buffers of the newest-txid probe (i_exists false) or of the horizon probe
create function public.probe(q text, i_exists boolean) returns int8 language plpgsql as $$
declare
    qid int4 := (select queue_id from pgque.queue where queue_name = q);
    h xid8 := (select pg_snapshot_xmin(tick_snapshot) from pgque.tick where tick_queue = qid
                order by tick_id desc limit 1);
    plan json;
begin
    set local enable_seqscan = off;
    if i_exists then
        execute format('explain (analyze, buffers, format json) select exists (select from pgque.%I where ev_txid >= %L)',
                       'event_' || qid || '_0', h) into plan;
    else
        execute format('explain (analyze, buffers, format json) select ev_txid from pgque.%I order by ev_txid desc limit 1',
                       'event_' || qid || '_0') into plan;
    end if;
    return (plan -> 0 -> 'Plan' ->> 'Shared Hit Blocks')::int8 + (plan -> 0 -> 'Plan' ->> 'Shared Read Blocks')::int8;
end $$;
SQL
LAYOUTS="btree brin4 brin32 none"
for q in $LAYOUTS; do
	psql_ -c "select pgque.create_queue('$q')" >/dev/null
	[ $q = btree ] || psql_ -c "select public.relayout('$q', '$q')" >/dev/null
done

for q in $LAYOUTS; do
	coproc LONG { as_pg psql -X -q -A -t -h "$WORK" -p "$PORT" -d postgres -v ON_ERROR_STOP=1; }
	# long SQL: run it in the long transaction's session and wait for it
	long() { echo "$1; \\echo ok" >&"${LONG[1]}"; read -r _ <&"${LONG[0]}"; }
	for b in $(seq 1 "$B"); do
		if [ "$b" -eq $((B / 2)) ]; then long "begin; select 1 from pgque.send('$q', 'long')"; fi
		if [ "$b" -gt $((B / 2)) ] && [ "$b" -lt "$B" ]; then long "select 1 from pgque.send('$q', 'long')"; fi
		if [ "$b" -eq "$B" ]; then long "commit"; fi
		psql_ -c "select pgque.send_batch('$q', 'default', array_fill('payload-abcdefghij'::text, array[10000])) is null" \
			-c "select pgque.ticker('$q')" >/dev/null
		[[ $q == brin* ]] && psql_ -c "select public.summarise('$q')" >/dev/null
	done
	echo '\q' >&"${LONG[1]}"
	wait "$LONG_PID" 2>/dev/null || true
done

psql_ -c "checkpoint" >/dev/null
printf '%-8s %-8s %10s %8s\n' layout window buffers rows
for q in $LAYOUTS; do
	for w in old:5 lagging:$((B * 2 / 5)) during:$((B * 3 / 5)) fresh:$B; do
		# tick k+1 closes batch k (tick 1 is the queue's first)
		psql_ -At -F' ' -c "select format('%-8s %-8s %10s %8s', '$q', '${w%%:*}', buffers, nrows)
		                      from public.read_window('$q', ${w#*:})"
	done
done
echo
printf '%-8s %-22s %10s\n' layout probe buffers
for q in $LAYOUTS; do
	psql_ -At -c "select format('%-8s %-22s %10s', '$q', 'newest ev_txid', public.probe('$q', false))"
	psql_ -At -c "select format('%-8s %-22s %10s', '$q', 'any at/past horizon', public.probe('$q', true))"
done
echo
psql_ -At -c "select format('%-8s summarise at tick: %s B WAL/event, %s ms per 10k events (loaded machine)', q,
                            round(sum(wal) / ($B * 10000.0), 3), round(avg(ms)::numeric, 2))
                from public.summ group by q order by q"
psql_ -At -c "select format('%-40s %8s pages', c.relname, pg_relation_size(c.oid) / 8192)
                from pg_class c where c.relname ~ '^event_[0-9]+_0(_txid_idx)?$' order by 1"
