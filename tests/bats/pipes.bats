#!/usr/bin/env bats
# Tools chained in a shell pipeline: when an early stage fails, it prints
# its own error and each later stage says once that its input was empty,
# not a YAML error at 1:1.

load common
bats_require_minimum_version 1.5.0

@test "a failed first stage: every later tool prints one 'empty input' line and exits 1" {
	cd "$BATS_TEST_TMPDIR"
	run --separate-stderr bash -c 'set -o pipefail
		amp-plan no-such-model.yaml | amp-compose | amp-expand | amp-exchange | amp-group |
			amp-emit --no-model -o prog.amp'
	assert_failure 1
	[ ! -e prog.amp ] || fail "a program was written"
	# The first stage's own error, then one line per later tool (order is
	# the scheduler's, so look them up by tool).
	assert_equal "${#stderr_lines[@]}" 6
	[[ $stderr == *"amp-plan: cannot open 'no-such-model.yaml'"* ]] || fail "$stderr"
	local t
	for t in amp-compose amp-expand amp-exchange amp-group amp-emit; do
		[[ $stderr == *"$t: <stdin>: empty input: the previous stage failed?"* ]] || fail "$t: $stderr"
	done
	[[ $stderr != *"YAML document"* ]] || fail "$stderr"
}

@test "amp-capture and amp-run say the same of an empty pipe" {
	run --separate-stderr amp-capture </dev/null
	assert_failure 1
	assert_equal "$stderr" "amp-capture: <stdin>: empty input: the previous stage failed?"
	run --separate-stderr amp-run - </dev/null
	assert_failure 1
	assert_equal "$stderr" "amp-run: <stdin>: empty input: the previous stage failed?"
}

@test "an empty file named on the command line is 'empty input: no YAML document'" {
	: > "$BATS_TEST_TMPDIR/empty.yaml"
	printf '# only a comment\n' > "$BATS_TEST_TMPDIR/comment.yaml"
	run --separate-stderr amp-plan "$BATS_TEST_TMPDIR/empty.yaml"
	assert_failure 1
	assert_equal "$stderr" "amp-plan: $BATS_TEST_TMPDIR/empty.yaml: empty input: no YAML document"
	run --separate-stderr amp-compose "$BATS_TEST_TMPDIR/comment.yaml"
	assert_failure 1
	assert_equal "$stderr" "amp-compose: $BATS_TEST_TMPDIR/comment.yaml: empty input: no YAML document"
}
