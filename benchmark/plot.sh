# Plots (sourced by benchmark/run.sh): PNG files next to the CSV, drawn by
# gnuplot from what this run measured.
#   <stamp>-latency.png    latency distribution (CDF) per system at 100 ev/s
#   <stamp>-partition.png  pgque shared buffers per event against N
#   <stamp>-sustained.png  lag and event-table size over the sustained run
#   <stamp>-idle.png       workers' CPU against the number of idle queues
#   <stamp>-produce-payload.png  producer throughput against payload size
#   <stamp>-drain-payload.png  drain throughput against payload size
#   <stamp>-drain-fanout.png   drain throughput per consumer against fan-out

# line_plot PNG DATA TITLE XLABEL YLABEL SETTINGS SERIES: a line chart of
# DATA (nothing when it is empty); SERIES is gnuplot's plot list after the
# file name, SETTINGS extra gnuplot commands
line_plot() {
	[ -s "$2" ] || return 0
	gnuplot <<GP
set terminal pngcairo size 900,520 font 'sans,11' noenhanced
set output '$1'
set title '$3'
set xlabel '$4'
set ylabel '$5'
set yrange [0:*]
set key top left
set grid
$6
plot '$2' $7
GP
}

# payload_plot produce|drain PNG TITLE: events/s against payload size, a
# line per system (the rows "<w>_payload <bytes>,<system>,...")
payload_plot() {
	local w=$1 systems series="" i=2 x
	systems=$(awk -F, -v w="$w" '$1 ~ "^" w "_payload " {print $2}' "$RESULTS" | sort -u | paste -sd'|')
	[ -n "$systems" ] || return 0
	awk -F, -v w="$w" -v list="$systems" '
		BEGIN {m = split(list, sys, "|")}
		$1 ~ "^" w "_payload " {split($1, a, " "); v[a[2] "," $2] = $4; n[a[2]] = 1}
		END {for (k in n) {line = k; for (i = 1; i <= m; i++) line = line " " (v[k "," sys[i]] == "" ? "?" : v[k "," sys[i]]); print line}}' \
		"$RESULTS" | sort -n > "$WORK/${w}_payload.dat"
	IFS='|' read -r -a systems <<<"$systems"
	for x in "${systems[@]}"; do
		series+="${series:+, '' }using 1:$i with linespoints lw 2 title '$x'"
		i=$((i + 1))
	done
	line_plot "$2" "$WORK/${w}_payload.dat" "$3" 'payload (bytes, log scale)' 'events/s' \
		'set logscale x; set datafile missing "?"; set key bottom left' "$series"
}

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
set terminal pngcairo size 900,520 font 'sans,11' noenhanced
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
	line_plot "$out/$stamp-partition.png" "$WORK/partition.dat" \
		'shared buffers touched in pgque relations per produced event, N slots read one after another' \
		'N (slots)' 'buffers per event' 'set logscale x 2; set xtics (1, 4, 16, 32)' \
		"using 1:2 with linespoints lw 2 title '32 partition buckets (pgque)', \
		 '' using 1:3 with linespoints lw 2 title 'no buckets: every slot scans and filters (PgQue design)'"

	# idle queues: CPU of the workers against 10, 100, 1,000 queues
	line_plot "$out/$stamp-idle.png" "$WORK/idle_cpu.dat" \
		'CPU of the workers with N idle queues in one database (/proc/<pid>/stat)' \
		'idle queues (log scale)' '% of one core' 'set logscale x; set xtics (10, 100, 1000)' \
		"using 1:3 with linespoints lw 2 title 'ticker + watchdog', \
		 '' using 1:4 with linespoints lw 2 title 'maintenance', \
		 '' using 1:2 with linespoints lw 2 title 'all workers'"

	# producer and drain against payload size: events/s per system
	payload_plot produce "$out/$stamp-produce-payload.png" \
		'producer against payload size (1 event per transaction, 1 client)'
	payload_plot drain "$out/$stamp-drain-payload.png" \
		'consumer drain against payload size (one consumer, 1,000 events per receive)'

	# drain against fan-out: deliveries/s
	awk -F, '$1 ~ /^drain_fanout / {split($1, a, " "); print a[2], $4}' "$RESULTS" | sort -n > "$WORK/drain_fanout.dat"
	line_plot "$out/$stamp-drain-fanout.png" "$WORK/drain_fanout.dat" \
		'consumer drain against fan-out: consumers of one queue, each draining the backlog' \
		'consumers (log scale)' 'events/s per delivery' 'set logscale x; set key off' \
		"using 1:2 with linespoints lw 2"

	if [ -s "$WORK/sustained.csv" ]; then
		cp "$WORK/sustained.csv" "$out/$stamp-sustained.csv"
		gnuplot <<GP
set terminal pngcairo size 900,520 font 'sans,11' noenhanced
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
