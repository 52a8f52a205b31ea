# The workers' leftovers of ADR 0071.
#
# 1. The worker log cannot be forged by a name: a consumer named with a
# newline (0.2.0 stored any name; new names refuse control characters) is
# quoted escaped in the watchdog's consumer_lagging WARNING, so no line of
# the server log starts with the text after the newline; nor does one
# of the CONTEXT lines PostgreSQL adds to a maintenance hook's WARNING.
#
# 2. A no-op ALTER EXTENSION pgque_bgw UPDATE (to the installed version) by the
# extension's owner does not stall the workers.  The owner's extension DDL
# quiesces them until its transaction ends (ADR 0046); a migration tool runs
# the update in its own transaction, and a no-op update there held every
# tick until that transaction committed.  Now a no-op takes no lock: the
# ticker ticks within a bound while the transaction is still open.  An
# update that does run a script (0.2.0 -> current) still quiesces them
# until it commits.
use strict;
use warnings;
use PgqueNode;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $node = PgqueNode->new_preloaded('noopupd', conf => q{
pgque_bgw.launcher_naptime = '1s'
pgque_bgw.maint_interval = '1s'
pgque_bgw.watchdog_interval = '1s'
pgque_bgw.lag_alert_after = '1s'
});
my $version = $node->safe_psql('postgres',
    q{select default_version from pg_available_extensions where name = 'pgque_bgw'});
# the owner: a role with CREATE on its database (a trusted install, ADR 0042)
$node->safe_psql('postgres', q{create role dbo login; create database app owner dbo});
$node->install('app', 'dbo');
ok($node->wait_for_workers('app'), 'the workers run');
$node->safe_psql('app', q{select pgque.create_queue('q'); select pgque.subscribe('q', 'c')},
                 extra_params => [ '-U', 'dbo' ]);

sub ticks
{
    return $node->safe_psql('app', q{select count(*) from pgque.tick t join pgque.queue q
                                      on q.queue_id = t.tick_queue where q.queue_name = 'q'});
}

# sends an event and waits up to $secs for the ticker to tick it
sub ticked_within
{
    my ($secs) = @_;
    my $before = ticks();
    $node->safe_psql('app', q{select pgque.send('q', 'x')});
    return PgqueNode::poll_until(sub { ticks() > $before }, $secs);
}

ok(ticked_within(30), 'the ticker ticks a sent event');

# 1. a consumer stored by 0.2.0 with a newline in its name, lagging
my $log_start = -s $node->logfile;
$node->safe_psql('app', q{
    insert into pgque.consumer (co_name) values (E'old\nLOG:  forged by a name');
    select pgque.subscribe('q', E'old\nLOG:  forged by a name');
    select pgque.send('q', 'for the lagging consumer');
});
ok(PgqueNode::poll_until(sub {
       slurp_file($node->logfile, $log_start) =~ /alert consumer_lagging opened:.*old\\nLOG:  forged by a name/
   }, 60), 'the watchdog\'s WARNING quotes the name with its newline escaped');
# PostgreSQL indents the continuation lines of a message with a tab in the
# stderr format; a reader (or a tool trimming whitespace) still sees a LOG
# line there, so the check allows no leading blanks either
unlike(slurp_file($node->logfile, $log_start), qr/^\s*LOG:  forged by a name/m,
       '... and no line of the server log starts with the forged text');
$node->safe_psql('app', q{select pgque.unsubscribe('q', E'old\nLOG:  forged by a name')});

# 1b. the same name in a CONTEXT line: a queue's extra maintenance hook (set
# by a superuser, owned by pgque_owner) raises a WARNING, and PostgreSQL adds
# the statement that called it, the queue's name quoted inside, as its
# CONTEXT.  The maintenance worker escapes that field too.
$log_start = -s $node->logfile;
$node->safe_psql('app', q{
    create function pgque.hook_says(q text) returns int language plpgsql
        set search_path = pg_catalog, pg_temp
        as $$ begin raise warning 'hook ran for a queue'; return 0; end $$;
    alter function pgque.hook_says(text) owner to pgque_owner;
    select pgque.create_queue('hooked');
    update pgque.queue set queue_name = E'hooked\nLOG:  forged by a context',
                           queue_extra_maint = array['pgque.hook_says']
     where queue_name = 'hooked';
});
ok(PgqueNode::poll_until(sub {
       slurp_file($node->logfile, $log_start) =~ /hook ran for a queue.*\n.*CONTEXT:.*hooked\\nLOG:  forged by a context/
   }, 60), 'the hook\'s WARNING has its CONTEXT, the name\'s newline escaped');
unlike(slurp_file($node->logfile, $log_start), qr/^\s*LOG:  forged by a context/m,
       '... and no line of the server log starts with the forged text');
$node->safe_psql('app', q{select pgque.drop_queue(E'hooked\nLOG:  forged by a context', true)});

for my $form ('alter extension pgque_bgw update', "alter extension pgque_bgw update to '$version'")
{
    my $migration = $node->background_psql('app', on_error_stop => 1, extra_params => [ '-U', 'dbo' ]);
    $migration->query_safe('set client_min_messages = warning');
    $migration->query_safe('begin');
    $migration->query_safe($form);
    my $t0 = time;
    ok(ticked_within(20), "the workers tick while the transaction of a no-op \"$form\" is open");
    diag(sprintf('figure: tick %.1f s after the send, beside the open no-op update', time - $t0));
    # the DDL's mode: every unit of the workers takes ACCESS SHARE on it
    is($node->safe_psql('app', q{select count(*) from pg_locks where locktype = 'object' and objsubid = 28785
                                                              and mode = 'AccessExclusiveLock'}),
       '0', '... which holds no quiesce lock');
    $migration->query_safe('commit');
    $migration->quit;
}

# a real update still quiesces: from 0.2.0, inside an open transaction
$node->safe_psql('postgres', q{create database old});
$node->safe_psql('old', q{create extension pgque_bgw version '0.2.0'});
my $upd = $node->background_psql('old', on_error_stop => 1);
$upd->query_safe('begin');
$upd->query_safe('alter extension pgque_bgw update');
is($node->safe_psql('old', q{select count(*) from pg_locks where locktype = 'object' and objsubid = 28785
                                                            and mode = 'AccessExclusiveLock' and granted}),
   '1', 'an update that runs a script still holds the quiesce lock until it commits');
$upd->query_safe('commit');
$upd->quit;
is($node->safe_psql('old', q{select extversion from pg_extension where extname = 'pgque_bgw'}), $version,
   '... and updates');

ok(ticked_within(30), 'the workers of the first database still tick at the end');
$node->stop('fast');
done_testing();
