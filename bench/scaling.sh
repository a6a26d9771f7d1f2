#!/usr/bin/env bash
# How compile time grows with the work: PE-Core-L14 at batch 1, 2, 4 and 8
# (share/models/pe-core-l14*.yaml, all held by the default machine at its
# own limits), compiled from amp-plan through amp-capture as bench/compile.sh
# does. Per model: each stage's wall time (best of RUNS, default 1) and the
# transfers the program makes (capture.json's summary.transfers: every
# SEND member, the expanded instructions), then each stage's microseconds
# per thousand transfers. Cost linear in the expanded instructions keeps
# that column flat as the batch grows. MACHINE= picks another machine
# file. Prints figures; not a test.
set -euo pipefail
export LC_ALL=C
cd "$(dirname "$0")/.."
machine=${MACHINE:-share/machines/amp1472.yaml}
runs=${RUNS:-1}
make -s all
command -v jq > /dev/null || { echo "scaling.sh: needs jq" >&2; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

. bench/measure.bash

stages="plan compose expand exchange group emit capture"
printf '%-6s %12s' batch transfers
for s in $stages; do printf ' %9s' "$s"; done
printf ' %9s\n' total
declare -A per
for b in 1 2 4 8; do
	m=share/models/pe-core-l14.yaml
	[ "$b" = 1 ] || m=share/models/pe-core-l14-b$b.yaml
	in=$m total=0 line=""
	for s in $stages; do
		out=$tmp/$s.yaml
		case $s in
		plan) measure bin/amp-plan -m "$machine" -o "$out" "$in" ;;
		emit) out=$tmp/program.amp; measure bin/amp-emit --no-model -m "$machine" -o "$out" "$in" ;;
		capture) out=$tmp/capture.json; measure bin/amp-capture -m "$machine" -o "$out" "$in" ;;
		*) measure "bin/amp-$s" -o "$out" "$in" ;;
		esac
		line+=$(printf ' %8.3fs' "$(awk -v u="$best_us" 'BEGIN{print u/1e6}')")
		per[$b.$s]=$best_us
		total=$((total + best_us))
		case $s in emit|capture) ;; *) in=$out ;; esac
	done
	n=$(jq '.summary.transfers' "$tmp/capture.json")
	per[$b.n]=$n per[$b.total]=$total
	printf '%-6s %12d%s %8.3fs\n' "$b" "$n" "$line" "$(awk -v u="$total" 'BEGIN{print u/1e6}')"
done
echo
echo "microseconds per thousand transfers:"
printf '%-6s' batch
for s in $stages total; do printf ' %9s' "$s"; done
echo
for b in 1 2 4 8; do
	printf '%-6s' "$b"
	for s in $stages total; do
		awk -v u="${per[$b.$s]}" -v n="${per[$b.n]}" 'BEGIN { printf " %9.1f", u / (n / 1000) }'
	done
	echo
done
