#!/usr/bin/env bats
# amp-emit: the program's layout (formats/program.md) and its listing round
# trip.

load common
load stages
load amp-emit
bats_require_minimum_version 1.5.0

setup_file() {
	emit_fixtures tiny siglip-program
}

# footprint LISTING: every row whose bytes differ from docs/machine.md §2's model:
# 8 per row, 8 per SEND (+4 over 256 B), 8 per RECV (+4 when its address
# does not continue the previous RECV), rounded up to 8.
footprint() {
	awk '
	function check() { if (hdr != "" && int((b + 7) / 8) * 8 != want) print hdr ": footprint " int((b + 7) / 8) * 8 }
	/^tile / { check(); hdr = $0; want = $6; b = 8; prev = -1; next }
	$1 == "send" { b += $2 > 256 ? 12 : 8; next }
	$1 == "recv" { b += $7 == prev ? 8 : 12; prev = $7 + $2; next }
	END { check() }' "$1"
}

# masked LISTING: how many distinct rows remain once SEND addresses, RECV
# sending tiles and RECV addresses are masked (a RECV keeps only whether it
# continues the previous one).
masked() {
	awk '
	function flush() { if (started && !(body in seen)) { seen[body] = 1; n++ } }
	/^tile / { flush(); started = 1; body = ""; prev = -1; next }
	$1 == "send" { body = body "s" $2 ";"; next }
	$1 == "recv" { body = body "r" $2 ($7 == prev ? "" : "@") ";"; prev = $7 + $2 }
	END { flush(); print n + 0 }' "$1"
}

# ---- B. the program ----

@test "emit writes a program that starts with the AMPPROG magic" {
	siglip_ok
	run head -c 7 "$TINY_PROG"
	assert_output 'AMPPROG'
	run od -An -tx1 -N8 "$TINY_PROG"
	assert_output ' 41 4d 50 50 52 4f 47 00'
	run head -c 7 "$SIGLIP_PROG"
	assert_output 'AMPPROG'
}

@test "emit writes version 3 with STAGE raw, ROWS and TABLE zstd and the STAGE's hash, back to back to the end of the file" {
	run field "$TINY_PROG" 8 4
	assert_output 3
	run field "$TINY_PROG" 12 4
	assert_output 4
	run sections "$TINY_PROG"
	assert_success
	assert_equal "${#lines[@]}" 4
	read -r id enc off size <<< "${lines[0]}"
	assert_equal "$id $enc $off" "1 0 $((16 + 4 * 24))"
	end=$((off + size))
	read -r id enc off size <<< "${lines[1]}"
	assert_equal "$id $enc $off" "2 1 $end"
	end=$((off + size))
	read -r id enc off size <<< "${lines[2]}"
	assert_equal "$id $enc $off" "3 1 $end"
	end=$((off + size))
	read -r id enc off size <<< "${lines[3]}"
	assert_equal "$id $enc $off $size" "4 0 $end 8"
	assert_equal "$((off + size))" "$(stat -c %s "$TINY_PROG")"
	section "$TINY_PROG" 2 rows.zst
	section "$TINY_PROG" 3 table.zst
	run od -An -tx1 -N4 rows.zst
	assert_output ' 28 b5 2f fd'
	run zstd -q -t rows.zst table.zst
	assert_success
}

@test "emit's STAGE section is the grouped stage, its machine carrying the limits checked" {
	siglip_ok
	section "$TINY_PROG" 1 stage.yaml
	run same_but_provenance "$TINY" stage.yaml
	assert_success
	section "$SIGLIP_PROG" 1 siglip-stage.yaml
	run sed -n 3p siglip-stage.yaml
	assert_output --partial 'table_budget_bytes: 200000,'
	run amp-emit --no-model --fragment-limit 5000 "$TINY" -o limited.amp
	assert_success
	section limited.amp 1 limited.yaml
	run sed -n 3p limited.yaml
	assert_output --partial 'fragment_limit: 5000,'
	# the rest of the stage is the grouped stage as it was, and amp-emit's provenance record
	run grep -c '^- {tool: amp-emit, version: [^,]*, options: --no-model --table-budget 200000, files: \[\]}$' siglip-stage.yaml
	assert_output 1
	run diff <(sed 3d "$SIGLIP") <(sed 3d siglip-stage.yaml | grep -v '^- {tool: amp-emit, ')
	assert_success
}

