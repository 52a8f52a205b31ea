# The bench's start-up as one source (issue #30 item 8, ADR 0097): every
# benchmark script that starts a server does it through benchmark/lib.sh,
# whose server has benchmark/server.conf's settings with the script's own
# lines after them (the later wins); no script spells server.conf's
# settings again; make bench's plan (run.sh --plan) holds the sustained
# target's 10 minutes in the full run and QUICK's short one.  One real
# server, started and stopped by lib.sh; nothing timed.
use strict;
use warnings;
use PostgreSQL::Test::Utils;
use PostgreSQL::Test::Cluster;
use Test::More;
use PgqueNode;

my $root = "$ENV{PGQUE_SRC}/..";
my @scripts = sort glob("$root/benchmark/*.sh");
ok(scalar(@scripts) > 10, 'the benchmark scripts are there');

# ---- structure: one start-up, one source of the settings -------------------
my %conf;
for my $line (split /\n/, slurp_file("$root/benchmark/server.conf"))
{
	next if $line =~ /^#/ || $line !~ /\S/;
	my ($name) = $line =~ /^\s*([\w.]+)\s*=/;
	$conf{$name} = $line;
}
ok(exists $conf{shared_buffers} && exists $conf{synchronous_commit}, 'server.conf names the settings');
for my $path (@scripts)
{
	my ($name) = $path =~ m{([^/]+)$};
	next if $name eq 'lib.sh';
	my $text = slurp_file($path);
	# outside.sh is a second opinion written apart (ADR 0090): it reads
	# server.conf itself and sources nothing of benchmark/
	if ($name eq 'outside.sh')
	{
		unlike($text, qr{^\s*\.\s+\S*(lib|run)\.sh}m, 'outside.sh sources none of the bench\'s scripts');
		like($text, qr{benchmark/server\.conf}, 'outside.sh reads server.conf');
		next;
	}
	# a server of its own only through bench_server
	unlike($text, qr/^[^#]*\b(start_cluster|make_workdir|initdb)\b/m,
		"$name starts no server but through benchmark/lib.sh");
	if ($text =~ /^set -euo pipefail/m)
	{
		like($text, qr{^\. benchmark/lib\.sh$}m, "$name (a script that runs) sources benchmark/lib.sh");
	}
	# server.conf's settings are not written again (a script adds lines of
	# other names, or turns autovacuum or the workers to what it measures)
	for my $setting (grep { $_ ne 'autovacuum' && $_ ne 'pgque_bgw.enabled' } sort keys %conf)
	{
		unlike($text, qr/"\Q$setting\E\s*=/, "$name does not set $setting again");
	}
}

# ---- the options the docs give a script are the script's ---------------------
# A command line in docs/ (`XIP=1 bash benchmark/drain_instructions.sh 6
# 10000`) names options by environment; each must be read by that script or
# the lib.sh it sources (a merge once kept a script without the options its
# docs cite).
my $shared = slurp_file("$root/benchmark/lib.sh") . slurp_file("$root/test/lib.sh");
my $cited = 0;
for my $doc (sort(glob("$root/docs/*.md"), glob("$root/docs/adr/*.md")))
{
	my ($dname) = $doc =~ m{(docs/.*)$};
	(my $text = slurp_file($doc)) =~ s/\s+/ /g;
	while ($text =~ /((?:\b[A-Z_][A-Z0-9_]*=\S+\s+)+)(?:bash\s+)?benchmark\/([\w-]+\.sh)\b/g)
	{
		my ($vars, $script) = ($1, $2);
		my $path = "$root/benchmark/$script";
		next unless -e $path;
		my $body = slurp_file($path) . $shared;
		for my $var ($vars =~ /\b([A-Z_][A-Z0-9_]*)=/g)
		{
			$cited++;
			like($body, qr/\b\Q$var\E\b/, "$dname: $script reads $var, as the doc's command line sets it");
		}
	}
}
cmp_ok($cited, '>', 20, 'the docs\' command lines with options were found');

# ---- lib.sh: bench_server's settings, port, and its exit ---------------------
my ($out, $rc, $port, $bindir) = PgqueNode::bench_probe(<<'SH');
bench_server lib_probe 1 "autovacuum = off" "work_mem = '7MB'"
echo "work=$WORK"
as_pg pg_isready -q -h 127.0.0.1 -p "$PORT" && echo "tcp=open" || echo "tcp=closed"
as_pg pg_isready -q -h "$WORK" -p "$PORT" && echo "socket=open" || echo "socket=closed"
"${PSQL[@]}" -c "select 'show ' || name || '=' || current_setting(name) from pg_settings
                 where name in ('shared_buffers', 'synchronous_commit', 'autovacuum', 'work_mem', 'fsync',
                                'max_wal_size', 'pgque_bgw.enabled', 'port', 'checkpoint_timeout',
                                'listen_addresses')
                 order by name"
printf 'setting=%s\n' "${SETTINGS[@]}"
# bench_hold_xid (drain_instructions.sh's XIP=1): a snapshot taken while it
# holds (once a later xid has ended: a snapshot lists only xids below its
# xmax) lists its xid in progress; after bench_release_xid none does
bench_hold_xid
"${PSQL[@]}" -c "select pg_catalog.pg_current_xact_id()" >/dev/null
echo "held_xip=$("${PSQL[@]}" -c "select count(*) from pg_catalog.pg_snapshot_xip(pg_catalog.pg_current_snapshot())")"
echo "held_session=$("${PSQL[@]}" -c "select count(*) from pg_catalog.pg_stat_activity where application_name = 'bench_hold_xid' and backend_xid is not null")"
bench_release_xid
echo "released_xip=$("${PSQL[@]}" -c "select count(*) from pg_catalog.pg_snapshot_xip(pg_catalog.pg_current_snapshot())")"
echo "released_session=$("${PSQL[@]}" -c "select count(*) from pg_catalog.pg_stat_activity where application_name = 'bench_hold_xid'")"
# the shared SQL (benchmark/bench.sql), loaded twice, on a real queue: the
# keyed stream to two queues, a 4-slot consumer and a plain one drain all
"${PSQL[@]}" -c "create extension pgque_bgw" >/dev/null
bench_sql
bench_sql
"${PSQL[@]}" >/dev/null <<'SQL'
select pgque.create_queue('kb'), pgque.set_queue_config('kb', 'partition_buckets', '32');
select pgque.create_queue('kf');
select pgque.subscribe_slot(q, 's4', s, 4) from unnest(array['kb', 'kf']) q, generate_series(0, 3) s;
select pgque.subscribe(q, 'plain') from unnest(array['kb', 'kf']) q;
select pgque.register_subconsumer('kf', 'g', m) from unnest(array['m1', 'm2']) m;
create procedure probe_plain(q text, inout n bigint default 0) language plpgsql as $$
declare
    b int;
begin
    call bench_drain_plain(q, 'plain', 300, n, b);   -- as partition.sh calls it
end $$;
SQL
"${PSQL[@]}" -c "call bench_produce_keyed(array['kb', 'kf'], 2500, 0.5)" >/dev/null
echo "slots_kb=$("${PSQL[@]}" -c "call bench_drain_slots('kb', 's4', 4, 0, 3)")"
echo "slots_kf=$("${PSQL[@]}" -c "call bench_drain_slots('kf', 's4', 4, 0, 3)")"
echo "plain_kb=$("${PSQL[@]}" -F ' ' -c "call bench_drain_plain('kb', 'plain', 1000)")"
echo "plain_kf=$("${PSQL[@]}" -c "call probe_plain('kf')")"
echo "again_kb=$("${PSQL[@]}" -F ' ' -c "call bench_drain_plain('kb', 'plain')")"
m1=$("${PSQL[@]}" -F ' ' -c "call bench_drain_plain('kf', 'g', 50, member => 'm1')")
m2=$("${PSQL[@]}" -F ' ' -c "call bench_drain_plain('kf', 'g', 50, member => 'm2')")
echo "coop_kf=$(( ${m1%% *} + ${m2%% *} ))"
# bench_server_cpu (partition.sh, ADR 0109): every process the server
# lists with its CPU ns, a session running a slot worker's call named
# apart (a stand-in procedure of the same name, asleep meanwhile)
"${PSQL[@]}" -c "create procedure bench_slot_worker(s float8) language sql as \$\$ select pg_sleep(s) \$\$" >/dev/null
"${PSQL[@]}" -c "call bench_slot_worker(60)" >/dev/null 2>&1 &
for _ in $(seq 1 200); do
	[ "$("${PSQL[@]}" -c "select count(*) from pg_stat_activity where query like 'call bench_slot_worker(%'")" = 1 ] && break
	sleep 0.1
done
echo "srv=$("${PSQL[@]}" -F ' ' -c "select count(*) filter (where pid = pg_backend_pid() and what = 'client backend' and cpu_ns > 0),
	count(*) filter (where what = 'slot worker' and cpu_ns > 0), count(*) filter (where what = 'walwriter' and cpu_ns >= 0),
	count(*) filter (where cpu_ns is null) from bench_server_cpu()")"
"${PSQL[@]}" -c "select pg_terminate_backend(pid) from pg_stat_activity where query like 'call bench_slot_worker(%'" >/dev/null
wait || true
# bench_cputime (drain_instructions.sh's TOOL=cpu): a single-user backend's
# CPU time, and an ERROR in it stops the caller; an xid held again is left
# to the exit to end
bench_hold_xid
echo "holder=$BENCH_XID_PID"
bench_snapshot
echo "cpu=$(echo "select count(*) from generate_series(1, 300000);" | bench_cputime)"
(echo "select 1/0;" | bench_cputime >/dev/null 2>&1) && echo "cpu_error=went on" || echo "cpu_error=stopped"
SH
is($rc, 0, 'bench_server starts a server') or diag($out);
my %show = $out =~ /^show ([\w.]+)=(.*)$/mg;
is($show{port}, $port, 'on PGQUE_BENCH_PORT, not the script\'s default');
is($show{shared_buffers}, '512MB', 'shared_buffers from server.conf');
is($show{synchronous_commit}, 'off', 'synchronous_commit from server.conf');
is($show{fsync}, 'off', 'fsync from server.conf');
is($show{max_wal_size}, '4GB', 'max_wal_size from server.conf');
is($show{checkpoint_timeout}, '30min', 'checkpoint_timeout from server.conf');
is($show{'pgque_bgw.enabled'}, 'off', 'the workers off, as server.conf has them');
is($show{autovacuum}, 'off', 'a script\'s own line wins over server.conf\'s (autovacuum on there)');
is($show{work_mem}, '7MB', 'a script\'s line of another name is there');
is($show{listen_addresses}, '', 'no TCP: the bench\'s superuser is trusted, so only its own socket directory reaches it');
like($out, qr/^tcp=closed$/m, 'nothing answers on loopback while the server runs');
like($out, qr/^socket=open$/m, 'the unix socket in WORK does');
my @settings = $out =~ /^setting=(.*)$/mg;
is_deeply(\@settings, [ (map { $conf{$_} } ordered_conf()), "autovacuum = off", "work_mem = '7MB'" ],
	'SETTINGS (printed in make bench\'s report): server.conf\'s lines in order, then the script\'s');
my %drained = $out =~ /^(slots_\w+|plain_\w+|again_\w+|coop_\w+)=(.*)$/mg;
is($drained{slots_kb}, 2500, 'bench_drain_slots: 4 slots of a bucketed queue hand out every event of the stream once');
is($drained{slots_kf}, 2500, 'the same in a queue without buckets (each slot filters the window)');
like($drained{plain_kb}, qr/^2500 \d+$/, 'bench_drain_plain: every event, and the batches it took');
is($drained{plain_kf}, 2500, 'called from PL/pgSQL with the count as partition.sh calls it');
is($drained{again_kb}, '0 0', 'nothing twice');
is($drained{coop_kf}, 2500, 'with member, the drain is a cooperative member\'s: two members hand out every event once');
my %xid = $out =~ /^((?:held|released)_\w+)=(.*)$/mg;
is($xid{held_xip}, 1, 'bench_hold_xid: a snapshot lists its transaction in progress');
is($xid{held_session}, 1, 'one session holds an xid');
is($xid{released_xip}, 0, 'bench_release_xid: none after it');
is($xid{released_session}, 0, 'its session ended');
like($out, qr/^srv=1 1 1 0$/m,
	'bench_server_cpu: this session, the slot worker named apart and the walwriter, each with its CPU ns');
like($out, qr/^cpu=\d+ \d+$/m, 'bench_cputime: a single-user backend\'s user and system CPU time in ns');
my ($cpu_user) = $out =~ /^cpu=(\d+) /m;
cmp_ok($cpu_user // 0, '>', 0, 'some user time counted');
like($out, qr/^cpu_error=stopped$/m, 'an ERROR in the single-user backend stops the caller');
my ($work) = $out =~ /^work=(.*)$/m;
ok($work && !-e $work, 'at exit the server stopped and its directory is gone');
my ($holder) = $out =~ /^holder=(\d+)$/m;
ok($holder && !kill(0, $holder), 'and the session bench_hold_xid started is gone');
system("'$bindir/pg_isready' -q -h '$work' -p $port");
isnt($?, 0, 'no server left on its socket');

# server.conf's lines in the file's order
sub ordered_conf
{
	my @names;
	for my $line (split /\n/, slurp_file("$root/benchmark/server.conf"))
	{
		next if $line =~ /^#/ || $line !~ /\S/;
		push @names, $line =~ /^\s*([\w.]+)\s*=/;
	}
	return @names;
}

# ---- the shared drain statements --------------------------------------------
$out = `cd '$root' && bash -c '. benchmark/lib.sh; drain_do pgque; drain_do pgque_32_buckets 5000; drain_do pgq; drain_window pgque_32_buckets 7' 2>&1`;
is($?, 0, 'drain_do and drain_window print') or diag($out);
my @l = split /\n/, $out;
like($l[0], qr/pgque\.receive\('drain', 'c', 1000\)/, 'the unbucketed drain reads queue drain');
unlike($l[0], qr/exit when t >=/, 'without a limit, the drain runs to the end');
like($l[1], qr/pgque\.receive\('drain_b', 'c', 1000\).*exit when t >= 5000;/, 'the bucketed one, with a limit');
like($l[2], qr/pgq\.next_batch\('drain', 'c'\).*pgq\.finish_batch/, 'PgQ\'s: next_batch / get_batch_events / finish_batch');
like($l[3], qr/send_batch\('drain_b', .*array\[7\]\), array\(select 'tenant-' \|\| \(g % 2000\) from generate_series\(1, 7\) g\)\)/,
	'a bucketed window: keys over 2,000 tenants');
is($l[4], "select pgque.ticker('drain_b');", 'a window ends with a tick');
like($_, qr/t := t \+ n;.*raise notice 'drained % events in % s', t, extract\(epoch from clock_timestamp\(\) - t0\)/,
	'each drain counts its events and says them with the server\'s time around its loop (ADR 0124)')
  for @l[0 .. 2];
$out = `cd '$root' && printf 'NOTICE:  other\nNOTICE:  drained 100000 events in 0.125000 s\n' | bash -c '. benchmark/lib.sh; drain_notice_eps'`;
is($out, "100000 800000\n", 'drain_notice_eps: the events and the events per second of that notice');
$out = `cd '$root' && printf 'NOTICE:  drained 0 events in 0 s\n' | bash -c '. benchmark/lib.sh; drain_notice_eps'`;
is($out, '', '... nothing when no time passed (the caller falls back to the wall clock)');

# ---- make bench's plan --------------------------------------------------------
sub bench_plan
{
	my ($env) = @_;
	my $p = `cd '$root' && env $env bash benchmark/run.sh --plan 2>&1`;
	is($?, 0, "run.sh --plan ($env)") or diag($p);
	return { $p =~ /^(\w+)=(.*)$/mg };
}
my $full = bench_plan('QUICK=0');
is($full->{SUS_SECS}, 600, 'the full run holds the sustained load for the target\'s 10 minutes');
is($full->{SUS_STOP_FOR}, 180, 'with one slot stopped for 3 minutes');
is($full->{SUS_CATCH_UP}, 90, 'and 90 s allowed to catch up, as before');
cmp_ok($full->{SUS_STOP_AT} + $full->{SUS_STOP_FOR} + $full->{SUS_CATCH_UP}, '<=', $full->{SUS_SECS},
	'the stop and the catch-up fit in the run');
is($full->{IDLE_POINTS}, 100, 'the idle curve keeps the 100 queues the idle latency needs');
cmp_ok($full->{LAT_SAT_SECS}, '>', 0, 'the full run keeps the saturation latency runs');
cmp_ok($full->{PROXY_CURVE_DUR}, '<', $full->{DUR}, 'the proxy curve\'s runs are shorter than the targets\'');
my $quick = bench_plan('QUICK=1');
is($quick->{SUS_SECS}, 16, 'QUICK\'s sustained run stays 16 s');
cmp_ok($quick->{SUS_STOP_AT} + $quick->{SUS_STOP_FOR} + $quick->{SUS_CATCH_UP}, '<=', $quick->{SUS_SECS},
	'QUICK\'s stop and catch-up fit in it');
is($quick->{LAT_SAT_SECS}, 0, 'QUICK leaves the saturation latency runs out');
is(bench_plan('QUICK=0 BENCH_DUR=3')->{DUR}, 3, 'BENCH_DUR still sets the pgbench runs');
cmp_ok($full->{PROD_ROUNDS} * $full->{PROD_DUR}, '>=', $full->{DUR},
	'the producer\'s alternated rounds together last at least a pgbench run (ADR 0124)');
cmp_ok($full->{PROD_ROUNDS}, '>=', 3, '... in three rounds or more');
is($quick->{PROD_ROUNDS}, 1, 'QUICK measures the producer in one round');
cmp_ok($full->{DRAIN_ROUNDS}, '>=', 3, 'the drains alternate in three rounds or more');
cmp_ok($full->{BACKLOG} / $full->{DRAIN_ROUNDS}, '>=', 10000, '... each of whole tick windows (10,000 events)');
is($quick->{DRAIN_ROUNDS}, 1, 'QUICK drains in one round');

done_testing();
