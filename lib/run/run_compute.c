/* run_compute.c: the machine's compute steps (lib/run/run.h, docs/machine.md
 * §3): each output tile's operands decoded from its SRAM (run_shard.c),
 * the step's numbers (matmul, reduce, gelu, add, layernorm, rmsnorm, silu,
 * mul, rope, append, attention (run_attention.c) and its merge, cast,
 * pack, broadcast, last), and the result rounded into its format and
 * written back, on two threads; the expected bytes of the movement check
 * copied from each shard's first replica. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/num.h"
#include "run/run_int.h"

/* ---- the machine ---- */

/* gelu of every fp16 value, and of every fp8 code at the last scale
 * asked for: gelu_n looks a decoded input up by its code instead of
 * computing tanhf again (the same function of the same float, so the
 * same bits). */
static float gelu16[65536];
static pthread_once_t gelu16_once = PTHREAD_ONCE_INIT;

static void gelu16_build(void)
{
	for (int i = 0; i < 65536; i++)
		gelu16[i] = run_gelu_f32(f16_to_f32((uint16_t)i));
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
			t8[c] = run_gelu_f32(d8[c] = f8s_to_f32((uint8_t)c, sc));
		uint8_t b[256];
		for (int64_t i0 = 0; i0 < n; i0 += 256) {
			int64_t k = n - i0 < 256 ? n - i0 : 256;
			f32_to_f8s_n(x + i0, k, sc, b);
			for (int64_t i = 0; i < k; i++)    /* a value no code decodes to (none should): computed */
				y[i0 + i] = memcmp(&d8[b[i]], &x[i0 + i], sizeof *x) ? run_gelu_f32(x[i0 + i]) :
					    t8[b[i]];
		}
	} else {
		for (int64_t i = 0; i < n; i++)
			y[i] = run_gelu_f32(x[i]);
		return;
	}
	for (int64_t i = 0; i < n; i++)         /* a NaN's payload as gelu itself gives it */
		if (x[i] != x[i])
			y[i] = run_gelu_f32(x[i]);
}

void run_gelu(const float *x, int64_t n, Format fmt, int scale, float *y)
{
	run_tables();
	gelu_n(x, n, fmt, scale, y);
}

/* The rows whose position falls in this tile's block (compute_tiles, tile t: a its first input, la its layout, res its
 * R x C result). */
static void k_append(RunMachine *m, const Step *st, int64_t t, const float *a, Layout la, int64_t R, int64_t C,
		     float *res)
{
	const Placement *out = &m->pl->p[st->out];
	Layout lb, lc;
	float *pos = run_read_shard(m, st->in[1], t, &lb);
	float *old = run_read_shard(m, st->out, t, &lc);
	int64_t p0 = run_shard_first(m, st->out, t, 1), P = m->pl->t[out->tensor].shape[1];
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
}

/* Row r's pair of every head turned by angle ang: head h's pair at
 * columns h*S + first and that + hi, counted from the shard's first column
 * (a pair whose columns the shard does not hold is not its). */
static void turn(const float *a, float *res, int64_t r, int64_t C, int64_t heads, int64_t S, int64_t first,
		 int64_t hi, double ang)
{
	float c = (float)cos(ang), s = (float)sin(ang);
	for (int64_t h = 0; h < heads; h++) {
		int64_t p = h * S + first, q = p + hi;      /* in the shard */
		if (p < 0 || q >= C)
			continue;       /* not this shard's */
		float xp = a[r * C + p], xq = a[r * C + q];
		res[r * C + p] = xp * c - xq * s;
		res[r * C + q] = xq * c + xp * s;
	}
}

/* A patch_grid rope (st->rope_grid) on tile t's shard: its rows are
 * tokens from the shard's first on (tt of each batch entry, entry by
 * entry), each at its grid row and column (a class token at 0, 0); in every
 * head the column turns the first half's pairs, the row the second's, each
 * half a rope over D/2 columns. */
