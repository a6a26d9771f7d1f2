#!/usr/bin/env bats
# amp-plan: what the plan says about the reference models: ownership, the
# grids it chooses or is pinned to, --explain, stagings and key blocks
# pinned, and the objectives.

bats_require_minimum_version 1.5.0
load common
load amp-plan

# The line of FILE that starts with PREFIX (a fixed string), or failure.
line_of() {
	local l
	while IFS= read -r l; do
		if [[ $l == "$2"* ]]; then
			printf '%s\n' "$l"
			return 0
		fi
	done <"$1"
	return 1
}

# ---- what the plan says ----

@test "plan output starts with the amp-plan header, machine and model" {
	run --separate-stderr amp-plan "$TINY"
	assert_success
	assert_line --index 0 'format: amp-plan'
	assert_line --index 1 'version: 17'
	assert_line --regexp '^machine: \{name: amp1472, tiles: 1472, sram_bytes: 638976, reserved_bytes: 52016,'
	assert_line 'model: tiny-mlp'
}

@test "plan gives siglip-mlp's input x 729 canonical owners of [2, 1, 1152] with --ownership tokens" {
	run --separate-stderr amp-plan --ownership tokens "$SIGLIP"
	assert_success
	assert_line 'model: siglip-mlp'
	assert_line --regexp '^- \{name: x@canon, tensor: x, layout: row-major, split: \[1, 729, 1\], block: \[2, 1, 1152\],'
	run --separate-stderr amp-plan --objective capacity "$SIGLIP"
	assert_line --regexp '^- \{name: x@canon, tensor: x, layout: row-major, split: \[1, 729, 1\], block: \[2, 1, 1152\],'
}

@test "plan splits siglip-mlp's batch across 1458 owners of [1, 1, 1152] by default, owner (b, t) on tile 729b + t" {
	run --separate-stderr amp-plan "$SIGLIP"
	assert_success
	assert_line --regexp '^- \{name: x@canon, tensor: x, layout: row-major, split: \[2, 729, 1\], block: \[1, 1, 1152\], base: 0, stride: \[729, 1, 0\],'
}

# summary_of PLAN: amp-capture's summary of PLAN lowered by the tools:
# max table bytes, max fragments, max SRAM with tables, total cycles.
summary_of() {
	amp-compose "$1" | amp-expand | amp-exchange | amp-group | amp-capture |
		jq -r '.summary | "\(.max_table_bytes) \(.max_fragments) \(.max_sram_bytes) \(.total_cycles)"'
}

