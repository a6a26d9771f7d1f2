/* run_compute.c: the machine's compute steps (lib/run/run.h, docs/machine.md
 * §3): each output tile's operands decoded from its SRAM (matmul's straight
 * into run_gemm_strips's strips and panels, an attention's keys and values
 * into its panels, kept while the same bytes come again), the step's
 * numbers (matmul, reduce, gelu, add, layernorm, attention and its merge,
 * cast, pack, broadcast), and the result rounded into its format and
 * written back, on two threads; the expected bytes of the movement check
 * copied from each shard's first replica. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/num.h"
#include "run/run_int.h"

/* ---- the machine ---- */

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

/* Compute thread part's buffer i, at least n floats (its contents lost when it grows). */
static float *scratch(Machine_ *m, int part, int i, int64_t n)
{
	if (n > m->scap[part][i]) {
		free(m->scr[part][i]);
		m->scr[part][i] = xmalloc((size_t)n * sizeof **m->scr + 64);
		m->scap[part][i] = n;
	}
	return m->scr[part][i];
}

const int64_t *shards_of(Machine_ *m, int p)
{
	if (!m->ts[p].shard) {
		m->ts[p].shard = xmalloc((size_t)m->pl->machine.tiles * sizeof *m->ts[p].shard);
		place_shard_at(&m->pl->p[p], m->pl->machine.tiles, m->ts[p].shard);
	}
	return m->ts[p].shard;
}

/* A full fp8 panel's codes (16 columns of 32 rows, a column's rows
 * consecutive) in row order: rows[r * 16 + j] = panel[j * 32 + r] for
 * the first nr rows. SSE2 (every x86-64) moves a 16 x 16 block in four
 * rounds of byte interleaving, each a perfect shuffle of the 16 rows. */
#if defined(__x86_64__) && defined(__GNUC__)
#include <emmintrin.h>
#endif
static void transpose_codes(const uint8_t *panel, int64_t nr, uint8_t *rows)
{
#if defined(__x86_64__) && defined(__GNUC__)
	if (nr == 32) {
		for (int h = 0; h < 2; h++) {
			__m128i a[16], b[16];
			for (int i = 0; i < 16; i++)
				a[i] = _mm_loadu_si128((const __m128i *)(const void *)(panel + i * 32 + h * 16));
			for (int round = 0; round < 4; round++) {
				for (int i = 0; i < 8; i++) {
					b[2 * i] = _mm_unpacklo_epi8(a[i], a[i + 8]);
					b[2 * i + 1] = _mm_unpackhi_epi8(a[i], a[i + 8]);
				}
				memcpy(a, b, sizeof a);
			}
			for (int i = 0; i < 16; i++)
				_mm_storeu_si128((__m128i *)(void *)(rows + (h * 16 + i) * 16), a[i]);
		}
		return;
	}
#endif
	for (int64_t r = 0; r < nr; r++)
		for (int64_t j = 0; j < 16; j++)
			rows[r * 16 + j] = panel[j * 32 + r];
}

/* A transposed-right shard (R x C, mu = fmt_mu) decoded in storage
 * order: each panel holds mu rows of 16 columns, a column's mu rows
 * consecutive, so a row's 16 values are read mu apart within one panel
 * (L1-resident) and written consecutively, element (r, c) to
 * v[(c / 16) * ps + r * rs + c % 16]: row-major with rs = C and ps = 16,
 * run_gemm_strips's B panels with rs = 16 and ps = R * 16.
 * layout_offset's formula, a panel at a time. */
static void decode_tr(const uint8_t *mem, const Layout *l, Format f, int sc, float *v, int64_t rs, int64_t ps)
{
	int64_t R = l->rows, C = l->cols, mu = fmt_mu(f), rp = cdiv(R, mu);
	int esz = fmt_bytes(f);
	for (int64_t cp = 0; cp * 16 < C; cp++) {
		int64_t nj = C - cp * 16 < 16 ? C - cp * 16 : 16;
		for (int64_t kb = 0; kb < rp; kb++) {
			const uint8_t *panel = mem + (cp * rp + kb) * mu * 16 * esz;
			int64_t nr = R - kb * mu < mu ? R - kb * mu : mu;
			if (f == FMT_FP8 && rs == 16 && nj == 16) {     /* panels: the codes in row order, decoded at once */
				uint8_t rows[32 * 16];
				transpose_codes(panel, nr, rows);
				f8_decode(rows, nr * 16, f8_pow2[sc + 126], v + cp * ps + kb * mu * 16);
				continue;
			}
			for (int64_t r = 0; r < nr; r++) {
				float *d = v + cp * ps + (kb * mu + r) * rs;
				if (f == FMT_FP8) {
					float k = f8_pow2[sc + 126];
					for (int64_t j = 0; j < nj; j++)
						d[j] = f8_table[panel[j * mu + r]] * k;
				} else if (f == FMT_FP16) {
					uint16_t h[16];
					for (int64_t j = 0; j < nj; j++) {
						const uint8_t *b = panel + (j * mu + r) * 2;
						h[j] = (uint16_t)(b[0] | b[1] << 8);
					}
					f16_to_f32_n(h, nj, d);
				} else {
					for (int64_t j = 0; j < nj; j++)
						memcpy(d + j, panel + (j * mu + r) * 4, 4);
				}
			}
		}
	}
}

