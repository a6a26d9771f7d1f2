#!/usr/bin/env bats
# amp-run: program -> execution on the machine model, the byte-exact
# movement check after every phase and the FP32 comparison of each output
# (docs/machine.md §8). The command-line contract, calibration, tiny-mlp and
# siglip-mlp passing both checks, faults injected into a grouped stage,
# --data and --save, and malformed inputs (tests/bad/run-*, program-*).

load common
load stages
bats_require_minimum_version 1.5.0

# pipeline MODEL OUT [SCALES [PLAN_FLAG...]]: MODEL planned (with SCALES
# and the flags), composed, expanded, exchanged and grouped (with
# $GROUP_FLAGS) into OUT.
pipeline() {
	local scales=()
	[ -z "${3:-}" ] || scales=(--scales "$3")
	amp-plan "${scales[@]}" "${@:4}" "$1" -o "$2.plan" &&
		amp-compose "$2.plan" -o "$2.composed" &&
		amp-expand "$2.composed" -o "$2.expanded" &&
		amp-exchange "$2.expanded" -o "$2.exchange" &&
		amp-group ${GROUP_FLAGS:-} "$2.exchange" -o "$2" || return 1
	rm -f "$2.plan" "$2.composed" "$2.expanded" "$2.exchange"
	[ -s "$2" ]
}

# Made once per file: tiny-mlp's calibrated scales, grouped stage (the
# capacity baseline, weights forwarded) and program; siglip-mlp's calibrated program (its
# pipeline and run take ~15 s, so not under the sanitizers).
setup_file() {
	cd "$BATS_FILE_TMPDIR" || return 1
	export TINY_SCALES=$BATS_FILE_TMPDIR/tiny-scales.yaml TINY=$BATS_FILE_TMPDIR/tiny.yaml
	export TINY_PROG=$BATS_FILE_TMPDIR/tiny.amp SIGLIP_PROG=$BATS_FILE_TMPDIR/siglip.amp
	amp-run --calibrate "$MODELS/tiny-mlp.yaml" -o "$TINY_SCALES"
	# the capacity baseline with forwarded weights: the fault cases below
	# edit its direct moves and its forwards
	GROUP_FLAGS='--weights forward' pipeline "$MODELS/tiny-mlp.yaml" "$TINY" "$TINY_SCALES" --objective capacity
	# the model embedded: the run is checked against it (amp-emit refuses
	# a program without --model or --no-model); TINY_BARE_PROG has none
	amp-emit --model "$MODELS/tiny-mlp.yaml" --scales "$TINY_SCALES" "$TINY" -o "$TINY_PROG"
	export TINY_BARE_PROG=$BATS_FILE_TMPDIR/tiny-bare.amp
	amp-emit --no-model "$TINY" -o "$TINY_BARE_PROG"
	if [ -z "${AMP_SAN:-}" ]; then
		amp-run --calibrate "$MODELS/siglip-mlp.yaml" -o siglip-scales.yaml
		pipeline "$MODELS/siglip-mlp.yaml" siglip.yaml siglip-scales.yaml
		# the machine's own limits; the model embedded, so its reference is the model's
		amp-emit --model "$MODELS/siglip-mlp.yaml" --scales siglip-scales.yaml siglip.yaml -o "$SIGLIP_PROG"
	fi
}

# cosine OUTPUT TENSOR / max_abs OUTPUT TENSOR: the figures amp-run printed
# for TENSOR.
cosine() {
	[[ "$1" =~ output\ $2:\ cosine\ ([-0-9.]+), ]] || return 1
	echo "${BASH_REMATCH[1]}"
}
max_abs() {
	[[ "$1" =~ output\ $2:\ cosine\ [-0-9.]+,\ max\ abs\ error\ ([-0-9.e+]+)\  ]] || return 1
	echo "${BASH_REMATCH[1]}"
}

# at_least X Y: X >= Y as numbers.
at_least() {
	awk -v x="$1" -v y="$2" 'BEGIN { exit !(x + 0 >= y + 0) }' ||
		fail "expected $1 >= $2"
}

