#!/usr/bin/env bats
# amp-capture: the model's bound (formats/capture.md, "The bound"), worked
# out by hand from the model files' shapes and the machine's rates, the
# same for every plan of a model, and never above a plan's total.

load common
load stages
load amp-capture
bats_require_minimum_version 1.5.0

setup_file() {
	capture_fixtures tiny vit
	# a one-layer Qwen decode step: spread products and norms after them
	export DEC=$BATS_FILE_TMPDIR/dec.yaml DEC_CAPTURE=$BATS_FILE_TMPDIR/dec.json
	[ -s "$DEC_CAPTURE" ] || { grouped "$MODELS/qwen2.5-0.5b-1layer-decode.yaml" "$DEC" && amp-capture "$DEC" -o "$DEC_CAPTURE"; }
}

# movement F R E: the Loomis-Whitney term of one group on amp1472 (rate
# 128 fp8 MACs, 1472 tiles, 4 B a cycle), by the formula of
# formats/capture.md, in awk: g(f) at the three candidate points, the
# least, less F / (P r), rounded down.
movement() {
	awk -v F="$1" -v R="$2" -v e="$3" 'BEGIN {
		r = 128; P = 1472; X = 4; lo = F / P
		at[0] = lo; at[1] = (F * e * r / (X * P)) ^ 0.75; at[2] = (3 * F / R) ^ 3
		for (k = 0; k < 3; k++) {
			f = at[k]; if (f < lo) f = lo; if (f > F) f = F
			m = 3 * F / f ^ (1 / 3) - R
			g = f / r + (m > 0 ? m * e / (X * P) : 0)
			if (k == 0 || g < best) best = g
		}
		x = best - lo / r; print (x > 0 ? int(x) : 0)
	}'
}

# gemm M K N: its movement term (fp8, e = 1) with R = MK + KN + MN.
gemm() {
	movement $(($1 * $2 * $3)) $(($1 * $2 + $2 * $3 + $1 * $3)) 1
}

bound_is() {        # CAPTURE COMPUTE CALLS SYNC MOVEMENT
	run jq -r '.summary.bound | "\(.bound_compute_cycles) \(.bound_calls_cycles) \(.bound_sync_cycles) \(.bound_movement_cycles) \(.bound_cycles)"' "$1"
	assert_output "$2 $3 $4 $5 $(($2 + $3 + $4 + $5))"
}

@test "bound of tiny-mlp by hand: its compute spread, two dependent products, no norm after a spread one, two GEMMs' movement" {
	# x [2, 37, 80]: 74 rows. layernorm 74 x 80 at 2 cycles; mlp_up 74 x 80 x 200
	# and mlp_down 74 x 200 x 80 MACs at 128 (fp8); gelu 74 x 200, add 74 x 80 at 1
	local macs=$((74 * 80 * 200 * 2)) rest=$((74 * 80 * 2 + 74 * 200 + 74 * 80))
	local compute=$(((rest * 128 + macs + 128 * 1472 - 1) / (128 * 1472)))
	assert_equal "$compute" 35
	# mlp_up then mlp_down: 2 calls of 200 cycles; the layernorm reads the input: no sync
	local mv=$(($(gemm 74 80 200) + $(gemm 74 200 80)))
	bound_is "$TINY_CAPTURE" "$compute" 400 0 "$mv"
	run jq -r '.summary.bound | "\(.bound_products) \(.bound_syncs) \(.bound_spread_products)"' "$TINY_CAPTURE"
	assert_output "2 0 0"
}

