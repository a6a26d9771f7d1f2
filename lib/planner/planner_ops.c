/* planner_ops.c: the planner's other ops (lib/planner/planner.h): row-local ops
 * on the owners (an rmsnorm that its GEMMs fold in among them), appends,
 * last rows, broadcasts and a repeat's carried activation; attention is
 * planner_attention.c. */
#include "planner/planner_int.h"

/* ---- row-local ops ---- */

/* A vector parameter on every owner: stage on the first, then replicate. */
static int on_owners(Builder *b, const char *op, Operand opd, int tensor, int owners_of)
{
	Plan *pl = b->pl;
	int64_t owners = place_shards(&pl->p[owners_of]);
	int64_t obase = pl->p[owners_of].base, ostride = pl->p[owners_of].stride[1];
	Placement p;
	int existed, st, rep;

	if (planner_norm_resident(b, tensor, &p))
		return b->canon[tensor];        /* its home is this placement (planner_param_home) */
	if (pl->p[owners_of].split[2] > 1) {   /* wide owners: each tile its block, from the home */
		planner_owners_vector(&pl->p[owners_of], pl->t[tensor].shape[0], &p);
		rep = planner_add_place(pl, &p, tensor, "owners", &existed);
		if (!existed)
			planner_add_copy(pl, op, opd, MOVE_PARAMETER, b->canon[tensor], rep);
		return rep;
	}
	memset(&p, 0, sizeof p);
	p.layout = LAYOUT_ROW_MAJOR;
	p.split[0] = 1;
	p.block[0] = pl->t[tensor].shape[0];
	p.base = obase;
	st = planner_add_place(pl, &p, tensor, "owners.stage", &existed);
	if (!existed)
		planner_add_copy(pl, op, opd, MOVE_PARAMETER, b->canon[tensor], st);
	if (owners > 1) {
		p.nrep = 1;
		p.rep[0] = owners;
		p.rstride[0] = ostride;
	}
	rep = planner_add_place(pl, &p, tensor, "owners", &existed);
	if (!existed && rep != st)
		planner_add_copy(pl, op, opd, MOVE_PARAMETER, st, rep);
	return rep;
}

/* A [tokens, features] parameter cut by the owners' token rows: owner i
 * holds the rows of its tokens (a position table, a probe token). */
static int rows_on_owners(Builder *b, const char *op, Operand opd, int tensor, int owners_of)
{
	Plan *pl = b->pl;
	const Placement *o = &pl->p[owners_of];
	Placement p;
	int existed, d;

	memset(&p, 0, sizeof p);
	p.layout = LAYOUT_ROW_MAJOR;
	p.split[0] = o->split[1], p.block[0] = o->block[1], p.stride[0] = o->stride[1];
	p.split[1] = 1, p.block[1] = pl->t[tensor].shape[1];
	if (o->split[0] > 1)            /* the same rows on every batch part's owner */
		p.nrep = 1, p.rep[0] = o->split[0], p.rstride[0] = o->stride[0];
	p.base = o->base;
	d = planner_add_place(pl, &p, tensor, "owners.rows", &existed);
	if (!existed)
		planner_add_copy(pl, op, opd, MOVE_PARAMETER, b->canon[tensor], d);
	return d;
}

/* A wide rmsnorm's rows are cut into column blocks (x's canonical
 * placement): each block's tile sums its squares (sumsq, into an fp32
 * partial [B, T, blocks] cut like x), and every tile of a row receives
 * all of its row's sums (the partial whole per row, replicated over the
 * row's tiles): the norm's third input. */
static int sums_part(Builder *b, const char *op, int x)
{
	Plan *pl = b->pl;
	const Placement xc = pl->p[x];          /* a copy: planner_add_place may move pl->p */
	const PTensor *xt = &pl->t[xc.tensor];
	int64_t nc = xc.split[2], shape[3] = { xt->shape[0], xt->shape[1], nc };
	size_t len = strlen(op) + 16;
	char *name = xmalloc(len);
	snprintf(name, len, "%s.sumsq", op);
	for (int k = 2; plan_find_tensor(pl, name) >= 0; k++)
		snprintf(name, len, "%s.sumsq.%d", op, k);
	int t = planner_add_tensor(pl, name, R_PARTIAL, 3, shape, FMT_FP32, 0), existed;
	free(name);
	Placement p = xc;
	p.name = NULL;
	p.block[2] = 1;
	int part = planner_add_place(pl, &p, t, "part", &existed);
	planner_add_compute(pl, op, C_SUMSQ, &x, 1, part, 0);
	return part;
}

