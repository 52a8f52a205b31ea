# The docs point only at what the repository has (issue #28 item 7): every
# relative link of docs/*.md, docs/adr/*.md, README.md and monitoring/*.md
# names a file that exists, and an anchor that is one of its headings (as
# GitHub makes them); every path examples/ mentions exists and each example
# says in its header how to run it; no text cites a document of the
# project's own process that the repository does not ship.  No server.
use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Test::More;

my $root = "$ENV{PGQUE_SRC}/..";

# GitHub's heading anchors: lower case, punctuation but - and _ dropped,
# spaces to -, a repeated heading gets -1, -2, ...
my %anchor_cache;
sub anchors
{
	my ($file) = @_;
	return $anchor_cache{$file} if $anchor_cache{$file};
	my $text = slurp_file($file) =~ s/^```.*?^```//msgr;
	my (%a, %seen);
	for my $h ($text =~ /^#{1,6}[ \t]+(.*?)[ \t]*$/mg)
	{
		my $s = lc $h;
		$s =~ s/\[([^\]]*)\]\([^)]*\)/$1/g;
		$s =~ s/[^\w\- ]//g;
		$s =~ s/ /-/g;
		my $n = $seen{$s}++;
		$a{ $n ? "$s-$n" : $s } = 1;
	}
	$a{$_} = 1 for $text =~ /<a (?:name|id)="([^"]+)"/g;
	return $anchor_cache{$file} = \%a;
}

my @md = (glob("$root/docs/*.md"), glob("$root/docs/adr/*.md"), "$root/README.md", glob("$root/monitoring/*.md"));
ok(@md > 20, scalar(@md) . ' markdown files to check');
my ($links, @bad) = (0);
for my $f (@md)
{
	(my $dir = $f) =~ s{/[^/]+$}{};
	# links inside code are code, not links
	my $text = slurp_file($f) =~ s/^```.*?^```//msgr =~ s/`[^`\n]*`//gr;
	while ($text =~ /\]\(([^)\s]+)\)/g)
	{
		my $l = $1;
		next if $l =~ m{^[a-z]+:};
		$links++;
		my ($path, $anchor) = split /#/, $l, 2;
		my $target = $path eq '' ? $f : "$dir/$path";
		(my $rel = $f) =~ s{^\Q$root\E/}{};
		if (!-e $target)
		{
			push @bad, "$rel: $l: no such file";
		}
		elsif (defined $anchor && $target =~ /\.md$/ && !anchors($target)->{$anchor})
		{
			push @bad, "$rel: $l: no such heading";
		}
	}
}
ok($links > 100, "$links relative links found");
is(join("\n", @bad), '', 'every relative link resolves to a file and a heading');

# examples/: the paths they mention, and how to run each
my @examples = glob("$root/examples/*");
ok(@examples >= 4, scalar(@examples) . ' examples');
for my $f (@examples)
{
	my $text = slurp_file($f);
	(my $name = $f) =~ s{^.*/}{};
	my @missing = grep { !-e "$root/$_" }
	  $text =~ m{(?<![\w/.\$-])((?:docs|examples|monitoring|test|sql|src)/[\w./-]*\w)}g;
	is(join(', ', @missing), '', "$name: every path it mentions exists");
	my ($header) = $text =~ /\A((?:(?:--|#)[^\n]*\n)+)/;
	like($header // '', qr/^(?:--|#) Run\b/m, "$name: its header says how to run it");
}

# documents of the project's process (the brief's SPEC, ARCHITECTURE, STYLE)
# are not in the repository: the shipped text must not send a reader there
my @cites;
for my $f (grep { !m{/adr/} } @md, @examples)
{
	my $text = slurp_file($f);
	(my $rel = $f) =~ s{^\Q$root\E/}{};
	push @cites, "$rel: $1" while $text =~ /\b(SPEC(?:\.md| §\s*\d+)?|ARCHITECTURE\.md|STYLE\.md)\b/g;
}
is(join("\n", @cites), '', 'no document cites SPEC, ARCHITECTURE.md or STYLE.md');
# runbook links of the monitoring kit: URLs under the one placeholder base,
# each naming a page of docs/ and an anchor of it; docs-base.sh sets the base
my $base = 'https://pgque-docs.invalid';
my $mon = "$root/monitoring";
my @runbooks = slurp_file("$mon/prometheus-alerts.yml") =~ /^\s*runbook_url: "([^"]*)"/mg;
my @dash_links = slurp_file("$mon/grafana-dashboard.json") =~ /"url": "([^"]*)"/g;
ok(@runbooks >= 15, scalar(@runbooks) . ' runbook_url annotations in the rules');
ok(@dash_links >= 3, scalar(@dash_links) . ' links in the dashboard');
unlike(slurp_file("$mon/prometheus-alerts.yml"), qr/^\s*runbook:/m, 'no rule keeps a bare runbook path');
my @wrong;
for my $u (@runbooks, @dash_links)
{
	if ($u !~ m{^\Q$base\E/([\w.-]+\.md)(?:#([\w-]+))?$})
	{
		push @wrong, "$u: not under $base/";
		next;
	}
	my ($page, $anchor) = ($1, $2);
	if (!-f "$root/docs/$page") { push @wrong, "$u: no docs/$page"; }
	elsif (defined $anchor && !anchors("$root/docs/$page")->{$anchor}) { push @wrong, "$u: no such heading or anchor"; }
}
is(join("\n", @wrong), '', 'every runbook link is a URL under the base, to an existing page and anchor');
# docs-base.sh sets another base in copies of both files, all links at once
my $tmp = PostgreSQL::Test::Utils::tempdir();
system('cp', "$mon/prometheus-alerts.yml", "$mon/grafana-dashboard.json", $tmp) == 0 or die;
my $set = `bash "$mon/docs-base.sh" https://git.example.com/pgque/docs/ "$tmp/prometheus-alerts.yml" "$tmp/grafana-dashboard.json" 2>&1`;
is($?, 0, 'docs-base.sh runs') or diag($set);
my $after = slurp_file("$tmp/prometheus-alerts.yml") . slurp_file("$tmp/grafana-dashboard.json");
unlike($after, qr{pgque-docs\.invalid/}, 'it leaves no placeholder link');
my @moved = $after =~ m{"https://git\.example\.com/pgque/docs/[\w.-]+\.md(?:#[\w-]+)?"}g;
is(scalar(@moved), scalar(@runbooks) + scalar(@dash_links), 'and every link is under the new base');
# the refusals on a fresh copy, which still has the placeholder (on the
# copy set above the script stops at "already set?" whatever the base):
# exit 2 (usage), the file untouched
my $fresh = PostgreSQL::Test::Utils::tempdir();
system('cp', "$mon/grafana-dashboard.json", $fresh) == 0 or die;
my $orig = slurp_file("$fresh/grafana-dashboard.json");
for my $bad (['not a url', 'a base that is not an http(s) URL'],
             ['https://x.example/a&b', 'a base with a character sed would read (&)'],
             ["https://x.example/a\x01b", 'a base with a control character (it would break the JSON)'])
{
    my $out = `bash "$mon/docs-base.sh" '$bad->[0]' "$fresh/grafana-dashboard.json" 2>&1`;
    is($? >> 8, 2, "it refuses $bad->[1]") or diag($out);
}
is(slurp_file("$fresh/grafana-dashboard.json"), $orig, 'and leaves the file as it was');
done_testing();
