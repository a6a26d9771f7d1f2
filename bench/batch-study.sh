#!/usr/bin/env bash
# The batch study (sweeps/decode-batch.yaml): a decode step's modelled
# time and throughput at each batch, for the Qwen2.5-0.5B- and
# SmolLM2-360M-shaped decoders at context 2,048, beside the model's bound
# (amp-capture's summary.bound). Runs the sweep (amp-sweep jobs, then its
# Makefile), prints one row per job and draws docs/decode-batch.png with
# gnuplot: microseconds per step and tokens/s against the batch, one line
# per model, the bound dashed. A batch that does not fit the machine is
# listed with amp-plan's reason and left out of the figure.
#
#   bench/batch-study.sh [DIR] [PNG]   (default artifacts/batch-study,
#                                       docs/decode-batch.png)
set -euo pipefail
export LC_ALL=C
cd "$(dirname "$0")/.."
dir=${1:-artifacts/batch-study}
png=${2:-docs/decode-batch.png}
make -s all
[ -d "$dir" ] || bin/amp-sweep jobs -o "$dir" sweeps/decode-batch.yaml
make -s -C "$dir" -j2 >/dev/null
bin/amp-sweep merge -o "$dir/merge.tsv" "$dir"
hz=$(awk '$1 == "clock_hz:" { print $2 }' share/machines/amp1472.yaml)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
# model batch cycles bound us tokens/s, by model and batch
awk -F'\t' -v hz="$hz" '
	NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
	$col["status"] == "ok" {
		c = $col["total_cycles"]; b = $col["bound_cycles"]
		printf "%s %d %d %d %.1f %.0f %.1f\n", $col["model"], $col["batch"], c, b, c / hz * 1e6,
			$col["batch"] * hz / c, b / hz * 1e6
	}' "$dir/merge.tsv" | sort -k1,1 -k2,2n > "$tmp/ok.dat"
printf '| model | batch | cycles per step | bound | x bound | us per step | tokens/s |\n|---|---|---|---|---|---|---|\n'
awk '{ printf "| %s | %d | %d | %d | %.2f | %.1f | %d |\n", $1, $2, $3, $4, $3 / $4, $5, $6 }' "$tmp/ok.dat"
awk -F'\t' 'NR > 1 && $4 != "ok" { printf "| %s | %s | %s | - | - | - | - |\n", $2, $3, $4 }' "$dir/merge.tsv" | sort
for m in $(cut -d' ' -f1 "$tmp/ok.dat" | uniq); do
	awk -v m="$m" '$1 == m' "$tmp/ok.dat" > "$tmp/$m.dat"
done
# plot COLUMN [BOUND_COLUMN]: one line per model, its bound dashed beside it
plot() {
	local f m sep='' i=0
	printf 'plot '
	for f in "$tmp"/*.dat; do
		[ "$(basename "$f")" = ok.dat ] && continue
		m=$(basename "$f" .dat) i=$((i + 1))
		printf "%s'%s' using 2:%d with linespoints lc %d title '%s'" "$sep" "$f" "$1" "$i" "$m"
		[ -z "${2:-}" ] || printf ", '%s' using 2:%d with lines lc %d dashtype 2 title '%s bound'" "$f" "$2" "$i" "$m"
		sep=', '
	done
	echo
}
{
	echo 'set terminal pngcairo size 1000,420 font "sans,10"'
	echo "set output '$tmp/out.png'"
	echo 'set multiplot layout 1,2'
	echo 'set logscale x 2; set xlabel "batch (sequences, one token each)"; set grid; set key top left'
	echo 'set title "decode step at context 2,048 (amp1472, 1.5 GHz)"; set ylabel "microseconds per step"; set yrange [0:*]'
	plot 5 7
	echo 'set title "throughput (larger batches do not fit at this context)"; set ylabel "tokens/s"; set yrange [0:*]'
	plot 6
	echo 'unset multiplot'
} > "$tmp/plot.gp"
gnuplot "$tmp/plot.gp"
mv "$tmp/out.png" "$png"
echo "wrote $png"