static void k_rope_grid(RunMachine *m, const Step *st, int64_t t, const float *a, int64_t R, int64_t C, float *res)
{
	const RopeGrid *g = &st->rope_grid;
	const Placement *px = &m->pl->p[st->in[0]];
	int64_t T = m->pl->t[px->tensor].shape[1], t0 = run_shard_first(m, st->in[0], t, 1);
	int64_t tt = px->block[1] < T - t0 ? px->block[1] : T - t0;
	int64_t D = st->head_dim, half = D / 2, np = half / 2, c0 = run_shard_first(m, st->in[0], t, 2);
	int64_t S = st->head_stride > 0 ? st->head_stride : st->head_dim;       /* head h at column h*S */
	int64_t lo = st->interleaved ? 2 : 1, hi = st->interleaved ? 1 : np;  /* pair i of a half: i*lo, i*lo + hi */
	RopeScale none = { 0, 0, 0, 0 };
	double *fr = xmalloc((size_t)np * sizeof *fr);
	for (int64_t i = 0; i < np; i++)
		fr[i] = rope_frequency(st->theta, &none, i, half);
	memcpy(res, a, (size_t)(R * C) * sizeof *res);
	for (int64_t r = 0; r < R; r++) {
		int64_t tok = t0 + r % tt, at[2] = { 0, 0 };   /* column, row */
		if (tok >= g->cls) {
			int64_t p = tok - g->cls, one = g->cls > 0;
			at[0] = p % g->cols + one, at[1] = p / g->cols + one;
		}
		for (int k = 0; k < 2; k++)
			for (int64_t i = 0; i < np; i++)
				turn(a, res, r, C, st->heads, S, k * half + i * lo - c0, hi, (double)at[k] * fr[i]);
	}
	free(fr);
}

/* Each row's heads rotated by its position, or by its patch's row and
 * column (compute_tiles, tile t: a its first input, la its layout, res
 * its R x C result). */
static void k_rope(RunMachine *m, const Step *st, int64_t t, const float *a, Layout la, int64_t R, int64_t C,
		   float *res)
{
	Layout lb;
	(void)la;
	if (st->rope_grid.rows > 0) {
		k_rope_grid(m, st, t, a, R, C, res);
		return;
	}
	/* the pairs whose columns the shard holds (all of a row's,
	 * or a wide row's column block from c0: of whole heads, or
	 * interleaved of whole pairs) */
	float *pos = run_read_shard(m, st->in[1], t, &lb);
	int64_t D = st->head_dim, h2 = D / 2, c0 = run_shard_first(m, st->in[0], t, 2);
	int64_t S = st->head_stride > 0 ? st->head_stride : D;  /* head h at column h*S */
	int64_t lo = st->interleaved ? 2 : 1, hi = st->interleaved ? 1 : h2;   /* pair i: i*lo, i*lo + hi */
	double *fr = xmalloc((size_t)h2 * sizeof *fr);  /* pair i's frequency, once per shard */
	for (int64_t i = 0; i < h2; i++)
		fr[i] = rope_frequency(st->theta, &st->rope_scale, i, D);
	memcpy(res, a, (size_t)(R * C) * sizeof *res);
	for (int64_t r = 0; r < R; r++)
		for (int64_t i = 0; i < h2; i++)
			turn(a, res, r, C, st->heads, S, i * lo - c0, hi, (double)pos[r] * fr[i]);
	free(pos);
	free(fr);
}

/* Over the row's columns, or over the whole row from its blocks' sums of squares (compute_tiles, tile t: a its first input, la its layout, res its
 * R x C result). */
static void k_rmsnorm(RunMachine *m, const Step *st, int64_t t, const float *a, Layout la, int64_t R, int64_t C,
		      float *res)
{
	Layout lb, lc;
	(void)la;
	/* over the row's C columns, or (a third input) over the whole
	 * row whose column blocks' sums of squares it holds */
	float *g = run_read_shard(m, st->in[1], t, &lb);
	float *sums = st->nin > 2 ? run_read_shard(m, st->in[2], t, &lc) : NULL;
	const PTensor *xt = &m->pl->t[m->pl->p[st->in[0]].tensor];
	float width = (float)(sums ? xt->shape[xt->rank - 1] : C);
	for (int64_t r = 0; r < R; r++) {
		const float *x = a + r * C;
		float ss = 0;
		if (sums)
			for (int64_t k = 0; k < lc.cols; k++)
				ss += sums[r * lc.cols + k];
		else
			for (int64_t c = 0; c < C; c++)
				ss += x[c] * x[c];
		float inv = 1.0f / sqrtf(ss / width + (float)st->eps);
		for (int64_t c = 0; c < C; c++)
			res[r * C + c] = x[c] * inv * g[c];
	}
	free(sums);
	free(g);
}

