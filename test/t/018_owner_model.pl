# The ownership and run-as model (issue #25 items 1, 8, 11; ADR 0042).
# Each finding of the issue replayed as written:
#  1. a role with only CREATE on the database installs version '0.1.0' (no
#     schema guard; an operator pgque.=(oid, regnamespace) planted in a
#     schema pgque it made) or '0.2.0': refused, the old versions are not
#     trusted, and the operator never runs;
#  2. a 0.2.0 install by a non-superuser owner (the state every trusted
#     0.2.0 install is in) gets a BEFORE UPDATE trigger on
#     pgque.subscription, an operator in schema pgque, an index calling its
#     own function and a table of its own in the schema with a default and
#     a partition key calling one; ALTER EXTENSION UPDATE, by it or by a superuser, is
#     refused while they exist and none of them runs; once they are gone the
#     update takes every object back for pgque_owner;
#  3. the owner of a trusted install can no longer replace pgque.logutriga()
#     or pgque.status() (or anything another role calls): a superuser's
#     INSERT through a pgque trigger and its status() run nothing of the
#     owner's;
#  4. pgque_proxy refuses a schema pgque another role made.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PgqueNode->new_preloaded('owner_model', conf => q{
pgque_bgw.enabled = off
});

$node->safe_psql('postgres', q{
    create role creator login;
    create role dbo login;
    create database c1;
    grant create on database c1 to creator;
    create database up owner dbo;
    create database fresh owner dbo;
    create database px;
    grant create on database px to creator;
});
# the attackers put their functions in schema public (PostgreSQL 15 gives
# PUBLIC no CREATE there any more)
$node->safe_psql($_, 'grant create on schema public to public') for ('c1', 'up', 'fresh');

# what attacker code does wherever it runs: note who ran it and with which
# rights, and try to become superuser
my $recorder = q{
    create table public.ran(what text, by_role text, super boolean);
    grant insert, select on public.ran to public;
    create function public.note(w text) returns boolean language plpgsql as $f$
    begin
        insert into public.ran select w, current_user, rolsuper from pg_roles where rolname = current_user;
        begin
            execute format('alter role %I superuser', 'ATTACKER');
        exception when insufficient_privilege then null;
        end;
        return true;
    end $f$;
};
sub recorder { my ($who) = @_; (my $s = $recorder) =~ s/ATTACKER/$who/; return $s; }
sub ran { my ($db) = @_; return $node->safe_psql($db, q{select count(*) from public.ran}); }
sub super { my ($r) = @_; return $node->safe_psql('postgres', qq{select rolsuper from pg_roles where rolname = '$r'}); }

# --- 1. the old versions need a superuser
$node->safe_psql('c1', recorder('creator'), extra_params => [ '-U', 'creator' ]);
$node->safe_psql('c1', q{
    create schema pgque;
    create function public.eq(oid, regnamespace) returns boolean language sql as
      $f$ select public.note('operator =') and $1 operator(pg_catalog.=) $2::oid $f$;
    create operator pgque.= (leftarg = oid, rightarg = regnamespace, function = public.eq);
}, extra_params => [ '-U', 'creator' ]);
for my $v ('0.1.0', '0.2.0')
{
    my ($ret, $out, $err) = $node->psql('c1', "create extension pgque_bgw version '$v'",
        extra_params => [ '-U', 'creator' ]);
    isnt($ret, 0, "a role with only CREATE on the database cannot install version $v");
    like($err, qr/permission denied to create extension "pgque_bgw".*\n.*Must be superuser/,
         "... PostgreSQL refuses it: $v is not trusted");
}
my ($ret, $out, $err) = $node->psql('c1', 'create extension pgque_bgw', extra_params => [ '-U', 'creator' ]);
isnt($ret, 0, 'the current version refuses the planted schema (it is not empty)');
like($err, qr/schema pgque is not empty: .*operator =/, '... naming the operator');
is(ran('c1'), '0', 'the planted operator never ran');
is(super('creator'), 'f', 'creator is not a superuser');

# --- 2. a 0.2.0 install owned by a non-superuser, then the update
# (a superuser makes the state a trusted 0.2.0 install left: the installing
# role ran CREATE EXTENSION and owns every object)
$node->safe_psql('postgres', 'alter role dbo superuser');
$node->safe_psql('up', q{create extension pgque_bgw version '0.2.0'}, extra_params => [ '-U', 'dbo' ]);
$node->safe_psql('postgres', 'alter role dbo nosuperuser');
$node->safe_psql('up', recorder('dbo') . q{
    select pgque.create_queue('q');
    select pgque.subscribe('q', 'c');
    select pgque.send('q', 'before the update');
    select pgque.ticker('q');
}, extra_params => [ '-U', 'dbo' ]);
is($node->safe_psql('up', q{select pg_get_userbyid(proowner) from pg_proc where oid = 'pgque.status()'::regprocedure}),
   'dbo', '0.2.0: the installing role owns the functions (the state being fixed)');

