/* run_model.c: the model's FP32 reference (lib/run/run.h), from its
 * definition and data alone (run_model_reference): its inputs' and
 * parameters' values (run_model_data; the program's own arrays when made
 * the same way), each op on fp32 values with run_ref.c's arithmetic
 * (run_model_op, which the per-op check runs too), repeats iterated; and
 * the fp8 calibration from it (run_calibrate). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "run/run_int.h"

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
	return (DataSpec){ x->name, x->rank, x->shape, x->count, x->dtype, scale, run_model_dist(m, t),
			   x->role == T_PARAM };
}

int run_model_data(const Model *m, const Scales *sc, const RunOpts *o, const Plan *pl, float *const *pval,
		   ModelRef *r, Err *e)
{
	memset(r, 0, sizeof *r);
	r->n = m->nt;
	r->v = xcalloc((size_t)m->nt + 1, sizeof *r->v);
	r->own = xcalloc((size_t)m->nt + 1, 1);
	Lazy z;
	run_lazy_init(&z, m->nt);
	r->inst = z.buf, r->at = z.at;
	r->sc = sc;
	r->o = *o;
	if (run_data_dir_ok(o, e))
		return -1;
	RunOpts oi = run_input_opts(o);
	for (int i = 0; i < m->nt; i++) {
		if (m->t[i].role == T_STATE) {
			r->v[i] = run_state_values(o, m->t[i].name, mtensor_count(&m->t[i]) * m->t[i].count, 1);
			r->own[i] = 1;
		}
		if (m->t[i].role == T_ACT || m->t[i].role == T_STATE)
			continue;
		DataSpec d = model_spec(m, sc, i);
		const float *g = m->t[i].role == T_INPUT ? carry_find(o->given, d.name, run_spec_values(&d), 0) : NULL;
		if (g) {
			r->v[i] = xmalloc((size_t)run_spec_values(&d) * sizeof *r->v[i]);
			memcpy(r->v[i], g, (size_t)run_spec_values(&d) * sizeof *r->v[i]);
			r->own[i] = 1;
			continue;
		}
		if (run_lazy_spec(&d, o))
			continue;               /* made an instance at a time (minst) */
		int t = pl && pval ? plan_find_tensor(pl, d.name) : -1;
		if (t >= 0 && pval[t] && (pl->t[t].role == R_INPUT || pl->t[t].role == R_PARAM)) {
			DataSpec q = run_plan_spec(pl, t);
			if (run_same_spec(&d, &q)) {        /* made the same way: the same values */
				r->v[i] = pval[t];
				continue;
			}
		}
		r->v[i] = xmalloc((size_t)run_spec_values(&d) * sizeof *r->v[i]);
		r->own[i] = 1;
		if (run_tensor_data(&d, m->t[i].role == T_INPUT ? &oi : o, r->v[i], e))
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
		return run_lazy_get(&z, t, &d, &r->o, iter);
	}
	return m->t[t].count > 1 ? r->v[t] + iter * mtensor_count(&m->t[t]) : r->v[t];
}

static void track(double *amax, int t, const float *y, int64_t n)
{
	for (int64_t i = 0; amax && i < n; i++)
		if (fabs((double)y[i]) > amax[t])
			amax[t] = fabs((double)y[i]);
}

static void mset(const Model *m, ModelRef *r, int t, float *y)
{
	if (r->own[t])
		free(r->v[t]);
	r->v[t] = y;
	r->own[t] = 1;
	track(r->amax, t, y, mtensor_count(&m->t[t]));
}

/* ---- each op's FP32 reference (the op table's ref column) ----
 *
 * Op a->op on fp32 values (formats/model.md): no cast inside a matmul, a
 * cast op keeps its input's values, every result fp32. Each writes the
 * n values of its result into y (x: in[0]'s values, C: the result's last
 * dimension) and returns 0; or stores the result itself and returns 1. */
