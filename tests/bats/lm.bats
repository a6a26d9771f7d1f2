#!/usr/bin/env bats
# A language model's ends (model format 5): tests/models/tiny-lm-prefill.yaml
# and tiny-lm-decode.yaml embed int32 token ids on the host from a tied
# table [64, 512] that their logits' matmul reads on the tiles. Planned
# with the table's one home in the matmul's panels; run by amp-run
# --prefill and --generate, the reference's greedy tokens fed to both;
# ids outside the table, a --generate without logits and the malformed
# models tests/bad/model-embed-*.yaml are refused.

bats_require_minimum_version 1.5.0
load common

PRE=$ROOT/tests/models/tiny-lm-prefill.yaml
DEC=$ROOT/tests/models/tiny-lm-decode.yaml
PRE2=$ROOT/tests/models/tiny-lm2-prefill.yaml
DEC2=$ROOT/tests/models/tiny-lm2-decode.yaml

# ids_npy FILE A B: a [2, 1, 1] '<i4' .npy holding A and B (below 65536)
ids_npy() {
	local v
	byte() { printf "\\$(printf '%03o' "$1")"; }
	{
		printf '\223NUMPY\001\000\166\000'
		printf "%-117s\n" "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 1, 1), }"
		for v in "$2" "$3"; do
			byte $((v & 255)); byte $(((v >> 8) & 255)); byte 0; byte 0
		done
	} > "$1"
}

@test "lm: the embed runs on the host from the tied table, whose one home is the logits' panels" {
	amp-plan "$DEC" -o p.yaml
	run grep -c '^- {op: emb_in, host: embed, x: tok, table: emb, transposed: true, out: x}$' p.yaml
	assert_output 1
	run grep -c '^- {name: x, role: input, shape: \[2, 1, 64\], dtype: fp16}$' p.yaml
	assert_output 1
	run grep -c '^- {name: emb@home, tensor: emb, layout: transposed-right, ' p.yaml
	assert_output 1
	run grep -c '^- {op: lm_head, a: zn.prenorm, b: emb, out: logits, m: 2, k: 64, n: 512, format: fp8, ' p.yaml
	assert_output 1
	# a table no op on the tiles reads has no placement
	sed 's/b: emb, out: logits/b: w_o2, out: logits/; s/^  gf: /  w_o2: {shape: [64, 512], dtype: fp8}\n  gf: /' \
		"$DEC" > untied.yaml
	amp-plan untied.yaml -o u.yaml
	run grep -c 'tensor: emb,' u.yaml
	assert_output 0
}

@test "lm: a prefill and 4 generated tokens run byte-exact; logits within cosine 0.99; the greedy tokens agree where decisive" {
	program "$PRE" pre.amp
	program "$DEC" dec.amp
	run --separate-stderr amp-run dec.amp --prefill pre.amp --generate 4
	assert_success
	assert_line --index 3 --regexp '^run 0 \(tiny-lm-prefill, position 0\): output logits: cosine 0\.99'
	assert_line --index 8 --regexp '^run 4 \(tiny-lm-decode, position 11\): output logits: cosine 0\.99'
	# each run's greedy token of each sequence: 2 x 5; random weights give
	# flat logits, so only the steps where the reference's margin is
	# decisive must agree, and all of them do
	local first=$output
	assert_line --regexp '^next token: the machine.s greedy token is the reference.s for [0-9]+ of 10 \([0-9.]+%\); at decisive steps \(.*\) ([1-9][0-9]*) of \1 \(100\.0%\)$'
	run grep -c '^generate: sequence [01], \(machine  \|reference\): [0-9]* [0-9]* [0-9]* [0-9]* [0-9]*$' \
		<(printf '%s\n' "$output")
	assert_output 4
	# the same run twice: the same tokens
	assert_equal "$(amp-run dec.amp --prefill pre.amp --generate 4 | grep '^generate')" \
		"$(printf '%s\n' "$first" | grep '^generate')"
}

@test "lm: --generate replaces the made token ids from the second run on, and only them" {
	program "$DEC" dec.amp
	local gen steps
	gen=$(amp-run dec.amp --generate 3 | grep '^run ')
	steps=$(amp-run dec.amp --steps 3 | grep '^run ')
	# the first run's ids are the seed's in both; later runs read the reference's greedy tokens
	assert_equal "$(sed -n 1p <<< "$gen")" "$(sed -n 1p <<< "$steps")"
	[ "$(sed -n 2p <<< "$gen")" != "$(sed -n 2p <<< "$steps")" ] || fail "run 1 read the same ids: $gen"
}

