/* planner_records.c: the plan under construction: adding tensors,
 * placements and steps, canonical ownership, parameter and state homes, and
 * each op's tile load (planner_int.h). Every other part of the planner
 * builds through these; they call none of it. */
#include "planner/planner_int.h"

/* ---- records ---- */

int planner_add_tensor(Plan *pl, const char *name, PRole role, int rank, const int64_t *shape,
		       Format fmt, int scale)
{
	PTensor t;
	memset(&t, 0, sizeof t);
	t.name = xstrdup(name);
	t.role = role;
	t.rank = rank;
	memcpy(t.shape, shape, (size_t)rank * sizeof *shape);
	t.fmt = fmt;
	t.scale = scale;
	t.count = 1;
	pl->t = xrealloc(pl->t, (size_t)(pl->nt + 1) * sizeof *pl->t);
	pl->t[pl->nt] = t;
	return pl->nt++;
}

/* Adds p under name (made unique), or returns the identical placement that
 * already exists and sets *existed. */
int planner_add_place(Plan *pl, Placement *p, int tensor, const char *name, int *existed)
{
	const PTensor *t = &pl->t[tensor];

	p->tensor = tensor;
	p->fmt = t->fmt;
	p->rank = t->rank;
	if (place_windowed(p))          /* the caller set the window: off, shape and whole */
		memcpy(p->whole, t->shape, sizeof p->whole);
	else
		memcpy(p->shape, t->shape, sizeof p->shape), memset(p->whole, 0, sizeof p->whole);
	*existed = 0;
	for (int i = 0; i < pl->np; i++)
		if (place_same(&pl->p[i], p)) {
			*existed = 1;
			return i;
		}
	char *buf = xasprintf("%s@%s", t->name, name);
	for (int n = 2;; n++) {
		int clash = 0;
		for (int i = 0; i < pl->np && !clash; i++)
			clash = strcmp(pl->p[i].name, buf) == 0;
		if (!clash)
			break;
		free(buf);
		buf = xasprintf("%s@%s.%d", t->name, name, n);
	}
	p->name = buf;
	pl->p = xrealloc(pl->p, (size_t)(pl->np + 1) * sizeof *pl->p);
	pl->p[pl->np] = *p;
	return pl->np++;
}

int planner_add_place_of(Plan *pl, Placement *p, int tensor, const char *op, const char *what, int *existed)
{
	char *name = xasprintf("%s.%s", op, what);
	int i = planner_add_place(pl, p, tensor, name, existed);
	free(name);
	return i;
}

void planner_add_copy(Plan *pl, const char *op, Operand opd, Movement mv, int src, int dst)
{
	Step s;
	memset(&s, 0, sizeof s);
	s.kind = STEP_COPY;
	s.op = xstrdup(op);
	s.operand = opd;
	s.move = mv;
	s.src = src;
	s.dst = dst;
	s.map = copy_mapping(&pl->p[src], &pl->p[dst]);
	pl->s = xrealloc(pl->s, (size_t)(pl->ns + 1) * sizeof *pl->s);
	pl->s[pl->ns++] = s;
}

int planner_add_compute(Plan *pl, const char *op, ComputeKind k, const int *in, int nin,
			int out, double eps)
{
	Step s;
	memset(&s, 0, sizeof s);
	s.kind = STEP_COMPUTE;
	s.op = xstrdup(op);
	s.compute = k;
	memcpy(s.in, in, (size_t)nin * sizeof *in);
	s.nin = nin;
	s.out = out;
	s.eps = eps;
	pl->s = xrealloc(pl->s, (size_t)(pl->ns + 1) * sizeof *pl->s);
	pl->s[pl->ns++] = s;
	return pl->ns - 1;
}

/* ---- canonical ownership and homes ---- */

int64_t planner_largest_uniform(int64_t n, int64_t limit)
{
	int64_t p = n < limit ? n : limit;
	while (p > 1 && !uniform_ok(n, p))
		p--;
	return p;
}

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
			Format F = m->t[o->in[1]].dtype;
			if (o->kind != OP_MATMUL || k != 0 || o->in[1] == op->out || o->rep != op->rep ||
			    o->cast == CAST_LATE || F == y->dtype || (f >= 0 && (Format)f != F))
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

static void add_home_bytes(Builder *b, const Placement *p);
static int add_bytes(void *ctx, const Placement *p, const int64_t *idx, const int64_t *rep,
		     int64_t tile);