/* Each row normalised over its columns, scaled and shifted (compute_tiles, tile t: a its first input, la its layout, res its
 * R x C result). */
static void k_layernorm(RunMachine *m, const Step *st, int64_t t, const float *a, Layout la, int64_t R, int64_t C,
			float *res)
{
	Layout lb, lc;
	(void)la;
	float *g = run_read_shard(m, st->in[1], t, &lb), *b = run_read_shard(m, st->in[2], t, &lc);
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
}

/* The K partials summed in part order, then the bias (compute_tiles, tile t: a its first input, la its layout, res its
 * R x C result). */
static void k_reduce(RunMachine *m, const Step *st, int64_t t, const float *a, Layout la, int64_t R, int64_t C,
		     float *res)
{
	Layout lb, ls;
	int64_t parts = la.rows / R;
	int bi, si;
	plan_reduce_inputs(m->pl, st, &bi, &si);
	float *bias = bi >= 0 ? run_read_shard(m, st->in[bi], t, &lb) : NULL;
	float *sums = si >= 0 ? run_read_shard(m, st->in[si], t, &ls) : NULL;
	/* each element summed from 0 in part order, then (a folded rmsnorm)
	 * each row scaled by 1/sqrt(its sum of squares / width + eps), the
	 * width the GEMM's K, then the bias added: parts outermost, so the
	 * rows are read as they lie */
	for (int64_t k = 0; k < parts; k++)
		for (int64_t q = 0; q < R * C; q++)
			res[q] += a[k * R * C + q];
	if (sums) {
		int g = plan_gemm_index(m->pl, st->op);
		float width = (float)(g >= 0 ? m->pl->g[g].k : C);
		for (int64_t r = 0; r < R; r++) {
			float ss = 0;
			for (int64_t k = 0; k < ls.cols; k++)
				ss += sums[r * ls.cols + k];
			float inv = 1.0f / sqrtf(ss / width + (float)st->eps);
			for (int64_t c = 0; c < C; c++)
				res[r * C + c] *= inv;
		}
	}
	for (int64_t q = 0; q < R * C; q++)
		res[q] += bias ? bias[q % C] : 0;
	free(sums);
	free(bias);
}

/* A product on tile t: a and b decoded into run_gemm_strips's operands,
 * the bias added, the result written in the output's format, and (on the
 * output's first replica) its expected bytes encoded; returns the CPU
 * seconds that encoding took (not the product's). */
static double tile_matmul(RunMachine *m, Work *w, const Step *st, int64_t t, const int64_t *idx, int64_t R, int64_t C,
			  int64_t **off, int64_t *offcap)
{
	const Placement *out = &m->pl->p[st->out];
	int64_t T = m->pl->machine.tiles, z[MAX_REP] = { 0 };
	const int64_t *os = m->ts[st->out].shard;
	Layout la, lb, lc;
	double enc = 0;
	float *res = run_scratch(m, w->part, 2, R * C);
	memset(res, 0, (size_t)(R * C) * sizeof *res);
	int64_t mp = cdiv(R, run_gemm_rows()) * run_gemm_rows();
	const float *ap = run_read_strips(m, w, st->in[0], t, &la, mp);
	const float *bp = run_read_panels(m, w, st->in[1], t, &lb);
	int64_t K = la.cols;
	run_gemm_strips(ap, mp * GEMM_S, bp, res, R, K, C);   /* K order */
	if (st->nin > 2) {
		float *bias = run_read_shard(m, st->in[2], t, &lc);
		for (int64_t r = 0; r < R; r++)
			for (int64_t n = 0; n < C; n++)
				res[r * C + n] += bias[n];
		free(bias);
	}
	run_write_shard(m, st->out, t, res);   /* rounds into the output's format */
	if (place_tile(out, idx, z, T) == t) {  /* the first replica: the expected bytes, not the product's time */
		double e0 = run_thread_cpu();
		run_enc_shard(m, out, w->enc, os[t], off, offcap);
		enc = run_thread_cpu() - e0;
	}
	return enc;
}

