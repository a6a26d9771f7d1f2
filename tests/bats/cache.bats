#!/usr/bin/env bats
# A KV cache across runs (model format 5): tests/models/tiny-prefill.yaml
# appends 8 tokens' k and v to a state of 32 positions, and
# tests/models/tiny-decode.yaml appends one token's and attends over the
# cache up to its runtime position. Planned as a resident home written in
# place; run by amp-run --prefill and --steps, carrying the state on the
# machine and in the reference; positions outside the cache, programs
# whose states disagree, stages of an earlier version and the malformed
# models tests/bad/model-{state,append,apos}-*.yaml are refused.

bats_require_minimum_version 1.5.0
load common

PRE=$ROOT/tests/models/tiny-prefill.yaml
DEC=$ROOT/tests/models/tiny-decode.yaml

@test "cache: the plan holds the state in a resident home that its append writes in place" {
	amp-plan "$DEC" -o p.yaml
	run grep -c '^- {name: cache, role: state, shape: \[2, 32, 64\], dtype: fp16}$' p.yaml
	assert_output 1
	# whole rows, cut by batch entry and into 32 blocks of one position
	run grep -c '^- {name: cache@home, tensor: cache, layout: row-major, split: \[2, 32, 1\], block: \[1, 1, 64\], .*stride: \[32, 1, 0\], rep: \[\], ' p.yaml
	assert_output 1
	# each batch entry's new row multicast to the 32 tiles of its blocks
	run grep -c '^- {name: kv@append.rows, tensor: kv, .*split: \[2, 1, 1\], block: \[1, 1, 64\], .*rep: \[32\], rstride: \[1\]}$' p.yaml
	assert_output 1
	run grep -c '^- {step: [0-9]*, compute: append, op: store, in: \[kv@append.rows, pos@append.positions\], out: cache@home}$' p.yaml
	assert_output 1
	run grep -c '^- {step: [0-9]*, compute: attention, op: attn, in: \[q@attn.q, cache@attn.k, cache@attn.v, pos@attn.positions\], .*causal: true' p.yaml
	assert_output 1
}

@test "cache: prefill, then 3 decode steps, run byte-exact, each run and the carried state within cosine 0.999" {
	program "$PRE" pre.amp
	program "$DEC" dec.amp
	run --separate-stderr amp-run dec.amp --prefill pre.amp --steps 3
	assert_success
	assert_line --index 0 --regexp '^movement: byte-exact after every phase \([0-9]+ phases, every run\)$'
	assert_line --index 2 --regexp "^per op: 16 ops checked after every run"
	assert_line --index 3 --regexp '^run 0 \(tiny-prefill, position 0\): output z: cosine '
	assert_line --index 4 --regexp '^run 1 \(tiny-decode, position 8\): output z: cosine '
	assert_line --index 6 --regexp '^run 3 \(tiny-decode, position 10\): state cache: cosine '
	assert_line --index 7 --regexp '^run 3 \(tiny-decode, position 10\): output z: cosine '
	cosines_at_least 0.999
}

