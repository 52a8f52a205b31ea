# The monitoring/ kit against Debian's prometheus-postgres-exporter: a
# server with queues, consumers, partition slots, a cooperative group,
# retries, dead letters and two open watchdog alerts; the exporter runs
# monitoring/queries.yaml against it as a pgque_reader role, and /metrics
# must expose every metric of the queries file with its labels, its type
# and the values pgque.metrics() gives.  The queries file is the one list:
# docs/monitoring.md must document exactly it, the Grafana dashboard may use
# only it, and the Prometheus rules must have one rule per alert kind of
# docs/alerts.md, each selecting a series the exporter exposes.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;
use CPAN::Meta::YAML;
use JSON::PP;
use HTTP::Tiny;
use POSIX ();
use Time::HiRes qw(time sleep);

my $src = $ENV{PGQUE_SRC} or die "PGQUE_SRC (the test directory) is not set";
my $mon = "$src/../monitoring";
my $docs = "$src/../docs";
my $exporter = $ENV{PGQUE_EXPORTER} // '/usr/bin/prometheus-postgres-exporter';
-x $exporter
  or die "$exporter not found: install Debian's prometheus-postgres-exporter (test/run.sh does)";

sub read_yaml
{
	my ($file) = @_;
	my $y = CPAN::Meta::YAML->read($file)
	  or die "$file is not valid YAML: " . CPAN::Meta::YAML->errstr;
	return $y->[0];
}

