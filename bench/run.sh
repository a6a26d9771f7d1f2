#!/usr/bin/env bash
# amp-run on a model (default siglip-mlp): calibrate its fp8 scales, plan,
# lower and emit it (at the machine's own limits; EMIT_FLAGS may override
# them for a study), then run the program, FP32
# reference included: wall time and peak RSS (best of RUNS, default 3,
# /usr/bin/time -v), the checks' figures, and the GFLOP/s of the matrix
# products against this machine's measured fp32 peak for a separate
# multiply and add in registers (bench/peak.c): per core (GFLOP per CPU
# second of the threads that ran them) against the one-thread peak, and
# the wall-clock rate against the two-thread one (its FMA figures are
# printed too).
#
# WHOLE=1 then also runs SigLIP-so400m with one layer and with 27, once
# each, planned by amp-plan's default objective and emitted at the
# machine's own limits, and reports time, memory and cosine of calibration
# and run. The 27-layer run takes minutes and several GiB. Prints figures;
# not a test.
set -euo pipefail
export LC_ALL=C
model=${1:-}
[ -z "$model" ] || model=$(realpath -- "$model")
cd "$(dirname "$0")/.."
model=${model:-share/models/siglip-mlp.yaml}
make -s all
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

# -ffp-contract=off: the multiply-add figures stay a separate multiply and add
cc -O3 -march=native -ffp-contract=off -pthread -o "$tmp/peak" bench/peak.c
"$tmp/peak" > "$tmp/peaks"
peak=$(awk '$1 == "muladd-best-2" { print $2 }' "$tmp/peaks")
peak1=$(awk '$1 == "muladd-best-1" { print $2 }' "$tmp/peaks")
fpeak1=$(awk '$1 == "fma-best-1" { print $2 }' "$tmp/peaks")

secs() { awk -v us="$1" 'BEGIN { printf "%.3f", us / 1e6 }'; }
rss() { awk -F': ' '/Maximum resident set size/{print $2}' "$1"; }

# bench MODEL RUNS PLAN_FLAGS EMIT_FLAGS TARGET: prints the figures
bench() {
	local m=$1 runs=$2 t0 t1 us best= kib= out= timing= cal_us cal_kib
	local -a pf ef
	read -r -a pf <<< "$3"
	read -r -a ef <<< "$4"
	t0=${EPOCHREALTIME/./}
	/usr/bin/time -v -o "$tmp/time" bin/amp-run --calibrate "$m" -o "$tmp/scales.yaml"
	t1=${EPOCHREALTIME/./}
	cal_us=$((t1 - t0)) cal_kib=$(rss "$tmp/time")
	bin/amp-plan "${pf[@]}" --scales "$tmp/scales.yaml" "$m" | bin/amp-compose | bin/amp-expand |
		bin/amp-exchange | bin/amp-group > "$tmp/grouped.yaml"
	bin/amp-emit --no-model "${ef[@]}" -o "$tmp/program.amp" "$tmp/grouped.yaml"
	for ((i = 0; i < runs; i++)); do
		t0=${EPOCHREALTIME/./}
		/usr/bin/time -v -o "$tmp/time" bin/amp-run --timing --model "$m" --scales "$tmp/scales.yaml" "$tmp/program.amp" > "$tmp/out" 2> "$tmp/err"
		t1=${EPOCHREALTIME/./}
		us=$((t1 - t0))
		if [ -z "$best" ] || [ "$us" -lt "$best" ]; then
			best=$us kib=$(rss "$tmp/time")
			out=$(cat "$tmp/out"); timing=$(grep '^amp-run: ' "$tmp/err" || true)
		fi
	done
	local at="at the machine's limits"
	echo "model: $m (plan ${3:-default}; emit ${4:-$at}; best of $runs)"
	printf '%s\n' "$out"
	echo "calibration: $(secs "$cal_us") s, peak RSS $cal_kib KiB"
	echo "amp-run: $(secs "$best") s, peak RSS $kib KiB$5"
	local rate ref core refcore
	rate=$(printf '%s\n' "$timing" | sed -n "s/.*matrix products (the machine's).* \([0-9.]*\) GFLOP\/s, [0-9]* wide;.*/\1/p")
	ref=$(printf '%s\n' "$timing" | sed -n 's/.*its matrix products.* \([0-9.]*\) GFLOP\/s;.*/\1/p')
	core=$(printf '%s\n' "$timing" | sed -n "s/.*matrix products (the machine's).* \([0-9.]*\) GFLOP\/s per core$/\1/p")
	refcore=$(printf '%s\n' "$timing" | sed -n 's/.*its matrix products.* \([0-9.]*\) GFLOP\/s per core$/\1/p')
	printf '%s\n' "$timing" | sed 's/^amp-run: //'
	awk -v r="$rate" -v f="$ref" -v p="$peak" -v c="$core" -v fc="$refcore" -v p1="$peak1" -v q1="$fpeak1" 'BEGIN {
		printf "per core (GFLOP per CPU second of the products'"'"' threads, shards read and written included) against the one-thread peaks in registers (bench/peak.c): the machine'"'"'s %.0f%% of multiply-then-add (%.1f GFLOP/s), the reference'"'"'s %.0f%% of fused (%.1f GFLOP/s)\n", 100 * c / p1, p1, 100 * fc / q1, q1
		printf "wall clock against the two-thread peak (%.1f GFLOP/s; the reference and the machine share the cores): the machine'"'"'s %.0f%%, the reference'"'"'s %.0f%%\n", p, 100 * r / p, 100 * f / p }'
	echo
}

echo "bench/peak.c (GFLOP/s): $(tr '\n' ' ' < "$tmp/peaks")"
echo
bench "$model" "${RUNS:-3}" "" "${EMIT_FLAGS:-}" ""
if [ "$model" = share/models/siglip-mlp.yaml ]; then
	echo "(siglip-mlp target: amp-run at most 3 s; 1-layer at most 6 s; 27 layers at most 60 s and 2 GiB)"
	echo
fi
if [ "${WHOLE:-0}" = 1 ]; then
	bench share/models/siglip-so400m-1layer.yaml 1 "" "" ""
	bench share/models/siglip-so400m.yaml 1 "" "" ""
fi
