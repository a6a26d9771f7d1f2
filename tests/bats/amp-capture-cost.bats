#!/usr/bin/env bats
# amp-capture: compute cost (formats/machine.md's cost model), local
# copies, and how a capture shares a phase's cycles between ops.

load common
load stages
load amp-capture
bats_require_minimum_version 1.5.0

setup_file() {
	capture_fixtures tiny cost siglip
}

# ---- H. compute cost (formats/machine.md's cost model) ----

# compute_of STAGE: "step op kind" for every compute step of the stage.
compute_of() {
	sed -n 's/^- {step: \([0-9]*\), compute: \([a-z]*\), op: \([^,]*\), .*/\1 \3 \2/p' "$1"
}

# tiles_of STAGE PLACEMENT: shards x replicas of the placement, from its
# split and rep lists in the stage.
tiles_of() {
	awk -v p="$2" 'index($0, "- {name: " p ", ") == 1 {
		n = 1
		for (key = 1; key <= 2; key++) {
			s = $0; sub(key == 1 ? ".* split: \\[" : ".* rep: \\[", "", s); sub("\\].*", "", s)
			k = split(s, f, ", ")
			for (i = 1; i <= k; i++) n *= f[i]
		}
		print n }' "$1"
}

@test "capture lists every compute step of the stage in step order, with its op, kind, tiles and count 1" {
	for pair in "$TINY:$TINY_CAPTURE" "$COST:$COST_CAPTURE"; do
		stage=${pair%%:*} c=${pair#*:}
		compute_of "$stage" > stage-compute.txt
		run wc -l < stage-compute.txt
		assert [ "$output" -ge 2 ]
		jq -r '.compute[] | "\(.step) \(.op) \(.compute)"' "$c" > capture-compute.txt
		run diff stage-compute.txt capture-compute.txt
		assert_success
		jq_empty '.machine.tiles as $t | [.compute[] | select(keys_unsorted != ["step","op","compute","count","tiles","slowest_tile","cycles","set","charged_cycles"]
			or .set > .step or .charged_cycles > .cycles or .charged_cycles < 0 or .count != 1 or .tiles < 1 or .slowest_tile < 0 or .slowest_tile >= $t)]' "$c"
		# tiles: the output placement's shards x replicas
		while read -r step out; do
			run jq ".compute[] | select(.step == $step) | .tiles" "$c"
			assert_output "$(tiles_of "$stage" "$out")"
		done < <(sed -n 's/^- {step: \([0-9]*\), compute: .*, out: \([^,}]*\)[,}].*/\1 \2/p' "$stage")
	done
}

@test "capture costs a GEMM on one tile as M x K x N / macs + matmul_call_cycles, and a cut one by its first block" {
	# cost-two-matmuls: fp16 (64 MACs a cycle), call 200. m1 [40 x 64] x [64 x 96]
	# on grid [1, 1, 1]; m2 [40 x 96] x [96 x 48] on [2, 1, 3]: 20 rows, K 96, 16 columns.
	local macs=64 call=200
	local m1=$(( (40 * 64 * 96 + macs - 1) / macs + call ))
	local m2=$(( (20 * 96 * 16 + macs - 1) / macs + call ))
	run jq -c '[.compute[] | [.op, .compute, .tiles, .cycles]]' "$COST_CAPTURE"
	assert_output "[[\"m1\",\"matmul\",1,$m1],[\"m2\",\"matmul\",6,$m2]]"
	assert_equal "$m1 $m2" "4040 680"
}

@test "capture costs tiny-mlp's steps by formats/machine.md: elements x per-element cycles, MACs / rate + call" {
	# x, xn, z canonical [2, 1, 80] per owner; h, g owned wide (a GEMM's
	# result that only gelu and a matmul read, 74 rows: formats/plan.md),
	# [2, 1, 16] per owner, 200 columns in 13 blocks of 16. mlp_up: fp8
	# [74 x 80] x [80 x 200] on one tile. mlp_down: grid [3, 2, 5], late cast:
	# a blocks [2, 13, 128] cast on 30 tiles, partials 26 x 128 x 16, then
	# [2 partials, 2, 13, 16] reduced per block.
	local ew=1 red=2 call=200 fp8=128
	local want="2 layernorm $((2 * 80 * red))
3 cast $((2 * 80 * ew))
7 matmul $(( (74 * 80 * 200 + fp8 - 1) / fp8 + call ))
9 gelu $((2 * 16 * ew))
11 cast $((2 * 13 * 128 * ew))
14 matmul $(( (26 * 128 * 16 + fp8 - 1) / fp8 + call ))
16 reduce $((2 * 2 * 13 * 16 * red))
18 add $((2 * 80 * ew))"
	run jq -r '.compute[] | "\(.step) \(.compute) \(.cycles)"' "$TINY_CAPTURE"
	assert_output "$want"
}

