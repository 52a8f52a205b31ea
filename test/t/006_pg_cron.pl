# The fallback without workers: start() schedules ticker_loop() and maint()
# with pg_cron and stop() removes them; without pg_cron, start() says so and
# the manual mode (ticker_loop, ticker, maint) works.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PgqueNode->new_preloaded('cron', preload => 'pgque_bgw,pg_cron', conf => qq{
pgque_bgw.enabled = off
cron.database_name = 'postgres'
});
$node->safe_psql('postgres', q{
    create extension pg_cron;
    create extension pgque_bgw;
    select pgque.create_queue('cq');
    select pgque.subscribe('cq', 'c');
});
is($node->safe_psql('postgres', q{
       select count(*) from pg_stat_activity where backend_type like 'pgque_bgw %' and backend_type <> 'pgque_bgw launcher'}),
   '0', 'with pgque_bgw.enabled = off no per-database worker runs');
is($node->safe_psql('postgres', q{select status from pgque.status() where component = 'scheduler'}),
   'manual', 'status() says manual before start()');

$node->safe_psql('postgres', 'select pgque.start()');
is($node->safe_psql('postgres', q{
       select string_agg(jobname || ' ' || schedule || ' ' || command, '; ' order by jobname) from cron.job}),
   q{pgque_maint_postgres * * * * * select pgque.maint(); pgque_ticker_postgres * * * * * call pgque.ticker_loop('59 seconds')},
   'start() schedules ticker_loop() and maint() with pg_cron');
$node->safe_psql('postgres', 'select pgque.start()');
is($node->safe_psql('postgres', q{select count(*) from cron.job}), '2', 'start() again does not duplicate jobs');
# the jobs belong to the role that called start() (ADR 0042: pgque_owner,
# which status() runs as, cannot log in to run them, and pg_cron shows a
# role its own jobs only): status() works with pg_cron here and says where
# to look
like($node->safe_psql('postgres', q{select status || ': ' || detail from pgque.status() where component = 'scheduler'}),
     qr/^manual: .*belong to the role that called it: that role sees them in cron\.job/,
     'status() says where the jobs are (it cannot see them)');
is($node->safe_psql('postgres', q{select string_agg(distinct username, ',') from cron.job}),
   $node->safe_psql('postgres', 'select current_user'), 'the jobs are the caller\'s');

# what the ticker job runs works: a short ticker_loop delivers
$node->safe_psql('postgres', q{select pgque.send('cq', 'via ticker_loop')});
$node->safe_psql('postgres', q{call pgque.ticker_loop('1 second', '100 milliseconds')});
is($node->safe_psql('postgres', q{select payload from pgque.receive('cq', 'c')}), 'via ticker_loop',
   'CALL pgque.ticker_loop() ticks: the event is delivered');

$node->safe_psql('postgres', 'select pgque.stop()');
is($node->safe_psql('postgres', q{select count(*) from cron.job}), '0', 'stop() removes the jobs');
is($node->safe_psql('postgres', q{select status from pgque.status() where component = 'scheduler'}),
   'manual', 'and status() says manual again');

# a database without pg_cron: a clear error, and manual mode
$node->safe_psql('postgres', 'create database nocron');
$node->install('nocron');
my ($ret, $out, $err) = $node->psql('nocron', 'select pgque.start()');
isnt($ret, 0, 'start() without pg_cron fails');
like($err, qr/pg_cron extension is not installed in database "nocron": PgQue itself works without pg_cron/, 'with a clear message');
like($err, qr/HINT:.*pgque\.ticker\(\)/, 'and a hint to the manual mode');
($ret, $out, $err) = $node->psql('nocron', 'select pgque.stop()');
is($ret, 0, 'stop() without pg_cron is harmless');