my %plant = (
    'trigger t on subscription' => q{
        create function public.on_sub() returns trigger language plpgsql as
          $f$ begin perform public.note('subscription trigger'); return new; end $f$;
        create trigger t before update on pgque.subscription for each row execute function public.on_sub();},
    'operator =(oid,regnamespace)' => q{
        create function public.eq(oid, regnamespace) returns boolean language sql as
          $f$ select public.note('operator =') and $1 operator(pg_catalog.=) $2::oid $f$;
        create operator pgque.= (leftarg = oid, rightarg = regnamespace, function = public.eq);},
    'index sub_ix, which calls function public.ix(bigint)' => q{
        create function public.ix(bigint) returns bigint language plpgsql immutable as
          $f$ begin perform public.note('index expression'); return $1; end $f$;
        create index sub_ix on pgque.subscription (public.ix(sub_last_tick));},
    # a table of its own in the schema, as the queues' are: its default and
    # partition key would run on an insert
    'relation pk, which calls function public.iy(bigint)' => q{
        create function public.iy(bigint) returns bigint language plpgsql immutable as
          $f$ begin perform public.note('partition key or default'); return $1; end $f$;
        create table pgque.pk (a bigint default public.iy(1)) partition by range (public.iy(a));},
    'default of pk.a, which calls function public.iy(bigint)' => '',
);
for my $what (sort keys %plant)
{
    $node->safe_psql('up', $plant{$what}, extra_params => [ '-U', 'dbo' ]) if $plant{$what};
}
# the recorder works: building the index ran the planted expression as the
# table's owner, dbo, without superuser rights
is($node->safe_psql('up', q{select string_agg(distinct what || ' ' || by_role || ' ' || super, ',') from public.ran}),
   'index expression dbo false', 'the recorder notes who ran planted code (the index build, as dbo)');
$node->safe_psql('up', 'delete from public.ran');
for my $who ('dbo', 'a superuser')
{
    ($ret, $out, $err) = $node->psql('up', 'alter extension pgque_bgw update',
        extra_params => $who eq 'dbo' ? [ '-U', 'dbo' ] : []);
    isnt($ret, 0, "the update by $who is refused while foreign objects are attached");
    like($err, qr/ERROR:  schema pgque holds objects the extension did not make: /, '... 55000 with what is there');
    like($err, qr/\Q$_\E/, "... naming $_") for sort keys %plant;
    like($err, qr/HINT:  Drop these objects/, '... and a hint');
}
is(ran('up'), '0', 'none of the planted trigger, operator, index, default or partition key expressions ran');
is(super('dbo'), 'f', 'dbo is not a superuser');
is($node->safe_psql('up', q{select extversion from pg_extension where extname = 'pgque_bgw'}), '0.2.0',
   'the extension is still 0.2.0');

$node->safe_psql('up', q{
    drop trigger t on pgque.subscription;
    drop operator pgque.=(oid, regnamespace);
    drop index pgque.sub_ix;
    drop table pgque.pk;
    grant create on schema pgque to creator;
    grant update on pgque.subscription to creator;
    grant select on pgque.idem to creator;
    grant execute on function pgque._caller() to creator;
}, extra_params => [ '-U', 'dbo' ]);
($ret, $out, $err) = $node->psql('up', 'alter extension pgque_bgw update', extra_params => [ '-U', 'dbo' ]);
is($ret, 0, 'without them the owner updates') or diag($err);
is($node->safe_psql('up', q{select extversion from pg_extension where extname = 'pgque_bgw'}), '0.3.0',
   '... to 0.3.0');
is($node->safe_psql('up', q{
    select count(*) from pg_class where relnamespace = 'pgque'::regnamespace and relkind in ('r', 'v', 'S', 'p')
       and relowner <> 'pgque_owner'::regrole}), '0', 'pgque_owner owns every relation, the queues\' too');
is($node->safe_psql('up', q{
    select count(*) from pg_proc where pronamespace = 'pgque'::regnamespace and proowner <> 'pgque_owner'::regrole}),
   '0', 'pgque_owner owns every function');
