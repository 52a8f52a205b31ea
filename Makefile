# pgque_bgw: PGXS build, plus the two commands of the README:
#   make demo   run the end-to-end demo on a throwaway cluster
#   make test   run every test (pg_regress, isolation, TAP) on throwaway clusters
#               of PostgreSQL 15; make test PG=17 (or 18) in a cached Debian
#               trixie (sid) chroot when this machine's Debian lacks that major
#   make deb    build the Debian package postgresql-NN-pgque-bgw into build/deb/
# They install what they need (apt-get, as root) before building.
# make installcheck runs the same pg_regress, isolation and TAP tests against
# a server you started (PGHOST/PGPORT, pgque_bgw preloaded): docs/install.md.

# pgque_proxy: the companion for a PL/Proxy database in front of shards
# (docs/scale-out.md); its control file and script are made from sql/proxy/.
EXTENSION  = pgque_bgw pgque_proxy
# The version is written once, in pgque_bgw's control file; the SQL
# (pgque.version(), the script headers), pgque_proxy and the library (PG18's
# module magic) take it from here.
EXTVERSION := $(shell sed -n "s/^default_version *= *'\([^']*\)'.*/\1/p" pgque_bgw.control)
# The release this version upgrades from (ADR 0019).  Released scripts are
# frozen in sql/released/; the upgrade from PREV_VERSION to EXTVERSION is
# generated from the parts plus the hand-written steps in sql/upgrade/.
PREV_VERSION = 0.2.0

MODULE_big = pgque_bgw
OBJS       = src/pgque_bgw.o src/guc.o src/state.o src/wake.o src/worker.o \
             src/launcher.o src/ticker.o src/tick.o src/maint.o src/watchdog.o src/utility.o \
             src/status.o src/slots.o src/slot_sql.o src/window.o src/window_direct.o src/receive.o \
             src/produce.o src/queue_cache.o src/append.o src/evpost.o src/insert_plan.o src/rules.o src/source.o src/srf.o \
             src/caller.o src/cdc.o src/cdc_encode.o src/coop.o src/restore.o src/supervise.o \
             src/kept_plan.o src/ack.o src/reclaim.o src/budget.o src/locks.o src/errcodes.o

DATA_built = pgque_bgw--$(EXTVERSION).sql pgque_bgw--$(PREV_VERSION)--$(EXTVERSION).sql \
             pgque_bgw--0.1.0--$(EXTVERSION).sql \
             pgque_proxy--$(EXTVERSION).sql pgque_proxy--$(PREV_VERSION)--$(EXTVERSION).sql
EXTRA_CLEAN = pgque_proxy.control sql_comments.sql
# the released scripts, and the secondary control files that make the old
# versions untrusted (ADR 0042: only the current version may be installed or
# updated to by a non-superuser)
DATA       = $(wildcard sql/released/pgque_bgw--*.sql sql/released/pgque_proxy--*.sql) \
             $(wildcard sql/control/pgque_bgw--*.control)
SQL_PARTS  = $(sort $(wildcard sql/[0-9][0-9]_*.sql))
UPGRADE_PRE  = sql/upgrade/$(PREV_VERSION)--$(EXTVERSION).pre.sql
UPGRADE_POST = $(wildcard sql/upgrade/$(PREV_VERSION)--$(EXTVERSION).post.sql)
PG_CPPFLAGS = -DPGQUE_VERSION='"$(EXTVERSION)"'
# The limits C and SQL share are written once, in src/rules.h: each
# "#define PGQUE_<NAME> <number>" there replaces @PGQUE_<NAME>@ in the parts.
SQL_SUBST := -e 's/@PGQUE_VERSION@/$(EXTVERSION)/g' -e 's/@PGQUE_EXTENSION@/pgque_bgw/g' \
             $(shell sed -n 's/^\#define \(PGQUE_[A-Z_]*\) \([0-9][0-9]*\).*/-e s\/@\1@\/\2\/g/p' src/rules.h)

