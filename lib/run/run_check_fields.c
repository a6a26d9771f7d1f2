/* run_check_fields: every compute step of the model's ops derived again
 * from the op and the plan's choices, field by field (run_int.h). Numbers
 * cannot show what sits inside rounding noise (a matmul that dropped its
 * fp16 bias passes an fp8 tolerance); structure can.
 *
 * A matmul's GEMM record has the model's m (a's rows), k, n and, as its
 * operand format, b's dtype. Its steps follow from the record: a cast of
 * a into that format (none when a has it), a's pack (staging pack-once or
 * spread), one product reading a or its cast, b and, unless K is cut, the
 * bias; with K cut, one reduction of the product's partial adding the
 * bias; with out staging unpack, one pack of out. An attention's merge
 * reads its step's partial, whose width holds the model's head width in
 * the step's chunks; an rmsnorm's sumsq reads its rows; an append lands
 * its rows at the model's first; a repeat's carry moves its input (before
 * the loop) or its body's last result (at the loop's end) into its
 * carried tensor. The record's grid is the cut of its product's b and
 * result, its cast order what its copies of a move, and an attention's
 * scratch a row of fp32 scores over the keys a tile holds. Each refusal
 * names the op, the step, the field, the stage's value and the plan's. */
#include <string.h>

#include "run/run_int.h"

const char *run_held(const Plan *pl, int place)
{
	return place >= 0 && place < pl->np ? pl->t[pl->p[place].tensor].name : "";
}

static int tensor_of(const Plan *pl, int place)
{
	return place >= 0 && place < pl->np ? pl->p[place].tensor : -1;
}

/* The tensor a cast step writing tensor t reads, or -1. */
static int cast_source(const Plan *pl, int t)
{
	for (int s = 0; s < pl->ns; s++) {
		const Step *st = &pl->s[s];
		if (st->kind == STEP_COMPUTE && st->compute == C_CAST && tensor_of(pl, st->out) == t)
			return tensor_of(pl, st->in[0]);
	}
	return -1;
}

static int count_steps(const Plan *pl, const char *op, ComputeKind k, int *last)
{
	int n = 0;
	for (int s = 0; s < pl->ns; s++)
		if (pl->s[s].kind == STEP_COMPUTE && pl->s[s].compute == k && !strcmp(pl->s[s].op, op))
			n++, *last = s;
	return n;
}

/* Step s's operand k (1-based in messages) holds tensor want. */
static int operand(const Plan *pl, const Model *m, const MOp *op, int s, int k, const char *role, int want, Err *e)
{
	const Step *st = &pl->s[s];
	if (tensor_of(pl, st->in[k]) == want)
		return 0;
	return err_at(e, m->file, op->line, op->col, "op '%s': its %s step %d reads '%s' as operand %d (%s), the "
		      "plan implies '%s'", op->name, compute_name(st->compute), s, run_held(pl, st->in[k]), k + 1,
		      role, want >= 0 ? pl->t[want].name : "");
}

static int operands(const Plan *pl, const Model *m, const MOp *op, int s, int nin, const char *roles, Err *e)
{
	const Step *st = &pl->s[s];
	if (st->nin == nin)
		return 0;
	return err_at(e, m->file, op->line, op->col, "op '%s': its %s step %d reads %d operands, the plan implies "
		      "%d (%s)", op->name, compute_name(st->compute), s, st->nin, nin, roles);
}

static int writes(const Plan *pl, const Model *m, const MOp *op, int s, int want, Err *e)
{
	const Step *st = &pl->s[s];
	if (tensor_of(pl, st->out) == want)
		return 0;
	return err_at(e, m->file, op->line, op->col, "op '%s': its %s step %d writes '%s', the plan implies '%s'",
		      op->name, compute_name(st->compute), s, run_held(pl, st->out), want >= 0 ? pl->t[want].name : "");
}

static int count_is(const Model *m, const MOp *op, ComputeKind k, int n, int want, const char *why, Err *e)
{
	if (n == want)
		return 0;
	return err_at(e, m->file, op->line, op->col, "op '%s': the stage has %d %s steps for it, the plan implies "
		      "%d (%s)", op->name, n, compute_name(k), want, why);
}

