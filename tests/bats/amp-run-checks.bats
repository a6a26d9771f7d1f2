#!/usr/bin/env bats
# amp-run: calibration and the two checks: tiny-mlp, siglip-mlp and vit-tiny
# passing both, the same bits however run, and the model's reference
# catching what the stage's own cannot.

load common
load stages
load amp-run
bats_require_minimum_version 1.5.0

setup_file() {
	run_fixtures tiny siglip
}

# ---- B. calibration and the two checks ----

@test "run --calibrate writes a scale for every fp8 tensor of tiny-mlp" {
	run --separate-stderr amp-run --calibrate "$MODELS/tiny-mlp.yaml" -o scales.yaml
	assert_success
	assert_equal "$output" ""
	assert_equal "$stderr" ""
	run cat scales.yaml
	assert_line --index 0 'amp-scales: 1'
	assert_line --index 1 'scales:'
	for t in w_up w_down xn g; do
		assert_line --regexp "^  $t: -?[0-9]+$"
	done
	# deterministic
	run amp-run --calibrate "$MODELS/tiny-mlp.yaml" -o again.yaml
	assert_success
	run cmp scales.yaml again.yaml
	assert_success
}

@test "run --calibrate on a missing model fails with status 1 and writes nothing" {
	mkdir work && cd work
	run --separate-stderr amp-run --calibrate nosuch.yaml -o s.yaml
	assert_failure 1
	assert_equal "$stderr" "amp-run: cannot open 'nosuch.yaml': No such file or directory"
	run ls -A
	assert_output ""
}

@test "run passes a program whose phases amp-group reordered: byte-exact" {
	model=$ROOT/tests/models/compose-shared-stage.yaml
	amp-plan "$model" | amp-compose | amp-expand | amp-exchange > x.yaml
	run --separate-stderr amp-group -v x.yaml -o g.yaml
	assert_success
	[[ "$stderr" =~ ^amp-group:\ ([0-9]+)\ of ]]
	assert [ "${BASH_REMATCH[1]}" -ge 1 ]
	run amp-emit --model "$model" g.yaml -o g.amp
	assert_success
	run amp-run g.amp
	assert_success
	assert_line --index 0 --regexp '^movement: byte-exact after every phase \([0-9]+ phases\)$'
}

@test "run passes tiny-mlp calibrated, planned with --scales and emitted: byte-exact and cosine at least 0.99" {
	run amp-run --calibrate "$MODELS/tiny-mlp.yaml" -o scales.yaml
	assert_success
	run pipeline "$MODELS/tiny-mlp.yaml" g.yaml scales.yaml
	assert_success
	# every calibrated scale reached the stage's fp8 tensors
	run sed -n 's/^  \([a-z_]*\): \(-\{0,1\}[0-9]*\)$/\1 \2/p' scales.yaml
	assert [ "${#lines[@]}" -ge 4 ]
	for l in "${lines[@]}"; do
		grep -q "^- {name: ${l% *}\(\.fp8\)\{0,1\}, .* dtype: fp8, scale: ${l#* }}$" g.yaml ||
			fail "scale '$l' is not in the stage"
	done
	run amp-emit --model "$MODELS/tiny-mlp.yaml" --scales scales.yaml g.yaml -o p.amp
	assert_success
	passes p.amp
	assert_equal "${#lines[@]}" 4
	assert_line --index 1 "reference: FP32 from the model's ops (p.amp(MODEL))"
	assert_line --index 2 --regexp "^per op: 5 ops checked after every run, each on the machine's own inputs against its FP32 reference; closest to its tolerance: '[a-z_]+', relative L2 error [0-9.e-]+ of [0-9.e-]+$"
	assert_line --index 0 --regexp "^movement: byte-exact after every phase \\($(grep -c '^- {phase: ' g.yaml) phases\\)$"
}

@test "run gives identical results for the same seed, explicit or default" {
	passes "$TINY_PROG"
	local one=$output
	passes "$TINY_PROG" --seed 1
	assert_equal "$output" "$one"
	mkdir a b
	passes "$TINY_PROG" --save a
	passes "$TINY_PROG" --save b
	run cmp a/z.npy b/z.npy
	assert_success
	run cmp a/z.ref.npy b/z.ref.npy
	assert_success
}

@test "run with another --seed generates other data and still passes" {
	passes "$TINY_PROG" --seed 1
	local m1 m2
	m1=$(max_abs "$output" z) || fail "no max abs error in: $output"
	passes "$TINY_PROG" --seed 2
	m2=$(max_abs "$output" z) || fail "no max abs error in: $output"
	[ "$m1" != "$m2" ] || fail "seeds 1 and 2 both give max abs error $m1"
}

