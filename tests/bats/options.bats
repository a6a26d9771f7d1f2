#!/usr/bin/env bats
# Options are taken by their whole names only. getopt_long would take any
# unambiguous prefix ("--ou" for "--output"), so a word that a wrapper, a
# make flow or a sweep checks by name could act as another option; every
# tool refuses an abbreviation as a usage error (exit 2) that names the
# option it begins, before reading or writing anything.

load common
bats_require_minimum_version 1.5.0

TINY=$MODELS/tiny-mlp.yaml
TOOLS="amp-plan amp-compose amp-expand amp-exchange amp-group amp-emit amp-capture amp-run amp-compare amp-sweep"

# refused TOOL WORD WHOLE ARGS...: TOOL with WORD (an abbreviation of
# --WHOLE) exits 2 naming both, writes nothing to standard output, and
# creates no file named x
refused() {
	local tool=$1 word=$2 whole=$3
	shift 3
	run --separate-stderr "$tool" "$word" "$@"
	[ "$status" = 2 ] || fail "$tool $word $*: exit $status ($stderr)"
	assert_equal "$output" ""
	[[ $stderr == "$tool: option '${word%%=*}' is an abbreviation; write it whole: '--$whole'"$'\n'"Try '$tool --help'"* ]] ||
		fail "$tool $word: $stderr"
	[ ! -e x ] || fail "$tool $word: x was written"
}

@test "every tool refuses an abbreviated long option, as a separate word or with '='" {
	local t
	for t in $TOOLS; do
		refused "$t" --ou output x "$TINY"
		refused "$t" --outp=x output "$TINY"
		refused "$t" --hel help
		refused "$t" --vers version
	done
	refused amp-plan --mach machine x "$TINY"
	refused amp-plan --expl explain "$TINY"
	refused amp-plan --obj objective cycles "$TINY"
	refused amp-emit --mod model x "$TINY"
	refused amp-run --dat data x "$TINY"
	refused amp-group --weig weights direct "$TINY"
	refused amp-sweep --ran rank total_cycles merge x
}

@test "whole option names still work, as separate words and with '=', before and after the operand" {
	amp-plan --machine "$MACHINES/amp1472.yaml" "$TINY" --output=p1.yaml
	grep -q '^- {tool: amp-plan, version: [^,]*, options: --machine amp1472.yaml, ' p1.yaml ||
		fail "the machine is not recorded by its base name: $(grep -m1 'tool: amp-plan' p1.yaml)"
	amp-plan "$TINY" -o p2.yaml --objective=cycles
	grep -q 'options: --objective=cycles, ' p2.yaml || fail "$(grep -m1 'tool: amp-plan' p2.yaml)"
	amp-compose --output c.yaml p1.yaml
	[ -s c.yaml ]
	run amp-expand --version
	assert_success
	assert_output --regexp '^amp-expand \(amp\) '
	# an operand spelled like an abbreviation after '--' is an operand
	run --separate-stderr amp-compose -- --ou
	assert_failure 1
	[[ $stderr == "amp-compose: cannot open '--ou'"* ]] || fail "$stderr"
}
