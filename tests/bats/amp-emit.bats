#!/usr/bin/env bats
# amp-emit: grouped stage -> program (formats/program.md). The command-line
# contract, the program's layout and its listing round trip, the per-tile
# limits (docs/machine.md §2: table budget, fragment limit, SRAM) and malformed
# programs (tests/bad/program-*), which amp-capture must reject too.

load common
load stages
bats_require_minimum_version 1.5.0


# The stages are made once per file: tiny-mlp, and siglip-mlp with its
# program (siglip-mlp needs more than the default table budget).
setup_file() {
	cd "$BATS_FILE_TMPDIR" || return 1
	export TINY=$BATS_FILE_TMPDIR/tiny.yaml SIGLIP=$BATS_FILE_TMPDIR/siglip.yaml
	export TINY_PROG=$BATS_FILE_TMPDIR/tiny.amp SIGLIP_PROG=$BATS_FILE_TMPDIR/siglip.amp
	export TINY_LIST=$BATS_FILE_TMPDIR/tiny.list TINY_CAPTURE=$BATS_FILE_TMPDIR/tiny.json
	grouped "$MODELS/tiny-mlp.yaml" "$TINY"
	[ -n "${AMP_SAN:-}" ] || grouped "$MODELS/siglip-mlp.yaml" "$SIGLIP"
	amp-emit --no-model "$TINY" -o "$TINY_PROG"
	[ -n "${AMP_SAN:-}" ] || amp-emit --no-model --table-budget 200000 "$SIGLIP" -o "$SIGLIP_PROG"
	amp-emit --list "$TINY" > "$TINY_LIST"
	amp-capture "$TINY" -o "$TINY_CAPTURE"
}

# sections PROGRAM: "id encoding offset size" per section-table entry.
sections() {
	local n i
	n=$(field "$1" 12 4)
	for ((i = 0; i < n; i++)); do
		echo "$(field "$1" $((16 + 24 * i)) 4) $(field "$1" $((20 + 24 * i)) 4)" \
			"$(field "$1" $((24 + 24 * i)) 8) $(field "$1" $((32 + 24 * i)) 8)"
	done
}

# section PROGRAM ID OUT: section ID's stored bytes into OUT.
section() {
	local id enc off size
	while read -r id enc off size; do
		if [ "$id" = "$2" ]; then
			tail -c +$((off + 1)) "$1" | head -c "$size" > "$3"
			return 0
		fi
	done < <(sections "$1")
	return 1
}

