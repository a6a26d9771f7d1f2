#!/usr/bin/env bash
# Every stage of the pipeline on a model (default siglip-mlp), each reading
# the previous stage's zstd output (-z). Per stage: wall time and peak RSS
# (best of 5, through /usr/bin/time -v), output size compressed and not,
# output lines, and wall time over the I/O floor: `zstd -dc INPUT` best of 5
# (`cat MODEL` for amp-plan). Wall time is taken from $EPOCHREALTIME around
# /usr/bin/time (its own clock has 10 ms steps), the same way for stage and
# floor. amp-emit reads the grouped stage and writes the program (with
# EMIT_FLAGS, default --table-budget 1000000, so that a plan over the
# budget is still measured); amp-capture reads the grouped stage and writes
# JSON. Prints figures and exits 0 even on FAIL; 1 if a stage cannot run.
set -euo pipefail
export LC_ALL=C
model=${1:-}
[ -z "$model" ] || model=$(realpath -- "$model")
cd "$(dirname "$0")/.."
model=${model:-share/models/siglip-mlp.yaml}
[ -r "$model" ] || { echo "stages.sh: cannot read '$model'" >&2; exit 1; }
make -s all
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

. bench/measure.bash

echo "model: $model"
printf '%-13s %8s %12s %12s %12s %9s %7s\n' stage wall "peak RSS" \
	"zstd bytes" bytes lines "x floor"
in=$model verdicts=()
read -r -a emit_flags <<< "${EMIT_FLAGS:---table-budget 1000000}"
for stage in plan compose expand exchange group emit capture; do
	out=$tmp/$stage.yaml.zst
	if [ "$stage" = plan ]; then measure cat "$in"; else measure zstd -qdcf "$in"; fi
	floor=$best_us
	case $stage in
	emit) out=$tmp/program.amp; measure bin/amp-emit --no-model "${emit_flags[@]}" -o "$out" "$in" ;;
	capture) out=$tmp/capture.json; measure bin/amp-capture -o "$out" "$in" ;;
	*) measure "bin/amp-$stage" -z -o "$out" "$in" ;;
	esac
	zbytes=$(wc -c < "$out")
	bytes=$(zstd -qdcf "$out" | wc -c)
	lines=$(zstd -qdcf "$out" | wc -l)
	awk -v n="amp-$stage" -v us="$best_us" -v kib="$best_kib" -v f="$floor" \
		-v zb="$zbytes" -v b="$bytes" -v l="$lines" 'BEGIN {
		r = f > 0 ? sprintf("%.1f", us / f) : "-"
		printf "%-13s %6.3f s %8d KiB %12d %12d %9d %7s\n", n, us / 1e6, kib, zb, b, l, r
	}'
	verdicts+=("$(awk -v n="amp-$stage" -v us="$best_us" -v kib="$best_kib" 'BEGIN {
		printf "%-13s %s", n, (us < 2e6 && kib < 512 * 1024) ? "PASS" : "FAIL"
	}')")
	case $stage in emit|capture) ;; *) in=$out ;; esac
done
echo "target: every stage < 2 s and < 512 MiB"
printf '%s\n' "${verdicts[@]}"
