#!/usr/bin/env bats
# amp-capture: grouped stage or program -> capture JSON (formats/capture.md).
# The command-line contract, the document's shape, its golden file, the
# invariants the format states (checked with jq on siglip-mlp), agreement
# with amp-emit's listing, the replay's documented examples, the shipped
# queries (share/jq/) and malformed input (tests/bad/capture-*).

load common
load stages
bats_require_minimum_version 1.5.0


# listing_phases LISTING: per phase of an amp-emit --list text, "phase
# sends send_bytes recv_bytes max_row_bytes max_instructions".
listing_phases() {
	awk '
	/^phase / { p = $2; n[p] = s[p] = r[p] = mr[p] = mf[p] = 0; order[++np] = p; next }
	/^tile / { p = $4; if ($6 > mr[p]) mr[p] = $6; if ($8 > mf[p]) mf[p] = $8; next }
	$1 == "send" { n[p]++; s[p] += $2; next }
	$1 == "recv" { r[p] += $2 }
	END { for (i = 1; i <= np; i++) { p = order[i]; print p, n[p], s[p], r[p], mr[p], mf[p] } }' "$1"
}

# The stages are made once per file: tiny-mlp with its program, siglip-mlp
# with its capture and the per-phase figures of its listing, the small
# compose-native-fp8 stage the replay cases are written into, the two
# pinned GEMMs of tests/models/cost-two-matmuls.yaml (on a 48-tile machine,
# where m2 shares tiles with the owners) with its capture, and
# tests/models/vit-tiny.yaml (attention, layernorm, gelu, add, a repeat)
# with its capture.
setup_file() {
	cd "$BATS_FILE_TMPDIR" || return 1
	export TINY=$BATS_FILE_TMPDIR/tiny.yaml TINY_PROG=$BATS_FILE_TMPDIR/tiny.amp
	export TINY_CAPTURE=$BATS_FILE_TMPDIR/tiny.json SIGLIP=$BATS_FILE_TMPDIR/siglip.yaml
	export SIGLIP_CAPTURE=$BATS_FILE_TMPDIR/siglip.json SIGLIP_PHASES=$BATS_FILE_TMPDIR/siglip-phases.txt
	export NATIVE=$BATS_FILE_TMPDIR/native.yaml
	export COST=$BATS_FILE_TMPDIR/cost.yaml COST_CAPTURE=$BATS_FILE_TMPDIR/cost.json
	export VIT=$BATS_FILE_TMPDIR/vit.yaml VIT_CAPTURE=$BATS_FILE_TMPDIR/vit.json
	grouped "$MODELS/tiny-mlp.yaml" "$TINY"
	grouped "$ROOT/tests/models/vit-tiny.yaml" "$VIT"
	amp-capture "$VIT" -o "$VIT_CAPTURE"
	grouped "$ROOT/tests/models/cost-two-matmuls.yaml" "$COST" "$ROOT/tests/models/machine-48.yaml"
	amp-capture --machine "$ROOT/tests/models/machine-48.yaml" "$COST" -o "$COST_CAPTURE"
	[ -n "${AMP_SAN:-}" ] || grouped "$MODELS/siglip-mlp.yaml" "$SIGLIP"
	grouped "$ROOT/tests/models/compose-native-fp8.yaml" "$NATIVE"
	amp-emit --no-model "$TINY" -o "$TINY_PROG"
	amp-capture "$TINY" -o "$TINY_CAPTURE"
	if [ -z "${AMP_SAN:-}" ]; then
		amp-capture "$SIGLIP" -o "$SIGLIP_CAPTURE"
		amp-emit --list "$SIGLIP" > siglip.list
		listing_phases siglip.list > "$SIGLIP_PHASES"
		rm -f siglip.list
	fi
}

# jq_empty FILTER FILE: the filter (which lists violations) gives [].
jq_empty() {
	run jq -c "$1" "$2"
	assert_success
	assert_output '[]'
}

# ---- A. command-line contract ----

@test "capture --help prints usage, the options and exit statuses to stdout and exits 0" {
	run --separate-stderr amp-capture --help
	assert_success
	assert_line --index 0 --regexp '^Usage: amp-capture '
	for opt in --output --compress --help --version; do
		assert_output --partial -- "$opt"
	done
	assert_output --partial 'Exit status: 0 success, 1 bad input or a write error, 2 usage error'
	assert_equal "$stderr" ""
}

@test "capture --version prints the tool name and version" {
	run --separate-stderr amp-capture --version
	assert_success
	assert_output --regexp '^amp-capture \(amp\) [0-9]+\.[0-9]+\.[0-9]+$'
	assert_equal "$stderr" ""
}

@test "capture rejects an unknown option with usage status 2 and writes nothing" {
	mkdir out
	for opt in --bogus --list; do
		run --separate-stderr amp-capture "$opt" "$TINY" -o out/c.json
		assert_failure 2
		assert_equal "$output" ""
		assert_regex "$stderr" "^amp-capture: .*'$opt'"
		assert_regex "$stderr" "Try 'amp-capture --help'"
	done
	run --separate-stderr amp-capture -q "$TINY"
	assert_failure 2
	assert_regex "$stderr" "^amp-capture: .*'-q'"
	run ls -A out
	assert_output ""
}

@test "capture rejects two input arguments with usage status 2" {
	mkdir out
	run --separate-stderr amp-capture "$TINY" "$TINY_PROG" -o out/c.json
	assert_failure 2
	assert_equal "$output" ""
	assert_regex "$stderr" "tiny\.amp"
	assert_regex "$stderr" "Try 'amp-capture --help'"
	run ls -A out
	assert_output ""
}

