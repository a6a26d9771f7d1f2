/* run_attention.c: the machine's attention (lib/run/run_int.h,
 * docs/machine.md §3): a tile's heads, each over the keys and values its
 * k and v shards hold, decoded into panels and kept while the same bytes
 * come again; scores, softmax and the output in fp32, whole or as the
 * partials of key blocks, and the online-softmax merge of those partials. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/num.h"
#include "run/run_int.h"

/* Is what c records made from the shard at mem (layout l, key) in this run? */
static int made_same(const Made *c, int64_t exec, const uint8_t *mem, const Layout *l, int64_t key)
{
	int64_t bytes = layout_bytes(l);
	return c->exec == exec && c->bytes == bytes && c->key == key && c->l.kind == l->kind &&
	       c->l.fmt == l->fmt && c->l.rows == l->rows && c->l.cols == l->cols &&
	       (c->raw == mem || memcmp(c->raw, mem, (size_t)bytes) == 0);     /* inputs do not change while a step runs */
}

static void made_set(Made *c, int64_t exec, const uint8_t *mem, const Layout *l, int64_t key)
{
	*c = (Made){ exec, mem, layout_bytes(l), key, *l };
}

/* One head's attention for R query rows (q: row stride ldq) over N keys
 * (D wide), the keys transposed in kp and the values in vp as
 * run_gemm_strips's panels (kv_panels): scores
 * summed in fp32 in D order and scaled; softmax with fp32 statistics (row
 * maximum m, exponentials, their sum l in key order); the output summed
 * in fp32 in key order. Whole (partial 0): o (R x D) is that sum divided
 * by l. Partial: o (R x (D+2*n)) holds, for each of n chunks of the
 * head's columns, m, l and the chunk's undivided sums, for run_merge();
 * an fp16 partial (half) takes m rounded to fp16 before the exponentials
 * and holds the chunk's sums divided by l (0 where l is 0: no key seen),
 * so that every value stays within the values' range. o's rows are ldo
 * apart. The caller rounds o once into its format. */
static void attend(const float *q, int64_t ldq, const float *kp, const float *vp, float *o, int64_t ldo, int64_t R,
		   int64_t N, int64_t D, float scale, int64_t partial, int half, const int64_t *see)
{
	float *s = xzeroed((size_t)(R * N), sizeof *s), *acc = xzeroed((size_t)(R * D), sizeof *acc);
	int64_t mr = run_gemm_rows(), mp = cdiv(R, mr) * mr, wide = (N > D ? N : D) + GEMM_S;
	float *ap = xmalloc((size_t)(cdiv(wide, GEMM_S) * mp * GEMM_S) * sizeof *ap);
	run_pack_strips(q, ldq, R, D, mp, ap);
	run_gemm_strips(ap, mp * GEMM_S, kp, s, R, D, N);      /* every score summed in D order */
	float *mx = xmalloc((size_t)R * sizeof *mx), *sum = xcalloc((size_t)R, sizeof *sum);
	for (int64_t i = 0; i < R; i++) {
		float *p = s + i * N, m = -INFINITY, l = 0;
		int64_t n = !see ? N : see[i] < 0 ? 0 : see[i] + 1 < N ? see[i] + 1 : N;
		for (int64_t j = 0; j < n; j++) {
			p[j] *= scale;
			m = p[j] > m ? p[j] : m;
		}
		if (half && n)
			m = f16_to_f32(f32_to_f16(m));
		for (int64_t j = 0; j < n; j++) {
			p[j] = expf(p[j] - m);
			l += p[j];
		}
		for (int64_t j = n; j < N; j++)         /* masked: weight 0 */
			p[j] = 0;
		mx[i] = m, sum[i] = l;
	}
	run_pack_strips(s, N, R, N, mp, ap);
	run_gemm_strips(ap, mp * GEMM_S, vp, acc, R, N, D);    /* every output summed in key order */
	for (int64_t i = 0; i < R; i++) {
		float *out = o + i * ldo;
		if (partial) {
			for (int64_t c = 0, dc = D / partial; c < partial; c++, out += dc + 2) {
				out[0] = mx[i];
				out[1] = sum[i];
				for (int64_t d = 0; d < dc; d++)
					out[2 + d] = !half ? acc[i * D + c * dc + d] : sum[i] > 0 ? acc[i * D + c * dc + d] / sum[i] : 0;
			}
		} else {
			for (int64_t d = 0; d < D; d++)
				out[d] = acc[i * D + d] / sum[i];
		}
	}
	free(s);
	free(ap);
	free(acc);
	free(mx);
	free(sum);
}