# rows LISTING: "tile phase bytes instructions" per row of an --list text.
rows() {
	awk '/^tile / { print $2, $4, $6, $8 }' "$1"
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

# rejects_program FILE EXPECTED: amp-emit --list and amp-capture both fail
# with status 1, print nothing on stdout and one message naming FILE and
# containing EXPECTED; amp-capture -o writes nothing.
rejects_program() {
	local name=${1##*/}
	run --separate-stderr amp-emit --list "$1"
	assert_failure 1
	assert_equal "$output" ""
	assert_equal "${#stderr_lines[@]}" 1
	assert_regex "$stderr" '^amp-emit: '
	[[ "$stderr" == *"$name"* ]] || fail "amp-emit --list: expected '$name' in: $stderr"
	[[ "$stderr" == *"$2"* ]] || fail "amp-emit --list: expected '$2' in: $stderr"
	run --separate-stderr amp-capture "$1"
	assert_failure 1
	assert_equal "$output" ""
	assert_equal "${#stderr_lines[@]}" 1
	assert_regex "$stderr" '^amp-capture: '
	[[ "$stderr" == *"$name"* ]] || fail "amp-capture: expected '$name' in: $stderr"
	[[ "$stderr" == *"$2"* ]] || fail "amp-capture: expected '$2' in: $stderr"
	mkdir -p out
	run amp-capture "$1" -o out/c.json
	assert_failure 1
	run ls -A out
	assert_output ""
}

# ---- A. command-line contract ----

@test "emit --help prints usage, the options and exit statuses to stdout and exits 0" {
	run --separate-stderr amp-emit --help
	assert_success
	assert_line --index 0 --regexp '^Usage: amp-emit '
	for opt in --table-budget --fragment-limit --report --list --output --compress --version; do
		assert_output --partial -- "$opt"
	done
	assert_output --partial 'Exit status: 0 success, 1 bad input, a limit exceeded or a write error,'
	assert_equal "$stderr" ""
}

@test "emit writes a program only with --model or --no-model, and not with both" {
	run --separate-stderr amp-emit "$TINY" -o out/p.amp
	assert_failure 2
	assert_equal "$output" ""
	assert_equal "${stderr_lines[0]}" "amp-emit: name the model the stage lowers (--model FILE, with --scales FILE when amp-plan had them), so that amp-run checks the program against it; --no-model writes one that amp-run checks for movement and arithmetic only"
	[ ! -e out/p.amp ] || fail "a program was written"
	run --separate-stderr amp-emit --no-model --model "$MODELS/tiny-mlp.yaml" "$TINY" -o out/p.amp
	assert_failure 2
	assert_regex "$stderr" "^amp-emit: --no-model and --model name opposite things; give one"
	[ ! -e out/p.amp ] || fail "a program was written"
	# --list writes no program and needs neither
	run amp-emit --list "$TINY"
	assert_success
	# --no-model is recorded in the program's provenance
	amp-emit --no-model "$TINY" -o bare.amp
	run bash -c "amp-capture bare.amp | jq -r '.provenance[] | select(.tool == \"amp-emit\") | .options'"
	assert_success
	assert_output "--no-model"

}

@test "emit --version prints the tool name and version" {
	run --separate-stderr amp-emit --version
	assert_success
	assert_output --regexp '^amp-emit \(amp\) [0-9]+\.[0-9]+\.[0-9]+$'
	assert_equal "$stderr" ""
}

@test "emit rejects an unknown option with usage status 2 and writes nothing" {
	mkdir out
	run --separate-stderr amp-emit --no-model --bogus "$TINY" -o out/p.amp
	assert_failure 2
	assert_equal "$output" ""
	assert_regex "$stderr" "^amp-emit: .*'--bogus'"
	assert_regex "$stderr" "Try 'amp-emit --help'"
	run ls -A out
	assert_output ""
}

@test "emit rejects two input arguments with usage status 2" {
	siglip_ok
	mkdir out
	run --separate-stderr amp-emit --no-model "$TINY" "$SIGLIP" -o out/p.amp
	assert_failure 2
	assert_equal "$output" ""
	assert_regex "$stderr" "siglip\.yaml"
	assert_regex "$stderr" "Try 'amp-emit --help'"
	run --separate-stderr amp-emit --list "$TINY" "$TINY_PROG"
	assert_failure 2
	assert_equal "$output" ""
	run ls -A out
	assert_output ""
}

@test "emit rejects a --table-budget or --fragment-limit that is not a non-negative integer with status 2" {
	mkdir out
	for opt in --table-budget --fragment-limit; do
		for v in 12x -1 '' 1.5 99999999999999999999999; do
			run --separate-stderr amp-emit --no-model "$opt" "$v" "$TINY" -o out/p.amp
			assert_failure 2
			assert_equal "$output" ""
			assert_regex "$stderr" "^amp-emit: .*$opt.*'$v'"
			assert_regex "$stderr" "Try 'amp-emit --help'"
		done
		run --separate-stderr amp-emit --no-model "$TINY" "$opt"
		assert_failure 2
		assert_regex "$stderr" "^amp-emit: .*$opt"
	done
	run ls -A out
	assert_output ""
}

@test "emit rejects -o without a file with usage status 2" {
	run --separate-stderr amp-emit --no-model -o
	assert_failure 2
	assert_equal "$output" ""
	assert_regex "$stderr" "Try 'amp-emit --help'"
}

@test "emit reports a missing input file with status 1 naming it" {
	run --separate-stderr amp-emit --no-model nosuch.yaml
	assert_failure 1
	assert_equal "$output" ""
	assert_equal "$stderr" "amp-emit: cannot open 'nosuch.yaml': No such file or directory"
	run --separate-stderr amp-emit --list nosuch.amp
	assert_failure 1
	assert_equal "$output" ""
	assert_equal "$stderr" "amp-emit: cannot open 'nosuch.amp': No such file or directory"
}

@test "emit writes the same program from a path, from '-', from stdin and to stdout" {
	run amp-emit --no-model "$TINY" -o path.amp
	assert_success
	run amp-emit --no-model - -o dash.amp < "$TINY"
	assert_success
	run amp-emit --no-model -o none.amp < "$TINY"
	assert_success
	amp-emit --no-model "$TINY" > stdout.amp
	assert [ -s path.amp ]
	for f in dash none stdout; do
		run cmp path.amp "$f.amp"
		assert_success
	done
}

@test "emit recognises a zstd grouped stage by its magic, not its name" {
	run zstd -q "$TINY" -o packed.yaml
	assert_success
	run od -An -tx1 -N4 packed.yaml
	assert_output ' 28 b5 2f fd'
	run amp-emit --no-model packed.yaml -o from-zstd.amp
	assert_success
	run amp-emit --no-model -o from-stdin.amp < packed.yaml
	assert_success
	run cmp "$TINY_PROG" from-zstd.amp
	assert_success
	run cmp "$TINY_PROG" from-stdin.amp
	assert_success
}

@test "emit -z writes zstd that decompresses to the plain program" {
	run amp-emit --no-model -z "$TINY" -o packed.amp
	assert_success
	run od -An -tx1 -N4 packed.amp
	assert_output ' 28 b5 2f fd'
	run zstd -q -d packed.amp -o unpacked.amp
	assert_success
	run cmp "$TINY_PROG" unpacked.amp
	assert_success
}

@test "emit -o leaves only the target after success and prints nothing" {
	mkdir out
	run --separate-stderr amp-emit --no-model "$TINY" -o out/p.amp
	assert_success
	assert_equal "$output" ""
	assert_equal "$stderr" ""
	run ls -A out
	assert_output 'p.amp'
}

@test "emit -o over a limit leaves no target, no temporary, and an existing target unchanged" {
	siglip_ok
	mkdir out
	run amp-emit --no-model --table-budget 0 "$TINY" -o out/p.amp
	assert_failure 1
	run amp-emit --no-model "$BAD/group-version.yaml" -o out/p.amp
	assert_failure 1
	run ls -A out
	assert_output ""
	echo 'previous contents' > out/p.amp
	run amp-emit --no-model --fragment-limit 0 "$TINY" -o out/p.amp
	assert_failure 1
	run amp-emit --no-model "$SIGLIP" -o out/p.amp
	assert_failure 1
	run cat out/p.amp
	assert_output 'previous contents'
	run ls -A out
	assert_output 'p.amp'
}

@test "emit -o into a missing directory fails with status 1 naming the target" {
	run --separate-stderr amp-emit --no-model "$TINY" -o nodir/p.amp
	assert_failure 1
	assert_regex "$stderr" "^amp-emit: cannot create 'nodir/p\.amp"
	assert [ ! -e nodir ]
}

@test "emit gives identical bytes for the same input twice" {
	siglip_ok
	for flags in '' '-z' '--table-budget 200000'; do
		# shellcheck disable=SC2086
		run amp-emit --no-model $flags "$TINY" -o one.amp
		assert_success
		# shellcheck disable=SC2086
		run amp-emit --no-model $flags "$TINY" -o two.amp
		assert_success
		run cmp one.amp two.amp
		assert_success
	done
	run amp-emit --no-model --table-budget 200000 "$SIGLIP" -o again.amp
	assert_success
	run cmp "$SIGLIP_PROG" again.amp
	assert_success
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

# ---- E. malformed programs ----

@test "a program with another magic number is rejected" {
	run head -c 7 "$BAD/program-bad-magic.amp"
	assert_output 'AMPPROX'
	rejects_program "$BAD/program-bad-magic.amp" ""
}

@test "a program of an unsupported version is rejected" {
	rejects_program "$BAD/program-version.amp" "unsupported program version 4"
}

@test "a program cut inside its header is rejected" {
	run stat -c %s "$BAD/program-short.amp"
	assert_output 12
	rejects_program "$BAD/program-short.amp" ""
}

@test "a program cut in the middle is rejected" {
	rejects_program "$BAD/program-truncated.amp" "past the end of the file"
}

@test "a program whose section table lacks a section is rejected" {
	rejects_program "$BAD/program-missing-section.amp" "missing section TABLE"
}

@test "a program whose ROWS zstd frame is corrupt is rejected" {
	rejects_program "$BAD/program-corrupt-zstd.amp" "corrupt"
}

# Counts that claim more than the file holds (tiny-mlp's program with one
# section rewritten; ROWS and TABLE stored raw, encoding 0): refused from
# the bytes present, before any allocation they would size.
@test "a program whose ROWS zstd frame claims 8 GiB of content is rejected without allocating it" {
	rejects_program "$BAD/program-zstd-size.amp" "zstd frame is corrupt"
}

@test "a program whose ROWS section counts 2^31-1 rows is rejected" {
	rejects_program "$BAD/program-row-count.amp" "the ROWS section counts more rows than it holds"
}

@test "a program whose TABLE section counts 2^31-1 entries is rejected" {
	rejects_program "$BAD/program-table-count.amp" "the TABLE section counts more entries than it holds"
}

@test "a program whose TABLE entry counts 2^28-1 addresses is rejected" {
	rejects_program "$BAD/program-patch-count.amp" "a TABLE entry counts more addresses than its row has instructions"
}

@test "a program whose last row holds an unknown opcode is rejected naming the file, with no partial listing" {
	rejects_program "$BAD/program-row-opcode.amp" "program row 52 (tile 27, phase 8) is malformed"
}

# The STAGE text against the rows: its hash, and the program amp-emit would
# build from it, decoded and compared instruction by instruction.
@test "a program whose STAGE text was edited (one digit) is rejected by its hash" {
	rejects_program "$BAD/program-stage-hash.amp" "the STAGE section does not match its hash"
}

@test "a program whose STAGE comes from another plan of the model is rejected: its entries differ" {
	rejects_program "$BAD/program-stage-mismatch.amp" "the TABLE has 495 (tile, phase) entries, the STAGE's transfers make 555"
}

@test "a program whose STAGE moves one destination by 32 bytes, its hash made to match, is rejected by decoding" {
	rejects_program "$BAD/program-stage-address.amp" "tile 5, phase 8: instruction 25 of its row does not match the STAGE's transfers (another address)"
}

@test "emit --model --scales embeds both, hashed, and amp-run checks the stage against them" {
	amp-run --calibrate "$MODELS/tiny-mlp.yaml" -o scales.yaml
	amp-plan --scales scales.yaml "$MODELS/tiny-mlp.yaml" | amp-compose | amp-expand | amp-exchange |
		amp-group > scaled.yaml
	run amp-emit --model "$MODELS/tiny-mlp.yaml" --scales scales.yaml -o embedded.amp scaled.yaml
	assert_success
	run sections embedded.amp
	local secs=("${lines[@]}")
	assert_equal "${#secs[@]}" 6
	read -r id enc off size <<< "${secs[4]}"
	assert_equal "$id $enc" "5 0"
	tail -c +$((off + 9)) embedded.amp | head -c $((size - 8)) > model.txt
	run cmp model.txt "$MODELS/tiny-mlp.yaml"
	assert_success
	read -r id enc off size <<< "${secs[5]}"
	assert_equal "$id $enc" "6 0"
	tail -c +$((off + 9)) embedded.amp | head -c $((size - 8)) > scales.txt
	run cmp scales.txt scales.yaml
	assert_success
	run --separate-stderr amp-run embedded.amp
	assert_success
	assert_line --index 0 --regexp '^movement: byte-exact after every phase'
}

@test "emit --model refuses a stage that disagrees with the model, naming it, and writes nothing" {
	run --separate-stderr amp-emit --model "$MODELS/tiny-mlp.yaml" -o out.amp "$ROOT/tests/faults/wrong-eps.yaml"
	assert_failure 1
	assert_regex "$stderr" "^amp-emit: .*tiny-mlp.yaml:[0-9]+:[0-9]+: op 'ln': the stage's layernorm step 2 has eps 0.5, the model 1e-06$"
	assert [ ! -e out.amp ]
	run --separate-stderr amp-emit --no-model --scales "$ROOT/tests/fuzz/scales/one.yaml" -o out.amp "$TINY"
	assert_failure 2
	assert_regex "$stderr" "^amp-emit: --scales needs --model"
}

@test "a program whose embedded model was edited after its hash is rejected" {
	rejects_program "$BAD/program-model-hash.amp" "the MODEL section is not raw or does not match its hash"
}

@test "amp-run checks a program against its embedded model: a model whose eps differs is named" {
	run --separate-stderr amp-run "$BAD/program-model-eps.amp"
	assert_failure 1
	assert_regex "$stderr" "^amp-run: .*program-model-eps.amp\\(MODEL\\):[0-9]+:[0-9]+: op 'ln': the stage's layernorm step 2 has eps 1e-06, the model 0.5$"
}

@test "amp-run, amp-capture and amp-emit --list stop reading an endless input at 1 GiB" {
	for tool in "amp-run" "amp-capture" "amp-emit --list"; do
		run --separate-stderr $tool /dev/zero
		assert_failure 1
		assert_equal "$output" ""
		assert_equal "${#stderr_lines[@]}" 1
		[[ "$stderr" == *"'/dev/zero'"* ]] || fail "$tool: expected '/dev/zero' in: $stderr"
	done
}

@test "a program cut anywhere is rejected, never crashes" {
	size=$(stat -c %s "$TINY_PROG")
	for n in 8 12 15 16 40 88 100 $((size / 3)) $((size - 1)); do
		head -c "$n" "$TINY_PROG" > cut.amp
		run --separate-stderr amp-emit --list cut.amp
		assert_failure 1
		assert_equal "$output" ""
		assert_regex "$stderr" "^amp-emit: .*cut\.amp"
		run --separate-stderr amp-capture cut.amp
		assert_failure 1
		assert_equal "$output" ""
		assert_regex "$stderr" "^amp-capture: .*cut\.amp"
	done
}
