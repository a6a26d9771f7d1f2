#!/usr/bin/env bats
# Whole models (amp-model: 2): the malformed models of the whole-model
# language (tests/bad/model-{repeat,patchify,broadcast,add,attention,map}-*),
# and tests/models/siglip-small.yaml through every stage: end to end with
# amp-run, a repeat body lowered once whatever its count, the capture of a
# repeat, the stage round trip, determinism of the plan of siglip-so400m,
# and amp-run naming the iteration of a wrong byte inside a repeat.
#
# siglip-small (2 layers of width 96, 16 tokens) lowers and runs in well
# under a second, also under the sanitizers, so nothing here is skipped
# with siglip_ok.

bats_require_minimum_version 1.5.0
load common
load stages

SMALL=$ROOT/tests/models/siglip-small.yaml
SO400M=$MODELS/siglip-so400m.yaml
STAGES=(plan composed expanded exchange grouped)

# rejects FILE LINE:COL MESSAGE: `amp-plan -o out.plan $BAD/FILE` fails as
# plan_rejects (common.bash) checks, at $BAD/FILE:LINE:COL.
rejects() {
	[ -f "$BAD/$1" ] || fail "no such test input: $BAD/$1"
	plan_rejects "$BAD/$1" "$2" "$3" "$BAD/$1"
}

# stages MODEL DIR [SCALES]: MODEL planned (with SCALES), composed,
# expanded, exchanged, grouped and emitted into DIR/plan.yaml,
# composed.yaml, expanded.yaml, exchange.yaml, grouped.yaml, program.amp.
# The grouped stage keeps record order (amp-group --schedule record, or
# $SCHEDULE): the head's addresses move with the layer count (the stacked
# homes grow), and the schedule's forward dependencies follow addresses, so
# only record order makes 2 and 7 layers differ in their count alone.
stages() {
	local scales=()
	[ -z "${3:-}" ] || scales=(--scales "$3")
	mkdir -p "$2" &&
		amp-plan "${scales[@]}" "$1" -o "$2/plan.yaml" &&
		amp-compose "$2/plan.yaml" -o "$2/composed.yaml" &&
		amp-expand "$2/composed.yaml" -o "$2/expanded.yaml" &&
		amp-exchange "$2/expanded.yaml" -o "$2/exchange.yaml" &&
		amp-group --schedule "${SCHEDULE:-record}" "$2/exchange.yaml" -o "$2/grouped.yaml" &&
		amp-emit --model "$1" "${scales[@]}" "$2/grouped.yaml" -o "$2/program.amp"
}

# layers N OUT: siglip-small with its repeat's count 2 changed to N.
layers() {
	sed "s/^    count: 2\$/    count: $1/" "$SMALL" > "$2"
	run diff "$SMALL" "$2"
	assert_failure 1
	assert_output --regexp "^[0-9]+c[0-9]+
<     count: 2
---
>     count: $1\$"
}

# repeat_of STAGE: "first last count" of the stage's one repeats: record.
repeat_of() {
	sed -n 's/^- {repeat: layers, steps: \[\([0-9]*\), \([0-9]*\)\], count: \([0-9]*\)}$/\1 \2 \3/p' "$1"
}

# body_phases STAGE FIRST LAST: the ids of the phases within steps FIRST..LAST.
body_phases() {
	awk -v f="$2" -v l="$3" '/^- \{phase: / {
		t = $0; gsub(/[][{},:]/, " ", t); split(t, x, " ")
		if (x[5] + 0 >= f + 0 && x[6] + 0 <= l + 0) printf "%s ", x[3] }' "$1"
}

# drop_send STAGE STEP OUT: STAGE without the first send record of STEP.
drop_send() {
	awk -v s="$2" '!done && $0 ~ "^- \\{step: " s ", kind: send, " { done = 1; next } 1' "$1" > "$3"
	run cmp -s "$1" "$3"
	assert_failure 1
}