int run_norm_folded(const Plan *pl, const char *op)
{
	int last;
	return count_steps(pl, op, C_MUL, &last) > 0 && count_steps(pl, op, C_RMSNORM, &last) == 0;
}

const MOp *run_fold_of(const Plan *pl, const Model *m, int mt)
{
	for (int i = 0; mt >= 0 && i < m->nops; i++)
		if (m->ops[i].kind == OP_RMSNORM && m->ops[i].out == mt && run_norm_folded(pl, m->ops[i].name))
			return &m->ops[i];
	return NULL;
}

int run_fused_cast(const Plan *pl, const Model *m, int mt)
{
	int f = -1;
	for (int i = 0; mt >= 0 && i < m->nops; i++)
		for (int k = 0; k < m->ops[i].nin; k++) {
			if (m->ops[i].in[k] != mt)
				continue;
			if (m->ops[i].kind != OP_MATMUL || k != 0)
				return -1;
			int F = (int)m->t[m->ops[i].in[1]].dtype;
			if (f >= 0 && f != F)
				return -1;
			f = F;
		}
	if (f < 0 || f == (int)m->t[mt].dtype)
		return -1;
	int y = plan_find_tensor(pl, m->t[mt].name);
	for (int i = 0; i < pl->np; i++)
		if (pl->p[i].tensor == y)
			return -1;      /* placed in its own format */
	char *name = xasprintf("%s.%s", m->t[mt].name, fmt_name((Format)f));
	int t = plan_find_tensor(pl, name);
	free(name);
	return t >= 0 && pl->t[t].fmt == (Format)f ? t : -1;
}

/* The tensor op's one sumsq step writes, or -1. */
static int sums_tensor(const Plan *pl, const char *op)
{
	int s;
	return count_steps(pl, op, C_SUMSQ, &s) == 1 ? tensor_of(pl, pl->s[s].out) : -1;
}

/* A folded rmsnorm (run_norm_folded): one sumsq step of its x (op_steps
 * checks its operand) and one mul step of x by its scale into
 * <out>.prenorm, in out's format; its result read by matmuls alone, as
 * a, each K cut (so that it reduces) and each GEMM record reading
 * <out>.prenorm (matmul_steps: the reduction reads these sums, at this
 * eps); nothing of out placed. */
static int fold_steps(const Plan *pl, const Model *m, const MOp *op, Err *e)
{
	int mul = -1, sq = -1, X = plan_find_tensor(pl, m->t[op->in[0]].name);
	int G = plan_find_tensor(pl, m->t[op->in[1]].name), Y = plan_find_tensor(pl, m->t[op->out].name);
	char *name = xasprintf("%s.prenorm", m->t[op->out].name);
	int pre = plan_find_tensor(pl, name);
	free(name);
	if (count_is(m, op, C_MUL, count_steps(pl, op->name, C_MUL, &mul), 1, "a folded rmsnorm: x times its scale",
		     e) ||
	    count_is(m, op, C_SUMSQ, count_steps(pl, op->name, C_SUMSQ, &sq), 1, "a folded rmsnorm: its rows' sums",
		     e) ||
	    operands(pl, m, op, mul, 2, "x, scale", e) || operand(pl, m, op, mul, 0, "x", X, e) ||
	    operand(pl, m, op, mul, 1, "scale", G, e))
		return -1;
	if (pre < 0 || tensor_of(pl, pl->s[mul].out) != pre || pl->t[pre].fmt != m->t[op->out].dtype)
		return err_at(e, m->file, op->line, op->col, "op '%s': its mul step %d writes '%s', the plan implies "
			      "'%s.prenorm' in %s (a folded rmsnorm's rows before their scale)", op->name, mul,
			      run_held(pl, pl->s[mul].out), m->t[op->out].name, fmt_name(m->t[op->out].dtype));
	for (int i = 0; i < pl->np; i++)
		if (pl->p[i].tensor == Y)
			return err_at(e, m->file, op->line, op->col, "op '%s' is folded into its GEMMs, but the stage "
				      "places its result '%s' ('%s')", op->name, m->t[op->out].name, pl->p[i].name);
	for (const MOp *o = m->ops; o < m->ops + m->nops; o++)
		for (int k = 0; k < o->nin; k++) {
			int g = o->in[k] == op->out ? plan_gemm_index(pl, o->name) : 0;
			if (o->in[k] == op->out && (o->kind != OP_MATMUL || k != 0 || g < 0 || pl->g[g].a != pre ||
						    pl->g[g].grid[1] < 2))
				return err_at(e, m->file, op->line, op->col, "op '%s' is folded, but op '%s' reads its "
					      "result '%s' other than as a matmul's a that cuts K and reads '%s'", op->name,
					      o->name, m->t[op->out].name, pl->t[pre].name);
		}
	return 0;
}

