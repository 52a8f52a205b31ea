# The update guard and objects the 0.2.0 owner made members of the extension
# (ADR 0042).  The guard trusts what pg_depend says is the extension's: a
# function, type or cast that is a member passes.  But the owner of a 0.2.0
# install (the installing role of a trusted install) owned schema pgque and
# was the extension's owner, so it could create pgque.now() and then
# ALTER EXTENSION pgque_bgw ADD FUNCTION pgque.now(): a member.  The update
# passed the guard, gave the function to pgque_owner, and the SECURITY
# DEFINER function of the API (search_path = pgque, pg_catalog, pg_temp:
# pgque first) that call now() unqualified (send_at) called the planted one
# instead of pg_catalog's, running the former owner's code as pgque_owner.
# The guard now refuses a member function 0.2.0 did not make (the list of
# its functions is in sql/01_foreign_guard.sql) and any cast of a pgque type.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PgqueNode->new_preloaded('added_member', conf => q{
pgque_bgw.enabled = off
});
$node->safe_psql('postgres', q{
    create role dbo login;
    create database up owner dbo;
});
$node->safe_psql('up', 'grant create on schema public to public');
$node->safe_psql('postgres', 'alter role dbo superuser');
$node->safe_psql('up', q{create extension pgque_bgw version '0.2.0'}, extra_params => [ '-U', 'dbo' ]);
$node->safe_psql('postgres', 'alter role dbo nosuperuser');
$node->safe_psql('postgres', 'create role app login in role pgque_writer, pgque_reader');

$node->safe_psql('up', q{
    create table public.ran(what text, by_role text, super boolean);
    grant insert, select on public.ran to public;
    create function public.note(w text) returns boolean language plpgsql as $f$
    begin
        insert into public.ran select w, current_user, rolsuper from pg_roles where rolname = current_user;
        begin
            execute 'alter role dbo superuser';
        exception when insufficient_privilege then null;
        end;
        return true;
    end $f$;
    select pgque.create_queue('q');
    select pgque.subscribe('q', 'c');
    create function pgque.now() returns timestamptz language plpgsql stable as $f$
    begin perform public.note('now'); return pg_catalog.now(); end $f$;
    alter extension pgque_bgw add function pgque.now();
}, extra_params => [ '-U', 'dbo' ]);
$node->safe_psql('up', 'delete from public.ran');

my ($ret, $out, $err) = $node->psql('up', 'alter extension pgque_bgw update', extra_params => [ '-U', 'dbo' ]);
isnt($ret, 0, 'the update is refused while a function the owner added to the extension is in schema pgque');
like($err, qr/schema pgque holds objects the extension did not make: .*function (pgque\.)?now\(\)/,
     '... 55000 naming it');
# the API's send_at calls now() unqualified: on 0.2.0 it runs as dbo (the
# owner then), which is no gain; it must never run as pgque_owner or a superuser
$node->psql('up', q{select pgque.send_at('q', 't', 'x', pg_catalog.now() + interval '1 hour')}, extra_params => [ '-U', 'app' ]);
is($node->safe_psql('up', q{select coalesce(string_agg(distinct by_role || ' ' || super, ','), 'nothing') from public.ran
                             where by_role <> 'dbo' or super}),
   'nothing', 'the planted now() never ran as pgque_owner or a superuser, in the update or in the API');
is($node->safe_psql('postgres', q{select rolsuper from pg_roles where rolname = 'dbo'}), 'f', 'dbo is not a superuser');

$node->safe_psql('up', q{alter extension pgque_bgw drop function pgque.now(); drop function pgque.now()},
    extra_params => [ '-U', 'dbo' ]);
($ret, $out, $err) = $node->psql('up', 'alter extension pgque_bgw update', extra_params => [ '-U', 'dbo' ]);
is($ret, 0, 'without it the owner updates') or diag($err);
$node->safe_psql('up', 'delete from public.ran');
$node->safe_psql('up', q{select pgque.send_at('q', 't', 'x', pg_catalog.now() + interval '1 hour')}, extra_params => [ '-U', 'app' ]);
is($node->safe_psql('up', 'select count(*) from public.ran'), '0', 'after the update send_at runs nothing planted');
($ret, $out, $err) = $node->psql('up', q{create function pgque.now() returns timestamptz language sql as $f$ select pg_catalog.now() $f$},
    extra_params => [ '-U', 'dbo' ]);
like($err, qr/permission denied for schema pgque/, 'and the former owner can no longer plant one');

$node->stop;
done_testing();
