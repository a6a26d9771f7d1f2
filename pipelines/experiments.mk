# Controlled experiments (included by the top-level Makefile).
#
#   make experiment-weights   amp-group --weights direct against forwarding (siglip-mlp)
#   make experiment-compose   amp-compose --no-compose against composition (siglip-mlp)
#   make experiment-staging   SigLIP-so400m's layer GEMMs (STAGING_MODEL), each on the
#                             grid amp-plan chose with every staging pair (a: direct or
#                             pack-once, the result: direct or unpack) and on its next
#                             best grids: transfers, fragments, largest row, table bytes
#                             per tile (p50, p90, max), SRAM, exchange, local-copy and
#                             compute cycles (bench/staging.c; docs/staging.md has the
#                             figures measured). Takes minutes.
#   make experiment-search    the search oracle (bench/search-oracle.sh, docs/search.md):
#                             a brute force over pinned GEMM choices, each lowered and
#                             captured by the tools and checked by amp-emit, on
#                             siglip-mlp (coordinate descent over mlp_up and mlp_down)
#                             and SigLIP-so400m's 1-layer mlp_down; prints every
#                             candidate, the top 10 fitting, the best found beside
#                             amp-plan's own choices. SEARCH_CASES= picks the cases
#                             (mlp, so400m), SEARCH_GRIDS= the grids per round (5 for
#                             mlp, 6 for so400m), SEARCH_JOBS= the lowerings at once
#                             (2), SEARCH_FRESH=1 forgets earlier results. Takes minutes.
#
# Each builds both variants under artifacts/experiments/NAME/ (NAME:
# EXP_MODEL's basename, default siglip-mlp) and prints amp-compare's
# tables: the summaries, the ops and, per phase, transfers, max row bytes
# and modelled cycles side by side, with deltas.

EXP_ROOT := $(ARTIFACTS)/experiments
EXP_MODEL ?= share/models/siglip-mlp.yaml
EXP := $(EXP_ROOT)/$(basename $(notdir $(EXP_MODEL)))

.PHONY: experiment-weights experiment-compose experiment-staging experiment-search

ifneq ($(filter experiment-weights experiment-compose,$(MAKECMDGOALS)),)
ifeq ($(wildcard $(EXP_MODEL)),)
$(error EXP_MODEL=$(EXP_MODEL): no such file)
endif
endif

# Keep the intermediate stage files of the pattern rules, for diffing
# (these files only: a global .SECONDARY would let make skip a missing
# prerequisite, such as a mistyped model, and reuse old results).
EXP_VARIANTS := direct forward compose nocompose
.SECONDARY: $(foreach v,$(EXP_VARIANTS),$(EXP)/$(v).composed.yaml $(EXP)/$(v).exchange.yaml.zst)

# Which model and machine files EXP holds the results of (plan.mk's
# inputs_flags): another machine file remakes the plan.
$(EXP)/inputs.flags: FORCE | $(EXP)
	$(call inputs_flags,$(EXP_MODEL),$(MACHINE),remove $(EXP))

$(EXP) $(EXP_ROOT):
	@$(call amp_claim,$@)

$(EXP)/plan.yaml: $(EXP_MODEL) $(MACHINE) $(BIN)/amp-plan $(EXP)/inputs.flags | $(EXP)
	$(BIN)/amp-plan --machine $(MACHINE) -o $@ $<

$(EXP)/%.composed.yaml: $(EXP)/plan.yaml $(BIN)/amp-compose
	$(BIN)/amp-compose $(if $(findstring nocompose,$*),--no-compose) -o $@ $<

$(EXP)/%.exchange.yaml.zst: $(EXP)/%.composed.yaml $(BIN)/amp-expand $(BIN)/amp-exchange
	set -o pipefail; $(BIN)/amp-expand -z $< | $(BIN)/amp-exchange -z -o $@

$(EXP)/%.capture.json: $(EXP)/%.exchange.yaml.zst $(BIN)/amp-group $(BIN)/amp-capture
	$(BIN)/amp-group $(if $(findstring forward,$*),--weights forward,--weights direct) -z -o $(EXP)/$*.grouped.yaml.zst $<
	$(BIN)/amp-capture --machine $(MACHINE) -o $@ $(EXP)/$*.grouped.yaml.zst

# Both weight variants start from the same composed plan.
$(EXP)/direct.composed.yaml $(EXP)/forward.composed.yaml: $(EXP)/compose.composed.yaml
	cp $< $@

experiment-weights: all $(EXP)/direct.capture.json $(EXP)/forward.capture.json
	@echo "parameter delivery on $(EXP_MODEL): --weights direct vs forward"
	@$(BIN)/amp-compare --names direct,forward $(EXP)/direct.capture.json $(EXP)/forward.capture.json

experiment-compose: all $(EXP)/nocompose.capture.json $(EXP)/compose.capture.json
	@echo "composition on $(EXP_MODEL): --no-compose vs compose"
	@$(BIN)/amp-compare --names no-compose,compose $(EXP)/nocompose.capture.json $(EXP)/compose.capture.json

STAGING_MODEL ?= share/models/siglip-so400m.yaml

$(OBJ)/bench/staging: bench/staging.c $(OBJ)/libamp.a $(LIB_HDR)
	@mkdir -p $(@D)
	$(CC) $(WFLAGS) $(CFLAGS) $(PKG_CFLAGS) -Ilib $< $(OBJ)/libamp.a $(PKG_LIBS) $(LDSAN) -lm -pthread -o $@

experiment-staging: all $(OBJ)/bench/staging | $(EXP_ROOT)
	@trap 'rm -f $(EXP_ROOT)/staging.txt.tmp' EXIT; trap 'exit 130' INT TERM HUP; \
		$(OBJ)/bench/staging $(STAGING_MODEL) $(MACHINE) > $(EXP_ROOT)/staging.txt.tmp && \
		mv $(EXP_ROOT)/staging.txt.tmp $(EXP_ROOT)/staging.txt
	@cat $(EXP_ROOT)/staging.txt

# The search oracle: its scratch (every candidate's model, plan, capture
# and result, kept for reruns with the same tools) in EXP_ROOT/search.
SEARCH_CASES ?=
experiment-search: all | $(EXP_ROOT)
	@MACHINE=$(MACHINE) BIN=$(BIN) SEARCH_DIR=$(EXP_ROOT)/search bash bench/search-oracle.sh $(SEARCH_CASES)
