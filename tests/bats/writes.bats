#!/usr/bin/env bats
# Output that cannot be written is an error: every tool checks its writes
# to standard output and standard error when it exits, and a write error
# (here /dev/full, which fails every write with ENOSPC) exits 1 instead of
# losing the output silently.

load common
bats_require_minimum_version 1.5.0

TINY=$MODELS/tiny-mlp.yaml

setup() {
	[ -w /dev/full ] || skip "no /dev/full"
	cd "$BATS_TEST_TMPDIR" || return 1
}

# full_stdout CMD...: CMD with standard output on /dev/full must exit 1
# and say so on standard error.
full_stdout() {
	run --separate-stderr bash -c '"$@" >/dev/full' _ "$@"
	[ "$status" = 1 ] || fail "$*: exit $status with stdout on /dev/full ($stderr)"
	[[ $stderr == *"standard output"* || $stderr == *"cannot write '<stdout>'"* ]] ||
		fail "$*: no word of the lost output: $stderr"
	[[ $stderr == *"No space left on device"* ]] || fail "$*: the cause is not named: $stderr"
}

lowered() {
	amp-plan "$TINY" | amp-compose | amp-expand | amp-exchange | amp-group >g.yaml
	amp-emit --no-model -o prog g.yaml
}

@test "amp-plan --explain with its report on a full device exits 1" {
	full_stdout amp-plan --explain "$TINY"
}

@test "amp-plan, amp-capture and amp-emit --list writing to a full device exit 1" {
	lowered
	full_stdout amp-plan "$TINY"
	full_stdout amp-capture g.yaml
	run --separate-stderr bash -c 'amp-emit --list prog >/dev/full'
	assert_failure 1
	[[ $stderr == *"standard output"* ]] || fail "$stderr"
}

@test "amp-run with its report on a full device exits 1" {
	lowered
	full_stdout amp-run prog
	run amp-run prog
	assert_success
}

@test "amp-emit --report with standard error on a full device exits 1" {
	lowered
	run bash -c 'amp-emit --no-model --report -o prog2 g.yaml 2>/dev/full'
	assert_failure 1
	# without the report the same command succeeds
	run amp-emit --no-model -o prog2 g.yaml
	assert_success
}

@test "--help on a full device exits 1, for every tool" {
	local t
	for t in amp-plan amp-compose amp-expand amp-exchange amp-group amp-emit amp-capture amp-run amp-compare amp-sweep amp-import; do
		full_stdout "$t" --help
	done
}

@test "a usage error keeps its status 2 when standard error is full" {
	run bash -c 'amp-plan --no-such-option 2>/dev/full'
	assert_failure 2
}
