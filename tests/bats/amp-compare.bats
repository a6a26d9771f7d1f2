#!/usr/bin/env bats
# amp-compare: two captures side by side. Every delta is B - A, the phase
# table adds up to each summary, the JSON holds the same figures, and bad
# input is rejected with file:line:col.

load common
bats_require_minimum_version 1.5.0

setup_file() {
	cd "$BATS_FILE_TMPDIR" || return 1
	# two captures of one model that differ: forwarded and direct weights
	amp-plan "$MODELS/siglip-mlp.yaml" | amp-compose | amp-expand | amp-exchange > ex.yaml
	amp-group --weights direct ex.yaml | amp-capture -o a.json
	amp-group --weights forward ex.yaml | amp-capture -o b.json
	amp-plan "$MODELS/tiny-mlp.yaml" | amp-compose | amp-expand | amp-exchange | amp-group |
		amp-capture -o tiny.json
}

setup() {
	cd "$BATS_FILE_TMPDIR" || return 1
}

@test "compare: every summary figure with B - A, ids without a delta" {
	run --separate-stderr amp-compare a.json b.json
	assert_success
	assert_line --index 0 "A: a.json (model siglip-mlp on amp1472)"
	assert_line --index 1 "B: b.json (model siglip-mlp on amp1472)"
	local k x y line
	# the summary's integer figures, the floor's in its place; no ratio
	for k in $(jq -r '.summary | to_entries[] | if .key == "floor" then .value | keys_unsorted[] | select(. != "ratio")
			elif (.key | endswith("_ratio")) then empty else .key end' a.json); do
		x=$(jq ".summary.$k // .summary.floor.$k" a.json) y=$(jq ".summary.$k // .summary.floor.$k" b.json)
		line=$(grep -E "^$k +" <<<"$output") || fail "no row for $k"
		read -r -a f <<<"$line"
		assert_equal "${f[*]:0:3}" "$k $x $y"
		if [[ $k =~ _(tile|phase|step)$ ]]; then
			assert_equal "${f[3]} ${f[4]}" "- -"
		else
			assert_equal "${f[3]}" "$(printf '%+d' $((y - x)))"
		fi
	done
	assert_line --regexp '^total_floor_cycles +[0-9]+ +[0-9]+ '
	refute_line --regexp 'ratio|^floor '
}

@test "compare reads a version 4 capture (no floors) beside a version 5 one, and checks a ratio's form" {
	jq 'del(.summary.exchange_floor_cycles, .summary.exchange_floor_ratio, .summary.floor,
		.summary.microseconds, .summary.throughput, .machine.clock_hz, .machine.clock_source,
		.phases[].floor_cycles, .phases[].floor_tile, .phases[].floor_ratio) | .version = 4' a.json > v4.json
	run --separate-stderr amp-compare v4.json b.json
	assert_success
	# the figures both have, floors not among them
	assert_line --regexp "^total_cycles +$(jq .summary.total_cycles a.json) +$(jq .summary.total_cycles b.json) "
	refute_line --regexp 'floor'
	run --separate-stderr amp-compare --json b.json v4.json
	assert_success
	run jq -c '[.summary[].figure]' <<<"$output"
	assert_output "$(jq -c '[.summary | keys_unsorted[] | select(test("floor") | not)]' v4.json)"
	# a ratio is a number, 0 or more, or null; a floor is an object; v4 has no ratios
	jq '.summary.exchange_floor_ratio = null | .summary.floor.ratio = null' a.json > nulls.json
	run --separate-stderr amp-compare nulls.json b.json
	assert_success
	local bad
	for bad in '.summary.exchange_floor_ratio = "x"' '.summary.floor.ratio = -1' '.summary.floor = 3' \
		'.summary.floor.total_floor_cycles = 1.5' '.version = 4' '.summary.microseconds = -1' \
		'.summary.throughput = 3'; do
		jq "$bad" a.json > bad.json
		run --separate-stderr amp-compare bad.json b.json
		assert_failure 1
		[[ $stderr =~ ^amp-compare:\ bad\.json:[0-9]+:[0-9]+:\ expected ]] || fail "$bad: $stderr"
		assert_equal "$output" ""
	done
}

