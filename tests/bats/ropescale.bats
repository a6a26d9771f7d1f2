#!/usr/bin/env bats
# Llama 3's rope scaling (model format 8, stage version 15): a rope's
# `scaling: {type: llama3, factor, low_freq_factor, high_freq_factor,
# original_context}` changes each pair's frequency (formats/model.md,
# "rope"). The tiny decoders with the scaling (made here from
# tests/models/tiny-*-il.yaml: of their 8 frequencies the first is kept,
# the second smoothed and the rest divided by the factor) run byte-exact,
# prefill then decode; every stage carries the scaling; a stage that drops
# it is refused against the model, a prefill without it by the state's
# digest; the malformed models tests/bad/model-ropescale-*.yaml are refused
# at their key. The float64 reference of a Hugging Face checkpoint with
# the scaling is import.bats's.

bats_require_minimum_version 1.5.0
load common

SCALING='{type: llama3, factor: 8, low_freq_factor: 1, high_freq_factor: 4, original_context: 64}'

# scaled IN OUT: the model IN at format 8, each rope scaled.
scaled() {
	sed "s/^amp-model: 7$/amp-model: 8/; /op: rope,/s/theta: 1000000, out:/theta: 1000000, scaling: $SCALING, out:/" \
		"$1" > "$2"
}

setup() {
	cd "$BATS_TEST_TMPDIR" || return 1
	scaled "$ROOT/tests/models/tiny-prefill-il.yaml" pre.yaml
	scaled "$ROOT/tests/models/tiny-decode-il.yaml" dec.yaml
}

@test "ropescale: scaled rotations run byte-exact, prefill then decode, each stage carrying the scaling" {
	run grep -c "scaling: $SCALING" dec.yaml
	assert_output 2
	program pre.yaml pre.amp
	program dec.yaml dec.amp
	run grep -c "^- {step: [0-9]*, compute: rope, .*, theta: 1e+06, scaling: $SCALING}$" dec.amp.g
	assert_output 2
	run --separate-stderr amp-run dec.amp --prefill pre.amp
	assert_success
	assert_line --regexp '^movement: byte-exact after every phase \([0-9]+ phases, every run\)$'
	assert_line --regexp '^per op: [0-9]+ ops checked after every run'
	# the scaling changes the numbers: the same run unscaled differs
	program "$ROOT/tests/models/tiny-decode-il.yaml" plain.amp
	program "$ROOT/tests/models/tiny-prefill-il.yaml" plainpre.amp
	mkdir -p s p
	amp-run dec.amp --prefill pre.amp --save s > /dev/null
	amp-run plain.amp --prefill plainpre.amp --save p > /dev/null
	[ -e s/step.0/z.npy ] && [ -e p/step.0/z.npy ] || fail "no outputs saved"
	! cmp -s s/prefill.0/z.npy p/prefill.0/z.npy || fail "the scaled and unscaled prefills gave the same output"
	! cmp -s s/step.0/z.npy p/step.0/z.npy || fail "the scaled and unscaled decode steps gave the same output"
}

@test "ropescale: a stage that drops the scaling is refused against the model; version 14 cannot say it" {
	amp-plan dec.yaml | amp-compose | amp-expand | amp-exchange | amp-group > g.yaml
	sed "/op: rq,/s/, scaling: {[^}]*}//" g.yaml > drop.yaml
	run --separate-stderr amp-emit --model dec.yaml drop.yaml -o x.amp
	assert_failure 1
	[[ $stderr == *"op 'rq': its step "*" scales the frequencies by factor 0 (low 0, high 0, original 0), the model by factor 8 (low 1, high 4, original 64;"* ]] || fail "$stderr"
	[ ! -e x.amp ] || fail "a program was written"
	sed 's/^version: 17$/version: 14/' g.yaml > v14.yaml
	run --separate-stderr amp-emit --no-model v14.yaml -o x.amp
	assert_failure 1
	[[ $stderr == *"scaling needs version 15 (this file is version 14)"* ]] || fail "$stderr"
	sed '/op: rq,/s/type: llama3/type: yarn/' g.yaml > yarn.yaml
	run --separate-stderr amp-emit --no-model yarn.yaml -o x.amp
	assert_failure 1
	[[ $stderr == *"rope 'rq': scaling type 'yarn' is not one amp has (llama3)"* ]] || fail "$stderr"
	[ ! -e x.amp ] || fail "a program was written"
}

@test "ropescale: a prefill without the scaling is refused by the state's digest" {
	program dec.yaml dec.amp
	program "$ROOT/tests/models/tiny-prefill-il.yaml" pre.amp
	run --separate-stderr amp-run dec.amp --prefill pre.amp
	assert_failure 1
	[[ $stderr == *"state 'cache'"* ]] || fail "$stderr"
}

@test "ropescale: malformed scalings are refused at the key" {
	plan_rejects "$BAD/model-ropescale-version.yaml" 24:118 "rope 'rq': scaling needs amp-model: 8 (this file is version 7)" \
		"$BAD/model-ropescale-version.yaml"
	plan_rejects "$BAD/model-ropescale-type.yaml" 24:125 "rope 'rq': scaling type 'yarn' is not one amp has (llama3)" \
		"$BAD/model-ropescale-type.yaml"
	plan_rejects "$BAD/model-ropescale-missing.yaml" 24:118 "missing key 'original_context'" \
		"$BAD/model-ropescale-missing.yaml"
	plan_rejects "$BAD/model-ropescale-factor.yaml" 24:141 "rope 'rq': scaling factor must be a number of at least 1" \
		"$BAD/model-ropescale-factor.yaml"
	plan_rejects "$BAD/model-ropescale-order.yaml" 24:182 \
		"rope 'rq': scaling high_freq_factor must be a number above low_freq_factor" "$BAD/model-ropescale-order.yaml"
	plan_rejects "$BAD/model-ropescale-map.yaml" 24:118 "rope 'rq': scaling is a mapping {type: llama3, factor," \
		"$BAD/model-ropescale-map.yaml"
	plan_rejects "$BAD/model-ropescale-key.yaml" 24:207 "unknown key 'beta'" "$BAD/model-ropescale-key.yaml"
}

@test "ropescale: every malformed scaling model in tests/bad is checked by this suite" {
	every_bad_checked 7 '$BAD/%s' "$BAD"/model-ropescale-*.yaml
}
