#!/usr/bin/env bats
# LayerScale (model format 9): a mul whose b is an fp16 parameter
# [features] scales every row of its activation channel by channel, as
# PE-Core's residual branches do (formats/model.md, "mul").
# tests/models/vit-layerscale.yaml is vit-tiny with a scale on each
# branch: it plans, emits and runs byte-exact within the per-op
# tolerances; the scale sits beside each row's columns and costs as an
# elementwise step, not as a folded norm's; the malformed models
# tests/bad/model-layerscale-*.yaml are refused at the mul's b.

bats_require_minimum_version 1.5.0
load common

setup() {
	cd "$BATS_TEST_TMPDIR" || return 1
	M=$ROOT/tests/models/vit-layerscale.yaml
}

@test "layerscale: a per-channel mul runs byte-exact and within its tolerance, the scale beside each row's columns" {
	program "$M" ls.amp
	run grep -c "^- {step: [0-9]*, compute: mul, op: ls_[12], in: \[[a-z_]*@canon, ls[12]@owners\], out: [a-z_]*@canon}$" ls.amp.g
	assert_output 2
	run --separate-stderr amp-run ls.amp
	assert_success
	assert_line --regexp '^movement: byte-exact after every phase \([0-9]+ phases\)$'
	assert_line --regexp '^per op: 25 ops checked after every run'
	cosines_at_least 0.99
	# the scale changes the numbers: the same model without it differs
	sed '/name: ls_[12],/d; s/b: proj_ls,/b: proj_out,/; s/b: down_ls,/b: down,/; /^      ls[12]: /d' "$M" > plain.yaml
	program plain.yaml plain.amp
	mkdir -p s p
	amp-run ls.amp --save s > /dev/null
	amp-run plain.amp --save p > /dev/null
	[ -e s/pooled.npy ] && [ -e p/pooled.npy ] || fail "no outputs saved"
	! cmp -s s/pooled.npy p/pooled.npy || fail "the scaled and unscaled models gave the same output"
}

@test "layerscale: the scale costs as an elementwise step (its add's cycles), and no norm folds into it" {
	amp-plan "$M" | amp-compose | amp-expand | amp-exchange | amp-group > g.yaml
	amp-capture -o c.json g.yaml
	run jq -r '[.compute[] | select(.op == "ls_1" or .op == "res1") | .cycles] | unique | length' c.json
	assert_output 1
	run jq -r '[.compute[] | select(.op == "ls_1") | .compute] | join(",")' c.json
	assert_output mul
	# a folded norm's mul has its sums beside it; the scale has none
	run grep -c "compute: sumsq, op: ls_" g.yaml
	assert_output 0
}

@test "layerscale: malformed scales are refused at the mul's b" {
	plan_rejects "$BAD/model-layerscale-version.yaml" 53:47 \
		"mul 'ls_1': a parameter b (a per-channel scale) needs amp-model: 9 (this file is version 8)" \
		"$BAD/model-layerscale-version.yaml"
	plan_rejects "$BAD/model-layerscale-shape.yaml" 53:47 \
		"mul 'ls_1': parameter 'ls1' must be fp16 [64], a scale per feature of the fp16 activation 'proj_out'" \
		"$BAD/model-layerscale-shape.yaml"
	plan_rejects "$BAD/model-layerscale-dtype.yaml" 53:47 "mul 'ls_1': parameter 'ls1' must be fp16 [64]" \
		"$BAD/model-layerscale-dtype.yaml"
	plan_rejects "$BAD/model-layerscale-rank.yaml" 53:47 "mul 'ls_1': parameter 'ls1' must be fp16 [64]" \
		"$BAD/model-layerscale-rank.yaml"
}

@test "layerscale: every malformed LayerScale model in tests/bad is checked by this suite" {
	every_bad_checked 4 '$BAD/%s' "$BAD"/model-layerscale-*.yaml
}