@test "compare: the op table matches each capture's ops, and an op on one side only shows '-'" {
	run --separate-stderr amp-compare a.json tiny.json
	assert_success
	local op x y
	for op in $(jq -r '.ops[].op' a.json); do
		x=$(jq ".ops[] | select(.op == \"$op\") | .total_cycles" a.json)
		y=$(jq ".ops[] | select(.op == \"$op\") | .total_cycles" tiny.json)
		if [ -n "$y" ]; then
			assert_line --regexp "^$op +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ +$x +$y +$(printf '%+d' $((y - x))) +[-+][0-9.]+%$"
		else
			assert_line --regexp "^$op +[0-9]+ +- +[0-9]+ +- +$x +- +- +-$"
		fi
	done
	# tiny-mlp's layernorm, which siglip-mlp lacks, comes after A's ops
	assert_line --regexp "^ln +- +[0-9]+ +- +[0-9]+ +- +$(jq '.ops[] | select(.op == "ln") | .total_cycles' tiny.json) +- +-$"
}

@test "compare: the phase columns add up to each summary in the total row" {
	run --separate-stderr amp-compare --names direct,forward a.json b.json
	assert_success
	assert_line --regexp '^phase +direct labels +transfers +max_row +cycles +forward labels +transfers +max_row +cycles$'
	local -a f
	local s=(0 0 0 0 0 0) line in=0
	while IFS= read -r line; do
		[[ $line == phase\ * ]] && { in=1; continue; }
		[ "$in" = 1 ] || continue
		read -r -a f <<<"$line"
		if [ "${f[0]}" = total ]; then
			assert_equal "${f[*]:1}" "$(jq -r '.summary | "\(.transfers) \(.max_row_bytes) \(.exchange_cycles)"' a.json) $(jq -r '.summary | "\(.transfers) \(.max_row_bytes) \(.exchange_cycles)"' b.json)"
			assert_equal "${f[*]:1}" "${s[0]} ${s[1]} ${s[2]} ${s[3]} ${s[4]} ${s[5]}"
			break
		fi
		s[0]=$((s[0] + f[2])); [ "${f[3]}" -gt "${s[1]}" ] && s[1]=${f[3]}; s[2]=$((s[2] + f[4]))
		s[3]=$((s[3] + f[6])); [ "${f[7]}" -gt "${s[4]}" ] && s[4]=${f[7]}; s[5]=$((s[5] + f[8]))
	done <<<"$output"
	[ "${f[0]}" = total ] || fail "no total row"
}

@test "compare --json holds the text's figures" {
	run --separate-stderr amp-compare --json -o cmp.json a.json b.json
	assert_success
	assert_equal "$output" ""
	run jq -r '.format, .version, .a.machine, .b.file' cmp.json
	assert_output $'amp-compare\n1\namp1472\nb.json'
	# deltas are b - a; ids have none
	run jq -r '[.summary[] | select(has("delta") and .delta != .b - .a)] | length' cmp.json
	assert_output 0
	run jq -r '[.summary[] | select((.figure | test("_(tile|phase|step)$")) == has("delta"))] | length' cmp.json
	assert_output 0
	run jq -r --slurpfile a a.json --slurpfile b b.json \
		'[.phases[] | select(.a.transfers != $a[0].phases[.id].transfers or .b.cycles != $b[0].phases[.id].cycles)] | length' cmp.json
	assert_output 0
	run jq -r --slurpfile a a.json '[.ops[] | .a.total_cycles] == [$a[0].ops[].total_cycles]' cmp.json
	assert_output true
}

@test "compare rejects what is not a capture, another version, and bad usage" {
	jq '.version = 2' a.json > v2.json
	run --separate-stderr amp-compare a.json v2.json
	assert_failure 1
	[[ $stderr =~ ^amp-compare:\ v2\.json:[0-9]+:[0-9]+:\ unsupported\ capture\ version\ 2 ]] || fail "$stderr"
	assert_equal "$output" ""
	run --separate-stderr amp-compare "$MODELS/tiny-mlp.yaml" a.json
	assert_failure 1
	[[ $stderr == *"tiny-mlp.yaml"*"format"* ]] || fail "$stderr"
	jq 'del(.phases[0].cycles)' a.json > nocycles.json
	run --separate-stderr amp-compare a.json nocycles.json
	assert_failure 1
	[[ $stderr =~ nocycles\.json:[0-9]+:[0-9]+:.*cycles ]] || fail "$stderr"
	run --separate-stderr amp-compare a.json missing.json
	assert_failure 1
	[[ $stderr == *"cannot open 'missing.json'"* ]] || fail "$stderr"
	run --separate-stderr amp-compare a.json
	assert_failure 2
	run --separate-stderr amp-compare - - < a.json
	assert_failure 2
	run --separate-stderr amp-compare --names onlyone a.json b.json
	assert_failure 2
	[[ $stderr == *"--names"* ]] || fail "$stderr"
	run --separate-stderr amp-compare -o out.txt a.json v2.json
	assert_failure 1
	[ ! -e out.txt ] || fail "out.txt written on failure"
}
