#!/usr/bin/env bats
# amp-compose: plan -> plan. The command-line contract, the round trip of
# the plan format, the composition rule of docs/machine.md §5 on small pinned models
# (tests/models/compose-*.yaml), and malformed plans (tests/bad/plan-*).

load common
bats_require_minimum_version 1.5.0

CASES=$ROOT/tests/models

# plan MODEL OUT: the plan amp-plan writes for MODEL.
plan() {
	run amp-plan --objective capacity "$1" -o "$2"
	assert_success
	assert [ -s "$2" ]
}

# composed MODEL BEFORE AFTER: the plan of MODEL and its composition.
composed() {
	plan "$1" "$2"
	run amp-compose "$2" -o "$3"
	assert_success
	assert [ -s "$3" ]
}

# steps FILE: one line per step, "copy SRC DST MAP" or
# "compute KIND IN... -> OUT".
steps() {
	sed -n -e 's/^- {step: [0-9]*, copy: [^,]*, op: [^,]*, operand: [^,]*, map: \([^,]*\), src: \([^,]*\), dst: \([^,}]*\)}$/copy \2 \3 \1/p' \
	       -e 's/^- {step: [0-9]*, compute: \([^,]*\), op: [^,]*, in: \[\([^]]*\)\], out: \([^,}]*\).*$/compute \1 \2 -> \3/p' "$1" |
		sed 's/,//g'
}

# placements FILE: "NAME TENSOR" per placement.
placements() {
	sed -n 's/^- {name: \([^,]*\), tensor: \([^,]*\), layout: .*/\1 \2/p' "$1"
}