@test "capture rejects -o without a file with usage status 2" {
	run --separate-stderr amp-capture -o
	assert_failure 2
	assert_equal "$output" ""
	assert_regex "$stderr" "Try 'amp-capture --help'"
}

@test "capture reports a missing input file with status 1 naming it" {
	run --separate-stderr amp-capture nosuch.yaml
	assert_failure 1
	assert_equal "$output" ""
	assert_equal "$stderr" "amp-capture: cannot open 'nosuch.yaml': No such file or directory"
}

@test "capture reads the same input from a path, from '-' and from stdin" {
	# --help: "standard input when absent or '-'"
	for f in "$TINY" "$TINY_PROG"; do
		run --separate-stderr amp-capture - < "$f"
		assert_success
		assert_equal "$stderr" ""
		printf '%s\n' "$output" > dash.json
		# a program's capture adds amp-emit's provenance record
		run same_but_provenance "$TINY_CAPTURE" dash.json
		assert_success
		run amp-capture -o stdin.json < "$f"
		assert_success
		run cmp dash.json stdin.json
		assert_success
	done
}

@test "capture writes to stdout what -o writes" {
	amp-capture "$TINY" > stdout.json
	run cmp "$TINY_CAPTURE" stdout.json
	assert_success
}

@test "capture recognises zstd input by its magic, not its name, for a stage and a program" {
	run zstd -q "$TINY" -o packed.yaml
	assert_success
	run zstd -q "$TINY_PROG" -o packed.amp
	assert_success
	run amp-emit --no-model -z "$TINY" -o emitted-z.amp
	assert_success
	for f in packed.yaml packed.amp emitted-z.amp; do
		run od -An -tx1 -N4 "$f"
		assert_output ' 28 b5 2f fd'
		run amp-capture "$f" -o from-zstd.json
		assert_success
		run same_but_provenance "$TINY_CAPTURE" from-zstd.json
		assert_success
	done
}

@test "capture -z writes zstd that decompresses to the plain capture" {
	run amp-capture -z "$TINY" -o packed.json
	assert_success
	run od -An -tx1 -N4 packed.json
	assert_output ' 28 b5 2f fd'
	run zstd -q -d packed.json -o unpacked.json
	assert_success
	run cmp "$TINY_CAPTURE" unpacked.json
	assert_success
}

@test "capture -o leaves only the target after success and prints nothing" {
	mkdir out
	run --separate-stderr amp-capture "$TINY" -o out/c.json
	assert_success
	assert_equal "$output" ""
	assert_equal "$stderr" ""
	run ls -A out
	assert_output 'c.json'
}

@test "capture -o on failure leaves no target, no temporary, and an existing target unchanged" {
	mkdir out
	run amp-capture "$BAD/capture-version.yaml" -o out/c.json
	assert_failure 1
	run amp-capture "$BAD/program-truncated.amp" -o out/c.json
	assert_failure 1
	run ls -A out
	assert_output ""
	echo 'previous contents' > out/c.json
	run amp-capture "$BAD/capture-kind.yaml" -o out/c.json
	assert_failure 1
	run cat out/c.json
	assert_output 'previous contents'
	run ls -A out
	assert_output 'c.json'
}

@test "capture -o into a missing directory fails with status 1 naming the target" {
	run --separate-stderr amp-capture "$TINY" -o nodir/c.json
	assert_failure 1
	assert_regex "$stderr" "^amp-capture: cannot create 'nodir/c\.json"
	assert [ ! -e nodir ]
}

@test "capture gives identical bytes for the same input twice" {
	siglip_ok
	run amp-capture "$TINY" -o again.json
	assert_success
	run cmp "$TINY_CAPTURE" again.json
	assert_success
	run amp-capture "$SIGLIP" -o again.json
	assert_success
	run cmp "$SIGLIP_CAPTURE" again.json
	assert_success
	run amp-capture "$TINY_PROG" -o one.json
	assert_success
	run amp-capture "$TINY_PROG" -o two.json
	assert_success
	run cmp one.json two.json
	assert_success
}

# ---- B. the document ----

@test "capture writes valid JSON with exactly the top-level keys of formats/capture.md" {
	siglip_ok
	for f in "$TINY_CAPTURE" "$SIGLIP_CAPTURE"; do
		run jq -e . "$f"
		assert_success
		run jq -c 'keys_unsorted' "$f"
		assert_output '["format","version","model","machine","provenance","summary","ops","compute","memory","phases","phase_traffic"]'
		run jq -c '[.format, .version]' "$f"
		assert_output '["amp-capture",6]'
	done
	run jq -r .model "$TINY_CAPTURE"
	assert_output tiny-mlp
	run jq -r .model "$SIGLIP_CAPTURE"
	assert_output siglip-mlp
}

