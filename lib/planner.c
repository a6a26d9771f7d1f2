#include "planner.h"

#include "capture.h"
#include "compose.h"
#include "exchange.h"
#include "expand.h"
#include "group.h"
#include "table.h"
#include "trial.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
	Plan *pl;
	const Model *m;
	const Machine *mc;
	const PlanOpts *o;
	int *canon;             /* plan tensor -> its canonical/home placement */
	int64_t *base;          /* per tile: bytes of homes */
	int64_t next_tile;      /* rotating pointer for homes */
	int *last_use;          /* model tensor -> last op reading it */
	int body;               /* first step of the repeat being built */
	int64_t *tab, *frg;     /* per tile: table bytes and fragments of the ops built so far
				   (trial lowering; memory and cycles objectives) */
	double margin;          /* a trial fits within (1 - margin) of every limit */
} Builder;

/* ---- records ---- */

static int add_tensor(Plan *pl, const char *name, PRole role, int rank, const int64_t *shape,
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
static int add_place(Plan *pl, Placement *p, int tensor, const char *name, int *existed)
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

static void add_copy(Plan *pl, const char *op, Operand opd, Movement mv, int src, int dst)
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

static int add_compute(Plan *pl, const char *op, ComputeKind k, const int *in, int nin,
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

static int64_t largest_uniform(int64_t n, int64_t limit)
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
 * sits on tile base + b*owners_t + t. */
static void canonical_of(const Builder *b, const PTensor *t, Placement *p)
{
	int64_t tiles = b->mc->tiles, owners = largest_uniform(t->shape[1], tiles);
	int split = b->o->ownership == OWN_BATCH;      /* auto is resolved by plan_build */
	int64_t bs = split ? largest_uniform(t->shape[0], tiles / owners) : 1;
	memset(p, 0, sizeof *p);
	p->layout = LAYOUT_ROW_MAJOR;
	p->split[0] = bs, p->split[1] = owners, p->split[2] = 1;
	p->block[0] = cdiv(t->shape[0], bs), p->block[1] = cdiv(t->shape[1], owners), p->block[2] = t->shape[2];
	p->stride[0] = bs > 1 ? owners : 0, p->stride[1] = 1;
}

static int canonical(Builder *b, int tensor)
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
static int home(Builder *b, int tensor, int panels)
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

static int consumed_as_b(const Model *m, int t)
{
	for (int i = 0; i < m->nops; i++)
		if (m->ops[i].kind == OP_MATMUL && m->ops[i].in[1] == t)
			return 1;
	return 0;
}

/* Bytes in use on every tile before op i (acc[tiles]): homes plus the
 * canonical shards of every activation live across op i. */
static void tile_load(Builder *b, int op, int64_t *acc)
{
	int64_t T = b->mc->tiles;
	memcpy(acc, b->base, (size_t)T * sizeof *acc);
	for (int t = 0; t < b->m->nt; t++) {
		const MTensor *mt = &b->m->t[t];
		int pt = plan_find_tensor(b->pl, mt->name);
		if (mt->role == T_PARAM || pt < 0 || b->canon[pt] < 0)
			continue;
		if (b->last_use[t] >= op || mt->output)
			place_each(&b->pl->p[b->canon[pt]], T, add_bytes, acc);
	}
}

/* The same on the busiest tile. */
static int64_t base_load(Builder *b, int op)
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

/* ---- matmul ---- */

static int cast_tensor(Builder *b, const char *op, int src, Format to, int scale)
{
	scales_find(b->o->scales, b->pl->t[src].name, &scale);
	Plan *pl = b->pl;
	char name[200];
	int t, out, existed, in;
	Placement p;

	snprintf(name, sizeof name, "%s.%s", pl->t[src].name, fmt_name(to));
	if ((t = plan_find_tensor(pl, name)) >= 0 && b->canon[t] >= 0)
		return t;
	t = add_tensor(pl, name, R_ACT, pl->t[src].rank, pl->t[src].shape, to, scale);
	in = canonical(b, src);
	p = pl->p[in];
	p.name = NULL;
	out = add_place(pl, &p, t, "canon", &existed);
	b->canon[t] = out;
	add_compute(pl, op, C_CAST, &in, 1, out, 0);
	return t;
}

/* Parameter delivery from its home: straight into an unreplicated operand;
 * otherwise into a stage on the first replica, then replicated. */
static int deliver(Builder *b, const char *op, Operand opd, int tensor, Placement *stage,
		   Placement *dst, const char *what)
{
	Plan *pl = b->pl;
	char where[160], swhere[160];
	int existed, src = b->canon[tensor];

	snprintf(where, sizeof where, "%s.%s", op, what);
	snprintf(swhere, sizeof swhere, "%s.%s.stage", op, what);
	if (dst->nrep) {
		int st = add_place(pl, stage, tensor, swhere, &existed);
		if (!existed)
			add_copy(pl, op, opd, MOVE_PARAMETER, src, st);
		src = st;
	}
	int d = add_place(pl, dst, tensor, where, &existed);
	if (!existed)
		add_copy(pl, op, opd, MOVE_PARAMETER, src, d);
	return d;
}

/* The first tile of op k's grid (k its place in the model): k golden-ratio
 * steps around the tiles, floor(frac(k / phi) * tiles) in integers. It is
 * the op's own, so a change to one op's grid (a pin) moves no other op's
 * tiles and the stages of two plans diff op by op; successive ops still
 * start far apart, spreading their grids over the machine. */
static int64_t op_start(const Builder *b, const MOp *op)
{
	uint64_t k = (uint64_t)(op - b->m->ops), x = k * 0x9e3779b97f4a7c15ull;   /* 2^64 / phi */
	return (int64_t)(((x >> 32) * (uint64_t)b->mc->tiles) >> 32);
}

static int choose(Builder *b, const MOp *op, const GemmShape *gs, Candidate *best,
		  Explain *ex, Candidate **all, int64_t *nall, Err *e)
{
	const Machine *mc = b->mc;
	int64_t avail = machine_avail(mc), base = base_load(b, (int)(op - b->m->ops));
	int64_t ks = cdiv(gs->k, fmt_mu(gs->fmt)), cg = cdiv(gs->n, 16);
	int need_cast = gs->a_fmt != gs->fmt;
	int64_t considered = 0, fitting = 0, closest = INT64_MAX;
	Candidate *top = NULL, nearest;
	int ntop = 0, keep = ex && b->o->explain > 0 ? b->o->explain : 0;

	for (int64_t R = 1; R <= gs->tokens; R++) {
		if (!uniform_ok(gs->tokens, R) || (op->grid[0] && op->grid[0] != R))
			continue;
		for (int64_t K = 1; K <= ks && R * K <= mc->tiles; K++) {
			if (!uniform_ok(ks, K) || (op->grid[1] && op->grid[1] != K))
				continue;
			for (int64_t C = 1; C <= cg && R * K * C <= mc->tiles; C++) {
				if (!uniform_ok(cg, C) || (op->grid[2] && op->grid[2] != C))
					continue;
				for (int ci = 0; ci < 2; ci++) {
					CastOrder cast = need_cast ? (ci ? CAST_LATE : CAST_EARLY) : CAST_AUTO;
					if ((!need_cast && ci) || (op->cast && need_cast && op->cast != cast))
						continue;
					for (int si = 0; si < 8; si++) {
						Staging st = si & 1 ? STAGING_DIRECT : STAGING_PACK_ONCE;
						int unpack = si >> 1 & 1, scatter = si >> 2;
						if ((op->staging && op->staging != st) ||
						    (op->out_staging && op->out_staging != unpack + 1) ||
						    (scatter && K == 1) ||
						    (op->reduce && K > 1 && op->reduce != scatter + 1))
							continue;
						Candidate c = { .grid = { R, K, C }, .cast = cast, .staging = st,
								.unpack = unpack, .scatter = scatter };
						gemm_score(gs, mc, &c);
						considered++;
						if (all) {
							if ((*nall & (*nall - 1)) == 0)
								*all = xrealloc(*all, (size_t)(*nall ? 2 * *nall : 1) * sizeof **all);
							(*all)[(*nall)++] = c;
						}
						if (base + c.tile_bytes > avail) {
							if (base + c.tile_bytes < closest) {
								closest = base + c.tile_bytes;
								nearest = c;
							}
							continue;
						}
						fitting++;
						if (fitting == 1 || candidate_cmp(&c, best, b->o->objective) < 0)
							*best = c;
						if (keep) {
							int pos = ntop;
							while (pos > 0 && candidate_cmp(&c, &top[pos - 1], b->o->objective) < 0)
								pos--;
							if (pos < keep) {
								if (ntop < keep)
									ntop++;
								top = xrealloc(top, (size_t)keep * sizeof *top);
								memmove(&top[pos + 1], &top[pos],
									(size_t)(ntop - 1 - pos) * sizeof *top);
								top[pos] = c;
							}
						}
					}
				}
			}
		}
	}
	if (ex) {
		ex->op = xstrdup(op->name);
		ex->considered = considered;
		ex->fitting = fitting;
		ex->best = top;
		ex->nbest = ntop;
		ex->avail = avail;
		ex->base = base;
	} else {
		free(top);
	}
	/* With exact costing (all != NULL) the bound only ranks: the short
	 * list is lowered and the whole plan checked, so a pinned grid is
	 * judged by the exact figures, never refused by the bound. */
	if (all && *nall)
		return 0;
	/* The bound adds the candidate's largest shards to the busiest tile;
	 * when none passes it, the candidate nearest to passing is taken and
	 * the plan's exact per-tile memory (check_memory) decides. */
	if (!fitting && closest < INT64_MAX && !op->grid[0]) {
		*best = nearest;
		return 0;
	}
	if (!fitting) {
		const Model *m = b->m;
		long line = op->pinned ? op->pin_line : op->line, col = op->pinned ? op->pin_col : op->col;
		return err_at(e, m->file, line, col,
			      "matmul '%s': no %sgrid fits in SRAM: the smallest needs %lld bytes on a tile "
			      "(%lld already in use), %lld are available (sram_bytes - reserved_bytes)",
			      op->name, op->pinned ? "pinned " : "", (long long)closest, (long long)base,
			      (long long)avail);
	}
	return 0;
}

static void build_matmul(Builder *b, const MOp *op, const GemmShape *gs, const Candidate *c);
static int trial_choose(Builder *b, const MOp *op, const GemmShape *gs, Explain *ex, Err *e);

static int matmul(Builder *b, const MOp *op, Explain *ex, Err *e)
{
	Plan *pl = b->pl;
	const Model *m = b->m;
	int a = plan_find_tensor(pl, m->t[op->in[0]].name), w = plan_find_tensor(pl, m->t[op->in[1]].name);
	int bias = op->in[2] >= 0 ? plan_find_tensor(pl, m->t[op->in[2]].name) : -1;
	const PTensor *at = &pl->t[a], *wt = &pl->t[w];
	GemmShape gs = { at->shape[0], at->shape[1], at->shape[2], wt->shape[1], wt->fmt, at->fmt,
			 bias >= 0, 0, 0, 0, 0 };
	Candidate c;
	int ain = canonical(b, a);

	gs.owners = place_shards(&pl->p[ain]);
	gs.owner_batch = pl->p[ain].block[0];
	gs.b_home_shards = place_shards(&pl->p[b->canon[w]]);
	gs.bias_home_shards = bias >= 0 ? place_shards(&pl->p[b->canon[bias]]) : 0;
	if (op->grid[0] && gemm_grid_ok(&gs, op->grid, b->mc->tiles, e)) {
		char why[sizeof e->msg];
		memcpy(why, e->msg, sizeof why);
		return err_at(e, m->file, op->pin_line, op->pin_col, "pin for '%s': %s",
			      op->name, why);
	}
	if (b->o->objective >= OBJ_MEMORY)
		return trial_choose(b, op, &gs, ex, e);
	if (choose(b, op, &gs, &c, ex, NULL, NULL, e))
		return -1;
	build_matmul(b, op, &gs, &c);
	return 0;
}

/* Builds the placements and steps of matmul op with candidate c. */
static void build_matmul(Builder *b, const MOp *op, const GemmShape *gsp, const Candidate *cp)
{
	Plan *pl = b->pl;
	const Model *m = b->m;
	GemmShape gs = *gsp;
	Candidate c = *cp;
	int a = plan_find_tensor(pl, m->t[op->in[0]].name), w = plan_find_tensor(pl, m->t[op->in[1]].name);
	int bias = op->in[2] >= 0 ? plan_find_tensor(pl, m->t[op->in[2]].name) : -1;
	int out = plan_find_tensor(pl, m->t[op->out].name);
	Placement gp[GP_COUNT], cp2;
	int idx[GP_COUNT], existed, ain = canonical(b, a);

	int gi = pl->ng++;
	pl->g = xrealloc(pl->g, (size_t)pl->ng * sizeof *pl->g);
	Gemm *g = &pl->g[gi];
	memset(g, 0, sizeof *g);
	g->op = xstrdup(op->name);
	g->a = a, g->b = w, g->bias = bias, g->out = out;
	g->m = gs.batch * gs.tokens, g->k = gs.k, g->n = gs.n;
	g->fmt = gs.fmt;
	memcpy(g->grid, c.grid, sizeof g->grid);
	g->cast = c.cast;
	g->staging = c.staging;
	g->unpack = c.unpack;
	g->scatter = c.scatter;
	g->pinned = op->pinned;
	g->tiles = c.tiles;

	/* a: early cast on the owners, then pack-once or direct delivery. */
	int moved = a;
	if (c.cast == CAST_EARLY)
		moved = cast_tensor(b, op->name, a, gs.fmt, 0), ain = b->canon[moved];
	gemm_placements(&gs, &c, gp);
	for (int i = 0; i < GP_COUNT; i++)
		gp[i].base = op_start(b, op);
	char where[160];
#define PLACE(i, t, suffix) (snprintf(where, sizeof where, "%s.%s", op->name, suffix), \
			     idx[i] = add_place(pl, &gp[i], t, where, &existed))
	int rep_a = c.grid[2] > 1;
	if (c.staging == STAGING_PACK_ONCE) {
		PLACE(GP_A_STAGE, moved, "a.stage");
		if (!existed)
			add_copy(pl, op->name, OPD_A, MOVE_ACTIVATION, ain, idx[GP_A_STAGE]);
		PLACE(GP_A_PACKED, moved, rep_a ? "a.packed" : "a");
		if (!existed)
			add_compute(pl, op->name, C_PACK, &idx[GP_A_STAGE], 1, idx[GP_A_PACKED], 0);
		ain = idx[GP_A_PACKED];
	}
	if (c.staging != STAGING_PACK_ONCE || rep_a) {
		PLACE(GP_A_MOVED, moved, "a");
		if (!existed)
			add_copy(pl, op->name, OPD_A, MOVE_ACTIVATION, ain, idx[GP_A_MOVED]);
	} else {
		idx[GP_A_MOVED] = idx[GP_A_PACKED];
	}
	idx[GP_A_OP] = idx[GP_A_MOVED];
	if (c.cast == CAST_LATE) {
		char name[200];
		snprintf(name, sizeof name, "%s.%s", pl->t[a].name, fmt_name(gs.fmt));
		int t8 = plan_find_tensor(pl, name);
		if (t8 < 0) {
			int sc = 0;
			scales_find(b->o->scales, pl->t[a].name, &sc);
			t8 = add_tensor(pl, name, R_ACT, 3, pl->t[a].shape, gs.fmt, sc);
		}
		PLACE(GP_A_OP, t8, "a");
		if (!existed)
			add_compute(pl, op->name, C_CAST, &idx[GP_A_MOVED], 1, idx[GP_A_OP], 0);
	}

	/* b and bias: when replicated, a conversion into a stage on the first
	 * replica, then the replication (amp-compose joins the two). */
	idx[GP_B_OP] = deliver(b, op->name, OPD_B, w, &gp[GP_B_STAGE], &gp[GP_B_OP], "b");
	idx[GP_BIAS_OP] = bias < 0 ? -1 :
		deliver(b, op->name, OPD_BIAS, bias, &gp[GP_BIAS_STAGE], &gp[GP_BIAS_OP], "bias");

	/* The product, its reduction, and the return to canonical owners. */
	int in[3] = { idx[GP_A_OP], idx[GP_B_OP], bias >= 0 ? idx[GP_BIAS_OP] : -1 };
	PLACE(GP_OUT, out, "out");
	if (c.grid[1] > 1) {
		char name[200];
		snprintf(name, sizeof name, "%s.partial", pl->t[out].name);
		int pt = add_tensor(pl, name, R_PARTIAL, 4, gp[GP_PARTIAL].shape, FMT_FP16, 0);
		PLACE(GP_PARTIAL, pt, "partial");
		add_compute(pl, op->name, C_MATMUL, in, 2, idx[GP_PARTIAL], 0);
		PLACE(GP_RED, pt, "reduce");
		add_copy(pl, op->name, OPD_PARTIAL, MOVE_REDUCTION, idx[GP_PARTIAL], idx[GP_RED]);
		int rin[2] = { idx[GP_RED], in[2] };
		add_compute(pl, op->name, C_REDUCE, rin, bias >= 0 ? 2 : 1, idx[GP_OUT], 0);
	} else {
		add_compute(pl, op->name, C_MATMUL, in, bias >= 0 ? 3 : 2, idx[GP_OUT], 0);
	}
	if (c.unpack) {         /* the result to row-major on its tiles: each row's columns one run */
		PLACE(GP_OUT_ROWS, out, "out.rows");
		add_compute(pl, op->name, C_PACK, &idx[GP_OUT], 1, idx[GP_OUT_ROWS], 0);
		idx[GP_OUT] = idx[GP_OUT_ROWS];
	}
#undef PLACE
	canonical_of(b, &pl->t[out], &cp2);
	int oc = add_place(pl, &cp2, out, "canon", &existed);
	b->canon[out] = oc;
	add_copy(pl, op->name, OPD_OUT, MOVE_OUTPUT, idx[GP_OUT], oc);
}

/* ---- exact costing: build a candidate, lower it, take it back ---- */

typedef struct {
	int nt, np, ns, ng;
	int *canon;
} Snap;

static int canon_len(const Builder *b) { return 2 * b->m->nt + 4 * b->m->nops + 1; }

static void snap_take(Builder *b, Snap *s)
{
	s->nt = b->pl->nt, s->np = b->pl->np, s->ns = b->pl->ns, s->ng = b->pl->ng;
	s->canon = xmalloc((size_t)canon_len(b) * sizeof *s->canon);
	memcpy(s->canon, b->canon, (size_t)canon_len(b) * sizeof *s->canon);
}

static void snap_back(Builder *b, Snap *s)
{
	Plan *pl = b->pl;
	for (int i = s->nt; i < pl->nt; i++)
		free(pl->t[i].name);
	for (int i = s->np; i < pl->np; i++)
		free(pl->p[i].name);
	for (int i = s->ns; i < pl->ns; i++)
		free(pl->s[i].op);
	for (int i = s->ng; i < pl->ng; i++)
		free(pl->g[i].op);
	pl->nt = s->nt, pl->np = s->np, pl->ns = s->ns, pl->ng = s->ng;
	memcpy(b->canon, s->canon, (size_t)canon_len(b) * sizeof *s->canon);
	free(s->canon);
}

typedef struct {
	int64_t *acc, *src_at;
	const Placement *src;
} NewBytes;

/* Adds a shard's bytes unless it is the copy source's buffer there (the
 * same region and layout on the tile: one buffer, plan_memory's rule). */
static int add_new(void *ctx, const Placement *p, const int64_t *idx, const int64_t *rep, int64_t t)
{
	NewBytes *n = ctx;
	(void)rep;
	if (n->src && n->src_at[t] >= 0 && n->src->layout == p->layout) {
		int64_t sidx[MAX_RANK];
		place_shard_idx(n->src, n->src_at[t], sidx);
		if (place_same_region(n->src, sidx, p, idx))
			return 0;
	}
	n->acc[t] += place_shard_bytes(p, idx);
	return 0;
}

/* Per tile, the peak over steps ns0.. of the bytes of placements np0..
 * live at each (plan_lifetimes; a shard that is its copy source's buffer
 * counts once), each step's scratch included. */
static void new_bytes(const Plan *pl, int np0, int ns0, int64_t *peak)
{
	int64_t T = pl->machine.tiles;
	int np = pl->np, nn = np - np0;
	int *fi = xmalloc((size_t)np * sizeof *fi), *la = xmalloc((size_t)np * sizeof *la);
	int *alias = xmalloc((size_t)np * sizeof *alias);
	int64_t *src_at = xmalloc((size_t)T * sizeof *src_at);
	int64_t *by = xcalloc((size_t)(nn + 1) * (size_t)T, sizeof *by), *cur = xmalloc((size_t)T * sizeof *cur);

	plan_lifetimes(pl, fi, la, alias);
	for (int i = np0; i < np; i++) {
		NewBytes n = { by + (int64_t)(i - np0) * T, src_at, NULL };
		for (int s = ns0; s < pl->ns; s++)
			if (pl->s[s].kind == STEP_COPY && pl->s[s].dst == i) {
				n.src = &pl->p[pl->s[s].src];
				place_shard_at(n.src, T, src_at);
			}
		place_each(&pl->p[i], T, add_new, &n);
	}
	for (int s = ns0; s < pl->ns; s++) {
		memset(cur, 0, (size_t)T * sizeof *cur);
		for (int i = np0; i < np; i++)
			if (fi[i] <= s && s <= la[i])
				for (int64_t t = 0; t < T; t++)
					cur[t] += by[(int64_t)(i - np0) * T + t];
		if (pl->s[s].kind == STEP_COMPUTE && pl->s[s].scratch) {
			memset(by + (int64_t)nn * T, 0, (size_t)T * sizeof *by);
			place_each(&pl->p[pl->s[s].out], T, add_bytes, by + (int64_t)nn * T);
			for (int64_t t = 0; t < T; t++)
				cur[t] += by[(int64_t)nn * T + t] ? pl->s[s].scratch : 0;
		}
		for (int64_t t = 0; t < T; t++)
			peak[t] = cur[t] > peak[t] ? cur[t] : peak[t];
	}
	free(fi);
	free(la);
	free(alias);
	free(src_at);
	free(by);
	free(cur);
}

/* Builds one choice of op (a GEMM candidate, an attention's staging). */
typedef void (*BuildFn)(Builder *b, const MOp *op, const void *arg);

typedef struct {
	const GemmShape *gs;
	const Candidate *c;
} GemmTry;

static void build_gemm_try(Builder *b, const MOp *op, const void *arg)
{
	const GemmTry *g = arg;
	build_matmul(b, op, g->gs, g->c);
}

typedef struct {
	int64_t excess, bytes;  /* the worst tile's excess in 1% steps; bytes, all tiles */
} Bound;
static void trial_build(Builder *b, const MOp *op, BuildFn build, const void *arg,
			const int64_t *load, Bound *bound, Candidate *c);

static void trial_one(Builder *b, const MOp *op, const GemmShape *gs, const int64_t *load, Bound *bound,
		      Candidate *c)
{
	GemmTry g = { gs, c };
	trial_build(b, op, build_gemm_try, &g, load, bound, c);
}

/* The largest ratio of a tile's figure to the machine's limit for it:
 * table bytes to the table budget, fragments to the fragment limit, SRAM
 * (tensors and tables) to the available SRAM. At most 1 fits. */
static double limit_excess(const Machine *mc, int64_t table, int64_t frags, int64_t sram)
{
	double x = (double)table / (double)mc->table_budget_bytes;
	if ((double)frags / (double)mc->fragment_limit > x)
		x = (double)frags / (double)mc->fragment_limit;
	if ((double)sram / (double)machine_avail(mc) > x)
		x = (double)sram / (double)machine_avail(mc);
	return x;
}

/* A lower bound on the two figures candidate_cmp ranks fitting trials by
 * under the memory objective: the worst tile's excess (in 1% steps) and
 * the bytes, from a choice's tensors (ob, per tile) on top of every
 * tile's load and earlier tables. Its own tables and fragments only add
 * to both. (Bound is declared above trial_one.) */
static Bound tensor_bound(const Builder *b, const int64_t *load, const int64_t *ob)
{
	double lb = 0;
	Bound r = { 0, 0 };
	for (int64_t t = 0; t < b->mc->tiles; t++) {
		double x = limit_excess(b->mc, b->tab[t], b->frg[t], load[t] + ob[t] + b->tab[t]);
		lb = x > lb ? x : lb;
		r.bytes += ob[t];
	}
	r.excess = (int64_t)(lb * 100);
	return r;
}

/* Whether a choice bounded by bd cannot rank before the fitting trial
 * beat: then lowering it cannot change the choice. */
static int cannot_beat(Bound bd, const Candidate *beat)
{
	int64_t eb = (int64_t)(beat->x_excess * 100);
	return bd.excess > eb || (bd.excess == eb && bd.bytes > beat->x_bytes);
}

/* Builds a choice with build(arg), lowers it against what earlier ops put
 * on every tile, fills c's exact fields, and takes the choice back.
 * bound (not NULL): only the choice's tensor_bound is computed, into
 * *bound, and nothing is lowered. */
static void trial_build(Builder *b, const MOp *op, BuildFn build, const void *arg,
			const int64_t *load, Bound *bound, Candidate *c)
{
	Plan *pl = b->pl;
	const Machine *mc = b->mc;
	int64_t T = mc->tiles;
	int64_t *tt = xcalloc((size_t)T, sizeof *tt), *tf = xcalloc((size_t)T, sizeof *tf);
	int64_t *ob = xcalloc((size_t)T, sizeof *ob);
	Snap sn;
	Err e;

	snap_take(b, &sn);
	build(b, op, arg);
	c->exact = 1;
	c->x_table = c->x_frags = c->x_peak = c->x_bytes = 0;
	c->x_excess = 0;
	int64_t cyc = 0;
	new_bytes(pl, sn.np, sn.ns, ob);
	if (bound) {
		*bound = tensor_bound(b, load, ob);
		c->exact = 0;
	} else if (plan_trial(pl, sn.ns, pl->ns - 1, WEIGHTS_DEFAULT, tt, tf, b->o->objective == OBJ_CYCLES ? &cyc : NULL, &e)) {
		c->fits = 0;
		c->x_excess = 1e30;
	} else {
		for (int64_t t = 0; t < T; t++) {
			int64_t tab = b->tab[t] + tt[t], fr = b->frg[t] + tf[t], mem = load[t] + ob[t];
			double x = limit_excess(mc, tab, fr, mem + tab);
			if (x > c->x_excess)
				c->x_excess = x;
			c->x_table = tab > c->x_table ? tab : c->x_table;
			c->x_frags = fr > c->x_frags ? fr : c->x_frags;
			c->x_peak = mem + tab > c->x_peak ? mem + tab : c->x_peak;
			c->x_bytes += ob[t] + tt[t];
		}
		c->fits = c->x_excess <= 1.0 - b->margin;
		if (b->o->objective == OBJ_CYCLES)
			c->cycles = cyc;        /* the trial's modelled cycles replace the estimate */
	}
	snap_back(b, &sn);
	free(tt);
	free(tf);
	free(ob);
}

#define SHORTLIST 3     /* candidates per staging (a's and the result's) re-scored exactly */
#define SHORTLIST_ROUNDS 4      /* more rounds while none of them fits */

static _Thread_local Objective rank_obj;     /* the two ownerships plan on two threads */
static _Thread_local int64_t rank_room;

/* The formula's order for the short list: by how far the per-tile bound
 * (its largest shards, with the table budget kept free) passes what is
 * left on the busiest tile, none first; then tensor memory plus estimated
 * tables. */
static int by_estimate(const void *x, const void *y)
{
	const Candidate *a = x, *b = y;
	int64_t oa = a->tile_bytes - rank_room, ob = b->tile_bytes - rank_room;
	oa = oa > 0 ? oa : 0, ob = ob > 0 ? ob : 0;
	if (oa != ob)
		return oa < ob ? -1 : 1;
	return candidate_cmp(a, b, OBJ_CAPACITY_TABLES);
}

static int by_exact(const void *x, const void *y)
{
	return candidate_cmp(x, y, rank_obj);
}

/* The memory and cycles objectives: the formula ranks every candidate and
 * prunes; the short list (SHORTLIST per staging) is lowered exactly and
 * the best fitting one is built. */
static int trial_choose(Builder *b, const MOp *op, const GemmShape *gs, Explain *ex, Err *e)
{
	Candidate *all = NULL, best, *sl = NULL;
	int64_t nall = 0, T = b->mc->tiles;
	int nsl = 0, per[3][2][2] = { { { 0 } } };
	int64_t *load = xcalloc((size_t)T, sizeof *load);
	int opi = (int)(op - b->m->ops);

	if (choose(b, op, gs, &best, NULL, &all, &nall, e)) {
		free(all);
		free(load);
		return -1;
	}
	tile_load(b, opi, load);
	int64_t base = 0;                       /* the busiest tile's, as base_load gives it */
	for (int64_t t = 0; t < T; t++)
		base = load[t] > base ? load[t] : base;
	rank_room = machine_avail(b->mc) - base - b->mc->table_budget_bytes;
	qsort(all, (size_t)nall, sizeof *all, by_estimate);
	/* Rounds of SHORTLIST per staging pair, down the formula's order,
	 * until one fits (at most SHORTLIST_ROUNDS). */
	/* Under the memory objective, without --explain (which lists every
	 * lowered candidate), a round's candidates are lowered in the order
	 * of their tensor_bound, and once the best fitting trial so far
	 * ranks before a candidate's bound, neither it nor any after it can
	 * win: they are not lowered. The round's choice is the same. */
	char *tried = xcalloc((size_t)nall + 1, 1);
	int fit = 0, bi = -1, prune = b->o->objective == OBJ_MEMORY && !ex;
	int64_t *pick = xmalloc((size_t)(nall + 1) * sizeof *pick);
	Bound *bd = prune ? xmalloc((size_t)(nall + 1) * sizeof *bd) : NULL;
	rank_obj = b->o->objective;
	for (int round = 1; round <= SHORTLIST_ROUNDS && !fit; round++) {
		int64_t np = 0;
		for (int64_t i = 0; i < nall; i++) {
			if (tried[i] || per[all[i].staging][all[i].unpack][all[i].scatter] >= round * SHORTLIST)
				continue;
			tried[i] = 1;
			per[all[i].staging][all[i].unpack][all[i].scatter]++;
			pick[np++] = i;
		}
		if (!np)
			break;          /* every candidate tried */
		for (int64_t k = 0; prune && k < np; k++) {
			Candidate c = all[pick[k]];
			trial_one(b, op, gs, load, &bd[pick[k]], &c);
		}
		for (int64_t k = 1; prune && k < np; k++) {     /* stable: by bound, then the formula's order */
			int64_t x = pick[k], j = k;
			for (; j > 0 && (bd[pick[j - 1]].excess > bd[x].excess ||
					 (bd[pick[j - 1]].excess == bd[x].excess && bd[pick[j - 1]].bytes > bd[x].bytes)); j--)
				pick[j] = pick[j - 1];
			pick[j] = x;
		}
		for (int64_t k = 0; k < np; k++) {
			if (bi >= 0 && prune && cannot_beat(bd[pick[k]], &sl[bi]))
				break;          /* nor any after it */
			sl = xrealloc(sl, (size_t)(nsl + 1) * sizeof *sl);
			sl[nsl] = all[pick[k]];
			trial_one(b, op, gs, load, NULL, &sl[nsl]);
			if (sl[nsl].fits && (bi < 0 || by_exact(&sl[nsl], &sl[bi]) < 0))
				bi = nsl;
			fit |= sl[nsl].fits;
			nsl++;
		}
	}
	free(pick);
	free(bd);
	free(tried);
	qsort(sl, (size_t)nsl, sizeof *sl, by_exact);
	if (ex) {
		int keep = b->o->explain < nsl ? b->o->explain : nsl;
		ex->op = xstrdup(op->name);
		ex->considered = nall;
		ex->fitting = 0;
		for (int i = 0; i < nsl; i++)
			ex->fitting += sl[i].fits;
		ex->best = xmalloc((size_t)(keep ? keep : 1) * sizeof *ex->best);
		memcpy(ex->best, sl, (size_t)keep * sizeof *sl);
		ex->nbest = keep;
		ex->avail = machine_avail(b->mc);
		ex->base = base;
		ex->exact = nsl;
	}
	build_matmul(b, op, gs, nsl ? &sl[0] : &best);
	free(sl);
	free(all);
	free(load);
	return 0;
}

/* ---- row-local ops ---- */

/* A vector parameter on every owner: stage on the first, then replicate. */
static int on_owners(Builder *b, const char *op, Operand opd, int tensor, int owners_of)
{
	Plan *pl = b->pl;
	int64_t owners = place_shards(&pl->p[owners_of]);
	int64_t obase = pl->p[owners_of].base, ostride = pl->p[owners_of].stride[1];
	Placement p;
	int existed, st, rep;

	memset(&p, 0, sizeof p);
	p.layout = LAYOUT_ROW_MAJOR;
	p.split[0] = 1;
	p.block[0] = pl->t[tensor].shape[0];
	p.base = obase;
	st = add_place(pl, &p, tensor, "owners.stage", &existed);
	if (!existed)
		add_copy(pl, op, opd, MOVE_PARAMETER, b->canon[tensor], st);
	if (owners > 1) {
		p.nrep = 1;
		p.rep[0] = owners;
		p.rstride[0] = ostride;
	}
	rep = add_place(pl, &p, tensor, "owners", &existed);
	if (!existed && rep != st)
		add_copy(pl, op, opd, MOVE_PARAMETER, st, rep);
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
	d = add_place(pl, &p, tensor, "owners.rows", &existed);
	if (!existed)
		add_copy(pl, op, opd, MOVE_PARAMETER, b->canon[tensor], d);
	return d;
}

static void rowlocal(Builder *b, const MOp *op)
{
	Plan *pl = b->pl;
	const Model *m = b->m;
	int in[3], nin = 0, out = plan_find_tensor(pl, m->t[op->out].name), existed;
	static const ComputeKind kinds[OP_COUNT] = {
		[OP_GELU] = C_GELU, [OP_ADD] = C_ADD, [OP_LAYERNORM] = C_LAYERNORM, [OP_CAST] = C_CAST,
	};
	Placement p;

	in[nin++] = canonical(b, plan_find_tensor(pl, m->t[op->in[0]].name));
	if (op->kind == OP_ADD) {
		int bt = plan_find_tensor(pl, m->t[op->in[1]].name);
		in[nin++] = pl->t[bt].role == R_PARAM ? rows_on_owners(b, op->name, OPD_B, bt, in[0])
						      : canonical(b, bt);
	}
	if (op->kind == OP_LAYERNORM)
		for (int k = 1; k < 3; k++)
			in[nin++] = on_owners(b, op->name, k == 1 ? OPD_SCALE : OPD_BIAS,
					      plan_find_tensor(pl, m->t[op->in[k]].name), in[0]);
	p = pl->p[in[0]];
	p.name = NULL;
	b->canon[out] = add_place(pl, &p, out, "canon", &existed);
	add_compute(pl, op->name, kinds[op->kind], in, nin, b->canon[out], op->eps);
}

/* A [tokens, features] parameter made an activation: every batch entry a
 * copy, on the owners of the result's token rows. */
static void broadcast(Builder *b, const MOp *op)
{
	Plan *pl = b->pl;
	int out = plan_find_tensor(pl, b->m->t[op->out].name), x = plan_find_tensor(pl, b->m->t[op->in[0]].name);
	Placement cp;
	int existed;

	canonical_of(b, &pl->t[out], &cp);
	b->canon[out] = add_place(pl, &cp, out, "canon", &existed);
	int in = rows_on_owners(b, op->name, OPD_X, x, b->canon[out]);
	add_compute(pl, op->name, C_BROADCAST, &in, 1, b->canon[out], 0);
}

/* Attention tiles: (batch, query block, head, key block). Tile
 * (b, qb, h, kb) sits at base + ((b*QB + qb)*H + h)*KB + kb. With one key
 * block it holds its query rows and the whole head's keys and values and
 * writes the head's output columns. With KB > 1 it holds a block of the
 * keys and values (multicast to the head's query blocks) and writes an
 * fp32 partial [m, l, o] per query row; the partials of a query block are
 * gathered on its kb = 0 tile and merged there in key-block order (online
 * softmax, formats/plan.md). The output returns to the owners. */
typedef struct {
	int64_t QB, KB, tq, tk, bytes;
} AttnGrid;

/* Bytes a tile holds for attention with QB query and KB key blocks: q,
 * k, v, the score scratch of one row, and the partials, their gathered
 * block and the output when KB > 1 (the output alone otherwise). */
static int64_t attn_bytes(int64_t Tq, int64_t Tk, int64_t D, int64_t QB, int64_t KB, int64_t *tq,
			  int64_t *tk)
{
	*tq = cdiv(Tq, QB), *tk = cdiv(Tk, KB);
	int64_t b = 2 * *tq * D + 2 * 2 * *tk * D + 4 * *tk + 2 * *tq * D;
	if (KB > 1)
		b += 4 * *tq * (D + 2) * (1 + KB);
	return b;
}

/* The fewest key blocks whose tile fits beside what is in use (with the
 * table budget kept free), then the most query blocks; when none fits,
 * the smallest tile. */
static AttnGrid attn_grid(Builder *b, int64_t Tq, int64_t Tk, int64_t D, int64_t per, int op)
{
	int64_t room = machine_avail(b->mc) - base_load(b, op) - b->mc->table_budget_bytes;
	AttnGrid best = { 0, 0, 0, 0, INT64_MAX }, small = best;
	for (int64_t KB = 1; KB <= Tk && KB <= per; KB++) {
		if (!uniform_ok(Tk, KB))
			continue;
		for (int64_t QB = per / KB; QB >= 1; QB--) {
			if (QB > Tq || !uniform_ok(Tq, QB))
				continue;
			AttnGrid g = { QB, KB, 0, 0, 0 };
			g.bytes = attn_bytes(Tq, Tk, D, QB, KB, &g.tq, &g.tk);
			if (g.bytes < small.bytes)
				small = g;
			if (g.bytes <= room && !best.QB)
				best = g;
			break;          /* the most query blocks for this KB */
		}
		if (best.QB)
			break;
	}
	return best.QB ? best : small;
}

typedef struct {
	AttnGrid ag;
	int relay;
} AttnTry;

static void build_attention(Builder *b, const MOp *op, const void *arg);

static int attention(Builder *b, const MOp *op, Err *e)
{
	Plan *pl = b->pl;
	const Model *m = b->m;
	int q = plan_find_tensor(pl, m->t[op->in[0]].name), kv = plan_find_tensor(pl, m->t[op->in[1]].name);
	int out = plan_find_tensor(pl, m->t[op->out].name);
	const PTensor *qt = &pl->t[q], *kt = &pl->t[kv];
	int64_t B = qt->shape[0], Tq = qt->shape[1], Tk = kt->shape[1], C = pl->t[out].shape[2];
	int64_t H = op->heads, D = C / H, T = b->mc->tiles;

	if (B * H > T)
		return err_at(e, m->file, op->line, op->col,
			      "attention '%s': %lld batch entries x %lld heads need more tiles than the "
			      "machine's %lld", op->name, (long long)B, (long long)H, (long long)T);
	AttnGrid ag = attn_grid(b, Tq, Tk, D, T / (B * H), (int)(op - m->ops));
	if (op->grid[0]) {
		int64_t QB = op->grid[0], KB = op->grid[1];
		const char *why = QB > Tq ? "more query blocks than query tokens" :
				  KB > Tk ? "more key blocks than keys" :
				  !uniform_ok(Tq, QB) ? "query blocks that do not cut the queries uniformly" :
				  !uniform_ok(Tk, KB) ? "key blocks that do not cut the keys uniformly" :
				  B * H * QB * KB > T ? "more tiles than the machine has" : NULL;
		if (why)
			return err_at(e, m->file, op->pin_line, op->pin_col,
				      "pin for '%s': blocks [%lld, %lld] need %s (%lld queries, %lld keys, "
				      "%lld x %lld x %lld x %lld tiles of %lld)", op->name, (long long)QB,
				      (long long)KB, why, (long long)Tq, (long long)Tk, (long long)B,
				      (long long)H, (long long)QB, (long long)KB, (long long)T);
		ag.QB = QB, ag.KB = KB;
		ag.bytes = attn_bytes(Tq, Tk, D, QB, KB, &ag.tq, &ag.tk);
	}
	/* Keys and values: direct multicast from the owners, or relay (each
	 * block gathered once on its first query block's tile, then sent on
	 * whole). With exact costing both are lowered and the better kept. */
	AttnTry at = { ag, op->kv_staging == 2 };
	if (b->o->objective >= OBJ_MEMORY && !op->kv_staging) {
		int64_t *load = xcalloc((size_t)T, sizeof *load);
		Candidate c[2];
		memset(c, 0, sizeof c);
		tile_load(b, (int)(op - m->ops), load);
		for (int r = 0; r < 2; r++) {
			AttnTry t = { ag, r };
			trial_build(b, op, build_attention, &t, load, NULL, &c[r]);
		}
		at.relay = candidate_cmp(&c[1], &c[0], b->o->objective) < 0;  /* ties: direct */
		free(load);
	}
	build_attention(b, op, &at);
	return 0;
}

/* Builds attention op with the grid and staging of arg (an AttnTry). */
static void build_attention(Builder *b, const MOp *op, const void *arg)
{
	const AttnTry *at = arg;
	Plan *pl = b->pl;
	const Model *m = b->m;
	int q = plan_find_tensor(pl, m->t[op->in[0]].name), kv = plan_find_tensor(pl, m->t[op->in[1]].name);
	int out = plan_find_tensor(pl, m->t[op->out].name), fused = q == kv, existed;
	const PTensor *qt = &pl->t[q];
	int64_t B = qt->shape[0], Tq = qt->shape[1], C = pl->t[out].shape[2];
	int64_t H = op->heads, D = C / H;
	AttnGrid ag = at->ag;
	int64_t QB = ag.QB, KB = ag.KB, tq = ag.tq, tk = ag.tk, base = op_start(b, op);
	int64_t sh = KB, sq = H * KB, sb = QB * H * KB;         /* tile strides of h, qb, b */
	int64_t coff[3] = { 0, fused ? C : 0, fused ? 2 * C : C };
	int src[3] = { canonical(b, q), canonical(b, kv), canonical(b, kv) };
	int tensor[3] = { q, kv, kv }, idx[3];
	static const Operand opd[3] = { OPD_Q, OPD_K, OPD_V };
	static const char *what[3] = { "q", "k", "v" };
	char where[160];

	for (int k = 0; k < 3; k++) {
		const PTensor *t = &pl->t[tensor[k]];
		Placement p;
		memset(&p, 0, sizeof p);
		p.layout = LAYOUT_ROW_MAJOR;
		p.off[2] = coff[k];
		p.shape[0] = B, p.shape[1] = t->shape[1], p.shape[2] = C;
		memcpy(p.whole, t->shape, sizeof p.whole);
		p.split[0] = B, p.block[0] = 1, p.stride[0] = sb;
		p.split[2] = H, p.block[2] = D, p.stride[2] = sh;
		if (k == 0) {
			p.split[1] = QB, p.block[1] = tq, p.stride[1] = sq;
			if (KB > 1)
				p.nrep = 1, p.rep[0] = KB, p.rstride[0] = 1;
		} else {
			p.split[1] = KB, p.block[1] = tk, p.stride[1] = 1;
			if (QB > 1)
				p.nrep = 1, p.rep[0] = QB, p.rstride[0] = sq;
		}
		if (coff[k] == 0 && C == t->shape[2])
			memset(p.whole, 0, sizeof p.whole);     /* the whole tensor */
		p.base = base;
		if (k > 0 && at->relay && p.nrep) {
			/* gathered once on the q = 0 tile of its query blocks, then
			 * relayed whole to the others (replica 0 is that buffer) */
			Placement st = p;
			st.nrep = 0, st.rep[0] = 0, st.rstride[0] = 0;
			snprintf(where, sizeof where, "%s.%s.stage", op->name, what[k]);
			int si = add_place(pl, &st, tensor[k], where, &existed);
			if (!existed)
				add_copy(pl, op->name, opd[k], MOVE_ACTIVATION, src[k], si);
			snprintf(where, sizeof where, "%s.%s", op->name, what[k]);
			idx[k] = add_place(pl, &p, tensor[k], where, &existed);
			if (!existed)
				add_copy(pl, op->name, opd[k], MOVE_RELAY, si, idx[k]);
			continue;
		}
		snprintf(where, sizeof where, "%s.%s", op->name, what[k]);
		idx[k] = add_place(pl, &p, tensor[k], where, &existed);
		if (!existed)
			add_copy(pl, op->name, opd[k], MOVE_ACTIVATION, src[k], idx[k]);
	}
	Placement o;
	memset(&o, 0, sizeof o);
	o.layout = LAYOUT_ROW_MAJOR;
	o.split[0] = B, o.block[0] = 1, o.stride[0] = sb;
	o.split[1] = QB, o.block[1] = tq, o.stride[1] = sq;
	o.split[2] = H, o.block[2] = D, o.stride[2] = sh;
	o.base = base;
	snprintf(where, sizeof where, "%s.out", op->name);
	int op_out = add_place(pl, &o, out, where, &existed), st;
	if (KB == 1) {
		st = add_compute(pl, op->name, C_ATTENTION, idx, 3, op_out, 0);
	} else {
		/* [KB, B, Tq, H*(D+2)] fp32: per query row m, l, then o. */
		char name[200];
		int64_t shape[4] = { KB, B, Tq, H * (D + 2) };
		snprintf(name, sizeof name, "%s.partial", pl->t[out].name);
		int pt = add_tensor(pl, name, R_PARTIAL, 4, shape, FMT_FP32, 0);
		Placement pp, rp;
		memset(&pp, 0, sizeof pp);
		pp.layout = LAYOUT_ROW_MAJOR;
		pp.split[0] = KB, pp.block[0] = 1, pp.stride[0] = 1;
		pp.split[1] = B, pp.block[1] = 1, pp.stride[1] = sb;
		pp.split[2] = QB, pp.block[2] = tq, pp.stride[2] = sq;
		pp.split[3] = H, pp.block[3] = D + 2, pp.stride[3] = sh;
		pp.base = base;
		rp = pp;
		rp.split[0] = 1, rp.block[0] = KB, rp.stride[0] = 0;
		snprintf(where, sizeof where, "%s.partial", op->name);
		int pi = add_place(pl, &pp, pt, where, &existed);
		st = add_compute(pl, op->name, C_ATTENTION, idx, 3, pi, 0);
		snprintf(where, sizeof where, "%s.merge", op->name);
		int ri = add_place(pl, &rp, pt, where, &existed);
		add_copy(pl, op->name, OPD_PARTIAL, MOVE_REDUCTION, pi, ri);
		add_compute(pl, op->name, C_MERGE, &ri, 1, op_out, 0);
	}
	pl->s[st].scale = 1.0 / sqrt((double)D);
	pl->s[st].heads = H;
	pl->s[st].scratch = 4 * tk;
	Placement cp;
	canonical_of(b, &pl->t[out], &cp);
	b->canon[out] = add_place(pl, &cp, out, "canon", &existed);
	add_copy(pl, op->name, OPD_OUT, MOVE_OUTPUT, op_out, b->canon[out]);
}

/* The carried activation of a repeat: a local copy on its owners. */
static void carry(Builder *b, const char *op, int from, int to)
{
	Plan *pl = b->pl;
	int in = canonical(b, from), existed;
	if (b->canon[to] < 0) {
		Placement p = pl->p[in];
		p.name = NULL;
		b->canon[to] = add_place(pl, &p, to, "canon", &existed);
	}
	add_compute(pl, op, C_CARRY, &in, 1, b->canon[to], 0);
}

/* ---- the whole model ---- */

static int check_params(Builder *b, Err *e)
{
	int64_t T = b->mc->tiles, avail = machine_avail(b->mc), total = 0, worst = 0;
	for (int i = 0; i < b->pl->np; i++)
		total += place_total_bytes(&b->pl->p[i]) * b->pl->t[b->pl->p[i].tensor].count;
	if (total > T * avail)
		return err_at(e, b->m->file, b->m->params_line, b->m->params_col,
			      "model '%s': parameters need %lld bytes; %lld tiles hold at most %lld "
			      "(%lld bytes each after reserved_bytes)", b->m->name, (long long)total,
			      (long long)T, (long long)(T * avail), (long long)avail);
	for (int64_t t = 1; t < T; t++)
		if (b->base[t] > b->base[worst])
			worst = t;
	if (b->base[worst] > avail)
		return err_at(e, b->m->file, b->m->params_line, b->m->params_col,
			      "model '%s': parameter homes put %lld bytes on tile %lld; %lld are available",
			      b->m->name, (long long)b->base[worst], (long long)worst, (long long)avail);
	return 0;
}

static int check_memory(Builder *b, Err *e)
{
	Plan *pl = b->pl;
	int64_t worst, avail = machine_avail(b->mc);
	int at;
	int64_t *step_peak = xcalloc((size_t)pl->ns + 1, sizeof *step_peak);
	int64_t peak = plan_memory(pl, NULL, NULL, step_peak, &worst, &at);

	for (int g = 0; g < pl->ng; g++)
		for (int s = 0; s < pl->ns; s++)
			if (strcmp(pl->s[s].op, pl->g[g].op) == 0 && step_peak[s] > pl->g[g].peak_bytes)
				pl->g[g].peak_bytes = step_peak[s];
	free(step_peak);
	if (peak > avail) {
		/* at the op of that step in the model (its pin when pinned);
		 * a step of no model op: the params mapping */
		const Model *m = b->m;
		long line = m->params_line, col = m->params_col;
		for (int i = 0; i < m->nops; i++)
			if (strcmp(m->ops[i].name, pl->s[at].op) == 0) {
				line = m->ops[i].pinned ? m->ops[i].pin_line : m->ops[i].line;
				col = m->ops[i].pinned ? m->ops[i].pin_col : m->ops[i].col;
				break;
			}
		return err_at(e, m->file, line, col, "tile %lld needs %lld bytes at step %d (op '%s'); "
			      "%lld are available (sram_bytes - reserved_bytes)", (long long)worst,
			      (long long)peak, at, pl->s[at].op, (long long)avail);
	}
	return 0;
}

/* The memory and cycles objectives promise a plan the machine holds: the
 * plan is lowered as amp-compose, amp-expand, amp-exchange and amp-group
 * do (amp-group's default weights) and checked as amp-emit checks it.
 * When it does not fit, the error names the tile and the figure, and says
 * what no plan can avoid: the parameters, each byte once, spread evenly. */
/* The whole plan lowered as amp-compose, amp-expand, amp-exchange and
 * amp-group do, and checked as amp-emit does: the worst tiles' figures. */
typedef struct {
	int lowered;                    /* 0: the lowering failed (why) */
	int64_t wt, wf, ws;             /* tiles with the most table bytes, fragments, SRAM */
	int64_t table, frags, peak, sram_table;  /* their figures (peak and tables of tile ws) */
	double excess;                  /* worst ratio of a figure to its limit (fits: <= 1) */
	int64_t cycles;                 /* total modelled cycles (when asked for) */
	char why[sizeof ((Err *)0)->msg];
} Fit;

static void plan_fit(const Plan *pl, int want_cycles, Fit *f)
{
	const Machine *mc = &pl->machine;
	int64_t T = mc->tiles;
	int64_t *table = xcalloc((size_t)T, sizeof *table), *frags = xcalloc((size_t)T, sizeof *frags);
	int64_t *peak = xcalloc((size_t)T, sizeof *peak);
	Plan q;
	Err le;

	memset(f, 0, sizeof *f);
	plan_dup(&q, pl);
	plan_compose(&q);
	if (plan_expand(&q, &le) || plan_exchange(&q, &le) || plan_group(&q, WEIGHTS_DEFAULT, &le)) {
		snprintf(f->why, sizeof f->why, "%s", le.msg);
		f->excess = 1e30;
		goto out;
	}
	f->lowered = 1;
	table_totals(&q, table, frags, NULL);
	plan_memory(&q, peak, NULL, NULL, NULL, NULL);
	for (int64_t t = 1; t < T; t++) {
		f->wt = table[t] > table[f->wt] ? t : f->wt;
		f->wf = frags[t] > frags[f->wf] ? t : f->wf;
		f->ws = peak[t] + table[t] > peak[f->ws] + table[f->ws] ? t : f->ws;
	}
	f->table = table[f->wt], f->frags = frags[f->wf];
	f->peak = peak[f->ws], f->sram_table = table[f->ws];
	f->excess = limit_excess(mc, f->table, f->frags, f->peak + f->sram_table);
	if (want_cycles) {
		Metrics *ph = xcalloc((size_t)q.nph + 1, sizeof *ph), sum;
		capture_metrics(&q, ph, NULL, &sum);
		f->cycles = sum.total_cycles;
		free(ph);
	}
out:
	plan_free(&q);
	free(table);
	free(frags);
	free(peak);
}

/* 0 when f fits; else -1 with the error at the model's params mark. */
static int fit_error(const Plan *pl, const Model *m, const Fit *f, Err *e)
{
	const Machine *mc = &pl->machine;
	int64_t T = mc->tiles, avail = machine_avail(mc), params = 0;
	char why[sizeof e->msg];

	if (!f->lowered)
		snprintf(why, sizeof why, "%s", f->why);
	else if (f->table > mc->table_budget_bytes)
		snprintf(why, sizeof why, "tile %lld: exchange tables need %lld bytes, over the table budget of "
			 "%lld", (long long)f->wt, (long long)f->table, (long long)mc->table_budget_bytes);
	else if (f->frags > mc->fragment_limit)
		snprintf(why, sizeof why, "tile %lld: %lld send and receive fragments, over the fragment limit "
			 "of %lld", (long long)f->wf, (long long)f->frags, (long long)mc->fragment_limit);
	else if (f->peak + f->sram_table > avail)
		snprintf(why, sizeof why, "tile %lld: %lld bytes of tensors at their peak and %lld of exchange "
			 "tables need %lld, over the %lld available", (long long)f->ws, (long long)f->peak,
			 (long long)f->sram_table, (long long)(f->peak + f->sram_table), (long long)avail);
	else
		return 0;
	for (int i = 0; i < pl->np; i++)
		if (pl->t[pl->p[i].tensor].role == R_PARAM && plan_writer(pl, i) < 0)
			params += place_total_bytes(&pl->p[i]) * pl->t[pl->p[i].tensor].count;
	return err_at(e, m->file, m->params_line, m->params_col,
		      "model '%s' does not fit machine '%s' at its limits: %s. No plan avoids the parameters: "
		      "%lld bytes, at least %lld per tile, which leaves at most %lld of the %lld available for "
		      "activations, working buffers and exchange tables", m->name, mc->name, why,
		      (long long)params, (long long)cdiv(params, T), (long long)(avail - cdiv(params, T)),
		      (long long)avail);
}

int plan_check_fit(const Plan *pl, const Model *m, Err *e)
{
	Fit f;
	plan_fit(pl, 0, &f);
	return fit_error(pl, m, &f, e);
}

int plan_batch_split(const Plan *pl)
{
	for (int i = 0; i < pl->np; i++) {
		const Placement *p = &pl->p[i];
		size_t n = strlen(p->name);
		if (n > 6 && strcmp(p->name + n - 6, "@canon") == 0 && p->rank == 3 && p->split[0] > 1)
			return 1;
	}
	return 0;
}

static int build_one(Plan *pl, const Model *m, const Machine *mc, const PlanOpts *o,
		     Explain *ex, double margin, Err *e)
{
	Builder b = { pl, m, mc, o, NULL, NULL, 0, NULL, -1, NULL, NULL, margin };
	int rc = -1;

	memset(pl, 0, sizeof *pl);
	pl->machine = *mc;
	pl->model = xstrdup(m->name);
	b.canon = xmalloc((size_t)(2 * m->nt + 4 * m->nops + 1) * sizeof *b.canon);
	for (int i = 0; i < 2 * m->nt + 4 * m->nops + 1; i++)
		b.canon[i] = -1;
	b.base = xcalloc((size_t)mc->tiles, sizeof *b.base);
	b.tab = xcalloc((size_t)mc->tiles, sizeof *b.tab);
	b.frg = xcalloc((size_t)mc->tiles, sizeof *b.frg);
	b.last_use = xcalloc((size_t)m->nt, sizeof *b.last_use);
	for (int i = 0; i < m->nops; i++)
		for (int k = 0; k < m->ops[i].nin; k++)
			if (m->ops[i].in[k] >= 0)
				b.last_use[m->ops[i].in[k]] = i;

	for (int i = 0; i < m->nt; i++) {
		const MTensor *t = &m->t[i];
		PRole r = t->role == T_INPUT ? R_INPUT : t->role == T_PARAM ? R_PARAM :
			  t->output ? R_OUTPUT : R_ACT;
		int sc = t->scale;
		if (t->dtype == FMT_FP8)
			scales_find(o->scales, t->name, &sc);
		for (int k = 0; k < m->nops; k++)       /* made on the host: an input of the program */
			if (m->ops[k].kind == OP_PATCHIFY && m->ops[k].out == i)
				r = R_INPUT;
		int pt = add_tensor(pl, t->name, r, t->rank, t->shape, t->dtype, sc);
		pl->t[pt].count = t->count;
	}
	for (int i = 0; i < m->nt; i++)
		if (m->t[i].role == T_PARAM)
			home(&b, i, consumed_as_b(m, i));
	if (check_params(&b, e))
		goto out;
	for (int i = 0; i < m->nt; i++)
		if (m->t[i].role == T_INPUT && m->t[i].rank == 3)
			canonical(&b, i);
	for (int i = 0; i < m->nops; i++) {
		const MOp *op = &m->ops[i];
		int r = op->rep, first = -1, ns0 = pl->ns;
		if (r >= 0 && m->rep[r].first == i) {
			carry(&b, m->rep[r].name, m->rep[r].in, m->rep[r].carry);
			first = pl->ns;
		}
		switch (op->kind) {
		case OP_MATMUL:
			if (matmul(&b, op, ex ? &ex[i] : NULL, e))
				goto out;
			break;
		case OP_ATTENTION:
			if (attention(&b, op, e))
				goto out;
			break;
		case OP_BROADCAST:
			broadcast(&b, op);
			break;
		case OP_PATCHIFY: {
			Host h = { xstrdup(op->name), op->in[0], op->out, op->patch, op->cls };
			pl->h = xrealloc(pl->h, (size_t)(pl->nh + 1) * sizeof *pl->h);
			pl->h[pl->nh++] = h;
			canonical(&b, op->out);
			break;
		}
		default:
			rowlocal(&b, op);
			break;
		}
		if (first >= 0)
			b.body = first;
		/* What the op put on every tile's tables, for the ops after it. */
		if (o->objective >= OBJ_MEMORY && pl->ns > ns0 &&
		    plan_trial(pl, ns0, pl->ns - 1, WEIGHTS_DEFAULT, b.tab, b.frg, NULL, e))
			goto out;
		if (r >= 0 && m->rep[r].last == i) {
			carry(&b, m->rep[r].name, op->out, m->rep[r].carry);
			Repeat x = { xstrdup(m->rep[r].name), b.body, pl->ns - 1, m->rep[r].count };
			pl->r = xrealloc(pl->r, (size_t)(pl->nr + 1) * sizeof *pl->r);
			pl->r[pl->nr++] = x;
		}
	}
	if (plan_check(pl, m->file, e) || check_memory(&b, e))
		goto out;
	rc = 0;
out:
	free(b.canon);
	free(b.base);
	free(b.tab);
	free(b.frg);
	free(b.last_use);
	if (rc)
		plan_free(pl);
	return rc;
}

/* Does any activation's canonical cut split the batch (ownership batch)? */
static int batch_can_split(const Model *m, const Machine *mc)
{
	for (int i = 0; i < m->nt; i++) {
		const MTensor *t = &m->t[i];
		if (t->rank == 3 && t->shape[0] > 1 && mc->tiles / largest_uniform(t->shape[1], mc->tiles) > 1)
			return 1;
	}
	return 0;
}

/* Is a (the fit of one ownership) better than b under objective o? Fits
 * first; cycles: fewer total modelled cycles; memory (and when neither
 * fits): the most headroom on the worst tile, in steps of 1%, then the
 * smaller SRAM figure of that tile. */
static int fit_better(const Fit *a, const Fit *b, Objective o)
{
	int fa = a->lowered && a->excess <= 1.0, fb = b->lowered && b->excess <= 1.0;
	if (fa != fb)
		return fa;
	if (o == OBJ_CYCLES && fa && a->cycles != b->cycles)
		return a->cycles < b->cycles;
	int64_t ea = (int64_t)(a->excess * 100), eb = (int64_t)(b->excess * 100);
	if (ea != eb)
		return ea < eb;
	return a->peak + a->sram_table < b->peak + b->sram_table;
}

typedef struct {
	Plan *pl;
	const Model *m;
	const Machine *mc;
	PlanOpts o;
	Explain *ex;
	Err e;
	int rc, want_cycles;
	double margin;
	Fit fit;
} Build;

/* Builds one ownership's plan and lowers it whole (a thread's work). */
static void *build_fit(void *arg)
{
	Build *b = arg;
	b->rc = build_one(b->pl, b->m, b->mc, &b->o, b->ex, b->margin, &b->e);
	if (!b->rc)
		plan_fit(b->pl, b->want_cycles, &b->fit);
	table_release();                /* this thread's rows */
	expand_release();               /* and copies */
	return NULL;
}

/* With --ownership auto under the memory and cycles objectives, both
 * ownerships are planned and lowered whole when the batch can split (on
 * two threads), and the better kept (ties: batch). The fit check's
 * verdict fails the build, or with no_fit_check goes to o->fit when set. */
/* One build under the memory or cycles objective, both ownerships when
 * auto and the batch can be cut; the kept plan's whole-plan fit in *fit. */
static int build_fitted(Plan *pl, const Model *m, const Machine *mc, const PlanOpts *o,
			Explain *ex, double margin, Fit *fit, Err *e)
{
	Plan pt;
	Explain *ext = NULL;
	Build bb, bt;
	memset(&bb, 0, sizeof bb);
	bb.pl = pl, bb.m = m, bb.mc = mc, bb.o = *o, bb.ex = ex, bb.margin = margin;
	bt = bb;
	int two = o->ownership == OWN_AUTO && batch_can_split(m, mc);

	if (bb.o.ownership == OWN_AUTO)
		bb.o.ownership = OWN_BATCH;
	bb.want_cycles = 0;
	if (two) {
		bb.want_cycles = bt.want_cycles = o->objective == OBJ_CYCLES;
		ext = ex ? xcalloc((size_t)m->nops + 1, sizeof *ext) : NULL;
		bt.pl = &pt, bt.ex = ext, bt.o.ownership = OWN_TOKENS;
		pthread_t th;
		int threaded = pthread_create(&th, NULL, build_fit, &bt) == 0;
		build_fit(&bb);
		if (threaded)
			pthread_join(th, NULL);
		else
			build_fit(&bt);
	} else {
		build_fit(&bb);
	}
	Build *win = &bb, *lose = two ? &bt : NULL;
	if (two && (bb.rc ? !bt.rc : !bt.rc && fit_better(&bt.fit, &bb.fit, o->objective)))
		win = &bt, lose = &bb;
	if (win->rc) {                  /* both failed: the batch ownership's error */
		*e = bb.e;
	} else if (win == &bt) {        /* pl holds the batch plan (unless it failed) */
		if (!bb.rc)
			plan_free(pl);
		*pl = pt;
		for (int i = 0; ex && i < m->nops; i++) {
			Explain x = ex[i];
			ex[i] = ext[i], ext[i] = x;
		}
	} else if (lose && !lose->rc) {
		plan_free(&pt);
	}
	explain_free(ext, ext ? m->nops : 0);
	free(ext);
	if (win->rc)
		return -1;
	*fit = win->fit;
	return 0;
}

/* Under the cycles objective the fastest candidates sit near the limits,
 * and a trial lowers one op alone: the whole plan (phases merged across
 * ops) can pass a limit the trials did not. Then the plan is built again
 * with each trial kept this much further inside every limit. */
static const double fit_margins[] = { 0, 0.01, 0.03, 0.06, 0.10 };

int plan_build(Plan *pl, const Model *m, const Machine *mc, const PlanOpts *o,
	       Explain *ex, Err *e)
{
	Fit fit;
	if (o->objective < OBJ_MEMORY) {
		PlanOpts c = *o;
		if (c.ownership == OWN_AUTO)
			c.ownership = OWN_TOKENS;
		return build_one(pl, m, mc, &c, ex, 0, e);
	}
	int n = o->objective == OBJ_CYCLES && (!o->no_fit_check || o->fit) ?
		(int)(sizeof fit_margins / sizeof *fit_margins) : 1;
	for (int i = 0; i < n; i++) {
		if (i) {
			plan_free(pl);
			if (ex) {
				explain_free(ex, m->nops);
				memset(ex, 0, (size_t)m->nops * sizeof *ex);
			}
		}
		if (build_fitted(pl, m, mc, o, ex, fit_margins[i], &fit, e))
			return -1;
		if (fit.lowered && fit.excess <= 1.0)
			break;
	}
	Err fe;
	if (fit_error(pl, m, &fit, &fe)) {
		if (!o->no_fit_check) {
			*e = fe;
			plan_free(pl);
			return -1;
		}
		if (o->fit)
			*o->fit = fe;
	} else if (o->fit) {
		o->fit->msg[0] = 0;
	}
	return 0;
}

void explain_free(Explain *ex, int n)
{
	for (int i = 0; i < n; i++) {
		free(ex[i].op);
		free(ex[i].best);
	}
}
