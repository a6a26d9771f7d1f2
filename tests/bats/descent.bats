#!/usr/bin/env bats
# The cycles objective's descent (formats/plan.md, "Choosing"): the
# greedy plan's GEMMs re-chosen one at a time, each change built whole
# with the other GEMMs held and judged by the whole plan's modelled cycles.
# Its figures are checked against the public tools: the change written as
# pins, planned, lowered with amp-group's record order and captured.

load common
bats_require_minimum_version 1.5.0

VIT=$ROOT/tests/models/vit-stacked-home.yaml
M18=$ROOT/tests/models/machine-18.yaml

# pins_for PLAN [OP GRID STAGING OUT REDUCE]...: a pins block holding
# every GEMM of PLAN at its choice, each OP given at the one given; the
# model's own pins (the attention's blocks) kept.
pins_for() {
	local plan=$1 over=
	shift
	while [ $# -ge 5 ]; do
		over+="$1|$2|$3|$4|$5;"
		shift 5
	done
	awk -v over="$over" '
	/^- \{op: .* grid: / {
		n = $0; sub(/^- \{op: /, "", n); sub(/,.*/, "", n)
		g = $0; sub(/.* grid: /, "", g); sub(/\].*/, "]", g)
		s = $0; sub(/.* staging: /, "", s); sub(/,.*/, "", s)
		o = $0; sub(/.* out_staging: /, "", o); sub(/,.*/, "", o)
		r = $0; sub(/.* reduce: /, "", r); sub(/,.*/, "", r)
		k = split(over, ch, ";")
		for (i = 1; i <= k; i++) {
			split(ch[i], f, "|")
			if (f[1] == n) { g = f[2]; s = f[3]; o = f[4]; r = f[5] }
		}
		printf "  %s: {grid: %s, staging: %s, out_staging: %s, reduce: %s}\n", n, g, s, o, r
	}' "$plan"
	echo "  attn: {blocks: [1, 2]}"
}

# greedy_of OP: OP's choice in the greedy plan, from amp-plan --explain's
# $output: its table's first candidate (fitting ones rank by the trial's
# cycles, and the greedy plan takes the first), as OP GRID STAGING OUT
# REDUCE for pins_for.
greedy_of() {
	sed -n "/^gemm $1:/,/^\$/p" <<<"$output" | awk -v op="$1" '$1 == "1" || $1 == "1*" {
		r = $8 == "-" ? "gather" : $8
		printf "%s|%s %s %s|%s|%s|%s\n", op, $2, $3, $4, $6, $7, r; exit }'
}

# model_with PINS: the VIT model with its pins block replaced.
model_with() {
	sed '/^pins:/,$d' "$VIT"
	echo "pins:"
	cat "$1"
}

# total MODEL: the whole plan's cycles as the descent judges them.
total() {
	amp-plan --machine "$M18" "$1" | amp-compose | amp-expand | amp-exchange |
		amp-group --schedule record | amp-capture --machine "$M18" | jq .summary.total_cycles
}

@test "plan --explain shows the descent: the greedy plan's cycles, each change tried, the one kept" {
	run --separate-stderr amp-plan --explain=1 --machine "$M18" "$VIT"
	assert_success
	assert_line --regexp '^descent: the greedy plan [0-9]+ cycles, kept [0-9]+ '
	assert_line --regexp '^  embed +\[9, 1, 1\] +auto +direct +direct +- +[0-9]+ +[0-9]+ +yes +yes$'
	local before kept
	before=$(sed -n 's/^descent: the greedy plan \([0-9]*\) cycles, kept \([0-9]*\) .*/\1/p' <<<"$output")
	kept=$(sed -n 's/^descent: the greedy plan \([0-9]*\) cycles, kept \([0-9]*\) .*/\2/p' <<<"$output")
	[ "$kept" -lt "$before" ] || fail "kept $kept, greedy $before"
}

@test "the descent's figures are the whole plan's: each change written as pins lowers to the cycles it shows" {
	amp-plan --machine "$M18" -o kept.plan "$VIT"
	run --separate-stderr amp-plan --explain=1 --machine "$M18" "$VIT"
	assert_success
	local rows n=0 op grid st out red cycles kept_op kept_row
	rows=$(sed -n '/^descent:/,/^$/p' <<<"$output" | grep -E '^  [a-z_.]+ +\[')
	[ -n "$rows" ] || fail "no changes tried: $output"
	# every change is tried on the greedy plan: kept.plan holds the kept
	# change instead, so the others' pins hold the kept op at its greedy
	# choice
	kept_op=$(awk '$NF == "yes" { print $1; exit }' <<<"$rows")
	local -a base=()
	if [ -n "$kept_op" ]; then
		kept_row=$(greedy_of "$kept_op")
		[ -n "$kept_row" ] || fail "no greedy choice of $kept_op"
		IFS='|' read -r -a base <<<"$kept_row"
	fi
	while read -r op g1 g2 g3 _cast st out red _saving cycles _fits kept; do
		grid="$g1 $g2 $g3"
		[ "$red" != - ] || red=gather
		if [ "$kept" = yes ] || [ -z "$kept_op" ]; then
			pins_for kept.plan "$op" "$grid" "$st" "$out" "$red" >pins.txt
		else
			pins_for kept.plan "${base[@]}" "$op" "$grid" "$st" "$out" "$red" >pins.txt
		fi
		model_with pins.txt >m.yaml
		[ "$(total m.yaml)" = "$cycles" ] || fail "$op $grid $st/$out/$red: $(total m.yaml), the descent says $cycles"
		n=$((n + 1))
	done <<<"$rows"
	[ "$n" -ge 2 ] || fail "only $n changes checked"
	# and the plan written is the kept one, at the kept figure
	local kept
	kept=$(sed -n 's/^descent: .*, kept \([0-9]*\) .*/\1/p' <<<"$output")
	pins_for kept.plan >pins.txt
	model_with pins.txt >m.yaml
	[ "$(total m.yaml)" = "$kept" ] || fail "the written plan lowers to $(total m.yaml), kept says $kept"
}

@test "the descent gives the same plan with or without --explain" {
	amp-plan --machine "$M18" -o plain.plan "$VIT"
	amp-plan --explain --machine "$M18" -o explained.plan "$VIT" >/dev/null
	run same_but_provenance plain.plan explained.plan
	assert_success
}

@test "the descent's held ops are not written as pins" {
	run --separate-stderr amp-plan --machine "$M18" "$VIT"
	assert_success
	# the model pins up and down (grid only) and the attention; the
	# descent held every GEMM while it tried embed's change
	assert_line --regexp '^- \{op: embed, .*, pinned: false, '
	assert_line --regexp '^- \{op: qkv, .*, pinned: false, '
	assert_line --regexp '^- \{op: up, .*, pinned: true, '
}

@test "a descent plan runs byte-exact after every phase" {
	amp-plan --machine "$M18" "$VIT" | amp-compose | amp-expand | amp-exchange | amp-group >g.yaml
	run amp-emit --machine "$M18" --model "$VIT" -o prog g.yaml
	assert_success
	run --separate-stderr amp-run --machine "$M18" prog
	assert_success
	assert_line --index 0 --regexp '^movement: byte-exact after every phase \([0-9]+ phases\)$'
}