/* Placement p's shard on tile t: its bytes (a stacked home's: this
 * iteration's instance) and its layout. */
static const uint8_t *shard_mem(Machine_ *m, int p, int64_t t, Layout *l)
{
	const Placement *pp = &m->pl->p[p];
	int64_t idx[MAX_RANK];
	place_shard_idx(pp, shards_of(m, p)[t], idx);
	*l = place_layout(pp, idx);
	const uint8_t *mem = sim_tile(&m->s, t) + pp->addr;
	if (m->stacked[p])     /* a stacked home read in place: this iteration's instance */
		mem += m->s.iter * place_instance(pp);
	return mem;
}

/* Layouts of strips: element (r, c) at (c / w) * R * w + r * w + c % w,
 * w = layout_run (amp-left: mu; amp-output: 16), every strip whole. */
static int strip_layout(const Layout *l)
{
	return l->kind == LAYOUT_AMP_LEFT || l->kind == LAYOUT_AMP_OUTPUT;
}

/* The shard at mem (layout l, in fmt and scale sc) decoded into v, row-major. */
static void decode_shard(const uint8_t *mem, const Layout *l, Format fmt, int sc, float *v)
{
	if (l->kind == LAYOUT_ROW_MAJOR) {      /* offset = r * cols + c */
		decode_run(mem, NULL, l->rows * l->cols, fmt, sc, v);
		return;
	}
	if (strip_layout(l)) {                  /* decoded as it lies, in one run, then its rows gathered */
		int64_t w = layout_run(l), R = l->rows, C = l->cols, ns = cdiv(C, w);
		float *tmp = xmalloc((size_t)(ns * R * w) * sizeof *tmp);
		decode_run(mem, NULL, ns * R * w, fmt, sc, tmp);
		for (int64_t st = 0; st < ns; st++) {
			int64_t n = C - st * w < w ? C - st * w : w;
			for (int64_t r = 0; r < R; r++)
				memcpy(v + r * C + st * w, tmp + (st * R + r) * w, (size_t)n * sizeof *v);
		}
		free(tmp);
		return;
	}
	int64_t w = layout_run(l), esz = fmt_bytes(fmt);
	if (w > 1) {                            /* a row: runs of w consecutive elements */
		for (int64_t r = 0; r < l->rows; r++)
			for (int64_t c = 0; c < l->cols; c += w)
				decode_run(mem + layout_offset(l, r, c) * esz, NULL, l->cols - c < w ? l->cols - c : w,
					   fmt, sc, v + r * l->cols + c);
		return;
	}
	if (l->kind == LAYOUT_TRANSPOSED_RIGHT) {
		decode_tr(mem, l, fmt, sc, v, l->cols, 16);
		return;
	}
	int64_t *off = xmalloc((size_t)l->cols * sizeof *off);
	layout_row(l, 0, off);                  /* row r's: row 0's, from its first */
	for (int64_t r = 0; r < l->rows; r++)
		decode_run(mem + layout_offset(l, r, 0) * esz, off, l->cols, fmt, sc, v + r * l->cols);
	free(off);
}

/* A shard as a float matrix (rows x cols), and back with zero padding. */
/* Shard p of tile t decoded into floats, row-major. */
static float *read_shard(Machine_ *m, int p, int64_t t, Layout *l)
{
	const uint8_t *mem = shard_mem(m, p, t, l);
	float *v = xmalloc((size_t)(l->rows * l->cols) * sizeof *v);
	decode_shard(mem, l, m->pl->p[p].fmt, m->pl->t[m->pl->p[p].tensor].scale, v);
	return v;
}