typedef struct {
	const Model *m;
	ModelRef *r;
	const MOp *op;
	int64_t iter, n, C;
	const float *x;
	float *y;
} RefOp;

/* Operand k's values. */
static const float *ref_in(const RefOp *a, int k)
{
	return minst(a->m, a->r, a->op->in[k], a->iter);
}

static int opref_matmul(const RefOp *a)
{
	const MTensor *b = &a->m->t[a->op->in[1]];
	int64_t K = b->shape[0], N = b->shape[1], M = mtensor_count(&a->m->t[a->op->in[0]]) / K;
	memset(a->y, 0, (size_t)(M * N) * sizeof *a->y);       /* read before written */
	run_ref_gemm2(a->x, ref_in(a, 1), a->op->in[2] >= 0 ? ref_in(a, 2) : NULL, a->y, M, K, N);
	return 0;
}

static int opref_gelu(const RefOp *a)
{
	for (int64_t i = 0; i < a->n; i++)
		a->y[i] = run_gelu_f32(a->x[i]);
	return 0;
}

static int opref_add(const RefOp *a)
{
	run_ref_add(a->x, ref_in(a, 1), a->y, a->n, mtensor_count(&a->m->t[a->op->in[1]]));
	return 0;
}

static int opref_broadcast(const RefOp *a)
{
	for (int64_t i = 0, nx = mtensor_count(&a->m->t[a->op->in[0]]); i < a->n; i++)
		a->y[i] = a->x[i % nx];
	return 0;
}

static int opref_layernorm(const RefOp *a)
{
	run_ref_layernorm(a->x, ref_in(a, 1), ref_in(a, 2), a->y, a->n / a->C, a->C, a->op->eps);
	return 0;
}

static int opref_rmsnorm(const RefOp *a)
{
	const float *g = ref_in(a, 1);
	run_ref_rmsnorm(a->x, g, a->y, a->n / a->C, a->C, a->op->eps);
	for (int64_t i = 0; a->r->amax_pre && i < a->n; i++)   /* what a folded norm casts: x times the scale */
		a->r->amax_pre[a->op->out] = fmax(a->r->amax_pre[a->op->out], fabs((double)a->x[i] * g[i % a->C]));
	return 0;
}

static int opref_silu(const RefOp *a)
{
	run_ref_silu(a->x, a->y, a->n);
	return 0;
}

static int opref_mul(const RefOp *a)
{
	/* b: an activation, or per channel */
	run_ref_mul(a->x, ref_in(a, 1), a->y, a->n, mtensor_count(&a->m->t[a->op->in[1]]));
	return 0;
}

static int opref_rope(const RefOp *a)
{
	const MOp *op = a->op;
	if (op->rope_grid.rows > 0) {
		run_ref_rope_grid(a->x, a->y, a->n / a->C, a->C, op->heads, op->head_dim, op->head_stride,
				  op->interleaved, op->theta, &op->rope_grid, a->m->t[op->in[0]].shape[1]);
		return 0;
	}
	run_ref_rope(a->x, ref_in(a, 1), a->y, a->n / a->C, a->C, op->heads, op->head_dim, op->head_stride,
		     op->interleaved, op->theta, &op->rope_scale);
	return 0;
}

static int opref_last(const RefOp *a)
{
	const MTensor *in = &a->m->t[a->op->in[0]];
	run_ref_last(a->x, a->y, in->shape[0], in->shape[1], a->C);
	return 0;
}

static int opref_append(const RefOp *a)
{
	const MOp *op = a->op;
	const MTensor *out = &a->m->t[op->out], *in = &a->m->t[op->in[0]];
	float *cache = minst(a->m, a->r, op->out, a->iter);
	run_ref_append(cache, a->x, ref_in(a, 1), a->y, out->shape[0], in->shape[1], out->shape[1], out->shape[2]);
	if (out->count == 1)
		return 0;
	/* a stacked state: this iteration's instance, in place */
	memcpy(cache, a->y, (size_t)a->n * sizeof *a->y);
	track(a->r->amax, op->out, a->y, a->n);
	free(a->y);
	return 1;
}