is($node->safe_psql('up', q{select pg_get_userbyid(nspowner) from pg_namespace where nspname = 'pgque'}),
   'pgque_owner', 'and the schema');
is($node->safe_psql('up', q{select has_schema_privilege('creator', 'pgque', 'create')
                                   or has_schema_privilege('dbo', 'pgque', 'create')}),
   'f', 'CREATE on schema pgque granted by its former owner is gone');
is($node->safe_psql('up', q{select has_table_privilege('creator', 'pgque.subscription', 'update')
                                   or has_table_privilege('creator', 'pgque.idem', 'select')
                                   or has_function_privilege('creator', 'pgque._caller()', 'execute')}),
   'f', 'and so are the rights on tables and internal functions it granted to a role of its choosing');
is($node->safe_psql('up', q{select count(*) from pgque.receive('q', 'c', 10)}, extra_params => [ '-U', 'dbo' ]),
   '1', 'the event sent before the update is received after it, by the former owner through its grants');
($ret, $out, $err) = $node->psql('up', q{
    create trigger t before update on pgque.subscription for each row execute function public.on_sub()},
    extra_params => [ '-U', 'dbo' ]);
like($err, qr/permission denied for table subscription|must be owner of table subscription/, 'the former owner cannot attach a trigger again (42501)');
is(ran('up'), '0', 'nothing planted ran during or after the update');

# --- 3. a trusted install: the owner cannot replace what others call
$node->safe_psql('fresh', recorder('dbo') . q{create extension pgque_bgw; select pgque.create_queue('cdc');},
    extra_params => [ '-U', 'dbo' ]);
for my $sql (
    q{create or replace function pgque.status() returns setof text language sql as $f$ select 'x' $f$},
    q{create or replace function pgque.logutriga() returns trigger language plpgsql as $f$ begin perform public.note('logutriga'); return null; end $f$},
    q{alter function pgque.metrics() owner to dbo},
    q{create function pgque.now() returns timestamptz language sql as $f$ select pg_catalog.now() $f$})
{
    ($ret, $out, $err) = $node->psql('fresh', $sql, extra_params => [ '-U', 'dbo' ]);
    (my $short = $sql) =~ s/\s+(returns|owner|language).*//s;
    isnt($ret, 0, "the installing role is refused: $short");
    like($err, qr/permission denied for schema pgque|must be owner of function/, '... 42501');
}
is($node->safe_psql('fresh', q{
    select count(*) from pg_proc where pronamespace = 'pgque'::regnamespace and proowner <> 'pgque_owner'::regrole}),
   '0', 'every function belongs to pgque_owner');
is($node->safe_psql('postgres', q{
    select count(*) from pg_auth_members m where m.roleid = 'pgque_owner'::regrole}),
   '0', 'and nobody is a member of pgque_owner');
$node->safe_psql('fresh', q{
    create table public.mine(id int primary key, v text);
    create trigger q after insert on public.mine for each row execute function pgque.logutriga('cdc');
    insert into public.mine values (1, 'a superuser inserts');
    select count(*) from pgque.status();
});
is(ran('fresh'), '0', "a superuser's insert through logutriga and its status() ran nothing of the owner's");
# the installing role still produces from its own table (it holds
# pgque_writer's rights by name; CDC checks the table's owner)
($ret, $out, $err) = $node->psql('fresh', q{
    create table public.dbo_rows(id int primary key);
    create trigger q after insert on public.dbo_rows for each row execute function pgque.logutriga('cdc');
    insert into public.dbo_rows values (1);}, extra_params => [ '-U', 'dbo' ]);
is($ret, 0, "the installing role's own table produces through logutriga") or diag($err);
is(super('dbo'), 'f', 'dbo is still not a superuser');

# --- 4. pgque_proxy: the schema guard
$node->safe_psql('px', q{create schema pgque; create function pgque.f() returns int language sql as 'select 1'},
    extra_params => [ '-U', 'creator' ]);
($ret, $out, $err) = $node->psql('px', 'create extension pgque_proxy cascade');
isnt($ret, 0, 'pgque_proxy refuses a schema pgque another role made');
like($err, qr/schema pgque exists and belongs to role creator/, '... naming its owner');
$node->safe_psql('px', 'drop schema pgque cascade');
($ret, $out, $err) = $node->psql('px', 'create extension pgque_proxy cascade');
is($ret, 0, 'and installs where there is none') or diag($err);

$node->stop('fast');
done_testing();