# ---- the queries file: the list of metrics ---------------------------------
# metric name => { type => counter|gauge, labels => 'a,b,c' (sorted) }
my $queries = read_yaml("$mon/queries.yaml");
my %expected;
for my $ns (sort keys %$queries)
{
	my $q = $queries->{$ns};
	my (@labels, @values);
	for my $col (@{ $q->{metrics} // [] })
	{
		my ($name) = keys %$col;
		my $usage = $col->{$name}{usage} // '';
		if ($usage eq 'LABEL') { push @labels, $name }
		else { push @values, [ $name, $usage ] }
		ok(length($col->{$name}{description} // ''), "queries.yaml: $ns.$name has a description");
	}
	ok($q->{query} =~ /\bpgque\.(metrics\(\)|alerts)/ && @values && grep({ $_ eq 'datname' } @labels)
	     && grep({ $_ eq 'shard' } @labels),
	   "queries.yaml: $ns reads pgque.metrics() or pgque.alerts, has values, a datname and a shard label");
	for my $v (@values)
	{
		my ($name, $usage) = @$v;
		my $metric = "${ns}_$name";
		# counters and only counters end in _total (Prometheus naming)
		is($usage, $metric =~ /_total$/ ? 'COUNTER' : 'GAUGE', "queries.yaml: $metric is a $usage");
		$expected{$metric} = { type => lc $usage, labels => join(',', sort @labels) };
	}
}
my @expected = sort keys %expected;
# what only a proxy database of pgque_proxy has (checked at the end)
my %proxy_only = (pgque_shard_up => 1);
note 'metrics of queries.yaml: ' . join(' ', @expected);

# ---- docs/monitoring.md documents exactly these ------------------------------
# its metrics table: | `name` | type | `label`, `label` | meaning |
my $mondoc = slurp_file("$docs/monitoring.md");
my %documented;
while ($mondoc =~ /^\| `(pgque_[a-z_]+)` \| (counter|gauge) \|([^|]*)\|/mg)
{
	my ($m, $type, $labels) = ($1, $2, $3);
	$documented{$m} = { type => $type, labels => join(',', sort('datname', 'shard', $labels =~ /`(\w+)`/g)) };
}
is_deeply([ sort keys %documented ], \@expected,
	'docs/monitoring.md documents every metric of queries.yaml and no other');
for my $m (grep { $documented{$_} } @expected)
{
	is("$documented{$m}{type} $documented{$m}{labels}", "$expected{$m}{type} $expected{$m}{labels}",
	   "docs/monitoring.md: $m type and labels");
}
like(slurp_file("$src/../README.md"), qr{docs/monitoring\.md}, 'README links docs/monitoring.md');
like(slurp_file("$docs/operations.md"), qr{monitoring\.md}, 'docs/operations.md links docs/monitoring.md');

# ---- a server with something to show ----------------------------------------
my $node = PgqueNode->new_preloaded('exporter', conf => qq{
pgque_bgw.launcher_naptime = '1s'
pgque_bgw.maint_interval = '1s'
pgque_bgw.watchdog_interval = '1s'
pgque_bgw.slot_unpolled_after = '2s'
pgque_bgw.slot_stale_after = '2s'
});
$node->safe_psql('postgres', q{
    create extension pgque_bgw;
    create role monitor login in role pgque_reader;
    create role outsider login;
});
$node->poll_query_until('postgres', q{
    select count(*) = 3 from pg_stat_activity where backend_type like 'pgque_bgw %' and datname = 'postgres'})
  or die 'workers did not start';

# the alert kinds: docs/alerts.md's table is the list; metrics() has a
# pgque_alerts_open row for each, also while none is open
my ($kinds_table) = slurp_file("$docs/alerts.md") =~ /^## The alerts\n(.*?)^## /ms;
my @kinds = sort($kinds_table =~ /^\| `([a-z_]+)`(?: <a id="[a-z_]+"><\/a>)? \|/mg);
ok(@kinds >= 6, 'docs/alerts.md lists the alert kinds: ' . join(' ', @kinds));
is($node->safe_psql('postgres', q{
       select string_agg(labels->>'kind', ' ' order by labels->>'kind') from pgque.metrics()
        where metric = 'pgque_alerts_open' and value = 0}),
   join(' ', @kinds), 'with no alert open, metrics() has pgque_alerts_open 0 for each kind of docs/alerts.md');

# a plain queue: consumed once, then 2 retries, 1 dead letter and 5 pending
$node->safe_psql('postgres', q{
    select pgque.create_queue('orders');
    select pgque.subscribe('orders', 'billing');
    select pgque.subscribe('orders', 'audit');
    select count(pgque.send('orders', 'o' || i)) from generate_series(1, 10) i;
});
# one transaction: the first tick past it carries all 10
$node->poll_query_until('postgres', q{
    select oldest_msg_age is not null from pgque.queue_stats() where queue_name = 'orders'})
  or die 'the ticker did not tick the 10 events';
$node->safe_psql('postgres', q{
    create temp table got as select * from pgque.receive('orders', 'billing', 100);
    select pgque.event_retry(batch_id, msg_id, 3600) from (select * from got order by msg_id limit 2) g;
    select pgque.event_dead(batch_id, msg_id, 'exporter test', created_at, pg_current_xact_id(), 0, type, payload)
      from (select * from got order by msg_id offset 2 limit 1) g;
    select pgque.ack(batch_id) from (select distinct batch_id from got) b;
    select count(pgque.send('orders', 'p' || i)) from generate_series(1, 5) i;
});

# a partitioned consumer: slot $slot claimed and received once, then left
# unpolled with events pending (slot_unpolled opens)
$node->safe_psql('postgres', q{
    select pgque.create_queue('pq');
    select pgque.subscribe_slot('pq', 'w', k, 2) from generate_series(0, 1) k;
});
my $slot = $node->safe_psql('postgres', q{select pgque._slot_of('tenant-x', 2)});
$node->safe_psql('postgres', qq{select pgque.claim_slot('pq', 'w', $slot, 'worker-1', '1 hour')});
$node->safe_psql('postgres', qq{select count(*) from pgque.receive_partitioned('pq', 'w', $slot, 2, 'worker-1')});
$node->safe_psql('postgres', q{select count(pgque.send('pq', 'e', 'x' || i, 'tenant-x')) from generate_series(1, 5) i});

# a cooperative member that takes a batch and goes silent (coop_member_silent)
$node->safe_psql('postgres', q{
    select pgque.create_queue('cq');
    select pgque.subscribe_subconsumer('cq', 'grp', 'a');
    select pgque.send('cq', 'c1');
});
$node->poll_query_until('postgres', q{select count(*) > 0 from pgque.receive_coop('cq', 'grp', 'a')})
  or die 'the coop member got no batch';

ok($node->poll_query_until('postgres', q{
       select count(*) = 2 from pgque.alerts
        where (kind = 'slot_unpolled' and queue_name = 'pq') or (kind = 'coop_member_silent' and queue_name = 'cq')}),
   'the watchdog opens slot_unpolled and coop_member_silent');
is($node->safe_psql('postgres', q{select count(*) from pgque.alerts}), '2', 'and no other alert');

# ---- the exporter --------------------------------------------------------
my $http = HTTP::Tiny->new(timeout => 30);

# PostgreSQL's own metrics off, with the flags this version has (0.11 in
# bookworm, 0.17 in trixie, 0.19 in sid: 0.20 drops
# --disable-settings-metrics; the collectors differ)
my $help = `'$exporter' --help 2>&1`;
my @quiet_flags = grep { $help =~ /\Q$_\E\s/ } qw(--disable-default-metrics --disable-settings-metrics);
push @quiet_flags, map { "--no-collector.$_" } ($help =~ /--(?:\[no-\])?collector\.([a-z_]+)\s/g);
note "exporter: " . (`'$exporter' --version 2>&1` =~ /(version \S+)/)[0] . ", flags @quiet_flags";
my @started;

# start_exporter(role) -> (pid, url): the exporter as that role over the
# unix socket, on a free loopback port, pgque metrics only
sub start_exporter
{
	my ($role, $db) = @_;
	$db //= 'postgres';
	my $port = PostgreSQL::Test::Cluster::get_free_port();
	my $log = "$PostgreSQL::Test::Utils::tmp_check/exporter_$role.log";
	my $pid = fork();
	die "fork: $!" unless defined $pid;
	if ($pid == 0)
	{
		$ENV{DATA_SOURCE_NAME} = sprintf('host=%s port=%d user=%s dbname=%s sslmode=disable',
			$node->host, $node->port, $role, $db);
		open(STDOUT, '>', $log) or POSIX::_exit(1);
		open(STDERR, '>&', \*STDOUT) or POSIX::_exit(1);
		exec($exporter, "--extend.query-path=$mon/queries.yaml", "--web.listen-address=127.0.0.1:$port",
			@quiet_flags)
		  or POSIX::_exit(1);
	}
	push @started, $pid;
	my $url = "http://127.0.0.1:$port/metrics";
	my $deadline = time() + $PostgreSQL::Test::Utils::timeout_default;
	until ($http->get($url)->{success})
	{
		die "the exporter did not answer on $url: " . slurp_file($log) if time() > $deadline;
		die "the exporter exited: " . slurp_file($log) if waitpid($pid, POSIX::WNOHANG()) == $pid;
		sleep(0.2);
	}
	return ($pid, $url, $log);
}

sub stop_exporter
{
	my ($pid) = @_;
	kill 'TERM', $pid;
	waitpid($pid, 0);
	@started = grep { $_ != $pid } @started;
}
END { kill 'TERM', $_ for @started; }

# scrape(url) -> { name => [ { labels => {..}, value => v } ] }, { name => type }
sub scrape
{
	my ($url) = @_;
	my $res = $http->get($url);
	die "GET $url: $res->{status} $res->{reason}" unless $res->{success};
	my (%series, %type);
	for my $line (split /\n/, $res->{content})
	{
		if ($line =~ /^# TYPE (\S+) (\S+)/) { $type{$1} = $2; next }
		next if $line =~ /^#/ || $line !~ /\S/;
		$line =~ /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/ or die "cannot parse: $line";
		my ($name, $lab, $v) = ($1, $2 // '', $3);
		my %l;
		while ($lab =~ /(\w+)="((?:[^"\\]|\\.)*)"/g)
		{
			my ($k, $s) = ($1, $2);
			$s =~ s/\\(.)/$1 eq 'n' ? "\n" : $1/ge;
			$l{$k} = $s;
		}
		push @{ $series{$name} }, { labels => \%l, value => $v };
	}
	return (\%series, \%type);
}

# label key of a series without the exporter's own labels and the empty
# shard label of a database that is not a proxy
sub key_of
{
	my ($l) = @_;
	return join(',', map { "$_=$l->{$_}" }
		grep { $_ ne 'server' && $_ ne 'datname' && !($_ eq 'shard' && $l->{$_} eq '') } sort keys %$l);
}

# the label names of a series, the exporter's server label aside, shard
# counted present when empty (a text exposition may leave it out)
sub labels_of
{
	my ($l) = @_;
	my %k = map { $_ => 1 } grep { $_ ne 'server' } keys %$l;
	$k{shard} = 1;
	return join(',', sort keys %k);
}

# metrics() as { "metric|labels" => value }
sub sql_metrics
{
	my %m;
	for my $row (split /\n/, $node->safe_psql('postgres', q{
	    select metric || '|' || coalesce((select string_agg(key || '=' || value, ',' order by key)
	                                        from jsonb_each_text(labels)), '') || '|' || coalesce(value::text, 'NaN')
	      from pgque.metrics()}))
	{
		my ($metric, $labels, $v) = split /\|/, $row, 3;
		$m{"$metric|$labels"} = $v;
	}
	return \%m;
}

my ($pid, $url) = start_exporter('monitor');
my $t0 = time();
my $before = sql_metrics();
my ($series, $type) = scrape($url);
my $after = sql_metrics();
my $slack = time() - $t0 + 1;

is($series->{pg_up}[0]{value}, '1', 'pg_up is 1');
is($series->{pg_exporter_last_scrape_error}[0]{value}, '0',
   'pg_exporter_last_scrape_error is 0: every query of queries.yaml ran as a pgque_reader');
is(join(',', map { $_->{value} } @{ $series->{pg_exporter_user_queries_load_error} // [] }), '0',
   'pg_exporter_user_queries_load_error is 0: the exporter parsed queries.yaml');

for my $m (grep { !$proxy_only{$_} } @expected)
{
	my @s = @{ $series->{$m} // [] };
	ok(@s, "$m is exposed");
	is($type->{$m}, $expected{$m}{type}, "$m has TYPE $expected{$m}{type}");
	my @bad = grep { labels_of($_->{labels}) ne $expected{$m}{labels} || $_->{labels}{shard} } @s;
	is(scalar(@bad), 0, "$m: every series has the labels $expected{$m}{labels} (and server), shard empty");
	my @db = grep { ($_->{labels}{datname} // '') ne 'postgres' } @s;
	is(scalar(@db), 0, "$m: datname is the database");
}

# every metrics() row is a series with the same labels and a value between
# the readings before and after the scrape (time-based ones: give or take
# the time the readings took)
my %sql_metric = map { (split /\|/)[0] => 1 } keys %$before, keys %$after;
for my $m (sort keys %sql_metric)
{
	ok($expected{$m}, "metrics()' $m is in queries.yaml");
	my %exp = map { key_of($_->{labels}) => $_->{value} } @{ $series->{$m} // [] };
	my %rows = map { (split /\|/)[1] => 1 } grep { /^\Q$m\E\|/ } keys %$before, keys %$after;
	is_deeply([ sort keys %exp ], [ sort keys %rows ], "$m: the exporter's series are metrics()' rows");
	my @off;
	for my $k (sort keys %rows)
	{
		my ($v0, $v1, $v) = ($before->{"$m|$k"}, $after->{"$m|$k"}, $exp{$k});
		next unless defined $v;
		my @range = sort { $a <=> $b } grep { defined && $_ ne 'NaN' } $v0, $v1;
		if (!@range) { push @off, "$k: $v, SQL NULL" unless $v eq 'NaN'; next }
		# a worker's memory is published after each of its passes and
		# moves either way as its plans are remade (ADR 0035)
		my $tol = $m =~ /seconds/ ? $slack : $m =~ /_memory_bytes$/ ? $range[-1] / 2 : 0;
		push @off, "$k: $v not in [@range]"
		  unless $v ne 'NaN' && $v >= $range[0] - $tol && $v <= $range[-1] + $tol;
	}
	is(join('; ', @off), '', "$m: values match metrics()");
}

# plausible values for what the test did
sub val
{
	my ($m, %l) = @_;
	my @s = grep { my $s = $_; !grep { ($s->{labels}{$_} // '') ne $l{$_} } keys %l } @{ $series->{$m} // [] };
	return @s == 1 ? $s[0]{value} : 'series: ' . scalar(@s);
}
cmp_ok(val('pgque_events_produced_total', queue => 'orders'), '>=', 15, 'orders: 15 events produced');
is(val('pgque_consumer_pending_events', queue => 'orders', consumer => 'billing'), '5', 'billing has 5 pending');
is(val('pgque_consumer_pending_events', queue => 'orders', consumer => 'audit'), '15', 'audit has 15 pending');
is(val('pgque_retry_pending', queue => 'orders'), '2', 'orders: 2 retries');
is(val('pgque_dead_letters', queue => 'orders'), '1', 'orders: 1 dead letter');
cmp_ok(val('pgque_batches_total'), '>=', 2, 'batches opened (billing, the coop member)');
cmp_ok(val('pgque_ticks_total', queue => 'orders'), '>=', 2, 'orders ticked');
is(val('pgque_slot_lease_live', queue => 'pq', consumer => 'w', slot => $slot), '1', 'the claimed slot has a live lease');
cmp_ok(val('pgque_slot_receives_total', queue => 'pq', consumer => 'w', slot => $slot), '>=', 1, 'and a receive');
cmp_ok(val('pgque_slot_epoch', queue => 'pq', consumer => 'w', slot => $slot), '>=', 1, 'and an epoch');
is(val('pgque_worker_running', worker => $_), '1', "the $_ worker runs") for qw(ticker maintenance watchdog);
is(val('pgque_alerts_open', kind => 'slot_unpolled'), '1', 'one slot_unpolled alert open');
is(val('pgque_alerts_open', kind => 'coop_member_silent'), '1', 'one coop_member_silent alert open');

# one series per open alert, keyed by alert_id, value when it opened
my %open;
for my $row (split /\n/, $node->safe_psql('postgres', q{
    select alert_id || '|' || kind || '|' || coalesce(queue_name, '') || '|' || coalesce(consumer, '') || '|'
           || coalesce(slot::text, '') || '|' || extract(epoch from opened_at)
      from pgque.alerts}))
{
	my ($id, @rest) = split /\|/, $row;
	$open{$id} = \@rest;
}
my %alert_series = map {
	my $l = $_->{labels};
	($l->{alert_id} => [ @{$l}{qw(kind queue consumer slot)}, $_->{value} ])
} @{ $series->{pgque_alert_opened_timestamp_seconds} // [] };
is_deeply([ sort keys %alert_series ], [ sort keys %open ], 'pgque_alert_opened_timestamp_seconds: one series per open alert');
for my $id (sort keys %open)
{
	my @s = @{ $alert_series{$id} // [] };
	my $at = pop @s;
	my $when = pop @{ $open{$id} };
	is(join('|', @s), join('|', @{ $open{$id} }), "alert $id: kind, queue, consumer, slot");
	ok(defined $at && abs($at - $when) < 0.01, "alert $id: opened_at");
}

# ---- the Prometheus rules ---------------------------------------------------
is(join(' ', sort map { $_->{labels}{kind} } @{ $series->{pgque_alerts_open} }), join(' ', @kinds),
   'pgque_alerts_open has a series for each kind of docs/alerts.md, and no other');
# every kind the SQL rules can open is in the registry, which is what
# docs/alerts.md documents (TAP 063 compares the two without a server)
is($node->safe_psql('postgres', q{select string_agg(kind, ' ' order by kind) from pgque._alert_kinds()}),
   join(' ', @kinds), 'the registry pgque._alert_kinds() has exactly the kinds of docs/alerts.md');
my $conds = $node->safe_psql('postgres', q{select string_agg(prosrc, ' ') from pg_proc
    where proname in ('_alert_conditions', '_uninspected_conditions')
       or oid in (select conditions::regproc from pgque._alert_kinds() where conditions is not null)});
my @sql_kinds = sort($conds =~ /select '([a-z_]+)'(?:::text)?,/g);
my %is_kind = map { $_ => 1 } @kinds;
is(join(' ', grep { !$is_kind{$_} } @sql_kinds), '', 'every kind the conditions can open is in docs/alerts.md');
cmp_ok(scalar(@sql_kinds), '>=', 6, 'kinds found in the conditions: ' . join(' ', @sql_kinds));

my $rules = read_yaml("$mon/prometheus-alerts.yml");
my %rule;
for my $g (@{ $rules->{groups} // [] })
{
	ok(length($g->{name} // ''), 'rule group has a name');
	for my $r (@{ $g->{rules} // [] })
	{
		ok(!$rule{ $r->{alert} }, "rule $r->{alert} is defined once");
		$rule{ $r->{alert} } = $r;
		ok(length($r->{expr} // '') && ($r->{labels}{severity} // '') =~ /^(warning|critical)$/
			  && length($r->{annotations}{summary} // '') && ($r->{annotations}{runbook_url} // '') =~ m{^https://},
		   "rule $r->{alert} has expr, severity, summary and a runbook_url");
		ok(!defined $r->{for} || $r->{for} =~ /^\d+[smh]$/, "rule $r->{alert}: for is a duration");
		# every metric it reads is exposed (up is Prometheus's own)
		my @metrics = grep { $_ ne 'up' } ($r->{expr} =~ /\b([a-z_][a-z0-9_]*)\s*(?:\{|==|>|$)/g);
		my @missing = grep { !$series->{$_} && !$proxy_only{$_} } @metrics;
		is("@missing", '', "rule $r->{alert} reads exposed metrics (@metrics)");
	}
}
for my $kind (@kinds)
{
	my $name = 'Pgque' . join('', map { ucfirst } split /_/, $kind);
	is($rule{$name}{expr} // 'none', qq{pgque_alert_opened_timestamp_seconds{kind="$kind"}},
	   "kind $kind: rule $name selects its open alerts");
	like($rule{$name}{annotations}{runbook_url} // '', qr/alerts\.md#\Q$kind\E$/, "rule $name: runbook_url is the kind's row of alerts.md");
}
my ($others) = ($rule{PgqueAlertOtherKind}{expr} // '') =~ /kind!~"([^"]*)"/;
is(join(' ', sort split /\|/, $others // ''), join(' ', @kinds),
   'PgqueAlertOtherKind excludes exactly the kinds with a rule');
# the rules would fire for the open alerts and only for them
for my $kind (@kinds)
{
	my $n = grep { $_->{labels}{kind} eq $kind } @{ $series->{pgque_alert_opened_timestamp_seconds} };
	my $want = grep { $_->[0] eq $kind } values %open;
	is($n, $want, "kind $kind: its rule matches $want series");
}

# ---- the Grafana dashboard ------------------------------------------------
my $dash = eval { JSON::PP->new->decode(slurp_file("$mon/grafana-dashboard.json")) };
ok($dash && ref $dash->{panels} eq 'ARRAY' && $dash->{uid}, 'grafana-dashboard.json is a dashboard (valid JSON)')
  or diag $@;
my @exprs;
my $walk;
$walk = sub {
	my ($x) = @_;
	if (ref $x eq 'HASH')
	{
		for my $k (keys %$x)
		{
			if (($k eq 'expr' || $k eq 'query' || $k eq 'definition') && !ref $x->{$k}) { push @exprs, $x->{$k} }
			else { $walk->($x->{$k}) }
		}
	}
	elsif (ref $x eq 'ARRAY') { $walk->($_) for @$x }
};
$walk->($dash);
my %used = map { $_ => 1 } map { /\b(pgque_[a-z0-9_]+|pg_[a-z0-9_]+)\b/g } @exprs;
my @unknown = grep { !$series->{$_} && !$proxy_only{$_} } sort keys %used;
is("@unknown", '', 'the dashboard uses only metrics the exporter exposes (' . scalar(keys %used) . ')');
my @unused = grep { !$used{$_} } @expected;
is("@unused", '', 'the dashboard shows every metric of queries.yaml');
# import asks for the data source; servers and shards told apart
ok((grep { ($_->{type} // '') eq 'datasource' && ($_->{pluginId} // '') eq 'prometheus' } @{ $dash->{__inputs} // [] }),
   'the dashboard has a Prometheus data source in __inputs (Grafana\'s import asks for it)');
ok((grep { $_->{name} eq 'instance' } @{ $dash->{templating}{list} // [] }), 'the dashboard has an instance variable');
my @targets;
my $tw;
$tw = sub { my ($x) = @_; if (ref $x eq 'HASH') { push @targets, $x if defined $x->{expr} && !ref $x->{expr}; $tw->($_) for values %$x }
            elsif (ref $x eq 'ARRAY') { $tw->($_) for @$x } };
$tw->($dash->{panels});
is(join(' ', map { $_->{expr} } grep { $_->{expr} !~ /instance=~"\$instance"/ } @targets), '',
   'every panel query filters on $instance');
is(join(' ', map { $_->{expr} } grep { length($_->{legendFormat} // '') && ($_->{legendFormat} !~ /\{\{instance\}\}/
                                         || ($_->{expr} =~ /pgque_/ && $_->{legendFormat} !~ /\{\{shard\}\}/)) } @targets), '',
   'every legend names the instance, and the shard for pgque series');

# the scrape-error rule's condition: a role without pgque rights
stop_exporter($pid);
my ($pid2, $url2, $log2) = start_exporter('outsider');
my ($s2) = scrape($url2);
is($s2->{pg_exporter_last_scrape_error}[0]{value}, '1',
   'a role without pgque_reader: pg_exporter_last_scrape_error is 1 (PgqueScrapeError)');
ok(!$s2->{pgque_events_produced_total}, 'and no pgque metric');
stop_exporter($pid2);
like(slurp_file($log2), qr/permission denied for schema pgque/, 'the exporter log says why');

diag(sprintf('figure: exporter scrape with %d pgque series took %.3f s (pg_exporter_last_scrape_duration_seconds)',
	scalar(map { @{ $series->{$_} } } grep { /^pgque_/ } keys %$series),
	$series->{pg_exporter_last_scrape_duration_seconds}[0]{value}));

# ---- a proxy database (docs/scale-out.md, "Monitoring") ----------------------
# pgque_proxy in database proxy in front of three shards: this database,
# shard1 and one nobody listens for.  The same exporter and queries file
# scrape it as the monitoring role of docs/scale-out.md (pgque_reader on
# the shards through its user mapping): every series names its shard, and
# pgque_shard_up says which are reached (0.2.0's file: HTTP 500, two
# shards' rows were one series twice).
my $gone = PostgreSQL::Test::Cluster::get_free_port();
$node->safe_psql('postgres', q{create database shard1; create database proxy});
$node->safe_psql('shard1', q{
    create extension pgque_bgw;
    select pgque.create_queue('orders');
    select pgque.subscribe('orders', 'billing');
});
my $shard = sprintf('host=%s port=%d', $node->host, $node->port);
$node->safe_psql('proxy', qq{
    create extension pgque_proxy cascade;
    select pgque.set_shards(array['$shard dbname=postgres', '$shard dbname=shard1',
                                  'host=127.0.0.1 port=$gone dbname=gone connect_timeout=5']);
    create user mapping for monitor server pgque_shards options (user 'monitor');
    grant usage on foreign server pgque_shards to monitor;
    grant usage on schema pgque to monitor;
});
my ($pid3, $url3) = start_exporter('monitor', 'proxy');
my ($s3) = scrape($url3);   # dies unless HTTP 200
stop_exporter($pid3);
is($s3->{pg_exporter_last_scrape_error}[0]{value}, '0', 'proxy database: the scrape answers 200, no scrape error');
my @pq = map { my $m = $_; map { [ $m, $_ ] } @{ $s3->{$m} } } grep { /^pgque_/ } sort keys %$s3;
cmp_ok(scalar(@pq), '>', 20, 'proxy database: pgque series (' . scalar(@pq) . ')');
is(join(' ', map { "$_->[0]\{" . key_of($_->[1]{labels}) . '}' }
             grep { ($_->[1]{labels}{shard} // '') !~ /^[0-2]$/ || $_->[1]{labels}{datname} ne 'proxy' } @pq),
   '', 'proxy database: every pgque series has a shard label (0, 1 or 2) and datname proxy');
is(join(',', map { "$_->{labels}{shard}=$_->{value}" } sort { $a->{labels}{shard} <=> $b->{labels}{shard} }
             @{ $s3->{pgque_shard_up} // [] }),
   '0=1,1=1,2=0', 'proxy database: pgque_shard_up per shard, 0 for the one not reached');
is(join(',', sort map { $_->{labels}{shard} } grep { $_->{labels}{queue} eq 'orders' }
             @{ $s3->{pgque_events_produced_total} // [] }),
   '0,1', 'proxy database: a queue of both reached shards is two series');
is(join(',', map { "$_->{labels}{shard}:$_->{labels}{kind}" } grep { $_->{labels}{kind} eq 'shard_unavailable' }
             @{ $s3->{pgque_alert_opened_timestamp_seconds} // [] }),
   '2:shard_unavailable', 'proxy database: the shard not reached is an open alert');
is(scalar(grep { $_->{labels}{shard} eq '0' } @{ $s3->{pgque_alert_opened_timestamp_seconds} // [] }),
   scalar(keys %open), 'proxy database: shard 0\'s open alerts, one series each');

$node->stop;
done_testing();
