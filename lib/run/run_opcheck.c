/* run_opcheck.c: the per-op numerical check (lib/run/run.h, docs/machine.md §8).
 *
 * After the machine's last compute step of a model op (every iteration of
 * a repeat), the op is interpreted in FP32 by the model reference's own
 * code (run_model_op) on the machine's own values of its inputs, as the
 * tiles hold them, and its result is compared with the machine's: the
 * relative L2 error against a tolerance derived from the op's formats.
 * The machine's inputs, not the reference's, so the error is the op's
 * alone (nothing accumulated from earlier ops), and a tight bound holds. */
#include "run/run_int.h"

#include <stdlib.h>
#include <string.h>

struct OpCheck {
	const Model *m;
	const Plan *pl;
	const Scales *sc;
	RunOpts o;
	int *op_at;             /* per plan step: the model op whose last compute step it is, or -1 */
	int *ptensor;           /* per model tensor: the plan's tensor of that name, or -1 */
	int *fused;             /* per model tensor: its fused cast's plan tensor (run_fused_cast), or -1 */
	OpCheckResult *r;       /* per model op */
	int checked;            /* ops with a compute step */
};

static double unit(Format f)
{
	return f == FMT_FP8 ? 1.0 / 16 : f == FMT_FP16 ? 1.0 / 2048 : 1.0 / 16777216;
}

/* The op's tolerance on the relative L2 error: twice the sum of the unit
 * roundoffs on its path (docs/machine.md §8). */
static double tolerance(const OpCheck *c, int k)
{
	const Model *m = c->m;
	const MOp *op = &m->ops[k];
	double u = unit(m->t[op->out].dtype) + OPCHECK_ARITH;
	int fused = c->fused[op->out];
	if (fused >= 0)
		u += unit(c->pl->t[fused].fmt);         /* its result cast where it is made */
	if (op->kind == OP_MATMUL) {
		if (m->t[op->in[1]].dtype == FMT_FP8 && m->t[op->in[0]].dtype != FMT_FP8)
			u += unit(FMT_FP8);     /* a cast to fp8 inside the op */
		for (int g = 0; g < c->pl->ng; g++)
			if (strcmp(c->pl->g[g].op, op->name) == 0 && c->pl->g[g].grid[1] > 1)
				u += (double)c->pl->g[g].grid[1] * unit(FMT_FP16);      /* fp16 K partials */
	}
	for (int s = 0; op->kind == OP_ATTENTION && s < c->pl->ns; s++) {
		const Step *st = &c->pl->s[s];
		const Placement *o = &c->pl->p[st->out];
		if (st->kind == STEP_COMPUTE && st->compute == C_ATTENTION && !strcmp(st->op, op->name) &&
		    c->pl->t[o->tensor].role == R_PARTIAL && o->fmt == FMT_FP16) {
			u += unit(FMT_FP16);    /* key blocks' fp16 partials (m, l, o / l) */
			break;
		}
	}
	return 2 * u;
}

OpCheck *run_opcheck_new(const Model *m, const Scales *sc, const Plan *pl, const RunOpts *o)
{
	OpCheck *c = xcalloc(1, sizeof *c);
	c->m = m, c->pl = pl, c->sc = sc, c->o = *o;
	c->o.cache = NULL;
	c->op_at = xmalloc((size_t)(pl->ns + 1) * sizeof *c->op_at);
	c->ptensor = xmalloc((size_t)(m->nt + 1) * sizeof *c->ptensor);
	c->fused = xmalloc((size_t)(m->nt + 1) * sizeof *c->fused);
	c->r = xcalloc((size_t)m->nops + 1, sizeof *c->r);
	for (int t = 0; t < m->nt; t++) {       /* (a fused cast's: the values the tiles hold) */
		c->fused[t] = run_fused_cast(pl, m, t);
		c->ptensor[t] = c->fused[t] >= 0 ? c->fused[t] : plan_find_tensor(pl, m->t[t].name);
	}
	for (int s = 0; s < pl->ns; s++)
		c->op_at[s] = -1;
	for (int k = 0; k < m->nops; k++) {
		c->r[k].op = m->ops[k].name;
		c->r[k].tol = tolerance(c, k);
		c->r[k].worst_iter = -1;
		int last = -1, ok = c->ptensor[m->ops[k].out] >= 0;
		for (int j = 0; j < m->ops[k].nin; j++)
			ok &= m->ops[k].in[j] < 0 || c->ptensor[m->ops[k].in[j]] >= 0;
		for (int s = 0; ok && s < pl->ns; s++)
			if (pl->s[s].kind == STEP_COMPUTE && strcmp(pl->s[s].op, m->ops[k].name) == 0)
				last = s;
		if (last >= 0)
			c->op_at[last] = k, c->checked++;
	}
	return c;
}

