# pgque_bgw: PGXS build, plus the two commands of the README:
#   make demo   run the end-to-end demo on a throwaway cluster
#   make test   run every test (pg_regress, isolation, TAP) on throwaway clusters
# Both install what they need (apt-get, as root) before building.

EXTENSION  = pgque_bgw
EXTVERSION = 0.1.0

MODULE_big = pgque_bgw
OBJS       = src/pgque_bgw.o src/guc.o src/state.o src/wake.o src/worker.o \
             src/launcher.o src/ticker.o src/maint.o src/watchdog.o src/utility.o \
             src/status.o src/slots.o src/slot_sql.o src/insert.o src/window.o \
             src/caller.o src/coop.o

DATA_built = pgque_bgw--$(EXTVERSION).sql
SQL_PARTS  = $(sort $(wildcard sql/[0-9][0-9]_*.sql))

# Warnings are errors; the exceptions are what PostgreSQL's own headers trip.
PG_CFLAGS  = -Wall -Wextra -Werror -Wno-unused-parameter -Wno-sign-compare \
             -Wno-missing-field-initializers -Wno-cast-function-type

PG_CONFIG ?= $(firstword $(wildcard /usr/lib/postgresql/15/bin/pg_config) pg_config)
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
	@echo "postgresql-server-dev-15 is not installed: run 'make test' or 'make demo' (they install it)" >&2; exit 1
endif

$(DATA_built): $(SQL_PARTS)
	cat $(SQL_PARTS) > $@

.PHONY: test demo bench
test:
	test/run.sh

demo:
	test/demo.sh

bench:
	QUICK=$(QUICK) benchmark/run.sh
