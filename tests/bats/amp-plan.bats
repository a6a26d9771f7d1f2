#!/usr/bin/env bats
# amp-plan: the command-line contract (options, input and output handling,
# exit status), what the plan says about the reference models, and the
# malformed models in tests/bad/model-*.yaml.

bats_require_minimum_version 1.5.0
load common

TINY=$MODELS/tiny-mlp.yaml
SIGLIP=$MODELS/siglip-mlp.yaml

# rejects FILE LINE:COL MESSAGE [ARG]...: plan_rejects (common.bash).
rejects() {
	plan_rejects "$@"
}

# (run --separate-stderr keeps its separate-stderr-* file in the test
# directory, so "nothing written" checks ignore it.)

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

# ---- options and usage ----

@test "plan --help prints usage and the exit statuses to stdout and exits 0" {
	run --separate-stderr amp-plan --help
	assert_success
	assert_equal "$stderr" ""
	assert_line --index 0 --partial 'Usage: amp-plan'
	assert_output --partial '--machine'
	assert_output --partial '--objective'
	assert_output --partial '--explain'
	assert_output --partial 'Exit status: 0 success, 1 bad input, a limit exceeded or a write error,'
}

@test "plan --version prints the tool name and a version number" {
	run --separate-stderr amp-plan --version
	assert_success
	assert_equal "$stderr" ""
	assert_output --regexp '^amp-plan \(amp\) [0-9]+\.[0-9]+\.[0-9]+$'
}

@test "plan rejects an unknown long option with exit 2 and a pointer to --help" {
	run --separate-stderr amp-plan --frobnicate "$TINY"
	assert_failure 2
	assert_equal "$output" ""
	[[ $stderr == *"Try 'amp-plan --help' for more information."* ]] || fail "$stderr"
}

@test "plan rejects an unknown short option with exit 2 and a pointer to --help" {
	run --separate-stderr amp-plan -x "$TINY"
	assert_failure 2
	assert_equal "$output" ""
	[[ $stderr == *"Try 'amp-plan --help'"* ]] || fail "$stderr"
}

@test "plan rejects -o without a file name as a usage error" {
	run --separate-stderr amp-plan "$TINY" -o
	assert_failure 2
	assert_equal "$output" ""
	[[ $stderr == *"Try 'amp-plan --help'"* ]] || fail "$stderr"
}

@test "plan rejects two model files as a usage error naming the second" {
	cp "$TINY" second.yaml
	run --separate-stderr amp-plan -o out.plan "$TINY" second.yaml
	assert_failure 2
	assert_equal "$output" ""
	[[ $stderr == *"'second.yaml'"* ]] || fail "$stderr"
	[[ $stderr == *"Try 'amp-plan --help'"* ]] || fail "$stderr"
	[[ ! -e out.plan ]] || fail "out.plan was written on a usage error"
}

@test "plan rejects an unknown --objective as a usage error naming it" {
	run --separate-stderr amp-plan --objective=speed "$TINY"
	assert_failure 2
	assert_equal "$output" ""
	[[ $stderr == *"'speed'"* ]] || fail "$stderr"
	[[ $stderr == *"Try 'amp-plan --help'"* ]] || fail "$stderr"
}

@test "plan rejects --explain=0 as a usage error" {
	run --separate-stderr amp-plan --explain=0 "$TINY"
	assert_failure 2
	assert_equal "$output" ""
	[[ $stderr == *"--explain"* ]] || fail "$stderr"
	[[ $stderr == *"Try 'amp-plan --help'"* ]] || fail "$stderr"
}

@test "plan rejects a non-numeric --explain count as a usage error" {
	run --separate-stderr amp-plan --explain=5x "$TINY"
	assert_failure 2
	assert_equal "$output" ""
	[[ $stderr == *"'5x'"* ]] || fail "$stderr"
}

# ---- input ----

@test "plan reads the model from a path, from stdin, and from '-' with identical output" {
	amp-plan "$TINY" >path.plan
	amp-plan <"$TINY" >stdin.plan
	amp-plan - <"$TINY" >dash.plan
	[[ -s path.plan ]] || fail "no plan written"
	# the same but the model's name: <stdin> from a pipe
	run same_but_provenance path.plan stdin.plan
	assert_success
	run cmp stdin.plan dash.plan
	assert_success
}

