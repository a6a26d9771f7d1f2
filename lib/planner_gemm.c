/* planner_gemm.c: a matmul's GEMM plan (lib/planner.h). Its candidates
 * (lib/gemm.h) are ranked by the formula; under the memory and cycles
 * objectives a short list is lowered exactly (planner_cost.c) and the best
 * fitting one is built, with its casts and operand deliveries. */
#include "planner_int.h"

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
int64_t op_start(const Builder *b, const MOp *op)
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

int plan_matmul(Builder *b, const MOp *op, Explain *ex, Err *e)
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

typedef struct {
	const GemmShape *gs;
	const Candidate *c;
} GemmTry;

static void build_gemm_try(Builder *b, const MOp *op, const void *arg)
{
	const GemmTry *g = arg;
	build_matmul(b, op, g->gs, g->c);
}

static void trial_one(Builder *b, const MOp *op, const GemmShape *gs, const int64_t *load, Bound *bound,
		      Candidate *c)
{
	GemmTry g = { gs, c };
	trial_build(b, op, build_gemm_try, &g, load, bound, c);
}

#define SHORTLIST 3     /* candidates per staging (a's and the result's) re-scored exactly */
#define SHORTLIST_ROUNDS 4      /* more rounds while none of them fits */

static _Thread_local Objective rank_obj;     /* the two ownerships plan on two threads */
static _Thread_local int64_t rank_room;

/* The formula's order for the short list: by how far the per-tile bound
 * (its largest shards, with the table budget kept free) passes what is
 * left on the busiest tile, none first; then tensor memory plus estimated
 * tables. */
static int64_t over_room(const Candidate *c)
{
	return c->tile_bytes > rank_room ? c->tile_bytes - rank_room : 0;
}

static int by_estimate(const void *x, const void *y)
{
	const Candidate *a = x, *b = y;
	int64_t oa = over_room(a), ob = over_room(b);
	if (oa != ob)
		return oa < ob ? -1 : 1;
	return candidate_cmp(a, b, OBJ_CAPACITY_TABLES);
}

/* The cycles objective's order for the short list: as by_estimate for
 * the per-tile bound, then the formula's cycles, then by_estimate's. */
static int by_cycles(const void *x, const void *y)
{
	const Candidate *a = x, *b = y;
	int64_t oa = over_room(a), ob = over_room(b);
	if (oa != ob)
		return oa < ob ? -1 : 1;
	if (a->cycles != b->cycles)
		return a->cycles < b->cycles ? -1 : 1;
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
	qsort(all, (size_t)nall, sizeof *all, b->o->objective == OBJ_CYCLES ? by_cycles : by_estimate);
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