/* The home of the b of matmul op's sibling (the matmul just before it,
 * reading the same a: a decoder's gate before up), when it has p's cut:
 * its base, or -1 (always with no_sibling: planner.c, siblings_apart). */
static int64_t sibling_base(const Builder *b, const Placement *p, int tensor)
{
	const Model *m = b->m;
	for (int i = 1; i < m->nops && !b->o->no_sibling; i++) {
		const MOp *o = &m->ops[i], *s = o - 1;
		if (o->kind != OP_MATMUL || o->in[1] != tensor || s->kind != OP_MATMUL || s->in[0] != o->in[0])
			continue;
		int h = b->canon[s->in[1]];
		if (h < 0)
			return -1;
		const Placement *q = &b->pl->p[h];
		if (q->layout == p->layout && !memcmp(q->split, p->split, sizeof p->split) &&
		    !memcmp(q->block, p->block, sizeof p->block) && !memcmp(q->stride, p->stride, sizeof p->stride))
			return q->base;
	}
	return -1;
}

/* A home's first tile: of every shift of p around the tiles, the one
 * whose busiest tile (homes so far, b->base, plus p's shards, every
 * stacked instance) is least loaded; ties go to the first from the
 * rotating pointer on. For the weights of few-row GEMMs, which keep
 * them where their homes are (build_matmul's weight-stationary case):
 * placed where there is room, not merely next, they do not pile up on
 * one tile. (Other homes are only the source of a delivery; they keep
 * the rotating pointer, whose plans a least-loaded placement changed,
 * not always for the better.) But a sibling's weights cut alike go on
 * its tiles when the homes there leave the table budget free: both
 * GEMMs then read one copy of a, which reaches those tiles once
 * (gemm_start; Qwen2.5-0.5B's decode step: 494,020 cycles -> 483,148). */
static int64_t least_loaded_base(const Builder *b, Placement *p, int tensor)
{
	int64_t T = b->mc->tiles, best = -1, bestmax = INT64_MAX;
	int64_t sib = sibling_base(b, p, tensor);
	int64_t *own = xcalloc((size_t)T, sizeof *own);
	const PTensor *pt = &b->pl->t[tensor];
	p->base = 0;
	p->tensor = tensor, p->fmt = pt->fmt, p->rank = pt->rank;
	memcpy(p->shape, pt->shape, sizeof p->shape);
	place_each(p, T, add_bytes, own);
	int64_t n = 0, *at = xmalloc((size_t)T * sizeof *at);
	for (int64_t t = 0; t < T; t++)
		if (own[t])
			own[n] = own[t] * pt->count, at[n++] = t;
	for (int64_t k = sib >= 0 ? -1 : 0; k < T; k++) {
		int64_t s = k < 0 ? sib : (b->next_tile + k) % T, worst = 0;
		for (int64_t j = 0; j < n && worst < bestmax; j++) {
			int64_t v = b->base[(at[j] + s) % T] + own[j];
			worst = v > worst ? v : worst;
		}
		if (k < 0 && worst <= machine_avail(b->mc) - b->mc->table_budget_bytes) {
			best = s;
			break;
		}
		if (k >= 0 && worst < bestmax)
			bestmax = worst, best = s;
	}
	free(own);
	free(at);
	return best;
}

/* A vector of n features beside every owner row of o (a canonical
 * [B, T, C] placement): whole on each owner, replicated once per owner;
 * or, o wide (column blocks), cut like o's columns and replicated once
 * per row, so each tile holds the features of its own block. */
void planner_owners_vector(const Placement *o, int64_t n, Placement *p)
{
	int64_t rows = o->split[0] * o->split[1], nc = o->split[2];
	memset(p, 0, sizeof *p);
	p->layout = LAYOUT_ROW_MAJOR;
	p->base = o->base;
	if (nc > 1)
		p->split[0] = nc, p->block[0] = o->block[2], p->stride[0] = o->stride[2];
	else
		p->split[0] = 1, p->block[0] = n;
	if (rows > 1)                   /* rows lie at a uniform stride: planner_canonical_of */
		p->nrep = 1, p->rep[0] = rows, p->rstride[0] = o->split[1] > 1 ? o->stride[1] : o->stride[0];
}

/* Is parameter t a GEMM operand b that stays where its home is: read as
 * b by matmuls of few rows only (rows x WIDE_MIN_COLS <= tiles, a decode
 * step's, whose one row block keeps b in place), and by nothing else? */
