#!/usr/bin/env bats
# make report (pipelines/report.mk, pipelines/report.sh): the page and its
# inlined data against capture.json and tiles.tsv, the summary, the
# timeline, the heatmaps' scales and over-limit marks, memory over steps,
# the flow graph's bytes against the bytes every tile receives,
# determinism, remaking, failures, the page opened in headless chromium
# (--dump-dom), and driven in it by playwright-core (tests/browser/).
#
# As in flows.bats: tests/models/flow-tiny.yaml, ARTIFACTS in the test's
# own directory, a private copy of the binaries as BIN. Skipped, saying
# why, when dot, chromium, node or tests/browser's playwright-core is
# missing; make check installs them (report-test-deps).

load common
bats_require_minimum_version 1.5.0

TINY=tests/models/flow-tiny.yaml
FILES=(report.html report/data.json report/trace.json report/flow.dot report/flow.svg)

# One report of flow-tiny for the tests that only read it (shared_report),
# made once with its own copy of the binaries.
setup_file() {
	command -v dot >/dev/null || return 0
	BATS_TEST_TMPDIR=$BATS_FILE_TMPDIR private_bin
	make -C "$ROOT" --no-print-directory report MODEL=$TINY "${SAN_ARG[@]}" BIN="$BIN" \
		ARTIFACTS="$BATS_FILE_TMPDIR/art" > "$BATS_FILE_TMPDIR/make.out" 2>&1 ||
		{ cat "$BATS_FILE_TMPDIR/make.out" >&3; return 1; }
}

setup() {
	cd "$BATS_TEST_TMPDIR" || return 1
	ARTS=$BATS_TEST_TMPDIR/art
	A=$ARTS/flow-tiny
	private_bin
	needs dot
}

# shared_report: A is setup_file's report of flow-tiny.
shared_report() {
	A=$BATS_FILE_TMPDIR/art/flow-tiny
	[ -s "$A/report.html" ] || fail "setup_file made no report"
}

# needs COMMAND...: skip the test, saying why, when a COMMAND is missing.
needs() {
	local c
	for c in "$@"; do
		command -v "$c" >/dev/null ||
			skip "$c is not installed (make report-test-deps installs graphviz, chromium, nodejs and npm)"
	done
}

# report_of MODEL [VAR=VALUE...]: make report MODEL=MODEL with the private BIN.
report_of() {
	local model=$1
	shift
	run make -C "$ROOT" --no-print-directory report MODEL="$model" "${SAN_ARG[@]}" BIN="$BIN" \
		ARTIFACTS="$ARTS" "$@"
}

# report [VAR=VALUE...]: make report on flow-tiny.
report() {
	report_of $TINY "$@"
}

