#!/usr/bin/env bats
# Addresses within the machine: amp-emit refuses a placement that reaches
# past the SRAM planned data may use (sram_bytes - reserved_bytes, or
# --sram-limit), and a machine whose SRAM a program's 32-bit addresses
# cannot reach. The boundary: a placement ending exactly at the top is
# emitted; one byte further is not. Limits come from the machine file:
# amp-emit, amp-capture and amp-run refuse a stage header that differs
# from it, and a machine file other than the one the stage was planned
# with (by the provenance's hash).

load common
bats_require_minimum_version 1.5.0

G=$ROOT/tests/golden/tiny-mlp/grouped.yaml

# at ADDR: tiny-mlp's grouped stage with x@canon (160 bytes a tile) at ADDR
at() {
	sed "s/^\(- {name: x@canon, .*addr: \)512}\$/\1$1}/" "$G" >moved.yaml
	grep -q "^- {name: x@canon, .*addr: $1}\$" moved.yaml || fail "x@canon not moved to $1"
}

@test "a placement ending exactly at the top of planned data is emitted" {
	at 586800           # 586800 + 160 = 586960 = sram_bytes - reserved_bytes
	run --separate-stderr amp-emit --no-model -o prog moved.yaml
	assert_success
	[ -s prog ]
}

@test "a placement one byte past the top of planned data is refused, and no program written" {
	at 586801
	run --separate-stderr amp-emit --no-model -o prog moved.yaml
	assert_failure 1
	[[ $stderr == "amp-emit: placement 'x@canon' occupies bytes 586801..586961 of its tiles, beyond the 586960 available for planned data (sram_bytes - reserved_bytes)" ]] ||
		fail "$stderr"
	[ ! -e prog ]
}

@test "--sram-limit moves the top: the same placement passes a raised limit, fails a lowered one" {
	at 586801
	run --separate-stderr amp-emit --no-model --sram-limit 600000 -o prog moved.yaml
	assert_success
	at 512
	run --separate-stderr amp-emit --no-model --sram-limit 600 -o prog2 moved.yaml
	assert_failure 1
	[[ $stderr == *"beyond the 600 available for planned data (--sram-limit)"* ]] || fail "$stderr"
}

# lowered SRAM: tiny-mlp planned, lowered and emitted on amp1472 with
# sram_bytes SRAM (machine file m.yaml), emit's status and stderr in run's
lowered_on() {
	sed "s/^sram_bytes: 638976 /sram_bytes: $1 /" "$MACHINES/amp1472.yaml" >m.yaml
	grep -q "^sram_bytes: $1 " m.yaml || fail "no sram_bytes to set"
	amp-plan --machine m.yaml "$MODELS/tiny-mlp.yaml" | amp-compose | amp-expand | amp-exchange | amp-group >g.yaml
	run --separate-stderr amp-emit --no-model --machine m.yaml -o prog g.yaml
}

@test "a machine with more SRAM than 32-bit addresses reach is refused" {
	lowered_on 4294967297
	assert_failure 1
	[[ $stderr == *"sram_bytes 4294967297 is over 4294967296: a program's addresses are 32 bits"* ]] || fail "$stderr"
	[ ! -e prog ]
	# exactly 2^32 is within reach
	lowered_on 4294967296
	assert_success
}

