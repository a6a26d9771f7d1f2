#!/usr/bin/env bats
# amp-compare: two captures side by side. Every delta is B - A, phases line
# up by label (every shared label pairs its phases), the phase table adds
# up to each summary, the movement classes to its transfers and bytes, the
# per-tile figures follow the tiles files, the JSON and TSV hold the same
# figures, and bad input is rejected with file:line:col.

load common
bats_require_minimum_version 1.5.0

setup_file() {
	cd "$BATS_FILE_TMPDIR" || return 1
	# two captures of one model that differ: forwarded and direct weights
	amp-plan "$MODELS/siglip-mlp.yaml" | amp-compose | amp-expand | amp-exchange > ex.yaml
	amp-group --weights direct ex.yaml | amp-capture --tiles a.tsv -o a.json
	amp-group --weights forward ex.yaml | amp-capture --tiles b.tsv -o b.json
	# the memory objective's plan: more phases (8 against 5), an operand
	# moved alone ahead of its GEMM's phase, and a partial sum A lacks
	amp-plan --objective memory "$MODELS/siglip-mlp.yaml" | amp-compose | amp-expand | amp-exchange | amp-group |
		amp-capture --tiles mem.tsv -o mem.json
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
	# the summary's integer figures, the bound's and the plan floor's in their place; no ratio
	for k in $(jq -r '.summary | to_entries[] | if .key == "bound" or .key == "plan_floor" then .value | keys_unsorted[] | select(. != "ratio")
			elif (.key | endswith("_ratio")) or .key == "microseconds" or .key == "throughput" then empty else .key end' a.json); do
		x=$(jq ".summary.$k // .summary.plan_floor.$k // .summary.bound.$k" a.json)
		y=$(jq ".summary.$k // .summary.plan_floor.$k // .summary.bound.$k" b.json)
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
	assert_line --regexp '^bound_cycles +[0-9]+ +[0-9]+ '
	refute_line --regexp 'ratio|^floor |^bound |^plan_floor '
}

@test "compare reads a version 4 capture (no floors) beside a version 5 one, and checks a ratio's form" {
	jq 'del(.summary.exchange_floor_cycles, .summary.exchange_floor_ratio, .summary.plan_floor, .summary.bound,
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
	assert_output "$(jq -c '[.summary | keys_unsorted[] | select(test("floor|bound") | not)]' v4.json)"
	# a ratio is a number, 0 or more, or null; a floor is an object; v4 has no ratios
	jq '.summary.exchange_floor_ratio = null | .summary.plan_floor.ratio = null' a.json > nulls.json
	run --separate-stderr amp-compare nulls.json b.json
	assert_success
	local bad
	for bad in '.summary.exchange_floor_ratio = "x"' '.summary.plan_floor.ratio = -1' '.summary.plan_floor = 3' '.summary.bound = 3' \
		'.summary.bound.bound_cycles = -2' \
		'.summary.plan_floor.total_floor_cycles = 1.5' '.version = 4' '.summary.microseconds = -1' \
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
	run --separate-stderr amp-compare --names direct,memory a.json mem.json
	assert_success
	assert_line --regexp '^group +status +direct +direct labels +transfers +max_row +cycles +memory +memory labels +transfers +max_row +cycles$'
	local -a f
	local s=(0 0 0 0 0 0) line in=0 rows=0
	while IFS= read -r line; do
		[[ $line == group\ * ]] && { in=1; continue; }
		[ "$in" = 1 ] || continue
		read -r -a f <<<"${line//-/0}"
		if [ "${f[0]}" = total ]; then
			assert_equal "${f[*]:1}" "$(jq -r '.summary | "\(.transfers) \(.max_row_bytes) \(.exchange_cycles)"' a.json) $(jq -r '.summary | "\(.transfers) \(.max_row_bytes) \(.exchange_cycles)"' mem.json)"
			assert_equal "${f[*]:1}" "${s[0]} ${s[1]} ${s[2]} ${s[3]} ${s[4]} ${s[5]}"
			break
		fi
		rows=$((rows + 1))
		assert_equal "${#f[@]}" 12
		s[0]=$((s[0] + f[4])); [ "${f[5]}" -gt "${s[1]}" ] && s[1]=${f[5]}; s[2]=$((s[2] + f[6]))
		s[3]=$((s[3] + f[9])); [ "${f[10]}" -gt "${s[4]}" ] && s[4]=${f[10]}; s[5]=$((s[5] + f[11]))
	done <<<"$output"
	[ "${f[0]}" = total ] || fail "no total row"
	# one row per phase of the side with more, at least
	[ "$rows" -ge "$(jq '.phases | length' mem.json)" ] || fail "$rows rows"
}

@test "compare lines up phases of different counts by label: every shared label pairs its phases" {
	[ "$(jq '.phases | length' a.json)" != "$(jq '.phases | length' mem.json)" ] || fail "the captures have as many phases"
	run --separate-stderr amp-compare --json -o cmp.json a.json mem.json
	assert_success
	# every phase of each side is on exactly one line, in order
	run jq -c '[.phases[] | .a.id // empty]' cmp.json
	assert_output "$(jq -c '[range(.phases | length)]' a.json)"
	run jq -c '[.phases[] | .b.id // empty]' cmp.json
	assert_output "$(jq -c '[range(.phases | length)]' mem.json)"
	# groups never go back
	run jq '[.phases[].group] | . == sort' cmp.json
	assert_output true
	# each label both captures have: all its phases, on both sides, in one group
	local label groups n=0
	for label in $(jq -r '.phases[].labels[]' a.json | sort -u); do
		jq -e --arg l "$label" 'any(.phases[].labels[]; . == $l)' mem.json >/dev/null || continue
		n=$((n + 1))
		groups=$(jq -c --arg l "$label" '[.phases[] | select([.a.labels, .b.labels] | map(. // "" | split("+")) |
			flatten | index($l)) | .group] | unique' cmp.json)
		[[ $groups =~ ^\[[0-9]+\]$ ]] || fail "$label is in groups $groups"
		# and its phase pairs with one that has it, unless regrouped
		run jq -r --arg l "$label" '[.phases[] | select(.a and .b and (.a.labels | split("+") | index($l)))
			| .b.labels | split("+") | index($l) != null] | all' cmp.json
		assert_output true
	done
	[ "$n" -ge 5 ] || fail "only $n shared labels"
	# pairs share a label; 'same' ones have equal labels
	run jq '[.phases[] | select(.a and .b) | (.a.labels | split("+")) as $x | (.b.labels | split("+")) as $y
		| select(($x - ($x - $y)) == [] or (.status == "same") != (($x | sort) == ($y | sort)))] | length' cmp.json
	assert_output 0
	# the partial sum only the memory plan has is added; its other phases regroup
	run jq -r '.phases[] | select(.status == "added") | .b.labels' cmp.json
	assert_output mlp_up.partial
	run jq -r '[.phases[] | select(.status == "regrouped") | .b.labels] | join(" ")' cmp.json
	assert_output "mlp_up.a mlp_down.a"
	run jq -r '[.phases[] | select(.status == "removed")] | length' cmp.json
	assert_output 0
	# the other way round, it is removed
	run --separate-stderr amp-compare mem.json a.json
	assert_success
	assert_line --regexp '^[0-9]+ +removed +2 +mlp_up\.partial +[0-9]+ +[0-9]+ +[0-9]+ +- +- +- +- +-$'
	# a capture against itself: every line the same, one group per phase
	run jq -c '[.phases[] | .status] | unique' <(amp-compare --json mem.json mem.json)
	assert_output '["same"]'
}

