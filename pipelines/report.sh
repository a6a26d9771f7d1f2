#!/usr/bin/env bash
# report.sh ART OUT: the HTML report of a capture (make report).
#
# Reads ART/capture.json, ART/tiles.tsv and ART/emit.txt (what `make
# capture` writes) and writes OUT/report.html, a page that references its
# images in OUT/report/:
#   tiles.dat        one line per tile of the machine (tiles with no `all`
#                    line in tiles.tsv hold nothing and count 0): tile,
#                    column, row, table_bytes, sram_peak_bytes,
#                    received_bytes; what the heatmaps plot
#   heatmaps.gp      the gnuplot script (run in OUT/report/)
#   table_bytes.png, sram_peak.png, received.png
#                    the heatmaps: the tiles as a grid of columns x rows
#                    (derived from the tile count), a colour bar, the
#                    limit in the title
#   flow.dot, flow.svg
#                    the movement classes, source to operand, with their
#                    receiver payload over every run (share/report/flow.jq)
# and the summary's tables (share/jq/'s queries) as HTML. The same inputs
# give the same bytes: no dates, no paths. Exit 1 on bad input.
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
for t in gnuplot dot jq; do
	command -v $t >/dev/null || die "cannot run '$t': not installed (make report-deps installs it)"
done

# The capture: its format, the machine's tile count and limits, the model.
err=$(jq -e '.format == "amp-capture" and (.machine.tiles | type) == "number" and .machine.tiles >= 1' "$capture" 2>&1 >/dev/null) ||
	die "cannot read '$capture': ${err:-not an amp-capture document}"
{ read -r model; read -r machine; read -r ntiles; read -r budget; read -r available; } < <(
	jq -r '.model, .machine.name, .machine.tiles, (.machine.table_budget_bytes // ""),
		(.machine.available_bytes // "")' "$capture")

# tiles.tsv: its first line gives the tile count, which must be the capture's.
head1=$(head -n 1 "$tiles")
[[ $head1 =~ ^#\ amp-tiles\ [12]:\ .*\(([0-9]+)\ tiles\)$ ]] ||
	die "cannot read '$tiles': line 1 is not '# amp-tiles 2: ... (N tiles)'"
[ "${BASH_REMATCH[1]}" = "$ntiles" ] ||
	die "'$tiles' has ${BASH_REMATCH[1]} tiles, '$capture' $ntiles: not the same capture"
case $(sed -n 2p "$tiles") in
$'tile\tphase\tsent_bytes\treceived_bytes\tfragments\ttable_bytes\tsram_peak_bytes'|$'tile\tphase\tsent_bytes\treceived_bytes\tfragments\ttable_bytes\tsram_peak_bytes\tbusy_cycles') ;;
*) die "cannot read '$tiles': line 2 is not the amp-tiles header" ;;
esac

# The grid: as many columns as the divisor of the tile count nearest
# sqrt(1.5 N) (46 x 32 for 1,472), else ceil(sqrt(1.5 N)) with a short
# last row.
read -r cols rows < <(awk -v n="$ntiles" 'BEGIN {
	t = sqrt(1.5 * n); best = 0
	for (d = 1; d <= n; d++)
		if (n % d == 0 && d >= 0.75 * t && d <= 1.34 * t && (best == 0 || (d - t) ^ 2 < (best - t) ^ 2))
			best = d
	if (best == 0) best = int(t) + (int(t) < t)
	print best, int((n + best - 1) / best) }')

mkdir -p "$out/report"
dat=$out/report/tiles.dat
awk -F'\t' -v n="$ntiles" -v cols="$cols" -v file="$tiles" '
	function bad(msg) { printf "report: %s:%d: %s\n", file, NR, msg > "/dev/stderr"; failed = 1; exit 1 }
	NR <= 2 || $2 != "all" { next }
	{
		if (NF != 7) bad("expected 7 fields, found " NF)
		if ($1 !~ /^[0-9]+$/ || $1 + 0 >= n) bad("tile \"" $1 "\" is not below " n)
		for (i = 3; i <= 7; i++) if ($i !~ /^[0-9]+$/) bad("field " i " \"" $i "\" is not a count")
		t = $1 + 0
		if (t in tb) bad("tile " t " has two all lines")
		tb[t] = $6; sp[t] = $7; rb[t] = $4
	}
	END {
		if (failed) exit 1
		print "# tile\tcolumn\trow\ttable_bytes\tsram_peak_bytes\treceived_bytes"
		for (t = 0; t < n; t++)
			printf "%d\t%d\t%d\t%s\t%s\t%s\n", t, t % cols, int(t / cols),
				(t in tb) ? tb[t] : 0, (t in sp) ? sp[t] : 0, (t in rb) ? rb[t] : 0
	}' "$tiles" > "$dat"

commas() { sed -E ':a; s/([0-9])([0-9]{3})($|[^0-9])/\1,\2\3/; ta' <<< "$1"; }
# max COLUMN: the largest value of a tiles.dat column and its first tile.
max() { awk -F'\t' -v c="$1" '!/^#/ && (m == "" || $c + 0 > m + 0) { m = $c; t = $1 } END { print m, t }' "$dat"; }
# gq TEXT: TEXT as a gnuplot single-quoted string.
gq() { printf "'%s'" "${1//\'/\'\'}"; }
# limit_note MAX LIMIT FORMAT: "; FORMAT" with LIMIT (FORMAT's %s), and
# "OVER" before it when MAX exceeds it; nothing when there is no limit.
limit_note() {
	[ -n "$2" ] || return 0
	printf '; %s' "$([ "$1" -le "$2" ] || printf 'OVER ')"
	printf "$3" "$(commas "$2")"
}
read -r tmax ttile < <(max 4)
read -r smax stile < <(max 5)
read -r rmax rtile < <(max 6)
rtotal=$(awk -F'\t' '!/^#/ { s += $6 } END { printf "%.0f", s }' "$dat")
title_tables="$model: table bytes per tile (max $(commas "$tmax") on tile $ttile$(limit_note "$tmax" "$budget" 'budget %s bytes'))"
title_sram="$model: SRAM peak per tile, tensors and tables (max $(commas "$smax") on tile $stile$(limit_note "$smax" "$available" '%s bytes available'))"
title_recv="$model: bytes received per tile, every run (max $(commas "$rmax") on tile $rtile; $(commas "$rtotal") in all)"

# Heatmaps: a cell per tile, tile t at column t mod cols, row t div cols,
# row 0 on top; pixels per cell so that the grid is about 720 wide.
cell=$(( 720 / cols )); [ "$cell" -ge 6 ] || cell=6; [ "$cell" -le 20 ] || cell=20
width=$(( cols * cell + 260 )) height=$(( rows * cell + 140 ))
# nice N: the first of 1, 2, 5, 10, 20, 50... at least N / 8 (a tic step).
nice() { local s=1; while [ $(( s * 8 )) -lt "$1" ]; do
	case $s in 1*) s=$(( s * 2 )) ;; 2*) s=$(( s * 5 / 2 )) ;; *) s=$(( s * 2 )) ;; esac; done; echo $s; }
