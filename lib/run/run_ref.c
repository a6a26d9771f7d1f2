/* run_ref.c: the FP32 references' arithmetic and the stage's reference
 * (lib/run/run.h): every product fp32 with fused multiply-adds
 * (run_gemm_ref) on two threads, attention's softmax and the norms in
 * double, the row-local ops, all shared with the model's reference
 * (run_model.c); the stage's reference from its op-level steps
 * (run_reference); and the comparison of outputs (run_compare). */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "run/run_int.h"

/* ---- the FP32 reference ---- */

/* C[M x N] += A[M x K] B[K x N] (+ bias), rows split over two threads. */
typedef struct {
	const float *A, *B, *bias;
	float *C;
	int64_t r0, r1, K, N;
	double cpu;             /* the thread's CPU seconds on it */
} Gemm_;

static void *gemm_rows(void *arg)
{
	Gemm_ *g = arg;
	double cpu0 = run_thread_cpu();
	run_gemm_ref(g->A + g->r0 * g->K, g->B, g->C + g->r0 * g->N, g->r1 - g->r0, g->K, g->N);
	for (int64_t r = g->r0; g->bias && r < g->r1; r++)
		for (int64_t n = 0; n < g->N; n++)
			g->C[r * g->N + n] += g->bias[n];
	g->cpu = run_thread_cpu() - cpu0;
	return NULL;
}

void run_ref_gemm2(const float *A, const float *B, const float *bias, float *C, int64_t M, int64_t K,
		   int64_t N)
{
	Gemm_ g[2] = { { A, B, bias, C, 0, M / 2, K, N, 0 }, { A, B, bias, C, M / 2, M, K, N, 0 } };
	pthread_t th;
	double t0 = run_now();
	run_totals.ref_gemm_flops += 2.0 * (double)M * (double)K * (double)N;
	if (M >= 64 && sim_threads() > 1 && pthread_create(&th, NULL, gemm_rows, &g[1]) == 0) {
		gemm_rows(&g[0]);
		pthread_join(th, NULL);
	} else {
		g[0].r1 = M;
		gemm_rows(&g[0]);
	}
	run_totals.ref_gemm_secs += run_now() - t0;
	run_totals.ref_gemm_cpu += g[0].cpu + g[1].cpu;
}

/* The stage's reference as it runs: values per plan tensor (inputs and
 * parameters shared with the data, not copied) and the lazy parameters'
 * current instances. */
typedef struct {
	const Plan *pl;
	const RunOpts *o;
	float **ref;
	Lazy lz;
} PRef;

/* A tensor's values in the current iteration: a stacked one's instance. */
static float *inst(PRef *c, int t, int64_t iter)
{
	const Plan *pl = c->pl;
	if (!c->ref[t] && pl->t[t].count > 1 && (pl->t[t].role == R_PARAM || pl->t[t].role == R_INPUT)) {
		DataSpec d = run_plan_spec(pl, t);   /* a lazy one (run_data left it NULL) */
		return run_lazy_get(&c->lz, t, &d, c->o, iter);
	}
	return pl->t[t].count > 1 ? c->ref[t] + iter * tensor_count(&pl->t[t]) : c->ref[t];
}

/* Attention for the reference: every (batch entry, head) with index %
 * parts == part. q [B, Tq, qw] (head h's columns from h * D), kv [B, Tk,
 * kw] (kv head j = h / (H / G)'s keys from column ko + j * D, its values
 * from ko + G * D + j * D; in kv_order heads (order 1) its keys from
 * ko + 2 * j * D, its values D after them), y [B, Tq, C]. Causal: query i sees keys j <= i + Tk - Tq.
 * Products in fp32 (run_gemm_ref), the softmax's statistics and
 * exponentials in double. */
typedef struct {
	const float *q, *kv;
	float *y;
	const float *pos;       /* each query row's position (the keys it sees: 0 .. position), or NULL */
	int64_t B, Tq, Tk, qw, kw, C, H, G, ko;
	int causal, order;
	double scale;
	int part, parts;
} RefAttn;

