#!/usr/bin/env bats
# amp-capture: grouped stage or program -> capture JSON (formats/capture.md).
# The command-line contract, the document's shape, a program's capture
# against its stage's, the golden file, and malformed input
# (tests/bad/capture-*). The other suites: amp-capture-movement (the
# format's invariants on siglip-mlp, agreement with amp-emit's listing, the
# replay's examples), -queries (share/jq/), -cost (compute cost), -floors
# and -tiles (--tiles, memory, the median table).

load common
load stages
load amp-capture
bats_require_minimum_version 1.5.0

setup_file() {
	capture_fixtures tiny siglip
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
		assert_output '["amp-capture",8]'
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
			 (.summary | select(q(.plan_floor.ratio) != r(.total_cycles; .plan_floor.total_floor_cycles)) | "plan floor"),
			 (.summary | select(q(.bound.ratio) != r(.total_cycles; .bound.bound_cycles)) | "bound"),
			 (. as $c | .summary | select(q(.microseconds) != r(.total_cycles * 1000000; $c.machine.clock_hz)) | "microseconds"),
			 (. as $c | .summary | select(q(.throughput.per_second) !=
				r(.throughput.items * $c.machine.clock_hz; .total_cycles)) | "throughput")]' "$f"
		# and the file holds them with exactly three decimals
		run grep -oE '"(floor_ratio|exchange_floor_ratio|ratio)": ([0-9]+\.[0-9]{3}|null)[,}]' "$f"
		assert_equal "${#lines[@]}" "$(jq '.phases | length + 3' "$f")"
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
		assert_output '["phases","transfers","bytes","max_row_bytes","max_table_bytes","max_table_tile","max_table_phase","median_table_bytes","max_fragments","max_fragments_tile","max_fragments_phase","max_tensor_bytes","max_tensor_tile","max_tensor_step","max_sram_bytes","max_sram_tile","exchange_cycles","sync_cycles","local_copy_cycles","compute_cycles","total_cycles","exchange_floor_cycles","exchange_floor_ratio","bound","plan_floor","microseconds","throughput"]'
		run jq -c '.summary.plan_floor | keys_unsorted' "$f"
		assert_output '["compute_floor_cycles","movement_floor_cycles","sync_floor_cycles","total_floor_cycles","ratio"]'
		run jq -c '.summary.bound | keys_unsorted' "$f"
		assert_output '["bound_compute_cycles","bound_calls_cycles","bound_sync_cycles","bound_movement_cycles","bound_cycles","bound_products","bound_syncs","bound_spread_products","ratio"]'
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
	rejects "$BAD/capture-version.yaml" "capture-version.yaml:3:10: unsupported amp-group version 18"
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
