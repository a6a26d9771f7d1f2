#!/usr/bin/env bash
# report.sh ART OUT: the HTML report of a capture (make report).
#
# Reads ART/capture.json, ART/tiles.tsv (version 1, or 2 with busy_cycles)
# and ART/emit.txt (what `make capture` writes) and writes OUT/report.html,
# a page that needs nothing else: no network, no file beside it. Its style
# and script are share/report/report.css and report.js, its data (what the
# script draws) share/report/data.jq's, inlined. report.js draws the
# timeline of phases and compute steps (the critical path, each phase's
# floor), per phase the tiles' heatmaps (received, sent, fragments, busy),
# the program's heatmaps (tables, SRAM, fragments, received), each scaled
# to its limit, and memory over program steps (capture.json's memory).
# Beside the page, in OUT/report/:
#   data.json        the data the page inlines (share/report/data.jq)
#   flow.dot, flow.svg
#                    the movement classes, source to operand, with their
#                    receiver payload over every run (share/report/flow.jq);
#                    the page inlines flow.svg, searchable, with a legend
#                    and an overview by movement (share/report/movement.jq)
# and the summary (share/report/summary.jq) and tables (share/jq/'s
# queries) as HTML. The same inputs give the same bytes: no dates, no
# paths. Exit 1 on bad input.
set -euo pipefail
export LC_ALL=C