static void *ref_attention(void *arg)
{
	RefAttn *a = arg;
	int64_t B = a->B, Tq = a->Tq, Tk = a->Tk, H = a->H, C = a->C;
	int64_t D = C / H, qw = a->qw, kw = a->kw, ks = a->order ? 2 * D : D, vo = a->ko + (a->order ? D : a->G * D);
	float *qh = xmalloc((size_t)(Tq * D) * sizeof *qh), *kt = xmalloc((size_t)(Tk * D) * sizeof *kt);
	float *vv = xmalloc((size_t)(Tk * D) * sizeof *vv), *s = xmalloc((size_t)(Tq * Tk) * sizeof *s);
	float *o = xmalloc((size_t)(Tq * D) * sizeof *o);
	double *l = xmalloc((size_t)Tq * sizeof *l);
	for (int64_t bh = a->part; bh < B * H; bh += a->parts) {
		int64_t bb = bh / H, h = bh % H, kh = h / (H / a->G);
		for (int64_t i = 0; i < Tq; i++)
			memcpy(qh + i * D, a->q + (bb * Tq + i) * qw + h * D, (size_t)D * sizeof *qh);
		for (int64_t j = 0; j < Tk; j++)
			for (int64_t d = 0; d < D; d++) {
				kt[d * Tk + j] = a->kv[(bb * Tk + j) * kw + a->ko + kh * ks + d];
				vv[j * D + d] = a->kv[(bb * Tk + j) * kw + vo + kh * ks + d];
			}
		memset(s, 0, (size_t)(Tq * Tk) * sizeof *s);
		run_gemm_ref(qh, kt, s, Tq, D, Tk);
		for (int64_t i = 0; i < Tq; i++) {
			float *p = s + i * Tk;
			double mx = -INFINITY, sum = 0;
			int64_t n = a->pos ? (int64_t)a->pos[bb * Tq + i] + 1 : a->causal ? i + Tk - Tq + 1 : Tk;
			n = n < 0 ? 0 : n > Tk ? Tk : n;
			for (int64_t j = 0; j < n; j++)
				mx = p[j] * a->scale > mx ? p[j] * a->scale : mx;
			for (int64_t j = 0; j < Tk; j++) {
				double x = j < n ? exp(p[j] * a->scale - mx) : 0;
				sum += x;
				p[j] = (float)x;
			}
			l[i] = sum;
		}
		memset(o, 0, (size_t)(Tq * D) * sizeof *o);
		run_gemm_ref(s, vv, o, Tq, Tk, D);
		for (int64_t i = 0; i < Tq; i++)
			for (int64_t d = 0; d < D; d++)
				a->y[(bb * Tq + i) * C + h * D + d] = (float)(o[i * D + d] / l[i]);
	}
	free(qh);
	free(kt);
	free(vv);
	free(s);
	free(o);
	free(l);
	return NULL;
}

/* The reference's attention on two threads: q [B, Tq, qw], kv [B, Tk, kw]
 * (fused: kv == q, keys after the C query columns), y [B, Tq, C]; G heads
 * of k and v, causal or not, or causal by the query rows' positions pos. */
void run_ref_attend(const float *q, const float *kv, const float *pos, float *y, int64_t B, int64_t Tq,
		    int64_t Tk, int64_t qw, int64_t kw, int64_t C, int64_t H, int64_t G, int causal, int order,
		    int fused, double scale)
{
	RefAttn ra = { q, kv, y, pos, B, Tq, Tk, qw, kw, C, H, G, fused ? C : 0, causal, order, scale, 0, 2 };
	RefAttn rb = ra;
	pthread_t th;
	rb.part = 1;
	if (sim_threads() > 1 && pthread_create(&th, NULL, ref_attention, &rb) == 0) {
		ref_attention(&ra);
		pthread_join(th, NULL);
	} else {
		ra.parts = 1;
		ref_attention(&ra);
	}
}

/* Layernorm of rows of C values in double: mean and variance over the
 * row, then (x - mean) / sqrt(var + eps) * g + b. */
