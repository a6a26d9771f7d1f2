#!/usr/bin/env bats
# amp-capture: floors (formats/capture.md, "Floors"): each phase's, the
# exchange's and the model's, by their definitions.

load common
load stages
load amp-capture
bats_require_minimum_version 1.5.0

setup_file() {
	capture_fixtures tiny siglip vit cost native
}

# ---- F. floors (formats/capture.md, "Floors") ----

# phase_floors STAGE: "phase floor tile" per phase, by the definition, from
# every member of the stage's send transfers (stages.bash's members).
phase_floors() {
	members "$1" > members.txt
	awk '
	function val(k,   s) { s = $0; sub(".*[{ ]" k ": ", "", s); sub("[,}].*", "", s); return s + 0 }
	FNR == NR {
		if (/^machine: /) {
			tiles = val("tiles"); bpc = val("exchange_bytes_per_cycle")
			sc = val("send_control_cycles"); rc = val("receive_control_cycles")
		}
		if (/^- \{phase: /) {
			t = $0; gsub(/[][{},:]/, " ", t); split(t, f, " ")
			np++; for (s = f[5]; s <= f[6]; s++) ph[s] = f[3]
		}
		next
	}
	$2 == "send" && ($1 in ph) {
		p = ph[$1]; d = int(($3 + bpc - 1) / bpc)
		sent[p, $4] += d; nsend[p, $4]++
		for (j = 0; j < $8; j++) { t = (($6 + j * $9) % tiles + tiles) % tiles; rcvd[p, t] += d; nrecv[p, t]++ }
	}
	END {
		for (p = 0; p < np; p++) {
			best = 0; at = -1
			for (t = 0; t < tiles; t++) {
				if (!nsend[p, t] && !nrecv[p, t]) continue
				x = sc * nsend[p, t] + rc * nrecv[p, t]
				if (nsend[p, t] && sc + sent[p, t] > x) x = sc + sent[p, t]
				if (nrecv[p, t] && rc + rcvd[p, t] > x) x = rc + rcvd[p, t]
				if (at < 0 || x > best) { best = x; at = t }
			}
			print p, best, at
		}
	}' "$1" members.txt
}

# compute_floor STAGE: the model's compute floor by its definition, from
# the stage's records: GEMMs (m k n, format), the compute steps of kind
# attention, layernorm, gelu and add on their placements' shapes (a
# window's extent, else its tensor's shape), each times its repeat's count.
compute_floor() {
	awk '
	function val(k,   s) { s = $0; if (!sub(".*[{ ]" k ": ", "", s)) return ""; sub("[,}].*", "", s); return s }
	function list(k,   s) { s = $0; sub(".*[{ ]" k ": \\[", "", s); sub("\\].*", "", s); return s }
	function prod(l,   f, n, i, p) { n = split(l, f, ", "); p = 1; for (i = 1; i <= n; i++) p *= f[i]; return p }
	function count(st,   i) { for (i = 1; i <= nr; i++) if (st >= rf[i] && st <= rl[i]) return rc[i]; return 1 }
	/^machine: / {
		tiles = val("tiles"); el = val("elementwise_cycles_per_element"); red = val("reduction_cycles_per_element")
		r16 = val("fp16"); r8 = val("fp8")
	}
	/^[a-z]+:/ { sect = $1 }
	sect == "tensors:" && /^- / { shape[val("name")] = list("shape") }
	sect == "gemms:" && /^- / { ng++; gop[ng] = val("op"); macs[ng] = val("m") * val("k") * val("n"); fp8[ng] = val("format") == "fp8" }
	sect == "placements:" && /^- / { ext[val("name")] = index($0, " extent: ") ? list("extent") : shape[val("tensor")] }
	sect == "steps:" && / compute: / {
		n++; step[n] = val("step") + 0; kind[n] = val("compute"); op[n] = val("op")
		split(list("in"), in1, ", "); in0[n] = in1[1]; in2[n] = in1[2]; out[n] = val("out"); heads[n] = val("heads")
	}
	sect == "repeats:" && /^- / { nr++; split(list("steps"), r, ", "); rf[nr] = r[1] + 0; rl[nr] = r[2] + 0; rc[nr] = val("count") }
	END {
		for (i = 1; i <= n; i++) {
			c = count(step[i])
			if (kind[i] == "matmul" && !(op[i] in gc)) gc[op[i]] = c
			if (kind[i] == "attention") {
				split(ext[in0[i]], q, ", "); split(ext[in2[i]], k, ", ")
				sc = q[1] * heads[i] * q[2] * k[2]
				m16 += 2 * sc * (q[3] / heads[i]) * c; e += sc * red * c
			}
			if (kind[i] == "layernorm") e += prod(ext[in0[i]]) * red * c
			if (kind[i] == "gelu" || kind[i] == "add") e += prod(ext[out[i]]) * el * c
		}
		for (g = 1; g <= ng; g++) {
			c = (gop[g] in gc) ? gc[gop[g]] : 1
			if (fp8[g]) m8 += macs[g] * c; else m16 += macs[g] * c
		}
		a = r16; b = r8; while (b) { t = a % b; a = b; b = t }; l = r16 / a * r8
		w = e * l + m16 * (l / r16) + m8 * (l / r8)
		printf "%d\n", int((w + l * tiles - 1) / (l * tiles))
	}' "$1"
}

@test "capture's phase floors are the definition's, over every member of the stage, and never above the phase's cycles" {
	siglip_ok
	local pair stage cap
	for pair in "$TINY:$TINY_CAPTURE" "$SIGLIP:$SIGLIP_CAPTURE" "$VIT:$VIT_CAPTURE" "$COST:$COST_CAPTURE"; do
		stage=${pair%%:*} cap=${pair#*:}
		phase_floors "$stage" > want.txt
		run wc -l < want.txt
		assert [ "$output" -ge 3 ]
		jq -r '.phases[] | "\(.id) \(.floor_cycles) \(.floor_tile)"' "$cap" > got.txt
		run diff want.txt got.txt
		assert_success
		# a phase takes at least its floor; every phase that moves anything has one
		jq_empty '.machine.tiles as $t | [.phases[] | select(.floor_cycles > .cycles or (.transfers > 0 and .floor_cycles <= 0)
			or .floor_tile < 0 or .floor_tile >= $t) | .id]' "$cap"
	done
}