@test "run passes siglip-mlp with calibrated scales: byte-exact and cosine at least 0.99" {
	siglip_ok
	assert [ -s "$SIGLIP_PROG" ]
	passes "$SIGLIP_PROG"
	assert_equal "${#lines[@]}" 4
	assert_line --index 1 --regexp "^reference: FP32 from the model's ops "
	assert_line --index 2 --regexp "^per op: 4 ops checked after every run"
}

@test "run --timing adds where the time went on stderr and leaves the report as it was" {
	run --separate-stderr amp-run "$TINY_PROG"
	assert_success
	local plain=$output
	run --separate-stderr amp-run --timing "$TINY_PROG"
	assert_success
	assert_equal "$output" "$plain"
	assert_equal "${#stderr_lines[@]}" 3
	assert_regex "${stderr_lines[0]}" "^amp-run: matrix products \(the machine's\): [0-9.]+ GFLOP in [0-9.]+ s, [0-9.]+ GFLOP/s, (8|16) wide; [0-9.]+ CPU s, [0-9.]+ GFLOP/s per core$"
	assert_regex "${stderr_lines[1]}" '^amp-run: wall seconds: data [0-9.]+, machine [0-9.]+ \(encoding [0-9.]+, filling SRAM [0-9.]+, compute steps [0-9.]+, phases and checks [0-9.]+ \(tables [0-9.]+, matching [0-9.]+, poisoning [0-9.]+, moves [0-9.]+, checks [0-9.]+\), other -?[0-9.]+\), reference [0-9.]+$'
	assert_regex "${stderr_lines[2]}" '^amp-run: the reference ran alongside the machine; its matrix products: [0-9.]+ GFLOP in [0-9.]+ s, [0-9.]+ GFLOP/s; [0-9.]+ CPU s, [0-9.]+ GFLOP/s per core$'
	AMP_THREADS=1 run --separate-stderr amp-run --timing "$TINY_PROG"
	assert_success
	assert_equal "$output" "$plain"
	assert_regex "${stderr_lines[2]}" '^amp-run: the reference ran after the machine; '
	AMP_GEMM_WIDTH=8 run --separate-stderr amp-run --timing "$TINY_PROG"
	assert_success
	assert_equal "$output" "$plain"
	assert_regex "${stderr_lines[0]}" ', 8 wide; '
}

@test "run gives the same bits on one thread (AMP_THREADS=1) as on two, and 8 wide (AMP_GEMM_WIDTH=8): outputs, references and the first wrong byte" {
	siglip_ok
	mkdir one two narrow
	run --separate-stderr amp-run --save two "$SIGLIP_PROG"
	assert_success
	local out2=$output
	AMP_THREADS=1 run --separate-stderr amp-run --save one "$SIGLIP_PROG"
	assert_success
	assert_equal "$output" "$out2"
	AMP_GEMM_WIDTH=8 run --separate-stderr amp-run --save narrow "$SIGLIP_PROG"
	assert_success
	assert_equal "$output" "$out2"
	for f in two/*.npy; do
		cmp "$f" "one/${f#two/}" || fail "$f differs on one thread"
		cmp "$f" "narrow/${f#two/}" || fail "$f differs 8 wide"
	done
	# a faulty program: receivers dropped from every third send
	awk '/ kind: send, / && match($0, /recv: \[[0-9]+,/) { c++; k = substr($0, RSTART + 7, RLENGTH - 8) + 0
		if (k > 1 && c % 3 == 0) $0 = substr($0, 1, RSTART - 1) "recv: [" k - 1 "," substr($0, RSTART + RLENGTH) } 1' \
		"$BATS_FILE_TMPDIR/siglip.yaml" > fewer.yaml
	run amp-emit --model "$MODELS/siglip-mlp.yaml" --scales "$BATS_FILE_TMPDIR/siglip-scales.yaml" fewer.yaml -o fewer.amp
	assert_success
	run --separate-stderr amp-run fewer.amp
	assert_failure 1
	local err2=$stderr
	AMP_THREADS=1 run --separate-stderr amp-run fewer.amp
	assert_failure 1
	assert_equal "$stderr" "$err2"
	assert_regex "$stderr" "^amp-run: tile [0-9]+, phase [0-9]+: "
}

# vit_pinned NAME PINS: vit-tiny named NAME with PINS (the lines after
# `pins:`) as NAME.yaml, calibrated and lowered into NAME.grouped.
vit_pinned() {
	{ sed "s/^name: vit-tiny\$/name: $1/" "$ROOT/tests/models/vit-tiny.yaml"
	  printf 'pins:\n%s' "$2"; } >"$1.yaml"
	run amp-run --calibrate "$1.yaml" -o "$1-scales.yaml"
	assert_success
	run pipeline "$1.yaml" "$1.grouped" "$1-scales.yaml"
	assert_success
}

# runs_pooled GROUPED: emitted with its model and scales (NAME.yaml and
# NAME-scales.yaml for NAME.grouped) and run, byte-exact and output
# pooled's cosine at least 0.99 against the model's reference.
runs_pooled() {
	run amp-emit --model "${1%.grouped}.yaml" --scales "${1%.grouped}-scales.yaml" "$1" -o "$1.amp"
	assert_success
	run --separate-stderr amp-run "$1.amp"
	assert_success
	assert_line --index 0 --regexp '^movement: byte-exact after every phase \([0-9]+ phases\)$'
	assert_line --index 1 "reference: FP32 from the model's ops ($1.amp(MODEL))"
	c=$(cosine "$output" pooled) || fail "no cosine for pooled in: $output"
	at_least "$c" 0.99
}

@test "run passes vit-tiny with its attention split into key blocks: fp16 partials merged by online softmax, byte-exact, cosine at least 0.99" {
	vit_pinned vit-keys $'  attn: {blocks: [4, 4]}\n  map_attn: {blocks: [1, 3]}\n'
	run grep -c '^- {step: [0-9]*, compute: merge, ' vit-keys.grouped
	assert_output 2
	local t n=0
	for t in $(sed -n 's/^- {step: [0-9]*, compute: merge, op: [a-z_]*, in: \[\([^@]*\)@.*/\1/p' vit-keys.grouped); do
		run grep -c "^- {name: $t, role: partial, shape: \[[0-9, ]*\], dtype: fp16}$" vit-keys.grouped
		assert_output 1
		n=$((n + 1))
	done
	assert_equal "$n" 2
	runs_pooled vit-keys.grouped
}

