#!/usr/bin/env bats
# Machine files of several chips (formats/machine.md, "Chips and links";
# docs/machine.md §10): the shipped ones read, the malformed
# tests/bad/machine-*.yaml of version 4 refused, the tools that plan
# refusing a machine of several chips, and the machines of one chip
# planning as they did.

bats_require_minimum_version 1.5.0
load common

TINY=$MODELS/tiny-mlp.yaml

# rejects MACHINE LINE:COL MESSAGE: `amp-plan --machine MACHINE -o out.plan
# tiny-mlp.yaml` fails as plan_rejects (common.bash) checks.
rejects() {
	plan_rejects "$1" "$2" "$3" --machine "$1" "$TINY"
}

# refuses_chips N MACHINE TOOL ARG...: TOOL fails with exit 1, writes
# nothing on standard output, and says in one line that MACHINE has N
# chips and that plans across chips are not built yet.
refuses_chips() {
	local n=$1 name=$2
	shift 2
	run --separate-stderr "$@"
	assert_failure 1
	assert_equal "$output" ""
	[[ $stderr == "$1: machine '$name' ("*") has $n chips joined by links, and plans across chips are not built yet (issue 48: a pipeline across chips); amp plans for one chip, such as amp1472" ]] ||
		fail "expected the refusal of $n chips, got: $stderr"
}

# ---- the shipped machines of several chips ----

@test "chips: amp1472x2, amp1472x4 and m2000 are read, and amp-plan refuses each, naming its chips" {
	refuses_chips 2 amp1472x2 amp-plan --machine amp1472x2 -o out.plan "$TINY"
	[[ ! -e out.plan ]] || fail "out.plan was written"
	refuses_chips 4 amp1472x4 amp-plan --machine "$MACHINES/amp1472x4.yaml" "$TINY"
	refuses_chips 4 m2000 amp-plan -m m2000 "$TINY"
}

@test "chips: the shipped machines of several chips have amp1472's every on-chip key, at version 4" {
	local m
	grep -v '^#\|^amp-machine:\|^name:' "$MACHINES/amp1472.yaml" >chip.yaml
	for m in amp1472x2 amp1472x4 m2000; do
		grep -q '^amp-machine: 4$' "$MACHINES/$m.yaml" || fail "$m is not version 4"
		grep -q "^name: $m " "$MACHINES/$m.yaml" || fail "$m is not named $m"
		sed -n '/^tiles:/,/^  fp8:/p' "$MACHINES/$m.yaml" >"$m.chip"
		diff chip.yaml "$m.chip" || fail "$m's chip is not amp1472's"
	done
	run grep -h '^chips:\|^  topology:\|^  bandwidth_bytes_per_cycle:' "$MACHINES/amp1472x2.yaml" \
		"$MACHINES/amp1472x4.yaml" "$MACHINES/m2000.yaml"
	assert_output --regexp '^chips: 2 +#.*
  topology: ring +#.*
  bandwidth_bytes_per_cycle: 42 +#.*
chips: 4 +#.*
  topology: ring +#.*
  bandwidth_bytes_per_cycle: 42 +#.*
chips: 4 +#.*
  topology: ring +#.*
  bandwidth_bytes_per_cycle: 42 +#.*$'
}

@test "chips: a torus of rows x columns chips is read (and refused for planning like a ring)" {
	sed -e 's/^chips: 4 /chips: 6 /' -e 's/^name: .*/name: torus6/' \
		-e 's/^  topology: ring .*/  topology: torus\n  rows: 2\n  columns: 3/' \
		"$MACHINES/amp1472x4.yaml" >torus.yaml
	refuses_chips 6 torus6 amp-plan --machine torus.yaml "$TINY"
}

@test "chips: every tool that plans refuses a machine of several chips: amp-run --calibrate, amp-import, amp-sweep" {
	refuses_chips 2 amp1472x2 amp-run --calibrate "$TINY" --machine amp1472x2 -o scales.yaml
	[[ ! -e scales.yaml ]] || fail "scales.yaml was written"
	refuses_chips 4 m2000 amp-import --decode --machine m2000 "$ROOT/share/configs/qwen2.5-0.5b.json"
	cat >spec.yaml <<-EOF
		amp-sweep: 1
		name: chips
		models: [$TINY]
		machines: [$MACHINES/amp1472x4.yaml]
	EOF
	run --separate-stderr amp-sweep jobs -o study spec.yaml
	assert_failure 1
	[[ $stderr == *"machine 'amp1472x4' ("*") has 4 chips joined by links, and plans across chips are not built yet"* ]] ||
		fail "$stderr"
}

@test "chips: a stage checked against a machine file of several chips is refused" {
	# a machine file of 2 chips that is otherwise amp1472, name and all:
	# the stage, planned for one chip, is not its
	amp-plan "$TINY" | amp-compose | amp-expand | amp-exchange | amp-group >grouped.yaml
	sed -e 's/^name: .*/name: amp1472/' "$MACHINES/amp1472x2.yaml" >two.yaml
	# the stage's provenance made to name that file, so that its header
	# is compared (the FNV-1a from the message that refuses it unnamed)
	run --separate-stderr amp-capture --machine two.yaml grouped.yaml
	assert_failure 1
	local h
	h=$(sed -n "s/.*'two.yaml' (fnv1a \([0-9a-f]*\)).*/\1/p" <<<"$stderr")
	[[ -n $h ]] || fail "no FNV-1a in: $stderr"
	sed "s/name: amp1472.yaml, fnv1a: [0-9a-f]*/name: two.yaml, fnv1a: $h/" grouped.yaml >two.grouped
	run --separate-stderr amp-capture --machine two.yaml two.grouped
	assert_failure 1
	[[ $stderr == *"machine file 'two.yaml' has 2 chips; the stage was planned for 1"* ]] || fail "$stderr"
}

