#!/usr/bin/env bash
# amp-run on a model (default siglip-mlp): calibrate its fp8 scales, plan,
# lower and emit it (EMIT_FLAGS, default --table-budget 1000000, so a plan
# over the table budget is still measured), then run the program, FP32
# reference included: wall time and peak RSS (best of 3, /usr/bin/time -v),
# the checks' figures, and the GFLOP/s of the matrix products against this
# machine's peak for a plain fp32 multiply-add loop (bench/peak.c, two
# threads). Prints figures; not a test.
set -euo pipefail
export LC_ALL=C
model=${1:-}
[ -z "$model" ] || model=$(realpath -- "$model")
cd "$(dirname "$0")/.."
model=${model:-share/models/siglip-mlp.yaml}
make -s all
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
read -r -a emit_flags <<< "${EMIT_FLAGS:---table-budget 1000000}"

flags=-O3
grep -q ' avx2 ' /proc/cpuinfo && grep -q ' fma ' /proc/cpuinfo && flags="-O3 -mavx2 -mfma"
cc $flags -pthread -o "$tmp/peak" bench/peak.c
peak=$("$tmp/peak")

bin/amp-run --calibrate "$model" -o "$tmp/scales.yaml"
bin/amp-plan --scales "$tmp/scales.yaml" "$model" | bin/amp-compose | bin/amp-expand |
	bin/amp-exchange | bin/amp-group > "$tmp/grouped.yaml"
bin/amp-emit "${emit_flags[@]}" -o "$tmp/program.amp" "$tmp/grouped.yaml"

best= kib= out=
for _ in 1 2 3; do
	t0=${EPOCHREALTIME/./}
	/usr/bin/time -v -o "$tmp/time" bin/amp-run --timing "$tmp/program.amp" > "$tmp/out" 2> "$tmp/err"
	t1=${EPOCHREALTIME/./}
	us=$((t1 - t0))
	if [ -z "$best" ] || [ "$us" -lt "$best" ]; then
		best=$us
		kib=$(awk -F': ' '/Maximum resident set size/{print $2}' "$tmp/time")
		out=$(cat "$tmp/out"); gemm=$(grep 'matrix products' "$tmp/err" || true)
	fi
done
echo "model: $model"
printf '%s\n' "$out"
awk -v us="$best" -v kib="$kib" 'BEGIN {
	printf "amp-run: %.3f s, peak RSS %d KiB (target: < 10 s, < 2 GiB: %s)\n", us / 1e6, kib,
		(us < 10e6 && kib < 2 * 1024 * 1024) ? "PASS" : "FAIL" }'
rate=$(printf '%s\n' "$gemm" | sed -n 's/.* \([0-9.]*\) GFLOP\/s$/\1/p')
printf '%s\n' "${gemm#amp-run: }"
awk -v r="$rate" -v p="$peak" 'BEGIN { printf "plain fp32 multiply-add peak, 2 threads: %.2f GFLOP/s; matrix products at %.0f%% of it\n", p, 100 * r / p }'
