/* run_ref.c: the FP32 references (lib/run/run.h): the stage's, from its
 * op-level steps (run_reference), and the model's, from its definition
 * and data alone (run_model_reference), every product fp32 with fused
 * multiply-adds (run_gemm_ref) on two threads; the check that a stage
 * agrees with the model it lowers (run_check_model), the comparison of
 * outputs (run_compare) and the fp8 calibration from the model's
 * reference (run_calibrate). */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run/run_int.h"

/* ---- the FP32 reference ---- */

static int is_gemm_op(const Plan *pl, const char *op)
{
	for (int g = 0; g < pl->ng; g++)
		if (strcmp(pl->g[g].op, op) == 0)
			return g;
	return -1;
}

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
	double cpu0 = thread_cpu();
	run_gemm_ref(g->A + g->r0 * g->K, g->B, g->C + g->r0 * g->N, g->r1 - g->r0, g->K, g->N);
	for (int64_t r = g->r0; g->bias && r < g->r1; r++)
		for (int64_t n = 0; n < g->N; n++)
			g->C[r * g->N + n] += g->bias[n];
	g->cpu = thread_cpu() - cpu0;
	return NULL;
}

static void gemm2(const float *A, const float *B, const float *bias, float *C, int64_t M, int64_t K,
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
		DataSpec d = plan_spec(pl, t);   /* a lazy one (run_data left it NULL) */
		return lazy_get(&c->lz, t, &d, c->o, iter);
	}
	return pl->t[t].count > 1 ? c->ref[t] + iter * tensor_count(&pl->t[t]) : c->ref[t];
}

static void track(double *amax, int t, const float *y, int64_t n)
{
	for (int64_t i = 0; amax && i < n; i++)
		if (fabs((double)y[i]) > amax[t])
			amax[t] = fabs((double)y[i]);
}

/* Attention for the reference: every (batch entry, head) with index %
 * parts == part. q [B, Tq, qw] (head h's columns from h * D), kv [B, Tk,
 * kw] (kv head h / (H / G)'s keys from column ko, its values from
 * ko + G * D), y [B, Tq, C]. Causal: query i sees keys j <= i + Tk - Tq.
 * Products in fp32 (run_gemm_ref), the softmax's statistics and
 * exponentials in double. */
typedef struct {
	const float *q, *kv;
	float *y;
	const float *pos;       /* each query row's position (the keys it sees: 0 .. position), or NULL */
	int64_t B, Tq, Tk, qw, kw, C, H, G, ko;
	int causal;
	double scale;
	int part, parts;
} RefAttn;

