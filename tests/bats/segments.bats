#!/usr/bin/env bats
# Causal attention in segments (formats/plan.md, "Causal segments"): a
# prefill's causal attention over its own tokens cut into segments of
# query rows, each over the keys it sees, on tiles of its own; the
# segments' results copied each into its part of the output's owners
# ("Windows": a copy writes the part of its destination its source's
# window holds). Planned when faster, run byte-exact; stages whose parts
# overlap are refused.

bats_require_minimum_version 1.5.0
load common

M=$MODELS/smollm2-360m-1layer-prefill.yaml

# byte_exact MODEL PLAN: PLAN lowered, emitted and run: byte-exact after
# every phase, its 19 ops checked
byte_exact() {
	amp-compose "$2" | amp-expand | amp-exchange | amp-group > g.yaml
	amp-emit --model "$1" g.yaml -o p.amp
	run --separate-stderr amp-run --model "$1" p.amp
	assert_success
	assert_line --index 0 --regexp '^movement: byte-exact after every phase \([0-9]+ phases\)$'
	assert_line --index 2 --regexp '^per op: 19 ops checked after every run'
}

@test "segments: a prefill's causal attention runs in segments when that is faster, and runs byte-exact" {
	amp-plan "$M" -o p.yaml
	# two attention steps and two merges, each segment's q rows a window
	run grep -c '^- {step: [0-9]*, compute: attention, op: attn, ' p.yaml
	assert_output 2
	run grep -c '^- {step: [0-9]*, compute: merge, op: attn, ' p.yaml
	assert_output 2
	run grep -c '^- {name: q@attn.q.2, tensor: q, .*offset: \[0, 256, 0\], extent: \[1, 256, 960\]}$' p.yaml
	assert_output 1
	# the second segment's keys: all 512 it sees, the first's 256
	run grep -c '^- {name: kv@attn.k, tensor: kv, .*offset: \[0, 0, 0\], extent: \[1, 256, 640\]}$' p.yaml
	assert_output 1
	# each segment's results into its part of the owners (as o reads them:
	# their fused fp8 cast, formats/plan.md)
	run grep -c '^- {step: [0-9]*, copy: output, op: attn, operand: out, map: [a-z-]*, src: a.fp8@attn.out[.0-9]*, dst: a.fp8@canon}$' p.yaml
	assert_output 2
	# faster than one grid, by the capture
	[ "$(plan_cycles "$M")" -lt "$(plan_cycles "$M" --no-segments)" ]
	byte_exact "$M" p.yaml
}

@test "segments: --no-segments plans one grid" {
	amp-plan --no-segments "$M" -o p.yaml
	run grep -c 'compute: attention' p.yaml
	assert_output 1
}

@test "segments: Qwen's prefill runs in 4, heads outermost, merged by rows, faster than one grid, byte-exact" {
	[ -z "${AMP_SAN:-}" ] || skip "planning Qwen2.5-0.5B's prefill four times under the sanitizers: covered by the plain run"
	Q=$MODELS/qwen2.5-0.5b-1layer-prefill.yaml
	amp-plan "$Q" -o q.yaml
	run grep -c 'compute: attention' q.yaml
	assert_output 4
	# a key block of a kv head reaches its 7 q heads' 5 query blocks in one multicast (every 8th tile of 280)
	run grep -c '^- {name: kv@attn.k.4, tensor: kv, .*split: \[1, 8, 2\], block: \[1, 64, 128\], .*stride: \[560, 1, 280\], rep: \[35\], rstride: \[8\]}$' q.yaml
	assert_output 1
	# the last segment's 8 partials merged by rows: 32 blocks of 4 rows a head, block r on the head's r-th tile
	run grep -c '^- {name: a.partial.4@attn.merge, .*split: \[1, 1, 32, 14\], block: \[8, 1, 4, 66\], .*stride: \[0, 560, 1, 40\]' q.yaml
	assert_output 1
	byte_exact "$Q" q.yaml
	# faster than one grid (g.yaml: q.yaml as byte_exact lowered it)
	[ "$(amp-capture g.yaml | jq .summary.total_cycles)" -lt "$(plan_cycles "$Q" --no-segments)" ]
}

@test "segments: a stage whose copies write overlapping parts of a placement is refused at the step" {
	amp-plan "$M" -o p.yaml
	# the second segment's results moved onto the first's rows
	sed 's/^\(- {name: a.fp8@attn.out.2, .*\)offset: \[0, 256, 0\]/\1offset: [0, 0, 0]/' p.yaml > bad.yaml
	! cmp -s p.yaml bad.yaml
	run --separate-stderr amp-compose bad.yaml
	assert_failure 1
	assert_regex "$stderr" "bad.yaml: step [0-9]+ writes 'a.fp8@canon' a second time"
	# the first segment's results copied twice
	sed 's/^\(- {step: [0-9]*, copy: output, op: attn, operand: out, map: identity, src: \)a.fp8@attn.out.2,/\1a.fp8@attn.out,/' \
		p.yaml > bad2.yaml
	! cmp -s p.yaml bad2.yaml
	run --separate-stderr amp-expand bad2.yaml
	assert_failure 1
	assert_regex "$stderr" "step [0-9]+ writes 'a.fp8@canon' a second time"
}

# faulty FILE: the segmented plan's grouped stage with one of its second
# segment's result copies (the output copy of a.fp8@attn.out.2) edited by SED
faulty() {
	amp-plan "$M" | amp-compose | amp-expand | amp-exchange | amp-group > g.yaml
	local s
	s=$(sed -n 's/^- {step: \([0-9]*\), copy: output, op: attn, operand: out, map: [a-z-]*, src: a.fp8@attn.out.2, dst: a.fp8@canon}$/\1/p' g.yaml)
	[ -n "$s" ] || fail "no output copy of a.fp8@attn.out.2 in g.yaml"
	local line
	line=$(grep -n "^- {step: $s, kind: send," g.yaml | head -1 | cut -d: -f1)
	sed "${line}$2" g.yaml > "$1"
	amp-emit --model "$M" "$1" -o "$1.amp"
	echo "$s"
}

@test "segments: amp-run names a result copy that writes outside the part its source holds, or leaves its part unwritten" {
	local s
	# a receive moved to a tile whose row is the first segment's
	s=$(faulty f1.yaml 's/dst: \[\([0-9]*\), /dst: [101, /')
	run --separate-stderr amp-run --model "$M" f1.yaml.amp
	assert_failure 1
	assert_regex "$stderr" "^amp-run: iteration 0 of repeat 'layers': tile 101, phase [0-9]+: tensor 'a.fp8' \\(placement 'a.fp8@canon'\\) offset [0-9]+: written by step $s, outside the part of the shard its source's window holds\$"
	# a send of the copy dropped: its bytes missing
	s=$(faulty f2.yaml 'd')
	run --separate-stderr amp-run --model "$M" f2.yaml.amp
	assert_failure 1
	assert_regex "$stderr" "tensor 'a.fp8' \\(placement 'a.fp8@canon'\\) bytes [0-9]+\\.\\.[0-9]+: written 0 times \\(missing\\) by step $s"
}
