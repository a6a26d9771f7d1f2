# Loaded by the amp-run suites (amp-run*.bats), after common and stages:
# the scales, stages and programs they share, and their helpers.
load fixtures

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

# tiny_stage SCALES OUT: tiny-mlp planned with SCALES as the capacity
# baseline, its weights forwarded (the fault cases edit its direct moves
# and its forwards).
tiny_stage() {
	GROUP_FLAGS='--weights forward' pipeline "$MODELS/tiny-mlp.yaml" "$2" "$1" --objective capacity
}

# siglip_stage SCALES OUT: siglip-mlp planned with SCALES.
siglip_stage() {
	pipeline "$MODELS/siglip-mlp.yaml" "$2" "$1"
}

# run_fixtures NAME...: the files a suite's tests read, made in
# $BATS_FILE_TMPDIR once per run (fixtures.bash); every variable below is
# exported, made or not. tiny: tiny-mlp's calibrated scales (TINY_SCALES),
# grouped stage (TINY: the capacity baseline, weights forwarded) and
# program (TINY_PROG, the model embedded: the run is checked against it;
# amp-emit refuses a program without --model or --no-model), and
# TINY_BARE_PROG, which has none; siglip: siglip-mlp's calibrated
# program (SIGLIP_PROG, the machine's own limits, the model embedded, so
# its reference is the model's), from siglip-scales.yaml and siglip.yaml
# (its pipeline and run take ~15 s, so not under the sanitizers).
run_fixtures() {
	local d=$BATS_FILE_TMPDIR f
	export TINY_SCALES=$d/tiny-scales.yaml TINY=$d/tiny.yaml
	export TINY_PROG=$d/tiny.amp SIGLIP_PROG=$d/siglip.amp
	export TINY_BARE_PROG=$d/tiny-bare.amp
	for f in "$@"; do
		case $f in
		tiny)
			fixture tiny-scales.yaml written amp-run --calibrate "$MODELS/tiny-mlp.yaml" &&
				fixture tiny.yaml tiny_stage "$TINY_SCALES" &&
				fixture tiny.amp written amp-emit --model "$MODELS/tiny-mlp.yaml" --scales "$TINY_SCALES" "$TINY" &&
				fixture tiny-bare.amp written amp-emit --no-model "$TINY" || return 1 ;;
		siglip)
			[ -z "${AMP_SAN:-}" ] || continue
			fixture siglip-scales.yaml written amp-run --calibrate "$MODELS/siglip-mlp.yaml" &&
				fixture siglip.yaml siglip_stage "$d/siglip-scales.yaml" &&
				fixture siglip.amp written amp-emit --model "$MODELS/siglip-mlp.yaml" \
					--scales "$d/siglip-scales.yaml" "$d/siglip.yaml" || return 1 ;;
		*)
			echo "run_fixtures: no fixture '$f'" >&2
			return 1 ;;
		esac
	done
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

# edited ORIGINAL EDITED: the edit changed the stage (so the test tests it).
edited() {
	run cmp -s "$1" "$2"
	assert_failure 1
	run grep -c '^- {step: [0-9]*, kind: ' "$2"
	assert [ "$output" -ge 10 ]
}