void run_ref_layernorm(const float *x, const float *g, const float *b, float *y, int64_t rows, int64_t C,
		       double eps)
{
	for (int64_t r = 0; r < rows; r++) {
		const float *xr = x + r * C;
		double mean = 0, var = 0;
		for (int64_t c = 0; c < C; c++)
			mean += xr[c];
		mean /= (double)C;
		for (int64_t c = 0; c < C; c++)
			var += (xr[c] - mean) * (xr[c] - mean);
		var /= (double)C;
		double inv = 1 / sqrt(var + eps);
		for (int64_t c = 0; c < C; c++)
			y[r * C + c] = (float)((xr[c] - mean) * inv * g[c] + b[c]);
	}
}

/* RMSNorm of rows of C values in double: x / sqrt(mean(x^2) + eps) * g. */
void run_ref_rmsnorm(const float *x, const float *g, float *y, int64_t rows, int64_t C, double eps)
{
	for (int64_t r = 0; r < rows; r++) {
		const float *xr = x + r * C;
		double ss = 0;
		for (int64_t c = 0; c < C; c++)
			ss += (double)xr[c] * xr[c];
		double inv = 1 / sqrt(ss / (double)C + eps);
		for (int64_t c = 0; c < C; c++)
			y[r * C + c] = (float)(xr[c] * inv * g[c]);
	}
}

/* y[i] = x[i] * sigmoid(x[i]), in double. */
void run_ref_silu(const float *x, float *y, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		y[i] = (float)(x[i] / (1 + exp(-(double)x[i])));
}

/* Rotary positions on rows of C values, in double: row r's first heads
 * heads of D columns, head h at column h x S, rotated pairwise (i,
 * i + D/2), or interleaved (2i, 2i + 1), by pos[r] x pair i's frequency
 * (theta^(-2i/D), or as sc scales it: rope_frequency);
 * every other column copied. */
void run_ref_rope(const float *x, const float *pos, float *y, int64_t rows, int64_t C, int64_t heads, int64_t D,
		  int64_t S, int interleaved, double theta, const RopeScale *sc)
{
	/* pair i: elements i and i + D/2 of each head, or 2i and 2i + 1 */
	int64_t lo = interleaved ? 2 : 1, hi = interleaved ? 1 : D / 2;
	int64_t h2 = D / 2;
	double *fr = xmalloc((size_t)h2 * sizeof *fr);  /* pair i's frequency, once */
	for (int64_t i = 0; i < h2; i++)
		fr[i] = rope_frequency(theta, sc, i, D);
	memcpy(y, x, (size_t)(rows * C) * sizeof *y);
	for (int64_t r = 0; r < rows; r++)
		for (int64_t i = 0; i < h2; i++) {
			double ang = (double)pos[r] * fr[i], c = cos(ang), s = sin(ang);
			for (int64_t h = 0; h < heads; h++) {
				const float *xr = x + r * C + h * S;
				float *yr = y + r * C + h * S;
				int64_t a = i * lo, b = a + hi;
				yr[a] = (float)(xr[a] * c - xr[b] * s);
				yr[b] = (float)(xr[b] * c + xr[a] * s);
			}
		}
	free(fr);
}

/* A patch_grid rope on rows of C values (formats/model.md, "2D rope"), as
 * PE-Core's Rope2D defines it: row r is token t = r mod T of its entry,
 * at grid row y and column x (0, 0 for a class token; from 1 with class
 * tokens, else from 0); a head's angles are PE's frequency vector,
 * x f_0 .. x f_{D/4-1} then y f_0 .. y f_{D/4-1}, f_j = theta^(-4j/D),
 * pair q of the head (q < D/2) turned by its q-th angle: columns 2q and
 * 2q + 1 interleaved, else, in the half h = 2q/D it falls in, columns
 * h D/2 + j and h D/2 + j + D/4 (j = q mod D/4). */
