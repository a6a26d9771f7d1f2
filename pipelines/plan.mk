# Flows that plan a model. Included by the top-level Makefile, which defines
# BIN (the amp-* binaries) and the build rules.
#
#   make plan MODEL=share/models/X.yaml [MACHINE=...] [PLAN_FLAGS=...]
#       writes artifacts/X/plan.yaml, plan.txt (amp-plan --explain) and
#       composed.yaml; each file is remade only when its inputs or its tool
#       changed.
#   make demo      plans siglip-mlp and prints the per-GEMM table
#   make regen     rewrites the golden files in tests/golden/

MODEL   ?= share/models/siglip-mlp.yaml
MACHINE ?= share/machines/amp1472.yaml
PLAN_FLAGS ?=
NAME    := $(basename $(notdir $(MODEL)))
ART     := artifacts/$(NAME)

.PHONY: plan demo regen

$(ART):
	mkdir -p $@

$(ART)/plan.yaml $(ART)/plan.txt &: $(MODEL) $(MACHINE) $(BIN)/amp-plan | $(ART)
	$(BIN)/amp-plan --machine $(MACHINE) $(PLAN_FLAGS) --explain -o $(ART)/plan.yaml $(MODEL) > $(ART)/plan.txt

$(ART)/composed.yaml: $(ART)/plan.yaml $(BIN)/amp-compose
	$(BIN)/amp-compose -o $@ $<

plan: all $(ART)/composed.yaml

demo: deps
	@$(MAKE) --no-print-directory all
	@$(MAKE) --no-print-directory plan MODEL=share/models/siglip-mlp.yaml
	@echo
	@cat artifacts/siglip-mlp/plan.txt
	@echo
	@echo "stage files: artifacts/siglip-mlp/plan.yaml, artifacts/siglip-mlp/composed.yaml"

# Golden stage files for the small models: `make regen` rewrites them, so a
# change in the planner shows up as a diff under tests/golden/.
GOLDEN_MODELS := tiny-mlp
regen: all
	@for m in $(GOLDEN_MODELS); do \
		mkdir -p tests/golden/$$m; \
		$(BIN)/amp-plan -o tests/golden/$$m/plan.yaml share/models/$$m.yaml && \
		$(BIN)/amp-compose -o tests/golden/$$m/composed.yaml tests/golden/$$m/plan.yaml && \
		echo "regen: tests/golden/$$m/{plan,composed}.yaml"; \
	done
