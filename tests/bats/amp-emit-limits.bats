#!/usr/bin/env bats
# amp-emit: the per-tile limits (docs/machine.md §2: table budget, fragment
# limit, SRAM) and the SRAM report.

load common
load stages
load amp-emit
bats_require_minimum_version 1.5.0

setup_file() {
	emit_fixtures tiny siglip
}

# totals LISTING: "tile table_bytes fragments" per tile: a row identical
# (addresses included) to one the tile already holds costs nothing; every
# row's instructions count as fragments.
totals() {
	awk '
	function flush() {
		if (t == "") return
		if (!((t, body) in seen)) { seen[t, body] = 1; tab[t] += b }
		fr[t] += n
	}
	/^tile / { flush(); t = $2; b = $6; n = $8; body = ""; next }
	/^  / { body = body $0 "\n" }
	END { flush(); for (x in tab) print x, tab[x], fr[x] }' "$1" | sort -n
}

# ---- D. limits ----

@test "emit fails over the table budget naming the tile, its phase, the bytes and the limit" {
	max=$(jq .summary.max_table_bytes "$TINY_CAPTURE")
	assert [ "$max" -gt 1000 ]
	mkdir out
	run --separate-stderr amp-emit --no-model --table-budget $((max - 1)) "$TINY" -o out/p.amp
	assert_failure 1
	assert_equal "$output" ""
	assert_equal "${#stderr_lines[@]}" 1
	assert_regex "$stderr" "^amp-emit: tile [0-9]+\b"
	assert_regex "$stderr" "\bphase [0-9]+\b"
	assert_regex "$stderr" "\b$max bytes\b"
	assert_regex "$stderr" "\b$((max - 1)) bytes\b.*--table-budget"
	run ls -A out
	assert_output ""
	# the tile named has the largest tables, and the phase named holds its largest row
	[[ "$stderr" =~ tile\ ([0-9]+)[,:].*phase\ ([0-9]+)(,\ |\ \()([^\)]+)\) ]] ||
		fail "cannot read the tile and phase in: $stderr"
	tile=${BASH_REMATCH[1]} phase=${BASH_REMATCH[2]} label=${BASH_REMATCH[4]}
	totals "$TINY_LIST" > totals.txt
	run awk -v t="$tile" '$1 == t { print $2 }' totals.txt
	assert_output "$max"
	run awk -v m="$max" '$2 > m' totals.txt
	assert_output ""
	rows "$TINY_LIST" > rows.txt
	run awk -v t="$tile" -v p="$phase" '$1 == t { if ($3 > best) best = $3; if ($2 == p) mine = $3 }
		END { print (mine == best && best > 0) ? "largest" : "phase " p " row " mine " of " best }' rows.txt
	assert_output largest
	run grep -c "^phase $phase steps [0-9.]* $label\$" "$TINY_LIST"
	assert_output 1
	# exactly the largest tables fit
	run --separate-stderr amp-emit --no-model --table-budget "$max" "$TINY" -o out/p.amp
	assert_success
	assert_equal "$stderr" ""
	run cmp "$TINY_PROG" out/p.amp
	assert_failure
	run amp-emit --list out/p.amp
	assert_success
}

@test "emit fails over the fragment limit naming the tile, its phase, the count and the limit" {
	max=$(jq .summary.max_fragments "$TINY_CAPTURE")
	assert [ "$max" -gt 100 ]
	mkdir out
	run --separate-stderr amp-emit --no-model --fragment-limit $((max - 1)) "$TINY" -o out/p.amp
	assert_failure 1
	assert_equal "$output" ""
	assert_equal "${#stderr_lines[@]}" 1
	assert_regex "$stderr" "^amp-emit: tile [0-9]+\b"
	assert_regex "$stderr" "\bphase [0-9]+\b"
	assert_regex "$stderr" "\b$max send and receive fragments\b"
	assert_regex "$stderr" "\b$((max - 1))\b.*--fragment-limit"
	run ls -A out
	assert_output ""
	[[ "$stderr" =~ tile\ ([0-9]+)[,:].*phase\ ([0-9]+)(,\ |\ \()([^\)]+)\) ]] ||
		fail "cannot read the tile and phase in: $stderr"
	tile=${BASH_REMATCH[1]} phase=${BASH_REMATCH[2]} label=${BASH_REMATCH[4]}
	totals "$TINY_LIST" > totals.txt
	run awk -v t="$tile" '$1 == t { print $3 }' totals.txt
	assert_output "$max"
	run awk -v m="$max" '$3 > m' totals.txt
	assert_output ""
	rows "$TINY_LIST" > rows.txt
	run awk -v t="$tile" -v p="$phase" '$1 == t { if ($4 > best) best = $4; if ($2 == p) mine = $4 }
		END { print (mine == best && best > 0) ? "most" : "phase " p " has " mine " of " best }' rows.txt
	assert_output most
	run grep -c "^phase $phase steps [0-9.]* $label\$" "$TINY_LIST"
	assert_output 1
	run --separate-stderr amp-emit --no-model --fragment-limit "$max" "$TINY" -o out/p.amp
	assert_success
	assert_equal "$stderr" ""
}

