# The comparison flow (included by the top-level Makefile).
#
#   make report-compare A=CAPTURE_OR_DIR B=CAPTURE_OR_DIR [CMP_OUT=DIR]
#       compares two captures with amp-compare --tiles (A the baseline)
#       and draws the per-tile difference of bytes received, B - A, as a
#       gnuplot heatmap: CMP_OUT/received_diff.png, with compare.txt,
#       compare.tsv, received_diff.dat and received_diff.gp beside it
#       (pipelines/compare.sh says what each file is). A and B are each
#       an artifacts directory (make capture's: DIR/capture.json and
#       DIR/tiles.tsv) or a capture file, whose tiles file is tiles.tsv
#       beside a capture.json, else the capture's name with .tsv for
#       .json; ATILES= and BTILES= name others. CMP_OUT defaults to
#       ARTIFACTS/compare/NAME_A-vs-NAME_B (the directories' or files'
#       base names). Installs gnuplot-nox first (report-deps). The same
#       inputs give the same bytes; the files are remade only when the
#       captures, the tiles files or the scripts changed.

.PHONY: report-compare

ifneq ($(filter report-compare,$(MAKECMDGOALS)),)
ifeq ($(and $(A),$(B)),)
$(error make report-compare: give A= and B=, each an artifacts directory or a capture file)
endif
# cmp_capture X, cmp_tiles X: the capture and tiles file of X (a
# directory or a capture file); cmp_name X: its name in CMP_OUT.
cmp_capture = $(if $(wildcard $(1)/.),$(patsubst %/,%,$(1))/capture.json,$(1))
cmp_tiles = $(if $(wildcard $(1)/.),$(patsubst %/,%,$(1))/tiles.tsv,$(if $(filter capture.json,$(notdir $(1))),$(dir $(1))tiles.tsv,$(basename $(1)).tsv))
cmp_name = $(if $(wildcard $(1)/.),$(notdir $(patsubst %/,%,$(1))),$(if $(filter capture.json,$(notdir $(1))),$(notdir $(patsubst %/,%,$(dir $(1)))),$(basename $(notdir $(1)))))
CMP_A    := $(call cmp_capture,$(A))
CMP_B    := $(call cmp_capture,$(B))
ATILES   ?= $(call cmp_tiles,$(A))
BTILES   ?= $(call cmp_tiles,$(B))
CMP_OUT  ?= $(ARTIFACTS)/compare/$(call cmp_name,$(A))-vs-$(call cmp_name,$(B))
$(foreach f,$(CMP_A) $(ATILES) $(CMP_B) $(BTILES),$(if $(wildcard $(f)),,$(error make report-compare: $(f): no such file (make capture writes a capture and its tiles file))))

CMP_FILES := $(addprefix $(CMP_OUT)/,compare.txt compare.tsv received_diff.dat received_diff.gp received_diff.png)

# CMP_OUT is claimed first (amp_claim, pipelines/art.mk): a directory
# amp did not make is refused. pipelines/compare.sh writes into
# CMP_OUT/report-compare.tmp/, whose
# files replace CMP_OUT's when it succeeds; when it fails, CMP_OUT's
# earlier files are removed too (they compared other inputs: nothing
# stale is left to be taken for the comparison of these). The temporary
# directory is removed however the recipe ends; nothing else in CMP_OUT
# is touched.
CMP_TMP := $(CMP_OUT)/report-compare.tmp
$(CMP_FILES) &: $(CMP_A) $(ATILES) $(CMP_B) $(BTILES) pipelines/compare.sh pipelines/grid.sh $(BIN)/amp-compare | report-deps
	@$(call amp_claim,$(CMP_OUT))
	@trap 'rm -rf $(CMP_TMP)' EXIT; trap 'exit 130' INT TERM HUP; \
	rm -rf $(CMP_TMP); \
	if bash pipelines/compare.sh $(BIN) $(CMP_A) $(ATILES) $(CMP_B) $(BTILES) $(CMP_TMP); then \
		for f in $(notdir $(CMP_FILES)); do mv $(CMP_TMP)/$$f $(CMP_OUT)/$$f || exit 1; done; \
	else \
		rm -f $(CMP_FILES); exit 1; \
	fi

report-compare: $(CMP_FILES)
	@echo "report-compare: $(CMP_OUT)/received_diff.png ($$(cat $(CMP_FILES) | wc -c) bytes with compare.txt, compare.tsv and the plot's data)"
endif