@test "run passes vit-tiny with keys and values relayed: gathered once per block, sent on whole, byte-exact" {
	vit_pinned vit-relay $'  attn: {blocks: [4, 2], kv_staging: relay}\n'
	run grep -c '^- {step: [0-9]*, copy: relay, op: attn, ' vit-relay.grouped
	assert_output 2
	# a relay moves each key block whole: one fragment of 8 keys x 16 columns
	s=$(sed -n 's/^- {step: \([0-9]*\), copy: relay, op: attn, operand: k, .*/\1/p' vit-relay.grouped)
	run grep -c "^- {step: $s, kind: send, len: 256, " vit-relay.grouped
	assert_output 1
	runs_pooled vit-relay.grouped
}

@test "run reads a stacked weight home in place as the iteration's instance: vit-stacked-home, byte-exact, every output within cosine 0.99" {
	m=$ROOT/tests/models
	run pipeline "$m/vit-stacked-home.yaml" stacked.grouped "" -m "$m/machine-18.yaml"
	assert_success
	# the case under test: a matmul in the repeat body reads the stacked home itself
	run grep -c '^- {step: [0-9]*, compute: matmul, op: up, in: \[n2@up.a, wu@home\], ' stacked.grouped
	assert_output 1
	run amp-emit --machine "$m/machine-18.yaml" --model "$m/vit-stacked-home.yaml" stacked.grouped -o stacked.amp
	assert_success
	run --separate-stderr amp-run --machine "$m/machine-18.yaml" stacked.amp
	assert_success
	assert_line --index 1 "reference: FP32 from the model's ops (stacked.amp(MODEL))"
	for t in h enc pooled; do
		c=$(cosine "$output" $t) || fail "no cosine for $t in: $output"
		at_least "$c" 0.99
	done
}

@test "run --model --scales accepts a program whose stage agrees with its model and scales" {
	passes "$TINY_PROG" --model "$MODELS/tiny-mlp.yaml" --scales "$TINY_SCALES"
}

@test "run says which reference ran: the model's when given or embedded, else the stage's own ops" {
	passes "$TINY_BARE_PROG"
	assert_line --index 1 "reference: FP32 from the stage's own ops (no model: amp-emit --model or amp-run --model makes it the model's)"
	passes "$TINY_BARE_PROG" --model "$MODELS/tiny-mlp.yaml" --scales "$TINY_SCALES"
	assert_line --index 1 "reference: FP32 from the model's ops ($MODELS/tiny-mlp.yaml)"
	amp-emit --model "$MODELS/tiny-mlp.yaml" --scales "$TINY_SCALES" "$TINY" -o embedded.amp
	passes embedded.amp
	assert_line --index 1 "reference: FP32 from the model's ops (embedded.amp(MODEL))"
	# on a faithful stage both references give the same figures
	local stage model
	passes "$TINY_BARE_PROG"
	stage=$(sed -n 3p <<< "$output")
	passes embedded.amp
	assert_line --index 3 "$stage"
}

