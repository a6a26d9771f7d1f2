#!/usr/bin/env bats
# amp-emit: grouped stage -> program (formats/program.md). The command-line
# contract and malformed programs (tests/bad/program-*), which amp-capture
# must reject too. The other suites: amp-emit-program (the program's layout
# and its listing round trip) and amp-emit-limits (the per-tile limits,
# docs/machine.md §2: table budget, fragment limit, SRAM).

load common
load stages
load amp-emit
bats_require_minimum_version 1.5.0

setup_file() {
	emit_fixtures tiny siglip-program
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