/* The causal mask of attention step st on a tile whose q shard (R rows)
 * starts at query row q0 and k shard at key k0: the tile's query row i
 * sees its keys j <= see[i]. Static: query q0 + i sees keys up to
 * q0 + i + Tk - Tq (keys after the queries' last are later positions);
 * by positions (pos, the rows' own): keys up to its position. Returns
 * see (R values), or NULL when the step is not causal. */
static int64_t *causal_see(const Plan *pl, const Step *st, int64_t q0, int64_t k0, int64_t R, const float *pos)
{
	if (!st->causal)
		return NULL;
	int64_t *see = xmalloc((size_t)R * sizeof *see);
	int64_t Tq = pl->t[pl->p[st->in[0]].tensor].shape[1], Tk = pl->t[pl->p[st->in[1]].tensor].shape[1];
	for (int64_t i = 0; i < R; i++)
		see[i] = (pos ? (int64_t)pos[i] : q0 + i + (Tk - Tq)) - k0;
	return see;
}

/* acc[n] += x * b[n]: the inner loop of run_merge, vectorized (no
 * contraction to FMA: -ffp-contract=off keeps one rounding per step, the
 * machine's definition). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__SANITIZE_ADDRESS__)
__attribute__((target_clones("avx2", "default")))
#endif
static void axpy(float *restrict acc, const float *restrict b, float x, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		acc[i] += x * b[i];
}

/* Online-softmax merge of KB key blocks' partials (rows kb*R + r, each m,
 * l, o[D]) in key-block order: M the largest m, w_kb = exp(m_kb - M),
 * L = sum of w_kb*l_kb, O = sum of w_kb*o_kb, out = O / L (all fp32). An
 * fp16 partial's (half) o is its block's sums over l already: w_kb then
 * takes l_kb's factor, w_kb = exp(m_kb - M)*l_kb, L = sum of w_kb. */
void run_merge(const float *a, float *res, int64_t KB, int64_t R, int64_t D, int half)
{
	for (int64_t r = 0; r < R; r++) {
		float M = -INFINITY, L = 0, *out = res + r * D;
		for (int64_t kb = 0; kb < KB; kb++) {
			float mk = a[(kb * R + r) * (D + 2)];
			M = mk > M ? mk : M;
		}
		memset(out, 0, (size_t)D * sizeof *out);
		for (int64_t kb = 0; kb < KB; kb++) {
			const float *row = a + (kb * R + r) * (D + 2);
			float w = expf(row[0] - M);
			if (half)
				w *= row[1], L += w;
			else
				L += w * row[1];
			axpy(out, row + 2, w, D);
		}
		for (int64_t d = 0; d < D; d++)
			out[d] /= L;
	}
}

/* Columns c0 .. c0 + D - 1 of placement p's shard on tile t as attend's
 * panels: keys (trans 1, N x D) transposed into D x N panels, values
 * (N x D) as they are; NULL when the shard does not hold them. Made again
 * only when the tile's bytes differ from those the cache c was made from
 * in this step (the same bytes decode to the same panels). */
