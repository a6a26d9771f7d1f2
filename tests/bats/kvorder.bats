#!/usr/bin/env bats
# Keys and values side by side per kv head (model format 6): an
# attention's kv_order heads reads kv head j's keys at columns 2jD ..
# 2jD + D and its values right after them, and rope's head_stride rotates
# the keys where they are (tests/models/tiny-prefill-kvh.yaml and
# tiny-decode-kvh.yaml, tiny-decoder's layer so written). A cache in that
# order has its home cut by kv head, so attention on the home runs one kv
# head's heads per tile. Runs are byte-exact and within cosine 0.999 of
# the FP32 reference; a stage that rotates or reads the other way is
# refused; the malformed models tests/bad/model-kvo-*.yaml are refused at
# their key.

bats_require_minimum_version 1.5.0
load common

PRE=$ROOT/tests/models/tiny-prefill-kvh.yaml
DEC=$ROOT/tests/models/tiny-decode-kvh.yaml

@test "kv_order: the steps carry kv_order heads and head_stride, and the cache's home is cut by kv head" {
	# one position a block (by default halved while faster)
	amp-plan --state-blocks 32 "$DEC" -o p.yaml
	run grep -c '^- {step: [0-9]*, compute: rope, op: rk, .*heads: 2, head_dim: 16, head_stride: 32, theta: ' p.yaml
	assert_output 1
	run grep -c '^- {step: [0-9]*, compute: rope, op: rq, .*head_stride' p.yaml
	assert_output 0
	run grep -c '^- {step: [0-9]*, compute: attention, op: attn, .*kv_heads: 2, causal: true, kv_order: heads, ' p.yaml
	assert_output 1
	# whole rows of a block of positions, each tile one kv head's 32 columns (k, then v)
	run grep -c '^- {name: cache@home, tensor: cache, layout: row-major, split: \[2, 32, 2\], block: \[1, 1, 32\], base: [0-9]*, stride: \[64, 1, 32\], ' p.yaml
	assert_output 1
	# the new row: each kv head's columns to its tiles, the positions to both
	run grep -c '^- {name: kv@append.rows, tensor: kv, .*split: \[2, 1, 2\], block: \[1, 1, 32\], .*stride: \[64, 0, 32\], rep: \[32\], rstride: \[1\]}$' p.yaml
	assert_output 1
	head -1 p.yaml | grep -q '^format: amp-plan$' && sed -n 2p p.yaml | grep -q '^version: 17$' || fail "not a version 17 plan"
}

@test "kv_order: attention on the home, one kv head per tile: q's heads of that kv head, partials merged by head and chunk" {
	pin_home "$DEC" dh.yaml
	amp-plan --state-blocks 32 dh.yaml -o p.yaml
	run grep -c '^- {step: [0-9]*, copy: .*, operand: [kv], ' p.yaml
	assert_output 0
	run grep -c '^- {step: [0-9]*, compute: attention, op: attn, in: \[q@attn.q, cache@home, cache@home, pos@append.positions\], out: a.partial@attn.partial, heads: 4, kv_heads: 2, causal: true, kv_order: heads, scale: 0.25, scratch: 4, chunks: 16}$' p.yaml
	assert_output 1
	run grep -c '^- {name: q@attn.q, tensor: q, layout: row-major, split: \[2, 1, 2\], block: \[1, 1, 32\], base: [0-9]*, stride: \[64, 0, 32\], rep: \[32\], rstride: \[1\]}$' p.yaml
	assert_output 1
	# each tile its kv head's 2 heads, 16 chunks of 1 column a head: 2 x (16 + 2 x 16)
	run grep -c '^- {name: a.partial@attn.partial, tensor: a.partial, layout: row-major, split: \[32, 2, 1, 2\], block: \[1, 1, 1, 96\], base: [0-9]*, stride: \[1, 64, 0, 32\], ' p.yaml
	assert_output 1
	program "$PRE" pre.amp
	amp-compose p.yaml | amp-expand | amp-exchange | amp-group > dh.g
	amp-emit --model dh.yaml dh.g -o dh.amp
	run --separate-stderr amp-run dh.amp --prefill pre.amp --steps 3
	assert_success
	assert_line --index 0 --regexp '^movement: byte-exact after every phase \([0-9]+ phases, every run\)$'
	assert_line --index 6 --regexp '^run 3 \(tiny-decode-kvh, position 10\): state cache: cosine '
	cosines_at_least 0.999
}