static int row_sums(Builder *b, const char *op, int x)
{
	Plan *pl = b->pl;
	int part = sums_part(b, op, x), existed;
	Placement p;
	planner_beside_rows(&pl->p[x], pl->p[x].split[2], &p);
	int row = planner_add_place(pl, &p, pl->p[part].tensor, "rows", &existed);
	planner_add_copy(pl, op, OPD_PARTIAL, MOVE_REDUCTION, part, row);
	return row;
}

/* Does wide rmsnorm op (x its canonical placement) fold into the GEMMs
 * that read it? When matmuls alone read its result, as a, in its own
 * repeat, none pinned to one K block, and each has room for two K blocks
 * of every column group. */
static int fold_norm(const Builder *b, const MOp *op, int x)
{
	const Model *m = b->m;
	int readers = 0;
	if (b->o->no_fold || op->kind != OP_RMSNORM || b->pl->p[x].split[2] < 2 || m->t[op->out].output)
		return 0;
	for (const MOp *o = m->ops; o < m->ops + m->nops; o++)
		for (int k = 0; k < o->nin; k++) {
			if (o->in[k] != op->out)
				continue;
			if (o->kind != OP_MATMUL || k != 0 || o->in[1] == op->out || o->rep != op->rep ||
			    o->grid[1] == 1 || cdiv(m->t[o->in[1]].shape[1], 16) * 2 > b->mc->tiles)
				return 0;
			readers++;
		}
	return readers > 0;
}

/* A folded rmsnorm (fold_norm): its tiles write x times the norm's scale
 * (<out>.prenorm, cut like x) and each row block's sum of squares
 * (<op>.sumsq); the GEMMs read the former as their a (planner_matmul_a) and
 * scale each row of their reduction by 1/sqrt(sum / C + eps), the sums
 * gathered beside the reduction's rows. The norm's own gather of the
 * sums, and its phase, go. */
static void fold_build(Builder *b, const MOp *op, int x)
{
	Plan *pl = b->pl;
	const Model *m = b->m;
	int out = plan_find_tensor(pl, m->t[op->out].name), existed;
	int in[2] = { x, on_owners(b, op->name, OPD_SCALE, plan_find_tensor(pl, m->t[op->in[1]].name), x) };
	int part = sums_part(b, op->name, x);
	char *name = xasprintf("%s.prenorm", pl->t[out].name);
	int t = planner_add_tensor(pl, name, R_ACT, 3, pl->t[out].shape, pl->t[out].fmt, 0);
	free(name);
	Placement p = pl->p[x];
	p.name = NULL;
	b->canon[t] = planner_add_place(pl, &p, t, "canon", &existed);
	planner_add_compute(pl, op->name, C_MUL, in, 2, b->canon[t], 0);
	b->fold_pre[out] = t, b->fold_part[out] = part;
}

