/* A random decoder layer for the randomized tests (decoder LLMs' block,
 * model format 4, or 5 with a KV cache): rmsnorm, q and kv projections (or one fused qkv),
 * mostly with rotary positions (rope) on q and k from an int32 input,
 * attention with kv_heads dividing heads (grouped-query), causal mostly,
 * output projection and residual; rmsnorm, the gated MLP (silu(gate) *
 * up, down) and residual. Weights fp8 or fp16 at random; the attention's
 * query and key blocks and its kv staging are pinned at random (uniform
 * cuts that fit the tiles), so that k and v are often replicated over two
 * axes (query blocks and the q heads of a kv head). Two thirds of the
 * unfused layers are decode or prefill steps over a cache (format 5): k
 * and v appended to a state of P >= T positions at the rows' positions,
 * the queries attending over the whole cache up to their own position;
 * *room is then P - T, the largest first position (else -1). Half of
 * those whose cache's home has a block per position for every head
 * (P >= H, B x P tiles) attend on that home instead (kv_staging: home,
 * no blocks): every head on each tile, partials chunked when D >= 16;
 * home asks for such a layer (one batch entry, D from 4 to 34). */
#ifndef AMP_DECGEN_H
#define AMP_DECGEN_H

#include <stdio.h>
#include <string.h>

#include "stage/place.h"
#include "t.h"
#include "testlib.h"

