#!/usr/bin/env bats
# amp-plan: the malformed models in tests/bad/model-*.yaml and malformed
# pins, each named at its file, line and column.

bats_require_minimum_version 1.5.0
load common
load amp-plan

# ---- malformed models (tests/bad/model-*.yaml) ----

@test "plan rejects malformed YAML (an unclosed flow mapping)" {
	rejects "$BAD/model-malformed-yaml.yaml" 6:7 "flow mapping" \
		"$BAD/model-malformed-yaml.yaml"
}

@test "plan rejects a model nested deeper than 64 levels at the 65th level, in bounded time" {
	{ printf 'amp-model: 1\nname: deep\ninputs: '
	  head -c 200000 /dev/zero | tr '\0' '['
	  head -c 200000 /dev/zero | tr '\0' ']'
	  printf '\n'; } >deep.yaml
	rejects deep.yaml 3:72 "nesting deeper than 64 levels" deep.yaml
}

@test "plan names the first repeated key of a 40,000-key mapping" {
	# (one awk, not a shell loop: Bats traps every command a test runs)
	seq 40000 | awk 'BEGIN { print "amp-model: 1\nname: keys\ninputs:" }
		{ printf "  k%d: 1\n", $1 == 30000 ? 7 : $1 == 35000 ? 9 : $1 }' >keys.yaml
	rejects keys.yaml 30003:3 "duplicate key 'k7'" keys.yaml
}

@test "plan rejects an unknown top-level key" {
	rejects "$BAD/model-unknown-top-key.yaml" 8:1 "unknown key 'layers'" \
		"$BAD/model-unknown-top-key.yaml"
}

@test "plan rejects an unknown key inside an op" {
	rejects "$BAD/model-unknown-op-key.yaml" 9:40 "unknown key 'act'" \
		"$BAD/model-unknown-op-key.yaml"
}

@test "plan rejects an unknown op" {
	rejects "$BAD/model-unknown-op.yaml" 7:10 "unknown op 'softmax'" \
		"$BAD/model-unknown-op.yaml"
}

@test "plan's unknown-op message lists every op of the op table" {
	rejects "$BAD/model-unknown-op.yaml" 7:10 "unknown op 'softmax' (expected matmul, gelu, add, layernorm, cast, patchify, broadcast, attention, rmsnorm, silu, mul, rope, append, embed, last, or map)" \
		"$BAD/model-unknown-op.yaml"
}

@test "plan rejects an unknown dtype" {
	rejects "$BAD/model-unknown-dtype.yaml" 7:31 "unknown dtype 'bf16'" \
		"$BAD/model-unknown-dtype.yaml"
}

@test "plan rejects an op that names an undefined tensor" {
	rejects "$BAD/model-undefined-tensor.yaml" 9:37 "undefined tensor 'w2'" \
		"$BAD/model-undefined-tensor.yaml"
}

@test "plan rejects a matmul whose inner dimensions differ" {
	rejects "$BAD/model-matmul-inner-differ.yaml" 9:37 "inner dimensions differ" \
		"$BAD/model-matmul-inner-differ.yaml"
}

@test "plan rejects a model file of another amp-model version" {
	rejects "$BAD/model-wrong-version.yaml" 2:12 "unsupported model file version 10 (this amp reads 1 to 9)" \
		"$BAD/model-wrong-version.yaml"
}

@test "plan rejects a tensor name defined twice" {
	rejects "$BAD/model-duplicate-tensor.yaml" 9:45 "tensor 'w' is defined twice" \
		"$BAD/model-duplicate-tensor.yaml"
}

@test "plan rejects an output that no op computes" {
	rejects "$BAD/model-output-not-computed.yaml" 10:14 "output 'x' must be computed by an op" \
		"$BAD/model-output-not-computed.yaml"
}

@test "plan rejects an attention pin whose query blocks do not cut the queries uniformly, at the pin" {
	rejects "$BAD/model-pin-key-blocks.yaml" 14:18 \
		"pin for 'attn': blocks [5, 3] need query blocks that do not cut the queries uniformly" \
		"$BAD/model-pin-key-blocks.yaml"
}

@test "plan rejects an unknown out_staging at its value" {
	rejects "$BAD/model-pin-out-staging.yaml" 12:25 "unknown out_staging 'packed' (expected direct or unpack)" \
		"$BAD/model-pin-out-staging.yaml"
}

@test "plan rejects an unknown reduce at its value" {
	rejects "$BAD/model-pin-reduce.yaml" 12:20 "unknown reduce 'spread' (expected gather or scatter)" \
		"$BAD/model-pin-reduce.yaml"
}

@test "plan rejects an unknown kv_staging at its value" {
	rejects "$BAD/model-pin-kv-staging.yaml" 13:22 "unknown kv_staging 'gathered' (expected direct, relay or home)" \
		"$BAD/model-pin-kv-staging.yaml"
}

@test "plan rejects a GEMM grid pinned on an attention op" {
	rejects "$BAD/model-pin-attention-grid.yaml" 13:10 "unknown key 'grid'" \
		"$BAD/model-pin-attention-grid.yaml"
}

@test "plan rejects a pin for an unknown op" {
	rejects "$BAD/model-pin-unknown-op.yaml" 14:3 "pin for unknown op 'mlp_gate'" \
		"$BAD/model-pin-unknown-op.yaml"
}

@test "plan rejects a pinned grid that needs more tiles than the machine has" {
	rejects "$BAD/model-pin-too-many-tiles.yaml" 13:14 "needs 1600 tiles; the machine has 1472" \
		"$BAD/model-pin-too-many-tiles.yaml"
}

@test "plan rejects a pinned grid with more rows than tokens" {
	rejects "$BAD/model-pin-rows-exceed-tokens.yaml" 14:20 "grid rows 38 exceed the 37 tokens" \
		"$BAD/model-pin-rows-exceed-tokens.yaml"
}

@test "plan rejects a pinned k that needs more partitions than the fp8 strips" {
	rejects "$BAD/model-pin-k-exceeds-strips.yaml" 14:20 "grid k 8 needs more partitions than K=200 has fp8 strips (7)" \
		"$BAD/model-pin-k-exceeds-strips.yaml"
}

@test "plan rejects pinned cols that need more partitions than the 16-column groups" {
	rejects "$BAD/model-pin-cols-exceed-groups.yaml" 14:20 "grid cols 6 needs more partitions than N=80 has 16-column groups (5)" \
		"$BAD/model-pin-cols-exceed-groups.yaml"
}

@test "plan rejects a pinned grid that cannot cut a dimension uniformly" {
	rejects "$BAD/model-pin-not-uniform.yaml" 14:20 "grid k 5 cannot cut 7 K strips into 5 non-empty uniform parts" \
		"$BAD/model-pin-not-uniform.yaml"
}
