# Validation on the machine model (included by the top-level Makefile).
#
#   make validate MODEL=share/models/X.yaml [PLAN_FLAGS=...] [GROUP_FLAGS=...]
#                 [LIMITS=--table-budget N]
#       calibrates fp8 scales (artifacts/X/run/scales.yaml), plans with them
#       (and PLAN_FLAGS), lowers (amp-group with GROUP_FLAGS, so the variant
#       a capture looked at is the one validated), emits the program (LIMITS as for amp-emit) and runs it with
#       amp-run --model X --scales: the stage checked against the model and
#       the scales, byte-exact movement after every phase, and the outputs'
#       cosine against the FP32 reference interpreted from the model file
#       (artifacts/X/run/run.txt). Calibration reads the model alone.
#   make validate MODEL=share/models/X-decode.yaml PREFILL=share/models/X-prefill.yaml
#                 RUN_FLAGS='--generate 4'
#       a decoder: the prefill's program is made the same way (in its own
#       artifacts/X-prefill/run/) and run first (amp-run --prefill), and
#       RUN_FLAGS reach amp-run (--steps, --generate, --position).

RUN := $(ART)/run
RUN_FLAGS ?=
PREFILL ?=
# the prefill's program, made by a make of its own model
PRE_PROG := $(if $(PREFILL),$(ARTIFACTS)/$(basename $(notdir $(PREFILL)))/run/program.amp)

# run_stale FILE...: removes them before the recipe that makes the first
# runs, so that when a step fails nothing made by an earlier run of it or
# after it (the program, the run's report) stays looking current.
run_files := scales.yaml grouped.yaml.zst program.amp run.txt
run_stale = rm -f $(addprefix $(RUN)/,$(1))

.PHONY: validate

$(RUN):
	mkdir -p $@

$(RUN)/scales.yaml: $(MODEL) $(ART)/inputs.flags $(BIN)/amp-run | $(RUN)
	@$(call run_stale,$(run_files))
	$(BIN)/amp-run --calibrate $(MODEL) -o $@

$(RUN)/program.amp: $(RUN)/scales.yaml $(MODEL) $(MACHINE) $(ART)/limits.flags $(ART)/plan.flags \
		$(ART)/group.flags $(ART)/inputs.flags \
		$(BIN)/amp-plan $(BIN)/amp-compose $(BIN)/amp-expand $(BIN)/amp-exchange $(BIN)/amp-group $(BIN)/amp-emit
	@$(call run_stale,grouped.yaml.zst program.amp run.txt)
	set -o pipefail; $(BIN)/amp-plan --machine $(MACHINE) $(PLAN_FLAGS) --scales $< $(MODEL) | $(BIN)/amp-compose | \
		$(BIN)/amp-expand | $(BIN)/amp-exchange | $(BIN)/amp-group $(GROUP_FLAGS) -z -o $(RUN)/grouped.yaml.zst
	$(BIN)/amp-emit --machine $(MACHINE) $(LIMITS) --model $(MODEL) --scales $< -o $@ $(RUN)/grouped.yaml.zst

$(ART)/run.flags: FORCE | $(ART)
	@echo '$(RUN_FLAGS) $(PREFILL)' | cmp -s - $@ || echo '$(RUN_FLAGS) $(PREFILL)' > $@

# The prefill's make runs every time (FORCE): it compares the prefill
# model's content (its inputs.flags), which a date cannot show; the run
# is remade only when that make rewrote the program.
ifneq ($(PREFILL),)
$(PRE_PROG): $(PREFILL) $(MACHINE) $(ART)/limits.flags $(ART)/plan.flags $(ART)/group.flags \
		$(BIN)/amp-plan $(BIN)/amp-compose $(BIN)/amp-expand $(BIN)/amp-exchange $(BIN)/amp-group \
		$(BIN)/amp-emit $(BIN)/amp-run FORCE
	@set -o pipefail; $(MAKE) --no-print-directory $@ MODEL=$(PREFILL) PREFILL= \
		ART=$(patsubst %/run/program.amp,%,$@) AMP_FLOW_LOCKED=1 | { grep -v "^make.*: '.*' is up to date\.$$" || true; }
endif

$(RUN)/run.txt: $(RUN)/program.amp $(RUN)/scales.yaml $(MODEL) $(BIN)/amp-run $(PRE_PROG) $(ART)/run.flags
	@$(call run_stale,run.txt)
	@trap 'rm -f $@.tmp' EXIT; trap 'exit 130' INT TERM HUP; \
		$(BIN)/amp-run --machine $(MACHINE) --model $(MODEL) --scales $(RUN)/scales.yaml \
		$(if $(PRE_PROG),--prefill $(PRE_PROG)) $(RUN_FLAGS) $< > $@.tmp && mv $@.tmp $@

validate: all $(RUN)/run.txt
	@cat $(RUN)/run.txt