void plan_rowlocal(Builder *b, const MOp *op)
{
	Plan *pl = b->pl;
	const Model *m = b->m;
	int in[3], nin = 0, out = plan_find_tensor(pl, m->t[op->out].name), existed;
#define OPTAB_STEP(E, name, since, slots, need, keys, attrs, act, shape, compute, ...) [OP_##E] = compute,
	static const ComputeKind kinds[OP_COUNT] = { AMP_OPS(OPTAB_STEP) };     /* the op table's step */
#undef OPTAB_STEP
	Placement p;

	in[nin++] = planner_canonical(b, plan_find_tensor(pl, m->t[op->in[0]].name));
	if (fold_norm(b, op, in[0])) {
		fold_build(b, op, in[0]);
		return;
	}
	if (op->kind == OP_ADD) {
		int bt = plan_find_tensor(pl, m->t[op->in[1]].name);
		in[nin++] = pl->t[bt].role == R_PARAM ? rows_on_owners(b, op->name, OPD_B, bt, in[0])
						      : planner_canonical(b, bt);
	}
	if (op->kind == OP_MUL && m->t[op->in[1]].role == T_PARAM)       /* a per-channel scale */
		in[nin++] = on_owners(b, op->name, OPD_SCALE, plan_find_tensor(pl, m->t[op->in[1]].name), in[0]);
	else if (op->kind == OP_MUL || (op->kind == OP_ROPE && op->in[1] >= 0))  /* the other activation, or the positions */
		in[nin++] = planner_canonical(b, plan_find_tensor(pl, m->t[op->in[1]].name));
	if (op->kind == OP_ROPE && nin > 1 && pl->p[in[0]].split[2] > 1) {      /* wide: the positions beside each row's heads */
		Placement xc = pl->p[in[0]];
		planner_beside_rows(&xc, 1, &p);
		int pos = planner_add_place(pl, &p, pl->p[in[1]].tensor, "rows", &existed);
		if (!existed)
			planner_add_copy(pl, op->name, OPD_POS, MOVE_ACTIVATION, in[1], pos);
		in[1] = pos;
	}
	/* a wide rmsnorm's sums first: its scale's copy then shares their phase */
	int sums = op->kind == OP_RMSNORM && pl->p[in[0]].split[2] > 1 ? row_sums(b, op->name, in[0]) : -1;
	if (op->kind == OP_LAYERNORM || op->kind == OP_RMSNORM)
		for (int k = 1; k < op->nin; k++)
			in[nin++] = on_owners(b, op->name, k == 1 ? OPD_SCALE : OPD_BIAS,
					      plan_find_tensor(pl, m->t[op->in[k]].name), in[0]);
	if (sums >= 0)
		in[nin++] = sums;
	p = pl->p[in[0]];
	p.name = NULL;
	int F = planner_fused_cast(b, op);
	if (F >= 0)
		out = b->fused[out] = planner_cast_tensor(b, out, (Format)F);
	b->canon[out] = planner_add_place(pl, &p, out, "canon", &existed);
	int st = planner_add_compute(pl, op->name, kinds[op->kind], in, nin, b->canon[out], op->eps);
	if (op->kind == OP_ROPE)
		pl->s[st].heads = op->heads, pl->s[st].head_dim = op->head_dim, pl->s[st].theta = op->theta,
		pl->s[st].head_stride = op->head_stride, pl->s[st].interleaved = op->interleaved,
		pl->s[st].rope_scale = op->rope_scale, pl->s[st].rope_grid = op->rope_grid;
}

/* append: the state's home holds whole rows of a batch entry's block of
 * positions on each tile. Which block a new row lands in is known only at
 * run time, so the rows (and their positions) of each batch entry go to
 * every tile of its blocks: a static exchange. Each tile then writes the
 * rows whose position falls in its block: only compute reads the
 * position. */