@test "plan accepts a zstd-compressed model, recognised by its magic not its name" {
	amp-plan "$TINY" >plain.plan
	zstd -q -c "$TINY" >compressed.yaml
	run --separate-stderr amp-plan -o from-file.plan compressed.yaml
	assert_success
	run same_but_provenance plain.plan from-file.plan
	assert_success
	amp-plan <compressed.yaml >from-stdin.plan
	run same_but_provenance plain.plan from-stdin.plan
	assert_success
}

@test "plan rejects a zstd model that ends mid-frame" {
	zstd -q -c "$TINY" >full.zst
	head -c 100 full.zst >cut.zst
	run --separate-stderr amp-plan -o out.plan cut.zst
	assert_failure 1
	assert_equal "$output" ""
	[[ $stderr == "amp-plan: "*"'cut.zst'"*"truncated"* ]] || fail "$stderr"
	[[ ! -e out.plan ]] || fail "out.plan was written on failure"
}

@test "plan reports a model file that does not exist" {
	run --separate-stderr amp-plan missing.yaml
	assert_failure 1
	assert_equal "$output" ""
	assert_equal "$stderr" "amp-plan: cannot open 'missing.yaml': No such file or directory"
}

@test "plan names a bad model on standard input as <stdin> with line and column" {
	run --separate-stderr amp-plan <"$BAD/model-unknown-op.yaml"
	assert_failure 1
	assert_equal "$output" ""
	[[ $stderr == "amp-plan: <stdin>:7:10: unknown op 'softmax'"* ]] || fail "$stderr"
}

# ---- output ----

@test "plan -z output starts with the zstd magic and decompresses to the plain plan" {
	amp-plan "$TINY" >plain.plan
	amp-plan -z "$TINY" >stdout.zst
	amp-plan -z -o file.zst "$TINY"
	run od -An -tx1 -N4 stdout.zst
	assert_output ' 28 b5 2f fd'
	run od -An -tx1 -N4 file.zst
	assert_output ' 28 b5 2f fd'
	zstd -q -dc stdout.zst >stdout.plan
	zstd -q -dc file.zst >file.plan
	run cmp plain.plan stdout.plan
	assert_success
	run cmp plain.plan file.plan
	assert_success
}

@test "plan -o writes the same bytes as stdout and leaves no temporary" {
	amp-plan "$TINY" >stdout.plan
	run --separate-stderr amp-plan -o out.plan "$TINY"
	assert_success
	assert_equal "$output" ""
	assert_equal "$stderr" ""
	run cmp stdout.plan out.plan
	assert_success
	run find . -name '*.tmp.*'
	assert_output ""
}

@test "plan -o replaces an existing target by rename, not by rewriting it" {
	echo old >out.plan
	ln out.plan link.plan
	run amp-plan -o out.plan "$TINY"
	assert_success
	run head -n 1 out.plan
	assert_output 'format: amp-plan'
	# The old inode is untouched: the new plan was renamed over the name.
	run cat link.plan
	assert_output 'old'
}

@test "plan -o onto a FIFO writes into it in place, leaving the FIFO a FIFO" {
	amp-plan "$TINY" >stdout.plan
	mkfifo pipe
	cat pipe >got.plan &
	run --separate-stderr amp-plan -o pipe "$TINY"
	assert_success
	wait
	run cmp stdout.plan got.plan
	assert_success
	assert [ -p pipe ]
	run find . -name '*.tmp.*'
	assert_output ""
}

@test "plan -o onto a character device writes to the device, never replacing it with a file" {
	[ "$(id -u)" = 0 ] || skip "mknod needs root"
	mknod null c 1 3 || skip "mknod not permitted here"
	run --separate-stderr amp-plan -o null "$TINY"
	assert_success
	assert [ -c null ]
	run stat -c %s null
	assert_output 0
	run --separate-stderr amp-plan -z -o null "$TINY"
	assert_success
	assert [ -c null ]
}

@test "plan gives byte-identical files for the same input twice" {
	amp-plan -o a.plan "$SIGLIP"
	amp-plan -o b.plan "$SIGLIP"
	amp-plan -o c.plan "$TINY"
	amp-plan -o d.plan "$TINY"
	[[ -s a.plan && -s c.plan ]] || fail "no plan written"
	run cmp a.plan b.plan
	assert_success
	run cmp c.plan d.plan
	assert_success
}

