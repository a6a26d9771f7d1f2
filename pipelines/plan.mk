# Flows that plan a model. Included by the top-level Makefile, which defines
# BIN (the amp-* binaries) and the build rules.
#
#   make plan MODEL=share/models/X.yaml [MACHINE=...] [PLAN_FLAGS=...]
#       writes artifacts/X/plan.yaml, plan.txt (amp-plan --explain) and
#       composed.yaml; each file is remade only when its inputs or its tool
#       changed. ART=DIR writes to DIR instead (ARTIFACTS=DIR: DIR/X).
#   make demo      compiles and captures the 27-layer SigLIP-so400m (a line
#                  per stage, then summary.txt) and validates the 1-layer
#                  model with amp-run (byte-exact movement and the cosine)
#   make regen     rewrites the golden files in tests/golden/

MODEL   ?= share/models/siglip-mlp.yaml
MACHINE ?= share/machines/amp1472.yaml
PLAN_FLAGS ?=
NAME    := $(basename $(notdir $(MODEL)))
# Where the flows write: ARTIFACTS/NAME by default; ART= names another
# directory (two models with the same basename, two variants of one).
ARTIFACTS ?= artifacts
ART     ?= $(ARTIFACTS)/$(NAME)

.PHONY: plan demo regen FORCE
comma := ,

# The flows' goals need their inputs: a missing MODEL or MACHINE is an
# error before anything runs, never an older model's results.
FLOW_GOALS := plan lower capture validate report
ifneq ($(filter $(FLOW_GOALS),$(MAKECMDGOALS)),)
ifeq ($(wildcard $(MODEL)),)
$(error MODEL=$(MODEL): no such file)
endif
ifeq ($(wildcard $(MACHINE)),)
$(error MACHINE=$(MACHINE): no such file)
endif
endif

# A file per flag variable, rewritten only when the flags change, so that
# changing flags remakes what they affect and nothing else.
$(ART)/plan.flags: FORCE | $(ART)
	@echo '$(PLAN_FLAGS)' | cmp -s - $@ || echo '$(PLAN_FLAGS)' > $@

# inputs_flags MODEL,MACHINE,HINT: the recipe of a DIR/inputs.flags file
# ($@), which records which model and machine files DIR holds the
# results of. Naming another machine file (even an older one) rewrites
# it, so what depends on it is remade; another model file (with the same
# basename) is an error, not a mix of two models' files.
inputs_flags = @if [ -e $@ ] && [ "$$(sed -n 's/^model //p' $@)" != '$(1)' ]; then \
		echo "make: $(@D) holds the results of $$(sed -n 's/^model //p' $@), not $(1):" \
			"$(3)" >&2; exit 1; fi; \
	printf 'model %s\nmachine %s\n' '$(1)' '$(2)' | cmp -s - $@ || \
		printf 'model %s\nmachine %s\n' '$(1)' '$(2)' > $@

$(ART)/inputs.flags: FORCE | $(ART)
	$(call inputs_flags,$(MODEL),$(MACHINE),set ART=DIR to keep them apart$(comma) or remove $(ART))

$(ART):
	mkdir -p $@

$(ART)/plan.yaml $(ART)/plan.txt &: $(MODEL) $(MACHINE) $(BIN)/amp-plan $(ART)/plan.flags $(ART)/inputs.flags | $(ART)
	$(BIN)/amp-plan --machine $(MACHINE) $(PLAN_FLAGS) --explain -o $(ART)/plan.yaml $(MODEL) > $(ART)/plan.txt

$(ART)/composed.yaml: $(ART)/plan.yaml $(BIN)/amp-compose
	$(BIN)/amp-compose -o $@ $<

plan: all $(ART)/composed.yaml

WHOLE := share/models/siglip-so400m.yaml
ONE   := share/models/siglip-so400m-1layer.yaml

demo: deps
	@$(MAKE) --no-print-directory -s all
	@echo "== $(WHOLE): 27 layers, batch 2: compile and capture at the machine's own limits =="
	@set -o pipefail; $(MAKE) --no-print-directory capture MODEL=$(WHOLE) | \
		sed -En 's|^(bin/amp-[a-z]+)( .*)? -o ([^ ]+).*|  \1 -> \3|p' | \
		{ grep . || echo "  (every stage of artifacts/siglip-so400m is up to date)"; }
	@echo
	@cat $(ARTIFACTS)/siglip-so400m/summary.txt
	@echo
	@echo "== $(ONE): validation on the machine model =="
	@echo "(calibrated fp8 scales; planned, emitted and run at the machine's own limits)"
	@set -o pipefail; $(MAKE) --no-print-directory validate MODEL=$(ONE) | tail -2

# Golden stage files for the small models: `make regen` rewrites them, so a
# change in the planner shows up as a diff under tests/golden/.
GOLDEN_MODELS := share/models/tiny-mlp.yaml tests/models/vit-tiny.yaml
regen: all
	@for f in $(GOLDEN_MODELS); do \
		m=$$(basename $$f .yaml); g=tests/golden/$$m; mkdir -p $$g; \
		$(BIN)/amp-plan -o $$g/plan.yaml $$f && \
		$(BIN)/amp-compose -o $$g/composed.yaml $$g/plan.yaml && \
		$(BIN)/amp-expand -o $$g/expanded.yaml $$g/composed.yaml && \
		$(BIN)/amp-exchange -o $$g/exchange.yaml $$g/expanded.yaml && \
		$(BIN)/amp-group -o $$g/grouped.yaml $$g/exchange.yaml && \
		$(BIN)/amp-capture -o $$g/capture.json $$g/grouped.yaml && \
		echo "regen: $$g/{plan,composed,expanded,exchange,grouped}.yaml, $$g/capture.json"; \
	done