@test "emit applies the machine's table budget by default: siglip-mlp does not fit it" {
	siglip_ok
	budget=$(sed -n 's/^table_budget_bytes: *\([0-9]*\).*/\1/p' "$MACHINES/amp1472.yaml")
	assert_equal "$budget" 81920
	mkdir out
	run --separate-stderr amp-emit --no-model "$SIGLIP" -o out/p.amp
	assert_failure 1
	assert_equal "$output" ""
	assert_regex "$stderr" "^amp-emit: tile [0-9]+\b.*\bphase [0-9]+\b"
	assert_regex "$stderr" "exchange tables need [0-9]+ bytes.*over the table budget of $budget bytes"
	run ls -A out
	assert_output ""
}

# sram_case: a machine (m.yaml) and tiny-mlp's grouped stage for it (g.yaml)
# whose tensors fit sram_bytes - reserved_bytes (amp-plan places them) but
# not with the exchange tables; sets AVAIL. amp-plan's fit check would
# refuse such a plan, so it is written with --no-fit-check; amp-plan adapts
# its plan to the room, so a few sizes are tried; the first that qualifies
# is used.
sram_case() {
	local sram a
	sram=$(sed -n 's/^sram_bytes: *\([0-9]*\).*/\1/p' "$MACHINES/amp1472.yaml")
	for a in $(seq 26000 -500 10000); do
		sed "s/^reserved_bytes: *[0-9]*/reserved_bytes: $((sram - a))/" "$MACHINES/amp1472.yaml" > m.yaml
		amp-plan --no-fit-check --machine m.yaml "$MODELS/tiny-mlp.yaml" 2> /dev/null | amp-compose |
			amp-expand | amp-exchange | amp-group > g.yaml 2> /dev/null && [ -s g.yaml ] || continue
		if ! amp-emit --no-model --machine m.yaml g.yaml > /dev/null 2> sram.err && grep -q 'sram_bytes - reserved_bytes' sram.err; then
			AVAIL=$a
			return 0
		fi
	done
	return 1
}

@test "emit fails when a tile's tensors and tables overflow sram_bytes - reserved_bytes, though its tensors fit" {
	sram_case || fail "no reserved_bytes found where tiny-mlp plans but its tensors and tables do not fit"
	mkdir out
	run --separate-stderr amp-emit --no-model --machine m.yaml g.yaml -o out/p.amp
	assert_failure 1
	assert_equal "$output" ""
	assert_equal "${#stderr_lines[@]}" 1
	assert_regex "$stderr" "^amp-emit: tile [0-9]+\b.*\b$AVAIL\b.*\(sram_bytes - reserved_bytes\)"
	run ls -A out
	assert_output ""
	# the figures: tensors + tables = need > available, and the tables are
	# the tile's own
	[[ "$stderr" =~ tile\ ([0-9]+)[,:].*\ ([0-9]+)\ bytes\ of\ tensors.*\ ([0-9]+)\ bytes\ of\ exchange\ tables\ need\ ([0-9]+)\ bytes ]] ||
		fail "cannot read the figures in: $stderr"
	tile=${BASH_REMATCH[1]} tensors=${BASH_REMATCH[2]} tables=${BASH_REMATCH[3]} need=${BASH_REMATCH[4]}
	assert_equal "$need" "$((tensors + tables))"
	assert [ "$tensors" -le "$AVAIL" ]
	assert [ "$need" -gt "$AVAIL" ]
	amp-emit --list g.yaml > g.list
	run awk -v t="$tile" '$1 == t { print $2 }' <(totals g.list)
	assert_output "$tables"
	# with the default reservation the same machine's plan fits
	run amp-emit --no-model "$TINY" -o out/p.amp
	assert_success
}

@test "emit's SRAM failure names the tile's phase, as the other limits do" {
	# docs/machine.md §2 and formats/program.md: a placement over SRAM names the
	# tile, the phase, the bytes and the limit
	sram_case || fail "no reserved_bytes found where tiny-mlp plans but its tensors and tables do not fit"
	run --separate-stderr amp-emit --no-model --machine m.yaml g.yaml
	assert_failure 1
	assert_regex "$stderr" "^amp-emit: tile [0-9]+\b.*\bphase [0-9]+\b.*\(sram_bytes - reserved_bytes\)"
	[[ "$stderr" =~ phase\ ([0-9]+)(,\ |\ \()([^\)]+)\) ]] || fail "cannot read the phase in: $stderr"
	amp-emit --list g.yaml > g.list
	run grep -c "^phase ${BASH_REMATCH[1]} steps [0-9.]* ${BASH_REMATCH[3]}\$" g.list
	assert_output 1
}