static void write_shard(Machine_ *m, int p, int64_t t, const float *v)
{
	const Placement *pp = &m->pl->p[p];
	int64_t idx[MAX_RANK];
	place_shard_idx(pp, shards_of(m, p)[t], idx);
	Layout l = place_layout(pp, idx);
	uint8_t *mem = sim_tile(&m->s, t) + pp->addr;
	int sc = m->pl->t[pp->tensor].scale;
	if (m->stacked[p])     /* a stacked state's home: this iteration's instance */
		mem += m->s.iter * place_instance(pp);
	if (strip_layout(&l)) {                 /* rows laid out as strips (zeros past the columns), encoded in one run */
		int64_t w = layout_run(&l), R = l.rows, C = l.cols, ns = cdiv(C, w);
		float *tmp = xmalloc((size_t)(ns * R * w) * sizeof *tmp);
		for (int64_t st = 0; st < ns; st++) {
			int64_t n = C - st * w < w ? C - st * w : w;
			for (int64_t r = 0; r < R; r++) {
				float *d = tmp + (st * R + r) * w;
				memcpy(d, v + r * C + st * w, (size_t)n * sizeof *d);
				memset(d + n, 0, (size_t)(w - n) * sizeof *d);
			}
		}
		encode_run(tmp, NULL, ns * R * w, pp->fmt, sc, mem);
		free(tmp);
		return;
	}
	memset(mem, 0, (size_t)layout_bytes(&l));
	if (l.kind == LAYOUT_ROW_MAJOR) {
		encode_run(v, NULL, l.rows * l.cols, pp->fmt, sc, mem);
		return;
	}
	int64_t w = layout_run(&l), esz = fmt_bytes(pp->fmt);
	if (w > 1) {
		for (int64_t r = 0; r < l.rows; r++)
			for (int64_t c = 0; c < l.cols; c += w)
				encode_run(v + r * l.cols + c, NULL, l.cols - c < w ? l.cols - c : w, pp->fmt, sc,
					   mem + layout_offset(&l, r, c) * esz);
		return;
	}
	int64_t *off = xmalloc((size_t)l.cols * sizeof *off);
	layout_row(&l, 0, off);
	for (int64_t r = 0; r < l.rows; r++)
		encode_run(v + r * l.cols, off, l.cols, pp->fmt, sc, mem + layout_offset(&l, r, 0) * esz);
	free(off);
}

/* acc[n] += x * b[n]: the inner loop of merge, vectorized (no
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

/* gelu of every fp16 value, and of every fp8 code at the last scale
 * asked for: gelu_n looks a decoded input up by its code instead of
 * computing tanhf again (the same function of the same float, so the
 * same bits). */
static float gelu16[65536];
static pthread_once_t gelu16_once = PTHREAD_ONCE_INIT;

static void gelu16_build(void)
{
	for (int i = 0; i < 65536; i++)
		gelu16[i] = gelu(f16_to_f32((uint16_t)i));
}

/* y[i] = gelu(x[i]) for n inputs decoded from fmt at scale sc. */
static void gelu_n(const float *x, int64_t n, Format fmt, int sc, float *y)
{
	if (fmt == FMT_FP16) {
		pthread_once(&gelu16_once, gelu16_build);
		uint16_t h[256];
		for (int64_t i0 = 0; i0 < n; i0 += 256) {
			int64_t k = n - i0 < 256 ? n - i0 : 256;
			f32_to_f16_n(x + i0, k, h);     /* exact: each value is an fp16 one */
			for (int64_t i = 0; i < k; i++)
				y[i0 + i] = gelu16[h[i]];
		}
	} else if (fmt == FMT_FP8) {
		float t8[256], d8[256];
		for (int c = 0; c < 256; c++)
			t8[c] = gelu(d8[c] = f8s_to_f32((uint8_t)c, sc));
		uint8_t b[256];
		for (int64_t i0 = 0; i0 < n; i0 += 256) {
			int64_t k = n - i0 < 256 ? n - i0 : 256;
			f32_to_f8s_n(x + i0, k, sc, b);
			for (int64_t i = 0; i < k; i++)    /* a value no code decodes to (none should): computed */
				y[i0 + i] = memcmp(&d8[b[i]], &x[i0 + i], sizeof *x) ? gelu(x[i0 + i]) : t8[b[i]];
		}
	} else {
		for (int64_t i = 0; i < n; i++)
			y[i] = gelu(x[i]);
		return;
	}
	for (int64_t i = 0; i < n; i++)         /* a NaN's payload as gelu itself gives it */
		if (x[i] != x[i])
			y[i] = gelu(x[i]);
}

void run_gelu(const float *x, int64_t n, Format fmt, int scale, float *y)
{
	run_tables();
	gelu_n(x, n, fmt, scale, y);
}

