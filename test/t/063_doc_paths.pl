# The docs point at files that exist (issue #29 item 5): every repository
# path, bare C file or SQL part cited in docs/*.md, docs/adr/*.md and
# README.md, and every relative link, names a file of this tree; and
# docs/system-design.md's map of the code ("Where the code is") names every
# C file and every SQL part; and the alert-kind registry
# (pgque._alert_kinds() in sql/42_alerts.sql) is what docs/alerts.md
# documents, its thresholds settings of docs/gucs.md, its conditions
# functions defined, its severities those of monitoring/prometheus-alerts.yml.  No server: a few milliseconds.
use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Test::More;

my $root = "$ENV{PGQUE_SRC}/..";
my @docs = (glob("$root/docs/*.md"), glob("$root/docs/adr/*.md"), "$root/README.md");
ok(@docs > 10, scalar(@docs) . ' documents read');

# a placeholder or a pattern, not a file: sql/NN_*.sql, A--B, test/t/NNN_<name>
sub placeholder
{
	my ($p) = @_;
	return $p =~ /NN|\*|<|\bA--B\b|\bB--C\b|\.\.\./;
}

my @missing;
for my $doc (@docs)
{
	my $text = slurp_file($doc);
	(my $name = $doc) =~ s{^\Q$root\E/}{};
	my $dir = $doc =~ m{^(.*)/[^/]+$} ? $1 : $root;
	# repository paths: src/x.c, sql/70_maint.sql, test/t/017_upgrade.pl, ...
	while ($text =~ m{(?<![\w/.-])((?:src|sql|test|docs|monitoring|examples|benchmark|debian)/[\w./<>-]*\w)(\*?)}g)
	{
		my ($p, $star) = ($1, $2);
		my $before = substr($text, 0, pos($text) - length($p) - length($star));
		# another project's file (PgQue's `docs/reference.md`)
		next if $before =~ /PgQue's `?\z/;
		next if placeholder($p);
		# a family of files: benchmark/results/<stamp>*
		my $found = $star ? scalar(my @g = glob("$root/$p*")) : -e "$root/$p";
		push @missing, "$name: $p$star" unless $found;
	}
	# a bare C file or header in backquotes: `maint.c`, `slots.h` (not
	# PostgreSQL's `extension.c`); a file that is gone is named unquoted
	while ($text =~ m{(PostgreSQL's )?`(\w+\.[ch])(?::[\d,-]+)?`}g)
	{
		next if $1;
		push @missing, "$name: $2" unless -e "$root/src/$2";
	}
	# a bare SQL part: `70_maint.sql`
	while ($text =~ m{`(\d\d_\w+\.sql)(?::[\d,-]+)?`}g)
	{
		push @missing, "$name: $1" unless -e "$root/sql/$1";
	}
	# relative links: [text](adr/0001-....md#anchor)
	while ($text =~ m{\]\(([^)\s#:]+)(?:#[^)]*)?\)}g)
	{
		my $p = $1;
		push @missing, "$name: link $p" unless -e "$dir/$p";
	}
}
is(join("\n", @missing), '', 'every file the docs cite exists');

# the map of the code names every C file and header and every SQL part
my ($map) = slurp_file("$root/docs/system-design.md") =~ /^## Where the code is\n(.*?)(?=^## |\z)/ms;
ok(defined $map, 'docs/system-design.md has a section "Where the code is"');
$map //= '';
my @unlisted;
for my $f (map { m{([^/]+)$} } glob("$root/src/*.[ch]"))
{
	push @unlisted, $f unless $map =~ /`\Q$f\E`/;
}
for my $f (map { m{([^/]+)\.sql$} } glob("$root/sql/[0-9][0-9]_*.sql"))
{
	push @unlisted, "$f.sql" unless $map =~ /`\Q$f\E(?:\.sql)?`/;
}
is(join(', ', @unlisted), '', 'the map of the code names every C file, header and SQL part');

# ADRs as decisions: an ADR whose status says it replaces, amends, extends
# or supersedes an earlier one is named in that one's status, so a reader
# of the earlier decision learns it changed
my %adr_status;
for my $f (glob("$root/docs/adr/[0-9][0-9][0-9][0-9]-*.md"))
{
	my ($n) = $f =~ m{/(\d{4})-[^/]+$};
	my ($status) = slurp_file($f) =~ /^Status:(.*?)(?:\n\n|\z)/ms;
	$adr_status{$n} = $status // '';
}
my @unmarked;
for my $n (sort keys %adr_status)
{
	my $st = $adr_status{$n};
	while ($st =~ /\b(?:replaces|amends|extends|supersedes)\b([^;)]*)/g)
	{
		for my $old ($1 =~ /ADR\s+(\d{4})/g)
		{
			push @unmarked, "ADR $old does not name its successor ADR $n"
			  if exists $adr_status{$old} && $adr_status{$old} !~ /ADR\s+$n\b/;
		}
	}
}
is(join("\n", @unmarked), '', 'every replaced, amended or extended ADR names its successor in its status');

# the alert kinds: the registry's rows, read from its source
my $alerts_sql = slurp_file("$root/sql/42_alerts.sql");
my ($registry) = $alerts_sql =~ /create function pgque\._alert_kinds\(.*?\n      from \(values\n(.*?)\n    \) k\(/s;
ok(defined $registry, 'sql/42_alerts.sql defines the registry pgque._alert_kinds()');
$registry //= '';
my (%severity, %threshold, %conditions, %docs);
while ($registry =~ /^\s*\('([a-z_]+)', '([a-z]+)', (null|'[a-z_.]+'),.*?(null|'[a-z_.]+')\)(?:,|\z)/msg)
{
	my ($kind, $sev, $thr, $fn) = ($1, $2, $3, $4);
	$severity{$kind} = $sev;
	($threshold{$kind} = $thr) =~ s/'//g;
	($conditions{$kind} = $fn) =~ s/'//g;
	$docs{$kind} = "alerts.md#$kind";
}
my @kinds = sort keys %severity;
cmp_ok(scalar(@kinds), '>=', 10, 'registry kinds: ' . join(' ', @kinds));
my ($table) = slurp_file("$root/docs/alerts.md") =~ /^## The alerts\n(.*?)^## /ms;
my @documented = sort(($table // '') =~ /^\| `([a-z_]+)`(?: <a id="[a-z_]+"><\/a>)? \|/mg);
is(join(' ', @documented), join(' ', @kinds), 'docs/alerts.md documents exactly the kinds of the registry');
my $gucs = slurp_file("$root/docs/gucs.md");
my $rules = slurp_file("$root/monitoring/prometheus-alerts.yml");
my $parts = join('', map { slurp_file($_) } glob("$root/sql/[0-9][0-9]_*.sql"));
for my $kind (@kinds)
{
	like($severity{$kind}, qr/^(warning|critical)$/, "$kind: severity warning or critical");
	ok($threshold{$kind} eq 'null' || $gucs =~ /`\Q$threshold{$kind}\E`/,
	   "$kind: its threshold $threshold{$kind} is documented in docs/gucs.md");
	ok($conditions{$kind} eq 'null' || $parts =~ /create function \Q$conditions{$kind}\E\(/,
	   "$kind: its conditions function $conditions{$kind} is defined");
	my ($rule_severity) = $rules =~ /kind="\Q$kind\E"\}\s*\n\s*labels:\s*\n\s*severity: (\w+)/;
	is($rule_severity // 'no rule', $severity{$kind}, "$kind: its Prometheus rule has the registry's severity");
	like($rules, qr/kind="\Q$kind\E"\}.*?runbook_url: "[^"]*\/\Q$docs{$kind}\E"/s,
	     "$kind: its Prometheus rule's runbook_url ends in the registry's docs anchor ($docs{$kind})");
}

done_testing();
