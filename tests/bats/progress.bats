#!/usr/bin/env bats
# Progress on a terminal: amp-plan shows the op it plans out of the
# model's ops, amp-run the phase it runs out of the run's phase runs, each
# one line rewritten in place and cleared at the end; with standard error
# not a terminal (a pipe, a file, CI) nothing is printed. The terminal is
# util-linux's script(1), a pseudo-terminal.

bats_require_minimum_version 1.5.0
load common

TINY=$MODELS/tiny-mlp.yaml

# on_tty COMMAND...: runs COMMAND with its standard streams on a
# pseudo-terminal; $output is what the terminal received, carriage
# returns turned into newlines.
on_tty() {
	command -v script >/dev/null || skip "script (util-linux) is not installed"
	local cmd
	printf -v cmd '%q ' "$@"
	run bash -c "script -qec $(printf '%q' "$cmd") /dev/null | tr '\r' '\n'"
}

@test "progress: amp-plan on a terminal shows each op out of the model's, then clears the line" {
	on_tty amp-plan -o p.yaml "$TINY"
	assert_success
	local n first last
	n=$(grep -c '^  - {op: ' "$TINY")
	first=$(sed -n 's/^  - {op: [a-z]*, name: \([^,]*\),.*/\1/p' "$TINY" | head -n 1)
	last=$(sed -n 's/^  - {op: [a-z]*, name: \([^,]*\),.*/\1/p' "$TINY" | tail -n 1)
	assert_line --regexp "^amp-plan: attempt 1: $first \(1/$n\)"
	assert_line --regexp "^amp-plan: attempt 1: $last \($n/$n\)"
	# the last thing on the terminal clears the line: nothing is left over
	[[ $output == *$'\e[K' ]] || fail "the progress line is not cleared: $(tail -c 80 <<<"$output" | od -c | head -3)"
	[ -s p.yaml ]
}

@test "progress: amp-plan and amp-run print nothing when standard error is not a terminal" {
	run --separate-stderr amp-plan -o p.yaml "$TINY"
	assert_success
	assert_equal "$stderr" ""
	amp-compose p.yaml | amp-expand | amp-exchange | amp-group >g.yaml
	amp-emit --model "$TINY" -o prog g.yaml
	run --separate-stderr amp-run prog
	assert_success
	[[ $stderr != *$'\r'* && $stderr != *"phase 0 ("* ]] || fail "progress without a terminal: $stderr"
}

@test "progress: amp-run on a terminal shows each phase run out of the run's, then its report" {
	amp-plan "$TINY" | amp-compose | amp-expand | amp-exchange | amp-group >g.yaml
	amp-emit --model "$TINY" -o prog g.yaml
	local n
	n=$(grep -c '^- {phase: ' g.yaml)
	[ "$n" -ge 2 ] || fail "tiny-mlp has $n phases"
	on_tty amp-run prog
	assert_success
	assert_line --regexp "^amp-run: phase 0 \(1/$n\)"
	assert_line --regexp "^amp-run: phase $((n - 1)) \($n/$n\)"
	# the report starts on a cleared line
	assert_line --regexp $'^\e\\[Kmovement: byte-exact after every phase'
}