/* The GEMM record's shape and format: the model's. */
static int gemm_fields(const Plan *pl, const Model *m, const MOp *op, const Gemm **gp, Err *e)
{
	const Gemm *g = NULL;
	int n = 0;
	for (int k = 0; k < pl->ng; k++)
		if (!strcmp(pl->g[k].op, op->name))
			g = &pl->g[k], n++;
	if (n != 1)
		return err_at(e, m->file, op->line, op->col, "matmul '%s': the stage has %d GEMM records for it, "
			      "not one", op->name, n);
	const MTensor *a = &m->t[op->in[0]], *b = &m->t[op->in[1]];
	int64_t rows = 1;
	for (int k = 0; k + 1 < a->rank; k++)
		rows *= a->shape[k];
	int64_t got[3] = { g->m, g->k, g->n }, want[3] = { rows, a->shape[a->rank - 1], b->shape[b->rank - 1] };
	static const char *const name[3] = { "m", "k", "n" };
	for (int k = 0; k < 3; k++)
		if (got[k] != want[k])
			return err_at(e, m->file, op->line, op->col, "matmul '%s': the stage's GEMM record has %s %lld, "
				      "the model %lld", op->name, name[k], (long long)got[k], (long long)want[k]);
	if (g->fmt != b->dtype)
		return err_at(e, m->file, op->line, op->col, "matmul '%s': the stage's GEMM record has format %s, "
			      "the model's b '%s' %s", op->name, fmt_name(g->fmt), b->name, fmt_name(b->dtype));
	*gp = g;
	return 0;
}

/* The record's grid and cast order, from the placements its steps use:
 * the product's b is cut [K, C], its result (with K cut, the partial
 * [K, ...]) in R row blocks and C column blocks; the a the product
 * reads is written by a cast on the GEMM's tiles (late) or by a copy or
 * a pack of a's cast (early, on a's owners). A grid that is not the placements' would loosen the per-op
 * tolerance (it grows with K's partials) and mislead every reader of the
 * record. */
static int grid_fields(const Plan *pl, const Model *m, const MOp *op, const Gemm *g, int prod, Err *e)
{
	const Step *mm = &pl->s[prod];
	const Placement *b = &pl->p[mm->in[1]], *o = &pl->p[mm->out];
	int cut = g->grid[1] > 1;
	int64_t R = 1, K = b->rank == 2 ? b->split[0] : -1, C = b->rank == 2 ? b->split[1] : -1;
	for (int a = cut; a < o->rank - 1; a++)
		R *= o->split[a];
	int grid_ok = g->grid[0] == R && g->grid[1] == K && g->grid[2] == C && o->split[o->rank - 1] == C &&
		      (!cut || o->split[0] == K);
	if (!grid_ok)
		return err_at(e, m->file, op->line, op->col, "matmul '%s': the stage's GEMM record has grid [%lld, "
			      "%lld, %lld], its product step %d's placements cut it [%lld, %lld, %lld] (b '%s', %s '%s')",
			      op->name, (long long)g->grid[0], (long long)g->grid[1], (long long)g->grid[2], prod,
			      (long long)R, (long long)K, (long long)C, b->name, cut ? "partial" : "out", o->name);
	if (g->cast == CAST_AUTO)
		return 0;
	/* what writes the a the product reads: a cast on the GEMM's tiles
	 * (late: it comes after any pack), or a copy or a pack of a's cast
	 * (early) */
	int w = plan_writer(pl, mm->in[0]);
	int late = w >= 0 && pl->s[w].kind == STEP_COMPUTE && pl->s[w].compute == C_CAST;
	if (w >= 0 && late != (g->cast == CAST_LATE))
		return err_at(e, m->file, op->line, op->col, "matmul '%s': the stage's GEMM record has cast %s, but "
			      "the a its product step %d reads is written by %s step %d (cast %s)", op->name,
			      g->cast == CAST_LATE ? "late" : "early", prod, late ? "a cast" : "a copy", w,
			      late ? "late, on the GEMM's tiles" : "early, on a's owners");
	return 0;
}

