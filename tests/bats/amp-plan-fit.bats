#!/usr/bin/env bats
# amp-plan: plans against the machine's limits: no plan that fits, a pin
# judged by the exact check, parameters and tensors over SRAM, and the
# fragment limit.

bats_require_minimum_version 1.5.0
load common
load amp-plan

@test "plan exits 1 when no plan fits the machine's limits, naming the tile, the figure and what no plan avoids" {
	local tight=$ROOT/tests/models/machine-tight-tables.yaml
	rejects "$TINY" 8:3 "model 'tiny-mlp' does not fit machine 'tight-tables' at its limits: tile " \
		--machine "$tight" "$TINY"
	[[ $stderr == *"over the table budget of 256 bytes. No plan avoids the parameters: 38768 bytes, at least 27 per tile, which leaves at most 586933 of the 586960 available"* ]] ||
		fail "expected the budget and the lower bound in: $stderr"
	run --separate-stderr amp-plan --no-fit-check --machine "$tight" "$TINY" -o study.plan
	assert_success
	assert [ -s study.plan ]
	# --explain still shows the candidates, then the same failure
	run --separate-stderr amp-plan --explain --machine "$tight" "$TINY" -o explained.plan
	assert_failure 1
	assert_line --regexp '^gemm mlp_up: m 74, k 80, n 200, fp8; [0-9]+ candidates, [0-9]+ lowered exactly, [0-9]+ fit'
	[[ $stderr == *"does not fit machine 'tight-tables'"* ]] || fail "expected the fit failure: $stderr"
	assert [ ! -e explained.plan ]
}

@test "plan judges a pinned grid by the exact check: a pin the per-tile bound refuses is planned, lowered and emitted" {
	local sram
	sram=$(sed -n 's/^sram_bytes: *\([0-9]*\).*/\1/p' "$MACHINES/amp1472.yaml")
	# 62,000 bytes available: the bound refuses mlp_down on one tile, the
	# exact check fits it (tile 1257 needs 60,032 bytes with its tables)
	sed "s/^reserved_bytes: *[0-9]*/reserved_bytes: $((sram - 62000))/" "$MACHINES/amp1472.yaml" >m.yaml
	sed 's/^  mlp_down: {grid: \[3, 2, 5\], cast: late}$/  mlp_down: {grid: [1, 1, 1], cast: late}/' "$TINY" >p.yaml
	run grep -c 'grid: \[1, 1, 1\]' p.yaml
	assert_output 1
	run --separate-stderr amp-plan --objective capacity --machine m.yaml p.yaml
	assert_failure 1
	[[ $stderr == *"matmul 'mlp_down': no pinned grid fits in SRAM"* ]] || fail "the bound should refuse it: $stderr"
	run --separate-stderr amp-plan --machine m.yaml p.yaml -o p.plan
	assert_success
	amp-compose p.plan | amp-expand | amp-exchange | amp-group >p.grouped
	run amp-emit --no-model --machine m.yaml p.grouped -o p.amp
	assert_success
	# calibration reads the model alone: it needs no plan, so the machine
	# (still accepted) cannot make it fail
	run amp-run --calibrate p.yaml --machine m.yaml -o s.yaml
	assert_success
	run amp-run --calibrate p.yaml -o s2.yaml
	assert_success
	run cmp s.yaml s2.yaml
	assert_success
}

# The parameter capacity check concerns the params section as a whole; its
# message must point there (the `params:` key or its mapping), not at 1:1.
params_at() {
	local n
	n=$(grep -n '^params:' "$1" | cut -d: -f1)
	[[ -n $n ]] || fail "no params section in $1"
	printf '%s' "$n:1|$((n + 1)):3"
}

@test "plan rejects parameters larger than all tiles' SRAM, pointing at params" {
	local bad=$BAD/model-params-too-large.yaml
	rejects "$bad" "$(params_at "$bad")" "parameters need 1073741824 bytes" "$bad"
}

@test "plan rejects a model whose parameters do not fit a small machine's SRAM" {
	rejects "$TINY" "$(params_at "$TINY")" "model 'tiny-mlp': parameters need" \
		--machine "$BAD/machine-small-sram.yaml" "$TINY"
	[[ $stderr == *"2 tiles hold at most 30720"* ]] || fail "$stderr"
}

