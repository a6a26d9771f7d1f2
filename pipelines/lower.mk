# Flows that lower a planned model (included by the top-level Makefile).
#
#   make lower MODEL=share/models/X.yaml [GROUP_FLAGS=--weights direct]
#       writes artifacts/X/expanded.yaml.zst, exchange.yaml.zst and
#       grouped.yaml.zst (zstd: `zstd -dc FILE | less`), each remade only
#       when its input or its tool changed.

GROUP_FLAGS ?=

.PHONY: lower

$(ART)/group.flags: FORCE | $(ART)
	@echo '$(GROUP_FLAGS)' | cmp -s - $@ || echo '$(GROUP_FLAGS)' > $@

$(ART)/expanded.yaml.zst: $(ART)/composed.yaml $(BIN)/amp-expand
	@$(call stale,$@)
	$(BIN)/amp-expand -z -o $@ $<

$(ART)/exchange.yaml.zst: $(ART)/expanded.yaml.zst $(BIN)/amp-exchange
	@$(call stale,$@)
	$(BIN)/amp-exchange -z -o $@ $<

$(ART)/grouped.yaml.zst: $(ART)/exchange.yaml.zst $(BIN)/amp-group $(ART)/group.flags
	@$(call stale,$@)
	$(BIN)/amp-group $(GROUP_FLAGS) -z -o $@ $<

lower: all $(ART)/grouped.yaml.zst