# no_model_warning_only: amp-run's stderr is empty, or only its warning
# that the program carries no model (amp-emit --no-model), as it says on
# every such run.
no_model_warning_only() {
	[ -z "$stderr" ] && return 0
	assert_equal "${#stderr_lines[@]}" 1
	assert_regex "$stderr" "^amp-run: warning: '[^']*' carries no model \\(amp-emit --no-model\\) and none was given \\(--model\\): movement and arithmetic are checked, not that the stage computes the model$"
}

# passes PROGRAM [OPTION...]: amp-run exits 0, reports the movement
# byte-exact and output z's cosine at least 0.99; leaves $output.
passes() {
	local prog=$1 c
	shift
	run --separate-stderr amp-run "$@" "$prog"
	assert_success
	no_model_warning_only
	assert_line --index 0 --regexp '^movement: byte-exact after every phase \([0-9]+ phases\)$'
	assert_line --regexp '^output z: cosine [0-9.]+, max abs error [0-9.e+-]+ \(against FP32\)$'
	c=$(cosine "$output" z) || fail "no cosine for z in: $output"
	at_least "$c" 0.99
}

# npy DESCR SHAPE DATA_BYTES FILE: a version 1.0 .npy of DATA_BYTES zero
# bytes, its preamble padded to a multiple of 64 as np.save does.
npy() {
	local h="{'descr': '$1', 'fortran_order': False, 'shape': $2, }" len
	len=$(( (10 + ${#h} + 1 + 63) / 64 * 64 - 10 ))
	while [ ${#h} -lt $((len - 1)) ]; do h="$h "; done
	{
		printf '\223NUMPY\001\000'
		printf "\\$(printf %03o $((len & 255)))\\$(printf %03o $((len >> 8)))"
		printf '%s\n' "$h"
		head -c "$3" /dev/zero
	} > "$4"
}

# edited ORIGINAL EDITED: the edit changed the stage (so the test tests it).
edited() {
	run cmp -s "$1" "$2"
	assert_failure 1
	run grep -c '^- {step: [0-9]*, kind: ' "$2"
	assert [ "$output" -ge 10 ]
}

# refuses STAGE: amp-emit still emits the edited STAGE, and amp-run exits 1
# on the program with one message naming a tile and a phase, and no result.
refuses() {
	run amp-emit --model "$MODELS/tiny-mlp.yaml" --scales "$TINY_SCALES" "$1" -o faulty.amp
	assert_success
	run --separate-stderr amp-run faulty.amp
	assert_failure 1
	assert_equal "$output" ""
	assert_equal "${#stderr_lines[@]}" 1
	assert_regex "$stderr" '^amp-run: tile [0-9]+, phase [0-9]+: '
}

# names_byte PHASE TENSOR FOUND: the message names PHASE, TENSOR and the
# wrong byte, expected and found (FOUND: a regex for the found byte).
names_byte() {
	assert_regex "$stderr" "^amp-run: tile [0-9]+, phase $1: "
	[[ "$stderr" == *"tensor '$2'"* ]] || fail "expected tensor '$2' in: $stderr"
	assert_regex "$stderr" "offset [0-9]+: expected 0x[0-9a-f]{2}, found $3\$"
}

# ---- A. command-line contract ----

@test "run --help prints usage, the options and exit statuses to stdout and exits 0" {
	run --separate-stderr amp-run --help
	assert_success
	assert_line --index 0 --regexp '^Usage: amp-run .*PROGRAM'
	for opt in --data --seed --save --min-cosine --calibrate --machine --output --help --version; do
		assert_output --partial -- "$opt"
	done
	assert_output --partial 'Exit status: 0 both checks pass, 1 bad input, a wrong byte, an output'
	assert_output --partial '2 usage error'
	assert_equal "$stderr" ""
}

@test "run --version prints the tool name and version" {
	run --separate-stderr amp-run --version
	assert_success
	assert_output --regexp '^amp-run \(amp\) [0-9]+\.[0-9]+\.[0-9]+$'
	assert_equal "$stderr" ""
}

@test "run rejects an unknown option with usage status 2" {
	run --separate-stderr amp-run --bogus "$TINY_PROG"
	assert_failure 2
	assert_equal "$output" ""
	assert_regex "$stderr" "^amp-run: .*'--bogus'"
	assert_regex "$stderr" "Try 'amp-run --help'"
}

@test "run rejects two programs with usage status 2" {
	run --separate-stderr amp-run "$TINY_PROG" "$TINY_PROG"
	assert_failure 2
	assert_equal "$output" ""
	assert_regex "$stderr" "Try 'amp-run --help'"
}

@test "run reads the program from stdin or '-' when no file is named" {
	passes - < "$TINY_BARE_PROG"
	local dash=$output
	run --separate-stderr amp-run < "$TINY_BARE_PROG"
	assert_success
	assert_equal "$output" "$dash"
	passes "$TINY_BARE_PROG"
	assert_equal "$output" "$dash"
	# with the model embedded, the reference line names the input as given
	passes - < "$TINY_PROG"
	assert_line --index 1 "reference: FP32 from the model's ops (-(MODEL))"
	run --separate-stderr amp-run < "$TINY_PROG"
	assert_success
	assert_line --index 1 "reference: FP32 from the model's ops (<stdin>(MODEL))"
}

@test "run refuses a grouped stage instead of a program with status 1 naming it" {
	run --separate-stderr amp-run "$TINY"
	assert_failure 1
	assert_equal "$output" ""
	assert_regex "$stderr" "^amp-run: '.*tiny\.yaml': not a program"
	run --separate-stderr amp-run < "$TINY"
	assert_failure 1
	assert_equal "$output" ""
	assert_regex "$stderr" "^amp-run: '<stdin>': not a program"
}

@test "run reports a missing program file with status 1 naming it" {
	run --separate-stderr amp-run nosuch.amp
	assert_failure 1
	assert_equal "$output" ""
	assert_equal "$stderr" "amp-run: cannot open 'nosuch.amp': No such file or directory"
}

@test "run --calibrate without -o is a usage error" {
	mkdir work && cd work
	run --separate-stderr amp-run --calibrate "$MODELS/tiny-mlp.yaml"
	assert_failure 2
	assert_equal "$output" ""
	assert_regex "$stderr" '^amp-run: .*-o'
	assert_regex "$stderr" "Try 'amp-run --help'"
	run ls -A
	assert_output ""
}

@test "run --calibrate with a program too is a usage error" {
	run --separate-stderr amp-run --calibrate "$MODELS/tiny-mlp.yaml" -o s.yaml "$TINY_PROG"
	assert_failure 2
	assert_regex "$stderr" "^amp-run: .*tiny\.amp"
	assert_regex "$stderr" "Try 'amp-run --help'"
	assert [ ! -e s.yaml ]
}

@test "run rejects a --seed that is not a non-negative integer with usage status 2" {
	for v in -1 x 1x 1.5 99999999999999999999999 ''; do
		run --separate-stderr amp-run --seed "$v" "$TINY_PROG"
		assert_failure 2
		assert_equal "$output" ""
		assert_regex "$stderr" "^amp-run: --seed .*'$v'"
		assert_regex "$stderr" "Try 'amp-run --help'"
	done
	run --separate-stderr amp-run "$TINY_PROG" --seed
	assert_failure 2
	assert_regex "$stderr" "^amp-run: .*--seed"
}

@test "run rejects a --min-cosine outside -1..1 or not a number with usage status 2" {
	for v in 2 -1.5 x 0.5x nan ''; do
		run --separate-stderr amp-run --min-cosine "$v" "$TINY_PROG"
		assert_failure 2
		assert_equal "$output" ""
		assert_regex "$stderr" "^amp-run: --min-cosine .*'$v'"
		assert_regex "$stderr" "Try 'amp-run --help'"
	done
}

@test "run exits 1 when an output's cosine is below --min-cosine, still reporting it" {
	run --separate-stderr amp-run --min-cosine 1 "$TINY_PROG"
	assert_failure 1
	assert_line --index 0 --regexp '^movement: byte-exact'
	assert_line --regexp '^output z: cosine '
	c=$(cosine "$output" z)
	run awk -v c="$c" 'BEGIN { exit !(c < 1) }'
	assert_success
	assert_regex "$stderr" '^amp-run: .*cosine is below 1 \(--min-cosine\)$'
	passes "$TINY_PROG" --min-cosine -1
	# just below the printed (rounded) cosine
	passes "$TINY_PROG" --min-cosine "$(awk -v c="$c" 'BEGIN { printf "%.6f", c - 0.000001 }')"
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

@test "run passes vit-tiny with its attention split into key blocks: fp32 partials merged by online softmax, byte-exact, cosine at least 0.99" {
	vit_pinned vit-keys $'  attn: {blocks: [4, 4]}\n  map_attn: {blocks: [1, 3]}\n'
	run grep -c '^- {step: [0-9]*, compute: merge, ' vit-keys.grouped
	assert_output 2
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

# ---- C. faults injected into tiny-mlp's grouped stage ----

@test "run names tile, phase and the destination when a receive address is shifted by 32 past its end" {
	s=$(step_of "$TINY" mlp_up a)
	assert [ -n "$s" ]
	awk -v s="$s" '!done && $0 ~ "^- \\{step: " s ", kind: send, " {
		match($0, /dst: \[[0-9]+, [0-9]+\]/)
		split(substr($0, RSTART, RLENGTH), f, /[][, ]+/)
		$0 = substr($0, 1, RSTART - 1) "dst: [" f[2] ", " f[3] + 32 "]" substr($0, RSTART + RLENGTH)
		done = 1
	} 1' "$TINY" > shifted.yaml
	edited "$TINY" shifted.yaml
	refuses shifted.yaml
	# the stray-write check sees it first: the shifted receive leaves its destination
	assert_regex "$stderr" "^amp-run: tile [0-9]+, phase $(phase_of "$TINY" "$s"): a receive writes bytes [0-9]+\\.\\.[0-9]+ outside the destination '$(dst_tensor "$TINY" "$s")@[^']+' of its step $s, into "
}

@test "run names tile and phase when a send is dropped" {
	s=$(step_of "$TINY" mlp_down a)
	assert [ -n "$s" ]
	awk -v s="$s" '!done && $0 ~ "^- \\{step: " s ", kind: send, " { done = 1; next } 1' "$TINY" > dropped.yaml
	edited "$TINY" dropped.yaml
	refuses dropped.yaml
	names_byte "$(phase_of "$TINY" "$s")" "$(dst_tensor "$TINY" "$s")" 0xa5
}

@test "run names tile and phase when a receiver is removed from a multicast" {
	awk '!done && / kind: send, / && match($0, /recv: \[[0-9]+,/) {
		n = substr($0, RSTART + 7, RLENGTH - 8) + 0
		if (n > 1) {
			$0 = substr($0, 1, RSTART - 1) "recv: [" n - 1 "," substr($0, RSTART + RLENGTH)
			done = 1
			s = $0; sub(/^- \{step: /, "", s); sub(/,.*/, "", s); print s > "step.txt"
		}
	} 1' "$TINY" > fewer.yaml
	edited "$TINY" fewer.yaml
	s=$(cat step.txt)
	refuses fewer.yaml
	names_byte "$(phase_of "$TINY" "$s")" "$(dst_tensor "$TINY" "$s")" 0xa5
}

# emit_refuses STAGE REGEX: amp-emit fails with status 1 and one line
# matching REGEX, and writes no program.
emit_refuses() {
	run --separate-stderr amp-emit --no-model "$1" -o faulty.amp
	assert_failure 1
	assert_equal "${#stderr_lines[@]}" 1
	assert_regex "$stderr" "$2"
	assert [ ! -e faulty.amp ]
}

@test "emit refuses a stage whose forward is moved before the delivery it reads, naming phase and tile" {
	# a delivery (one receiver) followed by the forward that reads its
	# destination, swapped
	awk '
	function at(s, k) {
		if (!match(s, k ": \\[-?[0-9]+, -?[0-9]+\\]")) return ""
		return substr(s, RSTART, RLENGTH)
	}
	{ line[NR] = $0 }
	END {
		for (i = 1; i < NR; i++) {
			a = line[i]; b = line[i + 1]; da = at(a, "dst"); sb = at(b, "src")
			sub(/^dst/, "", da); sub(/^src/, "", sb)
			if (a ~ / kind: send, .* recv: \[1, 0\]/ && b ~ / kind: send, / && da == sb) {
				line[i] = b; line[i + 1] = a
				s = a; sub(/^- \{step: /, "", s); sub(/,.*/, "", s); print s > "step.txt"
				break
			}
		}
		for (i = 1; i <= NR; i++) print line[i]
	}' "$TINY" > reordered.yaml
	edited "$TINY" reordered.yaml
	s=$(cat step.txt)
	emit_refuses reordered.yaml "^amp-emit: phase $(phase_of "$TINY" "$s") \\(.*\\), tile [0-9]+: bytes [0-9]+\\.\\.[0-9]+ are read before the transfer that writes them in this phase"
}

@test "emit refuses a send longer than max_transfer_bytes, naming tile, phase and bytes" {
	awk '!done && / kind: send, len: [0-9]+, / { sub(/ len: [0-9]+,/, " len: 16593,"); done = 1 } { print }' \
		"$TINY" > long.yaml
	edited "$TINY" long.yaml
	emit_refuses long.yaml "^amp-emit: tile [0-9]+, phase [0-9]+ \\(step [0-9]+, op [a-z_]+\\): a send of 16593 bytes, over max_transfer_bytes \\(16592\\)$"
}

@test "run names tile, phase, bytes and the placement hit when a transfer also writes into another tensor" {
	# the last send, duplicated with its destination address set to 0: its
	# destination still gets every byte, so only the stray write is wrong
	awk '/ kind: send, / { last = NR } { line[NR] = $0 }
	END {
		for (i = 1; i <= NR; i++) {
			print line[i]
			if (i == last) {
				d = line[i]; match(d, /dst: \[[0-9]+, [0-9]+\]/)
				t = substr(d, RSTART, RLENGTH); sub(/, [0-9]+\]$/, ", 0]", t)
				print substr(d, 1, RSTART - 1) t substr(d, RSTART + RLENGTH)
			}
		}
	}' "$TINY" > stray.yaml
	edited "$TINY" stray.yaml
	run amp-emit --model "$MODELS/tiny-mlp.yaml" --scales "$TINY_SCALES" stray.yaml -o faulty.amp
	assert_success
	run --separate-stderr amp-run faulty.amp
	assert_failure 1
	assert_equal "$output" ""
	assert_equal "${#stderr_lines[@]}" 1
	assert_regex "$stderr" "^amp-run: tile [0-9]+, phase [0-9]+: a receive writes bytes 0\\.\\.[0-9]+ outside the destination '[^']+' of its step [0-9]+, into (placement '[^']+' \\((live|dead) at this step\\)|memory no placement owns)$"
}

@test "run names tile and phase when padding is left unwritten" {
	awk '!done && / kind: zero, / {
		done = 1
		s = $0; sub(/^- \{step: /, "", s); sub(/,.*/, "", s); print s > "step.txt"
		next
	} 1' "$TINY" > unpadded.yaml
	edited "$TINY" unpadded.yaml
	s=$(cat step.txt)
	refuses unpadded.yaml
	names_byte "$(phase_of "$TINY" "$s")" "$(dst_tensor "$TINY" "$s")" 0xa5
	assert_regex "$stderr" 'expected 0x00, found 0xa5$'
}

# ---- D. data ----

@test "run --save writes each output and its FP32 reference as .npy" {
	mkdir out
	passes "$TINY_PROG" --save out
	run ls -A out
	assert_output "z.npy
z.ref.npy"
	for f in z.npy z.ref.npy; do
		run od -An -c -N6 "out/$f"
		assert_output --regexp '^ +223 +N +U +M +P +Y$'
		run grep -c "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 37, 80), }" "out/$f"
		assert_output 1
		run stat -c %s "out/$f"
		assert_output $((128 + 2 * 37 * 80 * 4))
	done
	# the machine's fp8 result is not the FP32 reference
	run cmp -s out/z.npy out/z.ref.npy
	assert_failure 1
}

@test "run --save into a missing directory fails with status 1 naming the file" {
	run --separate-stderr amp-run --save nodir "$TINY_PROG"
	assert_failure 1
	assert_regex "$stderr" "^amp-run: cannot create 'nodir/z\.npy'"
	assert [ ! -e nodir ]
}

@test "run --data reads an input from DIR/<tensor>.npy instead of generating it" {
	passes "$TINY_PROG"
	local generated
	generated=$(cosine "$output" z)
	mkdir saved data
	passes "$TINY_PROG" --save saved
	cp saved/z.npy data/x.npy
	passes "$TINY_PROG" --data data
	[ "$(cosine "$output" z)" != "$generated" ] || fail "--data data/x.npy gives the generated x's cosine $generated"
	# all-zero x, built by hand
	mkdir zero
	npy '<f4' '(2, 37, 80)' $((2 * 37 * 80 * 4)) zero/x.npy
	passes "$TINY_PROG" --data zero
	[ "$(cosine "$output" z)" != "$generated" ] || fail "--data zero/x.npy gives the generated x's cosine $generated"
}

@test "run --data rejects an .npy with a bad header naming the file" {
	mkdir data
	cp "$BAD/run-bad-header.npy" data/x.npy
	run --separate-stderr amp-run --data data "$TINY_PROG"
	assert_failure 1
	assert_equal "$output" ""
	assert_regex "$stderr" "^amp-run: 'data/x\.npy': .*header"
}

@test "run --data rejects an .npy of the wrong shape naming the file and the tensor" {
	mkdir data
	npy '<f4' '(2, 37, 81)' $((2 * 37 * 81 * 4)) data/x.npy
	run --separate-stderr amp-run --data data "$TINY_PROG"
	assert_failure 1
	assert_equal "$output" ""
	assert_regex "$stderr" "^amp-run: 'data/x\.npy': .*shape"
	assert_regex "$stderr" "tensor 'x'"
}

@test "run --data rejects an .npy of bytes, not floats, naming the file once and its dtype" {
	mkdir data
	npy '|u1' '(2, 37, 80)' $((2 * 37 * 80)) data/x.npy
	run --separate-stderr amp-run --data data "$TINY_PROG"
	assert_failure 1
	assert_equal "$output" ""
	assert_regex "$stderr" "^amp-run: 'data/x\.npy': "
	assert_regex "$stderr" "tensor 'x'"
	# the reader's reason survives: it names the dtype it found
	assert_regex "$stderr" "'\\|u1'"
	[[ "${stderr#*data/x.npy}" != *data/x.npy* ]] || fail "file named twice: $stderr"
}

@test "run --data rejects an .npy whose data is short naming the file" {
	mkdir data
	npy '<f4' '(2, 37, 80)' $((2 * 37 * 80 * 4 - 4)) data/x.npy
	run --separate-stderr amp-run --data data "$TINY_PROG"
	assert_failure 1
	assert_equal "$output" ""
	assert_regex "$stderr" "^amp-run: 'data/x\.npy': "
}

# ---- E. malformed programs ----

@test "run rejects a program whose TABLE section is missing, naming the file" {
	cp "$TINY_PROG" p.amp
	n=$(field p.amp 12 4)
	assert [ "$n" -ge 3 ]
	for ((i = 0; i < n; i++)); do
		[ "$(field p.amp $((16 + 24 * i)) 4)" != 3 ] || break
	done
	assert [ "$i" -lt "$n" ]
	printf '\0\0\0\0' | dd of=p.amp bs=1 seek=$((16 + 24 * i)) conv=notrunc status=none
	run cmp -s "$TINY_PROG" p.amp
	assert_failure 1
	run --separate-stderr amp-run p.amp
	assert_failure 1
	assert_equal "$output" ""
	assert_equal "$stderr" "amp-run: 'p.amp': missing section TABLE"
}

@test "run rejects a program cut after its section table, naming the file" {
	n=$(field "$TINY_PROG" 12 4)
	head -c $((16 + 24 * n)) "$TINY_PROG" > cut.amp
	run --separate-stderr amp-run cut.amp
	assert_failure 1
	assert_equal "$output" ""
	assert_regex "$stderr" "^amp-run: 'cut\.amp': "
}

@test "run rejects every malformed program in tests/bad with status 1 naming the file" {
	local n=0
	for f in "$BAD"/program-*.amp; do
		run --separate-stderr amp-run "$f"
		assert_failure 1
		assert_equal "$output" ""
		assert_equal "${#stderr_lines[@]}" 1
		[[ "$stderr" == "amp-run: "*"$(basename "$f")"* ]] || fail "expected $(basename "$f") in: $stderr"
		n=$((n + 1))
	done
	assert [ "$n" -ge 5 ]
}
