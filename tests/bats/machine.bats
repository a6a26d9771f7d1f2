#!/usr/bin/env bats
# Machine files (formats/machine.md) as amp-plan reads them: the default
# machine, valid variations, and the malformed files tests/bad/machine-*.yaml.

bats_require_minimum_version 1.5.0
load common

TINY=$MODELS/tiny-mlp.yaml

# rejects MACHINE LINE:COL MESSAGE: `amp-plan --machine MACHINE -o out.plan
# tiny-mlp.yaml` fails as plan_rejects (common.bash) checks.
rejects() {
	plan_rejects "$1" "$2" "$3" --machine "$1" "$TINY"
}

# ---- valid machines ----

@test "machine defaults to share/machines/amp1472.yaml" {
	amp-plan --machine "$MACHINES/amp1472.yaml" "$TINY" >explicit.plan
	run --separate-stderr amp-plan -o default.plan "$TINY"
	assert_success
	run same_but_provenance explicit.plan default.plan
	assert_success
	run head -n 3 default.plan
	assert_line --index 2 --regexp '^machine: \{name: amp1472, tiles: 1472,'
}

@test "machine short name: --machine amp736 is share/machines/amp736.yaml in every tool that takes --machine" {
	amp-plan --machine "$MACHINES/amp736.yaml" -o file.plan "$TINY"
	run --separate-stderr amp-plan --machine amp736 -o name.plan "$TINY"
	assert_success
	run same_but_provenance file.plan name.plan
	assert_success
	run head -n 3 name.plan
	assert_line --index 2 --regexp '^machine: \{name: amp736, tiles: 736,'
	amp-compose name.plan | amp-expand | amp-exchange | amp-group -o g.yaml
	run --separate-stderr amp-emit --machine amp736 --no-model -o p.amp g.yaml
	assert_success
	run --separate-stderr amp-capture --machine amp736 -o c.json g.yaml
	assert_success
	run --separate-stderr amp-run --machine amp736 p.amp
	assert_success
	# the tools beside an installation find the names in its share/amp
	AMP_SHARE=$MACHINES/.. run --separate-stderr amp-plan -m amp5888 -o /dev/null "$TINY"
	assert_success
	# a file of that name in the working directory wins over the short name
	cp "$MACHINES/amp5888.yaml" amp736
	run --separate-stderr amp-plan --machine amp736 "$TINY"
	assert_line --index 2 --regexp '^machine: \{name: amp5888, tiles: 5888,'
}

@test "machine short name that is not known fails listing the known names" {
	local t
	# amp-capture resolves it once the stage is read: give it one
	amp-plan "$TINY" | amp-compose | amp-expand | amp-exchange | amp-group -o g.yaml
	for t in "amp-plan -o out.plan $TINY" "amp-emit -o out.plan g.yaml" "amp-capture -o out.plan g.yaml" \
		"amp-run out.plan"; do
		run --separate-stderr $t --machine amp73
		assert_failure 1
		assert_equal "$output" ""
		[[ $stderr == "${t%% *}: no machine file 'amp73' and no machine of that name in "*"/machines (known: amp1472, amp1472x2, amp1472x4, amp5888, amp736, m2000); name a machine file or one of those" ]] ||
			fail "$t: $stderr"
		[ ! -e out.plan ] || fail "$t wrote out.plan"
	done
}

@test "machine header carries every parameter of the machine file" {
	run --separate-stderr amp-plan "$TINY"
	assert_success
	assert_line 'machine: {name: amp1472, tiles: 1472, sram_bytes: 638976, reserved_bytes: 52016, exchange_bytes_per_cycle: 4, sync_cycles: 600, send_control_cycles: 2, receive_control_cycles: 3, max_transfer_bytes: 16592, table_budget_bytes: 81920, fragment_limit: 16384, local_copy_bytes_per_cycle: 8, matmul_call_cycles: 200, elementwise_cycles_per_element: 1, reduction_cycles_per_element: 2, amp_macs_per_cycle: {fp16: 64, fp8: 128}}'
}

@test "machine default comes from AMP_SHARE when it is set" {
	mkdir -p share/machines
	sed -e 's/^tiles: .*/tiles: 256/' -e 's/^name: .*/name: elsewhere/' \
		"$MACHINES/amp1472.yaml" >share/machines/amp1472.yaml
	AMP_SHARE=$PWD/share run --separate-stderr amp-plan "$TINY"
	assert_success
	assert_line --regexp '^machine: \{name: elsewhere, tiles: 256,'
}

@test "machine keys are accepted in any order" {
	# Same file with its lines reversed, the nested mapping kept whole.
	{
		sed -n '/^amp_macs_per_cycle:/,$p' "$MACHINES/amp1472.yaml"
		grep -v '^amp_macs_per_cycle:\|^  ' "$MACHINES/amp1472.yaml" | tac
	} >reversed.yaml
	amp-plan "$TINY" >default.plan
	run --separate-stderr amp-plan --machine reversed.yaml -o reversed.plan "$TINY"
	assert_success
	run same_but_provenance default.plan reversed.plan
	assert_success
}

