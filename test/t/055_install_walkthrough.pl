# docs/install.md followed literally (issue #28 item 4): every SQL block
# the page marks "<!-- walkthrough: ROLE@DATABASE -->" runs here as that
# role in that database, in the order the walkthrough tells (the grants of
# the page's Roles section where it says to run them), so the page and this
# test cannot drift apart.  "postgres" is the bootstrap superuser (the DBA).
# The page's walk: a superuser makes a non-superuser database owner, the
# owner installs (trusted) and creates a queue, the superuser grants the
# pgque roles (the owner cannot: ADR 0062), a consumer and a producer use
# them; then the pg_cron fallback for that owner: the DBA's one grant on
# schema cron, the owner's pgque.start(), jobs that are the owner's and
# whose commands work as the owner.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $t0 = time();
my $doc = slurp_file("$ENV{PGQUE_SRC}/../docs/install.md");

# the marked blocks, in order: [role, database, flags, sql]
my @blocks;
while ($doc =~ /<!-- walkthrough: (\w+)@(\w+)((?: \w+)*) -->\n```sql\n(.*?)```/sg)
{
	push @blocks, [ $1, $2, $3, $4 ];
}
# the walk as the page tells it: adding or dropping a step must show here
is(join(' ', map { "$_->[0]\@$_->[1]" } @blocks),
   'postgres@app postgres@postgres app_owner@app app_consumer@app app_producer@app '
   . 'app_consumer@app postgres@app app_owner@app',
   'docs/install.md has the walkthrough blocks, each naming its role and database');

my $node = PostgreSQL::Test::Cluster->new('install_walk');
$node->init;
# the configuration the page asks for (the pg_cron section's, from the start:
# pg_cron must be preloaded and names its database before it exists)
$node->append_conf('postgresql.conf', q{
shared_preload_libraries = 'pgque_bgw,pg_cron'
cron.database_name = 'app'
pgque_bgw.launcher_naptime = '1s'
});
$node->start;

sub run_block
{
	my ($b) = @_;
	my ($role, $db, $flags, $sql) = @$b;
	my @as = $role eq 'postgres' ? () : ('-U', $role);
	if ($flags =~ /\breceive\b/)
	{
		# the workers tick within milliseconds; poll with a deadline for
		# the first statement, then run the block as written
		my ($first) = $sql =~ /^(.*?;)/s;
		my $got = '';
		my $until = time() + 60;
		while (time() < $until)
		{
			$got = $node->safe_psql($db, $first, extra_params => \@as);
			last if $got ne '';
			select(undef, undef, undef, 0.1);
		}
		return $got . "\n" . $node->safe_psql($db, substr($sql, length($first)), extra_params => \@as);
	}
	my ($ret, $out, $err) = $node->psql($db, $sql, extra_params => \@as, on_error_stop => 1);
	is($ret, 0, "the block as $role in $db runs: " . (split /\n/, $sql)[0]) or diag($err);
	return $out;
}

# the install part first, workers on; the Roles section's grants block comes
# first in the page, the walkthrough runs it after the install
my ($grants, $roles, $install, $subscribe, $send, $receive, $cron_dba, $cron_owner) = @blocks;
run_block($roles);
run_block($install);
is($node->safe_psql('app', q{select rolsuper from pg_roles where rolname = 'app_owner'}), 'f',
   'the owner that installed is not a superuser');

# the owner cannot grant a pgque role (ADR 0062): the page says a superuser must
my ($ret, $out, $err) = $node->psql('app', 'grant pgque_writer to app_producer',
    extra_params => [ '-U', 'app_owner' ]);
isnt($ret, 0, 'the installing owner cannot grant pgque_writer');
# PostgreSQL 15's text, and 16's and later's: the page quotes both
like($err, qr/must have admin option on role "pgque_writer"|permission denied to grant role "pgque_writer"/,
     'with a message the page quotes');
run_block($grants);
is($node->safe_psql('postgres', q{
       select string_agg(r.rolname || '>' || m.rolname, ',' order by m.rolname)
         from pg_auth_members a join pg_roles r on r.oid = a.roleid join pg_roles m on m.oid = a.member
        where m.rolname in ('app_producer', 'app_consumer', 'ops')}),
   'pgque_reader>app_consumer,pgque_writer>app_producer,pgque_admin>ops',
   'the superuser\'s grants gave each role its pgque role');

