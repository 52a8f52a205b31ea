# The installing role's name is data, never code (issue 11).  The install
# script used to paste the owner's quoted name (PostgreSQL's extowner
# substitution) inside dollar-quoted literals: a role named
#   a$q$||public.f()||$q$
# would close the literal and have the script call public.f(), a function
# of the role's own, with the rights of the bootstrap superuser a trusted
# install runs as.  PostgreSQL 15.4 and later (CVE-2023-39417) refuse to
# substitute a name holding a quote, so there the install failed instead
# ("invalid character in extension owner").  Now the owner is read from
# pg_extension and quoted with format('%I'): the script does not depend on
# the server's patch level, and every kind of awkward name installs and
# gets its grants (since ADR 0042 pgque_owner owns the objects; the name is
# still pasted into the grants and the schema's USAGE).
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PgqueNode->new_preloaded('owner_name', conf => q{
pgque_bgw.enabled = off
});

my @names = (
    'a$q$||public.f()||$q$',            # the attack on the dollar quote
    'b$owner$||public.f()||$owner$',    # the same on the DO block's quote
    "c'||public.f()||'",                # single quotes
    'd"||public.f()||"',                # double quotes (doubled by quoting)
    "e;select public.f();--",           # statement separator and comment
    "f\nselect public.f();",            # a newline ends a line comment
);

my $i = 0;
for my $name (@names)
{
    $i++;
    my $db = "db$i";
    (my $lit = $name) =~ s/'/''/g;
    (my $ident = $name) =~ s/"/""/g;
    $node->safe_psql('postgres', qq{
        create role "$ident" nologin;
        create database $db owner "$ident";
    });
    # the attacker's own function: it records who ran it
    $node->safe_psql($db, qq{
        set role "$ident";
        create table public.ran(by_role text, super boolean);
        create function public.f() returns text language plpgsql as \$f\$
        begin
            insert into public.ran
            select current_user, rolsuper from pg_roles where rolname = current_user;
            return '';
        end \$f\$;
    });
    my ($ret, $out, $err) = $node->psql($db, qq{
        set role "$ident";
        create extension pgque_bgw;
    });
    (my $shown = $name) =~ s/\n/\\n/g;
    is($ret, 0, "a role named '$shown' installs (trusted)") or diag($err);
    is($node->safe_psql($db, q{select count(*) from public.ran}), '0',
       "'$shown': no code of the role's name ran during the install");
    is($node->safe_psql($db, qq{
        select pg_get_userbyid(extowner) = '$lit' from pg_extension where extname = 'pgque_bgw'}),
       't', "'$shown': is the extension's owner");
    is($node->safe_psql($db, qq{
        select has_schema_privilege('$lit', 'pgque', 'usage')
               and not has_schema_privilege('$lit', 'pgque', 'create')
               and has_function_privilege('$lit', 'pgque.send(text, text)', 'execute')
               and has_function_privilege('$lit', 'pgque.create_queue(text)', 'execute')
               and has_function_privilege('$lit', 'pgque.uninstall()', 'execute')}),
       't', "'$shown': got its grants by name (USAGE, the API), not CREATE");
    is($node->safe_psql($db, qq{
        select count(*) from pg_proc where pronamespace = 'pgque'::regnamespace
           and pg_get_userbyid(proowner) <> 'pgque_owner'}),
       '0', "'$shown': pgque_owner owns every function");
    is($node->safe_psql($db, qq{
        select count(*) from pg_class where relnamespace = 'pgque'::regnamespace
           and relkind in ('r', 'v', 'S') and pg_get_userbyid(relowner) <> 'pgque_owner'}),
       '0', "'$shown': pgque_owner owns every table, view and sequence");
    is($node->safe_psql($db, qq{select rolsuper from pg_roles where rolname = '$lit'}),
       'f', "'$shown': still not a superuser");
}

$node->stop('fast');
done_testing();