static void dec_model(const char *path, int64_t tiles, int home, char *desc, size_t dn, int64_t *room)
{
	int64_t B = t_pick(1, 2), T = t_pick(1, 24), H = t_pick(1, 4), G = H, D = t_pick(2, 20), M = t_pick(8, 80);
	while (G > 1 && (t_rnd() % 2 || H % G))
		G--;
	while (H % G)
		G--;
	int fused = t_rnd() % 3 == 0;    /* one projection: q, k and v in its columns */
	int cache = !fused && t_rnd() % 3 != 0;
	int64_t P = cache ? T + t_pick(0, 24) : T;       /* the keys: the cache's positions, or the tokens */
	if (home) {                     /* a cache on B x P tiles, P >= H, D wide enough to chunk at times */
		fused = 0, cache = 1, B = 1, T = T < 4 ? T : 1;
		D = D % 2 ? D + 15 : D + 2;
		P = T + t_pick(H, 24);
		while (P > tiles)
			P--, T = 1;
	}
	int64_t C = H * D, KC = 2 * G * D, QB = t_parts(T, t_pick(1, 4)), KB = t_parts(P, t_rnd() % 2 ? t_pick(2, 4) : 1);
	int causal = cache || t_rnd() % 4 != 0;
	const char *f = t_rnd() % 3 ? "fp8" : "fp16", *st = t_rnd() % 2 ? "relay" : "direct";
	if (cache && P >= H && B * P <= tiles && (T + P + D) % 3)        /* (drawing nothing more) */
		st = "home";            /* the home's blocks: one position each */
	while (B * H * QB * KB > tiles)
		KB > 1 ? (KB = t_parts(P, KB - 1)) : (QB = t_parts(T, QB - 1));
	*room = cache ? P - T : -1;
	int rope = D % 2 == 0 && t_rnd() % 4 != 0;       /* rotary positions on q and k */
	const char *theta = t_rnd() % 2 ? "10000" : "1000000";
	char proj[800];
	if (fused && rope)
		snprintf(proj, sizeof proj, "  - {op: matmul, name: q, a: xn, b: wqkv, out: q0}\n"
			 "  - {op: rope, name: rq, x: q0, positions: pos, heads: %lld, head_dim: %lld, theta: %s, out: qq}\n",
			 (long long)(H + G), (long long)D, theta);
	else if (fused)
		snprintf(proj, sizeof proj, "  - {op: matmul, name: q, a: xn, b: wqkv, out: qq}\n");
	else if (rope)
		snprintf(proj, sizeof proj, "  - {op: matmul, name: q, a: xn, b: wq, bias: bq, out: q0}\n"
			 "  - {op: matmul, name: kv, a: xn, b: wkv, out: k0}\n"
			 "  - {op: rope, name: rq, x: q0, positions: pos, heads: %lld, head_dim: %lld, theta: %s, out: qq}\n"
			 "  - {op: rope, name: rk, x: k0, positions: pos, heads: %lld, head_dim: %lld, theta: %s, out: kk}\n",
			 (long long)H, (long long)D, theta, (long long)G, (long long)D, theta);
	else
		snprintf(proj, sizeof proj, "  - {op: matmul, name: q, a: xn, b: wq, bias: bq, out: qq}\n"
			 "  - {op: matmul, name: kv, a: xn, b: wkv, out: kk}\n");
	char attn[300], blocks[64] = "";
	if (strcmp(st, "home"))         /* home takes its blocks from the cache's home */
		snprintf(blocks, sizeof blocks, "blocks: [%lld, %lld], ", (long long)QB, (long long)KB);
	if (cache)
		snprintf(attn, sizeof attn, "  - {op: append, name: store, cache: kvc, x: kk, positions: pos}\n"
			 "  - {op: attention, name: attn, q: qq, kv: kvc, heads: %lld, kv_heads: %lld, positions: pos, "
			 "out: at}\n", (long long)H, (long long)G);
	else
		snprintf(attn, sizeof attn, "  - {op: attention, name: attn, %s, heads: %lld, kv_heads: %lld, causal: %s, "
			 "out: at}\n", fused ? "qkv: qq" : "q: qq, kv: kk", (long long)H, (long long)G,
			 causal ? "true" : "false");
	FILE *o = fopen(path, "w");
	fprintf(o, "amp-model: 5\nname: dec\ninputs:\n  x: {shape: [%lld, %lld, %lld], dtype: fp16}\n"
		"  pos: {shape: [%lld, %lld, 1], dtype: int32}\n", (long long)B, (long long)T, (long long)C,
		(long long)B, (long long)T);
	if (cache)
		fprintf(o, "state:\n  kvc: {shape: [%lld, %lld, %lld], dtype: fp16}\n", (long long)B, (long long)P,
			(long long)KC);
	fprintf(o, "params:\n"
		"  g1: {shape: [%lld], dtype: fp16}\n  g2: {shape: [%lld], dtype: fp16}\n"
		"  wq: {shape: [%lld, %lld], dtype: %s}\n  bq: {shape: [%lld], dtype: fp16}\n"
		"  wkv: {shape: [%lld, %lld], dtype: %s}\n  wo: {shape: [%lld, %lld], dtype: %s}\n"
		"  wg: {shape: [%lld, %lld], dtype: %s}\n  wu: {shape: [%lld, %lld], dtype: %s}\n"
		"  wd: {shape: [%lld, %lld], dtype: %s}\n  wqkv: {shape: [%lld, %lld], dtype: %s}\nops:\n"
		"  - {op: rmsnorm, name: n1, x: x, scale: g1, out: xn}\n"
		"%s%s"
		"  - {op: matmul, name: o, a: at, b: wo, out: ao}\n"
		"  - {op: add, name: r1, a: x, b: ao, out: h1}\n"
		"  - {op: rmsnorm, name: n2, x: h1, scale: g2, eps: 1e-5, out: hn}\n"
		"  - {op: matmul, name: gate, a: hn, b: wg, out: gg}\n"
		"  - {op: matmul, name: up, a: hn, b: wu, out: uu}\n"
		"  - {op: silu, name: act, x: gg, out: ss}\n"
		"  - {op: mul, name: gated, a: ss, b: uu, out: mm}\n"
		"  - {op: matmul, name: down, a: mm, b: wd, out: dd}\n"
		"  - {op: add, name: r2, a: h1, b: dd, out: z}\noutputs: [z]\n"
		"pins:\n  attn: {%skv_staging: %s}\n",
		(long long)C, (long long)C,
		(long long)C, (long long)C, f,
		(long long)C, (long long)C, (long long)KC, f, (long long)C, (long long)C, f, (long long)C, (long long)M, f,
		(long long)C, (long long)M, f, (long long)M, (long long)C, f, (long long)C, (long long)(C + KC), f, proj, attn,
		blocks, st);
	fclose(o);
	snprintf(desc, dn, "decoder B%lld T%lld H%lld G%lld D%lld M%lld %s%s%s%s blocks [%lld, %lld] %s", (long long)B,
		 (long long)T, (long long)H, (long long)G, (long long)D, (long long)M, f, causal ? " causal" : "",
		 fused ? " fused" : "", rope ? " rope" : "",
		 (long long)QB, (long long)KB, st);
	if (cache)
		snprintf(desc + strlen(desc), dn - strlen(desc), " cache of %lld", (long long)P);
}

#endif
