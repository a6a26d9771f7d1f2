#!/usr/bin/env bats
# The decoder's ops (model format 4): rmsnorm, silu and mul on
# tests/models/tiny-swiglu.yaml, a gated MLP block, and causal
# grouped-query attention and rotary positions from an int32 input on
# tests/models/tiny-decoder.yaml, a decoder layer: planned, lowered, emitted and run byte-exact with every op checked
# against FP32; their costs; the malformed models
# tests/bad/model-{rmsnorm,mul,gqa,causal,rope,int32}-*.yaml; a stage of an earlier
# version that names one of them; and stages that disagree with the model.

bats_require_minimum_version 1.5.0
load common

SW=$ROOT/tests/models/tiny-swiglu.yaml
DEC=$ROOT/tests/models/tiny-decoder.yaml

lowered() {
	amp-plan "$SW" | amp-compose | amp-expand | amp-exchange | amp-group > g.yaml
}

@test "decoder: the gated MLP block runs byte-exact, each of its 7 ops within its tolerance" {
	lowered
	amp-emit --model "$SW" g.yaml -o p.amp
	run --separate-stderr amp-run --model "$SW" p.amp
	assert_success
	# 4 phases: gate and up (74 rows, siblings) share theirs, and gate's
	# unpacked result is where silu, the gated product and down's cast run
	# (no output phase for g and u)
	assert_line --index 0 'movement: byte-exact after every phase (4 phases)'
	assert_line --index 2 --regexp "^per op: 7 ops checked after every run"
	local cos
	cos=$(printf '%s\n' "$output" | sed -n 's/^output z: cosine \([0-9.]*\),.*/\1/p')
	[ -n "$cos" ] || fail "no cosine in: $output"
	awk -v c="$cos" 'BEGIN { exit !(c >= 0.999) }' || fail "cosine $cos"
}

@test "decoder: a prefill's silu, gated product and down's cast run where gate leaves g unpacked; u joins it there" {
	# tiny-swiglu's 74 rows leave tiles over: its MLP class is owned wide,
	# and gate (no K split) claims it with its unpacked result
	amp-plan "$SW" > p.yaml
	assert_line_re() { grep -qE "$1" p.yaml || fail "no line matching $1"; }
	assert_line_re '^- \{op: gate, .*grid: \[[0-9]+, 1, [0-9]+\], .*out_staging: unpack, '
	assert_line_re '^- \{step: [0-9]+, compute: silu, op: act, in: \[g@gate\.out\.rows\], out: s@canon\}$'
	run grep -c '^- {step: [0-9]*, copy: output, op: gate, ' p.yaml
	assert_output 0
	# g's cut is the class's: s, u and h's fused cast sit exactly there
	local cut
	cut=$(sed -n 's/^- {name: g@gate\.out\.rows, tensor: g, \(layout: .*\)}$/\1/p' p.yaml)
	[ -n "$cut" ] || fail "no g@gate.out.rows"
	for t in s u h.fp8; do
		run grep -cF -- "- {name: $t@canon, tensor: $t, $cut}" p.yaml
		assert_output 1
	done
	# u's copy into it stays on its tiles: it moves no bytes across the exchange
	amp-compose p.yaml | amp-expand | amp-exchange | amp-group > g.yaml
	amp-capture -o c.json g.yaml
	run jq '[.phase_traffic[][] | select(.op == "up" and .operand == "out")] | length' c.json
	assert_output 0
	run jq '[.phases[].labels[] | select(. == "gate.out" or . == "up.out")] | length' c.json
	assert_output 0
}

