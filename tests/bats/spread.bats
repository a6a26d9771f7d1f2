#!/usr/bin/env bats
# Staging spread (formats/plan.md): each a block gathered in grid-cols
# pieces, one on each of its column tiles, packed there and exchanged
# among them. The placements amp-plan writes, a byte-exact run, the pins'
# errors (tests/bad/model-pin-spread-*), the plan format's version gate
# and amp-sweep's pins.

load common
bats_require_minimum_version 1.5.0

SPREAD=$ROOT/tests/models/spread-mlp.yaml

@test "plan spreads a pinned a: piece j of block (r, k) on tile (r, k, j), packed there" {
	run --separate-stderr amp-plan "$SPREAD"
	assert_success
	assert_line --regexp '^- \{op: mlp_up, .*, grid: \[4, 1, 3\], cast: early, staging: spread, '
	assert_line --regexp '^- \{op: mlp_down, .*, grid: \[3, 2, 3\], cast: late, staging: spread, .*, reduce: scatter, '
	# K=80 fp8: 3 strips, a piece of one strip on each of the 3 column tiles (stride 1)
	assert_line --regexp '^- \{name: xn.fp8@mlp_up.a.stage, tensor: xn.fp8, layout: row-major, split: \[1, 4, 3\], block: \[2, 10, 32\], base: [0-9]+, stride: \[0, 3, 1\], '
	assert_line --regexp '^- \{name: xn.fp8@mlp_up.a.packed, tensor: xn.fp8, layout: amp-left, split: \[1, 4, 3\], block: \[2, 10, 32\], base: [0-9]+, stride: \[0, 3, 1\], '
	# K=384: 2 blocks of 6 strips, 3 pieces of 2 strips each; moved before the late cast
	assert_line --regexp '^- \{name: g@mlp_down.a.stage, tensor: g, layout: row-major, split: \[1, 3, 6\], block: \[2, 13, 64\], base: [0-9]+, stride: \[0, 6, 1\], '
	assert_line --regexp '^- \{step: [0-9]+, compute: pack, op: mlp_down, in: \[g@mlp_down.a.stage\], out: g@mlp_down.a.packed\}$'
	assert_line --regexp '^- \{step: [0-9]+, copy: activation, op: mlp_down, operand: a, map: native-panel, src: g@mlp_down.a.packed, dst: g@mlp_down.a\}$'
}

@test "a spread plan runs byte-exact after every phase, cosine at least 0.99" {
	amp-plan "$SPREAD" | amp-compose | amp-expand | amp-exchange | amp-group >g.yaml
	run amp-emit --model "$SPREAD" -o prog g.yaml
	assert_success
	run --separate-stderr amp-run prog
	assert_success
	assert_line --index 0 --regexp '^movement: byte-exact after every phase \([0-9]+ phases\)$'
	local c
	c=$(sed -n 's/^output z: cosine \([0-9.]*\),.*/\1/p' <<<"$output")
	[ -n "$c" ] || fail "no cosine in: $output"
	awk -v c="$c" 'BEGIN { exit !(c >= 0.99) }' || fail "cosine $c below 0.99"
}

@test "the pack-once plan of the same grids moves the whole block to the c = 0 tile" {
	sed 's/staging: spread/staging: pack-once/' "$SPREAD" >once.yaml
	run --separate-stderr amp-plan once.yaml
	assert_success
	assert_line --regexp '^- \{name: xn.fp8@mlp_up.a.stage, tensor: xn.fp8, layout: row-major, split: \[1, 4, 1\], block: \[2, 10, 96\], base: [0-9]+, stride: \[0, 3, 3\], '
}

@test "plan rejects a spread pin in an amp-model 2 file, at the value" {
	plan_rejects "$BAD/model-pin-spread-version.yaml" 13:34 "staging 'spread' needs amp-model 3 (this file is version 2)" \
		"$BAD/model-pin-spread-version.yaml"
}

@test "plan rejects a spread pin whose grid cannot cut the K blocks into whole-strip pieces, at the pin" {
	plan_rejects "$BAD/model-pin-spread-grid.yaml" 13:14 \
		"pin for 'mm': staging spread needs grid cols > 1 that cut each K block's strips into whole-strip pieces, none empty; grid [4, 1, 2] has K blocks of 3 fp8 strips" \
		"$BAD/model-pin-spread-grid.yaml"
}

@test "plan rejects a spread pin that no grid allows, at the pin" {
	plan_rejects "$BAD/model-pin-spread-none.yaml" 13:7 "matmul 'mm': no grid allows its pins (staging spread needs" \
		"$BAD/model-pin-spread-none.yaml"
}

@test "a version 5 plan that names staging spread is rejected at the value; the current version is read back the same" {
	amp-plan "$SPREAD" -o p6.yaml
	run amp-compose p6.yaml
	assert_success
	sed 's/^version: 17$/version: 5/' p6.yaml >p5.yaml
	run --separate-stderr amp-compose p5.yaml
	assert_failure 1
	[[ $stderr =~ ^amp-compose:\ p5.yaml:[0-9]+:[0-9]+:\ staging\ \'spread\'\ needs\ version\ 6\ \(this\ file\ is\ version\ 5\)$ ]] ||
		fail "unexpected: $stderr"
}

@test "sweep pins staging spread: the spec is checked, and the derived model says amp-model 3" {
	cat >spec.yaml <<EOF
amp-sweep: 1
name: spread
models: [$MODELS/tiny-mlp.yaml]
pins:
  spread: {mlp_up: {grid: [4, 1, 3], staging: spread}}
EOF
	run --separate-stderr amp-sweep jobs -o sw spec.yaml
	assert_success
	grep -q '^amp-model: 3$' sw/models/*.yaml || fail "the derived model is not amp-model 3"
	grep -q 'mlp_up: {grid: \[4, 1, 3\], staging: spread}' sw/models/*.yaml || fail "pin not merged"
	run --separate-stderr amp-plan sw/models/*.yaml
	assert_success
	assert_line --regexp '^- \{op: mlp_up, .*, grid: \[4, 1, 3\], cast: early, staging: spread, '
	sed 's/staging: spread/staging: spreaded/' spec.yaml >bad.yaml
	run --separate-stderr amp-sweep jobs -o sw2 bad.yaml
	assert_failure 1
	[[ $stderr == *"pin 'staging' is 'pack-once', 'direct' or 'spread'"* ]] || fail "unexpected: $stderr"
}