void run_ref_rope_grid(const float *x, float *y, int64_t rows, int64_t C, int64_t heads, int64_t D, int64_t S,
		       int interleaved, double theta, const RopeGrid *g, int64_t T)
{
	int64_t np = D / 2, quarter = D / 4;
	double *ang = xmalloc((size_t)np * sizeof *ang);
	memcpy(y, x, (size_t)(rows * C) * sizeof *y);
	for (int64_t r = 0; r < rows; r++) {
		int64_t t = r % T, gy = 0, gx = 0;
		if (t >= g->cls) {
			int64_t p = t - g->cls, one = g->cls > 0;
			gy = p / g->cols + one, gx = p % g->cols + one;
		}
		for (int64_t q = 0; q < np; q++)        /* cat(x freqs, y freqs) */
			ang[q] = (double)(q < quarter ? gx : gy) * pow(theta, -2.0 * (double)(q % quarter) / (double)(D / 2));
		for (int64_t h = 0; h < heads; h++)
			for (int64_t q = 0; q < np; q++) {
				int64_t a = interleaved ? 2 * q : (q / quarter) * (D / 2) + q % quarter;
				int64_t b = interleaved ? a + 1 : a + quarter;
				const float *xr = x + r * C + h * S;
				float *yr = y + r * C + h * S;
				double c = cos(ang[q]), s = sin(ang[q]);
				yr[a] = (float)(xr[a] * c - xr[b] * s);
				yr[b] = (float)(xr[b] * c + xr[a] * s);
			}
	}
	free(ang);
}

/* The state c [B, P, W] with rows x [B, T, W] written at their positions
 * pos [B, T] (in row order; a position outside 0 .. P - 1 writes nothing,
 * which run_data refuses). */
void run_ref_append(const float *c, const float *x, const float *pos, float *y, int64_t B, int64_t T,
		    int64_t P, int64_t W)
{
	memcpy(y, c, (size_t)(B * P * W) * sizeof *y);
	for (int64_t b = 0; b < B; b++)
		for (int64_t j = 0; j < T; j++) {
			int64_t p = (int64_t)pos[b * T + j];
			if (p >= 0 && p < P)
				memcpy(y + (b * P + p) * W, x + (b * T + j) * W, (size_t)W * sizeof *y);
		}
}

/* y [B, 1, C]: each batch entry's last row of x [B, T, C]. */
void run_ref_last(const float *x, float *y, int64_t B, int64_t T, int64_t C)
{
	for (int64_t b = 0; b < B; b++)
		memcpy(y + b * C, x + ((b + 1) * T - 1) * C, (size_t)C * sizeof *y);
}

void run_ref_mul(const float *a, const float *b, float *y, int64_t n, int64_t nb)
{
	for (int64_t i = 0; i < n; i++)
		y[i] = a[i] * b[i % nb];
}


/* y[i] = x[i] + b[i % nb]: b may be a [tokens, features] table added to
 * every batch entry. */
void run_ref_add(const float *x, const float *b, float *y, int64_t n, int64_t nb)
{
	for (int64_t i = 0; i < n; i++)
		y[i] = x[i] + b[i % nb];
}

/* A folded rmsnorm's result, which the stage leaves on no tile: its x
 * normed, by the scale its mul step (the one writing pre, the GEMM's a)
 * reads, at the eps of the GEMM's reduction. As the model's reference
 * computes it: NULL when no such mul step is there. */
static float *folded_norm(PRef *c, int pre, int x, double eps, int64_t iter)
{
	const Plan *pl = c->pl;
	for (int s = 0; s < pl->ns; s++) {
		const Step *st = &pl->s[s];
		if (st->kind != STEP_COMPUTE || pl->p[st->out].tensor != pre || pl->p[st->in[0]].tensor != x ||
		    !plan_norm_fold(pl, st))
			continue;
		int64_t n = tensor_count(&pl->t[x]), C = pl->t[x].shape[pl->t[x].rank - 1];
		float *y = xmalloc((size_t)n * sizeof *y);
		run_ref_rmsnorm(c->ref[x], inst(c, pl->p[st->in[1]].tensor, iter), y, n / C, C, eps);
		return y;
	}
	return NULL;
}