@test "lm: token ids outside the table are refused by amp-run" {
	program "$DEC" dec.amp
	mkdir -p d
	ids_npy d/tok.npy 3 512
	run --separate-stderr amp-run dec.amp --data d
	assert_failure 1
	assert_equal "$output" ""
	assert_equal "$stderr" "amp-run: ids 'tok' hold 512 at [1, 0]: table 'emb' has rows 0 to 511 (embed 'emb_in')"
}

@test "lm: --generate needs a program that embeds token ids and outputs logits" {
	program "$ROOT/tests/models/tiny-decode.yaml" plain.amp
	run --separate-stderr amp-run plain.amp --generate 2
	assert_failure 1
	assert_equal "$stderr" "amp-run: --generate needs a program of one token per sequence that embeds token ids and outputs logits over their vocabulary ('plain.amp' does not)"
	program "$PRE" pre.amp
	run --separate-stderr amp-run pre.amp --generate 2
	assert_failure 1
}

@test "lm: malformed embeds are refused at the key" {
	plan_rejects "$BAD/model-embed-ids.yaml" 23:36 "embed 'emb_in': ids 'tok' must be an int32 input [batch, tokens, 1]" \
		"$BAD/model-embed-ids.yaml"
	plan_rejects "$BAD/model-embed-table.yaml" 23:48 \
		"embed 'emb_in': table 'emb' must be an fp16 or fp8 parameter [vocab, features] (or [features, vocab], transposed)" \
		"$BAD/model-embed-table.yaml"
	plan_rejects "$BAD/model-embed-repeat.yaml" 15:9 "embed 'e': an embed runs on the host, outside every repeat" \
		"$BAD/model-embed-repeat.yaml"
	plan_rejects "$BAD/model-embed-version.yaml" 20:10 "op 'embed' needs amp-model: 5 (this file is version 4)" \
		"$BAD/model-embed-version.yaml"
}

@test "lm: every malformed embed model in tests/bad is checked by this suite" {
	every_bad_checked 4 '$BAD/%s' "$BAD"/model-embed-*.yaml
}