@test "plan counts parameters as stored (panels padded), beyond the raw bytes the size check counts" {
	# 16000 raw bytes, 19968 stored: a 2-tile machine of 17984 bytes holds
	# the raw bytes but not the stored ones; one of 20000 holds both in
	# total, but the weight's one home tile does not
	local pad=$ROOT/tests/models/params-padded.yaml
	sed 's/^sram_bytes: .*/sram_bytes: 10016/' "$BAD/machine-small-sram.yaml" > total.yaml
	sed 's/^sram_bytes: .*/sram_bytes: 11024/' "$BAD/machine-small-sram.yaml" > one.yaml
	rejects "$pad" "$(params_at "$pad")" \
		"model 'params-padded': parameters need 19968 bytes; 2 tiles hold at most 17984 (8992 bytes each" \
		--machine total.yaml "$pad"
	rejects "$pad" "$(params_at "$pad")" \
		"model 'params-padded': parameter homes put 10752 bytes on tile 0; 10000 are available" \
		--machine one.yaml "$pad"
}

@test "plan rejects a model that does not fit the machine's SRAM at the op that overflows (file:line:col)" {
	cd "$BATS_TEST_TMPDIR"
	sed 's/^sram_bytes: .*/sram_bytes: 120000/' "$MACHINES/amp1472.yaml" > small.yaml
	grep -q '^sram_bytes: 120000' small.yaml || fail "no sram_bytes line to shrink"
	rejects "$SIGLIP" 13:5 "(op 'mlp_up'); 67984 are available (sram_bytes - reserved_bytes)" \
		--machine small.yaml "$SIGLIP"
}

@test "a machine whose fragment limit equals the plan's worst tile still fits; one lower does not" {
	# tiny-mlp with both GEMMs pinned whole, so that the limit changes no choice
	sed 's/^  mlp_down: {grid: \[3, 2, 5\], cast: late}$/  mlp_down: {grid: [3, 2, 5], cast: late, staging: direct, out_staging: direct, reduce: scatter}\n  mlp_up: {grid: [4, 1, 4], cast: late, staging: direct, out_staging: direct}/' \
		"$MODELS/tiny-mlp.yaml" > t.yaml
	grep -q '^  mlp_up: {grid: \[4, 1, 4\]' t.yaml || fail "no pins added"
	amp-plan t.yaml | amp-compose | amp-expand | amp-exchange | amp-group > g.yaml
	local f
	f=$(amp-capture g.yaml | jq '.summary.max_fragments')
	assert [ "$f" -gt 0 ]
	sed "s/^fragment_limit: .*/fragment_limit: $f/" "$MACHINES/amp1472.yaml" > at.yaml
	sed "s/^fragment_limit: .*/fragment_limit: $((f - 1))/" "$MACHINES/amp1472.yaml" > below.yaml
	run amp-plan --machine at.yaml t.yaml -o at.plan --explain
	assert_success
	# the first build fits, as it is: not planned again inside the limits,
	# nor the fallback to the memory objective
	refute_output --partial "planned again, as the whole plan did not fit"
	refute_output --partial "no plan the cycles search built fits"
	run --separate-stderr amp-plan --machine below.yaml t.yaml -o below.plan
	assert_failure 1
	[[ $stderr == *"$f send and receive fragments (most in phase "*"), over the fragment limit of $((f - 1)). No plan avoids"* ]] || fail "$stderr"
}

@test "a fragment limit one below the best plan's worst tile moves the planner to a plan within it" {
	# unpinned tiny-mlp: its fastest plan needs f fragments on some tile; at
	# f - 1 another plan fits, and amp-plan must find it, not refuse
	amp-plan "$MODELS/tiny-mlp.yaml" | amp-compose | amp-expand | amp-exchange | amp-group > g.yaml
	local f c
	f=$(amp-capture g.yaml | jq '.summary.max_fragments')
	c=$(amp-capture g.yaml | jq '.summary.total_cycles')
	sed "s/^fragment_limit: .*/fragment_limit: $((f - 1))/" "$MACHINES/amp1472.yaml" > below.yaml
	run --separate-stderr amp-plan --machine below.yaml "$MODELS/tiny-mlp.yaml" -o below.plan
	assert_success
	amp-compose below.plan | amp-expand | amp-exchange | amp-group > g2.yaml
	amp-capture --machine below.yaml g2.yaml -o c2.json
	run jq '.summary.max_fragments' c2.json
	assert [ "$output" -lt "$f" ]
	# the limit cost cycles: the plan it moved to is not the fastest; but
	# the cycles search found it, not the fallback to the memory objective
	# (whose plan is slower)
	local c2 cm
	c2=$(jq '.summary.total_cycles' c2.json)
	assert [ "$c2" -gt "$c" ]
	amp-plan --objective memory --machine below.yaml "$MODELS/tiny-mlp.yaml" | amp-compose | amp-expand |
		amp-exchange | amp-group > gm.yaml
	cm=$(amp-capture --machine below.yaml gm.yaml | jq '.summary.total_cycles')
	assert [ "$c2" -lt "$cm" ]
}
