#!/usr/bin/env bats
# amp-run: faults injected into tiny-mlp's grouped stage, each named by
# amp-run (or refused by amp-emit) at its tile and phase.

load common
load stages
load amp-run
bats_require_minimum_version 1.5.0

setup_file() {
	run_fixtures tiny
}

# refuses STAGE: amp-emit still emits the edited STAGE, and amp-run exits 1
# on the program with one message naming a tile and a phase, and no result.
refuses() {
	run amp-emit --model "$MODELS/tiny-mlp.yaml" --scales "$TINY_SCALES" "$1" -o faulty.amp
	assert_success
	run --separate-stderr amp-run faulty.amp
	assert_failure 1
	assert_equal "$output" ""
	assert_equal "${#stderr_lines[@]}" 1
	assert_regex "$stderr" '^amp-run: tile [0-9]+, phase [0-9]+: '
}

# names_byte PHASE TENSOR: the message names PHASE, TENSOR and the wrong
# byte, expected and found (the value check: every write was counted).
names_byte() {
	assert_regex "$stderr" "^amp-run: tile [0-9]+, phase $1: "
	[[ "$stderr" == *"tensor '$2'"* ]] || fail "expected tensor '$2' in: $stderr"
	assert_regex "$stderr" "offset [0-9]+: expected 0x[0-9a-f]{2}, found 0x[0-9a-f]{2}\$"
}

# names_missing PHASE TENSOR STEP: the message names PHASE, TENSOR and the
# bytes that STEP's writes left unwritten (amp-run counts the writes before
# it compares values, so whatever the poison left there).
names_missing() {
	assert_regex "$stderr" "^amp-run: tile [0-9]+, phase $1: "
	[[ "$stderr" == *"tensor '$2'"* ]] || fail "expected tensor '$2' in: $stderr"
	assert_regex "$stderr" "bytes [0-9]+\\.\\.[0-9]+: written 0 times \\(missing\\) by step $3; [0-9]+ of the shard's [0-9]+ bytes written\$"
}

# ---- C. faults injected into tiny-mlp's grouped stage ----

# shift_send STAGE STEP FIELD BY: STAGE with the address in FIELD (src or
# dst) of STEP's first send moved BY bytes, on standard output.
shift_send() {
	awk -v s="$2" -v k="$3" -v by="$4" '!done && $0 ~ "^- \\{step: " s ", kind: send, " {
		match($0, k ": \\[[0-9]+, [0-9]+\\]")
		split(substr($0, RSTART, RLENGTH), f, /[][, ]+/)
		$0 = substr($0, 1, RSTART - 1) k ": [" f[2] ", " f[3] + by "]" substr($0, RSTART + RLENGTH)
		done = 1
	} 1' "$1"
}

@test "run names tile, phase and the destination when a receive address is shifted by 32 past its end" {
	s=$(step_of "$TINY" mlp_up a)
	assert [ -n "$s" ]
	shift_send "$TINY" "$s" dst 32 > shifted.yaml
	edited "$TINY" shifted.yaml
	refuses shifted.yaml
	# the stray-write check sees it first: the shifted receive leaves its destination
	assert_regex "$stderr" "^amp-run: tile [0-9]+, phase $(phase_of "$TINY" "$s"): a receive writes bytes [0-9]+\\.\\.[0-9]+ outside the destination '$(dst_tensor "$TINY" "$s")@[^']+' of its step $s, into "
}

@test "run names the byte when a send reads the wrong bytes of its source: every write counted, a value wrong" {
	s=$(step_of "$TINY" mlp_up a)
	assert [ -n "$s" ]
	shift_send "$TINY" "$s" src 8 > misread.yaml
	edited "$TINY" misread.yaml
	refuses misread.yaml
	names_byte "$(phase_of "$TINY" "$s")" "$(dst_tensor "$TINY" "$s")"
}

@test "run names tile and phase when a send is dropped" {
	s=$(step_of "$TINY" mlp_down a)
	assert [ -n "$s" ]
	awk -v s="$s" '!done && $0 ~ "^- \\{step: " s ", kind: send, " { done = 1; next } 1' "$TINY" > dropped.yaml
	edited "$TINY" dropped.yaml
	refuses dropped.yaml
	names_missing "$(phase_of "$TINY" "$s")" "$(dst_tensor "$TINY" "$s")" "$s"
}

@test "run names tile and phase when a receiver is removed from a multicast" {
	awk '!done && / kind: send, / && match($0, /recv: \[[0-9]+,/) {
		n = substr($0, RSTART + 7, RLENGTH - 8) + 0
		if (n > 1) {
			$0 = substr($0, 1, RSTART - 1) "recv: [" n - 1 "," substr($0, RSTART + RLENGTH)
			done = 1
			s = $0; sub(/^- \{step: /, "", s); sub(/,.*/, "", s); print s > "step.txt"
		}
	} 1' "$TINY" > fewer.yaml
	edited "$TINY" fewer.yaml
	s=$(cat step.txt)
	refuses fewer.yaml
	names_missing "$(phase_of "$TINY" "$s")" "$(dst_tensor "$TINY" "$s")" "$s"
}