void plan_append(Builder *b, const MOp *op)
{
	Plan *pl = b->pl;
	const Model *m = b->m;
	int st = b->canon[plan_find_tensor(pl, m->t[op->out].name)], in[2], existed;
	const Placement home = pl->p[st], *h = &home;    /* a copy: planner_add_place may move pl->p */
	int64_t blk = h->block[1];
	/* rows known to land at first + t, from a block boundary (a prefill's):
	 * each goes to its block's tile alone */
	int aligned = op->first >= 0 && op->first % blk == 0;
	for (int k = 0; k < 2; k++) {
		int t = plan_find_tensor(pl, m->t[op->in[k]].name);
		int64_t T = pl->t[t].shape[1];
		Placement p;
		memset(&p, 0, sizeof p);
		p.layout = LAYOUT_ROW_MAJOR;
		p.split[0] = h->split[0], p.block[0] = h->block[0], p.stride[0] = h->stride[0];
		p.split[1] = 1, p.block[1] = T;
		p.split[2] = 1, p.block[2] = pl->t[t].shape[2];
		if (h->split[2] > 1 && !k)              /* the rows: each kv head's columns to its tiles */
			p.split[2] = h->split[2], p.block[2] = h->block[2], p.stride[2] = h->stride[2];
		else if (h->split[2] > 1)               /* the positions: to every kv head's tiles */
			p.nrep = 1, p.rep[0] = h->split[2], p.rstride[0] = h->stride[2];
		p.base = h->base;
		if (aligned) {
			p.split[1] = cdiv(T, blk), p.block[1] = blk, p.stride[1] = h->stride[1];
			p.base = h->base + op->first / blk * h->stride[1];
		} else if (h->split[1] > 1) {
			p.rep[p.nrep] = h->split[1], p.rstride[p.nrep++] = h->stride[1];
		}
		in[k] = planner_add_place(pl, &p, t, k ? "append.positions" : "append.rows", &existed);
		if (!existed)
			planner_add_copy(pl, op->name, k ? OPD_POS : OPD_X, MOVE_ACTIVATION, planner_canonical(b, t),
					 in[k]);
	}
	int s = planner_add_compute(pl, op->name, C_APPEND, in, 2, st, 0);
	pl->s[s].first = op->first;
}

/* last: each batch entry's last row, on the owners that hold it: the
 * result's shards of batch entries sit on the tiles of x's canonical
 * shards with row T - 1, cut on the column axis as x is (a wide x: each
 * column block's row where it is), then return to the result's own
 * canonical owners. */
void plan_last(Builder *b, const MOp *op)
{
	Plan *pl = b->pl;
	const Model *m = b->m;
	int x = plan_find_tensor(pl, m->t[op->in[0]].name), out = plan_find_tensor(pl, m->t[op->out].name), existed;
	int in = planner_canonical(b, x);
	const Placement c = pl->p[in];
	int64_t T = pl->t[x].shape[1];
	Placement p;
	memset(&p, 0, sizeof p);
	p.layout = LAYOUT_ROW_MAJOR;
	p.split[0] = c.split[0], p.block[0] = c.block[0], p.stride[0] = c.stride[0];
	p.split[1] = 1, p.block[1] = 1;
	p.split[2] = c.split[2], p.block[2] = c.block[2], p.stride[2] = c.stride[2];
	p.base = c.base + (T - 1) / c.block[1] * c.stride[1];
	int lp = planner_add_place(pl, &p, out, "last", &existed);
	planner_add_compute(pl, op->name, C_LAST, &in, 1, lp, 0);
	Placement cp;
	planner_canonical_of(b, &pl->t[out], &cp);
	b->canon[out] = planner_add_place(pl, &cp, out, "canon", &existed);
	if (b->canon[out] != lp)
		planner_add_copy(pl, op->name, OPD_OUT, MOVE_ACTIVATION, lp, b->canon[out]);
}

/* A [tokens, features] parameter made an activation: every batch entry a
 * copy, on the owners of the result's token rows. */
void plan_broadcast(Builder *b, const MOp *op)
{
	Plan *pl = b->pl;
	int out = plan_find_tensor(pl, b->m->t[op->out].name), x = plan_find_tensor(pl, b->m->t[op->in[0]].name);
	Placement cp;
	int existed;

	planner_canonical_of(b, &pl->t[out], &cp);
	b->canon[out] = planner_add_place(pl, &cp, out, "canon", &existed);
	int in = rows_on_owners(b, op->name, OPD_X, x, b->canon[out]);
	planner_add_compute(pl, op->name, C_BROADCAST, &in, 1, b->canon[out], 0);
}

/* The carried activation of a repeat: a local copy on its owners. */
void plan_carry(Builder *b, const char *op, int from, int to)
{
	Plan *pl = b->pl;
	int in = planner_canonical(b, from), existed;
	if (b->canon[to] < 0) {
		Placement p = pl->p[in];
		p.name = NULL;
		b->canon[to] = planner_add_place(pl, &p, to, "canon", &existed);
	}
	planner_add_compute(pl, op, C_CARRY, &in, 1, b->canon[to], 0);
}
