/* A random ViT-shaped model for the randomized tests: optional patchify
 * (with or without a class token slot) or a plain input, the embedding
 * matmul, an optional position table, a repeat of 1 to 3 encoder layers
 * (layernorm, fused qkv, attention, projection, residual, MLP, residual)
 * with per-iteration parameters, a post-layernorm and optionally a MAP
 * head (broadcast probe, q and kv projections, attention over q and kv).
 * Weights fp8 or fp16 at random; grids are the planner's. Exercises
 * placement windows (q, k, v of a fused tensor), multicast of keys and
 * values, stacked parameters and the carried activation; half the models
 * pin key blocks for their attention (the online-softmax merge), and
 * every model pins its attention's keys and values relayed or direct.
 * Half the patchified models turn q and k by their patch grid (a 2D
 * rope, pairs interleaved or half, heads of a multiple of 4), and half of
 * all scale each residual branch per channel (LayerScale); those choices
 * come from the model's other draws, so the shared stream, and with it
 * every other random model, stays as it was. */
#ifndef AMP_VITGEN_H
#define AMP_VITGEN_H

#include <stdio.h>
#include <string.h>

#include "t.h"

static void vit_model(const char *path, char *desc, size_t dn)
{
	int64_t B = t_pick(1, 2), heads = t_pick(1, 4), hd = t_pick(1, 24), D = heads * hd;
	int64_t M = t_pick(4, 80), count = t_pick(1, 3), T, P;
	int patchify = t_rnd() % 2, pos = t_rnd() % 2, map = t_rnd() % 2;
	int64_t p = t_pick(1, 4), gh = t_pick(1, 5), gw = t_pick(1, 4), cls = t_rnd() % 2;
	const char *w[4];
	for (int i = 0; i < 4; i++)
		w[i] = t_rnd() % 3 ? "fp8" : "fp16";
	uint64_t own = (uint64_t)(B + 3 * heads + 5 * hd + 7 * M + 11 * count + 13 * gh + 17 * gw + 19 * p + 23 * cls) *
		       0x9E3779B97F4A7C15u;
	own ^= own >> 29;
	int rope2d = patchify && (own & 1), ls = (own >> 1) & 1, half = (own >> 2) & 1;
	if (rope2d)                     /* each half of a head: whole pairs */
		hd = (hd + 3) / 4 * 4, D = heads * hd;
	const char *ver = rope2d || ls ? "9" : "2";
	FILE *f = fopen(path, "w");

	if (patchify) {
		T = cls + gh * gw, P = 3 * p * p;
		fprintf(f, "amp-model: %s\nname: vit\ninputs:\n  image: {shape: [%lld, 3, %lld, %lld], dtype: fp16}\n",
			ver, (long long)B, (long long)(gh * p + t_pick(0, p - 1)), (long long)(gw * p + t_pick(0, p - 1)));
	} else {
		T = t_pick(1, 30), P = t_pick(1, 40);
		fprintf(f, "amp-model: %s\nname: vit\ninputs:\n  x: {shape: [%lld, %lld, %lld], dtype: fp16}\n",
			ver, (long long)B, (long long)T, (long long)P);
	}
	fprintf(f, "params:\n  w_e: {shape: [%lld, %lld], dtype: %s}\n  b_e: {shape: [%lld], dtype: fp16}\n",
		(long long)P, (long long)D, w[0], (long long)D);
	if (pos)
		fprintf(f, "  pos: {shape: [%lld, %lld], dtype: fp16}\n", (long long)T, (long long)D);
	fprintf(f, "  pg: {shape: [%lld], dtype: fp16}\n  pb: {shape: [%lld], dtype: fp16}\n",
		(long long)D, (long long)D);
	if (map)
		fprintf(f, "  probe: {shape: [1, %lld], dtype: fp16}\n  mq: {shape: [%lld, %lld], dtype: %s}\n"
			"  mkv: {shape: [%lld, %lld], dtype: %s}\n  mbkv: {shape: [%lld], dtype: fp16}\n",
			(long long)D, (long long)D, (long long)D, w[3], (long long)D, (long long)(2 * D), w[3],
			(long long)(2 * D));
	fprintf(f, "ops:\n");
	if (patchify)
		fprintf(f, "  - {op: patchify, name: pf, x: image, patch: %lld, class_tokens: %lld, out: x}\n",
			(long long)p, (long long)cls);
	fprintf(f, "  - {op: matmul, name: embed, a: x, b: w_e, bias: b_e, out: e}\n");
	if (pos)
		fprintf(f, "  - {op: add, name: pos_add, a: e, b: pos, out: e2}\n");
	fprintf(f, "  - repeat: layers\n    count: %lld\n    in: %s\n    carry: h\n    params:\n"
		"      g1: {shape: [%lld], dtype: fp16}\n      o1: {shape: [%lld], dtype: fp16}\n"
		"      wqkv: {shape: [%lld, %lld], dtype: %s}\n      bqkv: {shape: [%lld], dtype: fp16}\n"
		"      wo: {shape: [%lld, %lld], dtype: %s}\n"
		"      g2: {shape: [%lld], dtype: fp16}\n      o2: {shape: [%lld], dtype: fp16}\n"
		"      wu: {shape: [%lld, %lld], dtype: %s}\n      wd: {shape: [%lld, %lld], dtype: %s}\n",
		(long long)count, pos ? "e2" : "e", (long long)D, (long long)D, (long long)D,
		(long long)(3 * D), w[1], (long long)(3 * D), (long long)D, (long long)D, w[1],
		(long long)D, (long long)D, (long long)D, (long long)M, w[2], (long long)M, (long long)D, w[2]);
	if (ls)
		fprintf(f, "      ls1: {shape: [%lld], dtype: fp16}\n      ls2: {shape: [%lld], dtype: fp16}\n",
			(long long)D, (long long)D);
	fprintf(f, "    ops:\n"
		"      - {op: layernorm, name: ln1, x: h, scale: g1, bias: o1, out: n1}\n"
		"      - {op: matmul, name: qkv, a: n1, b: wqkv, bias: bqkv, out: q3}\n");
	if (rope2d)                     /* q's heads and k's, by the patch grid */
		fprintf(f, "      - {op: rope, name: rot2, x: q3, heads: %lld, head_dim: %lld,%s patch_grid: [%lld, %lld], "
			"class_tokens: %lld, out: q3r}\n", (long long)(2 * heads), (long long)hd,
			half ? "" : " pairs: interleaved,", (long long)gh, (long long)gw, (long long)cls);
	fprintf(f, "      - {op: attention, name: attn, qkv: %s, heads: %lld, out: at}\n"
		"      - {op: matmul, name: proj, a: at, b: wo, out: pr}\n", rope2d ? "q3r" : "q3", (long long)heads);
	if (ls)
		fprintf(f, "      - {op: mul, name: ls_1, a: pr, b: ls1, out: prs}\n");
	fprintf(f, "      - {op: add, name: r1, a: h, b: %s, out: s1}\n"
		"      - {op: layernorm, name: ln2, x: s1, scale: g2, bias: o2, out: n2}\n"
		"      - {op: matmul, name: up, a: n2, b: wu, out: u}\n"
		"      - {op: gelu, name: act, x: u, out: gl}\n"
		"      - {op: matmul, name: down, a: gl, b: wd, out: dn}\n", ls ? "prs" : "pr");
	if (ls)
		fprintf(f, "      - {op: mul, name: ls_2, a: dn, b: ls2, out: dns}\n");
	fprintf(f, "      - {op: add, name: r2, a: s1, b: %s, out: s2}\n", ls ? "dns" : "dn");
	fprintf(f, "  - {op: layernorm, name: post, x: h, scale: pg, bias: pb, out: enc}\n");
	if (map)
		fprintf(f, "  - {op: broadcast, name: probe_b, x: probe, batch: %lld, out: pq}\n"
			"  - {op: matmul, name: map_q, a: pq, b: mq, out: q1}\n"
			"  - {op: matmul, name: map_kv, a: enc, b: mkv, bias: mbkv, out: kv}\n"
			"  - {op: attention, name: map_attn, q: q1, kv: kv, heads: %lld, out: pooled}\n"
			"outputs: [pooled]\n", (long long)B, (long long)heads);
	else
		fprintf(f, "outputs: [enc]\n");
	/* Half the models split the keys of their attention into blocks
	 * (online-softmax merge), when the cut is uniform (head dims up to
	 * 24, so that 2 or 3 blocks may cut a head into chunks of 8 or more,
	 * each merged on its own block's tile). */
	int64_t kb = t_pick(2, 3), kc = (T + kb - 1) / kb;
	int keys = t_rnd() % 2 && T >= kb && (T + kc - 1) / kc == kb;
	const char *kvs = t_rnd() % 2 ? "relay" : "direct";      /* keys and values relayed or not */
	if (keys) {
		fprintf(f, "pins:\n  attn: {blocks: [1, %lld], kv_staging: %s}\n", (long long)kb, kvs);
		if (map)
			fprintf(f, "  map_attn: {blocks: [1, %lld]}\n", (long long)kb);
	} else {
		fprintf(f, "pins:\n  attn: {kv_staging: %s}\n", kvs);
	}
	fclose(f);
	snprintf(desc, dn, "vit B%lld T%lld P%lld D%lld=%lldx%lld M%lld count %lld%s%s%s %s/%s/%s/%s%s%lld",
		 (long long)B, (long long)T, (long long)P, (long long)D, (long long)heads, (long long)hd,
		 (long long)M, (long long)count, patchify ? " patchify" : "", pos ? " pos" : "",
		 map ? " map" : "", w[0], w[1], w[2], w[3], keys ? " key blocks " : "", keys ? (long long)kb : 0LL);
	size_t u = strlen(desc);
	snprintf(desc + u, dn - u, " kv %s%s%s%s", kvs, rope2d ? " rope2d" : "", rope2d && half ? " half" : "",
		 ls ? " layerscale" : "");
}

#endif
