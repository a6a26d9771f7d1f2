# Flows that plan a model. Included by the top-level Makefile, which defines
# BIN (the amp-* binaries) and the build rules.
#
#   make plan MODEL=share/models/X.yaml [MACHINE=...] [PLAN_FLAGS=...]
#       writes artifacts/X/plan.yaml, plan.txt (amp-plan --explain) and
#       composed.yaml; each file is remade only when its inputs (by content:
#       inputs.flags holds their sha256) or its tool changed. When amp-plan
#       fails, plan.failed.txt keeps its --explain output and nothing made
#       from an earlier plan stays. ART=DIR writes to DIR instead
#       (ARTIFACTS=DIR: DIR/X). A path make cannot quote is refused
#       (pipelines/art.mk).
#   make demo      compiles and captures the 27-layer SigLIP-so400m (a line
#                  per stage, then summary.txt), validates the 1-layer
#                  model with amp-run (byte-exact movement and the cosine),
#                  and runs a 1-layer decoder: a prefill of 512 tokens for
#                  each of 8 sequences, then 4 decode steps that generate
#   make regen     rewrites the golden files in tests/golden/

PLAN_FLAGS ?=
# MODEL, MACHINE, NAME, ARTIFACTS and ART: pipelines/art.mk

.PHONY: plan demo regen FORCE
comma := ,

# stale FILE: the command that removes FILE and what is made from it
# (ART's files in the order the flows make them; emit.txt and
# capture.json both come from grouped.yaml.zst, and only summary.txt and
# the report from them). Each flow recipe runs it first: when a stage
# fails, nothing from an earlier run of it or after it stays looking
# current (make would keep an unchanged target). A failed plan also
# removes the validation's program and run (run/, pipelines/run.mk), made
# from the same model, machine and flags.
flow_files := plan.yaml plan.txt plan.failed.txt composed.yaml expanded.yaml.zst exchange.yaml.zst grouped.yaml.zst emit.txt \
	program.amp capture.json tiles.tsv summary.txt report.html report
flow_from = $(if $(2),$(if $(filter $(1),$(firstword $(2))),$(2),$(call flow_from,$(1),$(wordlist 2,99,$(2)))))
flow_tail := summary.txt report.html report
stale = rm -rf $(addprefix $(ART)/,$(if $(filter emit.txt,$(notdir $(1))),emit.txt program.amp $(flow_tail),$(if \
	$(filter capture.json,$(notdir $(1))),capture.json tiles.tsv $(flow_tail),$(call flow_from,$(notdir $(1)),$(flow_files)))))


# A file per flag variable, rewritten only when the flags change, so that
# changing flags remakes what they affect and nothing else.
$(ART)/plan.flags: FORCE | $(ART)
	@echo '$(PLAN_FLAGS)' | cmp -s - $@ || echo '$(PLAN_FLAGS)' > $@

# inputs_flags MODEL,MACHINE,HINT: the recipe of a DIR/inputs.flags file
# ($@), which records which model and machine files DIR holds the
# results of, and the sha256 of their contents. Naming another machine
# file (even an older one), or a model or machine whose content changed
# whatever its mtime (cp -p, rsync, tar keep an older one), rewrites it,
# so what depends on it is remade; another model file (with the same
# basename) is an error, not a mix of two models' files.
inputs_flags = @if [ -e $@ ] && [ "$$(sed -n 's/^model //p' $@)" != '$(1)' ]; then \
		echo "make: $(@D) holds the results of $$(sed -n 's/^model //p' $@), not $(1):" \
			"$(3)" >&2; exit 1; fi; \
	f=$$(printf 'model %s\nmachine %s\nmodel-sha256 %s\nmachine-sha256 %s\n' '$(1)' '$(2)' \
		"$$(sha256sum < '$(1)' | cut -c1-64)" "$$(sha256sum < '$(2)' | cut -c1-64)") || exit 1; \
	printf '%s\n' "$$f" | cmp -s - $@ || printf '%s\n' "$$f" > $@

$(ART)/inputs.flags: FORCE | $(ART)
	$(call inputs_flags,$(MODEL),$(MACHINE),set ART=DIR to keep them apart$(comma) or remove $(ART))

$(ART):
	@$(call amp_claim,$@)

# When amp-plan fails after planning (the model does not fit), its
# --explain output is kept as plan.failed.txt (plan.txt is a target, which
# a failed recipe removes), and make says where.
$(ART)/plan.yaml $(ART)/plan.txt &: $(MODEL) $(MACHINE) $(BIN)/amp-plan $(ART)/plan.flags $(ART)/inputs.flags | $(ART)
	@$(call stale,plan.yaml)
	$(BIN)/amp-plan --machine $(MACHINE) $(PLAN_FLAGS) --explain -o $(ART)/plan.yaml $(MODEL) > $(ART)/plan.txt || \
		{ rm -f $(addprefix $(ART)/run/,grouped.yaml.zst program.amp run.txt); \
		  if [ -s $(ART)/plan.txt ]; then mv $(ART)/plan.txt $(ART)/plan.failed.txt; \
		  echo "make: amp-plan failed; its --explain output (the candidates it weighed) is in" \
			"$(ART)/plan.failed.txt" >&2; fi; exit 1; }

$(ART)/composed.yaml: $(ART)/plan.yaml $(BIN)/amp-compose
	@$(call stale,$@)
	$(BIN)/amp-compose -o $@ $<

plan: all $(ART)/composed.yaml

WHOLE := share/models/siglip-so400m.yaml
ONE   := share/models/siglip-so400m-1layer.yaml
DEC_PREFILL := share/models/smollm2-360m-1layer-prefill.yaml
DEC_DECODE  := share/models/smollm2-360m-1layer-decode.yaml
# The demo's last line, from the prefill's and the decode's captures
# (jq -s): modelled cycles of each, and tokens/s at the machine's clock.
DEC_CYCLES_JQ := "modelled cycles: prefill \(.[0].summary.total_cycles), decode step \(.[1].summary.total_cycles)" + (if .[1].summary.throughput then " (at \(.[1].machine.clock_hz / 1e9) GHz: \(.[0].summary.throughput.per_second | round) tokens/s prefill, \(.[1].summary.throughput.per_second | round) tokens/s decode)" else "" end)

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
	@echo
	@echo "== $(DEC_DECODE): a decoder layer with its KV cache =="
	@echo "(a prefill of 512 tokens for each of 8 sequences writes the cache; 4 decode steps append to it"
	@echo " and generate, each sequence's next token fed back; every run byte-exact and against FP32)"
	@set -o pipefail; $(MAKE) --no-print-directory validate MODEL=$(DEC_DECODE) PREFILL=$(DEC_PREFILL) \
		RUN_FLAGS='--generate 4' | grep -E '^(movement|run (0|11) |next token|generate: sequence 0)'
	@set -o pipefail; for d in $(DEC_PREFILL) $(DEC_DECODE); do \
		bin/amp-capture --machine $(MACHINE) $(ARTIFACTS)/$$(basename $$d .yaml)/run/grouped.yaml.zst; done | \
		jq -rs '$(DEC_CYCLES_JQ)'

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