@test "lm: a version 7 stage with an embed is refused at the host record" {
	amp-plan "$DEC" -o p.yaml
	# keep the state out of it: the host record is read first
	sed 's/^version: 17$/version: 7/; /role: state/d' p.yaml > p7.yaml
	run --separate-stderr amp-compose p7.yaml
	assert_failure 1
	[[ $stderr =~ host\ \'embed\'\ needs\ version\ 8\ \(this\ file\ is\ version\ 7\) ]] || fail "unexpected: $stderr"
}

@test "lm: the prefill's logits are its last position's, computed where that row lives" {
	amp-plan "$PRE" -o p.yaml
	run grep -c '^- {name: logits, role: output, shape: \[2, 1, 512\], dtype: fp16}$' p.yaml
	assert_output 1
	run grep -c '^- {step: [0-9]*, compute: last, op: next, in: \[z@canon\], out: zl@last}$' p.yaml
	assert_output 1
}

@test "lm: two layers in a repeat, each with its own cache, after a prefill per sequence, run byte-exact" {
	program "$PRE2" pre2.amp
	program "$DEC2" dec2.amp
	# one state, stacked over the repeat's 2 layers
	run grep -c '^- {name: cache, role: state, shape: \[2, 32, 64\], dtype: fp16, count: 2}$' dec2.amp.g
	assert_output 1
	run --separate-stderr amp-run dec2.amp --prefill pre2.amp --generate 2
	assert_success
	# the prefill (batch 1) once per sequence, its states stacked, then the decode steps
	assert_line --index 3 --regexp '^run 0 \(tiny-lm2-prefill, position 0\): output logits: '
	assert_line --index 4 --regexp '^run 1 \(tiny-lm2-prefill, position 0\): output logits: '
	assert_line --index 5 --regexp '^run 2 \(tiny-lm2-decode, position 8\): output logits: '
	assert_line --index 6 --regexp '^run 3 \(tiny-lm2-decode, position 9\): state cache: cosine 0\.99'
	cosines_at_least 0.99
}

@test "lm: the decode step's norms run over column blocks, through their rows' sums of squares" {
	amp-plan --no-fold "$DEC" -o p.yaml
	# each norm: sumsq on the wide tiles, the sums to every tile of the row, then rmsnorm with them
	run grep -c '^- {step: [0-9]*, compute: sumsq, op: n1, in: \[x@canon\], out: n1.sumsq@part}$' p.yaml
	assert_output 1
	run grep -c '^- {step: [0-9]*, copy: reduction, op: n1, operand: partial, map: [a-z-]*, src: n1.sumsq@part, dst: n1.sumsq@rows}$' p.yaml
	assert_output 1
	run grep -c '^- {step: [0-9]*, compute: rmsnorm, op: n1, in: \[x@canon, g1@home, n1.sumsq@rows\], out: xn.fp8@canon, eps: 1e-06}$' p.yaml
	assert_output 1
	# its scale stays home, cut like the rows' columns beside each row
	run grep -c '^- {name: g1@home, tensor: g1, layout: row-major, split: \[4\], block: \[16\], base: 0, stride: \[1\], rep: \[2\], rstride: \[4\]}$' p.yaml
	assert_output 1
}

@test "lm: the decode step's norms fold into their GEMMs' reductions, which scale each row by its sums of squares" {
	amp-plan "$DEC" -o p.yaml
	# n1: its rows' sums and x times its scale, nothing gathered before q and kv
	run grep -c '^- {step: [0-9]*, compute: sumsq, op: n1, in: \[x@canon\], out: n1.sumsq@part}$' p.yaml
	assert_output 1
	run grep -c '^- {step: [0-9]*, compute: mul, op: n1, in: \[x@canon, g1@home\], out: xn.prenorm@canon}$' p.yaml
	assert_output 1
	run grep -c 'compute: rmsnorm' p.yaml
	assert_output 0
	# q and kv read x times the scale, cast to fp8, and cut K; their reductions read the sums beside their rows
	run grep -c '^- {op: q, a: xn.prenorm, b: w_q, bias: b_q, out: q0, m: 2, k: 64, n: 64, format: fp8, grid: \[1, [2-9]' p.yaml
	assert_output 1
	run grep -c '^- {step: [0-9]*, compute: reduce, op: q, in: \[q0.partial@q.reduce, b_q@q.bias, n1.sumsq@q.rows\], out: q0@q.out, eps: 1e-06}$' p.yaml
	assert_output 1
	run grep -c '^- {step: [0-9]*, copy: reduction, op: n1, operand: partial, map: [a-z-]*, src: n1.sumsq@part, dst: n1.sumsq@q.rows}$' p.yaml
	assert_output 1
	# the sums move before the product, in the phase that carries a
	local copy mm
	copy=$(sed -n 's/^- {step: \([0-9]*\), copy: reduction, op: n1,.*/\1/p' p.yaml | sort -n | tail -1)
	mm=$(sed -n 's/^- {step: \([0-9]*\), compute: matmul, op: q,.*/\1/p' p.yaml)
	[ "$copy" -lt "$mm" ] || fail "the sums move at step $copy, after q's product at $mm"
	# no placement of the norm's own result
	run grep -c '^- {name: xn@' p.yaml
	assert_output 0
	# the run: byte-exact, every op checked (the norm against x times its scale)
	program "$DEC" dec.amp
	run amp-run dec.amp
	assert_success
	assert_line --regexp '^per op: 1[0-9] ops checked'
	cosines_at_least 0.99
}

@test "lm: amp-emit and amp-run refuse a folded norm that lost its rows' scale, its eps or its sums" {
	amp-plan "$DEC" | amp-compose | amp-expand | amp-exchange | amp-group > g.yaml
	local edit what
	for edit in 's/, n1.sumsq@q.rows\], out: q0@q.out, eps: 1e-06}/], out: q0@q.out}/' \
		's/n1.sumsq@q.rows\], out: q0@q.out, eps: 1e-06}/n1.sumsq@q.rows], out: q0@q.out, eps: 1e-05}/' \
		's/in: \[x@canon, g1@home\], out: xn.prenorm@canon}/in: [x@canon, g2@home], out: xn.prenorm@canon}/' \
		's/\[g.partial@gate.reduce, n2.sumsq@gate.rows\]/[g.partial@gate.reduce, n1.sumsq@q.rows]/'; do
		sed "$edit" g.yaml > m.yaml
		run cmp -s g.yaml m.yaml
		assert_failure
		run --separate-stderr amp-emit --model "$DEC" -o m.amp m.yaml
		if [ "$status" = 0 ]; then run --separate-stderr amp-run m.amp; fi
		assert_failure 1
		[[ $stderr == *"op 'q'"* || $stderr == *"op 'n1'"* || $stderr == *"op 'gate'"* ]] ||
			fail "$edit: unexpected: $stderr"
	done
	# --no-fold: the norms whole again, and the plan says so
	amp-plan --no-fold "$DEC" -o p.yaml
	run grep -c 'prenorm' p.yaml
	assert_output 0
}

# late.yaml: the decode step with o's cast pinned late, so that its
# attention writes fp16 as before version 17 (no fused cast: formats/plan.md)
late() {
	{ cat "$DEC"; printf 'pins:\n  o: {cast: late}\n'; } > late.yaml
}

@test "lm: a version 12 stage with a folded norm is refused at the step that folds it" {
	late
	amp-plan late.yaml -o p.yaml
	sed 's/^version: 17$/version: 12/' p.yaml > p12.yaml
	run --separate-stderr amp-compose p12.yaml
	assert_failure 1
	[[ $stderr =~ ^amp-compose:\ p12.yaml:[0-9]+:[0-9]+:\ a\ folded\ rmsnorm\ \(a\ mul\ by\ a\ vector\)\ needs\ version\ 13\ \(this\ file\ is\ version\ 12\)$ ]] ||
		fail "unexpected: $stderr"
	# and the plan of --no-fold is read at version 12 too (its attention partial in fp32, as then)
	amp-plan --no-fold late.yaml | sed 's/^version: 17$/version: 12/; s/^\(- {name: a.partial, role: partial, .*dtype: \)fp16}$/\1fp32}/' |
		amp-compose > /dev/null
}

@test "lm: a version 9 stage with a norm over column blocks is refused at sumsq" {
	amp-plan "$DEC" -o p.yaml
	sed 's/^version: 17$/version: 9/' p.yaml > p9.yaml
	run --separate-stderr amp-compose p9.yaml
	assert_failure 1
	[[ $stderr =~ ^amp-compose:\ p9.yaml:[0-9]+:[0-9]+:\ compute\ \'sumsq\'\ needs\ version\ 10\ \(this\ file\ is\ version\ 9\)$ ]] ||
		fail "unexpected: $stderr"
}

@test "lm: amp-run refuses a norm over column blocks that drops its rows' sums, or reads sums its op did not make" {
	amp-plan --no-fold "$DEC" | amp-compose | amp-expand | amp-exchange | amp-group > g.yaml
	# without the sums each tile normalises its own 16 columns: wrong, and the op check says so
	sed 's/in: \[x@canon, g1@home, n1.sumsq@rows\]/in: [x@canon, g1@home]/' g.yaml > nosums.yaml
	run cmp -s g.yaml nosums.yaml
	assert_failure
	amp-emit --model "$DEC" nosums.yaml -o nosums.amp
	run --separate-stderr amp-run nosums.amp
	assert_failure 1
	[[ $stderr == *"op 'n1': the machine's result differs from the FP32 reference"* ]] || fail "unexpected: $stderr"
	# n2's sums read by n1: refused before it runs
	sed 's/in: \[x@canon, g1@home, n1.sumsq@rows\]/in: [x@canon, g1@home, n2.sumsq@rows]/' g.yaml > other.yaml
	run cmp -s g.yaml other.yaml
	assert_failure
	run --separate-stderr amp-emit --model "$DEC" other.yaml -o other.amp
	if [ "$status" = 0 ]; then run --separate-stderr amp-run other.amp; fi
	assert_failure 1
	[[ $stderr == *"sums of squares, which no sumsq step of the op makes"* || $stderr == *"before it is written"* ]] ||
		fail "unexpected: $stderr"
}

@test "lm: the decode step's ropes rotate column blocks of whole heads, the positions beside each row's blocks" {
	amp-plan "$DEC" -o p.yaml
	# q's reduction writes q0 on its canonical owners (their blocks are its
	# own, formats/plan.md), whole heads of 16 on each of 4 tiles a row
	run grep -c '^- {name: q0@q.out, tensor: q0, layout: row-major, split: \[2, 1, 4\], block: \[1, 1, 16\], base: 0, stride: \[4, 1, 1\], rep: \[\], rstride: \[\]}$' p.yaml
	assert_output 1
	run grep -c '^- {step: [0-9]*, copy: activation, op: rq, operand: positions, map: [a-z-]*, src: pos@canon, dst: pos@rows}$' p.yaml
	assert_output 1
	run grep -c '^- {step: [0-9]*, compute: rope, op: rq, in: \[q0@q.out, pos@rows\], out: q@canon, heads: 4, head_dim: 16, theta: 1e+06}$' p.yaml
	assert_output 1
	# and a step of it at a later position runs byte-exact, every op within its tolerance
	program "$DEC" dec.amp
	run --separate-stderr amp-run dec.amp --position 7
	assert_success
	assert_line --index 0 --regexp '^movement: byte-exact after every phase \([0-9]+ phases\)$'
}

@test "lm: attention's key blocks leave fp16 partials, which a version 13 stage may not hold" {
	# 4 key blocks (by default one block of every key: the fewest that fit
	# beat 4, with the cache's home in reach)
	{ cat "$DEC"; printf 'pins:\n  o: {cast: late}\n  attn: {blocks: [1, 4]}\n'; } > late.yaml
	amp-plan late.yaml -o p.yaml
	# the partial: fp16, m, l and the sums over l for each chunk of each head
	run grep -c '^- {name: a.partial, role: partial, shape: \[[0-9]*, 2, 1, [0-9]*\], dtype: fp16}$' p.yaml
	assert_output 1
	sed 's/^version: 17$/version: 13/' p.yaml > p13.yaml
	run --separate-stderr amp-compose p13.yaml
	assert_failure 1
	[[ $stderr =~ ^amp-compose:\ p13.yaml:[0-9]+:[0-9]+:\ an\ fp16\ attention\ partial\ \(\'a.partial@attn.partial\'\)\ needs\ version\ 14\ \(this\ file\ is\ version\ 13\)$ ]] ||
		fail "unexpected: $stderr"
	# the same plan with fp32 partials (version 13's meaning: undivided sums) runs byte-exact too
	sed 's/^\(- {name: a.partial, role: partial, shape: \[.*\], dtype: \)fp16}$/\1fp32}/; s/^version: 17$/version: 13/' p.yaml > p32.yaml
	run grep -c 'a.partial, role: partial, .*fp32' p32.yaml
	assert_output 1
	amp-compose p32.yaml | amp-expand | amp-exchange | amp-group -o g32.yaml
	amp-emit --model late.yaml -o dec32.amp g32.yaml
	run amp-run dec32.amp
	assert_success
	assert_line --regexp '^per op: 1[0-9] ops checked'
	program "$DEC" dec.amp
	run amp-run dec.amp
	assert_success
	assert_line --regexp '^per op: 1[0-9] ops checked'
}

@test "lm: next tokens are judged by the reference's margin: plain and decisive agreement, the first divergence, where sequences part" {
	program "$PRE" pre.amp
	program "$DEC" dec.amp
	# seed 6: random weights, flat logits, disagreements, none decisive
	run --separate-stderr amp-run --seed 6 dec.amp --prefill pre.amp --generate 12
	assert_success
	assert_line --regexp "^next token: the machine's greedy token is the reference's for (1[0-9]|2[0-5]) of 26 \([0-9.]+%\); at decisive steps \(the reference's margin over 4 x the RMS of machine - reference\) ([1-9][0-9]*) of \2 \(100\.0%\)$"
	assert_line --regexp "^next token: first divergence at sequence 0, token 1: machine ([0-9]+), reference ([0-9]+); the reference's margin [0-9.e-]+, 0\\.[0-9]+ x the RMS [0-9.e-]+ of machine - reference \\(not decisive\\)$"
	local m r all=$output mt rt
	m=$(printf '%s\n' "$all" | sed -n 's/^next token: first divergence.*: machine \([0-9]*\), reference.*/\1/p')
	r=$(printf '%s\n' "$all" | sed -n 's/^next token: first divergence.*, reference \([0-9]*\);.*/\1/p')
	# the generated sequences say the same: sequence 0's tokens 0 agree, its tokens 1 are m and r
	mt=$(printf '%s\n' "$all" | sed -n 's/^generate: sequence 0, machine  : \([0-9]*\) \([0-9]*\) .*/\1 \2/p')
	rt=$(printf '%s\n' "$all" | sed -n 's/^generate: sequence 0, reference: \([0-9]*\) \([0-9]*\) .*/\1 \2/p')
	assert_equal "${mt#* }" "$m"
	assert_equal "${rt#* }" "$r"
	assert_equal "${mt% *}" "${rt% *}"
	[ "$m" != "$r" ] || fail "the divergence names one token twice: $m"
	run grep -c '^generate: sequence 0 parts at token 1: ' <(printf '%s\n' "$all")
	assert_output 1
	# a sequence that never parts says nothing more
	run grep -c '^generate: sequence [0-9]* parts at ' <(amp-run --seed 2 dec.amp --prefill pre.amp --generate 4)
	assert_output 0
	run amp-run --seed 2 dec.amp --prefill pre.amp --generate 4
	assert_line 'next token: no divergence'
}