xstep=$(nice "$cols") ystep=$(nice "$rows")
{
	cat <<-EOF
	# The heatmaps of report.html: gnuplot heatmaps.gp (in this directory)
	# redraws them from tiles.dat.
	set terminal pngcairo size $width,$height font 'DejaVu Sans,10' noenhanced
	set size ratio -1
	set xrange [-0.5:$cols - 0.5]
	set yrange [$rows - 0.5:-0.5]
	set xtics 0,$xstep out nomirror
	set ytics 0,$ystep out nomirror
	set xlabel 'column (tile mod $cols)'
	set ylabel 'row (tile div $cols)'
	set cblabel 'bytes' offset 1.5,0
	set palette defined (0 '#440154', 1 '#3b528b', 2 '#21918c', 3 '#5ec962', 4 '#fde725')
	set style fill solid border lc rgb '#ffffff'
	unset key
	EOF
	for fig in "table_bytes 4 $tmax" "sram_peak 5 $smax" "received 6 $rmax"; do
		read -r name col top <<< "$fig"
		case $name in
		table_bytes) title=$title_tables ;;
		sram_peak) title=$title_sram ;;
		received) title=$title_recv ;;
		esac
		[ "$top" -gt 0 ] || top=1
		echo "set output '$name.png'"
		echo "set title $(gq "$title")"
		echo "set cbrange [0:$top]"
		if [ "$top" -lt 1000000 ]; then echo "set format cb '%.0f'"; else echo "set format cb '%.1s%c'"; fi
		echo "plot 'tiles.dat' using 2:3:(0.5):(0.5):$col with boxxyerror fillcolor palette"
	done
	echo "unset output"
} > "$out/report/heatmaps.gp"
(cd "$out/report" && gnuplot heatmaps.gp) || die "gnuplot failed on '$out/report/heatmaps.gp'"

