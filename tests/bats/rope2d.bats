#!/usr/bin/env bats
# 2D rotary positions (model format 9, stage version 16): a rope with
# `patch_grid: [rows, columns]` and `class_tokens` turns each head's first
# half by the patch's column and its second by its row, as PE-Core's
# Rope2D does (formats/model.md, "rope"; test_run_kernels checks the
# reference against PE's code written out). tests/models/vit-rope2d.yaml
# (a class token, 4 x 4 patches, q and k turned in every layer, LayerScale)
# runs byte-exact within the per-op tolerances; the step carries the grid;
# a stage that changes it is refused against the model, and version 15
# cannot say it; the malformed models tests/bad/model-rope2d-*.yaml are
# refused at their key.

bats_require_minimum_version 1.5.0
load common

setup() {
	cd "$BATS_TEST_TMPDIR" || return 1
	M=$ROOT/tests/models/vit-rope2d.yaml
}

@test "rope2d: a patch-grid rope runs byte-exact and within its tolerance, the step carrying the grid" {
	program "$M" r.amp
	run grep -c '^- {step: [0-9]*, compute: rope, op: rope2d, in: \[qkv_out@canon\], out: qkv_r@canon, heads: 8, head_dim: 16, pairs: interleaved, theta: 1e+04, patch_grid: \[4, 4\], class_tokens: 1}$' r.amp.g
	assert_output 1
	run --separate-stderr amp-run r.amp
	assert_success
	assert_line --regexp '^movement: byte-exact after every phase \([0-9]+ phases\)$'
	assert_line --regexp '^per op: 26 ops checked after every run'
	cosines_at_least 0.99
	# the rotation changes the numbers: without it the output differs
	sed '/name: rope2d,/,/class_tokens: 1, out: qkv_r}/d; s/qkv: qkv_r,/qkv: qkv_out,/' "$M" > plain.yaml
	run grep -c 'op: rope' plain.yaml
	assert_output 0
	program plain.yaml plain.amp
	mkdir -p s p
	amp-run r.amp --save s > /dev/null
	amp-run plain.amp --save p > /dev/null
	[ -e s/pooled.npy ] && [ -e p/pooled.npy ] || fail "no outputs saved"
	! cmp -s s/pooled.npy p/pooled.npy || fail "the model with and without 2D rotations gave the same output"
}

@test "rope2d: rows of several batch entries on a tile (amp736, token ownership) each turn by their own token" {
	# 4 images of 14 x 14 patches and a class token: 788 rows over 736
	# tiles, so each tile holds one token of every batch entry
	sed 's/image: {shape: \[2, 3, 16, 16\]/image: {shape: [4, 3, 56, 56]/; s/pos:     {shape: \[17, 64\]/pos:     {shape: [197, 64]/
	     s/patch_grid: \[4, 4\]/patch_grid: [14, 14]/; s/batch: 2, out: pq/batch: 4, out: pq/' "$M" > wide.yaml
	amp-plan -m amp736 --ownership tokens wide.yaml | amp-compose | amp-expand | amp-exchange | amp-group > wide.g
	run grep -c '^- {name: qkv_out@canon, tensor: qkv_out, layout: row-major, split: \[1, 197, 1\], block: \[4, 1, 192\],' wide.g
	assert_output 1
	amp-emit -m amp736 --model wide.yaml wide.g -o wide.amp
	run --separate-stderr amp-run -m amp736 wide.amp
	assert_success
	assert_line --regexp '^per op: 26 ops checked after every run'
	cosines_at_least 0.99
}

@test "rope2d: a stage whose grid is not its x's tokens is refused" {
	amp-plan "$M" | amp-compose | amp-expand | amp-exchange | amp-group > g.yaml
	sed '/op: rope2d,/s/patch_grid: \[4, 4\], class_tokens: 1}/patch_grid: [1, 1], class_tokens: 7}/' g.yaml > bad.yaml
	run --separate-stderr amp-emit --no-model bad.yaml -o x.amp
	assert_failure 1
	[[ $stderr == *"rope 'rope2d': 7 class tokens and a 1 x 1 patch_grid make 8 tokens; x 'qkv_out' has 17"* ]] ||
		fail "$stderr"
	[ ! -e x.amp ] || fail "a program was written"
}

@test "rope2d: a stage whose grid differs from the model's is refused, naming the op; version 15 cannot say it" {
	amp-plan "$M" | amp-compose | amp-expand | amp-exchange | amp-group > g.yaml
	sed '/op: rope2d,/s/patch_grid: \[4, 4\]/patch_grid: [2, 8]/' g.yaml > other.yaml
	run --separate-stderr amp-emit --model "$M" other.yaml -o x.amp
	assert_failure 1
	[[ $stderr == *"op 'rope2d': its step "*" rotates by a 2 x 8 patch grid after 1 class tokens, the model by 4 x 4 after 1"* ]] ||
		fail "$stderr"
	[ ! -e x.amp ] || fail "a program was written"
	sed '/op: rope2d,/s/, patch_grid: \[4, 4\], class_tokens: 1}/}/' g.yaml > nogrid.yaml
	run --separate-stderr amp-emit --model "$M" nogrid.yaml -o x.amp
	assert_failure 1
	[[ $stderr == *"rope reads x and its positions, or x alone with a patch_grid"* ]] || fail "$stderr"
	sed 's/^version: 17$/version: 15/' g.yaml > v15.yaml
	run --separate-stderr amp-emit --model "$M" v15.yaml -o x.amp
	assert_failure 1
	[[ $stderr == *"patch_grid needs version 16 (this file is version 15)"* ]] || fail "$stderr"
}

@test "rope2d: malformed patch-grid ropes are refused at the key" {
	plan_rejects "$BAD/model-rope2d-version.yaml" 51:102 \
		"rope 'rope2d': patch_grid needs amp-model: 9 (this file is version 8)" "$BAD/model-rope2d-version.yaml"
	plan_rejects "$BAD/model-rope2d-tokens.yaml" 51:102 \
		"rope 'rope2d': 1 class token and a 4 x 3 patch_grid make 13 tokens; x 'qkv_out' has 17" \
		"$BAD/model-rope2d-tokens.yaml"
	plan_rejects "$BAD/model-rope2d-positions.yaml" 52:101 \
		"rope 'rope2d': a patch_grid rope takes no positions" "$BAD/model-rope2d-positions.yaml"
	plan_rejects "$BAD/model-rope2d-halves.yaml" 51:66 \
		"rope 'rope2d': head_dim 6 is not a multiple of 4" "$BAD/model-rope2d-halves.yaml"
	plan_rejects "$BAD/model-rope2d-class.yaml" 53:24 \
		"rope 'rope2d': class_tokens goes with patch_grid" "$BAD/model-rope2d-class.yaml"
	plan_rejects "$BAD/model-rope2d-grid.yaml" 51:102 \
		"rope 'rope2d': patch_grid is [rows, columns] of the patches" "$BAD/model-rope2d-grid.yaml"
	plan_rejects "$BAD/model-rope2d-scaling.yaml" 51:99 \
		"rope 'rope2d': scaling is for a rope by positions, not a patch_grid rope" "$BAD/model-rope2d-scaling.yaml"
}

@test "rope2d: every malformed patch-grid model in tests/bad is checked by this suite" {
	every_bad_checked 7 '$BAD/%s' "$BAD"/model-rope2d-*.yaml
}