/* A matmul's cast, pack, product and reduction steps, from its GEMM
 * record g. */
static int matmul_steps(const Plan *pl, const Model *m, const MOp *op, const Gemm *g, Err *e)
{
	int A = g->a, B = g->b, BIAS = g->bias, OUT = g->out, cut = g->grid[1] > 1, prod = -1, red = -1, x;
	const MOp *fold = run_fold_of(pl, m, op->in[0]);   /* its reduction scales a's rows */
	int S = fold ? sums_tensor(pl, fold->name) : -1, nred = (BIAS >= 0) + (fold != NULL) + 1;
	int n = count_steps(pl, op->name, C_MATMUL, &prod);
	if (count_is(m, op, C_MATMUL, n, 1, "one product", e) ||
	    count_is(m, op, C_REDUCE, count_steps(pl, op->name, C_REDUCE, &red), cut,
		     cut ? "its GEMM record cuts K" : "its GEMM record does not cut K", e))
		return -1;
	if (grid_fields(pl, m, op, g, prod, e))
		return -1;
	const Step *mm = &pl->s[prod];
	int P = cut ? tensor_of(pl, mm->out) : OUT;     /* the product's partial, with K cut */
	int A8 = pl->t[A].fmt == g->fmt ? A : tensor_of(pl, mm->in[0]);  /* what the product reads of a */
	int unpacks = 0;
	for (int s = 0; s < pl->ns; s++) {
		const Step *st = &pl->s[s];
		if (st->kind != STEP_COMPUTE || strcmp(st->op, op->name))
			continue;
		switch (st->compute) {
		case C_CAST:
			if (pl->t[A].fmt == g->fmt)
				return err_at(e, m->file, op->line, op->col, "op '%s': its cast step %d casts '%s', which "
					      "is already in the GEMM's format %s", op->name, s, pl->t[A].name,
					      fmt_name(g->fmt));
			if (operands(pl, m, op, s, 1, "a", e) || operand(pl, m, op, s, 0, "a", A, e))
				return -1;
			x = tensor_of(pl, st->out);
			if (x == A || pl->t[x].fmt != g->fmt)
				return err_at(e, m->file, op->line, op->col, "op '%s': its cast step %d writes '%s' (%s), "
					      "the plan implies a's cast to %s", op->name, s, pl->t[x].name,
					      fmt_name(pl->t[x].fmt), fmt_name(g->fmt));
			break;
		case C_PACK:
			x = tensor_of(pl, st->in[0]);
			if (operands(pl, m, op, s, 1, x == OUT ? "out" : "a", e))
				return -1;
			if (x == OUT ? !g->unpack : (x != A && x != A8) || (g->staging != STAGING_PACK_ONCE &&
									    g->staging != STAGING_SPREAD))
				return err_at(e, m->file, op->line, op->col, "op '%s': its pack step %d packs '%s', the "
					      "plan implies %s", op->name, s, run_held(pl, st->in[0]), g->unpack ?
					      "a's (staging pack-once or spread) or out's (out staging unpack)" :
					      "only a's (staging pack-once or spread)");
			if (writes(pl, m, op, s, x, e))
				return -1;
			unpacks += x == OUT;
			break;
		case C_MATMUL:
			if (operands(pl, m, op, s, cut || BIAS < 0 ? 2 : 3, cut ? "a, b; the bias in the reduction" :
				     BIAS < 0 ? "a, b" : "a, b, bias", e) ||
			    operand(pl, m, op, s, 1, "b", B, e) || (!cut && BIAS >= 0 && operand(pl, m, op, s, 2, "bias", BIAS, e)))
				return -1;
			x = tensor_of(pl, st->in[0]);
			if (x != A && (pl->t[x].fmt != g->fmt || cast_source(pl, x) != A))
				return err_at(e, m->file, op->line, op->col, "op '%s': its matmul step %d reads '%s' as "
					      "operand 1 (a), the plan implies '%s' or its cast to %s", op->name, s,
					      pl->t[x].name, pl->t[A].name, fmt_name(g->fmt));
			if (x == A && pl->t[A].fmt != g->fmt)
				return err_at(e, m->file, op->line, op->col, "op '%s': its matmul step %d reads '%s' in %s, "
					      "the plan implies its cast to the GEMM's format %s", op->name, s, pl->t[A].name,
					      fmt_name(pl->t[A].fmt), fmt_name(g->fmt));
			if (!cut && writes(pl, m, op, s, OUT, e))
				return -1;
			if (cut && (pl->t[P].role != R_PARTIAL || P == OUT))
				return err_at(e, m->file, op->line, op->col, "op '%s': its matmul step %d writes '%s', the "
					      "plan implies a partial of '%s' (its GEMM record cuts K)", op->name, s,
					      pl->t[P].name, pl->t[OUT].name);
			break;
		case C_REDUCE:
			if (operands(pl, m, op, s, nred, nred == 1 ? "the partial" : fold && BIAS >= 0 ?
				     "the partial, bias, a folded rmsnorm's sums" : fold ? "the partial, a folded "
				     "rmsnorm's sums" : "the partial, bias", e) ||
			    operand(pl, m, op, s, 0, "the partial", P, e) ||
			    (BIAS >= 0 && operand(pl, m, op, s, 1, "bias", BIAS, e)) ||
			    (fold && operand(pl, m, op, s, nred - 1, "the folded rmsnorm's sums", S, e)) ||
			    writes(pl, m, op, s, OUT, e))
				return -1;
			if (fold && st->eps != fold->eps)
				return err_at(e, m->file, op->line, op->col, "op '%s': its reduce step %d has eps %g, the "
					      "folded rmsnorm '%s' %g", op->name, s, st->eps, fold->name, fold->eps);
			break;
		default:
			break;          /* (run_check_steps: no other kind serves a matmul) */
		}
	}
	return count_is(m, op, C_PACK, unpacks, g->unpack, g->unpack ? "one unpack of out" : "no unpack of out",
			e);
}