int run_opcheck_ops(const OpCheck *c, const OpCheckResult **r)
{
	*r = c->r;
	return c->m->nops;
}

int run_opcheck_checked(const OpCheck *c)
{
	return c->checked;
}

void run_opcheck_free(OpCheck *c)
{
	if (!c)
		return;
	free(c->op_at);
	free(c->ptensor);
	free(c->fused);
	free(c->r);
	free(c);
}

static int opcheck_compare(OpCheck *c, int k, int64_t iter, const float *out, const float *y, Err *e);

int run_opcheck_op(OpCheck *c, int k, int64_t iter, float *const *in, const float *out, Err *e)
{
	const Model *m = c->m;
	const MOp *op = &m->ops[k];
	ModelRef r;
	memset(&r, 0, sizeof r);
	r.n = m->nt;
	r.v = xcalloc((size_t)m->nt + 1, sizeof *r.v);
	r.own = xcalloc((size_t)m->nt + 1, 1);
	r.sc = c->sc, r.o = c->o;
	for (int j = 0; j < op->nin; j++)
		if (op->in[j] >= 0)
			r.v[op->in[j]] = in[j];         /* one instance each: the op runs at iteration 0 */
	if (op->kind == OP_APPEND) {            /* its rows written again over (a copy of) the machine's */
		int64_t no = model_elements(&m->t[op->out]) / m->t[op->out].count;  /* result: they must be there */
		r.v[op->out] = xmalloc((size_t)no * sizeof *out);       /* (the rest is the final comparison's) */
		memcpy(r.v[op->out], out, (size_t)no * sizeof *out);
		r.own[op->out] = 1;
	}
	run_model_op(m, &r, k, 0);
	int rc = opcheck_compare(c, k, iter, out, r.v[op->out], e);
	free(r.own[op->out] ? r.v[op->out] : NULL);
	free(r.v);
	free(r.own);
	return rc;
}

/* Op k's result when the tiles hold its fused cast (formats/plan.md,
 * "Fused casts"): each element must be the rounding into the cast's
 * format of a value within the op's own roundoff before the cast (its
 * tolerance's terms but the cast's, relative to the element's magnitude
 * plus the result's largest: an attention's rows are sums whose error
 * follows the largest values, not their own) of the FP32 reference's y,
 * or such a value itself (an exact result passes). The L2
 * tolerance of an fp8 result alone would pass an rmsnorm that returned
 * its input. */
static int fused_elements(const OpCheck *c, int k, const float *out, const float *y, int64_t n, Err *e)
{
	const MOp *op = &c->m->ops[k];
	int f = c->fused[op->out];
	if (f < 0)
		return 0;
	const PTensor *x = &c->pl->t[f];
	double eps = c->r[k].tol / 2 - unit(x->fmt), big = 0;   /* the op's roundoff before the cast */
	for (int64_t i = 0; i < n; i++)
		big = fabs((double)y[i]) > big ? fabs((double)y[i]) : big;
	for (int64_t i = 0; i < n; i++) {
		double d = (fabs((double)y[i]) + big) * eps;
		float lo = quantize((float)(y[i] - d), x->fmt, x->scale), hi = quantize((float)(y[i] + d), x->fmt, x->scale);
		if (!(out[i] >= lo && out[i] <= hi) && !(fabs((double)out[i] - y[i]) <= d))
			return errf(e, "op '%s': element %lld of its result, cast to %s where it is made ('%s'), is %g, "
				    "not the rounding of the FP32 reference %g (within %g of it: %g to %g; docs/machine.md "
				    "§8)", op->name, (long long)i, fmt_name(x->fmt), x->name, (double)out[i], (double)y[i],
				    d, (double)lo, (double)hi);
	}
	return 0;
}

