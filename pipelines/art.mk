# Where the flows write, and one make at a time in each place (included
# first by the top-level Makefile).

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
FLOW_GOALS := plan lower capture validate report
ifneq ($(filter $(FLOW_GOALS),$(MAKECMDGOALS)),)
ifeq ($(wildcard $(MODEL)),)
$(error MODEL=$(MODEL): no such file)
endif
ifeq ($(wildcard $(MACHINE)),)
$(error MACHINE=$(MACHINE): no such file, nor a machine name (known: $(basename $(notdir $(wildcard share/machines/*.yaml)))))
endif
endif

# A flow goal runs under an exclusive lock on ART/.lock (flock(1)): this
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
	@mkdir -p '$(ART)'
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
