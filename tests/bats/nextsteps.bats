#!/usr/bin/env bats
# "Does not fit" names the next step: every refusal of a model the machine
# cannot hold ends in "Next: ..." with what to change, most direct first (a
# pin when one op overflows, a smaller batch, a machine file with more
# tiles; nothing but a bigger machine when the parameters alone exceed it).

bats_require_minimum_version 1.5.0
load common

TINY=$MODELS/tiny-mlp.yaml

# machine KEY VALUE: amp1472 with KEY set to VALUE, as m.yaml.
machine() {
	sed "s/^$1: .*/$1: $2/" "$MACHINES/amp1472.yaml" >m.yaml
	grep -q "^$1: $2\$" m.yaml || fail "no $1 line"
}

@test "next steps: one op over the SRAM names the pin to try, a smaller batch and a bigger machine" {
	machine reserved_bytes 636000
	run --separate-stderr amp-plan --machine m.yaml -o p.yaml "$TINY"
	assert_failure 1
	[[ $stderr == *"(op 'mlp_down'); 2976 are available (sram_bytes - reserved_bytes). Next: pin 'mlp_down' to a grid over more tiles in the model's plan: (amp-plan --explain lists its grids); plan a smaller batch (this one is 2); or use a machine file with more tiles (share/machines/amp5888.yaml has 4x amp1472's)" ]] ||
		fail "$stderr"
	[ ! -e p.yaml ]
}

@test "next steps: an op name of 256 bytes (the model's limit) is whole in them, and so is what follows it" {
	# the next steps were written into 400 bytes, which cut the message
	# after such a name (issue 47)
	local op
	op=$(printf 'd%.0s' $(seq 256))
	machine reserved_bytes 636000
	sed "s/mlp_down/$op/g" "$TINY" >long.yaml
	run --separate-stderr amp-plan --machine m.yaml -o p.yaml long.yaml
	assert_failure 1
	[[ $stderr == *"(op '$op'); 2976 are available (sram_bytes - reserved_bytes). Next: pin '$op' to a grid over more tiles in the model's plan: (amp-plan --explain lists its grids); plan a smaller batch (this one is 2); or use a machine file with more tiles (share/machines/amp5888.yaml has 4x amp1472's)" ]] ||
		fail "$stderr"
}

@test "next steps: a whole plan over a limit names a smaller batch and a bigger machine" {
	machine table_budget_bytes 300
	run --separate-stderr amp-plan --machine m.yaml -o p.yaml "$TINY"
	assert_failure 1
	[[ $stderr == *"over the table budget of 300 bytes. No plan avoids the parameters: "*". Next: plan a smaller batch (this one is 2); or use a machine file with more tiles (share/machines/amp5888.yaml has 4x amp1472's)" ]] ||
		fail "$stderr"
}

@test "next steps: parameters that no plan can hold say so, and suggest fp8 only where the parameters are wider" {
	run --separate-stderr amp-plan -o p.yaml "$ROOT/tests/models/llama-3.2-1b-shaped.yaml"
	assert_failure 1
	[[ $stderr == *"parameters need 1235881984 bytes; 1472 tiles hold at most 864005120 (586960 bytes each after reserved_bytes). Next: no plan of this model fits this machine; use a machine file with more tiles (share/machines/amp5888.yaml has 4x amp1472's)" ]] ||
		fail "$stderr"
	# the same shapes in fp16: fp8 parameters would halve them
	sed 's/dtype: fp8/dtype: fp16/' "$ROOT/tests/models/llama-3.2-1b-shaped.yaml" >wide.yaml
	run --separate-stderr amp-plan -o p.yaml wide.yaml
	assert_failure 1
	[[ $stderr == *", or fp8 parameters" ]] || fail "$stderr"
}