@test "plan --ownership auto keeps whichever of tokens and batch the lowered figures favour, for memory and cycles" {
	for model in "$ROOT/tests/models/siglip-small.yaml" "$ROOT/tests/models/vit-tiny.yaml"; do
		for obj in memory cycles; do
			for own in auto tokens batch; do
				run amp-plan --objective $obj --ownership $own "$model" -o $own.plan
				assert_success
			done
			run cmp -s tokens.plan batch.plan
			assert_failure          # the two ownerships differ on these models
			read -r tt tf ts tc < <(summary_of tokens.plan)
			read -r bt bf bs bc < <(summary_of batch.plan)
			# fitting both; cycles: fewer; memory: headroom in 1% steps, then SRAM; ties: batch
			want=$(awk -v o=$obj -v tt=$tt -v tf=$tf -v ts=$ts -v tc=$tc -v bt=$bt -v bf=$bf -v bs=$bs -v bc=$bc '
				function ex(t, f, s,  x) { x = t / 81920; if (f / 16384 > x) x = f / 16384
					if (s / 586960 > x) x = s / 586960; return int(x * 100) }
				BEGIN { if (o == "cycles" && tc != bc) { print (tc < bc ? "tokens" : "batch"); exit }
					et = ex(tt, tf, ts); eb = ex(bt, bf, bs)
					if (et != eb) { print (et < eb ? "tokens" : "batch"); exit }
					print (ts < bs ? "tokens" : "batch") }')
			run same_but_provenance auto.plan $want.plan
			assert_success
		done
	done
}

@test "plan --explain names the ownership of the plan it wrote" {
	local model=$ROOT/tests/models/siglip-small.yaml own kept
	for own in tokens batch auto; do
		amp-plan --objective memory --ownership $own --explain=1 "$model" -o $own.plan > $own.txt
	done
	run grep -c '^ownership: tokens (token rows, the batch kept together)$' tokens.txt
	assert_output 1
	run grep -c '^ownership: batch (token rows, the batch split across the tiles left over)$' batch.txt
	assert_output 1
	kept=tokens
	same_but_provenance auto.plan batch.plan && kept=batch
	run grep -c "^ownership: $kept " auto.txt
	assert_output 1
}

@test "plan rejects an unknown ownership as a usage error" {
	run --separate-stderr amp-plan --ownership rows "$SIGLIP"
	assert_failure 2
	assert_equal "$stderr" "amp-plan: unknown ownership 'rows' (expected auto, tokens or batch)
Try 'amp-plan --help' for more information."
}

@test "plan honours tiny-mlp's pin of mlp_down to grid [3, 2, 5] cast late" {
	run --separate-stderr amp-plan "$TINY"
	assert_success
	assert_line --regexp '^- \{op: mlp_down, .*, grid: \[3, 2, 5\], cast: late, .*pinned: true, tiles: 30,'
	assert_line --regexp '^- \{op: mlp_up, .*pinned: false'
}

@test "plan without the pin chooses a different grid for mlp_down" {
	# So the pinned test above shows the pin at work, not a coincidence.
	sed '/^pins:/,$d' "$TINY" >unpinned.yaml
	run --separate-stderr amp-plan unpinned.yaml
	assert_success
	assert_line --regexp '^- \{op: mlp_down, .*pinned: false'
	refute_line --regexp '^- \{op: mlp_down, .*grid: \[3, 2, 5\], cast: late,'
}

@test "plan --objective capacity+tables writes a valid plan" {
	run --separate-stderr amp-plan --objective capacity+tables -o tables.plan "$SIGLIP"
	assert_success
	assert_equal "$output" ""
	run head -n 2 tables.plan
	assert_line --index 0 'format: amp-plan'
	assert_line --index 1 'version: 17'
	run grep -c '^- {op: ' tables.plan
	assert_output 2
	# The plan reader of the next stage accepts it.
	run --separate-stderr amp-compose -o composed.plan tables.plan
	assert_success
}

@test "plan --explain names the objective in use" {
	run --separate-stderr amp-plan --explain --objective=capacity+tables "$TINY"
	assert_success
	assert_line --index 0 'objective: capacity+tables'
	run --separate-stderr amp-plan --explain --objective capacity "$TINY"
	assert_success
	assert_line --index 0 'objective: capacity'
	run --separate-stderr amp-plan --explain --objective memory "$TINY"
	assert_success
	assert_line --index 0 'objective: memory'
	run --separate-stderr amp-plan --explain "$TINY"
	assert_success
	assert_line --index 0 'objective: cycles'
}

@test "plan --explain prints a candidate table per GEMM with the chosen row starred" {
	run --separate-stderr amp-plan --explain "$TINY"
	assert_success
	assert_line --regexp '^gemm mlp_up: m 74, k 80, n 200, fp8; [0-9]+ candidates, [0-9]+ lowered exactly, [0-9]+ fit'
	assert_line --regexp '^gemm mlp_down: m 74, k 200, n 80, fp8, pinned; [0-9]+ candidates'
	assert_line --regexp '^ +rank +grid +cast +staging +out +reduce +tiles'
	# Each GEMM's table has exactly one starred row; the pinned one stars its pin.
	local stars
	stars=$(grep -c '^ *[0-9]\+\*' <<<"$output")
	assert_equal "$stars" 2
	assert_line --regexp '^ +[0-9]+\* +\[3, 2, 5\] +late '
}

@test "plan --explain stars the candidate the plan chose" {
	run --separate-stderr amp-plan --explain -o out.plan "$TINY"
	assert_success
	local rec grid cast staging
	rec=$(line_of out.plan '- {op: mlp_up,') || fail "no mlp_up gemm record"
	[[ $rec =~ grid:\ (\[[0-9, ]+\]),\ cast:\ ([a-z]+),\ staging:\ ([a-z-]+), ]] ||
		fail "cannot read grid, cast, staging from: $rec"
	grid=${BASH_REMATCH[1]} cast=${BASH_REMATCH[2]} staging=${BASH_REMATCH[3]}
	assert_line --regexp "^ +[0-9]+\\* +$(re_quote "$grid") +$cast +$staging "
}

@test "plan --explain=N lists at most N candidates per GEMM" {
	run --separate-stderr amp-plan --explain=2 "$TINY"
	assert_success
	local rows
	# mlp_up has many fitting candidates (2 shown), pinned mlp_down has 2.
	rows=$(grep -c '^ *[0-9]\+[* ] \+\[' <<<"$output")
	assert_equal "$rows" 4
	refute_line --regexp '^ +3[* ] +\['
}

@test "plan --explain ends with the per-GEMM table of grid, cast, staging, reduce, tiles and peak bytes" {
	run --separate-stderr amp-plan --explain "$TINY"
	assert_success
	assert_line --regexp '^gemm +grid +cast +staging +out +reduce +tiles +peak bytes$'
	assert_line --regexp '^mlp_up +\[[0-9]+, [0-9]+, [0-9]+\] +(early|late) +(direct|pack-once) +(direct|unpack) +(-|gather|scatter) +[0-9]+ +[0-9]+$'
	assert_line --regexp '^mlp_down +\[3, 2, 5\] +late +(direct|pack-once) +(direct|unpack) +(gather|scatter) +30 +[0-9]+$'
	assert_line --regexp '^per-tile memory peak: [0-9]+ bytes on tile [0-9]+'
}

@test "plan --explain writes no plan to stdout" {
	run --separate-stderr amp-plan --explain "$TINY"
	assert_success
	refute_line 'format: amp-plan'
	refute_line --regexp '^(gemms|placements|steps):'
	run find . -mindepth 1 ! -name 'separate-stderr-*'
	assert_output ""
}

@test "plan --explain with -o writes the same plan as without --explain" {
	amp-plan "$TINY" >plain.plan
	run --separate-stderr amp-plan --explain -o explained.plan "$TINY"
	assert_success
	assert_line --index 0 'objective: cycles'
	refute_line 'format: amp-plan'
	run same_but_provenance plain.plan explained.plan
	assert_success
}

@test "plan --machine with a 256-tile machine puts that machine in the header" {
	sed -e 's/^tiles: .*/tiles: 256/' -e 's/^name: .*/name: amp256/' \
		"$MACHINES/amp1472.yaml" >amp256.yaml
	run --separate-stderr amp-plan --machine amp256.yaml "$TINY"
	assert_success
	assert_line --regexp '^machine: \{name: amp256, tiles: 256, sram_bytes: 638976,'
	refute_line --partial 'amp1472'
	run --separate-stderr amp-plan -m amp256.yaml "$TINY"
	assert_success
	assert_line --regexp '^machine: \{name: amp256, tiles: 256,'
}

@test "plan honours a reduce pin: scatter sums a part of each block's rows on each of its K tiles" {
	for r in gather scatter; do
		sed "s/^  mlp_down: {grid: \[3, 2, 5\], cast: late}\$/  mlp_down: {grid: [3, 2, 5], cast: late, reduce: $r}/" "$TINY" >$r.yaml
		run grep -c "reduce: $r" $r.yaml
		assert_output 1
		run --separate-stderr amp-plan $r.yaml
		assert_success
		assert_line --regexp "^- \{op: mlp_down, .*, reduce: $r, "
	done
	# batch 2 and K = 2: batch entry j of row block r on tile (r, j, c)
	assert_line --regexp '^- \{name: y.partial@mlp_down.reduce, tensor: y.partial, layout: amp-output, split: \[1, 2, 3, 5\], block: \[2, 1, 13, 16\], base: [0-9]+, stride: \[0, 5, 10, 1\], '
	assert_line --regexp '^- \{name: y@mlp_down.out, tensor: y, layout: amp-output, split: \[2, 3, 5\], block: \[1, 13, 16\], base: [0-9]+, stride: \[5, 10, 1\], '
	assert_line --regexp '^- \{name: b_down@mlp_down.bias, tensor: b_down, layout: row-major, split: \[5\], block: \[16\], base: [0-9]+, stride: \[1\], rep: \[6\], rstride: \[5\]'
}

@test "plan splits attention into the pinned key blocks: fp16 partials, a reduction copy and a merge" {
	sed 's/blocks: \[5, 3\]/blocks: [4, 3]/' "$BAD/model-pin-key-blocks.yaml" >kb.yaml
	run --separate-stderr amp-plan kb.yaml
	assert_success
	assert_line '- {name: y.partial, role: partial, shape: [3, 1, 16, 36], dtype: fp16}'
	assert_line --regexp '^- \{step: [0-9]+, compute: attention, op: attn, in: \[q3@attn.q, q3@attn.k, q3@attn.v\], out: y.partial@attn.partial, heads: 2, scale: 0.25, scratch: 24\}$'
	assert_line --regexp '^- \{step: [0-9]+, copy: reduction, op: attn, operand: partial, map: identity, src: y.partial@attn.partial, dst: y.partial@attn.merge\}$'
	assert_line --regexp '^- \{step: [0-9]+, compute: merge, op: attn, in: \[y.partial@attn.merge\], out: y@attn.out\}$'
	# k and v: 3 blocks of 6 keys, each multicast to the 4 query blocks
	assert_line --regexp '^- \{name: q3@attn.k, tensor: q3, layout: row-major, split: \[1, 3, 2\], block: \[1, 6, 16\], base: [0-9]+, stride: \[24, 1, 3\], rep: \[4\], rstride: \[6\], offset: \[0, 0, 32\], extent: \[1, 16, 32\]\}$'
}

@test "plan honours an out_staging pin: the result is unpacked to row-major before it returns" {
	sed 's/^  mlp_down: {grid: \[3, 2, 5\], cast: late}$/  mlp_down: {grid: [3, 2, 5], cast: late, out_staging: unpack}/' "$TINY" >unpacked.yaml
	run grep -c 'out_staging: unpack' unpacked.yaml
	assert_output 1
	run --separate-stderr amp-plan unpacked.yaml
	assert_success
	assert_line --regexp '^- \{op: mlp_down, .*, staging: (direct|pack-once), out_staging: unpack, '
	assert_line --regexp '^- \{step: [0-9]+, compute: pack, op: mlp_down, in: \[y@mlp_down.out\], out: y@mlp_down.out.rows\}$'
	assert_line --regexp '^- \{step: [0-9]+, copy: output, op: mlp_down, operand: out, map: identity, src: y@mlp_down.out.rows, dst: y@canon\}$'
}

@test "plan --objective cycles trades headroom for modelled cycles on siglip-mlp, both fitting" {
	[ -z "${AMP_SAN:-}" ] || skip "siglip-mlp's pipeline is slow under the sanitizers"
	for o in memory cycles; do
		amp-plan --objective "$o" "$SIGLIP" -o "$o.plan"
		amp-compose "$o.plan" | amp-expand | amp-exchange | amp-group | amp-capture -o "$o.json"
	done
	run jq -r '.summary | "\(.total_cycles) \(.max_table_bytes) \(.max_sram_bytes) \(.max_fragments)"' memory.json
	read -r mc mt ms mf <<<"$output"
	run jq -r '.summary | "\(.total_cycles) \(.max_table_bytes) \(.max_sram_bytes) \(.max_fragments)"' cycles.json
	read -r cc ct cs cf <<<"$output"
	assert [ "$cc" -lt "$mc" ]
	# memory keeps the most headroom: its worst limit (tables, fragments,
	# SRAM, each over its limit) is at most the cycles plan's
	worst() { awk -v t="$1" -v f="$2" -v s="$3" 'BEGIN { w = t / 81920; if (f / 16384 > w) w = f / 16384
		if (s / 586960 > w) w = s / 586960; printf "%d\n", w * 1e6 }'; }
	assert [ "$(worst "$mt" "$mf" "$ms")" -le "$(worst "$ct" "$cf" "$cs")" ]
	assert [ "$ct" -le 81920 ] && assert [ "$cs" -le 586960 ] && assert [ "$ms" -le 586960 ]
	# cycles is the default: the same plan with no flag
	amp-plan "$SIGLIP" -o default.plan
	run same_but_provenance cycles.plan default.plan
	assert_success
	# and it follows the work: half the MLP width, fewer cycles
	sed 's/4304/2048/g' "$SIGLIP" > half.yaml
	amp-plan half.yaml | amp-compose | amp-expand | amp-exchange | amp-group | amp-capture -o half.json
	run jq -r '.summary.total_cycles' half.json
	assert [ "$output" -lt "$cc" ]
}

@test "plan: the memory objective's skipped trial lowerings never change the plan (--explain lowers every one)" {
	# Without --explain, a candidate whose tensors alone cannot beat the
	# best fitting trial is not lowered; with it, every short-listed one
	# is. The two plans must be the same bytes.
	for m in "$SIGLIP" "$MODELS/pe-core-l14.yaml"; do
		run --separate-stderr amp-plan --objective memory --explain -o all.plan "$m"
		assert_success
		run --separate-stderr amp-plan --objective memory -o pruned.plan "$m"
		assert_success
		cmp all.plan pruned.plan || fail "plans of $m differ"
	done
}

@test "plan: the cycles objective's unreplayed trials never change the plan (--explain replays every one)" {
	# Without --explain, a fitting trial is replayed only while its lower
	# bound (and its table price) can still beat the best replayed so far;
	# with it, every one is. The two plans must be the same bytes, the
	# attempts at a margin or a table price included.
	run --separate-stderr amp-plan --explain -o all.plan "$SIGLIP"
	assert_success
	assert_line --index 0 'objective: cycles'
	run --separate-stderr amp-plan -o lazy.plan "$SIGLIP"
	assert_success
	cmp all.plan lazy.plan || fail "plans differ"
}

@test "plan: pinning one op's grid moves no other op's tiles (each op's first tile is its own)" {
	# vit-tiny with every matmul pinned as planned, then embed pinned to
	# grid [1, 1, 1] alone (it is planned on more tiles): every other op's
	# placements keep their tiles (base and strides). A first tile taken
	# from a pointer running over the ops before would move them all.
	# (amp-model 3: a pin may say staging spread.)
	local m=$ROOT/tests/models/vit-tiny.yaml pins
	run --separate-stderr amp-plan --objective memory --ownership tokens "$m"
	assert_success
	pins=$(printf '%s\n' "$output" | sed -n 's/^- {op: \([^,]*\), .*grid: \(\[[0-9, ]*\]\), cast: \([a-z]*\), staging: \([a-z-]*\), out_staging: \([a-z]*\), reduce: \([a-z]*\),.*/  \1: {grid: \2, cast: \3, staging: \4, out_staging: \5, reduce: \6}/p')
	[[ $pins == *"  embed: {grid: ["* && $pins != *"  embed: {grid: [1, 1, 1], "* ]] ||
		fail "embed is not planned on more than one tile: $pins"
	{ sed 's/^amp-model: [12]$/amp-model: 3/' "$m"; printf 'pins:\n%s\n' "$pins"; } > p0.yaml
	{ sed 's/^amp-model: [12]$/amp-model: 3/' "$m"
	  printf 'pins:\n%s\n' "$(sed 's/^  embed: .*/  embed: {grid: [1, 1, 1]}/' <<<"$pins")"; } > p1.yaml
	amp-plan --objective memory --ownership tokens -o p0.plan p0.yaml
	amp-plan --objective memory --ownership tokens -o p1.plan p1.yaml
	# placements as name, base, stride, rep and rstride: the tiles they sit on
	tiles() { sed -n 's/^- {name: \([^,]*\), .* base: \([0-9]*\), stride: \(\[[^]]*\]\), rep: \(\[[^]]*\]\), rstride: \(\[[^]]*\]\).*/\1 \2 \3 \4 \5/p' "$1"; }
	run diff <(tiles p0.plan | grep -v '@embed\.') <(tiles p1.plan | grep -v '@embed\.')
	assert_success
	# and embed's own did move to one tile
	run diff <(tiles p0.plan | grep '@embed\.') <(tiles p1.plan | grep '@embed\.')
	assert_failure
}

@test "plan: sibling matmuls (gate and up of one a) start on one tile, so that with one grid a reaches them once" {
	# tiny-prefill: gate and up read hn. Pinned to one grid, up reads
	# gate's copy of hn (no activation copy of its own); pinned to
	# another, up gets its own copy.
	local m=$ROOT/tests/models/tiny-prefill.yaml
	{ cat "$m"; printf 'pins:\n  gate: {grid: [8, 2, 11]}\n  up: {grid: [8, 2, 11]}\n'; } > same.yaml
	amp-plan -o p.plan same.yaml
	run grep -c 'copy: activation, op: \(gate\|up\), operand: a,' p.plan
	assert_output 1
	run grep -c 'compute: matmul, op: up, in: \[hn.fp8@gate.a, ' p.plan
	assert_output 1
	{ cat "$m"; printf 'pins:\n  gate: {grid: [8, 2, 11]}\n  up: {grid: [8, 1, 11]}\n'; } > other.yaml
	amp-plan -o q.plan other.yaml
	run grep -c 'copy: activation, op: \(gate\|up\), operand: a,' q.plan
	assert_output 2
}

@test "a GEMM whose unpacked rows are its result's canonical cut is not copied onto itself, and runs byte-exact" {
	# Qwen2.5-0.5B's 1-layer prefill of 8 sequences of 16 tokens: up's
	# rows unpacked on its tiles ([1, 16, 76] blocks of 8 x 64) are where
	# gated's mul reads u; the copy back to the owners was written onto
	# its own source and the plan refused ("writes 'u@up.out.rows' a
	# second time"), as the 24-layer prefill's memory objective chose
	amp-import "$ROOT/share/configs/qwen2.5-0.5b.json" --prefill --batch 8 --prompt 16 --context 1024 \
		--layers 1 --head fp16 -o q.yaml
	{ cat q.yaml; printf 'pins:\n  gate: {grid: [3, 6, 76]}\n  up: {grid: [3, 6, 76], out_staging: unpack}\n'; } > p.yaml
	amp-plan --objective memory p.yaml -o plan.yaml
	run grep -c '^- {name: u@up.out.rows, tensor: u, layout: row-major, split: \[1, 16, 76\], block: \[8, 1, 64\], ' plan.yaml
	assert_output 1
	run grep -c '^- {step: [0-9]*, compute: mul, op: gated, in: \[s@canon, u@up.out.rows\], ' plan.yaml
	assert_output 1
	run grep -c 'src: u@up.out.rows, dst: u@up.out.rows}$' plan.yaml
	assert_output 0
	amp-compose plan.yaml | amp-expand | amp-exchange | amp-group > g.yaml
	amp-emit --model p.yaml g.yaml -o p.amp
	run --separate-stderr amp-run p.amp
	assert_success
	assert_line --index 0 --regexp '^movement: byte-exact after every phase \([0-9]+ phases\)$'
}
