#!/usr/bin/env bash
# compare.sh BIN A_CAPTURE A_TILES B_CAPTURE B_TILES OUT: the difference
# of two captures per tile (make report-compare).
#
# Runs BIN/amp-compare --tiles on the two captures and their tiles files
# (written by make capture; formats/compare.md) and writes into OUT:
#   compare.txt         amp-compare's text: summary, ops, phases lined up
#                       by label, movement classes and the tiles table
#   compare.tsv         the same as TSV (amp-compare --tsv)
#   received_diff.dat   one line per tile of the larger machine: tile,
#                       column, row, bytes received over every run by A,
#                       by B, and B - A; what the heatmap plots
#   received_diff.gp    the gnuplot script (run in OUT)
#   received_diff.png   the heatmap of B - A: the tiles as a grid of
#                       columns x rows (as make report's heatmaps), a
#                       diverging colour bar centred on 0 (blue: B
#                       receives less, red: more), the largest increase
#                       and decrease in the title
# The same inputs give the same bytes: no dates, no absolute paths.
# Exit 1 on bad input (amp-compare's message names the file).
set -euo pipefail
export LC_ALL=C

die() { echo "report-compare: $*" >&2; exit 1; }
[ $# -eq 6 ] || { echo "usage: compare.sh BIN A_CAPTURE A_TILES B_CAPTURE B_TILES OUT" >&2; exit 2; }
bin=$1 acap=$2 atiles=$3 bcap=$4 btiles=$5 out=$6
for f in "$acap" "$atiles" "$bcap" "$btiles"; do
	[ -r "$f" ] && [ -f "$f" ] || die "cannot read '$f': a capture and its tiles file are written by make capture"
done
for t in gnuplot jq; do
	command -v $t >/dev/null || die "cannot run '$t': not installed (make report-deps installs it)"
done

mkdir -p "$out"
"$bin/amp-compare" --tiles "$atiles,$btiles" -o "$out/compare.txt" "$acap" "$bcap"
"$bin/amp-compare" --tiles "$atiles,$btiles" --tsv -o "$out/compare.tsv" "$acap" "$bcap"
json=$("$bin/amp-compare" --tiles "$atiles,$btiles" --json "$acap" "$bcap")

{ read -r amodel; read -r bmodel; read -r amach; read -r bmach; read -r ntiles; } < <(
	jq -r '.a.model, .b.model, .a.machine, .b.machine, ([.tiles.a.tiles, .tiles.b.tiles] | max)' <<< "$json")

# The heatmap grid (pipelines/grid.sh).
. "$(dirname "${BASH_SOURCE[0]}")/grid.sh"
read -r cols rows < <(grid "$ntiles")

# Every tile's received bytes on both sides, from the tiles files' all
# lines (amp-compare has checked them), and the delta.
dat=$out/received_diff.dat
awk -F'\t' -v n="$ntiles" -v cols="$cols" '
	FNR <= 2 || $2 != "all" { next }
	FILENAME == ARGV[1] { a[$1] = $4; next }
	{ b[$1] = $4 }
	END {
		print "# tile\tcolumn\trow\ta_received_bytes\tb_received_bytes\tdelta"
		for (t = 0; t < n; t++)
			printf "%d\t%d\t%d\t%d\t%d\t%d\n", t, t % cols, int(t / cols), a[t] + 0, b[t] + 0, b[t] - a[t]
	}' "$atiles" "$btiles" > "$dat"
# The JSON's deltas are the same figures: a check of both.
diff <(awk -F'\t' '!/^#/ { print $1, $6 }' "$dat") \
	<(jq -r '.tiles.deltas[] | "\(.tile) \(.received_bytes)"' <<< "$json") >/dev/null ||
	die "the tiles files and amp-compare disagree on the bytes received (a bug)"

commas() { sed -E ':a; s/([0-9])([0-9]{3})($|[^0-9])/\1,\2\3/; ta' <<< "$1"; }
gq() { printf "'%s'" "${1//\'/\'\'}"; }
read -r up uptile down downtile sum changed < <(awk -F'\t' '!/^#/ {
	d = $6 + 0
	if (up == "" || d > up) { up = d; ut = $1 }
	if (down == "" || d < down) { down = d; dt = $1 }
	s += d; if (d) c++
} END { printf "%d %d %d %d %d %d\n", up, ut, down, dt, s, c }' "$dat")
top=$(( up > -down ? up : -down )); [ "$top" -gt 0 ] || top=1
sign() { if [ "$1" -ge 0 ]; then printf '+%s' "$(commas "$1")"; else printf -- '-%s' "$(commas "${1#-}")"; fi; }
# name CAPTURE: an artifacts directory's name, or the capture file's.
name() { local n=${1%/capture.json}; n=${n##*/}; echo "${n%.json}"; }
what_a="$amodel on $amach" what_b="$bmodel on $bmach"
[ "$what_a" != "$what_b" ] || what_b=""
# each side's model and machine when they differ, else both once at the end
if [ -n "$what_b" ]; then
	title="bytes received per tile, every run, B - A: A $(name "$acap") ($what_a), B $(name "$bcap") ($what_b)"
else
	title="bytes received per tile, every run, B - A: A $(name "$acap"), B $(name "$bcap") ($what_a)"
fi
title2="largest increase $(sign "$up") on tile $uptile, largest decrease $(sign "$down") on tile $downtile; $changed tiles differ, $(sign "$sum") in all"

cell=$(( 720 / cols )); [ "$cell" -ge 6 ] || cell=6; [ "$cell" -le 20 ] || cell=20
width=$(( cols * cell + 260 )) height=$(( rows * cell + 160 ))
nice() { local s=1; while [ $(( s * 8 )) -lt "$1" ]; do
	case $s in 1*) s=$(( s * 2 )) ;; 2*) s=$(( s * 5 / 2 )) ;; *) s=$(( s * 2 )) ;; esac; done; echo $s; }
xstep=$(nice "$cols") ystep=$(nice "$rows")
{
	cat <<-EOF
	# The heatmap of make report-compare: gnuplot received_diff.gp (in this
	# directory) redraws it from received_diff.dat.
	set terminal pngcairo size $width,$height font 'DejaVu Sans,10' noenhanced
	set output 'received_diff.png'
	set title $(gq "$title") . "\n" . $(gq "$title2")
	set size ratio -1
	set xrange [-0.5:$cols - 0.5]
	set yrange [$rows - 0.5:-0.5]
	set xtics 0,$xstep out nomirror
	set ytics 0,$ystep out nomirror
	set xlabel 'column (tile mod $cols)'
	set ylabel 'row (tile div $cols)'
	set cblabel 'bytes, B - A' offset 1.5,0
	set palette defined (-1 '#2166ac', -0.5 '#92c5de', 0 '#f7f7f7', 0.5 '#f4a582', 1 '#b2182b')
	set cbrange [-$top:$top]
	EOF
	if [ "$top" -lt 1000000 ]; then echo "set format cb '%.0f'"; else echo "set format cb '%.1s%c'"; fi
	cat <<-EOF
	set style fill solid border lc rgb '#ffffff'
	unset key
	plot 'received_diff.dat' using 2:3:(0.5):(0.5):6 with boxxyerror fillcolor palette
	unset output
	EOF
} > "$out/received_diff.gp"
(cd "$out" && gnuplot received_diff.gp) || die "gnuplot failed on '$out/received_diff.gp'"