/* One head's attention for R query rows (q: row stride ldq) over N keys
 * (D wide), the keys transposed in kp and the values in vp as
 * run_gemm_strips's panels (kv_panels): scores
 * summed in fp32 in D order and scaled; softmax with fp32 statistics (row
 * maximum m, exponentials, their sum l in key order); the output summed
 * in fp32 in key order. Whole (partial 0): o (R x D) is that sum divided
 * by l. Partial: o (R x (D+2*n)) holds, for each of n chunks of the
 * head's columns, m, l and the chunk's undivided sums, for merge(). o's
 * rows are ldo apart. The caller rounds o once into its format. */
static void attend(const float *q, int64_t ldq, const float *kp, const float *vp, float *o, int64_t ldo, int64_t R,
		   int64_t N, int64_t D, float scale, int64_t partial, const int64_t *see)
{
	float *s = xzeroed((size_t)(R * N), sizeof *s), *acc = xzeroed((size_t)(R * D), sizeof *acc);
	int64_t mr = run_gemm_rows(), mp = cdiv(R, mr) * mr, wide = (N > D ? N : D) + GEMM_S;
	float *ap = xmalloc((size_t)(cdiv(wide, GEMM_S) * mp * GEMM_S) * sizeof *ap);
	pack_strips(q, ldq, R, D, mp, ap);
	run_gemm_strips(ap, mp * GEMM_S, kp, s, R, D, N);      /* every score summed in D order */
	float *mx = xmalloc((size_t)R * sizeof *mx), *sum = xcalloc((size_t)R, sizeof *sum);
	for (int64_t i = 0; i < R; i++) {
		float *p = s + i * N, m = -INFINITY, l = 0;
		int64_t n = !see ? N : see[i] < 0 ? 0 : see[i] + 1 < N ? see[i] + 1 : N;
		for (int64_t j = 0; j < n; j++) {
			p[j] *= scale;
			m = p[j] > m ? p[j] : m;
		}
		for (int64_t j = 0; j < n; j++) {
			p[j] = expf(p[j] - m);
			l += p[j];
		}
		for (int64_t j = n; j < N; j++)         /* masked: weight 0 */
			p[j] = 0;
		mx[i] = m, sum[i] = l;
	}
	pack_strips(s, N, R, N, mp, ap);
	run_gemm_strips(ap, mp * GEMM_S, vp, acc, R, N, D);    /* every output summed in key order */
	for (int64_t i = 0; i < R; i++) {
		float *out = o + i * ldo;
		if (partial) {
			for (int64_t c = 0, dc = D / partial; c < partial; c++, out += dc + 2) {
				out[0] = mx[i];
				out[1] = sum[i];
				memcpy(out + 2, acc + i * D + c * dc, (size_t)dc * sizeof *out);
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

/* The first index along dimension dim of placement p's shard on tile t
 * (dim 1: its first token row). */
static int64_t shard_first(Machine_ *m, int p, int64_t t, int dim)
{
	const Placement *pp = &m->pl->p[p];
	int64_t idx[MAX_RANK];
	place_shard_idx(pp, shards_of(m, p)[t], idx);
	return pp->off[dim] + idx[dim] * pp->block[dim];
}

/* Online-softmax merge of KB key blocks' partials (rows kb*R + r, each m,
 * l, o[D]) in key-block order: M the largest m, w_kb = exp(m_kb - M),
 * L = sum of w_kb*l_kb, O = sum of w_kb*o_kb, out = O / L (all fp32). */
static void merge(const float *a, float *res, int64_t KB, int64_t R, int64_t D)
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
			L += w * row[1];
			axpy(out, row + 2, w, D);
		}
		for (int64_t d = 0; d < D; d++)
			out[d] /= L;
	}
}

typedef struct {
	Machine_ *m;
	int step, part, parts;
	double cpu;             /* the thread's CPU seconds on the step, the expected bytes' copies not counted */
	uint8_t *enc;           /* the output tensor's expected bytes */
} Work;

/* A matmul's left operand, placement p's shard on tile t (R x K), in the
 * strips of run_gemm_strips, mp rows each: an amp-left shard whose runs
 * are a strip wide is already strips of R rows, decoded as it lies. */
static const float *read_strips(Machine_ *m, const Work *w, int p, int64_t t, Layout *l, int64_t mp)
{
	const uint8_t *mem = shard_mem(m, p, t, l);
	Format f = m->pl->p[p].fmt;
	int sc = m->pl->t[m->pl->p[p].tensor].scale;
	int64_t R = l->rows, K = l->cols, ns = cdiv(K, GEMM_S);
	float *d = scratch(m, w->part, 0, ns * mp * GEMM_S);
	if (l->kind == LAYOUT_AMP_LEFT && fmt_mu(f) == GEMM_S) {
		for (int64_t s = 0; s < ns; s++) {     /* element (r, c) at (c / mu) * R * mu + r * mu + c % mu */
			decode_run(mem + s * R * GEMM_S * fmt_bytes(f), NULL, R * GEMM_S, f, sc, d + s * mp * GEMM_S);
			memset(d + (s * mp + R) * GEMM_S, 0, (size_t)((mp - R) * GEMM_S) * sizeof *d);
		}
		return d;
	}
	float *v = scratch(m, w->part, 3, R * K);
	decode_shard(mem, l, f, sc, v);
	pack_strips(v, K, R, K, mp, d);
	return d;
}

/* Its right operand (K x N) in 16-column panels: a transposed-right
 * shard decoded straight into them. */
static const float *read_panels(Machine_ *m, const Work *w, int p, int64_t t, Layout *l)
{
	const uint8_t *mem = shard_mem(m, p, t, l);
	Format f = m->pl->p[p].fmt;
	int sc = m->pl->t[m->pl->p[p].tensor].scale;
	int64_t K = l->rows, N = l->cols, np = cdiv(N, 16);
	float *d = scratch(m, w->part, 1, np * K * 16);
	if (l->kind == LAYOUT_TRANSPOSED_RIGHT) {
		if (N % 16)                     /* the last panel's columns past N */
			memset(d + (np - 1) * K * 16, 0, (size_t)(K * 16) * sizeof *d);
		decode_tr(mem, l, f, sc, d, 16, K * 16);
		return d;
	}
	float *v = scratch(m, w->part, 3, K * N);
	decode_shard(mem, l, f, sc, v);
	for (int64_t q = 0; q < np; q++)
		pack_panel_8(v, N, 0, K, q * 16, N - q * 16 < 16 ? N - q * 16 : 16, d + q * K * 16);
	return d;
}

/* Shard lin of placement out, as its first replica's tile holds it,
 * into the tensor's encoded bytes enc: row by row, a strip row at a time
 * in strip layouts (*off, *cap: a row's offsets, kept between calls). */
static void enc_shard(Machine_ *m, const Placement *out, uint8_t *enc, int64_t lin, int64_t **off, int64_t *cap)
{
	int64_t T = m->pl->machine.tiles, z[MAX_REP] = { 0 }, idx[MAX_RANK];
	int esz = fmt_bytes(out->fmt);
	place_shard_idx(out, lin, idx);
	const uint8_t *mem = m->s.mem[place_tile(out, idx, z, T)] + out->addr;  /* allocated: it holds a shard */
	Layout l = place_layout(out, idx);
	if (m->stacked[out - m->pl->p]) {      /* this iteration's instance */
		mem += m->s.iter * place_instance(out);
		enc += m->s.iter * tensor_count(&m->pl->t[out->tensor]) * esz;
	}
	int64_t w = strip_layout(&l) ? layout_run(&l) : 0;
	if (l.kind != LAYOUT_ROW_MAJOR && !w) {
		if (l.cols > *cap)
			*off = xrealloc(*off, (size_t)(*cap = l.cols) * sizeof **off);
		layout_row(&l, 0, *off);
	}
	for (int64_t r = 0; r < l.rows; r++) {  /* a row: consecutive elements */
		uint8_t *d = enc + shard_elem(out, idx, r, 0) * esz;
		const uint8_t *s = mem + layout_offset(&l, r, 0) * esz;
		if (l.kind == LAYOUT_ROW_MAJOR) {
			memcpy(d, s, (size_t)(l.cols * esz));
		} else if (w) {                 /* strips: a row's w elements a strip apart */
			for (int64_t c = 0; c < l.cols; c += w) {
				const uint8_t *q = s + c * l.rows * esz;
				if (w * esz == 32 && l.cols - c >= w)
					memcpy(d + c * esz, q, 32);
				else
					memcpy(d + c * esz, q, (size_t)((l.cols - c < w ? l.cols - c : w) * esz));
			}
		} else {
			elems_gather(d, s, *off, l.cols, esz);
		}
	}
}

/* Columns c0 .. c0 + D - 1 of placement p's shard on tile t as attend's
 * panels: keys (trans 1, N x D) transposed into D x N panels, values
 * (N x D) as they are; NULL when the shard does not hold them. Made again
 * only when the tile's bytes differ from those the cache c was made from
 * in this step (the same bytes decode to the same panels). */
static const float *kv_panels(Machine_ *m, KvPanels *c, int p, int64_t t, int trans, int64_t c0, int64_t D,
			      Layout *l)
{
	const uint8_t *mem = shard_mem(m, p, t, l);
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
		decode_shard(mem, l, m->pl->p[p].fmt, m->pl->t[m->pl->p[p].tensor].scale, c->dec);
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
			pack_panel_8(v, W, 0, N, q0, D - q0 < 16 ? D - q0 : 16, c->p + q0 * N);
	}
	made_set(&c->from, m->exec, mem, l, key);
	return c->p;
}