static int stationary_b(const Model *m, const Machine *mc, int t)
{
	int n = 0;
	for (int i = 0; i < m->nops; i++)
		for (int k = 0; k < m->ops[i].nin; k++) {
			if (m->ops[i].in[k] != t)
				continue;
			const MTensor *a = &m->t[m->ops[i].in[0]];
			if (m->ops[i].kind != OP_MATMUL || k != 1 || a->rank != 3 ||
			    a->shape[0] * a->shape[1] * WIDE_MIN_COLS > mc->tiles)
				return 0;
			n++;
		}
	return n > 0;
}

/* Is parameter t read only by norms, as their scale or bias, of wide
 * rows (a decode step's, planner_wide_tensors), all of them owned alike?
 * Then *p is planner_owners_vector's placement beside those rows, where
 * it stays: a few kilobytes a tile that would otherwise cross every
 * layer. */
int planner_norm_resident(const Builder *b, int t, Placement *p)
{
	const Model *m = b->m;
	int n = 0;
	Placement o;
	for (int i = 0; i < m->nops; i++) {
		const MOp *op = &m->ops[i];
		for (int k = 0; k < op->nin; k++) {
			if (op->in[k] != t)
				continue;
			const MTensor *x = &m->t[op->in[0]];
			if ((op->kind != OP_RMSNORM && op->kind != OP_LAYERNORM) || k == 0 || x->rank != 3 ||
			    x->shape[0] * x->shape[1] * WIDE_MIN_COLS > b->mc->tiles)
				return 0;
			Placement c;
			planner_canonical_of(b, &b->pl->t[op->in[0]], &c);
			c.rank = 3;
			if (c.split[2] < 2)
				return 0;               /* rows owned whole: copied, as before */
			if (n++ && (c.base != o.base || memcmp(c.split, o.split, sizeof c.split) ||
				    memcmp(c.block, o.block, sizeof c.block) || memcmp(c.stride, o.stride, sizeof c.stride)))
				return 0;
			o = c;
		}
	}
	if (!n || m->t[t].rank != 1)
		return 0;
	planner_owners_vector(&o, m->t[t].shape[0], p);
	return 1;
}

/* A parameter's home: transposed-right panels when a matmul consumes it as
 * b, row-major otherwise; cut on panel (or 16-element) boundaries into as
 * many shards as the tiles allow, placed from the rotating pointer (a
 * few-row GEMM's weights: least_loaded_base; norm vectors of wide rows:
 * planner_norm_resident's placement). */
int planner_param_home(Builder *b, int tensor, int panels)
{
	const PTensor *t = &b->pl->t[tensor];
	int64_t T = b->mc->tiles;
	Placement p;
	int existed;

	if (!panels && planner_norm_resident(b, tensor, &p)) {
		int i = planner_add_place(b->pl, &p, tensor, "home", &existed);
		b->canon[tensor] = i;
		add_home_bytes(b, &b->pl->p[i]);
		return i;
	}
	memset(&p, 0, sizeof p);
	if (panels) {
		int64_t ks = cdiv(t->shape[0], fmt_mu(t->fmt)), cg = cdiv(t->shape[1], 16);
		int64_t pc = planner_largest_uniform(cg, T), pk = planner_largest_uniform(ks, T / pc);
		if (b->o->home_cut && b->o->home_cut[2 * tensor])      /* the cut its GEMM wants */
			pk = b->o->home_cut[2 * tensor], pc = b->o->home_cut[2 * tensor + 1];
		p.layout = LAYOUT_TRANSPOSED_RIGHT;
		p.split[0] = pk, p.block[0] = cdiv(ks, pk) * fmt_mu(t->fmt), p.stride[0] = pc;
		p.split[1] = pc, p.block[1] = cdiv(cg, pc) * 16, p.stride[1] = 1;
	} else {
		int last = t->rank - 1;
		int64_t units = cdiv(t->shape[last], 16), pc = planner_largest_uniform(units, T);
		p.layout = LAYOUT_ROW_MAJOR;
		p.split[last] = pc, p.block[last] = cdiv(units, pc) * 16, p.stride[last] = 1;
		if (t->rank == 2) {
			int64_t pr = planner_largest_uniform(t->shape[0], T / pc);
			p.split[0] = pr, p.block[0] = cdiv(t->shape[0], pr), p.stride[0] = pc;
		}
	}
	p.base = panels && stationary_b(b->m, b->mc, tensor) ? least_loaded_base(b, &p, tensor) : b->next_tile;
	int i = planner_add_place(b->pl, &p, tensor, "home", &existed);
	b->canon[tensor] = i;
	b->next_tile = (b->next_tile + place_shards(&b->pl->p[i])) % T;
	add_home_bytes(b, &b->pl->p[i]);
	return i;
}

