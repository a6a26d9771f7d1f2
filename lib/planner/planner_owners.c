/* planner_owners.c: canonical ownership (planner_int.h): the cut of each
 * activation's canonical owners (token rows, and for a wide class column
 * blocks of several rows), the wide classes that must be cut alike, a
 * class's claim by its maker, and the fused casts a maker writes in its
 * result's place. Built on planner_records.c's records. */
#include "planner/planner_int.h"



/* The first tile of wide tensor t's canonical owners: 0, or, when a
 * matmul makes its class and an earlier matmul of the same repeat reads
 * the same a and makes another wide class (k and v beside q), the tile
 * after the latest such class's owners (mod tiles), so that the two
 * reductions and the row-local work after them share no tile and run in
 * one compute set (formats/capture.md, "Compute sets"). */
static int64_t wide_base(const Builder *b, int t)
{
	const Model *m = b->m;
	if (!b->wroot || t < 0 || t >= m->nt)
		return 0;
	const MOp *g = NULL, *h = NULL;
	for (const MOp *op = m->ops; op < m->ops + m->nops && !g; op++)
		if (op->kind == OP_MATMUL && op->out >= 0 && b->wroot[op->out] == b->wroot[t])
			g = op;
	for (const MOp *op = m->ops; g && op < g; op++)
		if (op->kind == OP_MATMUL && op->in[0] == g->in[0] && op->rep == g->rep && op->out >= 0 &&
		    b->wide[op->out] && b->wroot[op->out] != b->wroot[t])
			h = op;
	if (!h)
		return 0;
	Placement sp;
	planner_canonical_of(b, &b->pl->t[h->out], &sp);
	return (sp.base + sp.split[0] * sp.split[1] * sp.split[2]) % b->mc->tiles;
}

/* [batch, tokens, features] owned by token rows; when the tokens leave
 * tiles over, the batch is split across owners too (as far as the tiles
 * allow and the cut is uniform), unless the plan keeps it together
 * (--ownership tokens, or auto resolved to it by plan_build). Owner (b, t)
 * sits on tile base + b*owners_t + t. A wide tensor (planner_wide_tensors)
 * is cut into column blocks of whole units too (b->wunit columns, or the
 * least multiple of it that holds whole heads of a rope), as many as the
 * tiles left over allow: owner (b, t, c) sits on tile
 * (b*owners_t + t)*cols + c. */
/* A wide tensor's cut, [bs, owners, nc]: of the uniform cuts of its
 * tokens into owners, each with its batch split (split) and its units
 * cut as the tiles left over allow, the one whose block holds the fewest
 * elements (a tile's row-local work follows them), among those whose
 * tiles each receive no more of their rows' fp32 sums of squares (a
 * norm's partials, one from each of the nc column blocks) than they hold
 * elements: rows x nc <= the block's elements; ties to the fewest column
 * blocks (fewer partials, fewer fragments), then to the most owners. A
 * 512-token prefill of width 896 then has blocks of 5 rows x 64 columns
 * on 1,442 tiles, not half rows on 1,024; rows that fill the machine
 * keep one row an owner. */
static void wide_cut(int64_t batch, int64_t tokens, int split, int64_t units, int64_t unit, int64_t tiles,
		     int64_t cut[3])
{
	int64_t best = -1;
	cut[0] = cut[1] = cut[2] = 1;
	for (int64_t rows = 1, last = 0; rows <= tokens; rows++) {
		int64_t o = cdiv(tokens, rows);
		if (o == last || o > tiles || !uniform_ok(tokens, o))
			continue;
		last = o;
		if (best >= 0 && cdiv(tokens, o) * unit > best)
			break;          /* a block of one unit is already larger, and so are all after */
		int64_t bs = split ? planner_largest_uniform(batch, tiles / o) : 1;
		int64_t nc = planner_largest_uniform(units, tiles / (bs * o)), r = cdiv(batch, bs) * cdiv(tokens, o);
		int64_t e = r * cdiv(units, nc) * unit;
		if (best < 0 || (r * nc <= e && (e < best || (e == best && nc < cut[2]))))
			best = e, cut[0] = bs, cut[1] = o, cut[2] = nc;
	}
}

