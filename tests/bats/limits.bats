#!/usr/bin/env bats
# Addresses within the machine: amp-emit refuses a placement that reaches
# past the SRAM planned data may use (sram_bytes - reserved_bytes, or
# --sram-limit), and a machine whose SRAM a program's 32-bit addresses
# cannot reach. The boundary: a placement ending exactly at the top is
# emitted; one byte further is not.

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
	run --separate-stderr amp-emit -o prog moved.yaml
	assert_success
	[ -s prog ]
}

@test "a placement one byte past the top of planned data is refused, and no program written" {
	at 586801
	run --separate-stderr amp-emit -o prog moved.yaml
	assert_failure 1
	[[ $stderr == "amp-emit: placement 'x@canon' occupies bytes 586801..586961 of its tiles, beyond the 586960 available for planned data (sram_bytes - reserved_bytes)" ]] ||
		fail "$stderr"
	[ ! -e prog ]
}

@test "--sram-limit moves the top: the same placement passes a raised limit, fails a lowered one" {
	at 586801
	run --separate-stderr amp-emit --sram-limit 600000 -o prog moved.yaml
	assert_success
	at 512
	run --separate-stderr amp-emit --sram-limit 600 -o prog2 moved.yaml
	assert_failure 1
	[[ $stderr == *"beyond the 600 available for planned data (--sram-limit)"* ]] || fail "$stderr"
}

@test "a machine header with more SRAM than 32-bit addresses reach is refused" {
	sed -e 's/sram_bytes: 638976/sram_bytes: 4294967297/' "$G" >big.yaml
	grep -q 'sram_bytes: 4294967297' big.yaml || fail "no sram_bytes to raise"
	run --separate-stderr amp-emit -o prog big.yaml
	assert_failure 1
	[[ $stderr == *"sram_bytes 4294967297 is over 4294967296: a program's addresses are 32 bits"* ]] || fail "$stderr"
	# exactly 2^32 is within reach
	sed -e 's/sram_bytes: 638976/sram_bytes: 4294967296/' "$G" >edge.yaml
	run --separate-stderr amp-emit -o prog edge.yaml
	assert_success
}