/* Attention step att of op: its partial (when it writes one) read by one
 * merge of the op, its scratch and its heads' width (*partials counts the
 * partials). */
static int attention_fields(const Plan *pl, const Model *m, const MOp *op, int att, int *partials, Err *e)
{
	const Step *st = &pl->s[att];
	int P = tensor_of(pl, st->out), merge = -1;
	if (pl->t[P].role == R_PARTIAL) {
		(*partials)++;
		for (int s = 0; s < pl->ns && merge < 0; s++)
			if (pl->s[s].kind == STEP_COMPUTE && pl->s[s].compute == C_MERGE && !strcmp(pl->s[s].op, op->name) &&
			    pl->s[s].nin >= 1 && tensor_of(pl, pl->s[s].in[0]) == P)
				merge = s;
		if (merge < 0)
			return err_at(e, m->file, op->line, op->col, "op '%s': its attention step %d writes the partial "
				      "'%s', which no merge step of the op reads", op->name, att, pl->t[P].name);
		if (operands(pl, m, op, merge, 1, "the partial", e))
			return -1;
	}
	const MTensor *o = &m->t[op->out];
	int64_t D = o->shape[o->rank - 1] / op->heads, keys = pl->p[st->in[1]].block[1];
	if (st->scratch != 4 * keys)     /* a row of fp32 scores: what the memory walk counts */
		return err_at(e, m->file, op->line, op->col, "op '%s': its attention step %d has scratch %lld "
			      "bytes, the plan implies %lld (a row of fp32 scores over the %lld keys a tile of "
			      "'%s' holds)", op->name, att, (long long)st->scratch, (long long)(4 * keys),
			      (long long)keys, pl->p[st->in[1]].name);
	if (plan_head_dim(pl, st) != D)
		return err_at(e, m->file, op->line, op->col, "op '%s': its attention step %d has chunks %lld, "
			      "which make its heads %lld wide in '%s' (%lld columns), the model's %lld", op->name,
			      att, (long long)plan_chunks(st), (long long)plan_head_dim(pl, st), pl->t[P].name,
			      (long long)pl->t[P].shape[pl->t[P].rank - 1], (long long)D);
	return 0;
}