@test "machine file compressed with zstd is accepted" {
	zstd -q -c "$MACHINES/amp1472.yaml" >machine.yaml
	amp-plan "$TINY" >default.plan
	run --separate-stderr amp-plan --machine machine.yaml -o compressed.plan "$TINY"
	assert_success
	run same_but_provenance default.plan compressed.plan
	assert_success
}

@test "machine reserved_bytes sets the bytes per tile the planner may use" {
	sed -e 's/^reserved_bytes: .*/reserved_bytes: 100000/' -e 's/^name: .*/name: tight/' \
		"$MACHINES/amp1472.yaml" >tight.yaml
	run --separate-stderr amp-plan --machine tight.yaml --explain "$TINY"
	assert_success
	# 638976 - 100000 bytes per tile are available to planned data.
	assert_line --regexp '^gemm mlp_up: .*\(538976 bytes per tile available,'
	assert_line --regexp '; 538976 available$'
}

@test "machine name of 300 bytes is carried whole through amp-plan, the lowering, amp-emit, amp-capture and amp-run" {
	# names were held in 64 bytes and refused past 63 (issue 47)
	local name
	name=$(printf 'm%.0s' $(seq 300))
	sed "s/^name: [^ ]*/name: $name/" "$MACHINES/amp736.yaml" >long.yaml
	amp-plan --machine long.yaml -o long.plan "$TINY"
	run head -n 3 long.plan
	assert_line --index 2 --regexp "^machine: \{name: $name, tiles: 736,"
	amp-compose long.plan | amp-expand | amp-exchange | amp-group >grouped.yaml
	grep -q "^machine: {name: $name, " grouped.yaml || fail "the grouped stage lost the name"
	amp-emit --machine long.yaml --model "$TINY" -o long.amp grouped.yaml
	amp-capture --machine long.yaml --trace trace.json -o stage.json grouped.yaml
	amp-capture --machine long.yaml -o prog.json long.amp
	for f in stage.json prog.json; do
		run jq -r .machine.name "$f"
		assert_output "$name"
	done
	run jq -r .otherData.machine trace.json
	assert_output "$name"
	run --separate-stderr amp-run --machine long.yaml long.amp
	assert_success
	assert_line --index 0 --regexp '^movement: byte-exact after every phase'
	# a stage and a machine file that differ only in the name's last byte
	# are told apart, each name whole in the message (the stage's
	# provenance made to name that file, so that its header is compared)
	local h
	sed "s/^name: [^ ]*/name: ${name}n/" "$MACHINES/amp736.yaml" >other.yaml
	h=$(amp-plan --machine other.yaml "$TINY" | grep -o 'name: other.yaml, fnv1a: [0-9a-f]*' | sed 's/.* //')
	sed "s/name: long.yaml, fnv1a: [0-9a-f]*/name: other.yaml, fnv1a: $h/" grouped.yaml >other.grouped
	run --separate-stderr amp-capture --machine other.yaml other.grouped
	assert_failure 1
	[[ $stderr == *"the stage's machine is '$name'; machine file 'other.yaml' is '${name}n'"* ]] || fail "$stderr"
}

@test "machine rejects an empty name" {
	sed 's/^name: [^ ]*/name: ""/' "$MACHINES/amp1472.yaml" >noname.yaml
	rejects noname.yaml 4:7 "machine name must not be empty"
}

@test "machine file that does not exist is reported" {
	run --separate-stderr amp-plan --machine nosuch.yaml "$TINY"
	assert_failure 1
	assert_equal "$output" ""
	assert_equal "$stderr" "amp-plan: cannot open 'nosuch.yaml': No such file or directory"
}

# ---- malformed machines (tests/bad/machine-*.yaml) ----

@test "machine rejects a file missing a required key" {
	rejects "$BAD/machine-missing-key.yaml" 2:1 "missing key 'sync_cycles'"
}

@test "machine rejects an unknown key" {
	rejects "$BAD/machine-unknown-key.yaml" 6:1 "unknown key 'hbm_bytes'"
}

@test "machine rejects a non-integer value such as 12x" {
	rejects "$BAD/machine-non-integer.yaml" 5:13 "expected an integer, found '12x'"
}

@test "machine rejects an integer that overflows 64 bits" {
	rejects "$BAD/machine-overflow.yaml" 4:8 "'99999999999999999999'"
}

@test "machine rejects a negative value" {
	rejects "$BAD/machine-negative.yaml" 8:14 "expected a non-negative integer, found -600"
}

@test "machine rejects reserved_bytes that leave no SRAM for planned data" {
	rejects "$BAD/machine-reserved-exceeds-sram.yaml" 6:17 "reserved_bytes (638976) leaves no SRAM"
}

@test "machine rejects a file of another amp-machine version" {
	rejects "$BAD/machine-wrong-version.yaml" 2:14 "unsupported machine file version 5 (this amp reads 2 to 4)"
}

@test "machine rejects a version 1 file, which has no compute cost keys, as unsupported" {
	rejects "$BAD/machine-version-1.yaml" 3:14 "unsupported machine file version 1 (this amp reads 2 to 4; version 2 adds the compute cost keys"
}

