#!/usr/bin/env bats
# amp-capture: the invariants formats/capture.md states, checked with jq on
# siglip-mlp, agreement with amp-emit's listing, and the replay's
# documented examples.

load common
load stages
load amp-capture
bats_require_minimum_version 1.5.0

setup_file() {
	capture_fixtures tiny siglip native
}

# ---- D. invariants (formats/capture.md), on siglip-mlp ----

@test "capture: receiver payload counts every recipient, once per source byte when nothing is replicated" {
	siglip_ok
	run jq '[.phase_traffic[][]] | length' "$SIGLIP_CAPTURE"
	assert [ "$output" -ge 9 ]
	jq_empty '[.phase_traffic[][] | select(
		.receiver_payload_bytes < .source_payload_bytes
		or .receiver_payload_bytes > .source_payload_bytes * .replication
		or (.replication == 1 and .receiver_payload_bytes != .source_payload_bytes)
		or (.replication > 1 and .receiver_payload_bytes == .source_payload_bytes)
		or .replication < 1 or .replication > .receiver_tiles)]' "$SIGLIP_CAPTURE"
	# some classes multicast, some do not
	run jq '[.phase_traffic[][] | select(.replication > 1)] | length' "$SIGLIP_CAPTURE"
	assert [ "$output" -ge 2 ]
	run jq '[.phase_traffic[][] | select(.replication == 1)] | length' "$SIGLIP_CAPTURE"
	assert [ "$output" -ge 2 ]
}

@test "capture: a phase's receiver payload is the bytes its rows receive, and its classes the rows' sends" {
	siglip_ok
	# the per-phase sums over classes against amp-emit --list of the stage
	jq -r '. as $c | .phases[] | .id as $i | [$i, .transfers, .bytes,
		([$c.phase_traffic[$i | tostring][].receiver_payload_bytes] | add),
		.max_row_bytes, .max_fragments] | map(tostring) | join(" ")' "$SIGLIP_CAPTURE" > capture.txt
	run wc -l < "$SIGLIP_PHASES"
	assert [ "$output" -ge 3 ]
	run diff "$SIGLIP_PHASES" capture.txt
	assert_success
}

@test "capture: every send's size is in send_bytes, whose counts sum to sends and sizes to source payload" {
	siglip_ok
	jq_empty '[.phase_traffic[][] | select(
		(.send_bytes | keys | map(test("^[1-9][0-9]*$")) | all | not)
		or (.send_bytes | map(select(. < 1)) | length > 0)
		or ([.send_bytes[]] | add) != .sends
		or ([.send_bytes | to_entries[] | (.key | tonumber) * .value] | add) != .source_payload_bytes
		or .source_tiles < 1 or .source_tiles > .sends or .receiver_tiles < 1)]' "$SIGLIP_CAPTURE"
	# and no size is missing: the sizes of a phase's classes are its rows' SEND sizes
	run amp-emit --list "$TINY"
	assert_success
	printf '%s\n' "$output" | awk '/^tile /{ p = $4 } $1 == "send" { print p, $2 }' | sort | uniq -c |
		awk '{ print $2, $3, $1 }' > listed.txt
	jq -r '.phase_traffic | to_entries[] | .key as $p | [.value[].send_bytes | to_entries[]]
		| group_by(.key)[] | "\($p) \(.[0].key) \(map(.value) | add)"' "$TINY_CAPTURE" | sort > sizes.txt
	run wc -l < listed.txt
	assert [ "$output" -ge 7 ]
	run diff listed.txt sizes.txt
	assert_success
}

@test "capture: the classes add up to their phase's transfers and bytes" {
	siglip_ok
	for f in "$SIGLIP_CAPTURE" "$TINY_CAPTURE"; do
		jq_empty '. as $c | [.phases[] | . as $p | $c.phase_traffic[$p.id | tostring] as $cl
			| select(($cl | length) == 0 or ([$cl[].sends] | add) != $p.transfers
				or ([$cl[].source_payload_bytes] | add) != $p.bytes) | $p.id]' "$f"
	done
}

@test "capture: the summary adds up the phases" {
	siglip_ok
	for f in "$SIGLIP_CAPTURE" "$TINY_CAPTURE"; do
		run jq -c '.summary as $s | [
			$s.phases == (.phases | length),
			$s.transfers == ([.phases[].transfers] | add),
			$s.bytes == ([.phases[].bytes] | add),
			$s.exchange_cycles == ([.phases[] | .cycles * .count] | add),
			$s.sync_cycles == ([.phases[].count] | add) * .machine.sync_cycles,
			$s.max_row_bytes == ([.phases[].max_row_bytes] | max),
			$s.max_fragments >= ([.phases[].max_fragments] | max),
			$s.max_table_bytes >= $s.max_row_bytes,
			$s.transfers > 0, $s.exchange_cycles > 0] | all' "$f"
		assert_output true
	done
}

