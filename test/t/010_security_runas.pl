# Installing or owning a database never leads to superuser through the
# background workers (issue #11, ADR 0014).  Each attack of the issue is
# replayed in its own database with the workers running; the replaced code
# records in the server log that a worker ran it and what happened when it
# tried to escalate.  The workers run every unit as pgque_owner, the owner of
# the extension's objects (ADR 0042; until 0.2.0 the installing role), as a
# security-restricted operation, under search_path pg_catalog, pg_temp.
# Since ADR 0042 the installing role of a trusted install owns nothing, so
# its replacements are refused before any worker could run them.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);

my $node = PgqueNode->new_preloaded('runas', conf => qq{
max_worker_processes = 24
pgque_bgw.max_workers = 21
pgque_bgw.launcher_naptime = '1s'
pgque_bgw.maint_interval = '1s'
pgque_bgw.watchdog_interval = '1s'
});
my $superuser = $node->safe_psql('postgres', 'select current_user');

# escalate(kind): what an attacker puts in code a worker runs: make its own
# role (ATTACKER) superuser, join a powerful role; the outcome goes to the
# server log.
my $escalate_template = q{
    create function public.escalate(k text) returns boolean language plpgsql as $f$
    declare
        me text := 'ATTACKER';
    begin
        begin
            execute format('alter role %I superuser', me);
            raise warning 'ATTACK %: superuser granted to %', k, me;
        exception when others then
            raise warning 'ATTACK %: alter role refused: % %', k, sqlstate, sqlerrm;
        end;
        begin
            execute format('grant pg_execute_server_program to %I', me);
            raise warning 'ATTACK %: membership granted to %', k, me;
        exception when others then
            raise warning 'ATTACK %: grant refused: % %', k, sqlstate, sqlerrm;
        end;
        return true;
    end $f$;
};
sub escalate { my ($role) = @_; (my $sql = $escalate_template) =~ s/ATTACKER/$role/; return $sql; }

# --- a non-superuser that owns a database installs the extension (trusted)
# and then replaces what the workers run
my %trusted = (
    m_watch => q{
        do $d$ begin
          execute format('create or replace function pgque._watchdog_pass(%s) returns record language plpgsql as %L',
                         pg_get_function_arguments('pgque._watchdog_pass'::regproc),
                         'begin perform public.escalate(''watchdog''); opened := 0; cleared := 0; end');
        end $d$;},
    m_tick => q{
        create or replace function pgque.ticker(i_queue_name text) returns bigint language plpgsql as
          $f$ begin perform public.escalate('ticker'); return null; end $f$;
        select pgque.send('q', 'a commit wakes the ticker');},
    m_idem => q{
        create function public.on_idem_delete() returns trigger language plpgsql as
          $f$ begin perform public.escalate('idem trigger'); return old; end $f$;
        create trigger evil before delete on pgque.idem for each row execute function public.on_idem_delete();
        select event_id is not null from pgque.send_idem('q', 't', 'p', 'key-1', '1 second');},
    m_view => q{
        alter table pgque.queue rename to queue_real;
        create view pgque.queue as select * from pgque.queue_real where public.escalate('queue view');},
);
for my $db (sort keys %trusted)
{
    my $owner = "own_$db";
    $node->safe_psql('postgres', qq{create role $owner login; create database $db owner $owner;});
    $node->safe_psql($db, qq{
        create extension pgque_bgw;
        select pgque.create_queue('q');
        select pgque.subscribe('q', 'c');
    } . escalate($owner), extra_params => [ '-U', $owner ]);
}
# every database is served before the attacks land
for my $db (sort keys %trusted)
{
    ok($node->poll_query_until('postgres', qq{
        select count(*) = 3 from pg_stat_activity where datname = '$db' and backend_type like 'pgque_bgw %'}),
       "$db: the three workers run for the trusted install");
}
for my $db (sort keys %trusted)
{
    my ($ret, $out, $err) = $node->psql($db, $trusted{$db}, extra_params => [ '-U', "own_$db" ]);
    isnt($ret, 0, "$db: the installing role cannot replace or attach what a worker runs");
    like($err, qr/ERROR:  (permission denied for (schema pgque|table idem|table queue)|must be owner of (function|table) )/,
         "$db: ... refused with 42501");
    # the workers still serve the database: a send is ticked and received
    $node->safe_psql($db, q{select pgque.send('q', 'still delivered')}, extra_params => [ '-U', "own_$db" ]);
    ok($node->poll_query_until($db, q{select count(*) > 0 from pgque.receive('q', 'c')}),
       "$db: the workers tick the owner's queue");
}

