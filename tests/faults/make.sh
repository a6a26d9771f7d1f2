#!/usr/bin/env bash
# Writes the fault catalogue (run by hand from the repository root, with
# bin/ built; the files are committed): one small corrupted stage or program
# per kind of fault, each made from tiny-mlp's golden grouped stage
# (tests/golden/tiny-mlp/grouped.yaml) by one edit. verdicts.tsv says who
# must catch each and with what message; tests/bats/faults.bats checks it.
# The sweep specs (sweep-*.yaml) are written by hand.
set -euo pipefail
cd "$(dirname "$0")/../.."
G=tests/golden/tiny-mlp/grouped.yaml
F=tests/faults
B=bin

# stray-write: the last send duplicated with its destination address 0
awk '/ kind: send, / { last = NR } { line[NR] = $0 }
END { for (i = 1; i <= NR; i++) { print line[i]
	if (i == last) { d = line[i]; match(d, /dst: \[[0-9]+, [0-9]+\]/); t = substr(d, RSTART, RLENGTH)
		sub(/, [0-9]+\]$/, ", 0]", t); print substr(d, 1, RSTART - 1) t substr(d, RSTART + RLENGTH) } } }' \
	"$G" > $F/stray-write.yaml
# outside-placements: the last send duplicated into the top of SRAM, which no placement owns
awk '/ kind: send, / { last = NR } { line[NR] = $0 }
END { for (i = 1; i <= NR; i++) { print line[i]
	if (i == last) { d = line[i]; match(d, /dst: \[[0-9]+, [0-9]+\]/); t = substr(d, RSTART, RLENGTH)
		sub(/, [0-9]+\]$/, ", 586240]", t); print substr(d, 1, RSTART - 1) t substr(d, RSTART + RLENGTH) } } }' \
	"$G" > $F/outside-placements.yaml
# oversize-fragment: the first send one byte over max_transfer_bytes
awk '!done && / kind: send, len: [0-9]+, / { sub(/ len: [0-9]+,/, " len: 16593,"); done = 1 } { print }' \
	"$G" > $F/oversize-fragment.yaml
# wrong-scale: w_up's fp8 scale 0 -> 9
sed 's/^\(- {name: w_up, role: param, .* scale: \)-\{0,1\}[0-9]*}$/\19}/' "$G" > $F/wrong-scale.yaml
# wrong-eps: ln's eps 1e-06 -> 0.5
sed 's/^\(- {step: [0-9]*, compute: layernorm, .*\), eps: [0-9.e+-]*}$/\1, eps: 0.5}/' "$G" > $F/wrong-eps.yaml
# dropped-receiver: the first multicast with more than one receiver loses its last
awk '!done && / kind: send, / && match($0, /recv: \[[0-9]+,/) { n = substr($0, RSTART + 7, RLENGTH - 8) + 0
	if (n > 1) { $0 = substr($0, 1, RSTART - 1) "recv: [" n - 1 "," substr($0, RSTART + RLENGTH); done = 1 } } 1' \
	"$G" > $F/dropped-receiver.yaml
# duplicated-send: the first send twice: each byte it writes is written twice, with the same value
awk '{ print } !done && /^- \{step: 0, kind: send, / { print; done = 1 }' "$G" > $F/duplicated-send.yaml
# misread-source: the first send of mlp_up's a reads 8 bytes further in its source (every write counted, a value wrong)
s=$(sed -n 's/^- {step: \([0-9]*\), copy: [a-z]*, op: mlp_up, operand: a, .*/\1/p' "$G" | head -n 1)
awk -v s="$s" '!done && $0 ~ "^- \\{step: " s ", kind: send, " { match($0, /src: \[[0-9]+, [0-9]+\]/)
	split(substr($0, RSTART, RLENGTH), f, /[][, ]+/)
	$0 = substr($0, 1, RSTART - 1) "src: [" f[2] ", " f[3] + 8 "]" substr($0, RSTART + RLENGTH); done = 1 } 1' \
	"$G" > $F/misread-source.yaml
# shifted-address: the first send of mlp_up's a lands 32 bytes further
s=$(sed -n 's/^- {step: \([0-9]*\), copy: [a-z]*, op: mlp_up, operand: a, .*/\1/p' "$G" | head -n 1)
awk -v s="$s" '!done && $0 ~ "^- \\{step: " s ", kind: send, " { match($0, /dst: \[[0-9]+, [0-9]+\]/)
	split(substr($0, RSTART, RLENGTH), f, /[][, ]+/)
	$0 = substr($0, 1, RSTART - 1) "dst: [" f[2] ", " f[3] + 32 "]" substr($0, RSTART + RLENGTH); done = 1 } 1' \
	"$G" > $F/shifted-address.yaml