# le N BYTES: N as BYTES little-endian bytes, on standard output.
le() {
	local s= i
	for ((i = 0; i < $2; i++)); do
		s+=$(printf '\\%03o' $((($1 >> (8 * i)) & 255)))
	done
	printf "$s"
}

# section PROGRAM ID: "index encoding offset size" of section ID
# (formats/program.md: 16 + 24 i holds {u32 id, u32 encoding, u64 offset, u64 size}).
section() {
	local n i
	n=$(field "$1" 12 4) || return 1
	for ((i = 0; i < n; i++)); do
		if [ "$(field "$1" $((16 + 24 * i)) 4)" = "$2" ]; then
			echo "$i $(field "$1" $((20 + 24 * i)) 4) $(field "$1" $((24 + 24 * i)) 8)" \
				"$(field "$1" $((32 + 24 * i)) 8)"
			return 0
		fi
	done
	return 1
}

# unpacked PROGRAM ID OUT: the contents of section ID, decompressed, in OUT.
unpacked() {
	local i enc off size
	read -r i enc off size < <(section "$1" "$2") || return 1
	tail -c +$((off + 1)) "$1" | head -c "$size" > "$3.raw"
	if [ "$enc" = 1 ]; then
		zstd -dcq "$3.raw" > "$3" || return 1
	else
		mv "$3.raw" "$3"
	fi
}