@test "decoder: the plan has one rmsnorm step with the model's eps, a silu and a mul" {
	# gate pinned to a cut K (amp-plan now plans gate and up alike, sharing
	# xn, with no reduction): g is written where gate's reduction leaves it
	# (its class's cut, formats/plan.md), and u where up's does, on those
	# tiles (a reduction with no bias lands on its class's owners)
	{ cat "$SW"; printf 'pins:\n  gate: {grid: [37, 2, 13]}\n'; } > sw.yaml
	amp-plan sw.yaml -o p.yaml
	run grep -c '^- {step: [0-9]*, compute: rmsnorm, op: norm, in: \[x@canon, norm_g@owners\], out: xn.fp8@canon, eps: 1e-06}$' p.yaml
	assert_output 1
	run grep -c '^- {step: [0-9]*, compute: silu, op: act, in: \[g@gate.out\], out: s@canon}$' p.yaml
	assert_output 1
	run grep -c '^- {step: [0-9]*, compute: mul, op: gated, in: \[s@canon, u@up.out\], out: h.fp8@canon}$' p.yaml
	assert_output 1
}

@test "decoder: rmsnorm costs as a reduction of its input, silu and mul as element-wise steps" {
	lowered
	amp-capture g.yaml -o c.json
	# each owner holds 2 x 37 / tiles token rows of width 80 (rmsnorm); g, s
	# and h are owned wide (formats/plan.md): 200 columns in 13 blocks of 16,
	# so each of their tiles holds 2 x 37 x 13 / tiles rows of a block
	local q='[.. | objects | select(.compute? == $k)] | .[0] | "\(.tiles) \(.cycles)"' t c
	read -r t c < <(jq -r --arg k rmsnorm "$q" c.json)
	assert_equal "rmsnorm: $c" "rmsnorm: $((74 / t * 80 * 2))"
	read -r t c < <(jq -r --arg k silu "$q" c.json)
	assert_equal "silu: $c" "silu: $((74 * 13 / t * 16 * 1))"
	read -r t c < <(jq -r --arg k mul "$q" c.json)
	assert_equal "mul: $c" "mul: $((74 * 13 / t * 16 * 1))"
}

@test "decoder: an op of model format 4 in a version 3 file is refused at the op" {
	plan_rejects "$BAD/model-rmsnorm-version-3.yaml" 12:10 "op 'rmsnorm' needs amp-model: 4 (this file is version 3)" \
		"$BAD/model-rmsnorm-version-3.yaml"
}

@test "decoder: malformed rmsnorm and mul ops are refused at the key" {
	plan_rejects "$BAD/model-rmsnorm-bias.yaml" 12:52 "unknown key 'bias'" "$BAD/model-rmsnorm-bias.yaml"
	plan_rejects "$BAD/model-rmsnorm-eps.yaml" 12:57 "rmsnorm eps must be positive" "$BAD/model-rmsnorm-eps.yaml"
	plan_rejects "$BAD/model-rmsnorm-scale-shape.yaml" 12:44 \
		"rmsnorm 'norm': 'norm_g' must be a parameter of shape [80]" "$BAD/model-rmsnorm-scale-shape.yaml"
	plan_rejects "$BAD/model-mul-shape.yaml" 16:37 "mul 'gated': 's' and 'x' differ in shape or dtype" \
		"$BAD/model-mul-shape.yaml"
	plan_rejects "$BAD/model-mul-param.yaml" 16:37 \
		"mul 'gated': 'w_up' must be an activation [batch, tokens, features]" "$BAD/model-mul-param.yaml"
}

