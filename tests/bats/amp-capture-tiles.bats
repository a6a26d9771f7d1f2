#!/usr/bin/env bats
# amp-capture: --tiles (per-tile and per-phase figures), the memory record
# and the median table bytes, each on stages planned here.

load common
load stages
load amp-capture
bats_require_minimum_version 1.5.0

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