@test "cache: an fp8 cache takes one scale for the prefill and the decode, from one calibration of both" {
	sed 's/cache: {shape: \[2, 32, 64\], dtype: fp16}/cache: {shape: [2, 32, 64], dtype: fp8}/' "$PRE" > p8.yaml
	sed 's/cache: {shape: \[2, 32, 64\], dtype: fp16}/cache: {shape: [2, 32, 64], dtype: fp8}/' "$DEC" > d8.yaml
	run grep -c 'dtype: fp8}$' p8.yaml
	[ "$output" -ge 1 ]
	# one file for both programs: every name at the larger of its scales
	amp-run --calibrate d8.yaml --prefill p8.yaml -o both.yaml
	amp-run --calibrate p8.yaml -o pre.yaml
	amp-run --calibrate d8.yaml -o dec.yaml
	local name s b p d
	while read -r name s; do
		name=${name%:}
		p=$(sed -n "s/^  $name: //p" pre.yaml) d=$(sed -n "s/^  $name: //p" dec.yaml)
		b=$s
		[ -z "$p" ] || [ "$b" -ge "$p" ] || fail "$name: $b below the prefill's $p"
		[ -z "$d" ] || [ "$b" -ge "$d" ] || fail "$name: $b below the decode's $d"
		[ "$b" = "${p:-$d}" ] || [ "$b" = "${d:-$p}" ] || fail "$name: $b is neither's"
	done < <(sed -n 's/^  \([^ ]*\) \(-*[0-9]*\)$/\1 \2/p' both.yaml)
	run grep -c '^  cache: ' both.yaml
	assert_output 1
	local x
	for x in p d; do
		amp-plan --scales both.yaml ${x}8.yaml | amp-compose | amp-expand | amp-exchange | amp-group > $x.g
		amp-emit --model ${x}8.yaml --scales both.yaml $x.g -o $x.amp
	done
	run --separate-stderr amp-run d.amp --prefill p.amp --steps 2
	assert_success
	cosines_at_least 0.99
	# a decode calibrated apart, on a smaller range for the cache (as one
	# calibrated on an empty cache would be): refused, naming both scales
	sed 's/^  cache: .*/  cache: -12/' both.yaml > small.yaml
	amp-plan --scales small.yaml d8.yaml | amp-compose | amp-expand | amp-exchange | amp-group > s.g
	amp-emit --model d8.yaml --scales small.yaml s.g -o s.amp
	run --separate-stderr amp-run s.amp --prefill p.amp
	assert_failure 1
	[[ $stderr == *"state 'cache'"*"fp8 scale -12' against 'state cache"*"fp8 scale "* ]] || fail "unexpected: $stderr"
	# and alone, its new rows saturate at that scale: the append's own check fails
	run --separate-stderr amp-run s.amp
	assert_failure 1
	[[ $stderr == *"op 'store': the machine's result differs from the FP32 reference"* ]] || fail "unexpected: $stderr"
	# --prefill with --calibrate names a model: a program there is refused
	run --separate-stderr amp-run --calibrate d8.yaml --prefill p.amp -o x.yaml
	assert_failure 1
	assert_equal "$stderr" "amp-run: p.amp: a program; calibration reads model files (with --prefill, the prefill's model)"
	[ ! -e x.yaml ]
}

@test "cache: decode steps from a given position, and from the prefill's, are deterministic" {
	program "$PRE" pre.amp
	program "$DEC" dec.amp
	run --separate-stderr amp-run dec.amp --steps 2 --position 5
	assert_success
	assert_line --index 3 --regexp '^run 0 \(tiny-decode, position 5\): output z: '
	assert_line --index 5 --regexp '^run 1 \(tiny-decode, position 6\): output z: '
	cosines_at_least 0.999
	local a b
	a=$(amp-run dec.amp --prefill pre.amp --steps 2)
	b=$(amp-run dec.amp --prefill pre.amp --steps 2)
	assert_equal "$a" "$b"
}

@test "cache: an append costs a local copy of the rows its tile received" {
	program "$DEC" dec.amp
	amp-capture dec.amp.g -o c.json
	# one row of 64 fp16 values (128 bytes) per tile at 8 bytes a cycle, on the 64 tiles of the home
	run jq -r '[.. | objects | select(.compute? == "append")] | .[0] | "\(.tiles) \(.cycles)"' c.json
	assert_output "64 16"
}

@test "cache: a position outside the cache is refused by amp-run" {
	program "$DEC" dec.amp
	run --separate-stderr amp-run dec.amp --position 32
	assert_failure 1
	assert_equal "$output" ""
	assert_equal "$stderr" "amp-run: positions 'pos' hold 32 at [0, 0]: state 'cache' has positions 0 to 31 (append 'store')"
	run --separate-stderr amp-run dec.amp --position 30 --steps 3
	assert_failure 1
	[[ $stderr == *"positions 'pos' hold 32 at [0, 0]"* ]] || fail "$stderr"
}

