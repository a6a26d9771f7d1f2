#!/usr/bin/env bats
# Every compute step checked field by field against the model
# (lib/run/run_check_fields.c and run_check.c): a one-layer decoder
# (tests/models/tiny-prefill.yaml: rmsnorm, matmuls with and without
# bias, rope, append, causal grouped-query attention with chunked
# partials, silu, mul, add) and siglip-mlp (matmuls with K cut and
# bias in the reduction) are lowered, then each compute step's operand
# list and each attribute, and each GEMM record's m, k, n and format, are
# changed one at a time (tests/bats/stepfields.awk). amp-emit --model
# refuses every mutant, naming its op, or (a step the stage reader
# refuses on its own) the stage line of the step; no program is written.

bats_require_minimum_version 1.5.0
load common

# all_refused STAGE MODEL: every mutant of STAGE refused; the count in
# ./refused. (Called in the test's own shell, not in $(...): there a
# failed assertion would not stop the test.)
all_refused() {
	local stage=$1 model=$2 n=0 i op at field
	run amp-emit --model "$model" -o x.amp "$stage"
	assert_success
	rm -f x.amp
	while IFS=$'\t' read -r i op at field; do
		n=$((n + 1))
		awk -v want="$i" -f "$BATS_TEST_DIRNAME/stepfields.awk" "$stage" > m.yaml
		! cmp -s m.yaml "$stage" || { fail "mutant $i ($op, $field) changes nothing"; return 1; }
		run --separate-stderr amp-emit --model "$model" -o x.amp m.yaml
		[ "$status" = 1 ] && [ -z "$output" ] && [ ! -e x.amp ] ||
			{ fail "mutant $i ($op, $field) was not refused ($status): $stderr"; return 1; }
		[[ $stderr != *$'\n'* ]] || { fail "mutant $i: more than one line: $stderr"; return 1; }
		[[ $stderr == "amp-emit: "*"'$op'"* || $stderr == "amp-emit: m.yaml:$at:"* ]] ||
			{ fail "mutant $i ($op, $field) refused without naming its op or its step: $stderr"; return 1; }
	done < <(awk -v want=0 -f "$BATS_TEST_DIRNAME/stepfields.awk" "$stage")
	echo "$n" > refused
}

@test "stepfields: every field of the decoder layer's compute steps and GEMM records is checked against the model" {
	local model=$ROOT/tests/models/tiny-prefill.yaml n
	amp-plan "$model" | amp-compose | amp-expand | amp-exchange | amp-group > g.yaml
	all_refused g.yaml "$model"
	n=$(cat refused)
	echo "# $n mutants of tiny-prefill refused" >&3
	# 6 GEMM records x 4 fields, and each kind of field at least once (its
	# GEMMs read fused casts: no cast order to change; siglip-mlp's below)
	[ "$n" -ge 60 ] || fail "only $n mutants"
	local fields
	fields=$(awk -v want=0 -f "$BATS_TEST_DIRNAME/stepfields.awk" g.yaml | cut -f 4 | sort -u | paste -sd ,)
	assert_equal "$fields" "causal,chunks,eps,first,gemm format,gemm grid,gemm k,gemm m,gemm n,head_dim,heads,kv_heads,operand added,operand dropped,scale,scratch,theta"
}

@test "stepfields: siglip-mlp's matmuls (K cut, bias in the reduction) refuse every mutant" {
	siglip_ok
	local model=$MODELS/siglip-mlp.yaml n
	amp-plan "$model" | amp-compose | amp-expand | amp-exchange | amp-group > g.yaml
	all_refused g.yaml "$model"
	n=$(cat refused)
	echo "# $n mutants of siglip-mlp refused" >&3
	[ "$n" -ge 15 ] || fail "only $n mutants"
	# its fc1 reads a layernorm's result, cast early: the cast order is changed too
	awk -v want=0 -f "$BATS_TEST_DIRNAME/stepfields.awk" g.yaml | cut -f 4 | grep -qx 'gemm cast' ||
		fail "no gemm cast mutant"
}

