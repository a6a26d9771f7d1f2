#!/usr/bin/env bash
# The matrix-product kernels alone (bench/kernel.c), one thread, against
# this machine's one-thread peaks (bench/peak.c): run_gemm_strips against the
# separate multiply and add of its width, run_gemm_ref against the fused
# multiply-add of its width. Run on a quiet machine. Prints figures; not
# a test.
set -euo pipefail
export LC_ALL=C
cd "$(dirname "$0")/.."
make -s all
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cc -O3 -march=native -ffp-contract=off -pthread -o "$tmp/peak" bench/peak.c
cc -O2 -std=c11 -D_POSIX_C_SOURCE=200809L -Ilib -o "$tmp/kernel" bench/kernel.c build/rel/libamp.a \
	$(pkg-config --libs yaml-0.1 libzstd) -lm -pthread
"$tmp/peak" > "$tmp/peaks"
echo "one-thread peaks (GFLOP/s): $(grep -- '-1 ' "$tmp/peaks" | tr '\n' ' ')"
printf '%-16s %-15s %-16s %-8s %8s %8s\n' kernel shape MxKxN width GFLOP/s "% peak"
"$tmp/kernel" | while read -r k name shape w g; do
	wd=${w%-wide}
	case $k in run_gemm_ref) key=fma$wd-1 ;; *) key=muladd$wd-1 ;; esac
	p=$(awk -v k="$key" '$1 == k { print $2 }' "$tmp/peaks")
	printf '%-16s %-15s %-16s %-8s %8s %7.0f%%\n' "$k" "$name" "$shape" "$w" "$g" \
		"$(awk -v g="$g" -v p="${p:-0}" 'BEGIN { print (p > 0 ? 100 * g / p : 0) }')"
done
