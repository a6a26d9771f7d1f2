# amp: build, test and run flows. `make` builds bin/amp-*; `make check` runs
# every test; `make demo` runs the main job. `make SAN=1 ...` builds and tests
# with AddressSanitizer and UBSan in build/san (binaries in build/san/bin).

.DELETE_ON_ERROR:
.SUFFIXES:
SHELL := /bin/bash

CC      ?= cc
PKGS    := yaml-0.1 libzstd
CFLAGS  ?= -O2 -g
WFLAGS  := -ffp-contract=off -std=c11 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -Wpedantic -Werror -DAMP_SHARE_DIR=\"$(CURDIR)/share\"
ifdef SAN
CFLAGS  := -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LDSAN   := -fsanitize=address,undefined
VARIANT := san
BIN     := build/san/bin
else
VARIANT := rel
BIN     := bin
endif
OBJ     := build/$(VARIANT)
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   = $(shell pkg-config --libs $(PKGS) 2>/dev/null)

LIB_SRC   := $(sort $(wildcard lib/*.c))
LIB_OBJ   := $(LIB_SRC:%.c=$(OBJ)/%.o)
TOOLS     := $(patsubst tools/%.c,%,$(sort $(wildcard tools/amp-*.c)))
TOOL_BINS := $(TOOLS:%=$(BIN)/%)
UNIT_SRC  := $(sort $(wildcard tests/unit/test_*.c))
UNIT_BINS := $(UNIT_SRC:tests/unit/%.c=$(OBJ)/tests/%)

.PHONY: all deps check unit bats demo regen clean
all: $(TOOL_BINS)

# install_missing PACKAGES: install the Debian packages that are missing
# (as root), otherwise say how and fail.
install_missing = missing=$$(for p in $(1); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" = 0 ]; then \
			echo "deps: installing" $$missing; \
			export DEBIAN_FRONTEND=noninteractive; \
			apt-get update -qq && apt-get install -y -qq $$missing >/dev/null || exit 1; \
		else \
			echo "deps: missing packages; run:"; \
			echo "  sudo apt-get update && sudo apt-get install -y" $$missing; \
			exit 1; \
		fi; \
	fi

# deps: what the build and the tests need.
DEB_PKGS := gcc make libyaml-dev libzstd-dev pkg-config jq zstd bats bats-assert bats-support time bsdextrautils
deps:
	@$(call install_missing,$(DEB_PKGS))

$(OBJ)/lib/%.o: lib/%.c lib/*.h | $(OBJ)/lib
	$(CC) $(WFLAGS) $(CFLAGS) $(PKG_CFLAGS) -c $< -o $@

# The machine model's and the references' loops (lib/run.c) at -O3, which
# vectorizes their element-wise loops: -ffp-contract=off still keeps one
# rounding per operation, and without -ffast-math no sum is reordered, so
# the results are the same bits.
$(OBJ)/lib/run.o: CFLAGS += -O3

$(OBJ)/libamp.a: $(LIB_OBJ)
	rm -f $@ && ar rcs $@ $^

$(BIN)/%: tools/%.c $(OBJ)/libamp.a lib/*.h | $(BIN)
	$(CC) $(WFLAGS) $(CFLAGS) $(PKG_CFLAGS) -Ilib $< $(OBJ)/libamp.a $(PKG_LIBS) $(LDSAN) -lm -pthread -o $@

$(OBJ)/tests/%: tests/unit/%.c tests/unit/*.h $(OBJ)/libamp.a lib/*.h | $(OBJ)/tests
	$(CC) $(WFLAGS) $(CFLAGS) $(PKG_CFLAGS) -Ilib $< $(OBJ)/libamp.a $(PKG_LIBS) $(LDSAN) -lm -pthread -o $@

$(OBJ)/lib $(OBJ)/tests $(BIN):
	mkdir -p $@

# check: unit tests then Bats suites; tests/run.sh prints "N passed, N failed".
check: deps
	@$(MAKE) -s --no-print-directory all $(UNIT_BINS)
	@AMP_BIN=$(CURDIR)/$(BIN) AMP_SAN=$(SAN) UNIT_BINS="$(UNIT_BINS)" FUZZ=$(FUZZ) bash tests/run.sh

unit: $(UNIT_BINS)
	@for t in $(UNIT_BINS); do $$t || exit 1; done

include pipelines/plan.mk pipelines/lower.mk pipelines/capture.mk pipelines/experiments.mk pipelines/run.mk \
	pipelines/fuzz.mk

clean:
	rm -rf build bin