# reordered-forward: weights forwarded, then a delivery and the forward that reads it swapped
$B/amp-group --weights forward tests/golden/tiny-mlp/exchange.yaml -o $F/forwarded.tmp
awk 'function at(s, k) { if (!match(s, k ": \\[-?[0-9]+, -?[0-9]+\\]")) return ""; return substr(s, RSTART, RLENGTH) }
{ line[NR] = $0 }
END { for (i = 1; i < NR; i++) { a = line[i]; b = line[i + 1]; da = at(a, "dst"); sb = at(b, "src")
	sub(/^dst/, "", da); sub(/^src/, "", sb)
	if (a ~ / kind: send, .* recv: \[1, 0\]/ && b ~ / kind: send, / && da == sb) { line[i] = b; line[i + 1] = a; break } }
	for (i = 1; i <= NR; i++) print line[i] }' $F/forwarded.tmp > $F/reordered-forward.yaml
rm -f $F/forwarded.tmp
# zero-over-live: a zero fill of 32 bytes over x@canon on its tile 0 (live
# until the residual), added to step 15 beside its local copies
awk '{ print } !done && /^- \{step: 15, kind: local, / {
	print "- {step: 15, kind: zero, len: 32, dst: [0, 512], loops: []}"; done = 1 }' "$G" > $F/zero-over-live.yaml
# local-unowned: step 15's first local copy duplicated into the top of
# SRAM on its tile, which no placement owns
awk '{ print } !done && /^- \{step: 15, kind: local, / {
	d = $0; match(d, /dst: \[[0-9]+, [0-9]+\]/); t = substr(d, RSTART, RLENGTH)
	sub(/, [0-9]+\]$/, ", 585600]", t); print substr(d, 1, RSTART - 1) t substr(d, RSTART + RLENGTH); done = 1 }' \
	"$G" > $F/local-unowned.yaml
# placement-reserved: x@canon moved into the reserved top of SRAM
sed 's/^\(- {name: x@canon, .*addr: \)512}$/\1600000}/' "$G" > $F/placement-reserved.yaml
# address-32bit: sram_bytes raised to 2^33 in the header and x@canon moved
# past 2^32, where a program's 32-bit addresses would wrap (the header is
# not the machine file's: limits come from the machine)
sed -e 's/sram_bytes: 638976/sram_bytes: 8589934592/' -e 's/^\(- {name: x@canon, .*addr: \)512}$/\14294967808}/' \
	"$G" > $F/address-32bit.yaml
# raised-transfer-limit: max_transfer_bytes raised to 65536 in the header,
# and the first send made 51200 bytes long
sed 's/max_transfer_bytes: 16592/max_transfer_bytes: 65536/' "$G" |
	awk '!done && / kind: send, len: [0-9]+, / { sub(/ len: [0-9]+,/, " len: 51200,"); done = 1 } { print }' \
	> $F/raised-transfer-limit.yaml
# loop-bomb: the first one-fragment multicast made a family of 10^9 members
awk '!done && / kind: send, .*loops: \[\]/ { sub(/loops: \[\]/, "loops: [[1000000000, 0, 0, 0, 0]]"); done = 1 } { print }' \
	"$G" > $F/loop-bomb.yaml
# huge-batch (a model, for amp-plan): tiny-mlp with a batch of 10^9
sed 's/shape: \[2, 37, 80\]/shape: [1000000000, 37, 80]/' share/models/tiny-mlp.yaml > $F/huge-batch.model.yaml
# rows-3g: a program whose ROWS zstd frame decodes to 3 GiB (tests/bad/programs.py)
cp tests/bad/program-rows-3g.amp $F/rows-3g.amp
# model-wiring: a program embedding a model whose layernorm reads gamma and
# beta swapped, its section hash right (tests/bad/programs.py)
cp tests/bad/program-model-wiring.amp $F/model-wiring.amp
# swapped-gamma-beta: ln reads its bias as scale and its scale as bias
sed 's/in: \[x@canon, ln_s@owners, ln_b@owners\]/in: [x@canon, ln_b@owners, ln_s@owners]/' "$G" > $F/swapped-gamma-beta.yaml
# layernorm-carry: ln's layernorm replaced by a carry of its input
sed 's/compute: layernorm, op: ln, in: \[x@canon, ln_s@owners, ln_b@owners\], out: xn@canon, eps: 1e-06}/compute: carry, op: ln, in: [x@canon], out: xn@canon}/' \
	"$G" > $F/layernorm-carry.yaml
# vit-tiny's attention (tests/golden/vit-tiny): heads 4 -> 2, scale 0.25 -> 0.2, and pos_add reading emb twice
V=tests/golden/vit-tiny/grouped.yaml
sed 's/heads: 4, scale: 0.25/heads: 2, scale: 0.25/' "$V" > $F/vit-attention-heads.yaml
sed 's/heads: 4, scale: 0.25/heads: 4, scale: 0.2/' "$V" > $F/vit-attention-scale.yaml
sed 's/compute: add, op: pos_add, in: \[emb@canon, pos@owners.rows\]/compute: add, op: pos_add, in: [emb@canon, emb@canon]/' \
	"$V" > $F/vit-position-skipped.yaml
