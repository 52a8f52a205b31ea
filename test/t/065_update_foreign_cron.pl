# The 0.2.0 -> 0.3.0 update rewrites the pg_cron job that 0.2.0's start()
# scheduled (ticker_loop() lost its minute-long default, ADR 0077).  It runs
# as the role that updates, a superuser for an untrusted 0.2.0 install.  A
# role that owns the database (or holds CREATE on it) can make a schema
# named cron with a table job, a trigger on it and a row the update's
# UPDATE matches: the trigger would then run as the superuser.  The update
# touches cron.job only when it is pg_cron's own table (a member of
# extension pg_cron), so nothing of the planted schema runs.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PgqueNode->new_preloaded('foreign_cron', conf => q{
pgque_bgw.enabled = off
});

$node->safe_psql('postgres', q{
    create role dbo login;
    create database up owner dbo;
});
$node->safe_psql('up', q{create extension pgque_bgw version '0.2.0'});

# the planted schema: a table job shaped like pg_cron's, a row the update's
# statement matches, and a trigger that notes who ran it and tries to make
# dbo a superuser
$node->safe_psql('up', q{
    create schema cron;
    create table public.ran(by_role text, super boolean);
    grant insert, select on public.ran to public;
    create table cron.job(jobid bigserial, command text, jobname text);
    insert into cron.job(command, jobname) values ('call pgque.ticker_loop()', 'pgque_ticker_up');
    create function public.on_job() returns trigger language plpgsql as $f$
    begin
        insert into public.ran select current_user, rolsuper from pg_roles where rolname = current_user;
        begin
            execute 'alter role dbo superuser';
        exception when insufficient_privilege then null;
        end;
        return new;
    end $f$;
    create trigger on_job before update on cron.job for each row execute function public.on_job();
}, extra_params => [ '-U', 'dbo' ]);

# the superuser updates
my ($rc, $out, $err) = $node->psql('up', 'alter extension pgque_bgw update');
is($rc, 0, 'the update succeeds beside a schema cron that is not pg_cron\'s') or diag($err);
is($node->safe_psql('up', q{select extversion from pg_extension where extname = 'pgque_bgw'}),
   '0.3.0', '... and reaches 0.3.0');
is($node->safe_psql('up', 'select count(*) from public.ran'), '0',
   'the planted trigger on cron.job never ran');
is($node->safe_psql('up', q{select command from cron.job}), 'call pgque.ticker_loop()',
   'the planted cron.job row is untouched');
is($node->safe_psql('postgres', q{select rolsuper from pg_roles where rolname = 'dbo'}), 'f',
   'dbo is not a superuser');

$node->stop;
done_testing();
