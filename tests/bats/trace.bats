#!/usr/bin/env bats
# amp-capture --trace (formats/capture.md, "Trace"): the modelled timeline
# as Chrome trace-event JSON. Checked against the trace-event schema (the
# fields Perfetto and chrome://tracing read), against the capture's own
# figures (the critical path adds up to total_cycles; a tile's slices
# never outlast their step or phase, and the slowest tile's equal it), on
# a repeat unrolled, and on the 27-layer SigLIP-so400m.

bats_require_minimum_version 1.5.0
load common

SMALL=$ROOT/tests/models/siglip-small.yaml

# lowered MODEL OUT: MODEL planned and lowered to the grouped stage OUT.
lowered() {
	amp-plan "$1" | amp-compose | amp-expand | amp-exchange | amp-group >"$2"
}

# schema TRACE: the trace-event fields every viewer reads, and the lanes'
# order: every event an object with ph, pid, tid and name; X slices with
# ts and dur >= 0 and cat; C counters with ts and numeric args; M metadata
# naming processes; on each lane, slices in time order and never overlapping
# (to the microsecond's three decimals).
schema() {
	run jq -e '
		(.traceEvents | type == "array" and length > 0) and
		(.displayTimeUnit == "ns") and (.otherData.format == "amp-trace") and
		all(.traceEvents[]; type == "object" and (.ph | IN("X", "C", "M")) and
			(.pid | type == "number" and . >= 0 and floor == .) and .tid == 0 and (.name | type == "string")) and
		all(.traceEvents[] | select(.ph == "X"); (.ts | type == "number" and . >= 0) and
			(.dur | type == "number" and . >= 0) and (.cat | IN("compute", "sync", "exchange", "local")) and
			(.args | type == "object")) and
		all(.traceEvents[] | select(.ph == "C"); (.ts | type == "number") and
			(.args | to_entries | length > 0 and all(.value | type == "number"))) and
		all(.traceEvents[] | select(.ph == "M"); .name | IN("process_name", "process_sort_index")) and
		([.traceEvents[] | select(.ph == "X")] | group_by(.pid) |
			all(. as $l | [range(1; $l | length)] | all($l[.].ts >= $l[. - 1].ts + $l[. - 1].dur - 0.0015)))' "$1"
	assert_success
}

@test "trace: tiny-mlp's trace keeps the trace-event schema, and its critical path adds up to total_cycles" {
	lowered "$MODELS/tiny-mlp.yaml" g.yaml
	run --separate-stderr amp-capture --trace t.json -o c.json g.yaml
	assert_success
	schema t.json
	run jq '[.traceEvents[] | select(.pid == 0 and .ph == "X") | .args.cycles] | add' t.json
	assert_output "$(jq .summary.total_cycles c.json)"
	# the last span ends at total_cycles at 1.5 GHz
	run jq -r --argjson tot "$(jq .summary.total_cycles c.json)" \
		'[.traceEvents[] | select(.pid == 0 and .ph == "X")] | last | (.ts + .dur - $tot / 1500) | fabs < 0.01' t.json
	assert_output true
	# one compute span per compute step, one exchange span per phase
	assert_equal "$(jq '[.traceEvents[] | select(.pid == 0 and .cat == "compute")] | length' t.json)" \
		"$(jq '.compute | length' c.json)"
	assert_equal "$(jq '[.traceEvents[] | select(.pid == 0 and .cat == "exchange")] | length' t.json)" \
		"$(jq '.phases | length' c.json)"
	# the same stage gives the same bytes
	amp-capture --trace t2.json -o /dev/null g.yaml
	cmp t.json t2.json
}

@test "trace: with every tile, each tile's slice fits its step or phase and the slowest tile's equals it" {
	lowered "$MODELS/tiny-mlp.yaml" g.yaml
	amp-capture --trace t.json --trace-tiles 0-1471 --tiles tiles.tsv -o c.json g.yaml
	assert_equal "$(jq '[.traceEvents[] | select(.name == "process_name")] | length' t.json)" 1473
	# compute: per step, the largest tile slice is the capture's cycles, on its slowest tile
	run jq -r '[.traceEvents[] | select(.ph == "X" and .pid > 0 and .cat == "compute")] | group_by(.args.step)[] |
		"\(.[0].args.step) \(max_by(.args.cycles) | .args.cycles) \(all(.args.cycles <= .args.step_cycles))"' t.json
	assert_success
	local want
	want=$(jq -r '.compute[] | select(.cycles > 0) | "\(.step) \(.cycles) true"' c.json)
	assert_output "$want"
	# the slowest tile named by the capture has a slice as long as the step
	run jq -r --slurpfile c c.json '[.traceEvents[] | select(.ph == "X" and .pid > 0 and .cat == "compute")] as $x |
		all($c[0].compute[] | select(.cycles > 0); . as $s |
			any($x[]; .pid == $s.slowest_tile + 1 and .args.step == $s.step and .args.cycles == $s.cycles))' t.json
	assert_output true
	# exchange: per phase, the latest tile end is the phase's cycles; no tile outlasts it
	run jq -r '[.traceEvents[] | select(.ph == "X" and .pid > 0 and .cat == "exchange")] | group_by(.args.phase)[] |
		(max_by(.dur) | .dur) as $d | "\(.[0].args.phase) \(all(.dur <= $d)) \(.[0].args.phase_cycles)"' t.json
	assert_success
	assert_output "$(jq -r '.phases[] | select(.transfers > 0) | "\(.id) true \(.cycles)"' c.json)"
	# a tile's port cycles are its bytes over the exchange rate, summed (brute force from tiles.tsv)
	run jq -r '[.traceEvents[] | select(.ph == "X" and .pid > 0 and .cat == "exchange")] | .[] |
		"\(.pid - 1) \(.args.phase) \(.args.send_cycles) \(.args.receive_cycles)"' t.json
	assert_success
	echo "$output" | sort >ports.txt
	awk -F'\t' 'NR > 2 && $2 != "all" { printf "%d %d %d %d\n", $1, $2, ($3 + 3) / 4, ($4 + 3) / 4 }' tiles.tsv | sort >bytes.txt
	# fragments round up one by one, so the ports' cycles are at least bytes / 4
	join -j1 <(awk '{ print $1 "_" $2, $3, $4 }' ports.txt | sort) <(awk '{ print $1 "_" $2, $3, $4 }' bytes.txt | sort) |
		awk '$2 < $4 || $3 < $5 { bad++ } END { exit bad > 0 }'
	assert_equal "$(wc -l <ports.txt)" "$(wc -l <bytes.txt)"
	# SRAM: a tile's largest counter (tensors + tables) is its SRAM peak in tiles.tsv
	run jq -r '[.traceEvents[] | select(.ph == "C")] | group_by(.pid)[] |
		"\(.[0].pid - 1) \(map(.args.tensors + .args.tables) | max)"' t.json
	echo "$output" | sort >peaks.txt
	awk -F'\t' 'NR > 2 && $2 == "all" { print $1, $7 }' tiles.tsv | sort >want.txt
	join peaks.txt want.txt | awk '$2 != $3 { bad++ } END { exit bad > 0 }'
}