static const float *kv_panels(RunMachine *m, KvPanels *c, int p, int64_t t, int trans, int64_t c0, int64_t D,
			      Layout *l)
{
	const uint8_t *mem = run_shard_mem(m, p, t, l);
	int64_t N = l->rows, W = l->cols, key = trans + 2 * c0;
	if (c0 < 0 || c0 + D > W)
		return NULL;            /* the shard does not hold those columns */
	if (made_same(&c->from, m->exec, mem, l, key))
		return c->p;
	if (!made_same(&c->dfrom, m->exec, mem, l, 0)) {        /* the shard, decoded once for all its heads */
		if (N * W > c->dcap) {
			free(c->dec);
			c->dec = xmalloc((size_t)(N * W) * sizeof *c->dec);
			c->dcap = N * W;
		}
		run_decode_shard(mem, l, m->pl->p[p].fmt, m->pl->t[m->pl->p[p].tensor].scale, c->dec);
		made_set(&c->dfrom, m->exec, mem, l, 0);
	}
	int64_t n = trans ? cdiv(N, 16) * 16 * D : cdiv(D, 16) * 16 * N;
	if (n > c->cap) {
		free(c->p);
		c->p = xmalloc((size_t)n * sizeof *c->p);
		c->cap = n;
	}
	const float *v = c->dec + c0;
	if (trans) {                    /* element (d, j) of the keys' transpose */
		memset(c->p, 0, (size_t)n * sizeof *c->p);
		for (int64_t j = 0; j < N; j++)
			for (int64_t d = 0; d < D; d++)
				c->p[j / 16 * D * 16 + d * 16 + j % 16] = v[j * W + d];
	} else {
		for (int64_t q0 = 0; q0 < D; q0 += 16)
			run_pack_panel_8(v, W, 0, N, q0, D - q0 < 16 ? D - q0 : 16, c->p + q0 * N);
	}
	made_set(&c->from, m->exec, mem, l, key);
	return c->p;
}

/* Attention step st on tile t: q (R rows of the tile's heads, C wide)
 * into res (R rows of its heads' outputs, or of their partials). The
 * tile's heads are those of its q shard's columns; q head h reads kv head
 * h / (heads / kv_heads), at the kv tensor's columns kbase + j*D for keys
 * and kbase + KC + j*D for values (kbase: q's C when q and kv are one
 * fused tensor; in kv_order heads, 2jD and 2jD + D), wherever the k and
 * v shards hold them: a shard of that head alone, or a state's home
 * holding every head's keys and values (or, in kv_order heads, a kv
 * head's). */
void run_attention_tile(RunMachine *m, const Work *w, const Step *st, int64_t t, const float *q, int64_t qcols,
			int64_t R, int64_t C, float *res)
{
	const Plan *pl = m->pl;
	int64_t partial = pl->t[pl->p[st->out].tensor].role == R_PARTIAL ? plan_chunks(st) : 0;  /* its chunks */
	int half = partial && pl->p[st->out].fmt == FMT_FP16;
	int64_t H = st->heads, D = plan_head_dim(pl, st), g = H / st->kv_heads, KC = st->kv_heads * D;
	int64_t kbase = st->in[0] == st->in[1] || pl->p[st->in[0]].tensor == pl->p[st->in[1]].tensor ? H * D : 0;
	int64_t h0 = run_shard_first(m, st->in[0], t, 2) / D, hw = D + 2 * partial, nh = C / hw;
	nh = nh < qcols / D ? nh : qcols / D;
	int64_t k0 = run_shard_first(m, st->in[1], t, 2), v0 = run_shard_first(m, st->in[2], t, 2);
	Layout lc, lk, lv;
	float *pos = st->nin > 3 ? run_read_shard(m, st->in[3], t, &lc) : NULL;
	int64_t *see = causal_see(pl, st, run_shard_first(m, st->in[0], t, 1), run_shard_first(m, st->in[1], t, 1), R, pos);
	for (int64_t i = 0; i < nh; i++) {
		int64_t j = (h0 + i) / g;
		int64_t kc = st->kv_order ? 2 * j * D : kbase + j * D, vc = st->kv_order ? kc + D : kbase + KC + j * D;
		const float *kp = kv_panels(m, &m->kv[w->part][0], st->in[1], t, 1, kc - k0, D, &lk);
		const float *vp = kv_panels(m, &m->kv[w->part][1], st->in[2], t, 0, vc - v0, D, &lv);
		if (kp && vp)           /* (a stage whose shards hold not the head's columns: zeros, which the checks name) */
			attend(q + i * D, qcols, kp, vp, res + i * hw, C, R, lk.rows, D, (float)st->scale, partial, half,
			       see);
	}
	free(see);
	free(pos);
}