/* One op-level step of the reference (GEMMs at their first step). */
static void ref_step(PRef *c, int s, const int *gemm_at, int64_t iter)
{
	const Plan *pl = c->pl;
	float **ref = c->ref;
	const Step *st = &pl->s[s];
	if (gemm_at[s] >= 0) {
		const Gemm *G = &pl->g[gemm_at[s]];
		int64_t M = G->m, K = G->k, N = G->n;
		float *y = xzeroed((size_t)(M * N), sizeof *y);   /* read before written */
		int red, x = plan_fold_rows(pl, G->op, &red);
		float *a = x >= 0 ? folded_norm(c, G->a, x, pl->s[red].eps, iter) : NULL;
		run_ref_gemm2(a ? a : ref[G->a], inst(c, G->b, iter), G->bias >= 0 ? inst(c, G->bias, iter) : NULL,
			      y, M, K, N);
		free(a);
		free(ref[G->out]);
		ref[G->out] = y;
		
		return;
	}
	int out = pl->p[st->out].tensor, in = pl->p[st->in[0]].tensor;
	if (st->compute == C_ATTENTION && pl->t[out].role == R_PARTIAL)
		for (int k = s + 1; k < pl->ns; k++)    /* key blocks: the op's result is the merge's */
			if (pl->s[k].kind == STEP_COMPUTE && pl->s[k].compute == C_MERGE &&
			    strcmp(pl->s[k].op, st->op) == 0) {
				out = pl->p[pl->s[k].out].tensor;
				break;
			}
	int64_t n = tensor_count(&pl->t[out]), C = pl->t[out].shape[pl->t[out].rank - 1];
	float *y = xmalloc((size_t)n * sizeof *y);
	const float *x = inst(c, in, iter);
	switch (st->compute) {
	case C_GELU:
		for (int64_t i = 0; i < n; i++)
			y[i] = run_gelu_f32(x[i]);
		break;
	case C_ADD: {
		int bt = pl->p[st->in[1]].tensor;
		run_ref_add(x, inst(c, bt, iter), y, n, tensor_count(&pl->t[bt]));
		break;
	}
	case C_BROADCAST:
		for (int64_t i = 0, nx = tensor_count(&pl->t[in]); i < n; i++)
			y[i] = x[i % nx];
		break;
	case C_LAYERNORM:
		run_ref_layernorm(x, inst(c, pl->p[st->in[1]].tensor, iter),
				  inst(c, pl->p[st->in[2]].tensor, iter), y, n / C, C, st->eps);
		break;
	case C_RMSNORM:
		run_ref_rmsnorm(x, inst(c, pl->p[st->in[1]].tensor, iter), y, n / C, C, st->eps);
		break;
	case C_SILU:
		run_ref_silu(x, y, n);
		break;
	case C_MUL:
		run_ref_mul(x, inst(c, pl->p[st->in[1]].tensor, iter), y, n,
			    tensor_count(&pl->t[pl->p[st->in[1]].tensor]));        /* (a vector: a per-channel scale) */
		break;
	case C_ROPE:
		if (st->rope_grid.rows > 0) {
			run_ref_rope_grid(x, y, n / C, C, st->heads, st->head_dim,
					  st->head_stride > 0 ? st->head_stride : st->head_dim, st->interleaved,
					  st->theta, &st->rope_grid, pl->t[pl->p[st->in[0]].tensor].shape[1]);
			break;
		}
		run_ref_rope(x, inst(c, pl->p[st->in[1]].tensor, iter), y, n / C, C, st->heads, st->head_dim,
			     st->head_stride > 0 ? st->head_stride : st->head_dim, st->interleaved, st->theta,
			     &st->rope_scale);
		break;
	case C_ATTENTION: {
		const PTensor *Q = &pl->t[in], *KV = &pl->t[pl->p[st->in[1]].tensor];
		const float *pos = st->nin > 3 ? inst(c, pl->p[st->in[3]].tensor, iter) : NULL;
		run_ref_attend(x, ref[pl->p[st->in[1]].tensor], pos, y, Q->shape[0], Q->shape[1], KV->shape[1],
			       Q->shape[2], KV->shape[2], C, st->heads, st->kv_heads, st->causal, st->kv_order, Q == KV,
			       st->scale);
		break;
	}
	case C_LAST:
		run_ref_last(x, y, pl->t[in].shape[0], pl->t[in].shape[1], C);
		break;
	case C_APPEND: {
		const PTensor *S = &pl->t[out], *X = &pl->t[in];
		float *at = ref[out] + (S->count > 1 ? iter * n : 0);
		run_ref_append(at, x, inst(c, pl->p[st->in[1]].tensor, iter), y, S->shape[0], X->shape[1],
			       S->shape[1], S->shape[2]);
		memcpy(at, y, (size_t)n * sizeof *y);   /* in place: a stacked state's instance */
		free(y);
		return;
	}
	default:        /* a cast op or a carry: activations stay fp32 */
		memcpy(y, x, (size_t)n * sizeof *y);
		break;
	}
	free(ref[out]);
	ref[out] = y;
	
}