# mtimes DIR: every file of DIR's report with its modification time.
mtimes() {
	(cd "$1" && stat -c '%n %.9Y' report.html report/*)
}

# commas N: 81920 -> 81,920
commas() {
	sed -E ':a; s/([0-9])([0-9]{3})($|[^0-9])/\1,\2\3/; ta' <<<"$1"
}

# browse PAGE: the DOM of PAGE after load in headless chromium.
browse() {
	local profile
	profile=$(mktemp -d "$BATS_TEST_TMPDIR/chromium.XXXXXX")
	timeout 60 chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
		--disable-background-networking --disable-component-update --disable-sync \
		--user-data-dir="$profile" --dump-dom "file://$1" 2>/dev/null
}

# variant DIR [JQ-FILTER]: the shared report's capture (through
# JQ-FILTER), tiles.tsv and emit.txt in DIR, and its page made by
# report.sh in DIR/out.
variant() {
	mkdir -p "$1"
	jq "${2:-.}" "$A/capture.json" > "$1/capture.json"
	cp "$A/tiles.tsv" "$A/emit.txt" "$1/"
	bash "$ROOT/pipelines/report.sh" "$1" "$1/out" || fail "report.sh failed on $1"
}

# page_data PAGE: the JSON inlined in PAGE (<script id="amp-data">), as jq -c writes it
page_data() {
	sed -n '/^<script type="application\/json" id="amp-data">$/,/^<\/script>$/p' "$1" | sed '1d;$d' | jq -c .
}

@test "make report writes report.html, its data and the flow graph under ARTIFACTS/flow-tiny" {
	report
	assert_success
	assert_line "report: $A/report.html ($(cat "${FILES[@]/#/$A/}" | wc -c) bytes with its data and flow graph in $A/report/)"
	assert [ -s "$A/summary.txt" ]
	local f
	for f in "${FILES[@]}"; do
		assert [ -s "$A/$f" ]
	done
	run ls "$A/report"
	assert_output $'data.json\nflow.dot\nflow.svg\ntrace.json'
	run grep -c '^<svg ' "$A/report/flow.svg"
	assert_output 1
	run find "$ARTS" -name '*.tmp'
	assert_output ""
}

@test "the page needs nothing beside it: style, script, data and flow graph inline, nothing fetched" {
	shared_report
	# no element loads anything: no src, no href, no url(), no @import
	run grep -Eic '<(img|link|iframe|object|embed)[ >]| src=| href=|url\(|@import' "$A/report.html"
	assert_output 0
	run grep -c '^<script>$' "$A/report.html"
	assert_output 1
	cmp <(page_data "$A/report.html") <(jq -c . "$A/report/data.json")
	# no "<" in it, so nothing in the data can end the script
	run sed -n '/id="amp-data">$/,/^<\/script>$/p' "$A/report.html"
	assert_equal "$(sed '1d;$d' <<<"$output" | grep -c '<')" 0
	# report.js and report.css are inlined as they are
	grep -qF "$(sed -n 2p "$ROOT/share/report/report.js")" "$A/report.html" || fail "report.js is not inlined"
	grep -qF "$(sed -n 2p "$ROOT/share/report/report.css")" "$A/report.html" || fail "report.css is not inlined"
	# the flow graph inline, as text
	run awk '/^<svg /{ s = 1 } s && /<\/svg>/ { print "svg"; exit }' "$A/report.html"
	assert_output svg
	run grep -c '<text[^>]*>mlp_down.a</text>' "$A/report.html"
	assert_output 1
	# nothing of where it was made
	run grep -c -F "${A%/art/*}" "$A/report.html"
	assert_output 0
}

@test "the page's tables: the movement overview by kind, a row per op and per phase" {
	shared_report
	assert_equal "$(grep -c '^<table>' "$A/report.html")" 4
	local ops phases
	ops=$(jq '.ops | length' "$A/capture.json")
	phases=$(jq '.phases | length' "$A/capture.json")
	run awk '/<h2>Cycles by op/ { t = 1 } /<h2>Phases/ { t = 2 } /<h2>Top/ { t = 3 }
		/^<tr/ && t { n[t]++ } END { print n[1] + 0, n[2] + 0 }' "$A/report.html"
	assert_output "$ops $((phases + 1))"
	grep -q '^<tr class="total"><td>total</td>' "$A/report.html" || fail "the phase table has no total row"
	# the overview's total is the receiver payload over every run, the
	# bytes every tile receives
	local received
	received=$(awk -F'\t' 'NR > 2 && $2 == "all" { s += $4 } END { printf "%.0f\n", s }' "$A/tiles.tsv")
	run grep -o '<tr class="total"><td>total</td><td></td>.*</tr>' "$A/report.html"
	assert_output --partial "<td class=\"n\">$(commas "$received")</td><td class=\"n\">100.0%</td>"
}

@test "the summary gives bytes with units, says how sent and received differ, and shows time and throughput beside cycles" {
	shared_report
	local s received us tp
	s=$(sed -n '/^<table class="summary">/,/^<\/table>/p' "$A/report.html")
	received=$(awk -F'\t' 'NR > 2 && $2 == "all" { s += $4 } END { printf "%.0f\n", s }' "$A/tiles.tsv")
	[[ $s == *"<th>bytes sent</th><td>"*"($(commas "$(jq .summary.bytes "$A/capture.json")") B)"*"each send counted once"* ]] ||
		fail "no bytes sent, each send once: $s"
	[[ $s == *"<th>bytes received</th><td>"*"($(commas "$received") B)"*"every receiver counted"* ]] ||
		fail "no bytes received, every receiver: $s"
	us=$(jq -r '.summary.microseconds | tostring' "$A/capture.json")
	tp=$(jq -r '.summary.throughput | "\(.per_second | round | tostring | sub("(?<a>[0-9])(?<b>[0-9]{3})$"; "\(.a),\(.b)")) \(.unit)"' "$A/capture.json")
	[[ $s == *"<th>time per run</th><td>$us µs at 1.5 GHz"* ]] || fail "no time: $s"
	[[ $s == *"<th>throughput</th><td>$tp"* ]] || fail "no throughput $tp: $s"
	[[ $s == *"<th>total</th><td>$(commas "$(jq .summary.total_cycles "$A/capture.json")") cycles ($us µs)"* ]] ||
		fail "no total cycles with time: $s"
	# no raw number of 5 digits or more anywhere in it
	run grep -Eo '[^0-9,.][0-9]{5,}[^0-9,.]' <<<"$s"
	assert_output ""
	# a capture without a clock says so
	variant noclock '.machine.clock_hz = null | .summary.microseconds = null | .summary.throughput = null'
	run grep -o '<th>throughput</th><td>[^<]*' noclock/out/report.html
	assert_output '<th>throughput</th><td>none without a clock'
}

@test "the page's data: tiles.tsv's all and phase lines, busy cycles from version 2, one timeline entry per phase and compute step" {
	shared_report
	local d=$A/report/data.json
	assert_equal "$(head -n 1 "$A/tiles.tsv" | cut -c1-15)" "# amp-tiles 2: "
	run jq -c '[.tiles.version, .tiles.busy, .grid.cols, .grid.rows]' "$d"
	assert_output '[2,true,46,32]'
	# every line of tiles.tsv, as the page has it (sram on all lines, busy on phase lines)
	cmp <(awk -F'\t' 'NR > 2 { print $1, $2, $3, $4, $5, $6, ($2 == "all" ? $7 : $8) }' "$A/tiles.tsv") \
		<(jq -r '(.tiles.all[] | "\(.[0]) all \(.[1:] | join(" "))"),
			(.tiles.phases | to_entries[] | .key as $p | .value[] | "\(.[0]) \($p) \(.[1:] | join(" "))")' "$d")
	# the timeline: every phase and compute step once, in step order, and
	# the critical path adds up to the total
	run jq -r '[.timeline[] | if .kind == "phase" then "p\(.id)" else "c\(.step)" end] | join(" ")' "$d"
	assert_output "$(jq -r '[(.phases[] | [.steps[0], "p\(.id)"]), (.compute[] | [.step, "c\(.step)"])] | sort | map(.[1]) | join(" ")' "$A/capture.json")"
	run jq '. as $d | [.timeline[] | if .kind == "phase" then (.sync_cycles + .cycles + .local_copy_cycles) * .count
		else .cycles * .count end] | add + $d.other_local_copy_cycles == $d.summary.total_cycles' "$d"
	assert_output true
	# on vit-tiny's repeat too
	report_of tests/models/vit-tiny.yaml
	assert_success
	run jq '. as $d | ([.timeline[].count] | max) as $r | [.timeline[] | if .kind == "phase" then (.sync_cycles + .cycles + .local_copy_cycles) * .count
		else .cycles * .count end] | add + $d.other_local_copy_cycles == $d.summary.total_cycles and $r == 2' "$ARTS/vit-tiny/report/data.json"
	assert_output true
}

# On vit-tiny, whose two layers are a repeat: its body's phases run twice,
# and the bytes count every run.
@test "the flow graph's edges carry bytes that add up to every tile's received bytes and the capture's receiver payload" {
	report_of tests/models/vit-tiny.yaml
	assert_success
	A=$ARTS/vit-tiny
	run jq '[.phases[].count] | max' "$A/capture.json"
	assert_output 2
	local received payload classes
	received=$(awk -F'\t' 'NR > 2 && $2 == "all" { s += $4 } END { printf "%.0f\n", s }' "$A/tiles.tsv")
	payload=$(jq '(.phases | map({key: (.id | tostring), value: .count}) | from_entries) as $c |
		[.phase_traffic | to_entries[] | .key as $p | .value[] | .receiver_payload_bytes * $c[$p]] | add' \
		"$A/capture.json")
	assert_equal "$payload" "$received"
	classes=$(jq '[.phase_traffic[][] | [.src, .op, .operand, .tensor]] | unique | length' "$A/capture.json")
	# the rendered SVG: each edge from a source carries one "N B" label;
	# the invisible edges that order the operands carry none
	run awk '
		/<g id="edge[0-9]+" class="edge">/ { inedge = 1; labels = 0; next }
		inedge && /<title>/ { src = ($0 ~ /<title>src /) }
		inedge && /<text/ && match($0, />[0-9,]+ B</) {
			v = substr($0, RSTART + 1, RLENGTH - 4); gsub(",", "", v); sum += v; labels++ }
		inedge && /<\/g>/ { inedge = 0
			if (src) { edges++; if (labels != 1) bad = bad " edge with " labels " byte labels" }
			else if (labels) bad = bad " an ordering edge with bytes" }
		END { printf "%d edges, %.0f bytes%s\n", edges, sum, bad }' "$A/report/flow.svg"
	assert_output "$classes edges, $received bytes"
	# every class's tensor reaches its op's operand in the graph
	run jq -r '.phase_traffic[][] | "\"src \(.src)\" -> \"dst \(.op).\(.operand)\""' "$A/capture.json"
	local line
	for line in "${lines[@]}"; do
		grep -qF "$line [" "$A/report/flow.dot" || fail "no edge $line in flow.dot"
	done
}

@test "the same inputs give the same bytes: remade in place, and in another directory" {
	report
	assert_success
	cp -R "$A/report" first
	cp "$A/report.html" first.html
	rm "$A/report.html"
	report
	assert_success
	local f
	for f in "$A"/report/*; do
		cmp "$f" "first/${f##*/}" || fail "${f##*/} differs between two runs"
	done
	cmp "$A/report.html" first.html
	assert_equal "$(ls "$A/report")" "$(ls first)"
	report ARTIFACTS="$BATS_TEST_TMPDIR/other"
	assert_success
	for f in "$A"/report/* "$A/report.html"; do
		cmp "$f" "$BATS_TEST_TMPDIR/other/flow-tiny/${f#"$A"/}" || fail "${f#"$A"/} depends on its directory"
	done
	run grep -rl -e "$BATS_TEST_TMPDIR" -e "$(date +%Y-%m-%d)" "$A/report.html" "$A/report"
	assert_output ""
}

@test "a second make report remakes nothing; a newer capture remakes the report and nothing before it" {
	report
	assert_success
	local before
	before=$(mtimes "$A")
	report
	assert_success
	assert_equal "$(mtimes "$A")" "$before"
	refute_output --partial 'bin/amp-'
	sleep 0.05
	touch "$A/capture.json"
	report
	assert_success
	refute_output --regexp 'bin/amp-(plan|capture|emit) '
	local now f
	for f in report.html report/data.json report/flow.svg; do
		now=$(stat -c %.9Y "$A/$f")
		[[ "$now" > "$(sed -n "s|^$f ||p" <<<"$before")" ]] || fail "$f was not remade"
	done
}

@test "a report over a bad tiles.tsv fails naming it, keeps no temporary and the previous page" {
	report
	assert_success
	cp "$A/report.html" good.html
	sed -i '1s/.*/# not the tiles/' "$A/tiles.tsv"
	touch "$A/capture.json"
	report
	assert_failure
	assert_output --partial "report: cannot read '$A/tiles.tsv': line 1 is not"
	run find "$ARTS" -name '*.tmp'
	assert_output ""
	cmp "$A/report.html" good.html
}

@test "a make report killed half way leaves no report.tmp behind" {
	report
	assert_success
	# a dot that hangs: the report is half written when make is interrupted
	mkdir fake
	printf '#!/bin/sh\nexec sleep 30\n' > fake/dot
	chmod +x fake/dot
	touch "$A/capture.json"
	PATH=$BATS_TEST_TMPDIR/fake:$PATH setsid make -C "$ROOT" --no-print-directory report MODEL=$TINY \
		"${SAN_ARG[@]}" BIN="$BIN" ARTIFACTS="$ARTS" > make.out 2>&1 &
	local pid=$! i
	for i in $(seq 100); do
		[ -e "$A/report.tmp/report/data.json" ] && break
		sleep 0.1
	done
	assert [ -e "$A/report.tmp/report/data.json" ]
	# TERM, not INT: a job started with & ignores INT, and so would make
	# and the recipe, which would wait for the fake dot to end.
	kill -TERM -- "-$pid"
	wait "$pid" || true
	assert [ ! -e "$A/report.tmp" ]
	run find "$ARTS" -name '*.tmp'
	assert_output ""
}

@test "a mistyped MODEL fails before anything runs" {
	run make -C "$ROOT" --no-print-directory report MODEL=typo/flow-tiny.yaml BIN="$BIN" ARTIFACTS="$ARTS"
	assert_failure
	assert_output --partial 'MODEL=typo/flow-tiny.yaml: no such file'
	assert [ ! -e "$ARTS" ]
}

@test "table cells are escaped: markup in a name is text, numbers are right-aligned with thousands separators" {
	run jq -rRn --arg caption 'a<b' -f "$ROOT/share/report/table.jq" \
		< <(printf 'op\tcycles\n<i>x</i> & "y"\t12\nback\\\\slash\\ttab\t-3\nratio\t1.498\nversion\t1.2.3\nbig\t800000\nneg\t-12345\nshare\t74.9%%\nsep\t1,234\n')
	assert_success
	assert_line '<caption>a&lt;b</caption>'
	assert_line '<thead><tr><th>op</th><th>cycles</th></tr></thead>'
	assert_line '<tr><td>&lt;i&gt;x&lt;/i&gt; &amp; &quot;y&quot;</td><td class="n">12</td></tr>'
	assert_line $'<tr><td>back\\slash\ttab</td><td class="n">-3</td></tr>'
	assert_line '<tr><td>ratio</td><td class="n">1.498</td></tr>'
	assert_line '<tr><td>version</td><td>1.2.3</td></tr>'
	assert_line '<tr><td>big</td><td class="n">800,000</td></tr>'
	assert_line '<tr><td>neg</td><td class="n">-12,345</td></tr>'
	assert_line '<tr><td>share</td><td class="n">74.9%</td></tr>'
	assert_line '<tr><td>sep</td><td class="n">1,234</td></tr>'
}

@test "headless chromium draws the page: the timeline, a phase's heatmaps with busy cycles, the program's, memory; a broken script draws nothing" {
	needs chromium
	shared_report
	local phases steps
	phases=$(jq '.phases | length' "$A/capture.json")
	steps=$(jq '.compute | length' "$A/capture.json")
	run browse "$A/report.html"
	assert_success
	assert_output --partial '<body data-ready="yes">'
	assert_equal "$(grep -o '<tr class="phase[ "]' <<<"$output" | wc -l)" "$phases"
	assert_equal "$(grep -o '<tr class="compute"' <<<"$output" | wc -l)" "$steps"
	assert_equal "$(grep -o '<div class="seg exchange[ "]' <<<"$output" | wc -l)" "$phases"
	# the first phase is selected, with its four maps, then the program's four
	assert_output --partial '<div id="phase-view" data-phase="0">'
	run grep -o '<figure class="heatmap" id="[a-z-]*">' <<<"$output"
	assert_output - <<-'EOF2'
	<figure class="heatmap" id="phase-received">
	<figure class="heatmap" id="phase-sent">
	<figure class="heatmap" id="phase-fragments">
	<figure class="heatmap" id="phase-busy">
	<figure class="heatmap" id="map-table">
	<figure class="heatmap" id="map-sram">
	<figure class="heatmap" id="map-fragments">
	<figure class="heatmap" id="map-received">
	EOF2
	run browse "$A/report.html"
	assert_output --partial '<svg class="chart" id="memory-chart"'
	assert_output --partial '<canvas id="lanes-canvas"'
	# memory over steps: the most, the median and the worst tile, each a line
	assert_equal "$(grep -o '<polyline class="[a-z]*"' <<<"$output" | tr '\n' ' ')" \
		'<polyline class="max" <polyline class="median" <polyline class="worst" '
	# the worst tile's tensors, one row each
	assert_equal "$(grep -o '<table id="worst-tensors">.*</table>' <<<"$output" | grep -o '<tr><td>' | wc -l)" \
		"$(jq '.memory.worst.tensors | length' "$A/capture.json")"
	# the check can fail: the same page with its script cut short
	sed 's/^\ttimeline();$/\ttimeline(/' "$A/report.html" > broken.html
	run browse "$BATS_TEST_TMPDIR/broken.html"
	refute_output --partial 'data-ready="yes"'
	refute_output --partial '<tr class="phase'
}

@test "the page's tile lanes are the trace's: a lane per sampled tile, every slice, in time order" {
	shared_report
	[ -s "$A/trace.json.gz" ] || fail "make report made no trace.json.gz"
	gzip -dc "$A/trace.json.gz" >t.json
	run jq -c '[.tiles, (.lanes | map(length)), .dropped]' "$A/report/trace.json"
	assert_output "$(jq -c '[([.traceEvents[] | select(.ph == "M" and .name == "process_name" and .pid > 0) | .pid - 1]),
		([.traceEvents[] | select(.ph == "X" and .pid > 0)] | group_by(.pid) | map(length)), 0]' t.json)"
	# each slice is the trace's: its start, length, category and name
	run jq -c '[.lanes as $l | .tiles | to_entries[] | .key as $i | $l[$i][] as $s |
		[.value, $s[0], $s[1]]] | sort' "$A/report/trace.json"
	assert_output "$(jq -c '[.traceEvents[] | select(.ph == "X" and .pid > 0) | [.pid - 1, .ts, .dur]] | sort' t.json)"
	run jq -e 'all(.lanes[]; . as $l | [range(1; length)] | all($l[.][0] >= $l[. - 1][0]))' "$A/report/trace.json"
	assert_success
	# the page inlines it
	grep -q '<script type="application/json" id="amp-trace">' "$A/report.html"
}

@test "every heatmap is scaled to its limit and counts the tiles over it: make report LIMITS='--table-budget 2000'" {
	needs chromium
	shared_report
	local over
	# 2,000 B: some tiles' tables are over it
	over=$(awk -F'\t' 'NR > 2 && $2 == "all" && $6 > 2000' "$A/tiles.tsv" | wc -l)
	assert [ "$over" -gt 0 ]
	report LIMITS='--table-budget 2000' ARTIFACTS="$BATS_TEST_TMPDIR/lim"
	assert_success
	run grep -c '<th>tables per tile</th><td>.*budget 2.0 KiB (2,000 B): <strong class="over">OVER</strong>' \
		"$BATS_TEST_TMPDIR/lim/flow-tiny/report.html"
	assert_output 1
	run browse "$BATS_TEST_TMPDIR/lim/flow-tiny/report.html"
	assert_success
	run grep -o '<figure class="heatmap" id="map-table">.*' <<<"$output"
	assert_output --partial "2.0 KiB (2,000 B) (the table budget)"
	assert_output --regexp "<span class=\"over\" data-over=\"$over\">$over tiles over the limit</span>"
	# at the machine's budget none is
	run browse "$A/report.html"
	run grep -o '<figure class="heatmap" id="map-table">.*' <<<"$output"
	assert_output --partial '80.0 KiB (81,920 B) (the table budget)'
	assert_output --regexp '<span class="" data-over="0">0 tiles over the limit</span>'
	# the SRAM map scales to the SRAM available
	run grep -o '<figure class="heatmap" id="map-sram">.*' <<<"$output"
	assert_output --partial '573.2 KiB (586,960 B) (SRAM available)'
}

@test "memory over steps draws the capture's memory object, tensor names as text; without one the page says so; tiles version 1 has no busy map" {
	needs chromium
	shared_report
	variant fixture "$(printf '. + %s' "$(cat "$ROOT/tests/report/memory.json")")"
	run browse "$BATS_TEST_TMPDIR/fixture/out/report.html"
	assert_success
	assert_output --partial '<h3>The worst tile: tile 1257 at step 11</h3>'
	assert_output --partial 'tensors 9.8 KiB (9,984 B) + tables 2.8 KiB (2,848 B) = 12.5 KiB (12,832 B) of 573.2 KiB (586,960 B) available'
	# a point per step of the fixture
	assert_equal "$(grep -o '<circle' <<<"$output" | wc -l)" 19
	run grep -o '<table id="worst-tensors">.*</table>' <<<"$output"
	assert_output --partial '<tr><td>g</td><td>g@mlp_down.a</td><td class="n">5.1 KiB (5,200 B)</td><td class="n">52.1%</td></tr><tr><td>w_down</td>'
	assert_output --partial '<tr><td>&lt;/script&gt;&lt;b&gt;y&lt;/b&gt;</td><td>y@canon</td><td class="n">624 B</td>'
	variant none 'del(.memory)'
	run browse "$BATS_TEST_TMPDIR/none/out/report.html"
	assert_output --partial 'This capture has no memory object: no memory over steps.'
	refute_output --partial 'id="memory-chart"'
	# tiles.tsv version 1: no busy column, no busy map, a note why
	mkdir v1
	variant v1
	{ echo '# amp-tiles 1: model tiny-mlp on amp1472 (1472 tiles)'; sed 1d "$A/tiles.tsv" | cut -f1-7; } > v1/tiles.tsv
	bash "$ROOT/pipelines/report.sh" v1 v1/out
	run jq -c '[.tiles.version, .tiles.busy, (.tiles.phases["0"][0] | length)]' v1/out/report/data.json
	assert_output '[1,false,6]'
	run browse "$BATS_TEST_TMPDIR/v1/out/report.html"
	refute_output --partial 'id="phase-busy"'
	assert_output --partial 'No busy heatmap: tiles.tsv is version 1, before busy_cycles (version 2).'
}

@test "report.sh rejects a tiles.tsv line whose busy cycles are not a count, naming the file and line" {
	shared_report
	variant bad
	sed -i '0,/^\([0-9]*\)\t0\t\(.*\)\t[0-9]*$/s//\1\t0\t\2\tx/' bad/tiles.tsv
	run bash "$ROOT/pipelines/report.sh" bad bad/out2
	assert_failure 1
	assert_output --regexp "^report: bad/tiles.tsv:[0-9]+: field 8 \"x\" is not a count$"
}

# tests/browser/report.mjs drives chromium through playwright-core, which
# make report-test-deps installs into tests/browser/node_modules (npm ci).
@test "in chromium driven by playwright-core, clicking a phase shows its heatmaps and hovering a tile shows tiles.tsv's figure; a screenshot is kept" {
	needs chromium node
	if [ ! -f "$ROOT/tests/browser/node_modules/playwright-core/package.json" ]; then
		# CI installs it (make check runs report-test-deps): missing there is a failure
		[ "${CI:-}" != true ] || fail "playwright-core is not installed in tests/browser (npm ci failed?)"
		skip "playwright-core is not installed in tests/browser (make report-test-deps runs npm ci there)"
	fi
	shared_report
	local last shot=${AMP_SCREENSHOT_DIR:-$ROOT/artifacts/tests}
	last=$(jq '.phases[-1].id' "$A/capture.json")
	run timeout 120 node "$ROOT/tests/browser/report.mjs" "$A/report.html" "$A/tiles.tsv" "$BATS_TEST_TMPDIR/report-screenshot.png" \
		w_up no-such-tensor
	assert_success
	assert_line "lane $(jq '.phases[1].id' "$A/capture.json") $(jq '.phases[1].id' "$A/capture.json")"
	assert_line "phase $last of $(jq '.phases | length' "$A/capture.json") (clicked $last)"
	assert_line 'requests 0'
	assert_line 'errors 0'
	# the tile lanes zoom (twice 2x: four times 960 pixels), and a hover names the slice under it
	assert_line 'zoom 4 3840'
	local lane
	lane=$(grep '^lanehover ' <<<"$output")
	read -r _ t name <<<"${lane%% | *}"
	[[ ${lane#* | } == "tile $t: $name, "* ]] || fail "lane hover: $lane"
	# the graph's search finds every node and edge that names the tensor
	local n
	n=$(grep -c '<title>[^<]*w_up' "$A/report/flow.svg")
	assert [ "$n" -gt 0 ]
	assert_line "search w_up $n $n matches"
	assert_line "search no-such-tensor 0 0 matches"
	# two hovers: a tile that received nothing, then the tile that received
	# the most; each shows what tiles.tsv says
	assert_equal "$(grep -c '^hover ' <<<"$output")" 2
	local i hover want
	for i in 0 1; do
		hover=$(grep '^hover ' <<<"$output" | sed -n "$((i + 1))p")
		want=$(grep '^expected ' <<<"$output" | sed -n "$((i + 1))p")
		read -r _ t v map display text <<<"$hover"
		assert_equal "expected $t $v" "$want"
		assert_equal "$map $display" "phase-received block"
		# the figure with its unit: "160 B", or "2.3 KiB (2,304 B)"
		if [ "$i" = 0 ]; then assert_equal "$text" "tile $t: received nothing"
		elif [ "$v" -lt 1024 ]; then assert_equal "$text" "tile $t: received $v B"
		else assert_regex "$text" "^tile $t: received [0-9.,]+ [KMG]iB \\($(commas "$v") B\\)\$"; fi
	done
	# the received value is tiles.tsv's for that tile and phase
	read -r _ t v _ <<<"$(grep '^hover ' <<<"$output" | tail -n 1)"
	run awk -F'\t' -v t="$t" -v p="$last" 'NR > 2 && $1 == t && $2 == p { print $4 }' "$A/tiles.tsv"
	assert_output "$v"
	assert [ "$v" -gt 0 ]
	assert_equal "$(head -c 8 "$BATS_TEST_TMPDIR/report-screenshot.png" | od -An -tx1 | tr -d ' \n')" 89504e470d0a1a0a
	mkdir -p "$shot" && cp "$BATS_TEST_TMPDIR/report-screenshot.png" "$shot/report-screenshot.png"
	echo "# screenshot: $shot/report-screenshot.png" >&3
}