/* Attention step st on tile t: q (R rows of the tile's heads, C wide)
 * into res (R rows of its heads' outputs, or of their partials). The
 * tile's heads are those of its q shard's columns; q head h reads kv head
 * h / (heads / kv_heads), at the kv tensor's columns kbase + j*D for keys
 * and kbase + KC + j*D for values (kbase: q's C when q and kv are one
 * fused tensor), wherever the k and v shards hold them: a shard of that
 * head alone, or a state's home holding every head's keys and values. */
static void attention_tile(Machine_ *m, const Work *w, const Step *st, int64_t t, const float *q, int64_t qcols,
			   int64_t R, int64_t C, float *res)
{
	const Plan *pl = m->pl;
	int64_t partial = pl->p[st->out].fmt == FMT_FP32 ? plan_chunks(st) : 0;       /* its chunks */
	int64_t H = st->heads, D = plan_head_dim(pl, st), g = H / st->kv_heads, KC = st->kv_heads * D;
	int64_t kbase = st->in[0] == st->in[1] || pl->p[st->in[0]].tensor == pl->p[st->in[1]].tensor ? H * D : 0;
	int64_t h0 = shard_first(m, st->in[0], t, 2) / D, hw = D + 2 * partial, nh = C / hw;
	nh = nh < qcols / D ? nh : qcols / D;
	int64_t k0 = shard_first(m, st->in[1], t, 2), v0 = shard_first(m, st->in[2], t, 2);
	Layout lc, lk, lv;
	float *pos = st->nin > 3 ? read_shard(m, st->in[3], t, &lc) : NULL;
	int64_t *see = causal_see(pl, st, shard_first(m, st->in[0], t, 1), shard_first(m, st->in[1], t, 1), R, pos);
	for (int64_t i = 0; i < nh; i++) {
		int64_t j = (h0 + i) / g;
		const float *kp = kv_panels(m, &m->kv[w->part][0], st->in[1], t, 1, kbase + j * D - k0, D, &lk);
		const float *vp = kv_panels(m, &m->kv[w->part][1], st->in[2], t, 0, kbase + KC + j * D - v0, D, &lv);
		if (kp && vp)           /* (a stage whose shards hold not the head's columns: zeros, which the checks name) */
			attend(q + i * D, qcols, kp, vp, res + i * hw, C, R, lk.rows, D, (float)st->scale, partial, see);
	}
	free(see);
	free(pos);
}

