# The report flow (included by the top-level Makefile).
#
#   make report MODEL=share/models/X.yaml [LIMITS=...]
#       the capture flow (pipelines/capture.mk), then artifacts/X/report.html,
#       one page that needs nothing beside it (no network): a timeline of
#       the program's phases and compute steps with each phase's floor;
#       click a phase for its per-tile heatmaps (received, sent, fragments,
#       busy), hover a tile for its figure; the program's heatmaps (tables,
#       SRAM, fragments, received), each scaled to its limit with the tiles
#       over it marked; memory over program steps and the worst tile's
#       tensors; the summary with time and throughput; the movement classes
#       (Graphviz, inlined, searchable, with a legend) and the summary's
#       tables. pipelines/report.sh says what each file is; its data and
#       flow graph are also in artifacts/X/report/. Installs graphviz
#       (and gnuplot-nox, for make report-compare) first (report-deps).
#       The same inputs give the same bytes; the page is remade only when
#       the capture, its queries or the scripts changed.
#
# REPORT_PKGS is what make report needs, REPORT_TEST_PKGS what its tests
# need too: tests/bats/report.bats opens the page in headless chromium and
# drives it with playwright-core (tests/browser/, npm). make check installs
# them (report-test-deps): the Debian packages, npm when no npm command
# comes with nodejs, then `npm ci` in tests/browser, skipped when its
# node_modules was installed from the same package-lock.json (so it needs
# no network then); a failed npm ci only warns, and the browser test skips
# saying why.

# (gnuplot-nox draws make report-compare's heatmap, pipelines/compare.mk)
REPORT_PKGS      := graphviz gnuplot-nox
REPORT_TEST_PKGS := $(REPORT_PKGS) chromium nodejs
BROWSER_TEST     := tests/browser

.PHONY: report report-deps report-test-deps

report-deps:
	@$(call install_missing,$(REPORT_PKGS))

# After deps, so that make -j check never runs two apt-gets at once.
report-test-deps: | deps
	@$(call install_missing,$(REPORT_TEST_PKGS))
	@command -v npm >/dev/null || { $(call install_missing,npm); }
	@if cmp -s $(BROWSER_TEST)/package-lock.json $(BROWSER_TEST)/node_modules/.amp-lock; then :; \
	elif echo "deps: npm ci in $(BROWSER_TEST) (playwright-core)" && \
		PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --prefix $(BROWSER_TEST) --ignore-scripts --no-audit --no-fund >/dev/null; then \
		cp $(BROWSER_TEST)/package-lock.json $(BROWSER_TEST)/node_modules/.amp-lock; \
	else echo "deps: npm ci failed in $(BROWSER_TEST): the browser test will skip"; fi

REPORT_FILES := report.html report/data.json report/trace.json report/flow.dot report/flow.svg

# pipelines/report.sh writes the page and its data into report.tmp/,
# which replaces them only when it succeeds, and is removed however the
# recipe ends (an interrupt too).
$(addprefix $(ART)/,$(REPORT_FILES)) &: $(ART)/capture.json $(ART)/emit.txt $(ART)/trace.json.gz pipelines/report.sh pipelines/grid.sh \
		$(wildcard share/report/*) $(wildcard $(JQ)/*.jq) | report-deps
	@trap 'rm -rf $(ART)/report.tmp' EXIT; trap 'exit 130' INT TERM HUP; \
	rm -rf $(ART)/report.tmp && bash pipelines/report.sh $(ART) $(ART)/report.tmp && \
	rm -rf $(ART)/report && mv $(ART)/report.tmp/report $(ART)/report && \
	mv $(ART)/report.tmp/report.html $(ART)/report.html

report: all $(ART)/summary.txt $(ART)/report.html
	@echo "report: $(ART)/report.html ($$(cat $(addprefix $(ART)/,$(REPORT_FILES)) | wc -c) bytes with its data and flow graph in $(ART)/report/)"