# the MAP head's attention alone: its score scale 0.25 -> 0
sed '/ op: map_attn, /s/scale: 0.25/scale: 0/' "$V" > $F/vit-map-scale.yaml
# the layers' gelu reading an operand the model's op does not have
sed 's/^- {step: 39, compute: gelu, op: act, in: \[up@canon\], out: g@canon}$/- {step: 39, compute: gelu, op: act, in: [up@canon, up@canon], out: g@canon}/' \
	"$V" > $F/vit-gelu-extra-operand.yaml
# stage-rows-mismatch: a program whose STAGE moves one destination by 32
# bytes, its hash made to match (tests/bad/programs.py)
cp tests/bad/program-stage-address.amp $F/stage-rows-mismatch.amp
# a compute step's fields, which rounding noise can hide (run_check_fields):
# tiny-mlp's reduction without its bias, vit-tiny's matmul without its bias
# and its loop's last carry reading the block's first residual
sed 's/in: \[h.partial@mlp_up.reduce, b_up@mlp_up.bias\]/in: [h.partial@mlp_up.reduce]/' "$G" > $F/reduce-bias-dropped.yaml
sed 's/in: \[h1.fp8@qkv.a, w_qkv@qkv.b, b_qkv@qkv.bias\]/in: [h1.fp8@qkv.a, w_qkv@qkv.b]/' "$V" > $F/vit-bias-dropped.yaml
sed 's/^\(- {step: 49, compute: carry, op: layers, in: \)\[r2@canon\]/\1[r1@canon]/' "$V" > $F/vit-carry-skipped.yaml
# and tiny-prefill's (lowered here: no golden), one field each: the
# matmuls' operands, the cast's, every attribute and the GEMM record's
# shape and format
P=$F/prefill.tmp
$B/amp-plan tests/models/tiny-prefill.yaml | $B/amp-compose | $B/amp-expand | $B/amp-exchange | $B/amp-group > $P
sed 's/in: \[xn.fp8@q.a, w_q@q.b, b_q@q.bias\]/in: [xn.fp8@q.a, w_q@q.b]/' $P > $F/prefill-bias-dropped.yaml
sed 's/in: \[a.fp8@o.a, w_o@o.b\]/in: [a.fp8@o.a, w_o@o.b, b_q@q.bias]/' $P > $F/prefill-extra-operand.yaml
sed 's/in: \[xn.fp8@q.a, w_kv@kv.b, b_kv@kv.bias\]/in: [xn.fp8@q.a, w_kv@kv.b, b_q@q.bias]/' $P > $F/prefill-bias-swapped.yaml
sed 's/in: \[hn.fp8@gate.a, w_up@up.b\]/in: [hn.fp8@gate.a, w_gate@gate.b]/' $P > $F/prefill-b-swapped.yaml
sed 's/compute: cast, op: gate, in: \[hn@canon\]/compute: cast, op: gate, in: [h@canon]/' $P > $F/prefill-cast-source.yaml
sed '/compute: rmsnorm, op: n1,/s/eps: 1e-06}/eps: 1e-05}/' $P > $F/prefill-rmsnorm-eps.yaml
sed '/compute: rope, op: rq,/s/heads: 4,/heads: 2,/' $P > $F/prefill-rope-heads.yaml
sed '/compute: rope, op: rk,/s/head_dim: 16,/head_dim: 8,/' $P > $F/prefill-rope-head-dim.yaml
sed '/compute: rope, op: rq,/s/theta: 1e+06}/theta: 10000}/' $P > $F/prefill-rope-theta.yaml
sed '/compute: attention,/s/kv_heads: 2/kv_heads: 4/' $P > $F/prefill-kv-heads.yaml
sed '/compute: attention,/s/causal: true, //' $P > $F/prefill-not-causal.yaml
sed '/compute: attention,/s/chunks: 2}/chunks: 4}/' $P > $F/prefill-chunks.yaml
sed '/compute: append,/s/first: 0}/first: 3}/' $P > $F/prefill-append-first.yaml
sed '/^- {op: q, /s/ m: 16,/ m: 8,/' $P > $F/prefill-gemm-m.yaml
sed '/^- {op: q, /s/ k: 64,/ k: 32,/' $P > $F/prefill-gemm-k.yaml
sed '/^- {op: q, /s/ n: 64,/ n: 32,/' $P > $F/prefill-gemm-n.yaml
sed '/^- {op: q, /s/format: fp8/format: fp16/' $P > $F/prefill-gemm-format.yaml
for f in $(ls $F/*.yaml | grep -v -e /sweep- -e '\.model\.yaml$'); do
	cmp -s "$G" "$f" || cmp -s "$V" "$f" || cmp -s "$P" "$f" && { echo "make.sh: $f is unchanged" >&2; exit 1; }
done
rm -f $P
echo "wrote $(ls $F/*.yaml $F/*.amp | wc -l) faults"
