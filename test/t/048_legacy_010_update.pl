# An update from 0.1.0 runs the guard first (issue #25 item 1, ADR 0042).
# 0.1.0 was trusted: a role with CREATE on the database installed it and
# owned every object, so it could add a BEFORE UPDATE trigger on
# pgque.subscription.  The frozen 0.1.0 -> 0.2.0 step updates that table
# with superuser rights and would fire it.  Every update from 0.1.0 now
# takes the direct step pgque_bgw--0.1.0--<current>.sql, which refuses
# (55000, naming the trigger) before anything runs, whoever starts it: the
# superuser or that role (the target version is trusted).
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PgqueNode->new_preloaded('legacy010');
my $new = $node->safe_psql('postgres',
    q{select default_version from pg_available_extensions where name = 'pgque_bgw'});

is($node->safe_psql('postgres', qq{select path from pg_extension_update_paths('pgque_bgw')
                                   where source = '0.1.0' and target = '$new'}),
   "0.1.0--$new", "an update from 0.1.0 takes the direct step to $new");

# the state a trusted 0.1.0 install by a non-superuser left: it owns all
$node->safe_psql('postgres', q{
    create role dbo login;
    create database legacy owner dbo;
    alter role dbo superuser;
});
$node->safe_psql('legacy', q{create extension pgque_bgw version '0.1.0'}, extra_params => [ '-U', 'dbo' ]);
$node->safe_psql('postgres', 'alter role dbo nosuperuser');
is($node->safe_psql('legacy', q{select pg_get_userbyid(relowner) from pg_class where oid = 'pgque.subscription'::regclass}),
   'dbo', '0.1.0: the installing role owns pgque.subscription');
$node->safe_psql('legacy', q{
    select pgque.create_queue('q');
    select pgque.subscribe('q', 'c');
    create table public.ran (who text, su boolean);
    create function public.plant() returns trigger language plpgsql as $$
    begin
        insert into public.ran values (current_user, (select rolsuper from pg_roles where rolname = current_user));
        execute 'alter role dbo superuser';
        return new;
    end $$;
    create trigger planted before update on pgque.subscription
        for each row execute function public.plant();
}, extra_params => [ '-U', 'dbo' ]);

for my $who ('dbo', 'postgres')
{
    my ($rc, $out, $err) = $node->psql('legacy', "\\set VERBOSITY verbose\nalter extension pgque_bgw update",
        extra_params => [ '-U', $who ]);
    isnt($rc, 0, "the update by $who is refused");
    like($err, qr/55000/, "... with 55000");
    like($err, qr/planted/, '... naming the planted trigger');
}
is($node->safe_psql('legacy', 'select count(*) from public.ran'), '0', 'the planted trigger never ran');
is($node->safe_psql('postgres', q{select rolsuper from pg_roles where rolname = 'dbo'}), 'f',
   'dbo did not become a superuser');
is($node->safe_psql('legacy', q{select extversion from pg_extension where extname = 'pgque_bgw'}), '0.1.0',
   'the extension is still 0.1.0');

# once the trigger is gone the update goes through, and what was there stays
$node->safe_psql('legacy', 'drop trigger planted on pgque.subscription');
$node->safe_psql('legacy', 'alter extension pgque_bgw update');
is($node->safe_psql('legacy', q{select extversion from pg_extension where extname = 'pgque_bgw'}), $new,
   "then the update to $new succeeds");
is($node->safe_psql('legacy', q{select pg_get_userbyid(relowner) from pg_class where oid = 'pgque.subscription'::regclass}),
   'pgque_owner', 'and pgque_owner owns the tables');
is($node->safe_psql('legacy', q{select count(*) from pgque.subscription s join pgque.consumer c on c.co_id = s.sub_consumer
                                 where c.co_name = 'c'}), '1', 'the consumer survived the update');
is($node->safe_psql('postgres', q{select rolsuper from pg_roles where rolname = 'dbo'}), 'f',
   'dbo is still not a superuser');

$node->stop;
done_testing();
