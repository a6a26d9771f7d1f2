# amp: build, test and run flows. `make` builds bin/amp-*; `make check` runs
# every test; `make demo` runs the main job. `make SAN=1 ...` builds and tests
# with AddressSanitizer and UBSan in build/san (binaries in build/san/bin).

.DELETE_ON_ERROR:
.SUFFIXES:
SHELL := /bin/bash

include pipelines/art.mk
ifeq ($(FLOW_LOCK_WRAP),)

CC      ?= cc
PKGS    := yaml-0.1 libzstd jansson
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

LIB_SRC   := $(sort $(wildcard lib/*/*.c))
LIB_HDR   := $(wildcard lib/*/*.h)
LIB_OBJ   := $(LIB_SRC:%.c=$(OBJ)/%.o)
TOOLS     := $(patsubst tools/%.c,%,$(sort $(wildcard tools/amp-*.c)))
TOOL_BINS := $(TOOLS:%=$(BIN)/%)
UNIT_SRC  := $(sort $(wildcard tests/unit/test_*.c))
UNIT_BINS := $(UNIT_SRC:tests/unit/%.c=$(OBJ)/tests/%)

.PHONY: all deps sweep-deps check mutate unit bats demo regen clean
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
DEB_PKGS := gcc make libyaml-dev libzstd-dev libjansson-dev pkg-config jq zstd bats bats-assert bats-support time bsdextrautils parallel \
	help2man
deps:
	@$(call install_missing,$(DEB_PKGS))

# sweep-deps: gnuplot for amp-sweep plot (it says so when gnuplot is
# missing); after deps and report-test-deps, so that make -j check never
# runs two apt-gets at once.
SWEEP_PKGS := gnuplot-nox
sweep-deps: | deps report-test-deps
	@$(call install_missing,$(SWEEP_PKGS))

$(OBJ)/lib/%.o: lib/%.c $(LIB_HDR)
	@mkdir -p $(@D)
	$(CC) $(WFLAGS) $(CFLAGS) $(PKG_CFLAGS) -Ilib -c $< -o $@

# The machine model's and the references' loops (lib/run/run*.c) at
# -O3, which vectorizes their element-wise loops: -ffp-contract=off still
# keeps one rounding per operation, and without -ffast-math no sum is
# reordered, so the results are the same bits.
$(patsubst lib/%.c,$(OBJ)/lib/%.o,$(filter lib/run/run%.c,$(LIB_SRC))): CFLAGS += -O3

$(OBJ)/libamp.a: $(LIB_OBJ)
	rm -f $@ && ar rcs $@ $^

# What the tools share (tools/tool.c, tools/opt.c: messages, provenance,
# the option table's parser and help), in its own archive.
TOOL_SRC := tools/opt.c tools/tool.c tools/prov.c
$(OBJ)/tools/%.o: tools/%.c tools/*.h $(LIB_HDR)
	@mkdir -p $(@D)
	$(CC) $(WFLAGS) $(CFLAGS) $(PKG_CFLAGS) -Ilib -c $< -o $@

$(OBJ)/libtool.a: $(TOOL_SRC:%.c=$(OBJ)/%.o)
	rm -f $@ && ar rcs $@ $^

$(BIN)/%: tools/%.c tools/*.h $(OBJ)/libtool.a $(OBJ)/libamp.a $(LIB_HDR) | $(BIN)
	$(CC) $(WFLAGS) $(CFLAGS) $(PKG_CFLAGS) -Ilib $< $(OBJ)/libtool.a $(OBJ)/libamp.a $(PKG_LIBS) $(LDSAN) -lm -pthread -o $@

$(OBJ)/tests/%: tests/unit/%.c tests/unit/*.h $(OBJ)/libamp.a $(LIB_HDR) | $(OBJ)/tests
	$(CC) $(WFLAGS) $(CFLAGS) $(PKG_CFLAGS) -Ilib $< $(OBJ)/libamp.a $(PKG_LIBS) $(LDSAN) -lm -pthread -o $@

# the corpus replay includes the fuzzing harness's readers
$(OBJ)/tests/test_fuzz: tests/fuzz/readers.h

$(OBJ)/lib $(OBJ)/tests $(BIN):
	mkdir -p $@

# check: unit tests then Bats suites; tests/run.sh prints "N passed, N failed".
# mutate: every mutant of tests/mutants/mutants.tsv in a scratch copy of
# the tree, its own tests, then make check (tests/mutants/README.md).
mutate: deps report-test-deps
	@bash tests/mutants/run.sh

check: deps report-test-deps sweep-deps
	@$(MAKE) -s --no-print-directory all $(UNIT_BINS) $(OBJ)/bench/staging $(OBJ)/tests/mkckpt
	@AMP_BIN=$(CURDIR)/$(BIN) AMP_OBJ=$(CURDIR)/$(OBJ) AMP_SAN=$(SAN) UNIT_BINS="$(UNIT_BINS)" FUZZ=$(FUZZ) bash tests/run.sh

unit: $(UNIT_BINS)
	@for t in $(UNIT_BINS); do $$t || exit 1; done

include pipelines/plan.mk pipelines/lower.mk pipelines/capture.mk pipelines/experiments.mk pipelines/run.mk \
	pipelines/fuzz.mk pipelines/report.mk
include pipelines/compare.mk pipelines/import.mk

# ---- installation: make install [PREFIX=/usr/local] [DESTDIR=] ----
# PREFIX/bin/amp-*, PREFIX/share/amp/{machines,models,jq} (the tools find
# it beside their own directory, or through AMP_SHARE, so the tree can
# move), man pages made from each tool's --help by help2man, and bash
# completion (share/bash-completion/amp, one copy per tool), and formats/
# and docs/ in PREFIX/share/doc/amp (which --help and the man pages cite).
# `make uninstall PREFIX=DIR` removes them; PREFIX is required there.
PREFIX  ?= /usr/local
MAN_DIR := build/man
MANS    := $(TOOLS:%=$(MAN_DIR)/%.1)
man_name_amp-plan     := plan a model for the tile machine
man_name_amp-compose  := compose the cross-op copies of a plan
man_name_amp-expand   := expand a plan into placements, addresses and transfers
man_name_amp-exchange := check and order the transfers of an expanded stage
man_name_amp-group    := group transfers into exchange phases
man_name_amp-emit     := emit a tile program, checked against the machine limits
man_name_amp-capture  := capture the movement and modelled cycles of a stage or program
man_name_amp-run      := run a program on the machine model and check it
man_name_amp-compare  := compare two captures side by side, with deltas
man_name_amp-sweep    := turn one compile into a study: sweep jobs, runs and a ranked merge
man_name_amp-import   := write an amp model from a Hugging Face configuration
.PHONY: install uninstall man help
# The pages' date: the last commit's, so the same tree gives the same pages.
$(MAN_DIR)/%.1: $(BIN)/% man/%.h2m share/man/amp.h2m
	@mkdir -p $(@D)
	@SOURCE_DATE_EPOCH=$$(git log -1 --format=%ct 2>/dev/null || echo 0) \
		help2man --no-info --no-discard-stderr --name='$(man_name_$*)' --include=man/$*.h2m \
		--include=share/man/amp.h2m --output=$@ $(BIN)/$*

man: $(MANS)

install: all man
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/amp $(DESTDIR)$(PREFIX)/share/man/man1 \
		$(DESTDIR)$(PREFIX)/share/bash-completion/completions $(DESTDIR)$(PREFIX)/share/doc/amp
	install -m 755 $(TOOL_BINS) $(DESTDIR)$(PREFIX)/bin/
	cp -R share/machines share/models share/jq $(DESTDIR)$(PREFIX)/share/amp/
	cp -R formats docs $(DESTDIR)$(PREFIX)/share/doc/amp/
	install -m 644 $(MANS) $(DESTDIR)$(PREFIX)/share/man/man1/
	for t in $(TOOLS); do \
		install -m 644 share/bash-completion/amp $(DESTDIR)$(PREFIX)/share/bash-completion/completions/$$t; done

# uninstall removes directories: only with PREFIX on the command line, so
# that a bare `make uninstall` never removes /usr/local/share/amp unasked.
uninstall:
	@if [ "$(origin PREFIX)" != "command line" ]; then \
		echo "make uninstall: name the installation to remove: make uninstall PREFIX=DIR (it removes DIR/bin/amp-*, DIR/share/amp, DIR/share/doc/amp, the man pages and the completions)" >&2; \
		exit 2; fi
	rm -f $(TOOLS:%=$(DESTDIR)$(PREFIX)/bin/%) $(TOOLS:%=$(DESTDIR)$(PREFIX)/share/man/man1/%.1) \
		$(TOOLS:%=$(DESTDIR)$(PREFIX)/share/bash-completion/completions/%)
	rm -rf $(DESTDIR)$(PREFIX)/share/amp $(DESTDIR)$(PREFIX)/share/doc/amp

help:
	@echo 'make [all]        build bin/amp-* (SAN=1: AddressSanitizer+UBSan in build/san/bin)'
	@echo 'make deps         install the missing Debian packages (as root; else print the command)'
	@echo 'make sweep-deps   gnuplot-nox, for amp-sweep plot'
	@echo 'make check        every test: unit, command line, golden files, flows, fuzz corpora'
	@echo 'make demo         compile and capture the 27-layer SigLIP, validate the 1-layer one, run a decoder layer'
	@echo 'make plan|lower|capture|validate MODEL=FILE [MACHINE=FILE] [PLAN_FLAGS=] [GROUP_FLAGS=] [LIMITS=]'
	@echo '                  the flows, into artifacts/NAME/ (ART=DIR, ARTIFACTS=DIR to move it); a path'
	@echo '                  with a space, glob character, $$, quote or backslash is refused (make cannot quote it)'
	@echo '                  a directory amp did not make (no .amp-artifacts in it, not empty) is refused'
	@echo 'make report MODEL=FILE  capture, then artifacts/NAME/report.html: heatmaps, flow graph, tables'
	@echo 'make trace MODEL=FILE [TRACE_TILES=0-45,775]  artifacts/NAME/trace.json.gz: the timeline for Perfetto'
	@echo 'make experiment-weights|experiment-compose|experiment-staging [EXP_MODEL=FILE]'
	@echo 'make experiment-search [SEARCH_CASES=mlp|so400m]  the search oracle: best pinned GEMMs beside amp-plan (docs/search.md)'
	@echo 'make fuzz|fuzz-record|fuzz-status [FUZZ_SECONDS=60] [FUZZ_READERS=...]'
	@echo 'make mutate [MUTATE_SET=NAME] [MUTATE_FULL=0]  the mutation harness: every mutant of tests/mutants/ killed?'
	@echo 'make regen        rewrite the golden stage files in tests/golden/'
	@echo 'make man          man pages from --help (build/man/)'
	@echo 'make install [PREFIX=/usr/local] [DESTDIR=]   tools, share/amp, share/doc/amp (formats/, docs/), man pages, completion'
	@echo 'make uninstall PREFIX=DIR [DESTDIR=]    remove what make install put in DIR (PREFIX is required)'
	@echo 'make unit         the unit tests alone; make clean removes build/ and bin/'
	@echo 'bench/*.sh        figures, not tests: bench/README.md'

clean:
	rm -rf build bin

endif   # FLOW_LOCK_WRAP
