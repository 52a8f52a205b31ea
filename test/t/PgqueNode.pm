# PgqueNode: the set-up every TAP file of pgque_bgw shares (test/README.md).
# Owns: making a throwaway server (from an initdb template when test/run.sh
# provides one), the preload configuration, and the helpers the files used
# to copy: waiting for a database's workers, polling with a deadline,
# installing the extension, making login roles, a SIGKILL that returns once
# the process is really gone (kill9_and_wait), the holder-fault fixture.
#
# A PgqueNode is a PostgreSQL::Test::Cluster: every method of the framework
# works on it.
#
#   use PgqueNode;
#   my $node = PgqueNode->new_preloaded('name', conf => q{
#   pgque_bgw.launcher_naptime = '1s'
#   });                                    # initialised, preloaded, started
#   $node->install('postgres');            # create extension pgque_bgw
#   ok($node->wait_for_workers('postgres'), 'the three workers run');
package PgqueNode;

use strict;
use warnings;
use parent 'PostgreSQL::Test::Cluster';
use PostgreSQL::Test::Utils ();
use Fcntl qw(:flock);
use Time::HiRes ();
use Carp;
use Cwd ();
use IO::Socket::INET;
use IO::Socket::UNIX;
use IPC::Run ();
use Test::More ();

# The libraries every preloaded server loads, and what a file adds to them
# (pg_cron for 006): one place for the line 48 files used to copy.
our $PRELOAD = 'pgque_bgw';

# Seconds a poll waits before it gives up: the framework's own
# (PG_TEST_TIMEOUT_DEFAULT, 180 s), so a slow machine only makes a test
# slower, never failing.
our $TIMEOUT = $PostgreSQL::Test::Utils::timeout_default // 180;

