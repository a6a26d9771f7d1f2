/* planner_homes.c: where parameters and states live (their homes, cut
 * and placed), the norm vectors that stay beside wide rows, and each op's
 * tile load (planner_int.h). Built on planner_owners.c's cuts. */
#include "planner/planner_int.h"

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
 * and then into as many uniform blocks of positions as the tiles allow
 * (at most o->state_blocks, when set),
 * placed to end at tile top (from the last tile down, away from the
 * first tiles, where the owners of a decode step's few rows are).
 * Resident like a parameter. Returns where the next one ends. */
int64_t planner_state_home(Builder *b, int tensor, int64_t top)
{
	const PTensor *t = &b->pl->t[tensor];
	int64_t T = b->mc->tiles, bs = planner_largest_uniform(t->shape[0], T), G = state_kv_groups(b->m, t->name);
	G = G > 1 && T / bs >= G ? G : 1;
	int64_t most = T / bs / G, cap = b->o->state_blocks;
	int64_t ps = planner_largest_uniform(t->shape[1], cap > 0 && cap < most ? cap : most);
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
