# The capture flow (included by the top-level Makefile).
#
#   make capture MODEL=share/models/X.yaml [LIMITS='--table-budget N --fragment-limit N']
#       writes artifacts/X/: every stage file, program.amp (when it fits the
#       limits), emit.txt (amp-emit's report: a line per tile, the tables
#       of the tile with the most phase by phase, or its failure),
#       capture.json, tiles.tsv (amp-capture --tiles: per tile and per
#       tile and phase) and summary.txt (the totals, compute, exchange, sync
#       and total cycles among them, and the floors beside them; cycles by
#       op; the phase table, each phase's runs, its floor and ratio, and a
#       total row that adds up to the totals; the top movement classes;
#       amp-emit's report but its per-tile lines). LIMITS
#       override the machine's policy for amp-emit and amp-capture alike
#       (--sram-limit: amp-emit only). Each file is remade only when its
#       inputs, its tool or its flags changed.

LIMITS ?=
JQ := share/jq
# The program carries its model, so that amp-run checks it against the
# model (amp-emit --model); a plan made with --scales in PLAN_FLAGS has no
# scales file the flow knows, so its program is written --no-model (amp-run
# then says so on every run; make validate checks the model's numbers).
EMIT_MODEL = $(if $(findstring --scales,$(PLAN_FLAGS)),--no-model,--model $(MODEL))

.PHONY: capture

$(ART)/limits.flags: FORCE | $(ART)
	@echo '$(LIMITS)' | cmp -s - $@ || echo '$(LIMITS)' > $@

# The program is written only when every tile fits its limits; emit.txt
# always says which, so the flow goes on to the capture either way.
# A recipe that writes $@.tmp removes it however it ends (an interrupt too).
$(ART)/emit.txt: $(ART)/grouped.yaml.zst $(BIN)/amp-emit $(ART)/limits.flags
	@$(call stale,$@)
	@set -e; trap 'rm -f $@.tmp' EXIT; trap 'exit 130' INT TERM HUP; if $(BIN)/amp-emit --machine $(MACHINE) $(EMIT_MODEL) --report $(LIMITS) -o $(ART)/program.amp $< 2> $@.tmp; then \
		echo "program: $(ART)/program.amp ($$(wc -c < $(ART)/program.amp) bytes)" >> $@.tmp; \
	else \
		rm -f $(ART)/program.amp; \
		if grep -q '^amp-emit: cannot \(write\|create\|rename\|open\)' $@.tmp; then cat $@.tmp >&2; exit 1; fi; \
		echo "program: not written (amp-emit refused it; its reason is above)" >> $@.tmp; \
	fi; mv $@.tmp $@

# amp-capture reports against the table budget and the fragment limit;
# it takes no SRAM limit (the capture holds every tile's SRAM peak, and
# amp-emit's verdict on it is in emit.txt), so --sram-limit goes to
# amp-emit alone.
capture_limits = $(filter-out --sram-limit=%,$(subst --sram-limit ,--sram-limit=,$(LIMITS)))

$(ART)/capture.json: $(ART)/grouped.yaml.zst $(BIN)/amp-capture $(ART)/limits.flags
	@$(call stale,$@)
	$(BIN)/amp-capture --machine $(MACHINE) $(capture_limits) --tiles $(ART)/tiles.tsv -o $@ $<

$(ART)/summary.txt: $(ART)/capture.json $(ART)/emit.txt $(wildcard $(JQ)/*.jq)
	@set -e -o pipefail; trap 'rm -f $@.tmp' EXIT; trap 'exit 130' INT TERM HUP; { jq -r -f $(JQ)/summary-head.jq $<; \
	  echo; { printf 'op\tcompute\texchange\tsync\tlocal_copy\ttotal\n'; \
	  jq -r -f $(JQ)/op-table.jq $<; } | column -t -s '	'; \
	  echo; echo "phases (transfers, bytes, max_row, max_frag and cycles per run; total_cycles and floor over every run; ratio: cycles / floor)"; \
	  { printf 'phase\tlabels\truns\ttransfers\tbytes\tmax_row\tmax_frag\tcycles\ttotal_cycles\tfloor\tratio\n'; \
	  jq -r -f $(JQ)/phase-table.jq $<; } | column -t -s '	'; \
	  echo; echo "top movement classes by receiver payload"; \
	  { printf 'phase\top.operand\ttensor\tmovement\tsends\treceiver_bytes\treplication\n'; \
	  jq -r --argjson n 10 -f $(JQ)/top-classes.jq $<; } | column -t -s '	'; \
	  echo; grep -Ev '^amp-emit: tile [0-9]+: [0-9]+ bytes \(tensors ' $(ART)/emit.txt | sed 's/^amp-emit: //'; } > $@.tmp; mv $@.tmp $@

capture: all $(ART)/summary.txt
	@cat $(ART)/summary.txt

# make trace MODEL=... [TRACE_TILES=0-45,775]: artifacts/X/trace.json.gz,
# the modelled timeline (amp-capture --trace, formats/capture.md "Trace")
# for Perfetto or chrome://tracing, gzip-compressed without a name or time
# (gzip -n), so the same inputs give the same bytes. TRACE_TILES chooses
# the tiles (default: tile 0 and every step's and phase's busiest).
TRACE_TILES ?=

.PHONY: trace

$(ART)/trace.flags: FORCE | $(ART)
	@echo '$(TRACE_TILES)' | cmp -s - $@ || echo '$(TRACE_TILES)' > $@

$(ART)/trace.json.gz: $(ART)/grouped.yaml.zst $(BIN)/amp-capture $(ART)/limits.flags $(ART)/trace.flags
	@set -e; trap 'rm -f $@.tmp $(ART)/trace.json.tmp' EXIT; trap 'exit 130' INT TERM HUP; \
	$(BIN)/amp-capture --machine $(MACHINE) $(capture_limits) $(if $(TRACE_TILES),--trace-tiles $(TRACE_TILES)) \
		--trace $(ART)/trace.json.tmp -o /dev/null $<; \
	gzip -n -9 -c $(ART)/trace.json.tmp > $@.tmp; mv $@.tmp $@

trace: all $(ART)/trace.json.gz
	@echo "trace: $(ART)/trace.json.gz ($$(wc -c < $(ART)/trace.json.gz) bytes): open it at https://ui.perfetto.dev or in chrome://tracing"