@test "compare lines up hand-edited phases: crossing labels share a group, a renamed label is removed and added" {
	jq '.phases[1].labels = ["renamed.out"] | .phases[0].labels |= reverse' a.json > edit.json
	run --separate-stderr amp-compare --json a.json edit.json
	assert_success
	run jq -r '.phases[] | "\(.group) \(.status) \(.a.id // "-") \(.b.id // "-")"' <<<"$output"
	assert_output $'0 same 0 0\n1 removed 1 -\n2 added - 1\n3 same 2 2\n4 same 3 3\n5 same 4 4'
	# B's phases 0 and 2 swapped: their labels cross, so the three first
	# phases of each side are one group
	jq '.phases |= [.[2], .[1], .[0]] + .[3:]' a.json > swap.json
	run --separate-stderr amp-compare --json a.json swap.json
	assert_success
	run jq -c '[.phases[] | .group]' <<<"$output"
	assert_output '[0,0,0,0,0,1,2]'
}

@test "compare: the movement classes add up to each capture's transfers and bytes, added and removed marked" {
	run --separate-stderr amp-compare --json a.json mem.json
	assert_success
	echo "$output" > cls.json
	local side f
	for side in a:a.json b:mem.json; do
		f=${side#*:} side=${side%%:*}
		run jq --slurpfile c "$f" '[.classes[] | .[$s] // empty] | [(map(.sends) | add) == $c[0].summary.transfers,
			(map(.bytes) | add) == $c[0].summary.bytes] | all' --arg s "$side" cls.json
		assert_output true
	done
	# one class's figures: the capture's, summed over phases
	run jq -r --slurpfile c mem.json '.classes[] | select(.op == "mlp_up" and .operand == "a") |
		.b.received_bytes == ([$c[0].phase_traffic[][] | select(.op == "mlp_up" and .operand == "a") |
		.receiver_payload_bytes] | add) and .delta.sends == .b.sends - .a.sends' cls.json
	assert_output true
	run jq -r '.classes[] | select(.status == "added") | "\(.op).\(.operand) \(.movement) \(has("a")) \(has("delta"))"' cls.json
	assert_output "mlp_up.partial reduction false false"
	run --separate-stderr amp-compare a.json mem.json
	assert_line --regexp '^mlp_up\.partial +reduction +- +[0-9]+ +- +[0-9]+ +- +[0-9]+ +- +-$'
	assert_line --regexp "^total +$(jq .summary.transfers a.json) +$(jq .summary.transfers mem.json) +$(jq .summary.bytes a.json) +$(jq .summary.bytes mem.json) "
	# a capture without phase_traffic: no classes compared, and said so
	jq 'del(.phase_traffic)' a.json > notraffic.json
	run --separate-stderr amp-compare notraffic.json mem.json
	assert_success
	assert_line "classes: not compared (notraffic.json has no phase_traffic)"
	run --separate-stderr amp-compare --json notraffic.json mem.json
	run jq 'has("classes")' <<<"$output"
	assert_output false
}

