#!/usr/bin/perl
# gen_comments.pl: COMMENT ON every public function and view of pgque_bgw,
# in the words of docs/sql-reference.md (issue #28): the reference is the
# one source, so \df+ and the docs cannot say different things.
#
#   perl sql/gen_comments.pl docs/sql-reference.md > comments.sql
#
# Each table row of the reference whose first cell names functions in
# backticks (`name(arg, ...)`, several joined by " / " or ", ", and
# "view `name`") gives its notes (the last cell; an empty one takes the
# previous row's of the same name) as the comment, markdown taken off.  The
# output is one DO block, marked replay-on-upgrade (COMMENT is idempotent):
# for every function of schema pgque whose name does not start with "_",
# the row with the same name and the same argument names wins, then one
# with the same number of arguments, then the first of that name.  Rows of
# the pgque_proxy section are left out.  A function no row names keeps no
# comment, and test/sql/35_comments.sql lists it.
use strict;
use warnings;

my ($doc) = @ARGV;
die "usage: $0 docs/sql-reference.md\n" unless $doc;
open my $fh, '<', $doc or die "$0: cannot read $doc: $!\n";

my @rows;          # [name, [argnames] or undef, nargs or undef, text]
my %last_text;     # name -> the last non-empty notes
my @views;         # [name, text]
my $on = 0;
while (my $line = <$fh>)
{
	# the function tables start with Producing; before them, who may call
	# what and the error table name functions in other words
	$on = 1 if $line =~ /^## Producing/;
	last if $line =~ /^## On a PL\/Proxy database/;
	next unless $on && $line =~ /^\| (view )?`/;
	chomp $line;
	# split on | that are not escaped as \|
	my @cells = map { s/^\s+|\s+$//gr } split /(?<!\\)\|/, $line;
	shift @cells;    # before the first |
	my $first = $cells[0];
	# the notes are the last cell; the cell before it says what comes back
	my $notes = @cells >= 3 ? $cells[-1] : '';
	my $returns = @cells >= 3 ? clean($cells[-2]) : '';
	my $text = clean($notes);
	# terse notes ("≥ 0", "alias") read only beside the first cell: say
	# what the function is and returns first
	$text = clean($first) . ($returns ne '' && $returns !~ /^[ARW]$/ ? " -> $returns" : '')
	  . ($text ne '' ? ": $text" : '')
	  if length($text) < 30;

	# view `name` in the first cell
	while ($first =~ /view `([a-z_][a-z0-9_]*)`/g)
	{
		push @views, [ $1, $text ];
	}
	(my $funcs = $first) =~ s/view `[^`]*`//g;
	while ($funcs =~ /`([a-z][a-z0-9_]*)(\((.*?)\))?`/g)
	{
		my ($name, $has_args, $args) = ($1, $2, $3);
		my $t = $text ne '' ? $text : ($last_text{$name} // '');
		$last_text{$name} = $t if $t ne '';
		if (!defined $has_args || $args eq '...')
		{
			push @rows, [ $name, undef, undef, $t ];
			next;
		}
		# optional arguments in brackets give one row per arity
		my @variants = expand_optional($args);
		for my $v (@variants)
		{
			my @names = map { /^\s*([a-z_][a-z0-9_]*)/ ? $1 : '?' } grep { /\S/ } split_args($v);
			push @rows, [ $name, \@names, scalar(@names), $t ];
		}
	}
}
close $fh;

# notes -> one line of plain text
sub clean
{
	my ($s) = @_;
	$s =~ s/\\\|/|/g;
	$s =~ s/\[([^\]]*)\]\([^)]*\)/$1/g;     # links
	$s =~ s/`//g;
	$s =~ s/\*\*?//g;
	$s =~ s/\s+/ /g;
	$s =~ s/^\s+|\s+$//g;
	return $s;
}

# split an argument list at top-level commas
sub split_args
{
	my ($s) = @_;
	my @out;
	my ($depth, $cur) = (0, '');
	for my $c (split //, $s)
	{
		$depth++ if $c eq '(' || $c eq '[';
		$depth-- if $c eq ')' || $c eq ']';
		if ($c eq ',' && $depth == 0) { push @out, $cur; $cur = ''; next; }
		$cur .= $c;
	}
	push @out, $cur;
	return @out;
}

# "a [, b [, c]]" -> ("a", "a, b", "a, b, c"); "[a]" -> ("", "a")
sub expand_optional
{
	my ($s) = @_;
	my $i = index($s, '[');
	return ($s) if $i < 0;
	my $head = substr($s, 0, $i);
	my $depth = 0;
	my $j;
	for my $k ($i .. length($s) - 1)
	{
		my $c = substr($s, $k, 1);
		$depth++ if $c eq '[';
		$depth-- if $c eq ']';
		if ($depth == 0) { $j = $k; last; }
	}
	my $inner = substr($s, $i + 1, $j - $i - 1);
	my $tail = substr($s, $j + 1);
	(my $without = $head . $tail) =~ s/,\s*$//;
	return (expand_optional($without), map { $head . $_ . $tail } expand_optional($inner));
}

sub lit
{
	my ($s) = @_;
	$s =~ s/'/''/g;
	return "'$s'";
}

print <<'EOS';
-- pgque:replay-on-upgrade (COMMENT is idempotent; ADR 0019)
-- Comments on the public functions and views, generated from
-- docs/sql-reference.md by sql/gen_comments.pl: edit the reference.
-- Qualified throughout: it runs with the installing superuser's rights.
do $comments$
declare
    r record;
begin
    for r in
        with doc(ord, name, argnames, nargs, txt) as (values
EOS
my @vals;
my $ord = 0;
for my $r (@rows)
{
	next if $r->[3] eq '';
	my $arr = defined $r->[1]
	  ? "array[" . join(', ', map { lit($_) } @{ $r->[1] }) . "]::pg_catalog.text[]"
	  : 'null::pg_catalog.text[]';
	my $n = defined $r->[2] ? $r->[2] : 'null';
	push @vals, "            ($ord, " . lit($r->[0]) . ", $arr, $n, " . lit($r->[3]) . ")";
	$ord++;
}
print join(",\n", @vals), "\n";
print <<'EOS';
        ),
        fn as (
            select p.oid, p.proname::pg_catalog.text as name, p.pronargs::pg_catalog.int4 as nargs, p.prokind,
                   (select pg_catalog.array_agg(a.n order by a.i)
                      from rows from (pg_catalog.unnest(p.proargnames),
                                      pg_catalog.unnest(coalesce(p.proargmodes::pg_catalog.text[],
                                          pg_catalog.array_fill('i'::pg_catalog.text,
                                              array[coalesce(pg_catalog.cardinality(p.proargnames), 0)]))))
                           with ordinality a(n, m, i)
                     where a.m operator(pg_catalog.=) any (array['i', 'b', 'v'])) as argnames
              from pg_catalog.pg_proc p
             where p.pronamespace operator(pg_catalog.=) 'pgque'::pg_catalog.regnamespace
               and p.proname operator(pg_catalog.!~) '^_'
        )
        select f.oid, f.prokind,
               (select d.txt from doc d
                 where d.name operator(pg_catalog.=) f.name
                 order by d.argnames operator(pg_catalog.=) f.argnames desc nulls last,
                          d.nargs operator(pg_catalog.=) f.nargs desc nulls last,
                          d.ord
                 limit 1) as txt
          from fn f
    loop
        continue when r.txt is null;
        execute pg_catalog.format('comment on %s %s is %L',
                    case when r.prokind operator(pg_catalog.=) 'p' then 'procedure' else 'function' end,
                    r.oid::pg_catalog.regprocedure, r.txt);
    end loop;
EOS
for my $v (@views)
{
	next if $v->[1] eq '';
	printf "    if pg_catalog.to_regclass(%s) is not null then\n", lit("pgque.$v->[0]");
	printf "        comment on view pgque.%s is %s;\n", $v->[0], lit($v->[1]);
	print "    end if;\n";
}
print "end\n\$comments\$;\n";