@test "limits come from the machine file: a stage header that raises one is refused by amp-emit, amp-capture and amp-run" {
	# max_transfer_bytes raised in the header, and one send longer than the machine allows
	sed -e 's/max_transfer_bytes: 16592/max_transfer_bytes: 65536/' "$G" |
		awk '!done && / kind: send, len: [0-9]+, / { sub(/ len: [0-9]+,/, " len: 51200,"); done = 1 } { print }' >raised.yaml
	grep -q 'max_transfer_bytes: 65536' raised.yaml && grep -q 'len: 51200,' raised.yaml || fail "not edited"
	local msg="the stage's machine header has max_transfer_bytes 65536; machine file 'amp1472.yaml' has 16592 (limits and rates come from the machine file, not from the stage)"
	run --separate-stderr amp-emit --no-model -o prog raised.yaml
	assert_failure 1
	assert_equal "$stderr" "amp-emit: 'raised.yaml': $msg"
	[ ! -e prog ]
	run --separate-stderr amp-capture -o cap.json raised.yaml
	assert_failure 1
	assert_equal "$stderr" "amp-capture: 'raised.yaml': $msg"
	[ ! -e cap.json ]
	# a program whose embedded stage raises it, its hash made to match
	# (tests/bad/programs.py)
	run --separate-stderr amp-run "$BAD/program-raised-header.amp"
	assert_failure 1
	assert_equal "$stderr" "amp-run: '$BAD/program-raised-header.amp': $msg"
	# a study override is the program's own: amp-emit's provenance record names it
	amp-emit --no-model --table-budget 100000 --fragment-limit=9999 -o over.amp "$G"
	run amp-run over.amp
	assert_success
	run amp-capture over.amp
	assert_success
	# the same budget in a stage's header, with no amp-emit record naming it
	sed 's/table_budget_bytes: 81920/table_budget_bytes: 100000/' "$G" >budget.yaml
	run --separate-stderr amp-capture budget.yaml
	assert_failure 1
	[[ $stderr == *"header has table_budget_bytes 100000; machine file 'amp1472.yaml' has 81920 "* ]] || fail "$stderr"
	# a rate: the matrix unit's fp8 MACs per cycle
	sed 's/amp_macs_per_cycle: {fp16: 64, fp8: 128}/amp_macs_per_cycle: {fp16: 64, fp8: 256}/' "$G" >macs.yaml
	grep -q 'fp8: 256}' macs.yaml || fail "no rate to raise"
	run --separate-stderr amp-capture macs.yaml
	assert_failure 1
	[[ $stderr == *"header has amp_macs_per_cycle {fp16: 64, fp8: 256}; machine file 'amp1472.yaml' has {fp16: 64, fp8: 128} "* ]] ||
		fail "$stderr"
}

@test "the machine file must be the one the stage was planned with: by hash, found by name, or named with --machine" {
	amp-emit --no-model -o prog "$G"             # found in the shared machines by its recorded name
	cp "$MACHINES/amp1472.yaml" edited.yaml
	echo "# a comment changes the hash" >>edited.yaml
	run --separate-stderr amp-emit --no-model --machine edited.yaml -o prog2 "$G"
	assert_failure 1
	local h=$(sed -n 's/.*role: machine, name: amp1472.yaml, fnv1a: \([0-9a-f]*\)}.*/\1/p' "$G" | head -n 1)
	[ -n "$h" ] || fail "no machine digest in $G"
	[[ $stderr == "amp-emit: '$G': machine file 'edited.yaml' (fnv1a "*") is not the one the stage was planned with ('amp1472.yaml', fnv1a $h): plan again, or name that file with --machine FILE" ]] ||
		fail "$stderr"
	[ ! -e prog2 ]
	run --separate-stderr amp-run --machine edited.yaml prog
	assert_failure 1
	[[ $stderr == *"is not the one the stage was planned with"* ]] || fail "$stderr"
	# a stage planned with a machine file the shared directory does not hold
	cp "$MACHINES/amp1472.yaml" mine.yaml
	echo "# mine" >>mine.yaml
	amp-plan --machine mine.yaml "$MODELS/tiny-mlp.yaml" | amp-compose | amp-expand | amp-exchange | amp-group >g.yaml
	run --separate-stderr amp-emit --no-model -o prog3 g.yaml
	assert_failure 1
	[[ $stderr == "amp-emit: 'g.yaml': the stage was planned with machine file 'mine.yaml' (fnv1a "*"), which is not in "*"/machines: name it with --machine FILE" ]] ||
		fail "$stderr"
	amp-emit --no-model --machine mine.yaml -o prog3 g.yaml
	run amp-run --machine mine.yaml prog3
	assert_success
	run --separate-stderr amp-run prog3
	assert_failure 1
	[[ $stderr == *"'mine.yaml'"*"name it with --machine FILE" ]] || fail "$stderr"
}
