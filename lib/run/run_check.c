/* run_check: the stage is the model's computation. run_check_model: the
 * stage lowers this model; its tensors have the model's shapes, formats,
 * fp8 scales and outputs; every op has its steps (or host op), and every
 * matmul's GEMM record reads and writes the model's tensors
 * (run_check_texts: the same, from the texts a program embeds). Then step
 * by step (run_check_steps): every compute step serves a model op (or a
 * repeat's carry) with a kind that op lowers to; every non-matmul op has
 * its one step, reading the model's operands in order and writing its
 * result; the fields the machine reads (layernorm eps, attention heads
 * and score scale) are the model's. Last, every compute step field by
 * field, matmuls' from their GEMM records (run_check_fields). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "run/run_int.h"

/* The op table's compute columns (lib/model/optab.h): the step an op
 * lowers to, and every compute kind its lowering may use. */
#define OPTAB_STEPS(E, name, since, slots, need, keys, attrs, act, shape, compute, lowers, ...) \
	[OP_##E] = { compute, { OPTAB_LIST lowers, C_COUNT } },
static const struct {
	ComputeKind primary;
	ComputeKind lowers[6];          /* C_COUNT after the last */
} op_steps[OP_COUNT] = { AMP_OPS(OPTAB_STEPS) };
#undef OPTAB_STEPS

static int allowed(OpKind k, ComputeKind c)
{
	for (int i = 0; op_steps[k].lowers[i] != C_COUNT; i++)
		if (op_steps[k].lowers[i] == c)
			return 1;
	return 0;               /* (patchify and embed run on the host) */
}

static ComputeKind primary(OpKind k)
{
	return op_steps[k].primary;
}

/* Is rmsnorm step st's third input the sums of squares that a sumsq step
 * of the same op made from st's own rows (a copy of them, moved)? */
static int sums_of(const Plan *pl, const Step *st, const char *op)
{
	int t = pl->p[st->in[2]].tensor;
	for (int s = 0; s < pl->ns; s++) {
		const Step *q = &pl->s[s];
		if (q->kind == STEP_COMPUTE && q->compute == C_SUMSQ && !strcmp(q->op, op) &&
		    pl->p[q->out].tensor == t && pl->p[q->in[0]].tensor == pl->p[st->in[0]].tensor)
			return 1;
	}
	return 0;
}

/* Rope step st (step found) against the model's op: heads, widths, theta,
 * scaling, head_stride, pairs and patch grid. */
static int rope_same(const Step *st, const MOp *op, int found, const char *f, Err *e)
{
	if (st->heads != op->heads || st->head_dim != op->head_dim || st->theta != op->theta)
		return err_at(e, f, op->line, op->col, "op '%s': its step %d rotates %lld heads of %lld at theta %g, "
			      "the model %lld heads of %lld at theta %g", op->name, found, (long long)st->heads,
			      (long long)st->head_dim, st->theta, (long long)op->heads, (long long)op->head_dim,
			      op->theta);
	const RopeScale *ss = &st->rope_scale, *os = &op->rope_scale;
	if (ss->factor != os->factor || ss->low != os->low || ss->high != os->high || ss->original != os->original)
		return err_at(e, f, op->line, op->col, "op '%s': its step %d scales the frequencies by factor %g "
			      "(low %g, high %g, original %g), the model by factor %g (low %g, high %g, original "
			      "%g; factor 0: no scaling)", op->name, found, ss->factor, ss->low, ss->high,
			      ss->original, os->factor, os->low, os->high, os->original);
	if (st->head_stride != op->head_stride)
		return err_at(e, f, op->line, op->col, "op '%s': its step %d rotates heads %lld columns apart, "
			      "the model %lld (head_stride)", op->name, found, (long long)st->head_stride,
			      (long long)op->head_stride);
	if (st->interleaved != op->interleaved)
		return err_at(e, f, op->line, op->col, "op '%s': its step %d rotates pairs %s, the model %s",
			      op->name, found, st->interleaved ? "interleaved" : "half",
			      op->interleaved ? "interleaved" : "half");
	const RopeGrid *sg = &st->rope_grid, *og = &op->rope_grid;
	if (sg->rows != og->rows || sg->cols != og->cols || sg->cls != og->cls)
		return err_at(e, f, op->line, op->col, "op '%s': its step %d rotates by a %lld x %lld patch grid after "
			      "%lld class tokens, the model by %lld x %lld after %lld (0 x 0: by positions)", op->name, found,
			      (long long)sg->rows, (long long)sg->cols, (long long)sg->cls, (long long)og->rows,
			      (long long)og->cols, (long long)og->cls);
	return 0;
}
static int op_step(const Plan *pl, const Model *m, const MOp *op, int found, int merge, const char *f, Err *e);


int run_check_steps(const Plan *pl, const Model *m, Err *e)
{
	const char *f = m->file;
	for (int s = 0; s < pl->ns; s++) {
		const Step *st = &pl->s[s];
		if (st->kind != STEP_COMPUTE)
			continue;
		int op = -1, rep = 0;
		for (int i = 0; op < 0 && i < m->nops; i++)
			if (!strcmp(m->ops[i].name, st->op))
				op = i;
		for (int r = 0; op < 0 && r < m->nrep; r++)
			rep |= !strcmp(m->rep[r].name, st->op);
		if (op < 0 && !rep)
			return errf(e, "%s: the stage's compute step %d serves '%s', which is no op or repeat of the "
				    "model", f, s, st->op);
		if (rep ? st->compute != C_CARRY : !allowed(m->ops[op].kind, st->compute))
			return errf(e, "%s: the stage's step %d computes %s for %s '%s', which %s", f, s,
				    compute_name(st->compute), rep ? "repeat" : "op", st->op,
				    rep ? "only carries its activation" : "does not lower to that");
	}
	for (int i = 0; i < m->nops; i++) {
		const MOp *op = &m->ops[i];
		ComputeKind want = primary(op->kind);
		if (op->kind == OP_MATMUL || op->kind == OP_PATCHIFY || op->kind == OP_EMBED ||
		    (op->kind == OP_RMSNORM && run_norm_folded(pl, op->name)))
			continue;       /* (matmuls on their GEMM records, the host's ops on theirs; a
					 * folded norm in run_check_fields, with its GEMMs) */
		int found = -1, n = 0, merge = -1;
		for (int s = 0; s < pl->ns; s++) {
			const Step *st = &pl->s[s];
			if (st->kind != STEP_COMPUTE || strcmp(st->op, op->name))
				continue;
			if (st->compute == want)
				found = s, n++;
			if (st->compute == C_MERGE)
				merge = s;
		}
		if (n != 1 && !(op->kind == OP_ATTENTION && n > 1))      /* (causal segments: several) */
			return err_at(e, f, op->line, op->col, "op '%s': the stage has %d %s steps for it, not one",
				      op->name, n, compute_name(want));
		for (found = 0; found < pl->ns; found++)
			if (pl->s[found].kind == STEP_COMPUTE && pl->s[found].compute == want &&
			    !strcmp(pl->s[found].op, op->name) && op_step(pl, m, op, found, merge, f, e))
				return -1;
	}
	return 0;
}

/* Step found of op (its primary kind; merge: the op's last merge step, or
 * -1): its operands, result and fields against the model's. */
static int op_step(const Plan *pl, const Model *m, const MOp *op, int found, int merge, const char *f, Err *e)
{
	const Step *st = &pl->s[found];
	/* the model's operands in order (attention reads k and v from in[1],
	 * then its positions) */
	int nin = op->kind == OP_ATTENTION ? op->nin + 1 : op->nin;
	if (op->kind == OP_RMSNORM && st->nin == nin + 1 && !sums_of(pl, st, op->name))
		return err_at(e, f, op->line, op->col, "op '%s': its step %d reads '%s' as its rows' sums of "
			      "squares, which no sumsq step of the op makes from '%s'", op->name, found,
			      run_held(pl, st->in[nin]), run_held(pl, st->in[0]));
	if (st->nin != nin && !(op->kind == OP_RMSNORM && st->nin == nin + 1))
		return err_at(e, f, op->line, op->col, "op '%s': its step %d reads %d operands, the model %d",
			      op->name, found, st->nin, nin);
	for (int k = 0; k < nin; k++) {
		int mt = op->in[op->kind == OP_ATTENTION ? (k > 1 ? k - 1 : k ? 1 : 0) : k];
		if (strcmp(run_held(pl, st->in[k]), m->t[mt].name))
			return err_at(e, f, op->line, op->col, "op '%s': its step %d reads '%s' as operand %d, "
				      "the model '%s'", op->name, found, run_held(pl, st->in[k]), k + 1,
				      m->t[mt].name);
	}
	int out = op->kind == OP_ATTENTION && merge >= 0 ? pl->s[merge].out : st->out;
	int fused = run_fused_cast(pl, m, op->out);     /* '<out>.<F>', written in out's place */
	if (strcmp(run_held(pl, out), m->t[op->out].name) && (fused < 0 || pl->p[out].tensor != fused))
		return err_at(e, f, op->line, op->col, "op '%s': its steps write '%s', the model '%s'",
			      op->name, run_held(pl, out), m->t[op->out].name);
	if (op->kind == OP_ROPE && rope_same(st, op, found, f, e))
		return -1;
	if (op->kind == OP_ATTENTION && st->kv_order != op->kv_order)
		return err_at(e, f, op->line, op->col, "op '%s': its step %d reads k and v in kv_order %s, "
			      "the model %s", op->name, found, st->kv_order ? "heads" : "kv",
			      op->kv_order ? "heads" : "kv");
	if (op->kind == OP_ATTENTION) {
		const MTensor *o = &m->t[op->out];
		int64_t C = o->shape[o->rank - 1];
		double scale = 1.0 / sqrt((double)(C / op->heads));
		if (st->heads != op->heads || st->scale != scale)
			return err_at(e, f, op->line, op->col, "op '%s': its step %d has heads %lld and scale %g, "
				      "the model heads %lld and scale %g (1/sqrt(head width))", op->name, found,
				      (long long)st->heads, st->scale, (long long)op->heads, scale);
		if (st->kv_heads != op->kv_heads || st->causal != op->causal)
			return err_at(e, f, op->line, op->col, "op '%s': its step %d has kv_heads %lld, %s, the "
				      "model kv_heads %lld, %s", op->name, found, (long long)st->kv_heads,
				      st->causal ? "causal" : "not causal", (long long)op->kv_heads,
				      op->causal ? "causal" : "not causal");
	}
	return 0;
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
		for (int k = 0; k < 2; k++) {   /* its cast, and a folded norm's rows' cast */
			char *src = xasprintf(k ? "%s.prenorm" : "%s", x->name), *cast = xasprintf("%s.fp8", src);
			int c = plan_find_tensor(pl, cast), cw = 0;
			scales_find(sc, src, &cw);
			free(cast);
			free(src);
			if (c >= 0 && pl->t[c].scale != cw)
				return err_at(e, f, x->line, x->col, "tensor '%s': the stage's cast '%s' has fp8 scale "
					      "%d, %s %d", x->name, pl->t[c].name, pl->t[c].scale, sc ?
					      "the scales file's" : "the default", cw);
		}
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
		const MOp *fold = run_fold_of(pl, m, op->in[0]);
		char *pre = fold ? xasprintf("%s.prenorm", m->t[op->in[0]].name) : NULL;
		int fused = run_fused_cast(pl, m, op->in[0]);
		int a_ok = g && (fold ? g->a >= 0 && !strcmp(pl->t[g->a].name, pre) : tensor_is(pl, g->a, m, op->in[0]) ||
				 (fused >= 0 && g->a == fused));
		free(pre);
		if (!g || !a_ok || !tensor_is(pl, g->b, m, op->in[1]) ||
		    !tensor_is(pl, g->out, m, op->out) ||
		    (op->in[2] >= 0 ? !tensor_is(pl, g->bias, m, op->in[2]) : g->bias >= 0))
			return err_at(e, f, op->line, op->col, "matmul '%s': the stage's GEMM record does not "
				      "read and write the model's a (or a folded rmsnorm's <a>.prenorm, or a's fused "
				      "cast), b, bias and out", op->name);
	}
	return run_check_steps(pl, m, e) ? -1 : run_check_fields(pl, m, e);
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