@test "decoder: a version 6 stage that names compute rmsnorm is refused at the value" {
	amp-plan "$SW" -o p.yaml
	sed 's/^version: 17$/version: 6/' p.yaml > p6.yaml
	run --separate-stderr amp-compose p6.yaml
	assert_failure 1
	[[ $stderr =~ ^amp-compose:\ p6.yaml:[0-9]+:[0-9]+:\ compute\ \'rmsnorm\'\ needs\ version\ 7\ \(this\ file\ is\ version\ 6\)$ ]] ||
		fail "unexpected: $stderr"
}

@test "decoder: amp-run refuses a program whose rmsnorm eps is not the model's" {
	lowered
	sed 's/^\(- {step: [0-9]*, compute: rmsnorm, .*\)eps: 1e-06}$/\1eps: 0.001}/' g.yaml > bad.yaml
	! cmp -s g.yaml bad.yaml || fail "no rmsnorm step edited"
	amp-emit --no-model bad.yaml -o p.amp
	run --separate-stderr amp-run --model "$SW" p.amp
	assert_failure 1
	[[ $stderr == *"tiny-swiglu.yaml:14:5: op 'norm': the stage's rmsnorm step "*" has eps 0.001, the model 1e-06"* ]] ||
		fail "unexpected: $stderr"
}

@test "decoder: a decoder layer with causal grouped-query attention runs byte-exact, each of its 15 ops within its tolerance" {
	amp-plan "$DEC" | amp-compose | amp-expand | amp-exchange | amp-group > g.yaml
	run grep -c '^- {step: [0-9]*, compute: attention, op: attn, in: \[q@attn.q, kv@attn.k, kv@attn.v\], out: [^,]*, heads: 4, kv_heads: 2, causal: true, ' g.yaml
	assert_output 1
	amp-emit --model "$DEC" g.yaml -o p.amp
	run --separate-stderr amp-run --model "$DEC" p.amp
	assert_success
	assert_line --index 0 --partial 'movement: byte-exact after every phase'
	assert_line --index 2 --regexp "^per op: 15 ops checked after every run"
}

@test "decoder: the floor counts the scores a causal query sees, not every score" {
	amp-plan "$DEC" | amp-compose | amp-expand | amp-exchange | amp-group > g.yaml
	sed 's/, causal: true, /, /' g.yaml > open.yaml
	local a b
	a=$(amp-capture g.yaml | jq .summary.plan_floor.compute_floor_cycles)
	b=$(amp-capture open.yaml | jq .summary.plan_floor.compute_floor_cycles)
	# 2 x 4 heads: causal 24 x 25 / 2 = 300 scores a head, else 576; each
	# 2 x 16 MACs at 64 a cycle and 2 reduction cycles, over 1472 tiles
	[ "$a" -lt "$b" ] || fail "causal floor $a, open $b"
}

@test "decoder: malformed attention keys are refused at the key" {
	plan_rejects "$BAD/model-gqa-kv-heads.yaml" 21:67 "attention 'attn': 3 kv_heads do not divide 4 heads" \
		"$BAD/model-gqa-kv-heads.yaml"
	plan_rejects "$BAD/model-gqa-kv-width.yaml" 21:43 \
		"attention 'attn': kv 'kv' must be [2, tokens, 32] (k then v: 1 kv head of 16 columns each)" \
		"$BAD/model-gqa-kv-width.yaml"
	plan_rejects "$BAD/model-gqa-qkv-width.yaml" 8:38 \
		"attention 'attn': qkv 't' has 60 features, not a whole number of (heads + 2 x kv_heads) = 8 head widths" \
		"$BAD/model-gqa-qkv-width.yaml"
	plan_rejects "$BAD/model-causal-version.yaml" 21:65 \
		"attention 'attn': causal needs amp-model: 4 (this file is version 3)" "$BAD/model-causal-version.yaml"
	plan_rejects "$BAD/model-causal-bool.yaml" 21:78 "expected true or false" \
		"$BAD/model-causal-bool.yaml"
	plan_rejects "$BAD/model-causal-queries.yaml" 22:78 \
		"attention 'attn': causal with 24 queries over 12 keys" "$BAD/model-causal-queries.yaml"
}

@test "decoder: a version 6 stage whose attention names kv_heads is refused at the key" {
	# attention alone (no op of version 4 but its keys)
	cat > gqa.yaml <<'EOF'
amp-model: 4
name: gqa
inputs:
  x: {shape: [1, 8, 32], dtype: fp16}
params:
  w_q: {shape: [32, 32], dtype: fp16}
  w_kv: {shape: [32, 32], dtype: fp16}
ops:
  - {op: matmul, name: q, a: x, b: w_q, out: q}
  - {op: matmul, name: kv, a: x, b: w_kv, out: kv}
  - {op: attention, name: attn, q: q, kv: kv, heads: 2, kv_heads: 1, out: a}
outputs: [a]
EOF
	amp-plan gqa.yaml -o p.yaml
	sed 's/^version: 17$/version: 6/' p.yaml > p6.yaml
	run --separate-stderr amp-compose p6.yaml
	assert_failure 1
	[[ $stderr =~ ^amp-compose:\ p6.yaml:[0-9]+:[0-9]+:\ kv_heads\ needs\ version\ 7\ \(this\ file\ is\ version\ 6\)$ ]] ||
		fail "unexpected: $stderr"
}

@test "decoder: amp-run refuses a program whose attention is not causal where the model's is" {
	amp-plan "$DEC" | amp-compose | amp-expand | amp-exchange | amp-group > g.yaml
	sed 's/, causal: true, /, /' g.yaml > open.yaml
	! cmp -s g.yaml open.yaml || fail "no attention step edited"
	amp-emit --no-model open.yaml -o p.amp
	run --separate-stderr amp-run --model "$DEC" p.amp
	assert_failure 1
	[[ $stderr == *"tiny-decoder.yaml:"*": op 'attn': its step "*" has kv_heads 2, not causal, the model kv_heads 2, causal"* ]] ||
		fail "unexpected: $stderr"
}

@test "decoder: every malformed decoder model in tests/bad is checked by this suite" {
	every_bad_checked 20 '$BAD/%s' "$BAD"/model-{rmsnorm,mul,gqa,causal,rope,int32}-*.yaml
}

@test "decoder: a Llama-3.2-1B-shaped model at fp8 is refused at params with the bytes no plan avoids" {
	local m=$ROOT/tests/models/llama-3.2-1b-shaped.yaml
	plan_rejects "$m" 13:3 "model 'llama-3.2-1b-shaped': parameters need 1235881984 bytes; 1472 tiles hold at most 864005120" "$m"
}

@test "decoder: malformed rope ops and int32 tensors are refused at the key" {
	plan_rejects "$BAD/model-rope-odd.yaml" 22:69 "rope 'rq': head_dim 15 is odd" "$BAD/model-rope-odd.yaml"
	plan_rejects "$BAD/model-rope-theta.yaml" 22:80 "rope 'rq': theta must be a number above 1" "$BAD/model-rope-theta.yaml"
	plan_rejects "$BAD/model-rope-positions.yaml" 22:44 \
		"rope 'rq': positions 'pos' must be int32 [2, 24, 1], a position per row of 'q0'" "$BAD/model-rope-positions.yaml"
	plan_rejects "$BAD/model-rope-heads.yaml" 22:56 "rope 'rq': 5 heads of 16 columns pass the 64 of 'q0'" \
		"$BAD/model-rope-heads.yaml"
	plan_rejects "$BAD/model-rope-version.yaml" 8:10 "op 'rope' needs amp-model: 4 (this file is version 3)" \
		"$BAD/model-rope-version.yaml"
	plan_rejects "$BAD/model-int32-param.yaml" 7:28 \
		"int32 'ids' must be an input [batch, tokens, 1] (positions) of amp-model 4" "$BAD/model-int32-param.yaml"
	plan_rejects "$BAD/model-int32-operand.yaml" 7:5 "gelu 'g': int32 'x' can only be the positions of rope, append or attention" \
		"$BAD/model-int32-operand.yaml"
	plan_rejects "$BAD/model-int32-version.yaml" 6:34 \
		"int32 'pos' must be an input [batch, tokens, 1] (positions) of amp-model 4" "$BAD/model-int32-version.yaml"
}

@test "decoder: a version 6 stage with an int32 tensor is refused at its dtype" {
	amp-plan "$DEC" -o p.yaml
	sed 's/^version: 17$/version: 6/' p.yaml > p6.yaml
	run --separate-stderr amp-compose p6.yaml
	assert_failure 1
	[[ $stderr =~ ^amp-compose:\ p6.yaml:[0-9]+:[0-9]+:\ dtype\ int32\ needs\ version\ 7\ \(this\ file\ is\ version\ 6\)$ ]] ||
		fail "unexpected: $stderr"
}

@test "decoder: amp-run refuses a program whose rope theta is not the model's" {
	amp-plan "$DEC" | amp-compose | amp-expand | amp-exchange | amp-group > g.yaml
	sed 's/^\(- {step: [0-9]*, compute: rope, op: rq, .*\)theta: 1e+06}$/\1theta: 10000}/' g.yaml > bad.yaml
	! cmp -s g.yaml bad.yaml || fail "no rope step edited"
	amp-emit --no-model bad.yaml -o p.amp
	run --separate-stderr amp-run --model "$DEC" p.amp
	assert_failure 1
	[[ $stderr == *"op 'rq': its step "*" rotates 4 heads of 16 at theta 10000, the model 4 heads of 16 at theta 1e+06"* ]] ||
		fail "unexpected: $stderr"
}

# positions_npy FILE FIRST STEP: a [2, 24, 1] '<i4' .npy whose batch
# entries both hold FIRST + STEP x t at token t (the header: magic,
# version 1.0, its length 118, the dict padded to a 16-byte boundary).
positions_npy() {
	local b t v
	byte() { printf "\\$(printf '%03o' "$1")"; }
	{
		printf '\223NUMPY\001\000\166\000'
		printf "%-117s\n" "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 24, 1), }"
		for b in 0 1; do
			for t in $(seq 0 23); do
				v=$(($2 + $3 * t))
				byte $((v & 255)); byte $(((v >> 8) & 255)); byte 0; byte 0
			done
		done
	} > "$1"
}

@test "decoder: positions from --data (an int32 .npy) reach rope on the machine and in the reference" {
	amp-plan "$DEC" | amp-compose | amp-expand | amp-exchange | amp-group > g.yaml
	amp-emit --model "$DEC" g.yaml -o p.amp
	mkdir -p later same with default indices
	positions_npy later/pos.npy 1000 7
	run --separate-stderr amp-run --model "$DEC" --data later p.amp
	assert_success
	assert_line --index 0 --partial 'movement: byte-exact after every phase'
	assert_line --index 2 --regexp "^per op: 15 ops checked after every run"
	# later positions change the output; the token indices are the default
	amp-run --model "$DEC" --data later --save with p.amp > /dev/null
	amp-run --model "$DEC" --save default p.amp > /dev/null
	! cmp -s with/z.npy default/z.npy || fail "the positions from --data changed nothing"
	positions_npy same/pos.npy 0 1
	amp-run --model "$DEC" --data same --save indices p.amp > /dev/null
	cmp indices/z.npy default/z.npy || fail "the default positions are not each row's token index"
}

@test "decoder: positions from a float .npy are refused, not rounded" {
	amp-plan "$DEC" | amp-compose | amp-expand | amp-exchange | amp-group > g.yaml
	amp-emit --model "$DEC" g.yaml -o p.amp
	mkdir -p floats
	# the same positions as 0, 1, 2, ... written as '<f4' (the bits of
	# small integers as floats): the shape is right, the dtype is not
	positions_npy floats/pos.npy 0 1
	sed -i "s/'<i4'/'<f4'/" floats/pos.npy
	run --separate-stderr amp-run --model "$DEC" --data floats p.amp
	assert_failure 1
	[[ $stderr == *"floats/pos.npy': tensor 'pos' is int32 (token ids or positions): its .npy must hold int32 ('<i4'), not floats"* ]] ||
		fail "unexpected: $stderr"
}

@test "decoder: a position past 16,777,216 is refused, printed exactly, from --data and from --position" {
	amp-plan "$DEC" | amp-compose | amp-expand | amp-exchange | amp-group > g.yaml
	amp-emit --model "$DEC" g.yaml -o p.amp
	mkdir -p big
	# positions 0, 1, ... with the first row's first replaced by 2,147,483,647
	positions_npy big/pos.npy 0 1
	local head=$(( $(wc -c < big/pos.npy) - 2 * 24 * 4 ))
	{ head -c "$head" big/pos.npy; printf '\377\377\377\177'; tail -c $(( 2 * 24 * 4 - 4 )) big/pos.npy; } > big/p
	mv big/p big/pos.npy
	run --separate-stderr amp-run --model "$DEC" --data big p.amp
	assert_failure 1
	[[ $stderr == *"tensor 'pos' holds 2147483647 at index 0: amp-run holds int32 values as floats, exact up to 16777216"* ]] ||
		fail "unexpected: $stderr"
	run --separate-stderr amp-run --model "$DEC" --position 2147483647 p.amp
	assert_failure 2
	[[ $stderr == *"--position takes an integer from 0 to 16777216"*"not '2147483647'"* ]] || fail "unexpected: $stderr"
}

@test "decoder: a decode step's sibling GEMMs share their phases, and attention's q travels with the new keys" {
	local m=$MODELS/qwen2.5-0.5b-1layer-decode.yaml
	amp-plan "$m" | amp-compose | amp-expand | amp-exchange | amp-group | amp-capture -o c.json
	# q and k/v read the same normalised rows, as gate and up do: their
	# deliveries and partials each share one phase (gate's and up's
	# weights sit on the same tiles, so both read one delivery, gate.a)
	local pair l
	for pair in q.a:kv.a q.partial:kv.partial gate.partial:up.partial store.x:attn.q; do
		run jq --arg a "${pair%%:*}" --arg b "${pair#*:}" \
			'[.phases[] | select((.labels | index($a)) and (.labels | index($b)))] | length' c.json
		assert_output 1
	done
	# gate's and up's results, attention's, o's and down's are written
	# where the next op reads them (formats/plan.md): no phase returns them
	# (q's and kv's rotated there too: their pairs are interleaved), and
	# up reads gate's copy of a
	for l in q.out kv.out gate.out up.out attn.out o.out down.out up.a; do
		run jq --arg l "$l" '[.phases[] | select(.labels | index($l))] | length' c.json
		assert_output 0
	done
	# 12 phases in all (one layer, the final norm and the logits; the
	# layer's norms fold into their GEMMs' reductions, their rows' sums
	# crossing with a, while the final norm's, before the logits' one
	# K block, cross in a phase of their own)
	run jq '.phases | length' c.json
	assert_output 12
	# and the program runs byte-exact, every op within its tolerance
	amp-plan "$m" | amp-compose | amp-expand | amp-exchange | amp-group | amp-emit --model "$m" -o p.amp
	run --separate-stderr amp-run --model "$m" p.amp
	assert_success
	assert_line --index 0 'movement: byte-exact after every phase (12 phases)'
}

@test "decoder: sibling GEMMs that end a repeat's body share their phases and leave its carry last" {
	local m=$ROOT/tests/models/siblings-end.yaml
	amp-plan "$m" -o p.yaml
	# the body is steps 1..9 (the weights stay home, cut as the pinned grids
	# cut them): m1's and m2's deliveries together, then their products, and
	# the carry last (m1's reduce and result come after m2's result)
	run grep -c '^- {repeat: layers, steps: \[1, 9\], count: 3}$' p.yaml
	assert_output 1
	run sed -n 's/^- {step: \([0-9]*\), \(copy\|compute\): \([a-z]*\), op: \([a-z0-9]*\),.*/\1 \3 \4/p' p.yaml
	assert_line --index 9 '9 carry layers'
	assert_line --index 10 '10 gelu act'
	assert_line --index 1 '1 activation m1'
	assert_line --index 2 '2 activation m2'
	amp-compose p.yaml | amp-expand | amp-exchange | amp-group > g.yaml
	amp-emit --model "$m" g.yaml -o p.amp
	run --separate-stderr amp-run --model "$m" p.amp
	assert_success
	assert_line --index 0 --regexp '^movement: byte-exact after every phase \([0-9]+ phases\)$'
}

@test "decoder: a prefill's sibling GEMMs share their phases, its keys travel with the cache's rows, its norms' scales with their sums" {
	local m=$MODELS/qwen2.5-0.5b-1layer-prefill.yaml
	amp-plan "$m" -o p.yaml
	amp-compose p.yaml | amp-expand | amp-exchange | amp-group > g.yaml
	amp-capture -o c.json g.yaml
	# 512 rows: q and k/v, gate and up are zipped as a decode step's are;
	# attention's keys and values move ahead of the cache's append, beside
	# its rows; each norm's scale moves with its rows' sums
	local pair
	for pair in q.a:kv.a q.partial:kv.partial q.out:kv.out gate.a:up.b store.x:attn.k \
		n1.partial:n1.scale n2.partial:n2.scale; do
		run jq --arg a "${pair%%:*}" --arg b "${pair#*:}" \
			'[.phases[] | select((.labels | index($a)) and (.labels | index($b)))] | length' c.json
		assert_output 1
	done
	# the residual stream is owned wide, in blocks of 5 rows by 64 columns
	# on 1,442 tiles (103 owners of rows, 14 column blocks: 320 elements a
	# tile, where half rows would be 448; formats/plan.md, "Wide
	# activations"), and the prompt's last row is taken from each column
	# block where it lives
	run grep -c '^- {name: x@canon, tensor: x, layout: row-major, split: \[1, 103, 14\], block: \[1, 5, 64\],' p.yaml
	assert_output 1
	run grep -c '^- {name: xl@last, tensor: xl, layout: row-major, split: \[1, 1, 14\], block: \[1, 1, 64\],' p.yaml
	assert_output 1
	# down's reduction (no bias, blocks of 5 rows by 64 columns) lands on the
	# residual stream's owners: no down.out phase
	run grep -c '^- {name: d@down.out, tensor: d, layout: row-major, split: \[1, 103, 14\], block: \[1, 5, 64\], base: 0,' p.yaml
	assert_output 1
	run jq '[.phases[] | select(.labels | index("down.out"))] | length' c.json
	assert_output 0
	# 15 phases in all (13 a layer, with the results of attention's causal
	# segments copied to their owners in o's delivery of a: attention
	# writes the fp8 that o reads, formats/plan.md, "Fused casts"; the last
	# row's and the logits')
	run jq '.phases | length' c.json
	assert_output 15
	amp-emit --model "$m" g.yaml -o p.amp
	run --separate-stderr amp-run --model "$m" p.amp
	assert_success
	assert_line --index 0 'movement: byte-exact after every phase (15 phases)'
}

@test "decoder: a norm folds into its GEMMs only where that is faster than not folding, by the exact lowering" {
	# Qwen's prefill: folding would cut gate's and up's K; the norms stay whole
	local m=$MODELS/qwen2.5-0.5b-1layer-prefill.yaml
	run amp-plan "$m" -o p.yaml
	assert_success
	run grep -c 'compute: rmsnorm' p.yaml
	assert_output 3         # (n1, n2 and the final norm)
	[ "$(plan_cycles "$m")" -le "$(plan_cycles "$m" --no-fold)" ]
	# a tiny decoder's prefill: both norms fold, and that is faster
	m=$ROOT/tests/models/tiny-lm-prefill.yaml
	amp-plan "$m" -o p.yaml
	run grep -c 'compute: rmsnorm' p.yaml
	assert_output 1         # (the final norm, before the logits' one K block)
	run grep -c '^- {step: [0-9]*, compute: mul, op: n[12], in: \[' p.yaml
	assert_output 2
	[ "$(plan_cycles "$m")" -lt "$(plan_cycles "$m" --no-fold)" ]
}

@test "decoder: a 1,024-token prefill, whose zipped siblings do not fit, is planned without zipping them, not by the memory objective" {
	sed 's/\[1, 512, 1\]/[1, 1024, 1]/' "$MODELS/qwen2.5-0.5b-prefill.yaml" > m.yaml
	amp-plan m.yaml -o p.yaml
	amp-compose p.yaml | amp-expand | amp-exchange | amp-group | amp-capture -o c.json
	# q's and k/v's deliveries in phases of their own
	run jq '[.phases[] | select((.labels | index("q.a")) and (.labels | index("kv.a")))] | length' c.json
	assert_output 0
	# and a plan of the cycles objective: faster than the memory objective's
	local mem
	mem=$(amp-plan --objective memory m.yaml | amp-compose | amp-expand | amp-exchange | amp-group | amp-capture |
		jq .summary.total_cycles)
	run jq --argjson mem "$mem" '.summary.total_cycles < $mem / 1.5' c.json
	assert_output true
}
