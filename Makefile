# pgque_bgw: PGXS build, plus the two commands of the README:
#   make demo   run the end-to-end demo on a throwaway cluster
#   make test   run every test (pg_regress, isolation, TAP) on throwaway clusters
#               of PostgreSQL 15; make test PG=17 (or 18) in a cached Debian
#               trixie (sid) chroot when this machine's Debian lacks that major
# Both install what they need (apt-get, as root) before building.

EXTENSION  = pgque_bgw
EXTVERSION = 0.1.0

MODULE_big = pgque_bgw
OBJS       = src/pgque_bgw.o src/guc.o src/state.o src/wake.o src/worker.o \
             src/launcher.o src/ticker.o src/maint.o src/watchdog.o src/utility.o \
             src/status.o src/slots.o src/slot_sql.o src/insert.o src/window.o \
             src/caller.o src/cdc.o src/cdc_encode.o

DATA_built = pgque_bgw--$(EXTVERSION).sql
SQL_PARTS  = $(sort $(wildcard sql/[0-9][0-9]_*.sql))

# Warnings are errors; the exceptions are what PostgreSQL's own headers trip.
PG_CFLAGS  = -Wall -Wextra -Werror -Wno-unused-parameter -Wno-sign-compare \
             -Wno-missing-field-initializers -Wno-cast-function-type

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
else
all:
	@echo "no PostgreSQL server headers ($(PG_CONFIG)): install postgresql-server-dev-NN, or run 'make test' or 'make demo' (they install it)" >&2; exit 1
endif

$(DATA_built): $(SQL_PARTS)
	cat $(SQL_PARTS) > $@

.PHONY: test demo bench
test:
	PG=$(PG) test/run.sh

demo:
	PG=$(PG) test/demo.sh

bench:
	QUICK=$(QUICK) benchmark/run.sh