void planner_canonical_of(const Builder *b, const PTensor *t, Placement *p)
{
	int64_t tiles = b->mc->tiles, owners = planner_largest_uniform(t->shape[1], tiles);
	int split = b->o->ownership == OWN_BATCH;      /* auto is resolved by plan_build */
	int64_t bs = split ? planner_largest_uniform(t->shape[0], tiles / owners) : 1, nc = 1;
	int64_t i = t - b->pl->t, unit = b->wunit * (i < b->m->nt && b->wide && b->wide[i] ? b->wide[i] : 1);
	const Placement *cp = planner_class_placement(b, (int)i);
	if (cp) {                       /* the cut its class's first maker wrote (planner_class_claim) */
		*p = *cp;
		p->name = NULL, p->addr = 0;
		return;
	}
	int64_t units = cdiv(t->shape[2], unit);
	if (i < b->m->nt && b->wide && b->wide[i]) {
		int64_t cut[3];
		wide_cut(t->shape[0], t->shape[1], split, units, unit, tiles, cut);
		bs = cut[0], owners = cut[1], nc = cut[2];
	}
	memset(p, 0, sizeof *p);
	p->layout = LAYOUT_ROW_MAJOR;
	p->split[0] = bs, p->split[1] = owners, p->split[2] = nc;
	p->block[0] = cdiv(t->shape[0], bs), p->block[1] = cdiv(t->shape[1], owners);
	p->block[2] = nc > 1 ? cdiv(units, nc) * unit : t->shape[2];
	p->stride[0] = bs > 1 ? owners * nc : 0, p->stride[1] = owners > 1 ? nc : 1;
	p->stride[2] = nc > 1 ? 1 : 0;
	if (nc > 1)
		p->base = wide_base(b, (int)i);
}

const Placement *planner_class_placement(const Builder *b, int t)
{
	if (t < 0 || t >= b->m->nt || !b->cls || b->cls[t] < 0 || b->cls_place[b->cls[t]] < 0)
		return NULL;
	return &b->pl->p[b->cls_place[b->cls[t]]];
}

int planner_class_open(const Builder *b, int t)
{
	if (t < 0 || t >= b->m->nt || !b->cls || b->cls[t] < 0 || b->cls_place[b->cls[t]] >= 0)
		return 0;
	for (int u = 0; u < b->m->nt; u++)
		if (b->cls[u] == b->cls[t] && b->canon[u] >= 0)
			return 0;       /* a member already placed by the formula */
	return 1;
}

int planner_class_claim(Builder *b, int t, int pi)
{
	const Placement *p = &b->pl->p[pi];
	if (!planner_class_open(b, t) || p->rank != 3 || p->layout != LAYOUT_ROW_MAJOR || p->nrep || place_windowed(p))
		return 0;
	b->cls_place[b->cls[t]] = pi;
	b->canon[t] = pi;
	return 1;
}

/* Union-find over tensors: the classes whose members must be cut alike. */
static int uf_find(int *c, int x)
{
	while (c[x] != x)
		x = c[x] = c[c[x]];
	return x;
}

static void uf_join(int *c, int a, int b)
{
	a = uf_find(c, a), b = uf_find(c, b);
	if (a != b)
		c[a > b ? a : b] = a < b ? a : b;
}

static int64_t gcd64(int64_t a, int64_t b)
{
	while (b) {
		int64_t r = a % b;
		a = b, b = r;
	}
	return a;
}

/* The row-local work of token rows that leave tiles over (a decode
 * step's few, a 512-token prefill's) crowds their owners, so their
 * tensors are owned wide where every reader allows it. Tensors that
 * must be cut alike form classes: what a row-local op makes sits where
 * its first input does (silu, gelu, cast, mul, add, rmsnorm, rope), mul's
 * and add's two inputs are cut alike, and a repeat's input, carry and
 * body result are one. A class is wide when each of its tensors is a
 * [batch, tokens, features] activation (or input) of rows that leave a
 * second tile each (rows x WIDE_MIN_PARTS <= tiles), at least two units
 * wide, no output, and read only by ops that take column blocks: the
 * row-local ops above (rmsnorm through its rows' sums of squares,
 * plan_rowlocal; rope on whole heads, or interleaved on whole pairs),
 * a matmul as a (its cast there),
 * attention as q and append as its rows (both copied from any cut), and
 * last (each column block's last row taken where it is); when
 * some member is a matmul's or attention's result, made where the class
 * wants it; and when some member is read by work the blocks spread (a
 * row-local op, or a matmul's cast): a class that is only copied gains
 * nothing. Anything else (a layernorm, an add of a table, attention's
 * keys and values) wants whole rows. A class that a rope of half pairs
 * reads is cut in units of whole heads (the least multiple of wunit
 * columns that holds some), so that each tile rotates its own; one that
 * an interleaved rope reads in wunit columns, an even number, so that each
 * tile holds whole pairs (a GEMM's reduction lands in that cut:
 * reduce_at_class; a rope's class is never a maker's to claim, as its
 * result is fixed). Decided once per model, the
 * same for every ownership and attempt. Returns each tensor's unit in
 * wunit columns, 0 when it is owned by whole rows; cls[t] is t's class when
 * the class is free to take the cut its first maker writes
 * (planner_class_claim: no member an input, a repeat's input, carry or
 * result, made by other than a matmul, attention or elementwise op, or
 * read by a norm or a rope), else -1. */