@test "capture's compute cycles follow the machine's cost keys, and nothing else changes" {
	sed -e 's/^matmul_call_cycles: .*/matmul_call_cycles: 0/' \
		-e 's/^elementwise_cycles_per_element: .*/elementwise_cycles_per_element: 3/' \
		-e 's/^reduction_cycles_per_element: .*/reduction_cycles_per_element: 5/' \
		"$MACHINES/amp1472.yaml" > costly.yaml
	grouped "$MODELS/tiny-mlp.yaml" costly.grouped costly.yaml
	run amp-capture --machine costly.yaml costly.grouped -o costly.json
	assert_success
	run jq -r '[.compute[].cycles] | map(tostring) | join(" ")' costly.json
	assert_output "$((160 * 5)) $((160 * 3)) $((74 * 80 * 200 / 128)) $((32 * 3)) $((3328 * 3)) $((26 * 128 * 16 / 128)) $((832 * 5)) $((160 * 3))"
	run jq -c '.machine | [.matmul_call_cycles, .elementwise_cycles_per_element, .reduction_cycles_per_element]' costly.json
	assert_output '[0,3,5]'
	run diff <(jq -S '{phases, phase_traffic}' "$TINY_CAPTURE") <(jq -S '{phases, phase_traffic}' costly.json)
	assert_success
}

@test "capture: the summary's compute, local-copy and total cycles add up the steps, phases and ops" {
	local files=("$TINY_CAPTURE" "$COST_CAPTURE")
	[ -n "${AMP_SAN:-}" ] || files+=("$SIGLIP_CAPTURE")
	for f in "${files[@]}"; do
		run jq -c '.summary as $s | [
			$s.compute_cycles == ([.compute[] | .cycles * .count] | add),
			$s.local_copy_cycles >= ([.phases[] | .local_copy_cycles * .count] | add),
			$s.total_cycles == $s.compute_cycles + $s.exchange_cycles + $s.sync_cycles + $s.local_copy_cycles,
			([.ops[].compute_cycles] | add) == $s.compute_cycles,
			([.ops[].exchange_cycles] | add) == $s.exchange_cycles,
			([.ops[].sync_cycles] | add) == $s.sync_cycles,
			([.ops[].local_copy_cycles] | add) == $s.local_copy_cycles,
			([.ops[].total_cycles] | add) == $s.total_cycles,
			(.ops | map(.total_cycles == .compute_cycles + .exchange_cycles + .sync_cycles + .local_copy_cycles) | all),
			$s.compute_cycles > 0, $s.total_cycles > $s.exchange_cycles + $s.sync_cycles] | all' "$f"
		assert_output true
	done
	# ops: every op of the stage's steps, in order of its first step
	run jq -r '[.ops[].op] | join(" ")' "$TINY_CAPTURE"
	assert_output "$(sed -n 's/^- {step: [0-9]*, [a-z]*: [a-z]*, op: \([^,]*\),.*/\1/p' "$TINY" | awk '!seen[$0]++' | paste -sd ' ')"
	run jq -r '[.ops[].op] | join(" ")' "$TINY_CAPTURE"
	assert_output 'ln mlp_up act mlp_down residual'
}

