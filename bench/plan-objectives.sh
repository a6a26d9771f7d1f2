#!/usr/bin/env bash
# amp-plan alone on a model (default the 27-layer, batch-2 SigLIP-so400m)
# under each objective (default memory and cycles; OBJECTIVES="memory
# cycles capacity" for more): per objective the wall time and peak RSS
# (/usr/bin/time -v; wall from $EPOCHREALTIME, best of RUNS, default 3)
# and that run's CPU time (user + sys, both threads), which a busy
# machine stretches less than the wall. Prints figures; not a test.
set -euo pipefail
export LC_ALL=C
model=${1:-}
[ -z "$model" ] || model=$(realpath -- "$model")
cd "$(dirname "$0")/.."
model=${model:-share/models/siglip-so400m.yaml}
[ -r "$model" ] || { echo "plan-objectives.sh: cannot read '$model'" >&2; exit 1; }
runs=${RUNS:-3}
make -s all
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

. bench/measure.bash

cpu() { # the CPU seconds of /usr/bin/time -v's report in $tmp/time
	awk -F': ' '/User time/{u=$2} /System time/{s=$2} END{printf "%.2f", u + s}' "$tmp/time"
}

echo "model: $model (best of $runs)"
printf '%-16s %9s %12s %9s\n' objective wall "peak RSS" cpu
for o in ${OBJECTIVES:-memory cycles}; do
	best_cpu=
	best=
	for ((r = 0; r < runs; r++)); do
		runs=1 measure bin/amp-plan --objective "$o" -o "$tmp/plan.yaml" "$model"
		if [ -z "$best" ] || [ "$best_us" -lt "$best" ]; then
			best=$best_us best_rss=$best_kib best_cpu=$(cpu)
		fi
	done
	printf '%-16s %8.3fs %8d KiB %8ss\n' "$o" "$(awk -v u="$best" 'BEGIN{print u/1e6}')" \
		"$best_rss" "$best_cpu"
done