# restride PROGRAM TILE PHASE FACTOR OUT: PROGRAM with the address step of
# TILE's moving SEND in PHASE (its SEND address stream: 2 addresses, one
# affine sequence of one loop) multiplied by FACTOR, written to OUT; prints
# the step it found. TABLE is the last section, so OUT is PROGRAM up to it,
# the recompressed TABLE and the section's new size.
restride() {
	local i enc off size at old
	read -r i enc off size < <(section "$1" 3) || return 1
	[ "$enc" = 1 ] || return 1
	unpacked "$1" 3 table.bin || return 1
	read -r at old < <(od -An -tu4 -w4 -v table.bin | awk -v tile="$2" -v phase="$3" '
		{ v[NR - 1] = $1 + 0 }
		END {   # u32 n, then n x {tile, phase, row, 3 x {count, nseq, nseq x {base, nloops, nloops x {count, step}}}}
			p = 1
			for (e = 0; e < v[0]; e++) {
				t = v[p]; ph = v[p + 1]; p += 3
				for (s = 0; s < 3; s++) {
					cnt = v[p]; nseq = v[p + 1]; p += 2
					if (s == 0 && t == tile && ph == phase && cnt == 2 && nseq == 1 &&
					    v[p + 1] == 1 && v[p + 2] == 2) {
						print 4 * (p + 3), v[p + 3]
						exit
					}
					for (q = 0; q < nseq; q++)
						p += 2 + 2 * v[p + 1]
				}
			}
		}') || return 1
	[ -n "$at" ] || return 1
	le $((old * $4)) 4 | dd of=table.bin bs=1 seek="$at" conv=notrunc status=none
	# the new TABLE appended, its section entry pointed at it
	cp "$1" "$5"
	local end
	end=$(stat -c %s "$5")
	zstd -q -c table.bin >> "$5" || return 1
	le "$end" 8 | dd of="$5" bs=1 seek=$((24 + 24 * i)) conv=notrunc status=none
	le $(($(stat -c %s "$5") - end)) 8 | dd of="$5" bs=1 seek=$((32 + 24 * i)) conv=notrunc status=none
	echo "$old"
}

# ---- malformed models of the whole-model language ----

@test "plan rejects a repeat in a version 1 model at the repeat" {
	rejects model-repeat-needs-version-2.yaml 7:5 "repeat needs amp-model: 2"
}

@test "plan rejects an op newer than its model file at the op (the op table's first version)" {
	rejects model-patchify-version.yaml 7:10 "op 'patchify' needs amp-model: 2 (this file is version 1)"
}

@test "plan rejects a repeat nested in a repeat's body at the inner repeat" {
	rejects model-repeat-nested.yaml 16:9 "repeat 'layers': repeats do not nest"
}

@test "plan rejects a body-local tensor used after its repeat at the use" {
	rejects model-repeat-local-tensor.yaml 17:35 "tensor 'y' is local to the body of repeat 'layers'"
}

@test "plan rejects a body whose last result has another shape than the carry at that op" {
	rejects model-repeat-carry-shape.yaml 15:9 \
		"repeat 'layers': the last op's result 'y' must have the shape and dtype of carry 'h'"
}

@test "plan rejects a body whose last result has another dtype than the carry at that op" {
	rejects model-repeat-carry-dtype.yaml 13:9 \
		"repeat 'layers': the last op's result 'y' must have the shape and dtype of carry 'h'"
}

@test "plan rejects a repeat with an empty list of ops at the list" {
	rejects model-repeat-empty-ops.yaml 11:10 "repeat 'layers': expected a non-empty list of ops"
}

@test "plan rejects a repeat whose in is a parameter at its name" {
	rejects model-repeat-in-param.yaml 11:9 \
		"repeat 'layers': in 'table' must be an activation [batch, tokens, features]"
}

@test "plan rejects a second repeat of the same name at that name" {
	rejects model-repeat-duplicate.yaml 13:13 "repeat 'layers' is defined twice"
}

@test "plan rejects an unknown key in a repeat at the key" {
	rejects model-repeat-unknown-key.yaml 8:5 "unknown key 'name'"
}

@test "plan rejects a repeat of count 0 at the count" {
	rejects model-repeat-count-zero.yaml 8:12 "repeat 'layers': count must be an integer from 1 to 1048576"
}

@test "plan rejects patchify of an input that is not an image at the operand" {
	rejects model-patchify-not-image.yaml 7:33 \
		"patchify 'pf': 'x' must be an input image [batch, channels, height, width]"
}

@test "plan rejects patchify of a parameter at the operand" {
	rejects model-patchify-not-input.yaml 9:33 \
		"patchify 'pf': 'table' must be an input image [batch, channels, height, width]"
}

@test "plan rejects a patch larger than the image at the patch" {
	rejects model-patchify-too-large.yaml 7:47 "patchify 'pf': patch 16 is larger than the image 8 x 8"
}

@test "plan rejects broadcast of an activation at the operand" {
	rejects model-broadcast-not-param.yaml 7:34 "broadcast 'bc': 'x' must be a [tokens, features] parameter"
}

@test "plan rejects add of a parameter of the wrong shape, naming the shape it needs" {
	rejects model-add-param-shape.yaml 9:39 \
		"add 'pos_add': parameter 'pos' must be [4, 32] fp16, like a row of 'x'"
}

@test "plan rejects attention whose heads do not divide the width at the heads" {
	rejects model-attention-heads.yaml 7:48 "attention 'attn': 5 heads do not divide width 32"
}

@test "plan rejects attention of fp8 q, k and v at the operand" {
	rejects model-attention-fp8.yaml 8:38 "attention 'attn': q, k and v must be fp16"
}

@test "plan rejects attention whose qkv width is not a multiple of 3 at the operand" {
	rejects model-attention-qkv-width.yaml 7:38 "attention 'attn': qkv 't' has 64 features, not 3 x width"
}

@test "plan rejects attention given both qkv and q and kv at the qkv" {
	rejects model-attention-qkv-and-q.yaml 9:38 "attention 'attn': give either qkv or q and kv"
}

@test "plan rejects attention whose kv is not twice q's width at the kv" {
	rejects model-attention-kv-width.yaml 8:43 "attention 'attn': kv 'kv' must be [2, tokens, 64] (k then v: 4 kv heads of 8 columns each)"
}

@test "plan rejects a MAP head missing one of its weights at the op" {
	rejects model-map-missing-key.yaml 20:5 "map 'head': missing key 'w2'"
}

@test "every new model error has a file in tests/bad that this suite checks" {
	every_bad_checked 22 'rejects %s ' "$BAD"/model-{repeat,patchify,broadcast,add,attention,map}-*.yaml
}

@test "a MAP head (op: map) stands for its ten ops, named <name>.<part>, the last defining out" {
	run amp-plan -o p.yaml "$SMALL"
	assert_success
	run sed -n 's/^- {step: [0-9]*, compute: \([a-z]*\), op: \(head\.[a-z]*\), .*/\2 \1/p' p.yaml
	assert_success
	for want in "head.probe broadcast" "head.q matmul" "head.kv matmul" "head.attn attention" \
		    "head.o matmul" "head.ln layernorm" "head.up matmul" "head.act gelu" \
		    "head.down matmul" "head.res add"; do
		assert_line "$want"
	done
	run grep -c '^- {name: pooled, role: output, shape: \[2, 1, 96\], dtype: fp16}$' p.yaml
	assert_output 1
}

# ---- siglip-small end to end ----

@test "siglip-small runs end to end from calibrated scales: byte-exact and cosine at least 0.99" {
	run --separate-stderr amp-run --calibrate "$SMALL" -o scales.yaml
	assert_success
	assert_equal "$stderr" ""
	run grep -c '^  [a-z_0-9]*: -\{0,1\}[0-9]*$' scales.yaml
	assert [ "$output" -ge 10 ]
	# through pipes, as the README shows the flow; siglip-small fits the
	# default table budget and fragment limit, so amp-emit gets no override
	set -o pipefail
	amp-plan --scales scales.yaml "$SMALL" | amp-compose | amp-expand | amp-exchange | amp-group |
		amp-emit --model "$SMALL" --scales scales.yaml -o small.amp
	set +o pipefail
	assert [ -s small.amp ]
	run amp-emit --list small.amp
	assert_success
	phases=$(sed -n 's/^amp-program [0-9]* model siglip-small machine amp1472 tiles 1472 phases \([0-9]*\)$/\1/p' <<< "${lines[0]}")
	assert [ "$phases" -ge 20 ]
	run --separate-stderr amp-run small.amp
	assert_success
	assert_equal "$stderr" ""
	assert_equal "${#lines[@]}" 4
	assert_line --index 0 "movement: byte-exact after every phase ($phases phases)"
	# the reference is the model's, embedded by amp-emit --model
	assert_line --index 1 "reference: FP32 from the model's ops (small.amp(MODEL))"
	assert_line --index 2 --regexp "^per op: [0-9]+ ops checked after every run, each on the machine's own inputs against its FP32 reference; closest to its tolerance: '[a-z0-9_.]+', relative L2 error [0-9.e-]+ of [0-9.e-]+$"
	assert_line --index 3 --regexp '^output pooled: cosine [0-9.]+, max abs error [0-9.e+-]+ \(against FP32\)$'
	[[ ${lines[3]} =~ cosine\ ([0-9.]+), ]] || fail "no cosine in: ${lines[3]}"
	run awk -v c="${BASH_REMATCH[1]}" 'BEGIN { exit !(c + 0 >= 0.99) }'
	assert_success
}

# ---- a repeat body is lowered once ----

@test "the grouped stage of siglip-small holds its repeat once, with count 2 over the body's steps" {
	run stages "$SMALL" two
	assert_success
	run grep -c '^repeats:$' two/grouped.yaml
	assert_output 1
	run grep -c '^- {repeat: ' two/grouped.yaml
	assert_output 1
	read -r first last count < <(repeat_of two/grouped.yaml)
	assert_equal "$count" 2
	# the body's ops are its steps, once: ln1 starts it, the carry ends it
	run step_of two/grouped.yaml ln1 scale
	assert_output "$first"
	run grep -c '^- {step: [0-9]*, compute: [a-z]*, op: mlp_down, ' two/grouped.yaml
	assert [ "$output" -ge 1 ]
	run sed -n "s/^- {step: $last, compute: \\([a-z]*\\), .*/\\1/p" two/grouped.yaml
	assert_output carry
	# each stacked parameter once, with its 2 instances
	run grep -c '^- {name: [a-z_0-9]*, role: param, .*, count: 2}$' two/grouped.yaml
	assert_output 12
}

@test "every stage file of siglip-small has as many lines for 7 layers as for 2" {
	layers 7 small7.yaml
	run stages "$SMALL" two
	assert_success
	run stages small7.yaml seven
	assert_success
	read -r _ _ count < <(repeat_of seven/grouped.yaml)
	assert_equal "$count" 7
	for s in "${STAGES[@]}"; do
		run grep -c '^- {repeat: layers, steps: \[[0-9]*, [0-9]*\], count: 7}$' "seven/$s.yaml"
		assert_output 1
		run grep -c '^' "two/$s.yaml"
		two=$output
		run grep -c '^' "seven/$s.yaml"
		assert_equal "$output" "$two"
		assert [ "$two" -ge 300 ]
	done
}

@test "scheduled, the grouped stage of siglip-small for 7 layers is within 1% of 2 layers' lines" {
	layers 7 small7.yaml
	SCHEDULE=list run stages "$SMALL" two
	assert_success
	SCHEDULE=list run stages small7.yaml seven
	assert_success
	two=$(grep -c '^' two/grouped.yaml)
	seven=$(grep -c '^' seven/grouped.yaml)
	assert [ "$two" -ge 300 ]
	assert [ $((100 * (seven > two ? seven - two : two - seven))) -le "$two" ]
}

@test "amp-emit stores a repeat body's rows once: 7 layers list the rows of 2; only the body's moving sends grow, and addresses beside a stacked home" {
	layers 7 small7.yaml
	run stages "$SMALL" two
	assert_success
	run stages small7.yaml seven
	assert_success
	# A stacked home holds every instance, so its size follows the count:
	# a placement that shares one of its tiles may sit higher (on all its
	# tiles: a placement has one address), and only addresses and the
	# bytes of a receive that no longer continues the previous one change.
	run grep -c '^- {name: [^,]*, role: param, .*, count: 7}$' seven/grouped.yaml
	assert [ "$output" -gt 0 ]
	amp-emit --list two/program.amp > two.list
	amp-emit --list seven/program.amp > seven.list
	run grep -c '^' seven.list
	assert_equal "$output" "$(grep -c '^' two.list)"
	run grep -c ' per iteration x 7$' seven.list
	assert [ "$output" -gt 0 ]
	# masked (a row's bytes, a moving send's iterations, every SRAM
	# address), the listings are the same
	mask() {
		sed -E 's/^(tile [0-9]+ phase [0-9]+ bytes )[0-9]+ /\1- /; s/ per iteration x [0-9]+$/ per iteration x -/
			s/ (to|from|at) [0-9]+/ \1 -/g' "$1"
	}
	run diff <(mask two.list) <(mask seven.list)
	assert_success
	read -r first last _ < <(repeat_of two/grouped.yaml)
	body=" $(body_phases two/grouped.yaml "$first" "$last")"
	assert [ "$body" != " " ]
	# every row that differs unmasked is in the body and larger for 7
	# layers (its moving sends), or differs in addresses only: those rows
	# counted as MOVED
	run awk -v body="$body" 'function flush() { if (row != "" && moved) m++; moved = 0 }
		FILENAME == ARGV[1] { a[FNR] = $0; next }
		$1 == "tile" { flush(); row = $2 " " $4; grew = 0 }
		$0 != a[FNR] && $0 !~ / per iteration x 7$/ {
			split(a[FNR], o, " ")
			if ($1 == "tile" && index(body, " " $4 " ") && $6 + 0 > o[6] + 0) { grew = 1; n++; next }
			if (!grew) moved = 1
		}
		END { flush(); if (n == 0) print "no row grew"; print "MOVED " m + 0 }' two.list seven.list
	assert_success
	assert_equal "${#lines[@]}" 1
	[[ ${lines[0]} =~ ^MOVED\ ([0-9]+)$ ]] || fail "$output"
	local moved=${BASH_REMATCH[1]}
	# stored rows (ROWS: u32 nrows) and table entries (TABLE: u32
	# nentries): the body's once, so 7 layers store at most one more row
	# per moved one
	for id in 2 3; do
		run unpacked two/program.amp $id two.$id
		assert_success
		run unpacked seven/program.amp $id seven.$id
		assert_success
		run field two.$id 0 4
		n=$output
		assert [ "$n" -gt 0 ]
		run field seven.$id 0 4
		assert [ "$output" -ge "$n" ]
		assert [ "$output" -le "$((n + moved))" ]
	done
}

# ---- capture of a repeat ----

# captures: two.json and seven.json, the captures of siglip-small's
# program with 2 and with 7 layers; FIRST and LAST the body's steps and
# IN_BODY a jq condition on a phase: within them.
captures() {
	layers 7 small7.yaml
	run stages "$SMALL" two
	assert_success
	run stages small7.yaml seven
	assert_success
	run amp-capture two/program.amp -o two.json
	assert_success
	run amp-capture seven/program.amp -o seven.json
	assert_success
	read -r FIRST LAST _ < <(repeat_of two/grouped.yaml)
	IN_BODY="(.steps[0] >= $FIRST and .steps[1] <= $LAST)"
}

@test "capture gives a repeat body's phases and compute steps the repeat's count, each described once" {
	captures
	for n in 2 7; do
		[ $n = 2 ] && c=two.json || c=seven.json
		run jq -c "[.phases[] | select($IN_BODY) | .count] | unique" $c
		assert_output "[$n]"
		run jq -c "[.phases[] | select($IN_BODY | not) | .count] | unique" $c
		assert_output '[1]'
		run jq -c "[.compute[] | select(.step >= $FIRST and .step <= $LAST) | .count] | unique" $c
		assert_output "[$n]"
		run jq -c "[.compute[] | select(.step < $FIRST or .step > $LAST) | .count] | unique" $c
		assert_output '[1]'
	done
	# a phase's figures are one run's: the same phases and movement classes
	# (a phase's largest row may grow beside a stacked home, as amp-emit's
	# test above says; the body's may not)
	q="[.phases[] | del(.count) | if $IN_BODY then . else del(.max_row_bytes) end], [.compute[] | del(.count)], .phase_traffic"
	run jq -c "$q" two.json
	assert_success
	want=$output
	run jq -c "$q" seven.json
	assert_success
	assert_equal "$output" "$want"
}

@test "capture totals add each phase count times: 7 layers move 5 bodies more than 2" {
	captures
	for c in two.json seven.json; do
		run jq -c '[.summary.phases == ([.phases[].count] | add),
			.summary.transfers == ([.phases[] | .transfers * .count] | add),
			.summary.bytes == ([.phases[] | .bytes * .count] | add),
			.summary.exchange_cycles == ([.phases[] | .cycles * .count] | add),
			.summary.sync_cycles == .machine.sync_cycles * .summary.phases]' $c
		assert_output '[true,true,true,true,true]'
	done
	for k in transfers bytes cycles; do
		[ $k = cycles ] && s=exchange_cycles || s=$k
		run jq -n --slurpfile a two.json --slurpfile b seven.json \
			"(\$b[0].summary.$s - \$a[0].summary.$s) ==
			 5 * ([\$a[0].phases[] | select($IN_BODY) | .$k] | add)"
		assert_output true
	done
	run jq "[.phases[] | select($IN_BODY) | .bytes] | add" two.json
	assert [ "$output" -gt 0 ]
	run jq -n --slurpfile a two.json --slurpfile b seven.json \
		"(\$b[0].summary.phases - \$a[0].summary.phases) ==
		 5 * ([\$a[0].phases[] | select($IN_BODY)] | length)"
	assert_output true
}