/* Compute step w->step on the tiles t of its output with t % parts == part. */
static void *compute_tiles(void *arg)
{
	Work *w = arg;
	RunMachine *m = w->m;
	const Step *st = &m->pl->s[w->step];
	const Placement *out = &m->pl->p[st->out];
	int64_t T = m->pl->machine.tiles;
	const int64_t *os = m->ts[st->out].shard;
	double cpu0 = run_thread_cpu();
	int64_t *off = NULL, offcap = 0, z[MAX_REP] = { 0 };
	double enc_cpu = 0;

	for (int64_t t = w->part; t < T; t += w->parts) {
		if (os[t] < 0 || (st->compute == C_APPEND && m->ts[st->in[0]].shard[t] < 0))
			continue;
		int64_t idx[MAX_RANK];
		place_shard_idx(out, os[t], idx);
		Layout lo = place_layout(out, idx);
		int64_t R = lo.rows, C = lo.cols;
		Layout la, lb;
		if (st->compute == C_MATMUL) {  /* both operands decoded into run_gemm_strips's */
			enc_cpu += tile_matmul(m, w, st, t, idx, R, C, &off, &offcap);
			continue;
		}
		float *res = xcalloc((size_t)(R * C), sizeof *res);
		float *a = run_read_shard(m, st->in[0], t, &la);
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
			run_attention_tile(m, w, st, t, a, la.cols, R, C, res);
			break;
		case C_APPEND:
			k_append(m, st, t, a, la, R, C, res);
			break;
		case C_MERGE:
			run_merge(a, res, la.rows / R, R, C, m->pl->p[st->in[0]].fmt == FMT_FP16);
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
			float *b = run_read_shard(m, st->in[1], t, &lb);   /* fewer rows: a table per batch entry */
			for (int64_t q = 0; q < R * C; q++)
				res[q] = a[q] + b[(q / C) % lb.rows * C + q % C];
			free(b);
			break;
		}
		case C_SILU:
			for (int64_t q = 0; q < R * C; q++)
				res[q] = run_silu_f32(a[q]);
			break;
		case C_ROPE:
			k_rope(m, st, t, a, la, R, C, res);
			break;
		case C_MUL: {           /* b a vector, the same for every row: a per-channel scale (a folded rmsnorm's) */
			float *b = run_read_shard(m, st->in[1], t, &lb);
			int64_t bn = m->pl->p[st->in[1]].rank == 1 ? C : R * C;
			for (int64_t q = 0; q < R * C; q++)
				res[q] = a[q] * b[q % bn];
			free(b);
			break;
		}
		case C_SUMSQ:                   /* each row's sum of squares over the shard's columns */
			for (int64_t r = 0; r < R; r++) {
				float ss = 0;
				for (int64_t c = 0; c < la.cols; c++)
					ss += a[r * la.cols + c] * a[r * la.cols + c];
				res[r * C] = ss;
			}
			break;
		case C_RMSNORM:
			k_rmsnorm(m, st, t, a, la, R, C, res);
			break;
		case C_LAYERNORM:
			k_layernorm(m, st, t, a, la, R, C, res);
			break;
		case C_REDUCE:
			k_reduce(m, st, t, a, la, R, C, res);
			break;
		default:
			break;
		}
		free(a);
		run_write_shard(m, st->out, t, res);   /* rounds into the output's format */
		free(res);
		if (place_tile(out, idx, z, T) == t)
			run_enc_shard(m, out, w->enc, os[t], &off, &offcap);
	}
	free(off);
	w->cpu = run_thread_cpu() - cpu0 - enc_cpu;
	return NULL;
}


/* Runs compute step i on every tile of its output, on two threads. */
int run_compute_step(RunMachine *m, int i)
{
	const Step *st = &m->pl->s[i];
	const Placement *out = &m->pl->p[st->out];
	int64_t T = m->pl->machine.tiles;
	const int64_t *os = run_shards_of(m, st->out);

	for (int64_t t = 0; t < T; t++)         /* every input on every tile, before threads (an append's */
		for (int k = 0; os[t] >= 0 && k < st->nin; k++)         /* blocks that no row reaches keep theirs) */
			if (run_shards_of(m, st->in[k])[t] < 0 && !(st->compute == C_APPEND && st->first >= 0))
				return errf(m->e, "step %d (%s): tile %lld holds no shard of '%s'", i, st->op,
					    (long long)t, m->pl->p[st->in[k]].name);
	for (int64_t t = 0; t < T; t++)
		if (os[t] >= 0)
			sim_tile(&m->s, t);
	/* The tensor's bytes as the movement check expects them: each shard's
	 * first replica as run_write_shard encoded it, copied through the layout
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
		run_decode_run(*enc, NULL, n, x->fmt, x->scale, m->val[out->tensor]);
	}
	return 0;
}
