# The update guard and what a 0.2.0 owner attached to pgque's tables from
# other schemas (ADR 0042): inheritance children and extended statistics.
# A 0.2.0 install by a non-superuser left it owning pgque's tables, so it
# could make a table of its own in another schema INHERIT from one of them
# and put a row-level trigger and a row on it.  The 0.2.0 -> 0.3.0 update
# runs as the bootstrap superuser and its post step updates pgque.idem
# without ONLY: the statement reaches the child's row and fires the child's
# trigger with superuser rights.  The guard looked only at relations in
# schema pgque; the child is outside it.  After an update the child would
# also keep firing as pgque_owner whenever the API updates or deletes in the
# parent.  The guard now refuses (55000, naming the child) while a relation
# outside schema pgque inherits from a pgque relation.
# Likewise a statistics object in another schema on a pgque table with an
# expression calling the owner's function: the guard looked for statistics
# objects in schema pgque only; after the update ANALYZE (autovacuum's or
# anyone's) computes the expression as the table's owner, pgque_owner, so
# the former owner's code acts as pgque_owner.  The guard now refuses a
# statistics object on a pgque relation wherever it lives.
# And the extension's own two triggers passed by table, name and function:
# CREATE OR REPLACE TRIGGER queue_changed ... WHEN (public.tw()) kept all
# three and ran public.tw() as whoever changed pgque.queue (create_queue:
# pgque_owner); ALTER TABLE ... DISABLE TRIGGER config_one_row kept the
# config table open to a second row.  They pass now only enabled and
# without a WHEN clause.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PgqueNode->new_preloaded('inherited_child', conf => q{
pgque_bgw.enabled = off
});

$node->safe_psql('postgres', q{
    create role dbo login;
    create database up owner dbo;
});
$node->safe_psql('up', 'grant create on schema public to public');

# the state a trusted 0.2.0 install left: the installing role owns every object
$node->safe_psql('postgres', 'alter role dbo superuser');
$node->safe_psql('up', q{create extension pgque_bgw version '0.2.0'}, extra_params => [ '-U', 'dbo' ]);
$node->safe_psql('postgres', 'alter role dbo nosuperuser');

# the planted child: a row-level trigger that notes who ran it and tries to
# make dbo a superuser, and a row for the update to reach
$node->safe_psql('up', q{
    create table public.ran(what text, by_role text, super boolean);
    grant insert, select on public.ran to public;
    create function public.on_kid() returns trigger language plpgsql as $f$
    begin
        insert into public.ran select tg_table_name, current_user, rolsuper from pg_roles where rolname = current_user;
        begin
            execute 'alter role dbo superuser';
        exception when insufficient_privilege then null;
        end;
        return new;
    end $f$;
    create table public.kid () inherits (pgque.idem);
    create trigger kid_t before update or delete on public.kid for each row execute function public.on_kid();
    insert into public.kid values (1, 'k', 1, now() + interval '1 day');
    create table public.kid2 () inherits (pgque.subscription);
    create function public.note(w text) returns boolean language plpgsql as $f$
    begin
        insert into public.ran select w, current_user, rolsuper from pg_roles where rolname = current_user;
        return true;
    end $f$;
    create function public.sx(bigint) returns bigint language plpgsql immutable as $f$
    begin perform public.note('statistics'); return $1; end $f$;
    create statistics public.st on (public.sx(sub_last_tick)) from pgque.subscription;
    create function public.tw() returns boolean language plpgsql as $f$
    begin return public.note('queue_changed when'); end $f$;
    create or replace trigger queue_changed after insert or update or delete or truncate on pgque.queue
        for each statement when (public.tw()) execute function pgque._queue_changed();
    alter table pgque.config disable trigger config_one_row;
}, extra_params => [ '-U', 'dbo' ]);

for my $who ('dbo', 'a superuser')
{
    my ($ret, $out, $err) = $node->psql('up', 'alter extension pgque_bgw update',
        extra_params => $who eq 'dbo' ? [ '-U', 'dbo' ] : []);
    isnt($ret, 0, "the update by $who is refused while a table outside schema pgque inherits from a pgque table");
    like($err, qr/schema pgque holds objects the extension did not make: .*relation (public\.)?kid, a child of (pgque\.)?idem/,
         '... 55000 naming the child of pgque.idem');
    like($err, qr/relation (public\.)?kid2, a child of (pgque\.)?subscription/, '... and the one of pgque.subscription');
    like($err, qr/statistics object st on (pgque\.)?subscription/, '... and the statistics object in schema public');
    like($err, qr/trigger queue_changed on (pgque\.)?queue/, '... and the extension\'s own trigger given a WHEN clause');
    like($err, qr/trigger config_one_row on (pgque\.)?config/, '... and the extension\'s own trigger disabled');
}
is($node->safe_psql('up', 'select count(*) from public.ran'), '0', 'the child\'s trigger never ran');
is($node->safe_psql('postgres', q{select rolsuper from pg_roles where rolname = 'dbo'}), 'f', 'dbo is not a superuser');
is($node->safe_psql('up', q{select extversion from pg_extension where extname = 'pgque_bgw'}), '0.2.0',
   'the extension is still 0.2.0');

# once the children and the statistics are gone the update goes through
$node->safe_psql('up', q{drop table public.kid, public.kid2; drop statistics public.st;
    create or replace trigger queue_changed after insert or update or delete or truncate on pgque.queue
        for each statement execute function pgque._queue_changed();
    alter table pgque.config enable trigger config_one_row;}, extra_params => [ '-U', 'dbo' ]);
my ($ret, $out, $err) = $node->psql('up', 'alter extension pgque_bgw update', extra_params => [ '-U', 'dbo' ]);
is($ret, 0, 'without them the owner updates') or diag($err);
$node->safe_psql('up', q{analyze pgque.subscription; select pgque.create_queue('after')});
is($node->safe_psql('up', 'select count(*) from public.ran'), '0', 'nothing planted ran, an ANALYZE after the update included');
# and afterwards nobody but pgque_owner may add a child again
($ret, $out, $err) = $node->psql('up', 'create table public.kid () inherits (pgque.idem)',
    extra_params => [ '-U', 'dbo' ]);
like($err, qr/must be owner of table idem/, 'after the update the former owner cannot inherit from a pgque table');

$node->stop;
done_testing();