static int add_bytes(void *ctx, const Placement *p, const int64_t *idx, const int64_t *rep,
		     int64_t tile)
{
	int64_t *acc = ctx;
	(void)rep;
	acc[tile] += place_shard_bytes(p, idx);
	return 0;
}

/* A stacked parameter's home holds every instance. */
static void add_home_bytes(Builder *b, const Placement *p)
{
	for (int64_t k = 0; k < b->pl->t[p->tensor].count; k++)
		place_each(p, b->mc->tiles, add_bytes, b->base);
}

/* The kv heads G of an attention in kv_order heads that reads state
 * name (each kv head's keys and values side by side: its home can hold
 * them per kv head), or 1. */
static int64_t state_kv_groups(const Model *m, const char *name)
{
	for (int i = 0; i < m->nops; i++) {
		const MOp *o = &m->ops[i];
		if (o->kind == OP_ATTENTION && o->kv_order && o->kv_heads > 1 && !strcmp(m->t[o->in[1]].name, name))
			return o->kv_heads;
	}
	return 1;
}

/* A state's home [B, P, W]: row-major, whole rows, cut by batch entry
 * and then into as many uniform blocks of positions as the tiles allow,
 * placed to end at tile top (from the last tile down, away from the
 * first tiles, where the owners of a decode step's few rows are).
 * Resident like a parameter. Returns where the next one ends. */
int64_t planner_state_home(Builder *b, int tensor, int64_t top)
{
	const PTensor *t = &b->pl->t[tensor];
	int64_t T = b->mc->tiles, bs = planner_largest_uniform(t->shape[0], T), G = state_kv_groups(b->m, t->name);
	G = G > 1 && T / bs >= G ? G : 1;
	int64_t ps = planner_largest_uniform(t->shape[1], T / bs / G);
	Placement p;
	int existed;

	memset(&p, 0, sizeof p);
	p.layout = LAYOUT_ROW_MAJOR;
	p.split[0] = bs, p.block[0] = cdiv(t->shape[0], bs), p.stride[0] = ps * G;
	p.split[1] = ps, p.block[1] = cdiv(t->shape[1], ps), p.stride[1] = 1;
	p.split[2] = G, p.block[2] = t->shape[2] / G, p.stride[2] = G > 1 ? ps : 0;
	int64_t n = bs * ps * G;
	p.base = top - n >= 0 ? top - n : T - n;
	int i = planner_add_place(b->pl, &p, tensor, "home", &existed);
	b->canon[tensor] = i;
	add_home_bytes(b, &b->pl->p[i]);
	return p.base;
}

/* Is parameter t an embed's table that no op on the tiles reads? It
 * stays on the host. */
int planner_param_host_only(const Model *m, int t)
{
	int embed = 0;
	for (int i = 0; i < m->nops; i++)
		for (int k = 0; k < m->ops[i].nin; k++)
			if (m->ops[i].in[k] == t) {
				if (m->ops[i].kind != OP_EMBED)
					return 0;
				embed = 1;
			}
	return embed;
}

int planner_param_consumed_as_b(const Model *m, int t)
{
	for (int i = 0; i < m->nops; i++)
		if (m->ops[i].kind == OP_MATMUL && m->ops[i].in[1] == t)
			return 1;
	return 0;
}

/* Bytes in use on every tile before op i (acc[tiles]): homes plus the
 * canonical shards of every activation live across op i. */
void planner_tile_load(Builder *b, int op, int64_t *acc)
{
	int64_t T = b->mc->tiles;
	memcpy(acc, b->base, (size_t)T * sizeof *acc);
	for (int t = 0; t < b->m->nt; t++) {
		const MTensor *mt = &b->m->t[t];
		int pt = plan_find_tensor(b->pl, mt->name);
		if (mt->role == T_PARAM || mt->role == T_STATE || pt < 0 || b->canon[pt] < 0)
			continue;
		if (b->last_use[t] >= op || mt->output)
			place_each(&b->pl->p[b->canon[pt]], T, add_bytes, acc);
	}
}

/* The same on the busiest tile. */
int64_t planner_base_load(Builder *b, int op)
{
	int64_t T = b->mc->tiles, best = 0;
	int64_t *acc = xcalloc((size_t)T, sizeof *acc);
	planner_tile_load(b, op, acc);
	for (int64_t t = 0; t < T; t++)
		if (acc[t] > best)
			best = acc[t];
	free(acc);
	return best;
}