@test "emit --report prints every tile's SRAM use, then the largest, on stderr and changes nothing else" {
	run --separate-stderr amp-emit --no-model --report "$TINY" -o report.amp
	assert_success
	assert_equal "$output" ""
	sram=$(sed -n 's/^sram_bytes: *\([0-9]*\).*/\1/p' "$MACHINES/amp1472.yaml")
	reserved=$(sed -n 's/^reserved_bytes: *\([0-9]*\).*/\1/p' "$MACHINES/amp1472.yaml")
	# one line per tile that holds anything, in tile order, each adding up;
	# its tables are the listing's totals for that tile
	local n=0 i line prev=-1
	while [[ ${stderr_lines[n]} =~ ^amp-emit:\ tile\ [0-9]+:\  ]]; do n=$((n + 1)); done
	assert [ "$n" -gt 1 ]
	for ((i = 0; i < n; i++)); do
		line=${stderr_lines[i]}
		[[ $line =~ ^amp-emit:\ tile\ ([0-9]+):\ ([0-9]+)\ bytes\ \(tensors\ ([0-9]+)\ at\ step\ [0-9]+\ \+\ tables\ ([0-9]+)\)\ of\ $((sram - reserved))$ ]] ||
			fail "not a tile line: $line"
		assert [ "${BASH_REMATCH[1]}" -gt "$prev" ]
		prev=${BASH_REMATCH[1]}
		assert_equal "${BASH_REMATCH[2]}" "$((BASH_REMATCH[3] + BASH_REMATCH[4]))"
		assert [ "${BASH_REMATCH[2]}" -gt 0 ]
		run awk -v t="$prev" '$1 == t { print $2 }' <(totals "$TINY_LIST")
		assert_equal "${BASH_REMATCH[4]}" "${output:-0}"
	done
	# then the tables of the tile with the most, phase by phase, largest
	# first, adding up to at least its total (rows shared count once in
	# it), and the phase to start with
	local wt wb sum=0 last=999999999 first=
	wt=$(jq .summary.max_table_tile "$TINY_CAPTURE") wb=$(jq .summary.max_table_bytes "$TINY_CAPTURE")
	assert_equal "${stderr_lines[n]}" "amp-emit: tile $wt's tables, $wb bytes, by phase (rows before sharing):"
	for ((i = n + 1; i < ${#stderr_lines[@]} - 2; i++)); do
		if [[ ${stderr_lines[i]} =~ ^amp-emit:\ \ \ [0-9]+\ more\ phases:\ ([0-9]+)\ bytes$ ]]; then
			sum=$((sum + BASH_REMATCH[1]))     # past the largest 8
			continue
		fi
		[[ ${stderr_lines[i]} =~ ^amp-emit:\ \ \ phase\ ([0-9]+)\ \(([^\)]+)\):\ ([0-9]+)\ bytes$ ]] ||
			fail "not a phase line: ${stderr_lines[i]}"
		assert_equal "${BASH_REMATCH[2]}" "$(jq -r ".phases[${BASH_REMATCH[1]}].labels | join(\"+\")" "$TINY_CAPTURE")"
		assert [ "${BASH_REMATCH[3]}" -le "$last" ]
		last=${BASH_REMATCH[3]} sum=$((sum + BASH_REMATCH[3]))
		first=${first:-${BASH_REMATCH[1]}}
	done
	assert [ "$sum" -ge "$wb" ]
	assert_regex "${stderr_lines[${#stderr_lines[@]} - 2]}" "^amp-emit: to reduce them, start with phase $first "
	stderr=${stderr_lines[${#stderr_lines[@]} - 1]}
	assert_regex "$stderr" "^amp-emit: largest SRAM use: tile [0-9]+, [0-9]+ bytes \(tensors [0-9]+ \+ tables [0-9]+\) of $((sram - reserved)) available"
	[[ "$stderr" =~ tile\ ([0-9]+),\ ([0-9]+)\ bytes\ \(tensors\ ([0-9]+)\ \+\ tables\ ([0-9]+)\) ]]
	tile=${BASH_REMATCH[1]} use=${BASH_REMATCH[2]} tensors=${BASH_REMATCH[3]} tables=${BASH_REMATCH[4]}
	assert_equal "$use" "$((tensors + tables))"
	assert [ "$tensors" -gt 0 ]
	run awk -v t="$tile" '$1 == t { print $2 }' <(totals "$TINY_LIST")
	assert_output "$tables"
	max=$(jq .summary.max_table_bytes "$TINY_CAPTURE")
	assert_regex "$stderr" "largest tables $max bytes"
	run cmp "$TINY_PROG" report.amp
	assert_success
	# to stdout, the report stays on stderr
	amp-emit --no-model --report "$TINY" > stdout.amp 2> report.txt
	run cmp "$TINY_PROG" stdout.amp
	assert_success
	run tail -n 1 report.txt
	assert_output "$stderr"
	# without --report, nothing on stderr
	run --separate-stderr amp-emit --no-model "$TINY" -o quiet.amp
	assert_equal "$stderr" ""
}