@test "capture's max_table_bytes and max_fragments are the largest tile's, rows shared, from amp-emit --list" {
	run amp-emit --list "$TINY"
	assert_success
	printf '%s\n' "$output" > tiny.list
	run awk '
	function flush() {
		if (t == "") return
		if (!((t, body) in seen)) { seen[t, body] = 1; tab[t] += b }
		fr[t] += n
	}
	/^tile / { flush(); t = $2; b = $6; n = $8; body = ""; next }
	/^  / { body = body $0 "\n" }
	END { flush(); for (x in tab) { if (tab[x] > mt) mt = tab[x]; if (fr[x] > mf) mf = fr[x] } print mt, mf }' tiny.list
	assert_success
	assert_output "$(jq -r '"\(.summary.max_table_bytes) \(.summary.max_fragments)"' "$TINY_CAPTURE")"
}

# ---- E. the replay (formats/capture.md's examples) ----

@test "capture's replay: one 400-byte send and its multicast take 103 cycles" {
	run grep -c '^- {step: 4, copy: ' "$NATIVE"
	assert_output 1
	run grep -c '^- {phase: [0-9]*, steps: \[4, 4\], ' "$NATIVE"
	assert_output 1
	run replay '- {step: 4, kind: send, len: 400, src: [0, 5664], dst: [1, 672], recv: [1, 0], loops: []}'
	assert_success
	assert_output '103 1'
	run replay '- {step: 4, kind: send, len: 400, src: [0, 5664], dst: [1, 672], recv: [3, 1], loops: []}'
	assert_output '103 1'
	# a partial last word costs a whole cycle
	run replay '- {step: 4, kind: send, len: 401, src: [0, 5664], dst: [1, 672], recv: [1, 0], loops: []}'
	assert_output '104 1'
	run jq '.phases | length' r.json
	assert [ "$output" -ge 2 ]
}

@test "capture's replay: a forward starts after the receive it depends on, other sends do not wait" {
	deliver='- {step: 4, kind: send, len: 400, src: [0, 5664], dst: [1, 672], recv: [1, 0], loops: []}'
	run replay "$deliver" '- {step: 4, kind: send, len: 400, src: [1, 672], dst: [2, 672], recv: [1, 0], loops: []}'
	assert_output '203 2'
	# overlapping the received bytes by one byte, at either end
	run replay "$deliver" '- {step: 4, kind: send, len: 400, src: [1, 273], dst: [2, 672], recv: [1, 0], loops: []}'
	assert_output '203 2'
	run replay "$deliver" '- {step: 4, kind: send, len: 200, src: [1, 1071], dst: [2, 672], recv: [1, 0], loops: []}'
	assert_output '153 2'
	# bytes next to the received ones: only the shared issue pipeline (3 + 2)
	run replay "$deliver" '- {step: 4, kind: send, len: 400, src: [1, 1072], dst: [2, 672], recv: [1, 0], loops: []}'
	assert_output '105 2'
	run replay "$deliver" '- {step: 4, kind: send, len: 400, src: [1, 272], dst: [2, 672], recv: [1, 0], loops: []}'
	assert_output '105 2'
}

@test "capture's replay: one port per tile, and receive controls bind 100 small sends" {
	# two sends from one tile share its send port
	run replay '- {step: 4, kind: send, len: 400, src: [0, 5664], dst: [1, 672], recv: [1, 0], loops: []}' \
		'- {step: 4, kind: send, len: 400, src: [0, 6064], dst: [2, 672], recv: [1, 0], loops: []}'
	assert_output '203 2'
	# two senders to two receivers run side by side
	run replay '- {step: 4, kind: send, len: 400, src: [0, 5664], dst: [2, 672], recv: [1, 0], loops: []}' \
		'- {step: 4, kind: send, len: 400, src: [1, 5664], dst: [3, 672], recv: [1, 0], loops: []}'
	assert_output '103 2'
	run replay '- {step: 4, kind: send, len: 4, src: [0, 5664], dst: [1, 672], recv: [1, 0], loops: [[100, 0, 4, 0, 4]]}'
	assert_output '301 100'
	# the summary adds the phases' cycles
	run jq '.summary.exchange_cycles == ([.phases[].cycles] | add)' r.json
	assert_output true
}
