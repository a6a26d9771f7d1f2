#!/usr/bin/env bash
# Wall time and peak RSS of amp-plan and amp-compose on a model (default
# siglip-mlp), best of 5 runs, through /usr/bin/time -v. Prints figures; it
# is not a test.
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:-share/models/siglip-mlp.yaml}
make -s all
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

measure() { # name, command...
	local name=$1; shift
	local best_t= best_m=
	for _ in 1 2 3 4 5; do
		/usr/bin/time -v -o "$tmp/t" "$@" > /dev/null
		t=$(awk -F': ' '/Elapsed \(wall clock\)/{print $2}' "$tmp/t")
		m=$(awk -F': ' '/Maximum resident set size/{print $2}' "$tmp/t")
		s=$(echo "$t" | awk -F: '{ if (NF == 3) print $1*3600+$2*60+$3; else print $1*60+$2 }')
		if [ -z "$best_t" ] || awk "BEGIN{exit !($s < $best_t)}"; then best_t=$s; best_m=$m; fi
	done
	printf '%-12s %8.3f s %10d KiB\n' "$name" "$best_t" "$best_m"
}

echo "model: $model"
printf '%-12s %10s %14s\n' stage wall "peak RSS"
bin/amp-plan -o "$tmp/plan.yaml" "$model"
measure amp-plan bin/amp-plan -o "$tmp/p2.yaml" "$model"
measure amp-compose bin/amp-compose -o "$tmp/c.yaml" "$tmp/plan.yaml"
printf 'plan: %d bytes, %d lines\n' "$(wc -c < "$tmp/plan.yaml")" "$(wc -l < "$tmp/plan.yaml")"
