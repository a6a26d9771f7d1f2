#!/usr/bin/env bats
# amp-run: program -> execution on the machine model, the byte-exact
# movement check after every phase and the FP32 comparison of each output
# (docs/machine.md §8). The command-line contract, --data and --save, and
# malformed inputs (tests/bad/run-*, program-*). The other suites:
# amp-run-checks (calibration, tiny-mlp and siglip-mlp passing both checks,
# the model's reference) and amp-run-faults (faults injected into a grouped
# stage).

load common
load stages
load amp-run
bats_require_minimum_version 1.5.0

setup_file() {
	run_fixtures tiny
}

# npy DESCR SHAPE DATA_BYTES FILE: a version 1.0 .npy of DATA_BYTES zero
# bytes, its preamble padded to a multiple of 64 as np.save does.
npy() {
	local h="{'descr': '$1', 'fortran_order': False, 'shape': $2, }" len
	len=$(( (10 + ${#h} + 1 + 63) / 64 * 64 - 10 ))
	while [ ${#h} -lt $((len - 1)) ]; do h="$h "; done
	{
		printf '\223NUMPY\001\000'
		printf "\\$(printf %03o $((len & 255)))\\$(printf %03o $((len >> 8)))"
		printf '%s\n' "$h"
		head -c "$3" /dev/zero
	} > "$4"
}

# ---- A. command-line contract ----

@test "run --help prints usage, the options and exit statuses to stdout and exits 0" {
	run --separate-stderr amp-run --help
	assert_success
	assert_line --index 0 --regexp '^Usage: amp-run .*PROGRAM'
	for opt in --data --seed --save --min-cosine --calibrate --machine --output --help --version; do
		assert_output --partial -- "$opt"
	done
	assert_output --partial 'Exit status: 0 both checks pass, 1 bad input, a wrong byte, an output'
	assert_output --partial '2 usage error'
	assert_equal "$stderr" ""
}

@test "run --version prints the tool name and version" {
	run --separate-stderr amp-run --version
	assert_success
	assert_output --regexp '^amp-run \(amp\) [0-9]+\.[0-9]+\.[0-9]+$'
	assert_equal "$stderr" ""
}

@test "run rejects an unknown option with usage status 2" {
	run --separate-stderr amp-run --bogus "$TINY_PROG"
	assert_failure 2
	assert_equal "$output" ""
	assert_regex "$stderr" "^amp-run: .*'--bogus'"
	assert_regex "$stderr" "Try 'amp-run --help'"
}

@test "run rejects two programs with usage status 2" {
	run --separate-stderr amp-run "$TINY_PROG" "$TINY_PROG"
	assert_failure 2
	assert_equal "$output" ""
	assert_regex "$stderr" "Try 'amp-run --help'"
}

@test "run reads the program from stdin or '-' when no file is named" {
	passes - < "$TINY_BARE_PROG"
	local dash=$output
	run --separate-stderr amp-run < "$TINY_BARE_PROG"
	assert_success
	assert_equal "$output" "$dash"
	passes "$TINY_BARE_PROG"
	assert_equal "$output" "$dash"
	# with the model embedded, the reference line names the input as given
	passes - < "$TINY_PROG"
	assert_line --index 1 "reference: FP32 from the model's ops (-(MODEL))"
	run --separate-stderr amp-run < "$TINY_PROG"
	assert_success
	assert_line --index 1 "reference: FP32 from the model's ops (<stdin>(MODEL))"
}

@test "run refuses a grouped stage instead of a program with status 1 naming it" {
	run --separate-stderr amp-run "$TINY"
	assert_failure 1
	assert_equal "$output" ""
	assert_regex "$stderr" "^amp-run: '.*tiny\.yaml': not a program"
	run --separate-stderr amp-run < "$TINY"
	assert_failure 1
	assert_equal "$output" ""
	assert_regex "$stderr" "^amp-run: '<stdin>': not a program"
}

@test "run reports a missing program file with status 1 naming it" {
	run --separate-stderr amp-run nosuch.amp
	assert_failure 1
	assert_equal "$output" ""
	assert_equal "$stderr" "amp-run: cannot open 'nosuch.amp': No such file or directory"
}

@test "run --calibrate without -o is a usage error" {
	mkdir work && cd work
	run --separate-stderr amp-run --calibrate "$MODELS/tiny-mlp.yaml"
	assert_failure 2
	assert_equal "$output" ""
	assert_regex "$stderr" '^amp-run: .*-o'
	assert_regex "$stderr" "Try 'amp-run --help'"
	run ls -A
	assert_output ""
}

@test "run --calibrate with a program too is a usage error" {
	run --separate-stderr amp-run --calibrate "$MODELS/tiny-mlp.yaml" -o s.yaml "$TINY_PROG"
	assert_failure 2
	assert_regex "$stderr" "^amp-run: .*tiny\.amp"
	assert_regex "$stderr" "Try 'amp-run --help'"
	assert [ ! -e s.yaml ]
}

@test "run rejects a --seed that is not a non-negative integer with usage status 2" {
	for v in -1 x 1x 1.5 99999999999999999999999 ''; do
		run --separate-stderr amp-run --seed "$v" "$TINY_PROG"
		assert_failure 2
		assert_equal "$output" ""
		assert_regex "$stderr" "^amp-run: --seed .*'$v'"
		assert_regex "$stderr" "Try 'amp-run --help'"
	done
	run --separate-stderr amp-run "$TINY_PROG" --seed
	assert_failure 2
	assert_regex "$stderr" "^amp-run: .*--seed"
}

@test "run rejects a --min-cosine outside -1..1 or not a number with usage status 2" {
	for v in 2 -1.5 x 0.5x nan ''; do
		run --separate-stderr amp-run --min-cosine "$v" "$TINY_PROG"
		assert_failure 2
		assert_equal "$output" ""
		assert_regex "$stderr" "^amp-run: --min-cosine .*'$v'"
		assert_regex "$stderr" "Try 'amp-run --help'"
	done
}

@test "run exits 1 when an output's cosine is below --min-cosine, still reporting it" {
	run --separate-stderr amp-run --min-cosine 1 "$TINY_PROG"
	assert_failure 1
	assert_line --index 0 --regexp '^movement: byte-exact'
	assert_line --regexp '^output z: cosine '
	c=$(cosine "$output" z)
	run awk -v c="$c" 'BEGIN { exit !(c < 1) }'
	assert_success
	assert_regex "$stderr" '^amp-run: .*cosine is below 1 \(--min-cosine\)$'
	passes "$TINY_PROG" --min-cosine -1
	# just below the printed (rounded) cosine
	passes "$TINY_PROG" --min-cosine "$(awk -v c="$c" 'BEGIN { printf "%.6f", c - 0.000001 }')"
}

# ---- D. data ----

@test "run --save writes each output and its FP32 reference as .npy" {
	mkdir out
	passes "$TINY_PROG" --save out
	run ls -A out
	assert_output "z.npy
z.ref.npy"
	for f in z.npy z.ref.npy; do
		run od -An -c -N6 "out/$f"
		assert_output --regexp '^ +223 +N +U +M +P +Y$'
		run grep -c "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 37, 80), }" "out/$f"
		assert_output 1
		run stat -c %s "out/$f"
		assert_output $((128 + 2 * 37 * 80 * 4))
	done
	# the machine's fp8 result is not the FP32 reference
	run cmp -s out/z.npy out/z.ref.npy
	assert_failure 1
}

@test "run --save into a missing directory fails with status 1 naming the file" {
	run --separate-stderr amp-run --save nodir "$TINY_PROG"
	assert_failure 1
	assert_regex "$stderr" "^amp-run: cannot create 'nodir/z\.npy'"
	assert [ ! -e nodir ]
}

@test "run --data refuses a NaN, an infinity or a value past the tensor's format, naming the file, not the machine" {
	mkdir saved bad
	passes "$TINY_PROG" --save saved
	local n h v
	n=$(wc -c < saved/z.npy) h=$(( $(wc -c < saved/z.npy) - 2 * 37 * 80 * 4 ))
	# x[5] replaced by NaN, +inf and 65536 (past fp16's 65504)
	for v in '\000\000\300\177:NaN at index 5: data must be finite' '\000\000\200\177:+inf at index 5: data must be finite' \
		'\000\000\200\107:a value past what fp16 holds at index 5'; do
		{ head -c $((h + 20)) saved/z.npy; printf "${v%%:*}"; tail -c $((n - h - 24)) saved/z.npy; } > bad/x.npy
		[ "$(wc -c < bad/x.npy)" = "$n" ] || fail "bad/x.npy is $(wc -c < bad/x.npy) bytes, not $n"
		run --separate-stderr amp-run --data bad "$TINY_PROG"
		assert_failure 1
		[[ $stderr == *"'bad/x.npy': tensor 'x' holds ${v#*:}"* ]] || fail "unexpected: $stderr"
		[[ $stderr != *"machine"* ]] || fail "the machine is blamed: $stderr"
	done
}

@test "run --data reads an input from DIR/<tensor>.npy instead of generating it" {
	passes "$TINY_PROG"
	local generated
	generated=$(cosine "$output" z)
	mkdir saved data
	passes "$TINY_PROG" --save saved
	cp saved/z.npy data/x.npy
	passes "$TINY_PROG" --data data
	[ "$(cosine "$output" z)" != "$generated" ] || fail "--data data/x.npy gives the generated x's cosine $generated"
	# all-zero x, built by hand
	mkdir zero
	npy '<f4' '(2, 37, 80)' $((2 * 37 * 80 * 4)) zero/x.npy
	passes "$TINY_PROG" --data zero
	[ "$(cosine "$output" z)" != "$generated" ] || fail "--data zero/x.npy gives the generated x's cosine $generated"
}

@test "run counts writes: a receive missing where the poison holds the right bytes is refused, naming the bytes" {
	# ln_s all 0xA5 bytes, the value amp-run poisons a destination with, so
	# a receiver that loses ln_s's multicast still holds the right bytes:
	# only counting the writes sees that nothing wrote them
	local g=$ROOT/tests/golden/tiny-mlp/grouped.yaml h len
	awk '!done && / kind: send, / && match($0, /recv: \[[0-9]+,/) { n = substr($0, RSTART + 7, RLENGTH - 8) + 0
		if (n > 1) { $0 = substr($0, 1, RSTART - 1) "recv: [" n - 1 "," substr($0, RSTART + RLENGTH); done = 1 } } 1' \
		"$g" > dropped.yaml
	! cmp -s "$g" dropped.yaml || fail "no multicast lost a receiver"
	amp-emit --no-model -o good.amp "$g"
	amp-emit --no-model -o dropped.amp dropped.yaml
	mkdir data
	h="{'descr': '<f2', 'fortran_order': False, 'shape': (80,), }"
	len=$(( (10 + ${#h} + 1 + 63) / 64 * 64 - 10 ))
	while [ ${#h} -lt $((len - 1)) ]; do h="$h "; done
	{
		printf '\223NUMPY\001\000'
		printf "\\$(printf %03o $((len & 255)))\\$(printf %03o $((len >> 8)))"
		printf '%s\n' "$h"
		head -c 160 /dev/zero | tr '\000' '\245'
	} > data/ln_s.npy
	run --separate-stderr amp-run --data data good.amp
	assert_success
	run --separate-stderr amp-run --data data dropped.amp
	assert_failure 1
	[[ $stderr == *"amp-run: tile 73, phase 0: tensor 'ln_s' (placement 'ln_s@owners') bytes 672..832: written 0 times (missing) by step 0; 0 of the shard's 160 bytes written" ]] ||
		fail "$stderr"
}

@test "run --data rejects an .npy with a bad header naming the file" {
	mkdir data
	cp "$BAD/run-bad-header.npy" data/x.npy
	run --separate-stderr amp-run --data data "$TINY_PROG"
	assert_failure 1
	assert_equal "$output" ""
	assert_regex "$stderr" "^amp-run: 'data/x\.npy': .*header"
}

@test "run --data rejects an .npy of the wrong shape naming the file and the tensor" {
	mkdir data
	npy '<f4' '(2, 37, 81)' $((2 * 37 * 81 * 4)) data/x.npy
	run --separate-stderr amp-run --data data "$TINY_PROG"
	assert_failure 1
	assert_equal "$output" ""
	assert_regex "$stderr" "^amp-run: 'data/x\.npy': .*shape"
	assert_regex "$stderr" "tensor 'x'"
}

@test "run --data rejects an .npy of bytes, not floats, naming the file once and its dtype" {
	mkdir data
	npy '|u1' '(2, 37, 80)' $((2 * 37 * 80)) data/x.npy
	run --separate-stderr amp-run --data data "$TINY_PROG"
	assert_failure 1
	assert_equal "$output" ""
	assert_regex "$stderr" "^amp-run: 'data/x\.npy': "
	assert_regex "$stderr" "tensor 'x'"
	# the reader's reason survives: it names the dtype it found
	assert_regex "$stderr" "'\\|u1'"
	[[ "${stderr#*data/x.npy}" != *data/x.npy* ]] || fail "file named twice: $stderr"
}

@test "run --data rejects an .npy whose data is short naming the file" {
	mkdir data
	npy '<f4' '(2, 37, 80)' $((2 * 37 * 80 * 4 - 4)) data/x.npy
	run --separate-stderr amp-run --data data "$TINY_PROG"
	assert_failure 1
	assert_equal "$output" ""
	assert_regex "$stderr" "^amp-run: 'data/x\.npy': "
}

# ---- E. malformed programs ----

@test "run rejects a program whose TABLE section is missing, naming the file" {
	cp "$TINY_PROG" p.amp
	n=$(field p.amp 12 4)
	assert [ "$n" -ge 3 ]
	for ((i = 0; i < n; i++)); do
		[ "$(field p.amp $((16 + 24 * i)) 4)" != 3 ] || break
	done
	assert [ "$i" -lt "$n" ]
	printf '\0\0\0\0' | dd of=p.amp bs=1 seek=$((16 + 24 * i)) conv=notrunc status=none
	run cmp -s "$TINY_PROG" p.amp
	assert_failure 1
	run --separate-stderr amp-run p.amp
	assert_failure 1
	assert_equal "$output" ""
	assert_equal "$stderr" "amp-run: 'p.amp': missing section TABLE"
}

@test "run rejects a program cut after its section table, naming the file" {
	n=$(field "$TINY_PROG" 12 4)
	head -c $((16 + 24 * n)) "$TINY_PROG" > cut.amp
	run --separate-stderr amp-run cut.amp
	assert_failure 1
	assert_equal "$output" ""
	assert_regex "$stderr" "^amp-run: 'cut\.amp': "
}

@test "run rejects every malformed program in tests/bad with status 1 naming the file" {
	local n=0
	for f in "$BAD"/program-*.amp; do
		run --separate-stderr amp-run "$f"
		assert_failure 1
		assert_equal "$output" ""
		assert_equal "${#stderr_lines[@]}" 1
		[[ "$stderr" == "amp-run: "*"$(basename "$f")"* ]] || fail "expected $(basename "$f") in: $stderr"
		n=$((n + 1))
	done
	assert [ "$n" -ge 5 ]
}