@test "compare --tiles: max, median and the largest increase per figure, and every tile's delta in JSON" {
	run --separate-stderr amp-compare --tiles a.tsv,mem.tsv --json -o tiles.json a.json mem.json
	assert_success
	local col=3 fig want
	for fig in sent_bytes received_bytes fragments table_bytes sram_peak_bytes; do
		# the reference: every tile of the machine, 0 without an all line
		want=$(awk -F'\t' -v c=$col -v n="$(jq .machine.tiles a.json)" '
			FNR <= 2 || $2 != "all" { next }
			FILENAME == ARGV[1] { a[$1] = $c; next } { b[$1] = $c }
			END {
				for (t = 0; t < n; t++) {
					x = a[t] + 0; y = b[t] + 0
					if (t == 0 || x > ma) { ma = x; ta = t }
					if (t == 0 || y > mb) { mb = y; tb = t }
					if (t == 0 || y - x > inc) { inc = y - x; ti = t }
					print x > "va"; print y > "vb"
				}
				printf "%d %d %d %d %d %d", ma, ta, mb, tb, inc, ti
			}' a.tsv mem.tsv)
		want="$want $(sort -n va | awk '{ v[NR] = $1 } END { print (NR % 2 ? v[(NR + 1) / 2] : int((v[NR / 2] + v[NR / 2 + 1]) / 2)) }') $(sort -n vb | awk '{ v[NR] = $1 } END { print (NR % 2 ? v[(NR + 1) / 2] : int((v[NR / 2] + v[NR / 2 + 1]) / 2)) }')"
		run jq -r --arg f $fig '.tiles.figures[] | select(.figure == $f) |
			"\(.a.max) \(.a.max_tile) \(.b.max) \(.b.max_tile) \(.largest_increase.delta) \(.largest_increase.tile) \(.a.median) \(.b.median)"' tiles.json
		assert_output "$want"
		col=$((col + 1))
	done
	# every tile's deltas, B - A
	run jq '.tiles.deltas | length' tiles.json
	assert_output "$(jq .machine.tiles a.json)"
	run jq -r '.tiles.deltas[] | select(.received_bytes != 0) | "\(.tile) \(.received_bytes)"' tiles.json
	assert_output "$(awk -F'\t' 'FNR <= 2 || $2 != "all" { next } FILENAME == ARGV[1] { a[$1] = $4; next }
		{ b[$1] = $4 } END { for (t = 0; t < 1472; t++) if (b[t] - a[t] != 0) print t, b[t] - a[t] }' a.tsv mem.tsv)"
	# the text's tiles table holds the same figures
	run --separate-stderr amp-compare --tiles a.tsv,mem.tsv a.json mem.json
	assert_line "tiles: A a.tsv, B mem.tsv"
	assert_line --regexp "^received_bytes +$(jq -r '.tiles.figures[1] | "\(.a.max) +\(.a.max_tile) +\(.b.max) +\(.b.max_tile) +\(.a.median) +\(.b.median) +[+]?\(.largest_increase.delta) +\(.largest_increase.tile)"' tiles.json)\$"
}

@test "compare --tsv: a format line, a stable header and seven columns holding the JSON's figures" {
	run --separate-stderr amp-compare --tsv --tiles a.tsv,mem.tsv -o cmp.tsv a.json mem.json
	assert_success
	assert_equal "$output" ""
	run head -n 2 cmp.tsv
	assert_output $'# amp-compare 2\nsection\tkey\tstatus\tfigure\ta\tb\tdelta'
	run awk -F'\t' 'NR > 2 && NF != 7' cmp.tsv
	assert_output ""
	# sections in order
	run awk -F'\t' 'NR > 2 && $1 != last { printf "%s ", $1; last = $1 }' cmp.tsv
	assert_output "summary op phase class tiles tile "
	# the summary and the JSON agree, deltas B - A
	amp-compare --json --tiles a.tsv,mem.tsv a.json mem.json > cmp.json
	run awk -F'\t' '$1 == "summary" { print $4, $5, $6, $7 }' cmp.tsv
	assert_output "$(jq -r '.summary[] | "\(.figure) \(.a) \(.b) \(.delta // "-")"' cmp.json)"
	# a phase line per figure; cycles over every run add up to the total line
	run awk -F'\t' '$1 == "phase" && $4 == "cycles" && $2 != "total" { a += ($5 == "-" ? 0 : $5); b += ($6 == "-" ? 0 : $6) }
		$1 == "phase" && $2 == "total" && $4 == "cycles" { t = $5 " " $6 } END { print a " " b, t }' cmp.tsv
	local xa xb
	xa=$(jq .summary.exchange_cycles a.json) xb=$(jq .summary.exchange_cycles mem.json)
	assert_output "$xa $xb $xa $xb"
	run awk -F'\t' '$1 == "phase" && $4 == "labels" { print $2, $3, $5, $6 }' cmp.tsv
	assert_output "$(jq -r '.phases[] | "\(.a.id // "-"):\(.b.id // "-") \(.status) \(.a.labels // "-") \(.b.labels // "-")"' cmp.json)"
	run awk -F'\t' '$1 == "class" && $3 == "added" { print $2, $4, $5 }' cmp.tsv
	assert_output $'mlp_up.partial:reduction sends -\nmlp_up.partial:reduction bytes -\nmlp_up.partial:reduction received_bytes -'
	run awk -F'\t' '$1 == "tile" && $4 == "received_bytes" && $7 != 0 { n++ } END { print n + 0 }' cmp.tsv
	assert_output "$(jq '[.tiles.deltas[] | select(.received_bytes != 0)] | length' cmp.json)"
	# the same input, the same bytes
	amp-compare --tsv --tiles a.tsv,mem.tsv a.json mem.json | cmp - cmp.tsv
}

@test "compare --json holds the text's figures" {
	run --separate-stderr amp-compare --json -o cmp.json a.json b.json
	assert_success
	assert_equal "$output" ""
	run jq -r '.format, .version, .a.machine, .b.file' cmp.json
	assert_output $'amp-compare\n2\namp1472\nb.json'
	# deltas are b - a; ids have none
	run jq -r '[.summary[] | select(has("delta") and .delta != .b - .a)] | length' cmp.json
	assert_output 0
	run jq -r '[.summary[] | select((.figure | test("_(tile|phase|step)$")) == has("delta"))] | length' cmp.json
	assert_output 0
	run jq -r --slurpfile a a.json --slurpfile b b.json \
		'[.phases[] | select(.a.transfers != $a[0].phases[.a.id].transfers or .b.cycles != $b[0].phases[.b.id].cycles)] | length' cmp.json
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

@test "compare rejects a bad tiles file, a tiles file of another machine and a bad phase_traffic, writing nothing" {
	run --separate-stderr amp-compare --tiles a.tsv,missing.tsv -o out.txt a.json b.json
	assert_failure 1
	[[ $stderr == *"cannot open 'missing.tsv'"* ]] || fail "$stderr"
	[ ! -e out.txt ] || fail "out.txt written on failure"
	local bad want
	# each malformed tiles file of tests/bad and where its message points
	while IFS='|' read -r bad want; do
		run --separate-stderr amp-compare --tiles a.tsv,"$BAD/$bad" -o out.txt a.json b.json
		assert_failure 1
		assert_equal "$output" ""
		[[ $stderr == "amp-compare: $BAD/$bad:$want"* ]] || fail "$bad: $stderr"
		[[ $stderr != *$'\n'* ]] || fail "$bad: more than one line: $stderr"
		[ ! -e out.txt ] || fail "out.txt written on failure"
	done <<-'EOF'
	tiles-empty.tsv|1:1: expected '# amp-tiles 2: ...' (the file is empty)
	tiles-version.tsv|1:13: unsupported tiles version (this amp reads 1 and 2)
	tiles-header.tsv|2:1: expected the header
	tiles-fields.tsv|3:30: expected 7 tab-separated fields, found 6
	tiles-not-a-count.tsv|3:31: expected a count for sram_peak_bytes, found '12x'
	tiles-phase-sram.tsv|3:13: expected a count for sram_peak_bytes, found '5x'
	tiles-tile.tsv|3:1: expected a tile below 1472, found '1472'
	tiles-twice.tsv|5:1: tile 0 has a second 'all' line
	tiles-machine.tsv|1:1: 1473 tiles, but capture 'b.json' has 1472: not its tiles file
	EOF
	every_bad_checked 9 '%s|' "$BAD"/tiles-*.tsv
	# --tiles takes two files; --json and --tsv exclude each other
	run --separate-stderr amp-compare --tiles a.tsv a.json b.json
	assert_failure 2
	[[ $stderr == *"--tiles takes two tiles files"* ]] || fail "$stderr"
	run --separate-stderr amp-compare --tiles a.tsv,b.tsv,c.tsv a.json b.json
	assert_failure 2
	run --separate-stderr amp-compare --json --tsv a.json b.json
	assert_failure 2
	# phase_traffic: an object of class lists naming phases the capture has
	for bad in '.phase_traffic = []' '.phase_traffic["99"] = []' '.phase_traffic["0"][0].sends = "x"' \
		'del(.phase_traffic["0"][0].movement)'; do
		jq "$bad" a.json > bad.json
		run --separate-stderr amp-compare bad.json b.json
		assert_failure 1
		[[ $stderr =~ ^amp-compare:\ bad\.json:[0-9]+:[0-9]+:\  ]] || fail "$bad: $stderr"
		assert_equal "$output" ""
	done
}

# report_compare [VAR=VALUE...]: make report-compare with the private BIN.
report_compare() {
	command -v gnuplot >/dev/null || skip "gnuplot is not installed (make report-deps installs gnuplot-nox)"
	private_bin
	run make -C "$ROOT" --no-print-directory report-compare "${SAN_ARG[@]}" BIN="$BIN" \
		ARTIFACTS="$BATS_TEST_TMPDIR/art" "$@"
}

@test "make report-compare draws the per-tile difference of bytes received, B - A, from two artifacts directories" {
	mkdir -p "$BATS_TEST_TMPDIR/da" "$BATS_TEST_TMPDIR/db"
	cp a.json "$BATS_TEST_TMPDIR/da/capture.json"; cp a.tsv "$BATS_TEST_TMPDIR/da/tiles.tsv"
	cp mem.json "$BATS_TEST_TMPDIR/db/capture.json"; cp mem.tsv "$BATS_TEST_TMPDIR/db/tiles.tsv"
	report_compare A="$BATS_TEST_TMPDIR/da" B="$BATS_TEST_TMPDIR/db"
	assert_success
	local out=$BATS_TEST_TMPDIR/art/compare/da-vs-db
	assert_line --partial "report-compare: $out/received_diff.png"
	run od -An -tx1 -N8 "$out/received_diff.png"
	assert_output " 89 50 4e 47 0d 0a 1a 0a"
	# the plotted data: every tile, its place in the grid, B - A of the tiles files
	run awk -F'\t' '!/^#/ && ($6 != $5 - $4 || $2 != $1 % 46 || $3 != int($1 / 46)) { bad++ } !/^#/ { n++ }
		END { print n, bad + 0 }' "$out/received_diff.dat"
	assert_output "1472 0"
	amp-compare --json --tiles a.tsv,mem.tsv a.json mem.json > cmp.json
	run awk -F'\t' '!/^#/ && $6 != 0 { print $1, $6 }' "$out/received_diff.dat"
	assert_output "$(jq -r '.tiles.deltas[] | select(.received_bytes != 0) | "\(.tile) \(.received_bytes)"' cmp.json)"
	# the title names the largest increase; compare.txt and .tsv are amp-compare's
	local up tile
	read -r up tile < <(jq -r '.tiles.figures[] | select(.figure == "received_bytes") | .largest_increase |
		"\(.delta) \(.tile)"' cmp.json)
	up=$(sed -E ':a; s/([0-9])([0-9]{3})($|[^0-9])/\1,\2\3/; ta' <<<"$up")
	run grep -c "largest increase +$up on tile $tile," "$out/received_diff.gp"
	assert_output 1
	# one model on one machine: named once, after both sides
	run grep -c "B - A: A da, B db (siglip-mlp on amp1472)' " "$out/received_diff.gp"
	assert_output 1
	# two models: each side's own, once (B's was repeated)
	mkdir -p "$BATS_TEST_TMPDIR/dt"
	amp-plan "$MODELS/tiny-mlp.yaml" | amp-compose | amp-expand | amp-exchange | amp-group |
		amp-capture --tiles "$BATS_TEST_TMPDIR/dt/tiles.tsv" -o "$BATS_TEST_TMPDIR/dt/capture.json"
	report_compare A="$BATS_TEST_TMPDIR/da" B="$BATS_TEST_TMPDIR/dt"
	assert_success
	run grep -c "B - A: A da (siglip-mlp on amp1472), B dt (tiny-mlp on amp1472)' " \
		"$BATS_TEST_TMPDIR/art/compare/da-vs-dt/received_diff.gp"
	assert_output 1
	(cd "$BATS_TEST_TMPDIR" && amp-compare --tiles da/tiles.tsv,db/tiles.tsv da/capture.json db/capture.json) > want.txt
	diff <(sed 's|^A: .*/da/|A: da/|; s|^B: .*/db/|B: db/|; s|^tiles: .*|tiles|' "$out/compare.txt") \
		<(sed 's|^tiles: .*|tiles|' want.txt)
	run awk -F'\t' '$1 == "tile" && $4 == "received_bytes" { n++ } END { print n + 0 }' "$out/compare.tsv"
	assert_output "$(jq '[.tiles.deltas[] | select(to_entries | map(select(.key != "tile" and .value != 0)) | length > 0)] | length' cmp.json)"
	# the same inputs, the same bytes; up to date, nothing is remade
	cp "$out/received_diff.png" first.png
	rm -rf "$out"
	report_compare A="$BATS_TEST_TMPDIR/da" B="$BATS_TEST_TMPDIR/db"
	assert_success
	cmp first.png "$out/received_diff.png"
	local before
	before=$(stat -c %.9Y "$out/received_diff.png")
	report_compare A="$BATS_TEST_TMPDIR/da" B="$BATS_TEST_TMPDIR/db"
	assert_success
	assert_equal "$(stat -c %.9Y "$out/received_diff.png")" "$before"
}

@test "make report-compare takes capture files with their tiles files, and refuses missing or bad input, keeping what it wrote" {
	cp a.json a.tsv mem.json mem.tsv "$BATS_TEST_TMPDIR/"
	report_compare A="$BATS_TEST_TMPDIR/a.json" B="$BATS_TEST_TMPDIR/mem.json"
	assert_success
	local out=$BATS_TEST_TMPDIR/art/compare/a-vs-mem
	[ -s "$out/received_diff.png" ] || fail "no heatmap in $out"
	cp "$out/received_diff.png" first.png
	# no B, a missing capture: make says so before anything runs
	report_compare A="$BATS_TEST_TMPDIR/a.json"
	assert_failure
	assert_output --partial "give A= and B="
	report_compare A="$BATS_TEST_TMPDIR/a.json" B="$BATS_TEST_TMPDIR/nothere.json"
	assert_failure
	assert_output --partial "nothere.json: no such file"
	# a malformed tiles file: amp-compare's message names it; the earlier
	# files, which compared other inputs, are removed, and no temporary
	# stays (only amp's mark of the directory)
	sed '3s/\t[0-9]*\t-$/\tx\t-/' mem.tsv > "$BATS_TEST_TMPDIR/bad.tsv"
	! cmp -s mem.tsv "$BATS_TEST_TMPDIR/bad.tsv" || fail "no figure to spoil in mem.tsv"
	touch "$BATS_TEST_TMPDIR/bad.tsv"
	report_compare A="$BATS_TEST_TMPDIR/a.json" B="$BATS_TEST_TMPDIR/mem.json" BTILES="$BATS_TEST_TMPDIR/bad.tsv"
	assert_failure
	assert_output --regexp "amp-compare: $BATS_TEST_TMPDIR/bad\.tsv:3:[0-9]+: expected a count"
	run ls -A "$out"
	assert_output ".amp-artifacts"
	# fixed, it is drawn again, the same bytes
	report_compare A="$BATS_TEST_TMPDIR/a.json" B="$BATS_TEST_TMPDIR/mem.json"
	assert_success
	cmp first.png "$out/received_diff.png"
}

@test "compare --tsv escapes a tab, newline, carriage return or backslash in a name: 7 fields a line" {
	# op and phase names as a hand-edited capture may hold them
	jq '(.ops[0].op) |= "a\tb\nc\\d\re" | (.phases[0].labels[0]) |= "l\tm"' tiny.json > odd.json
	run --separate-stderr amp-compare --tsv tiny.json odd.json
	assert_success
	printf '%s\n' "$output" | awk -F'\t' 'NR > 1 && NF != 7 { print "line " NR ": " NF " fields: " $0; bad = 1 } END { exit bad }' ||
		fail "a line is not 7 fields"
	assert_line --partial $'op\ta\\tb\\nc\\\\d\\re\t'
	assert_line --partial $'\tlabels\t'
	[[ $output == *'l\tm'* ]] || fail "the label is not escaped: $output"
}
