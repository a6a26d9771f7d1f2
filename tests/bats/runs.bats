#!/usr/bin/env bats
# amp-run over several runs (--prefill, --steps) and its files:
# --save DIR keeps every run's outputs (DIR/prefill.<q>/, DIR/step.<s>/),
# --data DIR feeds each prefill run its part of the decode's batch, and a
# stacked parameter's .npy is [count, ...] with count 1 too
# (formats/model.md). tests/models/tiny-lm2-prefill.yaml is one sequence,
# run once per sequence of tiny-lm2-decode.yaml's batch of 2.

bats_require_minimum_version 1.5.0
load common

PRE2=$ROOT/tests/models/tiny-lm2-prefill.yaml
DEC2=$ROOT/tests/models/tiny-lm2-decode.yaml

# npy_i32 FILE SHAPE V...: a version 1.0 '<i4' .npy of shape SHAPE (a
# Python tuple) holding V (0 to 65535); npy_zero DESCR SHAPE BYTES FILE:
# one of BYTES zero bytes. Preambles padded to a multiple of 64 as
# np.save does.
npy_head() {
	local h="{'descr': '$1', 'fortran_order': False, 'shape': $2, }" len
	len=$(( (10 + ${#h} + 1 + 63) / 64 * 64 - 10 ))
	while [ ${#h} -lt $((len - 1)) ]; do h="$h "; done
	printf '\223NUMPY\001\000'
	printf "\\$(printf %03o $((len & 255)))\\$(printf %03o $((len >> 8)))"
	printf '%s\n' "$h"
}
npy_i32() {
	local f=$1 shape=$2 v
	shift 2
	{
		npy_head '<i4' "$shape"
		for v in "$@"; do
			printf "\\$(printf %03o $((v & 255)))\\$(printf %03o $(((v >> 8) & 255)))\\000\\000"
		done
	} > "$f"
}
npy_zero() {
	{ npy_head "$1" "$2"; head -c "$3" /dev/zero; } > "$4"
}

# differ A B: the two files are not the same bytes.
differ() {
	run cmp -s "$1" "$2"
	assert_failure 1
}

@test "runs: --save with --prefill and --steps keeps every run's outputs and references, each in its run's directory" {
	program "$PRE2" pre.amp
	program "$DEC2" dec.amp
	mkdir out
	run --separate-stderr amp-run dec.amp --prefill pre.amp --steps 2 --save out
	assert_success
	run find out -type f
	assert_equal "$(sort <<< "$output")" "out/prefill.0/logits.npy
out/prefill.0/logits.ref.npy
out/prefill.1/logits.npy
out/prefill.1/logits.ref.npy
out/step.0/logits.npy
out/step.0/logits.ref.npy
out/step.1/logits.npy
out/step.1/logits.ref.npy"
	# each its own program's shape: the prefill's one sequence, the decode's two
	local f
	for f in out/prefill.*/logits*.npy; do
		run grep -c "'shape': (1, 1, 512), }" "$f"
		assert_output 1
	done
	for f in out/step.*/logits*.npy; do
		run grep -c "'shape': (2, 1, 512), }" "$f"
		assert_output 1
	done
	# two prompts, two steps: four different results
	differ out/prefill.0/logits.npy out/prefill.1/logits.npy
	differ out/step.0/logits.npy out/step.1/logits.npy
	differ out/step.1/logits.npy out/step.1/logits.ref.npy
}

@test "runs: --steps saves run s in DIR/step.<s>, the first as a single run saves it into DIR" {
	program "$DEC2" dec.amp
	mkdir one two three
	amp-run dec.amp --save one > /dev/null
	run ls -A one
	assert_output "logits.npy
logits.ref.npy"
	amp-run dec.amp --steps 2 --save two > /dev/null
	amp-run dec.amp --steps 3 --save three > /dev/null
	run ls -A three
	assert_output "step.0
step.1
step.2"
	cmp one/logits.npy two/step.0/logits.npy
	cmp one/logits.ref.npy two/step.0/logits.ref.npy
	cmp two/step.1/logits.npy three/step.1/logits.npy
	differ two/step.0/logits.npy two/step.1/logits.npy
}

@test "runs: --save with several runs into a missing directory fails with status 1 naming the run's directory" {
	program "$DEC2" dec.amp
	run --separate-stderr amp-run dec.amp --steps 2 --save nodir
	assert_failure 1
	assert_equal "$stderr" "amp-run: cannot create 'nodir/step.0': No such file or directory"
	assert [ ! -e nodir ]
}

@test "runs: --data feeds each prefill run its sequence's prompt from the decode's whole batch" {
	program "$PRE2" pre.amp
	program "$DEC2" dec.amp
	mkdir same other gen sgen ssame sother
	npy_i32 same/tok.npy '(2, 8, 1)' 3 1 4 1 5 9 2 6 3 1 4 1 5 9 2 6
	npy_i32 other/tok.npy '(2, 8, 1)' 3 1 4 1 5 9 2 6 2 7 1 8 2 8 1 8
	amp-run dec.amp --prefill pre.amp --save sgen > /dev/null
	run --separate-stderr amp-run dec.amp --prefill pre.amp --data same --save ssame
	assert_success
	cosines_at_least 0.99
	amp-run dec.amp --prefill pre.amp --data other --save sother > /dev/null
	# one prompt for both sequences: both prefill runs give the same logits
	cmp ssame/prefill.0/logits.npy ssame/prefill.1/logits.npy
	cmp ssame/prefill.0/logits.ref.npy ssame/prefill.1/logits.ref.npy
	# another second prompt changes the second run alone; made prompts differ from both
	cmp ssame/prefill.0/logits.npy sother/prefill.0/logits.npy
	differ ssame/prefill.1/logits.npy sother/prefill.1/logits.npy
	differ sgen/prefill.0/logits.npy ssame/prefill.0/logits.npy
	differ sgen/prefill.1/logits.npy sother/prefill.1/logits.npy
}

@test "runs: --data refuses a prefill input of one run's shape, or of floats, naming the file, the program and the input" {
	program "$PRE2" pre.amp
	program "$DEC2" dec.amp
	mkdir one floats
	npy_i32 one/tok.npy '(1, 8, 1)' 3 1 4 1 5 9 2 6
	run --separate-stderr amp-run dec.amp --prefill pre.amp --data one
	assert_failure 1
	assert_equal "$output" ""
	assert_equal "$stderr" "amp-run: 'one/tok.npy': shape does not match input 'tok' of 'pre.amp': it runs once per part of the decode's batch (2 parts), so its .npy holds every part's, [2, 8, 1]"
	npy_zero '<f4' '(2, 8, 1)' 64 floats/tok.npy
	run --separate-stderr amp-run dec.amp --prefill pre.amp --data floats
	assert_failure 1
	assert_equal "$output" ""
	assert_equal "$stderr" "amp-run: 'floats/tok.npy': tensor 'tok' is int32 (token ids or positions): its .npy must hold int32 ('<i4'), not floats"
}

@test "runs: a stacked parameter of count 1 reads [1, ...] and one instance's shape alike, and refuses [2, ...]" {
	sed 's/^    count: 2$/    count: 1/' "$PRE2" > one.yaml
	run grep -c '^    count: 1$' one.yaml
	assert_output 1
	program one.yaml one.amp
	mkdir stacked flat two gen sstacked sflat
	npy_zero '<f4' '(1, 64, 64)' $((64 * 64 * 4)) stacked/wq.npy
	npy_zero '<f4' '(64, 64)' $((64 * 64 * 4)) flat/wq.npy
	npy_zero '<f4' '(2, 64, 64)' $((2 * 64 * 64 * 4)) two/wq.npy
	run --separate-stderr amp-run one.amp --data stacked --save sstacked
	assert_success
	cosines_at_least 0.99
	amp-run one.amp --data flat --save sflat > /dev/null
	amp-run one.amp --save gen > /dev/null
	cmp sstacked/logits.npy sflat/logits.npy
	differ gen/logits.npy sstacked/logits.npy
	run --separate-stderr amp-run one.amp --data two
	assert_failure 1
	assert_equal "$output" ""
	assert_equal "$stderr" "amp-run: 'two/wq.npy': shape does not match tensor 'wq' of the model"
}