# --- a superuser installs; the database owner and a role with CREATE on the
# database plant operators and functions where the workers' names resolve
# through the database's search_path (public first) and "$user"
$node->safe_psql('postgres', qq{
    create role dbo login;
    create role creator login;
    create database s_ops owner dbo;
    grant create on database s_ops to creator;
});
$node->safe_psql('s_ops', qq{
    alter database s_ops set search_path = public, pg_catalog;
} . escalate('dbo') . qq{
    create function public.mul(numeric, int4) returns numeric language sql as
      \$f\$ select public.escalate('operator *') ; select \$1 operator(pg_catalog.*) \$2::numeric \$f\$;
    create operator public.* (leftarg = numeric, rightarg = int4, function = public.mul);
    create function public.tsmi(timestamptz, timestamptz) returns interval language sql as
      \$f\$ select public.escalate('operator -') ; select \$1 operator(pg_catalog.-) \$2 \$f\$;
    create operator public.- (leftarg = timestamptz, rightarg = timestamptz, function = public.tsmi);
    create function public.now() returns timestamptz language sql as
      \$f\$ select public.escalate('now()') ; select pg_catalog.now() \$f\$;
}, extra_params => [ '-U', 'dbo' ]);
$node->safe_psql('s_ops', qq{
    create schema "$superuser";
    create function "$superuser".make_interval(secs int4) returns interval language sql as
      \$f\$ select public.escalate('make_interval in "\$user"') ; select pg_catalog.make_interval(secs => \$1::float8) \$f\$;
}, extra_params => [ '-U', 'creator' ]);
$node->safe_psql('s_ops', q{
    create extension pgque_bgw;
    select pgque.create_queue('q');
    select pgque.subscribe('q', 'c');
});
ok($node->poll_query_until('postgres', q{
    select count(*) = 3 from pg_stat_activity where datname = 's_ops' and backend_type like 'pgque_bgw %'}),
   's_ops: the three workers run under the hostile database settings');

# the workers keep working there: an event is ticked without anyone ticking
$node->safe_psql('s_ops', q{select pgque.send('q', 'still delivered')});
ok($node->poll_query_until('s_ops', q{
    select count(*) = 1 from pgque.receive('q', 'c')}),
   's_ops: the ticker delivers under the hostile search_path');

# let every worker make several passes over every database
sleep(4);
my $log = slurp_file($node->logfile);
for my $kind ('watchdog', 'ticker', 'idem trigger', 'queue view')
{
    unlike($log, qr/ATTACK \Q$kind\E:/, "$kind: the owner's code was never placed, no worker ran it");
}
unlike($log, qr/ATTACK (operator|now\(\)|make_interval)/,
       's_ops: no planted operator or function was ever called by a worker');

is($node->safe_psql('postgres', q{
    select string_agg(rolname, ',' order by rolname) from pg_roles
     where rolsuper and rolname <> current_user}),
   '', 'no role but the bootstrap superuser is a superuser');
is($node->safe_psql('postgres', q{
    select count(*) from pg_auth_members m join pg_roles r on r.oid = m.member
     where r.rolname like 'own\_%' or r.rolname in ('dbo', 'creator')}),
   '0', 'and no attacker gained a membership');

$node->stop('fast');
done_testing();