@test "trace: a repeat body runs once per iteration, each numbered" {
	lowered "$SMALL" g.yaml
	amp-capture --trace t.json -o c.json g.yaml
	schema t.json
	run jq '[.traceEvents[] | select(.pid == 0 and .ph == "X") | .args.cycles] | add' t.json
	assert_output "$(jq .summary.total_cycles c.json)"
	# the repeat's count of iterations, each with the body's compute steps
	local count body
	count=$(sed -n 's/^- {repeat: [a-z]*, steps: \[[0-9]*, [0-9]*\], count: \([0-9]*\)}$/\1/p' g.yaml)
	body=$(jq '[.compute[] | select(.count > 1)] | length' c.json)
	[ "$count" -ge 2 ] || fail "no repeat in siglip-small"
	run jq -c '[.traceEvents[] | select(.pid == 0 and .cat == "compute" and .args.iteration != null) | .args.iteration] |
		group_by(.) | map(length)' t.json
	assert_output "[$(yes "$body" | head -n "$count" | paste -sd,)]"
}

@test "trace: --trace-tiles chooses the tiles; a bad list is refused with no output" {
	lowered "$MODELS/tiny-mlp.yaml" g.yaml
	amp-capture --trace t.json --trace-tiles 3,0-1,1471 -o /dev/null g.yaml
	run jq -c '[.traceEvents[] | select(.name == "process_name") | .args.name]' t.json
	assert_output '["program (the critical path)","tile 0","tile 1","tile 3","tile 1471"]'
	local bad msg
	while IFS='|' read -r bad msg; do
		run --separate-stderr amp-capture --trace t2.json --trace-tiles "$bad" -o c2.json g.yaml
		assert_failure 1
		[[ $stderr == "amp-capture: "*"$msg"* ]] || fail "$bad: $stderr"
		[ ! -e t2.json ] && [ ! -e c2.json ] || fail "$bad: output left behind"
	done <<'EOF'
5-2|the range 5-2 runs backwards
1472|tile 1472, but the machine has 1472 tiles (0 to 1471)
a|expected a tile number at 'a'
1,,2|expected a tile number at ',2'
3x|expected ',' or '-' at 'x'
EOF
	run --separate-stderr amp-capture --trace-tiles 0 -o c2.json g.yaml
	assert_failure 2
	[[ $stderr == *"--trace-tiles needs --trace FILE"* ]] || fail "$stderr"
}

@test "trace: without a clock, a cycle counts as a microsecond and the trace says so" {
	grep -v '^clock_' "$MACHINES/amp1472.yaml" | sed 's/^amp-machine: 3/amp-machine: 2/' >v2.yaml
	amp-plan --machine v2.yaml "$MODELS/tiny-mlp.yaml" | amp-compose | amp-expand | amp-exchange | amp-group >g.yaml
	amp-capture --machine v2.yaml --trace t.json -o c.json g.yaml
	run jq -r .otherData.time t.json
	assert_output "one cycle per microsecond (the machine file has no clock)"
	run jq -r --argjson tot "$(jq .summary.total_cycles c.json)" \
		'[.traceEvents[] | select(.pid == 0 and .ph == "X")] | last | .ts + .dur == $tot' t.json
	assert_output true
}

@test "trace: the 27-layer SigLIP-so400m's trace keeps the schema and stays small enough to open" {
	siglip_ok
	amp-plan "$MODELS/siglip-so400m.yaml" | amp-compose | amp-expand | amp-exchange | amp-group -z -o g.yaml.zst
	amp-capture --trace t.json -o c.json g.yaml.zst
	schema t.json
	run jq '[.traceEvents[] | select(.pid == 0 and .ph == "X") | .args.cycles] | add' t.json
	assert_output "$(jq .summary.total_cycles c.json)"
	# 27 iterations of the body
	run jq '[.traceEvents[] | select(.pid == 0 and .args.iteration != null) | .args.iteration] | max' t.json
	assert_output 26
	gzip -n -9 -c t.json >t.json.gz
	local size=$(stat -c %s t.json.gz)
	[ "$size" -lt 20000000 ] || fail "trace.json.gz is $size bytes"
}
