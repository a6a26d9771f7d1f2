# The report flow (included by the top-level Makefile).
#
#   make report MODEL=share/models/X.yaml [LIMITS=...]
#       the capture flow (pipelines/capture.mk), then artifacts/X/report.html:
#       the summary's tables, heatmaps of every tile's table bytes, SRAM
#       peak and bytes received (gnuplot, PNG) and the movement classes
#       from source to operand with their bytes (Graphviz, SVG), in
#       artifacts/X/report/ beside the page (pipelines/report.sh says what
#       each file is). Installs gnuplot-nox and graphviz first
#       (report-deps). The same inputs give the same bytes; the page is
#       remade only when the capture, its queries or the scripts changed.
#
# REPORT_PKGS is what make report needs, REPORT_TEST_PKGS what its test
# needs too (tests/bats/report.bats opens the page in headless chromium);
# make check installs the latter (report-test-deps).

REPORT_PKGS      := graphviz
REPORT_TEST_PKGS := $(REPORT_PKGS) chromium

.PHONY: report report-deps report-test-deps

report-deps:
	@$(call install_missing,$(REPORT_PKGS))

# After deps, so that make -j check never runs two apt-gets at once.
report-test-deps: | deps
	@$(call install_missing,$(REPORT_TEST_PKGS))

REPORT_FILES := report.html report/data.json report/flow.dot report/flow.svg

# pipelines/report.sh writes the page and its images into report.tmp/,
# which replaces them only when it succeeds, and is removed however the
# recipe ends (an interrupt too).
$(addprefix $(ART)/,$(REPORT_FILES)) &: $(ART)/capture.json $(ART)/emit.txt pipelines/report.sh \
		$(wildcard share/report/*) $(wildcard $(JQ)/*.jq) | report-deps
	@trap 'rm -rf $(ART)/report.tmp' EXIT; trap 'exit 130' INT TERM HUP; \
	rm -rf $(ART)/report.tmp && bash pipelines/report.sh $(ART) $(ART)/report.tmp && \
	rm -rf $(ART)/report && mv $(ART)/report.tmp/report $(ART)/report && \
	mv $(ART)/report.tmp/report.html $(ART)/report.html

report: all $(ART)/summary.txt $(ART)/report.html
	@echo "report: $(ART)/report.html ($$(cat $(addprefix $(ART)/,$(REPORT_FILES)) | wc -c) bytes with its data and flow graph in $(ART)/report/)"