# ---- stage round trip and determinism ----

@test "compose --no-compose re-emits siglip-small's plan and composed stage byte for byte" {
	run amp-run --calibrate "$SMALL" -o scales.yaml
	assert_success
	run stages "$SMALL" two scales.yaml
	assert_success
	run grep -c '^- {repeat: layers, ' two/plan.yaml
	assert_output 1
	run grep -c '^host:$' two/plan.yaml
	assert_output 1
	for s in plan composed; do
		run amp-compose --no-compose "two/$s.yaml" -o "$s.again"
		assert_success
		run same_but_provenance "two/$s.yaml" "$s.again"
		assert_success
	done
}

@test "two amp-plan runs of siglip-so400m give identical bytes" {
	run amp-plan "$SO400M" -o one.yaml
	assert_success
	run amp-plan "$SO400M" -o two.yaml
	assert_success
	run grep -c '^- {repeat: [a-z_]*, steps: \[[0-9]*, [0-9]*\], count: 27}$' one.yaml
	assert_output 1
	run cmp one.yaml two.yaml
	assert_success
}

# ---- amp-run names the iteration of a wrong byte inside a repeat ----

@test "run names iteration 0 of the repeat when a send inside the body is dropped, and no iteration outside it" {
	run stages "$SMALL" two
	assert_success
	g=two/grouped.yaml
	read -r first last _ < <(repeat_of $g)
	# inside the body: mlp_down's a
	s=$(step_of $g mlp_down a | head -n 1)
	assert [ "$s" -ge "$first" ] && assert [ "$s" -le "$last" ]
	drop_send $g "$s" inside.yaml
	run amp-emit --model "$SMALL" inside.yaml -o inside.amp
	assert_success
	run --separate-stderr amp-run inside.amp
	assert_failure 1
	assert_equal "$output" ""
	assert_equal "${#stderr_lines[@]}" 1
	assert_regex "$stderr" "^amp-run: iteration 0 of repeat 'layers': tile [0-9]+, phase $(phase_of $g "$s"): "
	[[ $stderr == *"tensor '$(dst_tensor $g "$s")'"* ]] || fail "expected the tensor in: $stderr"
	# after the body: head.kv's a
	s=$(step_of $g head.kv a | head -n 1)
	assert [ "$s" -gt "$last" ]
	drop_send $g "$s" outside.yaml
	run amp-emit --model "$SMALL" outside.yaml -o outside.amp
	assert_success
	run --separate-stderr amp-run outside.amp
	assert_failure 1
	assert_regex "$stderr" "^amp-run: tile [0-9]+, phase $(phase_of $g "$s"): "
	[[ $stderr == *"tensor '$(dst_tensor $g "$s")'"* ]] || fail "expected the tensor in: $stderr"
}