int run_reference(const Plan *pl, const RunOpts *o, float *const *val, float **ref, Err *e)
{
	PRef c = { pl, o, ref, { NULL, NULL, 0 } };
	(void)e;
	run_lazy_init(&c.lz, pl->nt);
	for (int t = 0; t < pl->nt; t++)
		ref[t] = pl->t[t].role == R_INPUT || pl->t[t].role == R_PARAM ? val[t] :
			 pl->t[t].role == R_STATE ? run_state_values(o, pl->t[t].name, tensor_values(&pl->t[t]), 1) :
			 NULL;
	/* Op-level steps: every compute but those inside a matmul (casts,
	 * packs, partial products, reductions), which stand for the GEMM
	 * record at the op's first compute step. */
	int *gemm_at = xmalloc((size_t)pl->ns * sizeof *gemm_at);
	char *skip = xcalloc((size_t)pl->ns + 1, 1), *seen = xcalloc((size_t)pl->ng + 1, 1);
	for (int s = 0; s < pl->ns; s++) {
		int g = pl->s[s].kind == STEP_COMPUTE ? plan_gemm_index(pl, pl->s[s].op) : -1;
		gemm_at[s] = -1;
		skip[s] = pl->s[s].kind != STEP_COMPUTE || (g >= 0 && seen[g]) ||
			  pl->s[s].compute == C_MERGE ||        /* its attention step stands for the op */
			  pl->s[s].compute == C_SUMSQ;          /* and its rmsnorm step for a norm */
		if (g >= 0 && !seen[g])
			gemm_at[s] = g, seen[g] = 1;
	}
	for (int s = 0; s < pl->ns; s++) {
		int r = plan_repeat_of(pl, s);
		if (r >= 0 && s == pl->r[r].first) {
			for (int64_t it = 0; it < pl->r[r].count; it++)
				for (int b = pl->r[r].first; b <= pl->r[r].last; b++)
					if (!skip[b])
						ref_step(&c, b, gemm_at, it);
			s = pl->r[r].last;
			continue;
		}
		if (!skip[s])
			ref_step(&c, s, gemm_at, 0);
	}
	for (int t = 0; t < pl->nt; t++)        /* the shared data stays the caller's */
		if (pl->t[t].role == R_INPUT || pl->t[t].role == R_PARAM)
			ref[t] = NULL;
	run_lazy_free(&c.lz);
	free(gemm_at);
	free(skip);
	free(seen);
	return 0;
}

void run_compare(const float *a, const float *b, int64_t n, double *cosine, double *max_abs)
{
	double ab = 0, aa = 0, bb = 0, m = 0;
	for (int64_t i = 0; i < n; i++) {
		ab += (double)a[i] * b[i];
		aa += (double)a[i] * a[i];
		bb += (double)b[i] * b[i];
		double d = fabs((double)a[i] - b[i]);
		if (d > m || isnan(d))
			m = isnan(d) ? INFINITY : d;
	}
	*cosine = aa > 0 && bb > 0 ? ab / sqrt(aa * bb) : (aa == bb ? 1 : 0);
	*max_abs = m;
}
