#!/usr/bin/env bash
# Compile a whole model (default: the 27-layer, batch-2 SigLIP-so400m)
# from amp-plan through amp-capture, each stage reading the previous one's
# output, as `make capture` runs them. Per stage: wall time and peak RSS
# (/usr/bin/time -v; wall from $EPOCHREALTIME, best of RUNS, default 3)
# and output size; then the totals against the target (at most 12 s and
# 512 MB peak RSS on this 2-core machine, the cycles objective's search and
# amp-group's schedule included; bench/README.md has the figures). amp-plan
# runs with PLAN_FLAGS (default none: the cycles objective) and amp-emit
# with EMIT_FLAGS (default none: the machine's own limits; a study may
# raise them). Prints figures; not a test.
set -euo pipefail
export LC_ALL=C
model=${1:-}
[ -z "$model" ] || model=$(realpath -- "$model")
cd "$(dirname "$0")/.."
model=${model:-share/models/siglip-so400m.yaml}
[ -r "$model" ] || { echo "compile.sh: cannot read '$model'" >&2; exit 1; }
runs=${RUNS:-3}
make -s all
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
read -r -a emit_flags <<< "${EMIT_FLAGS:-}"
read -r -a plan_flags <<< "${PLAN_FLAGS:-}"

. bench/measure.bash

echo "model: $model (best of $runs)"
printf '%-9s %9s %12s %12s %8s\n' stage wall "peak RSS" bytes lines
in=$model total_us=0 max_kib=0
for stage in plan compose expand exchange group emit capture; do
	out=$tmp/$stage.yaml
	case $stage in
	plan) measure bin/amp-plan "${plan_flags[@]}" -o "$out" "$in" ;;
	emit) out=$tmp/program.amp; measure bin/amp-emit --no-model "${emit_flags[@]}" -o "$out" "$in" ;;
	capture) out=$tmp/capture.json; measure bin/amp-capture -o "$out" "$in" ;;
	*) measure "bin/amp-$stage" -o "$out" "$in" ;;
	esac
	lines=-
	case $stage in emit) ;; *) lines=$(wc -l < "$out") ;; esac
	printf '%-9s %8.3fs %8d KiB %12d %8s\n' "$stage" "$(awk -v u="$best_us" 'BEGIN{print u/1e6}')" \
		"$best_kib" "$(wc -c < "$out")" "$lines"
	total_us=$((total_us + best_us))
	[ "$best_kib" -gt "$max_kib" ] && max_kib=$best_kib
	case $stage in emit|capture) ;; *) in=$out ;; esac
done
awk -v us="$total_us" -v kib="$max_kib" 'BEGIN {
	printf "total %.3f s, largest peak RSS %d KiB (target: at most 12 s and 512 MB: %s)\n", us / 1e6, kib,
		(us <= 12e6 && kib * 1024 <= 512e6) ? "PASS" : "FAIL" }'
