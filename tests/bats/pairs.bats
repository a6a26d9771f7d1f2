#!/usr/bin/env bats
# Rotary pairs interleaved (model format 7): rope's pairs: interleaved
# rotates elements 2i and 2i + 1 of each head together, instead of i and
# i + head_dim/2, so it runs on any cut of whole pairs: a decode step's
# rope then rotates the q and kv GEMMs' results where they are, with no
# copy to whole heads between (tests/models/tiny-prefill-il.yaml and
# tiny-decode-il.yaml). Runs are byte-exact and within cosine 0.999 of the
# FP32 reference; a stage that rotates the other pairs is refused; the
# malformed models tests/bad/model-pairs-*.yaml are refused at their key.

bats_require_minimum_version 1.5.0
load common

PRE=$ROOT/tests/models/tiny-prefill-il.yaml
DEC=$ROOT/tests/models/tiny-decode-il.yaml

@test "pairs: the rope steps carry pairs interleaved and rotate the GEMMs' results in place" {
	amp-plan "$DEC" -o p.yaml
	run grep -c '^- {step: [0-9]*, compute: rope, op: rq, in: \[q0@q.out, [^]]*\], out: q@canon, heads: 4, head_dim: 16, pairs: interleaved, theta: ' p.yaml
	assert_output 1
	run grep -c '^- {step: [0-9]*, compute: rope, op: rk, in: \[kv0@kv.out, [^]]*\], .*head_stride: 32, pairs: interleaved, theta: ' p.yaml
	assert_output 1
	# nothing copies q0 or kv0 to whole heads
	run grep -c '^- {step: [0-9]*, copy: output, op: \(q\|kv\), ' p.yaml
	assert_output 0
	sed -n 2p p.yaml | grep -q '^version: 17$' || fail "not a version 17 plan"
}

@test "pairs: the default plans run byte-exact, prefill then 3 decode steps, within cosine 0.999" {
	program "$PRE" pre.amp
	program "$DEC" dec.amp
	run --separate-stderr amp-run dec.amp --prefill pre.amp --steps 3
	assert_success
	assert_line --index 0 --regexp '^movement: byte-exact after every phase \([0-9]+ phases, every run\)$'
	assert_line --index 2 --regexp '^per op: 16 ops checked after every run'
	assert_line --index 7 --regexp '^run 3 \(tiny-decode-il, position 10\): output z: cosine '
	cosines_at_least 0.999
}

@test "pairs: a prefill that rotates the other pairs is refused by the state's digest" {
	program "$DEC" dec.amp
	program "$ROOT/tests/models/tiny-prefill-kvh.yaml" pre.amp
	run --separate-stderr amp-run dec.amp --prefill pre.amp
	assert_failure 1
	[[ $stderr == *"state 'cache'"* ]] || fail "$stderr"
}

@test "pairs: a stage that drops pairs is refused against the model, naming the op; version 11 cannot say it" {
	amp-plan "$PRE" | amp-compose | amp-expand | amp-exchange | amp-group > g.yaml
	sed '/op: rq,/s/, pairs: interleaved//' g.yaml > half.yaml
	run --separate-stderr amp-emit --model "$PRE" half.yaml -o x.amp
	assert_failure 1
	[[ $stderr == *"op 'rq': its step "*" rotates pairs half, the model interleaved"* ]] || fail "$stderr"
	[ ! -e x.amp ] || fail "a program was written"
	sed 's/^version: 17$/version: 11/' g.yaml > v11.yaml
	run --separate-stderr amp-emit --no-model v11.yaml -o x.amp
	assert_failure 1
	[[ $stderr == *"pairs needs version 12 (this file is version 11)"* ]] || fail "$stderr"
	sed 's/pairs: interleaved/pairs: half/' g.yaml > named.yaml
	run --separate-stderr amp-emit --no-model named.yaml -o x.amp
	assert_failure 1
	[[ $stderr == *"pairs is 'interleaved' when given (absent: half)"* ]] || fail "$stderr"
	[ ! -e x.amp ] || fail "a program was written"
}

@test "pairs: malformed pairs are refused at the key" {
	plan_rejects "$BAD/model-pairs-value.yaml" 24:80 \
		"rope 'rq': pairs is 'half' (element i of a head with i + head_dim/2) or 'interleaved' (2i with 2i + 1)" \
		"$BAD/model-pairs-value.yaml"
	plan_rejects "$BAD/model-pairs-version.yaml" 24:80 "rope 'rq': pairs needs amp-model: 7 (this file is version 6)" \
		"$BAD/model-pairs-version.yaml"
	plan_rejects "$BAD/model-pairs-stride.yaml" 25:87 \
		"rope 'rk': pairs interleaved needs an even head_stride (33 would start head 1's pairs at an odd column)" \
		"$BAD/model-pairs-stride.yaml"
}

@test "pairs: every malformed pairs model in tests/bad is checked by this suite" {
	every_bad_checked 3 '$BAD/%s' "$BAD"/model-pairs-*.yaml
}

@test "pairs: Qwen2.5-0.5B's decode step rotates q and kv where their GEMMs leave them" {
	amp-plan "$ROOT/share/models/qwen2.5-0.5b-1layer-decode.yaml" -o p.yaml
	run grep -c '^- {step: [0-9]*, compute: rope, op: rq, in: \[q0@q.out, ' p.yaml
	assert_output 1
	run grep -c '^- {step: [0-9]*, compute: rope, op: rk, in: \[kv0@kv.out, ' p.yaml
	assert_output 1
}
