#!/usr/bin/env bats
# A state is carried by what writes it, not by its name alone
# (formats/model.md, state digests): amp-run --prefill refuses a prefill
# whose model writes a state of the same name and shape by another chain
# of ops (another rope theta, another head layout over a cache of the same
# shape, a parameter of another scale, another layer before it in a
# repeat), and a program that carries no model; it accepts one that differs
# only in what does not reach the cache (names of activations and ops).

bats_require_minimum_version 1.5.0
load common

PRE=$ROOT/tests/models/tiny-prefill.yaml
DEC=$ROOT/tests/models/tiny-decode.yaml

# refused PREFILL WHAT...: amp-run dec.amp --prefill PREFILL --save out
# fails with status 1, prints nothing, writes nothing, and names the
# state, both programs and a digest line holding each WHAT (its own, then
# the prefill's).
refused() {
	local pre=$1
	shift
	mkdir -p out
	run --separate-stderr amp-run dec.amp --prefill "$pre" --save out
	assert_failure 1
	assert_equal "$output" ""
	run ls -A out
	assert_output ""
	local re="^amp-run: state 'cache' of 'dec.amp' is written by a different model chain in the prefill '$(re_quote "$pre")': "
	re+="digest [0-9a-f]{16} vs [0-9a-f]{16}; the first difference: '"
	[[ $stderr =~ $re ]] || fail "unexpected message: $stderr"
	local w
	for w in "$@"; do
		[[ $stderr == *"$w"* ]] || fail "expected '$w' in: $stderr"
	done
}

@test "statedigest: a prefill whose rope theta differs is refused, naming the state and the line that differs; the matching prefill runs" {
	program "$DEC" dec.amp
	program "$PRE" pre.amp
	sed 's/name: rk, x: kv0, positions: pos, heads: 2, head_dim: 16, theta: 1000000/&0/' "$PRE" > theta.yaml
	run grep -c 'theta: 10000000, out: kv}' theta.yaml
	assert_output 1
	program theta.yaml theta.amp
	refused theta.amp "'#1 = rope heads 2 head_dim 16 theta 1000000 x #2 positions #8 : fp16 [*, *, 64]' against '#1 = rope heads 2 head_dim 16 theta 10000000 x #2 positions #8 : fp16 [*, *, 64]'"
	run --separate-stderr amp-run dec.amp --prefill pre.amp --steps 2
	assert_success
	assert_line --index 3 --regexp '^run 0 \(tiny-prefill, position 0\): output z: cosine '
	cosines_at_least 0.999
}

@test "statedigest: a prefill with another head layout over a cache of the same shape is refused" {
	program "$DEC" dec.amp
	# 8 heads sharing 4 kv heads of 8 columns: k and v still 64 wide
	sed -e 's/name: rq, x: q0, positions: pos, heads: 4, head_dim: 16/name: rq, x: q0, positions: pos, heads: 8, head_dim: 8/' \
		-e 's/name: rk, x: kv0, positions: pos, heads: 2, head_dim: 16/name: rk, x: kv0, positions: pos, heads: 4, head_dim: 8/' \
		-e 's/heads: 4, kv_heads: 2, causal: true/heads: 8, kv_heads: 4, causal: true/' "$PRE" > heads.yaml
	run grep -c 'heads: 8, kv_heads: 4' heads.yaml
	assert_output 1
	program heads.yaml heads.amp
	run grep -c '^- {name: cache, role: state, shape: \[2, 32, 64\], dtype: fp16}$' heads.amp.g
	assert_output 1
	refused heads.amp "'#1 = rope heads 2 head_dim 16 theta " "against '#1 = rope heads 4 head_dim 8 theta "
	# the rope alike, only the attention that reads the cache another layout: refused by its reader
	sed -e 's/heads: 4, kv_heads: 2, causal: true/heads: 2, kv_heads: 1, causal: true/' \
		-e 's/name: rq, x: q0, positions: pos, heads: 4, head_dim: 16/name: rq, x: q0, positions: pos, heads: 2, head_dim: 32/' \
		"$PRE" > reader.yaml
	program reader.yaml reader.amp
	refused reader.amp "'read by attention heads 4 kv_heads 2 head_dim 16 causal 1' against 'read by attention heads 2 kv_heads 1 head_dim 32 causal 1'"
}

@test "statedigest: a prefill whose w_kv has another fp8 scale is refused" {
	program "$DEC" dec.amp
	sed 's/^  w_kv: {shape: \[64, 64\], dtype: fp8}/  w_kv: {shape: [64, 64], dtype: fp8, scale: -3}/' "$PRE" > scale.yaml
	run grep -c 'scale: -3' scale.yaml
	assert_output 1
	program scale.yaml scale.amp
	refused scale.amp "'#6 = param w_kv [64, 64] x1 fp8 scale 0' against '#6 = param w_kv [64, 64] x1 fp8 scale -3'"
}

@test "statedigest: names of activations and ops, and the order of independent ops, do not count" {
	program "$DEC" dec.amp
	sed -e 's/kv0/k_and_v/g; s/name: rk,/name: rope_k,/; s/name: store,/name: write,/' "$PRE" > renamed.yaml
	# q's matmul after kv's: the walk from the cache's rows meets the same tensors in the same order
	awk '/name: q, a: xn/ { held = $0; next } { print } /name: kv, a: xn/ { print held }' renamed.yaml > moved.yaml
	run grep -n 'name: q, a: xn\|name: kv, a: xn' moved.yaml
	assert_line --index 0 --regexp 'name: kv, a: xn'
	program moved.yaml moved.amp
	run --separate-stderr amp-run dec.amp --prefill moved.amp
	assert_success
	cosines_at_least 0.999
}

@test "statedigest: in a repeat, a change before a later layer's append (an eps in the MLP) is refused" {
	local pre=$ROOT/tests/models/tiny-lm2-prefill.yaml
	program "$ROOT/tests/models/tiny-lm2-decode.yaml" dec.amp
	sed 's/name: n2, x: h, scale: n2, eps: 1e-6/name: n2, x: h, scale: n2, eps: 1e-5/' "$pre" > eps.yaml
	run grep -c 'eps: 1e-5' eps.yaml
	assert_output 1
	program eps.yaml eps.amp
	refused eps.amp "rmsnorm eps 9.9999999999999995e-07 x #" "rmsnorm eps 1.0000000000000001e-05 x #"
}

@test "statedigest: with --prefill, a program or a prefill that carries no model is refused" {
	program "$DEC" dec.amp
	program "$PRE" pre.amp
	amp-emit --no-model pre.amp.g -o bare-pre.amp
	amp-emit --no-model dec.amp.g -o bare-dec.amp
	run --separate-stderr amp-run dec.amp --prefill bare-pre.amp
	assert_failure 1
	assert_equal "$output" ""
	[[ $stderr == *"amp-run: the prefill 'bare-pre.amp' carries no model: what writes its states cannot be checked against the program's, so none is carried on (amp-emit --model embeds it)" ]] || fail "$stderr"
	run --separate-stderr amp-run bare-dec.amp --prefill pre.amp
	assert_failure 1
	assert_equal "$output" ""
	[[ $stderr == *"amp-run: 'bare-dec.amp' carries no model and none was given (--model): what writes its states cannot be checked against the prefill's, so none is carried on (amp-emit --model embeds it)" ]] || fail "$stderr"
	# given its model, it runs
	run --separate-stderr amp-run bare-dec.amp --model "$DEC" --prefill pre.amp
	assert_success
	cosines_at_least 0.999
}
