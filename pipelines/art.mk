# Where the flows write, and one make at a time in each place (included
# first by the top-level Makefile).

# Paths make cannot quote are refused before anything runs: a recipe puts
# a path in single quotes or none, so a space, tab or newline would split
# it (`rm -rf $(ART)` of "d/experiments 2" removes d/experiments), a glob
# character match other files, '$' be expanded by make itself (MODEL=m$x
# reads m.yaml) and a quote, backquote or backslash end the quoting. The
# check reads each variable's own text ($(value)), before make expands it.
amp_bad_chars := \ * ? [ ] $$ " ' `
amp_path_vars := MODEL MACHINE ARTIFACTS ART A B ATILES BTILES CMP_OUT EXP_MODEL STAGING_MODEL PREFILL
# amp_unsafe VAR: non-empty when VAR (set by the user, not empty) holds such a character
amp_unsafe = $(if $(filter undefined default,$(origin $(1)))$(if $(value $(1)),,empty),,$(strip $(if $(word 2,$(value $(1))),x)$(if \
	$(findstring $(value $(1)),$(strip $(value $(1)))),,x)$(foreach c,$(amp_bad_chars),$(findstring $(c),$(value $(1))))))
$(foreach v,$(amp_path_vars),$(if $(call amp_unsafe,$(v)),$(error $(v): a path with a space, tab, \
	newline, glob character (* ? [ ]), '$$', quote, backquote or backslash, which make cannot quote \
	safely; rename or link it to a plain path)))

# amp_claim DIR: a recipe's shell command that makes DIR amp's own before
# anything is written or deleted there. amp marks each output directory
# it makes with a file .amp-artifacts; a DIR that exists without one and
# is not empty (a file, or a directory of the user's) is refused, so no
# flow removes a report/, *.tmp or summary.txt that amp did not write. An
# empty directory is taken (and marked).
amp_mark := .amp-artifacts
amp_claim = if [ -e '$(1)' ] && [ ! -e '$(1)/$(amp_mark)' ] && [ -n "$$(ls -A '$(1)' 2>/dev/null || echo x)" ]; then \
	echo "make: $(1) exists and amp did not make it (no $(amp_mark) in it): amp writes and deletes only in" \
		"directories it made; name a new or empty directory" >&2; exit 1; fi; \
	mkdir -p '$(1)' && { [ -e '$(1)/$(amp_mark)' ] || \
		echo 'amp made this directory: its make flows write and delete here' > '$(1)/$(amp_mark)'; }

MODEL   ?= share/models/siglip-mlp.yaml
MACHINE ?= share/machines/amp1472.yaml
# MACHINE=NAME, when no file NAME exists, is share/machines/NAME.yaml (as
# the tools read --machine NAME).
ifeq ($(wildcard $(MACHINE))$(findstring /,$(MACHINE)),)
ifneq ($(wildcard share/machines/$(MACHINE).yaml),)
override MACHINE := share/machines/$(MACHINE).yaml
endif
endif
NAME    := $(basename $(notdir $(MODEL)))
# Where the flows write: ARTIFACTS/NAME by default; ART= names another
# directory (two models with the same basename, two variants of one).
ARTIFACTS ?= artifacts
ART     ?= $(ARTIFACTS)/$(NAME)

# The flows' goals need their inputs: a missing MODEL or MACHINE is an
# error before anything runs, never an older model's results.
FLOW_GOALS := plan lower capture validate report trace
ifneq ($(filter $(FLOW_GOALS),$(MAKECMDGOALS)),)
ifeq ($(wildcard $(MODEL)),)
$(error MODEL=$(MODEL): no such file)
endif
ifeq ($(wildcard $(MACHINE)),)
$(error MACHINE=$(MACHINE): no such file, nor a machine name (known: $(basename $(notdir $(wildcard share/machines/*.yaml)))))
endif
endif

# A flow goal claims ART (amp_claim: refused when it is not amp's), then
# runs under an exclusive lock on ART/.lock (flock(1)): this
# make only takes the lock, waiting (and saying so) while another make
# writes ART, then removes the temporaries an interrupted or killed run
# left there (X.tmp, a tool's X.tmp.PID, report.tmp/: none can be a live
# run's, as the lock is held) and runs the goals again as a make that
# holds it (AMP_FLOW_LOCKED=1). Without the lock two makes would share
# ART's temporaries and each could report success over the other's
# partial result.
FLOW_LOCK_WRAP := $(if $(AMP_FLOW_LOCKED),,$(filter $(FLOW_GOALS),$(MAKECMDGOALS)))
ifneq ($(FLOW_LOCK_WRAP),)
.PHONY: $(MAKECMDGOALS)
$(firstword $(MAKECMDGOALS)):
	@$(call amp_claim,$(ART))
	@exec 9>'$(ART)/.lock'; \
	if ! flock -n 9; then \
		echo "make: another make is writing $(ART); waiting for it (ART=DIR writes elsewhere)" >&2; \
		flock 9 || exit 1; \
	fi; \
	rm -f '$(ART)'/*.tmp '$(ART)'/*.tmp.[0-9]* '$(ART)/run'/*.tmp '$(ART)/run'/*.tmp.[0-9]*; \
	rm -rf '$(ART)/report.tmp'; \
	$(MAKE) --no-print-directory AMP_FLOW_LOCKED=1 $(MAKECMDGOALS)
$(wordlist 2,$(words $(MAKECMDGOALS)),$(MAKECMDGOALS)): $(firstword $(MAKECMDGOALS)) ;
	@:
endif
