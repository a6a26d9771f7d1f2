/* planner_gemm_trial.c: a matmul's choice (plan_matmul): under the memory
 * and cycles objectives the formula's short list of candidates lowered
 * exactly (planner_trial_build), the best fitting one built
 * (planner_gemm.c), and the descent's changes kept (Explain.alt). It
 * calls planner_gemm.c's candidates, formula choice and build;
 * planner_gemm.c calls none of it. */
#include "planner/planner_int.h"

typedef struct {
	const GemmShape *gs;
	const Candidate *c;
	const MOp *sib;                 /* or NULL: the next sibling, built on the same choice */
	const GemmShape *sib_gs;
} GemmTry;

/* The shape of matmul op's GEMM: its operands' shapes and formats, a's
 * canonical owners, b's and the bias's home shards. */
static GemmShape gemm_shape(Builder *b, const MOp *op)
{
	Plan *pl = b->pl;
	const Model *m = b->m;
	int a = planner_matmul_a(b, op), w = plan_find_tensor(pl, m->t[op->in[1]].name);
	int bias = op->in[2] >= 0 ? plan_find_tensor(pl, m->t[op->in[2]].name) : -1;
	const PTensor *at = &pl->t[a], *wt = &pl->t[w];
	GemmShape gs = { at->shape[0], at->shape[1], at->shape[2], wt->shape[1], wt->fmt, at->fmt,
			 bias >= 0, 0, 0, 0, 0, 0 };
	gs.reduce_rows = b->fold_pre[plan_find_tensor(pl, m->t[op->in[0]].name)] >= 0;     /* a folded norm's */
	int ain = planner_canonical(b, a);
	gs.owners = place_shards(&pl->p[ain]);
	gs.owner_batch = pl->p[ain].block[0];
	gs.b_home_shards = place_shards(&pl->p[b->canon[w]]);
	gs.bias_home_shards = bias >= 0 ? place_shards(&pl->p[b->canon[bias]]) : 0;
	return gs;
}

/* The matmul after op when it is op's sibling (the same a, the same
 * shape of b and the same formats, in the same repeat) and unpinned:
 * built on op's choice, it reads op's copy of a (gemm_start), so op's
 * trials weigh the pair. NULL otherwise. */
static const MOp *next_sibling(const Builder *b, const MOp *op)
{
	const Model *m = b->m;
	if (op + 1 >= m->ops + m->nops)
		return NULL;
	const MOp *q = op + 1;
	const MTensor *wa = &m->t[op->in[1]], *wb = &m->t[q->in[1]];
	if (q->kind != OP_MATMUL || q->in[0] != op->in[0] || q->rep != op->rep || q->grid[0] || q->pinned ||
	    wa->rank != wb->rank || memcmp(wa->shape, wb->shape, (size_t)wa->rank * sizeof *wa->shape) ||
	    wa->dtype != wb->dtype || (op->in[2] >= 0) != (q->in[2] >= 0))
		return NULL;
	return q;
}

static void build_gemm_try(Builder *b, const MOp *op, const void *arg)
{
	const GemmTry *g = arg;
	planner_matmul_build(b, op, g->gs, g->c);
	if (g->sib)
		planner_matmul_build(b, g->sib, g->sib_gs, g->c);
}

static OpChoice gemm_choice(const Candidate *c)
{
	OpChoice k = { { c->grid[0], c->grid[1], c->grid[2], c->cast, c->staging, c->unpack, c->scatter } };
	return k;
}

static _Thread_local const MOp *try_sib;        /* the op being chosen's next sibling, or NULL */
static _Thread_local GemmShape try_sib_gs;

static void trial_one(Builder *b, const MOp *op, const GemmShape *gs, const int64_t *load, Bound *bound,
		      int64_t *lb, Candidate *c)
{
	GemmTry g = { gs, c, try_sib, &try_sib_gs };
	OpChoice k = gemm_choice(c);
	planner_trial_build(b, op, build_gemm_try, &g, &k, load, bound, lb, c);
}

/* The cycles objective without --explain: the short list's trials are
 * lowered without their replays (planner_trial_build's lb), which decides
 * everything but the exact cycles, and those rank fitting candidates
 * alone (candidate_cmp, by x_score). So the one candidate_cmp puts first
 * is found replaying only fitting candidates, in the order of the bounds
 * of their x_score, until the best so far ranks before the next bound;
 * when none fits, none. Returns its index. */
