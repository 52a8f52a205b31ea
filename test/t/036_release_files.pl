# The release files a user and a packager read before any code: the
# license, the changelog, PGXN's META.json, the control file's comment
# (issue #28).  No server: they are checked against each other and
# against the released scripts.
use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Test::More;
use JSON::PP;

my $root = "$ENV{PGQUE_SRC}/..";

my $control = slurp_file("$root/pgque_bgw.control");
my ($version) = $control =~ /^default_version\s*=\s*'([^']+)'/m;
ok(defined $version, "the control file has a default_version ($version)");
like($control, qr/^comment\s*=\s*'[^']{20,}'/m, 'the control file has a comment');

my $license = slurp_file("$root/LICENSE");
like($license, qr/Copyright \(c\) \d{4}/, 'LICENSE has a copyright line');
like($license, qr/Permission to use, copy, modify, and distribute this software/,
     'LICENSE is the PostgreSQL License');

my $meta = decode_json(slurp_file("$root/META.json"));
is($meta->{version}, $version, 'META.json: version is the control file\'s');
is($meta->{provides}{pgque_bgw}{version}, $version, 'META.json: pgque_bgw\'s version is the control file\'s');
is($meta->{provides}{pgque_proxy}{version}, $version, 'META.json: pgque_proxy\'s version is the control file\'s');
is($meta->{name}, 'pgque_bgw', 'META.json: name');
ok(exists $meta->{license}{PostgreSQL}, 'META.json: license is PostgreSQL');
is($meta->{'meta-spec'}{version}, '1.0.0', 'META.json: meta-spec 1.0.0');
# the PGXN meta spec's required keys
for my $key (qw(name abstract version maintainer license provides meta-spec))
{
    ok(exists $meta->{$key}, "META.json has the required key $key");
}
for my $ext (sort keys %{ $meta->{provides} })
{
    ok(-f "$root/$meta->{provides}{$ext}{file}", "META.json: $ext's file $meta->{provides}{$ext}{file} exists");
}

# every released version, and the one in development, has its section
my $changelog = slurp_file("$root/CHANGELOG.md");
my %released;
for my $f (glob("$root/sql/released/pgque_bgw--*.sql"))
{
    $released{$1} = 1 if $f =~ /pgque_bgw--([0-9.]+)\.sql$/;
}
ok(scalar(keys %released) >= 2, 'released scripts found: ' . join(', ', sort keys %released));
for my $v (sort keys %released, $version)
{
    like($changelog, qr/^## \Q$v\E\b/m, "CHANGELOG.md has a section for $v");
}
# the Debian package's version is the control file's
my $debchangelog = slurp_file("$root/debian/changelog");
like($debchangelog, qr/\Apgque-bgw \(\Q$version\E(-\d+)?\) /, "debian/changelog's first entry is $version");
like(slurp_file("$root/debian/control.in"), qr/^Package: postgresql-PGVERSION-pgque-bgw$/m,
     'debian/control.in names the package in the PGVERSION convention');
# make test builds the package and installs it as root: in a directory
# of its own, not in the work tree the postgres user owns, where it could
# swap the copied sources or the .deb before apt-get installs it
my $bd = `bash "$root/test/deb.sh" builddir`;
chomp $bd;
ok($bd ne '' && -d $bd, "deb.sh builddir makes a directory ($bd)");
my @st = stat($bd);
is($st[4], $<, 'it belongs to the user that runs the build');
is(sprintf('%o', $st[2] & 07777), '700', 'no one else may enter or write it');
my $work = $ENV{PGQUE_SRC} =~ s{/test/?$}{}r;
unlike($bd, qr/^\Q$work\E/, 'and it is not under the shared work tree');
rmdir $bd if $bd ne '';
unlike(slurp_file("$root/test/deb.sh"), qr/^\s*D="\$WORK/m, 'smoke does not build in WORK');
done_testing();