@test "machine version 3 requires a clock of at least 1 Hz and its source" {
	rejects "$BAD/machine-missing-clock.yaml" 2:1 "missing key 'clock_hz'"
	rejects "$BAD/machine-zero-clock.yaml" 18:11 "expected an integer of at least 1, found 0"
	rejects "$BAD/machine-empty-clock-source.yaml" 19:15 "clock_source must be 1 to 255 characters"
}

@test "machine version 2 has no clock key" {
	rejects "$BAD/machine-v2-clock.yaml" 18:1 "unknown key 'clock_hz'"
}

@test "machine version 2 file (no clock) is still read: same plan, and the capture has no time" {
	grep -v '^clock_' "$MACHINES/amp1472.yaml" | sed 's/^amp-machine: 3/amp-machine: 2/' >v2.yaml
	amp-plan "$TINY" >v3.plan
	run --separate-stderr amp-plan --machine v2.yaml -o v2.plan "$TINY"
	assert_success
	# the clock is not part of the stage header: only provenance differs
	run same_but_provenance v3.plan v2.plan
	assert_success
	amp-compose v2.plan | amp-expand | amp-exchange | amp-group >grouped.yaml
	amp-capture --machine v2.yaml grouped.yaml >v2.json
	run jq -c '[.machine.clock_hz, .machine.clock_source, .summary.microseconds, .summary.throughput]' v2.json
	assert_output '[null,null,null,null]'
}

@test "machine clock turns the capture's cycles into microseconds and throughput" {
	sed -e 's/^clock_hz: .*/clock_hz: 1000000/' "$MACHINES/amp1472.yaml" >slow.yaml
	amp-plan --machine slow.yaml "$TINY" | amp-compose | amp-expand | amp-exchange | amp-group >grouped.yaml
	amp-capture --machine slow.yaml grouped.yaml >slow.json
	# 1 MHz: one cycle is one microsecond; tiny-mlp serves its batch of images
	run jq -r '[.machine.clock_hz, (.summary.total_cycles == .summary.microseconds),
		.summary.throughput.unit, .summary.throughput.items,
		(.summary.throughput.per_second - .summary.throughput.items * 1000000 / .summary.total_cycles
		 | fabs < 0.0006)] | @tsv' slow.json
	assert_output "$(printf '1000000\ttrue\timages/s\t%s\ttrue' "$(amp-plan "$TINY" | grep -m1 'role: input' | sed 's/.*shape: \[\([0-9]*\),.*/\1/')")"
}

@test "machine rejects a file missing a compute cost key" {
	rejects "$BAD/machine-missing-matmul-call-cycles.yaml" 2:1 "missing key 'matmul_call_cycles'"
	rejects "$BAD/machine-missing-elementwise-cycles.yaml" 2:1 "missing key 'elementwise_cycles_per_element'"
	rejects "$BAD/machine-missing-reduction-cycles.yaml" 2:1 "missing key 'reduction_cycles_per_element'"
}

@test "machine rejects a negative matmul_call_cycles" {
	rejects "$BAD/machine-negative-matmul-call-cycles.yaml" 15:21 "expected a non-negative integer, found -200"
}

@test "machine rejects a fractional elementwise_cycles_per_element" {
	rejects "$BAD/machine-fractional-elementwise-cycles.yaml" 16:33 "expected an integer, found '1.5'"
}

@test "machine rejects reduction_cycles_per_element over its bound" {
	rejects "$BAD/machine-large-reduction-cycles.yaml" 17:31 "integer 1048577 is larger than 1048576"
}

@test "machine compute cost keys reach the stage header" {
	sed -e 's/^matmul_call_cycles: .*/matmul_call_cycles: 7/' \
		-e 's/^elementwise_cycles_per_element: .*/elementwise_cycles_per_element: 0/' \
		-e 's/^reduction_cycles_per_element: .*/reduction_cycles_per_element: 5/' \
		"$MACHINES/amp1472.yaml" >costs.yaml
	run --separate-stderr amp-plan --machine costs.yaml "$TINY"
	assert_success
	assert_line --index 2 --partial 'local_copy_bytes_per_cycle: 8, matmul_call_cycles: 7, elementwise_cycles_per_element: 0, reduction_cycles_per_element: 5, amp_macs_per_cycle:'
}

@test "machine rejects amp_macs_per_cycle without fp8" {
	rejects "$BAD/machine-missing-fp8.yaml" 16:3 "missing key 'fp8'"
}

@test "machine: a stage header without the compute cost keys (written for version 1) is rejected at the header" {
	amp-plan -o new.plan "$TINY"
	sed '3s/ matmul_call_cycles: [0-9]*,//' new.plan >old.plan
	run cmp -s new.plan old.plan
	assert_failure
	run --separate-stderr amp-compose -o out.plan old.plan
	assert_failure 1
	assert_equal "$stderr" "amp-compose: old.plan:3:10: missing key 'matmul_call_cycles'"
	[[ ! -e out.plan ]] || fail "out.plan was written on failure"
}

@test "machine rejects more tiles than the 1048576 amp supports" {
	rejects "$BAD/machine-many-tiles.yaml" 4:8 "at most 1048576 tiles are supported"
}
