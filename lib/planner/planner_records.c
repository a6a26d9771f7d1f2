/* planner_records.c: the plan under construction: adding tensors,
 * placements and steps, canonical ownership, parameter and state homes, and
 * each op's tile load (planner_int.h). Every other part of the planner
 * builds through these; they call none of it. */
#include "planner/planner_int.h"

/* ---- records ---- */

int add_tensor(Plan *pl, const char *name, PRole role, int rank, const int64_t *shape,
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
int add_place(Plan *pl, Placement *p, int tensor, const char *name, int *existed)
{
	const PTensor *t = &pl->t[tensor];
	char buf[256];

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
	snprintf(buf, sizeof buf, "%s@%s", t->name, name);
	for (int n = 2;; n++) {
		int clash = 0;
		for (int i = 0; i < pl->np; i++)
			if (strcmp(pl->p[i].name, buf) == 0)
				clash = 1;
		if (!clash)
			break;
		snprintf(buf, sizeof buf, "%s@%s.%d", t->name, name, n);
	}
	p->name = xstrdup(buf);
	pl->p = xrealloc(pl->p, (size_t)(pl->np + 1) * sizeof *pl->p);
	pl->p[pl->np] = *p;
	return pl->np++;
}

void add_copy(Plan *pl, const char *op, Operand opd, Movement mv, int src, int dst)
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

int add_compute(Plan *pl, const char *op, ComputeKind k, const int *in, int nin,
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

int64_t largest_uniform(int64_t n, int64_t limit)
{
	int64_t p = n < limit ? n : limit;
	while (p > 1 && !uniform_ok(n, p))
		p--;
	return p;
}

/* [batch, tokens, features] owned by token rows; when the tokens leave
 * tiles over, the batch is split across owners too (as far as the tiles
 * allow and the cut is uniform), unless the plan keeps it together
 * (--ownership tokens, or auto resolved to it by plan_build). Owner (b, t)
 * sits on tile base + b*owners_t + t. A wide tensor (wide_tensors) is cut
 * into column blocks of whole 32-column units too, as many as the tiles
 * left over allow: owner (b, t, c) sits on tile (b*owners_t + t)*cols + c. */
void canonical_of(const Builder *b, const PTensor *t, Placement *p)
{
	int64_t tiles = b->mc->tiles, owners = largest_uniform(t->shape[1], tiles);
	int split = b->o->ownership == OWN_BATCH;      /* auto is resolved by plan_build */
	int64_t bs = split ? largest_uniform(t->shape[0], tiles / owners) : 1, nc = 1;
	int64_t i = t - b->pl->t, units = cdiv(t->shape[2], WIDE_UNIT);
	if (i < b->m->nt && b->wide && b->wide[i])
		nc = largest_uniform(units, tiles / (bs * owners));
	memset(p, 0, sizeof *p);
	p->layout = LAYOUT_ROW_MAJOR;
	p->split[0] = bs, p->split[1] = owners, p->split[2] = nc;
	p->block[0] = cdiv(t->shape[0], bs), p->block[1] = cdiv(t->shape[1], owners);
	p->block[2] = nc > 1 ? cdiv(units, nc) * WIDE_UNIT : t->shape[2];
	p->stride[0] = bs > 1 ? owners * nc : 0, p->stride[1] = owners > 1 ? nc : 1;
	p->stride[2] = nc > 1 ? 1 : 0;
}

/* Does op read tensor t, and as which input? (-1: it does not) */
static int reads(const MOp *op, int t)
{
	for (int k = 0; k < op->nin; k++)
		if (op->in[k] == t)
			return k;
	return -1;
}

/* Can every reader of t (and of what elementwise ops make of it) take it
 * cut into column blocks? silu, gelu and mul work element by element; a
 * matmul takes it as a (its delivery intersects any cut); mul's other
 * input must be cut alike (wide too). Anything else (a norm, an add into
 * the residual, rope, attention, the repeat's carry, an output) wants
 * whole rows. */
static int wide_ok(const Model *m, const unsigned char *w, int t)
{
	if (m->t[t].output)
		return 0;
	for (int r = 0; r < m->nrep; r++)
		if (m->rep[r].in == t || m->rep[r].carry == t || m->ops[m->rep[r].last].out == t)
			return 0;
	for (int i = 0; i < m->nops; i++) {
		const MOp *op = &m->ops[i];
		int k = reads(op, t);
		if (k < 0)
			continue;
		if (op->kind == OP_MATMUL && k == 0)
			continue;
		if (op->kind == OP_MUL) {
			int other = op->in[1 - k];
			if (!w[other] || m->t[other].rank != 3)
				return 0;
			for (int d = 0; d < 3; d++)
				if (m->t[other].shape[d] != m->t[t].shape[d])
					return 0;
		} else if (op->kind != OP_SILU && op->kind != OP_GELU)
			return 0;
		if (!wide_ok(m, w, op->out))
			return 0;
	}
	return 1;
}

/* The row-local work of a few token rows (a decode step's) crowds their
 * few owners: a GEMM's result whose rows leave at least WIDE_MIN_COLS
 * tiles each, and whose readers all work element by element (wide_ok),
 * is owned wide, and so is what silu, gelu and mul make of it. Decided
 * once per model, the same for every ownership and attempt. */
unsigned char *wide_tensors(const Model *m, const Machine *mc)
{
	unsigned char *cand = xcalloc((size_t)m->nt + 1, 1), *w = xcalloc((size_t)m->nt + 1, 1);
	for (int i = 0; i < m->nops; i++) {
		const MOp *op = &m->ops[i];
		const MTensor *t = &m->t[op->out];
		if ((op->kind == OP_MATMUL || op->kind == OP_ATTENTION) && t->role == T_ACT && t->rank == 3 &&
		    t->shape[0] * t->shape[1] * WIDE_MIN_COLS <= mc->tiles && t->shape[2] >= 2 * WIDE_UNIT)
			cand[op->out] = 1;
	}
	/* w: the candidates and what silu, gelu and mul make of them (in op
	 * order); a candidate some reader cannot take wide is dropped, and
	 * with it what was made of it, until none is. */
	for (int changed = 1; changed;) {
		changed = 0;
		memset(w, 0, (size_t)m->nt + 1);
		for (int i = 0; i < m->nops; i++) {
			const MOp *op = &m->ops[i];
			if (cand[op->out] ||
			    ((op->kind == OP_SILU || op->kind == OP_GELU || op->kind == OP_MUL) && w[op->in[0]]))
				w[op->out] = 1;
		}
		for (int i = 0; i < m->nt; i++)
			if (cand[i] && !wide_ok(m, w, i))
				cand[i] = 0, changed = 1;
	}
	free(cand);
	return w;
}

int canonical(Builder *b, int tensor)
{
	Placement p;
	int existed;
	if (b->canon[tensor] >= 0)
		return b->canon[tensor];
	canonical_of(b, &b->pl->t[tensor], &p);
	return b->canon[tensor] = add_place(b->pl, &p, tensor, "canon", &existed);
}

static void add_home_bytes(Builder *b, const Placement *p);

/* A parameter's home: transposed-right panels when a matmul consumes it as
 * b, row-major otherwise; cut on panel (or 16-element) boundaries into as
 * many shards as the tiles allow, placed from the rotating pointer. */
int param_home(Builder *b, int tensor, int panels)
{
	const PTensor *t = &b->pl->t[tensor];
	int64_t T = b->mc->tiles;
	Placement p;
	int existed;

	memset(&p, 0, sizeof p);
	if (panels) {
		int64_t ks = cdiv(t->shape[0], fmt_mu(t->fmt)), cg = cdiv(t->shape[1], 16);
		int64_t pc = largest_uniform(cg, T), pk = largest_uniform(ks, T / pc);
		p.layout = LAYOUT_TRANSPOSED_RIGHT;
		p.split[0] = pk, p.block[0] = cdiv(ks, pk) * fmt_mu(t->fmt), p.stride[0] = pc;
		p.split[1] = pc, p.block[1] = cdiv(cg, pc) * 16, p.stride[1] = 1;
	} else {
		int last = t->rank - 1;
		int64_t units = cdiv(t->shape[last], 16), pc = largest_uniform(units, T);
		p.layout = LAYOUT_ROW_MAJOR;
		p.split[last] = pc, p.block[last] = cdiv(units, pc) * 16, p.stride[last] = 1;
		if (t->rank == 2) {
			int64_t pr = largest_uniform(t->shape[0], T / pc);
			p.split[0] = pr, p.block[0] = cdiv(t->shape[0], pr), p.stride[0] = pc;
		}
	}
	p.base = b->next_tile;
	int i = add_place(b->pl, &p, tensor, "home", &existed);
	b->canon[tensor] = i;
	b->next_tile = (b->next_tile + place_shards(&b->pl->p[i])) % T;
	add_home_bytes(b, &b->pl->p[i]);
	return i;
}

int add_bytes(void *ctx, const Placement *p, const int64_t *idx, const int64_t *rep,
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

/* A state's home [B, P, W]: row-major, whole rows, cut by batch entry
 * and then into as many uniform blocks of positions as the tiles allow,
 * placed to end at tile top (from the last tile down, away from the
 * first tiles, where the owners of a decode step's few rows are).
 * Resident like a parameter. Returns where the next one ends. */
int64_t state_home(Builder *b, int tensor, int64_t top)
{
	const PTensor *t = &b->pl->t[tensor];
	int64_t T = b->mc->tiles, bs = largest_uniform(t->shape[0], T), ps = largest_uniform(t->shape[1], T / bs);
	Placement p;
	int existed;

	memset(&p, 0, sizeof p);
	p.layout = LAYOUT_ROW_MAJOR;
	p.split[0] = bs, p.block[0] = cdiv(t->shape[0], bs), p.stride[0] = ps;
	p.split[1] = ps, p.block[1] = cdiv(t->shape[1], ps), p.stride[1] = 1;
	p.split[2] = 1, p.block[2] = t->shape[2];
	int64_t n = bs * ps;
	p.base = top - n >= 0 ? top - n : T - n;
	int i = add_place(b->pl, &p, tensor, "home", &existed);
	b->canon[tensor] = i;
	add_home_bytes(b, &b->pl->p[i]);
	return p.base;
}

/* Is parameter t an embed's table that no op on the tiles reads? It
 * stays on the host. */
int param_host_only(const Model *m, int t)
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

int param_consumed_as_b(const Model *m, int t)
{
	for (int i = 0; i < m->nops; i++)
		if (m->ops[i].kind == OP_MATMUL && m->ops[i].in[1] == t)
			return 1;
	return 0;
}

/* Bytes in use on every tile before op i (acc[tiles]): homes plus the
 * canonical shards of every activation live across op i. */
void tile_load(Builder *b, int op, int64_t *acc)
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
int64_t base_load(Builder *b, int op)
{
	int64_t T = b->mc->tiles, best = 0;
	int64_t *acc = xcalloc((size_t)T, sizeof *acc);
	tile_load(b, op, acc);
	for (int64_t t = 0; t < T; t++)
		if (acc[t] > best)
			best = acc[t];
	free(acc);
	return best;
}