@test "capture's every figure is a non-negative integer but the ratios, each its quotient to 3 decimals" {
	siglip_ok
	for f in "$TINY_CAPTURE" "$SIGLIP_CAPTURE"; do
		# floor_tile is -1 only for a phase that moves nothing
		jq_empty '[paths(type == "number") as $p | getpath($p) as $v
			| select(($p[-1] | tostring | test("ratio$")) | not)
			| select($p != ["summary", "microseconds"] and $p != ["summary", "throughput", "per_second"])
			| select($v != ($v | floor) or ($v < 0 and $p[-1] != "floor_tile")) | $p]' "$f"
		run jq '[paths(type == "number")] | length' "$f"
		assert [ "$output" -ge 100 ]
		# each ratio: num / den in thousandths, halves up, null when den is 0
		jq_empty 'def r(n; d): if d == 0 then null else ((2000 * n + d) / (2 * d) | floor) end;
			def q(v): if v == null then null else (v * 1000 | round) end;
			[(.phases[] | select(q(.floor_ratio) != r(.cycles; .floor_cycles)) | "phase \(.id)"),
			 (.summary | select(q(.exchange_floor_ratio) != r(.exchange_cycles; .exchange_floor_cycles)) | "exchange"),
			 (.summary | select(q(.floor.ratio) != r(.total_cycles; .floor.total_floor_cycles)) | "floor"),
			 (. as $c | .summary | select(q(.microseconds) != r(.total_cycles * 1000000; $c.machine.clock_hz)) | "microseconds"),
			 (. as $c | .summary | select(q(.throughput.per_second) !=
				r(.throughput.items * $c.machine.clock_hz; .total_cycles)) | "throughput")]' "$f"
		# and the file holds them with exactly three decimals
		run grep -oE '"(floor_ratio|exchange_floor_ratio|ratio)": ([0-9]+\.[0-9]{3}|null)[,}]' "$f"
		assert_equal "${#lines[@]}" "$(jq '.phases | length + 2' "$f")"
	done
}

@test "capture's machine is the stage's machine, with the limits the program was checked against" {
	siglip_ok
	# the stage header's flow mapping, key: value pairs
	header() { sed -n '3s/^machine: {//p' "$1" | tr ',' '\n' | sed -n 's/^ *\([a-z_]*\): \([0-9a-z]*\)$/\1 \2/p'; }
	header "$SIGLIP" > header.txt
	run jq -r '.machine | del(.clock_hz, .clock_source) | to_entries[] | select(.value | type != "object") | "\(.key) \(.value)"' "$SIGLIP_CAPTURE"
	assert_success
	assert_equal "${#lines[@]}" 14
	for line in "${lines[@]}"; do
		[ "${line%% *}" = available_bytes ] && continue         # derived: sram_bytes - reserved_bytes
		run grep -c -x -- "$line" header.txt
		assert_output 1
	done
	run jq -c '.machine | keys_unsorted' "$SIGLIP_CAPTURE"
	assert_output '["name","tiles","exchange_bytes_per_cycle","sync_cycles","send_control_cycles","receive_control_cycles","max_transfer_bytes","available_bytes","table_budget_bytes","fragment_limit","local_copy_bytes_per_cycle","matmul_call_cycles","elementwise_cycles_per_element","reduction_cycles_per_element","amp_macs_per_cycle","clock_hz","clock_source"]'
	# the clock is the machine file's (a stage header has none)
	run jq -c '.machine | [.clock_hz, (.clock_source | test("^IPU21 at 1.5 GHz"))]' "$SIGLIP_CAPTURE"
	assert_output '[1500000000,true]'
	sram=$(sed -n 's/^sram_bytes //p' header.txt)
	reserved=$(sed -n 's/^reserved_bytes //p' header.txt)
	run jq .machine.available_bytes "$SIGLIP_CAPTURE"
	assert_output "$((sram - reserved))"
	run jq -r '.machine.amp_macs_per_cycle | "amp_macs_per_cycle: {fp16: \(.fp16), fp8: \(.fp8)}}"' "$SIGLIP_CAPTURE"
	assert_success
	header_line=$(sed -n 3p "$SIGLIP")
	[[ $header_line == *", $output" ]] || fail "expected '$output' at the end of: $header_line"
	run amp-emit --no-model --table-budget 50000 --fragment-limit 2000 "$TINY" -o limited.amp
	assert_success
	run amp-capture limited.amp
	assert_success
	run jq -c '.machine | [.table_budget_bytes, .fragment_limit]' <<< "$output"
	assert_output '[50000,2000]'
}

@test "capture's summary has exactly the fields of formats/capture.md" {
	siglip_ok
	for f in "$TINY_CAPTURE" "$SIGLIP_CAPTURE"; do
		run jq -c '.summary | keys_unsorted' "$f"
		assert_output '["phases","transfers","bytes","max_row_bytes","max_table_bytes","max_table_tile","max_table_phase","median_table_bytes","max_fragments","max_fragments_tile","max_fragments_phase","max_tensor_bytes","max_tensor_tile","max_tensor_step","max_sram_bytes","max_sram_tile","exchange_cycles","sync_cycles","local_copy_cycles","compute_cycles","total_cycles","exchange_floor_cycles","exchange_floor_ratio","floor","microseconds","throughput"]'
		run jq -c '.summary.floor | keys_unsorted' "$f"
		assert_output '["compute_floor_cycles","movement_floor_cycles","sync_floor_cycles","total_floor_cycles","ratio"]'
	done
}

@test "capture lists every phase of the stage with its labels, steps and figures" {
	siglip_ok
	for f in "$TINY" "$SIGLIP"; do
		c=$TINY_CAPTURE
		[ "$f" = "$SIGLIP" ] && c=$SIGLIP_CAPTURE
		jq_empty '[.phases[] | select(keys_unsorted != ["id","labels","steps","count","transfers","bytes","max_row_bytes","max_fragments","cycles","local_copy_cycles","floor_cycles","floor_tile","floor_ratio"])]' "$c"
		sed -n 's/^- {phase: \([0-9]*\), steps: \[\([0-9]*\), \([0-9]*\)\], label: \([^}]*\)}$/\1 \2 \3 \4/p' "$f" > stage-phases.txt
		run wc -l < stage-phases.txt
		assert [ "$output" -ge 3 ]
		jq -r '.phases[] | "\(.id) \(.steps[0]) \(.steps[1]) \(.labels | join("+"))"' "$c" > capture-phases.txt
		run diff stage-phases.txt capture-phases.txt
		assert_success
		run jq '.summary.phases == (.phases | length)' "$c"
		assert_output true
	done
}

