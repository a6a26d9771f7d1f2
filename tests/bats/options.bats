#!/usr/bin/env bats
# Options are taken by their whole names only. getopt_long would take any
# unambiguous prefix ("--ou" for "--output"), so a word that a wrapper, a
# make flow or a sweep checks by name could act as another option; every
# tool refuses an abbreviation as a usage error (exit 2) that names the
# option it begins, before reading or writing anything.

load common
bats_require_minimum_version 1.5.0

TINY=$MODELS/tiny-mlp.yaml
TOOLS="amp-plan amp-compose amp-expand amp-exchange amp-group amp-emit amp-capture amp-run amp-compare amp-sweep amp-import"

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

# The option lines of TOOL's --help: the long names, sorted.
help_names() {
	"$1" --help | grep -oE -- '^ {2}(-[a-zA-Z], | {4})--[a-z][a-z0-9+-]*' | grep -oE -- '--[a-z0-9+-]+$' | sort
}

@test "one table per tool: --help and --list-options name the same options, and every tool has the common ones" {
	local t
	for t in $TOOLS; do
		run --separate-stderr "$t" --list-options
		assert_success
		[ -z "$stderr" ] || fail "$t --list-options: $stderr"
		# four tab-separated fields per line: --name, -x or -, value or -, completion or -
		local bad
		bad=$(printf '%s\n' "$output" | awk -F'\t' 'NF != 4 || $1 !~ /^--[a-z][a-z0-9+-]*$/ || $2 !~ /^(-|-[a-zA-Z])$/ ||
			($4 != "-" && $4 != "file" && $4 != "dir" && $4 != "machine" && $4 !~ /^words:/)')
		[ -z "$bad" ] || fail "$t --list-options: malformed: $bad"
		assert_equal "$(printf '%s\n' "$output" | cut -f1 | sort)" "$(help_names "$t")"
		for o in --help --version --list-options; do
			printf '%s\n' "$output" | grep -q -- "^$o	" || fail "$t lacks $o"
		done
	done
	# a value offered for completion is one the tool takes
	run amp-plan --list-options
	local words
	words=$(printf '%s\n' "$output" | awk -F'\t' '$1 == "--objective" { sub(/^words:/, "", $4); print $4 }')
	[ -n "$words" ] || fail "no words for --objective"
	for w in $words; do
		amp-plan --objective "$w" --no-fit-check -o /dev/null "$TINY" || fail "--objective $w refused"
	done
}

@test "the parser: an abbreviation of several options, a value given to a flag, a missing value, clustered short options" {
	run --separate-stderr amp-run --s x
	assert_failure 2
	[[ $stderr == "amp-run: option '--s' is an abbreviation of "*" options; write one whole"* ]] || fail "$stderr"
	run --separate-stderr amp-compose --verbose=yes x
	assert_failure 2
	[[ $stderr == "amp-compose: option '--verbose' takes no value, found '--verbose=yes'"* ]] || fail "$stderr"
	run --separate-stderr amp-plan "$TINY" --output
	assert_failure 2
	[[ $stderr == "amp-plan: option '--output' needs an argument"* ]] || fail "$stderr"
	run --separate-stderr amp-plan -q "$TINY"
	assert_failure 2
	[[ $stderr == "amp-plan: unknown option '-q'"* ]] || fail "$stderr"
	run --separate-stderr amp-plan --explain 3 "$TINY"
	assert_failure 2        # --explain takes its count only as --explain=N: 3 is an operand
	[[ $stderr == *"one model file at most"* ]] || fail "$stderr"
	# -zo FILE: -z, then -o with the next word; -oFILE: the value attached
	amp-plan "$TINY" | amp-compose -zo c.zst
	[ "$(head -c4 c.zst | od -An -tx1 | tr -d ' ')" = 28b52ffd ] || fail "c.zst is not zstd"
	amp-plan "$TINY" | amp-compose -oc.yaml
	cmp <(zstd -dc c.zst) c.yaml
	# the provenance records the options in the order given, operands after
	amp-plan --objective=memory "$TINY" --no-fit-check -o p.yaml
	grep -q 'options: --objective=memory --no-fit-check, ' p.yaml || fail "$(grep -m1 'tool: amp-plan' p.yaml)"
}
