# Plots (sourced by benchmark/run.sh): PNG files next to the CSV, drawn by
# gnuplot from what this run measured.
#   <stamp>-latency.png    latency distribution (CDF) per system at 100 ev/s
#   <stamp>-partition.png  pgque shared buffers per event against N
#   <stamp>-sustained.png  lag and event-table size over the sustained run
#   <stamp>-idle.png       workers' CPU against the number of idle queues
#   <stamp>-drain-payload.png  drain throughput against payload size
#   <stamp>-drain-fanout.png   drain throughput per consumer against fan-out

make_plots() {
	local stamp=$1 out=benchmark/results f name n plots=()
	command -v gnuplot >/dev/null || return 0

	# latency: one CDF per system, thinned to at most ~1,000 points each
	for f in "$WORK"/latency_*_100per*.csv; do
		[ -s "$f" ] || continue
		name=$(basename "$f" .csv | sed 's/^latency_//; s/_100pers$//; s/_/ /g')
		n=$(wc -l < "$f")
		awk -v n="$n" 'NR % int(n / 1000 + 1) == 0 || NR == n {print $1, NR / n}' "$f" > "$f.cdf"
		plots+=("'$f.cdf' using 1:2 with lines lw 2 title '$name'")
	done
	if [ ${#plots[@]} -gt 0 ]; then
		gnuplot <<GP
set terminal pngcairo size 900,520 font 'sans,11'
set output '$out/$stamp-latency.png'
set title 'send -> in the consumer''s hands, 100 events/s, each system at its defaults'
set xlabel 'latency (ms, log scale)'
set ylabel 'fraction of events'
set logscale x
set key bottom right
set grid
plot $(IFS=,; echo "${plots[*]}")
GP
	fi

	# partition keys: buffers per produced event against N
	awk -F, '$1 == "partition_buffers_per_event" {split($2, a, " N="); print a[2], a[1], $4}' "$RESULTS" |
		awk '{v[$1 "," $2] = $3; n[$1] = 1} END {for (k in n) print k, v[k ",pk_bucketed"], v[k ",pk_filtered"]}' |
		sort -n > "$WORK/partition.dat"
	if [ -s "$WORK/partition.dat" ]; then
		gnuplot <<GP
set terminal pngcairo size 900,520 font 'sans,11'
set output '$out/$stamp-partition.png'
set title 'shared buffers touched in pgque relations per produced event, N slots read one after another'
set xlabel 'N (slots)'
set ylabel 'buffers per event'
set logscale x 2
set yrange [0:*]
set xtics (1, 4, 16, 32)
set key top left
set grid
plot '$WORK/partition.dat' using 1:2 with linespoints lw 2 title '32 partition buckets (pgque)', \
     '' using 1:3 with linespoints lw 2 title 'no buckets: every slot scans and filters (PgQue design)'
GP
	fi

	# idle queues: CPU of the workers against 10, 100, 1,000 queues
	if [ -s "$WORK/idle_cpu.dat" ]; then
		gnuplot <<GP
set terminal pngcairo size 900,520 font 'sans,11'
set output '$out/$stamp-idle.png'
set title 'CPU of the workers with N idle queues in one database (/proc/<pid>/stat)'
set xlabel 'idle queues (log scale)'
set ylabel '% of one core'
set logscale x
set xtics (10, 100, 1000)
set yrange [0:*]
set key top left
set grid
plot '$WORK/idle_cpu.dat' using 1:3 with linespoints lw 2 title 'ticker + watchdog', \
     '' using 1:4 with linespoints lw 2 title 'maintenance', \
     '' using 1:2 with linespoints lw 2 title 'all workers'
GP
	fi

	# drain against payload size: events/s per system
	awk -F, '$1 ~ /^drain_payload / {split($1, a, " "); v[a[2] "," $2] = $4; n[a[2]] = 1}
		END {for (k in n) print k, v[k ",pgque receive/ack"], v[k ",PgQ next/get/finish"]}' "$RESULTS" |
		sort -n > "$WORK/drain_payload.dat"
	if [ -s "$WORK/drain_payload.dat" ]; then
		gnuplot <<GP
set terminal pngcairo size 900,520 font 'sans,11'
set output '$out/$stamp-drain-payload.png'
set title 'consumer drain against payload size (one consumer, 1,000 events per receive)'
set xlabel 'payload (bytes, log scale)'
set ylabel 'events/s'
set logscale x
set yrange [0:*]
set key top right
set grid
plot '$WORK/drain_payload.dat' using 1:2 with linespoints lw 2 title 'pgque receive/ack', \
     '' using 1:3 with linespoints lw 2 title 'PgQ next/get/finish'
GP
	fi

	# drain against fan-out: deliveries/s
	awk -F, '$1 ~ /^drain_fanout / {split($1, a, " "); print a[2], $4}' "$RESULTS" | sort -n > "$WORK/drain_fanout.dat"
	if [ -s "$WORK/drain_fanout.dat" ]; then
		gnuplot <<GP
set terminal pngcairo size 900,520 font 'sans,11'
set output '$out/$stamp-drain-fanout.png'
set title 'consumer drain against fan-out: consumers of one queue, each draining the backlog'
set xlabel 'consumers (log scale)'
set ylabel 'events/s per delivery'
set logscale x
set yrange [0:*]
set key off
set grid
plot '$WORK/drain_fanout.dat' using 1:2 with linespoints lw 2
GP
	fi

	if [ -s "$WORK/sustained.csv" ]; then
		cp "$WORK/sustained.csv" "$out/$stamp-sustained.csv"
		gnuplot <<GP
set terminal pngcairo size 900,520 font 'sans,11'
set output '$out/$stamp-sustained.png'
set title 'sustained load, 8 slot workers, slot 3 stopped and restarted'
set datafile separator ','
set xlabel 'seconds'
set ylabel 'largest consumer lag (s)'
set y2label 'event tables (MB)'
set y2tics
set ytics nomirror
set yrange [0:*]
set y2range [0:*]
set key top right
set grid
plot '$WORK/sustained.csv' every ::1 using 1:2 with lines lw 2 title 'max lag (s)', \
     '' every ::1 using 1:(\$6 / 1048576) axes x1y2 with lines lw 2 title 'event tables (MB)', \
     '' every ::1 using 1:(\$7 * 5) with steps lw 1 title 'open alerts (x5)'
GP
	fi
}