@test "capture has one movement class per copy step with sends, in its phase, in step order" {
	siglip_ok
	for f in "$TINY" "$SIGLIP"; do
		c=$TINY_CAPTURE
		[ "$f" = "$SIGLIP" ] && c=$SIGLIP_CAPTURE
		run jq -c '(.phase_traffic | keys) == [.phases[].id | tostring]' "$c"
		assert_output true
		# the steps with send records, and what each copy step serves
		sed -n 's/^- {step: \([0-9]*\), kind: send,.*/\1/p' "$f" | sort -nu > send-steps.txt
		sed -n 's/^- {step: \([0-9]*\), copy: \([a-z]*\), op: \([^,]*\), operand: \([^,]*\), map: [^,]*, src: \([^,]*\), dst: \([^}]*\)}$/\1 \2 \3 \4 \5 \6/p' "$f" > copies.txt
		run wc -l < send-steps.txt
		assert [ "$output" -ge 5 ]
		awk 'FILENAME == ARGV[1] { s[$1] = 1; next } ($1 in s)' send-steps.txt copies.txt > expect.txt
		run wc -l < expect.txt
		assert_equal "$output" "$(wc -l < send-steps.txt)"
		jq -r '.phase_traffic | to_entries[] | .value[] | "\(.step) \(.movement) \(.op) \(.operand) \(.src) \(.dst)"' "$c" > classes.txt
		run diff expect.txt classes.txt
		assert_success
		# each class's step lies in its phase
		jq_empty '. as $c | [.phase_traffic | to_entries[] | .key as $k | .value[]
			| select(.step < $c.phases[$k | tonumber].steps[0] or .step > $c.phases[$k | tonumber].steps[1])]' "$c"
	done
}

@test "capture's every movement class has the fields of formats/capture.md with known operands and movements" {
	siglip_ok
	for f in "$TINY_CAPTURE" "$SIGLIP_CAPTURE"; do
		run jq '[.phase_traffic[][]] | length' "$f"
		assert [ "$output" -ge 9 ]
		jq_empty '[.phase_traffic[][] | select(has("op", "operand", "tensor", "movement", "src_format",
			"src_layout", "dst_format", "dst_layout", "src_shard", "dst_view", "sends", "send_bytes",
			"source_payload_bytes", "receiver_payload_bytes", "replication", "source_tiles",
			"receiver_tiles") | not)]' "$f"
		jq_empty '[.phase_traffic[][] | select(
			([.operand] | inside(["a", "b", "bias", "partial", "out", "x", "scale"]) | not)
			or ([.movement] | inside(["parameter", "activation", "reduction", "output", "copy"]) | not)
			or ([.src_format, .dst_format] | inside(["fp8", "fp16", "fp32"]) | not)
			or ([.src_layout, .dst_layout] | inside(["row-major", "amp-left", "transposed-right", "amp-output"]) | not)
			or (.src_shard | type != "array" or length == 0) or (.dst_view | type != "array" or length == 0)
			or (.send_bytes | type != "object" or length == 0)
			or ([.op, .tensor, .src, .dst] | map(type == "string" and length > 0) | all | not))]' "$f"
	done
	# siglip-mlp has every movement but copy
	run jq -c '[.phase_traffic[][].movement] | unique' "$SIGLIP_CAPTURE"
	assert_output '["activation","output","parameter","reduction"]'
}

# ---- C. program and stage, golden ----

@test "capture of a program equals the capture of the grouped stage it came from" {
	siglip_ok
	run amp-capture "$TINY_PROG" -o from-program.json
	assert_success
	run same_but_provenance "$TINY_CAPTURE" from-program.json
	assert_success
	run amp-emit --no-model --table-budget 200000 "$SIGLIP" -o siglip.amp
	assert_success
	run amp-capture siglip.amp -o siglip-program.json
	assert_success
	# the program carries the budget it was checked against; nothing else differs
	run jq -c '.machine.table_budget_bytes' siglip-program.json
	assert_output 200000
	run diff <(jq -S 'del(.machine.table_budget_bytes, .provenance)' "$SIGLIP_CAPTURE") <(jq -S 'del(.machine.table_budget_bytes, .provenance)' siglip-program.json)
	assert_success
	assert_output ""
}

@test "capture --table-budget and --fragment-limit report against those limits, as amp-emit's program does" {
	siglip_ok
	run amp-emit --no-model --table-budget 200000 --fragment-limit 20000 "$SIGLIP" -o siglip.amp
	assert_success
	run amp-capture siglip.amp -o from-program.json
	assert_success
	run amp-capture --table-budget 200000 --fragment-limit 20000 "$SIGLIP" -o from-stage.json
	assert_success
	run same_but_provenance from-program.json from-stage.json
	assert_success
	run jq -c '.machine | [.table_budget_bytes, .fragment_limit]' from-stage.json
	assert_output '[200000,20000]'
	# only the machine's limits change
	run diff <(jq -S 'del(.machine, .provenance)' "$SIGLIP_CAPTURE") <(jq -S 'del(.machine, .provenance)' from-stage.json)
	assert_success
	mkdir out
	for opt in --table-budget --fragment-limit; do
		for v in 12x -1 ''; do
			run --separate-stderr amp-capture "$opt" "$v" "$TINY" -o out/c.json
			assert_failure 2
			assert_equal "$output" ""
			assert_regex "$stderr" "^amp-capture: .*$opt.*'$v'"
		done
	done
	run ls -A out
	assert_output ""
}