# The flow graph. SOURCE_DATE_EPOCH and a relative file: nothing of the
# run's date or place gets into the SVG.
jq -r -f "$repdir/flow.jq" "$capture" > "$out/report/flow.dot"
(cd "$out/report" && SOURCE_DATE_EPOCH=0 dot -Tsvg -o flow.svg flow.dot) ||
	die "dot failed on '$out/report/flow.dot'"

# The page.
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
	body { font-family: sans-serif; margin: 1.5em; color: #222; max-width: 80em; }
	table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }
	caption { text-align: left; font-weight: bold; padding-bottom: 0.3em; }
	th, td { border: 1px solid #ccc; padding: 0.15em 0.5em; text-align: left; }
	th { background: #eee; }
	td.n { text-align: right; font-variant-numeric: tabular-nums; }
	tr.total td { font-weight: bold; border-top: 2px solid #888; }
	figure { margin: 1em 0; }
	img { max-width: 100%; height: auto; border: 1px solid #ddd; }
	pre { background: #f6f6f6; padding: 0.5em; overflow-x: auto; }
	</style>
	</head>
	<body>
	<h1>$(h <<< "$model on $machine ($ntiles tiles)")</h1>
	<p>The capture's figures (capture.json, tiles.tsv and emit.txt, written by
	<code>make capture</code>; formats/capture.md). Every cycle figure is a model.</p>
	<h2>Summary</h2>
	<ul>
	EOF
	jq -r -f "$jqdir/summary-head.jq" "$capture" | h | sed 's|.*|<li>&</li>|'
	cat <<-EOF
	</ul>
	<h2>Per tile</h2>
	<p>Each cell is a tile: tile <var>t</var> at column <var>t</var> mod $cols,
	row <var>t</var> div $cols ($cols columns, $rows rows). The figures are
	tiles.tsv's <code>all</code> lines (report/tiles.dat); a tile with none holds nothing.</p>
	EOF
	for fig in "table_bytes:$title_tables" "sram_peak:$title_sram" "received:$title_recv"; do
		printf '<figure><img src="report/%s.png" width="%d" height="%d" alt="%s"></figure>\n' \
			"${fig%%:*}" "$width" "$height" "$(h <<< "${fig#*:}")"
	done
	cat <<-EOF
	<h2>Movement</h2>
	<p>Each movement class of phase_traffic, summed per source, op, operand and
	tensor: from a parameter's home, a tensor's canonical owners or a layout an
	op put it in, to the operand it serves, with its receiver payload over every
	run (a multicast counts once per receiver).</p>
	<figure><img src="report/flow.svg" alt="$(h <<< "$model: movement classes, source to operand")"></figure>
	<h2>Cycles by op</h2>
	EOF
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
	echo "</body>"
	echo "</html>"
} > "$out/report.html"