@test "stepfields: a matmul without its bias passes the numbers but not amp-emit --model nor amp-run --model" {
	local model=$ROOT/tests/models/tiny-prefill.yaml
	amp-plan "$model" | amp-compose | amp-expand | amp-exchange | amp-group > g.yaml
	sed 's/in: \[xn.fp8@q.a, w_q@q.b, b_q@q.bias\]/in: [xn.fp8@q.a, w_q@q.b]/' g.yaml > m.yaml
	! cmp -s g.yaml m.yaml
	run --separate-stderr amp-emit --model "$model" -o x.amp m.yaml
	assert_failure 1
	[[ $stderr =~ ^amp-emit:\ .*tiny-prefill\.yaml:25:5:\ op\ \'q\':\ its\ matmul\ step\ [0-9]+\ reads\ 2\ operands,\ the\ plan\ implies\ 3\ \(a,\ b,\ bias\)$ ]] ||
		fail "$stderr"
	[ ! -e x.amp ]
	amp-emit --no-model -o x.amp m.yaml
	# without the model, within the fp8 tolerance: numbers cannot see it
	run amp-run x.amp
	assert_success
	run --separate-stderr amp-run --model "$model" x.amp
	assert_failure 1
	assert_equal "$output" ""
	[[ $stderr == *"op 'q': its matmul step "*" reads 2 operands, the plan implies 3 (a, b, bias)" ]] || fail "$stderr"
}

@test "stepfields: fused casts (a norm's and a gated product's fp8 written where they are made) run, and a cast that is not the GEMM's is refused at the op" {
	local model=$ROOT/tests/models/tiny-swiglu.yaml
	amp-plan "$model" | amp-compose | amp-expand | amp-exchange | amp-group > g.yaml
	# xn and h are read only by fp8 matmuls, as a: their ops write xn.fp8
	# and h.fp8 (formats/plan.md, "Fused casts"); no cast step, no fp16 copy
	run grep -c '^- {step: [0-9]*, compute: rmsnorm, op: norm, in: \[x@canon, norm_g@owners\], out: xn.fp8@canon, eps: 1e-06}$' g.yaml
	assert_output 1
	run grep -c '^- {step: [0-9]*, compute: mul, op: gated, in: \[s@canon, u@canon\], out: h.fp8@canon}$' g.yaml
	assert_output 1
	run grep -c 'compute: cast\|{name: h@\|{name: xn@' g.yaml
	assert_output 0
	run grep -c '^- {op: down, a: h.fp8, b: w_down, .* cast: auto,' g.yaml
	assert_output 1
	run --separate-stderr amp-emit --model "$model" -o p.amp g.yaml
	assert_success
	run --separate-stderr amp-run --model "$model" p.amp
	assert_success
	assert_line --index 0 --regexp '^movement: byte-exact after every phase \([0-9]+ phases\)$'
	# h.fp8 said to be fp16: no longer h's cast, so down's record reads
	# neither h nor its cast
	sed 's/^- {name: h.fp8, role: act, shape: \[2, 37, 200\], dtype: fp8, scale: 0}$/- {name: h.fp8, role: act, shape: [2, 37, 200], dtype: fp16}/' g.yaml > m.yaml
	! cmp -s g.yaml m.yaml
	run --separate-stderr amp-emit --model "$model" -o x.amp m.yaml
	assert_failure 1
	assert_equal "$stderr" "amp-emit: $model:19:5: matmul 'down': the stage's GEMM record does not read and write the model's a (or a folded rmsnorm's <a>.prenorm, or a's fused cast), b, bias and out"
	[ ! -e x.amp ]
	# h.fp8 at another scale than the one h's cast takes
	sed 's/^- {name: h.fp8, role: act, shape: \[2, 37, 200\], dtype: fp8, scale: 0}$/- {name: h.fp8, role: act, shape: [2, 37, 200], dtype: fp8, scale: 1}/' g.yaml > m.yaml
	run --separate-stderr amp-emit --model "$model" -o x.amp m.yaml
	assert_failure 1
	assert_equal "$stderr" "amp-emit: $model:18:45: tensor 'h': the stage's cast 'h.fp8' has fp8 scale 1, the default 0"
	[ ! -e x.amp ]
}

@test "stepfields: an attention's merge writes its result's fused fp8 cast, which a version 16 stage cannot hold" {
	local model=$ROOT/tests/models/tiny-prefill.yaml
	amp-plan "$model" -o p.yaml
	run grep -c '^- {step: [0-9]*, compute: merge, op: attn, in: \[a.partial@attn.merge\], out: a.fp8@attn.out}$' p.yaml
	assert_output 1
	sed 's/^version: 17$/version: 16/' p.yaml > p16.yaml
	run --separate-stderr amp-compose p16.yaml
	assert_failure 1
	[[ $stderr =~ ^amp-compose:\ p16\.yaml:[0-9]+:[0-9]+:\ an\ fp8\ attention\ result\ \(\'a\.fp8@attn\.out\',\ a\ fused\ cast\)\ needs\ version\ 17\ \(this\ file\ is\ version\ 16\)$ ]] ||
		fail "$stderr"
}