@test "capture of tiny-mlp's golden grouped stage matches its golden capture" {
	run amp-capture "$GOLDEN/tiny-mlp/grouped.yaml" -o capture.json
	assert_success
	run diff -u "$GOLDEN/tiny-mlp/capture.json" capture.json
	assert_success
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

# replay RECORD...: the cycles and transfers of NATIVE's phase for its copy
# step 4 with that step's transfers replaced by RECORDs.
replay() {
	sed '/^- {step: 4, kind: /d' "$NATIVE" > r.yaml
	printf '%s\n' "$@" >> r.yaml
	amp-capture r.yaml -o r.json || return 1
	jq -r '.phases[] | select(.steps == [4, 4]) | "\(.cycles) \(.transfers)"' r.json
}

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

# ---- F. the shipped queries (share/jq/) ----

@test "traffic-details.jq prints one line per movement class with its phase and figures" {
	siglip_ok
	run jq -r -f "$ROOT/share/jq/traffic-details.jq" "$SIGLIP_CAPTURE"
	assert_success
	assert_equal "${#lines[@]}" "$(jq '[.phase_traffic[][]] | length' "$SIGLIP_CAPTURE")"
	IFS=$'\t' read -r -a f <<< "${lines[0]}"
	assert_equal "${#f[@]}" 12
	run jq -r '.phase_traffic["0"][0] | [0, .op, .operand, .tensor, .movement,
		"\(.src_format)/\(.src_layout) -> \(.dst_format)/\(.dst_layout)", .sends,
		.source_payload_bytes, .receiver_payload_bytes, .replication, .source_tiles,
		.receiver_tiles] | @tsv' "$SIGLIP_CAPTURE"
	assert_equal "$(IFS=$'\t'; echo "${f[*]}")" "$output"
}

@test "top-classes.jq prints the n classes with the largest receiver payload, largest first" {
	siglip_ok
	run jq -r --argjson n 3 -f "$ROOT/share/jq/top-classes.jq" "$SIGLIP_CAPTURE"
	assert_success
	assert_equal "${#lines[@]}" 3
	IFS=$'\t' read -r -a f <<< "${lines[0]}"
	assert_equal "${#f[@]}" 7
	assert_regex "${f[1]}" '^[a-z_]+\.(a|b|bias|partial|out|x|scale)$'
	printf '%s\n' "${lines[@]}" | cut -f6 > got.txt
	jq -r '[.phase_traffic[][].receiver_payload_bytes] | sort | reverse | .[:3][]' "$SIGLIP_CAPTURE" > want.txt
	run diff want.txt got.txt
	assert_success
	run sort -c -n -r got.txt
	assert_success
	# n defaults to 10
	run jq -r -f "$ROOT/share/jq/top-classes.jq" "$SIGLIP_CAPTURE"
	n=$(jq '[.phase_traffic[][]] | length' "$SIGLIP_CAPTURE")
	assert_equal "${#lines[@]}" "$((n < 10 ? n : 10))"
}

# thousandths N D: N / D in thousandths, halves up, as "I.FFF"
thousandths() {
	local q=$(((2000 * $1 + $2) / (2 * $2)))
	printf '%d.%03d' $((q / 1000)) $((q % 1000))
}

@test "phase-table.jq prints one line per phase with its runs, figures, floor and ratio, and a total row that adds up to the summary" {
	siglip_ok
	local c n i fl sum=0
	for c in "$SIGLIP_CAPTURE" "$TINY_CAPTURE"; do
		run jq -r -f "$ROOT/share/jq/phase-table.jq" "$c"
		assert_success
		n=$(jq '.phases | length' "$c")
		assert_equal "${#lines[@]}" "$((n + 1))"
		sum=0
		for ((i = 0; i < n; i++)); do
			IFS=$'\t' read -r -a f <<< "${lines[$i]}"
			assert_equal "${#f[@]}" 11
			assert_equal "${f[0]}" "$i"
			assert_equal "${f[1]} ${f[2]} ${f[3]} ${f[7]}" \
				"$(jq -r ".phases[$i] | \"\(.labels | join(\"+\")) \(.count) \(.transfers) \(.cycles)\"" "$c")"
			assert_equal "${f[8]}" "$((f[7] * f[2]))"
			# the floor over every run, and cycles / floor
			fl=$(jq ".phases[$i].floor_cycles" "$c")
			assert_equal "${f[9]}" "$((fl * f[2]))"
			assert_equal "${f[10]}" "$(thousandths "${f[7]}" "$fl")"
			sum=$((sum + f[9]))
		done
		IFS=$'\t' read -r -a f <<< "${lines[n]}"
		assert_equal "${f[*]:0:9}" "$(jq -r '"total - \(.summary.phases) \(.summary.transfers) \(.summary.bytes) \(.summary.max_row_bytes) \([.phases[].max_fragments] | max) - \(.summary.exchange_cycles)"' "$c")"
		assert_equal "${f[9]}" "$(jq .summary.exchange_floor_cycles "$c")"
		assert_equal "${f[9]}" "$sum"
		assert_equal "${f[10]}" "$(thousandths "${f[8]}" "${f[9]}")"
	done
}