unsigned char *planner_wide_tensors(const Model *m, const Machine *mc, int64_t wunit, int *cls, int *root)
{
	int n = m->nt;
	int *c = xmalloc((size_t)(n + 1) * sizeof *c);
	unsigned char *bad = xcalloc((size_t)n + 1, 1), *seed = xcalloc((size_t)n + 1, 1);
	unsigned char *work = xcalloc((size_t)n + 1, 1);     /* read by work that column blocks spread */
	unsigned char *w = xcalloc((size_t)n + 1, 1);
	int64_t *unit = xcalloc((size_t)n + 1, sizeof *unit);     /* per tensor: a rope's need */
	unsigned char *fixed = xcalloc((size_t)n + 1, 1);   /* its cut is not its maker's to choose */
	for (int t = 0; t < n; t++) {
		const MTensor *x = &m->t[t];
		c[t] = t;
		bad[t] = x->rank != 3 || (x->role != T_ACT && x->role != T_INPUT) || x->output ||
			 x->shape[0] * x->shape[1] * WIDE_MIN_PARTS > mc->tiles || x->shape[2] < 2 * wunit;
		unit[t] = wunit;
	}
	for (int r = 0; r < m->nrep; r++) {
		uf_join(c, m->rep[r].in, m->rep[r].carry);
		uf_join(c, m->rep[r].carry, m->ops[m->rep[r].last].out);
		fixed[m->rep[r].in] = fixed[m->rep[r].carry] = fixed[m->ops[m->rep[r].last].out] = 1;
	}
	for (int t = 0; t < n; t++)
		fixed[t] |= m->t[t].role == T_INPUT;
	for (int i = 0; i < m->nops; i++) {
		const MOp *op = &m->ops[i];
		OpKind k = op->kind;
		if (op->out >= 0 && k != OP_MATMUL && k != OP_ATTENTION && k != OP_SILU && k != OP_GELU &&
		    k != OP_MUL && k != OP_ADD && k != OP_CAST)
			fixed[op->out] = 1;
		if ((k == OP_RMSNORM || k == OP_LAYERNORM || (k == OP_ROPE && !op->interleaved)) && op->in[0] >= 0)
			fixed[op->in[0]] = 1;
	}
	for (int i = 0; i < m->nops; i++) {
		const MOp *op = &m->ops[i];
		switch (op->kind) {
		case OP_MUL:
		case OP_ADD:
			if (m->t[op->in[1]].role == T_PARAM || m->t[op->in[1]].rank != 3 ||
			    memcmp(m->t[op->in[1]].shape, m->t[op->in[0]].shape, 3 * sizeof *m->t[0].shape))
				bad[op->in[0]] = bad[op->in[1]] = 1;
			else
				uf_join(c, op->in[0], op->in[1]);
			/* fall through */
		case OP_SILU:
		case OP_GELU:
		case OP_CAST:
		case OP_RMSNORM:
			uf_join(c, op->in[0], op->out);
			work[op->in[0]] = 1;
			break;
		case OP_MATMUL:
			seed[op->out] = 1;      /* a (in[0]) any cut, cast to b's format there; b is a parameter */
			work[op->in[0]] = 1;
			break;
		case OP_ROPE:                   /* whole heads (or pairs) on each tile, positions beside them */
			uf_join(c, op->in[0], op->out);
			work[op->in[0]] = 1;
			if (!op->interleaved)   /* interleaved: a pair is two columns, in every unit */
				unit[op->in[0]] = unit[op->in[0]] / gcd64(unit[op->in[0]], op->head_dim) * op->head_dim;
			break;
		case OP_ATTENTION:              /* q copied from any cut (not a fused qkv) */
			seed[op->out] = 1;
			for (int k = 0; k < op->nin; k++)
				if (op->in[k] >= 0 && (k > 0 || op->in[1] < 0 || op->in[1] == op->in[0]))
					bad[op->in[k]] = 1;
			break;
		case OP_APPEND:                 /* its rows copied from any cut */
			break;
		case OP_LAST:                   /* each column block's last row, where it is */
			break;
		case OP_EMBED:                  /* made on the host, where its owners want it */
			break;
		case OP_LAYERNORM:
			uf_join(c, op->in[0], op->out);
			/* fall through */
		default:
			for (int k = 0; k < op->nin; k++)
				if (op->in[k] >= 0)
					bad[op->in[k]] = 1;
			if (op->out >= 0)
				bad[op->out] = 1;
			break;
		}
	}
	unsigned char *cbad = xcalloc((size_t)n + 1, 1), *cseed = xcalloc((size_t)n + 1, 1);
	unsigned char *cfixed = xcalloc((size_t)n + 1, 1);
	int64_t *cu = xcalloc((size_t)n + 1, sizeof *cu);
	for (int t = 0; t < n; t++) {
		int r = uf_find(c, t);
		cbad[r] |= bad[t];
		cseed[r] |= seed[t] ? 1 : 0;
		cseed[r] |= work[t] ? 2 : 0;
		cfixed[r] |= fixed[t];
		cu[r] = cu[r] ? cu[r] / gcd64(cu[r], unit[t]) * unit[t] : unit[t];
	}
	for (int t = 0; t < n; t++)         /* two units at least, each a multiple of wunit below 256 of them */
		cbad[uf_find(c, t)] |= m->t[t].rank == 3 && m->t[t].shape[2] < 2 * cu[uf_find(c, t)];
	for (int t = 0; t < n; t++) {
		int r = uf_find(c, t);
		w[t] = !cbad[r] && cseed[r] == 3 && cu[r] / wunit < 256 ? (unsigned char)(cu[r] / wunit) : 0;
		cls[t] = w[t] && !cfixed[r] ? r : -1;
		if (root)
			root[t] = r;
	}
	free(fixed);
	free(cfixed);
	free(unit);
	free(cu);
	free(work);
	free(c);
	free(bad);
	free(seed);
	free(cbad);
	free(cseed);
	return w;
}