@test "emit stores each masked row once and one TABLE entry per (tile, phase) row" {
	section "$TINY_PROG" 2 rows.zst
	section "$TINY_PROG" 3 table.zst
	zstd -q -d rows.zst -o rows.bin
	zstd -q -d table.zst -o table.bin
	nrows=$(field rows.bin 0 4)
	nent=$(field table.bin 0 4)
	run grep -c '^tile ' "$TINY_LIST"
	assert_equal "$nent" "$output"
	run masked "$TINY_LIST"
	assert_equal "$nrows" "$output"
	assert [ "$nrows" -lt "$nent" ]
}

@test "emit's rows have exactly docs/machine.md §2's footprint" {
	run rows "$TINY_LIST"
	assert [ "${#lines[@]}" -ge 100 ]
	run footprint "$TINY_LIST"
	assert_success
	assert_output ""
	# the rows use both SEND sizes and both RECV forms
	run grep -c '^  send \(25[7-9]\|2[6-9][0-9]\|[3-9][0-9][0-9]\|[0-9]\{4,\}\) ' "$TINY_LIST"
	assert [ "$output" -ge 1 ]
}

# ---- C. the listing round trip ----

@test "emit --list of tiny-mlp's program equals --list of its grouped stage" {
	run amp-emit --list "$TINY_PROG"
	assert_success
	printf '%s\n' "$output" > from-program.txt
	run cmp "$TINY_LIST" from-program.txt
	assert_success
	run sed -n 1p "$TINY_LIST"
	assert_output --regexp '^amp-program 3 model tiny-mlp machine amp1472 tiles 1472 phases [0-9]+$'
	run grep -c '^  recv ' "$TINY_LIST"
	assert [ "$output" -ge 1000 ]
}

@test "emit --list of siglip-mlp's program equals --list of its grouped stage" {
	siglip_ok
	amp-emit --list "$SIGLIP_PROG" > from-program.txt
	amp-emit --list "$SIGLIP" > from-stage.txt
	run sed -n 1p from-stage.txt
	assert_output --regexp '^amp-program 3 model siglip-mlp machine amp1472 tiles 1472 phases [0-9]+$'
	assert [ "$(stat -c %s from-stage.txt)" -gt 1000000 ]
	run cmp from-stage.txt from-program.txt
	assert_success
}

@test "emit --list reads a zstd program and a zstd grouped stage" {
	run zstd -q "$TINY_PROG" -o packed.amp
	assert_success
	run amp-emit --no-model -z "$TINY" -o emitted-z.amp
	assert_success
	run zstd -q "$TINY" -o packed.yaml
	assert_success
	for f in packed.amp emitted-z.amp packed.yaml; do
		amp-emit --list "$f" > list.txt
		run cmp "$TINY_LIST" list.txt
		assert_success
	done
}

@test "emit --list reads a program and a grouped stage from '-' and from stdin" {
	for f in "$TINY_PROG" "$TINY"; do
		run --separate-stderr amp-emit --list - < "$f"
		assert_success
		assert_equal "$stderr" ""
		printf '%s\n' "$output" > dash.txt
		run cmp "$TINY_LIST" dash.txt
		assert_success
		run --separate-stderr amp-emit --list < "$f"
		assert_success
		printf '%s\n' "$output" > stdin.txt
		run cmp "$TINY_LIST" stdin.txt
		assert_success
	done
}