@test "op-table.jq prints one line per op: compute, exchange, sync, local-copy and their total" {
	run jq -r -f "$ROOT/share/jq/op-table.jq" "$TINY_CAPTURE"
	assert_success
	assert_output "$(jq -r '.ops[] | "\(.op)\t\(.compute_cycles)\t\(.exchange_cycles)\t\(.sync_cycles)\t\(.local_copy_cycles)\t\(.total_cycles)"' "$TINY_CAPTURE")"
	assert_equal "${#lines[@]}" 5
	run awk -F '\t' 'NF != 6 || $6 != $2 + $3 + $4 + $5 { print "bad: " $0 }' <<< "$output"
	assert_output ""
}

# commas N: N with a comma every three digits
commas() {
	local n=$1 out=""
	while [ ${#n} -gt 3 ]; do out=",${n: -3}$out"; n=${n:0:${#n}-3}; done
	echo "$n$out"
}

@test "summary-head.jq prints the model, machine, totals, each limit with its worst tile, the time and the floors in ten lines" {
	siglip_ok
	run jq -r -f "$ROOT/share/jq/summary-head.jq" "$SIGLIP_CAPTURE"
	assert_success
	assert_equal "${#lines[@]}" 10
	assert_line --index 0 'model siglip-mlp on amp1472 (1472 tiles)'
	read -r ph tr by <<< "$(jq -r '.summary | "\(.phases) \(.transfers) \(.bytes)"' "$SIGLIP_CAPTURE")"
	assert_line --index 1 "phases run $ph, transfers $(commas "$tr"), bytes sent $(commas "$by") (each send once, however many tiles receive it)"
	assert_line --index 2 --regexp '^max row bytes [0-9]+$'
	s=$(jq -r '.summary | "tables per tile: max \(.max_table_bytes) (tile \(.max_table_tile), largest row in phase \(.max_table_phase)), median \(.median_table_bytes), against the budget 81920: OVER"' "$SIGLIP_CAPTURE")
	assert_line --index 3 "$s"
	assert_line --index 4 --regexp '^fragments per tile: max [0-9]+ \(tile [0-9]+, most in phase [0-9]+\) against the limit 16384: ok$'
	assert_line --index 5 --regexp '^SRAM per tile: tensors at their peak max [0-9]+ \(tile [0-9]+, step [0-9]+\); with tables max [0-9]+ \(tile [0-9]+\) against 586960 available: (ok|OVER)$'
	assert_line --index 6 "$(jq -r '.summary | "modelled cycles: compute \(.compute_cycles), exchange \(.exchange_cycles), sync \(.sync_cycles), local copies \(.local_copy_cycles), total \(.total_cycles)"' "$SIGLIP_CAPTURE")"
	# the floor, its parts in the unit of its size, and the total's ratio to it
	local c m s t tot ex exf unit div part want=""
	read -r c m s t tot ex exf <<< "$(jq -r '.summary | "\(.floor.compute_floor_cycles) \(.floor.movement_floor_cycles) \(.floor.sync_floor_cycles) \(.floor.total_floor_cycles) \(.total_cycles) \(.exchange_cycles) \(.exchange_floor_cycles)"' "$SIGLIP_CAPTURE")"
	if [ "$t" -ge 1000000 ]; then unit=M div=100000; elif [ "$t" -ge 1000 ]; then unit=K div=100; else unit=""; fi
	for part in "$c" "$m" "$s"; do
		if [ -n "$unit" ]; then
			part=$(((2 * part + div) / (2 * div)))
			part="$((part / 10)).$((part % 10))$unit"
		fi
		want+="${want:+:}$part"
	done
	IFS=: read -r c m s <<< "$want"
	# 1.5 GHz: microseconds = cycles / 1500; siglip-mlp serves its batch of 2 images
	local us=$(thousandths "$tot" 1500) ips=$(((2 * 2 * 1500000000 + tot) / (2 * tot)))
	assert_line --index 7 "time at 1.5 GHz: $us us per run, $(commas "$ips") images/s"
	assert_line --index 8 "floor: $(commas "$t") cycles (compute $c, movement $m, sync $s); total is $(thousandths "$tot" "$t")x the floor"
	assert_line --index 9 "exchange: $(commas "$ex") cycles, $(thousandths "$ex" "$exf")x the per-phase floors ($(commas "$exf") cycles)"
	# a capture of version 4 (no floors) gives the first seven lines alone
	run jq -r -f "$ROOT/share/jq/summary-head.jq" "$ROOT/tests/fuzz/capture/tiny-mlp.json"
	assert_success
	assert_equal "${#lines[@]}" 7
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
		jq_empty '.machine.tiles as $t | [.compute[] | select(keys_unsorted != ["step","op","compute","count","tiles","slowest_tile","cycles"]
			or .count != 1 or .tiles < 1 or .slowest_tile < 0 or .slowest_tile >= $t)]' "$c"
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
	# x, xn, z canonical [2, 1, 80] per owner; h, g [2, 1, 200]. mlp_up: fp8
	# [74 x 80] x [80 x 200] on one tile. mlp_down: grid [3, 2, 5], late cast:
	# a blocks [2, 13, 128] cast on 30 tiles, partials 26 x 128 x 16, then
	# [2 partials, 2, 13, 16] reduced per block.
	local ew=1 red=2 call=200 fp8=128
	local want="2 layernorm $((2 * 80 * red))
3 cast $((2 * 80 * ew))
7 matmul $(( (74 * 80 * 200 + fp8 - 1) / fp8 + call ))
9 gelu $((2 * 200 * ew))
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
	assert_output "$((160 * 5)) $((160 * 3)) $((74 * 80 * 200 / 128)) $((400 * 3)) $((3328 * 3)) $((26 * 128 * 16 / 128)) $((832 * 5)) $((160 * 3))"
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
# study STAGE SED OUT: STAGE with its machine header edited by SED, as a
# study of another machine (capture takes its rates from a machine file,
# never from a header): the edited header written as OUT.machine, a
# machine file of its own, and no machine file recorded in OUT's provenance
study() {
	sed -e "$2" -e '/^- {tool: amp-plan, /s/, {role: machine, [^}]*}//' "$1" >"$3"
	sed -n '3s/^machine: {/{amp-machine: 2, /p' "$3" >"$3.machine"
	! cmp -s "$1" "$3" && [ -s "$3.machine" ] || fail "study: nothing edited in $1"
}

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
		assert_equal "compute $(jq .summary.floor.compute_floor_cycles "$cap")" "compute $want"
		# the receivers' bytes over every run, spread over every tile's port
		want=$(jq '. as $c | ([$c.phases[] | .count as $n | $c.phase_traffic[.id | tostring][].receiver_payload_bytes * $n] | add)
			as $b | $c.machine as $m | ($b + $m.exchange_bytes_per_cycle * $m.tiles - 1) / ($m.exchange_bytes_per_cycle * $m.tiles) | floor' "$cap")
		assert_equal "movement $(jq .summary.floor.movement_floor_cycles "$cap")" "movement $want"
		# one sync per run of each op with a matmul or attention step
		want=$(jq '[.compute[] | select(.compute == "matmul" or .compute == "attention")] | unique_by(.op)
			| map(.count) | add * $s' --argjson s "$(jq .machine.sync_cycles "$cap")" "$cap")
		assert_equal "sync $(jq .summary.floor.sync_floor_cycles "$cap")" "sync $want"
		run jq -c '.summary as $s | $s.floor as $f | [
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
		'$b[0].summary.compute_cycles > $a[0].summary.compute_cycles and $b[0].summary.floor == ($a[0].summary.floor | .ratio = $b[0].summary.floor.ratio)'
	assert_output true
	# and a rate it uses does move it: more fp8 MACs per cycle, a smaller compute floor
	study "$VIT" '3s/fp8: \([0-9]*\)}/fp8: 1024}/' fast.yaml
	run amp-capture --machine fast.yaml.machine fast.yaml -o fast.json
	assert_success
	assert [ "$(jq .summary.floor.compute_floor_cycles fast.json)" -lt "$(jq .summary.floor.compute_floor_cycles "$VIT_CAPTURE")" ]
	assert_equal "$(jq .summary.floor.compute_floor_cycles fast.json)" "$(compute_floor fast.yaml)"
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

# ---- G. malformed input ----

@test "capture rejects a plan, a composed, an expanded and an exchange stage naming file:line:col" {
	run amp-plan "$MODELS/tiny-mlp.yaml" -o p.yaml
	assert_success
	run amp-compose p.yaml -o c.yaml
	assert_success
	run amp-expand c.yaml -o e.yaml
	assert_success
	run amp-exchange e.yaml -o x.yaml
	assert_success
	mkdir out
	for f in p:amp-plan c:amp-plan e:amp-expand x:amp-exchange; do
		run --separate-stderr amp-capture "${f%%:*}.yaml" -o out/c.json
		assert_failure 1
		assert_equal "$output" ""
		assert_equal "$stderr" "amp-capture: ${f%%:*}.yaml:1:9: expected format 'amp-group', found '${f#*:}'"
	done
	run ls -A out
	assert_output ""
}

# rejects FILE EXPECTED: amp-capture fails with status 1, nothing on stdout,
# one message containing EXPECTED.
rejects() {
	run --separate-stderr amp-capture "$1"
	assert_failure 1
	assert_equal "$output" ""
	assert_equal "${#stderr_lines[@]}" 1
	assert_regex "$stderr" '^amp-capture: '
	[[ "$stderr" == *"$2"* ]] || fail "expected '$2' in: $stderr"
}

@test "capture rejects a stage of another format" {
	rejects "$BAD/capture-wrong-format.yaml" "capture-wrong-format.yaml:2:9: expected format 'amp-group', found 'amp-exchange'"
}

@test "capture rejects a grouped stage of an unsupported version" {
	rejects "$BAD/capture-version.yaml" "capture-version.yaml:3:10: unsupported amp-group version 10"
}

@test "capture rejects a transfer of an unknown kind" {
	rejects "$BAD/capture-kind.yaml" "capture-kind.yaml:41:19: unknown kind 'forward'"
}

@test "capture rejects a truncated zstd stream" {
	run zstd -q --check "$TINY" -o t.zst
	assert_success
	size=$(stat -c %s t.zst)
	head -c $((size / 2)) t.zst > cut.yaml
	rejects cut.yaml "'cut.yaml': truncated zstd stream"
}

@test "capture --tiles writes per-tile and per-phase figures that add up to the capture" {
	local m
	for m in tiny-mlp siglip-mlp; do
		amp-plan "$MODELS/$m.yaml" | amp-compose | amp-expand | amp-exchange | amp-group > g.yaml
		run --separate-stderr amp-capture --tiles tiles.tsv -o c.json g.yaml
		assert_success
		run amp-capture g.yaml
		assert_equal "$output" "$(cat c.json)"      # the capture itself is unchanged
		run head -n 2 tiles.tsv
		assert_line --index 0 "# amp-tiles 2: model $m on amp1472 (1472 tiles)"
		assert_line --index 1 $'tile\tphase\tsent_bytes\treceived_bytes\tfragments\ttable_bytes\tsram_peak_bytes\tbusy_cycles'
		# busy cycles: '-' on every all line; per phase, the latest tile is the phase's cycles
		run awk -F '\t' 'NR > 2 && $2 == "all" && $8 != "-" { bad++ } END { print bad + 0 }' tiles.tsv
		assert_output 0
		run awk -F '\t' 'NR > 2 && $2 != "all" { if ($8 > b[$2]) b[$2] = $8 } END { for (p in b) print p, b[p] }' tiles.tsv
		assert_equal "$(printf '%s\n' "$output" | sort -n)" \
			"$(jq -r '.phases[] | select(.transfers > 0) | "\(.id) \(.cycles)"' c.json)"
		run awk -F '\t' 'NR > 2 && $2 == "all" { s += $3; if ($6 > t) t = $6; if ($5 > f) f = $5; if ($7 > p) p = $7 }
			END { print s, t, f, p }' tiles.tsv
		assert_output "$(jq -r '.summary | "\(.bytes) \(.max_table_bytes) \(.max_fragments) \(.max_sram_bytes)"' c.json)"
		# per phase, the tiles' bytes sent in one run are the phase's bytes
		run awk -F '\t' 'NR > 2 && $2 != "all" { s[$2] += $3 } END { for (p in s) print p, s[p] }' tiles.tsv
		local line
		while read -r p b; do
			assert_equal "phase $p: $b" "phase $p: $(jq ".phases[$p].bytes" c.json)"
		done < <(printf '%s\n' "$output" | sort -n)
		# every phase with traffic has lines
		run awk -F '\t' 'NR > 2 && $2 != "all" { print $2 }' tiles.tsv
		assert_equal "$(printf '%s\n' "$output" | sort -nu | wc -l)" "$(jq '[.phases[] | select(.transfers > 0)] | length' c.json)"
	done
}

@test "capture's memory: a record per step whose largest is the summary's, and the worst tile's tensors add up to its peak" {
	local m
	for m in tiny-mlp siglip-mlp; do
		amp-plan "$MODELS/$m.yaml" | amp-compose | amp-expand | amp-exchange | amp-group > g.yaml
		amp-capture -o c.json g.yaml
		# one record per step, in order; every max at least its median
		run jq -r '[.memory.steps[].step] == [range(0; .memory.steps | length)] and
			all(.memory.steps[]; .max_bytes >= .median_bytes and .max_bytes >= .worst_tile_bytes) and
			([.memory.steps[].worst_tile_bytes] | max) == .memory.worst.tensor_bytes and
			(.memory.steps | length) == ([.compute[].step, .phases[].steps[]] | max + 1)' c.json
		assert_output true
		run jq -r '[([.memory.steps[].max_bytes] | max), .summary.max_tensor_bytes,
			([.memory.worst.tensors[].bytes] | add), .memory.worst.tensor_bytes,
			(.memory.steps[.memory.worst.step].max_bytes), .memory.worst.tile, .summary.max_tensor_tile] | @tsv' c.json
		local a b c d e t u
		read -r a b c d e t u <<<"$output"
		assert_equal "$a $c $d $e $t" "$b $b $b $b $u"
		# its table bytes are its all line's in tiles.tsv, and its placements are the stage's
		amp-capture --tiles t.tsv -o /dev/null g.yaml
		assert_equal "$(jq .memory.worst.table_bytes c.json)" \
			"$(awk -F'\t' -v t="$t" '$1 == t && $2 == "all" { print $6 }' t.tsv)"
		while read -r p; do
			[ "$p" = null ] || grep -q "^- {name: $p, " g.yaml || grep -qF "{name: $p," g.yaml || fail "no placement $p in the stage"
		done < <(jq -r '.memory.worst.tensors[] | select(.tensor != "(scratch)") | .placement' c.json)
	done
}

@test "capture's median table bytes is every tile's median, the middle two averaged for an even count" {
	# counted from --tiles, where a tile that holds nothing has no line and
	# counts 0; vit-tiny on 48 and 40 tiles has middles that differ
	local n mid
	for n in 48 40 47; do
		sed "s/^tiles: .*/tiles: $n/" "$ROOT/tests/models/machine-48.yaml" > m.yaml
		grouped "$ROOT/tests/models/vit-tiny.yaml" g.yaml "$PWD/m.yaml"
		amp-capture --machine m.yaml --tiles t.tsv g.yaml -o c.json
		mid=$(awk -F '\t' 'NR > 2 && $2 == "all" { print $6 }' t.tsv | sort -n | awk -v T="$n" '
			{ a[NR] = $1 }
			END { z = T - NR; for (i = 1; i <= T; i++) v[i] = i <= z ? 0 : a[i - z]
			      if (T % 2) print v[(T + 1) / 2], "odd"
			      else print int((v[T / 2] + v[T / 2 + 1]) / 2), (v[T / 2] == v[T / 2 + 1] ? "same" : "differ") }')
		assert_equal "$n: $(jq -r .summary.median_table_bytes c.json)" "$n: ${mid% *}"
		[ "$n" -eq 47 ] || [ "${mid#* }" = differ ] || fail "$n tiles: the middle two are equal, the case tests nothing"
	done
}