/* Compute step w->step on the tiles t of its output with t % parts == part. */
static void *compute_tiles(void *arg)
{
	Work *w = arg;
	Machine_ *m = w->m;
	const Step *st = &m->pl->s[w->step];
	const Placement *out = &m->pl->p[st->out];
	int64_t T = m->pl->machine.tiles;
	const int64_t *os = m->ts[st->out].shard;
	double cpu0 = thread_cpu();
	int64_t *off = NULL, offcap = 0, z[MAX_REP] = { 0 };
	double enc_cpu = 0;

	for (int64_t t = w->part; t < T; t += w->parts) {
		if (os[t] < 0 || (st->compute == C_APPEND && m->ts[st->in[0]].shard[t] < 0))
			continue;
		int64_t idx[MAX_RANK];
		place_shard_idx(out, os[t], idx);
		Layout lo = place_layout(out, idx);
		int64_t R = lo.rows, C = lo.cols;
		Layout la, lb, lc;
		if (st->compute == C_MATMUL) {  /* both operands decoded into run_gemm_strips's */
			float *res = scratch(m, w->part, 2, R * C);
			memset(res, 0, (size_t)(R * C) * sizeof *res);
			int64_t mp = cdiv(R, run_gemm_rows()) * run_gemm_rows();
			const float *ap = read_strips(m, w, st->in[0], t, &la, mp);
			const float *bp = read_panels(m, w, st->in[1], t, &lb);
			int64_t K = la.cols;
			run_gemm_strips(ap, mp * GEMM_S, bp, res, R, K, C);   /* K order */
			if (st->nin > 2) {
				float *bias = read_shard(m, st->in[2], t, &lc);
				for (int64_t r = 0; r < R; r++)
					for (int64_t n = 0; n < C; n++)
						res[r * C + n] += bias[n];
				free(bias);
			}
			write_shard(m, st->out, t, res);   /* rounds into the output's format */
			if (place_tile(out, idx, z, T) == t) {  /* the first replica: the expected bytes, not the product's time */
				double e0 = thread_cpu();
				enc_shard(m, out, w->enc, os[t], &off, &offcap);
				enc_cpu += thread_cpu() - e0;
			}
			continue;
		}
		float *res = xcalloc((size_t)(R * C), sizeof *res);
		float *a = read_shard(m, st->in[0], t, &la);
		switch (st->compute) {
		case C_CAST:
		case C_PACK:
		case C_CARRY:
			memcpy(res, a, (size_t)(R * C) * sizeof *res);
			break;
		case C_BROADCAST:               /* the parameter's rows, for every batch entry */
			for (int64_t r = 0; r < R; r++)
				memcpy(res + r * C, a + (r % la.rows) * C, (size_t)C * sizeof *res);
			break;
		case C_ATTENTION:
			attention_tile(m, w, st, t, a, la.cols, R, C, res);
			break;
		case C_APPEND: {                /* the rows whose position falls in this tile's block */
			float *pos = read_shard(m, st->in[1], t, &lb);
			float *old = read_shard(m, st->out, t, &lc);
			int64_t p0 = shard_first(m, st->out, t, 1), P = m->pl->t[out->tensor].shape[1];
			int64_t pb = out->block[1] < P - p0 ? out->block[1] : P - p0, bb = R / pb, n = la.rows / bb;
			memcpy(res, old, (size_t)(R * C) * sizeof *res);
			for (int64_t b = 0; b < bb; b++)
				for (int64_t j = 0; j < n; j++) {
					int64_t p = (int64_t)pos[b * n + j] - p0;
					if (p >= 0 && p < pb)
						memcpy(res + (b * pb + p) * C, a + (b * n + j) * C, (size_t)C * sizeof *res);
				}
			free(old);
			free(pos);
			break;
		}
		case C_MERGE:
			merge(a, res, la.rows / R, R, C);
			break;
		case C_LAST: {                  /* each batch entry's last row: the shard's last */
			int64_t n = la.rows / R;
			for (int64_t r = 0; r < R; r++)
				memcpy(res + r * C, a + ((r + 1) * n - 1) * C, (size_t)C * sizeof *res);
			break;
		}
		case C_GELU:
			gelu_n(a, R * C, m->pl->p[st->in[0]].fmt, m->pl->t[m->pl->p[st->in[0]].tensor].scale, res);
			break;
		case C_ADD: {
			float *b = read_shard(m, st->in[1], t, &lb);   /* fewer rows: a table per batch entry */
			for (int64_t q = 0; q < R * C; q++)
				res[q] = a[q] + b[(q / C) % lb.rows * C + q % C];
			free(b);
			break;
		}
		case C_SILU:
			for (int64_t q = 0; q < R * C; q++)
				res[q] = silu(a[q]);
			break;
		case C_ROPE: {                  /* each row's heads rotated by its position */
			float *pos = read_shard(m, st->in[1], t, &lb);
			int64_t D = st->head_dim, h2 = D / 2;
			double *fr = xmalloc((size_t)h2 * sizeof *fr);  /* theta^(-2i/D), once per shard */
			for (int64_t i = 0; i < h2; i++)
				fr[i] = pow(st->theta, -2.0 * (double)i / (double)D);
			memcpy(res, a, (size_t)(R * C) * sizeof *res);
			for (int64_t r = 0; r < R; r++)
				for (int64_t i = 0; i < h2; i++) {
					double ang = (double)pos[r] * fr[i];
					float c = (float)cos(ang), s = (float)sin(ang);
					for (int64_t h = 0; h < st->heads; h++) {
						const float *x = a + r * C + h * D;
						float *y = res + r * C + h * D;
						y[i] = x[i] * c - x[i + h2] * s;
						y[i + h2] = x[i + h2] * c + x[i] * s;
					}
				}
			free(pos);
			free(fr);
			break;
		}
		case C_MUL: {
			float *b = read_shard(m, st->in[1], t, &lb);
			for (int64_t q = 0; q < R * C; q++)
				res[q] = a[q] * b[q];
			free(b);
			break;
		}
		case C_RMSNORM: {
			float *g = read_shard(m, st->in[1], t, &lb);
			for (int64_t r = 0; r < R; r++) {
				const float *x = a + r * C;
				float ss = 0;
				for (int64_t c = 0; c < C; c++)
					ss += x[c] * x[c];
				float inv = 1.0f / sqrtf(ss / (float)C + (float)st->eps);
				for (int64_t c = 0; c < C; c++)
					res[r * C + c] = x[c] * inv * g[c];
			}
			free(g);
			break;
		}
		case C_LAYERNORM: {
			float *g = read_shard(m, st->in[1], t, &lb), *b = read_shard(m, st->in[2], t, &lc);
			for (int64_t r = 0; r < R; r++) {
				const float *x = a + r * C;
				float mean = 0, var = 0;
				for (int64_t c = 0; c < C; c++)
					mean += x[c];
				mean /= (float)C;
				for (int64_t c = 0; c < C; c++)
					var += (x[c] - mean) * (x[c] - mean);
				var /= (float)C;
				float inv = 1.0f / sqrtf(var + (float)st->eps);
				for (int64_t c = 0; c < C; c++)
					res[r * C + c] = (x[c] - mean) * inv * g[c] + b[c];
			}
			free(g);
			free(b);
			break;
		}
		case C_REDUCE: {
			int64_t parts = la.rows / R;
			float *bias = st->nin > 1 ? read_shard(m, st->in[1], t, &lb) : NULL;
			/* each element summed from 0 in part order, then the bias
			 * added: parts outermost, so the rows are read as they lie */
			for (int64_t k = 0; k < parts; k++)
				for (int64_t q = 0; q < R * C; q++)
					res[q] += a[k * R * C + q];
			for (int64_t q = 0; q < R * C; q++)
				res[q] += bias ? bias[q % C] : 0;
			free(bias);
			break;
		}
		default:
			break;
		}
		free(a);
		write_shard(m, st->out, t, res);   /* rounds into the output's format */
		free(res);
		if (place_tile(out, idx, z, T) == t)
			enc_shard(m, out, w->enc, os[t], &off, &offcap);
	}
	free(off);
	w->cpu = thread_cpu() - cpu0 - enc_cpu;
	return NULL;
}