@test "capture's exchange floor weighs each phase's floor by its count; the exchange is at least it" {
	siglip_ok
	local f
	for f in "$TINY_CAPTURE" "$SIGLIP_CAPTURE" "$VIT_CAPTURE" "$COST_CAPTURE"; do
		run jq -c '.summary as $s | [
			$s.exchange_floor_cycles == ([.phases[] | .floor_cycles * .count] | add),
			$s.exchange_floor_cycles > 0,
			$s.exchange_floor_ratio >= 1,
			$s.exchange_cycles >= $s.exchange_floor_cycles] | all' "$f"
		assert_output true
	done
	# the repeat's phases count times over
	run jq '[.phases[] | select(.count > 1)] | length' "$VIT_CAPTURE"
	assert [ "$output" -ge 1 ]
}

@test "capture's model floor: compute from whole tensors, movement from the receiver payload, one sync per matmul or attention op" {
	siglip_ok
	local pair stage cap want
	for pair in "$TINY:$TINY_CAPTURE" "$SIGLIP:$SIGLIP_CAPTURE" "$VIT:$VIT_CAPTURE" "$COST:$COST_CAPTURE"; do
		stage=${pair%%:*} cap=${pair#*:}
		want=$(compute_floor "$stage")
		assert [ "$want" -gt 0 ]
		assert_equal "compute $(jq .summary.plan_floor.compute_floor_cycles "$cap")" "compute $want"
		# the receivers' bytes over every run, spread over every tile's port
		want=$(jq '. as $c | ([$c.phases[] | .count as $n | $c.phase_traffic[.id | tostring][].receiver_payload_bytes * $n] | add)
			as $b | $c.machine as $m | ($b + $m.exchange_bytes_per_cycle * $m.tiles - 1) / ($m.exchange_bytes_per_cycle * $m.tiles) | floor' "$cap")
		assert_equal "movement $(jq .summary.plan_floor.movement_floor_cycles "$cap")" "movement $want"
		# one sync per run of each op with a matmul or attention step
		want=$(jq '[.compute[] | select(.compute == "matmul" or .compute == "attention")] | unique_by(.op)
			| map(.count) | add * $s' --argjson s "$(jq .machine.sync_cycles "$cap")" "$cap")
		assert_equal "sync $(jq .summary.plan_floor.sync_floor_cycles "$cap")" "sync $want"
		run jq -c '.summary as $s | $s.plan_floor as $f | [
			$f.total_floor_cycles == $f.compute_floor_cycles + $f.movement_floor_cycles + $f.sync_floor_cycles,
			$f.total_floor_cycles < $s.total_cycles, $f.ratio >= 1,
			$f.compute_floor_cycles <= $s.compute_cycles,
			$f.movement_floor_cycles <= $s.exchange_floor_cycles, $s.exchange_floor_cycles <= $s.exchange_cycles,
			$f.sync_floor_cycles <= $s.sync_cycles,
			$f.compute_floor_cycles > 0, $f.movement_floor_cycles > 0, $f.sync_floor_cycles > 0] | all' "$cap"
		assert_output true
	done
	# vit-tiny's repeat counts: two layers' syncs, and more than one run of its body's ops
	run jq '[.compute[] | select(.compute == "attention")] | map(.count) | max' "$VIT_CAPTURE"
	assert [ "$output" -gt 1 ]
}

@test "capture's model floor leaves out what a plan adds: the call overhead and the staging kinds" {
	# the same stage on a machine whose matmul calls and local copies cost
	# more: compute cycles grow, the floor does not
	study "$VIT" '3s/matmul_call_cycles: [0-9]*/matmul_call_cycles: 5000/; 3s/local_copy_bytes_per_cycle: [0-9]*/local_copy_bytes_per_cycle: 1/' \
		costly.yaml
	run amp-capture --machine costly.yaml.machine costly.yaml -o costly.json
	assert_success
	run jq -n --slurpfile a "$VIT_CAPTURE" --slurpfile b costly.json \
		'$b[0].summary.compute_cycles > $a[0].summary.compute_cycles and $b[0].summary.plan_floor == ($a[0].summary.plan_floor | .ratio = $b[0].summary.plan_floor.ratio)'
	assert_output true
	# and a rate it uses does move it: more fp8 MACs per cycle, a smaller compute floor
	study "$VIT" '3s/fp8: \([0-9]*\)}/fp8: 1024}/' fast.yaml
	run amp-capture --machine fast.yaml.machine fast.yaml -o fast.json
	assert_success
	assert [ "$(jq .summary.plan_floor.compute_floor_cycles fast.json)" -lt "$(jq .summary.plan_floor.compute_floor_cycles "$VIT_CAPTURE")" ]
	assert_equal "$(jq .summary.plan_floor.compute_floor_cycles fast.json)" "$(compute_floor fast.yaml)"
}

@test "capture's phase floor: a single send's is the replay's, 100 small sends' their receiver's controls" {
	local bpc sc rc
	read -r bpc sc rc <<< "$(jq -r '.machine | "\(.exchange_bytes_per_cycle) \(.send_control_cycles) \(.receive_control_cycles)"' "$TINY_CAPTURE")"
	replay '- {step: 4, kind: send, len: 400, src: [0, 5664], dst: [1, 672], recv: [1, 0], loops: []}' > /dev/null
	run jq -r '.phases[] | select(.steps == [4, 4]) | "\(.cycles) \(.floor_cycles) \(.floor_tile)"' r.json
	assert_output "$((rc + (400 + bpc - 1) / bpc)) $((rc + (400 + bpc - 1) / bpc)) 1"
	replay '- {step: 4, kind: send, len: 4, src: [0, 5664], dst: [1, 672], recv: [1, 0], loops: [[100, 0, 4, 0, 4]]}' > /dev/null
	run jq -r '.phases[] | select(.steps == [4, 4]) | "\(.floor_cycles) \(.floor_tile) \(.cycles > .floor_cycles)"' r.json
	assert_output "$((100 * rc)) 1 true"
}
