/* run_check: the stage is the model's computation, step by step. Every
 * compute step serves a model op (or a repeat's carry) with a kind that
 * op lowers to; every non-matmul op has its one step, reading the model's
 * operands in order and writing its result; the fields the machine reads
 * (layernorm eps, attention heads and score scale) are the model's. The
 * matmuls' operands are checked on their GEMM records (run_check_model). */
#include <math.h>
#include <string.h>

#include "run/run_int.h"

/* the model tensor a placement holds: its tensor's name */
static const char *held(const Plan *pl, int place)
{
	return place >= 0 && place < pl->np ? pl->t[pl->p[place].tensor].name : "";
}

static int allowed(OpKind k, ComputeKind c)
{
	switch (k) {
	case OP_MATMUL: return c == C_CAST || c == C_PACK || c == C_MATMUL || c == C_REDUCE;
	case OP_GELU: return c == C_GELU;
	case OP_ADD: return c == C_ADD;
	case OP_LAYERNORM: return c == C_LAYERNORM;
	case OP_RMSNORM: return c == C_RMSNORM;
	case OP_SILU: return c == C_SILU;
	case OP_MUL: return c == C_MUL;
	case OP_ROPE: return c == C_ROPE;
	case OP_APPEND: return c == C_APPEND;
	case OP_LAST: return c == C_LAST;
	case OP_CAST: return c == C_CAST;
	case OP_BROADCAST: return c == C_BROADCAST;
	case OP_ATTENTION: return c == C_ATTENTION || c == C_MERGE;
	default: return 0;              /* patchify and embed run on the host */
	}
}

static ComputeKind primary(OpKind k)
{
	static const ComputeKind p[OP_COUNT] = { [OP_MATMUL] = C_MATMUL, [OP_GELU] = C_GELU, [OP_ADD] = C_ADD,
		[OP_LAYERNORM] = C_LAYERNORM, [OP_CAST] = C_CAST, [OP_BROADCAST] = C_BROADCAST,
		[OP_ATTENTION] = C_ATTENTION, [OP_PATCHIFY] = C_COUNT, [OP_RMSNORM] = C_RMSNORM, [OP_SILU] = C_SILU,
		[OP_MUL] = C_MUL, [OP_ROPE] = C_ROPE, [OP_APPEND] = C_APPEND,
		[OP_LAST] = C_LAST };
	return p[k];
}

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
		if (op->kind == OP_MATMUL || op->kind == OP_PATCHIFY || op->kind == OP_EMBED)
			continue;       /* (matmuls on their GEMM records, the host's ops on theirs) */
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
		if (n != 1)
			return err_at(e, f, op->line, op->col, "op '%s': the stage has %d %s steps for it, not one",
				      op->name, n, compute_name(want));
		const Step *st = &pl->s[found];
		/* the model's operands in order (attention reads k and v from in[1],
		 * then its positions) */
		int nin = op->kind == OP_ATTENTION ? op->nin + 1 : op->nin;
		if (st->nin != nin)
			return err_at(e, f, op->line, op->col, "op '%s': its step %d reads %d operands, the model %d",
				      op->name, found, st->nin, nin);
		for (int k = 0; k < nin; k++) {
			int mt = op->in[op->kind == OP_ATTENTION ? (k > 1 ? k - 1 : k ? 1 : 0) : k];
			if (strcmp(held(pl, st->in[k]), m->t[mt].name))
				return err_at(e, f, op->line, op->col, "op '%s': its step %d reads '%s' as operand %d, "
					      "the model '%s'", op->name, found, held(pl, st->in[k]), k + 1,
					      m->t[mt].name);
		}
		int out = op->kind == OP_ATTENTION && merge >= 0 ? pl->s[merge].out : st->out;
		if (strcmp(held(pl, out), m->t[op->out].name))
			return err_at(e, f, op->line, op->col, "op '%s': its steps write '%s', the model '%s'",
				      op->name, held(pl, out), m->t[op->out].name);
		if (op->kind == OP_ROPE && (st->heads != op->heads || st->head_dim != op->head_dim || st->theta != op->theta))
			return err_at(e, f, op->line, op->col, "op '%s': its step %d rotates %lld heads of %lld at theta %g, "
				      "the model %lld heads of %lld at theta %g", op->name, found, (long long)st->heads,
				      (long long)st->head_dim, st->theta, (long long)op->heads, (long long)op->head_dim,
				      op->theta);
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
	}
	return 0;
}