# new_preloaded(NAME, conf => TEXT, preload => LIBS, init => {PARAMS}, start => 0|1)
# A new server with pgque_bgw (and LIBS) in shared_preload_libraries and the
# lines of TEXT appended to postgresql.conf; started unless start => 0.
sub new_preloaded
{
	my ($class, $name, %opt) = @_;
	my $node = $class->new($name);
	$node->init(%{ $opt{init} // {} });
	$node->append_conf('postgresql.conf',
		"shared_preload_libraries = '" . ($opt{preload} // $PRELOAD) . "'\n"
		  . ($opt{conf} // ''));
	$node->start unless defined $opt{start} && !$opt{start};
	return $node;
}

# new_fast_ticker(NAME, QUEUE...): new_preloaded with a ticker polling
# every 10 ms and probing sequences every second, the watchdog and the
# maintenance worker every second, no autovacuum; pgque_bgw installed and
# each QUEUE made with a consumer 'c' (TAP 117, 123: a queue broken beside
# a healthy one, the ticker's reaction within seconds)
sub new_fast_ticker
{
	my ($class, $name, @queues) = @_;
	my $node = $class->new_preloaded($name, conf => join("\n",
		"autovacuum = off", "pgque_bgw.tick_interval = '10ms'", "pgque_bgw.ticker_probe_interval = '1s'",
		"pgque_bgw.watchdog_interval = '1s'", "pgque_bgw.maint_interval = '1s'", ''));
	$node->install('postgres');
	$node->safe_psql('postgres', join("\n", map { "select pgque.create_queue('$_'), pgque.subscribe('$_', 'c');" } @queues));
	return $node;
}

# init: the framework's init, with the data directory copied from an initdb
# template instead of a new initdb when PGQUE_INITDB_TEMPLATE names one
# (test/run.sh sets it; ADR 0064).  The first file that needs the template
# makes it, under a lock; the others wait for it and copy it.  initdb's own
# options of the framework (-A trust -N) are the template's; a call with
# extra initdb arguments runs initdb itself.
sub init
{
	my ($self, %params) = @_;
	my $template = $ENV{PGQUE_INITDB_TEMPLATE};
	return $self->SUPER::init(%params)
	  if !$template || @{ $params{extra} // [] };
	_make_template($template);
	# PostgreSQL 17 and later copy $INITDB_TEMPLATE themselves; up to 16
	# the framework's one call of initdb is replaced by the copy
	local $ENV{INITDB_TEMPLATE} = $template;
	no warnings 'redefine';
	my $system_or_bail = \&PostgreSQL::Test::Utils::system_or_bail;
	local *PostgreSQL::Test::Utils::system_or_bail = sub {
		return $system_or_bail->(@_) unless $_[0] eq 'initdb';
		my $pgdata = $_[2];
		$system_or_bail->('cp', '-RPp', $template, $pgdata);
		return;
	};
	return $self->SUPER::init(%params);
}

# _make_template(DIR): initdb -A trust -N into DIR once, whoever comes first
sub _make_template
{
	my ($dir) = @_;
	return if -f "$dir/PG_VERSION";
	open my $lock, '>>', "$dir.lock" or croak "cannot open $dir.lock: $!";
	flock($lock, LOCK_EX) or croak "cannot lock $dir.lock: $!";
	if (!-f "$dir/PG_VERSION")
	{
		my $tmp = "$dir.tmp$$";
		PostgreSQL::Test::Utils::system_or_bail('initdb', '-D', $tmp, '-A',
			'trust', '-N');
		rename($tmp, $dir) or croak "cannot rename $tmp to $dir: $!";
	}
	close $lock;
	return;
}

# pkglibdir(): the server's library directory (pg_config on PATH), for a
# file that preloads a contrib module only where the server has it
sub pkglibdir
{
	my $dir = `pg_config --pkglibdir`;
	chomp $dir;
	return $dir;
}

# install(DB, [ROLE]): create extension pgque_bgw in DB (as ROLE if given)
sub install
{
	my ($self, $db, $role) = @_;
	my $sql = 'create extension pgque_bgw';
	$sql = "set role $role; $sql" if defined $role;
	$self->safe_psql($db, $sql);
	return;
}

# create_login_roles(NAME...): roles that can log in and have no other right
sub create_login_roles
{
	my ($self, @names) = @_;
	$self->safe_psql('postgres', join('', map { "create role $_ login;\n" } @names));
	return;
}

# workers_in(DB): the kinds of pgque_bgw workers connected to DB, sorted and
# comma-separated ('' when none)
sub workers_in
{
	my ($self, $db) = @_;
	return $self->safe_psql('postgres', qq{
        select coalesce(string_agg(backend_type, ',' order by backend_type), '')
          from pg_stat_activity
         where backend_type like 'pgque_bgw %' and datname = '$db'});
}

# wait_for_workers(DB, [N]): true once N (default 3: ticker, maintenance,
# watchdog) pgque_bgw workers are connected to DB; false after the timeout
sub wait_for_workers
{
	my ($self, $db, $n) = @_;
	$n //= 3;
	return $self->poll_query_until('postgres', qq{
        select count(*) = $n from pg_stat_activity
         where backend_type like 'pgque_bgw %' and datname = '$db'});
}

# wait_for_launcher(): true once the launcher runs
sub wait_for_launcher
{
	my ($self) = @_;
	return $self->poll_query_until('postgres', q{
        select count(*) = 1 from pg_stat_activity
         where backend_type = 'pgque_bgw launcher' and datname is null});
}

# poll_value(DB, QUERY, [SECONDS]): the one value of QUERY once it is
# neither empty nor 0, polled every 0.1 s; the last value at the deadline
sub poll_value
{
	my ($self, $db, $query, $secs) = @_;
	my $v = '';
	PgqueNode::poll_until(sub {
		$v = $self->safe_psql($db, $query);
		return $v ne '' && $v ne '0';
	}, $secs);
	return $v;
}

# wait_back(NODE, [DB], [SECONDS]): true once the server accepts connections
# again after a crash restart.  Not poll_query_until('select 1'): it feeds
# psql through a pipe, and a psql that a server still in recovery turns
# away exits before reading it, so IPC::Run dies of the broken pipe
# ("ack Broken pipe: write( 14, 'select 1' )") instead of trying again.
# A function (PgqueNode::wait_back($node)): it serves a node made by
# PostgreSQL::Test::Cluster->new as well.
#
# Kill with kill9_and_wait first: until the postmaster has reaped the
# killed process the crash restart has not begun and "select 1" still
# succeeds on the old server, which then turns the caller's next statement
# away in recovery (TAP 062 under .ci/run's load).  wait_back took that
# PID once and polled kill 0 (no check of a reused pid, no word past its
# deadline); it refuses one now, so that a call written that way fails
# rather than racing.
sub wait_back
{
	my ($self, $db, $secs, $pid) = @_;
	croak('wait_back: no PID any more: kill with $node->kill9_and_wait($pid), which waits for it')
	  if defined $pid;
	return PgqueNode::poll_until(sub {
		my $ok = eval {
			my ($ret, $out) = $self->psql($db // 'postgres', 'select 1');
			$ret == 0 && $out eq '1';
		};
		return $ok;
	}, $secs);
}

# _proc(PID): (state, start time) of process PID from /proc/PID/stat; ()
# when there is no such process.  The start time tells a reused PID from
# the process it was.
sub _proc
{
	my ($pid) = @_;
	open my $fh, '<', "/proc/$pid/stat" or return ();
	my $stat = <$fh>;
	close $fh;
	return () unless defined $stat;
	# after the command's ")" (the command may hold spaces and parentheses):
	# field 3 the state, field 22 the start time
	my @f = split / /, substr($stat, rindex($stat, ')') + 2);
	return ($f[0], $f[19]);
}

# _alive(PID, [START]): PID exists, a zombie included (kill 0 succeeds on a
# process its parent has not reaped yet), and is still the process that
# started at START
sub _alive
{
	my ($pid, $start) = @_;
	return kill(0, $pid) ? 1 : 0 unless -d '/proc/self';
	my ($state, $t) = _proc($pid);
	return 0 unless defined $state;
	return !defined $start || $t eq $start;
}

# running(PID, [START]): PID is alive and not a zombie: it has not exited.
# A function (PgqueNode::running($pid)).
sub running
{
	my ($pid, $start) = @_;
	return _alive($pid) unless -d '/proc/self';
	my ($state, $t) = _proc($pid);
	return defined $state && $state ne 'Z' && $state ne 'X' && (!defined $start || $t eq $start);
}

# $node->_server_pids(): the processes running in the node's data
# directory (every process of its server chdirs there; a zombie has no
# working directory any more), pid => start time
sub _server_pids
{
	my ($self) = @_;
	my $dir = Cwd::abs_path($self->data_dir) // $self->data_dir;
	my %pids;
	opendir(my $dh, '/proc') or return %pids;
	for my $pid (grep { /^\d+$/ } readdir $dh)
	{
		my $cwd = readlink("/proc/$pid/cwd");
		next unless defined $cwd && $cwd eq $dir;
		my (undef, $start) = _proc($pid);
		$pids{$pid} = $start if defined $start;
	}
	closedir $dh;
	return %pids;
}

# $node->_port_refuses(): nothing accepts connections at the node's
# socket (or its TCP port) any more
sub _port_refuses
{
	my ($self) = @_;
	my $host = $self->host;
	my $sock = $host =~ m{^/}
	  ? IO::Socket::UNIX->new(Peer => "$host/.s.PGSQL." . $self->port)
	  : IO::Socket::INET->new(PeerAddr => $host, PeerPort => $self->port, Proto => 'tcp', Timeout => 5);
	return 1 unless $sock;
	close $sock;
	return 0;
}

# $node->kill9_and_wait([PID | 'all'], [SECONDS]): SIGKILL, and return once
# the process is really gone.  A `kill 'KILL'` returns at once, and what the
# file did next raced the process's end: a statement served by the old
# server just before the crash restart began, a start refused because the
# old postmaster.pid still named a live process (TAP 106, 051, 151).
#
# PID, a backend or worker of this server: back once the postmaster has
# reaped it (kill 0 fails): the crash restart has begun, a connection is
# turned away until it ends (wait_back).  Dies when there is no process PID
# to kill: a kill that missed is not a crash.
#
# No PID: the postmaster, as the framework's kill9 (which only sends the
# signal; the node is marked stopped).  Back once every process of the old
# server has exited (each has left the shared memory, which a new
# postmaster refuses to take while one is attached), the postmaster has
# been reaped (its postmaster.pid names no process: stale) and the port
# refuses connections: $node->start can follow.  The postmaster's
# children, reparented to init, are reaped by init; here a zombie waited a
# second or more for it, and a start in that time failed on the pid file.
#
# 'all': the postmaster and, at once, every other process of its server
# (what a power loss leaves: no backend goes on alone; one in a loop of
# commits never asks whether the postmaster lives, and without this would
# outlive it), then as with no PID (TAP 067).
#
# Past SECONDS (default the framework's timeout) the test dies with what is
# left.  Returns { pids => [the processes waited for], exited => seconds
# until none of them ran, reaped => seconds until all was done }.
sub kill9_and_wait
{
	my ($self, $pid, $secs) = @_;
	if (defined $pid && $pid ne 'all')
	{
		my $gone = $self->_kill9_child($pid, $secs);
		croak("kill9_and_wait: no process $pid to kill (it had exited)") unless $gone;
		return $gone;
	}
	my $all = defined $pid;
	my $t0 = Time::HiRes::time();
	my $left = _deadline($t0, $secs);
	my $pm = $self->{_pid};
	croak('kill9_and_wait: the node "' . $self->name . '" is not running') unless defined $pm;
	my %old = $self->_server_pids;
	my (undef, $pm_start) = _proc($pm);
	$self->kill9;
	kill('KILL', grep { $_ != $pm } keys %old) if $all;
	my $exited;
	while (1)
	{
		# what the old server still runs, a process forked as it died included
		my %now = $self->_server_pids;
		my @running = sort { $a <=> $b } grep { running($_, $old{$_}) } keys %old;
		my @new = grep { !exists $old{$_} } keys %now;
		kill('KILL', @new) if $all && @new;
		push @running, @new;
		if (!@running)
		{
			$exited //= Time::HiRes::time() - $t0;
			last if !_alive($pm, $pm_start) && $self->_port_refuses;
			my ($state) = _proc($pm);
			$left->(defined $state
				? "the postmaster $pm is not reaped yet (state $state: init reaps it)"
				: 'its port still accepts connections');
			next;
		}
		$left->('processes of the old server still run: ' . join(' ', @running));
	}
	return { pids => [ sort { $a <=> $b } keys %old ], exited => $exited,
		reaped => Time::HiRes::time() - $t0 };
}

# $node->kill9_backend_of(APP, [SECONDS]): kill9_and_wait of the backend
# whose application_name is like APP (the lowest pid of several): its pid,
# or '' when APP has no backend.  For a shell loop's psql (TAP 032, 064, 068,
# 069): its call may fail and its backend end between the look and the
# signal; then APP is looked for again, so that a kill that found no
# process is never taken for a crash.
sub kill9_backend_of
{
	my ($self, $app, $secs) = @_;
	my $left = _deadline(Time::HiRes::time(), $secs);
	while (1)
	{
		my $pid = $self->safe_psql('postgres', qq{
		    select pid from pg_stat_activity where application_name like '$app' order by pid limit 1});
		return '' unless $pid;
		return $pid if $self->_kill9_child($pid, $secs);
		$left->("the backends of $app end before a SIGKILL reaches one");
	}
}

# $node->_kill9_child(PID, [SECONDS]): kill9_and_wait of a backend or
# worker; undef when there was no process PID to signal (a zombie has
# exited already: the signal would reach nothing)
sub _kill9_child
{
	my ($self, $pid, $secs) = @_;
	my $t0 = Time::HiRes::time();
	my $left = _deadline($t0, $secs);
	my (undef, $start) = _proc($pid);
	return undef unless running($pid, $start);
	kill('KILL', $pid) or return undef;
	while (_alive($pid, $start))
	{
		my ($state) = _proc($pid);
		$left->("process $pid is still there (state " . ($state // '?') . ')');
	}
	my $t = Time::HiRes::time() - $t0;
	return { pids => [$pid], exited => $t, reaped => $t };
}

# _deadline(T0, [SECONDS]): a sub that dies saying WHAT is left once
# SECONDS (default the framework's timeout) have passed since T0, else
# sleeps 50 ms
sub _deadline
{
	my ($t0, $secs) = @_;
	my $deadline = $t0 + ($secs // $TIMEOUT);
	return sub {
		my ($what) = @_;
		croak(sprintf('kill9_and_wait: %s, %.0f s after the SIGKILL', $what, Time::HiRes::time() - $t0))
		  if Time::HiRes::time() >= $deadline;
		Time::HiRes::sleep(0.05);
	};
}

# PgqueNode->new_holder_faults(NAME): the server of the holder faults (TAP
# 051, 151): fsync on, a crash restart after a backend's SIGKILL, the
# launcher every second, no ticker_stalled alert; pgque_bgw installed in
# postgres.  A holder is a consumer's session that takes a part and sleeps
# before its ack (start_holder); the file ends it by pg_terminate_backend,
# SIGKILL or a SIGKILL of the postmaster, then checks that the part it held
# was handed out again (held, check_handed_again).
sub new_holder_faults
{
	my ($class, $name) = @_;
	my $node = $class->new_preloaded($name, conf => q{
fsync = on
restart_after_crash = on
pgque_bgw.launcher_naptime = '1s'
pgque_bgw.ticker_stalled_after = '3600s'
});
	$node->install('postgres');
	return $node;
}

# $node->start_holder(QUERY): a holder's session: begin, QUERY (one row:
# 'held:' and the payloads of the part it took, comma-separated), then
# pg_sleep(300) before any ack; { h => the psql harness, out, err }
sub start_holder
{
	my ($self, $query) = @_;
	my %w = (out => '', err => '');
	$w{h} = IPC::Run::start(['psql', '-X', '-A', '-t', '-q', '-d', $self->connstr('postgres'),
		'-c', 'begin', '-c', $query, '-c', 'select pg_sleep(300)'],
		'>', \$w{out}, '2>', \$w{err});
	return \%w;
}

# $node->holder_pid(): the holder's backend once it sleeps between its
# part and its ack ('' if none within 60 s)
sub holder_pid
{
	my ($self) = @_;
	my $pid;
	PgqueNode::poll_until(sub {
		$pid = $self->safe_psql('postgres', q{
		    select pid from pg_stat_activity
		     where backend_type = 'client backend' and query like '%pg_sleep(300)%'
		       and state = 'active' and pid <> pg_backend_pid()});
		$pid ne '';
	}, 60);
	return $pid;
}

# held(HOLDER): the payloads a holder was handed (read once it has ended).
# A function.
sub held
{
	my ($w) = @_;
	my ($line) = grep { /^held:/ } split /\n/, $w->{out};
	return () unless defined $line;
	$line =~ s/^held://;
	return grep { $_ ne '' } split /,/, $line;
}

# $node->check_handed_again(NAME, PAYLOAD...): the holder had a part, and
# each of its events was handed out again and acked once (in the file's

# $node->kill9_holder_server: the postmaster SIGKILLed while the holder
# (start_holder) holds its part, back once the old server is gone and its
# postmaster reaped (a start can follow); asserts the holder was there and
# left with its server (051, 151).  Returns kill9_and_wait's answer.
sub kill9_holder_server
{
	my ($self) = @_;
	my $pid = $self->holder_pid();
	Test::More::ok($pid, 'a holder before the postmaster dies');
	my $gone = $self->kill9_and_wait;
	Test::More::diag(sprintf('figure: the postmaster SIGKILLed: the %d processes of its server exited within %.1f s, all reaped within %.1f s',
		scalar(@{ $gone->{pids} }), $gone->{exited}, $gone->{reaped}));
	Test::More::ok(!running($pid) && $gone->{exited} < 30,
		sprintf('the holder leaves with the postmaster (every process of its server within %.1f s)', $gone->{exited}));
	return $gone;
}
# table acked(payload))
sub check_handed_again
{
	my ($self, $name, @held) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	Test::More::ok(scalar(@held) > 0, "$name: the holder had a part (" . scalar(@held) . " events)");
	my $list = join(',', map { "'$_'" } @held) || "''";
	Test::More::is($self->safe_psql('postgres', "select count(*) from acked where payload in ($list)"),
		scalar(@held), "$name: its events were handed out again and acked once");
	return;
}

# $node->create_got(): the SQL function got(QUEUE, PAYLOAD) in database
# postgres: receive a batch of consumer 'c' of QUEUE and ack it; was
# PAYLOAD in it?  (TAP 111, 114)
sub create_got
{
	my ($self) = @_;
	$self->safe_psql('postgres', q{
	    create function got(q text, p text) returns boolean language plpgsql as $$
	    declare b bigint; found boolean;
	    begin
	        select max(batch_id), bool_or(payload = p) into b, found from pgque.receive(q, 'c', 1000);
	        if b is not null then perform pgque.ack(b); end if;
	        return coalesce(found, false);
	    end $$;});
	return;
}

# $node->make_ledger(QUEUE): tables sent(ev_id) and acked(ev_id) and a
# function drain() that receives every batch of QUEUE's consumer 'c' and
# acks each in the transaction of its ledger rows, returning the events it
# got (TAP 089, 125: a producer's ledger against what the consumer acked).
sub make_ledger
{
	my ($self, $queue) = @_;
	$self->safe_psql('postgres', qq{
    create table sent (ev_id bigint primary key);
    create table acked (ev_id bigint);
    create function drain() returns int8 language plpgsql as \$\$
    declare
        n  int8 := 0;
        b  bigint;
    begin
        loop
            create temp table if not exists got (like pgque.message);
            truncate got;
            insert into got select * from pgque.receive('$queue', 'c', 10000);
            b := (select max(batch_id) from got);
            exit when b is null;
            insert into acked select msg_id from got;
            perform pgque.ack(b);
            n := n + (select count(*) from got);
        end loop;
        return n;
    end \$\$;});
	return;
}

# $node->slot_ledger(DB, queue => Q, keys => K, part => P, lock => L,
# nap => S, release => 0|1): a partitioned consumer's ledger in DB for
# consumer 'c' of queue Q (TAP 153, 157, 169): tables sent, got and fail;
# send_round(round, txns, per), txns transactions of per events over K
# keys (k0 .. k<K-1>), a tick after each; take(w, s, n, mx), one part of
# slot s for worker w, recorded (a payload named in fail nacked once, its
# key's later events in the part left: the pause contract); drain(w, ttl),
# a worker over every slot of the consumer's current n, parts of P, each
# part recorded and acked in one transaction, a slot whose call fails
# (another worker's lease, a resize that switched n, a fenced epoch) left
# for the pass, until two passes in a row found nothing and failed
# nowhere (the retries due and a tick between passes, S seconds' nap); a
# worker named '...-gated' waits between a part and its ack while the test
# holds advisory lock L; with release, drain gives its slots back at its
# end.
sub slot_ledger
{
	my ($self, $db, %o) = @_;
	my ($q, $k) = ($o{queue} // croak('slot_ledger: queue'), $o{keys} // 13);
	my ($part, $lock, $nap) = ($o{part} // 7, $o{lock} // 0, $o{nap} // 0.02);
	my $release = $o{release} ? q{
        select p.n into pn from pgque.partition_consumer p where p.co_name = 'c';
        for s in 0 .. pn - 1 loop
            begin
                perform pgque.release_slot('QUEUE', 'c', s, w);
            exception when others then
                null;
            end;
        end loop;} : '';
	my $sql = q{
    create table sent (payload text primary key, key text, n bigserial);
    create table got (payload text, key text, slot int4, n_at int4, worker text, retry int4, seq bigserial);
    create table fail (payload text primary key, done boolean not null default false);
    create procedure send_round(i_round int4, i_txns int4, i_per int4) language plpgsql as $$
    begin
        for t in 1 .. i_txns loop
            insert into sent (payload, key)
            select 'r' || i_round || '-' || t || '-' || i, 'k' || ((t * 7 + i) % KEYS) from generate_series(1, i_per) i;
            perform pgque.send_batch('QUEUE', 'default',
                                     array(select s.payload from sent s where s.payload like 'r' || i_round || '-' || t || '-%' order by s.n),
                                     array(select s.key from sent s where s.payload like 'r' || i_round || '-' || t || '-%' order by s.n));
            commit;
            perform pgque.force_tick('QUEUE'), pgque.ticker('QUEUE');
            commit;
        end loop;
    end $$;
    create function take(w text, s int4, pn int4, mx int4) returns int4 language plpgsql as $$
    declare
        k  int4 := 0;
        m  pgque.message;
        nk text[] := '{}';
    begin
        for m in select * from pgque.receive_partitioned('QUEUE', 'c', s, pn, w, mx) loop
            k := k + 1;
            continue when m.extra1 = any(nk);
            if exists (select from fail f where f.payload = m.payload and not f.done) then
                update fail set done = true where payload = m.payload;
                perform pgque.nack_partitioned('QUEUE', 'c', s, pn, w, m, '0 seconds', 'tap');
                nk := nk || m.extra1;
                continue;
            end if;
            insert into got (payload, key, slot, n_at, worker, retry)
            values (m.payload, m.extra1, s, pn, w, m.retry_count);
        end loop;
        return k;
    end $$;
    create procedure drain(w text, ttl interval) language plpgsql as $$
    declare
        pn     int4;
        k      int4;
        cnt    int4;
        failed boolean;
        idle   int4 := 0;
    begin
        loop
            select p.n into pn from pgque.partition_consumer p where p.co_name = 'c';
            cnt := 0;
            failed := false;
            for s in 0 .. pn - 1 loop
                -- the claim in a transaction of its own: one that finds a
                -- resize drained switches the layout (ADR 0030), and the
                -- pass ends there
                begin
                    perform pgque.claim_slot('QUEUE', 'c', s, w, ttl);
                exception when others then
                    failed := true;
                end;
                commit;
                if (select p.n from pgque.partition_consumer p where p.co_name = 'c') <> pn then
                    failed := true;
                    exit;
                end if;
                loop
                    begin
                        k := take(w, s, pn, PART);
                        if w like '%-gated' then
                            perform pg_advisory_xact_lock_shared(LOCK);
                        end if;
                        if k > 0 then
                            perform pgque.ack_partitioned('QUEUE', 'c', s, pn, w);
                        end if;
                    exception when others then
                        k := 0;
                        -- another worker's live lease is no failure: the
                        -- slot is that worker's to drain
                        failed := failed or sqlstate <> 'PQ002';
                    end;
                    exit when k = 0;
                    cnt := cnt + k;
                    commit;
                end loop;
            end loop;
            perform pgque.maint_retry_events();
            perform pgque.force_tick('QUEUE'), pgque.ticker('QUEUE');
            commit;
            if cnt = 0 and not failed then
                idle := idle + 1;
            else
                idle := 0;
            end if;
            exit when idle >= 2;
            perform pg_sleep(NAP);
        end loop;RELEASE
    end $$;};
	$sql =~ s/RELEASE/$release/;
	$sql =~ s/QUEUE/$q/g;
	$sql =~ s/KEYS/$k/g;
	$sql =~ s/PART/$part/g;
	$sql =~ s/LOCK/$lock/g;
	$sql =~ s/NAP/$nap/g;
	$self->safe_psql($db, $sql);
	return;
}

# $node->check_ledger(NAME): make_ledger's tables agree: every sent event
# acked, none twice, nothing acked that the ledger does not hold (what
# rolled back with its ledger row); three assertions named after NAME
# (TAP 165, 168).  Returns the number sent.
sub check_ledger
{
	my ($self, $name) = @_;
	my $sent = $self->safe_psql('postgres', q{select count(*) from sent});
	Test::More::is($self->safe_psql('postgres',
			q{select count(*) from sent s where not exists (select from acked a where a.ev_id = s.ev_id)}),
		'0', "$name: every one of the $sent sent events was received and acked");
	Test::More::is($self->safe_psql('postgres',
			q{select count(*) from (select ev_id from acked group by ev_id having count(*) > 1) d}),
		'0', "$name: none twice");
	Test::More::is($self->safe_psql('postgres',
			q{select count(*) from acked a where not exists (select from sent s where s.ev_id = a.ev_id)}),
		'0', "$name: nothing received that the ledger does not hold (rolled back)");
	return $sent;
}

# $node->direct_insert(QUEUE, PAYLOAD): a row written straight into the
# queue's current event table (ev_type 'bypass'), past pgque's functions:
# its event sequence does not move, so only the ticker's probe (or the
# watchdog's read of the table) finds it (TAP 111, 114; ADR 0031, 0103).
sub direct_insert
{
	my ($self, $queue, $payload) = @_;
	$self->safe_psql('postgres', qq{
	    do \$\$ begin
	      execute format('insert into pgque.event_%s_%s (ev_type, ev_data) values (''bypass'', %L)',
	                     (select queue_id from pgque.queue where queue_name = '$queue'),
	                     (select queue_cur_table from pgque.queue where queue_name = '$queue'), '$payload');
	    end \$\$});
	return;
}

# $node->stopped_slot_backlog(QUEUE, [force_tick => 1]): the stopped slot of
# TAP 108 and 112 (ADR 0094, 0096): a 32-bucket queue, 8 slots of consumer
# 'w', 100,000 events over 1,000 keys in one tick, every slot drained
# but slot 3.  Returns the queue's id and slot 3's share of the events.
sub stopped_slot_backlog
{
	my ($self, $q, %o) = @_;
	my $tick = $o{force_tick} ? "select pgque.force_tick('$q');" : '';
	$self->safe_psql('postgres', qq{
	    select pgque.create_queue('$q');
	    select pgque.set_queue_config('$q', 'partition_buckets', '32');
	    select pgque.maint_rotate_tables_step2();
	    select pgque.subscribe_slot('$q', 'w', s, 8) from generate_series(0, 7) s;
	    select count(*) from unnest(pgque.send_batch('$q', 'ev', array_fill('p'::text, array[100000]),
	                                                 array(select 'key-' || (g % 1000) from generate_series(1, 100000) g)));
	    $tick
	    select pgque.ticker('$q');
	    create procedure drain(s int) language plpgsql as \$\$
	    begin
	        perform pgque.claim_slot('$q', 'w', s, 'tap-worker');
	        loop
	            exit when not exists (select from pgque.receive_partitioned('$q', 'w', s, 8, 'tap-worker', 5000));
	            perform pgque.ack_partitioned('$q', 'w', s, 8, 'tap-worker');
	            commit;
	        end loop;
	        perform pgque.release_slot('$q', 'w', s, 'tap-worker');
	    end \$\$;
	});
	$self->safe_psql('postgres', "call drain($_)") for (0, 1, 2, 4, 5, 6, 7);
	my $qid = $self->safe_psql('postgres', "select queue_id from pgque.queue where queue_name = '$q'");
	my $slot3 = $self->safe_psql('postgres', q{
	    select count(*) from generate_series(1, 100000) g where pgque._slot_of('key-' || (g % 1000), 8) = 3});
	return ($qid, $slot3);
}

# poll_until(CODE, [SECONDS], [INTERVAL]): call CODE until it returns true
# (returns true) or SECONDS (default the framework's timeout) have passed
# (returns false); never a fixed sleep-and-hope.  A function, not a method.
sub poll_until
{
	my ($code, $secs, $interval) = @_;
	my $deadline = Time::HiRes::time() + ($secs // $TIMEOUT);
	while (1)
	{
		return 1 if $code->();
		return 0 if Time::HiRes::time() >= $deadline;
		Time::HiRes::sleep($interval // 0.1);
	}
}

# bench_probe(SCRIPT): run SCRIPT, bash with benchmark/lib.sh sourced
# (`set -euo pipefail`, in the repository's root), against this build's
# server binaries (pg_config of PATH) and a free port as PGQUE_BENCH_PORT;
# returns (its output, stdout and stderr together; its exit status; the
# port; the bin directory).  The start of TAP 109's and 140's probes of the
# bench's scripts, written once.  A function, not a method.
sub bench_probe
{
	my ($script) = @_;
	my $root = "$ENV{PGQUE_SRC}/..";
	my $port = PostgreSQL::Test::Cluster::get_free_port();
	my $bindir = `pg_config --bindir`;
	chomp $bindir;
	my $dir = PostgreSQL::Test::Utils::tempdir;
	open my $fh, '>', "$dir/probe.sh" or die "$dir/probe.sh: $!";
	print $fh "set -euo pipefail\ncd \"\$ROOT\"\n. benchmark/lib.sh\n$script";
	close $fh;
	my $out = `ROOT='$root' PGBIN='$bindir' PG_CONFIG='$bindir/pg_config' PGQUE_BENCH_PORT=$port bash '$dir/probe.sh' 2>&1`;
	return ($out, $?, $port, $bindir);
}

1;