# cross_copies FILE: every copy whose source and destination placements
# belong to different tensors, as "SRC(TENSOR) -> DST(TENSOR)".
cross_copies() {
	awk '
	/^- \{name: [^,]*, tensor: / {
		n = $3; t = $5; sub(/,$/, "", n); sub(/,$/, "", t); tensor[n] = t
	}
	/^- \{step: [0-9]+, copy: / {
		s = $0; sub(/.* src: /, "", s); sub(/,.*/, "", s)
		d = $0; sub(/.* dst: /, "", d); sub(/}$/, "", d)
		if (!(s in tensor) || !(d in tensor) || tensor[s] != tensor[d])
			print s "(" tensor[s] ") -> " d "(" tensor[d] ")"
	}' "$1"
}

# rejects FILE EXPECTED: amp-compose fails with status 1 and one message
# that starts with the tool name and contains EXPECTED; with -o it writes
# neither the target nor a temporary.
rejects() {
	run --separate-stderr amp-compose "$1"
	assert_failure 1
	assert_equal "$output" ""
	assert_equal "${#stderr_lines[@]}" 1
	assert_regex "$stderr" '^amp-compose: '
	[[ "$stderr" == *"$2"* ]] || fail "expected '$2' in: $stderr"
	mkdir -p out
	run amp-compose "$1" -o out/composed.plan
	assert_failure 1
	run ls -A out
	assert_output ""
}

# ---- A. command-line contract ----

@test "compose --help prints usage and exit statuses to stdout and exits 0" {
	run --separate-stderr amp-compose --help
	assert_success
	assert_line --index 0 --regexp '^Usage: amp-compose '
	assert_output --partial '--no-compose'
	assert_output --partial 'Exit status: 0 success, 1 bad input or a write error, 2 usage error'
	assert_equal "$stderr" ""
}

@test "compose --version prints the tool name and version" {
	run --separate-stderr amp-compose --version
	assert_success
	assert_output --regexp '^amp-compose \(amp\) [0-9]+\.[0-9]+\.[0-9]+$'
	assert_equal "$stderr" ""
}

@test "compose rejects an unknown option with usage status 2" {
	plan "$MODELS/tiny-mlp.yaml" p.plan
	run --separate-stderr amp-compose --bogus p.plan
	assert_failure 2
	assert_equal "$output" ""
	assert_regex "$stderr" 'bogus'
	assert_regex "$stderr" "Try 'amp-compose --help'"
}

@test "compose reports usage errors under its own name, not argv[0]" {
	run --separate-stderr "$AMP_BIN/amp-compose" --bogus
	assert_failure 2
	for l in "${stderr_lines[@]}"; do
		[[ "$l" == "amp-compose: "* || "$l" == "Try 'amp-compose --help'"* ]] ||
			fail "message not under the tool name: $l"
	done
}

@test "compose rejects -o without a file with usage status 2" {
	run --separate-stderr amp-compose -o
	assert_failure 2
	assert_equal "$output" ""
}

@test "compose rejects two plan arguments with usage status 2" {
	plan "$MODELS/tiny-mlp.yaml" p.plan
	cp p.plan q.plan
	run --separate-stderr amp-compose p.plan q.plan
	assert_failure 2
	assert_equal "$output" ""
	assert_regex "$stderr" "q\.plan"
	mkdir out
	run amp-compose p.plan q.plan -o out/c.plan
	assert_failure 2
	run ls -A out
	assert_output ""
}

@test "compose reports a missing plan file with status 1 naming it" {
	run --separate-stderr amp-compose nosuch.plan
	assert_failure 1
	assert_equal "$stderr" "amp-compose: cannot open 'nosuch.plan': No such file or directory"
}

@test "compose reads the same plan from a path, from '-' and from stdin" {
	plan "$MODELS/tiny-mlp.yaml" p.plan
	run amp-compose p.plan -o path.plan
	assert_success
	run amp-compose - -o dash.plan < p.plan
	assert_success
	run amp-compose -o none.plan < p.plan
	assert_success
	run --separate-stderr amp-compose p.plan
	assert_success
	printf '%s\n' "$output" > stdout.plan
	run cmp path.plan dash.plan
	assert_success
	run cmp path.plan none.plan
	assert_success
	run cmp path.plan stdout.plan
	assert_success
}

@test "compose recognises zstd input by its magic, not its name" {
	plan "$MODELS/tiny-mlp.yaml" p.plan
	run amp-compose p.plan -o expect.plan
	assert_success
	run zstd -q p.plan -o p.plan.zst
	assert_success
	run zstd -q p.plan -o plain.yaml
	assert_success
	run od -An -tx1 -N4 plain.yaml
	assert_output ' 28 b5 2f fd'
	run amp-compose p.plan.zst -o from-zst.plan
	assert_success
	run amp-compose plain.yaml -o from-plain-name.plan
	assert_success
	run amp-compose -o from-stdin.plan < plain.yaml
	assert_success
	run cmp expect.plan from-zst.plan
	assert_success
	run cmp expect.plan from-plain-name.plan
	assert_success
	run cmp expect.plan from-stdin.plan
	assert_success
}

@test "compose -z writes zstd that decompresses to the plain output" {
	plan "$MODELS/tiny-mlp.yaml" p.plan
	run amp-compose p.plan -o plain.plan
	assert_success
	run amp-compose -z p.plan -o packed.zst
	assert_success
	run od -An -tx1 -N4 packed.zst
	assert_output ' 28 b5 2f fd'
	run zstd -q -d packed.zst -o unpacked.plan
	assert_success
	run cmp plain.plan unpacked.plan
	assert_success
	# and amp-compose reads its own compressed output
	run amp-compose --no-compose packed.zst -o again.plan
	assert_success
	run same_but_provenance plain.plan again.plan
	assert_success
}

@test "compose -o leaves only the target after success" {
	plan "$MODELS/tiny-mlp.yaml" p.plan
	mkdir out
	run amp-compose p.plan -o out/c.plan
	assert_success
	run ls -A out
	assert_output 'c.plan'
}

@test "compose -o on failure leaves no target and no temporary" {
	mkdir out
	run amp-compose "$BAD/plan-version.yaml" -o out/c.plan
	assert_failure 1
	run ls -A out
	assert_output ""
}

@test "compose -o on failure keeps an existing target unchanged" {
	mkdir out
	echo 'previous contents' > out/c.plan
	run amp-compose "$BAD/plan-step-order.yaml" -o out/c.plan
	assert_failure 1
	run cat out/c.plan
	assert_output 'previous contents'
	run ls -A out
	assert_output 'c.plan'
}

@test "compose -o into a missing directory fails with status 1 naming the target" {
	plan "$MODELS/tiny-mlp.yaml" p.plan
	run --separate-stderr amp-compose p.plan -o nodir/c.plan
	assert_failure 1
	assert_regex "$stderr" "^amp-compose: cannot create 'nodir/c\.plan"
	assert [ ! -e nodir ]
}

@test "compose gives identical bytes for the same input twice" {
	plan "$MODELS/tiny-mlp.yaml" p.plan
	run amp-compose p.plan -o one.plan
	assert_success
	run amp-compose p.plan -o two.plan
	assert_success
	run cmp one.plan two.plan
	assert_success
	run amp-compose -z p.plan -o one.zst
	assert_success
	run amp-compose -z p.plan -o two.zst
	assert_success
	run cmp one.zst two.zst
	assert_success
}

# ---- B. round trip ----

@test "compose --no-compose re-emits every amp-plan plan byte for byte" {
	for m in "$MODELS/tiny-mlp.yaml" "$MODELS/siglip-mlp.yaml" "$CASES"/compose-*.yaml; do
		n=$(basename "$m" .yaml)
		plan "$m" "$n.plan"
		run amp-compose --no-compose "$n.plan" -o "$n.again"
		assert_success
		run same_but_provenance "$n.plan" "$n.again"
		assert_success
	done
}

@test "compose is idempotent: composing a composed plan changes nothing" {
	for m in "$MODELS/tiny-mlp.yaml" "$MODELS/siglip-mlp.yaml" "$CASES"/compose-*.yaml; do
		n=$(basename "$m" .yaml)
		composed "$m" "$n.plan" "$n.once"
		run amp-compose "$n.once" -o "$n.twice"
		assert_success
		run same_but_provenance "$n.once" "$n.twice"
		assert_success
		run amp-compose --no-compose "$n.once" -o "$n.reread"
		assert_success
		run same_but_provenance "$n.once" "$n.reread"
		assert_success
	done
}

# ---- C. composition ----

@test "compose joins a native-panel fp8 stage and its replication into one copy" {
	composed "$CASES/compose-native-fp8.yaml" before.plan after.plan
	# before: the weight is staged on the first replica, then replicated
	run grep -c '^- {name: w@mm.b, tensor: w, layout: transposed-right, .* rep: \[2\], rstride: \[1\]}$' before.plan
	assert_output 1
	run steps before.plan
	assert_line 'copy w@home w@mm.b.stage native-panel'
	assert_line 'copy w@mm.b.stage w@mm.b native-panel'
	# after: one copy home -> replicas, native-panel, and no stage left
	run steps after.plan
	assert_line 'copy w@home w@mm.b native-panel'
	refute_line --partial 'w@mm.b.stage'
	run grep -c '^- {step: [0-9]*, copy: .*, dst: w@mm.b}$' after.plan
	assert_output 1
	run grep -c '\.b\.stage' after.plan
	assert_output 0
	run grep -c '^- {name: w@mm.b, tensor: w, layout: transposed-right, .* rep: \[2\], rstride: \[1\]}$' after.plan
	assert_output 1
	# the matmul still reads the replicas
	run steps after.plan
	assert_line 'compute matmul x.fp8@mm.a w@mm.b -> y@mm.out'
}

@test "compose joins identity-layout vector stages with their replication to every consumer" {
	composed "$CASES/compose-identity.yaml" before.plan after.plan
	run steps before.plan
	assert_line 'copy ln_s@home ln_s@owners.stage identity'
	assert_line 'copy ln_s@owners.stage ln_s@owners identity'
	assert_line 'copy ln_b@home ln_b@owners.stage identity'
	assert_line 'copy ln_b@owners.stage ln_b@owners identity'
	assert_line 'copy bias@home bias@mm.bias.stage identity'
	assert_line 'copy bias@mm.bias.stage bias@mm.bias identity'
	run steps after.plan
	assert_line 'copy ln_s@home ln_s@owners identity'
	assert_line 'copy ln_b@home ln_b@owners identity'
	assert_line 'copy bias@home bias@mm.bias identity'
	assert_line 'compute layernorm x@canon ln_s@owners ln_b@owners -> xn@canon'
	assert_line 'compute matmul xn@mm.a w@mm.b bias@mm.bias -> y@mm.out'
	refute_line --partial '.stage'
	run placements after.plan
	refute_line --partial '.stage'
	assert_line 'ln_s@owners ln_s'
	assert_line 'bias@mm.bias bias'
	# the replicas are unchanged: 6 token owners, 3 row partitions
	run grep -c '^- {name: ln_s@owners, .* rep: \[6\], rstride: \[1\]}$' after.plan
	assert_output 1
	run grep -c '^- {name: bias@mm.bias, .* rep: \[3\], rstride: \[[0-9]*\]}$' after.plan
	assert_output 1
}

@test "compose keeps pack-once staging of a conversion that needs packing" {
	composed "$CASES/compose-pack-once.yaml" before.plan after.plan
	run grep -c '^- {op: mm, .* grid: \[1, 1, 2\], .* staging: pack-once, ' before.plan
	assert_output 1
	run steps after.plan
	assert_line --index 0 'copy x@canon x@mm.a.stage identity'
	assert_line --index 1 'compute pack x@mm.a.stage -> x@mm.a.packed'
	assert_line --index 2 'copy x@mm.a.packed x@mm.a native-panel'
	assert_line 'compute matmul x@mm.a w@mm.b -> y@mm.out'
	run placements after.plan
	assert_line 'x@mm.a.stage x'
	assert_line 'x@mm.a.packed x'
	assert_line 'x@mm.a x'
	run grep -c '^- {name: x@mm.a.stage, tensor: x, layout: row-major, ' after.plan
	assert_output 1
	run grep -c '^- {name: x@mm.a.packed, tensor: x, layout: amp-left, .* rep: \[\], rstride: \[\]}$' after.plan
	assert_output 1
	run grep -c '^- {name: x@mm.a, tensor: x, layout: amp-left, .* rep: \[2\], ' after.plan
	assert_output 1
	run same_but_provenance before.plan after.plan
	assert_success
}

@test "compose never composes through a late precision cast" {
	composed "$CASES/compose-late-cast.yaml" before.plan after.plan
	run grep -c '^- {op: mm, .* format: fp8, .* cast: late, ' after.plan
	assert_output 1
	run grep -c '^- {name: x, role: input, shape: \[1, 6, 70\], dtype: fp16}$' after.plan
	assert_output 1
	run steps after.plan
	# a moves in fp16 to the GEMM tiles, then a cast compute there (b, a
	# weight matrix, is not moved ahead of the cast)
	assert_line --index 0 'copy x@canon x@mm.a relayout'
	assert_line --index 1 'compute cast x@mm.a -> x.fp8@mm.a'
	assert_line 'compute matmul x.fp8@mm.a w@mm.b -> y@mm.out'
	refute_line --regexp '^copy .* x\.fp8@'
	# b still composes on the other side of the matmul
	assert_line 'copy w@home w@mm.b native-panel'
	run placements after.plan
	assert_line 'x@mm.a x'
	assert_line 'x.fp8@mm.a x.fp8'
	run grep -c '^- {name: x@mm.a, tensor: x, layout: amp-left, .* rep: \[2\], ' after.plan
	assert_output 1
	# a cast is never a copy: no copy moves one tensor into another
	run cross_copies after.plan
	assert_success
	assert_output ""
}

# tests/golden/shared-stage/plan.yaml: compose-shared-stage.yaml as planned
# before grids rotated over the tiles, both matmuls on tiles 0.., so both
# replicate one stage of w.
@test "compose keeps a stage that a second matmul also replicates" {
	cp "$GOLDEN/shared-stage/plan.yaml" before.plan
	run amp-compose before.plan -o after.plan
	assert_success
	run steps before.plan
	assert_line 'copy w@home w@mm1.b.stage native-panel'
	assert_line 'copy w@mm1.b.stage w@mm1.b native-panel'
	assert_line 'copy w@mm1.b.stage w@mm2.b native-panel'
	run steps after.plan
	assert_line 'copy w@home w@mm1.b.stage native-panel'
	assert_line 'copy w@mm1.b.stage w@mm1.b native-panel'
	assert_line 'copy w@mm1.b.stage w@mm2.b native-panel'
	refute_line 'copy w@home w@mm1.b native-panel'
	refute_line 'copy w@home w@mm2.b native-panel'
	run placements after.plan
	assert_line 'w@mm1.b.stage w'
	run grep -c '^- {name: w@mm1.b, .* rep: \[2\], ' after.plan
	assert_output 1
	run grep -c '^- {name: w@mm2.b, .* rep: \[3\], ' after.plan
	assert_output 1
	# the golden plan is a version 4 one (no provenance)
	sed 's/^version: 4$/version: 17/' before.plan > before6.plan
	run same_but_provenance before6.plan after.plan
	assert_success
}

@test "compose keeps a stage that a compute also reads" {
	plan "$CASES/compose-native-fp8.yaml" p.plan
	sed 's/^\(- {step: [0-9]*, compute: matmul, op: mm, in: \[x.fp8@mm.a, \)w@mm.b\]/\1w@mm.b.stage]/' \
		p.plan > shared.plan
	run steps shared.plan
	assert_line 'compute matmul x.fp8@mm.a w@mm.b.stage -> y@mm.out'
	run amp-compose shared.plan -o after.plan
	assert_success
	run steps after.plan
	assert_line 'copy w@home w@mm.b.stage native-panel'
	assert_line 'copy w@mm.b.stage w@mm.b native-panel'
	run same_but_provenance shared.plan after.plan
	assert_success
}

@test "compose keeps a relayout stage before a replication" {
	plan "$CASES/compose-native-fp8.yaml" p.plan
	sed -e 's/^\(- {name: w@mm.b.stage, tensor: w, layout: \)transposed-right,/\1row-major,/' \
	    -e 's/map: native-panel, \(src: w@home, dst: w@mm.b.stage}\)/map: relayout, \1/' \
	    -e 's/map: native-panel, \(src: w@mm.b.stage, dst: w@mm.b}\)/map: relayout, \1/' \
		p.plan > relayout.plan
	run steps relayout.plan
	assert_line 'copy w@home w@mm.b.stage relayout'
	assert_line 'copy w@mm.b.stage w@mm.b relayout'
	run amp-compose relayout.plan -o after.plan
	assert_success
	run same_but_provenance relayout.plan after.plan
	assert_success
}

@test "compose --no-compose leaves every stage in place" {
	for m in "$MODELS/tiny-mlp.yaml" "$CASES/compose-identity.yaml" "$CASES/compose-native-fp8.yaml"; do
		n=$(basename "$m" .yaml)
		plan "$m" "$n.plan"
		run grep -c '^- {name: [^,]*\.stage, ' "$n.plan"
		assert_success
		stages=$output
		assert [ "$stages" -ge 1 ]
		run amp-compose --no-compose "$n.plan" -o "$n.kept"
		assert_success
		run grep -c '^- {name: [^,]*\.stage, ' "$n.kept"
		assert_output "$stages"
		run grep -c '^- {step: [0-9]*, copy: .*, dst: [^,]*\.stage}$' "$n.kept"
		assert_output "$stages"
		run amp-compose "$n.plan" -o "$n.composed"
		assert_success
		run grep -c '\.stage' "$n.composed"
		assert_output 0
	done
}

@test "compose -v reports the number of joined copies on stderr" {
	plan "$MODELS/tiny-mlp.yaml" p.plan
	run grep -c '^- {step: ' p.plan
	before=$output
	run --separate-stderr amp-compose -v p.plan -o c.plan
	assert_success
	assert_equal "$output" ""
	run grep -c '^- {step: ' c.plan
	after=$output
	assert_equal "$((before - after))" 4
	run --separate-stderr amp-compose -v p.plan -o c.plan
	assert_equal "$stderr" "amp-compose: joined 4 copies, moved 0 parameter copies ahead of compute"
	run --separate-stderr amp-compose --verbose "$GOLDEN/shared-stage/plan.yaml" -o s.composed
	assert_success
	assert_equal "$stderr" "amp-compose: joined 0 copies, moved 0 parameter copies ahead of compute"
	run --separate-stderr amp-compose p.plan -o quiet.plan
	assert_success
	assert_equal "$stderr" ""
}

@test "compose moves a layer's second layernorm parameters ahead of the residual add, into the projection's return phase" {
	composed "$MODELS/siglip-so400m-1layer.yaml" p.plan c.plan
	# in the plan: the residual add, then ln2's parameter copies
	run grep -o -e 'compute: add, op: res1' -e 'copy: parameter, op: ln2, operand: scale' p.plan
	assert_line --index 0 'compute: add, op: res1'
	assert_line --index 1 'copy: parameter, op: ln2, operand: scale'
	run grep -o -e 'compute: add, op: res1' -e 'copy: parameter, op: ln2, operand: scale' c.plan
	assert_line --index 0 'copy: parameter, op: ln2, operand: scale'
	assert_line --index 1 'compute: add, op: res1'
	run --separate-stderr amp-compose -v p.plan -o /dev/null
	[[ $stderr =~ ^amp-compose:\ joined\ [0-9]+\ copies,\ moved\ ([0-9]+)\ parameter\ copies ]]
	assert [ "${BASH_REMATCH[1]}" -ge 2 ]         # at least ln2's scale and bias
	# one phase fewer per moved run: the projection's return carries them
	run bash -c "amp-expand c.plan | amp-exchange | amp-group | grep -c 'label: proj.out+ln2.scale+ln2.bias}'"
	assert_output 1
	run bash -c "amp-compose --no-compose p.plan | amp-expand | amp-exchange | amp-group | grep -c 'label: ln2.scale'"
	assert_output 1
	# and --no-compose moves nothing
	run amp-compose --no-compose p.plan -o n.plan
	assert_success
	run same_but_provenance p.plan n.plan
	assert_success
}

@test "compose never moves parameter copies across a repeat that lies among the computes before them" {
	plan "$CASES/compose-repeat-inside.yaml" p.plan
	run --separate-stderr amp-compose -v p.plan -o c.plan
	assert_success
	[[ $stderr == *", moved 0 parameter copies ahead of compute" ]] || fail "$stderr"
	# the region is still the gelu and its carry, and ln2's copies follow it
	run grep -A1 '^repeats:' c.plan
	assert_line --index 1 --partial 'steps: [4, 5]'
	run grep -o -e 'compute: carry' -e 'copy: parameter, op: ln2' c.plan
	assert_line --index 1 'compute: carry'
	assert_line --index 2 'copy: parameter, op: ln2'
	run bash -c "amp-expand c.plan | amp-exchange | amp-group | amp-capture - | jq .summary.phases"
	assert_success
}

# ---- D. malformed plans ----

@test "compose rejects a stage file of another format" {
	rejects "$BAD/plan-wrong-format.yaml" "plan-wrong-format.yaml:2:9: expected format 'amp-plan', found 'amp-expand'"
}

@test "compose rejects a plan of an unsupported version" {
	rejects "$BAD/plan-version.yaml" "plan-version.yaml:3:10: unsupported amp-plan version 18"
}

@test "compose rejects a placement of an unknown tensor" {
	rejects "$BAD/plan-unknown-tensor.yaml" "plan-unknown-tensor.yaml:19:32: unknown tensor 'v'"
}

@test "compose rejects a step that names an unknown placement" {
	rejects "$BAD/plan-unknown-placement.yaml" "plan-unknown-placement.yaml:27:74: unknown placement 'w@mm.b.staged'"
}

@test "compose rejects a placement whose split does not match the tensor's rank" {
	rejects "$BAD/plan-split-rank.yaml" "plan-split-rank.yaml:19:68: split has 3 entries; tensor 'w' has rank 2"
}

@test "compose rejects a placement whose blocks do not cover the tensor's shape" {
	rejects "$BAD/plan-block-shape.yaml" "plan-block-shape.yaml:19:3: placement 'w@mm.b.stage': axis 0 of extent 70"
}

@test "compose rejects a step with an unknown key" {
	rejects "$BAD/plan-step-key.yaml" "plan-step-key.yaml:26:101: unknown key 'via'"
}

@test "compose rejects a gemm record that scatters a reduction of grid k 1" {
	rejects "$BAD/plan-reduce-k1.yaml" "plan-reduce-k1.yaml:13:141: reduce scatter needs grid k > 1 (grid k is 1)"
}

@test "compose rejects a scratch on a step that is not attention" {
	rejects "$BAD/plan-scratch-gelu.yaml" "plan-scratch-gelu.yaml:77:76: only attention takes heads, kv_heads, causal, scale and scratch"
}

@test "compose rejects steps numbered out of order" {
	rejects "$BAD/plan-step-order.yaml" "plan-step-order.yaml:27:10: expected step 3, found 4"
}

@test "compose rejects a copy between placements of different tensors" {
	rejects "$BAD/plan-copy-tensor.yaml" "plan-copy-tensor.yaml:27:3: copy from 'w@mm.b.stage' to 'x@canon' changes the tensor"
}

@test "compose rejects a placement with more shards and replicas than the machine has tiles" {
	rejects "$BAD/plan-tile-count.yaml" "plan-tile-count.yaml:20:3: placement 'w@mm.b': 1473 shards and replicas do not fit on 1472 tiles"
}

@test "compose rejects a placement based on a tile beyond the machine" {
	run --separate-stderr amp-compose "$BAD/plan-tile-base.yaml"
	assert_failure 1
	assert_regex "$stderr" "^amp-compose: .*plan-tile-base\.yaml:15:[0-9]+: .*w@home.*1472"
	mkdir out
	run amp-compose "$BAD/plan-tile-base.yaml" -o out/c.plan
	assert_failure 1
	run ls -A out
	assert_output ""
}

@test "compose rejects a truncated zstd stream" {
	plan "$CASES/compose-native-fp8.yaml" p.plan
	run zstd -q --check p.plan -o p.zst
	assert_success
	size=$(stat -c %s p.zst)
	head -c $((size - 4)) p.zst > cut-checksum.zst
	head -c $((size / 2)) p.zst > cut-half.zst
	rejects cut-checksum.zst "'cut-checksum.zst': truncated zstd stream"
	rejects cut-half.zst "'cut-half.zst': truncated zstd stream"
	run --separate-stderr amp-compose - < cut-half.zst
	assert_failure 1
	assert_equal "$stderr" "amp-compose: '<stdin>': truncated zstd stream"
}

@test "compose rejects a corrupt zstd stream" {
	rejects "$BAD/plan-corrupt.zst" "'$BAD/plan-corrupt.zst': corrupt zstd stream"
	# a real plan whose frame checksum is wrong: the content parses, the stream does not
	plan "$CASES/compose-native-fp8.yaml" p.plan
	run zstd -q --check p.plan -o p.zst
	assert_success
	size=$(stat -c %s p.zst)
	head -c $((size - 4)) p.zst > bad-sum.zst
	printf '\0\0\0\0' >> bad-sum.zst
	run cmp -s p.zst bad-sum.zst
	assert_failure
	rejects bad-sum.zst "'bad-sum.zst': corrupt zstd stream"
}