/* The machine's result out of op k against the reference's y. */
static int opcheck_compare(OpCheck *c, int k, int64_t iter, const float *out, const float *y, Err *e)
{
	const Model *m = c->m;
	const MOp *op = &m->ops[k];
	int64_t n = model_elements(&m->t[op->out]) / m->t[op->out].count;     /* an op's result: one instance */
	double d2 = 0, r2 = 0;
	int finite = 1;
	for (int64_t i = 0; i < n; i++) {
		double d = (double)out[i] - (double)y[i];
		finite &= isfinite(out[i]) && isfinite(y[i]);
		d2 += d * d, r2 += (double)y[i] * y[i];
	}
	double rel = !finite ? INFINITY : d2 == 0 ? 0 : r2 > 0 ? sqrt(d2 / r2) : INFINITY;
	OpCheckResult *x = &c->r[k];
	x->runs++;
	if (rel > x->worst || x->worst_iter < 0)
		x->worst = rel, x->worst_iter = iter;
	if (!(rel <= x->tol))           /* (run_program names the iteration) */
		return errf(e, "op '%s': the machine's result differs from the FP32 reference of the op on the "
			    "machine's own inputs by %.3g (relative L2 error), over its tolerance %.3g "
			    "(docs/machine.md §8)", op->name, rel, x->tol);
	return fused_elements(c, k, out, y, n, e);
}

/* The machine's values of plan tensor pt (its instance iter), or NULL. */
static float *machine_values(const OpCheck *c, int pt, int64_t iter, uint8_t *const *enc)
{
	if (pt < 0 || !enc[pt])
		return NULL;
	const PTensor *x = &c->pl->t[pt];
	int64_t n = tensor_count(x), at = x->count > 1 ? iter : 0;
	float *v = xmalloc((size_t)(n + 1) * sizeof *v);
	run_decode_run(enc[pt] + at * n * fmt_bytes(x->fmt), NULL, n, x->fmt, x->scale, v);
	return v;
}

/* A folded rmsnorm (run_norm_folded) leaves its result on no tile: what
 * its GEMMs read is the norm of the machine's own x and scale, computed
 * here in FP32 (the GEMM's error is then its own, the rows' scale
 * included). With k the norm itself, *pre is x times its scale, which the
 * machine does hold (<out>.prenorm). NULL when the machine holds no x. */
static float *folded_values(const OpCheck *c, const MOp *norm, int64_t iter, uint8_t *const *enc, int raw)
{
	const Model *m = c->m;
	const MTensor *y = &m->t[norm->out];
	int64_t C = y->shape[y->rank - 1], n = model_elements(y) / y->count;
	float *x = machine_values(c, c->ptensor[norm->in[0]], iter, enc);
	float *g = machine_values(c, c->ptensor[norm->in[1]], iter, enc);
	float *v = x && g ? xmalloc((size_t)(n + 1) * sizeof *v) : NULL;
	if (v && raw)
		run_ref_mul(x, g, v, n, C);
	else if (v)
		run_ref_rmsnorm(x, g, v, n / C, C, norm->eps);
	free(x);
	free(g);
	return v;
}

int run_opcheck_step(OpCheck *c, int s, int64_t iter, uint8_t *const *enc, Err *e)
{
	int k = c->op_at[s];
	if (k < 0)
		return 0;
	const Model *m = c->m;
	const MOp *op = &m->ops[k];
	float *in[3] = { NULL, NULL, NULL }, *out = NULL;
	int rc = 0, folded = op->kind == OP_RMSNORM && run_norm_folded(c->pl, op->name);
	for (int j = 0; j <= op->nin; j++) {
		int mt = j < op->nin ? op->in[j] : op->out;
		if (mt < 0)
			continue;
		const MOp *fold = j < op->nin ? run_fold_of(c->pl, m, mt) : NULL;
		int pt = c->ptensor[mt];
		if (j == op->nin && folded) {   /* the norm's own: x times its scale, the machine's prenorm */
			char *name = xasprintf("%s.prenorm", m->t[mt].name);
			pt = plan_find_tensor(c->pl, name);
			free(name);
		}
		float *v = fold ? folded_values(c, fold, iter, enc, 0) : machine_values(c, pt, iter, enc);
		if (!v) {
			rc = errf(e, "op '%s': the machine holds no values of '%s'", op->name,
				  pt >= 0 ? c->pl->t[pt].name : m->t[mt].name);
			goto out;
		}
		if (j < op->nin)
			in[j] = v;
		else
			out = v;
	}
	if (folded) {                   /* compared with x times the scale: the part the norm's tiles do */
		float *y = folded_values(c, op, iter, enc, 1);
		rc = opcheck_compare(c, k, iter, out, y, e);
		free(y);
	} else {
		rc = run_opcheck_op(c, k, iter, in, out, e);
	}
	free(out);
out:
	for (int j = 0; j < 3; j++)
		free(in[j]);
	return rc;
}