void planner_beside_rows(const Placement *x, int64_t cols, Placement *p)
{
	*p = *x;
	p->name = NULL;
	p->layout = LAYOUT_ROW_MAJOR;
	p->split[2] = 1, p->block[2] = cols, p->stride[2] = 0;
	p->nrep = 1, p->rep[0] = x->split[2], p->rstride[0] = x->stride[2];
}

int planner_matmul_a(const Builder *b, const MOp *op)
{
	int a = plan_find_tensor(b->pl, b->m->t[op->in[0]].name);
	return b->fold_pre[a] >= 0 ? b->fold_pre[a] : b->fused[a] >= 0 ? b->fused[a] : a;
}

/* The format op's result is cast to where op makes it, or -1: a fused
 * cast (formats/plan.md, "Fused casts"). When op is an element-wise or
 * norm step (mul, silu, gelu, add, rmsnorm) or an attention whose result, neither an
 * output nor a repeat's carried tensor, only matmuls of op's repeat read,
 * each as a (and not as b), each with a b of one format F other than the
 * result's and none pinned to cast late, op writes the cast '<out>.<F>'
 * instead of out: no cast step, no copy of out in its own format. */
int planner_fused_cast(const Builder *b, const MOp *op)
{
	const Model *m = b->m;
	const MTensor *y = &m->t[op->out];
	int f = -1;
	if (op->kind != OP_MUL && op->kind != OP_SILU && op->kind != OP_GELU && op->kind != OP_ADD &&
	    op->kind != OP_RMSNORM && op->kind != OP_ATTENTION)
		return -1;
	if (y->output || y->role != T_ACT)
		return -1;
	for (int r = 0; r < m->nrep; r++)
		if (m->rep[r].in == op->out || m->rep[r].carry == op->out || m->ops[m->rep[r].last].out == op->out)
			return -1;
	for (const MOp *o = m->ops; o < m->ops + m->nops; o++)
		for (int k = 0; k < o->nin; k++) {
			if (o->in[k] != op->out)
				continue;
			if (o->kind != OP_MATMUL || k != 0 || o->in[1] == op->out || o->rep != op->rep ||
			    o->cast == CAST_LATE)
				return -1;
			Format F = m->t[o->in[1]].dtype;
			if (F == y->dtype || (f >= 0 && (Format)f != F))
				return -1;
			f = (int)F;
		}
	return f;
}

int planner_cast_tensor(Builder *b, int src, Format to)
{
	Plan *pl = b->pl;
	char *name = xasprintf("%s.%s", pl->t[src].name, fmt_name(to));
	int t = plan_find_tensor(pl, name), scale = 0;
	if (t < 0) {
		scales_find(b->o->scales, pl->t[src].name, &scale);
		t = planner_add_tensor(pl, name, R_ACT, pl->t[src].rank, pl->t[src].shape, to, scale);
	}
	free(name);
	return t;
}

int planner_canonical(Builder *b, int tensor)
{
	Placement p;
	int existed;
	if (b->canon[tensor] >= 0)
		return b->canon[tensor];
	planner_canonical_of(b, &b->pl->t[tensor], &p);
	return b->canon[tensor] = planner_add_place(b->pl, &p, tensor, "canon", &existed);
}