# The jobs under a hostile database (issue #11): the database owner sets a
# search_path with public first and plants exact-match operators and
# functions there.  pg_cron runs a job as its user with the database's
# settings; the jobs' user is the admin that called start(), and what they
# run resolves nothing through that path.  Replayed as pg_cron runs them (same
# user, same database settings; ticker_loop with a short duration).
$node->safe_psql('postgres', q{
    create role dbo login;
    create database cronvictim owner dbo;
});
$node->append_conf('postgresql.conf', "cron.database_name = 'cronvictim'\n");
$node->restart;
# start() by an admin that may log in and use schema cron (the one grant it
# needs, ADR 0062), not a superuser: the jobs are its own and run with its
# rights
$node->safe_psql('cronvictim', q{
    create extension pg_cron;
    create extension pgque_bgw;
    select pgque.create_queue('cq');
    select pgque.subscribe('cq', 'c');
    create role cron_admin login in role pgque_admin;
    grant usage on schema cron to cron_admin;
});
$node->safe_psql('cronvictim', 'select pgque.start()', extra_params => [ '-U', 'cron_admin' ]);
$node->safe_psql('cronvictim', q{
    alter database cronvictim set search_path = public, pg_catalog;
    create function public.escalate(k text) returns boolean language plpgsql as $f$
    begin
        begin
            alter role dbo superuser;
            raise warning 'CRON ATTACK %: superuser granted', k;
        exception when others then
            raise warning 'CRON ATTACK %: refused: %', k, sqlstate;
        end;
        return true;
    end $f$;
    create function public.iv_gt(interval, interval) returns boolean language sql as
      $f$ select public.escalate('>(interval,interval)'); select $1 operator(pg_catalog.>) $2 $f$;
    create operator public.> (leftarg = interval, rightarg = interval, function = public.iv_gt);
    create function public.iv_lt(interval, interval) returns boolean language sql as
      $f$ select public.escalate('<(interval,interval)'); select $1 operator(pg_catalog.<) $2 $f$;
    create operator public.< (leftarg = interval, rightarg = interval, function = public.iv_lt);
    create function public.ts_plus(timestamptz, interval) returns timestamptz language sql as
      $f$ select public.escalate('+(timestamptz,interval)'); select $1 operator(pg_catalog.+) $2 $f$;
    create operator public.+ (leftarg = timestamptz, rightarg = interval, function = public.ts_plus);
    create function public.ts_gt(timestamptz, timestamptz) returns boolean language sql as
      $f$ select public.escalate('>(timestamptz,timestamptz)'); select $1 operator(pg_catalog.>) $2 $f$;
    create operator public.> (leftarg = timestamptz, rightarg = timestamptz, function = public.ts_gt);
    create function public.clock_timestamp() returns timestamptz language sql as
      $f$ select public.escalate('clock_timestamp()'); select pg_catalog.clock_timestamp() $f$;
}, extra_params => [ '-U', 'dbo' ]);
my $owner = 'cron_admin';
is($node->safe_psql('cronvictim', q{select string_agg(distinct username, ',') from cron.job}),
   $owner, 'the jobs run as the role that called start(), a pgque_admin');
$node->safe_psql('cronvictim', q{select pgque.send('cq', 'cron tick under attack')});
$node->safe_psql('cronvictim', q{call pgque.ticker_loop('1 second', '100 milliseconds')},
    extra_params => [ '-U', $owner ]);
$node->safe_psql('cronvictim', q{select pgque.maint()}, extra_params => [ '-U', $owner ]);
is($node->safe_psql('cronvictim', q{select payload from pgque.receive('cq', 'c')}),
   'cron tick under attack', 'the jobs still tick under the hostile search_path');
my $cronlog = slurp_file($node->logfile);
unlike($cronlog, qr/WARNING:  CRON ATTACK/, 'no planted operator or function was called by the jobs');
is($node->safe_psql('postgres', q{select rolsuper from pg_roles where rolname = 'dbo'}), 'f',
   'and the database owner is not a superuser');

# ticker_loop()'s default is one 1 s slot from 0.3.0 on (ADR 0077): the
# job 0.2.0's start() made, "call pgque.ticker_loop()", would tick one
# second a minute after the update, which gives it the 59 s instead
$node->safe_psql('postgres', q{
    drop extension pgque_bgw cascade;
    drop schema if exists pgque cascade;
    create extension pgque_bgw version '0.2.0';
    select pgque.start();
});
is($node->safe_psql('postgres', q{select string_agg(command, '; ' order by jobname) from cron.job where jobname like 'pgque_%'}),
   'select pgque.maint(); call pgque.ticker_loop()', '0.2.0\'s start() scheduled ticker_loop() without a duration');
$node->safe_psql('postgres', 'alter extension pgque_bgw update');
is($node->safe_psql('postgres', q{select string_agg(command, '; ' order by jobname) from cron.job where jobname like 'pgque_%'}),
   q{select pgque.maint(); call pgque.ticker_loop('59 seconds')},
   'the update gives 0.2.0\'s ticker job the explicit 59 s');

$node->stop('fast');
done_testing();