@test "cache: a prefill that shares no state, or one of another shape, is refused" {
	program "$DEC" dec.amp
	program "$ROOT/tests/models/tiny-decoder.yaml" layer.amp
	run --separate-stderr amp-run dec.amp --prefill layer.amp
	assert_failure 1
	assert_equal "$stderr" "amp-run: 'dec.amp' and the prefill 'layer.amp' share no state: nothing would carry on"
	sed 's/cache: {shape: \[2, 32, 64\]/cache: {shape: [2, 16, 64]/' "$PRE" > short.yaml
	program short.yaml short.amp
	run --separate-stderr amp-run dec.amp --prefill short.amp
	assert_failure 1
	assert_equal "$stderr" "amp-run: state 'cache' of 'dec.amp' differs from the prefill's ('short.amp'): a tensor of that name must be a state of the same shape and dtype, but for a batch that divides the program's (the same part of it for every state)"
}

@test "cache: --steps and --position take whole numbers in range" {
	program "$DEC" dec.amp
	run --separate-stderr amp-run dec.amp --steps 0
	assert_failure 2
	[[ $stderr == *"--steps takes an integer from 1 to 1048576, not '0'"* ]] || fail "$stderr"
	run --separate-stderr amp-run dec.amp --position -1
	assert_failure 2
	[[ $stderr == *"--position takes an integer from 0 to 16777216 "*", not '-1'"* ]] || fail "$stderr"
}

@test "cache: amp-run refuses a program whose attention ignores the positions the model's reads" {
	amp-plan "$DEC" | amp-compose > p.yaml
	sed 's/, pos@attn.positions\]/]/' p.yaml > nopos.yaml
	! cmp -s p.yaml nopos.yaml || fail "no attention positions to drop"
	amp-expand nopos.yaml | amp-exchange | amp-group | amp-emit --no-model -o nopos.amp
	run --separate-stderr amp-run --model "$DEC" nopos.amp
	assert_failure 1
	[[ $stderr == *"op 'attn': its step "*" reads 3 operands, the model 4"* ]] || fail "$stderr"
}

@test "cache: a version 7 stage with a state is refused at its role" {
	amp-plan "$DEC" -o p.yaml
	sed 's/^version: 17$/version: 7/' p.yaml > p7.yaml
	run --separate-stderr amp-compose p7.yaml
	assert_failure 1
	[[ $stderr =~ ^amp-compose:\ p7.yaml:[0-9]+:[0-9]+:\ role\ state\ needs\ version\ 8\ \(this\ file\ is\ version\ 7\)$ ]] ||
		fail "unexpected: $stderr"
}

@test "cache: malformed states, appends and attention positions are refused at the key" {
	plan_rejects "$BAD/model-state-dtype.yaml" 8:38 \
		"state 'cache' must be an fp16 or fp8 [batch, positions, features] tensor (a KV cache)" "$BAD/model-state-dtype.yaml"
	plan_rejects "$BAD/model-state-rank.yaml" 8:18 \
		"state 'cache' must be an fp16 or fp8 [batch, positions, features] tensor (a KV cache)" "$BAD/model-state-rank.yaml"
	plan_rejects "$BAD/model-state-version.yaml" 8:3 "state needs amp-model: 5 (this file is version 4)" \
		"$BAD/model-state-version.yaml"
	plan_rejects "$BAD/model-state-operand.yaml" 28:5 \
		"add 'peek': state 'cache' can only be an append's cache or an attention's kv" "$BAD/model-state-operand.yaml"
	plan_rejects "$BAD/model-append-not-state.yaml" 26:38 "append 'store': cache 'kv0' must be a state" \
		"$BAD/model-append-not-state.yaml"
	plan_rejects "$BAD/model-append-positions.yaml" 26:63 \
		"append 'store': positions 'x' must be int32 [2, 1, 1], a position per row of 'kv'" \
		"$BAD/model-append-positions.yaml"
	plan_rejects "$BAD/model-append-rows.yaml" 26:48 \
		"append 'store': x 'kv' must be an fp16 activation [2, at most 32, 32], rows of state 'cache'" \
		"$BAD/model-append-rows.yaml"
	plan_rejects "$BAD/model-append-twice.yaml" 27:38 \
		"append 'again': state 'cache' is already appended by 'store' (line 26); a program appends each state once" \
		"$BAD/model-append-twice.yaml"
	plan_rejects "$BAD/model-append-repeat.yaml" 15:9 "append 'store': state 'cache' is appended outside every repeat (a repeat's own states, in its body)" \
		"$BAD/model-append-repeat.yaml"
	plan_rejects "$BAD/model-append-first.yaml" 26:75 "append 'store': rows 30 to 37 pass the 32 positions of state 'cache'" \
		"$BAD/model-append-first.yaml"
	plan_rejects "$BAD/model-append-version.yaml" 24:10 "op 'append' needs amp-model: 5 (this file is version 4)" \
		"$BAD/model-append-version.yaml"
	plan_rejects "$BAD/model-apos-causal.yaml" 27:81 \
		"attention 'attn': positions make it causal (each query sees the keys up to its position)" \
		"$BAD/model-apos-causal.yaml"
	plan_rejects "$BAD/model-apos-shape.yaml" 28:84 \
		"attention 'attn': positions 'pos2' must be int32 [2, 1, 1], a position per row of 'q'" \
		"$BAD/model-apos-shape.yaml"
	plan_rejects "$BAD/model-apos-version.yaml" 24:81 \
		"attention 'attn': positions needs amp-model: 5 (this file is version 4)" "$BAD/model-apos-version.yaml"
}

