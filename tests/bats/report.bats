#!/usr/bin/env bats
# make report (pipelines/report.mk, pipelines/report.sh): the page, its
# heatmaps' data against tiles.tsv, the flow graph's bytes against the
# bytes every tile receives, determinism, remaking, failures, and the page
# opened in a real headless browser.
#
# As in flows.bats: tests/models/flow-tiny.yaml, ARTIFACTS in the test's
# own directory, a private copy of the binaries as BIN. Skipped, saying
# why, when gnuplot, dot or (for the browser) chromium is missing; make
# check installs them (report-test-deps).

load common
bats_require_minimum_version 1.5.0

TINY=tests/models/flow-tiny.yaml
IMAGES=(table_bytes.png sram_peak.png received.png flow.svg)

# One report of flow-tiny for the tests that only read it (shared_report),
# made once with its own copy of the binaries.
setup_file() {
	command -v gnuplot >/dev/null && command -v dot >/dev/null || return 0
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
	needs gnuplot dot
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
			skip "$c is not installed (make report-test-deps installs gnuplot-nox, graphviz and chromium)"
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

# checked_copy DIR: a copy of the report in DIR whose page, once loaded,
# says in <p id="check"> how many of its images decoded and which did not,
# and how many tables it has.
checked_copy() {
	mkdir -p "$1"
	cp -R "$A/report" "$1/"
	local script
	script=$(cat <<-'EOF'
	<script>
	window.addEventListener('load', function () {
		var imgs = document.images, ok = 0, bad = [];
		for (var i = 0; i < imgs.length; i++) {
			if (imgs[i].complete && imgs[i].naturalWidth > 0) ok++;
			else bad.push(imgs[i].getAttribute('src'));
		}
		var p = document.createElement('p');
		p.id = 'check';
		p.textContent = 'decoded ' + ok + ' of ' + imgs.length + ' images, broken: [' + bad.join(' ') +
			'], tables ' + document.querySelectorAll('table').length;
		document.body.appendChild(p);
	});
	</script>
	EOF
	)
	awk -v s="$script" '/^<\/body>/ { print s } { print }' "$A/report.html" > "$1/report.html"
	grep -q "p.id = 'check'" "$1/report.html" || fail "the check script is not in the copy"
}

@test "make report writes report.html, its images and their data under ARTIFACTS/flow-tiny" {
	report
	assert_success
	assert_line "report: $A/report.html ($(cat "$A/report.html" "$A"/report/* | wc -c) bytes with its images in $A/report/)"
	assert [ -s "$A/summary.txt" ]
	local f
	for f in report.html report/tiles.dat report/heatmaps.gp report/flow.dot "${IMAGES[@]/#/report/}"; do
		assert [ -s "$A/$f" ]
	done
	for f in table_bytes sram_peak received; do
		assert_equal "$f $(head -c 8 "$A/report/$f.png" | od -An -tx1 | tr -d ' \n')" "$f 89504e470d0a1a0a"
	done
	run grep -c '^<svg ' "$A/report/flow.svg"
	assert_output 1
	run find "$ARTS" -name '*.tmp'
	assert_output ""
}

@test "the page shows every image of report/ and the summary's tables, with a row per op and per phase" {
	shared_report
	local srcs f
	srcs=$(grep -o '<img src="[^"]*"' "$A/report.html" | sed 's/<img src="//; s/"$//' | sort)
	assert_equal "$srcs" "$(printf 'report/%s\n' "${IMAGES[@]}" | sort)"
	for f in $srcs; do
		assert [ -s "$A/$f" ]
	done
	# every image file of report/ is on the page
	for f in "$A"/report/*.png "$A"/report/*.svg; do
		grep -q "<img src=\"report/${f##*/}\"" "$A/report.html" || fail "${f##*/} is not on the page"
	done
	assert_equal "$(grep -c '<table>' "$A/report.html")" 3
	local ops phases
	ops=$(jq '.ops | length' "$A/capture.json")
	phases=$(jq '.phases | length' "$A/capture.json")
	# op table: a row per op; phase table: a row per phase and the total
	run awk '/<h2>Cycles by op/ { t = 1 } /<h2>Phases/ { t = 2 } /<h2>Top/ { t = 3 }
		/^<tr/ && t { n[t]++ } END { print n[1] + 0, n[2] + 0 }' "$A/report.html"
	assert_output "$ops $((phases + 1))"
	grep -q '^<tr class="total"><td>total</td>' "$A/report.html" || fail "the phase table has no total row"
	# the summary's head, line for line
	run diff <(jq -r -f "$ROOT/share/jq/summary-head.jq" "$A/capture.json") \
		<(sed -n 's|^<li>\(.*\)</li>$|\1|p' "$A/report.html")
	assert_success
	# nothing of where it was made
	run grep -c -F "${A%/art/*}" "$A/report.html"
	assert_output 0
}