/* Runs compute step i on every tile of its output, on two threads. */
int compute_step(Machine_ *m, int i)
{
	const Step *st = &m->pl->s[i];
	const Placement *out = &m->pl->p[st->out];
	int64_t T = m->pl->machine.tiles;
	const int64_t *os = shards_of(m, st->out);

	for (int64_t t = 0; t < T; t++)         /* every input on every tile, before threads (an append's */
		for (int k = 0; os[t] >= 0 && k < st->nin; k++)         /* blocks that no row reaches keep theirs) */
			if (shards_of(m, st->in[k])[t] < 0 && !(st->compute == C_APPEND && st->first >= 0))
				return errf(m->e, "step %d (%s): tile %lld holds no shard of '%s'", i, st->op,
					    (long long)t, m->pl->p[st->in[k]].name);
	for (int64_t t = 0; t < T; t++)
		if (os[t] >= 0)
			sim_tile(&m->s, t);
	/* The tensor's bytes as the movement check expects them: each shard's
	 * first replica as write_shard encoded it, copied through the layout
	 * by the thread that wrote it (compute_tiles; no decode and encode
	 * again). Only an output's values are kept as floats. */
	const PTensor *x = &m->pl->t[out->tensor];
	int64_t n = tensor_count(x);
	uint8_t **enc = &m->vs->enc[out->tensor];
	if (!*enc)
		*enc = xmalloc((size_t)(tensor_values(x) * fmt_bytes(out->fmt)));
	m->exec++;                      /* a new run of a step: what an earlier one cached is stale */
	Work w[2] = { { m, i, 0, 2, 0, *enc }, { m, i, 1, 2, 0, *enc } };
	pthread_t th;
	double t0 = run_now();
	if (sim_threads() > 1 && pthread_create(&th, NULL, compute_tiles, &w[1]) == 0) {
		compute_tiles(&w[0]);
		pthread_join(th, NULL);
	} else {
		w[0].parts = 1;
		compute_tiles(&w[0]);
	}
	if (st->compute == C_MATMUL) {
		const Placement *A = &m->pl->p[st->in[0]], *B = &m->pl->p[st->in[1]];
		double mm = 1;
		for (int a = 0; a + 1 < A->rank; a++)
			mm *= (double)A->shape[a];
		run_totals.gemm_flops += 2.0 * mm * (double)B->shape[0] * (double)B->shape[1];
		run_totals.gemm_secs += run_now() - t0;
		run_totals.gemm_cpu += w[0].cpu + w[1].cpu;
	}
	if (x->role == R_STATE)         /* every instance */
		n = tensor_values(x);
	if (x->role == R_OUTPUT || x->role == R_STATE) {        /* a state's values go on to the next run */
		if (!m->val[out->tensor])
			m->val[out->tensor] = xmalloc((size_t)n * sizeof **m->val);
		decode_run(*enc, NULL, n, x->fmt, x->scale, m->val[out->tensor]);
	}
	return 0;
}
