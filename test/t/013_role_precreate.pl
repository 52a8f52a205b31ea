# Role creation (issue 11): a role with CREATEROLE must not be able to
# pre-create pgque_reader/writer/admin with attributes or memberships of its
# choosing and have the install adopt them, nor pgque_owner, which owns
# every object (ADR 0042), with any membership at all.  A role made by an earlier
# install (in another database) is accepted.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PgqueNode->new('roles');
$node->init;
$node->start;

$node->safe_psql('postgres', q{
    create role app_owner login;
    create database appdb owner app_owner;
    create database otherdb owner app_owner;
    create role mallory login createrole createdb;
});
# mallory's own group: from PostgreSQL 16 on, CREATEROLE grants only the
# attributes it has and the roles it has ADMIN OPTION on (its own)
$node->safe_psql('postgres', q{create role mallory_group nologin},
    extra_params => [ '-U', 'mallory' ]);

sub install
{
    my ($db) = @_;
    my ($ret, $out, $err) = $node->psql($db, 'create extension pgque_bgw',
        extra_params => [ '-U', 'app_owner' ]);
    return ($ret, $err);
}

# the attack: pgque_admin made beforehand as a LOGIN role with CREATEDB
$node->safe_psql('postgres', q{create role pgque_admin login createdb password 'known'},
    extra_params => [ '-U', 'mallory' ]);
my ($ret, $err) = install('appdb');
isnt($ret, 0, 'install refuses a pre-existing pgque_admin with LOGIN and CREATEDB');
like($err, qr/role "pgque_admin" exists with attributes the pgque_bgw install does not give it: CREATEDB, LOGIN/,
     'the error names the role and each attribute');
like($err, qr/HINT:  .*ALTER ROLE pgque_admin NOSUPERUSER/, 'with a hint');
like($err, qr/ERROR:  .*\n.*DETAIL/s, 'and a detail');
is($node->safe_psql('appdb', q{select count(*) from pg_extension where extname = 'pgque_bgw'}), '0',
   'nothing installed');

# attributes removed, but a membership in a role of the attacker's
$node->safe_psql('postgres', q{
    alter role pgque_admin nologin nocreatedb password null;
    grant mallory_group to pgque_admin;
}, extra_params => [ '-U', 'mallory' ]);
($ret, $err) = install('appdb');
isnt($ret, 0, 'install refuses a pgque_admin that is a member of another role');
like($err, qr/exists with attributes the pgque_bgw install does not give it: member of mallory_group/,
     'the error names the membership');

# pgque_reader pre-created with REPLICATION by a superuser's mistake: also refused
$node->safe_psql('postgres', q{revoke mallory_group from pgque_admin}, extra_params => [ '-U', 'mallory' ]);
$node->safe_psql('postgres', q{create role pgque_reader nologin replication bypassrls});
($ret, $err) = install('appdb');
like($err, qr/role "pgque_reader" exists with attributes .*: REPLICATION, BYPASSRLS/,
     'REPLICATION and BYPASSRLS are refused too');
$node->safe_psql('postgres', q{alter role pgque_reader noreplication nobypassrls});

# pgque_owner made beforehand by mallory and granted to herself (on
# PostgreSQL 16+ she would hold ADMIN on it as its creator anyway): she
# would be the owner of every object, and run as every caller of them
$node->safe_psql('postgres', q{create role pgque_owner nologin; grant pgque_owner to mallory},
    extra_params => [ '-U', 'mallory' ]);
($ret, $err) = install('appdb');
isnt($ret, 0, 'install refuses a pre-existing pgque_owner that has a member');
like($err, qr/role "pgque_owner" exists with attributes the pgque_bgw install does not give it: role mallory is a member of it/,
     'the error names the member');
is($node->safe_psql('appdb', q{select count(*) from pg_extension where extname = 'pgque_bgw'}), '0',
   'nothing installed');
$node->safe_psql('postgres', q{drop role pgque_owner});

# clean roles, pre-created NOLOGIN (the documented manual way): accepted
($ret, $err) = install('appdb');
is($ret, 0, 'pre-existing NOLOGIN roles without extra attributes are accepted') or diag($err);
is($node->safe_psql('postgres', q{
    select string_agg(g.rolname, ',' order by g.rolname) from pg_auth_members m
      join pg_roles g on g.oid = m.roleid join pg_roles r on r.oid = m.member
     where r.rolname = 'pgque_admin'}),
   'pgque_reader,pgque_writer', 'pgque_admin is a member of reader and writer only');

# a second database: the roles made or accepted by the first install pass
($ret, $err) = install('otherdb');
is($ret, 0, 'install in a second database with the roles of the first') or diag($err);

# a fresh cluster-wide start: the roles made by an install pass the check of the next
# (the schema pgque outlives the extension, with its grants)
$node->safe_psql($_, 'drop extension pgque_bgw cascade; drop schema pgque cascade') for ('appdb', 'otherdb');
$node->safe_psql('postgres', 'drop role pgque_admin; drop role pgque_reader; drop role pgque_writer');
($ret, $err) = install('appdb');
is($ret, 0, 'install creates the roles') or diag($err);
($ret, $err) = install('otherdb');
is($ret, 0, 'and a second database installs with the roles the first made') or diag($err);
is($node->safe_psql('postgres', q{
    select count(*) from pg_roles where rolname like 'pgque\_%'
       and (rolsuper or rolcreatedb or rolcreaterole or rolreplication or rolbypassrls or rolcanlogin)}),
   '0', 'the roles have no attribute');
is($node->safe_psql('postgres', q{
    select string_agg(m.roleid::regrole || '>' || m.member::regrole, ',') from pg_auth_members m, pg_roles o
     where o.rolname = 'pgque_owner' and o.oid in (m.roleid, m.member)}),
   'pg_read_all_stats>pgque_owner',
   'pgque_owner, made by the install, has no member (no creator ADMIN row on PostgreSQL 16+) and is a member of pg_read_all_stats only');

$node->stop('fast');
done_testing();
