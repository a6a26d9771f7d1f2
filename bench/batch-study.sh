#!/usr/bin/env bash
# The batch study and the prompt-length study (docs/sweeps.md): a decode
# step of the Qwen2.5-0.5B- and SmolLM2-360M-shaped decoders at each batch
# (sweeps/decode-batch.yaml, context 2,048) and their prefill at each
# prompt length (sweeps/prefill-tokens.yaml): modelled cycles beside the
# model's bound (amp-capture's summary.bound), microseconds and tokens/s
# at the machine's clock. Runs each sweep (amp-sweep jobs, then its
# Makefile), prints one row per job and draws docs/decode-batch.png and
# docs/prefill-tokens.png with gnuplot, one line per model, the bound
# dashed. A job that does not fit the machine is listed with the stage
# that refused it and left out of the figure.
#
#   bench/batch-study.sh [DIR] [DOCS]   (default artifacts/batch-study, docs)
set -euo pipefail
export LC_ALL=C
cd "$(dirname "$0")/.."
dir=${1:-artifacts/batch-study}
docs=${2:-docs}
make -s all
hz=$(awk '$1 == "clock_hz:" { print $2 }' share/machines/amp1472.yaml)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

# study NAME SPEC AXIS PNG XLABEL TITLE
study() {
	local name=$1 spec=$2 axis=$3 png=$4 xlabel=$5 title=$6 out=$dir/$1 m f
	[ -d "$out" ] || bin/amp-sweep jobs -o "$out" "$spec" 2>/dev/null
	make -s -C "$out" -j2 >/dev/null
	bin/amp-sweep merge -o "$out/merge.tsv" "$out"
	# model x cycles bound us tokens/s bound-us; tokens a run: batch x tokens
	awk -F'\t' -v hz="$hz" -v axis="$axis" '
		NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
		$col["status"] == "ok" {
			c = $col["total_cycles"]; b = $col["bound_cycles"]; x = $col[axis]
			printf "%s %d %d %d %.1f %.0f %.1f\n", $col["model"], x, c, b, c / hz * 1e6, x * hz / c, b / hz * 1e6
		}' "$out/merge.tsv" | sort -k1,1 -k2,2n > "$tmp/$name.ok"
	printf '\n%s\n\n| model | %s | cycles a run | bound | x bound | us a run | tokens/s |\n|---|---|---|---|---|---|---|\n' \
		"$title" "$axis"
	awk '{ printf "| %s | %d | %d | %d | %.2f | %.1f | %d |\n", $1, $2, $3, $4, $3 / $4, $5, $6 }' "$tmp/$name.ok"
	awk -F'\t' -v axis="$axis" 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
		$col["status"] != "ok" { printf "| %s | %s | %s | - | - | - | - |\n", $col["model"], $col[axis], $col["status"] }' \
		"$out/merge.tsv" | sort
	mkdir -p "$tmp/$name"
	for m in $(cut -d' ' -f1 "$tmp/$name.ok" | uniq); do
		awk -v m="$m" '$1 == m' "$tmp/$name.ok" > "$tmp/$name/$m.dat"
	done
	{
		echo 'set terminal pngcairo size 1000,420 font "sans,10"'
		echo "set output '$tmp/$name.png'"
		echo 'set multiplot layout 1,2'
		echo "set logscale x 2; set xlabel \"$xlabel\"; set grid; set key top left"
		echo "set title \"$title (amp1472, 1.5 GHz)\"; set ylabel \"microseconds a run\"; set yrange [0:*]"
		plot "$tmp/$name" 5 7
		echo 'set title "throughput"; set ylabel "tokens/s"; set yrange [0:*]'
		plot "$tmp/$name" 6
		echo 'unset multiplot'
	} > "$tmp/$name.gp"
	gnuplot "$tmp/$name.gp"
	mv "$tmp/$name.png" "$png"
	echo "wrote $png"
}

# plot DIR COLUMN [BOUND_COLUMN]: one line per model, its bound dashed beside it
plot() {
	local f m sep='' i=0
	printf 'plot '
	for f in "$1"/*.dat; do
		m=$(basename "$f" .dat) i=$((i + 1))
		printf "%s'%s' using 2:%d with linespoints lc %d title '%s'" "$sep" "$f" "$2" "$i" "$m"
		[ -z "${3:-}" ] || printf ", '%s' using 2:%d with lines lc %d dashtype 2 title '%s bound'" "$f" "$3" "$i" "$m"
		sep=', '
	done
	echo
}

study decode sweeps/decode-batch.yaml batch "$docs/decode-batch.png" "batch (sequences, one token each)" \
	"decode step at context 2,048"
study prefill sweeps/prefill-tokens.yaml tokens "$docs/prefill-tokens.png" "prompt length (tokens, one sequence)" \
	"prefill of one prompt"