/* The fields of a non-matmul op's steps that run_check_steps leaves: an
 * attention's merge and chunks, an rmsnorm's sums of squares, an
 * append's first. */
static int op_steps(const Plan *pl, const Model *m, const MOp *op, Err *e)
{
	int merge = -1;
	if (op->kind == OP_RMSNORM && run_norm_folded(pl, op->name) && fold_steps(pl, m, op, e))
		return -1;
	if (op->kind == OP_ATTENTION) {
		/* each attention step (several: causal segments) with its merge
		 * when it writes a partial, one merge for each such partial */
		int merges = count_steps(pl, op->name, C_MERGE, &merge), partials = 0;
		for (int s = 0; s < pl->ns; s++) {
			const Step *st = &pl->s[s];
			if (st->kind == STEP_COMPUTE && st->compute == C_ATTENTION && !strcmp(st->op, op->name) &&
			    attention_fields(pl, m, op, s, &partials, e))
				return -1;
		}
		if (count_is(m, op, C_MERGE, merges, partials, "one for each partial its attention steps write", e))
			return -1;
	}
	for (int s = 0; s < pl->ns; s++) {
		const Step *st = &pl->s[s];
		if (st->kind != STEP_COMPUTE || strcmp(st->op, op->name))
			continue;
		if (st->compute == C_SUMSQ && (operands(pl, m, op, s, 1, "x", e) ||
					       operand(pl, m, op, s, 0, "x", plan_find_tensor(pl, m->t[op->in[0]].name), e)))
			return -1;
		if (st->compute == C_APPEND && st->first != op->first)
			return err_at(e, m->file, op->line, op->col, "op '%s': its append step %d has first %lld, the "
				      "model %lld", op->name, s, (long long)st->first, (long long)op->first);
	}
	return 0;
}

/* A repeat's carries: its input before the loop, its body's last result
 * at the loop's end, each into its carried tensor. */
static int carry_steps(const Plan *pl, const Model *m, const MRepeat *r, Err *e)
{
	int in = plan_find_tensor(pl, m->t[r->in].name), res = plan_find_tensor(pl, m->t[m->ops[r->last].out].name);
	int carry = plan_find_tensor(pl, m->t[r->carry].name);
	for (int s = 0; s < pl->ns; s++) {
		const Step *st = &pl->s[s];
		if (st->kind != STEP_COMPUTE || strcmp(st->op, r->name))
			continue;
		int inside = plan_repeat_of(pl, s) >= 0, want = inside ? res : in;
		if (st->nin != 1)
			return err_at(e, m->file, r->line, r->col, "repeat '%s': its carry step %d reads %d operands, "
				      "the plan implies 1", r->name, s, st->nin);
		if (tensor_of(pl, st->in[0]) != want)
			return err_at(e, m->file, r->line, r->col, "repeat '%s': its carry step %d reads '%s', the plan "
				      "implies '%s' (%s)", r->name, s, run_held(pl, st->in[0]), want >= 0 ?
				      pl->t[want].name : "", inside ? "its body's last result" : "its input");
		if (tensor_of(pl, st->out) != carry)
			return err_at(e, m->file, r->line, r->col, "repeat '%s': its carry step %d writes '%s', the plan "
				      "implies '%s' (its carried tensor)", r->name, s, run_held(pl, st->out),
				      carry >= 0 ? pl->t[carry].name : "");
	}
	return 0;
}

int run_check_fields(const Plan *pl, const Model *m, Err *e)
{
	for (int i = 0; i < m->nops; i++) {
		const MOp *op = &m->ops[i];
		const Gemm *g = NULL;
		if (op->kind == OP_MATMUL ? gemm_fields(pl, m, op, &g, e) || matmul_steps(pl, m, op, g, e) :
		    op_steps(pl, m, op, e))
			return -1;
	}
	for (int r = 0; r < m->nrep; r++)
		if (carry_steps(pl, m, &m->rep[r], e))
			return -1;
	return 0;
}