# make installcheck: the tests of make test against a server you run
# (PGHOST/PGPORT, started with test/pgque_test.conf: docs/install.md).
REGRESS        = $(sort $(basename $(notdir $(wildcard test/sql/*.sql))))
REGRESS_OPTS   = --inputdir=test
ISOLATION      = $(sort $(basename $(notdir $(wildcard test/specs/*.spec))))
ISOLATION_OPTS = --inputdir=test
# TAP tests make their own throwaway servers (PostgreSQL::Test::Cluster);
# TAP_TESTS= on the command line leaves them out
TAP_TESTS      = 1
PROVE_TESTS    = test/t/*.pl
PROVE_FLAGS    = -I test/t
installcheck: export PGQUE_SRC = $(CURDIR)/test

# Warnings are errors; the exceptions are what PostgreSQL's own headers trip.
PG_CFLAGS  = -Wall -Wextra -Werror -Wno-unused-parameter -Wno-sign-compare \
             -Wno-missing-field-initializers -Wno-cast-function-type
# Each object's header dependencies (gcc and clang: -MMD -MP), read back
# below, so that a changed header rebuilds every file that includes it.
PG_CFLAGS += -MMD -MP
EXTRA_CLEAN += $(OBJS:.o=.d)

# PG_CONFIG from the environment or the command line wins; PG=NN picks
# Debian's /usr/lib/postgresql/NN; else the pg_config on PATH (Debian's
# wrapper: the newest installed server-dev).  make test without PG is 15.
ifneq ($(PG),)
PG_CONFIG ?= /usr/lib/postgresql/$(PG)/bin/pg_config
endif
PG_CONFIG ?= pg_config
PGXS      := $(shell $(PG_CONFIG) --pgxs 2>/dev/null)

.DEFAULT_GOAL := all

# Without the server headers (a fresh machine) only test/demo/bench are
# usable: they install the packages and call make again.
# no LLVM bitcode: clang is not needed to build or install
override with_llvm = no

ifneq ($(wildcard $(PGXS)),)
include $(PGXS)
-include $(OBJS:.o=.d)
else
all:
	@echo "no PostgreSQL server headers ($(PG_CONFIG)): install postgresql-server-dev-NN, or run 'make test' or 'make demo' (they install it)" >&2; exit 1
endif

# COMMENT ON every public function and view, from docs/sql-reference.md
# (sql/gen_comments.pl): the reference is the one source of the words.
sql_comments.sql: sql/gen_comments.pl docs/sql-reference.md
	perl sql/gen_comments.pl docs/sql-reference.md > $@.tmp
	mv $@.tmp $@

pgque_bgw--$(EXTVERSION).sql: $(SQL_PARTS) sql_comments.sql pgque_bgw.control src/rules.h
	cat $(SQL_PARTS) sql_comments.sql | sed $(SQL_SUBST) > $@
	@! grep -n '@PGQUE_[A-Z_]*@' $@ || { echo "$@: a placeholder without a define in src/rules.h" >&2; rm -f $@; exit 1; }

# pgque_proxy installs into schema pgque too: the schema guard of pgque_bgw
# (ADR 0042) right after its \echo line, with its own name
pgque_proxy--$(EXTVERSION).sql: sql/proxy/pgque_proxy.sql sql/00_schema_guard.sql pgque_bgw.control
	sed -e 's/@PGQUE_EXTENSION@/pgque_proxy/g' sql/00_schema_guard.sql > $@.guard
	sed -e 's/@PGQUE_VERSION@/$(EXTVERSION)/g' -e '/^\\echo /r $@.guard' $< > $@
	rm -f $@.guard

# pgque_proxy's upgrade: the same generator, its own hand-written steps
pgque_proxy--$(PREV_VERSION)--$(EXTVERSION).sql: sql/gen_upgrade.pl sql/proxy/pgque_proxy.sql sql/proxy/upgrade/$(PREV_VERSION)--$(EXTVERSION).pre.sql $(wildcard sql/proxy/upgrade/$(PREV_VERSION)--$(EXTVERSION).post.sql) pgque_bgw.control
	perl sql/gen_upgrade.pl --extension pgque_proxy --from $(PREV_VERSION) --to $(EXTVERSION) \
		--pre sql/proxy/upgrade/$(PREV_VERSION)--$(EXTVERSION).pre.sql \
		$(if $(wildcard sql/proxy/upgrade/$(PREV_VERSION)--$(EXTVERSION).post.sql),--post sql/proxy/upgrade/$(PREV_VERSION)--$(EXTVERSION).post.sql) \
		sql/proxy/pgque_proxy.sql | sed 's/@PGQUE_VERSION@/$(EXTVERSION)/g' > $@.tmp
	mv $@.tmp $@

pgque_proxy.control: sql/proxy/pgque_proxy.control.in pgque_bgw.control
	sed 's/@PGQUE_VERSION@/$(EXTVERSION)/g' $< > $@
all: pgque_proxy.control

# pgque_proxy.so, pgque_proxy's C routing layer linked with libpq (ADR 0115):
# a second PGXS invocation in src/proxy/, so that libpq stays out of the
# preloaded pgque_bgw.so.
.PHONY: pgque-proxy-lib pgque-proxy-install pgque-proxy-clean
all: pgque-proxy-lib
install: pgque-proxy-install
clean: pgque-proxy-clean
pgque-proxy-lib:
	$(MAKE) -C src/proxy PG_CONFIG=$(PG_CONFIG) EXTVERSION=$(EXTVERSION)
pgque-proxy-install: pgque-proxy-lib
	$(MAKE) -C src/proxy PG_CONFIG=$(PG_CONFIG) EXTVERSION=$(EXTVERSION) install
pgque-proxy-clean:
	$(MAKE) -C src/proxy PG_CONFIG=$(PG_CONFIG) EXTVERSION=$(EXTVERSION) clean

# PgQ's way: every function, procedure and view of the parts again as
# "create or replace", between the hand-written steps for what that cannot
# express (tables, columns, types, dropped or re-typed functions), then the
# grants and the owner hand-over of a fresh install.
# The direct step from 0.1.0 (ADR 0042): 0.1.0 was trusted, so its objects
# may belong to a non-superuser who planted triggers or functions that the
# frozen 0.1.0 -> 0.2.0 step would run as superuser.  This one runs the
# guard first, then that step and the generated one; PostgreSQL takes the
# shortest path, so every update from 0.1.0 comes here.
pgque_bgw--0.1.0--$(EXTVERSION).sql: sql/01_foreign_guard.sql sql/released/pgque_bgw--0.1.0--0.2.0.sql pgque_bgw--$(PREV_VERSION)--$(EXTVERSION).sql
	{ echo '-- pgque_bgw 0.1.0 -> $(EXTVERSION): made by the Makefile from sql/01_foreign_guard.sql,'; \
	  echo '-- sql/released/pgque_bgw--0.1.0--0.2.0.sql and pgque_bgw--$(PREV_VERSION)--$(EXTVERSION).sql (ADR 0019, 0042).'; \
	  printf '%s\n' '\echo Use "ALTER EXTENSION pgque_bgw UPDATE TO '"'"'$(EXTVERSION)'"'"'" to load this file. \quit'; \
	  sed $(SQL_SUBST) sql/01_foreign_guard.sql; \
	  sed '/^\\echo /d' sql/released/pgque_bgw--0.1.0--0.2.0.sql; \
	  sed '/^\\echo /d' pgque_bgw--$(PREV_VERSION)--$(EXTVERSION).sql; } > $@.tmp
	mv $@.tmp $@

pgque_bgw--$(PREV_VERSION)--$(EXTVERSION).sql: sql/gen_upgrade.pl $(SQL_PARTS) sql_comments.sql $(UPGRADE_PRE) $(UPGRADE_POST) pgque_bgw.control src/rules.h
	perl sql/gen_upgrade.pl --from $(PREV_VERSION) --to $(EXTVERSION) \
		--pre $(UPGRADE_PRE) $(if $(UPGRADE_POST),--post $(UPGRADE_POST)) $(SQL_PARTS) sql_comments.sql | sed $(SQL_SUBST) > $@.tmp
	@! grep -n '@PGQUE_[A-Z_]*@' $@.tmp || { echo "$@: a placeholder without a define in src/rules.h" >&2; rm -f $@.tmp; exit 1; }
	mv $@.tmp $@

.PHONY: test demo bench bench-outside deb
test:
	PG=$(PG) test/run.sh

demo:
	PG=$(PG) test/demo.sh

# the Debian package postgresql-NN-pgque-bgw into build/deb/ (debian/)
deb:
	PG=$(PG) test/deb.sh build

bench:
	QUICK=$(QUICK) benchmark/run.sh

# a second opinion on make bench's headline ratios (benchmark/outside.sh)
bench-outside:
	benchmark/outside.sh