static int opref_attention(const RefOp *a)
{
	const MOp *op = a->op;
	const MTensor *in = &a->m->t[op->in[0]], *kv = &a->m->t[op->in[1]];
	run_ref_attend(a->x, ref_in(a, 1), op->in[2] >= 0 ? ref_in(a, 2) : NULL, a->y, in->shape[0], in->shape[1],
		       kv->shape[1], in->shape[2], kv->shape[2], a->C, op->heads, op->kv_heads, op->causal,
		       op->kv_order, op->in[0] == op->in[1], 1.0 / sqrt((double)(a->C / op->heads)));
	return 0;
}

/* The reference's own lookup (the machine's host op is embed_rows). */
static int opref_embed(const RefOp *a)
{
	const float *tab = ref_in(a, 1);
	int64_t cols = a->m->t[a->op->in[1]].shape[1];  /* [V, C] rows, or [C, V]: column id */
	for (int64_t q = 0; q < a->n; q++) {
		int64_t row = q / a->C, c = q % a->C, id = (int64_t)a->x[row];
		a->y[q] = a->op->transposed ? tab[c * cols + id] : tab[id * cols + c];
	}
	return 0;
}

static int opref_patchify(const RefOp *a)
{
	const MTensor *in = &a->m->t[a->op->in[0]];
	run_patchify(a->x, in->shape[0], in->shape[1], in->shape[2], in->shape[3], a->op->patch, a->op->cls, a->y);
	return 0;
}

/* cast: the reference keeps fp32 */
static int opref_keep(const RefOp *a)
{
	memcpy(a->y, a->x, (size_t)a->n * sizeof *a->y);
	return 0;
}

#define OPTAB_REF(E, name, since, slots, need, keys, attrs, act, shape, compute, lowers, ref) [OP_##E] = ref,
static int (*const op_refs[OP_COUNT])(const RefOp *) = { AMP_OPS(OPTAB_REF) };
#undef OPTAB_REF

void run_model_op(const Model *m, ModelRef *r, int k, int64_t iter)
{
	const MOp *op = &m->ops[k];
	const MTensor *out = &m->t[op->out];
	int64_t n = mtensor_count(out);
	RefOp a = { m, r, op, iter, n, out->shape[out->rank - 1], minst(m, r, op->in[0], iter),
		    xmalloc((size_t)n * sizeof(float)) };
	if (!op_refs[op->kind](&a))
		mset(m, r, op->out, a.y);
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
	free(r->amax_pre);
	memset(r, 0, sizeof *r);
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
	r.amax_pre = xcalloc((size_t)m->nt + 1, sizeof *r.amax_pre);
	run_model_ops(m, &r);          /* amax over every iteration */
	/* activations cast to fp8: a matmul's a when its b is fp8 (amp-plan's
	 * <a>.fp8), and a cast op's fp8 result */
	for (int t = 0; t < m->nt; t++) {
		int cast = (m->t[t].role == T_ACT || m->t[t].role == T_STATE) && m->t[t].dtype == FMT_FP8;
		for (int k = 0; !cast && k < m->nops; k++)
			cast = m->ops[k].kind == OP_MATMUL && m->ops[k].in[0] == t &&
			       m->t[m->ops[k].in[1]].dtype == FMT_FP8 && m->t[t].dtype != FMT_FP8;
		if (!cast)
			continue;
		scales_add(sc, m->t[t].name, scale_for_amax(r.amax[t]));
		for (int k = 0; k < m->nops; k++)
			if (m->ops[k].kind == OP_RMSNORM && m->ops[k].out == t) {
				char *pre = xasprintf("%s.prenorm", m->t[t].name);
				scales_add(sc, pre, scale_for_amax(r.amax_pre[t]));
				free(pre);
			}
	}
	rc = 0;
out:
	model_ref_free(&r);
	return rc;
}