static int lazy_first(Builder *b, const MOp *op, const GemmShape *gs, const int64_t *load,
		      Candidate *sl, const int64_t *lb, int nsl)
{
	Objective o = b->o->objective;
	int *ord = xmalloc((size_t)(nsl + 1) * sizeof *ord), n = 0, best = -1;
	int64_t *sc = xmalloc((size_t)(nsl + 1) * sizeof *sc);   /* a bound of each x_score */
	for (int i = 0; i < nsl; i++)
		if (sl[i].fits) {
			int j = n++;            /* stable: by bound, then lowering order */
			sc[i] = planner_trial_score(b, op, lb[i], sl[i].x_table);
			for (; j > 0 && sc[ord[j - 1]] > sc[i]; j--)
				ord[j] = ord[j - 1];
			ord[j] = i;
		}
	for (int k = 0; k < n; k++) {
		int i = ord[k];
		if (best >= 0 && sc[i] > sl[best].x_score)
			break;                  /* nor any after it: ranks after the best */
		if (sl[i].x_cycles < 0)
			trial_one(b, op, gs, load, NULL, NULL, &sl[i]);
		if (best < 0 || candidate_cmp(&sl[i], &sl[best], o) < 0)
			best = i;
	}
	if (!n)                                 /* none fits: the cycles rank nothing */
		for (int i = 0; i < nsl; i++)
			if (best < 0 || candidate_cmp(&sl[i], &sl[best], o) < 0)
				best = i;
	free(ord);
	free(sc);
	return best;
}

#define SHORTLIST 3     /* candidates per staging (a's and the result's) re-scored exactly */
#define SHORTLIST_ROUNDS 4      /* more rounds while none of them fits */

#define PICKS (SHORTLIST * SHORTLIST_ROUNDS)     /* at most lowered per staging pair */

/* The short list's staging classes: spread is pack-once in pieces, and
 * the two share one class (the formula's three fastest of either), so a
 * GEMM lowers no more candidates than with two stagings; on every
 * shipped model this gives the same plans as a class of its own, in
 * 15% less time on the 27-layer SigLIP. */
static int sclass(Staging s) { return s == STAGING_SPREAD ? STAGING_PACK_ONCE : (int)s; }

static _Thread_local Objective rank_obj;     /* the two ownerships plan on two threads */
static _Thread_local int64_t rank_room;

/* The formula's order for the short list. Memory: by how far the
 * per-tile bound (its largest shards, with the table budget kept free)
 * passes what is left on the busiest tile (room), none first. Cycles: by
 * the formula's cycles alone; the bound is no key there, because the
 * fastest candidates pass it (it adds shards that are never live at once
 * and keeps the whole budget free), and as a first key it ranked them by
 * bytes, not cycles; a trial says whether they fit. Then tensor memory
 * plus estimated tables. A total order (candidate_cmp ends at the choice
 * itself). */
static int64_t over_room(const Candidate *c, int64_t room)
{
	return c->tile_bytes > room ? c->tile_bytes - room : 0;
}

static int est_cmp(const Candidate *a, const Candidate *b, int64_t room, Objective o)
{
	if (o == OBJ_CYCLES) {
		if (a->cycles != b->cycles)
			return a->cycles < b->cycles ? -1 : 1;
	} else {
		int64_t oa = over_room(a, room), ob = over_room(b, room);
		if (oa != ob)
			return oa < ob ? -1 : 1;
	}
	return candidate_cmp(a, b, OBJ_CAPACITY_TABLES);
}

static int by_estimate(const void *x, const void *y)
{
	return est_cmp(x, y, rank_room, rank_obj);
}

static int by_exact(const void *x, const void *y)
{
	return candidate_cmp(x, y, rank_obj);
}

/* The rounds below take each staging pair's candidates in the formula's
 * order, at most PICKS of them: only those are kept, per pair, best
 * first (the same short list as sorting them all). */
typedef struct {
	int64_t room;
	Objective obj;
	Candidate top[STAGING_COUNT][2][2][PICKS];      /* [staging][unpack][scatter] */
	int n[STAGING_COUNT][2][2];
} Picks;

/* The formula's first key alone (est_cmp's, memory): a candidate that
 * passes the room by more than the last kept of its pair (a full list)
 * would not be kept. */
static int picks_may(void *ctx, const Candidate *c)
{
	const Picks *k = ctx;
	if (k->n[sclass(c->staging)][c->unpack][c->scatter] < PICKS || k->obj == OBJ_CYCLES)
		return 1;
	const Candidate *last = &k->top[sclass(c->staging)][c->unpack][c->scatter][PICKS - 1];
	return over_room(c, k->room) <= over_room(last, k->room);
}

static void picks_add(void *ctx, const Candidate *c)
{
	Picks *k = ctx;
	Candidate *top = k->top[sclass(c->staging)][c->unpack][c->scatter];
	int *n = &k->n[sclass(c->staging)][c->unpack][c->scatter], pos = *n;
	if (pos == PICKS && est_cmp(c, &top[PICKS - 1], k->room, k->obj) >= 0)
		return;
	while (pos > 0 && est_cmp(c, &top[pos - 1], k->room, k->obj) < 0)
		pos--;
	if (*n < PICKS)
		(*n)++;
	memmove(&top[pos + 1], &top[pos], (size_t)(*n - 1 - pos) * sizeof *top);
	top[pos] = *c;
}