@test "each heatmap plots one line per tile of the machine with tiles.tsv's figures, 0 where a tile has none" {
	shared_report
	local n cols rows
	n=$(sed -nE '1s/^# amp-tiles [12]: .*\(([0-9]+) tiles\)$/\1/p' "$A/tiles.tsv")
	assert_equal "$n" "$(jq .machine.tiles "$A/capture.json")"
	run grep -vc '^#' "$A/report/tiles.dat"
	assert_output "$n"
	# tile, column, row, table_bytes, sram_peak_bytes, received_bytes: the
	# all lines of tiles.tsv (tile, -, sent, received, fragments, tables, sram)
	run awk -F'\t' -v n="$n" '
		FNR == NR { if (FNR > 2 && $2 == "all") { held[$1] = 1; want[$1] = $6 " " $7 " " $4 } next }
		/^#/ { next }
		{ if ($1 != seen) { print "tile " $1 " out of order, expected " seen; bad = 1 }
		  got = $4 " " $5 " " $6; w = ($1 in want) ? want[$1] : "0 0 0"
		  if (got != w) { print "tile " $1 ": " got ", tiles.tsv " w; bad = 1 }
		  if ($4 + $5 + $6 > 0) nonzero++; seen++ }
		END { if (seen != n) print "lines " seen " of " n
		      print "held " length(held) ", nonzero " nonzero + 0; exit bad }' \
		"$A/tiles.tsv" "$A/report/tiles.dat"
	assert_success
	assert_output --regexp '^held [1-9][0-9]*, nonzero [1-9][0-9]*$'
	# the grid: columns x rows hold every tile, with no empty row, and each
	# tile sits at column t mod cols, row t div cols
	cols=$(awk -F'\t' '!/^#/ && $2 + 1 > c { c = $2 + 1 } END { print c }' "$A/report/tiles.dat")
	rows=$(awk -F'\t' '!/^#/ && $3 + 1 > r { r = $3 + 1 } END { print r }' "$A/report/tiles.dat")
	assert [ $((cols * rows)) -ge "$n" ]
	assert [ $((cols * (rows - 1))) -lt "$n" ]
	run awk -F'\t' -v c="$cols" '!/^#/ && ($2 != $1 % c || $3 != int($1 / c))' "$A/report/tiles.dat"
	assert_output ""
	if [ "$n" = 1472 ]; then assert_equal "${cols}x$rows" 46x32; fi
	# the three plots, each from its column, titled with the limit it has
	run grep -E "^(set output|plot) " "$A/report/heatmaps.gp"
	assert_output - <<-'EOF'
	set output 'table_bytes.png'
	plot 'tiles.dat' using 2:3:(0.5):(0.5):4 with boxxyerror fillcolor palette
	set output 'sram_peak.png'
	plot 'tiles.dat' using 2:3:(0.5):(0.5):5 with boxxyerror fillcolor palette
	set output 'received.png'
	plot 'tiles.dat' using 2:3:(0.5):(0.5):6 with boxxyerror fillcolor palette
	EOF
	run grep -c "budget $(commas "$(jq .machine.table_budget_bytes "$A/capture.json")") bytes" "$A/report/heatmaps.gp"
	assert_output 1
	run grep -c "$(commas "$(jq .machine.available_bytes "$A/capture.json")") bytes available" "$A/report/heatmaps.gp"
	assert_output 1
	run grep -c "max $(commas "$(jq .summary.max_table_bytes "$A/capture.json")") on tile $(jq .summary.max_table_tile "$A/capture.json");" \
		"$A/report/heatmaps.gp"
	assert_output 1
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
	for f in report.html report/tiles.dat report/flow.svg report/table_bytes.png; do
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
	# a gnuplot that hangs: the report is half written when make is interrupted
	mkdir fake
	printf '#!/bin/sh\nexec sleep 30\n' > fake/gnuplot
	chmod +x fake/gnuplot
	touch "$A/capture.json"
	PATH=$BATS_TEST_TMPDIR/fake:$PATH setsid make -C "$ROOT" --no-print-directory report MODEL=$TINY \
		"${SAN_ARG[@]}" BIN="$BIN" ARTIFACTS="$ARTS" > make.out 2>&1 &
	local pid=$! i
	for i in $(seq 100); do
		[ -e "$A/report.tmp/report/heatmaps.gp" ] && break
		sleep 0.1
	done
	assert [ -e "$A/report.tmp/report/heatmaps.gp" ]
	# TERM, not INT: a job started with & ignores INT, and so would make
	# and the recipe, which would wait for the fake gnuplot to end.
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

@test "table cells are escaped: markup in a name is text, numbers are right-aligned" {
	run jq -rRn --arg caption 'a<b' -f "$ROOT/share/report/table.jq" \
		< <(printf 'op\tcycles\n<i>x</i> & "y"\t12\nback\\\\slash\\ttab\t-3\nratio\t1.498\nversion\t1.2.3\n')
	assert_success
	assert_line '<caption>a&lt;b</caption>'
	assert_line '<thead><tr><th>op</th><th>cycles</th></tr></thead>'
	assert_line '<tr><td>&lt;i&gt;x&lt;/i&gt; &amp; &quot;y&quot;</td><td class="n">12</td></tr>'
	assert_line $'<tr><td>back\\slash\ttab</td><td class="n">-3</td></tr>'
	assert_line '<tr><td>ratio</td><td class="n">1.498</td></tr>'
	assert_line '<tr><td>version</td><td>1.2.3</td></tr>'
}

@test "headless chromium loads the page and decodes every image; a missing one is reported" {
	needs chromium
	shared_report
	checked_copy page
	run browse "$BATS_TEST_TMPDIR/page/report.html"
	assert_success
	assert_output --partial '<p id="check">decoded 4 of 4 images, broken: [], tables 3</p>'
	# the check can fail: the same page with one image gone
	checked_copy broken
	rm broken/report/sram_peak.png
	run browse "$BATS_TEST_TMPDIR/broken/report.html"
	assert_success
	assert_output --partial '<p id="check">decoded 3 of 4 images, broken: [report/sram_peak.png], tables 3</p>'
}