@test "capture's local_copy_cycles are the busiest tile's local bytes / local_copy_bytes_per_cycle, per phase" {
	for pair in "$TINY:$TINY_CAPTURE" "$COST:$COST_CAPTURE"; do
		stage=${pair%%:*} c=${pair#*:}
		# phase of each step, then local bytes per (phase, tile) from the members
		sed -n 's/^- {phase: \([0-9]*\), steps: \[\([0-9]*\), \([0-9]*\)\],.*/\1 \2 \3/p' "$stage" > phases.txt
		members "$stage" | awk -v bpc=8 '
			FILENAME == ARGV[1] { for (s = $2; s <= $3; s++) ph[s] = $1; n = $1 + 1; next }
			$2 == "local" && ($1 in ph) { b[ph[$1], $4] += $3 }
			END {
				for (k in b) { split(k, f, SUBSEP); if (b[k] > m[f[1]]) m[f[1]] = b[k] }
				for (p = 0; p < n; p++) print p, int((m[p] + bpc - 1) / bpc)
			}' phases.txt - > want.txt
		jq -r '.phases[] | "\(.id) \(.local_copy_cycles)"' "$c" > got.txt
		run diff want.txt got.txt
		assert_success
		# some phases copy locally (tiny-mlp one, cost-two-matmuls three)
		run jq '[.phases[] | select(.local_copy_cycles > 0)] | length' "$c"
		assert [ "$output" -ge 1 ]
	done
	run jq '[.phases[] | select(.local_copy_cycles > 0)] | length' "$COST_CAPTURE"
	assert_output 3
	# tiny-mlp phase 5: the two K partials of 832 bytes meet on tile 0
	run jq '.phases[5] | [.labels[0], .local_copy_cycles]' -c "$TINY_CAPTURE"
	assert_output '["mlp_down.partial",104]'
}

@test "capture counts the local copies of a copy step in no phase in the summary and its op" {
	# cost-two-matmuls' last copy (m2.out, step 7) without its sends and its
	# phase: a copy that moves only on tiles.
	run grep -c '^- {phase: 2, steps: \[7, 7\], ' "$COST"
	assert_output 1
	sed -e '/^- {phase: 2, /d' -e '/^- {step: 7, kind: send/d' "$COST" > local-only.yaml
	run amp-capture --machine "$ROOT/tests/models/machine-48.yaml" local-only.yaml -o local-only.json
	assert_success
	# step 7's local bytes on its busiest tile, at 8 bytes a cycle
	local cyc
	cyc=$(members local-only.yaml | awk '$1 == 7 && $2 == "local" { b[$4] += $3 }
		END { for (t in b) if (b[t] > m) m = b[t]; print int((m + 7) / 8) }')
	assert [ "$cyc" -gt 0 ]
	run jq -c '[.summary.local_copy_cycles == ([.phases[].local_copy_cycles] | add) + '"$cyc"',
		([.ops[].local_copy_cycles] | add) == .summary.local_copy_cycles] | all' local-only.json
	assert_output true
	# m2 had all of phase 2's local copies; it now has the step's instead
	local before phase2
	before=$(jq '.ops[] | select(.op == "m2") | .local_copy_cycles' "$COST_CAPTURE")
	phase2=$(jq '.phases[2].local_copy_cycles' "$COST_CAPTURE")
	run jq '.ops[] | select(.op == "m2") | .local_copy_cycles' local-only.json
	assert_output "$((before - phase2 + cyc))"
}

@test "capture splits a phase serving two ops between them by the bytes each moves in it" {
	# cost-two-matmuls: phase 1 moves m1's output and m2's operands.
	run jq -c '[.phases[] | [.id, (.labels | map(split(".")[0]) | unique)]]' "$COST_CAPTURE"
	assert_output '[[0,["m1"]],[1,["m1","m2"]],[2,["m2"]]]'
	# bytes of each op in phase 1 from the stage: sends (once each) and local copies
	read -r first last < <(sed -n 's/^- {phase: 1, steps: \[\([0-9]*\), \([0-9]*\)\],.*/\1 \2/p' "$COST")
	sed -n 's/^- {step: \([0-9]*\), copy: [a-z]*, op: \([^,]*\),.*/\1 \2/p' "$COST" > step-ops.txt
	read -r w1 w2 < <(members "$COST" | awk -v f="$first" -v l="$last" '
		FILENAME == ARGV[1] { op[$1] = $2; next }
		$1 >= f && $1 <= l && ($2 == "send" || $2 == "local") { w[op[$1]] += $3 }
		END { print w["m1"] + 0, w["m2"] + 0 }' step-ops.txt -)
	assert [ "$w1" -gt 0 ]
	assert [ "$w2" -gt "$w1" ]
	# floor shares; the remainder goes to the heavier op, m2
	read -r c0 c1 c2 < <(jq -r '[.phases[].cycles] | map(tostring) | join(" ")' "$COST_CAPTURE")
	local sync=600 e1=$((c1 * w1 / (w1 + w2)))
	local s1=$((sync * w1 / (w1 + w2)))
	run jq -c '[.ops[] | [.op, .exchange_cycles, .sync_cycles]]' "$COST_CAPTURE"
	assert_output "[[\"m1\",$((c0 + e1)),$((sync + s1))],[\"m2\",$((c1 - e1 + c2)),$((sync - s1 + sync))]]"
}

@test "capture: steps on tiles they do not share run as one compute set, which costs its slowest step" {
	local m=$ROOT/tests/models/tiny-lm-decode.yaml
	amp-plan "$m" | amp-compose | amp-expand | amp-exchange | amp-group -o g.yaml
	amp-capture --trace t.json --trace-tiles 0-1471 -o c.json g.yaml
	# k/v's reduction and rotation run beside q's (its owners follow q's: formats/plan.md)
	run jq -r '[.compute[] | select(.op == "q" and .compute == "reduce") | .step][0] as $q
		| [.compute[] | select(.op == "kv" and .compute == "reduce") | .set == $q and .charged_cycles == 0] | .[0]' c.json
	assert_output true
	# a set is a run of steps led by its first; its charges add up to its slowest step's cycles
	jq_empty '[.compute | group_by(.set)[] | select((map(.charged_cycles) | add) != (map(.cycles) | max)
		or (.[0].set != .[0].step) or (map(.count) | unique | length) != 1)]' c.json
	run jq '[.compute[] | .charged_cycles * .count] | add == (input.summary.compute_cycles)' c.json c.json
	assert_output true
	run jq '[.compute[] | select(.set != .step)] | length > 0' c.json
	assert_output true
	# no tile runs two steps at once: on each tile, its compute slices do not overlap in time
	# (ts and dur in microseconds to three decimals: 0.002 of rounding)
	jq_empty '[[.traceEvents[] | select(.ph == "X" and .cat == "compute" and .pid > 0)] | group_by(.pid)[]
		| sort_by(.ts) | . as $s | range(1; length) | select($s[.].ts < $s[. - 1].ts + $s[. - 1].dur - 0.002)
		| [$s[. - 1], $s[.]]]' t.json
	# and the program's lane adds up to the total
	run jq -s '([.[0].traceEvents[] | select(.ph == "X" and .pid == 0) | .args.cycles] | add) == .[0].otherData.total_cycles' t.json
	assert_output true
}