@test "run refuses a program whose moving send's address step differs from its STAGE, naming tile and phase" {
	run stages "$SMALL" two
	assert_success
	g=two/grouped.yaml
	# ln1_g's home: its first tile sends its instance to ln1's owners once per iteration
	tile=$(sed -n 's/^- {name: ln1_g@home, tensor: ln1_g, .* base: \([0-9]*\), .*/\1/p' $g)
	s=$(step_of $g ln1 scale)
	phase=$(phase_of $g "$s")
	assert [ -n "$tile" ] && assert [ -n "$phase" ]
	# the surgery alone (the step kept) leaves a program that runs
	run restride two/program.amp "$tile" "$phase" 1 kept.amp
	assert_success
	assert [ "$output" -gt 0 ]
	run amp-run kept.amp
	assert_success
	assert_line --index 0 --regexp '^movement: byte-exact after every phase'
	# twice the step (iteration 1 would read the wrong instance): the rows no
	# longer decode to the STAGE's transfers, so the program is refused
	run restride two/program.amp "$tile" "$phase" 2 wrong.amp
	assert_success
	run --separate-stderr amp-run wrong.amp
	assert_failure 1
	assert_equal "$output" ""
	assert_equal "${#stderr_lines[@]}" 1
	assert_regex "$stderr" "^amp-run: 'wrong.amp': tile $tile, phase $phase: instruction [0-9]+ of its row does not match the STAGE's transfers \\(another address step per iteration\\)$"
}