@test "cache: every malformed cache model in tests/bad is checked by this suite" {
	every_bad_checked 14 '$BAD/%s' "$BAD"/model-{state,append,apos}-*.yaml
}

@test "cache: a prefill's append from first: 0 sends each row to its block's tile alone" {
	amp-plan "$PRE" -o p.yaml
	# rows 0 to 7 of each batch entry to the tiles of positions 0 to 7: no replica
	run grep -c '^- {name: kv@append.rows, tensor: kv, layout: row-major, split: \[2, 8, 1\], block: \[1, 1, 64\], .*rep: \[\], ' p.yaml
	assert_output 1
	run grep -c '^- {step: [0-9]*, compute: append, op: store, in: \[kv@append.rows, pos@append.positions\], out: cache@home, first: 0}$' p.yaml
	assert_output 1
	program "$PRE" pre.amp
	run --separate-stderr amp-run pre.amp --position 3
	assert_failure 1
	assert_equal "$stderr" "amp-run: positions 'pos' hold 3 at [0, 0]: append 'store' writes its rows at positions 0 on (first)"
}

@test "cache: a decoder whose weights and caches leave too little room is refused with the bytes no plan avoids" {
	# SmolLM2-360M-shaped, 32 layers, batch 8, its caches at 2,432 positions instead of the shipped
	# 2,048: 362 MB of fp8 weights and 398 MB of fp8 caches (at 2,304, 377 MB, its homes cut by
	# kv head now fit)
	sed 's/shape: \[8, 2048, 640\]/shape: [8, 2432, 640]/' "$ROOT/share/models/smollm2-360m-decode.yaml" > long.yaml
	run grep -c '2432, 640' long.yaml
	assert_output 1
	plan_rejects long.yaml 15:3 "No plan avoids the parameters and states: 760342400 bytes, at least 516537 per tile" long.yaml
}