die() { echo "report: $*" >&2; exit 1; }
[ $# -eq 2 ] || { echo "usage: report.sh ART OUT" >&2; exit 2; }
art=$1 out=$2
share=$(cd "$(dirname "$0")/../share" && pwd)
jqdir=$share/jq repdir=$share/report
capture=$art/capture.json tiles=$art/tiles.tsv emit=$art/emit.txt

for f in "$capture" "$tiles" "$emit"; do
	[ -r "$f" ] && [ -f "$f" ] || die "cannot read '$f': ${f##*/} is written by make capture"
done
for t in dot jq; do
	command -v $t >/dev/null || die "cannot run '$t': not installed (make report-deps installs it)"
done

# The capture: its format, the machine's tile count and limits, the model.
err=$(jq -e '.format == "amp-capture" and (.machine.tiles | type) == "number" and .machine.tiles >= 1' "$capture" 2>&1 >/dev/null) ||
	die "cannot read '$capture': ${err:-not an amp-capture document}"
{ read -r model; read -r machine; read -r ntiles; } < <(jq -r '.model, .machine.name, .machine.tiles' "$capture")

# tiles.tsv: its first line gives the version (1, or 2 with busy_cycles)
# and the tile count, which must be the capture's.
head1=$(head -n 1 "$tiles")
[[ $head1 =~ ^#\ amp-tiles\ ([12]):\ .*\(([0-9]+)\ tiles\)$ ]] ||
	die "cannot read '$tiles': line 1 is not '# amp-tiles 1: ... (N tiles)' nor version 2"
tver=${BASH_REMATCH[1]}
[ "${BASH_REMATCH[2]}" = "$ntiles" ] ||
	die "'$tiles' has ${BASH_REMATCH[2]} tiles, '$capture' $ntiles: not the same capture"
theader=$'tile\tphase\tsent_bytes\treceived_bytes\tfragments\ttable_bytes\tsram_peak_bytes'
[ "$tver" = 1 ] || theader+=$'\tbusy_cycles'
[ "$(sed -n 2p "$tiles")" = "$theader" ] ||
	die "cannot read '$tiles': line 2 is not the amp-tiles $tver header"

# The heatmap grid (pipelines/grid.sh).
. "$(dirname "${BASH_SOURCE[0]}")/grid.sh"
read -r cols rows < <(grid "$ntiles")

# tiles.tsv as JSON for data.jq: the all lines, and each phase's lines in
# tile order (sram_peak_bytes is '-' on phase lines, busy_cycles on all lines).
mkdir -p "$out/report"
awk -F'\t' -v n="$ntiles" -v ver="$tver" -v file="$tiles" '
	function bad(msg) { printf "report: %s:%d: %s\n", file, NR, msg > "/dev/stderr"; failed = 1; exit 1 }
	function count(i) { if ($i !~ /^[0-9]+$/) bad("field " i " \"" $i "\" is not a count"); return $i }
	NR <= 2 { next }
	{
		if (NF != 6 + ver) bad("expected " 6 + ver " fields, found " NF)
		if ($1 !~ /^[0-9]+$/ || $1 + 0 >= n) bad("tile \"" $1 "\" is not below " n)
		row = $1 + 0 "," count(3) "," count(4) "," count(5) "," count(6)
		if ($2 == "all") {
			if (($1 + 0) in seen) bad("tile " $1 " has two all lines")
			seen[$1 + 0] = 1
			if (ver == 2 && $8 != "-") bad("field 8 \"" $8 "\" is not - on an all line")
			all = all (all == "" ? "" : ",") "[" row "," count(7) "]"
		} else {
			if ($2 !~ /^[0-9]+$/) bad("phase \"" $2 "\" is neither all nor a phase id")
			if ($7 != "-") bad("field 7 \"" $7 "\" is not - on a phase line")
			p = $2 + 0
			if (!(p in rows_of)) order[np++] = p
			ph[p] = (rows_of[p]++ ? ph[p] "," : "") "[" row "," (ver == 2 ? count(8) : "null") "]"
		}
	}
	END {
		if (failed) exit 1
		printf "{\"version\":%d,\"busy\":%s,\"all\":[%s],\"phases\":{", ver, ver == 2 ? "true" : "false", all
		for (i = 0; i < np; i++) printf "%s\"%d\":[%s]", i ? "," : "", order[i], ph[order[i]]
		print "}}"
	}' "$tiles" > "$out/report/tiles.json" || exit 1
rtotal=$(jq '[.all[][2]] | add // 0' "$out/report/tiles.json")
jq -c -L "$repdir" --slurpfile tiles "$out/report/tiles.json" --argjson cols "$cols" --argjson rows "$rows" \
	-f "$repdir/data.jq" "$capture" > "$out/report/data.json"
rm "$out/report/tiles.json"

# The trace's tile lanes (make trace: ART/trace.json.gz), when there is one.
if [ -r "$art/trace.json.gz" ]; then
	gzip -dc "$art/trace.json.gz" | jq -c --argjson max 100000 -f "$repdir/trace.jq" > "$out/report/trace.json" ||
		die "cannot read '$art/trace.json.gz': not a trace of amp-capture --trace"
else
	echo null > "$out/report/trace.json"
fi

# The flow graph. SOURCE_DATE_EPOCH and a relative file: nothing of the
# run's date or place gets into the SVG.
jq -r -f "$repdir/flow.jq" "$capture" > "$out/report/flow.dot"
(cd "$out/report" && SOURCE_DATE_EPOCH=0 dot -Tsvg -o flow.svg flow.dot) ||
	die "dot failed on '$out/report/flow.dot'"

# The page: share/report/report.css and report.js inlined, data.json
# inlined as JSON (every "<", which JSON has only in strings, written
# \u003c, so that nothing in it can end the script or open a comment),
# the flow graph inlined without its XML prologue.
h() { jq -Rr @html; }
table() { # table CAPTION HEADER (tab-separated) < TSV rows
	{ printf '%s\n' "$2"; cat; } | jq -rRn --arg caption "$1" -f "$repdir/table.jq"
}
{
	cat <<-EOF
	<!DOCTYPE html>
	<html lang="en">
	<head>
	<meta charset="utf-8">
	<title>amp report: $(h <<< "$model on $machine")</title>
	<style>
	EOF
	cat "$repdir/report.css"
	cat <<-EOF
	</style>
	</head>
	<body>
	<h1>$(h <<< "$model on $machine ($ntiles tiles)")</h1>
	<p>The capture's figures (capture.json, tiles.tsv and emit.txt, written by
	<code>make capture</code>; formats/capture.md). Every cycle figure is a model.
	Bytes are in B, KiB (1,024 B) and MiB; hover a tile of a heatmap for its figure.</p>
	<div id="tip" role="status"></div>
	EOF
	jq -r -L "$repdir" --argjson received "$rtotal" -f "$repdir/summary.jq" "$capture"
	cat <<-EOF
	<h2 id="timeline-h">Timeline</h2>
	<p>The program on its critical path: each exchange phase is a sync, its
	replay (the latest tile) and its local copies; each compute step its
	slowest tile. Widths are cycles over every run. Click a phase (in the
	lane or the table) for its tiles.</p>
	<div id="timeline"></div>
	<h3 id="lanes-h">Tiles on the timeline</h3>
	<p>The trace (<code>make trace</code>, amp-capture --trace): each sampled
	tile's own compute, sync and exchange slices over the same time, the
	critical path on top. Hover a slice for its name and length.</p>
	<div id="lanes"></div>
	<h2 id="phase-h">The selected phase, per tile</h2>
	<p>Each cell is a tile: tile <var>t</var> at column <var>t</var> mod $cols,
	row <var>t</var> div $cols ($cols columns, $rows rows). Each map is scaled
	from 0 to its limit; tiles over it are red with a black outline, tiles
	with nothing grey.</p>
	<div id="phase-view"></div>
	<h2 id="program-h">The program, per tile</h2>
	<p>tiles.tsv's <code>all</code> lines: every phase and run together.</p>
	<div id="program-maps" class="maps"></div>
	<h2 id="memory-h">Memory over program steps</h2>
	<div id="memory"></div>
	<h2 id="movement-h">Movement</h2>
	<p>Each movement class of phase_traffic, summed per source, op, operand and
	tensor: from a parameter's home, a tensor's canonical owners or a layout an
	op put it in, to the operand it serves, with its receiver payload over every
	run (a multicast counts once per receiver).</p>
	EOF
	jq -r -f "$repdir/movement.jq" "$capture" |
		table "Overview: receiver payload over every run by movement and source" \
			$'movement\tsource\tclasses\tsends\treceiver bytes\tshare'
	cat <<-EOF
	<p class="key note">Legend: sources are boxes, coloured by kind:
	<span style="background:#cfe2f3"></span>canonical owners
	<span style="background:#fce5cd"></span>parameter home
	<span style="background:#e6e6e6"></span>layout an op put it in;
	operands are white ellipses, in program order top to bottom; an edge's
	width grows with the square root of its bytes, and its label gives the
	movement, the runs when repeated and the bytes.</p>
	<p><label>Search the graph <input id="flow-search" type="search" placeholder="tensor, op, movement"></label>
	<span id="flow-hits" class="note"></span>
	<label><input id="flow-fit" type="checkbox"> fit to the page width</label></p>
	<div id="flow" class="flow">
	EOF
	sed '1,/^<svg /{/^<svg /!d}' "$out/report/flow.svg" | grep -v '^<!--'
	echo "</div>"
	echo "<h2>Cycles by op</h2>"
	jq -r -f "$jqdir/op-table.jq" "$capture" |
		table "" $'op\tcompute\texchange\tsync\tlocal_copy\ttotal'
	echo "<h2>Phases</h2>"
	jq -r -f "$jqdir/phase-table.jq" "$capture" |
		table "transfers, bytes, max_row, max_frag and cycles per run; total_cycles and floor over every run; ratio: cycles / floor" \
			$'phase\tlabels\truns\ttransfers\tbytes\tmax_row\tmax_frag\tcycles\ttotal_cycles\tfloor\tratio'
	echo "<h2>Top movement classes</h2>"
	jq -r --argjson n 10 -f "$jqdir/top-classes.jq" "$capture" |
		table "by receiver payload" $'phase\top.operand\ttensor\tmovement\tsends\treceiver_bytes\treplication'
	echo "<h2>amp-emit</h2>"
	echo "<pre>"
	# summary.txt's lines of emit.txt, the program's directory left out.
	grep -Ev '^amp-emit: tile [0-9]+: [0-9]+ bytes \(tensors ' "$emit" |
		sed -E 's/^amp-emit: //; s|^(program: )(.*/)?([^/ ]+) \(|\1\3 (|' | h
	echo "</pre>"
	echo '<script type="application/json" id="amp-data">'
	sed 's/</\\u003c/g' "$out/report/data.json"
	echo "</script>"
	echo '<script type="application/json" id="amp-trace">'
	sed 's/</\\u003c/g' "$out/report/trace.json"
	echo "</script>"
	echo "<script>"
	cat "$repdir/report.js"
	echo "</script>"
	echo "</body>"
	echo "</html>"
} > "$out/report.html"