# emit_refuses STAGE REGEX: amp-emit fails with status 1 and one line
# matching REGEX, and writes no program.
emit_refuses() {
	run --separate-stderr amp-emit --no-model "$1" -o faulty.amp
	assert_failure 1
	assert_equal "${#stderr_lines[@]}" 1
	assert_regex "$stderr" "$2"
	assert [ ! -e faulty.amp ]
}

@test "emit refuses a stage whose forward is moved before the delivery it reads, naming phase and tile" {
	# a delivery (one receiver) followed by the forward that reads its
	# destination, swapped
	awk '
	function at(s, k) {
		if (!match(s, k ": \\[-?[0-9]+, -?[0-9]+\\]")) return ""
		return substr(s, RSTART, RLENGTH)
	}
	{ line[NR] = $0 }
	END {
		for (i = 1; i < NR; i++) {
			a = line[i]; b = line[i + 1]; da = at(a, "dst"); sb = at(b, "src")
			sub(/^dst/, "", da); sub(/^src/, "", sb)
			if (a ~ / kind: send, .* recv: \[1, 0\]/ && b ~ / kind: send, / && da == sb) {
				line[i] = b; line[i + 1] = a
				s = a; sub(/^- \{step: /, "", s); sub(/,.*/, "", s); print s > "step.txt"
				break
			}
		}
		for (i = 1; i <= NR; i++) print line[i]
	}' "$TINY" > reordered.yaml
	edited "$TINY" reordered.yaml
	s=$(cat step.txt)
	emit_refuses reordered.yaml "^amp-emit: phase $(phase_of "$TINY" "$s") \\(.*\\), tile [0-9]+: bytes [0-9]+\\.\\.[0-9]+ are read before the transfer that writes them in this phase"
}

@test "emit refuses a send longer than max_transfer_bytes, naming tile, phase and bytes" {
	awk '!done && / kind: send, len: [0-9]+, / { sub(/ len: [0-9]+,/, " len: 16593,"); done = 1 } { print }' \
		"$TINY" > long.yaml
	edited "$TINY" long.yaml
	emit_refuses long.yaml "^amp-emit: tile [0-9]+, phase [0-9]+ \\(step [0-9]+, op [a-z_]+\\): a send of 16593 bytes, over max_transfer_bytes \\(16592\\)$"
}

@test "run names tile, phase, bytes and the placement hit when a transfer also writes into another tensor" {
	# the last send, duplicated with its destination address set to 0: its
	# destination still gets every byte, so only the stray write is wrong
	awk '/ kind: send, / { last = NR } { line[NR] = $0 }
	END {
		for (i = 1; i <= NR; i++) {
			print line[i]
			if (i == last) {
				d = line[i]; match(d, /dst: \[[0-9]+, [0-9]+\]/)
				t = substr(d, RSTART, RLENGTH); sub(/, [0-9]+\]$/, ", 0]", t)
				print substr(d, 1, RSTART - 1) t substr(d, RSTART + RLENGTH)
			}
		}
	}' "$TINY" > stray.yaml
	edited "$TINY" stray.yaml
	run amp-emit --model "$MODELS/tiny-mlp.yaml" --scales "$TINY_SCALES" stray.yaml -o faulty.amp
	assert_success
	run --separate-stderr amp-run faulty.amp
	assert_failure 1
	assert_equal "$output" ""
	assert_equal "${#stderr_lines[@]}" 1
	assert_regex "$stderr" "^amp-run: tile [0-9]+, phase [0-9]+: a receive writes bytes 0\\.\\.[0-9]+ outside the destination '[^']+' of its step [0-9]+, into (placement '[^']+' \\((live|dead) at this step\\)|memory no placement owns)$"
}

@test "run names tile and phase when padding is left unwritten" {
	awk '!done && / kind: zero, / {
		done = 1
		s = $0; sub(/^- \{step: /, "", s); sub(/,.*/, "", s); print s > "step.txt"
		a = $0; sub(/.* dst: \[[0-9]+, /, "", a); sub(/\].*/, "", a); print a > "addr.txt"
		next
	} 1' "$TINY" > unpadded.yaml
	edited "$TINY" unpadded.yaml
	s=$(cat step.txt)
	refuses unpadded.yaml
	names_missing "$(phase_of "$TINY" "$s")" "$(dst_tensor "$TINY" "$s")" "$s"
	# the first byte missing is where the zero record would have started
	assert_regex "$stderr" "bytes $(cat addr.txt)\\.\\."
}