@test "cache: attention on the cache's home reads keys and values in place, every head on a tile, partials merged by head and chunk" {
	pin_home "$DEC" dh.yaml
	# one position a block (by default the home is halved while faster: 8 blocks of 4)
	amp-plan --state-blocks 32 dh.yaml -o p.yaml
	# no copy of the cache: k and v are its home
	run grep -c '^- {step: [0-9]*, copy: .*, operand: [kv], ' p.yaml
	assert_output 0
	# each head's 16 columns in 8 chunks of 2 (32 blocks to merge: the
	# narrowest chunks' trial is the fastest)
	run grep -c '^- {step: [0-9]*, compute: attention, op: attn, in: \[q@attn.q, cache@home, cache@home, pos@append.positions\], out: a.partial@attn.partial, heads: 4, kv_heads: 2, causal: true, scale: 0.25, scratch: 4, chunks: 8}$' p.yaml
	assert_output 1
	# q's whole row on each of its batch entry's 32 blocks; every head's partial (4 x (16 + 2 x 8)) per tile
	run grep -c '^- {name: q@attn.q, tensor: q, layout: row-major, split: \[2, 1, 1\], block: \[1, 1, 64\], base: 1408, stride: \[32, 0, 0\], rep: \[32\], rstride: \[1\]}$' p.yaml
	assert_output 1
	run grep -c '^- {name: a.partial, role: partial, shape: \[32, 2, 1, 128\], dtype: fp16}$' p.yaml
	assert_output 1
	# chunk c of head h merged on block 8h + c's tile: 32 merges of 32 blocks' 2 + 2 values
	run grep -c '^- {name: a.partial@attn.merge, tensor: a.partial, layout: row-major, split: \[1, 2, 1, 32\], block: \[32, 1, 1, 4\], base: 1408, stride: \[0, 32, 0, 1\], ' p.yaml
	assert_output 1
	run grep -c '^- {name: a.fp8@attn.out, tensor: a.fp8, layout: row-major, split: \[2, 1, 32\], block: \[1, 1, 2\], base: 1408, stride: \[32, 0, 1\], ' p.yaml
	assert_output 1
	# chunks at least 8 columns wide, as the planner's first trial cuts them, cost more
	local n w
	n=$(amp-compose p.yaml | amp-expand | amp-exchange | amp-group | amp-capture | jq .summary.total_cycles)
	sed 's/chunks: 8}$/chunks: 2}/; s/shape: \[32, 2, 1, 128\]/shape: [32, 2, 1, 80]/; s/split: \[1, 2, 1, 32\], block: \[32, 1, 1, 4\], base: 1408, stride: \[0, 32, 0, 1\]/split: [1, 2, 1, 8], block: [32, 1, 1, 10], base: 1408, stride: [0, 32, 0, 1]/; s/split: \[32, 2, 1, 1\], block: \[1, 1, 1, 128\]/split: [32, 2, 1, 1], block: [1, 1, 1, 80]/; s/split: \[2, 1, 32\], block: \[1, 1, 2\], base: 1408/split: [2, 1, 8], block: [1, 1, 8], base: 1408/' p.yaml > w.yaml
	w=$(amp-compose w.yaml | amp-expand | amp-exchange | amp-group | amp-capture | jq .summary.total_cycles)
	[ "$n" -lt "$w" ] || fail "chunks of 2: $n cycles, of 8: $w"
	# after a prefill, 3 decode steps byte-exact and within cosine 0.999, the state carried on
	program "$PRE" pre.amp
	amp-compose p.yaml | amp-expand | amp-exchange | amp-group > dh.g
	amp-emit --model dh.yaml dh.g -o dh.amp
	run --separate-stderr amp-run dh.amp --prefill pre.amp --steps 3
	assert_success
	assert_line --index 0 --regexp '^movement: byte-exact after every phase \([0-9]+ phases, every run\)$'
	assert_line --index 6 --regexp '^run 3 \(tiny-decode, position 10\): state cache: cosine '
	cosines_at_least 0.999
}

@test "cache: the cycles objective attends on the home of Qwen2.5-0.5B's decode cache, and it costs fewer cycles than relaying keys and values" {
	local m=$ROOT/share/models/qwen2.5-0.5b-1layer-decode.yaml
	amp-plan "$m" -o p.yaml
	run grep -c '^- {step: [0-9]*, compute: attention, op: attn, in: \[q@attn.q, cache@home, cache@home, pos@append.positions\], .*heads: 14, kv_heads: 2, .*chunks: 8}$' p.yaml
	assert_output 1
	{ cat "$m"; printf 'pins:\n  attn: {kv_staging: relay}\n'; } > relay.yaml
	amp-plan relay.yaml -o r.yaml
	run grep -c 'copy: relay, op: attn, operand: k, ' r.yaml
	assert_output 1
	local h r
	h=$(amp-compose p.yaml | amp-expand | amp-exchange | amp-group | amp-capture | jq .summary.total_cycles)
	r=$(amp-compose r.yaml | amp-expand | amp-exchange | amp-group | amp-capture | jq .summary.total_cycles)
	[ "$h" -lt "$r" ] || fail "home $h cycles, relay $r"
}