# ---- machines of one chip: as they were ----

@test "chips: amp1472 plans as before: the machine file's bytes and the stage's machine header unchanged" {
	run --separate-stderr amp-plan "$TINY"
	assert_success
	# the FNV-1a amp-plan records of share/machines/amp1472.yaml since
	# version 3 (commit 22b5717 records the same)
	assert_line --regexp 'name: amp1472.yaml, fnv1a: 575798a1ccbfb5f3'
	assert_line --index 2 'machine: {name: amp1472, tiles: 1472, sram_bytes: 638976, reserved_bytes: 52016, exchange_bytes_per_cycle: 4, sync_cycles: 600, send_control_cycles: 2, receive_control_cycles: 3, max_transfer_bytes: 16592, table_budget_bytes: 81920, fragment_limit: 16384, local_copy_bytes_per_cycle: 8, matmul_call_cycles: 200, elementwise_cycles_per_element: 1, reduction_cycles_per_element: 2, amp_macs_per_cycle: {fp16: 64, fp8: 128}}'
}

@test "chips: a version 4 file of one chip (chips: 1, or no chips) plans as its version 3 file" {
	sed 's/^amp-machine: 3/amp-machine: 4/' "$MACHINES/amp1472.yaml" >v4.yaml
	{ cat v4.yaml; echo "chips: 1"; } >one.yaml
	amp-plan "$TINY" >v3.plan
	local f
	for f in v4 one; do
		run --separate-stderr amp-plan --machine "$f.yaml" -o "$f.plan" "$TINY"
		assert_success
		run same_but_provenance v3.plan "$f.plan"
		assert_success
	done
}

# ---- malformed machines of version 4 (tests/bad/machine-*.yaml) ----

@test "chips: a version 2 or 3 file with a version 4 key is refused naming the key and both versions" {
	rejects "$BAD/machine-v3-chips.yaml" 23:1 "key 'chips' is machine file version 4's (this file is amp-machine: 3)"
	rejects "$BAD/machine-v3-links.yaml" 23:1 "key 'links' is machine file version 4's (this file is amp-machine: 3)"
	grep -v '^clock_' "$BAD/machine-v3-chips.yaml" | sed 's/^amp-machine: 3/amp-machine: 2/' >v2.yaml
	rejects v2.yaml 21:1 "key 'chips' is machine file version 4's (this file is amp-machine: 2)"
}

@test "chips: several chips need links, and one chip has none" {
	rejects "$BAD/machine-chips-without-links.yaml" 23:8 "a machine of 2 chips needs links"
	rejects "$BAD/machine-links-one-chip.yaml" 24:1 "links join chips, and this machine has one"
	rejects "$BAD/machine-links-without-chips.yaml" 23:1 "links join chips, and this machine has one"
	rejects "$BAD/machine-links-not-mapping.yaml" 24:8 "expected a links mapping"
}

@test "chips: a chip count must be an integer from 1 to 65536" {
	rejects "$BAD/machine-zero-chips.yaml" 23:8 "expected an integer of at least 1, found 0"
	rejects "$BAD/machine-many-chips.yaml" 23:8 "integer 65537 is larger than 65536"
	rejects "$BAD/machine-chips-not-integer.yaml" 23:8 "expected an integer, found 'two'"
}

@test "chips: the topology is a ring, or a torus of rows x columns chips" {
	rejects "$BAD/machine-unknown-topology.yaml" 25:13 "unknown topology 'mesh' (expected ring or torus)"
	rejects "$BAD/machine-torus-size.yaml" 26:9 "a torus of 2 rows x 3 columns is 6 chips, not the machine's 4"
	rejects "$BAD/machine-torus-no-columns.yaml" 25:3 "missing key 'columns'"
	rejects "$BAD/machine-ring-rows.yaml" 26:3 "rows is a torus's; a ring has none"
}

@test "chips: a link moves at least a byte a cycle; latency and barrier are non-negative integers" {
	rejects "$BAD/machine-zero-link-bandwidth.yaml" 27:30 "expected an integer of at least 1, found 0"
	rejects "$BAD/machine-negative-link-latency.yaml" 29:19 "expected a non-negative integer, found -1500"
	rejects "$BAD/machine-fractional-link-sync.yaml" 31:16 "expected an integer, found '3600.5'"
}

@test "chips: every link figure has its source, 1 to 255 characters" {
	rejects "$BAD/machine-missing-link-source.yaml" 25:3 "missing key 'latency_source'"
	rejects "$BAD/machine-empty-link-source.yaml" 32:16 "sync_source must be 1 to 255 characters"
}

@test "chips: every malformed machine file of version 4 is checked here" {
	local f missing=
	for f in "$BAD"/machine-*chips*.yaml "$BAD"/machine-*link*.yaml "$BAD"/machine-*torus*.yaml \
		"$BAD"/machine-*topology*.yaml "$BAD"/machine-ring-*.yaml; do
		grep -q "\$BAD/${f##*/}" "$BATS_TEST_FILENAME" || missing+=" ${f##*/}"
	done
	[[ -z $missing ]] || fail "not checked:$missing"
}