run_block($subscribe);
run_block($send);
my $got = run_block($receive);
like($got, qr/^\d+\|order-created\|\{"order": 1\}\n/, 'the consumer receives the event the producer sent');
is($node->safe_psql('app', q{select count(*) from pgque.receive('orders', 'billing', 100)},
                    extra_params => [ '-U', 'app_consumer' ]), '0', 'and its ack finished the batch');
# the owner uses the API without any membership (granted by name)
is($node->safe_psql('app', q{select count(*) from pgque.get_consumer_info('orders', 'billing')},
                    extra_params => [ '-U', 'app_owner' ]), '1', 'the owner reads consumer info without a grant');

# --- the pg_cron fallback for the non-superuser owner ------------------------
$node->safe_psql('postgres', q{alter system set pgque_bgw.enabled = off; select pg_reload_conf()});
ok($node->poll_query_until('app', q{select current_setting('pgque_bgw.enabled') = 'off'}),
   'workers switched off (pgque_bgw.enabled = off, reloaded)');
# before the DBA's grant: a clear error with the grant as its hint
($ret, $out, $err) = $node->psql('app', 'create extension if not exists pg_cron');
is($ret, 0, 'pg_cron is installed by the superuser') or diag($err);
($ret, $out, $err) = $node->psql('app', 'select pgque.start()', extra_params => [ '-U', 'app_owner' ]);
isnt($ret, 0, 'start() without the use of schema cron fails');
like($err, qr/ERROR:  permission denied for schema cron: pgque\.start\(\) schedules its jobs with pg_cron as role "app_owner"/,
     'saying what it needs');
like($err, qr/HINT:  As a superuser, in database app: grant usage on schema cron to app_owner;/,
     'with the grant the page shows as its hint');
$node->safe_psql('app', 'drop extension pg_cron');

run_block($cron_dba);
my $jobs = run_block($cron_owner) =~ s/^\n//r;	# start()'s void row
is($jobs, "pgque_maint_app|* * * * *|select pgque.maint()|app_owner\n"
        . "pgque_ticker_app|* * * * *|call pgque.ticker_loop('59 seconds')|app_owner",
   'start() by the owner scheduled both jobs, as the owner');
is($node->safe_psql('app', q{select string_agg(distinct database, ',') from cron.job}), 'app',
   'in the queues\' database');
# what the jobs run works as their role (pg_cron connects as app_owner and
# runs these; ticker_loop for 1 s, its default, not the job's 59 s)
$node->safe_psql('app', q{select pgque.send('orders', 'by cron')}, extra_params => [ '-U', 'app_producer' ]);
$node->safe_psql('app', q{call pgque.ticker_loop('1 second', '100 milliseconds')}, extra_params => [ '-U', 'app_owner' ]);
$node->safe_psql('app', q{select pgque.maint()}, extra_params => [ '-U', 'app_owner' ]);
is($node->safe_psql('app', q{select payload from pgque.receive('orders', 'billing', 100)},
                    extra_params => [ '-U', 'app_consumer' ]), 'by cron',
   'the ticker job\'s command, run as the owner, delivers');
# the grant gave the owner nothing beyond its own jobs
($ret, $out, $err) = $node->psql('app',
    q{select cron.schedule_in_database('x', '* * * * *', 'select 1', 'postgres')},
    extra_params => [ '-U', 'app_owner' ]);
like($err, qr/permission denied for function schedule_in_database/, 'schedule_in_database stays revoked');
($ret, $out, $err) = $node->psql('app',
    q{update cron.job set username = 'postgres'}, extra_params => [ '-U', 'app_owner' ]);
like($err, qr/permission denied for table job/, 'and the owner cannot make a job another role\'s');
$node->safe_psql('app', 'select pgque.stop()', extra_params => [ '-U', 'app_owner' ]);
is($node->safe_psql('app', 'select count(*) from cron.job'), '0', 'stop() by the owner removes its jobs');

$node->stop('fast');
note(sprintf('055 took %.1f s', time() - $t0));
done_testing();