@test "cache: a decode step of one sequence reads its cache's home in fewer, longer blocks of positions when that is faster, byte-exact" {
	# SmolLM2-360M's layer at batch 1 over 512 positions: as many blocks
	# as the tiles allow would be 256 of 2 positions a kv head
	sed 's/\[8, /[1, /g; s/2048/512/g' "$MODELS/smollm2-360m-1layer-decode.yaml" > b1.yaml
	run grep -c '^      cache: {shape: \[1, 512, 640\], dtype: fp8}$' b1.yaml
	assert_output 1
	amp-plan --state-blocks 1472 b1.yaml -o all.yaml
	run grep -c '^- {name: cache@home, tensor: cache, layout: row-major, split: \[1, 256, 5\], block: \[1, 2, 128\], ' all.yaml
	assert_output 1
	# by default halved while faster: 32 blocks of 16
	amp-plan b1.yaml -o p.yaml
	run grep -c '^- {name: cache@home, tensor: cache, layout: row-major, split: \[1, 32, 5\], block: \[1, 16, 128\], ' p.yaml
	assert_output 1
	amp-plan --state-blocks 64 b1.yaml -o h.yaml
	run grep -c '^- {name: cache@home, tensor: cache, layout: row-major, split: \[1, 64, 5\], block: \[1, 8, 128\], ' h.yaml
	assert_output 1
	local c a h
	c=$(amp-compose p.yaml | amp-expand | amp-exchange | amp-group | amp-capture | jq .summary.total_cycles)
	a=$(amp-compose all.yaml | amp-expand | amp-exchange | amp-group | amp-capture | jq .summary.total_cycles)
	h=$(amp-compose h.yaml | amp-expand | amp-exchange | amp-group | amp-capture | jq .summary.total_cycles)
	[ "$c" -lt "$h" ] && [ "$h" -lt "$a" ] || fail "32 blocks $c cycles, 64 blocks $h, 256 blocks $a"
	amp-compose p.yaml | amp-expand | amp-exchange | amp-group > p.g
	amp-emit --model b1.yaml p.g -o p.amp
	run --separate-stderr amp-run p.amp --steps 2
	assert_success
	assert_line --index 0 --regexp '^movement: byte-exact after every phase \([0-9]+ phases, every run\)$'
	cosines_at_least 0.99
	run amp-plan --state-blocks 0 b1.yaml
	assert_failure 2
	assert_output --partial "--state-blocks takes a count from 1 to 2147483647, not '0'"
}

@test "cache: kv_staging home is refused where the home does not allow it, and beside blocks" {
	# vit-tiny's MAP head's attention reads activations, not a state
	{ cat "$ROOT/tests/models/vit-tiny.yaml"; printf 'pins:\n  map_attn: {kv_staging: home}\n'; } > v.yaml
	run grep -c '^  - {op: attention, name: map_attn, q: mq, kv: mkv,' v.yaml
	assert_output 1
	plan_rejects v.yaml '[0-9]+:[0-9]+' "pin for 'map_attn': kv_staging home needs kv to be a state whose home holds one batch entry's block of positions per tile, and at least as many blocks as heads (or one)" v.yaml
	{ cat "$DEC"; printf 'pins:\n  attn: {blocks: [1, 2], kv_staging: home}\n'; } > b.yaml
	plan_rejects b.yaml '[0-9]+:[0-9]+' "pin for 'attn': kv_staging home takes its blocks from the state's home; pin no blocks" b.yaml
}

@test "cache: a version 8 stage with chunks is refused at the key" {
	pin_home "$DEC" dh.yaml
	amp-plan dh.yaml -o p.yaml
	sed 's/^version: 17$/version: 8/' p.yaml > p8.yaml
	run --separate-stderr amp-compose p8.yaml
	assert_failure 1
	[[ $stderr =~ ^amp-compose:\ p8.yaml:[0-9]+:[0-9]+:\ chunks\ needs\ version\ 9\ \(this\ file\ is\ version\ 8\)$ ]] ||
		fail "unexpected: $stderr"
}