static void *ref_attention(void *arg)
{
	RefAttn *a = arg;
	int64_t B = a->B, Tq = a->Tq, Tk = a->Tk, H = a->H, C = a->C;
	int64_t D = C / H, qw = a->qw, kw = a->kw, vo = a->ko + a->G * D;
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
				kt[d * Tk + j] = a->kv[(bb * Tk + j) * kw + a->ko + kh * D + d];
				vv[j * D + d] = a->kv[(bb * Tk + j) * kw + vo + kh * D + d];
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
static void ref_attend(const float *q, const float *kv, const float *pos, float *y, int64_t B, int64_t Tq,
		       int64_t Tk, int64_t qw, int64_t kw, int64_t C, int64_t H, int64_t G, int causal, int fused,
		       double scale)
{
	RefAttn ra = { q, kv, y, pos, B, Tq, Tk, qw, kw, C, H, G, fused ? C : 0, causal, scale, 0, 2 };
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
static void ref_layernorm(const float *x, const float *g, const float *b, float *y, int64_t rows, int64_t C,
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
static void ref_rmsnorm(const float *x, const float *g, float *y, int64_t rows, int64_t C, double eps)
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
static void ref_silu(const float *x, float *y, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		y[i] = (float)(x[i] / (1 + exp(-(double)x[i])));
}

/* Rotary positions on rows of C values, in double: row r's first heads
 * heads of D columns rotated pairwise (i, i + D/2) by pos[r] x
 * theta^(-2i/D); the columns after them copied. */
static void ref_rope(const float *x, const float *pos, float *y, int64_t rows, int64_t C, int64_t heads, int64_t D,
		     double theta)
{
	int64_t h2 = D / 2;
	double *fr = xmalloc((size_t)h2 * sizeof *fr);  /* theta^(-2i/D), once */
	for (int64_t i = 0; i < h2; i++)
		fr[i] = pow(theta, -2.0 * (double)i / (double)D);
	memcpy(y, x, (size_t)(rows * C) * sizeof *y);
	for (int64_t r = 0; r < rows; r++)
		for (int64_t i = 0; i < h2; i++) {
			double ang = (double)pos[r] * fr[i], c = cos(ang), s = sin(ang);
			for (int64_t h = 0; h < heads; h++) {
				const float *xr = x + r * C + h * D;
				float *yr = y + r * C + h * D;
				yr[i] = (float)(xr[i] * c - xr[i + h2] * s);
				yr[i + h2] = (float)(xr[i + h2] * c + xr[i] * s);
			}
		}
	free(fr);
}

/* The state c [B, P, W] with rows x [B, T, W] written at their positions
 * pos [B, T] (in row order; a position outside 0 .. P - 1 writes nothing,
 * which run_data refuses). */
static void ref_append(const float *c, const float *x, const float *pos, float *y, int64_t B, int64_t T,
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
static void ref_last(const float *x, float *y, int64_t B, int64_t T, int64_t C)
{
	for (int64_t b = 0; b < B; b++)
		memcpy(y + b * C, x + ((b + 1) * T - 1) * C, (size_t)C * sizeof *y);
}

static void ref_mul(const float *a, const float *b, float *y, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		y[i] = a[i] * b[i];
}

/* y[i] = x[i] + b[i % nb]: b may be a [tokens, features] table added to
 * every batch entry. */
static void ref_add(const float *x, const float *b, float *y, int64_t n, int64_t nb)
{
	for (int64_t i = 0; i < n; i++)
		y[i] = x[i] + b[i % nb];
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
		gemm2(ref[G->a], inst(c, G->b, iter), G->bias >= 0 ? inst(c, G->bias, iter) : NULL,
		      y, M, K, N);
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
			y[i] = gelu(x[i]);
		break;
	case C_ADD: {
		int bt = pl->p[st->in[1]].tensor;
		ref_add(x, inst(c, bt, iter), y, n, tensor_count(&pl->t[bt]));
		break;
	}
	case C_BROADCAST:
		for (int64_t i = 0, nx = tensor_count(&pl->t[in]); i < n; i++)
			y[i] = x[i % nx];
		break;
	case C_LAYERNORM:
		ref_layernorm(x, inst(c, pl->p[st->in[1]].tensor, iter),
			      inst(c, pl->p[st->in[2]].tensor, iter), y, n / C, C, st->eps);
		break;
	case C_RMSNORM:
		ref_rmsnorm(x, inst(c, pl->p[st->in[1]].tensor, iter), y, n / C, C, st->eps);
		break;
	case C_SILU:
		ref_silu(x, y, n);
		break;
	case C_MUL:
		ref_mul(x, inst(c, pl->p[st->in[1]].tensor, iter), y, n);
		break;
	case C_ROPE:
		ref_rope(x, inst(c, pl->p[st->in[1]].tensor, iter), y, n / C, C, st->heads, st->head_dim, st->theta);
		break;
	case C_ATTENTION: {
		const PTensor *Q = &pl->t[in], *KV = &pl->t[pl->p[st->in[1]].tensor];
		const float *pos = st->nin > 3 ? inst(c, pl->p[st->in[3]].tensor, iter) : NULL;
		ref_attend(x, ref[pl->p[st->in[1]].tensor], pos, y, Q->shape[0], Q->shape[1], KV->shape[1],
			   Q->shape[2], KV->shape[2], C, st->heads, st->kv_heads, st->causal, Q == KV, st->scale);
		break;
	}
	case C_LAST:
		ref_last(x, y, pl->t[in].shape[0], pl->t[in].shape[1], C);
		break;
	case C_APPEND: {
		const PTensor *S = &pl->t[out], *X = &pl->t[in];
		float *at = ref[out] + (S->count > 1 ? iter * n : 0);
		ref_append(at, x, inst(c, pl->p[st->in[1]].tensor, iter), y, S->shape[0], X->shape[1],
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
	lazy_init(&c.lz, pl->nt);
	for (int t = 0; t < pl->nt; t++)
		ref[t] = pl->t[t].role == R_INPUT || pl->t[t].role == R_PARAM ? val[t] :
			 pl->t[t].role == R_STATE ? state_values(o, pl->t[t].name, tensor_values(&pl->t[t]), 1) : NULL;
	/* Op-level steps: every compute but those inside a matmul (casts,
	 * packs, partial products, reductions), which stand for the GEMM
	 * record at the op's first compute step. */
	int *gemm_at = xmalloc((size_t)pl->ns * sizeof *gemm_at);
	char *skip = xcalloc((size_t)pl->ns + 1, 1), *seen = xcalloc((size_t)pl->ng + 1, 1);
	for (int s = 0; s < pl->ns; s++) {
		int g = pl->s[s].kind == STEP_COMPUTE ? is_gemm_op(pl, pl->s[s].op) : -1;
		gemm_at[s] = -1;
		skip[s] = pl->s[s].kind != STEP_COMPUTE || (g >= 0 && seen[g]) ||
			  pl->s[s].compute == C_MERGE;  /* its attention step stands for the op */
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
	lazy_free(&c.lz);
	free(gemm_at);
	free(skip);
	free(seen);
	return 0;
}

/* ---- the reference from the model ---- */

static int64_t mtensor_count(const MTensor *t)
{
	int64_t n = 1;
	for (int a = 0; a < t->rank; a++)
		n *= t->shape[a];
	return n;
}

static DataSpec model_spec(const Model *m, const Scales *sc, int t)
{
	const MTensor *x = &m->t[t];
	int scale = x->scale;
	if (x->dtype == FMT_FP8)
		scales_find(sc, x->name, &scale);
	return (DataSpec){ x->name, x->rank, x->shape, x->count, x->dtype, scale, model_dist(m, t) };
}

int run_model_data(const Model *m, const Scales *sc, const RunOpts *o, const Plan *pl, float *const *pval,
		   ModelRef *r, Err *e)
{
	memset(r, 0, sizeof *r);
	r->n = m->nt;
	r->v = xcalloc((size_t)m->nt + 1, sizeof *r->v);
	r->own = xcalloc((size_t)m->nt + 1, 1);
	Lazy z;
	lazy_init(&z, m->nt);
	r->inst = z.buf, r->at = z.at;
	r->sc = sc;
	r->o = *o;
	if (data_dir_ok(o, e))
		return -1;
	RunOpts oi = input_opts(o);
	for (int i = 0; i < m->nt; i++) {
		if (m->t[i].role == T_STATE) {
			r->v[i] = state_values(o, m->t[i].name, mtensor_count(&m->t[i]) * m->t[i].count, 1);
			r->own[i] = 1;
		}
		if (m->t[i].role == T_ACT || m->t[i].role == T_STATE)
			continue;
		DataSpec d = model_spec(m, sc, i);
		const float *g = m->t[i].role == T_INPUT ? carry_find(o->given, d.name, spec_values(&d), 0) : NULL;
		if (g) {
			r->v[i] = xmalloc((size_t)spec_values(&d) * sizeof *r->v[i]);
			memcpy(r->v[i], g, (size_t)spec_values(&d) * sizeof *r->v[i]);
			r->own[i] = 1;
			continue;
		}
		if (lazy_spec(&d, o))
			continue;               /* made an instance at a time (minst) */
		int t = pl && pval ? plan_find_tensor(pl, d.name) : -1;
		if (t >= 0 && pval[t] && (pl->t[t].role == R_INPUT || pl->t[t].role == R_PARAM)) {
			DataSpec q = plan_spec(pl, t);
			if (same_spec(&d, &q)) {        /* made the same way: the same values */
				r->v[i] = pval[t];
				continue;
			}
		}
		r->v[i] = xmalloc((size_t)spec_values(&d) * sizeof *r->v[i]);
		r->own[i] = 1;
		if (tensor_data(&d, m->t[i].role == T_INPUT ? &oi : o, r->v[i], e))
			return -1;
	}
	return 0;
}

/* Tensor t's values in iteration iter: a stacked parameter's instance. */
static float *minst(const Model *m, ModelRef *r, int t, int64_t iter)
{
	if (!r->v[t] && m->t[t].count > 1 && m->t[t].role != T_ACT) {
		Lazy z = { r->inst, r->at, r->n };     /* a lazy one */
		DataSpec d = model_spec(m, r->sc, t);
		return lazy_get(&z, t, &d, &r->o, iter);
	}
	return m->t[t].count > 1 ? r->v[t] + iter * mtensor_count(&m->t[t]) : r->v[t];
}

static void mset(const Model *m, ModelRef *r, int t, float *y)
{
	if (r->own[t])
		free(r->v[t]);
	r->v[t] = y;
	r->own[t] = 1;
	track(r->amax, t, y, mtensor_count(&m->t[t]));
}

/* One op of the model on fp32 values (formats/model.md): no cast inside a
 * matmul, a cast op keeps its input's values, every result fp32. */
void run_model_op(const Model *m, ModelRef *r, int k, int64_t iter)
{
	const MOp *op = &m->ops[k];
	const MTensor *out = &m->t[op->out], *in = &m->t[op->in[0]];
	int64_t n = mtensor_count(out), C = out->shape[out->rank - 1];
	const float *x = minst(m, r, op->in[0], iter);
	float *y;
	if (op->kind == OP_MATMUL) {
		const MTensor *b = &m->t[op->in[1]];
		int64_t K = b->shape[0], N = b->shape[1], M = mtensor_count(in) / K;
		y = xzeroed((size_t)(M * N), sizeof *y);   /* read before written */
		gemm2(x, minst(m, r, op->in[1], iter), op->in[2] >= 0 ? minst(m, r, op->in[2], iter) : NULL, y,
		      M, K, N);
		mset(m, r, op->out, y);
		return;
	}
	y = xmalloc((size_t)n * sizeof *y);
	switch (op->kind) {
	case OP_GELU:
		for (int64_t i = 0; i < n; i++)
			y[i] = gelu(x[i]);
		break;
	case OP_ADD:
		ref_add(x, minst(m, r, op->in[1], iter), y, n, mtensor_count(&m->t[op->in[1]]));
		break;
	case OP_BROADCAST:
		for (int64_t i = 0, nx = mtensor_count(in); i < n; i++)
			y[i] = x[i % nx];
		break;
	case OP_LAYERNORM:
		ref_layernorm(x, minst(m, r, op->in[1], iter), minst(m, r, op->in[2], iter), y, n / C, C, op->eps);
		break;
	case OP_RMSNORM:
		ref_rmsnorm(x, minst(m, r, op->in[1], iter), y, n / C, C, op->eps);
		break;
	case OP_SILU:
		ref_silu(x, y, n);
		break;
	case OP_MUL:
		ref_mul(x, minst(m, r, op->in[1], iter), y, n);
		break;
	case OP_ROPE:
		ref_rope(x, minst(m, r, op->in[1], iter), y, n / C, C, op->heads, op->head_dim, op->theta);
		break;
	case OP_LAST:
		ref_last(x, y, in->shape[0], in->shape[1], C);
		break;
	case OP_APPEND:
		ref_append(minst(m, r, op->out, iter), x, minst(m, r, op->in[1], iter), y, out->shape[0], in->shape[1],
			   out->shape[1], out->shape[2]);
		if (out->count > 1) {   /* a stacked state: this iteration's instance, in place */
			memcpy(minst(m, r, op->out, iter), y, (size_t)n * sizeof *y);
			track(r->amax, op->out, y, n);
			free(y);
			return;
		}
		break;
	case OP_ATTENTION: {
		const MTensor *kv = &m->t[op->in[1]];
		const float *pos = op->in[2] >= 0 ? minst(m, r, op->in[2], iter) : NULL;
		ref_attend(x, minst(m, r, op->in[1], iter), pos, y, in->shape[0], in->shape[1], kv->shape[1],
			   in->shape[2], kv->shape[2], C, op->heads, op->kv_heads, op->causal, op->in[0] == op->in[1],
			   1.0 / sqrt((double)(C / op->heads)));
		break;
	}
	case OP_EMBED: {                /* the reference's own lookup (the machine's host op is embed_rows) */
		const MTensor *tb = &m->t[op->in[1]];
		const float *tab = minst(m, r, op->in[1], iter);
		int64_t cols = tb->shape[1];    /* [V, C] rows, or [C, V]: column id */
		for (int64_t q = 0; q < n; q++) {
			int64_t row = q / C, c = q % C, id = (int64_t)x[row];
			y[q] = op->transposed ? tab[c * cols + id] : tab[id * cols + c];
		}
		break;
	}
	case OP_PATCHIFY:
		patchify(x, in->shape[0], in->shape[1], in->shape[2], in->shape[3], op->patch, op->cls, y);
		break;
	default:        /* cast: the reference keeps fp32 */
		memcpy(y, x, (size_t)n * sizeof *y);
		break;
	}
	mset(m, r, op->out, y);
}

void run_model_ops(const Model *m, ModelRef *r)
{
	for (int k = 0; k < m->nops; k++) {
		int ri = m->ops[k].rep;
		if (ri < 0) {
			run_model_op(m, r, k, 0);
			continue;
		}
		const MRepeat *rp = &m->rep[ri];
		int64_t n = mtensor_count(&m->t[rp->carry]);
		float *c = xmalloc((size_t)n * sizeof *c);
		memcpy(c, r->v[rp->in], (size_t)n * sizeof *c);
		mset(m, r, rp->carry, c);
		for (int64_t it = 0; it < rp->count; it++) {
			for (int b = rp->first; b <= rp->last; b++)
				run_model_op(m, r, b, it);
			memcpy(r->v[rp->carry], r->v[m->ops[rp->last].out], (size_t)n * sizeof *c);
			track(r->amax, rp->carry, r->v[rp->carry], n);
		}
		k = rp->last;
	}
}

int run_model_reference(const Model *m, const Scales *sc, const RunOpts *o, const Plan *pl,
			float *const *pval, ModelRef *r, Err *e)
{
	if (run_model_data(m, sc, o, pl, pval, r, e))
		return -1;
	run_model_ops(m, r);
	return 0;
}

void model_ref_free(ModelRef *r)
{
	for (int i = 0; i < r->n; i++) {
		if (r->own[i])
			free(r->v[i]);
		if (r->inst)
			free(r->inst[i]);
	}
	free(r->inst);
	free(r->at);
	free(r->v);
	free(r->own);
	free(r->amax);
	memset(r, 0, sizeof *r);
}

static int tensor_is(const Plan *pl, int t, const Model *m, int mt)
{
	return t >= 0 && mt >= 0 && strcmp(pl->t[t].name, m->t[mt].name) == 0;
}

int run_check_model(const Plan *pl, const Model *m, const Scales *sc, Err *e)
{
	const char *f = m->file;
	if (strcmp(pl->model, m->name))
		return errf(e, "%s: the program lowers model '%s', not '%s'", f, pl->model, m->name);
	for (int i = 0; i < m->nt; i++) {
		const MTensor *x = &m->t[i];
		int t = plan_find_tensor(pl, x->name);
		if (t < 0)
			return err_at(e, f, x->line, x->col, "tensor '%s' is not in the program's stage", x->name);
		const PTensor *y = &pl->t[t];
		int same = y->rank == x->rank && y->count == x->count;
		for (int k = 0; same && k < x->rank; k++)
			same = y->shape[k] == x->shape[k];
		if (!same)
			return err_at(e, f, x->line, x->col, "tensor '%s': the stage gives it another shape or "
				      "instance count", x->name);
		if (y->fmt != x->dtype)
			return err_at(e, f, x->line, x->col, "tensor '%s': the stage says %s, the model %s",
				      x->name, fmt_name(y->fmt), fmt_name(x->dtype));
		int want = x->scale;
		if (x->dtype == FMT_FP8)
			scales_find(sc, x->name, &want);
		if (x->dtype == FMT_FP8 && y->scale != want)
			return err_at(e, f, x->line, x->col, "tensor '%s': the stage's fp8 scale is %d, %s %d",
				      x->name, y->scale, sc ? "the scales file's (or the model's)" : "the model's",
				      want);
		if (x->output != (y->role == R_OUTPUT))
			return err_at(e, f, x->line, x->col, "tensor '%s' is %san output of the model but %san "
				      "output of the stage", x->name, x->output ? "" : "not ", x->output ? "not " : "");
		char cast[300];
		snprintf(cast, sizeof cast, "%s.fp8", x->name);
		int c = plan_find_tensor(pl, cast), cw = 0;
		scales_find(sc, x->name, &cw);
		if (c >= 0 && pl->t[c].scale != cw)
			return err_at(e, f, x->line, x->col, "tensor '%s': the stage's cast '%s' has fp8 scale %d, "
				      "%s %d", x->name, cast, pl->t[c].scale, sc ? "the scales file's" : "the default",
				      cw);
	}
	for (int t = 0; t < pl->nt; t++) {
		int known = 0;
		for (int i = 0; !known && i < m->nt; i++)
			known = strcmp(m->t[i].name, pl->t[t].name) == 0;
		if (pl->t[t].role == R_OUTPUT && !known)
			return errf(e, "%s: the stage's output '%s' is not a tensor of the model", f, pl->t[t].name);
	}
	for (int i = 0; i < m->nops; i++) {
		const MOp *op = &m->ops[i];
		int steps = 0;
		for (int s = 0; s < pl->ns; s++) {
			const Step *st = &pl->s[s];
			if (strcmp(st->op, op->name))
				continue;
			steps++;
			if ((op->kind == OP_LAYERNORM || op->kind == OP_RMSNORM) && st->kind == STEP_COMPUTE &&
			    (st->compute == C_LAYERNORM || st->compute == C_RMSNORM) && st->eps != op->eps)
				return err_at(e, f, op->line, op->col, "op '%s': the stage's %s step %d has "
					      "eps %g, the model %g", op->name, compute_name(st->compute), s, st->eps,
					      op->eps);
		}
		for (int h = 0; (op->kind == OP_PATCHIFY || op->kind == OP_EMBED) && h < pl->nh; h++) {
			const Host *ho = &pl->h[h];
			if (strcmp(ho->op, op->name))
				continue;
			if ((ho->kind == HOST_EMBED) != (op->kind == OP_EMBED) || !tensor_is(pl, ho->in, m, op->in[0]) ||
			    !tensor_is(pl, ho->out, m, op->out) ||
			    (ho->kind == HOST_EMBED && (!tensor_is(pl, ho->table, m, op->in[1]) ||
							ho->transposed != op->transposed)))
				return err_at(e, f, op->line, op->col, "op '%s': the stage's host op of that name is not "
					      "the model's (kind, operands, result or orientation differ)", op->name);
			steps++;
		}
		if (!steps)
			return err_at(e, f, op->line, op->col, "op '%s' has no step in the program's stage",
				      op->name);
		if (op->kind != OP_MATMUL)
			continue;
		const Gemm *g = NULL;
		for (int k = 0; k < pl->ng; k++)
			if (strcmp(pl->g[k].op, op->name) == 0)
				g = &pl->g[k];
		if (!g || !tensor_is(pl, g->a, m, op->in[0]) || !tensor_is(pl, g->b, m, op->in[1]) ||
		    !tensor_is(pl, g->out, m, op->out) ||
		    (op->in[2] >= 0 ? !tensor_is(pl, g->bias, m, op->in[2]) : g->bias >= 0))
			return err_at(e, f, op->line, op->col, "matmul '%s': the stage's GEMM record does not "
				      "read and write the model's a, b, bias and out", op->name);
	}
	return run_check_steps(pl, m, e);
}

int run_check_texts(const Plan *pl, const char *model, size_t mlen, const char *mname,
		    const char *scales, size_t slen, const char *sname, Err *e)
{
	Model md;
	Scales sc = { NULL, NULL, 0 };
	Input *in = input_open_mem(mname, model, mlen, e);
	if (!in || model_load_input(&md, in, e))
		return -1;
	int rc = 0;
	if (scales) {
		Input *si = input_open_mem(sname, scales, slen, e);
		rc = !si || scales_load_input(&sc, si, e) ? -1 : 0;
	}
	if (!rc)
		rc = run_check_model(pl, &md, scales ? &sc : NULL, e);
	scales_free(&sc);
	model_free(&md);
	return rc;
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

/* ---- calibration ---- */

static double amax_of(const float *v, int64_t n)
{
	double m = 0;
	for (int64_t i = 0; i < n; i++)
		m = fmax(m, fabs(v[i]));
	return m;
}

int run_calibrate(const Model *m, const RunOpts *ro, Scales *sc, Err *e)
{
	RunOpts raw = *ro;
	ModelRef r;
	int rc = -1;

	raw.quantized = 0;
	if (run_model_data(m, NULL, &raw, NULL, NULL, &r, e))
		goto out;
	/* fp8 parameters and inputs: from their own values, then quantized */
	for (int t = 0; t < m->nt; t++) {
		const MTensor *x = &m->t[t];
		if (x->role == T_ACT || x->role == T_STATE)     /* (a state: from what its appends write, below) */
			continue;
		int scale = x->scale;
		int64_t n = mtensor_count(x) * x->count;
		if (x->dtype == FMT_FP8) {
			scale = scale_for_amax(amax_of(r.v[t], n));
			scales_add(sc, x->name, scale);
		}
		quantize_n(r.v[t], n, x->dtype, scale);
	}
	r.amax = xcalloc((size_t)m->nt + 1, sizeof *r.amax);
	run_model_ops(m, &r);          /* amax over every iteration */
	/* activations cast to fp8: a matmul's a when its b is fp8 (amp-plan's
	 * <a>.fp8), and a cast op's fp8 result */
	for (int t = 0; t < m->nt; t++) {
		int cast = (m->t[t].role == T_ACT || m->t[t].role == T_STATE) && m->t[t].dtype == FMT_FP8;
		for (int k = 0; !cast && k < m->nops; k++)
			cast = m->ops[k].kind == OP_MATMUL && m->ops[k].in[0] == t &&
			       m->t[m->ops[k].in[1]].dtype == FMT_FP8 && m->t[t].dtype != FMT_FP8;
		if (cast)
			scales_add(sc, m->t[t].name, scale_for_amax(r.amax[t]));
	}
	rc = 0;
out:
	model_ref_free(&r);
	return rc;
}