@test "plan -o on bad input leaves neither the target nor a temporary" {
	rejects "$BAD/model-unknown-op.yaml" 7:10 "unknown op 'softmax'" \
		"$BAD/model-unknown-op.yaml"
	run find . -mindepth 1 ! -name 'separate-stderr-*'
	assert_output ""
}

@test "plan -o on bad input leaves an existing target untouched" {
	printf 'previous plan\n' >out.plan
	run --separate-stderr amp-plan -o out.plan "$BAD/model-matmul-inner-differ.yaml"
	assert_failure 1
	run cat out.plan
	assert_output 'previous plan'
	run find . -name '*.tmp.*'
	assert_output ""
}

@test "plan -o onto a directory fails with exit 1 and removes its temporary" {
	mkdir out
	run --separate-stderr amp-plan -o out "$TINY"
	assert_failure 1
	assert_equal "$output" ""
	[[ $stderr == "amp-plan: "*"'out'"* ]] || fail "$stderr"
	run find . -name '*.tmp.*'
	assert_output ""
	run ls -A out
	assert_output ""
}

@test "plan -o into a missing directory fails with exit 1 naming the file" {
	run --separate-stderr amp-plan -o nowhere/out.plan "$TINY"
	assert_failure 1
	assert_equal "$output" ""
	[[ $stderr == "amp-plan: cannot create 'nowhere/out.plan': "* ]] || fail "$stderr"
}

# ---- what the plan says ----