/* The memory and cycles objectives: the formula ranks every candidate and
 * prunes; the short list (SHORTLIST per staging) is lowered exactly and
 * the best fitting one is built. */
/* The descent's order of changes: the formula's estimate, then the
 * choice itself (so that the order does not depend on the order the
 * trials were made in). */
static int by_saving(const void *x, const void *y)
{
	const Candidate *a = x, *b = y;
	int64_t ka[8] = { a->cycles, a->grid[0], a->grid[1], a->grid[2], a->cast, a->staging, a->unpack, a->scatter };
	int64_t kb[8] = { b->cycles, b->grid[0], b->grid[1], b->grid[2], b->cast, b->staging, b->unpack, b->scatter };
	for (int i = 0; i < 8; i++)
		if (ka[i] != kb[i])
			return ka[i] < kb[i] ? -1 : 1;
	return 0;
}

/* ex's changes for the descent: of the short list sl (sl[0] the choice),
 * the trials that fit with a formula estimate below the choice's. Fit
 * and estimates are the same whether or not the trials were replayed. */
static void descent_changes(Explain *ex, const Candidate *sl, int nsl)
{
	ex->alt = xmalloc((size_t)nsl * sizeof *ex->alt);
	ex->nalt = 0;
	ex->choice_cycles = sl[0].cycles;
	for (int i = 1; i < nsl; i++)
		if (sl[i].fits && sl[i].cycles < sl[0].cycles)
			ex->alt[ex->nalt++] = sl[i];
	qsort(ex->alt, (size_t)ex->nalt, sizeof *ex->alt, by_saving);
	if (ex->nalt > DESCENT_KEEP)
		ex->nalt = DESCENT_KEEP;
}

