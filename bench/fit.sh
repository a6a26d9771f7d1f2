#!/usr/bin/env bash
# Where each model stands against a machine's own limits: amp-plan's
# defaults, lowered, emitted at the machine's limits (amp-emit --report)
# and captured. One row per model: the largest and median tile's table
# bytes, the largest fragment count, the largest SRAM use (tensors +
# tables), total modelled cycles beside the model's bound (amp-capture's
# summary.bound: what no plan of the model on the machine beats; the
# plan-independent lower bound of formats/capture.md) and the ratio,
# the exchange phases a run (and, for a repeat, those of one iteration of
# its body), the parameter bytes received a run (every receiver counted),
# the exchange's ratio to its per-phase floors, and whether amp-emit
# wrote the program (or amp-plan's reason when no plan fits). Prints
# figures; not a test.
#
# The compile column is amp-plan's and the lowering's wall seconds (plan,
# compose, expand, exchange, group).
#
#   bench/fit.sh [MACHINE] [MODEL...]   (default amp1472 and every
#                                        SigLIP-so400m, PE-Core-L14,
#                                        Qwen2.5-0.5B and SmolLM2 file, and
#                                        PE-Core-L14's approximation of
#                                        before model format 9,
#                                        bench/models/pe-core-l14-approx*)
set -euo pipefail
export LC_ALL=C
cd "$(dirname "$0")/.."
machine=${1:-share/machines/amp1472.yaml}
shift || true
models=("$@")
[ ${#models[@]} -gt 0 ] || models=(share/models/siglip-mlp.yaml share/models/siglip-so400m.yaml
	share/models/siglip-so400m-b1.yaml share/models/pe-core-l14.yaml share/models/pe-core-l14-b2.yaml
	share/models/pe-core-l14-b4.yaml share/models/pe-core-l14-b8.yaml
	bench/models/pe-core-l14-approx.yaml bench/models/pe-core-l14-approx-b2.yaml
	bench/models/pe-core-l14-approx-b4.yaml bench/models/pe-core-l14-approx-b8.yaml
	share/models/qwen2.5-0.5b-prefill.yaml share/models/qwen2.5-0.5b-decode.yaml
	share/models/qwen2.5-0.5b-1layer-prefill.yaml share/models/qwen2.5-0.5b-1layer-decode.yaml
	share/models/smollm2-360m-prefill.yaml share/models/smollm2-360m-decode.yaml
	share/models/smollm2-360m-1layer-prefill.yaml share/models/smollm2-360m-1layer-decode.yaml
	share/models/smollm2-135m-prefill.yaml share/models/smollm2-135m-decode.yaml)
make -s all
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

echo "machine: $machine"
printf '| model | compile s | tables max / median | fragments max | SRAM (tensors + tables) max | total cycles | bound | x bound | phases (per body run) | parameter bytes moved | exchange x phase floors | program |\n'
printf '|---|---|---|---|---|---|---|---|---|---|---|---|\n'
for m in "${models[@]}"; do
	n=$(basename "$m" .yaml)
	t0=$(date +%s.%N)
	if ! bin/amp-plan --machine "$machine" -o "$tmp/plan.yaml" "$m" 2> "$tmp/err"; then
		printf '| %s | - | - | - | - | - | - | - | - | - | - | no plan: %s |\n' "$n" "$(tail -n 1 "$tmp/err" | sed 's/^amp-plan: [^ ]*: //' | cut -c1-160)"
		continue
	fi
	bin/amp-compose "$tmp/plan.yaml" | bin/amp-expand | bin/amp-exchange | bin/amp-group > "$tmp/g.yaml"
	secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')
	written=written
	bin/amp-emit --no-model --machine "$machine" --report -o "$tmp/p.amp" "$tmp/g.yaml" 2> "$tmp/emit" || written="not written"
	sram=$(sed -n 's/^amp-emit: largest SRAM use: tile [0-9]*, \([0-9]*\) bytes.*/\1/p' "$tmp/emit")
	bin/amp-capture --machine "$machine" -o "$tmp/c.json" "$tmp/g.yaml"
	jq -r --arg n "$n" --arg s "${sram:--}" --arg w "$written" --arg c "$(printf '%.1f' "$secs")" \
		'.phases as $ph | ([$ph[] | select(.count > 1)] | length) as $body |
		 ([.phase_traffic | to_entries[] | ($ph[.key | tonumber].count) as $k | .value[] |
		   select(.movement == "parameter") | .receiver_payload_bytes * $k] | add // 0) as $param |
		 .summary | "| \($n) | \($c) | \(.max_table_bytes) / \(.median_table_bytes) | \(.max_fragments) | \($s) | \(.total_cycles) | \(.bound.bound_cycles) | \(.bound.ratio) | \(.phases) (\($body)) | \($param) | \(.exchange_floor_ratio) | \($w) |"' "$tmp/c.json"
done
