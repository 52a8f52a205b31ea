# Schema pgque made before the install is refused.  The control file names
# schema pgque, and CREATE EXTENSION uses a schema of that name as it finds
# it.  A role with only CREATE on the database made schema pgque and put
# pgque.format(text, text) in it: the install script (superuser rights,
# search_path = pgque, pg_temp) called format('create role %I nologin', r),
# for which the attacker's function is a better match than
# pg_catalog.format(text, variadic "any"), and so ran the attacker's code as
# the bootstrap superuser when the database owner installed.  Left in place,
# the schema's owner could also add functions later that the SECURITY
# DEFINER API (search_path = pgque, pg_catalog, pg_temp) would prefer to
# pg_catalog's.  Now the install requires schema pgque to be empty and owned
# by the installing role or by pgque_owner, as DROP EXTENSION leaves it since
# ADR 0042 (sql/00_schema_guard.sql).
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PgqueNode->new_preloaded('schema_preexisting', conf => q{
pgque_bgw.enabled = off
});

$node->safe_psql('postgres', q{
    create role dbo login;
    create role mallory login;
    create database app owner dbo;
    grant create on database app to mallory;
});

# The attacker's function: a format(text, text) that records who ran it and
# tries to make mallory a superuser, then does what format would have done.
my $plant = q{
    create function pgque.format(text, text) returns text language plpgsql as $f$
    begin
        insert into public.ran select current_user, rolsuper from pg_roles where rolname = current_user;
        begin
            execute 'alter role mallory superuser';
        exception when insufficient_privilege then null;
        end;
        return pg_catalog.format($1, $2);
    end $f$;
    create function pgque.now() returns timestamptz language sql as $f$ select pg_catalog.now() $f$;
};
$node->safe_psql('app', q{create table public.ran(by_role text, super boolean); grant insert on public.ran to public});

sub ran { return $node->safe_psql('app', q{select count(*) from public.ran}); }
sub mallory_super { return $node->safe_psql('postgres', q{select rolsuper from pg_roles where rolname = 'mallory'}); }

# 1. a role with CREATE on the database plants the schema; the database
#    owner installs (trusted)
$node->safe_psql('app', "set role mallory; create schema pgque; grant usage on schema pgque to public; $plant");
my ($ret, $out, $err) = $node->psql('app', 'set role dbo; create extension pgque_bgw');
isnt($ret, 0, 'the database owner cannot install into a schema pgque another role made');
like($err, qr/schema pgque exists and belongs to role mallory/, '... the error names the schema owner');
is(ran(), '0', '... the planted format() never ran');
is(mallory_super(), 'f', '... mallory is not a superuser');

# 2. the same schema, a superuser installs
($ret, $out, $err) = $node->psql('app', 'create extension pgque_bgw');
isnt($ret, 0, 'a superuser cannot install into a schema pgque another role made');
is(ran(), '0', '... the planted format() never ran');
is(mallory_super(), 'f', '... mallory is not a superuser');

# 3. the installing role's own schema with something in it
$node->safe_psql('app', 'drop schema pgque cascade');
$node->safe_psql('app', "set role dbo; create schema pgque; $plant");
($ret, $out, $err) = $node->psql('app', 'set role dbo; create extension pgque_bgw');
isnt($ret, 0, 'the installing role cannot install into its own schema pgque that is not empty');
like($err, qr/schema pgque is not empty: function /, '... the error names what is there');
is(ran(), '0', '... the planted format() never ran');

# 4. an empty schema of the installing role is fine; the install gives it to
#    pgque_owner, and DROP EXTENSION leaves it so, empty, for the next install
$node->safe_psql('app', 'drop function pgque.format(text, text), pgque.now()');
($ret, $out, $err) = $node->psql('app', 'set role dbo; create extension pgque_bgw');
is($ret, 0, 'an empty schema pgque of the installing role is used') or diag($err);
is($node->safe_psql('app', q{select pg_get_userbyid(nspowner) from pg_namespace where nspname = 'pgque'}),
   'pgque_owner', '... and gives it to pgque_owner');
$node->safe_psql('app', 'set role dbo; drop extension pgque_bgw');
($ret, $out, $err) = $node->psql('app', 'set role dbo; create extension pgque_bgw');
is($ret, 0, 'drop extension and create extension again by the same role') or diag($err);
is(ran(), '0', 'nothing planted ever ran');
is(mallory_super(), 'f', 'mallory never became a superuser');

$node->stop('fast');
done_testing();