static int matmul_trial_choose(Builder *b, const MOp *op, const GemmShape *gs, Explain *ex, Err *e)
{
	Candidate *all = NULL, best, *sl = NULL;
	int64_t nall = 0, T = b->mc->tiles;
	int nsl = 0, per[STAGING_COUNT][2][2] = { { { 0 } } };
	int64_t *load = xcalloc((size_t)T, sizeof *load);
	int opi = (int)(op - b->m->ops);

	planner_tile_load(b, opi, load);
	int64_t base = 0;                       /* the busiest tile's, as planner_base_load gives it */
	for (int64_t t = 0; t < T; t++)
		base = load[t] > base ? load[t] : base;
	Picks *pk = xcalloc(1, sizeof *pk);
	pk->room = machine_avail(b->mc) - base - b->mc->table_budget_bytes;
	pk->obj = b->o->objective;
	int64_t considered = planner_matmul_each(b, op, gs, picks_add, picks_may, pk);
	if (!considered) {                      /* no candidate: choose's error */
		free(pk);
		free(load);
		if (planner_matmul_choose(b, op, gs, &best, NULL, e))
			return -1;
		planner_matmul_build(b, op, gs, &best);
		OpChoice k = gemm_choice(&best);
		planner_trial_decide(b, op, &k);
		return 0;
	}
	all = xmalloc((size_t)STAGING_COUNT * 2 * 2 * PICKS * sizeof *all);
	for (int i = 0; i < STAGING_COUNT; i++)
		for (int j = 0; j < 2; j++)
			for (int k = 0; k < 2; k++) {
				memcpy(all + nall, pk->top[i][j][k], (size_t)pk->n[i][j][k] * sizeof *all);
				nall += pk->n[i][j][k];
			}
	free(pk);
	rank_room = machine_avail(b->mc) - base - b->mc->table_budget_bytes;
	rank_obj = b->o->objective;
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
	int lazy = b->o->objective == OBJ_CYCLES && (!ex || b->o->explain <= 0);
	int64_t *pick = xmalloc((size_t)(nall + 1) * sizeof *pick), *lb = NULL;
	Bound *bd = prune ? xmalloc((size_t)(nall + 1) * sizeof *bd) : NULL;
	rank_obj = b->o->objective;
	for (int round = 1; round <= SHORTLIST_ROUNDS && !fit; round++) {
		int64_t np = 0;
		for (int64_t i = 0; i < nall; i++) {
			if (tried[i] || per[sclass(all[i].staging)][all[i].unpack][all[i].scatter] >= round * SHORTLIST)
				continue;
			tried[i] = 1;
			per[sclass(all[i].staging)][all[i].unpack][all[i].scatter]++;
			pick[np++] = i;
		}
		if (!np)
			break;          /* every candidate tried */
		for (int64_t k = 0; prune && k < np; k++) {
			Candidate c = all[pick[k]];
			trial_one(b, op, gs, load, &bd[pick[k]], NULL, &c);
		}
		for (int64_t k = 1; prune && k < np; k++) {     /* stable: by bound, then the formula's order */
			int64_t x = pick[k], j = k;
			for (; j > 0 && (bd[pick[j - 1]].excess > bd[x].excess ||
					 (bd[pick[j - 1]].excess == bd[x].excess && bd[pick[j - 1]].bytes > bd[x].bytes)); j--)
				pick[j] = pick[j - 1];
			pick[j] = x;
		}
		for (int64_t k = 0; k < np; k++) {
			if (bi >= 0 && prune && planner_cannot_beat(bd[pick[k]], &sl[bi]))
				break;          /* nor any after it */
			sl = xrealloc(sl, (size_t)(nsl + 1) * sizeof *sl);
			sl[nsl] = all[pick[k]];
			if (lazy)
				lb = xrealloc(lb, (size_t)(nsl + 1) * sizeof *lb);
			trial_one(b, op, gs, load, NULL, lazy ? &lb[nsl] : NULL, &sl[nsl]);
			if (!lazy && sl[nsl].fits && (bi < 0 || by_exact(&sl[nsl], &sl[bi]) < 0))
				bi = nsl;
			fit |= sl[nsl].fits;
			nsl++;
		}
	}
	free(pick);
	free(bd);
	free(tried);
	if (lazy && nsl) {                      /* only sl[0], the one built, matters */
		int f = lazy_first(b, op, gs, load, sl, lb, nsl);
		Candidate t = sl[0];
		sl[0] = sl[f], sl[f] = t;
	} else {
		qsort(sl, (size_t)nsl, sizeof *sl, by_exact);
	}
	free(lb);
	if (ex) {
		int keep = b->o->explain < nsl ? b->o->explain : nsl;
		ex->op = xstrdup(op->name);
		ex->considered = considered;
		ex->fitting = 0;
		for (int i = 0; i < nsl; i++)
			ex->fitting += sl[i].fits;
		ex->best = xmalloc((size_t)(keep ? keep : 1) * sizeof *ex->best);
		memcpy(ex->best, sl, (size_t)keep * sizeof *sl);
		ex->nbest = keep;
		ex->avail = machine_avail(b->mc);
		ex->base = base;
		ex->exact = nsl;
		ex->price = b->price, ex->margin = b->margin;
		if (nsl && b->o->objective == OBJ_CYCLES)
			descent_changes(ex, sl, nsl);
	}
	planner_matmul_build(b, op, gs, nsl ? &sl[0] : &best);
	OpChoice k = gemm_choice(nsl ? &sl[0] : &best);
	planner_trial_decide(b, op, &k);
	free(sl);
	free(all);
	free(load);
	return 0;
}

/* A matmul's GEMM plan (planner_int.h): its pins checked, then chosen
 * by the formula (planner_matmul_choose) or, under the memory and cycles
 * objectives, by its trials, and built. */
int plan_matmul(Builder *b, const MOp *op, Explain *ex, Err *e)
{
	const Model *m = b->m;
	GemmShape gs = gemm_shape(b, op);
	Candidate c;
	if (op->grid[0] && gemm_grid_ok(&gs, op->grid, b->mc->tiles, e)) {
		char why[sizeof e->msg];
		memcpy(why, e->msg, sizeof why);
		return err_at(e, m->file, op->pin_line, op->pin_col, "pin for '%s': %s",
			      op->name, why);
	}
	if (op->grid[0] && op->staging == STAGING_SPREAD && gemm_stage_pieces(&gs, op->grid) == 1)
		return err_at(e, m->file, op->pin_line, op->pin_col,
			      "pin for '%s': staging spread needs grid cols > 1 that cut each K block's "
			      "strips into whole-strip pieces, none empty; grid [%lld, %lld, %lld] has K blocks "
			      "of %lld %s strips", op->name, (long long)op->grid[0], (long long)op->grid[1],
			      (long long)op->grid[2],
			      (long long)cdiv(cdiv(gs.k, fmt_mu(gs.fmt)), op->grid[1]), fmt_name(gs.fmt));
	if (b->o->objective >= OBJ_MEMORY) {
		try_sib = next_sibling(b, op);
		if (try_sib)
			try_sib_gs = gemm_shape(b, try_sib);
		int rc = matmul_trial_choose(b, op, &gs, ex, e);
		try_sib = NULL;
		return rc;
	}
	if (planner_matmul_choose(b, op, &gs, &c, ex, e))
		return -1;
	planner_matmul_build(b, op, &gs, &c);
	return 0;
}