@test "kv_order: the default plans run byte-exact, prefill then 3 decode steps, within cosine 0.999" {
	program "$PRE" pre.amp
	program "$DEC" dec.amp
	run --separate-stderr amp-run dec.amp --prefill pre.amp --steps 3
	assert_success
	assert_line --index 0 --regexp '^movement: byte-exact after every phase \([0-9]+ phases, every run\)$'
	assert_line --index 2 --regexp '^per op: 16 ops checked after every run'
	assert_line --index 7 --regexp '^run 3 \(tiny-decode-kvh, position 10\): output z: cosine '
	cosines_at_least 0.999
}

@test "kv_order: a prefill in the other order is refused by the state's digest" {
	program "$DEC" dec.amp
	program "$ROOT/tests/models/tiny-prefill.yaml" pre.amp
	run --separate-stderr amp-run dec.amp --prefill pre.amp
	assert_failure 1
	[[ $stderr == *"state 'cache'"* ]] || fail "$stderr"
}

@test "kv_order: a stage that drops head_stride or kv_order is refused against the model, naming the op" {
	amp-plan "$PRE" | amp-compose | amp-expand | amp-exchange | amp-group > g.yaml
	sed 's/, head_stride: 32//' g.yaml > nostride.yaml
	run --separate-stderr amp-emit --model "$PRE" nostride.yaml -o x.amp
	assert_failure 1
	[[ $stderr == *"op 'rk': its step "*" rotates heads 16 columns apart, the model 32 (head_stride)"* ]] || fail "$stderr"
	sed 's/, kv_order: heads//' g.yaml > noorder.yaml
	run --separate-stderr amp-emit --model "$PRE" noorder.yaml -o x.amp
	assert_failure 1
	[[ $stderr == *"op 'attn': its step "*" reads k and v in kv_order kv, the model heads"* ]] || fail "$stderr"
	[ ! -e x.amp ] || fail "a program was written"
	# a stage of version 10 cannot say either
	sed 's/^version: 17$/version: 10/' g.yaml > v10.yaml
	run --separate-stderr amp-emit --no-model v10.yaml -o x.amp
	assert_failure 1
	[[ $stderr == *"needs version 11 (this file is version 10)"* ]] || fail "$stderr"
}

@test "kv_order: malformed head_stride and kv_order are refused at the key" {
	plan_rejects "$BAD/model-kvo-stride.yaml" 25:87 \
		"rope 'rk': head_stride 8 is less than head_dim 16 (the rotated heads would overlap)" "$BAD/model-kvo-stride.yaml"
	plan_rejects "$BAD/model-kvo-wide.yaml" 25:57 "rope 'rk': 2 heads of 16 columns, 50 apart, pass the 64 of 'kv0'" \
		"$BAD/model-kvo-wide.yaml"
	plan_rejects "$BAD/model-kvo-value.yaml" 27:94 \
		"attention 'attn': kv_order is 'kv' (every key, then every value) or 'heads' (each kv head's keys, then its values)" \
		"$BAD/model-kvo-value.yaml"
	plan_rejects "$BAD/model-kvo-version.yaml" 25:87 "rope 'rk': head_stride needs amp-model: 6 (this file is version 5)" \
		"$BAD/model-kvo-version.yaml"
	plan_rejects "$BAD/model-kvo-qkv.yaml" 49:71 "attention 'attn': kv_order heads takes q and kv, not a fused qkv" \
		"$BAD/model-kvo-qkv.yaml"
}

@test "kv_order: every malformed kv_order model in tests/bad is checked by this suite" {
	every_bad_checked 5 '$BAD/%s' "$BAD"/model-kvo-*.yaml
}

@test "kv_order: Qwen2.5-0.5B's decode cache is cut by kv head, and attention runs on its home" {
	amp-plan "$ROOT/share/models/qwen2.5-0.5b-1layer-decode.yaml" -o p.yaml
	run grep -c '^- {name: cache@home, tensor: cache, layout: row-major, split: \[8, [0-9]*, 2\], block: \[1, [0-9]*, 128\], ' p.yaml
	assert_output 1
	run grep -c '^- {step: [0-9]*, compute: attention, op: attn, in: \[q@attn.q, cache@home, cache@home, pos@append.positions\], .*kv_order: heads, .*chunks: 8}$' p.yaml
	assert_output 1
}