@test "a program written --no-model: every run warns that the model is not checked, and --model silences it" {
	local i
	for i in 1 2; do
		run --separate-stderr amp-run "$TINY_BARE_PROG"
		assert_success
		assert_equal "${#stderr_lines[@]}" 1
		assert_equal "$stderr" "amp-run: warning: '$TINY_BARE_PROG' carries no model (amp-emit --no-model) and none was given (--model): movement and arithmetic are checked, not that the stage computes the model"
	done
	run --separate-stderr amp-run --model "$MODELS/tiny-mlp.yaml" --scales "$TINY_SCALES" "$TINY_BARE_PROG"
	assert_success
	assert_equal "$stderr" ""
	# a program with its model embedded says nothing either
	run --separate-stderr amp-run "$TINY_PROG"
	assert_success
	assert_equal "$stderr" ""
}

@test "run --model names a model output that the stage does not compute as an output" {
	sed 's/^outputs: \[z\]$/outputs: [z, h]/' "$MODELS/tiny-mlp.yaml" > more.yaml
	run grep -c '^outputs: \[z, h\]$' more.yaml
	assert_output 1
	# the stage records the model it was planned from: another is refused by its hash
	run --separate-stderr amp-run --model more.yaml --scales "$TINY_SCALES" "$TINY_PROG"
	assert_failure 1
	[[ $stderr == *"model file 'more.yaml' (fnv1a "*") is not the one the stage was planned from"* ]] || fail "$stderr"
	# a stage whose provenance names no model file: the check of stage against model names it
	sed '/^- {tool: amp-plan, /s/{role: model, [^}]*}, //' "$ROOT/tests/golden/tiny-mlp/grouped.yaml" >noprov.yaml
	grep -q '^- {tool: amp-plan, .*files: \[{role: machine' noprov.yaml || fail "the model record is still there"
	amp-emit --no-model -o np.amp noprov.yaml
	run --separate-stderr amp-run --model more.yaml np.amp
	assert_failure 1
	assert_equal "$output" ""
	assert_regex "$stderr" "^amp-run: more.yaml:[0-9]+:[0-9]+: tensor 'h' is an output of the model but not an output of the stage$"
}

@test "run --scales without --model is a usage error" {
	run --separate-stderr amp-run --scales "$TINY_SCALES" "$TINY_PROG"
	assert_failure 2
	assert_regex "$stderr" "^amp-run: --scales needs --model"
}

# A stage whose fp8 scale or layernorm eps was changed runs byte-exact with
# a good cosine, since the reference is computed from the same stage; the
# model and its scales are what catch it. caught_by_model SED NAME REGEX:
# tiny-mlp's stage edited by SED emits and runs alone, and amp-run given
# the model and scales fails with one line matching REGEX.
caught_by_model() {
	sed "$1" "$TINY" > "$2.yaml"
	edited "$TINY" "$2.yaml"
	run amp-emit --no-model "$2.yaml" -o "$2.amp"
	assert_success
	run amp-run "$2.amp"
	assert_success
	run --separate-stderr amp-run --model "$MODELS/tiny-mlp.yaml" --scales "$TINY_SCALES" "$2.amp"
	assert_failure 1
	assert_equal "$output" ""
	assert_regex "$stderr" "$3"
}

@test "run --model --scales names a parameter whose fp8 scale the stage changed" {
	caught_by_model 's/^\(- {name: w_up, role: param, .* scale: \)-\?[0-9]*}$/\19}/' scaled \
		"^amp-run: .*tiny-mlp.yaml:[0-9]+:[0-9]+: tensor 'w_up': the stage's fp8 scale is 9, the scales file's \\(or the model's\\) -?[0-9]+$"
}

@test "run --model names a layernorm whose eps the stage changed" {
	caught_by_model 's/^\(- {step: [0-9]*, compute: layernorm, .*\), eps: [0-9.e+-]*}$/\1, eps: 0.5}/' eps \
		"^amp-run: .*tiny-mlp.yaml:[0-9]+:[0-9]+: op 'ln': the stage's layernorm step [0-9]+ has eps 0.5, the model 1e-06$"
}