@test "plan output starts with the amp-plan header, machine and model" {
	run --separate-stderr amp-plan "$TINY"
	assert_success
	assert_line --index 0 'format: amp-plan'
	assert_line --index 1 'version: 9'
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
	assert_line --index 1 'version: 9'
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

# ---- malformed models (tests/bad/model-*.yaml) ----

@test "plan rejects malformed YAML (an unclosed flow mapping)" {
	rejects "$BAD/model-malformed-yaml.yaml" 6:7 "flow mapping" \
		"$BAD/model-malformed-yaml.yaml"
}

@test "plan rejects a model nested deeper than 64 levels at the 65th level, in bounded time" {
	{ printf 'amp-model: 1\nname: deep\ninputs: '
	  head -c 200000 /dev/zero | tr '\0' '['
	  head -c 200000 /dev/zero | tr '\0' ']'
	  printf '\n'; } >deep.yaml
	rejects deep.yaml 3:72 "nesting deeper than 64 levels" deep.yaml
}

@test "plan names the first repeated key of a 40,000-key mapping" {
	{ printf 'amp-model: 1\nname: keys\ninputs:\n'
	  for i in $(seq 40000); do printf '  k%d: 1\n' $((i == 30000 ? 7 : i == 35000 ? 9 : i)); done; } >keys.yaml
	rejects keys.yaml 30003:3 "duplicate key 'k7'" keys.yaml
}

@test "plan rejects an unknown top-level key" {
	rejects "$BAD/model-unknown-top-key.yaml" 8:1 "unknown key 'layers'" \
		"$BAD/model-unknown-top-key.yaml"
}

@test "plan rejects an unknown key inside an op" {
	rejects "$BAD/model-unknown-op-key.yaml" 9:40 "unknown key 'act'" \
		"$BAD/model-unknown-op-key.yaml"
}

@test "plan rejects an unknown op" {
	rejects "$BAD/model-unknown-op.yaml" 7:10 "unknown op 'softmax'" \
		"$BAD/model-unknown-op.yaml"
}

@test "plan rejects an unknown dtype" {
	rejects "$BAD/model-unknown-dtype.yaml" 7:31 "unknown dtype 'bf16'" \
		"$BAD/model-unknown-dtype.yaml"
}

@test "plan rejects an op that names an undefined tensor" {
	rejects "$BAD/model-undefined-tensor.yaml" 9:37 "undefined tensor 'w2'" \
		"$BAD/model-undefined-tensor.yaml"
}

@test "plan rejects a matmul whose inner dimensions differ" {
	rejects "$BAD/model-matmul-inner-differ.yaml" 9:37 "inner dimensions differ" \
		"$BAD/model-matmul-inner-differ.yaml"
}

@test "plan rejects a model file of another amp-model version" {
	rejects "$BAD/model-wrong-version.yaml" 2:12 "unsupported model file version 6 (this amp reads 1 to 5)" \
		"$BAD/model-wrong-version.yaml"
}

@test "plan rejects a tensor name defined twice" {
	rejects "$BAD/model-duplicate-tensor.yaml" 9:45 "tensor 'w' is defined twice" \
		"$BAD/model-duplicate-tensor.yaml"
}

@test "plan rejects an output that no op computes" {
	rejects "$BAD/model-output-not-computed.yaml" 10:14 "output 'x' must be computed by an op" \
		"$BAD/model-output-not-computed.yaml"
}

@test "plan rejects an attention pin whose query blocks do not cut the queries uniformly, at the pin" {
	rejects "$BAD/model-pin-key-blocks.yaml" 14:18 \
		"pin for 'attn': blocks [5, 3] need query blocks that do not cut the queries uniformly" \
		"$BAD/model-pin-key-blocks.yaml"
}

@test "plan rejects an unknown out_staging at its value" {
	rejects "$BAD/model-pin-out-staging.yaml" 12:25 "unknown out_staging 'packed' (expected direct or unpack)" \
		"$BAD/model-pin-out-staging.yaml"
}

@test "plan rejects an unknown reduce at its value" {
	rejects "$BAD/model-pin-reduce.yaml" 12:20 "unknown reduce 'spread' (expected gather or scatter)" \
		"$BAD/model-pin-reduce.yaml"
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

@test "plan rejects an unknown kv_staging at its value" {
	rejects "$BAD/model-pin-kv-staging.yaml" 13:22 "unknown kv_staging 'gathered' (expected direct, relay or home)" \
		"$BAD/model-pin-kv-staging.yaml"
}

@test "plan rejects a GEMM grid pinned on an attention op" {
	rejects "$BAD/model-pin-attention-grid.yaml" 13:10 "unknown key 'grid'" \
		"$BAD/model-pin-attention-grid.yaml"
}

@test "plan splits attention into the pinned key blocks: fp32 partials, a reduction copy and a merge" {
	sed 's/blocks: \[5, 3\]/blocks: [4, 3]/' "$BAD/model-pin-key-blocks.yaml" >kb.yaml
	run --separate-stderr amp-plan kb.yaml
	assert_success
	assert_line '- {name: y.partial, role: partial, shape: [3, 1, 16, 36], dtype: fp32}'
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

@test "plan exits 1 when no plan fits the machine's limits, naming the tile, the figure and what no plan avoids" {
	local tight=$ROOT/tests/models/machine-tight-tables.yaml
	rejects "$TINY" 8:3 "model 'tiny-mlp' does not fit machine 'tight-tables' at its limits: tile " \
		--machine "$tight" "$TINY"
	[[ $stderr == *"over the table budget of 256. No plan avoids the parameters: 38768 bytes, at least 27 per tile, which leaves at most 586933 of the 586960 available"* ]] ||
		fail "expected the budget and the lower bound in: $stderr"
	run --separate-stderr amp-plan --no-fit-check --machine "$tight" "$TINY" -o study.plan
	assert_success
	assert [ -s study.plan ]
	# --explain still shows the candidates, then the same failure
	run --separate-stderr amp-plan --explain --machine "$tight" "$TINY" -o explained.plan
	assert_failure 1
	assert_line --regexp '^gemm mlp_up: m 74, k 80, n 200, fp8; [0-9]+ candidates, [0-9]+ lowered exactly, [0-9]+ fit'
	[[ $stderr == *"does not fit machine 'tight-tables'"* ]] || fail "expected the fit failure: $stderr"
	assert [ ! -e explained.plan ]
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

@test "plan judges a pinned grid by the exact check: a pin the per-tile bound refuses is planned, lowered and emitted" {
	local sram
	sram=$(sed -n 's/^sram_bytes: *\([0-9]*\).*/\1/p' "$MACHINES/amp1472.yaml")
	# 62,000 bytes available: the bound refuses mlp_down on one tile, the
	# exact check fits it (tile 1257 needs 60,032 bytes with its tables)
	sed "s/^reserved_bytes: *[0-9]*/reserved_bytes: $((sram - 62000))/" "$MACHINES/amp1472.yaml" >m.yaml
	sed 's/^  mlp_down: {grid: \[3, 2, 5\], cast: late}$/  mlp_down: {grid: [1, 1, 1], cast: late}/' "$TINY" >p.yaml
	run grep -c 'grid: \[1, 1, 1\]' p.yaml
	assert_output 1
	run --separate-stderr amp-plan --objective capacity --machine m.yaml p.yaml
	assert_failure 1
	[[ $stderr == *"matmul 'mlp_down': no pinned grid fits in SRAM"* ]] || fail "the bound should refuse it: $stderr"
	run --separate-stderr amp-plan --machine m.yaml p.yaml -o p.plan
	assert_success
	amp-compose p.plan | amp-expand | amp-exchange | amp-group >p.grouped
	run amp-emit --no-model --machine m.yaml p.grouped -o p.amp
	assert_success
	# calibration reads the model alone: it needs no plan, so the machine
	# (still accepted) cannot make it fail
	run amp-run --calibrate p.yaml --machine m.yaml -o s.yaml
	assert_success
	run amp-run --calibrate p.yaml -o s2.yaml
	assert_success
	run cmp s.yaml s2.yaml
	assert_success
}

@test "plan rejects a pin for an unknown op" {
	rejects "$BAD/model-pin-unknown-op.yaml" 14:3 "pin for unknown op 'mlp_gate'" \
		"$BAD/model-pin-unknown-op.yaml"
}

@test "plan rejects a pinned grid that needs more tiles than the machine has" {
	rejects "$BAD/model-pin-too-many-tiles.yaml" 13:14 "needs 1600 tiles; the machine has 1472" \
		"$BAD/model-pin-too-many-tiles.yaml"
}

@test "plan rejects a pinned grid with more rows than tokens" {
	rejects "$BAD/model-pin-rows-exceed-tokens.yaml" 14:20 "grid rows 38 exceed the 37 tokens" \
		"$BAD/model-pin-rows-exceed-tokens.yaml"
}

@test "plan rejects a pinned k that needs more partitions than the fp8 strips" {
	rejects "$BAD/model-pin-k-exceeds-strips.yaml" 14:20 "grid k 8 needs more partitions than K=200 has fp8 strips (7)" \
		"$BAD/model-pin-k-exceeds-strips.yaml"
}

@test "plan rejects pinned cols that need more partitions than the 16-column groups" {
	rejects "$BAD/model-pin-cols-exceed-groups.yaml" 14:20 "grid cols 6 needs more partitions than N=80 has 16-column groups (5)" \
		"$BAD/model-pin-cols-exceed-groups.yaml"
}

@test "plan rejects a pinned grid that cannot cut a dimension uniformly" {
	rejects "$BAD/model-pin-not-uniform.yaml" 14:20 "grid k 5 cannot cut 7 K strips into 5 non-empty uniform parts" \
		"$BAD/model-pin-not-uniform.yaml"
}

# The parameter capacity check concerns the params section as a whole; its
# message must point there (the `params:` key or its mapping), not at 1:1.
params_at() {
	local n
	n=$(grep -n '^params:' "$1" | cut -d: -f1)
	[[ -n $n ]] || fail "no params section in $1"
	printf '%s' "$n:1|$((n + 1)):3"
}

@test "plan rejects parameters larger than all tiles' SRAM, pointing at params" {
	local bad=$BAD/model-params-too-large.yaml
	rejects "$bad" "$(params_at "$bad")" "parameters need 1073741824 bytes" "$bad"
}

@test "plan rejects a model whose parameters do not fit a small machine's SRAM" {
	rejects "$TINY" "$(params_at "$TINY")" "model 'tiny-mlp': parameters need" \
		--machine "$BAD/machine-small-sram.yaml" "$TINY"
	[[ $stderr == *"2 tiles hold at most 30720"* ]] || fail "$stderr"
}

@test "plan counts parameters as stored (panels padded), beyond the raw bytes the size check counts" {
	# 16000 raw bytes, 19968 stored: a 2-tile machine of 17984 bytes holds
	# the raw bytes but not the stored ones; one of 20000 holds both in
	# total, but the weight's one home tile does not
	local pad=$ROOT/tests/models/params-padded.yaml
	sed 's/^sram_bytes: .*/sram_bytes: 10016/' "$BAD/machine-small-sram.yaml" > total.yaml
	sed 's/^sram_bytes: .*/sram_bytes: 11024/' "$BAD/machine-small-sram.yaml" > one.yaml
	rejects "$pad" "$(params_at "$pad")" \
		"model 'params-padded': parameters need 19968 bytes; 2 tiles hold at most 17984 (8992 bytes each" \
		--machine total.yaml "$pad"
	rejects "$pad" "$(params_at "$pad")" \
		"model 'params-padded': parameter homes put 10752 bytes on tile 0; 10000 are available" \
		--machine one.yaml "$pad"
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

@test "plan rejects a model that does not fit the machine's SRAM at the op that overflows (file:line:col)" {
	cd "$BATS_TEST_TMPDIR"
	sed 's/^sram_bytes: .*/sram_bytes: 120000/' "$MACHINES/amp1472.yaml" > small.yaml
	grep -q '^sram_bytes: 120000' small.yaml || fail "no sram_bytes line to shrink"
	rejects "$SIGLIP" 13:5 "(op 'mlp_up'); 67984 are available (sram_bytes - reserved_bytes)" \
		--machine small.yaml "$SIGLIP"
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

@test "a machine whose fragment limit equals the plan's worst tile still fits; one lower does not" {
	# tiny-mlp with both GEMMs pinned whole, so that the limit changes no choice
	sed 's/^  mlp_down: {grid: \[3, 2, 5\], cast: late}$/  mlp_down: {grid: [3, 2, 5], cast: late, staging: direct, out_staging: direct, reduce: scatter}\n  mlp_up: {grid: [4, 1, 4], cast: late, staging: direct, out_staging: direct}/' \
		"$MODELS/tiny-mlp.yaml" > t.yaml
	grep -q '^  mlp_up: {grid: \[4, 1, 4\]' t.yaml || fail "no pins added"
	amp-plan t.yaml | amp-compose | amp-expand | amp-exchange | amp-group > g.yaml
	local f
	f=$(amp-capture g.yaml | jq '.summary.max_fragments')
	assert [ "$f" -gt 0 ]
	sed "s/^fragment_limit: .*/fragment_limit: $f/" "$MACHINES/amp1472.yaml" > at.yaml
	sed "s/^fragment_limit: .*/fragment_limit: $((f - 1))/" "$MACHINES/amp1472.yaml" > below.yaml
	run amp-plan --machine at.yaml t.yaml -o at.plan --explain
	assert_success
	# the first build fits, as it is: not planned again inside the limits,
	# nor the fallback to the memory objective
	refute_output --partial "planned again, as the whole plan did not fit"
	refute_output --partial "no plan the cycles search built fits"
	run --separate-stderr amp-plan --machine below.yaml t.yaml -o below.plan
	assert_failure 1
	[[ $stderr == *"$f send and receive fragments, over the fragment limit of $((f - 1))"* ]] || fail "$stderr"
}

@test "a fragment limit one below the best plan's worst tile moves the planner to a plan within it" {
	# unpinned tiny-mlp: its fastest plan needs f fragments on some tile; at
	# f - 1 another plan fits, and amp-plan must find it, not refuse
	amp-plan "$MODELS/tiny-mlp.yaml" | amp-compose | amp-expand | amp-exchange | amp-group > g.yaml
	local f c
	f=$(amp-capture g.yaml | jq '.summary.max_fragments')
	c=$(amp-capture g.yaml | jq '.summary.total_cycles')
	sed "s/^fragment_limit: .*/fragment_limit: $((f - 1))/" "$MACHINES/amp1472.yaml" > below.yaml
	run --separate-stderr amp-plan --machine below.yaml "$MODELS/tiny-mlp.yaml" -o below.plan
	assert_success
	amp-compose below.plan | amp-expand | amp-exchange | amp-group > g2.yaml
	amp-capture --machine below.yaml g2.yaml -o c2.json
	run jq '.summary.max_fragments' c2.json
	assert [ "$output" -lt "$f" ]
	# the limit cost cycles: the plan it moved to is not the fastest; but
	# the cycles search found it, not the fallback to the memory objective
	# (whose plan is slower)
	local c2 cm
	c2=$(jq '.summary.total_cycles' c2.json)
	assert [ "$c2" -gt "$c" ]
	amp-plan --objective memory --machine below.yaml "$MODELS/tiny-mlp.yaml" | amp-compose | amp-expand |
		amp-exchange | amp-group > gm.yaml
	cm=$(amp-capture --machine below.yaml gm.yaml | jq '.summary.total_cycles')
	assert [ "$c2" -lt "$cm" ]
}
