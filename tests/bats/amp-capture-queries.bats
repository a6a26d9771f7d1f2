#!/usr/bin/env bats
# amp-capture: the shipped queries (share/jq/) on captures.

load common
load stages
load amp-capture
bats_require_minimum_version 1.5.0

setup_file() {
	capture_fixtures tiny siglip
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

@test "summary-head.jq prints the model, machine, totals, each limit with its worst tile, the time, the bound and the floors in eleven lines" {
	siglip_ok
	run jq -r -f "$ROOT/share/jq/summary-head.jq" "$SIGLIP_CAPTURE"
	assert_success
	assert_equal "${#lines[@]}" 11
	assert_line --index 0 'model siglip-mlp on amp1472 (1472 tiles)'
	read -r ph tr by <<< "$(jq -r '.summary | "\(.phases) \(.transfers) \(.bytes)"' "$SIGLIP_CAPTURE")"
	assert_line --index 1 "phases run $ph, transfers $(commas "$tr"), bytes sent $(commas "$by") (each send once, however many tiles receive it)"
	assert_line --index 2 --regexp '^max row bytes [0-9]+$'
	s=$(jq -r '.summary | "tables per tile: max \(.max_table_bytes) (tile \(.max_table_tile), largest row in phase \(.max_table_phase)), median \(.median_table_bytes), against the budget 81920: OVER"' "$SIGLIP_CAPTURE")
	assert_line --index 3 "$s"
	assert_line --index 4 --regexp '^fragments per tile: max [0-9]+ \(tile [0-9]+, most in phase [0-9]+\) against the limit 16384: ok$'
	assert_line --index 5 --regexp '^SRAM per tile: tensors at their peak max [0-9]+ \(tile [0-9]+, step [0-9]+\); with tables max [0-9]+ \(tile [0-9]+\) against 586960 available: (ok|OVER)$'
	assert_line --index 6 "$(jq -r '.summary | "modelled cycles: compute \(.compute_cycles), exchange \(.exchange_cycles), sync \(.sync_cycles), local copies \(.local_copy_cycles), total \(.total_cycles)"' "$SIGLIP_CAPTURE")"
	# the bound and this plan's movement floor, their parts in the unit of
	# their size, and the total's ratio to each
	local c m s t tot ex exf unit div part want="" bc bk bs bm bt
	read -r bc bk bs bm bt <<< "$(jq -r '.summary.bound | "\(.bound_compute_cycles) \(.bound_calls_cycles) \(.bound_sync_cycles) \(.bound_movement_cycles) \(.bound_cycles)"' "$SIGLIP_CAPTURE")"
	if [ "$bt" -ge 1000000 ]; then unit=M div=100000; elif [ "$bt" -ge 1000 ]; then unit=K div=100; else unit=""; fi
	for part in "$bc" "$bk" "$bs" "$bm"; do
		if [ -n "$unit" ]; then
			part=$(((2 * part + div) / (2 * div)))
			part="$((part / 10)).$((part % 10))$unit"
		fi
		want+="${want:+:}$part"
	done
	IFS=: read -r bc bk bs bm <<< "$want"
	want=""
	read -r c m s t tot ex exf <<< "$(jq -r '.summary | "\(.plan_floor.compute_floor_cycles) \(.plan_floor.movement_floor_cycles) \(.plan_floor.sync_floor_cycles) \(.plan_floor.total_floor_cycles) \(.total_cycles) \(.exchange_cycles) \(.exchange_floor_cycles)"' "$SIGLIP_CAPTURE")"
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
	assert_line --index 8 "bound: $(commas "$bt") cycles (compute $bc, matmul calls $bk, sync $bs, movement $bm); total is $(thousandths "$tot" "$bt")x the bound"
	assert_line --index 9 "this plan's movement floor: $(commas "$t") cycles (compute $c, its movement $m, sync $s); total is $(thousandths "$tot" "$t")x it"
	assert_line --index 10 "exchange: $(commas "$ex") cycles, $(thousandths "$ex" "$exf")x the per-phase floors ($(commas "$exf") cycles)"
	# a capture of version 4 (no floors) gives the first seven lines alone
	run jq -r -f "$ROOT/share/jq/summary-head.jq" "$ROOT/tests/fuzz/capture/tiny-mlp.json"
	assert_success
	assert_equal "${#lines[@]}" 7
}