@test "bound of a one-layer Qwen decode step by hand: seven products on the chain, two norms after spread products" {
	# MACs (fp8) of q, kv, o, gate, up, down (8 rows, width 896, 2 kv heads of
	# 64, MLP 4864) and the tied lm_head over 151936 columns
	local macs=$((8 * 896 * 896 * 2 + 8 * 896 * 256 + 8 * 896 * 4864 * 3 + 8 * 896 * 151936))
	# attention: 8 sequences x 14 heads x 2048 keys (positions: every key), D 64:
	# q.k^T and p.v at 64 fp16 MACs a cycle, the softmax at 2 a score
	local scores=$((8 * 14 * 2048))
	local rest=$((2 * scores * 64 / 64 + 2 * scores))
	# rmsnorm n1, n2, norm_f (2 a cycle); rope q and k, the two adds, silu and mul (1);
	# append: 8 rows of 256 fp16 at 8 bytes a cycle
	rest=$((rest + 3 * 8 * 896 * 2 + 8 * 896 + 8 * 256 + 2 * 8 * 896 + 2 * 8 * 4864 + 8 * 256 * 2 / 8))
	local compute=$(((rest * 128 + macs + 128 * 1472 - 1) / (128 * 1472)))
	# chain: q 1, attention 2, o 1, gate 1, down 1, lm_head 1
	# forced syncs: n2 (after o: wo is 802,816 B > 586,960) and norm_f (after down);
	# n1 reads the embedding, which no product made
	# movement: q and kv share xn (N 1152), gate and up share hn (N 9728), o, down, lm_head
	local mv=$(($(gemm 8 896 1152) + $(gemm 8 896 896) + $(gemm 8 896 9728) + $(gemm 8 4864 896) + $(gemm 8 896 151936)))
	bound_is "$DEC_CAPTURE" "$compute" 1400 1200 "$mv"
	run jq -r '.summary.bound | "\(.bound_products) \(.bound_syncs) \(.bound_spread_products)"' "$DEC_CAPTURE"
	# spread: q, attention (8 MB of cache), o, gate, up, down, lm_head; not kv (229,376 B)
	assert_output "7 2 7"
}

@test "bound is the same for every plan of a model, and below each plan's total" {
	local m=$MODELS/tiny-mlp.yaml amp=$MACHINES/amp1472.yaml
	amp-plan "$m" | amp-compose | amp-expand | amp-exchange | amp-group | amp-capture -o a.json
	amp-plan --ownership tokens --objective memory "$m" | amp-compose | amp-expand | amp-exchange | amp-group |
		amp-capture -o b.json
	sed 's/mlp_down: {grid: \[3, 2, 5\], cast: late}/mlp_down: {grid: [1, 1, 5], cast: early}\n  mlp_up: {grid: [2, 1, 13]}/' "$m" > pinned.yaml
	amp-plan pinned.yaml | amp-compose | amp-expand | amp-exchange | amp-group | amp-capture -o c.json
	# three different programs
	run jq -n --slurpfile a a.json --slurpfile b b.json --slurpfile c c.json \
		'[$a[0], $b[0], $c[0]] | map(.summary.total_cycles) | unique | length'
	assert_output 3
	run jq -n --slurpfile a a.json --slurpfile b b.json --slurpfile c c.json \
		'[$a[0], $b[0], $c[0]] | map(.summary.bound | del(.ratio)) | unique | length'
	assert_output 1
	for f in a.json b.json c.json "$VIT_CAPTURE" "$DEC_CAPTURE"; do
		run jq '.summary | .bound.bound_cycles > 0 and .bound.bound_cycles <= .total_cycles and .bound.ratio >= 1' "$f"
		assert_output true
	done
}

@test "bound moves with the machine's rates, never with what a plan adds" {
	# more fp8 MACs a cycle: a smaller compute term
	study "$TINY" '3s/fp8: \([0-9]*\)}/fp8: 1024}/' fast.yaml
	run amp-capture --machine fast.yaml.machine fast.yaml -o fast.json
	assert_success
	assert [ "$(jq .summary.bound.bound_compute_cycles fast.json)" -lt "$(jq .summary.bound.bound_compute_cycles "$TINY_CAPTURE")" ]
	# a dearer sync or call: the terms scale with their counts
	study "$DEC" '3s/sync_cycles: [0-9]*/sync_cycles: 6000/; 3s/matmul_call_cycles: [0-9]*/matmul_call_cycles: 2000/' slow.yaml
	run amp-capture --machine slow.yaml.machine slow.yaml -o slow.json
	assert_success
	run jq -n --slurpfile a "$DEC_CAPTURE" --slurpfile b slow.json '$a[0].summary.bound as $x | $b[0].summary.bound as $y |
		[$y.bound_sync_cycles == 10 * $x.bound_sync_cycles, $y.bound_calls_cycles == 10 * $x.bound_calls_cycles,
		 $y.bound_products == $x.bound_products, $y.bound_syncs == $x.bound_syncs, $y.bound_syncs > 0] | all'
	assert_output true
}
